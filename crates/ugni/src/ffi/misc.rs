//! Devices, versions, jobs, resources and statistics: `GNI_GetNumLocalDevices`,
//! `GNI_GetLocalDeviceIds`, `GNI_GetVersion`, `GNI_GetVersionInformation`,
//! `GNI_GetDeviceType`, `GNI_GetDevResInfo`, `GNI_GetJobResInfo`, `GNI_GetNttGran`,
//! `GNI_GetPtag`, `GNI_GetNicStat`, `GNI_ResetNicStat`, `GNI_ConfigureNTT`,
//! `GNI_ConfigureJob`, `GNI_ConfigureNTTandJob`, `GNI_SuspendJob`, `GNI_ResumeJob`.
//!
//! Each process has one Gemini, device 0. The launcher's calls (`GNI_ConfigureJob`,
//! `GNI_ConfigureNTT`) are privileged kgni requests; the process that hosts the emulated
//! node is its administrator, so they go through a privileged client of the node: a job
//! configured with them (another ptag and cookie) can then be attached to, as under ALPS.

use std::ffi::c_char;
use std::sync::{Mutex, PoisonError};

use driver::gemini::JobConfig;
use firmware_spec::gemini::gni::{JobLimits, NicDevice, ReturnCode, VERSION};
use firmware_spec::gemini::limits;

use super::ptr::{handle, out, put, read};
use super::{GNI_NUM_STATS, Handle, R, call, gni_return_t};
use crate::handles::NICS;
use crate::host;

/// The one device of a process.
const DEVICE: u32 = 0;

