//! An MMIO bus: routes absolute addresses to [`Mmio`] regions (BARs, test RAM).
//!
//! Regions are kept in a `BTreeMap` keyed by base address; an access is routed to the region
//! whose base is the greatest one not above the address, if the address falls inside it. Holes
//! report [`MmioError::Unmapped`]; an access that starts inside a region but runs past its end
//! reports [`MmioError::OutOfRange`]. The bus is plain data (no lock inside): put it behind a
//! lock if it changes while accesses run.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use thiserror::Error;

use crate::mmio::{Mmio, MmioError};

/// Why a region could not be added to or removed from the bus.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BusError {
    /// The region has size 0.
    #[error("region at {base:#x} has size zero")]
    ZeroSize { base: u64 },
    /// `base + size` overflows 64 bits.
    #[error("region [{base:#x}, +{size:#x}) overflows the address space")]
    Overflow { base: u64, size: u64 },
    /// The region overlaps one already on the bus.
    #[error("region [{base:#x}, +{size:#x}) overlaps an existing region")]
    Overlap { base: u64, size: u64 },
    /// No region starts at `base`.
    #[error("no region starts at {base:#x}")]
    NotFound { base: u64 },
}

/// Validate an MMIO access of `width` bytes at `offset` in a region of `size` bytes: the width
/// must be 1, 2, 4 or 8, the offset naturally aligned, and the access inside the region.
pub fn check_access(offset: u64, width: usize, size: u64) -> Result<(), MmioError> {
    if !matches!(width, 1 | 2 | 4 | 8) {
        return Err(MmioError::BadWidth { offset, width });
    }
    if !offset.is_multiple_of(width as u64) {
        return Err(MmioError::Misaligned { offset, width });
    }
    match offset.checked_add(width as u64) {
        Some(end) if end <= size => Ok(()),
        _ => Err(MmioError::OutOfRange {
            offset,
            width,
            size,
        }),
    }
}

#[derive(Clone)]
struct BusEntry {
    size: u64,
    region: Arc<dyn Mmio>,
}

/// Routes absolute addresses to regions.
#[derive(Clone, Default)]
pub struct MmioBus {
    regions: BTreeMap<u64, BusEntry>,
}

impl fmt::Debug for MmioBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(
                self.regions
                    .iter()
                    .map(|(b, e)| format!("[{b:#x}, +{:#x})", e.size)),
            )
            .finish()
    }
}

impl MmioBus {
    /// An empty bus.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of regions.
    pub fn len(&self) -> usize {
        self.regions.len()
    }
    /// Whether no region is mapped.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Map `region` at `base` (its size is `region.size()`).
    pub fn insert(&mut self, base: u64, region: Arc<dyn Mmio>) -> Result<(), BusError> {
        let size = region.size();
        if size == 0 {
            return Err(BusError::ZeroSize { base });
        }
        let end = base
            .checked_add(size)
            .ok_or(BusError::Overflow { base, size })?;
        // Mappings are disjoint, so only the last one starting before `end` can overlap.
        if let Some((&b, e)) = self.regions.range(..end).next_back()
            && b + e.size > base
        {
            return Err(BusError::Overlap { base, size });
        }
        self.regions.insert(base, BusEntry { size, region });
        Ok(())
    }

    /// Unmap the region starting at `base` and return it.
    pub fn remove(&mut self, base: u64) -> Result<Arc<dyn Mmio>, BusError> {
        self.regions
            .remove(&base)
            .map(|e| e.region)
            .ok_or(BusError::NotFound { base })
    }

    /// The `(base, size)` of every region in address order.
    pub fn regions(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.regions.iter().map(|(&b, e)| (b, e.size))
    }

    /// The region containing `addr`: its base, the offset of `addr` inside it, and the region.
    pub fn resolve(&self, addr: u64) -> Option<(u64, u64, &Arc<dyn Mmio>)> {
        let (&base, e) = self.regions.range(..=addr).next_back()?;
        let offset = addr - base;
        (offset < e.size).then_some((base, offset, &e.region))
    }

