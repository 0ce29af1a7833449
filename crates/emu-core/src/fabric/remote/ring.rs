//! A single-producer / single-consumer byte ring in memory shared by two processes.
//!
//! Layout (all offsets from the ring's base, which is 64-byte aligned):
//!
//! | offset | size | field | written by |
//! |---|---|---|---|
//! | 0 | 8 | `tail`: bytes ever pushed (release-stored after the record) | producer |
//! | 64 | 8 | `producer_beat`: heartbeat, bumped while the producer lives | producer |
//! | 72 | 4 | `producer_pid` | producer |
//! | 76 | 4 | `producer_state` ([`RingState`]) | producer |
//! | 128 | 8 | `head`: bytes ever consumed (release-stored after reading) | consumer |
//! | 136 | 8 | `settled`: bytes consumed whose frames the consumer's engine has handled (`<= head`) | consumer |
//! | 192 | `cap` | data | producer |
//!
//! `tail` and `head` live on their own cache lines and only grow; `tail - head` is the
//! number of bytes in use, so the ring is empty when they are equal and never needs a
//! "full" flag. A record is a little-endian `u32` length, four bytes of padding, then the
//! frame, padded to 8 bytes; it never wraps: when a record does not fit before the end of
//! the data area the producer writes the length [`WRAP`] and continues at offset 0.
//!
//! The protocol: the producer reads `head` (Acquire), writes the record's bytes with plain
//! stores into space the consumer has released, then stores the new `tail` (Release). The
//! consumer reads `tail` (Acquire), reads the record with plain loads, then stores the new
//! `head` (Release). The Release/Acquire pairs order the plain accesses exactly as they
//! would between two threads; processes mapping the same pages see the same ordering on
//! every platform Rust supports (the atomics are lock-free and address-based).
//!
//! The memory is reached through raw pointers only (never through `&mut`), so both sides
//! may hold the ring at once. The unit tests run it on heap memory between two threads,
//! which Miri checks (`cargo +nightly miri test -p emu-core --lib remote::ring`).

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes of the ring header before the data area.
pub const HEADER: usize = 192;
/// The length word that tells the consumer to continue at offset 0.
const WRAP: u32 = u32::MAX;
/// Bytes of a record's length word (plus padding).
const LEN_WORD: usize = 8;

const TAIL: usize = 0;
const PRODUCER_BEAT: usize = 64;
const PRODUCER_PID: usize = 72;
const PRODUCER_STATE: usize = 76;
const HEAD: usize = 128;
const SETTLED: usize = 136;

/// What the producer side of a ring is doing (its `producer_state` word).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum RingState {
    /// No producer attached yet.
    Empty = 0,
    /// A producer is attached.
    Attached = 1,
    /// The producer closed the ring cleanly (it sends nothing more).
    Closed = 2,
}

impl RingState {
    fn from_u32(v: u32) -> RingState {
        match v {
            1 => RingState::Attached,
            2 => RingState::Closed,
            _ => RingState::Empty,
        }
    }
}

/// Bytes a ring with `cap` data bytes takes (header included).
pub const fn ring_bytes(cap: usize) -> usize {
    HEADER + cap
}

/// The largest frame a ring of `cap` bytes accepts (a quarter of it, so a full-size record
/// always fits after at most one wrap marker).
pub const fn max_frame(cap: usize) -> usize {
    cap / 4 - LEN_WORD
}

fn padded(n: usize) -> usize {
    (n + 7) & !7
}

/// A ring over raw memory. Both [`Producer`] and [`Consumer`] hold one.
#[derive(Debug)]
struct Raw {
    base: *mut u8,
    cap: usize,
}

// SAFETY: the ring's memory is only accessed through atomics and through the SPSC
// protocol above, which never lets the two sides touch the same data bytes at once.
unsafe impl Send for Raw {}
// SAFETY: as for Send; shared references only reach the atomics.
unsafe impl Sync for Raw {}

