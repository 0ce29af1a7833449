//! The C side of memory registration (`fi_ops_mr`, memory region fids), RMA
//! (`fi_ops_rma`) and atomics (`fi_ops_atomic`, `query_atomic`). The work is done by
//! [`crate::mr`], [`crate::rma`] and [`crate::atomic`]; `iov_limit` and `rma_iov_limit` are 1.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use super::children::Child;
use super::mem::UserBuf;
use super::objects::{
    bytes, domain_child, ep_of, fail, mr_table, msg_completion, new_fid, no_bind, no_control,
};
use super::region::UserRegion;
use super::rma_types::*;
use super::types::*;
use crate::atomic::{self, Kind};
use crate::mr::{Mr, MrTable};
use crate::rma::{Remote, Report};

fn err(e: c_int) -> ssize_t {
    -(e as ssize_t)
}

// ---------------------------------------------------------------------------------------
// Memory regions

#[repr(C)]
struct MrObj {
    fid: fid_mr,
    table: Arc<MrTable>,
    mr: Arc<Mr>,
    _domain: Child,
}

static MR_FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close: Some(mr_close),
    bind: Some(no_bind),
    control: Some(no_control),
    ops_open: None,
    tostr: None,
    ops_set: None,
};

/// The domain's `fi_ops_mr`.
pub(super) static MR_OPS: fi_ops_mr = fi_ops_mr {
    size: size_of::<fi_ops_mr>(),
    reg: Some(mr_reg),
    regv: Some(mr_regv),
    regattr: Some(mr_regattr),
};

/// Register `len` bytes at `buf` on the domain `f`.
///
/// # Safety
/// `f` is null or a live fid; `buf` is valid for `len` bytes until the region is closed;
/// `out` is null or valid for a write.
unsafe fn do_reg(
    f: *mut fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    requested_key: u64,
    out: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: per the contract.
    let (Some(table), Some(parent)) = (unsafe { (mr_table(f), domain_child(f)) }) else {
        return -FI_EINVAL;
    };
    if out.is_null() || (buf.is_null() && len > 0) {
        return -FI_EINVAL;
    }
    // SAFETY: per the contract, the memory stays valid until `fi_close` of the region.
    let region = unsafe { UserRegion::new(buf.cast_mut().cast(), len) };
    let key = (!table.prov_key).then_some(requested_key);
    let mr = match table.register(region, access, key) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return fail(&e);
        }
    };
    let b = Box::new(MrObj {
        fid: fid_mr {
            fid: new_fid(FI_CLASS_MR, context, &MR_FI_OPS),
            mem_desc: std::ptr::null_mut(),
            key: mr.key,
        },
        table: Arc::clone(table),
        mr,
        _domain: parent,
    });
    let p = Box::into_raw(b);
    // SAFETY: `p` is the fresh box; `out` is valid for a write (checked non-null). The
    // descriptor is the region's own address: any non-null value does, nothing reads it.
    unsafe {
        (*p).fid.mem_desc = p.cast();
        *out = p.cast();
    }
    0
}

unsafe extern "C" fn mr_reg(
    f: *mut fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    _offset: u64,
    requested_key: u64,
    _flags: u64,
    out: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_reg(f, buf, len, access, requested_key, out, context) }
}

/// One iovec (`mr_iov_limit` 1), or none.
///
/// # Safety
/// `iov` is valid for `count` entries.
unsafe fn single(iov: *const iovec, count: usize) -> Option<(*const c_void, usize)> {
    match count {
        0 => Some((std::ptr::null(), 0)),
        // SAFETY: per the contract.
        1 if !iov.is_null() => Some(unsafe { ((*iov).iov_base.cast_const(), (*iov).iov_len) }),
        _ => None,
    }
}

