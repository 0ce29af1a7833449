//! The real-device backend: a PCI function bound to vfio-pci, driven from user space.
//!
//! Opening checks the host piece by piece ([`VfioHost`]) so that a missing piece is named;
//! then the container, group and device are opened ([`VfioOps`]), regions are discovered
//! ([`VfioRegion`]), the mmap'able areas of each BAR are mapped ([`VfioBar`]), and the config
//! region and MSI-X vectors are made available. Every OS call goes through [`VfioOps`] and
//! [`VfioDeviceOps`], so everything here except [`SysVfio`] runs against a fake device in the
//! tests. `unsafe` is allowed only in `bar` (volatile accesses to the mapped BAR) and `sys`
//! (the DMA map ioctl and duplicating the device fd).

#[allow(unsafe_code)]
mod bar;
mod host;
mod msix;
mod ops;
mod region;
#[allow(unsafe_code)]
mod sys;
#[cfg(test)]
mod tests;

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use thiserror::Error;
use vfio_bindings::bindings::vfio::{
    VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX,
};

pub use bar::VfioBar;
pub use host::{VFIO_PCI_DRIVER, VfioHost};
pub use ops::{RegionCap, RegionInfo, SparseArea, VfioDeviceOps, VfioOps};
pub use region::{MMAP_ALIGN, VfioRegion};
pub use sys::SysVfio;

use super::address::PciAddress;
use super::dma::{DmaError, HostRange};
use super::wait::{Interrupts, MsixError, check_msix_request};
use msix::MsixDelivery;

/// IOMMU page size the DMA ranges must be aligned to.
pub const DMA_ALIGN: u64 = 4096;

