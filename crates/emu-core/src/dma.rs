//! DMA: the port through which a device reads and writes host memory (architecture seam 2).
//!
//! A device never holds a host pointer. It names memory by an I/O virtual address (IOVA) and
//! its [`DmaPort`] translates that address through the platform [`Iommu`] into host physical
//! ranges of a [`HostMemory`], checking permissions and bounds. A bad IOVA is a [`DmaError`]
//! the device turns into whatever the hardware reports (an error event, a return code); it
//! never becomes a panic or a stray write.
//!
//! Two translation levels compose:
//! 1. inside the device (the Cassini ATU, the Gemini MDD/MRT): a [`TranslationTable`] that the
//!    device model owns, mapping the addresses found in commands to bus addresses;
//! 2. the platform IOMMU: another [`TranslationTable`] (or passthrough), owned by the driver
//!    side through an [`Iommu`] handle, mapping bus addresses to host memory.
//!
//! A device model translates through its own table with [`TranslationTable::translate`] and
//! hands the resulting [`Segment`]s to [`DmaPort::read_segments`] /
//! [`DmaPort::write_segments`]. Every access is checked as a whole before any byte moves: a
//! violation anywhere in the range returns `Err` and touches no memory.

use std::collections::BTreeMap;
use std::collections::btree_map;
use std::fmt;
use std::iter::Peekable;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use thiserror::Error;

use crate::memory::{GuestAddress, HostMemory, MemoryError, copy_between};

/// Access permissions of a mapping, and the access an operation needs.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Default)]
pub struct Perm(u8);

impl Perm {
    /// No access.
    pub const NONE: Perm = Perm(0);
    /// The device may read (host memory -> device).
    pub const READ: Perm = Perm(1);
    /// The device may write (device -> host memory).
    pub const WRITE: Perm = Perm(2);
    /// Read and write.
    pub const RW: Perm = Perm(3);

    /// Build from two flags.
    pub const fn new(read: bool, write: bool) -> Perm {
        Perm((read as u8) | ((write as u8) << 1))
    }
    /// Whether every permission in `other` is also in `self`.
    pub const fn contains(self, other: Perm) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether reading is allowed.
    pub const fn can_read(self) -> bool {
        self.contains(Perm::READ)
    }
    /// Whether writing is allowed.
    pub const fn can_write(self) -> bool {
        self.contains(Perm::WRITE)
    }
    /// Whether no permission is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for Perm {
    type Output = Perm;
    fn bitor(self, rhs: Perm) -> Perm {
        Perm(self.0 | rhs.0)
    }
}

impl fmt::Display for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = if self.can_read() { "R" } else { "-" };
        let w = if self.can_write() { "W" } else { "-" };
        write!(f, "{r}{w}")
    }
}

impl fmt::Debug for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Perm({self})")
    }
}

/// A contiguous piece of a translated range: `len` bytes at `addr` of the next address space
/// down (bus address for a device table, host physical address for the IOMMU).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// First byte in the output address space.
    pub addr: u64,
    /// Length in bytes (never 0 when produced by a translation).
    pub len: u64,
}

/// Why a DMA access failed. Nothing was read or written when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DmaError {
    /// No mapping covers `iova` (the first unmapped byte of the access).
    #[error("no translation for IOVA {iova:#x}")]
    NoTranslation { iova: u64 },
    /// The mapping covering `iova` lacks a permission the access needs.
    #[error("IOVA {iova:#x}: access {needed} not permitted")]
    PermissionDenied { iova: u64, needed: Perm },
    /// `iova + len` overflows, or (passthrough) the range runs past the end of host memory.
    #[error("DMA range [{iova:#x}, +{len:#x}) is out of bounds")]
    OutOfBounds { iova: u64, len: u64 },
    /// An atomic access at an IOVA that is not naturally aligned or does not translate to
    /// one contiguous host range.
    #[error("atomic DMA access at IOVA {iova:#x} is not aligned to {align} bytes")]
    Misaligned { iova: u64, align: u64 },
    /// A scatter/gather list whose total length differs from the buffer.
    #[error("segments cover {segments:#x} bytes but the buffer has {buffer:#x}")]
    LengthMismatch { segments: u64, buffer: u64 },
    /// The translation pointed outside host memory.
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

