//! Short messages: `GNI_SmsgBufferSizeNeeded`, `GNI_SmsgInit`, `GNI_SmsgSend[WTag]`,
//! `GNI_SmsgGetNext[WTag]`, `GNI_SmsgRelease`, `GNI_SmsgSetDeliveryMode`,
//! `GNI_SmsgSetMaxRetrans`.
//!
//! The mailboxes are the program's own registered memory (`gni_smsg_attr_t`); a message
//! `GNI_SmsgGetNext` returns is a pointer into the local mailbox, valid until
//! `GNI_SmsgRelease` (the layout of a mailbox is the library's, docs/gemini-formats.md).

use std::ffi::c_void;

use firmware_spec::gemini::gni::{DlvrMode, ReturnCode, SmsgType};
use firmware_spec::gemini::limits;
use userlib::gni::SmsgAttr;

use super::ptr::{bytes, handle, out, put, read};
use super::{Handle, R, call, call_rc, gni_return_t, gni_smsg_attr_t, rc};
use crate::handles::{EPS, NICS};
use crate::stats;

fn attr(a: &gni_smsg_attr_t) -> R<SmsgAttr> {
    Ok(SmsgAttr {
        msg_type: SmsgType::try_from(a.msg_type).map_err(|_| ReturnCode::InvalidParam)?,
        msg_buffer: a.msg_buffer,
        buff_size: a.buff_size,
        mem_hndl: a.mem_hndl.into(),
        mbox_offset: a.mbox_offset,
        mbox_maxcredit: a.mbox_maxcredit,
        msg_maxsize: a.msg_maxsize,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SmsgBufferSizeNeeded(
    smsg_attr: *mut gni_smsg_attr_t,
    size: *mut u32,
) -> gni_return_t {
    call("GNI_SmsgBufferSizeNeeded", || {
        // SAFETY: the caller passes readable attributes and a writable size, or null.
        let (a, o) = unsafe { (read(smsg_attr)?, out(size)) };
        let n = userlib::gni::smsg::buffer_size_needed(&attr(&a)?).map_err(rc)?;
        put(o, n)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SmsgInit(
    ep_hndl: Handle,
    local_smsg_attr: *mut gni_smsg_attr_t,
    remote_smsg_attr: *mut gni_smsg_attr_t,
) -> gni_return_t {
    call("GNI_SmsgInit", || {
        // SAFETY: the caller passes readable attributes or null.
        let (l, r) = unsafe { (read(local_smsg_attr)?, read(remote_smsg_attr)?) };
        let e = EPS.get(handle(ep_hndl))?;
        e.ep.smsg_init(&attr(&l)?, &attr(&r)?).map_err(rc)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SmsgSetDeliveryMode(
    nic_handle: Handle,
    dlvr_mode: u16,
) -> gni_return_t {
    call("GNI_SmsgSetDeliveryMode", || {
        let nic = NICS.get(handle(nic_handle))?;
        let mode = DlvrMode::from_bits(dlvr_mode).map_err(|_| ReturnCode::InvalidParam)?;
        nic.nic.smsg_set_delivery_mode(mode);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SmsgSetMaxRetrans(
    nic_handle: Handle,
    max_retrans: u16,
) -> gni_return_t {
    call("GNI_SmsgSetMaxRetrans", || {
        NICS.get(handle(nic_handle))?
            .nic
            .smsg_set_max_retrans(u32::from(max_retrans));
        Ok(())
    })
}

fn send(
    ep_hndl: Handle,
    header: *mut c_void,
    header_length: u32,
    data: *mut c_void,
    data_length: u32,
    msg_id: u32,
    tag: u8,
) -> R<()> {
    let total = u64::from(header_length) + u64::from(data_length);
    if total > u64::from(limits::SMSG_MAX_SIZE) {
        return Err(ReturnCode::ErrorResource);
    }
    // SAFETY: uGNI's contract: `header_length` bytes at `header`, `data_length` at `data`.
    let (h, d) = unsafe {
        (
            bytes(header, header_length as usize)?,
            bytes(data, data_length as usize)?,
        )
    };
    EPS.get(handle(ep_hndl))?
        .ep
        .smsg_send_w_tag(h, d, msg_id, tag)
        .map_err(rc)?;
    stats::SMSG_SENDS.add(total);
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SmsgSend(
    ep_hndl: Handle,
    header: *mut c_void,
    header_length: u32,
    data: *mut c_void,
    data_length: u32,
    msg_id: u32,
) -> gni_return_t {
    call("GNI_SmsgSend", || {
        send(ep_hndl, header, header_length, data, data_length, msg_id, 0)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SmsgSendWTag(
    ep_hndl: Handle,
    header: *mut c_void,
    header_length: u32,
    data: *mut c_void,
    data_length: u32,
    msg_id: u32,
    tag: u8,
) -> gni_return_t {
    call("GNI_SmsgSendWTag", || {
        send(
            ep_hndl,
            header,
            header_length,
            data,
            data_length,
            msg_id,
            tag,
        )
    })
}

fn get_next(ep_hndl: Handle, header: Option<&mut *mut c_void>, tag: u8) -> R<(ReturnCode, u8)> {
    let header = header.ok_or(ReturnCode::InvalidParam)?;
    let e = EPS.get(handle(ep_hndl))?;
    match e.ep.smsg_get_next_in_place(tag).map_err(rc)? {
        Some(m) => {
            *header = std::ptr::with_exposed_provenance_mut(m.va as usize);
            Ok((ReturnCode::Success, m.tag))
        }
        None => Ok((ReturnCode::NotDone, tag)),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SmsgGetNext(
    ep_hndl: Handle,
    header: *mut *mut c_void,
) -> gni_return_t {
    call_rc("GNI_SmsgGetNext", || {
        // SAFETY: the caller passes a writable pointer.
        let h = unsafe { out(header) };
        get_next(ep_hndl, h, limits::SMSG_ANY_TAG).map(|(rc, _)| rc)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SmsgGetNextWTag(
    ep_hndl: Handle,
    header: *mut *mut c_void,
    tag: *mut u8,
) -> gni_return_t {
    call_rc("GNI_SmsgGetNextWTag", || {
        // SAFETY: the caller passes a writable pointer and tag.
        let (h, t) = unsafe { (out(header), out(tag)) };
        let t = t.ok_or(ReturnCode::InvalidParam)?;
        let (code, got) = get_next(ep_hndl, h, *t)?;
        if code == ReturnCode::Success {
            *t = got;
        }
        Ok(code)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SmsgRelease(ep_hndl: Handle) -> gni_return_t {
    call("GNI_SmsgRelease", || {
        EPS.get(handle(ep_hndl))?.ep.smsg_release().map_err(rc)
    })
}
