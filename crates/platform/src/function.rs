//! An engine device seen as a PCI function: the driver's emulated backend
//! ([`EmulatedFunction`]) over an emu-core [`Engine`], and the step every cluster builder
//! shares — put a device model on the engine behind a node's IOMMU and plug it into the node's
//! PCI bus.

#![forbid(unsafe_code)]

use std::sync::Arc;

use driver::mem::{EmulatedHostMemory, HostMem};
use driver::pci::{
    DmaError, EmulatedFunction, HostRange, InterruptSink, PciAddress, PciBus, PciFunction,
};
use emu_core::dma::{DmaPort, Iommu};
use emu_core::engine::{DeviceId, DeviceModel, Engine, EngineError};
use emu_core::fabric::PortId;
use emu_core::memory::HostMemory;
use emu_core::mmio::Mmio;
use thiserror::Error;

/// Why a NIC could not be put on a node.
#[derive(Debug, Error)]
pub enum AttachError {
    /// The node's memory could not be created.
    #[error("host memory of node {node}: {reason}")]
    Memory {
        /// The node.
        node: usize,
        /// Why.
        reason: String,
    },
    /// The engine refused the device.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The PCI layer refused the function.
    #[error(transparent)]
    Pci(#[from] driver::pci::PciError),
    /// A PCI address could not be formed.
    #[error("bad PCI address: {0}")]
    Address(String),
}

/// A node with its NIC plugged in: the node's RAM as the driver and processes see it, and the
/// node's PCI bus holding the NIC's function (not yet bound to a driver).
pub(crate) struct AttachedNic {
    /// The node's host memory.
    pub host: Arc<dyn HostMem>,
    /// The same RAM as the emulator sees it (for snapshots).
    pub ram: HostMemory,
    /// The node's PCI bus.
    pub bus: PciBus,
    /// Where the NIC sits on it.
    pub address: PciAddress,
    /// The NIC's device id in the engine.
    pub device: DeviceId,
}

/// The PCI address of each node's NIC on its own bus: bus 0x3b, device 0, function 0.
fn nic_address() -> Result<PciAddress, AttachError> {
    PciAddress::new(0, 0x3b, 0, 0).map_err(|e| AttachError::Address(e.to_string()))
}

/// Give node `node` `memory` bytes of RAM (and, with `process`, the process's own memory
/// beside it: `HostMemory::hosted`), put `model` on `engine` at fabric `port` reaching that
/// memory through a passthrough platform IOMMU (bus address = host address, see
/// `HostMem::bus_address`), and plug it into a fresh PCI bus of the node.
pub(crate) fn attach(
    engine: &Arc<dyn Engine>,
    node: usize,
    memory: u64,
    process: bool,
    model: Box<dyn DeviceModel>,
    port: PortId,
) -> Result<AttachedNic, AttachError> {
    let ram = if process {
        HostMemory::hosted(memory, emu_core::procmem::ProcessMemory::new())
    } else {
        HostMemory::new(memory)
    }
    .map_err(|e| AttachError::Memory {
        node,
        reason: e.to_string(),
    })?;
    let iommu = Iommu::passthrough();
    let dev = engine.add_device(model, DmaPort::new(ram.clone(), iommu.clone()), Some(port))?;
    let function = EngineFunction::new(Arc::clone(engine), dev, iommu)?;
    let address = nic_address()?;
    let mut bus = PciBus::new();
    bus.add(PciFunction::emulated(address, Arc::new(function)))?;
    Ok(AttachedNic {
        host: Arc::new(EmulatedHostMemory::new(ram.clone())),
        ram,
        bus,
        address,
        device: dev,
    })
}

/// An engine device seen as a PCI function (the emulated backend's [`EmulatedFunction`]).
/// Shared by the Cassini cluster here and the Gemini cluster (`crate::gemini`).
struct EngineFunction {
    engine: Arc<dyn Engine>,
    dev: DeviceId,
    bars: Vec<Option<Arc<dyn Mmio>>>,
    msix: u32,
    iommu: Iommu,
}

/// Config offset of the capabilities pointer; MSI-X capability id.
const CAP_PTR: u16 = 0x34;
const CAP_MSIX: u32 = 0x11;

impl EngineFunction {
    fn new(engine: Arc<dyn Engine>, dev: DeviceId, iommu: Iommu) -> Result<Self, EngineError> {
        let mut bars = Vec::with_capacity(6);
        for b in 0..6u8 {
            let size = engine.bar_size(dev, b)?;
            bars.push(if size > 0 {
                Some(engine.mmio(dev, b)?)
            } else {
                None
            });
        }
        let mut f = EngineFunction {
            engine,
            dev,
            bars,
            msix: 0,
            iommu,
        };
        f.msix = f.find_msix_vectors();
        Ok(f)
    }

    /// Table size from the MSI-X capability (message control bits 0..11, N - 1).
    fn find_msix_vectors(&self) -> u32 {
        let mut ptr = (self.config_read(CAP_PTR) & 0xfc) as u16;
        for _ in 0..48 {
            if ptr == 0 {
                break;
            }
            let dw = self.config_read(ptr);
            if dw & 0xff == CAP_MSIX {
                return ((dw >> 16) & 0x7ff) + 1;
            }
            ptr = ((dw >> 8) & 0xfc) as u16;
        }
        0
    }
}

impl EmulatedFunction for EngineFunction {
    fn config_read(&self, offset: u16) -> u32 {
        self.engine
            .config_read(self.dev, offset / 4)
            .unwrap_or(u32::MAX)
    }

    fn config_write(&self, offset: u16, value: u32) {
        if let Err(e) = self.engine.config_write(self.dev, offset / 4, value) {
            tracing::warn!(offset, error = %e, "config write to an emulated function failed");
        }
    }

    fn bar(&self, index: u8) -> Option<Arc<dyn Mmio>> {
        self.bars.get(usize::from(index)).cloned().flatten()
    }

    fn msix_vectors(&self) -> u32 {
        self.msix
    }

    fn set_interrupt_sink(&self, sink: Option<InterruptSink>) {
        let s: emu_core::engine::InterruptSink = match sink {
            Some(s) => Arc::new(move |v: u16| {
                if !s.fire(u32::from(v)) {
                    tracing::debug!(vector = v, "interrupt to a vector that is not enabled");
                }
            }),
            None => Arc::new(|_v: u16| {}),
        };
        if let Err(e) = self.engine.set_interrupt_sink(self.dev, s) {
            tracing::warn!(error = %e, "cannot route interrupts of an emulated function");
        }
    }

    fn dma_map(&self, iova: u64, host: HostRange) -> Result<(), DmaError> {
        // The node's device reaches its RAM through a passthrough IOMMU: only identity
        // mappings describe it.
        if self.iommu.is_passthrough() && iova == host.addr {
            return Ok(());
        }
        self.iommu
            .map(
                iova,
                emu_core::memory::GuestAddress(host.addr),
                host.len,
                emu_core::dma::Perm::READ | emu_core::dma::Perm::WRITE,
            )
            .map_err(|e| DmaError::Rejected(e.to_string()))
    }

    fn dma_unmap(&self, iova: u64, len: u64) -> Result<(), DmaError> {
        if self.iommu.is_passthrough() {
            return Ok(());
        }
        self.iommu
            .unmap(iova, len)
            .map_err(|e| DmaError::Rejected(e.to_string()))
    }
}
