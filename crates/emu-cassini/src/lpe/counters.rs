//! LPE hardware counters (`c_lpe_cntrs`, csr_defs.json; names and meanings from the CSR
//! descriptions). Pooled counters have one slot per counter pool (`cntr_pool` of the PtlTE).

use super::event::TargetEvent;
use super::hw::{CNTR_POOLS, EventType};

/// The counters of `c_lpe_cntrs` the model maintains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LpeCounters {
    /// Network requests and commands completed successfully.
    pub success_cntr: u64,
    /// Network requests and commands completed unsuccessfully.
    pub fail_cntr: u64,
    /// Put requests received.
    pub put_cmds: u64,
    /// Rendezvous put requests received.
    pub rendezvous_put_cmds: u64,
    /// Get requests received.
    pub get_cmds: u64,
    /// Non-fetching AMO requests received.
    pub amo_cmds: u64,
    /// Fetching AMO requests received.
    pub famo_cmds: u64,
    /// PtlTE disabled because its event queue was full.
    pub err_pt_disabled_eq_full: u64,
    /// PtlTE disabled because the request list was empty.
    pub err_pt_disabled_req_empty: u64,
    /// PtlTE disabled because no unexpected header could be allocated.
    pub err_pt_disabled_cant_alloc_unexpected: u64,
    /// PtlTE disabled because nothing matched on the overflow list.
    pub err_pt_disabled_no_match_in_overflow: u64,
    /// Requests dropped because the op was not allowed by the matched entry.
    pub err_op_violation: u64,
    /// Unlink commands that found no entry.
    pub err_entry_not_found_unlink_failed: u64,
    /// Requests dropped (no flow control) because the event queue was full.
    pub err_entry_not_found_eq_full: u64,
    /// Requests dropped (no flow control) because the request list was empty.
    pub err_entry_not_found_req_empty: u64,
    /// Requests dropped (no flow control) because nothing matched on the overflow list.
    pub err_entry_not_found_no_match_in_overflow: u64,
    /// Requests dropped (no flow control) because no unexpected header could be allocated.
    pub err_entry_not_found_cant_alloc_unexpected: u64,
    /// Append commands rejected because no entry could be allocated.
    pub err_no_space_append: u64,
    /// Requests dropped because the entry lacked room on a non-space-checking PtlTE.
    pub err_no_space_net: u64,
    /// Searches that returned NO_MATCH.
    pub err_search_no_match: u64,
    /// SETSTATE commands refused.
    pub err_setstate_no_match: u64,
    /// Appends refused because the PtlTE is software managed.
    pub err_ptlte_sw_managed: u64,
    /// Restricted ops refused on locally managed entries.
    pub err_restricted_unicast: u64,
    /// PUT_OVERFLOW events sent.
    pub event_put_overflow: u64,
    /// GET_OVERFLOW events sent.
    pub event_get_overflow: u64,
    /// ATOMIC_OVERFLOW events sent.
    pub event_atomic_overflow: u64,
    /// FETCH_ATOMIC_OVERFLOW events sent.
    pub event_fetch_atomic_overflow: u64,
    /// SEARCH events sent.
    pub event_search: u64,
    /// RENDEZVOUS events sent.
    pub event_rendezvous: u64,
    /// LINK events sent.
    pub event_link: u64,
    /// UNLINK events sent.
    pub event_unlink: u64,
    /// STATE_CHANGE events sent.
    pub event_statechange: u64,
    /// Search commands received.
    pub search_cmds: u64,
    /// Search commands that matched.
    pub search_success: u64,
    /// Search commands that did not match.
    pub search_fail: u64,
    /// Search-and-delete commands received.
    pub search_delete_cmds: u64,
    /// Unexpected headers deleted by search-and-delete.
    pub search_delete_success: u64,
    /// Search-and-delete commands that deleted nothing.
    pub search_delete_fail: u64,
    /// Unlink commands received.
    pub unlink_cmds: u64,
    /// Unlink commands that found their entry.
    pub unlink_success: u64,
    /// Network requests received, per counter pool.
    pub net_match_requests: [u64; CNTR_POOLS],
    /// Network requests completed successfully, per counter pool.
    pub net_match_success: [u64; CNTR_POOLS],
    /// Requests matched to use-once entries.
    pub net_match_useonce: [u64; CNTR_POOLS],
    /// Requests matched to locally managed entries.
    pub net_match_local: [u64; CNTR_POOLS],
    /// Requests matched on the priority list.
    pub net_match_priority: [u64; CNTR_POOLS],
    /// Requests matched on the overflow list.
    pub net_match_overflow: [u64; CNTR_POOLS],
    /// Requests matched on the request list.
    pub net_match_request: [u64; CNTR_POOLS],
    /// Append commands received.
    pub append_cmds: [u64; CNTR_POOLS],
    /// Append commands completed successfully.
    pub append_success: [u64; CNTR_POOLS],
    /// SETSTATE commands received.
    pub setstate_cmds: [u64; CNTR_POOLS],
    /// SETSTATE commands that succeeded.
    pub setstate_success: [u64; CNTR_POOLS],
    /// Searches using NID_ANY.
    pub search_nid_any: [u64; CNTR_POOLS],
    /// Searches using PID_ANY.
    pub search_pid_any: [u64; CNTR_POOLS],
    /// Searches using RANK_ANY.
    pub search_rank_any: [u64; CNTR_POOLS],
    /// Rendezvous puts received.
    pub rndzv_puts: [u64; CNTR_POOLS],
    /// Rendezvous puts whose Get the NIC issued.
    pub rndzv_puts_offloaded: [u64; CNTR_POOLS],
    /// Requests truncated.
    pub num_truncated: [u64; CNTR_POOLS],
    /// Gets/AMOs that matched on the overflow or request list (returned DELAYED).
    pub unexpected_get_amo: [u64; CNTR_POOLS],
}

/// Counts the events an operation sends to the event engine (`event_*` counters).
pub(crate) fn count_events(c: &mut LpeCounters, events: &[TargetEvent]) {
    for ev in events {
        let slot = match ev.event_type {
            EventType::PutOverflow => &mut c.event_put_overflow,
            EventType::GetOverflow => &mut c.event_get_overflow,
            EventType::AtomicOverflow => &mut c.event_atomic_overflow,
            EventType::FetchAtomicOverflow => &mut c.event_fetch_atomic_overflow,
            EventType::Search => &mut c.event_search,
            EventType::Rendezvous => &mut c.event_rendezvous,
            EventType::Link => &mut c.event_link,
            EventType::Unlink => &mut c.event_unlink,
            EventType::StateChange => &mut c.event_statechange,
            _ => continue,
        };
        *slot = slot.wrapping_add(1);
    }
}

/// Adds one to a pooled counter slot.
pub(crate) fn bump(c: &mut [u64; CNTR_POOLS], pool: u8) {
    if let Some(slot) = c.get_mut(usize::from(pool)) {
        *slot = slot.wrapping_add(1);
    }
}
