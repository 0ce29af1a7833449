//! A free list of packet data buffers ([`BufferPool`]), so that a device streaming many
//! packets reuses their buffers instead of allocating (and page-faulting) new ones.
//!
//! Each engine owns one pool and hands it to device handlers through
//! [`crate::engine::DeviceIo::packet_buffer`] / [`crate::engine::DeviceIo::recycle`]: the
//! sending device takes a buffer for a frame, the receiving device gives the frame's buffer
//! back once it has placed the payload. Without that a large transfer allocates every frame
//! anew and, once the frames are freed, the C allocator returns the memory to the kernel and
//! takes page faults to get it back for the next transfer.
//!
//! Two levels, as in magazine allocators: every thread keeps a few free buffers per size
//! class without any lock (a frame sent and received in one thread, the inline path, never
//! locks); beyond that, buffers move in batches to and from the pool's shared lists under
//! its mutex (a frame built by one thread and placed by another). Free buffers are plain
//! `Vec<u8>`s, so a thread's cache serves whichever pool it runs for.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Smallest pooled capacity class: 2^6 = 64 bytes.
const MIN_CLASS: u32 = 6;
/// Largest pooled capacity class: 2^16 = 64 KiB (larger buffers are not kept).
const MAX_CLASS: u32 = 16;
const CLASSES: usize = (MAX_CLASS - MIN_CLASS + 1) as usize;

/// Free buffers a thread keeps per class; half of them move to or from the shared lists at
/// once when the thread's list is full or empty.
const LOCAL_PER_CLASS: usize = 16;

/// Default limit of the bytes a pool's shared lists keep (capacity of the buffers).
pub const DEFAULT_POOL_BYTES: usize = 64 << 20;

/// Counters of a [`BufferPool`] (only the slow paths are counted: the fast path touches no
/// shared state).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers allocated because no free one was large enough.
    pub allocated: u64,
    /// Buffers let go: given back with a size the pool does not keep, or moved out of a
    /// thread's full list when the shared lists were at their limit.
    pub dropped: u64,
    /// Capacity in bytes of the buffers in the shared lists (threads' caches not counted).
    pub held_bytes: usize,
}

#[derive(Debug)]
struct Shared {
    /// Free buffers by capacity class: class `c` holds capacities in `[2^c, 2^(c+1))`.
    free: [Vec<Vec<u8>>; CLASSES],
    held_bytes: usize,
}

