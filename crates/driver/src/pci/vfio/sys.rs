//! The real [`VfioOps`]: the kernel's vfio interface through the `vfio-ioctls` crate (built
//! without its KVM feature), plus pread/pwrite/mmap on the device file.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use vfio_bindings::bindings::vfio::VFIO_PCI_MSIX_IRQ_INDEX;
use vfio_ioctls::{VfioContainer, VfioDevice, VfioRegionInfoCap};
use vm_memory::MmapRegion;
use vm_memory::guest_memory::FileOffset;
use vmm_sys_util::eventfd::EventFd;

use super::VfioError;
use super::host::VfioHost;
use super::ops::{RegionCap, RegionInfo, SparseArea, VfioDeviceOps, VfioOps};
use crate::pci::address::PciAddress;
use crate::pci::dma::HostRange;

/// Opens devices through the kernel: `/dev/vfio/vfio`, `/dev/vfio/<group>`, and the device fd
/// (one container per device).
#[derive(Copy, Clone, Debug, Default)]
pub struct SysVfio;

struct SysDevice {
    // Field order is drop order: the device goes before its container.
    device: VfioDevice,
    container: Arc<VfioContainer>,
    /// A duplicate of the device fd, for pread/pwrite/mmap with error reporting.
    file: File,
}

fn ioctl_error(e: vfio_ioctls::VfioError) -> io::Error {
    match e {
        vfio_ioctls::VfioError::IommuDmaMap(errno)
        | vfio_ioctls::VfioError::IommuDmaUnmap(errno) => {
            io::Error::from_raw_os_error(errno.errno())
        }
        other => io::Error::other(other.to_string()),
    }
}

impl VfioOps for SysVfio {
    fn open_device(
        &self,
        host: &VfioHost,
        address: PciAddress,
        _group: u32,
    ) -> Result<Arc<dyn VfioDeviceOps>, VfioError> {
        let step = |step: &'static str| {
            move |e: vfio_ioctls::VfioError| VfioError::Open {
                address,
                step,
                detail: e.to_string(),
            }
        };
        // vfio-ioctls finds the group from the device's `iommu_group` link itself.
        let container = Arc::new(VfioContainer::new(None).map_err(step("container open"))?);
        let device = VfioDevice::new(
            &host.device_path(address),
            Arc::clone(&container) as Arc<dyn vfio_ioctls::VfioOps>,
            false,
        )
        .map_err(step("group/device open"))?;
        // SAFETY: `device` owns this fd and is alive for the whole statement; the borrow only
        // lives until `try_clone_to_owned` has duplicated it into an fd we own.
        let owned = unsafe { BorrowedFd::borrow_raw(device.as_raw_fd()) }
            .try_clone_to_owned()
            .map_err(|e| VfioError::Open {
                address,
                step: "device fd dup",
                detail: e.to_string(),
            })?;
        Ok(Arc::new(SysDevice {
            device,
            container,
            file: File::from(owned),
        }))
    }
}

impl VfioDeviceOps for SysDevice {
    fn region_info(&self, index: u32) -> Option<RegionInfo> {
        let size = self.device.get_region_size(index);
        let flags = self.device.get_region_flags(index);
        if size == 0 && flags == 0 {
            return None;
        }
        let caps = self
            .device
            .get_region_caps(index)
            .into_iter()
            .map(|c| match c {
                VfioRegionInfoCap::SparseMmap(s) => RegionCap::SparseMmap(
                    s.areas
                        .iter()
                        .map(|a| SparseArea {
                            offset: a.offset,
                            size: a.size,
                        })
                        .collect(),
                ),
                VfioRegionInfoCap::MsixMappable => RegionCap::MsixMappable,
                _ => RegionCap::Other,
            })
            .collect();
        Some(RegionInfo {
            flags,
            size,
            offset: self.device.get_region_offset(index),
            caps,
        })
    }

    fn irq_count(&self, index: u32) -> u32 {
        self.device.get_irq_info(index).map_or(0, |i| i.count)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn mmap(&self, offset: u64, len: usize) -> io::Result<Arc<MmapRegion>> {
        let file = FileOffset::new(self.file.try_clone()?, offset);
        MmapRegion::build(
            Some(file),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
        )
        .map(Arc::new)
        .map_err(|e| match e {
            vm_memory::mmap::MmapRegionError::Mmap(io) => io,
            other => io::Error::other(other.to_string()),
        })
    }

    fn dma_map(&self, iova: u64, host: HostRange) -> io::Result<()> {
        let len =
            usize::try_from(host.len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let addr =
            usize::try_from(host.addr).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: the mapping lets the device, not this process, access `addr..addr+len`; the
        // kernel pins those pages and refuses the call (EFAULT) if any is not mapped in this
        // process, so the call itself cannot corrupt memory. The remaining duty (keep the
        // memory mapped and free of Rust references the device could write under) is the
        // documented contract of `PciFunction::dma_map`, the only caller.
        unsafe {
            self.container
                .vfio_dma_map(iova, len, addr as *mut u8)
                .map_err(ioctl_error)
        }
    }

    fn dma_unmap(&self, iova: u64, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        self.container
            .vfio_dma_unmap(iova, len)
            .map_err(ioctl_error)
    }

    fn set_msix(&self, eventfds: &[&EventFd]) -> io::Result<()> {
        let r = if eventfds.is_empty() {
            self.device.disable_irq(VFIO_PCI_MSIX_IRQ_INDEX)
        } else {
            self.device.enable_msix(eventfds.to_vec())
        };
        r.map_err(ioctl_error)
    }

    fn reset(&self) -> io::Result<()> {
        self.device.reset();
        Ok(())
    }
}
