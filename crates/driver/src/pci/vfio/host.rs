//! What a host needs before a device can be opened through vfio, checked one piece at a time so
//! that a failure names the missing piece: the vfio module and its container node, IOMMU
//! groups, the device, its group, its binding to vfio-pci, and access to the group node.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::VfioError;
use crate::pci::address::PciAddress;

/// The driver a device must be bound to.
pub const VFIO_PCI_DRIVER: &str = "vfio-pci";

/// Where to look: the sysfs and /dev roots (`/sys`, `/dev` on a real host; a fake tree in
/// tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VfioHost {
    /// sysfs mount point.
    pub sysfs: PathBuf,
    /// devtmpfs mount point.
    pub dev: PathBuf,
}

impl Default for VfioHost {
    fn default() -> Self {
        VfioHost {
            sysfs: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
        }
    }
}

/// The name a sysfs symlink points at (`../../bus/pci/drivers/vfio-pci` -> `vfio-pci`).
pub(crate) fn link_name(link: &Path) -> io::Result<Option<String>> {
    match fs::read_link(link) {
        Ok(target) => Ok(target.file_name().map(|n| n.to_string_lossy().into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn open_rw(path: &Path) -> Result<(), VfioError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map(drop)
        .map_err(|source| VfioError::Access {
            path: path.to_path_buf(),
            source,
        })
}

impl VfioHost {
    /// Roots other than `/sys` and `/dev`.
    pub fn new(sysfs: impl Into<PathBuf>, dev: impl Into<PathBuf>) -> Self {
        VfioHost {
            sysfs: sysfs.into(),
            dev: dev.into(),
        }
    }

    /// The container node, `/dev/vfio/vfio`.
    pub fn container_path(&self) -> PathBuf {
        self.dev.join("vfio").join("vfio")
    }

    /// The node of IOMMU group `group`, `/dev/vfio/<group>`.
    pub fn group_path(&self, group: u32) -> PathBuf {
        self.dev.join("vfio").join(group.to_string())
    }

    /// The sysfs directory of a PCI function.
    pub fn device_path(&self, address: PciAddress) -> PathBuf {
        self.sysfs.join("bus/pci/devices").join(address.to_string())
    }

    fn vfio_loaded(&self) -> bool {
        // The misc device exists whether vfio is a module or built in.
        self.sysfs.join("class/misc/vfio").exists() || self.sysfs.join("module/vfio").exists()
    }

    /// Check the host-wide pieces: the container node (and so the vfio module) and IOMMU
    /// groups (and so an enabled IOMMU).
    pub fn check_host(&self) -> Result<(), VfioError> {
        let container = self.container_path();
        if !container.exists() {
            return Err(if self.vfio_loaded() {
                VfioError::ContainerNodeMissing { path: container }
            } else {
                VfioError::ModuleNotLoaded { path: container }
            });
        }
        let groups = self.sysfs.join("kernel/iommu_groups");
        let any_group = match fs::read_dir(&groups) {
            Ok(mut entries) => entries.next().is_some(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(source) => {
                return Err(VfioError::Sysfs {
                    path: groups,
                    source,
                });
            }
        };
        if !any_group {
            return Err(VfioError::NoIommuGroups { path: groups });
        }
        Ok(())
    }

    /// Check everything needed to open `address` and return its IOMMU group: the host-wide
    /// pieces, the device in sysfs, its group, its binding to vfio-pci, and read-write access
    /// to the container and group nodes.
    pub fn check_device(&self, address: PciAddress) -> Result<u32, VfioError> {
        self.check_host()?;
        let dev = self.device_path(address);
        if !dev.exists() {
            return Err(VfioError::NoSuchDevice { address, path: dev });
        }
        let group_link = dev.join("iommu_group");
        let group = link_name(&group_link)
            .map_err(|source| VfioError::Sysfs {
                path: group_link.clone(),
                source,
            })?
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or(VfioError::NoDeviceGroup {
                address,
                path: group_link,
            })?;
        let driver_link = dev.join("driver");
        let driver = link_name(&driver_link).map_err(|source| VfioError::Sysfs {
            path: driver_link,
            source,
        })?;
        match driver {
            None => return Err(VfioError::Unbound { address }),
            Some(d) if d != VFIO_PCI_DRIVER => {
                return Err(VfioError::WrongDriver { address, driver: d });
            }
            Some(_) => {}
        }
        let group_node = self.group_path(group);
        if !group_node.exists() {
            return Err(VfioError::GroupNodeMissing {
                address,
                group,
                path: group_node,
            });
        }
        open_rw(&self.container_path())?;
        open_rw(&group_node)?;
        Ok(group)
    }
}
