//! Fault sites in the driver, off unless a campaign turns them on.
//!
//! Linux lets a test make kernel calls fail on purpose (the fault-injection framework,
//! `Documentation/fault-injection/fault-injection.rst`: `fail_page_alloc`, `failslab`, each
//! with a `probability`); the calls then fail the way they fail under real memory pressure.
//! The driver model has one such site, where both real drivers meet memory pressure on a
//! user's request:
//!
//! | site | driver | what fails | what the caller gets |
//! |---|---|---|---|
//! | `pin_fail` | cxi, kgni | pinning a registration's pages (`get_user_pages`) | cxi `CXI_OP_ATU_MAP` / `ATU_UPDATE_MD`: `-ENOMEM`; kgni `MEM_REGISTER`: `GNI_RC_ERROR_NOMEM` |
//!
//! Each driver instance draws from its own seeded stream (the profile's seed mixed with the
//! device's NID or PE), only when the site's probability is above zero, so a run with the site
//! off draws nothing, and a seed replays as long as each node's requests come in the same
//! order (they do on the deterministic engine). The profile's counter, shared by every
//! instance made from it, counts the failures injected.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use emu_core::rng::SimRng;

/// The driver's fault profile (copied into every instance's configuration).
#[derive(Clone, Debug, Default)]
pub struct DriverFaults {
    /// Per registration request: pinning its pages fails.
    pub pin_fail: f64,
    /// Seed of the draws (mixed with each device's NID or PE).
    pub seed: u64,
    fired: Arc<AtomicU64>,
}

impl PartialEq for DriverFaults {
    /// Profiles are equal when they inject the same faults (the counter is not compared).
    fn eq(&self, other: &Self) -> bool {
        self.pin_fail.to_bits() == other.pin_fail.to_bits() && self.seed == other.seed
    }
}

impl Eq for DriverFaults {}

impl DriverFaults {
    /// Every site off.
    pub fn none() -> Self {
        DriverFaults::default()
    }

    /// A profile that fails pinning with probability `pin_fail`, drawing from `seed`.
    pub fn new(pin_fail: f64, seed: u64) -> Self {
        DriverFaults {
            pin_fail,
            seed,
            fired: Arc::default(),
        }
    }

    /// Whether any site can fire.
    pub fn any(&self) -> bool {
        self.pin_fail > 0.0
    }

    /// Pinning failures injected so far, over every instance made from this profile.
    pub fn pin_failures(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    /// The draws of one driver instance (device `unit`: its NID or PE).
    pub(crate) fn instance(&self, unit: u32) -> FaultDraws {
        FaultDraws {
            profile: self.clone(),
            rng: SimRng::new(self.seed ^ u64::from(unit).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        }
    }
}

/// One driver instance's fault draws (a clone continues the same stream, sharing the
/// profile's counter).
#[derive(Clone, Debug)]
pub(crate) struct FaultDraws {
    profile: DriverFaults,
    rng: SimRng,
}

impl FaultDraws {
    /// Whether pinning fails this time (`pin_fail`); draws only when the site is on.
    pub(crate) fn pin_fails(&mut self) -> bool {
        let p = self.profile.pin_fail;
        if p <= 0.0 || !self.rng.chance(p) {
            return false;
        }
        self.profile.fired.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(site = "pin_fail", "driver: injected a pinning failure");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_never_fires_and_on_fires_at_about_its_rate_and_replays() {
        let off = DriverFaults::none();
        let mut d = off.instance(1);
        assert!((0..1000).all(|_| !d.pin_fails()));
        assert_eq!(off.pin_failures(), 0);

        let on = DriverFaults::new(0.25, 42);
        let draw = |unit| {
            let mut d = on.instance(unit);
            (0..4000).map(|_| d.pin_fails()).collect::<Vec<_>>()
        };
        let a = draw(3);
        let n = a.iter().filter(|f| **f).count();
        assert!((800..1200).contains(&n), "{n} of 4000 at p = 0.25");
        assert_eq!(a, draw(3), "same seed and unit, same draws");
        let other = draw(4);
        assert_ne!(a, other, "another device draws differently");
        let m = other.iter().filter(|f| **f).count();
        assert_eq!(
            on.pin_failures() as usize,
            2 * n + m,
            "every injection counted"
        );
        assert_eq!(
            on.clone().pin_failures(),
            on.pin_failures(),
            "clones share the count"
        );
    }
}