unsafe extern "C" fn mr_regv(
    f: *mut fid,
    iov: *const iovec,
    count: usize,
    access: u64,
    _offset: u64,
    requested_key: u64,
    _flags: u64,
    out: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `iov` has `count` entries (caller's contract).
    let Some((buf, len)) = (unsafe { single(iov, count) }) else {
        return -FI_EINVAL;
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_reg(f, buf, len, access, requested_key, out, context) }
}

unsafe extern "C" fn mr_regattr(
    f: *mut fid,
    attr: *const fi_mr_attr,
    _flags: u64,
    out: *mut *mut fid_mr,
) -> c_int {
    // SAFETY: `attr` is null or valid (caller's contract).
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return -FI_EINVAL;
    };
    if a.iface != 0 {
        // Only system memory (FI_HMEM_SYSTEM).
        return -FI_ENOSYS;
    }
    // SAFETY: `mr_iov` has `iov_count` entries.
    let Some((buf, len)) = (unsafe { single(a.mr_iov, a.iov_count) }) else {
        return -FI_EINVAL;
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_reg(f, buf, len, a.access, a.requested_key, out, a.context) }
}

unsafe extern "C" fn mr_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is null or a live fid; the ops pointer tells whether it is ours.
    let Some(fr) = (unsafe { f.as_ref() }) else {
        return -FI_EINVAL;
    };
    if !std::ptr::eq(fr.ops, &MR_FI_OPS) {
        return -FI_EINVAL;
    }
    // SAFETY: a fid with `MR_FI_OPS` is the first field of a leaked `MrObj` box, closed once.
    let b = unsafe { Box::from_raw(f.cast::<MrObj>()) };
    match b.table.close(b.mr.key) {
        Ok(()) => 0,
        Err(e) => fail(&e),
    }
}

// ---------------------------------------------------------------------------------------
// RMA

/// The endpoint's `fi_ops_rma`.
pub(super) static RMA_OPS: fi_ops_rma = fi_ops_rma {
    size: size_of::<fi_ops_rma>(),
    read: Some(rma_read),
    readv: Some(rma_readv),
    readmsg: Some(rma_readmsg),
    write: Some(rma_write),
    writev: Some(rma_writev),
    writemsg: Some(rma_writemsg),
    inject: Some(rma_inject),
    writedata: Some(rma_writedata),
    injectdata: Some(rma_injectdata),
};

/// # Safety
/// `ep` is null or a live fid; `buf` valid for `len` bytes of writes until completion.
unsafe fn do_read(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    from: Remote,
    r: Report,
) -> ssize_t {
    // SAFETY: per the contract.
    let Some(e) = (unsafe { ep_of(ep.cast()) }) else {
        return err(FI_EINVAL);
    };
    if buf.is_null() && len > 0 {
        return err(FI_EINVAL);
    }
    // SAFETY: per the contract, the buffer stays valid until the read completes.
    let ub = unsafe { UserBuf::new(buf.cast(), len) };
    e.rma_read(from, ub, r)
        .map_or_else(|e| err(e.errno()), |()| 0)
}

/// # Safety
/// `ep` is null or a live fid; `buf` valid for `len` bytes of reads during the call.
unsafe fn do_write(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    to: Remote,
    cq_data: Option<u64>,
    r: Report,
) -> ssize_t {
    // SAFETY: per the contract.
    let Some(e) = (unsafe { ep_of(ep.cast()) }) else {
        return err(FI_EINVAL);
    };
    // SAFETY: per the contract.
    let Some(data) = (unsafe { bytes(buf, len) }) else {
        return err(FI_EINVAL);
    };
    e.rma_write(to, data, cq_data, r)
        .map_or_else(|e| err(e.errno()), |()| 0)
}

fn report(ctx: *mut c_void, completion: Option<bool>) -> Report {
    Report {
        context: ctx as usize,
        completion,
    }
}

fn remote(addr: fi_addr_t, offset: u64, key: u64) -> Remote {
    Remote { addr, offset, key }
}

unsafe extern "C" fn rma_read(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_read(ep, buf, len, remote(src, addr, key), report(ctx, None)) }
}

/// # Safety
/// `iov` valid for `count` entries.
unsafe fn iov1(iov: *const iovec, count: usize) -> Option<(*mut c_void, usize)> {
    // SAFETY: per the contract.
    unsafe { single(iov, count) }.map(|(p, n)| (p.cast_mut(), n))
}

