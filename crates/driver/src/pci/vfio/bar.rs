//! A BAR of a real device as an [`Mmio`] region: volatile loads and stores on the mmap'd areas,
//! pread/pwrite of the device file (trapped by the kernel) for the rest.

use std::fmt;
use std::ptr;
use std::sync::Arc;

use emu_core::mmio::{Mmio, MmioError};
use vm_memory::MmapRegion;

use super::VfioError;
use super::ops::VfioDeviceOps;
use super::region::VfioRegion;

struct MappedArea {
    /// Offset of the area inside the BAR.
    start: u64,
    /// Length of the area.
    len: u64,
    map: Arc<MmapRegion>,
}

/// One BAR of a vfio device.
pub struct VfioBar {
    region: VfioRegion,
    areas: Vec<MappedArea>,
    device: Arc<dyn VfioDeviceOps>,
}

impl VfioBar {
    /// mmap every mmap'able area of `region`.
    pub(crate) fn new(
        region: VfioRegion,
        device: Arc<dyn VfioDeviceOps>,
    ) -> Result<Self, VfioError> {
        let mut areas = Vec::with_capacity(region.mmap_areas.len());
        for a in &region.mmap_areas {
            let bad = |reason: String| VfioError::BadRegion {
                index: region.index,
                reason,
            };
            let len = usize::try_from(a.size)
                .map_err(|_| bad(format!("area of {:#x} bytes does not fit memory", a.size)))?;
            // Discovery checked that the area lies inside the region and the region inside the
            // file offset space, so this does not overflow.
            let file_offset = region.file_offset.saturating_add(a.offset);
            let map = device
                .mmap(file_offset, len)
                .map_err(|source| VfioError::Mmap {
                    index: region.index,
                    offset: a.offset,
                    len: a.size,
                    source,
                })?;
            if map.size() < len || map.as_ptr().align_offset(8) != 0 {
                return Err(bad(format!(
                    "mapping of area {:#x}+{:#x} is too small or not 8-byte aligned",
                    a.offset, a.size
                )));
            }
            areas.push(MappedArea {
                start: a.offset,
                len: a.size,
                map,
            });
        }
        Ok(VfioBar {
            region,
            areas,
            device,
        })
    }

    /// The region behind the BAR.
    pub fn region(&self) -> &VfioRegion {
        &self.region
    }

    /// The areas actually mmap'd, as (offset in the BAR, length).
    pub fn mapped_areas(&self) -> Vec<(u64, u64)> {
        self.areas.iter().map(|a| (a.start, a.len)).collect()
    }

    /// True when an access of `width` bytes at `offset` goes through the mapping rather than
    /// through the kernel.
    pub fn is_mapped(&self, offset: u64, width: u64) -> bool {
        self.area_for(offset, width).is_some()
    }

    fn area_for(&self, offset: u64, width: u64) -> Option<&MappedArea> {
        let end = offset.checked_add(width)?;
        self.areas
            .iter()
            .find(|a| a.start <= offset && end <= a.start.saturating_add(a.len))
    }

    fn check(&self, offset: u64, width: usize) -> Result<u64, MmioError> {
        if !matches!(width, 1 | 2 | 4 | 8) {
            return Err(MmioError::BadWidth { offset, width });
        }
        let w = width as u64;
        if !offset.is_multiple_of(w) {
            return Err(MmioError::Misaligned { offset, width });
        }
        match offset.checked_add(w) {
            Some(end) if end <= self.region.size => Ok(w),
            _ => Err(MmioError::OutOfRange {
                offset,
                width,
                size: self.region.size,
            }),
        }
    }

    fn file_io_error(&self, op: &str, offset: u64, e: std::io::Error) -> MmioError {
        tracing::warn!(region = self.region.index, offset, error = %e, "vfio BAR {op} failed");
        MmioError::DeviceGone
    }
}

