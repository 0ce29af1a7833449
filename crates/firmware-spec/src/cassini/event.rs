//! Cassini events as written into an event queue ring (`cassini_user_defs.h`
//! `c_event_size`, `c_event_type`, `c_event_*` structs, `c_state_chg_fields`,
//! `c_pct_event_type`; `cxi_prov_hw.h` `union c_event`, `cxi_eq_peek_event`,
//! `cxi_event_rc`; cassini.md §3).
//!
//! Every event is 16, 32 or 64 B and carries, at the same place in every format,
//! `event_size@112:2` (0 = slot empty; bytes = 8 << size), `event_type@114:5`, and its
//! `return_code` in the low 6 bits of its **last** byte. Software reads an event only when
//! `event_size != 0` and `return_code != C_RC_NO_EVENT`, which guards against a partly
//! written event ([`event_header`]). `C_EVENT_NULL_EVENT` entries are padding.

use super::amo::{AmoOp, AmoType, CswapOp};
use super::cmd::CmdHeader;
use super::layout::{FormatError, Layout, c_enum, layout, need};
use super::le::{PtlList, PtlteState, ScReason};
use super::rc::ReturnCode;
use crate::bits::{get_bits, set_bits};

c_enum! {
    /// `enum c_event_size`: `event_size@112:2`.
    pub enum EventSize("c_event_size") {
        /// `C_EVENT_SIZE_NO_EVENT`: empty slot.
        NoEvent = 0 => "NO_EVENT",
        /// `C_EVENT_SIZE_16_BYTE`.
        B16 = 1 => "16_BYTE",
        /// `C_EVENT_SIZE_32_BYTE`.
        B32 = 2 => "32_BYTE",
        /// `C_EVENT_SIZE_64_BYTE`.
        B64 = 3 => "64_BYTE",
    }
}

impl EventSize {
    /// Event bytes: `8 << event_size` (16, 32, 64); 0 for `NoEvent`.
    pub const fn bytes(self) -> usize {
        match self {
            EventSize::NoEvent => 0,
            s => 8 << (s as usize),
        }
    }
}

c_enum! {
    /// `enum c_event_type`: `event_type@114:5` (22..27 unused).
    pub enum EventType("c_event_type") {
        /// `C_EVENT_PUT` (target).
        Put = 0 => "PUT",
        /// `C_EVENT_GET` (target; also at the source LE of a rendezvous).
        Get = 1 => "GET",
        /// `C_EVENT_ATOMIC` (target).
        Atomic = 2 => "ATOMIC",
        /// `C_EVENT_FETCH_ATOMIC` (target).
        FetchAtomic = 3 => "FETCH_ATOMIC",
        /// `C_EVENT_PUT_OVERFLOW` (target).
        PutOverflow = 4 => "PUT_OVERFLOW",
        /// `C_EVENT_GET_OVERFLOW` (target).
        GetOverflow = 5 => "GET_OVERFLOW",
        /// `C_EVENT_ATOMIC_OVERFLOW` (target).
        AtomicOverflow = 6 => "ATOMIC_OVERFLOW",
        /// `C_EVENT_FETCH_ATOMIC_OVERFLOW` (target).
        FetchAtomicOverflow = 7 => "FETCH_ATOMIC_OVERFLOW",
        /// `C_EVENT_SEND` (initiator).
        Send = 8 => "SEND",
        /// `C_EVENT_ACK` (initiator).
        Ack = 9 => "ACK",
        /// `C_EVENT_REPLY` (initiator).
        Reply = 10 => "REPLY",
        /// `C_EVENT_LINK` (target).
        Link = 11 => "LINK",
        /// `C_EVENT_SEARCH` (target).
        Search = 12 => "SEARCH",
        /// `C_EVENT_STATE_CHANGE` (target; initiator word = `c_state_chg_fields`).
        StateChange = 13 => "STATE_CHANGE",
        /// `C_EVENT_UNLINK` (target).
        Unlink = 14 => "UNLINK",
        /// `C_EVENT_RENDEZVOUS` (target; initiator word = source DFA).
        Rendezvous = 15 => "RENDEZVOUS",
        /// `C_EVENT_ETHERNET`.
        Ethernet = 16 => "ETHERNET",
        /// `C_EVENT_COMMAND_FAILURE`.
        CommandFailure = 17 => "COMMAND_FAILURE",
        /// `C_EVENT_TRIGGERED_OP`.
        TriggeredOp = 18 => "TRIGGERED_OP",
        /// `C_EVENT_ETHERNET_FGFC`.
        EthernetFgfc = 19 => "ETHERNET_FGFC",
        /// `C_EVENT_PCT`: retry-handler events.
        Pct = 20 => "PCT",
        /// `C_EVENT_MATCH` (target).
        Match = 21 => "MATCH",
        /// `C_EVENT_ERROR`.
        Error = 28 => "ERROR",
        /// `C_EVENT_TIMESTAMP`.
        Timestamp = 29 => "TIMESTAMP",
        /// `C_EVENT_EQ_SWITCH`.
        EqSwitch = 30 => "EQ_SWITCH",
        /// `C_EVENT_NULL_EVENT`: padding, skip.
        NullEvent = 31 => "NULL_EVENT",
    }
}

