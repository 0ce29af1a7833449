//! Hardware enums and bit sets the LPE speaks in.
//!
//! These mirror, with the exact numeric values, the definitions that `firmware-spec::cassini`
//! will hold (`rc`, `event`, `le`): `enum c_return_code`, `enum c_event_type`, `enum c_ptl_list`,
//! `enum c_ptlte_state`, `enum c_sc_reason`, the `C_LE_*` option bits and the
//! `struct cxi_pt_alloc_opts` bit order (shs-cassini-headers `cassini_user_defs.h`,
//! `cxi_prov_hw.h`; shs-cxi-driver `cxi-abi.h`). They are local only until those modules land;
//! switching is a matter of replacing this file with re-exports.

/// Hardware return code (`enum c_return_code`, 6 bits). Only the codes the LPE produces are
/// listed; the values are those of `cassini_user_defs.h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ReturnCode {
    /// `C_RC_NO_EVENT`: not an event (never produced by the LPE).
    NoEvent = 0,
    /// `C_RC_OK`.
    Ok = 1,
    /// `C_RC_UNDELIVERABLE`.
    Undeliverable = 2,
    /// `C_RC_PT_DISABLED`: the target PtlTE is disabled (flow control).
    PtDisabled = 3,
    /// `C_RC_DROPPED`.
    Dropped = 4,
    /// `C_RC_PERM_VIOLATION`.
    PermViolation = 5,
    /// `C_RC_OP_VIOLATION`: the matched entry does not allow the operation.
    OpViolation = 6,
    /// `C_RC_NO_MATCH`: search found nothing / SETSTATE drop count mismatch.
    NoMatch = 8,
    /// `C_RC_NO_SPACE`: no list entry could be allocated, or the entry has no room.
    NoSpace = 16,
    /// `C_RC_ENTRY_NOT_FOUND`: no entry (or no resource) on a PtlTE without flow control.
    EntryNotFound = 18,
    /// `C_RC_PTLTE_NOT_FOUND`: the addressed PtlTE does not exist.
    PtlteNotFound = 26,
    /// `C_RC_PTLTE_SW_MANAGED`: priority append refused on a software-managed PtlTE.
    PtlteSwManaged = 27,
    /// `C_RC_SRC_ERROR`.
    SrcError = 28,
    /// `C_RC_MST_CANCELLED`: a target transfer was cancelled by LE invalidation.
    MstCancelled = 29,
    /// `C_RC_ILLEGAL_OP`.
    IllegalOp = 46,
    /// `C_RC_RESTRICTED_UNICAST`: restricted op on a locally managed entry not allowed.
    RestrictedUnicast = 48,
    /// `C_RC_CMD_INVALID_ARG`: a command carried an invalid argument.
    CmdInvalidArg = 50,
    /// `C_RC_DELAYED`: a Get/AMO matched an overflow or request entry; no response yet.
    Delayed = 57,
}

impl ReturnCode {
    /// The 6-bit wire value.
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

/// Event type (`enum c_event_type`, 5 bits); the target-side types the LPE produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EventType {
    /// `C_EVENT_PUT`.
    Put = 0,
    /// `C_EVENT_GET`.
    Get = 1,
    /// `C_EVENT_ATOMIC`.
    Atomic = 2,
    /// `C_EVENT_FETCH_ATOMIC`.
    FetchAtomic = 3,
    /// `C_EVENT_PUT_OVERFLOW`.
    PutOverflow = 4,
    /// `C_EVENT_GET_OVERFLOW`.
    GetOverflow = 5,
    /// `C_EVENT_ATOMIC_OVERFLOW`.
    AtomicOverflow = 6,
    /// `C_EVENT_FETCH_ATOMIC_OVERFLOW`.
    FetchAtomicOverflow = 7,
    /// `C_EVENT_LINK`.
    Link = 11,
    /// `C_EVENT_SEARCH`.
    Search = 12,
    /// `C_EVENT_STATE_CHANGE`.
    StateChange = 13,
    /// `C_EVENT_UNLINK`.
    Unlink = 14,
    /// `C_EVENT_RENDEZVOUS`.
    Rendezvous = 15,
    /// `C_EVENT_MATCH`.
    Match = 21,
}

impl EventType {
    /// The 5-bit wire value.
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

/// Portal list (`enum c_ptl_list`, 2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum PtlList {
    /// `C_PTL_LIST_PRIORITY`: posted receives / memory regions.
    #[default]
    Priority = 0,
    /// `C_PTL_LIST_OVERFLOW`: buffers catching unexpected eager data.
    Overflow = 1,
    /// `C_PTL_LIST_REQUEST`: software-managed landing buffers.
    Request = 2,
    /// `C_PTL_LIST_UNEXPECTED`: hardware-kept unexpected headers (search only).
    Unexpected = 3,
}