impl Raw {
    /// # Safety
    /// `base` must be 64-byte aligned and valid for reads and writes of
    /// [`ring_bytes`]`(cap)` bytes for as long as the ring is used; `cap` must be a power of
    /// two of at least 64 bytes; at most one [`Producer`] and one [`Consumer`] may use it.
    unsafe fn new(base: *mut u8, cap: usize) -> Raw {
        debug_assert!(cap.is_power_of_two() && cap >= 64);
        debug_assert_eq!(base as usize % 64, 0);
        Raw { base, cap }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is one of the header offsets, 8-aligned inside the header that
        // `Raw::new`'s contract makes valid for the ring's lifetime; the word is only ever
        // accessed atomically.
        unsafe { AtomicU64::from_ptr(self.base.add(off).cast::<u64>()) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        // SAFETY: as in `u64_at` (4-aligned header word, only accessed atomically).
        unsafe { AtomicU32::from_ptr(self.base.add(off).cast::<u32>()) }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: the data area follows the header inside the valid region.
        unsafe { self.base.add(HEADER) }
    }
}

/// Initialise the header of a fresh ring (all zero: empty, no producer).
///
/// # Safety
/// As for [`Producer::new`]; no producer or consumer may use the ring yet.
pub unsafe fn init(base: *mut u8, cap: usize) {
    // SAFETY: forwarded contract.
    let r = unsafe { Raw::new(base, cap) };
    r.u64_at(TAIL).store(0, Ordering::Relaxed);
    r.u64_at(HEAD).store(0, Ordering::Relaxed);
    r.u64_at(PRODUCER_BEAT).store(0, Ordering::Relaxed);
    r.u32_at(PRODUCER_PID).store(0, Ordering::Relaxed);
    r.u32_at(PRODUCER_STATE)
        .store(RingState::Empty as u32, Ordering::Release);
}

/// The producer side.
#[derive(Debug)]
pub struct Producer {
    raw: Raw,
    tail: u64,
    /// The consumer's `head` as last read (refreshed only when the ring looks full).
    head: u64,
}

impl Producer {
    /// Attach as the producer of the ring at `base`, announcing `pid`.
    ///
    /// # Safety
    /// `base` must be 64-byte aligned and valid for reads and writes of
    /// [`ring_bytes`]`(cap)` bytes for the producer's lifetime, `cap` a power of two of at
    /// least 64, the header initialised by [`init`], and this the ring's only producer.
    pub unsafe fn new(base: *mut u8, cap: usize, pid: u32) -> Producer {
        // SAFETY: forwarded contract.
        let raw = unsafe { Raw::new(base, cap) };
        let tail = raw.u64_at(TAIL).load(Ordering::Acquire);
        let head = raw.u64_at(HEAD).load(Ordering::Acquire);
        raw.u32_at(PRODUCER_PID).store(pid, Ordering::Relaxed);
        raw.u32_at(PRODUCER_STATE)
            .store(RingState::Attached as u32, Ordering::Release);
        Producer { raw, tail, head }
    }

    /// The largest frame [`Producer::try_push`] accepts.
    pub fn max_frame(&self) -> usize {
        max_frame(self.raw.cap)
    }

    /// Push one frame made of `parts` (concatenated). Returns false when the ring has no
    /// room for it now (or the frame is larger than [`Producer::max_frame`]).
    pub fn try_push(&mut self, parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.max_frame() {
            return false;
        }
        let cap = self.raw.cap as u64;
        let rec = (LEN_WORD + padded(len)) as u64;
        let idx = self.tail & (cap - 1);
        let to_end = cap - idx;
        let need = if rec > to_end { to_end + rec } else { rec };
        if cap - (self.tail - self.head) < need {
            self.head = self.raw.u64_at(HEAD).load(Ordering::Acquire);
            if cap - (self.tail - self.head) < need {
                return false;
            }
        }
        let data = self.raw.data();
        let mut at = idx as usize;
        if rec > to_end {
            // SAFETY: `at + 4 <= cap` (records and the space to the end are multiples of 8)
            // and the bytes are free (between tail and head + cap).
            unsafe { std::ptr::copy_nonoverlapping(WRAP.to_le_bytes().as_ptr(), data.add(at), 4) };
            at = 0;
        }
        let word = (len as u32).to_le_bytes();
        // SAFETY: the record `[at, at + rec)` lies inside the data area (it fits before the
        // end, checked above) in space the consumer has released (`need` bytes free).
        unsafe {
            std::ptr::copy_nonoverlapping(word.as_ptr(), data.add(at), 4);
            let mut off = at + LEN_WORD;
            for p in parts {
                std::ptr::copy_nonoverlapping(p.as_ptr(), data.add(off), p.len());
                off += p.len();
            }
        }
        self.tail += need;
        self.raw.u64_at(TAIL).store(self.tail, Ordering::Release);
        true
    }

    /// Bytes pushed and not yet consumed (as far as this side knows).
    pub fn in_use(&mut self) -> u64 {
        self.head = self.raw.u64_at(HEAD).load(Ordering::Acquire);
        self.tail - self.head
    }

