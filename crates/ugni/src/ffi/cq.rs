//! Completion queues: `GNI_CqCreate`, `GNI_CqDestroy`, `GNI_CqGetEvent`, `GNI_CqWaitEvent`,
//! `GNI_CqVectorWaitEvent`, `GNI_CqVectorMonitor`, `GNI_CqTestEvent`,
//! `GNI_CqInterruptMask`/`Unmask`, `GNI_CqErrorStr`, `GNI_CqErrorRecoverable`, and the
//! `gni_cq_*` accessors behind the `GNI_CQ_*` macros.
//!
//! Overrun: an event lost to a full CQ makes the next `GNI_CqGetEvent` return
//! `GNI_RC_ERROR_RESOURCE` with `GNI_CQ_OVERRUN` set; the library then clears the CQ's
//! sticky overrun flag itself (uGNI has no call for it; its users recover by draining the CQ
//! and polling every mailbox, as Open MPI and the libfabric provider do), so the events
//! after that one are `GNI_RC_SUCCESS` again.

use std::ffi::c_void;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use firmware_spec::gemini::cqe::Cqe;
use firmware_spec::gemini::gni::{CqMode, ReturnCode};
use userlib::gni::CqEvent;
use userlib::gni::cq as ucq;

use super::ptr::{bytes_mut, handle, out, put, to_handle};
use super::{Handle, R, call, call_rc, gni_cq_entry_t, gni_return_t, rc};
use crate::handles::{CQS, CqObj, Handler, NICS};