unsafe extern "C" fn rma_readv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's iovecs.
    let Some((buf, len)) = (unsafe { iov1(iov, count) }) else {
        return err(FI_EINVAL);
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_read(ep, buf, len, remote(src, addr, key), report(ctx, None)) }
}

/// The local buffer and the remote one of an `fi_msg_rma` (one of each, same length).
///
/// # Safety
/// `m`'s arrays are valid for their counts.
unsafe fn msg_parts(m: &fi_msg_rma) -> Option<(*mut c_void, usize, Remote)> {
    // SAFETY: per the contract.
    let (buf, len) = unsafe { iov1(m.msg_iov, m.iov_count) }?;
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return None;
    }
    // SAFETY: one valid entry.
    let r = unsafe { &*m.rma_iov };
    (r.len == len).then_some((buf, len, remote(m.addr, r.addr, r.key)))
}

unsafe extern "C" fn rma_readmsg(ep: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> ssize_t {
    // SAFETY: `msg` is null or valid (caller's contract), its arrays too.
    let Some((buf, len, from)) = unsafe { msg.as_ref() }.and_then(|m| unsafe { msg_parts(m) })
    else {
        return err(FI_EINVAL);
    };
    // SAFETY: `msg` is valid (above).
    let ctx = unsafe { (*msg).context };
    // SAFETY: the caller's buffer.
    unsafe { do_read(ep, buf, len, from, report(ctx, msg_completion(flags))) }
}

unsafe extern "C" fn rma_write(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's arguments, passed on.
    unsafe {
        do_write(
            ep,
            buf,
            len,
            remote(dest, addr, key),
            None,
            report(ctx, None),
        )
    }
}

unsafe extern "C" fn rma_writev(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's iovecs.
    let Some((buf, len)) = (unsafe { iov1(iov, count) }) else {
        return err(FI_EINVAL);
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe {
        do_write(
            ep,
            buf,
            len,
            remote(dest, addr, key),
            None,
            report(ctx, None),
        )
    }
}

unsafe extern "C" fn rma_writemsg(ep: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> ssize_t {
    // SAFETY: `msg` is null or valid (caller's contract), its arrays too.
    let Some((buf, len, to)) = unsafe { msg.as_ref() }.and_then(|m| unsafe { msg_parts(m) }) else {
        return err(FI_EINVAL);
    };
    // SAFETY: `msg` is valid (above).
    let (ctx, data) = unsafe { ((*msg).context, (*msg).data) };
    let cq_data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(data);
    // SAFETY: the caller's buffer, read during the call.
    unsafe {
        do_write(
            ep,
            buf,
            len,
            to,
            cq_data,
            report(ctx, msg_completion(flags)),
        )
    }
}

unsafe extern "C" fn rma_inject(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> ssize_t {
    let r = report(std::ptr::null_mut(), Some(false));
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_write(ep, buf, len, remote(dest, addr, key), None, r) }
}

unsafe extern "C" fn rma_writedata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's arguments, passed on.
    unsafe {
        do_write(
            ep,
            buf,
            len,
            remote(dest, addr, key),
            Some(data),
            report(ctx, None),
        )
    }
}

unsafe extern "C" fn rma_injectdata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> ssize_t {
    let r = report(std::ptr::null_mut(), Some(false));
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_write(ep, buf, len, remote(dest, addr, key), Some(data), r) }
}

// ---------------------------------------------------------------------------------------
// Atomics

/// The endpoint's `fi_ops_atomic`.
pub(super) static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: size_of::<fi_ops_atomic>(),
    write: Some(at_write),
    writev: Some(at_writev),
    writemsg: Some(at_writemsg),
    inject: Some(at_inject),
    readwrite: Some(at_readwrite),
    readwritev: Some(at_readwritev),
    readwritemsg: Some(at_readwritemsg),
    compwrite: Some(at_compwrite),
    compwritev: Some(at_compwritev),
    compwritemsg: Some(at_compwritemsg),
    writevalid: Some(at_writevalid),
    readwritevalid: Some(at_readwritevalid),
    compwritevalid: Some(at_compwritevalid),
};

