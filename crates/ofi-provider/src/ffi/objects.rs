//! The libfabric objects: fabric, domain, address vector, completion queue and endpoint.
//! Each is a `#[repr(C)]` box whose first field is the libfabric `fid_*` structure, so the
//! `fid` pointer libfabric hands back is the box's address; its `ops` pointer (one static
//! table per class) tells the class before any cast.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void};
use std::ptr;
use std::sync::Arc;

use super::children::{Child, Children};
use super::mem::UserBuf;
use super::types::*;
use crate::av::{ADDR_LEN, Av, straddr};
use crate::cq::{Cq, Entry, Read};
use crate::ep::{CqBinding, Ep, INJECT_SIZE, Send};
use crate::eq::{self, Eq};
use crate::error::Error;
use crate::nic::{self, Nic};

const FI_ENOPROTOOPT: c_int = libc::ENOPROTOOPT;

pub(super) fn fail(e: &Error) -> c_int {
    -e.errno()
}

/// The object behind `f` if its class table is `ops`.
///
/// # Safety
/// `f` is null or a `fid` libfabric got from this provider or another one (the `ops` check
/// rejects the latter), and the object is not closed.
pub(super) unsafe fn obj<'a, T>(f: *const fid, ops: &'static fi_ops) -> Option<&'a T> {
    // SAFETY: per the contract `f` is null or a live fid; reading its ops pointer is valid.
    let f = unsafe { f.as_ref()? };
    if !ptr::eq(f.ops, ops) {
        return None;
    }
    // SAFETY: only this module creates fids with `ops`, always as the first field of a `T`
    // box, so the fid's address is the `T`'s.
    Some(unsafe { &*(f as *const fid).cast::<T>() })
}

/// Free the `T` box behind `f` (a `close` of class table `ops`).
///
/// # Safety
/// As [`obj`]; the object is not used again.
pub(super) unsafe fn close_box<T>(f: *mut fid, ops: &'static fi_ops) -> c_int {
    // SAFETY: as the contract says.
    if unsafe { obj::<T>(f, ops) }.is_none() {
        return -FI_EINVAL;
    }
    // SAFETY: the fid is the address of a `Box<T>` leaked by this module, closed once.
    drop(unsafe { Box::from_raw(f.cast::<T>()) });
    0
}

pub(super) fn new_fid(class: usize, context: *mut c_void, ops: &'static fi_ops) -> fid {
    fid {
        fclass: class,
        context,
        ops,
    }
}

pub(super) unsafe extern "C" fn no_bind(_f: *mut fid, _b: *mut fid, _flags: u64) -> c_int {
    -FI_ENOSYS
}

