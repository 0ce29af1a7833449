//! Point-to-point, requests and statuses.

use std::ffi::{c_int, c_void};

use super::mem::{self, Lent, put, slice_mut};
use super::{MpiStatus, fill};
use crate::consts::*;
use crate::error::AbiError;
use crate::p2p::{self, Mode};
use crate::requests::{self, Persist, Req, StatusInfo};
use crate::state::{Eh, call};

macro_rules! send_fn {
    ($name:ident, $mode:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            buf: *const c_void,
            count: c_int,
            dt: Handle,
            dest: c_int,
            tag: c_int,
            comm: Handle,
        ) -> c_int {
            // SAFETY: the send's contract: `buf` holds `count` elements of `dt`.
            let buf = unsafe { Lent::new(buf) };
            call(stringify!($name), Eh::Comm(comm), |s| {
                p2p::send(s, buf, count, dt, dest, tag, comm, $mode)
            })
        }
    };
}
send_fn!(MPI_Send, Mode::Standard);
send_fn!(MPI_Ssend, Mode::Synchronous);
send_fn!(MPI_Rsend, Mode::Ready);
send_fn!(MPI_Bsend, Mode::Buffered);

macro_rules! isend_fn {
    ($name:ident, $mode:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            buf: *const c_void,
            count: c_int,
            dt: Handle,
            dest: c_int,
            tag: c_int,
            comm: Handle,
            req: *mut Handle,
        ) -> c_int {
            // SAFETY: the send's contract: `buf` holds `count` elements of `dt`, `req`
            // points to a request.
            let (buf, req) = unsafe { (Lent::new(buf), mem::out(req)) };
            call(stringify!($name), Eh::Comm(comm), |s| {
                let r = p2p::isend(s, buf, count, dt, dest, tag, comm, $mode)?;
                let h = s.new_req(r);
                put(req, h)
            })
        }
    };
}
isend_fn!(MPI_Isend, Mode::Standard);
isend_fn!(MPI_Issend, Mode::Synchronous);
isend_fn!(MPI_Irsend, Mode::Ready);
isend_fn!(MPI_Ibsend, Mode::Buffered);

