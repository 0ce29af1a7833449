//! List Processing Engine (LPE): the Cassini matching core, as a pure state machine.
//!
//! # Model
//!
//! The LPE owns the portal table (2048 PtlTEs, index 0 never used), each PtlTE's four lists
//! (PRIORITY, OVERFLOW, REQUEST, UNEXPECTED) and the list-entry pools. It never touches memory
//! and never writes events: every entry point returns a *decision* that the caller (IXE / target
//! DMA, event engine, CT unit, rendezvous engine) carries out:
//!
//! * [`Lpe::incoming`] takes an [`IncomingRequest`] for a PtlTE and returns an
//!   [`IncomingOutcome`]: the return code for the initiator, the list it matched, where the data
//!   goes ([`Delivery`]: IOVA, LAC, length), the target events to post in order, a CT update,
//!   the id of an unexpected header it created, and a [`RendezvousGet`] for a rendezvous put.
//! * Target commands ([`Lpe::append`], [`Lpe::search`], [`Lpe::search_and_delete`],
//!   [`Lpe::unlink`], [`Lpe::set_state`]) return a [`CommandOutcome`], or a [`CommandError`]
//!   the command queue turns into a COMMAND_FAILURE.
//! * Driver operations (`cxi_pte_*` in the cxi driver): [`Lpe::alloc`] / [`Lpe::configure`],
//!   [`Lpe::free`], [`Lpe::reset`], [`Lpe::status`] (`cxil_pte_status`),
//!   [`Lpe::transition_sm`] (`cxil_pte_transition_sm`), [`Lpe::invalidate_le`]
//!   (`cxil_invalidate_pte_le`), pool limits ([`Lpe::set_pool_limits`], [`Lpe::set_pe_limits`]).
//!
//! Facts follow cassini.md §2.2, §3.2, §4, §6 and the Portals 4 reference implementation
//! (`ptl_tgt.c`, `ptl_le.c`, `ptl_me.c`): priority list first, then overflow; first match wins;
//! match rule `((incoming ^ le) & !ignore) == 0` plus initiator match; permission checked after
//! the match (a refused request is dropped, never re-matched); NO_TRUNCATE entries that do not
//! fit the request's rlength are skipped (every operation, either list); otherwise `mlength = min(rlength, room)`; a locally managed entry keeps its
//! own offset; USE_ONCE and min_free auto-unlink; a PRIORITY append first consumes matching
//! unexpected headers; flow control disables the PtlTE. Counters follow `c_lpe_cntrs`.
//!
//! Matching is indexed (see `list`): entries are grouped by ignore mask and bucketed by masked
//! match bits, so a request costs a few hash lookups even with tens of thousands of entries,
//! while the result is exactly the first match of an in-order walk. Hash maps are only looked
//! up, never iterated, so outcomes are deterministic (same inputs, same outputs).
//!
//! Every linked LE and every unexpected header holds one entry of the PtlTE's pool
//! (`pe`, `le_pool`); the pool limits and our reading of how they combine are in `pool`.
//!
//! # Readings where the public sources are silent
//!
//! * **Events for dropped requests.** A request that matches nothing on a PtlTE without flow
//!   control is dropped with ENTRY_NOT_FOUND and an ENTRY_NOT_FOUND event of the request's type
//!   with buffer id 0 is posted (kfabric `kcxi_cq.c` handles exactly such events). A request
//!   refused by its matched entry (OP_VIOLATION, RESTRICTED_UNICAST, NO_SPACE) posts an error
//!   event carrying that entry's buffer id. Error events are never suppressed by the entry's
//!   event-disable flags; they are skipped only when the EQ is full. Flow-control drops post only
//!   the STATE_CHANGE event, and requests dropped while DISABLED post nothing.
//! * **EQ full** is an input (`IncomingRequest::eq_full`). It matters only when accepting the
//!   request would write an event (MATCH, communication or UNLINK event). It then triggers flow
//!   control (FC_EQ_FULL) or an ENTRY_NOT_FOUND drop without event. The STATE_CHANGE event uses
//!   the EQ's reserved flow-control slot and is always produced. A PtlTE without EQ produces no
//!   events at all.
//! * **Drop count.** Requests arriving while DISABLED are dropped with PT_DISABLED and counted
//!   (24 bits, wrapping). The request that *triggers* flow control is not counted by default:
//!   this is the Cassini 1 behaviour implied by libfabric starting its drop count at -1 on
//!   Cassini 1 and 0 on Cassini 2 (`LpeConfig::count_triggering_drop` selects the latter). A
//!   successful exit from DISABLED (SETSTATE or transition_sm) resets the count to 0
//!   (`cxi_pte_transition_sm` does so; libfabric resets its own count at the same point).
//! * **SETSTATE drop count 0xFFFFFF** always passes the check (libfabric's
//!   `CXIP_PTE_IGNORE_DROPS` for the first enable). A refused SETSTATE reports the unchanged
//!   state (DISABLED) with rc NO_MATCH. SETSTATE(DISABLED) needs no check and keeps the count.
//!   `transition_sm` compares exactly (as the driver does) and produces no event.
//! * **Event suppression**: EVENT_COMM_DISABLE and EVENT_SUCCESS_DISABLE suppress successful
//!   communication events (PUT/GET/ATOMIC/FETCH_ATOMIC, RENDEZVOUS) and the `*_OVERFLOW` events
//!   of an appended entry, never LINK or UNLINK; EVENT_LINK_DISABLE alone suppresses
//!   successful LINK events; EVENT_UNLINK_DISABLE alone suppresses the UNLINK event of an
//!   auto-unlink (a manual UNLINK always reports, as libfabric's cancel path relies on it). An auto-unlink sets
//!   `auto_unlinked` on the communication event whether or not the UNLINK event follows. MATCH
//!   events (PtlTE `en_event_match`) are never suppressed. SEARCH events always report.
//! * **Overflow**: an OVERFLOW match stores the data in the overflow entry and records an
//!   unexpected header (one pool entry) unless the entry has UNEXPECTED_HDR_DISABLE; the header
//!   is allocated before the overflow entry may auto-unlink. A Get or AMO matching an overflow
//!   entry stores nothing: its header waits on the UNEXPECTED list and the initiator gets
//!   DELAYED (counter `unexpected_get_amo`); a later append that matches it returns a
//!   [`DelayedOp`] for the caller to perform. Without a header (UNEXPECTED_HDR_DISABLE) it
//!   cannot wait and is handled as an unexpected-header allocation failure.
//! * **Append vs unexpected headers**: the appended entry is matched against headers with the
//!   same rule (bits, initiator, NO_TRUNCATE against the header's rlength and the entry's room,
//!   op permission — a header the entry does not permit is skipped). Each consumed header yields
//!   an `*_OVERFLOW` event (ptl_list OVERFLOW, start/mlength of the stored data, the header's
//!   rlength) and consumes `min(rlength, room)` from a locally managed entry. A persistent entry
//!   keeps consuming headers until none matches or it auto-unlinks; LINK comes after the
//!   overflow events. An entry that auto-unlinks while consuming is never linked (no LINK, no
//!   pool entry), and gets an UNLINK event unless EVENT_UNLINK_DISABLE.
//! * **restart_seq**: a failed append sets the list's append-disabled flag; while set, appends
//!   without RESTART_SEQ fail with NO_SPACE before anything else; RESTART_SEQ clears it first.
//!   A PTLTE_SW_MANAGED refusal does not set it.
//! * **Software-managed transition** (`en_sw_hw_st_chng`): on an unexpected-header allocation
//!   failure the NIC moves ENABLED -> SOFTWARE_MANAGED (SM_UNEXPECTED_FAIL) if a REQUEST buffer
//!   takes the request, else flow control applies; a PRIORITY append failing for lack of
//!   entries gets PTLTE_SW_MANAGED and the NIC moves to SOFTWARE_MANAGED (SM_APPEND_FAIL).
//! * **SOFTWARE_MANAGED**: entries left on the PRIORITY list still match first; other requests
//!   go to the first REQUEST entry that takes `wire_header_len` + payload (headers counted in
//!   mlength). A Get/AMO landing there returns DELAYED (software performs it).
//! * **Non-matching PtlTEs** use the head PRIORITY entry (then the head OVERFLOW entry),
//!   addressed by remote offset (or local offset). If the request does not fit and the PtlTE
//!   lacks `do_space_check` (or the entry is NO_TRUNCATE), it is dropped with NO_SPACE (counter
//!   `err_no_space_net`); otherwise it is truncated.
//! * **Initiator wildcards**: `CXI_MATCH_ID_ANY` matches all; otherwise the PID field matches if
//!   all ones (`pid_bits` wide) or equal; the endpoint field matches, on a logical PtlTE, if it
//!   is `C_RANK_ANY` or all ones or equal, on a physical one if its low 20 bits are `C_NID_ANY`
//!   or it is equal.
//! * **SEARCH / SEARCH_AND_DELETE** work on the UNEXPECTED list only; USE_ONCE limits a
//!   search-and-delete to the first header. The per-header events carry the command's buffer
//!   id. Deleted rendezvous or delayed headers start nothing: their ids are returned in
//!   `released_ules` and software takes over (as libfabric's onload does).
//! * **Rendezvous** (§6): a RENDEZVOUS_PUT matching a PRIORITY entry delivers its
//!   eager bytes, reports PUT (rendezvous=1, mlength = full matched length) and RENDEZVOUS
//!   (initiator = source DFA, `get_issued` = `rdzv_get_en`), and returns a [`RendezvousGet`] for
//!   the rest (the target block issues it). On the OVERFLOW list only the eager bytes are stored
//!   and the header remembers the rendezvous; the append that consumes it returns the
//!   `RendezvousGet`. With `use_offset_for_get` the put's remote offset is the source's (where
//!   the Get reads); the data lands at offset 0 of an entry that is not locally managed.
//! * Accepted but without effect: `clr_remote_offset`, `lossless`, `en_align_lm`,
//!   `en_match_on_vni`, the `signal_*` options (AMO unit), `unrestricted_*_ro` (passed through
//!   in [`Delivery`]), `current_addr` of SETSTATE, ETHERNET state (requests to it get
//!   PTLTE_NOT_FOUND).

