//! Write tracking behind [`HostMemory::snapshot`](super::HostMemory::snapshot): a bit per
//! chunk of RAM written since the latest snapshot or restore.

use std::sync::atomic::{AtomicU64, Ordering};

use super::alloc::PAGE_SIZE;

/// Bytes per chunk of the write tracking behind [`HostMemory::snapshot`]: a restore copies
/// back whole chunks that were written since.
pub const SNAPSHOT_CHUNK: u64 = PAGE_SIZE;

/// Which [`SNAPSHOT_CHUNK`]s were written since the latest snapshot or restore.
pub(super) struct Written {
    /// One bit per chunk.
    pub(super) bits: Box<[AtomicU64]>,
    /// Number of the latest snapshot (the bits are relative to it).
    pub(super) generation: AtomicU64,
}

impl Written {
    pub(super) fn new(size: u64) -> Self {
        let chunks = size.div_ceil(SNAPSHOT_CHUNK);
        Written {
            bits: (0..chunks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            generation: AtomicU64::new(0),
        }
    }

    /// Mark the chunks of `[off, off + len)` written (the range is inside the RAM).
    pub(super) fn mark(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = off / SNAPSHOT_CHUNK;
        let last = (off + len - 1) / SNAPSHOT_CHUNK;
        for c in first..=last {
            if let Some(w) = self.bits.get((c / 64) as usize) {
                w.fetch_or(1 << (c % 64), Ordering::Relaxed);
            }
        }
    }
}
