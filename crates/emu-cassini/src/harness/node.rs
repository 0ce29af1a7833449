//! One node: its NIC's BAR0, its host memory, and the driver's work done with CSR stores:
//! CSR access, the address contexts and ATU page tables, memory descriptors, communication
//! profiles, counters.

use std::sync::Arc;

use emu_core::engine::DeviceId;
use emu_core::memory::{GuestAddress, HostMemory};
use emu_core::mmio::Mmio;
use firmware_spec::cassini::csr::{self, Csr, Field, fields as f};
use firmware_spec::cassini::pci::CSR_BASE;

use super::error::{HarnessError, mem_err};
use super::fixed::{AC_KERNEL, AC_USER, PAGE, RGID, USER_IOVA_BASE, USER_IOVA_PAGES};

/// A memory descriptor: `len` bytes at `iova` in the user context, backed by host memory at
/// `host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Md {
    /// IOVA in AC 2 (LAC 0).
    pub iova: u64,
    /// Host address of the first byte.
    pub host: u64,
    /// Length in bytes.
    pub len: u64,
}

/// One emulated NIC with its host memory and the software state the harness keeps for it.
pub struct Node {
    /// The NIC's NID (= its fabric port).
    pub nid: u32,
    /// The engine's id of the device.
    pub dev: DeviceId,
    /// BAR0.
    pub bar: Arc<dyn Mmio>,
    /// The node's host memory.
    pub mem: HostMemory,
    pub(super) root: u64,
    pub(super) next_iova: u64,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("nid", &self.nid)
            .finish_non_exhaustive()
    }
}

/// Build an entry image from its reset value and `fields`.
pub fn entry_image(c: &Csr, fields: &[(&Field, u64)]) -> Vec<u8> {
    let mut b = c.reset_bytes();
    for (fld, v) in fields {
        fld.set(&mut b, *v);
    }
    b
}