mod counters;
mod event;
mod hw;
mod incoming;
mod le;
mod list;
mod pool;
mod table;
mod target;

pub use counters::LpeCounters;
pub use event::{
    CtUpdate, DelayedOp, MstCancel, RendezvousGet, StateChange, TargetEvent, rendezvous_dfa,
};
pub use hw::{
    CNTR_POOLS, CT_NONE, DROP_COUNT_IGNORE, DROP_COUNT_MASK, EQ_NONE, EventType, LeFlags,
    MATCH_ID_ANY, NID_ANY, NUM_PTLTES, PE_COUNT, PE_LE_MAX, PID_ANY, POOLS_PER_PE, PidBits,
    PtAllocOpts, PtlList, PtlteState, RANK_ANY, ReturnCode, ScReason, match_id, match_id_ep,
    match_id_pid,
};
pub use incoming::{Delivery, IncomingOutcome, IncomingRequest};
pub use le::{
    AtomicInfo, Le, LinkedLe, NetOp, RendezvousInfo, UnexpectedHeader, bits_match,
    initiator_matches,
};
pub use pool::{PeLimits, PoolLimits, PoolUsage};
pub use table::PtlteConfig;
pub use target::{CommandError, CommandOutcome};

use pool::LePools;
use table::{PtlTable, Ptlte};