/// One atomic operation as the C calls give it.
struct AtomicCall {
    op: c_int,
    dt: c_int,
    kind: Kind,
    count: usize,
    buf: *const c_void,
    compare: *const c_void,
    result: *mut c_void,
    to: Remote,
    r: Report,
}

/// # Safety
/// `ep` is null or a live fid; `buf` and `compare` valid for one element of reads during
/// the call (`buf` may be null for `FI_ATOMIC_READ`), `result` for one element of writes
/// until completion.
unsafe fn do_atomic(ep: *mut fid_ep, c: AtomicCall) -> ssize_t {
    // SAFETY: per the contract.
    let Some(e) = (unsafe { ep_of(ep.cast()) }) else {
        return err(FI_EINVAL);
    };
    let Some(size) = atomic::valid(c.op, c.dt, c.kind) else {
        return err(FI_EOPNOTSUPP);
    };
    if c.count != 1 {
        // One element per operation (`fi_atomicvalid` says count 1).
        return err(FI_EINVAL);
    }
    let needs_operand = !(c.kind == Kind::Fetch && c.op == FI_ATOMIC_READ);
    // SAFETY: per the contract.
    let operand = match unsafe { bytes(c.buf, size) } {
        Some(b) => b,
        None if !needs_operand => &[][..],
        None => return err(FI_EINVAL),
    };
    let compare = if c.kind == Kind::Compare {
        // SAFETY: per the contract.
        match unsafe { bytes(c.compare, size) } {
            Some(b) => b,
            None => return err(FI_EINVAL),
        }
    } else {
        &[][..]
    };
    let result = if c.kind == Kind::Write {
        None
    } else {
        if c.result.is_null() {
            return err(FI_EINVAL);
        }
        // SAFETY: per the contract, valid for one element until completion.
        Some(unsafe { UserBuf::new(c.result.cast(), size) })
    };
    let Some(amo) = atomic::amo(c.op, c.dt, c.kind, operand, compare) else {
        return err(FI_EOPNOTSUPP);
    };
    e.rma_atomic(c.to, amo, result, c.r)
        .map_or_else(|e| err(e.errno()), |()| 0)
}

/// The single `fi_ioc` of a list (address, count).
///
/// # Safety
/// `iov` valid for `count` entries.
unsafe fn ioc1(iov: *const fi_ioc, count: usize) -> Option<(*mut c_void, usize)> {
    if count != 1 || iov.is_null() {
        return None;
    }
    // SAFETY: per the contract.
    Some(unsafe { ((*iov).addr, (*iov).count) })
}

/// The remote element of an `fi_msg_atomic`.
///
/// # Safety
/// `m`'s arrays are valid for their counts.
unsafe fn msg_remote(m: &fi_msg_atomic) -> Option<Remote> {
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return None;
    }
    // SAFETY: one valid entry.
    let r = unsafe { &*m.rma_iov };
    Some(remote(m.addr, r.addr, r.key))
}

unsafe extern "C" fn at_write(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: c_int,
    op: c_int,
    ctx: *mut c_void,
) -> ssize_t {
    let c = AtomicCall {
        op,
        dt,
        kind: Kind::Write,
        count,
        buf,
        compare: std::ptr::null(),
        result: std::ptr::null_mut(),
        to: remote(dest, addr, key),
        r: report(ctx, None),
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_atomic(ep, c) }
}

