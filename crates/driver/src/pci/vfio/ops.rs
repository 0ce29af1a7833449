//! The boundary between the vfio logic and the kernel. Every OS call the backend makes goes
//! through these two traits, so region discovery, BAR windows, DMA and MSI-X handling can be
//! tested against a fake device; [`SysVfio`](super::SysVfio) is the real implementation.

use std::io;
use std::sync::Arc;

use vm_memory::MmapRegion;
use vmm_sys_util::eventfd::EventFd;

use super::VfioError;
use super::host::VfioHost;
use crate::pci::address::PciAddress;
use crate::pci::dma::HostRange;

/// An area of a region that may be mmap'd (`VFIO_REGION_INFO_CAP_SPARSE_MMAP`), relative to the
/// start of the region.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SparseArea {
    /// Offset inside the region.
    pub offset: u64,
    /// Length in bytes.
    pub size: u64,
}

/// A capability attached to a region's info.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegionCap {
    /// Only these areas may be mmap'd (the rest is trapped by the kernel, e.g. the MSI-X table).
    SparseMmap(Vec<SparseArea>),
    /// The MSI-X table inside this BAR may be mmap'd too.
    MsixMappable,
    /// A capability this backend does not use.
    Other,
}

/// What `VFIO_DEVICE_GET_REGION_INFO` reports for one region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// `VFIO_REGION_INFO_FLAG_*` bits.
    pub flags: u32,
    /// Region size in bytes (0: not implemented).
    pub size: u64,
    /// Offset of the region in the device file (for pread/pwrite/mmap).
    pub offset: u64,
    /// Capabilities.
    pub caps: Vec<RegionCap>,
}

/// Opens devices: the container, the group and the device file.
pub trait VfioOps: Send + Sync {
    /// Open the device at `address` (IOMMU group `group`), after the host checks passed.
    fn open_device(
        &self,
        host: &VfioHost,
        address: PciAddress,
        group: u32,
    ) -> Result<Arc<dyn VfioDeviceOps>, VfioError>;
}

/// An open vfio device and its container.
pub trait VfioDeviceOps: Send + Sync {
    /// Info of region `index` (`VFIO_PCI_*_REGION_INDEX`), `None` if the device has no such
    /// region.
    fn region_info(&self, index: u32) -> Option<RegionInfo>;

    /// Number of interrupts of IRQ index `index` (`VFIO_PCI_MSIX_IRQ_INDEX`, ...).
    fn irq_count(&self, index: u32) -> u32;

    /// pread of the device file at `offset` (a region's offset plus an offset inside it).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// pwrite of the device file at `offset`.
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()>;

    /// Map `len` bytes of the device file at `offset` (page-aligned), shared and read-write.
    /// The mapping lives as long as the returned region.
    fn mmap(&self, offset: u64, len: usize) -> io::Result<Arc<MmapRegion>>;

    /// `VFIO_IOMMU_MAP_DMA`: device addresses `iova..iova+host.len` reach `host`.
    fn dma_map(&self, iova: u64, host: HostRange) -> io::Result<()>;

    /// `VFIO_IOMMU_UNMAP_DMA` of exactly one earlier mapping.
    fn dma_unmap(&self, iova: u64, len: u64) -> io::Result<()>;

    /// `VFIO_DEVICE_SET_IRQS` on the MSI-X index: vector `i` signals `eventfds[i]`. An empty
    /// slice disables MSI-X.
    fn set_msix(&self, eventfds: &[&EventFd]) -> io::Result<()>;

    /// `VFIO_DEVICE_RESET`, if the device supports it.
    fn reset(&self) -> io::Result<()>;
}