impl EventType {
    /// Initiator events (SEND, ACK, REPLY): `c_event_initiator_short/long`.
    pub const fn is_initiator(self) -> bool {
        matches!(self, EventType::Send | EventType::Ack | EventType::Reply)
    }

    /// Target events: `c_event_target_short/long` (as `cxi_event_rc` groups them).
    pub const fn is_target(self) -> bool {
        matches!(
            self,
            EventType::Put
                | EventType::Get
                | EventType::Atomic
                | EventType::FetchAtomic
                | EventType::PutOverflow
                | EventType::GetOverflow
                | EventType::AtomicOverflow
                | EventType::FetchAtomicOverflow
                | EventType::Link
                | EventType::Search
                | EventType::StateChange
                | EventType::Unlink
                | EventType::Rendezvous
                | EventType::Match
        )
    }
}

c_enum! {
    /// `enum c_pct_event_type`: `pct_event_type` of a PCT event (3 bits).
    pub enum PctEventType("c_pct_event_type") {
        /// `C_PCT_REQUEST_NACK`.
        RequestNack = 0 => "REQUEST_NACK",
        /// `C_PCT_REQUEST_TIMEOUT`.
        RequestTimeout = 1 => "REQUEST_TIMEOUT",
        /// `C_PCT_SCT_TIMEOUT`.
        SctTimeout = 2 => "SCT_TIMEOUT",
        /// `C_PCT_TCT_TIMEOUT`.
        TctTimeout = 3 => "TCT_TIMEOUT",
        /// `C_PCT_ACCEL_CLOSE_COMPLETE`.
        AccelCloseComplete = 4 => "ACCEL_CLOSE_COMPLETE",
        /// `C_PCT_RETRY_COMPLETE`.
        RetryComplete = 5 => "RETRY_COMPLETE",
    }
}

/// Bit offset of `event_size` in every event.
pub const EVENT_SIZE_BIT: usize = 112;
/// Bit offset of `event_type` in every event.
pub const EVENT_TYPE_BIT: usize = 114;

layout! {
    /// `struct c_event_initiator_short` (16 B): SEND / ACK / REPLY.
    pub struct InitiatorShort("c_event_initiator_short", 16) {
        /// `user_ptr` of the command (or `cxi_rdzv_user_ptr` for a HW rendezvous REPLY).
        user_ptr[0:64]: u64,
        /// `mlength`: bytes delivered.
        mlength[64:32]: u32,
        /// `ptl_list` the operation matched on (ACK).
        ptl_list[96:2]: PtlList,
        /// `rendezvous`.
        rendezvous[100:1]: bool,
        /// `retry`.
        retry[101:1]: bool,
        /// `tgt_error`.
        tgt_error[102:1]: bool,
        /// `event_type`.
        event_type[114:5]: EventType,
        /// `return_code`.
        return_code[120:6]: ReturnCode,
    }
    consts { event_size[112:2] = EventSize::B16 as u8 }
    derived {}
}

