//! Memory: `GNI_MemRegister`, `GNI_MemDeregister`, `GNI_MemHndlQueryAttr`,
//! `GNI_MemRegisterSegments`, `GNI_SetMddResources`, `GNI_RebuildMemHndl`,
//! `GNI_MemQueryHndls`.
//!
//! A registration names the process's own memory by its address; kgni pins it and programs
//! an MDD for it, and the NIC reads and writes it there. An access outside every
//! registration is the NIC's error (an error completion), never a fault of the process.

use firmware_spec::gemini::gni::{MemFlags, ReturnCode};
use firmware_spec::gemini::mdd::MemHandleFlags;

use super::ptr::{handle, out, put, read};
use super::{Handle, call, gni_mem_handle_t, gni_return_t, rc};
use crate::handles::{CQS, NICS};
use crate::stats;

/// `gni_mem_handle_attr_t`.
mod attr {
    pub const READONLY: u32 = 1;
    pub const VMDH: u32 = 2;
    pub const MRT: u32 = 3;
    pub const GART: u32 = 4;
    pub const IOMMU: u32 = 5;
    pub const PCI_IOMMU: u32 = 6;
    pub const CLONE: u32 = 7;
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MemRegister(
    nic_hndl: Handle,
    address: u64,
    length: u64,
    dst_cq_hndl: Handle,
    flags: u32,
    vmdh_index: u32,
    mem_hndl: *mut gni_mem_handle_t,
) -> gni_return_t {
    call("GNI_MemRegister", || {
        // SAFETY: the caller passes a writable handle or null.
        let o = unsafe { out(mem_hndl) }.ok_or(ReturnCode::InvalidParam)?;
        let nic = NICS.get(handle(nic_hndl))?;
        let cq = match handle(dst_cq_hndl) {
            0 => None,
            h => Some(CQS.get(h)?),
        };
        if cq.as_ref().is_some_and(|c| c.cdm != nic.cdm) {
            return Err(ReturnCode::InvalidParam);
        }
        let flags = MemFlags::from_bits(flags).map_err(|_| ReturnCode::InvalidParam)?;
        // `vmdh_index` selects an entry of a vMDH block; kgni refuses USE_VMDH anyway.
        let _ = vmdh_index;
        let h = nic
            .nic
            .mem_register(address, length, cq.as_ref().map(|c| &c.cq), flags)
            .map_err(rc)?;
        stats::REGISTRATIONS.add(length);
        *o = h.into();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MemDeregister(
    nic_hndl: Handle,
    mem_hndl: *mut gni_mem_handle_t,
) -> gni_return_t {
    call("GNI_MemDeregister", || {
        // SAFETY: the caller passes a readable handle or null.
        let h = unsafe { read(mem_hndl)? };
        let nic = NICS.get(handle(nic_hndl))?;
        nic.nic.mem_deregister(&h.into()).map_err(rc)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MemHndlQueryAttr(
    mem_hndl: *mut gni_mem_handle_t,
    attr: u32,
    yesno: *mut i32,
) -> gni_return_t {
    call("GNI_MemHndlQueryAttr", || {
        // SAFETY: the caller passes a readable handle and a writable flag, or null.
        let (h, o) = unsafe { (read(mem_hndl)?, out(yesno)) };
        let info = userlib::gni::mem::handle_info(&h.into()).map_err(rc)?;
        let flags = MemHandleFlags::from_bits(info.flags).unwrap_or(MemHandleFlags::empty());
        let bit = match attr {
            attr::READONLY => MemHandleFlags::READONLY,
            attr::VMDH => MemHandleFlags::VMDH,
            attr::MRT => MemHandleFlags::MRT,
            attr::GART => MemHandleFlags::GART,
            attr::IOMMU => MemHandleFlags::IOMMU,
            attr::PCI_IOMMU => MemHandleFlags::PCI_IOMMU,
            attr::CLONE => MemHandleFlags::CLONE,
            _ => return Err(ReturnCode::InvalidParam),
        };
        put(o, i32::from(flags.contains(bit)))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MemRegisterSegments(
    nic_hndl: Handle,
    _mem_segments: *mut std::ffi::c_void,
    segments_cnt: u32,
    _dst_cq_hndl: Handle,
    _flags: u32,
    _vmdh_index: u32,
    _mem_hndl: *mut gni_mem_handle_t,
) -> gni_return_t {
    call("GNI_MemRegisterSegments", || {
        NICS.get(handle(nic_hndl))?;
        if segments_cnt == 0 {
            return Err(ReturnCode::InvalidParam);
        }
        // Multi-segment registrations (offset addressing) are not modelled by kgni.
        Err(ReturnCode::IllegalOp)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SetMddResources(nic_hndl: Handle, num_entries: u32) -> gni_return_t {
    call("GNI_SetMddResources", || {
        NICS.get(handle(nic_hndl))?;
        if num_entries == 0 {
            return Err(ReturnCode::InvalidParam);
        }
        // vMDH blocks are not modelled by kgni.
        Err(ReturnCode::ErrorResource)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_RebuildMemHndl(
    src_mem_hndl: *mut gni_mem_handle_t,
    _vmdh_index: u32,
    _dst_mem_hndl: *mut gni_mem_handle_t,
) -> gni_return_t {
    call("GNI_RebuildMemHndl", || {
        // SAFETY: the caller passes a readable handle or null.
        let h = unsafe { read(src_mem_hndl)? };
        userlib::gni::mem::handle_info(&h.into()).map_err(rc)?;
        // Only vMDH handles can be rebuilt, and nothing registers them.
        Err(ReturnCode::InvalidState)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_MemQueryHndls(
    nic_hndl: Handle,
    _fd: i32,
    _mem_hndl: *mut gni_mem_handle_t,
    address: *mut u64,
    length: *mut u64,
) -> gni_return_t {
    call("GNI_MemQueryHndls", || {
        // SAFETY: the caller passes writable out-parameters or null.
        let (a, l) = unsafe { (out(address), out(length)) };
        NICS.get(handle(nic_hndl))?;
        // Walking the registrations is a debugging call kgni does not offer here.
        if let Some(a) = a {
            *a = 0;
        }
        if let Some(l) = l {
            *l = 0;
        }
        Err(ReturnCode::NoMatch)
    })
}