/// Why a map or unmap request was refused. The table is unchanged when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MapError {
    /// A mapping of zero bytes.
    #[error("mapping of zero bytes")]
    ZeroLength,
    /// `iova + len` or `target + len` overflows 64 bits.
    #[error("mapping [{iova:#x}, +{len:#x}) overflows the address space")]
    Overflow { iova: u64, len: u64 },
    /// The new mapping overlaps an existing one.
    #[error("mapping [{iova:#x}, +{len:#x}) overlaps an existing mapping")]
    Overlap { iova: u64, len: u64 },
    /// Unmap of a range that is not entirely mapped.
    #[error("unmap of [{iova:#x}, +{len:#x}) which is not entirely mapped")]
    NotMapped { iova: u64, len: u64 },
    /// Map/unmap on an IOMMU in passthrough mode.
    #[error("the IOMMU is in passthrough mode")]
    Passthrough,
}

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

/// How the platform IOMMU treats a device's addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IommuMode {
    /// IOVA == host physical address; only bounds are checked, everything is read/write.
    Passthrough,
    /// Every access goes through the table.
    Translate(TranslationTable),
}

/// The platform IOMMU context of one device: shared between the driver side (which maps and
/// unmaps) and the device's [`DmaPort`] (which translates), behind a read/write lock.
///
/// Whether the mode is passthrough is also kept in an atomic flag, so that passthrough
/// accesses (the emulated nodes' default) take no lock at all. A mode change is therefore
/// not synchronised with accesses already under way: one that started under the old mode
/// may complete under it. Drivers change modes while the device is quiescent.
#[derive(Clone)]
pub struct Iommu {
    state: Arc<IommuState>,
}

struct IommuState {
    mode: RwLock<IommuMode>,
    /// `matches!(mode, IommuMode::Passthrough)`, stored under the write lock.
    passthrough: AtomicBool,
}

impl fmt::Debug for Iommu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.state.mode.try_read() {
            Ok(g) => match &*g {
                IommuMode::Passthrough => f.write_str("Iommu(passthrough)"),
                IommuMode::Translate(t) => write!(f, "Iommu(translate, {} mappings)", t.len()),
            },
            Err(_) => f.write_str("Iommu(<locked>)"),
        }
    }
}

impl Iommu {
    /// An IOMMU in passthrough mode.
    pub fn passthrough() -> Self {
        Self::with_mode(IommuMode::Passthrough)
    }
    /// An IOMMU translating through an empty table (every access faults until mapped).
    pub fn translating() -> Self {
        Self::with_mode(IommuMode::Translate(TranslationTable::new()))
    }
    /// An IOMMU in the given mode.
    pub fn with_mode(mode: IommuMode) -> Self {
        let passthrough = AtomicBool::new(matches!(mode, IommuMode::Passthrough));
        Iommu {
            state: Arc::new(IommuState {
                mode: RwLock::new(mode),
                passthrough,
            }),
        }
    }

    /// Whether two handles are the same IOMMU context.
    pub fn same_as(&self, other: &Iommu) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    fn read(&self) -> RwLockReadGuard<'_, IommuMode> {
        // The lock protects plain data that every writer leaves consistent between calls;
        // a panic elsewhere does not invalidate it.
        self.state.mode.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> RwLockWriteGuard<'_, IommuMode> {
        self.state.mode.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the IOMMU is in passthrough mode (one atomic load, no lock).
    pub fn is_passthrough(&self) -> bool {
        self.state.passthrough.load(Ordering::Acquire)
    }
    /// Replace the mode (e.g. switch to passthrough, or install a table). See the type's
    /// note on accesses under way.
    pub fn set_mode(&self, mode: IommuMode) {
        let mut g = self.write();
        let pt = matches!(mode, IommuMode::Passthrough);
        *g = mode;
        self.state.passthrough.store(pt, Ordering::Release);
    }
    /// A copy of the current mode.
    pub fn mode(&self) -> IommuMode {
        self.read().clone()
    }