layout! {
    /// `struct c_event_initiator_long` (32 B): initiator event with a timestamp
    /// (`CXI_EQ_INIT_LONG`).
    pub struct InitiatorLong("c_event_initiator_long", 32) {
        /// `user_ptr`.
        user_ptr[0:64]: u64,
        /// `mlength`.
        mlength[64:32]: u32,
        /// `ptl_list`.
        ptl_list[96:2]: PtlList,
        /// `rendezvous`.
        rendezvous[100:1]: bool,
        /// `retry`.
        retry[101:1]: bool,
        /// `tgt_error`.
        tgt_error[102:1]: bool,
        /// `event_type`.
        event_type[114:5]: EventType,
        /// `timestamp_ns` (30 bits).
        timestamp_ns[128:30]: u32,
        /// `timestamp_sec` (48 bits).
        timestamp_sec[192:48]: u64,
        /// `return_code`.
        return_code[248:6]: ReturnCode,
    }
    consts { event_size[112:2] = EventSize::B32 as u8 }
    derived {}
}

layout! {
    /// `struct c_event_target_short` (32 B).
    pub struct TargetShort("c_event_target_short", 32) {
        /// `header_data`.
        header_data[0:64]: u64,
        /// `initiator`: match id, source DFA (RENDEZVOUS) or `c_state_chg_fields`
        /// (STATE_CHANGE, see [`StateChangeFields`]).
        initiator[64:32]: u32,
        /// `ptlte_index`.
        ptlte_index[96:11]: u16,
        /// `event_type`.
        event_type[114:5]: EventType,
        /// `ptl_list`.
        ptl_list[120:2]: PtlList,
        /// `auto_unlinked`.
        auto_unlinked[124:1]: bool,
        /// `match_bits`.
        match_bits[128:64]: u64,
        /// `buffer_id` of the LE.
        buffer_id[192:16]: u16,
        /// `vni`.
        vni[208:16]: u16,
        /// `length` (20 bits).
        length[224:20]: u32,
        /// `return_code`.
        return_code[248:6]: ReturnCode,
    }
    consts { event_size[112:2] = EventSize::B32 as u8 }
    derived {}
}

layout! {
    /// `struct c_event_target_long` (64 B): PtlTE `use_long_event` or `CXI_EQ_TGT_LONG`.
    pub struct TargetLong("c_event_target_long", 64) {
        /// `header_data`.
        header_data[0:64]: u64,
        /// `initiator` (union `c_tgt_ol_initiator`): match id, source DFA (RENDEZVOUS) or
        /// `c_state_chg_fields` (STATE_CHANGE, see [`StateChangeFields`]).
        initiator[64:32]: u32,
        /// `ptlte_index`.
        ptlte_index[96:11]: u16,
        /// `event_type`.
        event_type[114:5]: EventType,
        /// `ptl_list`.
        ptl_list[120:2]: PtlList,
        /// `rendezvous`.
        rendezvous[122:1]: bool,
        /// `get_issued`: hardware issued the rendezvous Get.
        get_issued[123:1]: bool,
        /// `auto_unlinked`.
        auto_unlinked[124:1]: bool,
        /// `match_bits`.
        match_bits[128:64]: u64,
        /// `buffer_id`.
        buffer_id[192:16]: u16,
        /// `vni`.
        vni[208:16]: u16,
        /// `timestamp_ns` (30 bits).
        timestamp_ns[224:30]: u32,
        /// `timestamp_sec_low` (2 bits).
        timestamp_sec_low[254:2]: u8,
        /// `mlength`: bytes delivered.
        mlength[256:32]: u32,
        /// `rlength`: bytes requested.
        rlength[288:32]: u32,
        /// `remote_offset` (56 bits).
        remote_offset[320:56]: u64,
        /// `start`: IOVA where the data landed (57 bits).
        start[384:57]: u64,
        /// `lpe_stat_1`.
        lpe_stat_1[448:16]: u16,
        /// `lpe_stat_2`.
        lpe_stat_2[464:16]: u16,
        /// `atomic_type`.
        atomic_type[480:4]: AmoType,
        /// `atomic_op`.
        atomic_op[484:4]: AmoOp,
        /// `cswap_op`.
        cswap_op[488:3]: CswapOp,
        /// `rendezvous_id`.
        rendezvous_id[496:8]: u8,
        /// `return_code`.
        return_code[504:6]: ReturnCode,
    }
    consts { event_size[112:2] = EventSize::B64 as u8 }
    derived {}
}

