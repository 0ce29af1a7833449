//! What the LPE asks its caller to do: target events to post, counting events to bump,
//! rendezvous Gets to issue, delayed Gets/AMOs to perform.

use super::hw::{EventType, PidBits, PtlList, PtlteState, ReturnCode, ScReason};
use super::le::{AtomicInfo, NetOp};

/// State-change fields carried in the `initiator` word of a STATE_CHANGE event
/// (`c_state_chg_fields`: ptlte_state@0:3, sc_reason@8:4, sc_nic_auto@16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateChange {
    /// State reported (the new state; on a refused SETSTATE the unchanged current state).
    pub ptlte_state: PtlteState,
    /// Why the NIC changed state itself; `None` (encoded 0) for software-requested changes.
    pub sc_reason: Option<ScReason>,
    /// Set when the NIC changed the state on its own (flow control, SW-managed transition).
    pub sc_nic_auto: bool,
}

/// A target event, with the fields of `c_event_target_long` (cassini.md §3.2). The event engine
/// encodes it in the short (32 B) or long (64 B) format; `long_format` reflects the PtlTE's
/// `use_long_event` (an EQ may still force long events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetEvent {
    /// Event type.
    pub event_type: EventType,
    /// Return code.
    pub return_code: ReturnCode,
    /// Event queue to post to (the PtlTE's `eq_handle`).
    pub eq: u16,
    /// PtlTE index.
    pub ptlte_index: u16,
    /// PtlTE option `use_long_event`.
    pub long_format: bool,
    /// Header data of the request.
    pub header_data: u64,
    /// Initiator match id; for RENDEZVOUS events the source DFA (see [`rendezvous_dfa`]).
    pub initiator: u32,
    /// For STATE_CHANGE: the fields that replace `initiator`.
    pub state_change: Option<StateChange>,
    /// List the event refers to.
    pub ptl_list: PtlList,
    /// Part of a rendezvous transfer.
    pub rendezvous: bool,
    /// RENDEZVOUS: the NIC issued the Get itself.
    pub get_issued: bool,
    /// The entry was unlinked by this operation (use_once or min_free).
    pub auto_unlinked: bool,
    /// Match bits of the request (or of the entry, for LINK/UNLINK).
    pub match_bits: u64,
    /// Buffer id of the entry (0 when no entry was involved).
    pub buffer_id: u16,
    /// VNI of the request.
    pub vni: u16,
    /// Bytes delivered (after truncation).
    pub mlength: u64,
    /// Bytes requested.
    pub rlength: u64,
    /// Remote offset of the request.
    pub remote_offset: u64,
    /// IOVA where the data landed (entry start + offset).
    pub start: u64,
    /// Atomic descriptor of the request.
    pub atomic: AtomicInfo,
    /// Rendezvous id of the request.
    pub rendezvous_id: u8,
}

impl TargetEvent {
    /// An event with every field zero but the given header fields.
    pub(crate) fn new(
        event_type: EventType,
        return_code: ReturnCode,
        eq: u16,
        ptlte_index: u16,
        long_format: bool,
    ) -> Self {
        Self {
            event_type,
            return_code,
            eq,
            ptlte_index,
            long_format,
            header_data: 0,
            initiator: 0,
            state_change: None,
            ptl_list: PtlList::Priority,
            rendezvous: false,
            get_issued: false,
            auto_unlinked: false,
            match_bits: 0,
            buffer_id: 0,
            vni: 0,
            mlength: 0,
            rlength: 0,
            remote_offset: 0,
            start: 0,
            atomic: AtomicInfo::default(),
            rendezvous_id: 0,
        }
    }
}

/// Source DFA of a rendezvous put as reported in a RENDEZVOUS event's `initiator` word:
/// nid@12:20 and endpoint_defined@0:12 = the source PID (PtlTE index 0 of its granule;
/// `cxi_dfa_to_init` recovers the match id from it).
pub fn rendezvous_dfa(source_nid: u32, pid: u32, pid_bits: PidBits) -> u32 {
    ((source_nid & 0xF_FFFF) << 12) | (pid & pid_bits.pid_mask())
}

