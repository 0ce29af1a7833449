//! The clock that host software (driver, user libraries, MPI) reads for its timeouts: real
//! monotonic time, unless the thread runs inside a virtual-time runtime that installed the
//! deterministic engine's clock for the thread ([`install_virtual`]).
//!
//! Code written against [`Instant`] instead of `std::time::Instant` keeps its wall-clock
//! behaviour on the threaded engine and on real hardware, and counts *virtual* time when the
//! ranks of a job run as coroutines on the deterministic engine: there a real-time timeout
//! would depend on how fast the host runs (and on how many ranks share the thread), which
//! would break replay.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use crate::time::SimTime;

/// A source of virtual time (the deterministic engine's `now`).
pub type VirtualClock = Arc<dyn Fn() -> SimTime + Send + Sync>;

thread_local! {
    static VIRTUAL: RefCell<Option<VirtualClock>> = const { RefCell::new(None) };
}

/// Keeps a virtual clock installed on this thread; dropping it restores the previous clock.
#[must_use = "the virtual clock is uninstalled when the guard is dropped"]
pub struct VirtualClockGuard {
    prev: Option<VirtualClock>,
}

impl std::fmt::Debug for VirtualClockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VirtualClockGuard")
    }
}

impl Drop for VirtualClockGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        VIRTUAL.with(|v| *v.borrow_mut() = prev);
    }
}

/// Make [`Instant::now`] on this thread read `clock` until the guard is dropped.
pub fn install_virtual(clock: VirtualClock) -> VirtualClockGuard {
    let prev = VIRTUAL.with(|v| v.borrow_mut().replace(clock));
    VirtualClockGuard { prev }
}

/// Whether this thread reads a virtual clock.
pub fn is_virtual() -> bool {
    VIRTUAL.with(|v| v.borrow().is_some())
}

/// A point in time of the thread's clock: real (`std::time::Instant`) or virtual.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Instant {
    /// Real monotonic time.
    Real(std::time::Instant),
    /// Virtual time of the deterministic engine.
    Virtual(SimTime),
}

impl Instant {
    /// Now, on this thread's clock.
    pub fn now() -> Self {
        let v = VIRTUAL.with(|v| v.borrow().clone());
        match v {
            Some(clock) => Instant::Virtual(clock()),
            None => Instant::Real(std::time::Instant::now()),
        }
    }

    /// Time elapsed since `self` (zero if the clock changed kind in between).
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    /// `self - earlier`, or zero if `earlier` is later (or of another kind).
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        match (self, earlier) {
            (Instant::Real(a), Instant::Real(b)) => a.saturating_duration_since(b),
            (Instant::Virtual(a), Instant::Virtual(b)) => {
                Duration::from_nanos(a.as_ps().saturating_sub(b.as_ps()) / 1000)
            }
            _ => Duration::ZERO,
        }
    }

    /// `self + d`, if it can be represented.
    pub fn checked_add(&self, d: Duration) -> Option<Instant> {
        match self {
            Instant::Real(a) => a.checked_add(d).map(Instant::Real),
            Instant::Virtual(a) => {
                let ps = u64::try_from(d.as_nanos().checked_mul(1000)?).ok()?;
                a.as_ps()
                    .checked_add(ps)
                    .map(|t| Instant::Virtual(SimTime(t)))
            }
        }
    }
}

