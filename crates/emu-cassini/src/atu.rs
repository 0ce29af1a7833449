//! Address translation unit: address contexts (`c_atu_cfg_ac_table`), the NTA page-table walk
//! over tables in host memory, a translation cache with invalidation, and the checks that turn
//! a bad access into the hardware return code before any byte moves.
//!
//! docs/cassini-programming.md "Address translation": an AC is enabled by `context_en`;
//! `ta_mode` 1 (NTA) walks 5 levels of 4 KiB tables of 512 `c_page_table_entry`
//! {ptr@6:51, r@57, w@58, leaf@59, p@60} over IOVA bits 12..57, 3 (PASSTHROUGH) uses the IOVA
//! as a bus address; `mem_base`/`mem_size` (4 KiB pages, 0 = unbounded) bound the IOVAs.
//! Errors (cassini.md §3.3): AC disabled or not NTA/passthrough `INVALID_AC`, outside the
//! bounds `ADDR_OUT_OF_RANGE`, a non-present entry `NO_TRANSLATION`, missing r/w on the leaf
//! `PAGE_PERM_ERROR`, a bus error (page table or data outside host memory)
//! `PCIE_UNSUCCESS_CMPL`.

use emu_core::dma::{DmaError, DmaPort, Perm, Segment};
use emu_core::memory::MemoryError;
use emu_core::procmem::ProcError;
use emu_core::sparse::SparseTable;
use firmware_spec::cassini::csr;
use firmware_spec::cassini::rc::ReturnCode;

use crate::csr::CsrFile;
use emu_core::hash::IntMap;

/// What a failed access to a translated bus address reports. Process memory of a node
/// hosted in a process whose registration is gone (the process unmapped it: the pin was
/// invalidated, or the page faulted) has no translation any more, as after a real driver's
/// invalidation of the pages of a registration (on-demand paging): `NO_TRANSLATION`; a pin
/// without the access: `PAGE_PERM_ERROR`; anything else is a bus error
/// (`PCIE_UNSUCCESS_CMPL`).
pub(crate) fn bus_error(e: DmaError) -> ReturnCode {
    match e {
        DmaError::Memory(MemoryError::Process(
            ProcError::NotPinned { .. } | ProcError::Fault { .. },
        )) => ReturnCode::NoTranslation,
        DmaError::Memory(MemoryError::Process(ProcError::Permission { .. })) => {
            ReturnCode::PagePermError
        }
        _ => ReturnCode::PcieUnsuccessCmpl,
    }
}

/// `enum c_ta_mode` values used here.
const TA_MODE_NTA: u64 = 1;
const TA_MODE_PASSTHROUGH: u64 = 3;

const PAGE_SHIFT: u32 = 12;
const PAGE: u64 = 1 << PAGE_SHIFT;
/// IOVAs are 57 bits (cassini.md §9).
const IOVA_MASK: u64 = (1 << 57) - 1;
/// `c_page_table_entry.ptr` covers address bits 6..57.
const PTE_PTR_MASK: u64 = ((1u64 << 57) - 1) & !((1u64 << 6) - 1);
const PTE_R: u64 = 1 << 57;
const PTE_W: u64 = 1 << 58;
const PTE_LEAF: u64 = 1 << 59;
const PTE_P: u64 = 1 << 60;
const LEVELS: u32 = 5;
/// Slots of the direct-mapped translation front cache.
const TLB_SLOTS: usize = 256;
/// Cached translations kept before the cache is flushed wholesale.
const CACHE_LIMIT: usize = 1 << 16;

/// How an AC translates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Mode {
    /// Disabled, or a mode this model does not implement (ATS).
    #[default]
    Invalid,
    Nta,
    Passthrough,
}

/// A decoded `c_atu_cfg_ac_table` entry.
#[derive(Debug, Clone, Copy, Default)]
struct Ac {
    mode: Mode,
    /// First IOVA of the context.
    base: u64,
    /// One past the last IOVA (`u64::MAX` when unbounded).
    end: u64,
    /// Bus address of the root table.
    root: u64,
}

