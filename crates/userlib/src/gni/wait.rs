//! Waiting for the device without knowing which engine drives it.
//!
//! Everything the Gemini produces for user space (CQ entries, SMSG mailbox slots, GET and
//! AMO results) lands in host memory, so waiting is polling. What makes the same loop
//! correct on both engines is the progress hook of the kgni device (`Kgni::progress`, which
//! follows the engine the node assembly reported), or one handed to a [`crate::gni::Nic`]
//! with [`crate::gni::Nic::set_progress`]:
//!
//! - on the deterministic engine nothing happens unless the waiter runs the next device
//!   event (and the kgni interrupt-handler work), which the hook does;
//! - on the threaded engine the devices run by themselves; the hook runs a due item in the
//!   caller's thread if there is one, else yields the CPU.
//!
//! Without a hook (real hardware, or a threaded engine with nobody to help), a wait spins a
//! bounded number of polls and then yields the CPU.

use std::sync::Arc;
use std::time::Duration;

use driver::clock::Instant;

use firmware_spec::gemini::gni::ReturnCode;

use super::error::{GniError, Result};

pub use driver::Progress;

/// A progress hook: one call runs one unit of device (and driver) work.
pub type ProgressHook = Arc<dyn Progress>;

/// Polls between two progress calls (or CPU yields) when the last one found nothing to do.
pub const SPIN_POLLS: u32 = 256;

/// Iterations between two looks at the clock.
const CLOCK_EVERY: u32 = 64;

/// Call `f` until it returns `Some`, letting the device progress in between. `timeout:
/// None` waits for ever; otherwise `GNI_RC_TIMEOUT` when it passes. Errors from `f` end the
/// wait.
pub fn poll_until<T>(
    hook: Option<&ProgressHook>,
    timeout: Option<Duration>,
    mut f: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    let mut spins = 0u32;
    let mut n = 0u32;
    loop {
        if let Some(v) = f()? {
            return Ok(v);
        }
        if spins > 0 {
            spins -= 1;
            std::hint::spin_loop();
        } else {
            let did = match hook {
                Some(h) => h.progress(),
                None => {
                    std::thread::yield_now();
                    false
                }
            };
            if !did {
                spins = SPIN_POLLS;
            }
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(CLOCK_EVERY)
            && let Some(d) = deadline
            && Instant::now() >= d
        {
            return Err(GniError::new(ReturnCode::Timeout, "wait timed out"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Count(AtomicU32);

    impl Progress for Count {
        fn progress(&self) -> bool {
            self.0.fetch_add(1, Ordering::Relaxed) < 3
        }
    }

    #[test]
    fn polls_until_done_and_times_out() {
        let hook: ProgressHook = Arc::new(Count(AtomicU32::new(0)));
        let mut i = 0;
        let v = poll_until(Some(&hook), None, || {
            i += 1;
            Ok((i == 5).then_some(i))
        })
        .unwrap();
        assert_eq!(v, 5);
        let e = poll_until::<()>(None, Some(Duration::from_millis(5)), || Ok(None)).unwrap_err();
        assert_eq!(e.rc(), ReturnCode::Timeout);
        let e = poll_until::<()>(None, None, || Err(GniError::param("stop"))).unwrap_err();
        assert_eq!(e.rc(), ReturnCode::InvalidParam);
    }
}