impl PtlList {
    /// The 2-bit wire value.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// Decodes the 2-bit field (only the low 2 bits are looked at).
    pub fn from_bits(v: u8) -> Self {
        match v & 3 {
            0 => Self::Priority,
            1 => Self::Overflow,
            2 => Self::Request,
            _ => Self::Unexpected,
        }
    }
}

/// PtlTE state (`enum c_ptlte_state`, 3 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum PtlteState {
    /// `C_PTLTE_RESET`: not configured.
    #[default]
    Reset = 0,
    /// `C_PTLTE_DISABLED`: incoming requests are dropped with PT_DISABLED and counted.
    Disabled = 1,
    /// `C_PTLTE_ENABLED`: hardware matching.
    Enabled = 2,
    /// `C_PTLTE_SOFTWARE_MANAGED`: unmatched requests land in REQUEST-list buffers.
    SoftwareManaged = 3,
    /// `C_PTLTE_ETHERNET`: Ethernet receive (not a Portals target).
    Ethernet = 4,
}

impl PtlteState {
    /// The 3-bit wire value.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// Decodes the 3-bit field; values 5..7 are not states.
    pub fn from_bits(v: u8) -> Option<Self> {
        Some(match v & 7 {
            0 => Self::Reset,
            1 => Self::Disabled,
            2 => Self::Enabled,
            3 => Self::SoftwareManaged,
            4 => Self::Ethernet,
            _ => return None,
        })
    }
}

/// Reason of a hardware-initiated state change (`enum c_sc_reason`, 4 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ScReason {
    /// `C_SC_FC_EQ_FULL`: the PtlTE's event queue had no room.
    FcEqFull = 0,
    /// `C_SC_FC_NO_MATCH`: nothing matched on the priority or overflow list.
    FcNoMatch = 1,
    /// `C_SC_FC_UNEXPECTED_FAIL`: an unexpected header could not be allocated.
    FcUnexpectedFail = 2,
    /// `C_SC_FC_REQUEST_FULL`: no request-list buffer (software-managed mode).
    FcRequestFull = 3,
    /// `C_SC_SM_UNEXPECTED_FAIL`: moved to SOFTWARE_MANAGED on ULE exhaustion.
    SmUnexpectedFail = 4,
    /// `C_SC_SM_APPEND_FAIL`: moved to SOFTWARE_MANAGED on a failed priority append.
    SmAppendFail = 5,
    /// `C_SC_DIS_UNCOR`: uncorrectable list-entry error (never produced by the model).
    DisUncor = 6,
}

impl ScReason {
    /// The 4-bit wire value.
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

/// List-entry option bits of a target command (`C_LE_*` in `cxi_prov_hw.h`, the order of the
/// bit fields at bit 32.. of `c_target_cmd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LeFlags(pub u32);

impl LeFlags {
    /// `C_LE_EVENT_CT_BYTES`: the CT counts bytes (mlength) instead of events.
    pub const EVENT_CT_BYTES: Self = Self(1 << 0);
    /// `C_LE_EVENT_CT_OVERFLOW`: bump the CT on overflow events.
    pub const EVENT_CT_OVERFLOW: Self = Self(1 << 1);
    /// `C_LE_EVENT_CT_COMM`: bump the CT on communication events.
    pub const EVENT_CT_COMM: Self = Self(1 << 2);
    /// `C_LE_EVENT_UNLINK_DISABLE`: no UNLINK event on auto-unlink.
    pub const EVENT_UNLINK_DISABLE: Self = Self(1 << 3);
    /// `C_LE_EVENT_SUCCESS_DISABLE`: only events with an error return code.
    pub const EVENT_SUCCESS_DISABLE: Self = Self(1 << 4);
    /// `C_LE_EVENT_COMM_DISABLE`: no successful communication (PUT/GET/...) events.
    pub const EVENT_COMM_DISABLE: Self = Self(1 << 5);
    /// `C_LE_EVENT_LINK_DISABLE`: no successful LINK event.
    pub const EVENT_LINK_DISABLE: Self = Self(1 << 6);
    /// `C_LE_UNRESTRICTED_END_RO`: PCIe relaxed ordering for the final write.
    pub const UNRESTRICTED_END_RO: Self = Self(1 << 7);
    /// `C_LE_UNRESTRICTED_BODY_RO`: PCIe relaxed ordering for body writes.
    pub const UNRESTRICTED_BODY_RO: Self = Self(1 << 8);
    /// `C_LE_UNEXPECTED_HDR_DISABLE`: an overflow match records no unexpected header.
    pub const UNEXPECTED_HDR_DISABLE: Self = Self(1 << 9);
    /// `C_LE_USE_ONCE`: unlink after the first match.
    pub const USE_ONCE: Self = Self(1 << 10);
    /// `C_LE_NO_TRUNCATE`: do not match a message that does not fit.
    pub const NO_TRUNCATE: Self = Self(1 << 11);
    /// `C_LE_MANAGE_LOCAL`: the NIC keeps the offset; remote offsets are ignored.
    pub const MANAGE_LOCAL: Self = Self(1 << 12);
    /// `C_LE_OP_GET`: Gets allowed.
    pub const OP_GET: Self = Self(1 << 13);
    /// `C_LE_OP_PUT`: Puts allowed.
    pub const OP_PUT: Self = Self(1 << 14);
    /// `C_LE_RESTART_SEQ`: re-opens an append-disabled list.
    pub const RESTART_SEQ: Self = Self(1 << 15);