/// A cached translation of one 4 KiB IOVA page.
#[derive(Debug, Clone, Copy)]
struct Tlb {
    bus: u64,
    perm: Perm,
}

/// ATU counters (`c_atu_cntrs` names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AtuCounters {
    pub(crate) cache_miss: u64,
    pub(crate) cache_hit_base_page_size: u64,
}

/// The address translation unit.
#[derive(Clone, Debug)]
pub(crate) struct Atu {
    /// Address contexts, stored sparsely (an untouched context is invalid).
    acs: SparseTable<Ac>,
    cache: IntMap<(u16, u64), Tlb>,
    /// Direct-mapped front of the cache (allocated by the first translation).
    tlb: Vec<Option<((u16, u64), Tlb)>>,
    /// The last page translated (a message's frames read or land page after page, two or
    /// more frames to a page): looked at before the direct-mapped front.
    last: Option<((u16, u64), Tlb)>,
    segs: Vec<Segment>,
    /// Bumped whenever cached translations are dropped ([`Atu::invalidate`]): a [`Mapped`]
    /// range made under an older generation is translated again.
    generation: u64,
    pub(crate) counters: AtuCounters,
}

/// A range of one AC translated and checked once, for the many frame-sized accesses of one
/// message inside it (the initiator reading a long put, the target placing one): each
/// access then needs no page lookups. Valid while no translation of the AC was invalidated
/// since it was made (the ATU's generation); after that an access is translated afresh, so
/// an unmap in the middle of a message takes effect as it would frame by frame.
#[derive(Debug, Clone, Default)]
pub(crate) struct Mapped {
    generation: u64,
    acid: u16,
    iova: u64,
    len: u64,
    need: Perm,
    /// The bus segments of `[iova, iova + len)` in order, and the range offset of each.
    segs: Vec<Segment>,
    starts: Vec<u64>,
}

impl Mapped {
    /// The bus pieces of `[iova, iova + n)`, if this range covers it for `need`.
    fn pieces(
        &self,
        iova: u64,
        n: u64,
        need: Perm,
    ) -> Option<impl Iterator<Item = (u64, usize)> + '_> {
        let off = iova.checked_sub(self.iova)?;
        if off.checked_add(n)? > self.len || !self.need.contains(need) {
            return None;
        }
        let first = self.starts.partition_point(|&s| s <= off).checked_sub(1)?;
        let (mut off, mut left, mut i) = (off, n, first);
        Some(std::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            let (s, start) = (self.segs.get(i)?, self.starts[i]);
            let within = off - start;
            let k = (s.len - within).min(left);
            off += k;
            left -= k;
            i += 1;
            Some((s.addr + within, k as usize))
        }))
    }
}

