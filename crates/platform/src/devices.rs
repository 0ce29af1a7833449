//! What `nicemu devices` lists: the emulated PCI functions of clusters, and the real NICs in
//! sysfs.

#![forbid(unsafe_code)]

use std::fmt;
use std::path::Path;

use driver::pci::{RealDevice, SysfsError};

use crate::cassini::Cluster;
pub use crate::machine::EmulatedDevice;

/// What `nicemu devices` shows: a cluster's emulated devices and the real NICs in sysfs.
#[derive(Debug)]
pub struct DeviceListing {
    /// Emulated devices.
    pub emulated: Vec<EmulatedDevice>,
    /// Real Cassini/Gemini functions, or why sysfs could not be read.
    pub real: Result<Vec<RealDevice>, SysfsError>,
}

/// List the emulated devices of `cluster` (if any) and the real NICs under `sysfs_root`
/// (normally `/sys`).
pub fn list_devices(cluster: Option<&Cluster>, sysfs_root: &Path) -> DeviceListing {
    list_emulated_and_real(
        cluster.map(Cluster::devices).unwrap_or_default(),
        sysfs_root,
    )
}

/// A listing of the given emulated devices (of any clusters) and the real NICs under
/// `sysfs_root`.
pub fn list_emulated_and_real(emulated: Vec<EmulatedDevice>, sysfs_root: &Path) -> DeviceListing {
    DeviceListing {
        emulated,
        real: driver::pci::sysfs::list_real_devices(sysfs_root),
    }
}

impl fmt::Display for DeviceListing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Emulated devices:")?;
        if self.emulated.is_empty() {
            writeln!(f, "  (none)")?;
        }
        for d in &self.emulated {
            writeln!(
                f,
                "  node {:<3} {}  {}  {:<12} rev {:#04x}  driver {:<8} nid {:<7} {} {}",
                d.node,
                d.address,
                d.id,
                d.kind.map_or("unknown".to_string(), |k| k.to_string()),
                d.revision,
                d.driver.as_deref().unwrap_or("-"),
                d.nid.map_or("-".to_string(), |n| format!("{n:#x}")),
                d.version.as_deref().unwrap_or("-"),
                d.platform.as_deref().unwrap_or("-"),
            )?;
        }
        writeln!(f, "Real devices (sysfs):")?;
        match &self.real {
            Ok(v) if v.is_empty() => writeln!(f, "  (none)")?,
            Ok(v) => {
                for r in v {
                    writeln!(
                        f,
                        "  {}  {}  {:<12} driver {:<10} iommu group {}{}",
                        r.function.address,
                        r.function.id,
                        r.kind.to_string(),
                        r.function.driver.as_deref().unwrap_or("-"),
                        r.function
                            .iommu_group
                            .map_or("-".to_string(), |g| g.to_string()),
                        if r.vfio_ready() { "  (vfio ready)" } else { "" },
                    )?;
                }
            }
            Err(e) => writeln!(f, "  unavailable: {e}")?,
        }
        Ok(())
    }
}