layout! {
    /// `struct c_state_chg_fields`: the `initiator` word of a STATE_CHANGE target event.
    pub struct StateChangeFields("c_state_chg_fields", 4) {
        /// `ptlte_state`: the new state.
        ptlte_state[0:3]: PtlteState,
        /// `sc_reason` (valid when `sc_nic_auto`).
        sc_reason[8:4]: ScReason,
        /// `sc_nic_auto`: hardware-initiated.
        sc_nic_auto[16:1]: bool,
    }
    consts {}
    derived {}
}

impl StateChangeFields {
    /// Decode from an event's `initiator` word.
    pub fn from_initiator(initiator: u32) -> Result<Self, FormatError> {
        Self::decode(&initiator.to_le_bytes())
    }

    /// Encode as an event's `initiator` word.
    pub fn to_initiator(&self) -> u32 {
        u32::from_le_bytes(self.encode())
    }
}

impl TargetShort {
    /// The state-change fields, if this is a STATE_CHANGE event.
    pub fn state_change(&self) -> Option<Result<StateChangeFields, FormatError>> {
        (self.event_type == EventType::StateChange)
            .then(|| StateChangeFields::from_initiator(self.initiator))
    }
}

impl TargetLong {
    /// The state-change fields, if this is a STATE_CHANGE event.
    pub fn state_change(&self) -> Option<Result<StateChangeFields, FormatError>> {
        (self.event_type == EventType::StateChange)
            .then(|| StateChangeFields::from_initiator(self.initiator))
    }
}

layout! {
    /// `struct c_event_cmd_fail` (16 B): COMMAND_FAILURE, posted to the CQ's EQ.
    pub struct CommandFailure("c_event_cmd_fail", 16) {
        /// `cq_id` (10 bits, per queue type).
        cq_id[0:10]: u16,
        /// `is_target`: the CQ is a target CQ.
        is_target[10:1]: bool,
        /// `fail_loc`.
        fail_loc[16:16]: u16,
        /// `fail_command`: the failed command's `c_cmd` byte.
        fail_command[32:8]: CmdHeader,
        /// `return_code`.
        return_code[120:6]: ReturnCode,
    }
    consts {
        event_size[112:2] = EventSize::B16 as u8,
        event_type[114:5] = EventType::CommandFailure as u8,
    }
    derived {}
}

layout! {
    /// `struct c_event_trig_op_short` (16 B): TRIGGERED_OP (CT_TRIG_EVENT fired).
    pub struct TrigOpShort("c_event_trig_op_short", 16) {
        /// `threshold` (48 bits).
        threshold[0:48]: u64,
        /// `ct_handle` (11 bits).
        ct_handle[64:11]: u16,
        /// `return_code`.
        return_code[120:6]: ReturnCode,
    }
    consts {
        event_size[112:2] = EventSize::B16 as u8,
        event_type[114:5] = EventType::TriggeredOp as u8,
    }
    derived {}
}

layout! {
    /// `struct c_event_trig_op_long` (32 B): TRIGGERED_OP with a timestamp.
    pub struct TrigOpLong("c_event_trig_op_long", 32) {
        /// `threshold` (48 bits).
        threshold[0:48]: u64,
        /// `ct_handle` (11 bits).
        ct_handle[64:11]: u16,
        /// `timestamp_ns` (30 bits).
        timestamp_ns[128:30]: u32,
        /// `timestamp_sec` (48 bits).
        timestamp_sec[192:48]: u64,
        /// `return_code`.
        return_code[248:6]: ReturnCode,
    }
    consts {
        event_size[112:2] = EventSize::B32 as u8,
        event_type[114:5] = EventType::TriggeredOp as u8,
    }
    derived {}
}