    /// No flag.
    pub const fn empty() -> Self {
        Self(0)
    }

    /// True when every bit of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

impl core::ops::BitOr for LeFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for LeFlags {
    fn bitor_assign(&mut self, rhs: Self) {
        self.0 |= rhs.0;
    }
}

/// PtlTE options, in the bit order of `struct cxi_pt_alloc_opts` (cxi-abi.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PtOptions(pub u32);

impl PtOptions {
    /// `en_event_match`: a MATCH event for every successful match.
    pub const EN_EVENT_MATCH: Self = Self(1 << 0);
    /// `clr_remote_offset` (accepted; no effect in the model).
    pub const CLR_REMOTE_OFFSET: Self = Self(1 << 1);
    /// `en_flowctrl`: resource exhaustion disables the PtlTE instead of dropping.
    pub const EN_FLOWCTRL: Self = Self(1 << 2);
    /// `use_long_event`: target events in the 64-byte format.
    pub const USE_LONG_EVENT: Self = Self(1 << 3);
    /// `lossless` (accepted; the model behaves as not lossless).
    pub const LOSSLESS: Self = Self(1 << 4);
    /// `en_restricted_unicast_lm`: restricted ops may target locally managed entries.
    pub const EN_RESTRICTED_UNICAST_LM: Self = Self(1 << 5);
    /// `use_logical`: initiator matching on logical rank instead of NID.
    pub const USE_LOGICAL: Self = Self(1 << 6);
    /// `is_matching`: match bits / initiator matching (else offset addressing).
    pub const IS_MATCHING: Self = Self(1 << 7);
    /// `do_space_check`: a non-matching PtlTE truncates instead of dropping NO_SPACE.
    pub const DO_SPACE_CHECK: Self = Self(1 << 8);
    /// `en_align_lm` (accepted; no effect in the model).
    pub const EN_ALIGN_LM: Self = Self(1 << 9);
    /// `en_sw_hw_st_chng`: hardware may move ENABLED -> SOFTWARE_MANAGED.
    pub const EN_SW_HW_ST_CHNG: Self = Self(1 << 10);
    /// `ethernet`.
    pub const ETHERNET: Self = Self(1 << 11);
    /// `signal_invalid` (AMO FP exception reporting; used by the AMO unit, not the LPE).
    pub const SIGNAL_INVALID: Self = Self(1 << 12);
    /// `signal_underflow`.
    pub const SIGNAL_UNDERFLOW: Self = Self(1 << 13);
    /// `signal_overflow`.
    pub const SIGNAL_OVERFLOW: Self = Self(1 << 14);
    /// `signal_inexact`.
    pub const SIGNAL_INEXACT: Self = Self(1 << 15);
    /// `en_match_on_vni` (Cassini 2; accepted, no effect in the model).
    pub const EN_MATCH_ON_VNI: Self = Self(1 << 16);

    /// No option.
    pub const fn empty() -> Self {
        Self(0)
    }

