//! Wait objects of CQs, EQs and counters as libfabric asks for them (`wait_obj` of the open
//! attributes, `fi_control(FI_GETWAIT)`), and wait sets (`fi_wait_open`, `fi_wait`;
//! [`crate::wait`]).

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use std::time::Duration;

use super::children::Child;
use super::objects::{close_box, fabric_child, new_fid, obj};
use super::types::*;
use crate::wait::{Signal, WaitSet};

/// The wait object an object opened with `wait_obj` (and `wait_set`) needs.
pub(super) struct WaitObj {
    /// `FI_WAIT_FD`: a pipe.
    pub signal: Option<Arc<Signal>>,
    /// `FI_WAIT_SET`: the set to join once the object exists.
    pub set: Option<Arc<WaitSet>>,
}

/// The wait object of an object opened with `wait_obj`: none of its own for the waits done
/// inside the provider (`FI_WAIT_NONE`, `FI_WAIT_UNSPEC`, `FI_WAIT_MUTEX_COND`,
/// `FI_WAIT_YIELD`), a pipe for `FI_WAIT_FD`, the wait set `wait_set` for `FI_WAIT_SET`
/// (`-FI_EINVAL` if it is not one of ours).
///
/// # Safety
/// `wait_set` is null or a live fid.
pub(super) unsafe fn wait_object(wait_obj: c_int, wait_set: *mut c_void) -> Result<WaitObj, c_int> {
    let mut w = WaitObj {
        signal: None,
        set: None,
    };
    match wait_obj {
        FI_WAIT_NONE | FI_WAIT_UNSPEC | FI_WAIT_MUTEX_COND | FI_WAIT_YIELD => {}
        FI_WAIT_FD => {
            w.signal = Some(Arc::new(Signal::new().map_err(|_| -FI_ENOMEM)?));
        }
        FI_WAIT_SET => {
            // SAFETY: per the contract.
            let set =
                unsafe { obj::<WaitSetObj>(wait_set.cast(), &WAIT_FI_OPS) }.ok_or(-FI_EINVAL)?;
            w.set = Some(Arc::clone(&set.set));
        }
        _ => return Err(-FI_ENOSYS),
    }
    Ok(w)
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

#[repr(C)]
struct WaitSetObj {
    fid: fid_wait,
    set: Arc<WaitSet>,
    _fabric: Child,
}

static WAIT_FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close: Some(wait_close),
    bind: None,
    control: Some(wait_control),
    ops_open: None,
    tostr: None,
    ops_set: None,
};
static WAIT_OPS: fi_ops_wait = fi_ops_wait {
    size: size_of::<fi_ops_wait>(),
    wait: Some(wait_wait),
};

/// `fi_wait_open` (the fabric table's entry, typed with untyped pointers): a wait set
/// waited on inside the provider (`FI_WAIT_UNSPEC`, `FI_WAIT_MUTEX_COND`, `FI_WAIT_YIELD`);
/// `FI_WAIT_FD` sets: `-FI_ENOSYS`.
pub(super) unsafe extern "C" fn wait_open(
    fabric: *mut c_void,
    attr: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: libfabric passes the fabric it got from us.
    let Some(parent) = (unsafe { fabric_child(fabric.cast()) }) else {
        return -FI_EINVAL;
    };
    if out.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: `attr` is null or a valid `fi_wait_attr` (fi_wait_open contract).
    let (wait_obj, flags) = unsafe { attr.cast::<fi_wait_attr>().as_ref() }
        .map_or((FI_WAIT_UNSPEC, 0), |a| (a.wait_obj, a.flags));
    if flags != 0 {
        return -FI_EINVAL;
    }
    if ![FI_WAIT_UNSPEC, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD].contains(&wait_obj) {
        return -FI_ENOSYS;
    }
    let b = Box::new(WaitSetObj {
        fid: fid_wait {
            fid: new_fid(FI_CLASS_WAIT, std::ptr::null_mut(), &WAIT_FI_OPS),
            ops: &WAIT_OPS,
        },
        set: Arc::new(WaitSet::default()),
        _fabric: parent,
    });
    // SAFETY: `out` is valid for a write (checked non-null).
    unsafe { *out = Box::into_raw(b).cast() };
    0
}

unsafe extern "C" fn wait_close(f: *mut fid) -> c_int {
    // SAFETY: libfabric closes fids it got from us.
    unsafe { close_box::<WaitSetObj>(f, &WAIT_FI_OPS) }
}

/// A wait set has no descriptor (`FI_GETWAIT`: `-FI_ENOSYS`).
unsafe extern "C" fn wait_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: libfabric passes the fid it got from us.
    if unsafe { obj::<WaitSetObj>(f, &WAIT_FI_OPS) }.is_none() {
        return -FI_EINVAL;
    }
    // SAFETY: no signal: `arg` is not touched.
    unsafe { control(None, command, arg) }
}

/// `fi_wait`: 0 when a member has something, `-FI_ETIMEDOUT` after `timeout` ms (negative:
/// for ever).
unsafe extern "C" fn wait_wait(w: *mut fid_wait, timeout: c_int) -> c_int {
    // SAFETY: libfabric passes the wait set it got from us.
    let Some(s) = (unsafe { obj::<WaitSetObj>(w.cast(), &WAIT_FI_OPS) }) else {
        return -FI_EINVAL;
    };
    let timeout = u64::try_from(timeout).ok().map(Duration::from_millis);
    if s.set.wait(timeout) {
        0
    } else {
        -FI_ETIMEDOUT
    }
}