layout! {
    /// `struct c_event_target_enet` (32 B): ETHERNET receive.
    pub struct EnetEvent("c_event_target_enet", 32) {
        /// `checksum`.
        checksum[0:16]: u16,
        /// `pkt_cnt` (46 bits).
        pkt_cnt[16:46]: u64,
        /// `seg_cnt` (2 bits).
        seg_cnt[62:2]: u8,
        /// `rss_hash_value`.
        rss_hash_value[64:32]: u32,
        /// `ptlte_index`.
        ptlte_index[96:11]: u16,
        /// `ptl_list`.
        ptl_list[120:2]: PtlList,
        /// `auto_unlinked`.
        auto_unlinked[124:1]: bool,
        /// `start` (57 bits).
        start[128:57]: u64,
        /// `buffer_id`.
        buffer_id[192:16]: u16,
        /// `rss_hash_type` (5 bits, `c_rss_hash_type`).
        rss_hash_type[208:5]: u8,
        /// `more_frags`.
        more_frags[216:1]: bool,
        /// `is_roce`.
        is_roce[218:1]: bool,
        /// `roce_icrc_ok`.
        roce_icrc_ok[219:1]: bool,
        /// `timestamp`.
        timestamp[220:1]: bool,
        /// `fmt`.
        fmt[221:1]: bool,
        /// `parser_err`.
        parser_err[222:1]: bool,
        /// `length`.
        length[224:16]: u16,
        /// `return_code`.
        return_code[248:6]: ReturnCode,
    }
    consts {
        event_size[112:2] = EventSize::B32 as u8,
        event_type[114:5] = EventType::Ethernet as u8,
    }
    derived {}
}

layout! {
    /// `struct c_event_enet_fgfc` (16 B): ETHERNET_FGFC.
    pub struct EnetFgfc("c_event_enet_fgfc", 16) {
        /// `identifier`.
        identifier[0:32]: u32,
        /// `fgfc_type` (2 bits).
        fgfc_type[64:2]: u8,
        /// `xoff`.
        xoff[72:1]: bool,
        /// `srcip_tag` (2 bits).
        srcip_tag[80:2]: u8,
        /// `credits`.
        credits[96:16]: u16,
        /// `return_code`.
        return_code[120:6]: ReturnCode,
    }
    consts {
        event_size[112:2] = EventSize::B16 as u8,
        event_type[114:5] = EventType::EthernetFgfc as u8,
    }
    derived {}
}

layout! {
    /// `struct c_event_pct` (16 B): retry-handler (PCT) event.
    pub struct PctEvent("c_event_pct", 16) {
        /// `dfa`.
        dfa[0:32]: u32,
        /// `seq_num` (12 bits).
        seq_num[32:12]: u16,
        /// `pct_event_type`.
        pct_event_type[64:3]: PctEventType,
        /// `spt_idx` (11 bits).
        spt_idx[80:11]: u16,
        /// `conn_idx` (`union c_conn_idx`: 13-bit `tct_idx` or 12-bit `sct_idx`).
        conn_idx[96:13]: u16,
        /// `return_code`.
        return_code[120:6]: ReturnCode,
    }
    consts {
        event_size[112:2] = EventSize::B16 as u8,
        event_type[114:5] = EventType::Pct as u8,
    }
    derived {}
}

layout! {
    /// `struct c_event_timestamp` (16 B): periodic TIMESTAMP (`CXI_EQ_TIMESTAMP_EVENTS`).
    pub struct TimestampEvent("c_event_timestamp", 16) {
        /// `timestamp_ns` (30 bits).
        timestamp_ns[0:30]: u32,
        /// `timestamp_sec` (48 bits).
        timestamp_sec[64:48]: u64,
        /// `return_code`.
        return_code[120:6]: ReturnCode,
    }
    consts {
        event_size[112:2] = EventSize::B16 as u8,
        event_type[114:5] = EventType::Timestamp as u8,
    }
    derived {}
}

layout! {
    /// `struct c_event_eq_switch` (16 B): EQ_SWITCH, the last event in the old buffer of a
    /// resized EQ.
    pub struct EqSwitchEvent("c_event_eq_switch", 16) {
        /// `return_code`.
        return_code[120:6]: ReturnCode,
    }
    consts {
        event_size[112:2] = EventSize::B16 as u8,
        event_type[114:5] = EventType::EqSwitch as u8,
    }
    derived {}
}

