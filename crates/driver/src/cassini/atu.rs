//! NTA page tables (`cass_atu.c`): the on-NIC translation mode, whose tables live in host
//! memory. Per `docs/cassini-programming.md`: 4 KiB tables of 512 × 8 B `c_page_table_entry`
//! {ptr@6:51 (address bits 6..57), r@57, w@58, leaf@59, p@60} (`cassini_user_defs.h`,
//! cassini.md §7), walked like x86-64 5-level paging over IOVA bits 12..57, 9 bits a level.
//!
//! The driver keeps a shadow of which tables exist and how many live entries each has, so an
//! unmap frees the tables it empties and an address context's teardown frees them all.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::mem::{HostMem, MemError, PageBlock};

/// Levels of the walk.
pub const LEVELS: u32 = 5;
/// Index bits per level.
pub const BITS_PER_LEVEL: u32 = 9;
/// Entries per table.
pub const ENTRIES: u64 = 1 << BITS_PER_LEVEL;
/// The lowest IOVA bit translated (4 KiB pages).
pub const PAGE_SHIFT: u32 = 12;
/// One past the highest IOVA bit translated (57-bit IOVAs).
pub const IOVA_BITS: u32 = PAGE_SHIFT + LEVELS * BITS_PER_LEVEL;

/// `c_page_table_entry.ptr`: address bits 6..57 in place.
const PTR_MASK: u64 = ((1u64 << 57) - 1) & !((1u64 << 6) - 1);
/// `c_page_table_entry.r`.
pub const PTE_R: u64 = 1 << 57;
/// `c_page_table_entry.w`.
pub const PTE_W: u64 = 1 << 58;
/// `c_page_table_entry.leaf`.
pub const PTE_LEAF: u64 = 1 << 59;
/// `c_page_table_entry.p` (present).
pub const PTE_P: u64 = 1 << 60;

/// Encode a page table entry pointing at `addr`.
pub fn pte(addr: u64, r: bool, w: bool, leaf: bool) -> u64 {
    (addr & PTR_MASK)
        | PTE_P
        | if r { PTE_R } else { 0 }
        | if w { PTE_W } else { 0 }
        | if leaf { PTE_LEAF } else { 0 }
}

/// The address an entry points at.
pub fn pte_addr(entry: u64) -> u64 {
    entry & PTR_MASK
}

/// Index of `iova` in a table of `level` (0 = root).
pub fn index(iova: u64, level: u32) -> u64 {
    (iova >> (PAGE_SHIFT + BITS_PER_LEVEL * (LEVELS - 1 - level))) & (ENTRIES - 1)
}

/// The IOVA bits above `level`'s index: which table of that level covers `iova`.
fn prefix(iova: u64, level: u32) -> u64 {
    let shift = PAGE_SHIFT + BITS_PER_LEVEL * (LEVELS - level);
    if shift >= 64 { 0 } else { iova >> shift }
}

#[derive(Debug)]
struct Table {
    block: Arc<PageBlock>,
    live: u32,
}

/// The page tables of one address context.
#[derive(Debug)]
pub struct NtaTables {
    mem: Arc<dyn HostMem>,
    /// (level, prefix) -> table. Level 0 prefix 0 is the root.
    tables: BTreeMap<(u32, u64), Table>,
}

impl NtaTables {
    /// An empty tree (just a root table).
    pub fn new(mem: &Arc<dyn HostMem>) -> Result<Self, MemError> {
        let root = PageBlock::alloc(mem, 4096)?;
        let mut tables = BTreeMap::new();
        tables.insert(
            (0, 0),
            Table {
                block: root,
                live: 0,
            },
        );
        Ok(NtaTables {
            mem: Arc::clone(mem),
            tables,
        })
    }

    /// Bus address of the root table (`nta_root_ptr`).
    pub fn root(&self) -> u64 {
        self.tables
            .get(&(0, 0))
            .map(|t| t.block.bus_address(0))
            .unwrap_or(0)
    }

    /// Number of table pages in use (root included).
    pub fn table_pages(&self) -> usize {
        self.tables.len()
    }

    fn entry_addr(t: &Table, iova: u64, level: u32) -> u64 {
        t.block.addr() + index(iova, level) * 8
    }