    /// Map `[iova, iova + len)` to host memory at `host` with `perm`.
    pub fn map(&self, iova: u64, host: GuestAddress, len: u64, perm: Perm) -> Result<(), MapError> {
        match &mut *self.write() {
            IommuMode::Passthrough => Err(MapError::Passthrough),
            IommuMode::Translate(t) => t.map(iova, host.0, len, perm),
        }
    }
    /// Unmap `[iova, iova + len)`, see [`TranslationTable::unmap`].
    pub fn unmap(&self, iova: u64, len: u64) -> Result<(), MapError> {
        match &mut *self.write() {
            IommuMode::Passthrough => Err(MapError::Passthrough),
            IommuMode::Translate(t) => t.unmap(iova, len),
        }
    }
}

/// A validated translation of a range, ready to copy.
#[derive(Clone)]
enum Pieces<'a> {
    One(Option<Segment>),
    Table(Segments<'a>),
}

impl Iterator for Pieces<'_> {
    type Item = Segment;
    fn next(&mut self) -> Option<Segment> {
        match self {
            Pieces::One(s) => s.take(),
            Pieces::Table(t) => t.next(),
        }
    }
}

/// Translate through `mode` and check the host side, so that nothing can fail after this.
fn pieces<'a>(
    mode: &'a IommuMode,
    mem: &HostMemory,
    iova: u64,
    len: u64,
    needed: Perm,
) -> Result<Pieces<'a>, DmaError> {
    match mode {
        IommuMode::Passthrough => {
            if !mem.reachable(iova, len) {
                return Err(DmaError::OutOfBounds { iova, len });
            }
            Ok(Pieces::One(
                (len > 0).then_some(Segment { addr: iova, len }),
            ))
        }
        IommuMode::Translate(t) => {
            if let Some(seg) = t.translate_within(iova, len, needed)? {
                mem.check(GuestAddress(seg.addr), seg.len)?;
                return Ok(Pieces::One(Some(seg)));
            }
            let segs = t.translate(iova, len, needed)?;
            for s in segs.clone() {
                mem.check(GuestAddress(s.addr), s.len)?;
            }
            Ok(Pieces::Table(segs))
        }
    }
}

/// A device's window onto host memory through its platform IOMMU. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DmaPort {
    mem: HostMemory,
    iommu: Iommu,
}

impl DmaPort {
    /// A port onto `mem` through `iommu`.
    pub fn new(mem: HostMemory, iommu: Iommu) -> Self {
        DmaPort { mem, iommu }
    }
    /// A port onto `mem` through a fresh passthrough IOMMU (IOVA == host address).
    pub fn passthrough(mem: HostMemory) -> Self {
        DmaPort::new(mem, Iommu::passthrough())
    }
    /// The host memory behind the port.
    pub fn memory(&self) -> &HostMemory {
        &self.mem
    }
    /// The IOMMU handle (the driver side maps and unmaps through a clone of it).
    pub fn iommu(&self) -> &Iommu {
        &self.iommu
    }

    /// Passthrough fast path: the range checked against host memory, no lock taken.
    /// `Ok(false)` when the IOMMU translates (take the locked path).
    fn direct(&self, iova: u64, len: u64) -> Result<bool, DmaError> {
        if !self.iommu.is_passthrough() {
            return Ok(false);
        }
        if self.mem.reachable(iova, len) {
            Ok(true)
        } else {
            Err(DmaError::OutOfBounds { iova, len })
        }
    }

    /// Check that `[iova, iova + len)` is accessible with `needed`, without accessing it.
    pub fn check(&self, iova: u64, len: u64, needed: Perm) -> Result<(), DmaError> {
        if self.direct(iova, len)? {
            return Ok(());
        }
        let mode = self.iommu.read();
        pieces(&mode, &self.mem, iova, len, needed).map(|_| ())
    }

