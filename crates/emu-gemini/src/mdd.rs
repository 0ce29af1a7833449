//! Memory domains: MDD registrations, the MRT and the vMDH table, and every DMA the NIC does
//! on behalf of the network (remote PUT/GET/AMO targets, GET landing, BTE sources).
//!
//! Formats: `ghal_mdd_desc_t` (`MddDescriptor`), `MrtEntry`, `VmdhEntry` from
//! `firmware_spec::gemini::mdd`. Translation and check order: docs/gemini-programming.md
//! ("Memory domains"). Every access is checked completely before a byte moves, so a violation
//! never touches memory.

use crate::fault::Fault;
use emu_core::dma::{DmaPort, Perm, Segment};
use emu_core::sparse::SparseTable;
use firmware_spec::gemini::limits::{MDD_ENTRIES, MRT_ENTRIES, VMDH_ENTRIES};
use firmware_spec::gemini::mdd::{MRT_PAGE_SHIFTS, MddDescriptor, MrtEntry, VmdhEntry};
use std::sync::atomic::{AtomicU64, Ordering};

/// Reset value of `MRT_PAGESIZE`: code 2 = 2 MiB (the `/sys/class/gemini/ghal0/mrt` default).
pub const MRT_PAGESIZE_RESET: u64 = 2;

#[derive(Clone, Copy, Debug, Default)]
struct MddSlot {
    raw: [u64; 2],
    desc: MddDescriptor,
}

/// How a request names memory: domain handle, vMDH-relative or not, and its ptag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Memory domain handle.
    pub mdh: u16,
    /// `mdh` is relative to the vMDH entry of `ptag`.
    pub vmdh: bool,
    /// Protection tag of the request.
    pub ptag: u8,
}

/// The MDD, MRT and vMDH tables of one NIC.
#[derive(Clone, Debug)]
pub struct Domains {
    /// The tables, stored sparsely (an untouched entry is invalid).
    mdd: SparseTable<MddSlot>,
    mrt: SparseTable<u32>,
    vmdh: SparseTable<u32>,
    /// `MRT_PAGESIZE` register (code in bits 0..3).
    pub mrt_pagesize: u64,
}

impl Default for Domains {
    fn default() -> Self {
        Domains {
            mdd: SparseTable::new(MDD_ENTRIES as usize, MddSlot::default()),
            mrt: SparseTable::new(MRT_ENTRIES as usize, 0),
            vmdh: SparseTable::new(VMDH_ENTRIES as usize, 0),
            mrt_pagesize: MRT_PAGESIZE_RESET,
        }
    }
}

fn dma_fault(_: emu_core::dma::DmaError) -> Fault {
    Fault::Dma
}

impl Domains {
    /// MDD, MRT and vMDH entries backed by storage (0 at reset).
    pub fn allocated_entries(&self) -> usize {
        self.mdd.allocated_entries() + self.mrt.allocated_entries() + self.vmdh.allocated_entries()
    }

    /// Raw qword `q` (0 or 1) of MDD `index`.
    pub fn read_mdd(&self, index: u32, q: usize) -> u64 {
        self.mdd
            .get(index as usize)
            .ok()
            .and_then(|s| s.raw.get(q).copied())
            .unwrap_or(0)
    }