impl Atu {
    /// Address contexts backed by storage (0 at reset).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.acs.allocated_entries()
    }

    pub(crate) fn new() -> Self {
        Atu {
            acs: SparseTable::new(csr::C_ATU_CFG_AC_TABLE.entries as usize, Ac::default()),
            cache: IntMap::default(),
            tlb: Vec::new(),
            last: None,
            segs: Vec::new(),
            generation: 0,
            counters: AtuCounters::default(),
        }
    }

    /// `c_atu_cfg_ac_table[acid]` was written: decode it and flush the context's cache.
    pub(crate) fn ac_written(&mut self, csrs: &CsrFile, acid: u32) {
        use csr::fields::c_atu_cfg_ac_table as f;
        let c = csr::C_ATU_CFG_AC_TABLE;
        let Ok(slot) = self.acs.get_mut(acid as usize) else {
            return;
        };
        let en = csrs.field(c, acid, f::CONTEXT_EN) != 0;
        let mode = match csrs.field(c, acid, f::TA_MODE) {
            _ if !en || acid == 0 => Mode::Invalid,
            TA_MODE_NTA => Mode::Nta,
            TA_MODE_PASSTHROUGH => Mode::Passthrough,
            _ => Mode::Invalid,
        };
        let base = csrs.field(c, acid, f::MEM_BASE) << PAGE_SHIFT;
        let size = csrs.field(c, acid, f::MEM_SIZE) << PAGE_SHIFT;
        let end = if size == 0 {
            u64::MAX
        } else {
            base.saturating_add(size)
        };
        // nta_root_ptr is the view field at bits 12..57 of qword 0: the raw bits are the
        // address (docs/cassini-programming.md, "Address fields").
        let root = csrs.entry_qword(c, acid, 0) & (((1u64 << 57) - 1) & !(PAGE - 1));
        *slot = Ac {
            mode,
            base,
            end,
            root,
        };
        self.invalidate(acid as u16);
    }

    /// `c_atu_cfg_cq_table[0]` was written: run its command (`C_ATU_INVALIDATE_PAGES` = 1).
    pub(crate) fn cq_cmd_written(&mut self, csrs: &CsrFile, entry: u32) {
        let c = csr::C_ATU_CFG_CQ_TABLE;
        let qw = csrs.entry_qword(c, entry, 0);
        let cmd = qw >> 62;
        if cmd == 1 {
            self.invalidate((qw & 0x3FF) as u16);
        }
    }

    /// Drop every cached translation of `acid`.
    pub(crate) fn invalidate(&mut self, acid: u16) {
        self.generation += 1;
        self.cache.retain(|k, _| k.0 != acid);
        if self.last.is_some_and(|(k, _)| k.0 == acid) {
            self.last = None;
        }
        for s in self.tlb.iter_mut() {
            if s.is_some_and(|(k, _)| k.0 == acid) {
                *s = None;
            }
        }
    }

    /// Walk the page tables of `ac` for IOVA page `vpn`.
    fn walk(dma: &DmaPort, ac: &Ac, iova: u64) -> Result<Tlb, ReturnCode> {
        let mut table = ac.root;
        for level in (0..LEVELS).rev() {
            let shift = PAGE_SHIFT + 9 * level;
            let idx = (iova >> shift) & 0x1FF;
            let pte = dma
                .read_u64(table + idx * 8)
                .map_err(|_| ReturnCode::PcieUnsuccessCmpl)?;
            if pte & PTE_P == 0 {
                return Err(ReturnCode::NoTranslation);
            }
            let ptr = pte & PTE_PTR_MASK;
            if level == 0 || pte & PTE_LEAF != 0 {
                let size = 1u64 << shift;
                let bus = (ptr & !(size - 1)) + (iova & (size - 1) & !(PAGE - 1));
                return Ok(Tlb {
                    bus,
                    perm: Perm::new(pte & PTE_R != 0, pte & PTE_W != 0),
                });
            }
            table = ptr & !(PAGE - 1);
        }
        Err(ReturnCode::NoTranslation)
    }

    /// Translate one page (cached).
    fn page(&mut self, dma: &DmaPort, acid: u16, ac: &Ac, iova: u64) -> Result<Tlb, ReturnCode> {
        let key = (acid, iova >> PAGE_SHIFT);
        if let Some((k, t)) = self.last
            && k == key
        {
            self.counters.cache_hit_base_page_size += 1;
            return Ok(t);
        }
        let t = self.page_cached(dma, acid, ac, iova, key)?;
        self.last = Some((key, t));
        Ok(t)
    }

    /// [`Atu::page`] behind the last-page entry: the direct-mapped front, the cache, a walk.
    fn page_cached(
        &mut self,
        dma: &DmaPort,
        acid: u16,
        ac: &Ac,
        iova: u64,
        key: (u16, u64),
    ) -> Result<Tlb, ReturnCode> {
        let slot = ((key.1 ^ (u64::from(acid) << 7)) as usize) % TLB_SLOTS;
        if self.tlb.is_empty() {
            self.tlb = vec![None; TLB_SLOTS];
        }
        if let Some((k, t)) = self.tlb[slot]
            && k == key
        {
            self.counters.cache_hit_base_page_size += 1;
            return Ok(t);
        }
        if let Some(t) = self.cache.get(&key) {
            self.counters.cache_hit_base_page_size += 1;
            let t = *t;
            self.tlb[slot] = Some((key, t));
            return Ok(t);
        }
        self.counters.cache_miss += 1;
        let t = Self::walk(dma, ac, iova)?;
        if self.cache.len() >= CACHE_LIMIT {
            self.cache.clear();
        }
        self.cache.insert(key, t);
        self.tlb[slot] = Some((key, t));
        Ok(t)
    }

    /// Translate `[iova, iova + len)` of AC `acid` for `need` into bus segments (in
    /// `self.segs`), checking every page before anything is accessed.
    fn translate(
        &mut self,
        dma: &DmaPort,
        acid: u16,
        iova: u64,
        len: u64,
        need: Perm,
    ) -> Result<(), ReturnCode> {
        self.segs.clear();
        if len == 0 {
            return Ok(());
        }
        let ac = *self
            .acs
            .get(usize::from(acid))
            .map_err(|_| ReturnCode::InvalidAc)?;
        if ac.mode == Mode::Invalid {
            return Err(ReturnCode::InvalidAc);
        }
        let end = iova.checked_add(len).ok_or(ReturnCode::AddrOutOfRange)?;
        if iova < ac.base || end > ac.end || end - 1 > IOVA_MASK {
            return Err(ReturnCode::AddrOutOfRange);
        }
        if ac.mode == Mode::Passthrough {
            self.segs.push(Segment { addr: iova, len });
            return Ok(());
        }
        let mut cur = iova;
        while cur < end {
            let t = self.page(dma, acid, &ac, cur)?;
            if !t.perm.contains(need) {
                return Err(ReturnCode::PagePermError);
            }
            let off = cur & (PAGE - 1);
            let n = (PAGE - off).min(end - cur);
            let addr = t.bus + off;
            match self.segs.last_mut() {
                Some(s) if s.addr + s.len == addr => s.len += n,
                _ => self.segs.push(Segment { addr, len: n }),
            }
            cur += n;
        }
        Ok(())
    }

    /// The bus segments of `[iova, iova + n)` of AC `acid` for `need`: through `m`'s
    /// translation while it is valid and covers the range (counted as the cache hits of the
    /// accesses of `frame` bytes each that a frame-by-frame transfer makes), else translated
    /// afresh. For a train of frames, whose payload is copied in one go.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn segments_of(
        &mut self,
        dma: &DmaPort,
        m: Option<&Mapped>,
        acid: u16,
        iova: u64,
        n: u64,
        need: Perm,
        frame: u64,
    ) -> Result<Vec<Segment>, ReturnCode> {
        if let Some(m) = m
            && m.generation == self.generation
            && m.acid == acid
            && let Some(ps) = m.pieces(iova, n, need)
        {
            let segs = ps
                .map(|(addr, k)| Segment {
                    addr,
                    len: k as u64,
                })
                .collect();
            let mut at = 0;
            while at < n {
                let k = frame.max(1).min(n - at);
                self.count_mapped_hits(iova + at, k);
                at += k;
            }
            return Ok(segs);
        }
        self.translate(dma, acid, iova, n, need)?;
        Ok(self.segs.clone())
    }

    /// The bus segments of `[iova, iova + n)` of AC `acid` for `need`, translated as the
    /// accesses of `frame` bytes each that a frame-by-frame transfer makes one after another
    /// (each translated and counted as such): appended to `out`, contiguous pieces merged.
    /// For a train of REPLY frames, whose payload is copied in one go. `Err((done, rc))`
    /// at the first access that fails: the `done` bytes before it are in `out`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn frames_segments(
        &mut self,
        dma: &DmaPort,
        acid: u16,
        iova: u64,
        n: u64,
        need: Perm,
        frame: u64,
        out: &mut Vec<Segment>,
    ) -> Result<(), (u64, ReturnCode)> {
        let mut at = 0u64;
        while at < n {
            let k = frame.max(1).min(n - at);
            self.translate(dma, acid, iova + at, k, need)
                .map_err(|rc| (at, rc))?;
            for s in &self.segs {
                match out.last_mut() {
                    Some(l) if l.addr + l.len == s.addr => l.len += s.len,
                    _ => out.push(*s),
                }
            }
            at += k;
        }
        Ok(())
    }

    /// Check that `[iova, iova + len)` is accessible with `need`, without accessing it.
    pub(crate) fn check(
        &mut self,
        dma: &DmaPort,
        acid: u16,
        iova: u64,
        len: u64,
        need: Perm,
    ) -> Result<(), ReturnCode> {
        self.translate(dma, acid, iova, len, need)
    }

    /// Check `[iova, iova + len)` for `need` as [`Atu::check`] does, and keep its
    /// translation for later accesses inside it ([`Atu::read_in`], [`Atu::write_in`]).
    pub(crate) fn map_range(
        &mut self,
        dma: &DmaPort,
        acid: u16,
        iova: u64,
        len: u64,
        need: Perm,
    ) -> Result<Mapped, ReturnCode> {
        self.translate(dma, acid, iova, len, need)?;
        let mut at = 0u64;
        let starts = self
            .segs
            .iter()
            .map(|s| {
                let a = at;
                at += s.len;
                a
            })
            .collect();
        Ok(Mapped {
            generation: self.generation,
            acid,
            iova,
            len,
            need,
            segs: self.segs.clone(),
            starts,
        })
    }

    /// Pages of `[iova, iova + n)`: the lookups an access through a [`Mapped`] range saves,
    /// counted as the cache hits they would have been.
    fn count_mapped_hits(&mut self, iova: u64, n: u64) {
        if n > 0 {
            let pages = ((iova + n - 1) >> PAGE_SHIFT) - (iova >> PAGE_SHIFT) + 1;
            self.counters.cache_hit_base_page_size += pages;
        }
    }

    /// Run `each(host address, range of the access)` over the pieces of `m`'s translation
    /// that cover `[iova, iova + n)` with `need`; `None` when the translation is stale or
    /// does not cover the access (the caller translates afresh).
    fn through_mapped(
        &mut self,
        m: &Mapped,
        iova: u64,
        n: u64,
        need: Perm,
        mut each: impl FnMut(u64, std::ops::Range<usize>) -> Result<(), DmaError>,
    ) -> Option<Result<(), ReturnCode>> {
        if m.generation != self.generation {
            return None;
        }
        let mut at = 0usize;
        for (addr, k) in m.pieces(iova, n, need)? {
            if let Err(e) = each(addr, at..at + k) {
                return Some(Err(bus_error(e)));
            }
            at += k;
        }
        self.count_mapped_hits(iova, n);
        Some(Ok(()))
    }

    /// [`Atu::read`] of `buf.len()` bytes at `iova` of `m.acid`, through `m`'s translation
    /// when it is still valid and covers the access.
    pub(crate) fn read_in(
        &mut self,
        dma: &DmaPort,
        m: &Mapped,
        iova: u64,
        buf: &mut [u8],
    ) -> Result<(), ReturnCode> {
        let n = buf.len() as u64;
        match self.through_mapped(m, iova, n, Perm::READ, |addr, r| {
            dma.read(addr, &mut buf[r])
        }) {
            Some(res) => res,
            None => self.read(dma, m.acid, iova, buf),
        }
    }

    /// [`Atu::write`] of `buf` at `iova` of `m.acid`, through `m`'s translation when it is
    /// still valid and covers the access.
    pub(crate) fn write_in(
        &mut self,
        dma: &DmaPort,
        m: &Mapped,
        iova: u64,
        buf: &[u8],
    ) -> Result<(), ReturnCode> {
        let n = buf.len() as u64;
        match self.through_mapped(m, iova, n, Perm::WRITE, |addr, r| dma.write(addr, &buf[r])) {
            Some(res) => res,
            None => self.write(dma, m.acid, iova, buf),
        }
    }

    /// Device read of `buf.len()` bytes at `iova` of AC `acid`.
    pub(crate) fn read(
        &mut self,
        dma: &DmaPort,
        acid: u16,
        iova: u64,
        buf: &mut [u8],
    ) -> Result<(), ReturnCode> {
        self.translate(dma, acid, iova, buf.len() as u64, Perm::READ)?;
        if let [s] = self.segs.as_slice() {
            return dma.read(s.addr, buf).map_err(bus_error);
        }
        dma.read_segments(self.segs.iter().copied(), buf)
            .map_err(bus_error)
    }

    /// Device write of `buf` at `iova` of AC `acid`.
    pub(crate) fn write(
        &mut self,
        dma: &DmaPort,
        acid: u16,
        iova: u64,
        buf: &[u8],
    ) -> Result<(), ReturnCode> {
        self.translate(dma, acid, iova, buf.len() as u64, Perm::WRITE)?;
        if let [s] = self.segs.as_slice() {
            return dma.write(s.addr, buf).map_err(bus_error);
        }
        dma.write_segments(self.segs.iter().copied(), buf)
            .map_err(bus_error)
    }

    /// Write `buf` at `iova` (8-aligned, `buf.len()` a multiple of 8, inside one page) so that
    /// its last qword is stored last with release ordering (event valid words).
    pub(crate) fn write_release_last(
        &mut self,
        dma: &DmaPort,
        acid: u16,
        iova: u64,
        buf: &[u8],
    ) -> Result<(), ReturnCode> {
        let n = buf.len();
        if n < 8 {
            return self.write(dma, acid, iova, buf);
        }
        self.translate(dma, acid, iova, n as u64, Perm::WRITE)?;
        let [s] = self.segs.as_slice() else {
            // Crosses a page boundary: fall back to an ordered pair of writes.
            let (body, last) = buf.split_at(n - 8);
            self.write(dma, acid, iova, body)?;
            return self.write(dma, acid, iova + (n as u64 - 8), last);
        };
        let bus = s.addr;
        let (body, last) = buf.split_at(n - 8);
        dma.write(bus, body).map_err(bus_error)?;
        let mut q = [0u8; 8];
        q.copy_from_slice(last);
        let tail = bus + (n as u64 - 8);
        match dma.store_u64_release(tail, u64::from_le_bytes(q)) {
            Ok(()) => Ok(()),
            // Not 8-aligned on the bus (or split by the platform IOMMU): plain write.
            Err(_) => dma.write(tail, last).map_err(bus_error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu_core::memory::HostMemory;

    fn ac_nta(root: u64, base_pages: u64, pages: u64) -> Ac {
        Ac {
            mode: Mode::Nta,
            base: base_pages << PAGE_SHIFT,
            end: (base_pages + pages) << PAGE_SHIFT,
            root,
        }
    }

    /// Build a 5-level table mapping `pages` IOVA pages from `iova` to `host` (read/write as
    /// given) in fresh table pages.
    fn map(mem: &HostMemory, root: u64, iova: u64, host: u64, pages: u64, r: bool, w: bool) {
        for p in 0..pages {
            let va = iova + p * PAGE;
            let mut table = root;
            for level in (1..LEVELS).rev() {
                let idx = (va >> (PAGE_SHIFT + 9 * level)) & 0x1FF;
                let a = table + idx * 8;
                let pte = mem.read_u64(emu_core::memory::GuestAddress(a)).unwrap();
                if pte & PTE_P != 0 {
                    table = pte & PTE_PTR_MASK;
                    continue;
                }
                let next = mem.alloc(PAGE, PAGE).unwrap().start.0;
                mem.write_u64(emu_core::memory::GuestAddress(a), next | PTE_P)
                    .unwrap();
                table = next;
            }
            let idx = (va >> PAGE_SHIFT) & 0x1FF;
            let mut pte = (host + p * PAGE) | PTE_P | PTE_LEAF;
            if r {
                pte |= PTE_R;
            }
            if w {
                pte |= PTE_W;
            }
            mem.write_u64(emu_core::memory::GuestAddress(table + idx * 8), pte)
                .unwrap();
        }
    }

    fn setup() -> (HostMemory, DmaPort, Atu, u64, u64) {
        let mem = HostMemory::new(1 << 22).unwrap();
        let dma = DmaPort::passthrough(mem.clone());
        let root = mem.alloc(PAGE, PAGE).unwrap().start.0;
        let data = mem.alloc(4 * PAGE, PAGE).unwrap().start.0;
        let mut atu = Atu::new();
        *atu.acs.get_mut(5).unwrap() = ac_nta(root, 0x100, 4);
        (mem, dma, atu, root, data)
    }

    #[test]
    fn nta_walk_translates_and_crosses_pages() {
        let (mem, dma, mut atu, root, data) = setup();
        map(&mem, root, 0x100 << 12, data, 4, true, true);
        let buf: Vec<u8> = (0..6000u32).map(|i| i as u8).collect();
        atu.write(&dma, 5, (0x100 << 12) + 100, &buf).unwrap();
        let mut back = vec![0u8; 6000];
        mem.read(emu_core::memory::GuestAddress(data + 100), &mut back)
            .unwrap();
        assert_eq!(back, buf);
        let mut rd = vec![0u8; 6000];
        atu.read(&dma, 5, (0x100 << 12) + 100, &mut rd).unwrap();
        assert_eq!(rd, buf);
        assert!(atu.counters.cache_miss >= 2);
        assert!(atu.counters.cache_hit_base_page_size >= 1);
    }

    #[test]
    fn errors_are_return_codes_and_touch_nothing() {
        let (mem, dma, mut atu, root, data) = setup();
        map(&mem, root, 0x100 << 12, data, 2, true, false);
        // Third page in bounds but not mapped.
        let r = atu.write(&dma, 5, (0x101 << 12) + 4000, &[1u8; 200]);
        assert_eq!(r, Err(ReturnCode::PagePermError));
        let r = atu.read(&dma, 5, (0x102 << 12) - 8, &mut [0u8; 16]);
        assert_eq!(r, Err(ReturnCode::NoTranslation));
        let r = atu.read(&dma, 5, (0x104 << 12) - 8, &mut [0u8; 16]);
        assert_eq!(r, Err(ReturnCode::AddrOutOfRange));
        let r = atu.read(&dma, 5, 0xff << 12, &mut [0u8; 16]);
        assert_eq!(r, Err(ReturnCode::AddrOutOfRange));
        let r = atu.read(&dma, 6, 0, &mut [0u8; 16]);
        assert_eq!(r, Err(ReturnCode::InvalidAc));
        let mut back = vec![0u8; 2 * PAGE as usize];
        mem.read(emu_core::memory::GuestAddress(data), &mut back)
            .unwrap();
        assert!(back.iter().all(|&b| b == 0), "nothing written");
    }

    #[test]
    fn invalidation_drops_cached_translations() {
        let (mem, dma, mut atu, root, data) = setup();
        map(&mem, root, 0x100 << 12, data, 1, true, true);
        let mut b = [0u8; 8];
        atu.read(&dma, 5, 0x100 << 12, &mut b).unwrap();
        // Unmap in the tables: the cached translation still serves until invalidated.
        let mut t = root;
        for level in (1..LEVELS).rev() {
            let idx = ((0x100u64 << 12) >> (PAGE_SHIFT + 9 * level)) & 0x1FF;
            t = mem
                .read_u64(emu_core::memory::GuestAddress(t + idx * 8))
                .unwrap()
                & PTE_PTR_MASK;
        }
        mem.write_u64(emu_core::memory::GuestAddress(t + (0x100 & 0x1FF) * 8), 0)
            .unwrap();
        assert!(atu.read(&dma, 5, 0x100 << 12, &mut b).is_ok());
        atu.invalidate(5);
        assert_eq!(
            atu.read(&dma, 5, 0x100 << 12, &mut b),
            Err(ReturnCode::NoTranslation)
        );
    }

    #[test]
    fn a_mapped_range_serves_accesses_until_an_invalidation() {
        let (mem, dma, mut atu, root, data) = setup();
        // Two IOVA pages onto host pages in reverse order: two bus segments.
        map(&mem, root, 0x100 << 12, data + PAGE, 1, true, true);
        map(&mem, root, 0x101 << 12, data, 1, true, true);
        let iova = 0x100 << 12;
        let m = atu
            .map_range(&dma, 5, iova, 2 * PAGE, Perm::READ | Perm::WRITE)
            .unwrap();
        let bytes: Vec<u8> = (0..64u8).collect();
        // Across the page boundary: the halves land on their own host pages.
        atu.write_in(&dma, &m, iova + PAGE - 32, &bytes).unwrap();
        let mut host = [0u8; 32];
        mem.read(
            emu_core::memory::GuestAddress(data + 2 * PAGE - 32),
            &mut host,
        )
        .unwrap();
        assert_eq!(host[..], bytes[..32]);
        mem.read(emu_core::memory::GuestAddress(data), &mut host)
            .unwrap();
        assert_eq!(host[..], bytes[32..]);
        let mut back = [0u8; 64];
        atu.read_in(&dma, &m, iova + PAGE - 32, &mut back).unwrap();
        assert_eq!(back[..], bytes[..]);
        let hits = atu.counters.cache_hit_base_page_size;
        atu.read_in(&dma, &m, iova, &mut back).unwrap();
        assert_eq!(atu.counters.cache_hit_base_page_size, hits + 1);
        // Outside the range: translated as any access (and refused here).
        assert_eq!(
            atu.read_in(&dma, &m, iova + 2 * PAGE, &mut back),
            Err(ReturnCode::NoTranslation)
        );
        // Unmap the second page in the tables and invalidate: the range is stale.
        let mut t = root;
        for level in (1..LEVELS).rev() {
            let idx = ((0x101u64 << 12) >> (PAGE_SHIFT + 9 * level)) & 0x1FF;
            t = mem
                .read_u64(emu_core::memory::GuestAddress(t + idx * 8))
                .unwrap()
                & PTE_PTR_MASK;
        }
        mem.write_u64(emu_core::memory::GuestAddress(t + (0x101 & 0x1FF) * 8), 0)
            .unwrap();
        assert!(atu.read_in(&dma, &m, iova + PAGE, &mut back).is_ok());
        atu.invalidate(5);
        assert_eq!(
            atu.read_in(&dma, &m, iova + PAGE, &mut back),
            Err(ReturnCode::NoTranslation)
        );
        assert!(atu.read_in(&dma, &m, iova, &mut back).is_ok());
    }

    #[test]
    fn passthrough_and_huge_leaf() {
        let (mem, dma, mut atu, root, _data) = setup();
        *atu.acs.get_mut(7).unwrap() = Ac {
            mode: Mode::Passthrough,
            base: 0,
            end: u64::MAX,
            root: 0,
        };
        atu.write(&dma, 7, 0x30_0000, &[9u8; 8]).unwrap();
        assert_eq!(
            mem.read_u64(emu_core::memory::GuestAddress(0x30_0000))
                .unwrap(),
            0x0909_0909_0909_0909
        );
        // A level-1 leaf maps 2 MiB at host 0x200000 for IOVA 0x4000_0000.
        *atu.acs.get_mut(8).unwrap() = ac_nta(root, 0, 0);
        atu.acs.get_mut(8).unwrap().end = u64::MAX;
        let va = 0x4000_0000u64;
        let mut table = root;
        for level in (2..LEVELS).rev() {
            let idx = (va >> (PAGE_SHIFT + 9 * level)) & 0x1FF;
            let next = mem.alloc(PAGE, PAGE).unwrap().start.0;
            mem.write_u64(
                emu_core::memory::GuestAddress(table + idx * 8),
                next | PTE_P,
            )
            .unwrap();
            table = next;
        }
        let idx = (va >> (PAGE_SHIFT + 9)) & 0x1FF;
        mem.write_u64(
            emu_core::memory::GuestAddress(table + idx * 8),
            0x20_0000 | PTE_P | PTE_LEAF | PTE_R | PTE_W,
        )
        .unwrap();
        atu.write(&dma, 8, va + 0x1_2345, &[7u8; 4]).unwrap();
        assert_eq!(
            mem.read_u32(emu_core::memory::GuestAddress(0x20_0000 + 0x1_2345))
                .unwrap(),
            0x0707_0707
        );
    }
}