    /// Device reads `buf.len()` bytes at `iova`.
    pub fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        if self.direct(iova, buf.len() as u64)? {
            return Ok(self.mem.read(GuestAddress(iova), buf)?);
        }
        let mode = self.iommu.read();
        let ps = pieces(&mode, &self.mem, iova, buf.len() as u64, Perm::READ)?;
        scatter_read(&self.mem, ps, buf)
    }

    /// Device writes `buf` at `iova`.
    pub fn write(&self, iova: u64, buf: &[u8]) -> Result<(), DmaError> {
        if self.direct(iova, buf.len() as u64)? {
            return Ok(self.mem.write(GuestAddress(iova), buf)?);
        }
        let mode = self.iommu.read();
        let ps = pieces(&mode, &self.mem, iova, buf.len() as u64, Perm::WRITE)?;
        gather_write(&self.mem, ps, buf)
    }

    /// Read a little-endian `u32` (any alignment; not atomic).
    pub fn read_u32(&self, iova: u64) -> Result<u32, DmaError> {
        let mut b = [0u8; 4];
        self.read(iova, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    /// Read a little-endian `u64` (any alignment; not atomic).
    pub fn read_u64(&self, iova: u64) -> Result<u64, DmaError> {
        let mut b = [0u8; 8];
        self.read(iova, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    /// Write a little-endian `u32` (any alignment; not atomic).
    pub fn write_u32(&self, iova: u64, v: u32) -> Result<(), DmaError> {
        self.write(iova, &v.to_le_bytes())
    }
    /// Write a little-endian `u64` (any alignment; not atomic).
    pub fn write_u64(&self, iova: u64, v: u64) -> Result<(), DmaError> {
        self.write(iova, &v.to_le_bytes())
    }

    /// Set `len` bytes at `iova` to `byte`.
    pub fn fill(&self, iova: u64, len: u64, byte: u8) -> Result<(), DmaError> {
        if self.direct(iova, len)? {
            return Ok(self.mem.fill(GuestAddress(iova), len, byte)?);
        }
        let mode = self.iommu.read();
        for s in pieces(&mode, &self.mem, iova, len, Perm::WRITE)? {
            self.mem.fill(GuestAddress(s.addr), s.len, byte)?;
        }
        Ok(())
    }

    /// Run `f` on the 8-byte word at `iova` as an atomic (device AMOs). `iova` must be
    /// 8-aligned and the word must be mapped read/write to one aligned host word.
    pub fn with_atomic_u64<R>(
        &self,
        iova: u64,
        needed: Perm,
        f: impl FnOnce(&AtomicU64) -> R,
    ) -> Result<R, DmaError> {
        let misaligned = DmaError::Misaligned { iova, align: 8 };
        if !iova.is_multiple_of(8) {
            return Err(misaligned);
        }
        if self.direct(iova, 8)? {
            return Ok(self.mem.with_atomic_u64(GuestAddress(iova), f)?);
        }
        let mode = self.iommu.read();
        let mut ps = pieces(&mode, &self.mem, iova, 8, needed)?;
        match ps.next() {
            Some(s) if s.len == 8 => Ok(self.mem.with_atomic_u64(GuestAddress(s.addr), f)?),
            _ => Err(misaligned),
        }
    }

    /// Atomic 8-byte load with acquire ordering (`iova` 8-aligned).
    pub fn load_u64_acquire(&self, iova: u64) -> Result<u64, DmaError> {
        self.with_atomic_u64(iova, Perm::READ, |a| a.load(Ordering::Acquire))
    }
    /// Atomic 8-byte store with release ordering (`iova` 8-aligned): the device's payload
    /// writes before it are visible to a CPU that acquires the new value (event valid words).
    pub fn store_u64_release(&self, iova: u64, v: u64) -> Result<(), DmaError> {
        self.with_atomic_u64(iova, Perm::WRITE, |a| a.store(v, Ordering::Release))
    }

    /// Read into `buf` from a scatter list of IOVAs (e.g. the output of a device-internal
    /// [`TranslationTable::translate`]). Every segment is checked before any byte is read; the
    /// segments' total length must equal `buf.len()`.
    pub fn read_segments<I>(&self, segs: I, buf: &mut [u8]) -> Result<(), DmaError>
    where
        I: IntoIterator<Item = Segment>,
        I::IntoIter: Clone,
    {
        let segs = segs.into_iter();
        let mode = self.iommu.read();
        self.check_segments(&mode, segs.clone(), buf.len() as u64, Perm::READ)?;
        let mut off = 0usize;
        for s in segs {
            let n = seg_len(s.len)?;
            let ps = pieces(&mode, &self.mem, s.addr, s.len, Perm::READ)?;
            scatter_read(&self.mem, ps, &mut buf[off..off + n])?;
            off += n;
        }
        Ok(())
    }

    /// Write `buf` to a gather list of IOVAs. Every segment is checked before any byte is
    /// written; the segments' total length must equal `buf.len()`.
    pub fn write_segments<I>(&self, segs: I, buf: &[u8]) -> Result<(), DmaError>
    where
        I: IntoIterator<Item = Segment>,
        I::IntoIter: Clone,
    {
        let segs = segs.into_iter();
        let mode = self.iommu.read();
        self.check_segments(&mode, segs.clone(), buf.len() as u64, Perm::WRITE)?;
        let mut off = 0usize;
        for s in segs {
            let n = seg_len(s.len)?;
            let ps = pieces(&mode, &self.mem, s.addr, s.len, Perm::WRITE)?;
            gather_write(&self.mem, ps, &buf[off..off + n])?;
            off += n;
        }
        Ok(())
    }

    fn check_segments(
        &self,
        mode: &IommuMode,
        segs: impl Iterator<Item = Segment>,
        buf_len: u64,
        needed: Perm,
    ) -> Result<(), DmaError> {
        let mut total: u64 = 0;
        for s in segs {
            pieces(mode, &self.mem, s.addr, s.len, needed)?;
            total = total.saturating_add(s.len);
        }
        if total != buf_len {
            return Err(DmaError::LengthMismatch {
                segments: total,
                buffer: buf_len,
            });
        }
        Ok(())
    }

    /// Copy `len` bytes from `src_iova` (through this port, needing read) to `dst_iova`
    /// (through `dst`, needing write), in large chunks and without an intermediate buffer.
    /// Both ranges are checked completely before anything is copied. Overlapping ranges in
    /// the same memory behave like `memmove` piece by piece.
    pub fn copy_to(
        &self,
        src_iova: u64,
        dst: &DmaPort,
        dst_iova: u64,
        len: u64,
    ) -> Result<(), DmaError> {
        if self.iommu.same_as(&dst.iommu) {
            let mode = self.iommu.read();
            copy_pieces(self, &mode, src_iova, dst, &mode, dst_iova, len)
        } else {
            // Take the two read locks in a fixed global order so that two opposite copies
            // cannot deadlock with a waiting writer.
            let src_first = Arc::as_ptr(&self.iommu.state) < Arc::as_ptr(&dst.iommu.state);
            if src_first {
                let sm = self.iommu.read();
                let dm = dst.iommu.read();
                copy_pieces(self, &sm, src_iova, dst, &dm, dst_iova, len)
            } else {
                let dm = dst.iommu.read();
                let sm = self.iommu.read();
                copy_pieces(self, &sm, src_iova, dst, &dm, dst_iova, len)
            }
        }
    }
}

impl DmaPort {
    /// Copy a scatter list of this port's IOVAs (`from`, read) to a gather list of `dst`'s
    /// (`to`, write), in order, each overlapping piece with [`DmaPort::copy_to`]: one copy
    /// from memory to memory, no intermediate buffer. The two lists must have the same total
    /// length. A failing piece stops the copy; the pieces before it have been copied.
    pub fn copy_segments_to(
        &self,
        from: &[Segment],
        dst: &DmaPort,
        to: &[Segment],
    ) -> Result<(), DmaError> {
        let total = |s: &[Segment]| s.iter().fold(0u64, |a, x| a.saturating_add(x.len));
        let (a, b) = (total(from), total(to));
        if a != b {
            return Err(DmaError::LengthMismatch {
                segments: a,
                buffer: b,
            });
        }
        let (mut i, mut j, mut si, mut dj) = (0usize, 0usize, 0u64, 0u64);
        while let (Some(s), Some(d)) = (from.get(i), to.get(j)) {
            let n = (s.len - si).min(d.len - dj);
            if n > 0 {
                self.copy_to(s.addr + si, dst, d.addr + dj, n)?;
            }
            si += n;
            dj += n;
            if si == s.len {
                i += 1;
                si = 0;
            }
            if dj == d.len {
                j += 1;
                dj = 0;
            }
        }
        Ok(())
    }
}

fn seg_len(len: u64) -> Result<usize, DmaError> {
    usize::try_from(len).map_err(|_| DmaError::LengthMismatch {
        segments: len,
        buffer: 0,
    })
}

/// Copy validated pieces of host memory into `buf` (whose length equals the pieces' total).
fn scatter_read(mem: &HostMemory, ps: Pieces<'_>, buf: &mut [u8]) -> Result<(), DmaError> {
    let mut off = 0usize;
    for s in ps {
        let n = seg_len(s.len)?;
        let dst = buf.get_mut(off..off + n).ok_or(DmaError::LengthMismatch {
            segments: s.len,
            buffer: 0,
        })?;
        mem.read(GuestAddress(s.addr), dst)?;
        off += n;
    }
    Ok(())
}

/// Copy `buf` into validated pieces of host memory.
fn gather_write(mem: &HostMemory, ps: Pieces<'_>, buf: &[u8]) -> Result<(), DmaError> {
    let mut off = 0usize;
    for s in ps {
        let n = seg_len(s.len)?;
        let src = buf.get(off..off + n).ok_or(DmaError::LengthMismatch {
            segments: s.len,
            buffer: 0,
        })?;
        mem.write(GuestAddress(s.addr), src)?;
        off += n;
    }
    Ok(())
}

fn copy_pieces(
    src: &DmaPort,
    src_mode: &IommuMode,
    src_iova: u64,
    dst: &DmaPort,
    dst_mode: &IommuMode,
    dst_iova: u64,
    len: u64,
) -> Result<(), DmaError> {
    let mut sp = pieces(src_mode, &src.mem, src_iova, len, Perm::READ)?;
    let mut dp = pieces(dst_mode, &dst.mem, dst_iova, len, Perm::WRITE)?;
    let mut s = sp.next();
    let mut d = dp.next();
    while let (Some(cs), Some(cd)) = (s, d) {
        let n = cs.len.min(cd.len);
        copy_between(
            &src.mem,
            GuestAddress(cs.addr),
            &dst.mem,
            GuestAddress(cd.addr),
            n,
        )?;
        s = if cs.len > n {
            Some(Segment {
                addr: cs.addr + n,
                len: cs.len - n,
            })
        } else {
            sp.next()
        };
        d = if cd.len > n {
            Some(Segment {
                addr: cd.addr + n,
                len: cd.len - n,
            })
        } else {
            dp.next()
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem() -> HostMemory {
        HostMemory::new(1 << 20).unwrap()
    }

    /// A scatter list copies into a gather list of other boundaries byte for byte; lists of
    /// different lengths are refused before anything is copied.
    #[test]
    fn copy_segments_to_follows_both_lists() {
        let (a, b) = (mem(), mem());
        let src = DmaPort::passthrough(a.clone());
        let dst = DmaPort::passthrough(b.clone());
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        a.write(GuestAddress(0x1000), &data[..100]).unwrap();
        a.write(GuestAddress(0x5000), &data[100..]).unwrap();
        let from = [
            Segment {
                addr: 0x1000,
                len: 100,
            },
            Segment {
                addr: 0x5000,
                len: 200,
            },
        ];
        let to = [
            Segment {
                addr: 0x9000,
                len: 50,
            },
            Segment {
                addr: 0xA000,
                len: 250,
            },
        ];
        let short = [Segment {
            addr: 0x9000,
            len: 299,
        }];
        assert!(matches!(
            src.copy_segments_to(&from, &dst, &short),
            Err(DmaError::LengthMismatch { .. })
        ));
        let mut got = vec![0u8; 50];
        b.read(GuestAddress(0x9000), &mut got).unwrap();
        assert_eq!(got, vec![0u8; 50], "nothing copied by a refused copy");
        src.copy_segments_to(&from, &dst, &to).unwrap();
        b.read(GuestAddress(0x9000), &mut got).unwrap();
        let mut rest = vec![0u8; 250];
        b.read(GuestAddress(0xA000), &mut rest).unwrap();
        got.extend_from_slice(&rest);
        assert_eq!(got, data);
    }

    #[test]
    fn perm_basics() {
        assert!(Perm::RW.contains(Perm::READ));
        assert!(!Perm::READ.contains(Perm::WRITE));
        assert_eq!(Perm::READ | Perm::WRITE, Perm::RW);
        assert_eq!(Perm::new(true, false), Perm::READ);
        assert_eq!(Perm::WRITE.to_string(), "-W");
        assert!(Perm::NONE.is_empty());
    }

    #[test]
    fn map_rejects_overlap_zero_and_overflow() {
        let mut t = TranslationTable::new();
        t.map(0x1000, 0x10_000, 0x1000, Perm::RW).unwrap();
        assert_eq!(
            t.map(0x1fff, 0, 1, Perm::RW),
            Err(MapError::Overlap {
                iova: 0x1fff,
                len: 1
            })
        );
        assert!(t.map(0x800, 0, 0x801, Perm::RW).is_err());
        assert!(t.map(0x0, 0, 0x10_000, Perm::RW).is_err());
        t.map(0x800, 0, 0x800, Perm::RW).unwrap(); // adjacent below is fine
        t.map(0x2000, 0, 0x800, Perm::RW).unwrap(); // adjacent above is fine
        assert_eq!(t.map(0x9000, 0, 0, Perm::RW), Err(MapError::ZeroLength));
        assert!(matches!(
            t.map(u64::MAX, 0, 2, Perm::RW),
            Err(MapError::Overflow { .. })
        ));
        assert!(matches!(
            t.map(0x9000, u64::MAX, 2, Perm::RW),
            Err(MapError::Overflow { .. })
        ));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn unmap_splits_and_validates() {
        let mut t = TranslationTable::new();
        t.map(0x1000, 0x8000, 0x3000, Perm::READ).unwrap();
        assert!(t.unmap(0x3000, 0x2000).is_err());
        assert_eq!(t.len(), 1);
        t.unmap(0x2000, 0x1000).unwrap();
        assert_eq!(
            t.mappings().collect::<Vec<_>>(),
            vec![
                Mapping {
                    iova: 0x1000,
                    len: 0x1000,
                    target: 0x8000,
                    perm: Perm::READ
                },
                Mapping {
                    iova: 0x3000,
                    len: 0x1000,
                    target: 0xa000,
                    perm: Perm::READ
                },
            ]
        );
        assert!(t.unmap(0x1000, 0x3000).is_err());
        assert!(t.unmap(0x1000, 0).is_err());
        t.unmap(0x1000, 0x1000).unwrap();
        t.unmap(0x3000, 0x1000).unwrap();
        assert!(t.is_empty());
    }

    #[test]
    fn translate_merges_contiguous_and_reports_first_fault() {
        let mut t = TranslationTable::new();
        t.map(0x0, 0x5000, 0x1000, Perm::RW).unwrap();
        t.map(0x1000, 0x6000, 0x1000, Perm::RW).unwrap(); // contiguous with the first
        t.map(0x2000, 0x9000, 0x1000, Perm::READ).unwrap();
        let segs: Vec<_> = t.translate(0x800, 0x2000, Perm::READ).unwrap().collect();
        assert_eq!(
            segs,
            vec![
                Segment {
                    addr: 0x5800,
                    len: 0x1800
                },
                Segment {
                    addr: 0x9000,
                    len: 0x800
                }
            ]
        );
        assert_eq!(
            t.check(0x800, 0x2000, Perm::WRITE).unwrap_err(),
            DmaError::PermissionDenied {
                iova: 0x2000,
                needed: Perm::WRITE
            }
        );
        assert_eq!(
            t.check(0x2800, 0x1000, Perm::READ).unwrap_err(),
            DmaError::NoTranslation { iova: 0x3000 }
        );
        assert_eq!(t.translate(0x10, 0, Perm::RW).unwrap().count(), 0);
        assert_eq!(
            t.check(u64::MAX, 2, Perm::READ).unwrap_err(),
            DmaError::OutOfBounds {
                iova: u64::MAX,
                len: 2
            }
        );
    }

    #[test]
    fn translate_within_fast_path() {
        let mut t = TranslationTable::new();
        t.map(0x1000, 0x8000, 0x1000, Perm::READ).unwrap();
        t.map(0x2000, 0x4000, 0x1000, Perm::RW).unwrap();
        assert_eq!(
            t.translate_within(0x1100, 0x100, Perm::READ),
            Ok(Some(Segment {
                addr: 0x8100,
                len: 0x100
            }))
        );
        // Crosses into the next mapping: caller must use translate().
        assert_eq!(t.translate_within(0x1f00, 0x200, Perm::READ), Ok(None));
        assert_eq!(
            t.translate_within(0x1f00, 0x8, Perm::WRITE),
            Err(DmaError::PermissionDenied {
                iova: 0x1f00,
                needed: Perm::WRITE
            })
        );
        assert_eq!(
            t.translate_within(0x3000, 1, Perm::READ),
            Err(DmaError::NoTranslation { iova: 0x3000 })
        );
        assert_eq!(t.translate_within(0x1000, 0, Perm::READ), Ok(None));
    }

    #[test]
    fn passthrough_port_bounds() {
        let m = mem();
        let p = DmaPort::passthrough(m.clone());
        p.write(0x100, b"abc").unwrap();
        assert_eq!(
            m.read_u32(GuestAddress(0x100)).unwrap() & 0xff_ffff,
            0x63_6261
        );
        let size = m.size();
        assert_eq!(
            p.write(size - 1, b"ab"),
            Err(DmaError::OutOfBounds {
                iova: size - 1,
                len: 2
            })
        );
        assert_eq!(m.read_u32(GuestAddress(size - 4)).unwrap(), 0);
        assert!(matches!(
            p.iommu().map(0, GuestAddress(0), 1, Perm::RW),
            Err(MapError::Passthrough)
        ));
    }

    #[test]
    fn passthrough_fast_path_matches_the_table_rules() {
        let m = mem();
        let p = DmaPort::passthrough(m.clone());
        let size = m.size();
        // Zero-length accesses up to the end are fine, past it they are not.
        p.read(size, &mut []).unwrap();
        p.write(size, &[]).unwrap();
        p.check(size, 0, Perm::RW).unwrap();
        assert!(p.write(size + 1, &[]).is_err());
        assert_eq!(
            p.read(u64::MAX, &mut [0u8; 2]),
            Err(DmaError::OutOfBounds {
                iova: u64::MAX,
                len: 2
            })
        );
        assert_eq!(
            p.fill(size - 4, 8, 1),
            Err(DmaError::OutOfBounds {
                iova: size - 4,
                len: 8
            })
        );
        assert_eq!(
            p.store_u64_release(size, 1),
            Err(DmaError::OutOfBounds { iova: size, len: 8 })
        );
        assert_eq!(
            p.load_u64_acquire(0x1004),
            Err(DmaError::Misaligned {
                iova: 0x1004,
                align: 8
            })
        );
        // Every small width at odd addresses, and a large copy, round trip.
        for n in 1..=17usize {
            let at = 0x2001 + 64 * n as u64;
            let data: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
            p.write(at, &data).unwrap();
            let mut back = vec![0u8; n];
            p.read(at, &mut back).unwrap();
            assert_eq!(back, data);
            let mut direct = vec![0u8; n];
            m.read(GuestAddress(at), &mut direct).unwrap();
            assert_eq!(direct, data);
        }
        let big: Vec<u8> = (0..9000u32).map(|i| i as u8).collect();
        p.write(size - 9000, &big).unwrap();
        let mut back = vec![0u8; 9000];
        p.read(size - 9000, &mut back).unwrap();
        assert_eq!(back, big);
        p.store_u64_release(size - 8, 0x0102_0304_0506_0708)
            .unwrap();
        assert_eq!(p.read_u64(size - 8).unwrap(), 0x0102_0304_0506_0708);
        assert_eq!(
            p.with_atomic_u64(size - 8, Perm::RW, |a| a.fetch_add(1, Ordering::AcqRel))
                .unwrap(),
            0x0102_0304_0506_0708
        );
        assert_eq!(p.load_u64_acquire(size - 8).unwrap(), 0x0102_0304_0506_0709);
    }

    #[test]
    fn atomic_access_through_port() {
        let m = mem();
        let iommu = Iommu::translating();
        iommu
            .map(0x1_0000, GuestAddress(0x2000), 16, Perm::RW)
            .unwrap();
        iommu
            .map(0x1_0010, GuestAddress(0x3004), 16, Perm::RW)
            .unwrap();
        let p = DmaPort::new(m.clone(), iommu);
        p.store_u64_release(0x1_0008, 0xfeed).unwrap();
        assert_eq!(m.read_u64(GuestAddress(0x2008)).unwrap(), 0xfeed);
        assert_eq!(p.load_u64_acquire(0x1_0008).unwrap(), 0xfeed);
        assert_eq!(
            p.load_u64_acquire(0x1_0004),
            Err(DmaError::Misaligned {
                iova: 0x1_0004,
                align: 8
            })
        );
        // Aligned IOVA but misaligned host address.
        assert!(matches!(
            p.load_u64_acquire(0x1_0010),
            Err(DmaError::Memory(MemoryError::Misaligned { .. }))
        ));
    }
}