impl Node {
    /// Store a whole CSR entry image (64-bit stores, in order).
    pub fn csr_write_image(&self, c: &Csr, entry: u32, image: &[u8]) -> Result<(), HarnessError> {
        let base = c
            .bar0_offset(entry)
            .ok_or_else(|| HarnessError::Invalid(format!("{}[{entry}]", c.name)))?;
        for (i, q) in image.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b[..q.len()].copy_from_slice(q);
            self.bar.write(base + 8 * i as u64, &b)?;
        }
        Ok(())
    }

    /// Store CSR entry `entry` of `c` with `fields` set (others at their reset values).
    pub fn csr_write(
        &self,
        c: &Csr,
        entry: u32,
        fields: &[(&Field, u64)],
    ) -> Result<(), HarnessError> {
        self.csr_write_image(c, entry, &entry_image(c, fields))
    }

    /// Load CSR entry `entry` of `c`.
    pub fn csr_read(&self, c: &Csr, entry: u32) -> Result<Vec<u8>, HarnessError> {
        let base = c
            .bar0_offset(entry)
            .ok_or_else(|| HarnessError::Invalid(format!("{}[{entry}]", c.name)))?;
        let mut out = vec![0u8; c.size as usize];
        for (i, q) in out.chunks_mut(8).enumerate() {
            let mut b = [0u8; 8];
            self.bar.read(base + 8 * i as u64, &mut b)?;
            q.copy_from_slice(&b[..q.len()]);
        }
        Ok(out)
    }

    /// Load one field of a CSR entry.
    pub fn csr_field(&self, c: &Csr, entry: u32, fld: &Field) -> Result<u64, HarnessError> {
        Ok(fld.get(&self.csr_read(c, entry)?))
    }

    /// Address contexts, LAC 0 of RGID 1, and the ATU root table.
    pub(super) fn init(&mut self) -> Result<(), HarnessError> {
        use f::c_atu_cfg_ac_table as ac;
        self.csr_write(
            csr::C_ATU_CFG_AC_TABLE,
            u32::from(AC_KERNEL),
            &[(ac::CONTEXT_EN, 1), (ac::TA_MODE, 3)],
        )?;
        // nta_root_ptr shares bits 12..57 with ta_mode_opts: the raw bits are the address.
        self.csr_write(
            csr::C_ATU_CFG_AC_TABLE,
            u32::from(AC_USER),
            &[
                (ac::CONTEXT_EN, 1),
                (ac::TA_MODE, 1),
                (ac::TA_MODE_OPTS, self.root >> 12),
                (ac::MEM_BASE, USER_IOVA_BASE >> 12),
                (ac::MEM_SIZE, USER_IOVA_PAGES),
            ],
        )?;
        self.csr_write(
            csr::C_CQ_CFG_AC_ARRAY,
            u32::from(RGID) * 8,
            &[(f::c_cq_cfg_ac_array::AC, u64::from(AC_USER))],
        )
    }

    /// Allocate `len` bytes of zeroed host memory (page aligned).
    pub fn alloc_host(&self, len: u64) -> Result<u64, HarnessError> {
        let r = self.mem.alloc(len.max(1), PAGE).map_err(mem_err)?;
        self.mem.fill(r.start, r.len, 0).map_err(mem_err)?;
        Ok(r.start.0)
    }

    /// Write a page-table entry for IOVA `va` -> host `pa`.
    fn map_page(&self, va: u64, pa: u64, r: bool, w: bool) -> Result<(), HarnessError> {
        const P: u64 = 1 << 60;
        const LEAF: u64 = 1 << 59;
        let mut table = self.root;
        for level in (1..5u32).rev() {
            let idx = (va >> (12 + 9 * level)) & 0x1FF;
            let a = GuestAddress(table + idx * 8);
            let pte = self.mem.read_u64(a).map_err(mem_err)?;
            if pte & P != 0 {
                table = pte & 0x01FF_FFFF_FFFF_F000;
                continue;
            }
            let next = self.alloc_host(PAGE)?;
            self.mem.write_u64(a, next | P).map_err(mem_err)?;
            table = next;
        }
        let idx = (va >> 12) & 0x1FF;
        let mut pte = pa | P | LEAF;
        if r {
            pte |= 1 << 57;
        }
        if w {
            pte |= 1 << 58;
        }
        self.mem
            .write_u64(GuestAddress(table + idx * 8), pte)
            .map_err(mem_err)
    }

    /// Register `len` bytes of fresh host memory in the user context (`cxil_map`).
    pub fn map(&mut self, len: u64, read: bool, write: bool) -> Result<Md, HarnessError> {
        let len = len.max(1);
        let pages = len.div_ceil(PAGE);
        let host = self.alloc_host(pages * PAGE)?;
        let iova = self.next_iova;
        // Leave an unmapped guard page after every MD.
        self.next_iova += (pages + 1) * PAGE;
        for p in 0..pages {
            self.map_page(iova + p * PAGE, host + p * PAGE, read, write)?;
        }
        self.atu_invalidate(AC_USER)?;
        Ok(Md { iova, host, len })
    }

    /// Change the access of the pages of `md` that `[offset, offset + len)` touches: `read`
    /// and `write` as in [`Node::map`], or not present at all when `present` is false; then
    /// invalidate the context's translations (an unmap or `mprotect` under a transfer).
    pub fn protect(
        &self,
        md: &Md,
        offset: u64,
        len: u64,
        present: bool,
        read: bool,
        write: bool,
    ) -> Result<(), HarnessError> {
        let first = offset / PAGE;
        let end = offset.saturating_add(len).min(md.len).div_ceil(PAGE);
        for p in first..end {
            let (va, pa) = (md.iova + p * PAGE, md.host + p * PAGE);
            self.map_page(va, pa, read, write)?;
            if !present {
                self.unmap_page(va)?;
            }
        }
        self.atu_invalidate(AC_USER)
    }

    /// Clear the leaf page-table entry of IOVA `va` (mapped before).
    fn unmap_page(&self, va: u64) -> Result<(), HarnessError> {
        let mut table = self.root;
        for level in (1..5u32).rev() {
            let idx = (va >> (12 + 9 * level)) & 0x1FF;
            let pte = self
                .mem
                .read_u64(GuestAddress(table + idx * 8))
                .map_err(mem_err)?;
            table = pte & 0x01FF_FFFF_FFFF_F000;
        }
        let idx = (va >> 12) & 0x1FF;
        self.mem
            .write_u64(GuestAddress(table + idx * 8), 0)
            .map_err(mem_err)
    }

    /// `C_ATU_INVALIDATE_PAGES` for a whole context.
    pub fn atu_invalidate(&self, acid: u16) -> Result<(), HarnessError> {
        let qw = (1u64 << 62) | u64::from(acid & 0x3FF);
        self.bar
            .write_u64(CSR_BASE + csr::C_ATU_CFG_CQ_TABLE.offset, qw)
            .map_err(Into::into)
    }

    /// Read `len` bytes of host memory at `host`.
    pub fn read_host(&self, host: u64, len: usize) -> Result<Vec<u8>, HarnessError> {
        let mut v = vec![0u8; len];
        self.mem.read(GuestAddress(host), &mut v).map_err(mem_err)?;
        Ok(v)
    }

    /// Write host memory.
    pub fn write_host(&self, host: u64, data: &[u8]) -> Result<(), HarnessError> {
        self.mem.write(GuestAddress(host), data).map_err(mem_err)
    }

    /// A communication profile: CP `cp` with `vni` and traffic class `tc`, reached through
    /// LCID `lcid` of RGID 1.
    pub fn set_cp(&self, cp: u8, lcid: u8, vni: u16, tc: u8) -> Result<(), HarnessError> {
        self.csr_write(
            csr::C_CQ_CFG_CP_TABLE,
            u32::from(cp),
            &[
                (f::c_cq_cfg_cp_table::VNI, u64::from(vni)),
                (f::c_cq_cfg_cp_table::VALID, 1),
            ],
        )?;
        self.csr_write(
            csr::C_CQ_CFG_CP_FL_TABLE,
            u32::from(cp),
            &[(f::c_cq_cfg_cp_fl_table::TC, u64::from(tc))],
        )?;
        self.csr_write(
            csr::C_CQ_CFG_CID_ARRAY,
            u32::from(RGID) * 16 + u32::from(lcid),
            &[(f::c_cq_cfg_cid_array::CID, u64::from(cp))],
        )
    }

    /// Hardware counter `name` of view `view` (e.g. `c1_oxe_cntrs`, `err_no_translation`),
    /// read from its slot of the block's event-counter array as software reads it.
    pub fn counter(&self, view: &str, name: &str) -> Result<u64, HarnessError> {
        let off = crate::counters::offset_of(view, name)
            .ok_or_else(|| HarnessError::Invalid(format!("no counter {view}.{name}")))?;
        Ok(self
            .bar
            .read_u64(firmware_spec::cassini::csr::CSR_BASE + off)?)
    }
}