/// Increment of a counting event (`ct`) requested by the `EVENT_CT_*` flags of an entry.
/// On a data-movement failure the caller adds 1 to the CT's failure count instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtUpdate {
    /// The counting event.
    pub ct: u16,
    /// Amount to add to the success count: 1, or mlength with `EVENT_CT_BYTES`.
    pub success_increment: u64,
}

/// A Get the NIC issues to pull the rest of a rendezvous put (cassini.md §6). The caller (the
/// rendezvous engine) builds the DFA from `source_nid`, `source_pid` and the device's
/// `rdzv_get_idx`, and the match bits from `rendezvous_id` and `put_match_bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RendezvousGet {
    /// PtlTE the put matched on.
    pub ptlte_index: u16,
    /// Buffer id of the receiving entry.
    pub buffer_id: u16,
    /// Unexpected header that carried the put, when completed by an append.
    pub ule_id: Option<u64>,
    /// Source NID of the put.
    pub source_nid: u32,
    /// Source PID (from the put's initiator match id).
    pub source_pid: u32,
    /// The put's initiator match id.
    pub initiator: u32,
    /// The put's rendezvous id.
    pub rendezvous_id: u8,
    /// The put's match bits.
    pub put_match_bits: u64,
    /// Remote offset to read from (the put's remote offset, with `use_offset_for_get`).
    pub remote_offset: u64,
    /// The put's `use_offset_for_get`.
    pub use_offset_for_get: bool,
    /// Bytes to pull: matched length minus the eager bytes already delivered.
    pub length: u64,
    /// Offset in the source's rendezvous LE to read from: the put's remote offset (with
    /// `use_offset_for_get`, else 0) plus the eager bytes already delivered.
    pub source_offset: u64,
    /// Where the pulled bytes go.
    pub dest_start: u64,
    /// LAC of `dest_start`.
    pub dest_lac: u8,
    /// Whether the NIC issues the Get itself (`rdzv_get_en`); else software must.
    pub get_issued: bool,
}

/// A Get or atomic that matched an overflow entry (returned `DELAYED`) and is now matched by an
/// appended priority entry: the caller performs it against `start` and sends the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayedOp {
    /// The unexpected header (its id was reported when the request arrived).
    pub ule_id: u64,
    /// Operation.
    pub op: NetOp,
    /// Initiator match id.
    pub initiator: u32,
    /// PtlTE index.
    pub ptlte_index: u16,
    /// Buffer id of the matched entry.
    pub buffer_id: u16,
    /// Address of the operand in the entry.
    pub start: u64,
    /// LAC of `start`.
    pub lac: u8,
    /// Bytes to read / operate on (after truncation).
    pub mlength: u64,
    /// Bytes requested.
    pub rlength: u64,
}

/// Target transfers to cancel after `cxil_invalidate_pte_le`: every in-flight transfer into
/// (`ptlte_index`, `list`, `buffer_id`) must complete with `MST_CANCELLED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MstCancel {
    /// PtlTE index.
    pub ptlte_index: u16,
    /// List of the entry.
    pub list: PtlList,
    /// Buffer id of the entry.
    pub buffer_id: u16,
}

#[cfg(test)]
mod tests {
    use super::*;
    use firmware_spec::cassini::dfa::{dfa_to_init, match_id};

    #[test]
    fn rendezvous_dfa_converts_back_to_the_initiator() {
        for bits in 6..=9 {
            let pid_bits = PidBits::new(bits).unwrap();
            let dfa = rendezvous_dfa(0xABCDE, 37, pid_bits);
            assert_eq!(dfa_to_init(dfa, pid_bits), match_id(pid_bits, 37, 0xABCDE));
        }
    }
}
