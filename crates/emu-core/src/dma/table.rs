//! Translation tables: non-overlapping mappings from one address space to the next, with
//! permissions ([`TranslationTable`]), and the checked pieces of a translated range
//! ([`Segments`]).

use std::collections::BTreeMap;
use std::collections::btree_map;
use std::iter::Peekable;

use super::access::{DmaError, MapError, Perm, Segment};

/// One mapping of a [`TranslationTable`], as reported by [`TranslationTable::mappings`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First input address.
    pub iova: u64,
    /// Length in bytes.
    pub len: u64,
    /// First output address.
    pub target: u64,
    /// Permissions.
    pub perm: Perm,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Entry {
    len: u64,
    target: u64,
    perm: Perm,
}

/// A set of non-overlapping mappings `[iova, iova + len) -> [target, target + len)` with
/// permissions. A plain data structure (no locking inside): the platform IOMMU keeps one
/// behind a lock, device models keep their own (ATU, MDD/MRT) inside their state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TranslationTable {
    map: BTreeMap<u64, Entry>,
}

impl TranslationTable {
    /// An empty table (every address untranslated).
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of mappings.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// Whether there are no mappings.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Remove every mapping.
    pub fn clear(&mut self) {
        self.map.clear();
    }

    /// All mappings in IOVA order.
    pub fn mappings(&self) -> impl Iterator<Item = Mapping> + '_ {
        self.map.iter().map(|(&iova, e)| Mapping {
            iova,
            len: e.len,
            target: e.target,
            perm: e.perm,
        })
    }

    /// The mapping containing `iova`, if any.
    pub fn lookup(&self, iova: u64) -> Option<Mapping> {
        self.containing(iova).map(|(start, e)| Mapping {
            iova: start,
            len: e.len,
            target: e.target,
            perm: e.perm,
        })
    }

    fn containing(&self, iova: u64) -> Option<(u64, &Entry)> {
        let (&start, e) = self.map.range(..=iova).next_back()?;
        (iova - start < e.len).then_some((start, e))
    }

    /// Add a mapping. Fails (changing nothing) on zero length, on overflow of `iova + len` or
    /// `target + len`, or when any byte of the range is already mapped.
    pub fn map(&mut self, iova: u64, target: u64, len: u64, perm: Perm) -> Result<(), MapError> {
        if len == 0 {
            return Err(MapError::ZeroLength);
        }
        let Some(end) = iova.checked_add(len) else {
            return Err(MapError::Overflow { iova, len });
        };
        if target.checked_add(len).is_none() {
            return Err(MapError::Overflow { iova, len });
        }
        // Only the last mapping starting before `end` can overlap (mappings are disjoint).
        if let Some((&s, e)) = self.map.range(..end).next_back()
            && s + e.len > iova
        {
            return Err(MapError::Overlap { iova, len });
        }
        self.map.insert(iova, Entry { len, target, perm });
        Ok(())
    }

    /// Remove every byte of `[iova, iova + len)`, splitting mappings that straddle either end.
    /// Fails (changing nothing) unless every byte of the range is mapped.
    pub fn unmap(&mut self, iova: u64, len: u64) -> Result<(), MapError> {
        let not_mapped = MapError::NotMapped { iova, len };
        if len == 0 {
            return Err(not_mapped);
        }
        let end = iova.checked_add(len).ok_or(not_mapped.clone())?;
        // Validate full coverage first.
        let (first, _) = self.containing(iova).ok_or(not_mapped.clone())?;
        let mut cur = iova;
        let mut keys = Vec::new();
        for (&s, e) in self.map.range(first..) {
            if s > cur {
                return Err(not_mapped);
            }
            keys.push(s);
            cur = s + e.len;
            if cur >= end {
                break;
            }
        }
        if cur < end {
            return Err(not_mapped);
        }
        for s in keys {
            let Some(e) = self.map.remove(&s) else {
                continue;
            };
            let e_end = s + e.len;
            if s < iova {
                let head = iova - s;
                self.map.insert(
                    s,
                    Entry {
                        len: head,
                        target: e.target,
                        perm: e.perm,
                    },
                );
            }
            if e_end > end {
                let skip = end - s;
                self.map.insert(
                    end,
                    Entry {
                        len: e_end - end,
                        target: e.target + skip,
                        perm: e.perm,
                    },
                );
            }
        }
        Ok(())
    }

    /// Check that every byte of `[iova, iova + len)` is mapped with at least `needed`.
    /// A zero-length access is always allowed.
    pub fn check(&self, iova: u64, len: u64, needed: Perm) -> Result<(), DmaError> {
        self.first_entry(iova, len, needed).map(|_| ())
    }

    /// Validate the access and return the key of the mapping holding `iova` (None if len 0).
    fn first_entry(&self, iova: u64, len: u64, needed: Perm) -> Result<Option<u64>, DmaError> {
        if len == 0 {
            return Ok(None);
        }
        let end = iova
            .checked_add(len)
            .ok_or(DmaError::OutOfBounds { iova, len })?;
        let (first, _) = self
            .containing(iova)
            .ok_or(DmaError::NoTranslation { iova })?;
        let mut cur = iova;
        for (&s, e) in self.map.range(first..) {
            if s > cur {
                break;
            }
            if !e.perm.contains(needed) {
                return Err(DmaError::PermissionDenied { iova: cur, needed });
            }
            cur = s + e.len;
            if cur >= end {
                return Ok(Some(first));
            }
        }
        Err(DmaError::NoTranslation { iova: cur })
    }

    /// Fast path for the common case of an access inside one mapping: `Ok(Some(segment))` if
    /// the mapping holding `iova` covers the whole range with `needed`, `Ok(None)` if the range
    /// continues into further mappings (use [`TranslationTable::translate`]) or is empty, and
    /// the same error [`TranslationTable::translate`] would return if `iova` itself faults.
    pub fn translate_within(
        &self,
        iova: u64,
        len: u64,
        needed: Perm,
    ) -> Result<Option<Segment>, DmaError> {
        if len == 0 {
            return Ok(None);
        }
        if iova.checked_add(len).is_none() {
            return Err(DmaError::OutOfBounds { iova, len });
        }
        let (start, e) = self
            .containing(iova)
            .ok_or(DmaError::NoTranslation { iova })?;
        if !e.perm.contains(needed) {
            return Err(DmaError::PermissionDenied { iova, needed });
        }
        let off = iova - start;
        Ok((e.len - off >= len).then_some(Segment {
            addr: e.target + off,
            len,
        }))
    }

    /// Translate `[iova, iova + len)` needing `needed`: the whole range is checked first, then
    /// the output pieces are returned in order (pieces that are contiguous in the output space
    /// are merged). A zero-length access yields no pieces.
    pub fn translate(&self, iova: u64, len: u64, needed: Perm) -> Result<Segments<'_>, DmaError> {
        let first = self.first_entry(iova, len, needed)?;
        let range = match first {
            Some(k) => self.map.range(k..),
            // Empty iterator with the right type.
            None => self.map.range(1..1),
        };
        Ok(Segments {
            range: range.peekable(),
            cur: iova,
            remaining: if first.is_some() { len } else { 0 },
        })
    }
}

/// The output pieces of a checked translation, see [`TranslationTable::translate`].
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    range: Peekable<btree_map::Range<'a, u64, Entry>>,
    cur: u64,
    remaining: u64,
}

impl Iterator for Segments<'_> {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        if self.remaining == 0 {
            return None;
        }
        let (&s, e) = self.range.next()?;
        let off = self.cur.checked_sub(s)?;
        let mut len = e.len.checked_sub(off)?.min(self.remaining);
        let addr = e.target + off;
        self.cur += len;
        self.remaining -= len;
        // Merge following mappings that continue both the input and the output range.
        while self.remaining > 0 {
            match self.range.peek() {
                Some(&(&ns, ne)) if ns == self.cur && ne.target == addr + len => {
                    let take = ne.len.min(self.remaining);
                    len += take;
                    self.cur += take;
                    self.remaining -= take;
                    self.range.next();
                }
                _ => break,
            }
        }
        Some(Segment { addr, len })
    }
}