    /// Map the 4 KiB page at `iova` to bus address `page` with permissions `r`/`w`, creating
    /// intermediate tables as needed. Remapping a mapped page replaces the entry.
    pub fn map_page(&mut self, iova: u64, page: u64, r: bool, w: bool) -> Result<(), MemError> {
        for level in 0..LEVELS - 1 {
            let child_key = (level + 1, prefix(iova, level + 1));
            if self.tables.contains_key(&child_key) {
                continue;
            }
            let block = PageBlock::alloc(&self.mem, 4096)?;
            let child_bus = block.bus_address(0);
            let parent = self
                .tables
                .get_mut(&(level, prefix(iova, level)))
                .ok_or(MemError::OutOfRange { addr: iova, len: 0 })?;
            // Intermediate entries grant everything; the leaf carries the permissions.
            self.mem.store_u64(
                Self::entry_addr(parent, iova, level),
                pte(child_bus, true, true, false),
                std::sync::atomic::Ordering::Release,
            )?;
            parent.live += 1;
            self.tables.insert(child_key, Table { block, live: 0 });
        }
        let leaf_level = LEVELS - 1;
        let leaf = self
            .tables
            .get_mut(&(leaf_level, prefix(iova, leaf_level)))
            .ok_or(MemError::OutOfRange { addr: iova, len: 0 })?;
        let at = Self::entry_addr(leaf, iova, leaf_level);
        let old = self
            .mem
            .load_u64(at, std::sync::atomic::Ordering::Acquire)?;
        self.mem.store_u64(
            at,
            pte(page, r, w, true),
            std::sync::atomic::Ordering::Release,
        )?;
        if old & PTE_P == 0 {
            leaf.live += 1;
        }
        Ok(())
    }

    /// Remove the mapping of the page at `iova` (nothing if unmapped), freeing tables it
    /// empties.
    pub fn unmap_page(&mut self, iova: u64) -> Result<(), MemError> {
        let mut level = LEVELS - 1;
        loop {
            let key = (level, prefix(iova, level));
            let Some(t) = self.tables.get_mut(&key) else {
                return Ok(());
            };
            let at = Self::entry_addr(t, iova, level);
            let old = self
                .mem
                .load_u64(at, std::sync::atomic::Ordering::Acquire)?;
            if old & PTE_P == 0 {
                return Ok(());
            }
            self.mem
                .store_u64(at, 0, std::sync::atomic::Ordering::Release)?;
            t.live = t.live.saturating_sub(1);
            if t.live > 0 || level == 0 {
                return Ok(());
            }
            // The table is empty: free it and clear its entry in the parent.
            self.tables.remove(&key);
            level -= 1;
        }
    }

    /// The leaf entry for `iova` (0 when unmapped): a software walk, for tests and debugging.
    pub fn lookup(&self, iova: u64) -> Result<u64, MemError> {
        let mut table = self.root_addr();
        for level in 0..LEVELS {
            let e = self.mem.load_u64(
                table + index(iova, level) * 8,
                std::sync::atomic::Ordering::Acquire,
            )?;
            if e & PTE_P == 0 {
                return Ok(0);
            }
            if level == LEVELS - 1 {
                return Ok(e);
            }
            table = pte_addr(e);
        }
        Ok(0)
    }

    fn root_addr(&self) -> u64 {
        self.tables
            .get(&(0, 0))
            .map(|t| t.block.addr())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::EmulatedHostMemory;
    use emu_core::memory::HostMemory;

    fn mem() -> Arc<dyn HostMem> {
        Arc::new(EmulatedHostMemory::new(HostMemory::new(8 << 20).unwrap()))
    }

    #[test]
    fn entry_bits_follow_the_public_layout() {
        // ptr@6:51, r@57, w@58, leaf@59, p@60.
        let e = pte(0x1234_5000, true, false, true);
        assert_eq!(e, 0x1234_5000 | 1 << 57 | 1 << 59 | 1 << 60);
        assert_eq!(pte_addr(e), 0x1234_5000);
        assert_eq!(index(0x1000, 4), 1);
        assert_eq!(index(1 << 48, 0), 1);
        assert_eq!(index(1 << 21, 3), 1);
        assert_eq!(IOVA_BITS, 57);
    }

    #[test]
    fn map_walk_unmap_frees_tables() {
        let m = mem();
        let before = m.free_bytes();
        let mut t = NtaTables::new(&m).unwrap();
        t.map_page(0x40_0000_1000, 0x9000, true, true).unwrap();
        t.map_page(0x40_0000_2000, 0xa000, true, false).unwrap();
        // Root + one table on each of the four lower levels.
        assert_eq!(t.table_pages(), 5);
        let e = t.lookup(0x40_0000_2000).unwrap();
        assert_eq!(pte_addr(e), 0xa000);
        assert_eq!(e & PTE_W, 0);
        assert_eq!(t.lookup(0x40_0000_3000).unwrap(), 0);
        // Far away: a second branch.
        t.map_page(0x1_0000_0000_0000, 0xb000, true, true).unwrap();
        assert_eq!(t.table_pages(), 9);
        t.unmap_page(0x40_0000_1000).unwrap();
        assert_eq!(t.table_pages(), 9);
        t.unmap_page(0x40_0000_2000).unwrap();
        assert_eq!(t.table_pages(), 5);
        t.unmap_page(0x40_0000_2000).unwrap();
        t.unmap_page(0x1_0000_0000_0000).unwrap();
        assert_eq!(t.table_pages(), 1);
        drop(t);
        assert_eq!(m.free_bytes(), before);
    }
}
