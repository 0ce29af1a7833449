//! Posts: `GNI_PostFma`, `GNI_PostRdma`, `GNI_PostCqWrite`, `GNI_GetCompleted`.
//!
//! The program's descriptor (`gni_post_descriptor_t`) is read as the C image
//! `firmware_spec::gemini::post` defines, its `src_cq_hndl` turned into the CQ it names,
//! and posted with the descriptor's address as the token `GNI_GetCompleted` hands back: the
//! library never keeps the descriptor's contents, only its address, as uGNI (the program
//! keeps the descriptor until its completion is collected). `GNI_GetCompleted` also stores
//! the event's hardware status in the descriptor's `status`.

use std::ffi::c_void;

use firmware_spec::gemini::gni::{PostType, ReturnCode};
use firmware_spec::gemini::post::{C_SIZE, PostDescriptor};

use super::ptr::{handle, out, read, write_at};
use super::{Handle, R, call, call_rc, gni_cq_entry_t, gni_return_t, rc};
use crate::handles::{CQS, EPS};
use crate::stats;

/// Byte offset of `status` in `gni_post_descriptor_t` (firmware_spec's C layout).
const STATUS_OFFSET: usize = 24;
/// Byte offset of `src_cq_hndl`.
const SRC_CQ_OFFSET: usize = 112;

/// The program's descriptor at `p`, with its CQ handle resolved to the CQ's id.
///
/// # Safety
/// `p` is null or points to a readable `gni_post_descriptor_t`.
unsafe fn descriptor(p: *const c_void, cdm: usize) -> R<PostDescriptor> {
    // SAFETY: the function's contract: a whole descriptor at `p`.
    let raw: [u8; C_SIZE] = unsafe { read(p.cast::<[u8; C_SIZE]>())? };
    let mut d = PostDescriptor::from_c_bytes(&raw).map_err(|_| ReturnCode::InvalidParam)?;
    let cq = u64::from_le_bytes(
        raw[SRC_CQ_OFFSET..SRC_CQ_OFFSET + 8]
            .try_into()
            .map_err(|_| ReturnCode::InvalidParam)?,
    );
    d.src_cq_hndl = match cq {
        0 => 0,
        h => {
            let c = CQS.get(h as usize)?;
            if c.cdm != cdm {
                return Err(ReturnCode::InvalidParam);
            }
            u64::from(c.cq.id())
        }
    };
    Ok(d)
}

/// Count a post by kind.
fn count(d: &PostDescriptor) {
    let c = match d.post_type {
        PostType::FmaPut | PostType::FmaPutWSyncflag => &stats::FMA_PUTS,
        PostType::FmaGet | PostType::FmaGetWFlag => &stats::FMA_GETS,
        PostType::Amo | PostType::AmoWFlag => &stats::AMOS,
        PostType::RdmaPut => &stats::RDMA_PUTS,
        PostType::RdmaGet => &stats::RDMA_GETS,
        PostType::CqWrite => &stats::CQ_WRITES,
        PostType::Ce => return,
    };
    c.add(d.length);
}

#[derive(Clone, Copy)]
enum Kind {
    Fma,
    Rdma,
    CqWrite,
}

fn post(name: &str, ep_hndl: Handle, desc: *mut c_void, kind: Kind) -> gni_return_t {
    call(name, || {
        let e = EPS.get(handle(ep_hndl))?;
        // SAFETY: uGNI's contract: the program passes its descriptor.
        let d = unsafe { descriptor(desc, e.cdm)? };
        let token = desc as u64;
        match kind {
            Kind::Fma => e.ep.post_fma_as(&d, token),
            Kind::Rdma => e.ep.post_rdma_as(&d, token),
            Kind::CqWrite => e.ep.post_cq_write_as(&d, token),
        }
        .map_err(rc)?;
        count(&d);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_PostFma(ep_hndl: Handle, post_descr: *mut c_void) -> gni_return_t {
    post("GNI_PostFma", ep_hndl, post_descr, Kind::Fma)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_PostRdma(ep_hndl: Handle, post_descr: *mut c_void) -> gni_return_t {
    post("GNI_PostRdma", ep_hndl, post_descr, Kind::Rdma)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_PostCqWrite(ep_hndl: Handle, post_descr: *mut c_void) -> gni_return_t {
    post("GNI_PostCqWrite", ep_hndl, post_descr, Kind::CqWrite)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetCompleted(
    cq_hndl: Handle,
    event_data: gni_cq_entry_t,
    post_descr: *mut *mut c_void,
) -> gni_return_t {
    call_rc("GNI_GetCompleted", || {
        // SAFETY: the caller passes a writable descriptor pointer.
        let o = unsafe { out(post_descr) }.ok_or(ReturnCode::InvalidParam)?;
        let cq = CQS.get(handle(cq_hndl))?;
        let e = firmware_spec::gemini::cqe::Cqe::from_u64(event_data);
        match cq.cq.get_completed(&e) {
            Ok(c) => {
                let d = c.user as usize as *mut c_void;
                if !d.is_null() {
                    // SAFETY: the token is the address of the program's descriptor, which
                    // uGNI's contract keeps valid until its completion is collected.
                    unsafe { write_at(d, STATUS_OFFSET, c.desc.status) };
                }
                *o = d;
                Ok(c.rc)
            }
            Err(err) => {
                if err.rc() == ReturnCode::DescriptorError {
                    *o = std::ptr::null_mut();
                }
                Err(rc(err))
            }
        }
    })
}