/// Volatile load of `data.len()` bytes at `rel` inside `map`. False if the access is not inside
/// the mapping or not naturally aligned.
fn mapped_load(map: &MmapRegion, rel: u64, data: &mut [u8]) -> bool {
    let Some(p) = checked_ptr(map, rel, data.len()) else {
        return false;
    };
    match data.len() {
        // SAFETY: `checked_ptr` proved `p..p+1` lies inside the live mapping `map` (borrowed
        // for this whole call, so not unmapped). Device memory is only ever touched through
        // volatile accesses, never through references.
        1 => data[0] = unsafe { ptr::read_volatile(p) },
        2 => {
            // SAFETY: as above for 2 bytes; `p` is 2-aligned (`checked_ptr` checks that the
            // mapping base is 8-aligned and `rel` a multiple of the width).
            let v = unsafe { ptr::read_volatile(p.cast::<u16>()) };
            data.copy_from_slice(&v.to_ne_bytes());
        }
        4 => {
            // SAFETY: as above for 4 bytes, `p` 4-aligned.
            let v = unsafe { ptr::read_volatile(p.cast::<u32>()) };
            data.copy_from_slice(&v.to_ne_bytes());
        }
        8 => {
            // SAFETY: as above for 8 bytes, `p` 8-aligned.
            let v = unsafe { ptr::read_volatile(p.cast::<u64>()) };
            data.copy_from_slice(&v.to_ne_bytes());
        }
        _ => return false,
    }
    true
}

/// Volatile store of `data` at `rel` inside `map`: one access of `data.len()` bytes. False if
/// the access is not inside the mapping or not naturally aligned.
fn mapped_store(map: &MmapRegion, rel: u64, data: &[u8]) -> bool {
    let Some(p) = checked_ptr(map, rel, data.len()) else {
        return false;
    };
    if let [b] = data {
        // SAFETY: `checked_ptr` proved `p..p+1` lies inside the live mapping `map` (borrowed
        // for this whole call), mapped read-write. Only volatile accesses touch it.
        unsafe { ptr::write_volatile(p, *b) };
    } else if let Ok(b) = <[u8; 2]>::try_from(data) {
        // SAFETY: as above for 2 bytes; `p` is 2-aligned (8-aligned base, `rel` a multiple of
        // the width).
        unsafe { ptr::write_volatile(p.cast::<u16>(), u16::from_ne_bytes(b)) };
    } else if let Ok(b) = <[u8; 4]>::try_from(data) {
        // SAFETY: as above for 4 bytes, `p` 4-aligned.
        unsafe { ptr::write_volatile(p.cast::<u32>(), u32::from_ne_bytes(b)) };
    } else if let Ok(b) = <[u8; 8]>::try_from(data) {
        // SAFETY: as above for 8 bytes, `p` 8-aligned.
        unsafe { ptr::write_volatile(p.cast::<u64>(), u64::from_ne_bytes(b)) };
    } else {
        return false;
    }
    true
}

/// The address of `rel` inside `map` if `rel..rel+width` lies inside it and is naturally
/// aligned (width 1, 2, 4 or 8).
fn checked_ptr(map: &MmapRegion, rel: u64, width: usize) -> Option<*mut u8> {
    if !matches!(width, 1 | 2 | 4 | 8) || map.as_ptr().align_offset(8) != 0 {
        return None;
    }
    let rel = usize::try_from(rel).ok()?;
    let end = rel.checked_add(width)?;
    if end > map.size() || !rel.is_multiple_of(width) {
        return None;
    }
    Some(map.as_ptr().wrapping_add(rel))
}

impl Mmio for VfioBar {
    fn size(&self) -> u64 {
        self.region.size
    }

    fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        let w = self.check(offset, data.len())?;
        if let Some(a) = self.area_for(offset, w)
            && mapped_load(&a.map, offset - a.start, data)
        {
            return Ok(());
        }
        if !self.region.readable {
            return Err(MmioError::Unmapped { addr: offset });
        }
        self.device
            .read_at(self.region.file_offset.saturating_add(offset), data)
            .map_err(|e| self.file_io_error("read", offset, e))
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        let w = self.check(offset, data.len())?;
        if !self.region.writable {
            return Err(MmioError::Unmapped { addr: offset });
        }
        if let Some(a) = self.area_for(offset, w)
            && mapped_store(&a.map, offset - a.start, data)
        {
            return Ok(());
        }
        self.device
            .write_at(self.region.file_offset.saturating_add(offset), data)
            .map_err(|e| self.file_io_error("write", offset, e))
    }
}

impl fmt::Debug for VfioBar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VfioBar")
            .field("region", &self.region)
            .field("mapped", &self.mapped_areas())
            .finish()
    }
}
