//! Endpoints and datagrams: `GNI_EpCreate`, `GNI_EpBind`, `GNI_EpUnbind`, `GNI_EpIdle`,
//! `GNI_EpDestroy`, `GNI_EpSetEventData`, `GNI_EpPostData[WId]`, `..Test[ById]`,
//! `..Wait[ById]`, `GNI_PostDataProbe[ById]`, `GNI_PostdataProbeWaitById`,
//! `..Cancel[ById]`.
//!
//! A datagram's out-buffer is the program's: the library records it when the datagram is
//! posted and copies the peer's payload into it when the exchange is collected (a `Test` or
//! `Wait` that sees it completed), as uGNI does.

use std::ffi::c_void;
use std::sync::Mutex;
use std::time::Duration;

use driver::gemini::DatagramResult;
use firmware_spec::gemini::gni::{PostState, ReturnCode};
use firmware_spec::gemini::limits;

use super::ptr::{bytes, deliver, handle, out, put, to_handle};
use super::{Handle, R, call, call_rc, gni_return_t, rc};
use crate::handles::{CQS, EPS, EpObj, NICS, OutBuf};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpCreate(
    nic_hndl: Handle,
    src_cq_hndl: Handle,
    ep_hndl: *mut Handle,
) -> gni_return_t {
    call("GNI_EpCreate", || {
        // SAFETY: the caller passes a writable handle or null.
        let o = unsafe { out(ep_hndl) }.ok_or(ReturnCode::InvalidParam)?;
        let nic = NICS.get(handle(nic_hndl))?;
        let cq = match handle(src_cq_hndl) {
            0 => None,
            h => Some(CQS.get(h)?),
        };
        if cq.as_ref().is_some_and(|c| c.cdm != nic.cdm) {
            return Err(ReturnCode::InvalidParam);
        }
        let ep = nic.nic.ep_create(cq.as_ref().map(|c| &c.cq)).map_err(rc)?;
        *o = to_handle(EPS.insert(EpObj {
            ep,
            cdm: nic.cdm,
            out: Mutex::new(None),
        }));
        Ok(())
    })
}

