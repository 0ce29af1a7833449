//! Calls of the API that nicemu's Gemini does not offer, with the answer each gives (after
//! checking the handles it names):
//!
//! - the collective engine (`GNI_Ce*`, `GNI_EpSetCeAttr`): Aries hardware, so
//!   `GNI_RC_ILLEGAL_OP`, as uGNI answers on Gemini;
//! - shared message queues (`GNI_Msgq*`): `GNI_RC_ILLEGAL_OP` (MSGQ needs hugetlbfs-shared
//!   memory between the processes of a node, which processes hosting a node each do not
//!   have); `GNI_MsgqSize` answers, as it only computes;
//! - error event subscription (`GNI_SubscribeErrors` and its calls): `GNI_RC_ILLEGAL_OP`
//!   (transaction errors reach the CQs; kgni keeps no error event queue).

use std::ffi::c_void;

use firmware_spec::gemini::gni::ReturnCode;

use super::ptr::{handle, out, put, read};
use super::{Handle, call, gni_return_t};
use crate::handles::{EPS, NICS};

fn illegal(name: &str) -> gni_return_t {
    call(name, || Err(ReturnCode::IllegalOp))
}

fn nic_then_illegal(name: &str, nic: Handle) -> gni_return_t {
    call(name, || {
        NICS.get(handle(nic))?;
        Err(ReturnCode::IllegalOp)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CeCreate(nic_hndl: Handle, _ce_hndl: *mut Handle) -> gni_return_t {
    nic_then_illegal("GNI_CeCreate", nic_hndl)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CeGetId(_ce_hndl: Handle, _ce_id: *mut u32) -> gni_return_t {
    illegal("GNI_CeGetId")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_EpSetCeAttr(
    ep_hndl: Handle,
    _ce_id: u32,
    _child_id: u32,
    _child_type: u32,
) -> gni_return_t {
    call("GNI_EpSetCeAttr", || {
        EPS.get(handle(ep_hndl))?;
        Err(ReturnCode::IllegalOp)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CeConfigure(
    _ce_hndl: Handle,
    _child_eps: *mut Handle,
    _num_child_eps: u32,
    _parent_ep: Handle,
    _cq_hndl: Handle,
    _modes: u32,
) -> gni_return_t {
    illegal("GNI_CeConfigure")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CeCheckResult(_result: *mut c_void, _length: u32) -> gni_return_t {
    illegal("GNI_CeCheckResult")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CeDestroy(_ce_hndl: Handle) -> gni_return_t {
    illegal("GNI_CeDestroy")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MsgqInit(
    nic_hndl: Handle,
    _rcv_cb: *mut c_void,
    _cb_data: *mut c_void,
    _snd_cq: Handle,
    _attrs: *mut c_void,
    _msgq_hndl: *mut Handle,
) -> gni_return_t {
    nic_then_illegal("GNI_MsgqInit", nic_hndl)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MsgqRelease(_msgq_hndl: Handle) -> gni_return_t {
    illegal("GNI_MsgqRelease")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MsgqIdle(_msgq_hndl: Handle) -> gni_return_t {
    illegal("GNI_MsgqIdle")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MsgqGetConnAttrs(
    _msgq_hndl: Handle,
    _pe_addr: u32,
    _attrs: *mut c_void,
    _attrs_size: *mut u32,
) -> gni_return_t {
    illegal("GNI_MsgqGetConnAttrs")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MsgqConnect(
    _msgq_hndl: Handle,
    _pe_addr: u32,
    _attrs: *mut c_void,
) -> gni_return_t {
    illegal("GNI_MsgqConnect")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MsgqConnRelease(_msgq_hndl: Handle, _pe_addr: u32) -> gni_return_t {
    illegal("GNI_MsgqConnRelease")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MsgqSend(
    _msgq_hndl: Handle,
    _ep_hndl: Handle,
    _hdr: *mut c_void,
    _hdr_len: u32,
    _msg: *mut c_void,
    _msg_len: u32,
    _msg_id: u32,
    _msg_tag: u8,
) -> gni_return_t {
    illegal("GNI_MsgqSend")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MsgqProgress(_msgq_hndl: Handle, _timeout: u32) -> gni_return_t {
    illegal("GNI_MsgqProgress")
}

/// `gni_msgq_attr_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct gni_msgq_attr_t {
    pub max_msg_sz: u32,
    pub smsg_q_sz: u32,
    pub rcv_pool_sz: u32,
    pub num_msgq_eps: u32,
    pub nloc_insts: u32,
    pub modes: u8,
    pub rcv_cq_sz: u32,
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MsgqSize(attrs: *mut gni_msgq_attr_t, size: *mut u32) -> gni_return_t {
    call("GNI_MsgqSize", || {
        // SAFETY: the caller passes readable attributes and a writable size, or null.
        let (a, o) = unsafe { (read(attrs)?, out(size)) };
        if a.max_msg_sz == 0
            || a.max_msg_sz > firmware_spec::gemini::limits::MSGQ_MSG_MAX_SIZE
            || a.nloc_insts == 0
            || a.nloc_insts > firmware_spec::gemini::limits::MSGQ_NODE_INSTS_MAX
        {
            return Err(ReturnCode::InvalidParam);
        }
        // Per local instance: its queue of messages and its receive pool; rounded up to a
        // 2 MiB huge page, as the shared buffer lives on hugetlbfs.
        let per = u64::from(a.smsg_q_sz) * u64::from(a.max_msg_sz) + u64::from(a.rcv_pool_sz);
        let total = per * u64::from(a.nloc_insts);
        let huge = 2u64 << 20;
        let rounded = total.div_ceil(huge).max(1) * huge;
        put(
            o,
            u32::try_from(rounded).map_err(|_| ReturnCode::InvalidParam)?,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SubscribeErrors(
    nic_handle: Handle,
    _device_id: u32,
    _mask: u8,
    _eeq_size: u32,
    _err_handle: *mut Handle,
) -> gni_return_t {
    nic_then_illegal("GNI_SubscribeErrors", nic_handle)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_ReleaseErrors(_err_handle: Handle) -> gni_return_t {
    illegal("GNI_ReleaseErrors")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetErrorMask(_err_handle: Handle, _mask: *mut u8) -> gni_return_t {
    illegal("GNI_GetErrorMask")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SetErrorMask(
    _err_handle: Handle,
    _mask_in: u8,
    _mask_out: *mut u8,
) -> gni_return_t {
    illegal("GNI_SetErrorMask")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetErrorEvent(
    _err_handle: Handle,
    _event: *mut c_void,
) -> gni_return_t {
    illegal("GNI_GetErrorEvent")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_WaitErrorEvents(
    _err_handle: Handle,
    _events: *mut c_void,
    _events_size: u32,
    _timeout: u32,
    _num_events: *mut u32,
) -> gni_return_t {
    illegal("GNI_WaitErrorEvents")
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SetErrorPtag(_err_handle: Handle, _ptag: u8) -> gni_return_t {
    illegal("GNI_SetErrorPtag")
}
