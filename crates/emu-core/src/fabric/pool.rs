//! A free list of packet data buffers ([`BufferPool`]), so that a device streaming many
//! packets reuses their buffers instead of allocating (and page-faulting) new ones.
//!
//! Each engine owns one pool and hands it to device handlers through
//! [`crate::engine::DeviceIo::packet_buffer`] / [`crate::engine::DeviceIo::recycle`]: the
//! sending device takes a buffer for a frame, the receiving device gives the frame's buffer
//! back once it has placed the payload. Without that a large transfer allocates every frame
//! anew and, once the frames are freed, the C allocator returns the memory to the kernel and
//! takes page faults to get it back for the next transfer.

use std::sync::{Mutex, MutexGuard};

/// Smallest pooled capacity class: 2^6 = 64 bytes.
const MIN_CLASS: u32 = 6;
/// Largest pooled capacity class: 2^16 = 64 KiB (larger buffers are not kept).
const MAX_CLASS: u32 = 16;
const CLASSES: usize = (MAX_CLASS - MIN_CLASS + 1) as usize;

/// Default limit of the bytes a pool keeps (capacity of the buffers it holds).
pub const DEFAULT_POOL_BYTES: usize = 64 << 20;

/// Counters of a [`BufferPool`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers handed out from the free list.
    pub reused: u64,
    /// Buffers allocated because no free one was large enough.
    pub allocated: u64,
    /// Buffers given back and kept.
    pub kept: u64,
    /// Buffers given back and dropped (too small, too large, or the pool was full).
    pub dropped: u64,
    /// Capacity in bytes of the buffers held now.
    pub held_bytes: usize,
}

#[derive(Debug)]
struct Inner {
    /// Free buffers by capacity class: class `c` holds capacities in `[2^c, 2^(c+1))`.
    free: [Vec<Vec<u8>>; CLASSES],
    stats: PoolStats,
}

/// A thread-safe free list of `Vec<u8>` buffers, by capacity class, holding at most a given
/// number of bytes.
#[derive(Debug)]
pub struct BufferPool {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

impl Default for BufferPool {
    fn default() -> Self {
        BufferPool::new(DEFAULT_POOL_BYTES)
    }
}

/// The class a capacity belongs to (floor of log2), if it is pooled at all.
fn class_of(cap: usize) -> Option<usize> {
    let c = cap.checked_ilog2()?;
    (MIN_CLASS..=MAX_CLASS)
        .contains(&c)
        .then(|| (c - MIN_CLASS) as usize)
}

impl BufferPool {
    /// A pool that keeps at most `max_bytes` of buffer capacity.
    pub fn new(max_bytes: usize) -> Self {
        BufferPool {
            max_bytes,
            inner: Mutex::new(Inner {
                free: Default::default(),
                stats: PoolStats::default(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The free lists are valid after any panic (a push or a pop either happened or not).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An empty buffer with a capacity of at least `cap` bytes: a kept one when one is large
    /// enough, else a new allocation (rounded up to a power of two, so it can be reused for
    /// any frame of its class).
    pub fn take(&self, cap: usize) -> Vec<u8> {
        let want = cap.max(1 << MIN_CLASS).checked_next_power_of_two();
        if let Some(want) = want
            && let Some(c) = class_of(want)
        {
            let mut g = self.lock();
            // Every buffer of class `c` has at least 2^c >= want bytes.
            if let Some(mut b) = g.free[c].pop() {
                g.stats.reused += 1;
                g.stats.held_bytes -= b.capacity();
                b.clear();
                return b;
            }
            g.stats.allocated += 1;
            return Vec::with_capacity(want);
        }
        self.lock().stats.allocated += 1;
        Vec::with_capacity(cap)
    }

    /// Keep `buf` for reuse (its contents are discarded), unless it is outside the pooled
    /// sizes or the pool already holds its limit.
    pub fn give(&self, buf: Vec<u8>) {
        let cap = buf.capacity();
        let mut g = self.lock();
        match class_of(cap) {
            Some(c) if g.stats.held_bytes + cap <= self.max_bytes => {
                g.stats.kept += 1;
                g.stats.held_bytes += cap;
                g.free[c].push(buf);
            }
            _ => {
                g.stats.dropped += 1;
                drop(g);
                drop(buf);
            }
        }
    }

    /// The pool's counters.
    pub fn stats(&self) -> PoolStats {
        self.lock().stats
    }

    /// Drop every kept buffer.
    pub fn clear(&self) {
        let mut g = self.lock();
        for f in g.free.iter_mut() {
            f.clear();
        }
        g.stats.held_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_64_bytes_to_64_kib() {
        assert_eq!(class_of(63), None);
        assert_eq!(class_of(64), Some(0));
        assert_eq!(class_of(127), Some(0));
        assert_eq!(class_of(128), Some(1));
        assert_eq!(class_of(65_536), Some(10));
        assert_eq!(class_of(131_071), Some(10));
        assert_eq!(class_of(131_072), None);
        assert_eq!(class_of(0), None);
    }

    #[test]
    fn buffers_are_reused_empty_and_large_enough() {
        let p = BufferPool::new(1 << 20);
        let mut a = p.take(2100);
        assert!(a.capacity() >= 2100);
        a.extend_from_slice(&[7u8; 2100]);
        let addr = a.as_ptr();
        p.give(a);
        let b = p.take(3000);
        assert!(b.is_empty());
        assert!(b.capacity() >= 3000);
        assert_eq!(b.as_ptr(), addr, "the 4 KiB buffer came back");
        // A request of a larger class does not get a smaller buffer.
        p.give(b);
        let c = p.take(5000);
        assert!(c.capacity() >= 5000);
        let s = p.stats();
        assert_eq!((s.reused, s.allocated, s.kept), (1, 2, 2));
        assert_eq!(s.held_bytes, 4096);
        drop(c);
    }

    #[test]
    fn the_pool_keeps_at_most_its_limit_and_no_odd_sizes() {
        let p = BufferPool::new(8192);
        for _ in 0..3 {
            p.give(Vec::with_capacity(4096));
        }
        p.give(Vec::with_capacity(16));
        p.give(Vec::with_capacity(1 << 20));
        let s = p.stats();
        assert_eq!((s.kept, s.dropped, s.held_bytes), (2, 3, 8192));
        // Huge requests are plain allocations.
        let big = p.take(1 << 20);
        assert!(big.capacity() >= 1 << 20);
        p.clear();
        assert_eq!(p.stats().held_bytes, 0);
        let again = p.take(100);
        assert!(again.capacity() >= 100);
    }
}