fn device(id: u32) -> R<()> {
    if id == DEVICE {
        Ok(())
    } else {
        Err(ReturnCode::NoMatch)
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetNumLocalDevices(num_devices: *mut i32) -> gni_return_t {
    call("GNI_GetNumLocalDevices", || {
        // SAFETY: the caller passes a writable count or null.
        let o = unsafe { out(num_devices) };
        put(o, 1)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetLocalDeviceIds(len: i32, device_ids: *mut i32) -> gni_return_t {
    call("GNI_GetLocalDeviceIds", || {
        if len < 1 {
            return Err(ReturnCode::InvalidParam);
        }
        // SAFETY: the caller passes at least `len` (>= 1) writable ids.
        put(unsafe { out(device_ids) }, DEVICE as i32)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetVersion(version: *mut u32) -> gni_return_t {
    // SAFETY: the caller passes a writable version or null.
    call("GNI_GetVersion", || put(unsafe { out(version) }, VERSION))
}

/// `gni_version_info_t`.
#[repr(C)]
pub struct gni_version_info_t {
    pub ugni_version: u32,
    pub ugni_svn_revision: u32,
    pub ugni_build_string: [c_char; 80],
    pub kgni_version: u32,
    pub kgni_svn_revision: u32,
    pub kgni_build_string: [c_char; 80],
}

fn c_string(s: &str) -> [c_char; 80] {
    let mut b = [0 as c_char; 80];
    for (d, &c) in b.iter_mut().zip(s.as_bytes().iter().take(79)) {
        *d = c as c_char;
    }
    b
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetVersionInformation(
    version_info: *mut gni_version_info_t,
) -> gni_return_t {
    call("GNI_GetVersionInformation", || {
        // SAFETY: the caller passes a writable structure or null.
        let o = unsafe { out(version_info) };
        let build = concat!("nicemu ", env!("CARGO_PKG_VERSION"));
        put(
            o,
            gni_version_info_t {
                ugni_version: VERSION,
                ugni_svn_revision: 0,
                ugni_build_string: c_string(build),
                kgni_version: VERSION,
                kgni_svn_revision: 0,
                kgni_build_string: c_string(build),
            },
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetDeviceType(dev_type: *mut u32) -> gni_return_t {
    call("GNI_GetDeviceType", || {
        // SAFETY: the caller passes a writable type or null.
        put(unsafe { out(dev_type) }, NicDevice::Gemini.code())
    })
}

/// `gni_dev_res_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct gni_dev_res_desc_t {
    pub available: u64,
    pub reserved: u64,
    pub held: u64,
    pub total: u64,
}

/// `gni_job_res_desc_t`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct gni_job_res_desc_t {
    pub used: u64,
    pub limit: u64,
}

/// `(free, total)` of a Gemini resource kind (`gni_dev_res_t`) on the process's node.
fn resource(kind: u32) -> R<(u64, u64)> {
    let p = super::cdm::process()?;
    let k = p.kgni().ok_or(ReturnCode::ErrorResource)?;
    let f = k.free_counts();
    Ok(match kind {
        1 => (u64::from(f.mdd), limits::MDD_ENTRIES),
        2 => (u64::from(f.mrt), limits::MRT_ENTRIES),
        3 => (u64::from(f.cq), limits::CQ_DESCRIPTORS),
        4 => (u64::from(f.fma), limits::FMA_DESCRIPTORS),
        // Collective engine, DLA: Aries only.
        _ => return Err(ReturnCode::ErrorResource),
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetDevResInfo(
    device_id: u32,
    res_type: u32,
    res_desc: *mut gni_dev_res_desc_t,
) -> gni_return_t {
    call("GNI_GetDevResInfo", || {
        // SAFETY: the caller passes a writable descriptor or null.
        let o = unsafe { out(res_desc) }.ok_or(ReturnCode::InvalidParam)?;
        device(device_id)?;
        let (free, total) = resource(res_type)?;
        *o = gni_dev_res_desc_t {
            available: free,
            reserved: 0,
            held: total - free.min(total),
            total,
        };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetJobResInfo(
    device_id: u32,
    ptag: u8,
    res_type: u32,
    res_desc: *mut gni_job_res_desc_t,
) -> gni_return_t {
    call("GNI_GetJobResInfo", || {
        // SAFETY: the caller passes a writable descriptor or null.
        let o = unsafe { out(res_desc) }.ok_or(ReturnCode::InvalidParam)?;
        device(device_id)?;
        if ptag == 0 {
            return Err(ReturnCode::InvalidParam);
        }
        // gni_job_res_t: MDD 1, MRT 2, CQ 5, FMA 6 (IOMMU, GART, RDMA, CE, DLA, SFMA: not on
        // this node). Usage is node-wide: the job is the only one using the node.
        let kind = match res_type {
            1 => 1,
            2 => 2,
            5 => 3,
            6 => 4,
            _ => return Err(ReturnCode::ErrorResource),
        };
        let (free, total) = resource(kind)?;
        *o = gni_job_res_desc_t {
            used: total - free.min(total),
            limit: total,
        };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetNttGran(device_id: u32, ntt_gran: *mut u32) -> gni_return_t {
    call("GNI_GetNttGran", || {
        device(device_id)?;
        // SAFETY: the caller passes a writable granularity or null.
        put(unsafe { out(ntt_gran) }, 1)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetPtag(device_id: u32, cookie: u32, ptag: *mut u8) -> gni_return_t {
    call("GNI_GetPtag", || {
        // SAFETY: the caller passes a writable ptag or null.
        let o = unsafe { out(ptag) }.ok_or(ReturnCode::InvalidParam)?;
        device(device_id)?;
        let p = super::cdm::process()?;
        let c = jobs(&p).into_iter().find(|j| j.cookie == cookie);
        *o = c.ok_or(ReturnCode::NoMatch)?.ptag;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_GetNicStat(
    nic_hndl: Handle,
    stat: u32,
    value: *mut u32,
) -> gni_return_t {
    call("GNI_GetNicStat", || {
        // SAFETY: the caller passes a writable value or null.
        let o = unsafe { out(value) };
        let nic = NICS.get(handle(nic_hndl))?;
        if stat >= GNI_NUM_STATS {
            return Err(ReturnCode::InvalidParam);
        }
        // GNI_STAT_SMSG_RETRANS_COUNT is kept; the stall counters are not (0).
        let v = match stat {
            4 => nic.nic.smsg_retransmits(),
            _ => 0,
        };
        put(o, u32::try_from(v).unwrap_or(u32::MAX))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_ResetNicStat(nic_hndl: Handle, stat: u32) -> gni_return_t {
    call("GNI_ResetNicStat", || {
        NICS.get(handle(nic_hndl))?;
        if stat >= GNI_NUM_STATS {
            return Err(ReturnCode::InvalidParam);
        }
        // The retransmission count is a running count of the library; it is not reset.
        Err(ReturnCode::IllegalOp)
    })
}

/// `gni_job_limits_t` (nine 32-bit fields; the Gemini members of its unions).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct gni_job_limits_t {
    pub mdd_limit: i32,
    pub mrt_limit: i32,
    pub gart_limit: i32,
    pub fma_limit: i32,
    pub bte_limit: i32,
    pub cq_limit: i32,
    pub ntt_ctrl: i32,
    pub ntt_base: i32,
    pub ntt_size: i32,
}

/// `gni_ntt_descriptor_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct gni_ntt_descriptor_t {
    pub group_size: u32,
    pub granularity: u8,
    /// `uint32_t *table` (the physical PE of each logical PE).
    pub table: *const u32,
    pub flags: u8,
}

/// The NTT a `GNI_ConfigureNTT` set up, for the next `GNI_ConfigureJob` that names it.
static NTT: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// The jobs configured in this process (the launch's, and `GNI_ConfigureJob`'s).
static JOBS: Mutex<Vec<JobConfig>> = Mutex::new(Vec::new());

fn jobs(p: &host::Process) -> Vec<JobConfig> {
    let mut v = vec![JobConfig {
        ptag: p.credentials.ptag,
        cookie: p.credentials.cookie,
        limits: JobLimits::default(),
        ntt: Vec::new(),
    }];
    v.extend(
        JOBS.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned(),
    );
    v
}

/// The NTT table of a descriptor.
///
/// # Safety
/// `d.table` is null or points to `d.group_size` entries.
unsafe fn ntt_table(d: &gni_ntt_descriptor_t) -> R<Vec<u32>> {
    if d.table.is_null() || d.group_size == 0 {
        return Err(ReturnCode::InvalidParam);
    }
    if u64::from(d.group_size) > 2 * limits::NTT_ENTRIES {
        return Err(ReturnCode::ErrorResource);
    }
    // SAFETY: the function's contract.
    Ok(unsafe { std::slice::from_raw_parts(d.table, d.group_size as usize) }.to_vec())
}

fn configure_ntt(table: Vec<u32>) -> R<u32> {
    let mut n = NTT.lock().unwrap_or_else(PoisonError::into_inner);
    if !n.is_empty() {
        // One job NTT per process (its base is 0).
        return Err(ReturnCode::ErrorResource);
    }
    *n = table;
    Ok(0)
}

fn configure_job(ptag: u8, cookie: u32, l: Option<gni_job_limits_t>) -> R<()> {
    let p = super::cdm::process()?;
    let mut limits = JobLimits::default();
    let mut ntt = Vec::new();
    if let Some(l) = l {
        limits = JobLimits {
            mdd_limit: l.mdd_limit,
            mrt_limit: l.mrt_limit,
            gart_limit: l.gart_limit,
            fma_limit: l.fma_limit,
            bte_limit: l.bte_limit,
            cq_limit: l.cq_limit,
            ntt_ctrl: l.ntt_ctrl,
            ntt_base: 0,
            ntt_size: 0,
        };
        if l.ntt_size > 0 {
            let table = NTT.lock().unwrap_or_else(PoisonError::into_inner);
            if l.ntt_base != 0 || l.ntt_size as usize != table.len() {
                return Err(ReturnCode::NoMatch);
            }
            ntt = table.clone();
        }
    }
    let job = JobConfig {
        ptag,
        cookie,
        limits,
        ntt,
    };
    let admin = p.admin().ok_or(ReturnCode::ErrorResource)?;
    admin.configure_job(job.clone()).map_err(|e| e.gni_rc())?;
    JOBS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(job);
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_ConfigureNTT(
    device_id: i32,
    ntt_desc: *mut gni_ntt_descriptor_t,
    ntt_base: *mut u32,
) -> gni_return_t {
    call("GNI_ConfigureNTT", || {
        // SAFETY: the caller passes a readable descriptor and a writable base, or null.
        let (d, o) = unsafe { (read(ntt_desc)?, out(ntt_base)) };
        device(device_id as u32)?;
        // SAFETY: the descriptor's table has `group_size` entries (uGNI's contract).
        let table = unsafe { ntt_table(&d)? };
        put(o, configure_ntt(table)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_ConfigureJob(
    device_id: u32,
    _job_id: u64,
    ptag: u8,
    cookie: u32,
    limits: *mut gni_job_limits_t,
) -> gni_return_t {
    call("GNI_ConfigureJob", || {
        device(device_id)?;
        let l = if limits.is_null() {
            None
        } else {
            // SAFETY: the caller passes readable limits.
            Some(unsafe { read(limits)? })
        };
        configure_job(ptag, cookie, l)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_ConfigureNTTandJob(
    device_id: i32,
    _job_id: u64,
    ptag: u8,
    cookie: u32,
    limits: *mut gni_job_limits_t,
    ntt_desc: *mut gni_ntt_descriptor_t,
    ntt_base: *mut u32,
) -> gni_return_t {
    call("GNI_ConfigureNTTandJob", || {
        device(device_id as u32)?;
        let mut l = if limits.is_null() {
            None
        } else {
            // SAFETY: the caller passes readable limits.
            Some(unsafe { read(limits)? })
        };
        if !ntt_desc.is_null() {
            // SAFETY: the caller passes a readable descriptor.
            let d = unsafe { read(ntt_desc)? };
            // SAFETY: its table has `group_size` entries (uGNI's contract).
            let table = unsafe { ntt_table(&d)? };
            let size = table.len() as i32;
            let base = configure_ntt(table)?;
            // SAFETY: the caller passes a writable base or null.
            put(unsafe { out(ntt_base) }, base)?;
            let mut lim = l.unwrap_or(gni_job_limits_t {
                mdd_limit: -1,
                mrt_limit: -1,
                gart_limit: -1,
                fma_limit: -1,
                bte_limit: -1,
                cq_limit: -1,
                ntt_ctrl: 0,
                ntt_base: 0,
                ntt_size: 0,
            });
            lim.ntt_base = base as i32;
            lim.ntt_size = size;
            l = Some(lim);
        }
        configure_job(ptag, cookie, l)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_SuspendJob(
    device_id: u32,
    _job_id: u64,
    _ptag: u8,
    _cookie: u32,
    _timeout: u32,
) -> gni_return_t {
    call("GNI_SuspendJob", || {
        device(device_id)?;
        // Gang scheduling is not modelled: the job does not support suspension.
        Err(ReturnCode::ErrorResource)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn GNI_ResumeJob(
    device_id: u32,
    _job_id: u64,
    _ptag: u8,
    _cookie: u32,
) -> gni_return_t {
    call("GNI_ResumeJob", || {
        device(device_id)?;
        Err(ReturnCode::InvalidState)
    })
}