/// The fields every event has: `event_size`, `event_type` and the `return_code` in the low
/// 6 bits of the last byte. Also the whole content of ERROR and NULL_EVENT entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventHeader {
    /// `event_size` (never `NoEvent` in a decoded header).
    pub size: EventSize,
    /// `event_type`.
    pub event_type: EventType,
    /// `return_code`.
    pub return_code: ReturnCode,
}

impl EventHeader {
    /// Encode a header-only event (ERROR / NULL_EVENT padding): `size.bytes()` bytes with
    /// only the header and return code set.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.size.bytes()];
        self.write_to(&mut v);
        v
    }

    fn write_to(&self, dst: &mut [u8]) {
        set_bits(dst, EVENT_SIZE_BIT, 2, self.size as u64);
        set_bits(dst, EVENT_TYPE_BIT, 5, self.event_type as u64);
        if let Some(last) = self
            .size
            .bytes()
            .checked_sub(1)
            .and_then(|i| dst.get_mut(i))
        {
            *last = (*last & !0x3F) | (self.return_code as u8 & 0x3F);
        }
    }
}

/// Read the header of the event at `bytes[0]`: `Ok(None)` for an unwritten or partly written
/// slot (`event_size` 0, or `return_code` `C_RC_NO_EVENT` in the last byte), an error for a
/// slice too short for the event's size or an unknown type / return code.
pub fn peek_event(bytes: &[u8]) -> Result<Option<EventHeader>, FormatError> {
    need("c_event", bytes, 16)?;
    let size = match get_bits(bytes, EVENT_SIZE_BIT, 2) {
        0 => return Ok(None),
        1 => EventSize::B16,
        2 => EventSize::B32,
        _ => EventSize::B64,
    };
    need("c_event", bytes, size.bytes())?;
    let rc = bytes[size.bytes() - 1] & 0x3F;
    if rc == ReturnCode::NoEvent as u8 {
        return Ok(None);
    }
    Ok(Some(EventHeader {
        size,
        event_type: EventType::try_from(get_bits(bytes, EVENT_TYPE_BIT, 5) as u8)?,
        return_code: ReturnCode::try_from(rc)?,
    }))
}

/// The `(size, type, return code)` of a complete event at `bytes[0]`, or `None` if the slot
/// holds no complete, well-formed event (`event_size` 0, return code `C_RC_NO_EVENT`, slice
/// too short, unknown type or code). Use [`peek_event`] to tell those apart.
pub fn event_header(bytes: &[u8]) -> Option<(EventSize, EventType, ReturnCode)> {
    peek_event(bytes)
        .ok()
        .flatten()
        .map(|h| (h.size, h.event_type, h.return_code))
}

/// Any event, decoded by (`event_size`, `event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// SEND / ACK / REPLY, 16 B.
    InitiatorShort(InitiatorShort),
    /// SEND / ACK / REPLY, 32 B.
    InitiatorLong(InitiatorLong),
    /// Target event, 32 B.
    TargetShort(TargetShort),
    /// Target event, 64 B.
    TargetLong(TargetLong),
    /// ETHERNET, 32 B.
    Ethernet(EnetEvent),
    /// COMMAND_FAILURE, 16 B.
    CommandFailure(CommandFailure),
    /// TRIGGERED_OP, 16 B.
    TrigOpShort(TrigOpShort),
    /// TRIGGERED_OP, 32 B.
    TrigOpLong(TrigOpLong),
    /// ETHERNET_FGFC, 16 B.
    EthernetFgfc(EnetFgfc),
    /// PCT, 16 B.
    Pct(PctEvent),
    /// TIMESTAMP, 16 B.
    Timestamp(TimestampEvent),
    /// EQ_SWITCH, 16 B.
    EqSwitch(EqSwitchEvent),
    /// ERROR (no public layout beyond the header).
    Error(EventHeader),
    /// NULL_EVENT padding of any size.
    Null(EventHeader),
}

