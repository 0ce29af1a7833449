//! The threaded engine's configuration ([`ThreadedConfig`], [`FabricTiming`]) and the fixed
//! sizes of its work loops.

use std::time::Duration;

use crate::time::SimDuration;

/// How the threaded engine applies the fabric's timing model.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum FabricTiming {
    /// Deliver every packet at once (inline); the real cost of the emulation is the latency.
    /// Fault sites (drop, duplicate, corrupt) still apply; reorder delays are ignored.
    #[default]
    Immediate,
    /// Honour the fabric's modelled arrival time: a packet due in the future is delivered by
    /// an engine thread when real time reaches it.
    Modeled,
}

/// Configuration of a [`Threaded`](super::Threaded) engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadedConfig {
    /// Engine threads serving timers and deferred work (0 is allowed: then only
    /// [`Progress::progress`](crate::engine::Progress::progress) calls run that work).
    pub workers: usize,
    /// Seed of the random streams (fault sites, device draws). Runs are not reproducible
    /// (thread timing is real), but the fault probabilities are honoured.
    pub seed: u64,
    /// How fabric timing is applied.
    pub timing: FabricTiming,
    /// Handler calls an MMIO access may run inline before the rest is deferred to the
    /// engine threads (0: deliver nothing inline).
    pub inline_budget: usize,
    /// Iterations an idle engine thread spins (checking for new work) before it blocks.
    pub spin: u32,
}

impl Default for ThreadedConfig {
    fn default() -> Self {
        ThreadedConfig {
            workers: 1,
            seed: 0,
            timing: FabricTiming::Immediate,
            inline_budget: 1024,
            spin: 0,
        }
    }
}

/// Handler calls an engine thread runs before it looks at the scheduler again.
pub(super) const WORKER_BUDGET: usize = 256;

/// Deferred items an engine thread takes from the scheduler at once (in order): one lock
/// round trip per batch instead of per packet when a burst was handed over.
pub(super) const WORKER_BATCH: usize = 64;

/// How long an engine thread waits before it looks again at a due timer held back by
/// packets in flight (`Shared::in_flight`).
pub(super) const TIMER_RECHECK: Duration = Duration::from_micros(50);

/// How far the engine's clock may run past the earliest timer (or delayed packet) not run
/// yet ([`JobClock::set_queue_limit`](crate::clock::JobClock::set_queue_limit)): when the
/// engine thread is not scheduled in time, emulated time waits for it instead of making
/// every timer it then runs look late.
pub(super) const QUEUE_SLACK: SimDuration = SimDuration::from_us(1_000);

/// How long an engine thread whose next timer waits for a held clock
/// ([`JobClock`](crate::clock::JobClock)) sleeps before it looks again.
pub(super) const CLOCK_HELD_RECHECK: Duration = Duration::from_millis(1);

/// Handler calls a work loop runs on one reading of the clock (see `Shared::run`).
pub(super) const CLOCK_EVERY: usize = 16;