/// A C CQ event handler.
pub type gni_cq_handler_t = Option<unsafe extern "C" fn(*mut gni_cq_entry_t, *mut c_void)>;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqCreate(
    nic_hndl: Handle,
    entry_count: u32,
    delay_count: u32,
    mode: u32,
    handler: gni_cq_handler_t,
    context: *mut c_void,
    cq_hndl: *mut Handle,
) -> gni_return_t {
    call("GNI_CqCreate", || {
        // SAFETY: the caller passes a writable handle or null.
        let o = unsafe { out(cq_hndl) }.ok_or(ReturnCode::InvalidParam)?;
        let nic = NICS.get(handle(nic_hndl))?;
        let mode = CqMode::from_bits(mode).map_err(|_| ReturnCode::InvalidParam)?;
        if mode.contains(CqMode::EMULATED) {
            // The library's own mode, not for applications.
            return Err(ReturnCode::InvalidParam);
        }
        let cq = nic
            .nic
            .cq_create(entry_count, delay_count, mode)
            .map_err(rc)?;
        let h = CQS.insert(CqObj {
            cq,
            nic: nic.nic.clone(),
            cdm: nic.cdm,
            handler: handler.map(|func| Handler {
                func,
                context: context as usize,
            }),
            masked: Mutex::new(0),
        });
        *o = to_handle(h);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqDestroy(cq_hndl: Handle) -> gni_return_t {
    call("GNI_CqDestroy", || {
        let h = handle(cq_hndl);
        let cq = CQS.get(h)?;
        cq.cq.try_destroy().map_err(rc)?;
        CQS.remove(h);
        Ok(())
    })
}

/// Run the CQ's handler, if it has one, for an event taken from it.
fn run_handler(cq: &CqObj, entry: &mut gni_cq_entry_t) {
    if let Some(h) = cq.handler {
        // SAFETY: uGNI's contract: the handler the program registered with GNI_CqCreate
        // takes the entry and the context it gave.
        unsafe { (h.func)(entry, h.context as *mut c_void) }
    }
}

/// Deliver an event taken from `cq` to the program: the entry, and its return code.
fn deliver(cq: &CqObj, ev: CqEvent, event_data: Option<&mut gni_cq_entry_t>) -> R<ReturnCode> {
    let mut raw = ev.cqe.to_u64().map_err(|_| ReturnCode::InvalidState)?;
    if ev.rc == ReturnCode::ErrorResource && ev.cqe.overrun != 0 {
        // Reported once: the CQ takes events normally again (module doc).
        cq.cq.clear_overrun().map_err(rc)?;
    }
    run_handler(cq, &mut raw);
    put(event_data, raw)?;
    Ok(ev.rc)
}

/// `GNI_CqGetEvent`. On an empty CQ the calling thread first lends itself to the device
/// once (`Nic::progress`: it takes the packets other processes sent to this process's node
/// off the fabric and runs the NIC's due work inline, or yields the CPU) and looks again.
/// uGNI programs poll CQs in a tight loop and never wait in the library (Open MPI's ugni BTL
/// calls `GNI_CqGetEvent` on its CQs from `opal_progress`), so without this every message
/// would wait for the node's own threads to be scheduled next to two spinning processes:
/// milliseconds per message instead of microseconds.
fn get_event(cq: &CqObj, event_data: Option<&mut gni_cq_entry_t>) -> R<ReturnCode> {
    if let Some(ev) = cq.cq.get_event().map_err(rc)? {
        return deliver(cq, ev, event_data);
    }
    if cq.nic.progress()
        && let Some(ev) = cq.cq.get_event().map_err(rc)?
    {
        return deliver(cq, ev, event_data);
    }
    Ok(ReturnCode::NotDone)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqGetEvent(
    cq_hndl: Handle,
    event_data: *mut gni_cq_entry_t,
) -> gni_return_t {
    call_rc("GNI_CqGetEvent", || {
        // SAFETY: the caller passes a writable entry or null.
        let o = unsafe { out(event_data) }.ok_or(ReturnCode::InvalidParam)?;
        let cq = CQS.get(handle(cq_hndl))?;
        get_event(&cq, Some(o))
    })
}

/// A timeout in milliseconds, `u64::MAX` (-1) for none.
fn timeout_of(ms: u64) -> Option<Duration> {
    (ms != u64::MAX).then(|| Duration::from_millis(ms))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqWaitEvent(
    cq_hndl: Handle,
    timeout: u64,
    event_data: *mut gni_cq_entry_t,
) -> gni_return_t {
    call_rc("GNI_CqWaitEvent", || {
        // SAFETY: the caller passes a writable entry or null.
        let o = unsafe { out(event_data) }.ok_or(ReturnCode::InvalidParam)?;
        let cq = CQS.get(handle(cq_hndl))?;
        if !cq.cq.mode().contains(CqMode::BLOCKING) {
            return Err(ReturnCode::ErrorResource);
        }
        match cq.cq.wait_event(timeout_of(timeout)) {
            Ok(ev) => deliver(&cq, ev, Some(o)),
            Err(e) => Err(rc(e)),
        }
    })
}

/// The CQs of a vector, which must all be BLOCKING (`GNI_RC_ERROR_RESOURCE` else).
fn vector(hs: &[Handle]) -> R<Vec<std::sync::Arc<CqObj>>> {
    if hs.is_empty() {
        return Err(ReturnCode::InvalidParam);
    }
    let cqs = hs
        .iter()
        .map(|&h| CQS.get(handle(h)))
        .collect::<R<Vec<_>>>()?;
    if cqs.iter().any(|c| !c.cq.mode().contains(CqMode::BLOCKING)) {
        return Err(ReturnCode::ErrorResource);
    }
    Ok(cqs)
}

/// Poll `cqs` until `ready` finds one, letting the device progress; the index.
fn wait_any(
    cqs: &[std::sync::Arc<CqObj>],
    timeout: Option<Duration>,
    ready: impl Fn(&CqObj) -> R<bool>,
) -> R<usize> {
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    loop {
        for (i, c) in cqs.iter().enumerate() {
            if ready(c)? {
                return Ok(i);
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(ReturnCode::Timeout);
        }
        if !cqs[0].nic.progress() {
            std::thread::yield_now();
        }
    }
}

/// `n` CQ handles at `p`.
///
/// # Safety
/// `p` is null or points to `n` handles.
unsafe fn handles<'a>(p: *const Handle, n: u32) -> R<&'a [Handle]> {
    if p.is_null() || n == 0 {
        return Err(ReturnCode::InvalidParam);
    }
    // SAFETY: the function's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqVectorWaitEvent(
    cq_hndls: *const Handle,
    num_cqs: u32,
    timeout: u64,
    event_data: *mut gni_cq_entry_t,
    which: *mut u32,
) -> gni_return_t {
    call_rc("GNI_CqVectorWaitEvent", || {
        // SAFETY: the caller passes `num_cqs` handles and writable out-parameters.
        let (hs, e, w) = unsafe { (handles(cq_hndls, num_cqs)?, out(event_data), out(which)) };
        let e = e.ok_or(ReturnCode::InvalidParam)?;
        let cqs = vector(hs)?;
        let i = wait_any(&cqs, timeout_of(timeout), |c| c.cq.test_event().map_err(rc))?;
        put(w, i as u32)?;
        get_event(&cqs[i], Some(e))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqVectorMonitor(
    cq_hndls: *const Handle,
    num_cqs: u32,
    timeout: u64,
    which: *mut u32,
) -> gni_return_t {
    call("GNI_CqVectorMonitor", || {
        // SAFETY: the caller passes `num_cqs` handles and a writable index.
        let (hs, w) = unsafe { (handles(cq_hndls, num_cqs)?, out(which)) };
        let cqs = vector(hs)?;
        let i = wait_any(&cqs, timeout_of(timeout), |c| c.cq.test_event().map_err(rc))?;
        put(w, i as u32)
    })
}

fn mask(cq_hndl: Handle, delta: i32) -> R<()> {
    let cq = CQS.get(handle(cq_hndl))?;
    if !cq.cq.mode().contains(CqMode::BLOCKING) {
        return Err(ReturnCode::InvalidParam);
    }
    let mut m = cq
        .masked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *m = match delta {
        1 => m.checked_add(1).ok_or(ReturnCode::NotDone)?,
        _ => m.checked_sub(1).ok_or(ReturnCode::NotDone)?,
    };
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqInterruptMask(cq_hndl: Handle) -> gni_return_t {
    call("GNI_CqInterruptMask", || mask(cq_hndl, 1))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqInterruptUnmask(cq_hndl: Handle) -> gni_return_t {
    call("GNI_CqInterruptUnmask", || mask(cq_hndl, -1))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqTestEvent(cq_hndl: Handle) -> gni_return_t {
    call_rc("GNI_CqTestEvent", || {
        let cq = CQS.get(handle(cq_hndl))?;
        if cq.cq.test_event().map_err(rc)? {
            return Ok(ReturnCode::Success);
        }
        match cq.cq.overrun().map_err(rc)? {
            (true, _) => Ok(ReturnCode::ErrorResource),
            _ => Ok(ReturnCode::NotDone),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqErrorStr(
    entry: gni_cq_entry_t,
    buffer: *mut c_void,
    len: u32,
) -> gni_return_t {
    call("GNI_CqErrorStr", || {
        if buffer.is_null() || len == 0 {
            return Err(ReturnCode::InvalidParam);
        }
        let text = ucq::error_str(&Cqe::from_u64(entry));
        let need = text.len() + 1;
        if need > len as usize {
            return Err(ReturnCode::SizeError);
        }
        // SAFETY: the caller passes `len` writable bytes.
        let b = unsafe { bytes_mut(buffer, need)? };
        b[..text.len()].copy_from_slice(text.as_bytes());
        b[text.len()] = 0;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CqErrorRecoverable(
    entry: gni_cq_entry_t,
    recoverable: *mut u32,
) -> gni_return_t {
    call("GNI_CqErrorRecoverable", || {
        // SAFETY: the caller passes a writable flag or null.
        let o = unsafe { out(recoverable) };
        let e = Cqe::from_u64(entry);
        if e.status().is_err() {
            return Err(ReturnCode::InvalidState);
        }
        put(o, u32::from(ucq::error_recoverable(&e)))
    })
}

// The accessors: our CQE layout (docs/gemini-formats.md): data bits 0-47 (`inst_id` and
// `msg_id` bits 0-31, `tid` 32-47), type 48-49, remote overrun 50, source 56-58, status
// 59-62, overrun 63.

fn cqe(e: gni_cq_entry_t) -> Cqe {
    Cqe::from_u64(e)
}

fn set(e: *mut gni_cq_entry_t, f: impl FnOnce(&mut Cqe)) {
    // SAFETY: the caller of the setter passes a writable entry (the macros pass `&entry`);
    // null is ignored.
    if let Some(p) = unsafe { out(e) } {
        let mut c = Cqe::from_u64(*p);
        f(&mut c);
        if let Ok(v) = c.to_u64() {
            *p = v;
        }
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_data(e: gni_cq_entry_t) -> u64 {
    cqe(e).data()
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_source(e: gni_cq_entry_t) -> u64 {
    cqe(e).source
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_status(e: gni_cq_entry_t) -> u64 {
    cqe(e).status
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_info(e: gni_cq_entry_t) -> u64 {
    // The hardware part of the entry (source, status, overrun).
    e >> 56
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_overrun(e: gni_cq_entry_t) -> u64 {
    cqe(e).overrun
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_rem_overrun(e: gni_cq_entry_t) -> u64 {
    cqe(e).rem_overrun
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_inst_id(e: gni_cq_entry_t) -> u64 {
    u64::from(ucq::get_inst_id(&cqe(e)))
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_rem_inst_id(e: gni_cq_entry_t) -> u64 {
    u64::from(ucq::get_rem_inst_id(&cqe(e)))
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_tid(e: gni_cq_entry_t) -> u64 {
    u64::from(ucq::get_tid(&cqe(e)))
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_msg_id(e: gni_cq_entry_t) -> u64 {
    u64::from(ucq::get_msg_id(&cqe(e)))
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_type(e: gni_cq_entry_t) -> u64 {
    cqe(e).event_type
}
// Aries (DLA, collective engine) fields: always 0 on Gemini.
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_block_id(_e: gni_cq_entry_t) -> u64 {
    0
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_unsuccessful_cnt(_e: gni_cq_entry_t) -> u64 {
    0
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_marker_id(_e: gni_cq_entry_t) -> u64 {
    0
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_failed_enqueue_cnt(_e: gni_cq_entry_t) -> u64 {
    0
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_ce_id(_e: gni_cq_entry_t) -> u64 {
    0
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_reductn_id(_e: gni_cq_entry_t) -> u64 {
    0
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_get_trans_type(_e: gni_cq_entry_t) -> u64 {
    0
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_status_dla_overflow(_e: gni_cq_entry_t) -> u32 {
    0
}
#[unsafe(no_mangle)]
pub extern "C" fn gni_cq_bte_enq_status(_e: gni_cq_entry_t) -> u32 {
    0
}
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gni_cq_set_inst_id(e: *mut gni_cq_entry_t, v: u64) {
    set(e, |c| c.data = (c.data & !0xFFFF_FFFF) | (v & 0xFFFF_FFFF));
}
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gni_cq_set_rem_inst_id(e: *mut gni_cq_entry_t, v: u64) {
    set(e, |c| c.data = (c.data & !0xFFFF_FFFF) | (v & 0xFFFF_FFFF));
}
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gni_cq_set_msg_id(e: *mut gni_cq_entry_t, v: u64) {
    set(e, |c| c.data = (c.data & !0xFFFF_FFFF) | (v & 0xFFFF_FFFF));
}
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gni_cq_set_tid(e: *mut gni_cq_entry_t, v: u64) {
    set(e, |c| {
        c.data = (c.data & 0xFFFF_FFFF) | ((v & 0xFFFF) << 32)
    });
}
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gni_cq_set_type(e: *mut gni_cq_entry_t, v: u64) {
    set(e, |c| c.event_type = v & 3);
}
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gni_cq_clr_status(e: *mut gni_cq_entry_t) {
    set(e, |c| c.status = 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use firmware_spec::gemini::cqe::{CqeSource, HwStatus};
    use firmware_spec::gemini::gni::CqEventType;

    #[test]
    fn accessors_and_setters_agree() {
        let mut e: gni_cq_entry_t = 0;
        // SAFETY: `e` is a local entry.
        unsafe {
            gni_cq_set_inst_id(&mut e, 0xDEAD_BEEF);
            gni_cq_set_tid(&mut e, 7);
            gni_cq_set_type(&mut e, CqEventType::Smsg.code() as u64);
        }
        assert_eq!(gni_cq_get_inst_id(e), 0xDEAD_BEEF);
        assert_eq!(gni_cq_get_msg_id(e), 0xDEAD_BEEF);
        assert_eq!(gni_cq_get_tid(e), 7);
        assert_eq!(gni_cq_get_type(e), 1);
        let hw = Cqe::from_hw(CqeSource::Bte, HwStatus::MemBoundsErr, 42)
            .to_u64()
            .unwrap();
        assert_ne!(gni_cq_get_status(hw), 0);
        assert_eq!(gni_cq_get_source(hw), CqeSource::Bte.code() as u64);
        let mut c = hw;
        // SAFETY: `c` is a local entry.
        unsafe { gni_cq_clr_status(&mut c) };
        assert_eq!(gni_cq_get_status(c), 0);
        assert_eq!(gni_cq_get_inst_id(c), 42);
    }
}