/// Device-wide LPE settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LpeConfig {
    /// PID width of match ids (`pid_bits`, 6..9; default 9).
    pub pid_bits: PidBits,
    /// `min_free` scale: an entry's min_free is `min_free << min_free_shift` bytes (module
    /// parameter `min_free_shift`, 0..8; default 0, which libfabric requires).
    pub min_free_shift: u8,
    /// The NIC issues rendezvous Gets itself (`c_lpe_cfg_get_ctrl.get_en`; default true).
    pub rdzv_get_en: bool,
    /// Count the request that triggers flow control in the drop count (Cassini 2 behaviour);
    /// false (default) models Cassini 1, the device this emulator presents.
    pub count_triggering_drop: bool,
}

impl Default for LpeConfig {
    fn default() -> Self {
        Self {
            pid_bits: PidBits::DEFAULT,
            min_free_shift: 0,
            rdzv_get_en: true,
            count_triggering_drop: false,
        }
    }
}

/// Errors of driver-level operations on the LPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LpeError {
    /// `min_free_shift` above 8.
    #[error("invalid LPE configuration")]
    InvalidConfig,
    /// Index 0 or beyond the table.
    #[error("PtlTE index {0} out of range")]
    InvalidIndex(u16),
    /// The PtlTE is not allocated.
    #[error("PtlTE {0} not allocated")]
    NotAllocated(u16),
    /// The PtlTE is already allocated.
    #[error("PtlTE {0} already allocated")]
    InUse(u16),
    /// Every PtlTE is in use.
    #[error("no free PtlTE")]
    TableFull,
    /// The (PE, pool) pair does not exist.
    #[error("invalid LE pool {pool} of PE {pe}")]
    InvalidPool {
        /// Processing engine.
        pe: u8,
        /// Pool.
        pool: u8,
    },
    /// transition_sm on a PtlTE that is not DISABLED (-EINVAL in the driver).
    #[error("PtlTE {0} is not disabled")]
    NotDisabled(u16),
    /// transition_sm with a drop count that does not match (-EAGAIN in the driver).
    #[error("drop count mismatch: expected {expected}, PtlTE has {actual}")]
    DropCountMismatch {
        /// Count software passed.
        expected: u32,
        /// Count of the PtlTE.
        actual: u32,
    },
}