    /// Whether bytes pushed have not been declared handled by the consumer yet (see
    /// [`Consumer::settle`]): they are in the ring, or taken and still being handled.
    pub fn unsettled(&self) -> bool {
        self.raw.u64_at(SETTLED).load(Ordering::Acquire) != self.tail
    }

    /// Bump this producer's heartbeat.
    pub fn beat(&self) {
        self.raw
            .u64_at(PRODUCER_BEAT)
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Mark the ring closed (nothing more will be pushed).
    pub fn close(&self) {
        self.raw
            .u32_at(PRODUCER_STATE)
            .store(RingState::Closed as u32, Ordering::Release);
    }
}

/// The consumer side.
#[derive(Debug)]
pub struct Consumer {
    raw: Raw,
    head: u64,
}

impl Consumer {
    /// Attach as the consumer of the ring at `base`.
    ///
    /// # Safety
    /// As for [`Producer::new`], for the ring's only consumer.
    pub unsafe fn new(base: *mut u8, cap: usize) -> Consumer {
        // SAFETY: forwarded contract.
        let raw = unsafe { Raw::new(base, cap) };
        let head = raw.u64_at(HEAD).load(Ordering::Acquire);
        Consumer { raw, head }
    }

    /// Pop one frame, handing its bytes to `f` (they are only valid during the call).
    /// Returns `None` when the ring is empty.
    pub fn pop<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let tail = self.raw.u64_at(TAIL).load(Ordering::Acquire);
        if tail == self.head {
            return None;
        }
        let cap = self.raw.cap as u64;
        let data = self.raw.data();
        let mut idx = (self.head & (cap - 1)) as usize;
        let mut word = [0u8; 4];
        // SAFETY: `idx + 4 <= cap`; the producer published this record (tail > head).
        unsafe { std::ptr::copy_nonoverlapping(data.add(idx), word.as_mut_ptr(), 4) };
        let mut len = u32::from_le_bytes(word);
        let mut skipped = 0u64;
        if len == WRAP {
            skipped = cap - idx as u64;
            idx = 0;
            // SAFETY: as above, at offset 0 (the wrapped record was published with it).
            unsafe { std::ptr::copy_nonoverlapping(data, word.as_mut_ptr(), 4) };
            len = u32::from_le_bytes(word);
        }
        let len = (len as usize).min(max_frame(self.raw.cap));
        // SAFETY: the record's bytes `[idx + 8, idx + 8 + len)` lie inside the data area and
        // were published by the producer's Release store of `tail` (read with Acquire); the
        // producer does not write them again until `head` moves past them.
        let bytes = unsafe { std::slice::from_raw_parts(data.add(idx + LEN_WORD), len) };
        let r = f(bytes);
        self.head += skipped + (LEN_WORD + padded(len)) as u64;
        self.raw.u64_at(HEAD).store(self.head, Ordering::Release);
        Some(r)
    }

    /// Declare every frame popped so far handled: the producer stops counting them as
    /// in flight ([`Producer::unsettled`]).
    pub fn settle(&self) {
        self.raw.u64_at(SETTLED).store(self.head, Ordering::Release);
    }

    /// Whether frames wait to be popped.
    pub fn pending(&self) -> bool {
        self.raw.u64_at(TAIL).load(Ordering::Acquire) != self.head
    }

    /// The producer's heartbeat counter.
    pub fn producer_beat(&self) -> u64 {
        self.raw.u64_at(PRODUCER_BEAT).load(Ordering::Relaxed)
    }

    /// The producer's pid (0 before one attached).
    pub fn producer_pid(&self) -> u32 {
        self.raw.u32_at(PRODUCER_PID).load(Ordering::Relaxed)
    }