fn ep(h: Handle) -> R<std::sync::Arc<EpObj>> {
    EPS.get(handle(h))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpSetEventData(
    ep_hndl: Handle,
    local_event: u32,
    remote_event: u32,
) -> gni_return_t {
    call("GNI_EpSetEventData", || {
        ep(ep_hndl)?
            .ep
            .set_event_data(local_event, remote_event)
            .map_err(rc)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpBind(
    ep_hndl: Handle,
    remote_addr: u32,
    remote_id: u32,
) -> gni_return_t {
    call("GNI_EpBind", || {
        ep(ep_hndl)?.ep.bind(remote_addr, remote_id).map_err(rc)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpUnbind(ep_hndl: Handle) -> gni_return_t {
    call("GNI_EpUnbind", || ep(ep_hndl)?.ep.unbind().map_err(rc))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpIdle(ep_hndl: Handle) -> gni_return_t {
    call("GNI_EpIdle", || {
        let e = ep(ep_hndl)?;
        if lock(&e.out).is_some() {
            return Err(ReturnCode::NotDone);
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpDestroy(ep_hndl: Handle) -> gni_return_t {
    call("GNI_EpDestroy", || {
        let h = handle(ep_hndl);
        EPS.get(h)?.ep.try_destroy().map_err(rc)?;
        EPS.remove(h);
        Ok(())
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Post a datagram of `data`, the answer going to `out` (at most `out_len` bytes).
fn post(e: &EpObj, id: Option<u64>, data: &[u8], out_buf: *mut c_void, out_len: u16) -> R<()> {
    if data.len() as u64 > limits::DATAGRAM_MAX_SIZE
        || u64::from(out_len) > limits::DATAGRAM_MAX_SIZE
    {
        return Err(ReturnCode::SizeError);
    }
    if out_buf.is_null() && out_len > 0 {
        return Err(ReturnCode::InvalidParam);
    }
    let mut slot = lock(&e.out);
    match id {
        Some(id) => e.ep.post_data_w_id(id, data, usize::from(out_len)),
        None => e.ep.post_data(data, usize::from(out_len)),
    }
    .map_err(rc)?;
    *slot = Some(OutBuf {
        addr: out_buf as usize,
        len: usize::from(out_len),
    });
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpPostData(
    ep_hndl: Handle,
    in_data: *mut c_void,
    data_len: u16,
    out_buf: *mut c_void,
    buf_size: u16,
) -> gni_return_t {
    call("GNI_EpPostData", || {
        // SAFETY: the caller passes `data_len` readable bytes.
        let data = unsafe { bytes(in_data, usize::from(data_len))? };
        let e = ep(ep_hndl)?;
        post(&e, None, data, out_buf, buf_size)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpPostDataWId(
    ep_hndl: Handle,
    in_data: *mut c_void,
    data_len: u16,
    out_buf: *mut c_void,
    buf_size: u16,
    datagram_id: u64,
) -> gni_return_t {
    call("GNI_EpPostDataWId", || {
        // SAFETY: the caller passes `data_len` readable bytes.
        let data = unsafe { bytes(in_data, usize::from(data_len))? };
        let e = ep(ep_hndl)?;
        post(&e, Some(datagram_id), data, out_buf, buf_size)
    })
}

/// The outcome of an exchange for the program: the out-buffer filled when it completed, and
/// the state and peer through the out-parameters.
fn collect(
    e: &EpObj,
    r: &DatagramResult,
    state: Option<&mut u32>,
    addr: Option<&mut u32>,
    id: Option<&mut u32>,
) -> R<()> {
    if r.state != PostState::Pending
        && let Some(o) = lock(&e.out).take()
        && r.state == PostState::Completed
    {
        // SAFETY: uGNI's contract: the out-buffer given when the datagram was posted
        // stays valid until the exchange is collected, which is now.
        unsafe { deliver(o.addr, o.len, &r.data) };
    }
    put(state, r.state.code())?;
    if let Some(a) = addr {
        *a = r.remote_addr;
    }
    if let Some(i) = id {
        *i = r.remote_id;
    }
    Ok(())
}

/// A pending exchange as [`collect`] reports it.
fn pending() -> DatagramResult {
    DatagramResult {
        state: PostState::Pending,
        remote_addr: 0,
        remote_id: 0,
        data: Vec::new(),
        id: None,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpPostDataTest(
    ep_hndl: Handle,
    post_state: *mut u32,
    remote_addr: *mut u32,
    remote_id: *mut u32,
) -> gni_return_t {
    call("GNI_EpPostDataTest", || {
        // SAFETY: the caller passes writable out-parameters or null.
        let (s, a, i) = unsafe { (out(post_state), out(remote_addr), out(remote_id)) };
        let e = ep(ep_hndl)?;
        let r = e.ep.post_data_test().map_err(rc)?.unwrap_or_else(pending);
        collect(&e, &r, s, a, i)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpPostDataTestById(
    ep_hndl: Handle,
    datagram_id: u64,
    post_state: *mut u32,
    remote_addr: *mut u32,
    remote_id: *mut u32,
) -> gni_return_t {
    call("GNI_EpPostDataTestById", || {
        // SAFETY: the caller passes writable out-parameters or null.
        let (s, a, i) = unsafe { (out(post_state), out(remote_addr), out(remote_id)) };
        if datagram_id == u64::MAX {
            return Err(ReturnCode::InvalidParam);
        }
        let e = ep(ep_hndl)?;
        let r =
            e.ep.nic()
                .post_data_test_by_id(datagram_id)
                .map_err(rc)?
                .unwrap_or_else(pending);
        collect(&e, &r, s, a, i)
    })
}

/// A datagram wait's timeout: milliseconds, `u32::MAX` (-1) for none, 0 refused.
fn dgram_timeout(ms: u32) -> R<Option<Duration>> {
    match ms {
        0 => Err(ReturnCode::InvalidParam),
        u32::MAX => Ok(None),
        ms => Ok(Some(Duration::from_millis(u64::from(ms)))),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpPostDataWait(
    ep_hndl: Handle,
    timeout: u32,
    post_state: *mut u32,
    remote_addr: *mut u32,
    remote_id: *mut u32,
) -> gni_return_t {
    call("GNI_EpPostDataWait", || {
        // SAFETY: the caller passes writable out-parameters or null.
        let (s, a, i) = unsafe { (out(post_state), out(remote_addr), out(remote_id)) };
        let t = dgram_timeout(timeout)?;
        let e = ep(ep_hndl)?;
        let r = e.ep.post_data_wait(t).map_err(rc)?;
        collect(&e, &r, s, a, i)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpPostDataWaitById(
    ep_hndl: Handle,
    datagram_id: u64,
    timeout: u32,
    post_state: *mut u32,
    remote_addr: *mut u32,
    remote_id: *mut u32,
) -> gni_return_t {
    call("GNI_EpPostDataWaitById", || {
        // SAFETY: the caller passes writable out-parameters or null.
        let (s, a, i) = unsafe { (out(post_state), out(remote_addr), out(remote_id)) };
        if datagram_id == u64::MAX {
            return Err(ReturnCode::InvalidParam);
        }
        let t = dgram_timeout(timeout)?;
        let e = ep(ep_hndl)?;
        let r =
            e.ep.nic()
                .post_data_wait_by_id(datagram_id, t)
                .map_err(rc)?;
        collect(&e, &r, s, a, i)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_PostDataProbe(
    nic_hndl: Handle,
    remote_addr: *mut u32,
    remote_id: *mut u32,
) -> gni_return_t {
    call("GNI_PostDataProbe", || {
        // SAFETY: the caller passes writable out-parameters.
        let (a, i) = unsafe { (out(remote_addr), out(remote_id)) };
        if a.is_none() || i.is_none() {
            return Err(ReturnCode::InvalidParam);
        }
        let (addr, id) = NICS
            .get(handle(nic_hndl))?
            .nic
            .post_data_probe()
            .map_err(rc)?;
        put(a, addr)?;
        put(i, id)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_PostDataProbeById(
    nic_hndl: Handle,
    datagram_id: *mut u64,
) -> gni_return_t {
    call("GNI_PostDataProbeById", || {
        // SAFETY: the caller passes a writable id.
        let o = unsafe { out(datagram_id) }.ok_or(ReturnCode::InvalidParam)?;
        *o = NICS
            .get(handle(nic_hndl))?
            .nic
            .post_data_probe_by_id()
            .map_err(rc)?;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_PostdataProbeWaitById(
    nic_hndl: Handle,
    timeout: u32,
    datagram_id: *mut u64,
) -> gni_return_t {
    call_rc("GNI_PostdataProbeWaitById", || {
        // SAFETY: the caller passes a writable id.
        let o = unsafe { out(datagram_id) }.ok_or(ReturnCode::InvalidParam)?;
        let nic = NICS.get(handle(nic_hndl))?;
        let t = (timeout != u32::MAX).then(|| Duration::from_millis(u64::from(timeout)));
        let got = nic
            .nic
            .poll_until(t, || match nic.nic.post_data_probe_by_id() {
                Ok(id) => Ok(Some(id)),
                Err(e) if e.rc() == ReturnCode::NoMatch => Ok(None),
                Err(e) => Err(e),
            });
        match got {
            Ok(id) => {
                *o = id;
                Ok(ReturnCode::Success)
            }
            Err(e) => Err(rc(e)),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpPostDataCancel(ep_hndl: Handle) -> gni_return_t {
    call("GNI_EpPostDataCancel", || {
        let e = ep(ep_hndl)?;
        e.ep.post_data_cancel().map_err(rc)?;
        lock(&e.out).take();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpPostDataCancelById(
    ep_hndl: Handle,
    datagram_id: u64,
) -> gni_return_t {
    call("GNI_EpPostDataCancelById", || {
        if datagram_id == u64::MAX {
            return Err(ReturnCode::InvalidParam);
        }
        let e = ep(ep_hndl)?;
        e.ep.nic().post_data_cancel_by_id(datagram_id).map_err(rc)?;
        lock(&e.out).take();
        Ok(())
    })
}
