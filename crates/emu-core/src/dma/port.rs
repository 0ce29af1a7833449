//! A device's window onto host memory ([`DmaPort`]): every access translated through the
//! platform IOMMU and checked as a whole before any byte moves; scatter/gather lists, copies
//! from one port's memory to another's, atomics.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::memory::{GuestAddress, HostMemory, copy_between};

use super::access::{DmaError, Perm, Segment};
use super::iommu::{Iommu, IommuMode};
use super::table::Segments;

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
            let src_first = self.iommu.locks_before(&dst.iommu);
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