impl std::ops::Sub for Instant {
    type Output = Duration;
    /// Saturating, like [`Instant::saturating_duration_since`].
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// The threaded engine's clock: real time since the engine started, which stands still while
/// the emulator cannot keep up, so that the host's scheduler never turns into a hardware
/// timeout.
///
/// Two limits hold it (docs/emu-core-engines.md, "Time that the host cannot break"):
///
/// - **The engine's own queue.** The clock never runs more than a small slack past the
///   earliest timer (or delayed packet) the engine has not run yet
///   ([`JobClock::set_queue_limit`]). When the engine thread that runs timers does not get a
///   CPU, the clock waits for it: a retransmission scan that runs late sees the time it was
///   due at, not the time the host got round to it, so a NIC's retry budget counts
///   emulated time only.
/// - **The job's other processes** (one emulated node per process,
///   docs/fabric-between-processes.md, "Time"). The fabric between processes lets the
///   clock run [`JobClock::allow`]'s grace further each time every peer process has shown
///   that it runs. A peer that is stopped (SIGSTOP, a debugger), descheduled, swapped or
///   not started yet holds the clocks of the others, so no emulated timer and no timeout of
///   host software reading this clock ([`Instant`] with the clock installed) expires
///   meanwhile.
///
/// When a limit moves on, the clock goes on from where it stood: the real time it stood
/// still is not counted. Reads are lock free (two atomic loads besides the real clock); the
/// limits move under a lock.
#[derive(Debug)]
pub struct JobClock {
    start: std::time::Instant,
    /// `start` on the host's monotonic clock (nanoseconds), which every process of the host
    /// shares.
    start_mono: u64,
    /// Picoseconds of real time not counted (the clock stood still).
    offset: std::sync::atomic::AtomicU64,
    /// The clock does not pass this time (picoseconds): the lower of the two limits;
    /// `u64::MAX`: no limit.
    limit: std::sync::atomic::AtomicU64,
    /// The job's limit and the queue's limit (picoseconds, `u64::MAX`: none).
    limits: std::sync::Mutex<(u64, u64)>,
}

impl Default for JobClock {
    fn default() -> Self {
        JobClock::new()
    }
}

/// The host's monotonic clock (`CLOCK_MONOTONIC`, shared by every process of the host), in
/// nanoseconds.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0))
}

fn ps_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos())
        .unwrap_or(u64::MAX / 1000)
        .saturating_mul(1000)
}

impl JobClock {
    /// A clock starting at zero now, with no limit.
    pub fn new() -> Self {
        let start = std::time::Instant::now();
        JobClock {
            start,
            start_mono: monotonic_ns(),
            offset: std::sync::atomic::AtomicU64::new(0),
            limit: std::sync::atomic::AtomicU64::new(u64::MAX),
            limits: std::sync::Mutex::new((u64::MAX, u64::MAX)),
        }
    }

    fn real_ps(&self) -> u64 {
        ps_of(self.start.elapsed())
    }

    /// The time: real time since the start, less the time the clock stood still, and never
    /// past the limit.
    pub fn now(&self) -> SimTime {
        use std::sync::atomic::Ordering;
        // The limit first: a reader that sees a new limit also sees the offset stored
        // before it (see `set`), so a clock that stood still never jumps ahead.
        let limit = self.limit.load(Ordering::Acquire);
        let offset = self.offset.load(Ordering::Acquire);
        SimTime(self.real_ps().saturating_sub(offset).min(limit))
    }

    /// When time `t` of this clock falls due on the host's monotonic clock (nanoseconds), if
    /// the clock runs from now on: a time processes of one host can compare.
    pub fn host_time_of(&self, t: SimTime) -> u64 {
        let offset = self.offset.load(std::sync::atomic::Ordering::Acquire);
        self.start_mono
            .saturating_add(offset / 1000)
            .saturating_add(t.0 / 1000)
    }

    /// Whether the clock stands at its limit.
    pub fn held(&self) -> bool {
        use std::sync::atomic::Ordering;
        let limit = self.limit.load(Ordering::Acquire);
        limit != u64::MAX
            && self
                .real_ps()
                .saturating_sub(self.offset.load(Ordering::Acquire))
                >= limit
    }

    /// Real time the clock has stood still so far.
    pub fn held_for(&self) -> Duration {
        Duration::from_nanos(self.offset.load(std::sync::atomic::Ordering::Acquire) / 1000)
    }

