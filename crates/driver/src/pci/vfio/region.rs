//! Region discovery: turn what the kernel reports for a region (flags, size, file offset,
//! capabilities) into what the BAR window needs: may it be read, written, and which parts of it
//! may be mmap'd.

use vfio_bindings::bindings::vfio::{
    VFIO_REGION_INFO_FLAG_MMAP, VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE,
};

use super::VfioError;
use super::ops::{RegionCap, RegionInfo, SparseArea};

/// mmap offsets must be page-aligned; vfio's own regions and sparse areas are.
pub const MMAP_ALIGN: u64 = 4096;

/// One discovered region of a vfio device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VfioRegion {
    /// Region index (`VFIO_PCI_BAR0_REGION_INDEX` + n, ..., `VFIO_PCI_CONFIG_REGION_INDEX`).
    pub index: u32,
    /// Size in bytes.
    pub size: u64,
    /// Offset of the region in the device file.
    pub file_offset: u64,
    /// pread is allowed.
    pub readable: bool,
    /// pwrite is allowed.
    pub writable: bool,
    /// The parts that may be mmap'd, relative to the region, sorted and disjoint. Empty when the
    /// region may not be mmap'd.
    pub mmap_areas: Vec<SparseArea>,
    /// The kernel allows mmap over the MSI-X table too.
    pub msix_mappable: bool,
}

impl VfioRegion {
    /// Build the region from its info; `None` for a region of size 0 (not implemented). Refuses
    /// info that cannot be right: a region that does not fit the file offset space, a mmap'able
    /// region at an unaligned offset, or sparse areas that are empty, unaligned, outside the
    /// region, or overlapping.
    pub fn discover(index: u32, info: &RegionInfo) -> Result<Option<Self>, VfioError> {
        if info.size == 0 {
            return Ok(None);
        }
        let bad = |reason: String| VfioError::BadRegion { index, reason };
        if info.offset.checked_add(info.size).is_none() {
            return Err(bad(format!(
                "offset {:#x} + size {:#x} overflows",
                info.offset, info.size
            )));
        }
        let mmap = info.flags & VFIO_REGION_INFO_FLAG_MMAP != 0;
        let mut msix_mappable = false;
        let mut sparse: Option<Vec<SparseArea>> = None;
        for cap in &info.caps {
            match cap {
                RegionCap::SparseMmap(areas) => sparse = Some(areas.clone()),
                RegionCap::MsixMappable => msix_mappable = true,
                RegionCap::Other => {}
            }
        }
        let mmap_areas = if !mmap {
            Vec::new()
        } else {
            if !info.offset.is_multiple_of(MMAP_ALIGN) {
                return Err(bad(format!(
                    "mmap'able region at unaligned file offset {:#x}",
                    info.offset
                )));
            }
            match sparse {
                None => vec![SparseArea {
                    offset: 0,
                    size: info.size,
                }],
                Some(mut areas) => {
                    // The kernel may list zero-sized areas; they map nothing.
                    areas.retain(|a| a.size != 0);
                    areas.sort_by_key(|a| a.offset);
                    let mut prev_end = 0u64;
                    for a in &areas {
                        let end = a.offset.checked_add(a.size).filter(|&e| e <= info.size);
                        let Some(end) = end else {
                            return Err(bad(format!(
                                "sparse mmap area {:#x}+{:#x} outside the region of size {:#x}",
                                a.offset, a.size, info.size
                            )));
                        };
                        if !a.offset.is_multiple_of(MMAP_ALIGN) {
                            return Err(bad(format!(
                                "sparse mmap area at unaligned offset {:#x}",
                                a.offset
                            )));
                        }
                        if a.offset < prev_end {
                            return Err(bad(format!(
                                "sparse mmap area at {:#x} overlaps the one before it",
                                a.offset
                            )));
                        }
                        prev_end = end;
                    }
                    areas
                }
            }
        };
        Ok(Some(VfioRegion {
            index,
            size: info.size,
            file_offset: info.offset,
            readable: info.flags & VFIO_REGION_INFO_FLAG_READ != 0,
            writable: info.flags & VFIO_REGION_INFO_FLAG_WRITE != 0,
            mmap_areas,
            msix_mappable,
        }))
    }

    /// Bytes of the region covered by mmap'able areas.
    pub fn mmap_len(&self) -> u64 {
        self.mmap_areas.iter().map(|a| a.size).sum()
    }
}
