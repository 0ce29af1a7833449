//! Communication domains: `GNI_CdmCreate`, `GNI_CdmAttach`, `GNI_CdmDestroy`,
//! `GNI_CdmGetNicAddress`, `GNI_CdmCheckpoint`, `GNI_CdmResume`.

use std::sync::Mutex;

use firmware_spec::gemini::gni::{CdmMode, ReturnCode};
use userlib::gni::Cdm;

use super::ptr::{handle, out, put, to_handle};
use super::{Handle, R, call, gni_return_t, rc};
use crate::handles::{CDMS, CdmObj, NICS, NicObj, forget_domain};
use crate::host;

/// The process's Gemini, `GNI_RC_ERROR_RESOURCE` (with the reason on stderr) when it cannot
/// be had.
pub(crate) fn process() -> R<std::sync::Arc<host::Process>> {
    host::process().map_err(|e| {
        eprintln!("nicemu-ugni: no Gemini for this process: {e}");
        ReturnCode::ErrorResource
    })
}

fn create(inst_id: u32, ptag: u8, cookie: u32, modes: u32) -> R<usize> {
    if modes & !CdmMode::MASK != 0 {
        return Err(ReturnCode::InvalidParam);
    }
    let modes = CdmMode::from_bits(modes).map_err(|_| ReturnCode::InvalidParam)?;
    let p = process()?;
    let client = p.open().ok_or(ReturnCode::ErrorResource)?;
    let cdm = Cdm::create(&client, inst_id, ptag, cookie, modes).map_err(rc)?;
    Ok(CDMS.insert(CdmObj {
        cdm: Mutex::new(Some(cdm)),
        process: p,
        nic: Mutex::new(None),
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CdmCreate(
    inst_id: u32,
    ptag: u8,
    cookie: u32,
    modes: u32,
    cdm_hndl: *mut Handle,
) -> gni_return_t {
    call("GNI_CdmCreate", || {
        // SAFETY: the caller passes a writable handle or null.
        let o = unsafe { out(cdm_hndl) }.ok_or(ReturnCode::InvalidParam)?;
        let h = create(inst_id, ptag, cookie, modes)?;
        *o = to_handle(h);
        Ok(())
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn destroy(h: usize) -> R<()> {
    let obj = CDMS.get(h)?;
    let cdm = lock(&obj.cdm).take().ok_or(ReturnCode::InvalidParam)?;
    forget_domain(h);
    CDMS.remove(h);
    let res = cdm.destroy().map_err(rc);
    if CDMS.len() == 0 && obj.process.report {
        report(&obj.process);
    }
    res
}

/// The counter report (`NICEMU_UGNI_COUNTER_REPORT=1`): one line on stderr with the NIC's
/// counters, the fabric's and the library's.
fn report(p: &host::Process) {
    let (rank, size) = p.rank_and_size();
    let mut all = p.counters();
    all.extend(crate::stats::all());
    let list: Vec<String> = all.iter().map(|(k, v)| format!("{k}={v}")).collect();
    eprintln!("nicemu-ugni: rank {rank} of {size}: {}", list.join(" "));
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CdmDestroy(cdm_hndl: Handle) -> gni_return_t {
    call("GNI_CdmDestroy", || destroy(handle(cdm_hndl)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CdmGetNicAddress(
    device_id: u32,
    address: *mut u32,
    cpu_id: *mut u32,
) -> gni_return_t {
    call("GNI_CdmGetNicAddress", || {
        // SAFETY: the caller passes writable `uint32_t`s or null.
        let (a, c) = unsafe { (out(address), out(cpu_id)) };
        let addr = host::nic_address(device_id)
            .map_err(|e| {
                eprintln!("nicemu-ugni: {e}");
                ReturnCode::ErrorResource
            })?
            .ok_or(ReturnCode::NoMatch)?;
        put(a, addr)?;
        put(c, 0)
    })
}

fn attach(h: usize, device_id: u32) -> R<(u32, usize)> {
    let obj = CDMS.get(h)?;
    // uGNI: device 0 (/dev/kgni0) or -1, the nearest NIC; the node has one Gemini.
    let dev = match device_id {
        0 => 0,
        u32::MAX => -1,
        _ => return Err(ReturnCode::NoMatch),
    };
    let mut attached = lock(&obj.nic);
    if attached.is_some() {
        return Err(ReturnCode::InvalidState);
    }
    let nic = lock(&obj.cdm)
        .as_ref()
        .ok_or(ReturnCode::InvalidParam)?
        .attach(dev)
        .map_err(rc)?;
    let addr = nic.address();
    let n = NICS.insert(NicObj { nic, cdm: h });
    *attached = Some(n);
    Ok((addr, n))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CdmAttach(
    cdm_hndl: Handle,
    device_id: u32,
    local_addr: *mut u32,
    nic_hndl: *mut Handle,
) -> gni_return_t {
    call("GNI_CdmAttach", || {
        // SAFETY: the caller passes writable out-parameters or null.
        let (a, n) = unsafe { (out(local_addr), out(nic_hndl)) };
        if a.is_none() || n.is_none() {
            return Err(ReturnCode::InvalidParam);
        }
        let (addr, nic) = attach(handle(cdm_hndl), device_id)?;
        put(a, addr)?;
        put(n, to_handle(nic))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CdmCheckpoint(cdm_hndl: Handle) -> gni_return_t {
    // Nothing to prepare: the emulated device is not closed by a checkpoint.
    call("GNI_CdmCheckpoint", || {
        CDMS.get(handle(cdm_hndl)).map(|_| ())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_CdmResume(cdm_hndl: Handle) -> gni_return_t {
    call("GNI_CdmResume", || CDMS.get(handle(cdm_hndl)).map(|_| ()))
}