unsafe extern "C" fn at_writev(
    ep: *mut fid_ep,
    iov: *const fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: c_int,
    op: c_int,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's iovecs.
    let Some((buf, n)) = (unsafe { ioc1(iov, count) }) else {
        return err(FI_EINVAL);
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe {
        at_write(
            ep,
            buf,
            n,
            std::ptr::null_mut(),
            dest,
            addr,
            key,
            dt,
            op,
            ctx,
        )
    }
}

unsafe extern "C" fn at_writemsg(
    ep: *mut fid_ep,
    msg: *const fi_msg_atomic,
    flags: u64,
) -> ssize_t {
    // SAFETY: `msg` is null or valid, its arrays too (caller's contract).
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return err(FI_EINVAL);
    };
    // SAFETY: as above.
    let (Some((buf, n)), Some(to)) = (unsafe { (ioc1(m.msg_iov, m.iov_count), msg_remote(m)) })
    else {
        return err(FI_EINVAL);
    };
    let c = AtomicCall {
        op: m.op,
        dt: m.datatype,
        kind: Kind::Write,
        count: n,
        buf,
        compare: std::ptr::null(),
        result: std::ptr::null_mut(),
        to,
        r: report(m.context, msg_completion(flags)),
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_atomic(ep, c) }
}

unsafe extern "C" fn at_inject(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: c_int,
    op: c_int,
) -> ssize_t {
    let c = AtomicCall {
        op,
        dt,
        kind: Kind::Write,
        count,
        buf,
        compare: std::ptr::null(),
        result: std::ptr::null_mut(),
        to: remote(dest, addr, key),
        r: report(std::ptr::null_mut(), Some(false)),
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_atomic(ep, c) }
}

unsafe extern "C" fn at_readwrite(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    result: *mut c_void,
    _result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: c_int,
    op: c_int,
    ctx: *mut c_void,
) -> ssize_t {
    let c = AtomicCall {
        op,
        dt,
        kind: Kind::Fetch,
        count,
        buf,
        compare: std::ptr::null(),
        result,
        to: remote(dest, addr, key),
        r: report(ctx, None),
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_atomic(ep, c) }
}

unsafe extern "C" fn at_readwritev(
    ep: *mut fid_ep,
    iov: *const fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    resultv: *mut fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: c_int,
    op: c_int,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's iovecs.
    let (Some((buf, n)), Some((res, _))) =
        (unsafe { (ioc1(iov, count), ioc1(resultv, result_count)) })
    else {
        return err(FI_EINVAL);
    };
    let c = AtomicCall {
        op,
        dt,
        kind: Kind::Fetch,
        count: n,
        buf,
        compare: std::ptr::null(),
        result: res,
        to: remote(dest, addr, key),
        r: report(ctx, None),
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_atomic(ep, c) }
}

unsafe extern "C" fn at_readwritemsg(
    ep: *mut fid_ep,
    msg: *const fi_msg_atomic,
    resultv: *mut fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> ssize_t {
    // SAFETY: `msg` is null or valid, its arrays too (caller's contract).
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return err(FI_EINVAL);
    };
    // SAFETY: as above. FI_ATOMIC_READ may come without an operand.
    let (buf, n) = unsafe { ioc1(m.msg_iov, m.iov_count) }.unwrap_or((std::ptr::null_mut(), 1));
    // SAFETY: as above.
    let (Some((res, _)), Some(to)) = (unsafe { (ioc1(resultv, result_count), msg_remote(m)) })
    else {
        return err(FI_EINVAL);
    };
    let c = AtomicCall {
        op: m.op,
        dt: m.datatype,
        kind: Kind::Fetch,
        count: n,
        buf,
        compare: std::ptr::null(),
        result: res,
        to,
        r: report(m.context, msg_completion(flags)),
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_atomic(ep, c) }
}

unsafe extern "C" fn at_compwrite(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    compare: *const c_void,
    _compare_desc: *mut c_void,
    result: *mut c_void,
    _result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: c_int,
    op: c_int,
    ctx: *mut c_void,
) -> ssize_t {
    let c = AtomicCall {
        op,
        dt,
        kind: Kind::Compare,
        count,
        buf,
        compare,
        result,
        to: remote(dest, addr, key),
        r: report(ctx, None),
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_atomic(ep, c) }
}