macro_rules! send_init_fn {
    ($name:ident, $mode:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            buf: *const c_void,
            count: c_int,
            dt: Handle,
            dest: c_int,
            tag: c_int,
            comm: Handle,
            req: *mut Handle,
        ) -> c_int {
            // SAFETY: the persistent send's contract: `buf` holds `count` elements of `dt`
            // whenever the request is started; `req` points to a request.
            let (buf, req) = unsafe { (Lent::new(buf), mem::out(req)) };
            call(stringify!($name), Eh::Comm(comm), |s| {
                s.comm(comm)?;
                s.layout(dt)?;
                let args = Persist {
                    send: Some($mode),
                    buf,
                    count,
                    dtype: dt,
                    peer: dest,
                    tag,
                    comm,
                };
                let h = s.new_req(Req::Persistent { args, active: None });
                put(req, h)
            })
        }
    };
}
send_init_fn!(MPI_Send_init, Mode::Standard);
send_init_fn!(MPI_Ssend_init, Mode::Synchronous);
send_init_fn!(MPI_Rsend_init, Mode::Ready);
send_init_fn!(MPI_Bsend_init, Mode::Buffered);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Recv_init(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Recv_init's contract: `buf` holds `count` elements of `dt` whenever the
    // request is started; `req` points to a request.
    let (buf, req) = unsafe { (Lent::new(buf), mem::out(req)) };
    call("MPI_Recv_init", Eh::Comm(comm), |s| {
        s.comm(comm)?;
        s.layout(dt)?;
        let args = Persist {
            send: None,
            buf,
            count,
            dtype: dt,
            peer: source,
            tag,
            comm,
        };
        let h = s.new_req(Req::Persistent { args, active: None });
        put(req, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Start(req: *mut Handle) -> c_int {
    // SAFETY: MPI_Start's contract: `req` points to a request.
    let req = unsafe { mem::out(req) };
    call("MPI_Start", Eh::Other, |s| {
        let h = *req.ok_or_else(|| AbiError::new(MPI_ERR_REQUEST, "a null request pointer"))?;
        requests::start(s, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Startall(n: c_int, reqs: *mut Handle) -> c_int {
    // SAFETY: MPI_Startall's contract: `reqs` holds `n` requests.
    let reqs = unsafe { slice_mut(reqs, n.into()) };
    call("MPI_Startall", Eh::Other, |s| {
        let reqs = reqs.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null request array"))?;
        reqs.iter().try_for_each(|&h| requests::start(s, h))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Recv's contract: `buf` holds `count` elements of `dt`; `status` is
    // MPI_STATUS_IGNORE or points to a status.
    let (buf, status) = unsafe { (Lent::new(buf), mem::out(status)) };
    call("MPI_Recv", Eh::Comm(comm), |s| {
        let r = p2p::irecv(s, buf, count, dt, source, tag, comm)?;
        let mut h = s.new_req(r);
        let st = requests::wait(s, &mut h)?;
        fill(status, &st);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Irecv's contract: `buf` holds `count` elements of `dt` until the request
    // completes; `req` points to a request.
    let (buf, req) = unsafe { (Lent::new(buf), mem::out(req)) };
    call("MPI_Irecv", Eh::Comm(comm), |s| {
        let r = p2p::irecv(s, buf, count, dt, source, tag, comm)?;
        let h = s.new_req(r);
        put(req, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Sendrecv's contract: the buffers hold their counts of their datatypes;
    // `status` is MPI_STATUS_IGNORE or points to a status.
    let (sb, rb, status) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf), mem::out(status)) };
    call("MPI_Sendrecv", Eh::Comm(comm), |s| {
        let r = p2p::irecv(s, rb, recvcount, recvtype, source, recvtag, comm)?;
        let mut h = s.new_req(r);
        p2p::send(
            s,
            sb,
            sendcount,
            sendtype,
            dest,
            sendtag,
            comm,
            Mode::Standard,
        )?;
        let st = requests::wait(s, &mut h)?;
        fill(status, &st);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Sendrecv_replace's contract: `buf` holds `count` elements of `dt`;
    // `status` is MPI_STATUS_IGNORE or points to a status.
    let (b, status) = unsafe { (Lent::new(buf), mem::out(status)) };
    call("MPI_Sendrecv_replace", Eh::Comm(comm), |s| {
        // The outgoing bytes are staged by the send before the receive writes the buffer.
        let out = p2p::isend(s, b, count, dt, dest, sendtag, comm, Mode::Standard)?;
        let mut sh = s.new_req(out);
        let r = p2p::irecv(s, b, count, dt, source, recvtag, comm)?;
        let mut h = s.new_req(r);
        requests::wait(s, &mut sh)?;
        let st = requests::wait(s, &mut h)?;
        fill(status, &st);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Probe's contract: `status` is MPI_STATUS_IGNORE or points to a status.
    let status = unsafe { mem::out(status) };
    call("MPI_Probe", Eh::Comm(comm), |s| {
        let st = p2p::probe(s, source, tag, comm, true)?.unwrap_or_else(StatusInfo::empty);
        fill(status, &st);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Iprobe's contract: `flag` points to an int, `status` is
    // MPI_STATUS_IGNORE or points to a status.
    let (flag, status) = unsafe { (mem::out(flag), mem::out(status)) };
    call("MPI_Iprobe", Eh::Comm(comm), |s| {
        let st = p2p::probe(s, source, tag, comm, false)?;
        if let Some(st) = &st {
            fill(status, st);
        }
        put(flag, c_int::from(st.is_some()))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Mprobe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    msg: *mut Handle,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Mprobe's contract: `msg` points to a message handle, `status` is
    // MPI_STATUS_IGNORE or points to a status.
    let (msg, status) = unsafe { (mem::out(msg), mem::out(status)) };
    call("MPI_Mprobe", Eh::Comm(comm), |s| {
        let (h, st) = p2p::mprobe(s, source, tag, comm, true)?.ok_or_else(|| {
            AbiError::new(MPI_ERR_INTERN, "a blocking matched probe found nothing")
        })?;
        fill(status, &st);
        put(msg, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Improbe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    flag: *mut c_int,
    msg: *mut Handle,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Improbe's contract: `flag` points to an int, `msg` to a message handle,
    // `status` is MPI_STATUS_IGNORE or points to a status.
    let (flag, msg, status) = unsafe { (mem::out(flag), mem::out(msg), mem::out(status)) };
    call("MPI_Improbe", Eh::Comm(comm), |s| {
        match p2p::mprobe(s, source, tag, comm, false)? {
            Some((h, st)) => {
                fill(status, &st);
                put(msg, h)?;
                put(flag, 1)
            }
            None => put(flag, 0),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Mrecv(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    msg: *mut Handle,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Mrecv's contract: `buf` holds `count` elements of `dt`, `msg` points to a
    // message handle, `status` is MPI_STATUS_IGNORE or points to a status.
    let (buf, msg, status) = unsafe { (Lent::new(buf), mem::out(msg), mem::out(status)) };
    call("MPI_Mrecv", Eh::Other, |s| {
        let m = msg.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null message pointer"))?;
        let st = p2p::mrecv(s, buf, count, dt, m)?;
        fill(status, &st);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Imrecv(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    msg: *mut Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Imrecv's contract: `buf` holds `count` elements of `dt`, `msg` points to a
    // message handle, `req` to a request.
    let (buf, msg, req) = unsafe { (Lent::new(buf), mem::out(msg), mem::out(req)) };
    call("MPI_Imrecv", Eh::Other, |s| {
        let m = msg.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null message pointer"))?;
        // The message is already matched: receiving it waits for its data only.
        let st = p2p::mrecv(s, buf, count, dt, m)?;
        let h = s.new_req(Req::Done(st));
        put(req, h)
    })
}

fn req_ptr(req: Option<&mut Handle>) -> Result<&mut Handle, AbiError> {
    req.ok_or_else(|| AbiError::new(MPI_ERR_REQUEST, "a null request pointer"))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Wait(req: *mut Handle, status: *mut MpiStatus) -> c_int {
    // SAFETY: MPI_Wait's contract: `req` points to a request, `status` is
    // MPI_STATUS_IGNORE or points to a status.
    let (req, status) = unsafe { (mem::out(req), mem::out(status)) };
    call("MPI_Wait", Eh::Other, |s| {
        let st = requests::wait(s, req_ptr(req)?)?;
        fill(status, &st);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Test(
    req: *mut Handle,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Test's contract: `req` points to a request, `flag` to an int, `status` is
    // MPI_STATUS_IGNORE or points to a status.
    let (req, flag, status) = unsafe { (mem::out(req), mem::out(flag), mem::out(status)) };
    call("MPI_Test", Eh::Other, |s| {
        let st = requests::test(s, req_ptr(req)?)?;
        if st.is_none() {
            requests::progress(s);
        }
        if let Some(st) = &st {
            fill(status, st);
        }
        put(flag, c_int::from(st.is_some()))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Request_get_status(
    req: Handle,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Request_get_status's contract: `flag` points to an int, `status` is
    // MPI_STATUS_IGNORE or points to a status.
    let (flag, status) = unsafe { (mem::out(flag), mem::out(status)) };
    call("MPI_Request_get_status", Eh::Other, |s| {
        let mut h = req;
        let st = requests::test(s, &mut h)?;
        // Keep the request alive: a completed one is stored back as complete.
        if let Some(st) = &st {
            if req != MPI_REQUEST_NULL && h == MPI_REQUEST_NULL {
                s.reqs.insert(req, Req::Done(*st));
            }
            fill(status, st);
        }
        put(flag, c_int::from(st.is_some()))
    })
}

/// # Safety
/// `p` is MPI_STATUSES_IGNORE (null) or holds `n` statuses.
unsafe fn statuses<'a>(p: *mut MpiStatus, n: c_int) -> Option<&'a mut [MpiStatus]> {
    // SAFETY: the function's contract.
    unsafe { slice_mut(p, n.into()) }.filter(|_| !p.is_null())
}

/// # Safety
/// `p` is null or holds `n` requests.
unsafe fn reqs_arg<'a>(p: *mut Handle, n: c_int) -> Result<&'a mut [Handle], AbiError> {
    // SAFETY: the function's contract.
    unsafe { slice_mut(p, n.into()) }
        .ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null or negative request array"))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Waitall(n: c_int, reqs: *mut Handle, sts: *mut MpiStatus) -> c_int {
    // SAFETY: the call's contract: `sts` is MPI_STATUSES_IGNORE or holds `n` statuses;
    // `reqs` holds `n` requests.
    let (sts, hs) = unsafe { (statuses(sts, n), reqs_arg(reqs, n)) };
    call("MPI_Waitall", Eh::Other, |s| {
        let hs = hs?;
        let p = requests::Patience::new("MPI_Waitall");
        let out = loop {
            if let Some(v) = requests::test_all(s, hs)? {
                break v;
            }
            p.tick(s)?;
        };
        if let Some(sts) = sts {
            for (d, st) in sts.iter_mut().zip(&out) {
                d.set(st);
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Testall(
    n: c_int,
    reqs: *mut Handle,
    flag: *mut c_int,
    sts: *mut MpiStatus,
) -> c_int {
    // SAFETY: the call's contract: `sts` is MPI_STATUSES_IGNORE or holds `n` statuses;
    // `reqs` holds `n` requests.
    let (sts, hs) = unsafe { (statuses(sts, n), reqs_arg(reqs, n)) };
    // SAFETY: MPI_Testall's contract: `flag` points to an int.
    let flag = unsafe { mem::out(flag) };
    call("MPI_Testall", Eh::Other, |s| {
        let hs = hs?;
        match requests::test_all(s, hs)? {
            Some(out) => {
                if let Some(sts) = sts {
                    for (d, st) in sts.iter_mut().zip(&out) {
                        d.set(st);
                    }
                }
                put(flag, 1)
            }
            None => {
                requests::progress(s);
                put(flag, 0)
            }
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Waitany(
    n: c_int,
    reqs: *mut Handle,
    index: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Waitany's contract: `index` points to an int, `status` is
    // MPI_STATUS_IGNORE or points to a status.
    let (index, status) = unsafe { (mem::out(index), mem::out(status)) };
    // SAFETY: the call's contract: `reqs` holds `n` requests.
    let hs = unsafe { reqs_arg(reqs, n) };
    call("MPI_Waitany", Eh::Other, |s| {
        let hs = hs?;
        let p = requests::Patience::new("MPI_Waitany");
        loop {
            if let Some((i, st)) = requests::test_any(s, hs)? {
                fill(status, &st);
                return put(index, i);
            }
            p.tick(s)?;
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Testany(
    n: c_int,
    reqs: *mut Handle,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Testany's contract: `index` and `flag` point to ints, `status` is
    // MPI_STATUS_IGNORE or points to a status.
    let (index, flag, status) = unsafe { (mem::out(index), mem::out(flag), mem::out(status)) };
    // SAFETY: the call's contract: `reqs` holds `n` requests.
    let hs = unsafe { reqs_arg(reqs, n) };
    call("MPI_Testany", Eh::Other, |s| {
        let hs = hs?;
        match requests::test_any(s, hs)? {
            Some((i, st)) => {
                fill(status, &st);
                put(index, i)?;
                put(flag, 1)
            }
            None => {
                requests::progress(s);
                put(index, MPI_UNDEFINED)?;
                put(flag, 0)
            }
        }
    })
}

/// `MPI_Waitsome` / `MPI_Testsome`.
///
/// # Safety
/// The calls' contract: `reqs` holds `n` requests, `outcount` points to an int, `indices`
/// holds `n` ints, `sts` is MPI_STATUSES_IGNORE or holds `n` statuses.
unsafe fn some(
    name: &str,
    n: c_int,
    reqs: *mut Handle,
    outcount: *mut c_int,
    indices: *mut c_int,
    sts: *mut MpiStatus,
    wait: bool,
) -> c_int {
    // SAFETY: the call's contract: `sts` is MPI_STATUSES_IGNORE or holds `n` statuses;
    // `reqs` holds `n` requests.
    let (sts, hs) = unsafe { (statuses(sts, n), reqs_arg(reqs, n)) };
    // SAFETY: the contract of MPI_Waitsome/MPI_Testsome: `outcount` points to an int,
    // `indices` holds `n` ints.
    let (outcount, indices) = unsafe { (mem::out(outcount), slice_mut(indices, n.into())) };
    call(name, Eh::Other, |s| {
        let hs = hs?;
        let p = requests::Patience::new("MPI_Waitsome");
        let done = loop {
            match requests::test_some(s, hs)? {
                Some(d) if d.is_empty() && wait => p.tick(s)?,
                other => break other,
            }
        };
        let Some(done) = done else {
            return put(outcount, MPI_UNDEFINED);
        };
        let idx = indices.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null index array"))?;
        let mut sts = sts;
        for (k, (i, st)) in done.iter().enumerate() {
            idx[k] = *i;
            if let Some(sts) = sts.as_deref_mut() {
                sts[k].set(st);
            }
        }
        put(outcount, done.len() as c_int)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Waitsome(
    n: c_int,
    reqs: *mut Handle,
    outcount: *mut c_int,
    indices: *mut c_int,
    sts: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Waitsome's contract is `some`'s.
    unsafe { some("MPI_Waitsome", n, reqs, outcount, indices, sts, true) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Testsome(
    n: c_int,
    reqs: *mut Handle,
    outcount: *mut c_int,
    indices: *mut c_int,
    sts: *mut MpiStatus,
) -> c_int {
    // SAFETY: MPI_Testsome's contract is `some`'s.
    unsafe { some("MPI_Testsome", n, reqs, outcount, indices, sts, false) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Cancel(req: *mut Handle) -> c_int {
    // SAFETY: MPI_Cancel's contract: `req` points to a request.
    let req = unsafe { mem::out(req) };
    call("MPI_Cancel", Eh::Other, |s| {
        requests::cancel(s, *req_ptr(req)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Request_free(req: *mut Handle) -> c_int {
    // SAFETY: MPI_Request_free's contract: `req` points to a request.
    let req = unsafe { mem::out(req) };
    call("MPI_Request_free", Eh::Other, |s| {
        requests::free(s, req_ptr(req)?)
    })
}

/// # Safety
/// `p` is null or points to a status.
unsafe fn status_in<'a>(p: *const MpiStatus) -> Result<&'a MpiStatus, AbiError> {
    // SAFETY: the function's contract.
    unsafe { p.as_ref() }.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null status pointer"))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Test_cancelled(status: *const MpiStatus, flag: *mut c_int) -> c_int {
    // SAFETY: MPI_Test_cancelled's contract: `flag` points to an int.
    let flag = unsafe { mem::out(flag) };
    // SAFETY: the call's contract: `status` points to a status.
    let st = unsafe { status_in(status) };
    call("MPI_Test_cancelled", Eh::Other, |_| {
        put(flag, st?.internal[2])
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Get_count(
    status: *const MpiStatus,
    dt: Handle,
    count: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Get_count's contract: `count` points to an int.
    let count = unsafe { mem::out(count) };
    // SAFETY: the call's contract: `status` points to a status.
    let st = unsafe { status_in(status) };
    call("MPI_Get_count", Eh::Other, |s| {
        let len = st?.len();
        let size = s.any_layout(dt)?.size();
        let n = if size == 0 {
            0
        } else if len % size == 0 {
            c_int::try_from(len / size).unwrap_or(MPI_UNDEFINED)
        } else {
            MPI_UNDEFINED
        };
        put(count, n)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Get_elements(
    status: *const MpiStatus,
    dt: Handle,
    count: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Get_elements's contract: `count` points to an int.
    let count = unsafe { mem::out(count) };
    // SAFETY: the call's contract: `status` points to a status.
    let st = unsafe { status_in(status) };
    call("MPI_Get_elements", Eh::Other, |s| {
        let len = st?.len();
        let n = s
            .any_layout(dt)?
            .elements_in(len)
            .map_or(MPI_UNDEFINED, |n| {
                c_int::try_from(n).unwrap_or(MPI_UNDEFINED)
            });
        put(count, n)
    })
}

/// # Safety
/// `p` is null or points to a status.
unsafe fn status_mut<'a>(p: *mut MpiStatus) -> Result<&'a mut MpiStatus, AbiError> {
    // SAFETY: the function's contract.
    unsafe { p.as_mut() }.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null status pointer"))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Status_set_elements(
    status: *mut MpiStatus,
    dt: Handle,
    count: c_int,
) -> c_int {
    // SAFETY: the call's contract: `status` points to a status.
    let st = unsafe { status_mut(status) };
    call("MPI_Status_set_elements", Eh::Other, |s| {
        let l = s.any_layout(dt)?;
        let n = crate::types::count(count)?;
        let per = l.elements().max(1);
        let bytes = n / per * l.size() + (n % per) * l.kind().map_or(1, |k| k.size());
        let st = st?;
        let cancelled = st.internal[2] != 0;
        st.set(&StatusInfo {
            source: st.source,
            tag: st.tag,
            error: st.error,
            len: bytes,
            cancelled,
        });
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Status_set_cancelled(status: *mut MpiStatus, flag: c_int) -> c_int {
    // SAFETY: the call's contract: `status` points to a status.
    let st = unsafe { status_mut(status) };
    call("MPI_Status_set_cancelled", Eh::Other, |_| {
        st?.internal[2] = c_int::from(flag != 0);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Status_set_source(status: *mut MpiStatus, source: c_int) -> c_int {
    // SAFETY: the call's contract: `status` points to a status.
    let st = unsafe { status_mut(status) };
    call("MPI_Status_set_source", Eh::Other, |_| {
        st?.source = source;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Status_set_tag(status: *mut MpiStatus, tag: c_int) -> c_int {
    // SAFETY: the call's contract: `status` points to a status.
    let st = unsafe { status_mut(status) };
    call("MPI_Status_set_tag", Eh::Other, |_| {
        st?.tag = tag;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Status_set_error(status: *mut MpiStatus, err: c_int) -> c_int {
    // SAFETY: the call's contract: `status` points to a status.
    let st = unsafe { status_mut(status) };
    call("MPI_Status_set_error", Eh::Other, |_| {
        st?.error = err;
        Ok(())
    })
}
