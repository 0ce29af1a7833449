//! Finding real NICs: scan `<sysfs>/bus/pci/devices/*` for the Cassini and Gemini ids, with each
//! function's driver binding and IOMMU group (what `lspci -nnk` and `cxi_stat` show).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::address::{NicKind, PciAddress, PciId};
use super::vfio::VFIO_PCI_DRIVER;

/// Why the scan could not run at all. (A single unreadable device is skipped, not an error.)
#[derive(Debug, Error)]
pub enum SysfsError {
    /// `<sysfs>/bus/pci/devices` is absent.
    #[error("no PCI bus in sysfs: {path} does not exist (is sysfs mounted?)")]
    NoPciBus {
        /// The directory looked for.
        path: PathBuf,
    },
    /// The devices directory cannot be listed.
    #[error("cannot list {path}: {source}")]
    Read {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// One PCI function as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysfsFunction {
    /// Its address.
    pub address: PciAddress,
    /// Vendor and device id.
    pub id: PciId,
    /// Revision id.
    pub revision: u8,
    /// Class code (24 bits).
    pub class: u32,
    /// The driver it is bound to (`driver` link), if any.
    pub driver: Option<String>,
    /// Its IOMMU group (`iommu_group` link), if the IOMMU is on.
    pub iommu_group: Option<u32>,
    /// Its sysfs directory.
    pub path: PathBuf,
}

/// A Cassini or Gemini found on this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RealDevice {
    /// Which NIC.
    pub kind: NicKind,
    /// What sysfs says about it.
    pub function: SysfsFunction,
}

impl RealDevice {
    /// True when the device is bound to vfio-pci and in an IOMMU group, so this driver's vfio
    /// backend can open it.
    pub fn vfio_ready(&self) -> bool {
        self.function.driver.as_deref() == Some(VFIO_PCI_DRIVER)
            && self.function.iommu_group.is_some()
    }
}

fn read_hex(path: &Path) -> Option<u32> {
    let text = fs::read_to_string(path).ok()?;
    let t = text.trim();
    let t = t.strip_prefix("0x").unwrap_or(t);
    u32::from_str_radix(t, 16).ok()
}

fn link_name(path: &Path) -> Option<String> {
    fs::read_link(path)
        .ok()?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// Read one function's directory; `None` (with a debug log) when it is not a readable PCI
/// function.
fn read_function(dir: &Path) -> Option<SysfsFunction> {
    let name = dir.file_name()?.to_str()?;
    let Ok(address) = name.parse::<PciAddress>() else {
        tracing::debug!(entry = name, "not a PCI address; skipped");
        return None;
    };
    let field = |f: &str| {
        let v = read_hex(&dir.join(f));
        if v.is_none() {
            tracing::debug!(%address, file = f, "unreadable sysfs attribute; device skipped");
        }
        v
    };
    let vendor = u16::try_from(field("vendor")?).ok()?;
    let device = u16::try_from(field("device")?).ok()?;
    let class = field("class")?;
    // Old kernels lack `revision`; it is also byte 8 of config space, so 0 is a safe stand-in.
    let revision = read_hex(&dir.join("revision"))
        .and_then(|r| u8::try_from(r).ok())
        .unwrap_or(0);
    Some(SysfsFunction {
        address,
        id: PciId::new(vendor, device),
        revision,
        class: class & 0x00ff_ffff,
        driver: link_name(&dir.join("driver")),
        iommu_group: link_name(&dir.join("iommu_group")).and_then(|g| g.parse().ok()),
        path: dir.to_path_buf(),
    })
}

/// Every PCI function under `<sysfs_root>/bus/pci/devices`, sorted by address. Entries that
/// are not readable functions are skipped.
pub fn scan(sysfs_root: &Path) -> Result<Vec<SysfsFunction>, SysfsError> {
    let dir = sysfs_root.join("bus/pci/devices");
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(SysfsError::NoPciBus { path: dir });
        }
        Err(source) => return Err(SysfsError::Read { path: dir, source }),
    };
    let mut out: Vec<SysfsFunction> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| read_function(&e.path()))
        .collect();
    out.sort_by_key(|f| f.address);
    Ok(out)
}

/// The Cassini and Gemini functions on this host (pass `/sys`), sorted by address.
pub fn list_real_devices(sysfs_root: &Path) -> Result<Vec<RealDevice>, SysfsError> {
    Ok(scan(sysfs_root)?
        .into_iter()
        .filter_map(|function| {
            NicKind::from_id(function.id).map(|kind| RealDevice { kind, function })
        })
        .collect())
}
