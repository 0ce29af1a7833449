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
}
