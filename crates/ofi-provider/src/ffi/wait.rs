//! Wait objects of CQs, EQs and counters as libfabric asks for them (`wait_obj` of the open
//! attributes, `fi_control(FI_GETWAIT)`; [`crate::wait`]).

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::types::*;
use crate::wait::Signal;

/// The signal an object opened with `wait_obj` needs: `None` for the waits done inside the
/// provider (`FI_WAIT_NONE`, `FI_WAIT_UNSPEC`, `FI_WAIT_MUTEX_COND`, `FI_WAIT_YIELD`), a
/// pipe for `FI_WAIT_FD`; wait sets: `-FI_ENOSYS`.
pub(super) fn signal_for(wait_obj: c_int) -> Result<Option<Arc<Signal>>, c_int> {
    match wait_obj {
        FI_WAIT_NONE | FI_WAIT_UNSPEC | FI_WAIT_MUTEX_COND | FI_WAIT_YIELD => Ok(None),
        FI_WAIT_FD => Signal::new()
            .map(|s| Some(Arc::new(s)))
            .map_err(|_| -FI_ENOMEM),
        _ => Err(-FI_ENOSYS),
    }
}

/// `fi_control` of an object with wait object `signal`: `FI_GETWAIT` stores the descriptor
/// of an `FI_WAIT_FD` object in the `int` at `arg`.
///
/// # Safety
/// `arg` is what `command` says (an `int *` for `FI_GETWAIT` of an `FI_WAIT_FD` object).
pub(super) unsafe fn control(
    signal: Option<&Arc<Signal>>,
    command: c_int,
    arg: *mut c_void,
) -> c_int {
    match (command, signal) {
        (FI_GETWAIT, Some(s)) => {
            if arg.is_null() {
                return -FI_EINVAL;
            }
            // SAFETY: per the contract.
            unsafe { *arg.cast::<c_int>() = s.fd() };
            0
        }
        _ => -FI_ENOSYS,
    }
}
