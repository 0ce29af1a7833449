//! Waiting for a Gemini: [`crate::wait::poll_until`] with the progress hook of the kgni
//! device (`Kgni::progress`, which follows the engine the node assembly reported), or one
//! handed to a [`crate::gni::Nic`] with [`crate::gni::Nic::set_progress`], failing with
//! `GNI_RC_TIMEOUT`. Without a hook (real hardware, or a threaded engine with nobody to help),
//! a wait spins a bounded number of polls and then yields the CPU.

use std::sync::Arc;
use std::time::Duration;

use firmware_spec::gemini::gni::ReturnCode;

use super::error::{GniError, Result};

pub use crate::wait::SPIN_POLLS;
pub use driver::Progress;

/// A progress hook: one call runs one unit of device (and driver) work.
pub type ProgressHook = Arc<dyn Progress>;

/// Call `f` until it returns `Some`, letting the device progress in between. `timeout:
/// None` waits for ever; otherwise `GNI_RC_TIMEOUT` when it passes. Errors from `f` end the
/// wait.
pub fn poll_until<T>(
    hook: Option<&ProgressHook>,
    timeout: Option<Duration>,
    f: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let progress = || match hook {
        Some(h) => h.progress(),
        None => {
            std::thread::yield_now();
            false
        }
    };
    let timed_out = || GniError::new(ReturnCode::Timeout, "wait timed out");
    crate::wait::poll_until(progress, timeout, timed_out, f)
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