/// `cxil_pte_status` of a PtlTE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PteStatus {
    /// Drop count (24 bits).
    pub drop_count: u32,
    /// Current state.
    pub state: PtlteState,
    /// `num_reserved` of the PtlTE's pool.
    pub les_reserved: u32,
    /// Entries the pool holds now.
    pub les_allocated: u32,
    /// `max_alloc` of the pool.
    pub les_max: u32,
    /// `start_or_offset` of every unexpected header, in arrival order.
    pub ule_offsets: Vec<u64>,
    /// Number of unexpected headers.
    pub ule_count: usize,
}

/// The list processing engine.
#[derive(Clone, Debug)]
pub struct Lpe {
    table: PtlTable,
    pools: LePools,
    counters: LpeCounters,
    config: LpeConfig,
    next_ule_id: u64,
}

impl Default for Lpe {
    fn default() -> Self {
        Self {
            table: PtlTable::default(),
            pools: LePools::default(),
            counters: LpeCounters::default(),
            config: LpeConfig::default(),
            next_ule_id: 1,
        }
    }
}

impl Lpe {
    /// An LPE with no PtlTE and pools at their CSR reset limits.
    pub fn new(config: LpeConfig) -> Result<Self, LpeError> {
        if config.min_free_shift > 8 {
            return Err(LpeError::InvalidConfig);
        }
        Ok(Self {
            config,
            ..Self::default()
        })
    }

    /// Device-wide settings.
    pub fn config(&self) -> &LpeConfig {
        &self.config
    }