    /// What the producer is doing.
    pub fn producer_state(&self) -> RingState {
        RingState::from_u32(self.raw.u32_at(PRODUCER_STATE).load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 64-byte aligned heap memory for a ring.
    #[repr(C, align(64))]
    struct Line([u8; 64]);

    fn memory(cap: usize) -> Vec<Line> {
        (0..ring_bytes(cap).div_ceil(64))
            .map(|_| Line([0; 64]))
            .collect()
    }

    #[test]
    fn frames_come_out_in_order_across_wraps() {
        let cap = 256;
        let mut mem = memory(cap);
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: `mem` outlives both sides, is aligned and large enough; one of each side.
        let (mut p, mut c) = unsafe {
            init(base, cap);
            (Producer::new(base, cap, 7), Consumer::new(base, cap))
        };
        assert_eq!(c.producer_pid(), 7);
        assert_eq!(c.producer_state(), RingState::Attached);
        assert_eq!(c.pop(|b| b.to_vec()), None);
        let mut next_in = 0u8;
        let mut next_out = 0u8;
        for round in 0..200usize {
            let len = (round * 7) % (max_frame(cap) + 1);
            let frame = vec![next_in; len];
            if p.try_push(&[&frame[..len / 2], &frame[len / 2..]]) {
                next_in = next_in.wrapping_add(1);
            }
            if round % 3 == 0 {
                while let Some(v) = c.pop(|b| b.to_vec()) {
                    assert!(v.iter().all(|&x| x == next_out), "round {round}");
                    next_out = next_out.wrapping_add(1);
                }
            }
        }
        while let Some(v) = c.pop(|b| b.to_vec()) {
            assert!(v.iter().all(|&x| x == next_out));
            next_out = next_out.wrapping_add(1);
        }
        assert_eq!(next_in, next_out);
        assert!(next_in > 50, "only {next_in} frames went through");
        assert_eq!(p.in_use(), 0);
        // Too large for the ring: refused, not truncated.
        assert!(!p.try_push(&[&vec![0; max_frame(cap) + 1]]));
        p.close();
        assert_eq!(c.producer_state(), RingState::Closed);
    }

    #[test]
    fn a_full_ring_refuses_until_the_consumer_catches_up() {
        let cap = 128;
        let mut mem = memory(cap);
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: as above.
        let (mut p, mut c) = unsafe {
            init(base, cap);
            (Producer::new(base, cap, 1), Consumer::new(base, cap))
        };
        let mut pushed = 0;
        while p.try_push(&[&[1u8; 16]]) {
            pushed += 1;
        }
        assert_eq!(pushed, cap / (LEN_WORD + 16));
        assert_eq!(c.pop(|b| b.len()), Some(16));
        assert!(p.try_push(&[&[2u8; 16]]));
        assert!(!p.try_push(&[&[2u8; 16]]));
    }

    #[test]
    fn frames_stay_unsettled_until_the_consumer_settles_them() {
        let cap = 256;
        let mut mem = memory(cap);
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: as above.
        let (mut p, mut c) = unsafe {
            init(base, cap);
            (Producer::new(base, cap, 1), Consumer::new(base, cap))
        };
        assert!(!p.unsettled());
        assert!(p.try_push(&[&[1u8; 16]]));
        assert!(p.try_push(&[&[2u8; 16]]));
        assert!(p.unsettled());
        assert_eq!(c.pop(|b| b[0]), Some(1));
        c.settle();
        assert!(p.unsettled(), "one frame still in the ring");
        assert_eq!(c.pop(|b| b[0]), Some(2));
        assert_eq!(p.in_use(), 0);
        assert!(p.unsettled(), "taken, not yet declared handled");
        c.settle();
        assert!(!p.unsettled());
    }

    #[test]
    fn two_threads_move_every_frame_intact() {
        let cap = 1024;
        let mut mem = memory(cap);
        let base = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: as above; the scope joins both threads before `mem` is dropped.
        let (mut p, mut c) = unsafe {
            init(base, cap);
            (Producer::new(base, cap, 1), Consumer::new(base, cap))
        };
        let n: u32 = if cfg!(miri) { 200 } else { 20_000 };
        std::thread::scope(|s| {
            s.spawn(move || {
                for i in 0..n {
                    let len = (i % 97) as usize;
                    let mut f = i.to_le_bytes().to_vec();
                    f.extend((0..len).map(|k| (k as u32 ^ i) as u8));
                    while !p.try_push(&[&f]) {
                        std::thread::yield_now();
                    }
                }
                p.close();
            });
            s.spawn(move || {
                let mut i = 0u32;
                while i < n {
                    match c.pop(|b| b.to_vec()) {
                        Some(f) => {
                            assert_eq!(f[..4], i.to_le_bytes());
                            let len = (i % 97) as usize;
                            assert_eq!(f.len(), 4 + len);
                            for (k, &x) in f[4..].iter().enumerate() {
                                assert_eq!(x, (k as u32 ^ i) as u8);
                            }
                            i += 1;
                        }
                        None => std::thread::yield_now(),
                    }
                }
            });
        });
    }
}