unsafe extern "C" fn at_compwritev(
    ep: *mut fid_ep,
    iov: *const fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    comparev: *const fi_ioc,
    _compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: c_int,
    op: c_int,
    ctx: *mut c_void,
) -> ssize_t {
    // SAFETY: the caller's iovecs.
    let (Some((buf, n)), Some((cmp, _)), Some((res, _))) = (unsafe {
        (
            ioc1(iov, count),
            ioc1(comparev, compare_count),
            ioc1(resultv, result_count),
        )
    }) else {
        return err(FI_EINVAL);
    };
    let c = AtomicCall {
        op,
        dt,
        kind: Kind::Compare,
        count: n,
        buf,
        compare: cmp,
        result: res,
        to: remote(dest, addr, key),
        r: report(ctx, None),
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_atomic(ep, c) }
}

unsafe extern "C" fn at_compwritemsg(
    ep: *mut fid_ep,
    msg: *const fi_msg_atomic,
    comparev: *const fi_ioc,
    _compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> ssize_t {
    // SAFETY: `msg` is null or valid, its arrays too (caller's contract).
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return err(FI_EINVAL);
    };
    // SAFETY: as above.
    let (Some((buf, n)), Some((cmp, _)), Some((res, _)), Some(to)) = (unsafe {
        (
            ioc1(m.msg_iov, m.iov_count),
            ioc1(comparev, compare_count),
            ioc1(resultv, result_count),
            msg_remote(m),
        )
    }) else {
        return err(FI_EINVAL);
    };
    let c = AtomicCall {
        op: m.op,
        dt: m.datatype,
        kind: Kind::Compare,
        count: n,
        buf,
        compare: cmp,
        result: res,
        to,
        r: report(m.context, msg_completion(flags)),
    };
    // SAFETY: the caller's arguments, passed on.
    unsafe { do_atomic(ep, c) }
}

/// `fi_atomicvalid` & co.: one element per operation when supported.
///
/// # Safety
/// `count` is null or valid for a write.
unsafe fn valid(dt: c_int, op: c_int, kind: Kind, count: *mut usize) -> c_int {
    if atomic::valid(op, dt, kind).is_none() {
        return -FI_EOPNOTSUPP;
    }
    // SAFETY: per the contract.
    if let Some(c) = unsafe { count.as_mut() } {
        *c = 1;
    }
    0
}

unsafe extern "C" fn at_writevalid(
    _ep: *mut fid_ep,
    dt: c_int,
    op: c_int,
    count: *mut usize,
) -> c_int {
    // SAFETY: the caller's pointer.
    unsafe { valid(dt, op, Kind::Write, count) }
}

unsafe extern "C" fn at_readwritevalid(
    _ep: *mut fid_ep,
    dt: c_int,
    op: c_int,
    count: *mut usize,
) -> c_int {
    // SAFETY: the caller's pointer.
    unsafe { valid(dt, op, Kind::Fetch, count) }
}

unsafe extern "C" fn at_compwritevalid(
    _ep: *mut fid_ep,
    dt: c_int,
    op: c_int,
    count: *mut usize,
) -> c_int {
    // SAFETY: the caller's pointer.
    unsafe { valid(dt, op, Kind::Compare, count) }
}

/// `fi_query_atomic`: `FI_FETCH_ATOMIC`/`FI_COMPARE_ATOMIC` in `flags` choose the family;
/// `attr` gets `count` 1 and the element size.
///
/// # Safety
/// `attr` is null or valid for a write (libfabric's contract).
pub(super) unsafe extern "C" fn query_atomic(
    _domain: *mut fid_domain,
    dt: c_int,
    op: c_int,
    attr: *mut fi_atomic_attr,
    flags: u64,
) -> c_int {
    let kind = if flags & FI_COMPARE_ATOMIC != 0 {
        Kind::Compare
    } else if flags & FI_FETCH_ATOMIC != 0 {
        Kind::Fetch
    } else {
        Kind::Write
    };
    let Some(size) = atomic::valid(op, dt, kind) else {
        return -FI_EOPNOTSUPP;
    };
    // SAFETY: `attr` is null or valid for a write (caller's contract).
    if let Some(a) = unsafe { attr.as_mut() } {
        a.count = 1;
        a.size = size;
    }
    0
}
