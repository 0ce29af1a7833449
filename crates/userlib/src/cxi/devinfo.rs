//! What the library knows of a device: the list of devices and what each reports
//! (`cxil_get_device_list`, `struct cxil_devinfo`), and the open device file with what was
//! learned when opening it, which every object allocated through it keeps.

use std::sync::Arc;

use driver::cassini::uapi::{As, DevInfoUse, NoArgCmd};
use driver::cassini::{Client, CxiDevice, Opcode};

use super::error::{CxiError, Result};

/// `CXI_DEFAULT_SVC_ID`: the service every unprivileged process may use.
pub const CXI_DEFAULT_SVC_ID: u32 = 1;

/// `struct cxil_devinfo`: what `cxil_get_device_list` reports for each device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Index N of `/dev/cxiN`.
    pub dev_id: u32,
    /// `cxiN`.
    pub device_name: String,
    /// PCI address (`0000:3b:00.0`).
    pub pci_address: String,
    /// NID.
    pub nid: u32,
    /// PID width.
    pub pid_bits: u32,
    /// PIDs per VNI.
    pub pid_count: u32,
    /// PtlTE indices per PID.
    pub pid_granule: u32,
    /// `min_free` shift.
    pub min_free_shift: u32,
    /// PtlTE index of hardware rendezvous Gets.
    pub rdzv_get_idx: u32,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// PCI device id.
    pub device_id: u32,
    /// `c_mb_sts_rev.rev`.
    pub device_rev: u32,
    /// `c_mb_sts_rev.proto`.
    pub device_proto: u32,
    /// `c_mb_sts_rev.platform` (1 = NETSIM).
    pub device_platform: u32,
    /// `enum cassini_version` (0x11, 0x12, 0x21).
    pub cassini_version: u32,
    /// Retry handler EQ (0 = no retry handler).
    pub pct_eq: u32,
    /// PtlTEs.
    pub num_ptes: u16,
    /// Transmit CQs.
    pub num_txqs: u16,
    /// Target CQs.
    pub num_tgqs: u16,
    /// EQs.
    pub num_eqs: u16,
    /// CTs.
    pub num_cts: u16,
    /// Address contexts.
    pub num_acs: u16,
    /// Triggered-list entries.
    pub num_tles: u16,
    /// List entries.
    pub num_les: u16,
    /// Link MTU in bytes.
    pub link_mtu: u64,
    /// Link speed in Mb/s.
    pub link_speed: u64,
    /// Link state (1 = up).
    pub link_state: u8,
    /// FRU description.
    pub fru_description: String,
    /// A virtual function.
    pub is_vf: bool,
}

impl DeviceInfo {
    pub(crate) fn from_uapi(dev_id: u32, dev: &CxiDevice, u: &DevInfoUse) -> Self {
        let fru_end = u
            .fru_description
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(u.fru_description.len());
        DeviceInfo {
            dev_id,
            device_name: format!("cxi{dev_id}"),
            pci_address: dev.info().address.to_string(),
            nid: u.nid,
            pid_bits: u.pid_bits,
            pid_count: u.pid_count,
            pid_granule: u.pid_granule,
            min_free_shift: u.min_free_shift,
            rdzv_get_idx: u.rdzv_get_idx,
            vendor_id: u.vendor_id,
            device_id: u.device_id,
            device_rev: u.device_rev,
            device_proto: u.device_proto,
            device_platform: u.device_platform,
            cassini_version: u.cassini_version,
            pct_eq: u.pct_eq,
            num_ptes: u.num_ptes,
            num_txqs: u.num_txqs,
            num_tgqs: u.num_tgqs,
            num_eqs: u.num_eqs,
            num_cts: u.num_cts,
            num_acs: u.num_acs,
            num_tles: u.num_tles,
            num_les: u.num_les,
            link_mtu: u.link_mtu,
            link_speed: u.link_speed,
            link_state: u.link_state,
            fru_description: String::from_utf8_lossy(&u.fru_description[..fru_end]).into_owned(),
            is_vf: dev.info().is_vf,
        }
    }

    /// `firmware_spec` PID width of this device.
    pub fn pid_bits(&self) -> Result<firmware_spec::cassini::dfa::PidBits> {
        firmware_spec::cassini::dfa::PidBits::new(self.pid_bits)
            .map_err(|_| CxiError::Invalid("device reports a bad pid_bits"))
    }
}

pub(crate) fn dev_info(client: &Client) -> Result<DevInfoUse> {
    Ok(client.call(&As::<{ Opcode::DevInfoGet as u32 }, _>(NoArgCmd::default()))?)
}

/// `cxil_get_device_list`: the devices of `devices`, in order, as `cxi0`, `cxi1`, ...
pub fn get_device_list(devices: &[Arc<CxiDevice>]) -> Result<Vec<DeviceInfo>> {
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let client = d.open();
            let u = dev_info(&client)?;
            Ok(DeviceInfo::from_uapi(i as u32, d, &u))
        })
        .collect()
}

/// The open device file and what the library learned when opening it.
pub(crate) struct DevShared {
    pub(crate) client: Client,
    pub(crate) info: DeviceInfo,
    /// The CSR window, mapped by the first [`super::Csrs`] of this open file: the driver
    /// answers a second `MAP_CSRS` on one file with `EALREADY`, as the real one does.
    pub(crate) csr: std::sync::OnceLock<Arc<dyn driver::pci::Mmio>>,
}

impl DevShared {
    /// The driver's device.
    pub(crate) fn device(&self) -> &Arc<CxiDevice> {
        self.client.device()
    }
}
