//! Snapshots of a node's RAM ([`MemorySnapshot`]): the contents and page allocations at one
//! moment, and the restore that copies back only the chunks written since.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::alloc::PageAllocator;
use super::error::MemoryError;
use super::host::{HostMemory, lock};
use super::raw;
use super::written::{SNAPSHOT_CHUNK, Written};

/// The contents and page allocations of one [`HostMemory`] at one moment
/// ([`HostMemory::snapshot`]). Chunks that were zero are not stored.
pub struct MemorySnapshot {
    memory: usize,
    generation: u64,
    chunks: Vec<Option<Box<[u8]>>>,
    alloc: PageAllocator,
}

impl fmt::Debug for MemorySnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemorySnapshot")
            .field("chunks", &self.chunks.len())
            .field("stored", &self.chunks.iter().flatten().count())
            .finish_non_exhaustive()
    }
}

impl HostMemory {
    /// The RAM's contents and page allocations now, to go back to with
    /// [`HostMemory::restore`] (for instance a fuzz target's fixture, built once and
    /// restored before every input). Copies every chunk that is not zero (reading
    /// untouched RAM commits nothing), then tracks which [`SNAPSHOT_CHUNK`]s are written,
    /// at the cost of one atomic load and `or` per store, so that a restore copies back
    /// only those. Devices must be idle while it runs. A later snapshot makes this one
    /// stale (see [`HostMemory::restore`]).
    pub fn snapshot(&self) -> MemorySnapshot {
        let written = self
            .inner
            .written
            .get_or_init(|| Written::new(self.inner.size));
        let size = self.inner.size;
        let mut chunks = Vec::with_capacity(size.div_ceil(SNAPSHOT_CHUNK) as usize);
        let zero = [0u8; SNAPSHOT_CHUNK as usize];
        let mut b = [0u8; SNAPSHOT_CHUNK as usize];
        let mut at = 0u64;
        while at < size {
            let n = SNAPSHOT_CHUNK.min(size - at) as usize;
            let stored =
                raw::read(&self.inner.map, at as usize, &mut b[..n]) && b[..n] != zero[..n];
            chunks.push(stored.then(|| Box::<[u8]>::from(&b[..n])));
            at += SNAPSHOT_CHUNK;
        }
        for w in written.bits.iter() {
            w.store(0, Ordering::Relaxed);
        }
        let generation = written.generation.fetch_add(1, Ordering::AcqRel) + 1;
        MemorySnapshot {
            memory: Arc::as_ptr(&self.inner) as usize,
            generation,
            chunks,
            alloc: self.allocator().clone(),
        }
    }

    /// Put the RAM back as `snap` recorded it: every chunk written since the snapshot (or
    /// the previous restore) gets its recorded bytes back, ranges handed out by
    /// [`HostMemory::host_ptr`] are copied back whole, and the page allocator returns to
    /// its recorded state. Returns the number of chunks copied. Devices and other threads
    /// must not touch the RAM while it runs. Fails, changing nothing, for a snapshot of
    /// other RAM or one older than the latest [`HostMemory::snapshot`] of this RAM (its
    /// write tracking is relative to the latest one).
    pub fn restore(&self, snap: &MemorySnapshot) -> Result<usize, MemoryError> {
        if snap.memory != Arc::as_ptr(&self.inner) as usize {
            return Err(MemoryError::Snapshot("the snapshot is of other RAM"));
        }
        let Some(written) = self.inner.written.get() else {
            return Err(MemoryError::Snapshot("the RAM has no snapshot"));
        };
        if written.generation.load(Ordering::Acquire) != snap.generation {
            return Err(MemoryError::Snapshot(
                "a later snapshot of this RAM replaced this one",
            ));
        }
        for &(addr, len) in lock(&self.inner.exposed).iter() {
            written.mark(addr - self.inner.base, len);
        }
        let zero = [0u8; SNAPSHOT_CHUNK as usize];
        let mut copied = 0;
        for (i, w) in written.bits.iter().enumerate() {
            let mut bits = w.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let c = i * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let at = c as u64 * SNAPSHOT_CHUNK;
                let n = SNAPSHOT_CHUNK.min(self.inner.size - at) as usize;
                let src = snap
                    .chunks
                    .get(c)
                    .and_then(|b| b.as_deref())
                    .unwrap_or(&zero[..n]);
                raw::write(&self.inner.map, at as usize, src);
                copied += 1;
            }
        }
        *self.allocator() = snap.alloc.clone();
        Ok(copied)
    }
}
