//! Waiting for the device without knowing which engine drives it.
//!
//! Everything the device produces (events, CQ status, CT write-backs) lands in host memory,
//! so waiting is polling. The device's progress handle ([`driver::cassini::CxiDevice::progress`])
//! makes the same loop correct on both engines:
//!
//! - on the deterministic engine nothing happens unless the waiter runs the next device event,
//!   which `progress()` does (and reports `true` while there is work);
//! - on the threaded engine the device runs by itself (inline in the thread that rang a
//!   doorbell, or on engine threads); `progress()` runs a due item if any, else yields the CPU.
//!
//! So [`poll_until`] polls; after a `progress()` that did work it polls again at once, and
//! after one that did not it spins a bounded number of polls before calling it again (the
//! "bounded spin then yield" of the threaded engine).

use std::time::Duration;

use driver::clock::Instant;

use driver::cassini::CxiDevice;

use super::error::{CxiError, Result};

/// Polls between two `progress()` calls when the last one found nothing to do.
pub const SPIN_POLLS: u32 = 256;

/// Iterations between two looks at the clock.
const CLOCK_EVERY: u32 = 64;

/// Call `f` until it returns `Some`, letting the device progress in between. `timeout: None`
/// waits for ever. Errors from `f` end the wait.
pub fn poll_until<T>(
    dev: &CxiDevice,
    timeout: Option<Duration>,
    mut f: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    // The clock is read only once the wait has lasted `CLOCK_EVERY` polls: a wait that
    // succeeds at once (the common case on the fast path) never reads it.
    let mut deadline: Option<Instant> = None;
    let mut spins = 0u32;
    let mut n = 0u32;
    loop {
        if let Some(v) = f()? {
            return Ok(v);
        }
        if spins > 0 {
            spins -= 1;
            std::hint::spin_loop();
        } else if !dev.progress() {
            spins = SPIN_POLLS;
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(CLOCK_EVERY)
            && let Some(t) = timeout
        {
            let now = Instant::now();
            match deadline {
                None => deadline = Some(now.checked_add(t).unwrap_or(now)),
                Some(d) if now >= d => return Err(CxiError::Timeout),
                Some(_) => {}
            }
        }
    }
}