    /// Store raw qword `q` of MDD `index` (the entry takes effect at once).
    pub fn write_mdd(&mut self, index: u32, q: usize, v: u64) {
        if let Ok(s) = self.mdd.get_mut(index as usize)
            && let Some(r) = s.raw.get_mut(q)
        {
            *r = v;
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&s.raw[0].to_le_bytes());
            b[8..].copy_from_slice(&s.raw[1].to_le_bytes());
            s.desc = MddDescriptor::decode(&b).unwrap_or_default();
        }
    }

    /// Raw MRT entry.
    pub fn read_mrt(&self, i: u32) -> u32 {
        self.mrt.get(i as usize).copied().unwrap_or(0)
    }

    /// Store a raw MRT entry.
    pub fn write_mrt(&mut self, i: u32, v: u32) {
        if let Ok(e) = self.mrt.get_mut(i as usize) {
            *e = v;
        }
    }

    /// Raw vMDH entry of ptag `i`.
    pub fn read_vmdh(&self, i: u32) -> u32 {
        self.vmdh.get(i as usize).copied().unwrap_or(0)
    }

    /// Store the vMDH entry of ptag `i`.
    pub fn write_vmdh(&mut self, i: u32, v: u32) {
        if let Ok(e) = self.vmdh.get_mut(i as usize) {
            *e = v;
        }
    }

    /// The MDD a request names, after the validity and ptag checks.
    pub fn resolve(&self, a: Access) -> Result<&MddDescriptor, Fault> {
        let index = if a.vmdh {
            let raw = self.read_vmdh(u32::from(a.ptag));
            let e = VmdhEntry::decode(&raw.to_le_bytes()).map_err(|_| Fault::VmdhInvalid)?;
            if e.enable == 0 {
                return Err(Fault::VmdhInvalid);
            }
            e.base + u64::from(a.mdh)
        } else {
            u64::from(a.mdh)
        };
        let slot = self
            .mdd
            .get(index as usize)
            .map_err(|_| Fault::MddInvalid)?;
        let d = &slot.desc;
        if !d.is_valid() {
            return Err(Fault::MddInvalid);
        }
        if d.ptag != u64::from(a.ptag) {
            return Err(Fault::Protection);
        }
        Ok(d)
    }

    /// Bounds and permission check; returns the first domain address of the access.
    fn span(d: &MddDescriptor, offset: u64, len: u64, write: bool) -> Result<u64, Fault> {
        if write && !d.is_writable() {
            return Err(Fault::Protection);
        }
        let start = d.base().checked_add(offset).ok_or(Fault::Bounds)?;
        if len > 0 {
            let last = start.checked_add(len - 1).ok_or(Fault::Bounds)?;
            if last > d.max() | 0xFFF {
                return Err(Fault::Bounds);
            }
        }
        Ok(start)
    }

    /// Call `f(dma_addr, buf_offset, len)` for each DMA piece of `[start, start + len)` of a
    /// domain (one piece without MRT; one per MRT page with it).
    fn pieces(
        &self,
        d: &MddDescriptor,
        start: u64,
        len: u64,
        mut f: impl FnMut(u64, usize, u64) -> Result<(), Fault>,
    ) -> Result<(), Fault> {
        if d.mrt_enable == 0 {
            return f(start, 0, len);
        }
        let shift = MRT_PAGE_SHIFTS[(self.mrt_pagesize & 7) as usize];
        let page_size = 1u64 << shift;
        let mut done = 0u64;
        while done < len {
            let a = start + done;
            let page = a >> shift;
            let raw = self
                .mrt
                .get(page as usize)
                .map_err(|_| Fault::Translation)?;
            let e = MrtEntry::decode(&raw.to_le_bytes()).map_err(|_| Fault::Translation)?;
            if e.valid == 0 {
                return Err(Fault::Translation);
            }
            let in_page = a & (page_size - 1);
            let n = (page_size - in_page).min(len - done);
            f(e.addr() + in_page, done as usize, n)?;
            done += n;
        }
        Ok(())
    }

    /// Check an access completely without touching memory.
    pub fn check(
        &self,
        dma: &DmaPort,
        a: Access,
        offset: u64,
        len: u64,
        write: bool,
    ) -> Result<(), Fault> {
        let d = self.resolve(a)?;
        let start = Self::span(d, offset, len, write)?;
        let perm = if write { Perm::WRITE } else { Perm::READ };
        self.pieces(d, start, len, |addr, _, n| {
            dma.check(addr, n, perm).map_err(dma_fault)
        })
    }

    /// The DMA segments of `[offset, offset + len)` of a domain, in order, after the same
    /// complete check as [`Domains::check`]: what a train's payload is copied from or to
    /// (`emu_core::fabric::Train`).
    pub fn segments(
        &self,
        dma: &DmaPort,
        a: Access,
        offset: u64,
        len: u64,
        write: bool,
    ) -> Result<Vec<Segment>, Fault> {
        let d = self.resolve(a)?;
        let start = Self::span(d, offset, len, write)?;
        let perm = if write { Perm::WRITE } else { Perm::READ };
        let mut segs = Vec::new();
        self.pieces(d, start, len, |addr, _, n| {
            dma.check(addr, n, perm).map_err(dma_fault)?;
            segs.push(Segment { addr, len: n });
            Ok(())
        })?;
        Ok(segs)
    }

    /// Write `data` at `offset` of a domain (all or nothing).
    pub fn write(&self, dma: &DmaPort, a: Access, offset: u64, data: &[u8]) -> Result<(), Fault> {
        let d = self.resolve(a)?;
        let len = data.len() as u64;
        let start = Self::span(d, offset, len, true)?;
        if d.mrt_enable == 0 {
            return dma.write(start, data).map_err(dma_fault);
        }
        self.pieces(d, start, len, |addr, _, n| {
            dma.check(addr, n, Perm::WRITE).map_err(dma_fault)
        })?;
        self.pieces(d, start, len, |addr, off, n| {
            let chunk = data.get(off..off + n as usize).ok_or(Fault::Bounds)?;
            dma.write(addr, chunk).map_err(dma_fault)
        })
    }

    /// Read `buf.len()` bytes at `offset` of a domain.
    pub fn read(&self, dma: &DmaPort, a: Access, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let d = self.resolve(a)?;
        let len = buf.len() as u64;
        let start = Self::span(d, offset, len, false)?;
        if d.mrt_enable == 0 {
            return dma.read(start, buf).map_err(dma_fault);
        }
        self.pieces(d, start, len, |addr, _, n| {
            dma.check(addr, n, Perm::READ).map_err(dma_fault)
        })?;
        self.pieces(d, start, len, |addr, off, n| {
            let chunk = buf.get_mut(off..off + n as usize).ok_or(Fault::Bounds)?;
            dma.read(addr, chunk).map_err(dma_fault)
        })
    }

    /// Run `f` on the 8-byte word at `offset` of a domain as one atomic access (AMOs).
    pub fn atomic<R>(
        &self,
        dma: &DmaPort,
        a: Access,
        offset: u64,
        f: impl FnOnce(&AtomicU64) -> R,
    ) -> Result<R, Fault> {
        if offset & 7 != 0 {
            return Err(Fault::Misaligned);
        }
        let d = self.resolve(a)?;
        let start = Self::span(d, offset, 8, true)?;
        let mut addr = None;
        self.pieces(d, start, 8, |p, _, n| {
            if n != 8 {
                return Err(Fault::Misaligned);
            }
            addr = Some(p);
            Ok(())
        })?;
        let addr = addr.ok_or(Fault::Translation)?;
        dma.with_atomic_u64(addr, Perm::RW, f).map_err(dma_fault)
    }
}