impl Event {
    /// Decode the complete event at `bytes[0]` (at least its size in bytes; later bytes are
    /// ignored). An empty or partly written slot gives [`FormatError::NoEvent`].
    pub fn decode(bytes: &[u8]) -> Result<Event, FormatError> {
        let h = peek_event(bytes)?.ok_or(FormatError::NoEvent)?;
        let t = h.event_type;
        let unsupported = FormatError::UnsupportedEvent {
            event_size: h.size as u8,
            event_type: t as u8,
        };
        Ok(match (t, h.size) {
            (EventType::Error, _) => Event::Error(h),
            (EventType::NullEvent, _) => Event::Null(h),
            (t, EventSize::B16) if t.is_initiator() => {
                Event::InitiatorShort(InitiatorShort::decode(bytes)?)
            }
            (t, EventSize::B32) if t.is_initiator() => {
                Event::InitiatorLong(InitiatorLong::decode(bytes)?)
            }
            (t, EventSize::B32) if t.is_target() => Event::TargetShort(TargetShort::decode(bytes)?),
            (t, EventSize::B64) if t.is_target() => Event::TargetLong(TargetLong::decode(bytes)?),
            (EventType::Ethernet, EventSize::B32) => Event::Ethernet(EnetEvent::decode(bytes)?),
            (EventType::CommandFailure, EventSize::B16) => {
                Event::CommandFailure(CommandFailure::decode(bytes)?)
            }
            (EventType::TriggeredOp, EventSize::B16) => {
                Event::TrigOpShort(TrigOpShort::decode(bytes)?)
            }
            (EventType::TriggeredOp, EventSize::B32) => {
                Event::TrigOpLong(TrigOpLong::decode(bytes)?)
            }
            (EventType::EthernetFgfc, EventSize::B16) => {
                Event::EthernetFgfc(EnetFgfc::decode(bytes)?)
            }
            (EventType::Pct, EventSize::B16) => Event::Pct(PctEvent::decode(bytes)?),
            (EventType::Timestamp, EventSize::B16) => {
                Event::Timestamp(TimestampEvent::decode(bytes)?)
            }
            (EventType::EqSwitch, EventSize::B16) => Event::EqSwitch(EqSwitchEvent::decode(bytes)?),
            _ => return Err(unsupported),
        })
    }

    /// Size, type and return code.
    pub fn header(&self) -> EventHeader {
        let (size, event_type, return_code) = match self {
            Event::InitiatorShort(e) => (EventSize::B16, e.event_type, e.return_code),
            Event::InitiatorLong(e) => (EventSize::B32, e.event_type, e.return_code),
            Event::TargetShort(e) => (EventSize::B32, e.event_type, e.return_code),
            Event::TargetLong(e) => (EventSize::B64, e.event_type, e.return_code),
            Event::Ethernet(e) => (EventSize::B32, EventType::Ethernet, e.return_code),
            Event::CommandFailure(e) => (EventSize::B16, EventType::CommandFailure, e.return_code),
            Event::TrigOpShort(e) => (EventSize::B16, EventType::TriggeredOp, e.return_code),
            Event::TrigOpLong(e) => (EventSize::B32, EventType::TriggeredOp, e.return_code),
            Event::EthernetFgfc(e) => (EventSize::B16, EventType::EthernetFgfc, e.return_code),
            Event::Pct(e) => (EventSize::B16, EventType::Pct, e.return_code),
            Event::Timestamp(e) => (EventSize::B16, EventType::Timestamp, e.return_code),
            Event::EqSwitch(e) => (EventSize::B16, EventType::EqSwitch, e.return_code),
            Event::Error(h) | Event::Null(h) => return *h,
        };
        EventHeader {
            size,
            event_type,
            return_code,
        }
    }

    /// `event_type`.
    pub fn event_type(&self) -> EventType {
        self.header().event_type
    }

    /// `return_code` (`cxi_event_rc`).
    pub fn return_code(&self) -> ReturnCode {
        self.header().return_code
    }

    /// Bytes the event occupies in the ring.
    pub fn encoded_len(&self) -> usize {
        self.header().size.bytes()
    }

