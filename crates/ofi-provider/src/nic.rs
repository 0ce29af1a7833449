//! Opening this process's NIC.
//!
//! Today the provider builds a one-node emulated Cassini machine inside the process (one NIC,
//! threaded engine), so every endpoint of the process lives on that NIC and only endpoints
//! of the same process can talk. [`open`] is the one place that decides where the NIC comes
//! from: joining a fabric shared between processes replaces its body, not its callers.

#![forbid(unsafe_code)]

use std::sync::Arc;

use driver::cassini::CxiDevice;
use platform::{Cluster, EngineKind};

use crate::error::{Error, Result};

/// Host memory of the emulated node: staging and landing buffers of every endpoint.
pub const NODE_MEMORY: u64 = 512 << 20;

/// This process's NIC: the devices endpoints open, and what keeps them alive.
pub struct Nic {
    devices: Vec<Arc<CxiDevice>>,
    /// The emulated machine hosting the NIC (dropped after the devices).
    _machine: Cluster,
}

impl Nic {
    /// The cxi devices of this node.
    pub fn devices(&self) -> &[Arc<CxiDevice>] {
        &self.devices
    }
}

/// Open this process's NIC: a one-node emulated Cassini machine in the process.
pub fn open() -> Result<Nic> {
    let machine = Cluster::builder()
        .nics(1)
        .engine(EngineKind::Threaded)
        .memory_per_node(NODE_MEMORY)
        .build()
        .map_err(|e| Error::Nic(format!("building the emulated Cassini node: {e}")))?;
    let devices = machine.node(0).map(|n| n.cxi_devices()).unwrap_or_default();
    if devices.is_empty() {
        return Err(Error::Nic("the emulated node has no cxi device".into()));
    }
    Ok(Nic {
        devices,
        _machine: machine,
    })
}

/// The process's NIC, opened by the first domain and shared by every later one while any
/// is open (so all endpoints of the process are on one NIC and can reach each other).
pub fn shared() -> Result<Arc<Nic>> {
    static NIC: std::sync::Mutex<std::sync::Weak<Nic>> =
        std::sync::Mutex::new(std::sync::Weak::new());
    let mut slot = NIC.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = slot.upgrade() {
        return Ok(n);
    }
    let n = Arc::new(open()?);
    *slot = Arc::downgrade(&n);
    Ok(n)
}