    /// Change the limits under the lock: the real time the clock stood at the old limit is
    /// added to the time not counted, and the new limit is never below the time now (the
    /// clock never goes back).
    fn set(&self, f: impl FnOnce(&mut (u64, u64), u64)) {
        use std::sync::atomic::Ordering;
        let mut g = self.limits.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.limit.load(Ordering::Acquire);
        let real = self.real_ps();
        let mut offset = self.offset.load(Ordering::Acquire);
        let mut now = real.saturating_sub(offset);
        if now > old {
            offset = real.saturating_sub(old);
            now = old;
            self.offset.store(offset, Ordering::Release);
        }
        f(&mut g, now);
        let new = g.0.min(g.1);
        self.limit.store(
            if new == u64::MAX { new } else { new.max(now) },
            Ordering::Release,
        );
    }

    /// The job's limit: let the clock run until `grace` after its time now. If it stood at
    /// its limit, it goes on from there.
    pub fn allow(&self, grace: Duration) {
        self.set(|l, now| l.0 = now.saturating_add(ps_of(grace)).min(u64::MAX - 1));
    }

    /// No job limit any more (the clock goes on from where it stands).
    pub fn release(&self) {
        self.set(|l, _| l.0 = u64::MAX);
    }

    /// The engine's limit: the clock does not pass `t` (`None`: no limit), nor goes back
    /// below its time now.
    pub fn set_queue_limit(&self, t: Option<SimTime>) {
        let t = t.map_or(u64::MAX, |t| t.0.min(u64::MAX - 1));
        if self.limits.lock().unwrap_or_else(|e| e.into_inner()).1 == t {
            return;
        }
        self.set(|l, _| l.1 = t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn real_by_default_virtual_while_installed() {
        assert!(!is_virtual());
        assert!(matches!(Instant::now(), Instant::Real(_)));
        let t = Arc::new(AtomicU64::new(5_000_000));
        let clock = {
            let t = Arc::clone(&t);
            Arc::new(move || SimTime(t.load(Ordering::Relaxed))) as VirtualClock
        };
        {
            let _g = install_virtual(clock);
            assert!(is_virtual());
            let start = Instant::now();
            assert_eq!(start, Instant::Virtual(SimTime(5_000_000)));
            t.store(7_000_000, Ordering::Relaxed);
            assert_eq!(start.elapsed(), Duration::from_micros(2));
            let d = start.checked_add(Duration::from_micros(1)).unwrap();
            assert!(Instant::now() >= d);
            assert_eq!(Instant::now() - start, Duration::from_micros(2));
            assert!(start.checked_add(Duration::MAX).is_none());
        }
        assert!(!is_virtual());
        // An instant of one kind measured on the other clock reads as zero.
        assert_eq!(Instant::Virtual(SimTime(1)).elapsed(), Duration::ZERO);
    }

    #[test]
    fn a_job_clock_stands_still_at_its_limit_and_goes_on_from_there() {
        let c = JobClock::new();
        assert!(!c.held(), "no limit: real time");
        c.allow(Duration::from_millis(2));
        // Real time passes the limit (2 ms after the allowance): the clock stands at it.
        std::thread::sleep(Duration::from_millis(30));
        assert!(c.held());
        let stood = c.now();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(c.now(), stood, "it does not move while held");
        // Allowed again: it goes on from where it stood; the real time it stood still (at
        // least the 28 ms past the limit) is not counted.
        c.allow(Duration::from_secs(3600));
        assert!(!c.held());
        assert!(c.now() >= stood);
        assert!(
            c.held_for() >= Duration::from_millis(28),
            "{:?}",
            c.held_for()
        );
        c.release();
        assert!(c.now() >= stood);
    }

    #[test]
    fn the_lower_limit_holds_and_either_may_move_on() {
        let c = JobClock::new();
        c.allow(Duration::from_secs(3600));
        c.set_queue_limit(Some(SimTime::from_us(1)));
        std::thread::sleep(Duration::from_millis(5));
        let stood = c.now();
        assert!(c.held(), "the queue's limit holds it");
        // The queue moves on: the clock goes on from where it stood.
        c.set_queue_limit(None);
        assert!(!c.held());
        assert!(c.now() >= stood);
        assert!(c.held_for() >= Duration::from_millis(4));
        // A limit below the time now never takes the clock back.
        let before = c.now();
        c.set_queue_limit(Some(SimTime::ZERO));
        assert!(c.now() >= before);
    }
}
