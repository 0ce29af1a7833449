//! The Cassini driver, split like the real one (shs-cxi-driver `cass_*` / `cxi_*`):
//!
//! - [`hw`] (`cass_*`): hardware access, CSR programming through BAR0 per
//!   `docs/cassini-programming.md`; [`atu`]: NTA page tables in host memory.
//! - [`core`] (`cxi_*`): the device and its allocators, services, per-client objects.
//! - [`uapi`]: the request/response ABI (`cxi-abi.h`) and [`client`]: the open device file
//!   that runs requests and hands out mmap tokens.
//!
//! [`CassiniDriver`] is the PCI driver that binds Cassini functions by id and brings each up
//! as a [`CxiDevice`]. See `docs/driver-cassini.md`.

#![forbid(unsafe_code)]

pub mod atu;
pub mod client;
pub mod core;
pub mod hw;
pub mod uapi;

use std::sync::Arc;

pub use self::core::{
    ClientId, Credentials, CxiDevice, CxiIdleState, DevInfo, DeviceError, DriverConfig, FreeCounts,
    PHYS_ACID, qos_allows,
};
pub use client::{Client, Mapping, MmioWindow, UserAccess};
pub use uapi::{Errno, MmInfo, Opcode, Request};

use crate::mem::HostMem;
use crate::pci::{DriverData, PciDriver, PciFunction, PciId, ProbeError, ids};

/// The PCI driver for Cassini NICs (`cxi_ss1`): binds every Cassini id and brings the function
/// up as a [`CxiDevice`], kept as the function's driver data.
pub struct CassiniDriver {
    mem: Arc<dyn HostMem>,
    config: DriverConfig,
}

impl CassiniDriver {
    /// The driver's name in bindings.
    pub const NAME: &'static str = "cxi_ss1";

    /// A driver whose devices use `mem` for rings, page tables and client memory.
    pub fn new(mem: Arc<dyn HostMem>, config: DriverConfig) -> Self {
        CassiniDriver { mem, config }
    }
}

impl PciDriver for CassiniDriver {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn id_table(&self) -> &[PciId] {
        ids::CASSINI
    }

    fn probe(&self, function: &Arc<PciFunction>) -> Result<DriverData, ProbeError> {
        match CxiDevice::probe(
            Arc::clone(function),
            Arc::clone(&self.mem),
            self.config.clone(),
        ) {
            Ok(dev) => Ok(dev as DriverData),
            Err(DeviceError::Pci(e)) => Err(ProbeError::Pci(e)),
            Err(e @ (DeviceError::Init(_) | DeviceError::NoBar0 | DeviceError::Config(_))) => {
                Err(ProbeError::Unsupported(e.to_string()))
            }
            Err(e) => Err(ProbeError::Other(Box::new(e))),
        }
    }
}
