//! Devices: listing (`cxil_get_device_list`), opening (`cxil_open_device`), device
//! information, user memory, and the device's progress hook.
//!
//! A process sees the Cassini devices of its node as `cxi0`, `cxi1`, ...: the slice of
//! [`CxiDevice`]s the driver brought up (e.g. `platform::Node::cxi_devices`). Opening
//! one is opening `/dev/cxiN`: a driver [`Client`] through which every control operation is
//! a uAPI request.

use std::sync::Arc;

use driver::cassini::uapi::{As, DevInfoUse, LniAllocCmd, NoArgCmd, PropertiesInfo};
use driver::cassini::{Client, Credentials, CxiDevice, Opcode};
use driver::mem::{UserMemory, UserSpace};

use super::csr::Csrs;
use super::error::{CxiError, Result};
use super::lni::Lni;

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
    fn from_uapi(dev_id: u32, dev: &CxiDevice, u: &DevInfoUse) -> Self {
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

fn dev_info(client: &Client) -> Result<DevInfoUse> {
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

/// How to open a device.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Open as a privileged (CAP_SYS_ADMIN) process: needed for CSR access.
    pub admin: bool,
    /// The process's address space (a process opening several devices passes the same one);
    /// `None` for a fresh one.
    pub space: Option<UserSpace>,
}

/// `cxil_open_device(dev_id)`: open `cxi<dev_id>` of `devices` as an unprivileged process.
pub fn open_device(devices: &[Arc<CxiDevice>], dev_id: u32) -> Result<Device> {
    open_device_with(devices, dev_id, OpenOptions::default())
}

/// Open `cxi<dev_id>` of `devices` with `opts`.
pub fn open_device_with(
    devices: &[Arc<CxiDevice>],
    dev_id: u32,
    opts: OpenOptions,
) -> Result<Device> {
    let dev = devices
        .get(dev_id as usize)
        .ok_or(CxiError::NoDevice(dev_id))?;
    Device::open(dev, dev_id, opts)
}

/// The open device file and what the library learned when opening it.
pub(crate) struct DevShared {
    pub(crate) client: Client,
    pub(crate) info: DeviceInfo,
}

impl DevShared {
    /// The driver's device.
    pub(crate) fn device(&self) -> &Arc<CxiDevice> {
        self.client.device()
    }
}

/// An open Cassini device (`struct cxil_dev`). Cloning shares the open file; it is closed
/// (releasing whatever is left) when the last clone and every object allocated through it
/// are dropped.
#[derive(Clone)]
pub struct Device {
    pub(crate) shared: Arc<DevShared>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.shared.info.device_name)
            .field("nid", &format_args!("{:#x}", self.shared.info.nid))
            .finish()
    }
}

impl Device {
    /// Open `dev` as `cxi<dev_id>`.
    pub fn open(dev: &Arc<CxiDevice>, dev_id: u32, opts: OpenOptions) -> Result<Device> {
        let creds = Credentials {
            admin: opts.admin,
            ..Credentials::default()
        };
        let client = dev.open_with(creds, opts.space);
        let u = dev_info(&client)?;
        let info = DeviceInfo::from_uapi(dev_id, dev, &u);
        Ok(Device {
            shared: Arc::new(DevShared { client, info }),
        })
    }

    /// What `cxil_get_device_list` reports for this device.
    pub fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// The driver client (the open file), for operations this library does not wrap.
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// The process's address space.
    pub fn space(&self) -> &UserSpace {
        self.shared.client.space()
    }

    /// Allocate a zeroed buffer of `len` bytes (rounded up to pages) in the process's
    /// memory: what `malloc`/`mmap` gives a libcxi user.
    pub fn alloc_buffer(&self, len: u64) -> Result<UserMemory> {
        Ok(self.shared.client.alloc_user_memory(len)?)
    }

    /// Whether the process's own memory can be registered: a node hosted in this process
    /// (`platform` builds it with process memory). Then `cxil_map` ([`crate::cxi::Lni::map`])
    /// of any mapped address of the process works, and the NIC reads and writes that memory
    /// directly.
    pub fn process_memory(&self) -> bool {
        self.space().process_memory()
    }

    /// The caller's own memory `[va, va + len)` (a buffer it allocated, its stack, a
    /// static) as a buffer of the process, pinned while the returned handle lives: what a
    /// libcxi user maps with `cxil_map` of its own pointer. The NIC writes it whenever a
    /// command or a peer targets it, so the caller keeps it alive and reads it only after
    /// the completion that says the NIC is done. `-EFAULT` when the range is not mapped or
    /// the device cannot reach process memory ([`Device::process_memory`]).
    pub fn attach_buffer(&self, va: u64, len: u64) -> Result<UserMemory> {
        Ok(self.space().attach(va, len)?)
    }

    /// `CXI_OP_GET_DEV_PROPERTIES`.
    pub fn properties(&self) -> Result<PropertiesInfo> {
        Ok(self
            .shared
            .client
            .call(&As::<{ Opcode::GetDevProperties as u32 }, _>(
                NoArgCmd::default(),
            ))?)
    }

    /// `cxil_rh_running`: whether a retry handler serves this device.
    pub fn rh_running(&self) -> bool {
        self.shared.info.pct_eq != 0
    }

    /// `cxil_alloc_lni(dev, svc_id)`.
    pub fn alloc_lni(&self, svc_id: u32) -> Result<Lni> {
        let r = self.shared.client.call(&LniAllocCmd {
            svc_id,
            ..LniAllocCmd::default()
        })?;
        Ok(Lni::new(Arc::clone(&self.shared), r.lni))
    }

    /// `cxil_map_csr`: map the CSR region (privileged).
    pub fn map_csr(&self) -> Result<Csrs> {
        Csrs::map(&self.shared)
    }

    /// Let the device make progress (see [`super::wait`]); true if device work was done.
    pub fn progress(&self) -> bool {
        self.shared.device().progress()
    }

    /// The driver's device behind this open file.
    pub fn cxi_device(&self) -> &Arc<CxiDevice> {
        self.shared.device()
    }
}
