//! Fixtures of the fuzz targets: emulated NICs set up the way the crates' own tests set them
//! up (a sender and a target with event queues, command queues, PtlTEs, registered memory),
//! and a raw frame source on a spare fabric port.
//!
//! Building a fixture costs far more than running an input on it, so the targets build
//! theirs once per process (the driver targets' machines, with the driver's state, in
//! [`uapi`]) and put it back before every input ([`Fixture`],
//! [`run_reused`]): the engine with every device model is restored from a snapshot and the
//! host memory gets back only the chunks the previous input wrote. An input sees exactly
//! the state a fresh fixture has (the engine is deterministic), so a crash still replays from
//! its input alone; [`run_reused`] checks this on every [`FRESH_EVERY`]-th input by running
//! it again on a fixture built from scratch and comparing the digests of the two runs.

use std::cell::{Cell, RefCell};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::thread::LocalKey;

pub mod cassini;
pub mod gemini;
pub mod injector;
pub mod uapi;

/// A fixture that can be built once and put back in its initial state cheaply.
pub trait Fixture: Sized {
    /// What [`Fixture::restore`] needs.
    type Saved;
    /// A fresh fixture (panics if it cannot be built: a bug of the fixture, not a finding).
    fn build() -> Self;
    /// Record the state of a fixture just built.
    fn save(&self) -> Self::Saved;
    /// Put the fixture back in the state `saved` recorded.
    fn restore(&mut self, saved: &Self::Saved);
    /// A digest of the fixture's observable state (the engine's trace digest and time, the
    /// memory the targets look at), compared between a reused and a fresh fixture.
    fn digest(&self) -> u64;
}

/// A thread's fixture of type `F`, built on first use (`thread_local!`).
pub struct Reused<F: Fixture> {
    slot: RefCell<Option<(F, F::Saved)>>,
    runs: Cell<u64>,
}

impl<F: Fixture> Default for Reused<F> {
    fn default() -> Self {
        Reused {
            slot: RefCell::new(None),
            runs: Cell::new(0),
        }
    }
}

/// One input in [`FRESH_EVERY`] (and the first) is also run on a fixture built from
/// scratch, and both runs must end alike.
pub const FRESH_EVERY: u64 = 256;

/// The environment variable that overrides [`FRESH_EVERY`] (`1`: check every input, as a
/// replay of a whole corpus does to show that restored fixtures change no result).
pub const FRESH_EVERY_VAR: &str = "NICEMU_FUZZ_FRESH_EVERY";

fn fresh_every() -> u64 {
    static EVERY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        std::env::var(FRESH_EVERY_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(FRESH_EVERY)
    })
}

/// Run `input` through `run` on `key`'s fixture, put back in its initial state first.
/// `run` returns what the input made observable that the fixture does not hold (the events
/// it drained). On the first and every [`FRESH_EVERY`]-th input (or every n-th, n from
/// [`FRESH_EVERY_VAR`]) the same input also runs on a fixture built from scratch: the
/// results and the [`Fixture::digest`]s must be equal (an input's result does not depend
/// on the inputs that ran before it in the process).
pub fn run_reused<F: Fixture + 'static, R: PartialEq + std::fmt::Debug>(
    key: &'static LocalKey<Reused<F>>,
    input: &[u8],
    run: impl Fn(&mut F, &[u8]) -> R,
) {
    key.with(|r| {
        let n = r.runs.get();
        r.runs.set(n + 1);
        let mut slot = r.slot.borrow_mut();
        let (f, saved) = slot.get_or_insert_with(|| {
            let f = F::build();
            let saved = f.save();
            (f, saved)
        });
        f.restore(saved);
        let result = run(f, input);
        if n.is_multiple_of(fresh_every()) {
            let mut fresh = F::build();
            let again = run(&mut fresh, input);
            assert_eq!(
                (&result, f.digest()),
                (&again, fresh.digest()),
                "input {n} of this process ended otherwise on a fresh fixture: the restore \
                 left state behind"
            );
        }
    })
}

/// A digest of `v` (stable within a process: `DefaultHasher::new` has fixed keys).
pub fn digest(v: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// Reads little-endian values off the front of a fuzz input; past the end it yields zeros.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    /// The next byte (0 once the input is used up).
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    /// The next 2 bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// The next 4 bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | (u32::from(self.u16()) << 16)
    }
    /// The next 8 bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    /// Up to `n` bytes.
    pub fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    /// True once everything was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