/// Wait sets and poll sets are not provided: their `open` calls fail with `-FI_ENOSYS`
/// (libfabric's inline `fi_wait_open` & co. call through the table unchecked, so a null
/// entry would crash the caller).
unsafe extern "C" fn open_refused3(
    _owner: *mut c_void,
    _attr: *mut c_void,
    _out: *mut *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

pub(super) unsafe extern "C" fn no_control(
    _f: *mut fid,
    _command: c_int,
    _arg: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

const fn base_ops(close: unsafe extern "C" fn(*mut fid) -> c_int) -> fi_ops {
    fi_ops {
        size: size_of::<fi_ops>(),
        close: Some(close),
        bind: Some(no_bind),
        control: Some(no_control),
        ops_open: None,
        tostr: None,
        ops_set: None,
    }
}

// ---------------------------------------------------------------------------------------
// Fabric

#[repr(C)]
pub(super) struct FabricObj {
    fid: fid_fabric,
    /// Its domains, EQs and wait sets.
    children: Children,
}

/// A place among the children of fabric `f`, for an object opened on it; `None` when `f`
/// is not a fabric of this provider.
///
/// # Safety
/// `f` is null or a live fid.
pub(super) unsafe fn fabric_child(f: *const fid) -> Option<Child> {
    // SAFETY: per the contract.
    unsafe { obj::<FabricObj>(f, &FABRIC_FI_OPS) }.map(|x| x.children.open())
}

/// A place among the children of domain `f`, for an object opened on it.
///
/// # Safety
/// `f` is null or a live fid.
pub(super) unsafe fn domain_child(f: *const fid) -> Option<Child> {
    // SAFETY: per the contract.
    unsafe { obj::<DomainObj>(f, &DOMAIN_FI_OPS) }.map(|x| x.children.open())
}

/// Close the parent `T` behind `f` unless an object opened on it is still open
/// (`-FI_EBUSY`).
///
/// # Safety
/// As [`close_box`].
unsafe fn close_parent<T>(
    f: *mut fid,
    ops: &'static fi_ops,
    children: impl Fn(&T) -> &Children,
) -> c_int {
    // SAFETY: per the contract.
    match unsafe { obj::<T>(f, ops) } {
        Some(t) if children(t).busy() => -FI_EBUSY,
        // SAFETY: per the contract.
        _ => unsafe { close_box::<T>(f, ops) },
    }
}

pub(super) static FABRIC_FI_OPS: fi_ops = base_ops(fabric_close);
static FABRIC_OPS: fi_ops_fabric = fi_ops_fabric {
    size: size_of::<fi_ops_fabric>(),
    domain: Some(domain_open),
    passive_ep: None,
    eq_open: Some(eq_open),
    wait_open: Some(super::wait::wait_open),
    trywait: Some(trywait),
    domain2: None,
};

pub(super) fn new_fabric(context: *mut c_void) -> *mut fid_fabric {
    let b = Box::new(FabricObj {
        fid: fid_fabric {
            fid: new_fid(FI_CLASS_FABRIC, context, &FABRIC_FI_OPS),
            ops: &FABRIC_OPS,
            api_version: fi_version(1, 17),
        },
        children: Children::default(),
    });
    Box::into_raw(b).cast()
}

unsafe extern "C" fn fabric_close(f: *mut fid) -> c_int {
    // SAFETY: libfabric closes fids it got from us.
    unsafe { close_parent::<FabricObj>(f, &FABRIC_FI_OPS, |x| &x.children) }
}

// ---------------------------------------------------------------------------------------
// Event queue

#[repr(C)]
struct EqObj {
    fid: fid_eq,
    eq: Arc<Eq>,
    _fabric: Child,
}

static EQ_FI_OPS: fi_ops = fi_ops {
    control: Some(eq_control),
    ..base_ops(eq_close)
};
static EQ_OPS: fi_ops_eq = fi_ops_eq {
    size: size_of::<fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
};

/// # Safety
/// `f` is null or a live fid.
unsafe fn eq_of<'a>(f: *const fid) -> Option<&'a Eq> {
    // SAFETY: per the contract.
    unsafe { obj::<EqObj>(f, &EQ_FI_OPS) }.map(|e| &*e.eq)
}

unsafe extern "C" fn eq_open(
    fabric: *mut fid_fabric,
    attr: *mut fi_eq_attr,
    out: *mut *mut fid_eq,
    context: *mut c_void,
) -> c_int {
    // SAFETY: libfabric passes the fabric it got from us.
    let Some(parent) = (unsafe { fabric_child(fabric.cast()) }) else {
        return -FI_EINVAL;
    };
    if out.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: `attr` is null or valid.
    let (size, wait, set) = unsafe { attr.as_ref() }
        .map_or((0, FI_WAIT_NONE, ptr::null_mut()), |a| {
            (a.size, a.wait_obj, a.wait_set)
        });
    // A blocking read waits on a condition variable: FI_WAIT_UNSPEC, FI_WAIT_MUTEX_COND
    // (and FI_WAIT_YIELD, which asks for less); FI_WAIT_FD adds a descriptor, FI_WAIT_SET
    // joins a wait set (`crate::wait`).
    // SAFETY: `set` is the caller's wait set pointer (null or a fid).
    let w = match unsafe { super::wait::wait_object(wait, set) } {
        Ok(w) => w,
        Err(rc) => return rc,
    };
    let eq = Arc::new(Eq::with_signal(size, w.signal));
    if let Some(s) = w.set {
        s.join(crate::wait::Member::Eq(Arc::downgrade(&eq)));
    }
    let b = Box::new(EqObj {
        fid: fid_eq {
            fid: new_fid(FI_CLASS_EQ, context, &EQ_FI_OPS),
            ops: &EQ_OPS,
        },
        eq,
        _fabric: parent,
    });
    // SAFETY: `out` is valid for a write (checked non-null).
    unsafe { *out = Box::into_raw(b).cast() };
    0
}

/// `fi_control(FI_GETWAIT)` of an `FI_WAIT_FD` EQ: its descriptor.
unsafe extern "C" fn eq_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: libfabric passes the fid it got from us.
    let Some(q) = (unsafe { eq_of(f) }) else {
        return -FI_EINVAL;
    };
    // SAFETY: `arg` is what `command` says (fi_control contract).
    unsafe { super::wait::control(q.signal(), command, arg) }
}

unsafe extern "C" fn eq_close(f: *mut fid) -> c_int {
    // SAFETY: libfabric closes fids it got from us.
    unsafe { close_box::<EqObj>(f, &EQ_FI_OPS) }
}

/// Deliver a read: the event type to `*event`, the entry to `buf`; returns its length.
///
/// # Safety
/// `event` is null or valid for a write; `buf` is valid for `len` bytes.
unsafe fn eq_deliver(r: eq::Read, event: *mut u32, buf: *mut c_void) -> ssize_t {
    match r {
        eq::Read::Empty => -(FI_EAGAIN as ssize_t),
        eq::Read::TooSmall => -(FI_ETOOSMALL as ssize_t),
        eq::Read::Event(e) => {
            // SAFETY: per the contract; `e.data` fits in `len` (the EQ checked).
            unsafe {
                if !event.is_null() {
                    *event = e.event;
                }
                ptr::copy_nonoverlapping(e.data.as_ptr(), buf.cast::<u8>(), e.data.len());
            }
            e.data.len() as ssize_t
        }
    }
}

unsafe extern "C" fn eq_read(
    eq: *mut fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> ssize_t {
    // SAFETY: libfabric passes the EQ it got from us.
    let Some(q) = (unsafe { eq_of(eq.cast()) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if buf.is_null() && len > 0 {
        return -(FI_EINVAL as ssize_t);
    }
    // SAFETY: `event` and `buf` are the caller's (fi_eq_read contract).
    unsafe { eq_deliver(q.read(len, flags & FI_PEEK != 0), event, buf) }
}

unsafe extern "C" fn eq_sread(
    eq: *mut fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> ssize_t {
    // SAFETY: libfabric passes the EQ it got from us.
    let Some(q) = (unsafe { eq_of(eq.cast()) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if buf.is_null() && len > 0 {
        return -(FI_EINVAL as ssize_t);
    }
    let timeout = u64::try_from(timeout)
        .ok()
        .map(std::time::Duration::from_millis);
    // SAFETY: `event` and `buf` are the caller's (fi_eq_sread contract).
    unsafe { eq_deliver(q.sread(len, flags & FI_PEEK != 0, timeout), event, buf) }
}

unsafe extern "C" fn eq_write(
    eq: *mut fid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    flags: u64,
) -> ssize_t {
    // SAFETY: libfabric passes the EQ it got from us.
    let Some(q) = (unsafe { eq_of(eq.cast()) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if flags != 0 {
        return -(FI_EBADFLAGS as ssize_t);
    }
    // SAFETY: `buf` holds `len` bytes (fi_eq_write contract).
    let Some(data) = (unsafe { bytes(buf, len) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if q.write(event, data) {
        len as ssize_t
    } else {
        -(FI_EAGAIN as ssize_t)
    }
}

/// There are no error events (`crate::eq`).
unsafe extern "C" fn eq_readerr(
    eq: *mut fid_eq,
    buf: *mut fi_eq_err_entry,
    _flags: u64,
) -> ssize_t {
    // SAFETY: libfabric passes the EQ it got from us.
    if unsafe { eq_of(eq.cast()) }.is_none() || buf.is_null() {
        return -(FI_EINVAL as ssize_t);
    }
    -(FI_EAGAIN as ssize_t)
}

unsafe extern "C" fn eq_strerror(
    _eq: *mut fid_eq,
    _prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    const MSG: &str = "nicemu: event queues carry no provider errors";
    if buf.is_null() || len == 0 {
        return c"nicemu: event queues carry no provider errors".as_ptr();
    }
    let mut room = len;
    // SAFETY: `buf` has `len` bytes (fi_eq_strerror contract).
    unsafe { copy_str(MSG, buf, &mut room) }
}

/// `fi_trywait`: 0 if the caller may sleep on every fid's wait object, `-FI_EAGAIN` if one
/// has an entry, or (a CQ or counter) has operations in flight on its endpoints: progress
/// is manual, so only the reader's polling completes them (`Cq::try_wait`,
/// `Cntr::try_wait`).
unsafe extern "C" fn trywait(_fabric: *mut fid_fabric, fids: *mut *mut fid, count: c_int) -> c_int {
    let n = usize::try_from(count).unwrap_or(0);
    if fids.is_null() && n > 0 {
        return -FI_EINVAL;
    }
    for i in 0..n {
        // SAFETY: `fids` holds `count` fids (fi_trywait contract), each null or live.
        let f = unsafe { *fids.add(i) };
        // SAFETY: as above.
        if let Some(q) = unsafe { eq_of(f) } {
            if q.pending() {
                return -FI_EAGAIN;
            }
        // SAFETY: as above.
        } else if let Some(c) = unsafe { obj::<CqObj>(f, &CQ_FI_OPS) } {
            if !c.cq.try_wait() {
                return -FI_EAGAIN;
            }
        // SAFETY: as above.
        } else if let Some(c) = unsafe { super::cntr::cntr_of(f) } {
            if !c.try_wait() {
                return -FI_EAGAIN;
            }
        } else {
            return -FI_EINVAL;
        }
    }
    0
}

/// `fi_domain_bind`/`fi_av_bind` of an EQ: accepted; nothing completes asynchronously on
/// them (`crate::eq`). Anything else: `-FI_ENOSYS`.
unsafe extern "C" fn bind_eq_only(_f: *mut fid, bfid: *mut fid, _flags: u64) -> c_int {
    // SAFETY: libfabric passes fids it got from providers.
    if unsafe { eq_of(bfid) }.is_some() {
        0
    } else {
        -FI_ENOSYS
    }
}

// ---------------------------------------------------------------------------------------
// Domain

#[repr(C)]
pub(super) struct DomainObj {
    fid: fid_domain,
    nic: Arc<Nic>,
    /// Memory regions (`crate::mr`).
    mrs: Arc<crate::mr::MrTable>,
    /// Its address vectors, CQs, endpoints, counters and memory regions.
    children: Children,
    _fabric: Child,
}

/// The memory regions of domain `f`.
///
/// # Safety
/// `f` is null or a live fid.
pub(super) unsafe fn mr_table<'a>(f: *const fid) -> Option<&'a Arc<crate::mr::MrTable>> {
    // SAFETY: per the contract.
    unsafe { obj::<DomainObj>(f, &DOMAIN_FI_OPS) }.map(|d| &d.mrs)
}

pub(super) static DOMAIN_FI_OPS: fi_ops = fi_ops {
    bind: Some(bind_eq_only),
    ..base_ops(domain_close)
};
static DOMAIN_OPS: fi_ops_domain = fi_ops_domain {
    size: size_of::<fi_ops_domain>(),
    av_open: Some(av_open),
    cq_open: Some(cq_open),
    endpoint: Some(ep_open),
    scalable_ep: None,
    cntr_open: Some(super::cntr::cntr_open),
    poll_open: Some(open_refused3),
    stx_ctx: None,
    srx_ctx: None,
    query_atomic: Some(super::rma::query_atomic),
    query_collective: None,
    endpoint2: None,
};

unsafe extern "C" fn domain_open(
    fabric: *mut fid_fabric,
    info: *mut fi_info,
    out: *mut *mut fid_domain,
    context: *mut c_void,
) -> c_int {
    // SAFETY: libfabric passes the fabric it got from us.
    let Some(parent) = (unsafe { fabric_child(fabric.cast()) }) else {
        return -FI_EINVAL;
    };
    if out.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: `info` is null or libfabric's valid `fi_info`, its domain attributes too.
    let prov_key = unsafe { info.as_ref().and_then(|i| i.domain_attr.as_ref()) }
        .is_some_and(|d| d.mr_mode & super::rma_types::FI_MR_PROV_KEY != 0);
    let nic = match nic::shared() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("{e}");
            return fail(&e);
        }
    };
    let b = Box::new(DomainObj {
        fid: fid_domain {
            fid: new_fid(FI_CLASS_DOMAIN, context, &DOMAIN_FI_OPS),
            ops: &DOMAIN_OPS,
            mr: (&super::rma::MR_OPS as *const super::rma_types::fi_ops_mr).cast(),
        },
        nic,
        mrs: Arc::new(crate::mr::MrTable::new(prov_key)),
        children: Children::default(),
        _fabric: parent,
    });
    // SAFETY: `out` is valid for a write (checked non-null).
    unsafe { *out = Box::into_raw(b).cast() };
    0
}

unsafe extern "C" fn domain_close(f: *mut fid) -> c_int {
    // SAFETY: libfabric closes fids it got from us.
    unsafe { close_parent::<DomainObj>(f, &DOMAIN_FI_OPS, |x| &x.children) }
}

// ---------------------------------------------------------------------------------------
// Address vector

#[repr(C)]
struct AvObj {
    fid: fid_av,
    av: Arc<Av>,
    _domain: Child,
}

static AV_FI_OPS: fi_ops = fi_ops {
    bind: Some(bind_eq_only),
    ..base_ops(av_close)
};
static AV_OPS: fi_ops_av = fi_ops_av {
    size: size_of::<fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: None,
    insertsym: None,
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: None,
};

unsafe extern "C" fn av_open(
    domain: *mut fid_domain,
    attr: *mut fi_av_attr,
    out: *mut *mut fid_av,
    context: *mut c_void,
) -> c_int {
    // SAFETY: libfabric passes the domain it got from us.
    let Some(parent) = (unsafe { domain_child(domain.cast()) }) else {
        return -FI_EINVAL;
    };
    if out.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: `attr` is null or valid.
    if let Some(a) = unsafe { attr.as_ref() } {
        if ![FI_AV_UNSPEC, FI_AV_MAP, FI_AV_TABLE].contains(&a.type_) || a.rx_ctx_bits != 0 {
            return -FI_EINVAL;
        }
        if !a.name.is_null() || a.flags != 0 {
            return -FI_ENOSYS;
        }
    }
    let b = Box::new(AvObj {
        fid: fid_av {
            fid: new_fid(FI_CLASS_AV, context, &AV_FI_OPS),
            ops: &AV_OPS,
        },
        av: Arc::new(Av::default()),
        _domain: parent,
    });
    // SAFETY: `out` is valid for a write (checked non-null).
    unsafe { *out = Box::into_raw(b).cast() };
    0
}

unsafe extern "C" fn av_close(f: *mut fid) -> c_int {
    // SAFETY: libfabric closes fids it got from us.
    unsafe { close_box::<AvObj>(f, &AV_FI_OPS) }
}

unsafe extern "C" fn av_insert(
    av: *mut fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    _context: *mut c_void,
) -> c_int {
    // SAFETY: libfabric passes the AV it got from us.
    let Some(a) = (unsafe { obj::<AvObj>(av.cast(), &AV_FI_OPS) }) else {
        return -FI_EINVAL;
    };
    if flags != 0 {
        return -FI_EBADFLAGS;
    }
    if count == 0 {
        return 0;
    }
    if addr.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: the caller provides `count` packed addresses of `ADDR_LEN` bytes (the length
    // fi_getname reported).
    let bytes = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), count * ADDR_LEN) };
    let addrs: Vec<[u8; ADDR_LEN]> = bytes
        .chunks_exact(ADDR_LEN)
        .map(|c| c.try_into().unwrap_or([0; ADDR_LEN]))
        .collect();
    let ids = a.av.insert(&addrs);
    if !fi_addr.is_null() {
        // SAFETY: a non-null `fi_addr` has room for `count` entries (fi_av_insert contract).
        let out = unsafe { std::slice::from_raw_parts_mut(fi_addr, count) };
        out.copy_from_slice(&ids);
    }
    count as c_int
}

unsafe extern "C" fn av_remove(
    av: *mut fid_av,
    fi_addr: *mut fi_addr_t,
    count: usize,
    flags: u64,
) -> c_int {
    // SAFETY: libfabric passes the AV it got from us.
    let Some(a) = (unsafe { obj::<AvObj>(av.cast(), &AV_FI_OPS) }) else {
        return -FI_EINVAL;
    };
    if flags != 0 {
        return -FI_EBADFLAGS;
    }
    if count == 0 {
        return 0;
    }
    if fi_addr.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: `fi_addr` holds `count` addresses (fi_av_remove contract).
    let addrs = unsafe { std::slice::from_raw_parts(fi_addr, count) };
    a.av.remove(addrs).map_or_else(|e| fail(&e), |()| 0)
}

unsafe extern "C" fn av_lookup(
    av: *mut fid_av,
    fi_addr: fi_addr_t,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    // SAFETY: libfabric passes the AV it got from us.
    let Some(a) = (unsafe { obj::<AvObj>(av.cast(), &AV_FI_OPS) }) else {
        return -FI_EINVAL;
    };
    if addrlen.is_null() {
        return -FI_EINVAL;
    }
    let Some(found) = a.av.lookup(fi_addr) else {
        return -FI_ENOENT;
    };
    // SAFETY: `addrlen` is valid (checked non-null); `addr` has room for `*addrlen` bytes.
    unsafe {
        let room = *addrlen;
        if !addr.is_null() {
            ptr::copy_nonoverlapping(found.as_ptr(), addr.cast::<u8>(), room.min(ADDR_LEN));
        }
        *addrlen = ADDR_LEN;
    }
    0
}

/// Copy `s` into the C buffer `buf` of `*len` bytes (truncated, NUL-terminated), setting
/// `*len` to the length the whole string needs.
///
/// # Safety
/// `len` is valid; `buf` is null or valid for `*len` bytes.
unsafe fn copy_str(s: &str, buf: *mut c_char, len: *mut usize) -> *const c_char {
    // SAFETY: per the contract.
    unsafe {
        let room = *len;
        if !buf.is_null() && room > 0 {
            let n = s.len().min(room - 1);
            ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
        *len = s.len() + 1;
    }
    buf
}

unsafe extern "C" fn av_straddr(
    _av: *mut fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    if addr.is_null() || len.is_null() {
        return ptr::null();
    }
    let mut a = [0u8; ADDR_LEN];
    // SAFETY: `addr` is one address of ADDR_LEN bytes (fi_av_straddr contract).
    unsafe { ptr::copy_nonoverlapping(addr.cast::<u8>(), a.as_mut_ptr(), ADDR_LEN) };
    // SAFETY: `len` is valid and `buf` has `*len` bytes (contract).
    unsafe { copy_str(&straddr(&a), buf, len) }
}

// ---------------------------------------------------------------------------------------
// Completion queue

#[repr(C)]
struct CqObj {
    fid: fid_cq,
    cq: Arc<Cq>,
    /// Bytes per entry of the CQ's format.
    entry_size: usize,
    _domain: Child,
}

static CQ_FI_OPS: fi_ops = fi_ops {
    control: Some(cq_control),
    ..base_ops(cq_close)
};
static CQ_OPS: fi_ops_cq = fi_ops_cq {
    size: size_of::<fi_ops_cq>(),
    read: Some(cq_read),
    readfrom: Some(cq_readfrom),
    readerr: Some(cq_readerr),
    sread: Some(cq_sread),
    sreadfrom: Some(cq_sreadfrom),
    signal: Some(cq_signal),
    strerror: Some(cq_strerror),
};

unsafe extern "C" fn cq_open(
    domain: *mut fid_domain,
    attr: *mut fi_cq_attr,
    out: *mut *mut fid_cq,
    context: *mut c_void,
) -> c_int {
    // SAFETY: libfabric passes the domain it got from us.
    let Some(parent) = (unsafe { domain_child(domain.cast()) }) else {
        return -FI_EINVAL;
    };
    if out.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: `attr` is null or valid.
    let (format, wait, set) = unsafe { attr.as_ref() }
        .map_or((FI_CQ_FORMAT_UNSPEC, FI_WAIT_NONE, ptr::null_mut()), |a| {
            (a.format, a.wait_obj, a.wait_set)
        });
    // Every format is a prefix of `fi_cq_tagged_entry`: context; + flags, len; + buf, data; + tag.
    let entry_size = match format {
        FI_CQ_FORMAT_CONTEXT => 8,
        FI_CQ_FORMAT_MSG => 24,
        FI_CQ_FORMAT_DATA => 40,
        FI_CQ_FORMAT_UNSPEC | FI_CQ_FORMAT_TAGGED => size_of::<fi_cq_tagged_entry>(),
        _ => return -FI_ENOSYS,
    };
    // Blocking reads poll (progress is manual); FI_WAIT_FD adds a descriptor readable while
    // a completion is queued, FI_WAIT_SET joins a wait set (`crate::wait`).
    // SAFETY: `set` is the caller's wait set pointer (null or a fid).
    let w = match unsafe { super::wait::wait_object(wait, set) } {
        Ok(w) => w,
        Err(rc) => return rc,
    };
    let cq = Arc::new(Cq::with_signal(w.signal));
    if let Some(s) = w.set {
        s.join(crate::wait::Member::Cq(Arc::downgrade(&cq)));
    }
    let b = Box::new(CqObj {
        fid: fid_cq {
            fid: new_fid(FI_CLASS_CQ, context, &CQ_FI_OPS),
            ops: &CQ_OPS,
        },
        cq,
        entry_size,
        _domain: parent,
    });
    // SAFETY: `out` is valid for a write (checked non-null).
    unsafe { *out = Box::into_raw(b).cast() };
    0
}

/// Ends a blocking read that finds nothing (`sread` polls; it looks at the signal each
/// round), now or the next one.
unsafe extern "C" fn cq_signal(cq: *mut fid_cq) -> c_int {
    // SAFETY: libfabric passes the CQ it got from us.
    let Some(c) = (unsafe { obj::<CqObj>(cq.cast(), &CQ_FI_OPS) }) else {
        return -FI_EINVAL;
    };
    c.cq.signal();
    0
}

/// `fi_control(FI_GETWAIT)` of an `FI_WAIT_FD` CQ: its descriptor.
unsafe extern "C" fn cq_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: libfabric passes the fid it got from us.
    let Some(c) = (unsafe { obj::<CqObj>(f, &CQ_FI_OPS) }) else {
        return -FI_EINVAL;
    };
    // SAFETY: `arg` is what `command` says (fi_control contract).
    unsafe { super::wait::control(c.cq.wait_object(), command, arg) }
}

unsafe extern "C" fn cq_close(f: *mut fid) -> c_int {
    // SAFETY: libfabric closes fids it got from us.
    unsafe { close_box::<CqObj>(f, &CQ_FI_OPS) }
}

fn tagged_entry(e: &Entry) -> fi_cq_tagged_entry {
    fi_cq_tagged_entry {
        op_context: e.context as *mut c_void,
        flags: e.flags,
        len: e.len,
        buf: e.buf as *mut c_void,
        data: e.data,
        tag: e.tag,
    }
}

unsafe extern "C" fn cq_readfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
) -> ssize_t {
    // SAFETY: libfabric passes the CQ it got from us.
    let Some(c) = (unsafe { obj::<CqObj>(cq.cast(), &CQ_FI_OPS) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if buf.is_null() || count == 0 {
        return -(FI_EINVAL as ssize_t);
    }
    match c.cq.read(count) {
        Read::Empty => -(FI_EAGAIN as ssize_t),
        Read::ErrorAvailable => -(FI_EAVAIL as ssize_t),
        Read::Entries(es) => {
            for (i, e) in es.iter().enumerate() {
                let t = tagged_entry(e);
                // SAFETY: `buf` has room for `count` >= `es.len()` entries of the CQ's format,
                // which is a prefix of `fi_cq_tagged_entry` of `entry_size` bytes; `src`
                // is null or has room for `count` addresses.
                unsafe {
                    ptr::copy_nonoverlapping(
                        (&raw const t).cast::<u8>(),
                        buf.cast::<u8>().add(i * c.entry_size),
                        c.entry_size,
                    );
                    if !src.is_null() {
                        *src.add(i) = e.src;
                    }
                }
            }
            es.len() as ssize_t
        }
    }
}

unsafe extern "C" fn cq_read(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> ssize_t {
    // SAFETY: same contract as readfrom, without source addresses.
    unsafe { cq_readfrom(cq, buf, count, ptr::null_mut()) }
}

/// Poll until something completes or `timeout` ms pass (-1: for ever): progress is manual,
/// so a blocking read is a polling read.
unsafe extern "C" fn cq_sreadfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
    _cond: *const c_void,
    timeout: c_int,
) -> ssize_t {
    let start = std::time::Instant::now();
    loop {
        // SAFETY: the caller's arguments, passed on.
        let r = unsafe { cq_readfrom(cq, buf, count, src) };
        if r != -(FI_EAGAIN as ssize_t) {
            return r;
        }
        // SAFETY: the CQ is live (the read above checked it is ours).
        if unsafe { obj::<CqObj>(cq.cast(), &CQ_FI_OPS) }.is_some_and(|c| c.cq.take_signal()) {
            return r;
        }
        if timeout >= 0 && start.elapsed().as_millis() >= timeout as u128 {
            return -(FI_EAGAIN as ssize_t);
        }
        std::thread::yield_now();
    }
}

unsafe extern "C" fn cq_sread(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    cond: *const c_void,
    timeout: c_int,
) -> ssize_t {
    // SAFETY: the caller's arguments, passed on.
    unsafe { cq_sreadfrom(cq, buf, count, ptr::null_mut(), cond, timeout) }
}

unsafe extern "C" fn cq_readerr(
    cq: *mut fid_cq,
    buf: *mut fi_cq_err_entry,
    _flags: u64,
) -> ssize_t {
    // SAFETY: libfabric passes the CQ it got from us.
    let Some(c) = (unsafe { obj::<CqObj>(cq.cast(), &CQ_FI_OPS) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if buf.is_null() {
        return -(FI_EINVAL as ssize_t);
    }
    let Some(e) = c.cq.read_err() else {
        return -(FI_EAGAIN as ssize_t);
    };
    // SAFETY: `buf` is a valid error entry (checked non-null); its `err_data` buffer is the
    // caller's and left alone (no provider error data: `err_data_size` 0).
    unsafe {
        let b = &mut *buf;
        b.op_context = e.entry.context as *mut c_void;
        b.flags = e.entry.flags;
        b.len = e.entry.len;
        b.buf = e.entry.buf as *mut c_void;
        b.data = e.entry.data;
        b.tag = e.entry.tag;
        b.olen = e.olen;
        b.err = e.err;
        b.prov_errno = e.err;
        b.err_data_size = 0;
    }
    1
}

unsafe extern "C" fn cq_strerror(
    cq: *mut fid_cq,
    _prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // SAFETY: libfabric passes the CQ it got from us.
    let Some(c) = (unsafe { obj::<CqObj>(cq.cast(), &CQ_FI_OPS) }) else {
        return c"nicemu: not a nicemu CQ".as_ptr();
    };
    if buf.is_null() || len == 0 {
        return c"nicemu: see the error entry".as_ptr();
    }
    let msg =
        c.cq.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
    let mut room = len;
    // SAFETY: `buf` has `len` bytes (fi_cq_strerror contract).
    unsafe { copy_str(&msg, buf, &mut room) }
}

// ---------------------------------------------------------------------------------------
// Endpoint

#[repr(C)]
struct EpObj {
    fid: fid_ep,
    ep: Arc<Ep>,
    /// The domain's memory regions, exposed on the endpoint when it is enabled.
    mrs: Arc<crate::mr::MrTable>,
    _domain: Child,
}

static EP_FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close: Some(ep_close),
    bind: Some(ep_bind),
    control: Some(ep_control),
    ops_open: None,
    tostr: None,
    ops_set: None,
};
static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: size_of::<fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: None,
    rx_ctx: None,
    rx_size_left: Some(ep_size_left),
    tx_size_left: Some(ep_size_left),
};
static EP_CM: fi_ops_cm = fi_ops_cm {
    size: size_of::<fi_ops_cm>(),
    setname: None,
    getname: Some(ep_getname),
    getpeer: None,
    connect: None,
    listen: None,
    accept: None,
    reject: None,
    shutdown: Some(ep_shutdown),
    join: None,
};
static EP_MSG: fi_ops_msg = fi_ops_msg {
    size: size_of::<fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
};
static EP_TAGGED: fi_ops_tagged = fi_ops_tagged {
    size: size_of::<fi_ops_tagged>(),
    recv: Some(t_recv),
    recvv: Some(t_recvv),
    recvmsg: Some(t_recvmsg),
    send: Some(t_send),
    sendv: Some(t_sendv),
    sendmsg: Some(t_sendmsg),
    inject: Some(t_inject),
    senddata: Some(t_senddata),
    injectdata: Some(t_injectdata),
};

unsafe extern "C" fn ep_open(
    domain: *mut fid_domain,
    info: *mut fi_info,
    out: *mut *mut fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: libfabric passes the domain it got from us.
    let Some(d) = (unsafe { obj::<DomainObj>(domain.cast(), &DOMAIN_FI_OPS) }) else {
        return -FI_EINVAL;
    };
    if out.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: `info` is null or valid, its `ep_attr` too.
    let (caps, ty, tx_flags, rx_flags) =
        unsafe { info.as_ref() }.map_or((super::prov::CAPS, FI_EP_RDM, 0, 0), |i| {
            // SAFETY: as above: the attributes are null or valid.
            let (ty, tx, rx) = unsafe {
                (
                    i.ep_attr.as_ref().map_or(FI_EP_RDM, |a| a.type_),
                    i.tx_attr.as_ref().map_or(0, |a| a.op_flags),
                    i.rx_attr.as_ref().map_or(0, |a| a.op_flags),
                )
            };
            let caps = if i.caps == 0 {
                super::prov::CAPS
            } else {
                i.caps
            };
            (caps, ty, tx, rx)
        });
    if ty != FI_EP_RDM && ty != FI_EP_UNSPEC {
        return -FI_EINVAL;
    }
    let defaults = crate::ep::OpDefaults {
        tx_completion: tx_flags & FI_COMPLETION != 0,
        rx_completion: rx_flags & FI_COMPLETION != 0,
    };
    let ep = match Ep::open(Arc::clone(&d.nic), caps, defaults) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            return fail(&e);
        }
    };
    let b = Box::new(EpObj {
        fid: fid_ep {
            fid: new_fid(FI_CLASS_EP, context, &EP_FI_OPS),
            ops: &EP_OPS,
            cm: &EP_CM,
            msg: &EP_MSG,
            rma: (&super::rma::RMA_OPS as *const super::rma_types::fi_ops_rma).cast(),
            tagged: &EP_TAGGED,
            atomic: (&super::rma::ATOMIC_OPS as *const super::rma_types::fi_ops_atomic).cast(),
            collective: ptr::null(),
        },
        ep: Arc::new(ep),
        mrs: Arc::clone(&d.mrs),
        _domain: d.children.open(),
    });
    // SAFETY: `out` is valid for a write (checked non-null).
    unsafe { *out = Box::into_raw(b).cast() };
    0
}

unsafe extern "C" fn ep_close(f: *mut fid) -> c_int {
    // SAFETY: libfabric closes fids it got from us.
    unsafe { close_box::<EpObj>(f, &EP_FI_OPS) }
}

/// # Safety
/// `ep` is null or a live fid.
pub(super) unsafe fn ep_of<'a>(ep: *const fid) -> Option<&'a Arc<Ep>> {
    // SAFETY: per the contract.
    unsafe { obj::<EpObj>(ep, &EP_FI_OPS) }.map(|e| &e.ep)
}

unsafe extern "C" fn ep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: libfabric passes fids it got from providers.
    let Some(ep) = (unsafe { ep_of(f) }) else {
        return -FI_EINVAL;
    };
    // SAFETY: as above.
    if let Some(av) = unsafe { obj::<AvObj>(bfid, &AV_FI_OPS) } {
        return ep
            .bind_av(Arc::clone(&av.av))
            .map_or_else(|e| fail(&e), |()| 0);
    }
    // SAFETY: as above.
    if let Some(cq) = unsafe { obj::<CqObj>(bfid, &CQ_FI_OPS) } {
        let how = CqBinding {
            transmit: flags & FI_TRANSMIT != 0,
            recv: flags & FI_RECV != 0,
            selective: flags & FI_SELECTIVE_COMPLETION != 0,
        };
        return ep.bind_cq(&cq.cq, how).map_or_else(|e| fail(&e), |()| 0);
    }
    // SAFETY: as above.
    if let Some(rc) = unsafe { super::cntr::bind_to_ep(f, bfid, flags) } {
        return rc;
    }
    // SAFETY: as above.
    if unsafe { eq_of(bfid) }.is_some() {
        // Nothing of an RDM endpoint is reported on an EQ (`crate::eq`).
        return 0;
    }
    -FI_ENOSYS
}

unsafe extern "C" fn ep_control(f: *mut fid, command: c_int, _arg: *mut c_void) -> c_int {
    // SAFETY: libfabric passes the fid it got from us.
    let Some(ep) = (unsafe { ep_of(f) }) else {
        return -FI_EINVAL;
    };
    match command {
        FI_ENABLE => {
            // SAFETY: as above.
            let mrs = unsafe { obj::<EpObj>(f, &EP_FI_OPS) }.map(|o| &o.mrs);
            ep.enable()
                .and_then(|()| mrs.map_or(Ok(()), |m| m.attach(ep)))
                .map_or_else(|e| fail(&e), |()| 0)
        }
        _ => -FI_ENOSYS,
    }
}

unsafe extern "C" fn ep_cancel(f: fid_t, context: *mut c_void) -> ssize_t {
    // SAFETY: libfabric passes the fid it got from us.
    let Some(ep) = (unsafe { ep_of(f) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    match ep.cancel(context as usize) {
        Ok(true) => 0,
        Ok(false) => -(FI_ENOENT as ssize_t),
        Err(e) => -(e.errno() as ssize_t),
    }
}

/// Operations are not limited by queue space (`tx_attr->size`, `rx_attr->size` are advisory).
unsafe extern "C" fn ep_size_left(_ep: *mut fid_ep) -> ssize_t {
    1024
}

unsafe extern "C" fn ep_getopt(
    _f: fid_t,
    _level: c_int,
    _name: c_int,
    _val: *mut c_void,
    _len: *mut usize,
) -> c_int {
    -FI_ENOPROTOOPT
}

unsafe extern "C" fn ep_setopt(
    _f: fid_t,
    _level: c_int,
    _name: c_int,
    _val: *const c_void,
    _len: usize,
) -> c_int {
    -FI_ENOPROTOOPT
}

/// `fi_shutdown`: an RDM endpoint has no connection to shut down (fabtests' `fi_cq_data`
/// calls it on every endpoint type; a null entry crashed it).
unsafe extern "C" fn ep_shutdown(_ep: *mut fid_ep, _flags: u64) -> c_int {
    -FI_ENOSYS
}

unsafe extern "C" fn ep_getname(f: fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: libfabric passes the fid it got from us.
    let Some(ep) = (unsafe { ep_of(f) }) else {
        return -FI_EINVAL;
    };
    if addrlen.is_null() {
        return -FI_EINVAL;
    }
    let name = ep.name();
    // SAFETY: `addrlen` is valid (checked); `addr` has room for `*addrlen` bytes.
    unsafe {
        let room = *addrlen;
        *addrlen = ADDR_LEN;
        if room < ADDR_LEN || addr.is_null() {
            return -FI_ETOOSMALL;
        }
        ptr::copy_nonoverlapping(name.as_ptr(), addr.cast::<u8>(), ADDR_LEN);
    }
    0
}

/// # Safety
/// `buf` is null only with `len` 0, else valid for `len` bytes of reads during the call.
pub(super) unsafe fn bytes<'a>(buf: *const c_void, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    if buf.is_null() {
        return None;
    }
    // SAFETY: per the contract.
    Some(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) })
}

/// Start a send on endpoint `ep` (shared by every send flavour).
///
/// # Safety
/// `ep` is null or a live fid; `buf` is valid for `len` bytes of reads during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn do_send(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    tag: Option<u64>,
    cq_data: Option<u64>,
    context: *mut c_void,
    completion: Option<bool>,
) -> ssize_t {
    // SAFETY: per the contract.
    let Some(e) = (unsafe { ep_of(ep.cast()) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if len > crate::ep::MAX_MSG_SIZE {
        return -(Error::TooLong(len).errno() as ssize_t);
    }
    // SAFETY: per the contract.
    let Some(data) = (unsafe { bytes(buf, len) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    let op = Send {
        dest,
        tag,
        data,
        cq_data,
        context: context as usize,
        completion,
    };
    e.send(op).map_or_else(|e| -(e.errno() as ssize_t), |()| 0)
}

/// Post a receive (shared by every receive flavour).
///
/// # Safety
/// `ep` is null or a live fid; `buf` is valid for `len` bytes of writes until the receive
/// completes.
unsafe fn do_recv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    src: fi_addr_t,
    tag: Option<(u64, u64)>,
    context: *mut c_void,
    completion: Option<bool>,
) -> ssize_t {
    // SAFETY: per the contract.
    let Some(e) = (unsafe { ep_of(ep.cast()) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if buf.is_null() && len > 0 {
        return -(FI_EINVAL as ssize_t);
    }
    // SAFETY: per the contract, the buffer stays valid until the receive completes.
    let ub = unsafe { UserBuf::new(buf.cast(), len) };
    e.recv(src, tag, ub, context as usize, completion)
        .map_or_else(|e| -(e.errno() as ssize_t), |()| 0)
}

/// The single buffer of an iovec list (`iov_limit` is 1).
///
/// # Safety
/// `iov` is valid for `count` entries.
pub(super) unsafe fn one_iov(iov: *const iovec, count: usize) -> Option<(*mut c_void, usize)> {
    match count {
        0 => Some((ptr::null_mut(), 0)),
        // SAFETY: per the contract.
        1 if !iov.is_null() => Some(unsafe { ((*iov).iov_base, (*iov).iov_len) }),
        _ => None,
    }
}

pub(super) fn msg_completion(flags: u64) -> Option<bool> {
    if flags & FI_COMPLETION != 0 {
        Some(true)
    } else {
        None
    }
}

unsafe extern "C" fn msg_recv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's arguments (libfabric contract), passed on.
    unsafe { do_recv(ep, buf, len, src, None, ctx, None) }
}

unsafe extern "C" fn msg_recvmsg(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> ssize_t {
    // SAFETY: `msg` is null or valid with `iov_count` iovecs.
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: as above.
    let Some((buf, len)) = (unsafe { one_iov(m.msg_iov, m.iov_count) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: the caller's buffer, valid until completion.
    unsafe { do_recv(ep, buf, len, m.addr, None, m.context, msg_completion(flags)) }
}

unsafe extern "C" fn msg_send(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_send(ep, buf, len, dest, None, None, ctx, None) }
}

unsafe extern "C" fn msg_sendmsg(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> ssize_t {
    // SAFETY: `msg` is null or valid with `iov_count` iovecs.
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: as above.
    let Some((buf, len)) = (unsafe { one_iov(m.msg_iov, m.iov_count) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    let data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data);
    // SAFETY: the caller's buffer, read during the call.
    unsafe {
        do_send(
            ep,
            buf,
            len,
            m.addr,
            None,
            data,
            m.context,
            msg_completion(flags),
        )
    }
}

unsafe extern "C" fn msg_inject(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
) -> ssize_t {
    if len > INJECT_SIZE {
        return -(FI_EMSGSIZE as ssize_t);
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_send(ep, buf, len, dest, None, None, ptr::null_mut(), Some(false)) }
}

unsafe extern "C" fn msg_senddata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_send(ep, buf, len, dest, None, Some(data), ctx, None) }
}

unsafe extern "C" fn msg_injectdata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
) -> ssize_t {
    if len > INJECT_SIZE {
        return -(FI_EMSGSIZE as ssize_t);
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe {
        do_send(
            ep,
            buf,
            len,
            dest,
            None,
            Some(data),
            ptr::null_mut(),
            Some(false),
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn t_recv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_recv(ep, buf, len, src, Some((tag, ignore)), ctx, None) }
}

unsafe extern "C" fn t_recvmsg(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> ssize_t {
    // SAFETY: `msg` is null or valid with `iov_count` iovecs.
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if flags & (FI_PEEK | FI_CLAIM | FI_DISCARD) != 0 {
        // SAFETY: the caller's arguments (libfabric contract), passed on.
        return unsafe { super::peek::trecvmsg(ep, m, flags) };
    }
    // SAFETY: as above.
    let Some((buf, len)) = (unsafe { one_iov(m.msg_iov, m.iov_count) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: the caller's buffer, valid until completion.
    unsafe {
        do_recv(
            ep,
            buf,
            len,
            m.addr,
            Some((m.tag, m.ignore)),
            m.context,
            msg_completion(flags),
        )
    }
}

unsafe extern "C" fn t_send(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_send(ep, buf, len, dest, Some(tag), None, ctx, None) }
}

unsafe extern "C" fn t_sendmsg(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> ssize_t {
    // SAFETY: `msg` is null or valid with `iov_count` iovecs.
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: as above.
    let Some((buf, len)) = (unsafe { one_iov(m.msg_iov, m.iov_count) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    let data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data);
    // SAFETY: the caller's buffer, read during the call.
    unsafe {
        do_send(
            ep,
            buf,
            len,
            m.addr,
            Some(m.tag),
            data,
            m.context,
            msg_completion(flags),
        )
    }
}

unsafe extern "C" fn t_inject(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    tag: u64,
) -> ssize_t {
    if len > INJECT_SIZE {
        return -(FI_EMSGSIZE as ssize_t);
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe {
        do_send(
            ep,
            buf,
            len,
            dest,
            Some(tag),
            None,
            ptr::null_mut(),
            Some(false),
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn t_senddata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_send(ep, buf, len, dest, Some(tag), Some(data), ctx, None) }
}

unsafe extern "C" fn t_injectdata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
) -> ssize_t {
    if len > INJECT_SIZE {
        return -(FI_EMSGSIZE as ssize_t);
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe {
        do_send(
            ep,
            buf,
            len,
            dest,
            Some(tag),
            Some(data),
            ptr::null_mut(),
            Some(false),
        )
    }
}

unsafe extern "C" fn msg_recvv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: `iov` holds `count` entries (contract).
    let Some((buf, len)) = (unsafe { one_iov(iov, count) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: the caller's buffer, valid until completion.
    unsafe { do_recv(ep, buf, len, src, None, ctx, None) }
}

unsafe extern "C" fn msg_sendv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: `iov` holds `count` entries (contract).
    let Some((buf, len)) = (unsafe { one_iov(iov, count) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: the caller's buffer, read during the call.
    unsafe { do_send(ep, buf, len, dest, None, None, ctx, None) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn t_recvv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: `iov` holds `count` entries (contract).
    let Some((buf, len)) = (unsafe { one_iov(iov, count) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: the caller's buffer, valid until completion.
    unsafe { do_recv(ep, buf, len, src, Some((tag, ignore)), ctx, None) }
}

unsafe extern "C" fn t_sendv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    tag: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: `iov` holds `count` entries (contract).
    let Some((buf, len)) = (unsafe { one_iov(iov, count) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: the caller's buffer, read during the call.
    unsafe { do_send(ep, buf, len, dest, Some(tag), None, ctx, None) }
}
