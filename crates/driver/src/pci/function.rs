//! One PCI function as the driver sees it: identity, config space, BARs, MSI-X vectors delivered
//! to wait objects, and DMA mappings, the same whichever backend is behind it.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use emu_core::mmio::Mmio;
use thiserror::Error;

use super::address::{NicKind, PciAddress, PciId};
use super::dma::{DmaError, DmaMapping, DmaTable, HostRange};
use super::emulated::EmulatedFunction;
use super::header::{
    CAP_ID_MSIX, CFG_CAPABILITY_LIST, CFG_CLASS_REV, CFG_COMMAND, CFG_ID, COMMAND_MASTER,
    COMMAND_MEMORY, CONFIG_SPACE_SIZE, MAX_CAPABILITIES, MSIX_ENABLE, MSIX_FUNCTION_MASK, NUM_BARS,
};
use super::vfio::{VfioError, VfioFunction};
use super::wait::{Interrupts, MsixError, check_msix_request};

/// Why an operation on a PCI function failed.
#[derive(Debug, Error)]
pub enum PciError {
    /// Config accesses are dwords at 4-byte aligned offsets below 4096.
    #[error("config space offset {offset:#x} is not a dword inside the 4 KiB config space")]
    ConfigOffset {
        /// Requested offset.
        offset: u16,
    },
    /// MSI-X could not be enabled.
    #[error(transparent)]
    Msix(#[from] MsixError),
    /// A DMA map or unmap was refused.
    #[error(transparent)]
    Dma(#[from] DmaError),
    /// The real device (vfio) failed.
    #[error(transparent)]
    Vfio(#[from] VfioError),
    /// Two functions with one address on a bus.
    #[error("a function at {0} is already on the bus")]
    DuplicateAddress(PciAddress),
}

/// Which backend implements a function.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// An in-process device model.
    Emulated,
    /// A real device through vfio.
    Vfio,
}

enum Backend {
    Emulated(Arc<dyn EmulatedFunction>),
    Vfio(VfioFunction),
}

/// A PCI function on the driver's bus.
pub struct PciFunction {
    address: PciAddress,
    id: PciId,
    revision: u8,
    class: u32,
    backend: Backend,
    dma: Mutex<DmaTable>,
    irqs: Mutex<Option<Interrupts>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code panics while holding these locks; the data stays consistent if one ever did.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn split_id(dword0: u32, dword2: u32) -> (PciId, u8, u32) {
    let id = PciId::new((dword0 & 0xffff) as u16, (dword0 >> 16) as u16);
    (id, (dword2 & 0xff) as u8, dword2 >> 8)
}

fn check_config_offset(offset: u16) -> Result<(), PciError> {
    if !offset.is_multiple_of(4) || offset >= CONFIG_SPACE_SIZE {
        return Err(PciError::ConfigOffset { offset });
    }
    Ok(())
}

impl PciFunction {
    /// A function backed by an in-process device at `address`. Its ids are read from its config
    /// space.
    pub fn emulated(address: PciAddress, device: Arc<dyn EmulatedFunction>) -> Self {
        let (id, revision, class) = split_id(
            device.config_read(CFG_ID),
            device.config_read(CFG_CLASS_REV),
        );
        PciFunction {
            address,
            id,
            revision,
            class,
            backend: Backend::Emulated(device),
            dma: Mutex::new(DmaTable::new()),
            irqs: Mutex::new(None),
        }
    }

    /// A function backed by a real device opened through vfio.
    pub fn vfio(device: VfioFunction) -> Result<Self, PciError> {
        let (id, revision, class) = split_id(
            device.config_read(CFG_ID)?,
            device.config_read(CFG_CLASS_REV)?,
        );
        Ok(PciFunction {
            address: device.address(),
            id,
            revision,
            class,
            backend: Backend::Vfio(device),
            dma: Mutex::new(DmaTable::new()),
            irqs: Mutex::new(None),
        })
    }

    /// The function's address (`0000:3b:00.0`).
    pub fn address(&self) -> PciAddress {
        self.address
    }

    /// Vendor and device id.
    pub fn id(&self) -> PciId {
        self.id
    }

    /// Vendor id.
    pub fn vendor_id(&self) -> u16 {
        self.id.vendor
    }

    /// Device id.
    pub fn device_id(&self) -> u16 {
        self.id.device
    }

    /// Revision id (config byte 0x08).
    pub fn revision(&self) -> u8 {
        self.revision
    }

    /// Class code: base class, sub-class, programming interface (config bytes 0x09..0x0c).
    pub fn class_code(&self) -> u32 {
        self.class
    }

    /// Which known NIC this is, if any.
    pub fn nic_kind(&self) -> Option<NicKind> {
        NicKind::from_id(self.id)
    }

    /// Which backend implements the function.
    pub fn backend_kind(&self) -> BackendKind {
        match self.backend {
            Backend::Emulated(_) => BackendKind::Emulated,
            Backend::Vfio(_) => BackendKind::Vfio,
        }
    }

    /// The vfio backend, for real-device specifics (regions, mapped BAR areas).
    pub fn as_vfio(&self) -> Option<&VfioFunction> {
        match &self.backend {
            Backend::Vfio(v) => Some(v),
            Backend::Emulated(_) => None,
        }
    }

    /// Read the config dword at `offset` (4-byte aligned, below 4096).
    pub fn config_read(&self, offset: u16) -> Result<u32, PciError> {
        check_config_offset(offset)?;
        match &self.backend {
            Backend::Emulated(d) => Ok(d.config_read(offset)),
            Backend::Vfio(v) => Ok(v.config_read(offset)?),
        }
    }

    /// Write the config dword at `offset` (4-byte aligned, below 4096).
    pub fn config_write(&self, offset: u16, value: u32) -> Result<(), PciError> {
        check_config_offset(offset)?;
        match &self.backend {
            Backend::Emulated(d) => {
                d.config_write(offset, value);
                Ok(())
            }
            Backend::Vfio(v) => Ok(v.config_write(offset, value)?),
        }
    }

    /// `pci_enable_device` + `pci_set_master`: memory space and bus mastering on.
    pub fn enable_device(&self) -> Result<(), PciError> {
        let cmd = self.config_read(CFG_COMMAND)?;
        self.config_write(CFG_COMMAND, cmd | COMMAND_MEMORY | COMMAND_MASTER)
    }

    /// Set (`on`, with the function mask cleared) or clear the enable bit of the function's
    /// MSI-X capability in config space. Returns whether the function has that capability.
    pub fn set_msix_enable(&self, on: bool) -> Result<bool, PciError> {
        let mut ptr = (self.config_read(CFG_CAPABILITY_LIST)? & 0xfc) as u16;
        for _ in 0..MAX_CAPABILITIES {
            if ptr == 0 {
                break;
            }
            let dw = self.config_read(ptr)?;
            if dw & 0xff == CAP_ID_MSIX {
                let ctl = if on {
                    (dw | MSIX_ENABLE << 16) & !(MSIX_FUNCTION_MASK << 16)
                } else {
                    dw & !(MSIX_ENABLE << 16)
                };
                self.config_write(ptr, ctl)?;
                return Ok(true);
            }
            ptr = ((dw >> 8) & 0xfc) as u16;
        }
        Ok(false)
    }

    /// The MMIO handle of BAR `index` (0..6), `None` if the BAR is not implemented.
    pub fn bar(&self, index: u8) -> Option<Arc<dyn Mmio>> {
        if index >= NUM_BARS {
            return None;
        }
        match &self.backend {
            Backend::Emulated(d) => d.bar(index),
            Backend::Vfio(v) => v.bar(index).map(|b| b as Arc<dyn Mmio>),
        }
    }

    /// Size of BAR `index` in bytes, `None` if the BAR is not implemented.
    pub fn bar_size(&self, index: u8) -> Option<u64> {
        self.bar(index).map(|b| b.size())
    }

    /// How many MSI-X vectors the function has.
    pub fn msix_vectors(&self) -> u32 {
        match &self.backend {
            Backend::Emulated(d) => d.msix_vectors(),
            Backend::Vfio(v) => v.msix_vectors(),
        }
    }

    /// Enable `count` MSI-X vectors; vector `i` is delivered to wait object `i` of the result.
    pub fn enable_msix(&self, count: u32) -> Result<Interrupts, PciError> {
        let mut irqs = lock(&self.irqs);
        if irqs.is_some() {
            return Err(MsixError::AlreadyEnabled.into());
        }
        check_msix_request(count, self.msix_vectors())?;
        let enabled = match &self.backend {
            Backend::Emulated(d) => {
                let i = Interrupts::new(count);
                d.set_interrupt_sink(Some(i.sink()));
                i
            }
            Backend::Vfio(v) => v.enable_msix(count)?,
        };
        *irqs = Some(enabled.clone());
        Ok(enabled)
    }

    /// The enabled MSI-X vectors, `None` while MSI-X is disabled.
    pub fn interrupts(&self) -> Option<Interrupts> {
        lock(&self.irqs).clone()
    }

    /// Stop delivering MSI-X vectors. Disabling when not enabled does nothing.
    pub fn disable_msix(&self) -> Result<(), PciError> {
        let mut irqs = lock(&self.irqs);
        if irqs.is_none() {
            return Ok(());
        }
        match &self.backend {
            Backend::Emulated(d) => d.set_interrupt_sink(None),
            Backend::Vfio(v) => v.disable_msix()?,
        }
        *irqs = None;
        Ok(())
    }

    /// Let the device reach `host` at device addresses `iova..iova+host.len`.
    ///
    /// Refused when the range is empty, wraps, or overlaps a live mapping; the vfio backend
    /// also needs 4 KiB-aligned IOVA, address and length.
    ///
    /// For a vfio function `host.addr` is a virtual address in this process. The IOMMU then
    /// lets the device read and write that memory until `dma_unmap`; the kernel pins it and
    /// refuses addresses that are not mapped. The caller must keep the memory mapped and must
    /// not hold Rust references into it while the device may write it, as for any memory a
    /// device is told to DMA into.
    pub fn dma_map(&self, iova: u64, host: HostRange) -> Result<(), PciError> {
        let mut table = lock(&self.dma);
        table.check_map(iova, host)?;
        match &self.backend {
            Backend::Emulated(d) => d.dma_map(iova, host)?,
            Backend::Vfio(v) => v.dma_map(iova, host)?,
        }
        table.insert(iova, host)?;
        Ok(())
    }

    /// Remove the mapping that starts at `iova` and is `len` bytes long. Unmapping what is not
    /// mapped is an error and changes nothing.
    pub fn dma_unmap(&self, iova: u64, len: u64) -> Result<(), PciError> {
        let mut table = lock(&self.dma);
        table.check_unmap(iova, len)?;
        match &self.backend {
            Backend::Emulated(d) => d.dma_unmap(iova, len)?,
            Backend::Vfio(v) => v.dma_unmap(iova, len)?,
        }
        table.remove(iova, len)?;
        Ok(())
    }

    /// The live DMA mappings, by IOVA.
    pub fn dma_mappings(&self) -> Vec<DmaMapping> {
        lock(&self.dma).mappings()
    }
}

impl fmt::Debug for PciFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PciFunction")
            .field("address", &self.address)
            .field("id", &self.id)
            .field("revision", &self.revision)
            .field("class", &format_args!("{:06x}", self.class))
            .field("backend", &self.backend_kind())
            .finish()
    }
}