    fn route(&self, addr: u64, width: usize) -> Result<(u64, &Arc<dyn Mmio>), MmioError> {
        let (base, offset, region) = self.resolve(addr).ok_or(MmioError::Unmapped { addr })?;
        let size = self.regions.get(&base).map_or(0, |e| e.size);
        match offset.checked_add(width as u64) {
            Some(end) if end <= size => Ok((offset, region)),
            _ => Err(MmioError::OutOfRange {
                offset,
                width,
                size,
            }),
        }
    }

    /// Load `data.len()` bytes at absolute address `addr`.
    pub fn read(&self, addr: u64, data: &mut [u8]) -> Result<(), MmioError> {
        let (offset, region) = self.route(addr, data.len())?;
        region.read(offset, data)
    }

    /// Store `data` at absolute address `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), MmioError> {
        let (offset, region) = self.route(addr, data.len())?;
        region.write(offset, data)
    }
}

/// A region of plain read/write bytes (tests, scratch BARs). Accesses are checked with
/// [`check_access`].
#[derive(Debug)]
pub struct RamRegion {
    bytes: Mutex<Vec<u8>>,
    size: u64,
}

impl RamRegion {
    /// A zero-filled region of `size` bytes.
    pub fn new(size: usize) -> Self {
        RamRegion {
            bytes: Mutex::new(vec![0; size]),
            size: size as u64,
        }
    }
    /// A copy of the current contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.bytes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Mmio for RamRegion {
    fn size(&self) -> u64 {
        self.size
    }
    fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        check_access(offset, data.len(), self.size)?;
        let b = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        let o = offset as usize;
        data.copy_from_slice(&b[o..o + data.len()]);
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        check_access(offset, data.len(), self.size)?;
        let mut b = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        let o = offset as usize;
        b[o..o + data.len()].copy_from_slice(data);
        Ok(())
    }
}

/// A region that reads as a constant (the low `width` bytes of `value`, little-endian, at
/// every offset) and ignores writes, like an unimplemented register block.
#[derive(Debug, Clone, Copy)]
pub struct ConstRegion {
    size: u64,
    value: u64,
}

impl ConstRegion {
    /// A region of `size` bytes reading as `value`.
    pub fn new(size: u64, value: u64) -> Self {
        ConstRegion { size, value }
    }
}

impl Mmio for ConstRegion {
    fn size(&self) -> u64 {
        self.size
    }
    fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        check_access(offset, data.len(), self.size)?;
        let n = data.len();
        data.copy_from_slice(&self.value.to_le_bytes()[..n]);
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        check_access(offset, data.len(), self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_access_rules() {
        assert!(check_access(8, 8, 16).is_ok());
        assert_eq!(
            check_access(4, 8, 16),
            Err(MmioError::Misaligned {
                offset: 4,
                width: 8
            })
        );
        assert_eq!(
            check_access(0, 3, 16),
            Err(MmioError::BadWidth {
                offset: 0,
                width: 3
            })
        );
        assert_eq!(
            check_access(16, 4, 16),
            Err(MmioError::OutOfRange {
                offset: 16,
                width: 4,
                size: 16
            })
        );
        assert!(check_access(u64::MAX - 7, 8, u64::MAX).is_err());
    }

    #[test]
    fn insert_rejects_overlap_and_zero() {
        let mut bus = MmioBus::new();
        bus.insert(0x1000, Arc::new(RamRegion::new(0x100))).unwrap();
        assert_eq!(
            bus.insert(0x10ff, Arc::new(RamRegion::new(1))),
            Err(BusError::Overlap {
                base: 0x10ff,
                size: 1
            })
        );
        assert!(bus.insert(0xf00, Arc::new(RamRegion::new(0x101))).is_err());
        assert!(
            bus.insert(0x0, Arc::new(ConstRegion::new(0x10_000, 0)))
                .is_err()
        );
        bus.insert(0x1100, Arc::new(RamRegion::new(0x100))).unwrap();
        bus.insert(0xf00, Arc::new(RamRegion::new(0x100))).unwrap();
        assert_eq!(
            bus.insert(0x5000, Arc::new(RamRegion::new(0))),
            Err(BusError::ZeroSize { base: 0x5000 })
        );
        assert!(matches!(
            bus.insert(u64::MAX - 1, Arc::new(ConstRegion::new(4, 0))),
            Err(BusError::Overflow { .. })
        ));
        assert_eq!(bus.len(), 3);
    }
}