    /// Check that the event type fits the variant (e.g. an [`InitiatorShort`] must be
    /// SEND, ACK or REPLY), that ERROR / NULL headers have their type and a size, and that
    /// the return code is not `C_RC_NO_EVENT` (software would never read the event).
    pub fn validate(&self) -> Result<(), FormatError> {
        let h = self.header();
        let ok = match self {
            Event::InitiatorShort(_) | Event::InitiatorLong(_) => h.event_type.is_initiator(),
            Event::TargetShort(_) | Event::TargetLong(_) => h.event_type.is_target(),
            Event::Error(_) => h.event_type == EventType::Error && h.size != EventSize::NoEvent,
            Event::Null(_) => h.event_type == EventType::NullEvent && h.size != EventSize::NoEvent,
            _ => true,
        };
        if !ok {
            return Err(FormatError::UnsupportedEvent {
                event_size: h.size as u8,
                event_type: h.event_type as u8,
            });
        }
        if h.return_code == ReturnCode::NoEvent {
            return Err(FormatError::NoEvent);
        }
        Ok(())
    }

    /// Validate and write into the first [`Event::encoded_len`] bytes of `out` (reserved bits
    /// zeroed). Returns the number of bytes written. The return code sits in the last byte.
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, FormatError> {
        self.validate()?;
        let n = self.encoded_len();
        let Some(dst) = out.get_mut(..n) else {
            return Err(FormatError::BufferTooSmall {
                format: "c_event",
                need: n,
                got: out.len(),
            });
        };
        dst.fill(0);
        match self {
            Event::InitiatorShort(e) => e.write_to(dst),
            Event::InitiatorLong(e) => e.write_to(dst),
            Event::TargetShort(e) => e.write_to(dst),
            Event::TargetLong(e) => e.write_to(dst),
            Event::Ethernet(e) => e.write_to(dst),
            Event::CommandFailure(e) => e.write_to(dst),
            Event::TrigOpShort(e) => e.write_to(dst),
            Event::TrigOpLong(e) => e.write_to(dst),
            Event::EthernetFgfc(e) => e.write_to(dst),
            Event::Pct(e) => e.write_to(dst),
            Event::Timestamp(e) => e.write_to(dst),
            Event::EqSwitch(e) => e.write_to(dst),
            Event::Error(h) | Event::Null(h) => h.write_to(dst),
        }
        Ok(n)
    }

    /// Validate and encode into a new vector of [`Event::encoded_len`] bytes.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut v = vec![0u8; self.encoded_len()];
        self.encode_into(&mut v)?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_types() {
        assert_eq!(EventSize::B16.bytes(), 16);
        assert_eq!(EventSize::B64.bytes(), 64);
        assert_eq!(EventSize::NoEvent.bytes(), 0);
        assert_eq!(EventType::Match as u8, 21);
        assert_eq!(EventType::Error as u8, 28);
        assert_eq!(EventType::NullEvent as u8, 31);
        for raw in 22..=27u8 {
            assert!(EventType::try_from(raw).is_err());
        }
        let n_init = EventType::ALL.iter().filter(|t| t.is_initiator()).count();
        let n_tgt = EventType::ALL.iter().filter(|t| t.is_target()).count();
        assert_eq!((n_init, n_tgt), (3, 14));
    }

    #[test]
    fn header_rules() {
        let mut b = [0u8; 64];
        assert_eq!(event_header(&b), None);
        // Size set, return code still 0: partly written.
        set_bits(&mut b, 112, 2, 3);
        set_bits(&mut b, 114, 5, EventType::Put as u64);
        assert_eq!(event_header(&b), None);
        b[63] = ReturnCode::Ok as u8 | 0xC0;
        assert_eq!(
            event_header(&b),
            Some((EventSize::B64, EventType::Put, ReturnCode::Ok))
        );
        // The slice must hold the whole event.
        assert!(peek_event(&b[..32]).is_err());
        assert_eq!(event_header(&b[..32]), None);
        // Unknown type.
        set_bits(&mut b, 114, 5, 25);
        assert!(matches!(peek_event(&b), Err(FormatError::Unknown(_))));
    }

    #[test]
    fn state_change_word() {
        let sc = StateChangeFields {
            ptlte_state: PtlteState::Disabled,
            sc_reason: ScReason::FcNoMatch,
            sc_nic_auto: true,
        };
        assert_eq!(sc.to_initiator(), 0x0001_0101);
        assert_eq!(StateChangeFields::from_initiator(0x0001_0101), Ok(sc));
        assert!(StateChangeFields::from_initiator(7).is_err());
    }
}