    /// Whether the NIC issues rendezvous Gets itself (`c_lpe_cfg_get_ctrl.get_en`): later
    /// RENDEZVOUS events and [`RendezvousGet`]s carry it as `get_issued`.
    pub fn set_rdzv_get_en(&mut self, en: bool) {
        self.config.rdzv_get_en = en;
    }

    /// Hardware counters.
    pub fn counters(&self) -> &LpeCounters {
        &self.counters
    }

    /// Portal-table slots backed by storage (0 at reset; see `emu_core::sparse`).
    pub fn allocated_slots(&self) -> usize {
        self.table.allocated_slots()
    }

    /// Sets the limits of pool `pool` of PE `pe` (`c_lpe_cfg_pe_le_pools`).
    pub fn set_pool_limits(
        &mut self,
        pe: u8,
        pool: u8,
        limits: PoolLimits,
    ) -> Result<(), LpeError> {
        if self.pools.set_pool_limits(pe, pool, limits) {
            Ok(())
        } else {
            Err(LpeError::InvalidPool { pe, pool })
        }
    }

    /// Sets the shared limits of PE `pe` (`c_lpe_cfg_pe_le_shared`).
    pub fn set_pe_limits(&mut self, pe: u8, limits: PeLimits) -> Result<(), LpeError> {
        if self.pools.set_pe_limits(pe, limits) {
            Ok(())
        } else {
            Err(LpeError::InvalidPool { pe, pool: 0 })
        }
    }

    /// Usage of pool `pool` of PE `pe`.
    pub fn pool_usage(&self, pe: u8, pool: u8) -> PoolUsage {
        self.pools.usage(pe, pool)
    }

    /// (shared, total) entries allocated on PE `pe`.
    pub fn pe_usage(&self, pe: u8) -> (u32, u32) {
        self.pools.pe_usage(pe)
    }

    /// Allocates the lowest free PtlTE (never 0) in state DISABLED.
    pub fn alloc(&mut self, config: PtlteConfig) -> Result<u16, LpeError> {
        let pt = self.table.first_free().ok_or(LpeError::TableFull)?;
        self.configure(pt, config)?;
        Ok(pt)
    }

    /// Configures free PtlTE `pt` (the driver writing `c_lpe_cfg_ptl_table[pt]`): state
    /// DISABLED, drop count 0, empty lists.
    pub fn configure(&mut self, pt: u16, config: PtlteConfig) -> Result<(), LpeError> {
        if !LePools::valid(config.pe, config.le_pool) {
            return Err(LpeError::InvalidPool {
                pe: config.pe,
                pool: config.le_pool,
            });
        }
        let slot = self.table.slot_mut(pt).ok_or(LpeError::InvalidIndex(pt))?;
        if slot.is_some() {
            return Err(LpeError::InUse(pt));
        }
        let mut config = config;
        config.cntr_pool &= (CNTR_POOLS - 1) as u8;
        *slot = Some(Ptlte::new(config));
        Ok(())
    }

    /// Frees PtlTE `pt`: every entry and unexpected header returns to the pool, no events.
    /// Returns the ids of the unexpected headers dropped.
    pub fn free(&mut self, pt: u16) -> Result<Vec<u64>, LpeError> {
        let released = self.reset(pt)?;
        if let Some(slot) = self.table.slot_mut(pt) {
            *slot = None;
        }
        Ok(released)
    }

    /// Empties every list of PtlTE `pt` (entries back to the pool, no events) and puts it back
    /// to DISABLED with drop count 0. Returns the ids of the unexpected headers dropped.
    pub fn reset(&mut self, pt: u16) -> Result<Vec<u64>, LpeError> {
        let pte = self.pte_mut(pt)?;
        let held = pte.entries_held();
        pte.priority.clear();
        pte.overflow.clear();
        pte.request.clear();
        let released = pte.unexpected.drain_ids();
        pte.state = PtlteState::Disabled;
        pte.drop_count = 0;
        let (pe, pool) = (pte.config.pe, pte.config.le_pool);
        self.pools
            .free(pe, pool, u32::try_from(held).unwrap_or(u32::MAX));
        Ok(released)
    }

