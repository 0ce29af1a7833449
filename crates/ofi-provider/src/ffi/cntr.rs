//! Counter objects (`fi_cntr_open`, `fi_cntr_*`; [`crate::cntr`]) and their binding to
//! endpoints.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::Duration;

use super::children::Child;
use super::objects::{close_box, domain_child, ep_of, fail, new_fid, obj};
use super::types::*;
use super::wait;
use crate::cntr::{Cntr, WaitEnd};

#[repr(C)]
pub(super) struct CntrObj {
    fid: fid_cntr,
    pub(super) cntr: Arc<Cntr>,
    _domain: Child,
}

pub(super) static CNTR_FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close: Some(cntr_close),
    bind: Some(cntr_bind),
    control: Some(cntr_control),
    ops_open: None,
    tostr: None,
    ops_set: None,
};
static CNTR_OPS: fi_ops_cntr = fi_ops_cntr {
    size: size_of::<fi_ops_cntr>(),
    read: Some(cntr_read),
    readerr: Some(cntr_readerr),
    add: Some(cntr_add),
    set: Some(cntr_set),
    wait: Some(cntr_wait),
    adderr: Some(cntr_adderr),
    seterr: Some(cntr_seterr),
};

/// # Safety
/// `f` is null or a live fid.
pub(super) unsafe fn cntr_of<'a>(f: *const fid) -> Option<&'a Arc<Cntr>> {
    // SAFETY: per the contract.
    unsafe { obj::<CntrObj>(f, &CNTR_FI_OPS) }.map(|c| &c.cntr)
}

/// `fi_cntr_open` (the domain table's entry, typed as libfabric's with untyped pointers).
pub(super) unsafe extern "C" fn cntr_open(
    domain: *mut c_void,
    attr: *mut c_void,
    out: *mut *mut c_void,
    context: *mut c_void,
) -> c_int {
    // SAFETY: libfabric passes the domain it got from us.
    let Some(parent) = (unsafe { domain_child(domain.cast()) }) else {
        return -FI_EINVAL;
    };
    if out.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: `attr` is null or a valid `fi_cntr_attr` (fi_cntr_open contract).
    let (events, wait_obj, set, flags) = unsafe { attr.cast::<fi_cntr_attr>().as_ref() }.map_or(
        (FI_CNTR_EVENTS_COMP, FI_WAIT_NONE, std::ptr::null_mut(), 0),
        |a| (a.events, a.wait_obj, a.wait_set, a.flags),
    );
    if events != FI_CNTR_EVENTS_COMP || flags != 0 {
        return -FI_EINVAL;
    }
    // SAFETY: `set` is the caller's wait set pointer (null or a fid).
    let w = match unsafe { wait::wait_object(wait_obj, set) } {
        Ok(w) => w,
        Err(rc) => return rc,
    };
    let cntr = Arc::new(Cntr::with_signal(w.signal));
    if let Some(s) = w.set {
        s.join(crate::wait::Member::cntr(&cntr));
    }
    let b = Box::new(CntrObj {
        fid: fid_cntr {
            fid: new_fid(FI_CLASS_CNTR, context, &CNTR_FI_OPS),
            ops: &CNTR_OPS,
        },
        cntr,
        _domain: parent,
    });
    // SAFETY: `out` is valid for a write (checked non-null).
    unsafe { *out = Box::into_raw(b).cast() };
    0
}

unsafe extern "C" fn cntr_close(f: *mut fid) -> c_int {
    // SAFETY: libfabric closes fids it got from us.
    unsafe { close_box::<CntrObj>(f, &CNTR_FI_OPS) }
}

/// Counters are bound from the endpoint's side (`fi_ep_bind`); nothing binds to them.
unsafe extern "C" fn cntr_bind(_f: *mut fid, _b: *mut fid, _flags: u64) -> c_int {
    -FI_ENOSYS
}

unsafe extern "C" fn cntr_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: libfabric passes the fid it got from us.
    let Some(c) = (unsafe { cntr_of(f) }) else {
        return -FI_EINVAL;
    };
    // SAFETY: `arg` is what `command` says (fi_control contract).
    unsafe { wait::control(c.signal(), command, arg) }
}

macro_rules! with_cntr {
    ($c:expr, $bad:expr, |$n:ident| $body:expr) => {{
        // SAFETY: libfabric passes the counter it got from us.
        match unsafe { cntr_of($c.cast()) } {
            Some($n) => $body,
            None => $bad,
        }
    }};
}

/// `fi_cntr_read`; a foreign fid reads as 0 (the call has no error return).
unsafe extern "C" fn cntr_read(c: *mut fid_cntr) -> u64 {
    with_cntr!(c, 0, |n| n.read())
}

unsafe extern "C" fn cntr_readerr(c: *mut fid_cntr) -> u64 {
    with_cntr!(c, 0, |n| n.read_err())
}

unsafe extern "C" fn cntr_add(c: *mut fid_cntr, v: u64) -> c_int {
    with_cntr!(c, -FI_EINVAL, |n| {
        n.add(v);
        0
    })
}

unsafe extern "C" fn cntr_set(c: *mut fid_cntr, v: u64) -> c_int {
    with_cntr!(c, -FI_EINVAL, |n| {
        n.set(v);
        0
    })
}

unsafe extern "C" fn cntr_adderr(c: *mut fid_cntr, v: u64) -> c_int {
    with_cntr!(c, -FI_EINVAL, |n| {
        n.add_err(v);
        0
    })
}

unsafe extern "C" fn cntr_seterr(c: *mut fid_cntr, v: u64) -> c_int {
    with_cntr!(c, -FI_EINVAL, |n| {
        n.set_err(v);
        0
    })
}

/// `fi_cntr_wait`: `timeout` in ms, negative for ever.
unsafe extern "C" fn cntr_wait(c: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    let timeout = u64::try_from(timeout).ok().map(Duration::from_millis);
    with_cntr!(c, -FI_EINVAL, |n| match n.wait(threshold, timeout) {
        Ok(()) => 0,
        Err(WaitEnd::Error) => -FI_EAVAIL,
        Err(WaitEnd::TimedOut) => -FI_ETIMEDOUT,
    })
}

/// `fi_ep_bind(ep, cntr, flags)`: `None` when `bfid` is not a counter.
///
/// # Safety
/// `ep` and `bfid` are null or live fids.
pub(super) unsafe fn bind_to_ep(ep: *mut fid, bfid: *mut fid, flags: u64) -> Option<c_int> {
    // SAFETY: per the contract.
    let c = unsafe { cntr_of(bfid) }?;
    // SAFETY: per the contract.
    let Some(e) = (unsafe { ep_of(ep) }) else {
        return Some(-FI_EINVAL);
    };
    Some(e.bind_cntr(c, flags).map_or_else(|e| fail(&e), |()| 0))
}
