//! The portal table: 2048 PtlTE slots (`c_lpe_cfg_ptl_table`), index 0 never used.

use super::hw::{EQ_NONE, NUM_PTLTES, PtAllocOpts, PtlList, PtlteState};
use super::list::{LeList, UleList};
use emu_core::sparse::SparseTable;

/// Configuration of a PtlTE, as the driver writes it into `c_lpe_cfg_ptl_table[n]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PtlteConfig {
    /// `cxi_pt_alloc_opts` bits.
    pub options: PtAllocOpts,
    /// Event queue of the PtlTE's target events (`eq_handle`; 0 = none).
    pub eq: u16,
    /// Processing engine (`pe_num`, 0..3).
    pub pe: u8,
    /// LE pool of the PE (`le_pool`, 0..15).
    pub le_pool: u8,
    /// Counter pool (`cntr_pool`, 0..3) for the pooled LPE counters.
    pub cntr_pool: u8,
}

impl PtlteConfig {
    /// A configuration with the given options and event queue, pool (0, 0).
    pub fn new(options: PtAllocOpts, eq: u16) -> Self {
        Self {
            options,
            eq,
            ..Self::default()
        }
    }
}

/// One configured PtlTE: state, drop count, its four lists.
#[derive(Debug, Clone)]
pub(crate) struct Ptlte {
    pub(crate) config: PtlteConfig,
    pub(crate) state: PtlteState,
    pub(crate) drop_count: u32,
    pub(crate) priority: LeList,
    pub(crate) overflow: LeList,
    pub(crate) request: LeList,
    pub(crate) unexpected: UleList,
}

impl Ptlte {
    pub(crate) fn new(config: PtlteConfig) -> Self {
        Self {
            config,
            state: PtlteState::Disabled,
            drop_count: 0,
            priority: LeList::default(),
            overflow: LeList::default(),
            request: LeList::default(),
            unexpected: UleList::default(),
        }
    }

    pub(crate) fn opt(&self, o: PtAllocOpts) -> bool {
        self.config.options.contains(o)
    }

    pub(crate) fn is_matching(&self) -> bool {
        self.opt(PtAllocOpts::IS_MATCHING)
    }

    pub(crate) fn has_eq(&self) -> bool {
        self.config.eq != EQ_NONE
    }

    pub(crate) fn long_events(&self) -> bool {
        self.opt(PtAllocOpts::USE_LONG_EVENT)
    }

    /// The PRIORITY / OVERFLOW / REQUEST list; `None` for UNEXPECTED.
    pub(crate) fn list(&self, list: PtlList) -> Option<&LeList> {
        match list {
            PtlList::Priority => Some(&self.priority),
            PtlList::Overflow => Some(&self.overflow),
            PtlList::Request => Some(&self.request),
            PtlList::Unexpected => None,
        }
    }

    pub(crate) fn list_mut(&mut self, list: PtlList) -> Option<&mut LeList> {
        match list {
            PtlList::Priority => Some(&mut self.priority),
            PtlList::Overflow => Some(&mut self.overflow),
            PtlList::Request => Some(&mut self.request),
            PtlList::Unexpected => None,
        }
    }

    /// Entries held in the pool by this PtlTE (linked LEs and unexpected headers).
    pub(crate) fn entries_held(&self) -> usize {
        self.priority.len() + self.overflow.len() + self.request.len() + self.unexpected.len()
    }
}

/// The 2048-entry portal table, stored sparsely: an idle NIC holds only the page directory.
#[derive(Clone, Debug)]
pub(crate) struct PtlTable {
    entries: SparseTable<Option<Ptlte>>,
}

impl Default for PtlTable {
    fn default() -> Self {
        Self {
            entries: SparseTable::new(NUM_PTLTES, None),
        }
    }
}

impl PtlTable {
    /// Whether `pt` names a usable slot (1..2047).
    pub(crate) fn valid_index(pt: u16) -> bool {
        pt != 0 && usize::from(pt) < NUM_PTLTES
    }

    #[inline]
    pub(crate) fn get(&self, pt: u16) -> Option<&Ptlte> {
        if !Self::valid_index(pt) {
            return None;
        }
        self.entries.get(usize::from(pt)).ok()?.as_ref()
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, pt: u16) -> Option<&mut Ptlte> {
        if !Self::valid_index(pt) {
            return None;
        }
        // A PtlTE in an untouched page is free: nothing to allocate for a lookup.
        self.entries
            .get_mut_if_touched(usize::from(pt))
            .ok()??
            .as_mut()
    }

    pub(crate) fn slot_mut(&mut self, pt: u16) -> Option<&mut Option<Ptlte>> {
        if !Self::valid_index(pt) {
            return None;
        }
        self.entries.get_mut(usize::from(pt)).ok()
    }

    /// Allocated PtlTEs in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Ptlte)> {
        self.entries
            .iter_touched()
            .filter_map(|(i, e)| e.as_ref().map(|p| (i, p)))
    }

    /// Lowest free index, never 0.
    pub(crate) fn first_free(&self) -> Option<u16> {
        self.entries
            .position_from(1, Option::is_none)
            .and_then(|i| u16::try_from(i).ok())
    }

    /// Slots backed by storage (a multiple of the sparse page size; 0 when idle).
    pub(crate) fn allocated_slots(&self) -> usize {
        self.entries.allocated_entries()
    }
}