    /// `cxil_pte_status`.
    pub fn status(&self, pt: u16) -> Result<PteStatus, LpeError> {
        let pte = self.pte(pt)?;
        let usage = self.pools.usage(pte.config.pe, pte.config.le_pool);
        let ule_offsets: Vec<u64> = pte
            .unexpected
            .iter()
            .map(UnexpectedHeader::start_or_offset)
            .collect();
        Ok(PteStatus {
            drop_count: pte.drop_count,
            state: pte.state,
            les_reserved: usage.reserved,
            les_allocated: usage.allocated,
            les_max: usage.max,
            ule_count: ule_offsets.len(),
            ule_offsets,
        })
    }

    /// Updates the options, event queue and counter pool of allocated PtlTE `pt` in place
    /// (the driver rewriting `c_lpe_cfg_ptl_table[pt]`). Lists, state, PE and LE pool stay.
    pub fn update_config(&mut self, pt: u16, config: PtlteConfig) -> Result<(), LpeError> {
        let pte = self.pte_mut(pt)?;
        pte.config.options = config.options;
        pte.config.eq = config.eq;
        pte.config.cntr_pool = config.cntr_pool & (CNTR_POOLS - 1) as u8;
        Ok(())
    }

    /// Sets the state of `pt` as the driver does by writing the portal table: no event, no
    /// drop-count check. Leaving DISABLED restarts the drop count at 0 (as a successful
    /// SETSTATE does).
    pub fn force_state(&mut self, pt: u16, state: PtlteState) -> Result<(), LpeError> {
        let pte = self.pte_mut(pt)?;
        if pte.state == PtlteState::Disabled && state != PtlteState::Disabled {
            pte.drop_count = 0;
        }
        pte.state = state;
        Ok(())
    }

    /// Drop count of PtlTE `pt` (None when not allocated).
    pub fn drop_count(&self, pt: u16) -> Option<u32> {
        self.table.get(pt).map(|p| p.drop_count)
    }

    /// Entries on `list` of PtlTE `pt` (unexpected headers for UNEXPECTED); 0 when not
    /// allocated.
    pub fn list_len(&self, pt: u16, list: PtlList) -> usize {
        self.table.get(pt).map_or(0, |p| match list {
            PtlList::Unexpected => p.unexpected.len(),
            l => p.list(l).map_or(0, |x| x.len()),
        })
    }

    /// `cxil_pte_transition_sm`: DISABLED -> SOFTWARE_MANAGED when `drop_count` equals the
    /// PtlTE's count exactly (which then restarts at 0). Already SOFTWARE_MANAGED is success.
    /// No event (the driver writes the table entry directly).
    pub fn transition_sm(&mut self, pt: u16, drop_count: u32) -> Result<(), LpeError> {
        let pte = self.pte_mut(pt)?;
        match pte.state {
            PtlteState::SoftwareManaged => Ok(()),
            PtlteState::Disabled if pte.drop_count == drop_count & DROP_COUNT_MASK => {
                pte.state = PtlteState::SoftwareManaged;
                pte.drop_count = 0;
                Ok(())
            }
            PtlteState::Disabled => Err(LpeError::DropCountMismatch {
                expected: drop_count,
                actual: pte.drop_count,
            }),
            _ => Err(LpeError::NotDisabled(pt)),
        }
    }

    /// `cxil_invalidate_pte_le`: the LPE keeps no transfer state, so this names the transfers
    /// the target DMA engine must complete with `MST_CANCELLED`.
    pub fn invalidate_le(
        &self,
        pt: u16,
        buffer_id: u16,
        list: PtlList,
    ) -> Result<MstCancel, LpeError> {
        self.pte(pt)?;
        Ok(MstCancel {
            ptlte_index: pt,
            list,
            buffer_id,
        })
    }

