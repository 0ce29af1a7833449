//! The one seeded random source of a run. Every nondeterministic choice (packet ordering,
//! delays, faults) is drawn from it, so a seed replays a run bit for bit.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded, portable RNG (ChaCha8: the same stream on every platform).
#[derive(Clone, Debug)]
pub struct SimRng {
    seed: u64,
    inner: ChaCha8Rng,
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        SimRng {
            seed,
            inner: ChaCha8Rng::seed_from_u64(seed),
        }
    }
    /// The seed this stream started from (print it so a failing run can be replayed).
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn next_u64(&mut self) -> u64 {
        self.inner.random()
    }
    /// Uniform in `0..n` (`n` > 0; returns 0 when `n` == 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.inner.random_range(0..n)
        }
    }
    /// True with probability `p` (clamped to 0..=1). Draws nothing when `p` <= 0, so a run
    /// with a fault site switched off consumes the same stream as one without the site.
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            false
        } else if p >= 1.0 {
            true
        } else {
            self.inner.random_bool(p)
        }
    }
    /// A child stream derived deterministically from this one (e.g. one per device).
    pub fn fork(&mut self) -> SimRng {
        SimRng::new(self.next_u64())
    }
}
