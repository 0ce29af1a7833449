//! Bookkeeping of a function's DMA mappings (IOVA -> host range), shared by every backend so that
//! each sees only well-formed requests: no zero-length or wrapping ranges, no overlap with a live
//! mapping, and an unmap names exactly one mapping.

use std::collections::BTreeMap;

use thiserror::Error;

/// A range of host memory handed to a device.
///
/// What `addr` means depends on the backend: for an emulated function it is an address in the
/// emulated node's host memory; for a vfio function it is a virtual address in this process,
/// which the IOMMU will let the device read and write until it is unmapped (see
/// [`PciFunction::dma_map`](super::PciFunction::dma_map)).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostRange {
    /// Start of the range.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

impl HostRange {
    /// A range of `len` bytes at `addr`.
    pub const fn new(addr: u64, len: u64) -> Self {
        HostRange { addr, len }
    }
}

/// One live mapping: device addresses `iova..iova+host.len` reach `host`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DmaMapping {
    /// First device (IO virtual) address.
    pub iova: u64,
    /// The host memory behind it.
    pub host: HostRange,
}

impl DmaMapping {
    /// One past the last IOVA (fits: ranges that wrap are refused).
    pub fn iova_end(&self) -> u64 {
        self.iova.saturating_add(self.host.len)
    }
}

/// Why a DMA map or unmap was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DmaError {
    /// A mapping must cover at least one byte.
    #[error("DMA range at iova {iova:#x} has length 0")]
    ZeroLength {
        /// Requested IOVA.
        iova: u64,
    },
    /// The IOVA or host range runs past the end of the 64-bit address space.
    #[error("DMA range iova {iova:#x} / host {addr:#x} + {len:#x} wraps the address space")]
    Wraps {
        /// Requested IOVA.
        iova: u64,
        /// Requested host address.
        addr: u64,
        /// Requested length.
        len: u64,
    },
    /// The requested IOVA range overlaps a live mapping.
    #[error(
        "DMA range {iova:#x}+{len:#x} overlaps the mapping at {existing_iova:#x}+{existing_len:#x}"
    )]
    Overlap {
        /// Requested IOVA.
        iova: u64,
        /// Requested length.
        len: u64,
        /// IOVA of the mapping in the way.
        existing_iova: u64,
        /// Length of the mapping in the way.
        existing_len: u64,
    },
    /// No mapping starts at this IOVA.
    #[error("no DMA mapping starts at iova {iova:#x}")]
    NotMapped {
        /// Requested IOVA.
        iova: u64,
    },
    /// A mapping starts here but has another length; mappings are unmapped whole.
    #[error("the DMA mapping at iova {iova:#x} is {mapped_len:#x} bytes, not {len:#x}")]
    LengthMismatch {
        /// Requested IOVA.
        iova: u64,
        /// Requested length.
        len: u64,
        /// Length of the mapping there.
        mapped_len: u64,
    },
    /// The backend needs page-aligned ranges (vfio: IOMMU pages).
    #[error("DMA range iova {iova:#x} / host {addr:#x} + {len:#x} is not {align:#x}-aligned")]
    Misaligned {
        /// Requested IOVA.
        iova: u64,
        /// Requested host address.
        addr: u64,
        /// Requested length.
        len: u64,
        /// Required alignment.
        align: u64,
    },
    /// The device side refused the mapping (e.g. its translation table is full).
    #[error("the device refused the DMA mapping: {0}")]
    Rejected(String),
}

/// The live mappings of one function, ordered by IOVA.
#[derive(Debug, Default, Clone)]
pub struct DmaTable {
    maps: BTreeMap<u64, DmaMapping>,
}