    /// True when every bit of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

impl core::ops::BitOr for PtOptions {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for PtOptions {
    fn bitor_assign(&mut self, rhs: Self) {
        self.0 |= rhs.0;
    }
}

/// `C_EQ_NONE`: no event queue.
pub const EQ_NONE: u16 = 0;
/// `C_CT_NONE`: no counting event.
pub const CT_NONE: u16 = 0;
/// `C_DFA_PID_BITS_MIN`.
pub const PID_BITS_MIN: u8 = 6;
/// `C_DFA_PID_BITS_MAX`.
pub const PID_BITS_MAX: u8 = 9;
/// `C_PID_ANY` = (1 << C_DFA_PID_BITS_MAX) - 1.
pub const PID_ANY: u32 = (1 << PID_BITS_MAX) - 1;
/// `C_RANK_ANY` = (1 << (32 - C_DFA_PID_BITS_MAX)) - 1.
pub const RANK_ANY: u32 = (1 << (32 - PID_BITS_MAX)) - 1;
/// `C_NID_ANY` (20-bit NID wildcard).
pub const NID_ANY: u32 = 0xF_FFFF;
/// `CXI_MATCH_ID_ANY` = CXI_MATCH_ID(9, C_PID_ANY, C_RANK_ANY).
pub const MATCH_ID_ANY: u32 = 0xFFFF_FFFF;
/// Width of the drop counter of a PtlTE (`c_lpe_cfg_ptl_table.drop_count`).
pub const DROP_COUNT_MASK: u32 = (1 << 24) - 1;
/// SETSTATE drop count that skips the check (`CXIP_PTE_IGNORE_DROPS` in libfabric).
pub const DROP_COUNT_IGNORE: u32 = DROP_COUNT_MASK;
/// `C_NUM_PTLTES`.
pub const NUM_PTLTES: usize = 2048;
/// `C_PE_COUNT`: list processing engines.
pub const PE_COUNT: usize = 4;
/// LE pools per processing engine (`c_lpe_cfg_pe_le_pools` has 64 = 4 x 16 entries).
pub const POOLS_PER_PE: usize = 16;
/// List entries per processing engine (65,536 ME/ULE RAM entries / 4 PEs).
pub const PE_LE_MAX: u32 = 16384;
/// Number of counter pools (`cntr_pool`, 2 bits).
pub const CNTR_POOLS: usize = 4;

/// Builds a match id: PID in the top `pid_bits` bits, endpoint (NID or rank) below
/// (`CXI_MATCH_ID` in cxi_prov_hw.h).
pub fn match_id(pid_bits: u8, pid: u32, ep: u32) -> u32 {
    let pid_bits = u32::from(pid_bits.clamp(PID_BITS_MIN, PID_BITS_MAX));
    let pid_mask = (1u32 << pid_bits) - 1;
    let ep_mask = (1u32 << (32 - pid_bits)) - 1;
    ((pid & pid_mask) << (32 - pid_bits)) | (ep & ep_mask)
}

/// The PID field of a match id (`CXI_MATCH_ID_PID`).
pub fn match_id_pid(pid_bits: u8, id: u32) -> u32 {
    let pid_bits = u32::from(pid_bits.clamp(PID_BITS_MIN, PID_BITS_MAX));
    id >> (32 - pid_bits)
}

/// The endpoint (NID or rank) field of a match id (`CXI_MATCH_ID_EP`).
pub fn match_id_ep(pid_bits: u8, id: u32) -> u32 {
    let pid_bits = u32::from(pid_bits.clamp(PID_BITS_MIN, PID_BITS_MAX));
    id & ((1u32 << (32 - pid_bits)) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_id_any_is_all_ones() {
        assert_eq!(match_id(9, PID_ANY, RANK_ANY), MATCH_ID_ANY);
    }

    #[test]
    fn match_id_fields_round_trip() {
        for pid_bits in PID_BITS_MIN..=PID_BITS_MAX {
            let id = match_id(pid_bits, 5, 0x12345);
            assert_eq!(match_id_pid(pid_bits, id), 5);
            assert_eq!(match_id_ep(pid_bits, id), 0x12345);
        }
    }

    #[test]
    fn le_flag_bits_follow_cxi_prov_hw() {
        assert_eq!(LeFlags::USE_ONCE.bits(), 0x400);
        assert_eq!(LeFlags::OP_PUT.bits(), 0x4000);
        assert_eq!(LeFlags::RESTART_SEQ.bits(), 0x8000);
        assert!((LeFlags::OP_PUT | LeFlags::OP_GET).contains(LeFlags::OP_GET));
    }

    #[test]
    fn state_decoding() {
        assert_eq!(PtlteState::from_bits(3), Some(PtlteState::SoftwareManaged));
        assert_eq!(PtlteState::from_bits(5), None);
        assert_eq!(PtlList::from_bits(3), PtlList::Unexpected);
    }
}