/// Why a vfio operation failed. The open errors name the missing piece of the host setup.
#[derive(Debug, Error)]
pub enum VfioError {
    /// No container node and no sign of vfio in sysfs.
    #[error("no {path}: the vfio module is not loaded (modprobe vfio-pci)")]
    ModuleNotLoaded {
        /// The container node looked for.
        path: PathBuf,
    },
    /// vfio is loaded but its node is absent.
    #[error(
        "no {path} although vfio is loaded: /dev is not populated (devtmpfs/udev), or this \
         container was started without the device"
    )]
    ContainerNodeMissing {
        /// The container node looked for.
        path: PathBuf,
    },
    /// No IOMMU groups at all.
    #[error(
        "no IOMMU groups under {path}: the IOMMU is disabled in firmware or kernel (enable \
         VT-d/AMD-Vi and boot with intel_iommu=on or amd_iommu=on)"
    )]
    NoIommuGroups {
        /// The sysfs directory looked at.
        path: PathBuf,
    },
    /// The device is not in sysfs.
    #[error("no PCI device {address} (no {path})")]
    NoSuchDevice {
        /// The device asked for.
        address: PciAddress,
        /// Its sysfs directory.
        path: PathBuf,
    },
    /// The device has no usable `iommu_group` link.
    #[error("device {address} has no IOMMU group ({path} missing or not a group number)")]
    NoDeviceGroup {
        /// The device.
        address: PciAddress,
        /// The link looked at.
        path: PathBuf,
    },
    /// The device is bound to another driver.
    #[error(
        "device {address} is bound to driver '{driver}', not vfio-pci (unbind it and bind it \
         to vfio-pci: see docs/driver-pci.md)"
    )]
    WrongDriver {
        /// The device.
        address: PciAddress,
        /// The driver it is bound to.
        driver: String,
    },
    /// The device is bound to no driver.
    #[error("device {address} is not bound to any driver; bind it to vfio-pci")]
    Unbound {
        /// The device.
        address: PciAddress,
    },
    /// The group node is absent although the device is bound to vfio-pci.
    #[error("no {path} for IOMMU group {group} of device {address}")]
    GroupNodeMissing {
        /// The device.
        address: PciAddress,
        /// Its IOMMU group.
        group: u32,
        /// The node looked for.
        path: PathBuf,
    },
    /// A node exists but cannot be opened read-write.
    #[error(
        "cannot open {path}: {source} (run as root, or give the user access to the vfio nodes)"
    )]
    Access {
        /// The node.
        path: PathBuf,
        /// The open error.
        source: io::Error,
    },
    /// A sysfs file or link cannot be read.
    #[error("cannot read {path}: {source}")]
    Sysfs {
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Opening the container, group or device failed in the kernel.
    #[error("vfio {step} failed for {address}: {detail}")]
    Open {
        /// The device.
        address: PciAddress,
        /// Which step.
        step: &'static str,
        /// The kernel's answer.
        detail: String,
    },
    /// The device has no config space region.
    #[error("the device reports no config space region")]
    NoConfigRegion,
    /// Region info that cannot be right.
    #[error("region {index}: {reason}")]
    BadRegion {
        /// Region index.
        index: u32,
        /// What is wrong.
        reason: String,
    },
    /// pread/pwrite of a region failed.
    #[error("{op} of region {index} at {offset:#x} failed: {source}")]
    RegionIo {
        /// "read" or "write".
        op: &'static str,
        /// Region index.
        index: u32,
        /// Offset inside the region.
        offset: u64,
        /// The error.
        source: io::Error,
    },
    /// mmap of a BAR area failed.
    #[error("mmap of region {index} area {offset:#x}+{len:#x} failed: {source}")]
    Mmap {
        /// Region index.
        index: u32,
        /// Area offset inside the region.
        offset: u64,
        /// Area length.
        len: u64,
        /// The error.
        source: io::Error,
    },
    /// An MSI-X request the function cannot satisfy.
    #[error(transparent)]
    Msix(#[from] MsixError),
    /// Setting up MSI-X delivery failed (eventfd, epoll, thread, or the IRQ ioctl).
    #[error("MSI-X setup failed: {0}")]
    Irq(#[source] io::Error),
    /// A DMA range the IOMMU cannot take.
    #[error(transparent)]
    Dma(#[from] DmaError),
    /// The DMA map ran out of lockable memory.
    #[error(
        "DMA map of iova {iova:#x}+{len:#x} failed: out of locked memory; raise RLIMIT_MEMLOCK \
         (ulimit -l, or LimitMEMLOCK= for a service)"
    )]
    DmaMemlock {
        /// Requested IOVA.
        iova: u64,
        /// Requested length.
        len: u64,
    },
    /// The DMA map ioctl failed.
    #[error("DMA map of iova {iova:#x}+{len:#x} failed: {source}")]
    DmaMap {
        /// Requested IOVA.
        iova: u64,
        /// Requested length.
        len: u64,
        /// The error.
        source: io::Error,
    },
    /// `VFIO_DEVICE_RESET` failed.
    #[error("reset of {address} failed: {source}")]
    Reset {
        /// The device.
        address: PciAddress,
        /// The error.
        source: io::Error,
    },
    /// The DMA unmap ioctl failed.
    #[error("DMA unmap of iova {iova:#x}+{len:#x} failed: {source}")]
    DmaUnmap {
        /// Requested IOVA.
        iova: u64,
        /// Requested length.
        len: u64,
        /// The error.
        source: io::Error,
    },
}

/// A PCI function opened through vfio.
pub struct VfioFunction {
    address: PciAddress,
    device: Arc<dyn VfioDeviceOps>,
    config: VfioRegion,
    bars: Vec<Option<Arc<VfioBar>>>,
    msix_vectors: u32,
    msix: Mutex<Option<MsixDelivery>>,
}

impl VfioFunction {
    /// Open the real device at `address` on this host (`/sys`, `/dev`, the kernel's vfio).
    pub fn open(address: PciAddress) -> Result<Self, VfioError> {
        Self::open_with(&VfioHost::default(), &SysVfio, address)
    }

    /// Check `host` for everything `address` needs, then open it through `ops`.
    pub fn open_with(
        host: &VfioHost,
        ops: &dyn VfioOps,
        address: PciAddress,
    ) -> Result<Self, VfioError> {
        let group = host.check_device(address)?;
        let device = ops.open_device(host, address, group)?;
        Self::from_device(address, device)
    }

    /// Discover the regions of an open device and map its BARs.
    pub fn from_device(
        address: PciAddress,
        device: Arc<dyn VfioDeviceOps>,
    ) -> Result<Self, VfioError> {
        let config = device
            .region_info(VFIO_PCI_CONFIG_REGION_INDEX)
            .map(|info| VfioRegion::discover(VFIO_PCI_CONFIG_REGION_INDEX, &info))
            .transpose()?
            .flatten()
            .ok_or(VfioError::NoConfigRegion)?;
        let mut bars = Vec::new();
        for bar in 0..u32::from(super::header::NUM_BARS) {
            let index = VFIO_PCI_BAR0_REGION_INDEX + bar;
            let region = match device.region_info(index) {
                Some(info) => VfioRegion::discover(index, &info)?,
                None => None,
            };
            bars.push(match region {
                Some(r) => Some(Arc::new(VfioBar::new(r, Arc::clone(&device))?)),
                None => None,
            });
        }
        let msix_vectors = device.irq_count(VFIO_PCI_MSIX_IRQ_INDEX);
        tracing::debug!(%address, msix_vectors, "vfio device opened");
        Ok(VfioFunction {
            address,
            device,
            config,
            bars,
            msix_vectors,
            msix: Mutex::new(None),
        })
    }

    fn msix_lock(&self) -> MutexGuard<'_, Option<MsixDelivery>> {
        self.msix.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The function's address.
    pub fn address(&self) -> PciAddress {
        self.address
    }

    /// The config space region.
    pub fn config_region(&self) -> &VfioRegion {
        &self.config
    }

    /// BAR `index` (0..6), `None` if not implemented.
    pub fn bar(&self, index: u8) -> Option<Arc<VfioBar>> {
        self.bars.get(usize::from(index))?.clone()
    }

    /// Read the config dword at `offset` through the config region.
    pub fn config_read(&self, offset: u16) -> Result<u32, VfioError> {
        let mut b = [0u8; 4];
        self.config_io(offset, "read", |at| self.device.read_at(at, &mut b))?;
        Ok(u32::from_le_bytes(b))
    }

    /// Write the config dword at `offset` through the config region (the kernel filters what
    /// user space may change).
    pub fn config_write(&self, offset: u16, value: u32) -> Result<(), VfioError> {
        let b = value.to_le_bytes();
        self.config_io(offset, "write", |at| self.device.write_at(at, &b))
    }

    fn config_io(
        &self,
        offset: u16,
        op: &'static str,
        f: impl FnOnce(u64) -> io::Result<()>,
    ) -> Result<(), VfioError> {
        let off = u64::from(offset);
        let allowed = if op == "read" {
            self.config.readable
        } else {
            self.config.writable
        };
        let io_error = |source| VfioError::RegionIo {
            op,
            index: self.config.index,
            offset: off,
            source,
        };
        if off + 4 > self.config.size {
            return Err(io_error(io::Error::from(io::ErrorKind::InvalidInput)));
        }
        if !allowed {
            return Err(io_error(io::Error::from(io::ErrorKind::PermissionDenied)));
        }
        f(self.config.file_offset + off).map_err(io_error)
    }

    /// How many MSI-X vectors the device has.
    pub fn msix_vectors(&self) -> u32 {
        self.msix_vectors
    }

    /// Enable `count` MSI-X vectors, each delivered to its wait object by a thread.
    pub fn enable_msix(&self, count: u32) -> Result<Interrupts, VfioError> {
        let mut msix = self.msix_lock();
        if msix.is_some() {
            return Err(MsixError::AlreadyEnabled.into());
        }
        check_msix_request(count, self.msix_vectors)?;
        let delivery = MsixDelivery::start(count, format!("msix-{}", self.address), |fds| {
            self.device.set_msix(fds)
        })?;
        let irqs = delivery.interrupts().clone();
        *msix = Some(delivery);
        Ok(irqs)
    }

    /// Disable MSI-X and stop delivery. Does nothing if not enabled.
    pub fn disable_msix(&self) -> Result<(), VfioError> {
        let mut msix = self.msix_lock();
        if msix.is_none() {
            return Ok(());
        }
        self.device.set_msix(&[]).map_err(VfioError::Irq)?;
        *msix = None;
        Ok(())
    }

    /// Map `host` at `iova` in the device's IOMMU domain. Ranges must be [`DMA_ALIGN`]-aligned;
    /// overlap is checked by the caller ([`PciFunction::dma_map`](super::PciFunction::dma_map)).
    pub(crate) fn dma_map(&self, iova: u64, host: HostRange) -> Result<(), VfioError> {
        if !iova.is_multiple_of(DMA_ALIGN)
            || !host.addr.is_multiple_of(DMA_ALIGN)
            || !host.len.is_multiple_of(DMA_ALIGN)
        {
            return Err(DmaError::Misaligned {
                iova,
                addr: host.addr,
                len: host.len,
                align: DMA_ALIGN,
            }
            .into());
        }
        self.device.dma_map(iova, host).map_err(|source| {
            if source.raw_os_error() == Some(libc::ENOMEM) {
                VfioError::DmaMemlock {
                    iova,
                    len: host.len,
                }
            } else {
                VfioError::DmaMap {
                    iova,
                    len: host.len,
                    source,
                }
            }
        })
    }

    /// Unmap the mapping at `iova` of `len` bytes.
    pub(crate) fn dma_unmap(&self, iova: u64, len: u64) -> Result<(), VfioError> {
        self.device
            .dma_unmap(iova, len)
            .map_err(|source| VfioError::DmaUnmap { iova, len, source })
    }

    /// Reset the device (`VFIO_DEVICE_RESET`).
    pub fn reset(&self) -> Result<(), VfioError> {
        self.device.reset().map_err(|source| VfioError::Reset {
            address: self.address,
            source,
        })
    }
}

impl Drop for VfioFunction {
    fn drop(&mut self) {
        if let Err(e) = self.disable_msix() {
            tracing::warn!(address = %self.address, error = %e, "MSI-X disable on close failed");
        }
    }
}

impl std::fmt::Debug for VfioFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfioFunction")
            .field("address", &self.address)
            .field("config", &self.config)
            .field("bars", &self.bars)
            .field("msix_vectors", &self.msix_vectors)
            .finish()
    }
}