    /// State of PtlTE `pt` (None when not allocated).
    pub fn state(&self, pt: u16) -> Option<PtlteState> {
        self.table.get(pt).map(|p| p.state)
    }

    /// Configuration of PtlTE `pt`.
    pub fn ptlte_config(&self, pt: u16) -> Option<PtlteConfig> {
        self.table.get(pt).map(|p| p.config)
    }

    /// Whether `list` of PtlTE `pt` is append-disabled.
    pub fn append_disabled(&self, pt: u16, list: PtlList) -> bool {
        self.table
            .get(pt)
            .and_then(|p| p.list(list))
            .is_some_and(|l| l.append_disabled)
    }

    /// Entries of `list` (PRIORITY, OVERFLOW or REQUEST) of PtlTE `pt`, in list order.
    pub fn entries(&self, pt: u16, list: PtlList) -> Vec<LinkedLe> {
        self.table
            .get(pt)
            .and_then(|p| p.list(list))
            .map(|l| l.iter().map(|(_, e)| *e).collect())
            .unwrap_or_default()
    }

    /// Unexpected headers of PtlTE `pt`, in arrival order.
    pub fn unexpected_headers(&self, pt: u16) -> Vec<UnexpectedHeader> {
        self.table
            .get(pt)
            .map(|p| p.unexpected.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Where the unexpected headers of PtlTE `pt` sit in its PE's list-entry RAM
    /// (`c_lpe_sts_list_entries`, `LES_PER_PE` entries per PE): `(head, tail)` addresses, or
    /// `None` when it has none. The model keeps no RAM; it presents a canonical layout: per
    /// PE, the headers of its PtlTEs in PtlTE index order, each PtlTE's oldest first, at
    /// consecutive addresses from 0. The layout moves as headers come and go, like a snapshot
    /// of the hardware's own lists would.
    pub fn ule_ram_span(&self, pt: u16) -> Option<(u32, u32)> {
        let pte = self.table.get(pt)?;
        let n = pte.unexpected.len();
        if n == 0 {
            return None;
        }
        let before: usize = self
            .table
            .iter()
            .take_while(|(i, _)| *i < usize::from(pt))
            .filter(|(_, p)| p.config.pe == pte.config.pe)
            .map(|(_, p)| p.unexpected.len())
            .sum();
        let head = u32::try_from(before).ok()?;
        let tail = u32::try_from(before + n - 1).ok()?;
        (tail < PE_LE_MAX).then_some((head, tail))
    }

    /// The unexpected header at address `addr` of PE `pe`'s list-entry RAM in the layout of
    /// [`Lpe::ule_ram_span`], with the address of the next header of the same PtlTE (its own
    /// address for the tail).
    pub fn ule_ram_entry(&self, pe: u8, addr: u32) -> Option<(UnexpectedHeader, u32)> {
        let mut base = 0usize;
        let want = usize::try_from(addr).ok()?;
        for (_, p) in self.table.iter().filter(|(_, p)| p.config.pe == pe) {
            let n = p.unexpected.len();
            if want < base + n {
                let ule = *p.unexpected.iter().nth(want - base)?;
                let next = if want + 1 < base + n { addr + 1 } else { addr };
                return Some((ule, next));
            }
            base += n;
        }
        None
    }

    fn pte(&self, pt: u16) -> Result<&Ptlte, LpeError> {
        if !PtlTable::valid_index(pt) {
            return Err(LpeError::InvalidIndex(pt));
        }
        self.table.get(pt).ok_or(LpeError::NotAllocated(pt))
    }

    fn pte_mut(&mut self, pt: u16) -> Result<&mut Ptlte, LpeError> {
        if !PtlTable::valid_index(pt) {
            return Err(LpeError::InvalidIndex(pt));
        }
        self.table.get_mut(pt).ok_or(LpeError::NotAllocated(pt))
    }
}
