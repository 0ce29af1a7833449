//! The threaded engine's counters: shared atomics ([`Counters`]), the tally of one work loop
//! added to them when it ends ([`Tally`]), and the count of inline loops running
//! ([`InlineLoop`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[derive(Default)]
pub(super) struct Counters {
    pub(super) events: AtomicU64,
    pub(super) packets: AtomicU64,
    pub(super) timers: AtomicU64,
    pub(super) mmio_reads: AtomicU64,
    pub(super) mmio_writes: AtomicU64,
    pub(super) interrupts: AtomicU64,
    pub(super) undeliverable: AtomicU64,
    pub(super) unattached_sends: AtomicU64,
    pub(super) inline_calls: AtomicU64,
    pub(super) deferred: AtomicU64,
}

/// Counts of one work loop, added to the shared [`Counters`] once when the loop ends (one
/// atomic add per counter and loop instead of several per handler call).
#[derive(Default)]
pub(super) struct Tally {
    pub(super) events: u64,
    pub(super) packets: u64,
    pub(super) timers: u64,
    pub(super) undeliverable: u64,
}

impl Tally {
    pub(super) fn flush(&self, c: &Counters, inline: bool) {
        let add = |a: &AtomicU64, n: u64| {
            if n > 0 {
                a.fetch_add(n, Ordering::Relaxed);
            }
        };
        add(&c.events, self.events);
        add(&c.packets, self.packets);
        add(&c.timers, self.timers);
        add(&c.undeliverable, self.undeliverable);
        if inline {
            add(&c.inline_calls, self.events);
        }
    }
}

/// Counts one inline work loop in `Shared::inline_loops` while it lives (also when a
/// device handler panics through it).
pub(super) struct InlineLoop<'a>(&'a AtomicUsize);

impl<'a> InlineLoop<'a> {
    pub(super) fn enter(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        InlineLoop(count)
    }
}

impl Drop for InlineLoop<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}
