//! Waiting for a Cassini: [`crate::wait::poll_until`] with the device's progress handle
//! ([`driver::cassini::CxiDevice::progress`]), failing with [`CxiError::Timeout`].

use std::time::Duration;

use driver::cassini::CxiDevice;

use super::error::{CxiError, Result};

pub use crate::wait::SPIN_POLLS;

/// Call `f` until it returns `Some`, letting the device progress in between. `timeout: None`
/// waits for ever. Errors from `f` end the wait.
pub fn poll_until<T>(
    dev: &CxiDevice,
    timeout: Option<Duration>,
    f: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    crate::wait::poll_until(|| dev.progress(), timeout, || CxiError::Timeout, f)
}