impl DmaTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Check that `iova -> host` could be added, without adding it.
    pub fn check_map(&self, iova: u64, host: HostRange) -> Result<(), DmaError> {
        if host.len == 0 {
            return Err(DmaError::ZeroLength { iova });
        }
        let wraps = DmaError::Wraps {
            iova,
            addr: host.addr,
            len: host.len,
        };
        let end = iova.checked_add(host.len).ok_or_else(|| wraps.clone())?;
        host.addr.checked_add(host.len).ok_or(wraps)?;
        let overlap = |m: &DmaMapping| DmaError::Overlap {
            iova,
            len: host.len,
            existing_iova: m.iova,
            existing_len: m.host.len,
        };
        // The mapping starting at or before `iova` may extend over it.
        if let Some((_, m)) = self.maps.range(..=iova).next_back()
            && m.iova_end() > iova
        {
            return Err(overlap(m));
        }
        // Any mapping starting inside the new range overlaps it.
        if let Some((_, m)) = self.maps.range(iova..end).next() {
            return Err(overlap(m));
        }
        Ok(())
    }

    /// Record `iova -> host`; refused (and nothing recorded) if it is malformed or overlaps.
    pub fn insert(&mut self, iova: u64, host: HostRange) -> Result<(), DmaError> {
        self.check_map(iova, host)?;
        self.maps.insert(iova, DmaMapping { iova, host });
        Ok(())
    }

    /// The mapping that `unmap(iova, len)` would remove.
    pub fn check_unmap(&self, iova: u64, len: u64) -> Result<DmaMapping, DmaError> {
        match self.maps.get(&iova) {
            None => Err(DmaError::NotMapped { iova }),
            Some(m) if m.host.len != len => Err(DmaError::LengthMismatch {
                iova,
                len,
                mapped_len: m.host.len,
            }),
            Some(m) => Ok(*m),
        }
    }

    /// Remove the mapping that starts at `iova` and is `len` bytes long.
    pub fn remove(&mut self, iova: u64, len: u64) -> Result<DmaMapping, DmaError> {
        let m = self.check_unmap(iova, len)?;
        self.maps.remove(&iova);
        Ok(m)
    }

    /// The mapping covering `iova`, if any.
    pub fn lookup(&self, iova: u64) -> Option<DmaMapping> {
        self.maps
            .range(..=iova)
            .next_back()
            .map(|(_, m)| *m)
            .filter(|m| m.iova_end() > iova)
    }

    /// Every live mapping, by IOVA.
    pub fn mappings(&self) -> Vec<DmaMapping> {
        self.maps.values().copied().collect()
    }

    /// Number of live mappings.
    pub fn len(&self) -> usize {
        self.maps.len()
    }

    /// True when nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(addr: u64, len: u64) -> HostRange {
        HostRange::new(addr, len)
    }

    #[test]
    fn overlaps_are_refused_and_neighbours_accepted() {
        let mut t = DmaTable::new();
        t.insert(0x1000, r(0x10_0000, 0x1000)).unwrap();
        // Adjacent on both sides is fine.
        t.insert(0x0, r(0x20_0000, 0x1000)).unwrap();
        t.insert(0x2000, r(0x30_0000, 0x1000)).unwrap();
        // Inside, straddling the start, straddling the end, and covering.
        for (iova, len) in [
            (0x1800, 0x10),
            (0x800, 0x1000),
            (0x1fff, 2),
            (0x0, 0x10_000),
        ] {
            let e = t.insert(iova, r(0x40_0000, len)).unwrap_err();
            assert!(
                matches!(e, DmaError::Overlap { .. }),
                "{iova:#x}+{len:#x}: {e}"
            );
        }
        assert_eq!(t.len(), 3);
        assert_eq!(t.lookup(0x1fff).map(|m| m.iova), Some(0x1000));
        assert_eq!(t.lookup(0x3000), None);
    }

    #[test]
    fn malformed_ranges_are_refused() {
        let mut t = DmaTable::new();
        assert_eq!(t.insert(5, r(0, 0)), Err(DmaError::ZeroLength { iova: 5 }));
        assert!(matches!(
            t.insert(u64::MAX, r(0, 2)),
            Err(DmaError::Wraps { .. })
        ));
        assert!(matches!(
            t.insert(0, r(u64::MAX, 2)),
            Err(DmaError::Wraps { .. })
        ));
        assert!(t.is_empty());
    }

    #[test]
    fn unmap_must_name_a_whole_mapping() {
        let mut t = DmaTable::new();
        t.insert(0x4000, r(0x9000, 0x2000)).unwrap();
        assert_eq!(
            t.remove(0x5000, 0x1000),
            Err(DmaError::NotMapped { iova: 0x5000 })
        );
        assert_eq!(
            t.remove(0x4000, 0x1000),
            Err(DmaError::LengthMismatch {
                iova: 0x4000,
                len: 0x1000,
                mapped_len: 0x2000
            })
        );
        let m = t.remove(0x4000, 0x2000).unwrap();
        assert_eq!(m.host, r(0x9000, 0x2000));
        assert_eq!(
            t.remove(0x4000, 0x2000),
            Err(DmaError::NotMapped { iova: 0x4000 })
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The table accepts a range exactly when it is disjoint from every accepted one.
        #[test]
        fn table_matches_a_naive_model(ops in prop::collection::vec((0u64..64, 1u64..8, any::<bool>()), 1..60)) {
            let mut t = DmaTable::new();
            let mut model: Vec<(u64, u64)> = Vec::new();
            for (start, len, unmap) in ops {
                if unmap {
                    let expect = model.iter().position(|&(s, l)| s == start && l == len);
                    let got = t.remove(start, len);
                    prop_assert_eq!(got.is_ok(), expect.is_some());
                    if let Some(i) = expect { model.remove(i); }
                } else {
                    let free = model.iter().all(|&(s, l)| start + len <= s || s + l <= start);
                    prop_assert_eq!(t.insert(start, r(start * 0x1000, len)).is_ok(), free);
                    if free { model.push((start, len)); }
                }
            }
            prop_assert_eq!(t.len(), model.len());
        }
    }
}
