//! Devices: opening (`cxil_open_device`), user memory, and the device's progress hook; the
//! listing and what it reports are in [`super::devinfo`].
//!
//! A process sees the Cassini devices of its node as `cxi0`, `cxi1`, ...: the slice of
//! [`CxiDevice`]s the driver brought up (e.g. `platform::Node::cxi_devices`). Opening
//! one is opening `/dev/cxiN`: a driver [`Client`] through which every control operation is
//! a uAPI request.

use std::sync::Arc;

use driver::cassini::uapi::{As, LniAllocCmd, NoArgCmd, PropertiesInfo};
use driver::cassini::{Client, Credentials, CxiDevice, Opcode};
use driver::mem::{UserMemory, UserSpace};

use super::csr::Csrs;
use super::devinfo::{DevShared, DeviceInfo, dev_info};
use super::error::{CxiError, Result};
use super::lni::Lni;

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
            shared: Arc::new(DevShared {
                client,
                info,
                csr: std::sync::OnceLock::new(),
            }),
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

    /// `cxil_map_csr`: map the CSR region (privileged). The first call maps it; later calls
    /// on this open file share that window.
    pub fn map_csr(&self) -> Result<Csrs> {
        Csrs::map(&self.shared)
    }

    /// Let the device make progress (see [`super::wait`]); true if device work was done.
    pub fn progress(&self) -> bool {
        self.shared.device().progress()
    }

    /// Whether a thread with nothing to do may block on the device's interrupts now (see
    /// [`EventQueue::sleep`](super::EventQueue::sleep)).
    pub fn before_sleep(&self) -> bool {
        self.shared.device().before_sleep()
    }

    /// Whether [`Device::before_sleep`] can ever say yes (asked once, at set-up).
    pub fn can_sleep(&self) -> bool {
        self.shared.device().can_sleep()
    }

    /// The driver's device behind this open file.
    pub fn cxi_device(&self) -> &Arc<CxiDevice> {
        self.shared.device()
    }
}