/// Apply `cmd`'s update to the word atomically; returns the old value.
pub(crate) fn fetch_update(word: &AtomicU64, new: impl Fn(u64) -> u64) -> u64 {
    let mut old = word.load(Ordering::Acquire);
    loop {
        match word.compare_exchange_weak(old, new(old), Ordering::AcqRel, Ordering::Acquire) {
            Ok(v) => return v,
            Err(v) => old = v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu_core::memory::HostMemory;
    use firmware_spec::gemini::mdd::MddModes;

    fn mdd(ptag: u64, base: u64, pages: u64, modes: MddModes, mrt: bool) -> [u64; 2] {
        let d = MddDescriptor {
            ptag,
            mem_base: base >> 12,
            mrt_enable: u64::from(mrt),
            modes: u64::from(modes.bits()),
            max_base: (base >> 12) + pages - 1,
            cqh: 0,
        };
        let b = d.encode().unwrap();
        [
            u64::from_le_bytes(b[..8].try_into().unwrap()),
            u64::from_le_bytes(b[8..].try_into().unwrap()),
        ]
    }

    fn setup() -> (Domains, DmaPort) {
        let mem = HostMemory::new(8 << 20).unwrap();
        let dma = DmaPort::passthrough(mem);
        let mut d = Domains::default();
        let q = mdd(5, 0x10_0000, 2, MddModes::VALID | MddModes::WRITABLE, false);
        d.write_mdd(1, 0, q[0]);
        d.write_mdd(1, 1, q[1]);
        let q = mdd(5, 0x20_0000, 1, MddModes::VALID, false);
        d.write_mdd(2, 0, q[0]);
        d.write_mdd(2, 1, q[1]);
        (d, dma)
    }

    fn acc(mdh: u16, ptag: u8) -> Access {
        Access {
            mdh,
            vmdh: false,
            ptag,
        }
    }

    #[test]
    fn checks_in_order_and_never_touch_memory() {
        let (d, dma) = setup();
        d.write(&dma, acc(1, 5), 0x10, &[1, 2, 3]).unwrap();
        assert_eq!(dma.read_u32(0x10_0010).unwrap() & 0xFF_FFFF, 0x03_0201);
        assert_eq!(d.write(&dma, acc(3, 5), 0, &[1]), Err(Fault::MddInvalid));
        assert_eq!(d.write(&dma, acc(1, 6), 0, &[1]), Err(Fault::Protection));
        assert_eq!(d.write(&dma, acc(2, 5), 0, &[1]), Err(Fault::Protection));
        assert_eq!(
            d.write(&dma, acc(1, 5), 0x1FFF, &[7, 7]),
            Err(Fault::Bounds)
        );
        assert_eq!(dma.read_u32(0x10_1FFF).unwrap(), 0);
        let mut b = [0u8; 4];
        d.read(&dma, acc(2, 5), 0xFFC, &mut b).unwrap();
        assert_eq!(d.read(&dma, acc(2, 5), 0xFFD, &mut b), Err(Fault::Bounds));
        assert_eq!(
            d.atomic(&dma, acc(1, 5), 4, |_| ()).unwrap_err(),
            Fault::Misaligned
        );
        let old = d
            .atomic(&dma, acc(1, 5), 8, |w| fetch_update(w, |o| o + 5))
            .unwrap();
        assert_eq!(old, 0);
        assert_eq!(dma.read_u64(0x10_0008).unwrap(), 5);
    }

    #[test]
    fn mrt_and_vmdh() {
        let (mut d, dma) = setup();
        d.mrt_pagesize = 0; // 128 KiB pages
        // Domain address space 0 .. 512 KiB, MRT pages 0 and 1 -> 0x60_0000, 0x40_0000.
        let q = mdd(9, 0, 128, MddModes::VALID | MddModes::WRITABLE, true);
        d.write_mdd(10, 0, q[0]);
        d.write_mdd(10, 1, q[1]);
        d.write_mrt(0, MrtEntry::for_addr(0x60_0000).unwrap().to_u32().unwrap());
        d.write_mrt(1, MrtEntry::for_addr(0x40_0000).unwrap().to_u32().unwrap());
        let data: Vec<u8> = (0..16).collect();
        d.write(&dma, acc(10, 9), (128 << 10) - 8, &data).unwrap();
        assert_eq!(
            dma.read_u64(0x60_0000 + (128 << 10) - 8).unwrap(),
            0x0706_0504_0302_0100
        );
        assert_eq!(dma.read_u64(0x40_0000).unwrap(), 0x0F0E_0D0C_0B0A_0908);
        let mut back = [0u8; 16];
        d.read(&dma, acc(10, 9), (128 << 10) - 8, &mut back)
            .unwrap();
        assert_eq!(&back[..], &data[..]);
        // Page 2 not valid: nothing of the write happens.
        assert_eq!(
            d.write(&dma, acc(10, 9), (256 << 10) - 4, &[1; 8]),
            Err(Fault::Translation)
        );
        assert_eq!(dma.read_u32(0x40_0000 + (128 << 10) - 4).unwrap(), 0);
        // vMDH: ptag 9 base 8, mdh 2 -> MDD 10.
        let v = Access {
            mdh: 2,
            vmdh: true,
            ptag: 9,
        };
        assert_eq!(d.check(&dma, v, 0, 8, true), Err(Fault::VmdhInvalid));
        let e = VmdhEntry { base: 8, enable: 1 };
        d.write_vmdh(9, u32::from_le_bytes(e.encode().unwrap()));
        d.check(&dma, v, 0, 8, true).unwrap();
    }
}
