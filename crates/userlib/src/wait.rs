//! Waiting for a device without knowing which engine drives it (or whether it is real).
//!
//! Everything a NIC produces for user space (events, CQ status and entries, CT write-backs,
//! mailbox slots, GET and AMO results) lands in host memory, so waiting is polling. What makes
//! the same loop correct on both engines is a progress call:
//!
//! - on the deterministic engine nothing happens unless the waiter runs the next device
//!   event, which the progress call does (and reports `true` while there is work);
//! - on the threaded engine the device runs by itself (inline in the thread that rang a
//!   doorbell, or on engine threads); the progress call runs a due item if any, else yields
//!   the CPU.
//!
//! So [`poll_until`] polls; after a progress call that did work it polls again at once, and
//! after one that did not it spins a bounded number of polls before calling it again (the
//! "bounded spin then yield" of the threaded engine). `cxi::wait` and `gni::wait` put their
//! device's progress call and timeout error around it.

use std::time::Duration;

use driver::clock::Instant;

/// Polls between two progress calls when the last one found nothing to do.
pub const SPIN_POLLS: u32 = 256;

/// Iterations between two looks at the clock.
const CLOCK_EVERY: u32 = 64;

/// Call `f` until it returns `Some`, calling `progress` in between. `timeout: None` waits for
/// ever; otherwise the wait fails with `timed_out()` once it has lasted that long. Errors from
/// `f` end the wait.
///
/// The clock is read only once the wait has lasted `CLOCK_EVERY` polls, and the timeout
/// counts from there: a wait that succeeds at once (the common case on the fast path) never
/// reads it.
pub fn poll_until<T, E>(
    mut progress: impl FnMut() -> bool,
    timeout: Option<Duration>,
    timed_out: impl FnOnce() -> E,
    mut f: impl FnMut() -> Result<Option<T>, E>,
) -> Result<T, E> {
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
        } else if !progress() {
            spins = SPIN_POLLS;
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(CLOCK_EVERY)
            && let Some(t) = timeout
        {
            let now = Instant::now();
            match deadline {
                None => deadline = Some(now.checked_add(t).unwrap_or(now)),
                Some(d) if now >= d => return Err(timed_out()),
                Some(_) => {}
            }
        }
    }
}