/// A thread's free buffers by class (shared by every pool the thread serves).
#[derive(Default)]
struct Local {
    free: [Vec<Vec<u8>>; CLASSES],
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

/// Free lists of `Vec<u8>` buffers by capacity class: per thread without a lock, then shared
/// under a mutex up to a given number of bytes.
#[derive(Debug)]
pub struct BufferPool {
    max_bytes: usize,
    shared: Mutex<Shared>,
    allocated: AtomicU64,
    dropped: AtomicU64,
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

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl BufferPool {
    /// A pool whose shared lists keep at most `max_bytes` of buffer capacity.
    pub fn new(max_bytes: usize) -> Self {
        BufferPool {
            max_bytes,
            shared: Mutex::new(Shared {
                free: Default::default(),
                held_bytes: 0,
            }),
            allocated: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // The free lists are valid after any panic (a push or a pop either happened or not).
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An empty buffer with a capacity of at least `cap` bytes: a kept one when one is large
    /// enough, else a new allocation (rounded up to a power of two, so it can be reused for
    /// any frame of its class).
    pub fn take(&self, cap: usize) -> Vec<u8> {
        let want = cap.max(1 << MIN_CLASS).checked_next_power_of_two();
        let Some((want, c)) = want.and_then(|w| Some((w, class_of(w)?))) else {
            bump(&self.allocated);
            return Vec::with_capacity(cap);
        };
        // Every buffer of class `c` has at least 2^c = want bytes.
        let got = LOCAL
            .try_with(|l| {
                let mut l = l.borrow_mut();
                let list = &mut l.free[c];
                if list.is_empty() {
                    // Refill half the thread's list from the shared one, under one lock.
                    let mut s = self.lock();
                    let at = s.free[c].len().saturating_sub(LOCAL_PER_CLASS / 2);
                    let bytes: usize = s.free[c][at..].iter().map(Vec::capacity).sum();
                    s.held_bytes -= bytes;
                    list.extend(s.free[c].drain(at..));
                }
                list.pop()
            })
            .ok()
            .flatten();
        match got {
            Some(mut b) => {
                b.clear();
                b
            }
            None => {
                bump(&self.allocated);
                Vec::with_capacity(want)
            }
        }
    }

    /// Keep `buf` for reuse (its contents are discarded), unless it is outside the pooled
    /// sizes. A thread whose own list of that class is full moves half of it to the shared
    /// list, which drops what would exceed the pool's limit.
    pub fn give(&self, buf: Vec<u8>) {
        let Some(c) = class_of(buf.capacity()) else {
            bump(&self.dropped);
            return;
        };
        let mut buf = Some(buf);
        let spill = LOCAL
            .try_with(|l| {
                let mut l = l.borrow_mut();
                let list = &mut l.free[c];
                let out = if list.len() >= LOCAL_PER_CLASS {
                    Some(list.drain(LOCAL_PER_CLASS / 2..).collect::<Vec<_>>())
                } else {
                    None
                };
                list.extend(buf.take());
                out
            })
            .ok()
            .flatten();
        // A thread that is exiting has no list: the buffer goes to the shared one.
        let spill: Vec<Vec<u8>> = match (spill, buf) {
            (None, None) => return,
            (Some(s), None) => s,
            (None, Some(b)) => vec![b],
            (Some(mut s), Some(b)) => {
                s.push(b);
                s
            }
        };
        let mut dropped = 0;
        let mut s = self.lock();
        for b in spill {
            if s.held_bytes + b.capacity() <= self.max_bytes {
                s.held_bytes += b.capacity();
                s.free[c].push(b);
            } else {
                dropped += 1;
            }
        }
        drop(s);
        self.dropped.fetch_add(dropped, Ordering::Relaxed);
    }

    /// The pool's counters.
    pub fn stats(&self) -> PoolStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PoolStats {
            allocated: g(&self.allocated),
            dropped: g(&self.dropped),
            held_bytes: self.lock().held_bytes,
        }
    }

    /// Drop every buffer of the shared lists and of the calling thread's cache.
    pub fn clear(&self) {
        let mut s = self.lock();
        for f in s.free.iter_mut() {
            f.clear();
        }
        s.held_bytes = 0;
        drop(s);
        let _ = LOCAL.try_with(|l| *l.borrow_mut() = Local::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `f` in a fresh thread, so no other test's buffers are in the thread's cache.
    fn fresh<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        std::thread::spawn(f).join().unwrap()
    }

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
        fresh(|| {
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
            assert_eq!(p.stats().allocated, 2);
        });
    }

    #[test]
    fn buffers_move_between_threads_through_the_shared_lists() {
        let p = std::sync::Arc::new(BufferPool::new(1 << 20));
        // One thread gives more than its cache holds; another takes them all back.
        let giver = p.clone();
        fresh(move || {
            for _ in 0..40 {
                giver.give(Vec::with_capacity(2048));
            }
        });
        assert!(p.stats().held_bytes >= (40 - LOCAL_PER_CLASS) * 2048);
        // Count fresh allocations, not addresses: a buffer the first thread kept in its own
        // cache is freed when the thread ends, and the allocator may hand that address out
        // again, which would look like reuse.
        let before = p.stats().allocated;
        let taker = p.clone();
        fresh(move || {
            let bufs: Vec<Vec<u8>> = (0..40).map(|_| taker.take(2048)).collect();
            assert!(bufs.iter().all(|b| b.capacity() >= 2048));
        });
        // Everything the first thread could not keep for itself came back: at most the
        // buffers it kept locally had to be allocated anew.
        let fresh_allocs = (p.stats().allocated - before) as usize;
        assert!(
            fresh_allocs <= LOCAL_PER_CLASS,
            "{fresh_allocs} fresh allocations"
        );
        assert_eq!(p.stats().held_bytes, 0, "the shared lists were emptied");
    }

    #[test]
    fn the_shared_lists_keep_at_most_their_limit_and_no_odd_sizes() {
        fresh(|| {
            let p = BufferPool::new(8192);
            for _ in 0..(LOCAL_PER_CLASS + 8) {
                p.give(Vec::with_capacity(4096));
            }
            p.give(Vec::with_capacity(16));
            p.give(Vec::with_capacity(1 << 20));
            let s = p.stats();
            assert_eq!(s.held_bytes, 8192, "two 4 KiB buffers fit the shared lists");
            // The two odd sizes, and the spilled buffers beyond the limit.
            assert_eq!(s.dropped, 2 + (LOCAL_PER_CLASS / 2 - 2) as u64, "{s:?}");
            // Huge requests are plain allocations.
            let big = p.take(1 << 20);
            assert!(big.capacity() >= 1 << 20);
            p.clear();
            assert_eq!(p.stats().held_bytes, 0);
            let before = p.stats().allocated;
            let again = p.take(4096);
            assert!(again.capacity() >= 4096);
            assert_eq!(p.stats().allocated, before + 1, "the caches were emptied");
        });
    }
}
