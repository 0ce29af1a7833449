//! Portal lists, list entries (LEs), PtlTE states, and the option/flag words software passes
//! when appending LEs and allocating PtlTEs, CQs, EQs and memory descriptors.
//!
//! Sources: `cassini_user_defs.h` (`c_ptl_list`, `c_ptlte_state`, `c_sc_reason`),
//! `cxi_prov_hw.h` (`C_LE_*`), shs-cxi-driver `cxi-abi.h` (`struct cxi_pt_alloc_opts`,
//! `CXI_CQ_*`, `cxi_cq_update_policy`, `CXI_MAP_*`, `CXI_EQ_*`, `cxi_traffic_class`,
//! `cxi_traffic_class_type`, `cxi_trig_cp`); cassini.md §2.2, §3.1, §4, §7.

use super::layout::{c_enum, c_flags};

c_enum! {
    /// `enum c_ptl_list`: the list of a PtlTE an LE lives on (2 bits).
    pub enum PtlList("c_ptl_list") {
        /// `C_PTL_LIST_PRIORITY`: posted receives / MR LEs.
        Priority = 0 => "PRIORITY",
        /// `C_PTL_LIST_OVERFLOW`: buffers catching unexpected eager data.
        Overflow = 1 => "OVERFLOW",
        /// `C_PTL_LIST_REQUEST`: software-managed mode landing buffers.
        Request = 2 => "REQUEST",
        /// `C_PTL_LIST_UNEXPECTED`: hardware unexpected headers (SEARCH only).
        Unexpected = 3 => "UNEXPECTED",
    }
}

c_enum! {
    /// `enum c_ptlte_state` (3 bits; 5..7 unused).
    pub enum PtlteState("c_ptlte_state") {
        /// `C_PTLTE_RESET`.
        Reset = 0 => "RESET",
        /// `C_PTLTE_DISABLED`.
        Disabled = 1 => "DISABLED",
        /// `C_PTLTE_ENABLED`.
        Enabled = 2 => "ENABLED",
        /// `C_PTLTE_SOFTWARE_MANAGED`.
        SoftwareManaged = 3 => "SOFTWARE_MANAGED",
        /// `C_PTLTE_ETHERNET`.
        Ethernet = 4 => "ETHERNET",
    }
}

c_enum! {
    /// `enum c_sc_reason`: why hardware changed a PtlTE's state (4 bits; 7..15 unused).
    pub enum ScReason("c_sc_reason") {
        /// `C_SC_FC_EQ_FULL`: flow control, event queue full.
        FcEqFull = 0 => "FC_EQ_FULL",
        /// `C_SC_FC_NO_MATCH`: flow control, no match (overflow buffers exhausted).
        FcNoMatch = 1 => "FC_NO_MATCH",
        /// `C_SC_FC_UNEXPECTED_FAIL`: flow control, could not allocate an unexpected entry.
        FcUnexpectedFail = 2 => "FC_UNEXPECTED_FAIL",
        /// `C_SC_FC_REQUEST_FULL`: flow control, request buffers exhausted.
        FcRequestFull = 3 => "FC_REQUEST_FULL",
        /// `C_SC_SM_UNEXPECTED_FAIL`: moved to software managed, unexpected alloc failed.
        SmUnexpectedFail = 4 => "SM_UNEXPECTED_FAIL",
        /// `C_SC_SM_APPEND_FAIL`: moved to software managed, append failed.
        SmAppendFail = 5 => "SM_APPEND_FAIL",
        /// `C_SC_DIS_UNCOR`: disabled on an uncorrectable error.
        DisUncor = 6 => "DIS_UNCOR",
    }
}

c_flags! {
    /// `C_LE_*` (`cxi_prov_hw.h`): the option word of `cxi_target_cmd_setopts()`. Bits 0..14
    /// sit in `c_target_cmd` bits 32..46 in this order; `RESTART_SEQ` is `c_target_cmd` bit
    /// 88 (see `TargetCmd::opts`).
    pub struct LeFlags: u32 {
        /// `C_LE_EVENT_CT_BYTES`: the LE's CT counts bytes, not events.
        const EVENT_CT_BYTES = 1 << 0;
        /// `C_LE_EVENT_CT_OVERFLOW`: count overflow events on the CT.
        const EVENT_CT_OVERFLOW = 1 << 1;
        /// `C_LE_EVENT_CT_COMM`: count communication events on the CT.
        const EVENT_CT_COMM = 1 << 2;
        /// `C_LE_EVENT_UNLINK_DISABLE`: no UNLINK event on auto-unlink.
        const EVENT_UNLINK_DISABLE = 1 << 3;
        /// `C_LE_EVENT_SUCCESS_DISABLE`: only error events.
        const EVENT_SUCCESS_DISABLE = 1 << 4;
        /// `C_LE_EVENT_COMM_DISABLE`: no PUT/GET/... events.
        const EVENT_COMM_DISABLE = 1 << 5;
        /// `C_LE_EVENT_LINK_DISABLE`: no LINK event.
        const EVENT_LINK_DISABLE = 1 << 6;
        /// `C_LE_UNRESTRICTED_END_RO`: relaxed ordering for the final write.
        const UNRESTRICTED_END_RO = 1 << 7;
        /// `C_LE_UNRESTRICTED_BODY_RO`: relaxed ordering for body writes.
        const UNRESTRICTED_BODY_RO = 1 << 8;
        /// `C_LE_UNEXPECTED_HDR_DISABLE`: overflow match keeps no unexpected header.
        const UNEXPECTED_HDR_DISABLE = 1 << 9;
        /// `C_LE_USE_ONCE`: unlink after the first match.
        const USE_ONCE = 1 << 10;
        /// `C_LE_NO_TRUNCATE`: do not match a message that does not fit.
        const NO_TRUNCATE = 1 << 11;
        /// `C_LE_MANAGE_LOCAL`: the NIC manages the offset into the buffer.
        const MANAGE_LOCAL = 1 << 12;
        /// `C_LE_OP_GET`: Gets may match.
        const OP_GET = 1 << 13;
        /// `C_LE_OP_PUT`: Puts may match.
        const OP_PUT = 1 << 14;
        /// `C_LE_RESTART_SEQ`: restart an append-disabled list.
        const RESTART_SEQ = 1 << 15;
    }
}

c_flags! {
    /// `struct cxi_pt_alloc_opts` (`cxi-abi.h`), a `u64` bit-field, as a flag word in its
    /// bit order (bit 0 = `en_event_match`).
    pub struct PtAllocOpts: u64 {
        /// `en_event_match`: MATCH events.
        const EN_EVENT_MATCH = 1 << 0;
        /// `clr_remote_offset`.
        const CLR_REMOTE_OFFSET = 1 << 1;
        /// `en_flowctrl`: exhaustion disables the PtlTE instead of dropping.
        const EN_FLOWCTRL = 1 << 2;
        /// `use_long_event`: target events in the 64 B format.
        const USE_LONG_EVENT = 1 << 3;
        /// `lossless`.
        const LOSSLESS = 1 << 4;
        /// `en_restricted_unicast_lm`.
        const EN_RESTRICTED_UNICAST_LM = 1 << 5;
        /// `use_logical`: match initiators by logical rank.
        const USE_LOGICAL = 1 << 6;
        /// `is_matching`: match bits / ignore bits / initiator matching.
        const IS_MATCHING = 1 << 7;
        /// `do_space_check`.
        const DO_SPACE_CHECK = 1 << 8;
        /// `en_align_lm`.
        const EN_ALIGN_LM = 1 << 9;
        /// `en_sw_hw_st_chng`: allow HW-initiated ENABLED -> SOFTWARE_MANAGED.
        const EN_SW_HW_ST_CHNG = 1 << 10;
        /// `ethernet`.
        const ETHERNET = 1 << 11;
        /// `signal_invalid`: report AMO FP invalid.
        const SIGNAL_INVALID = 1 << 12;
        /// `signal_underflow`: report AMO FP underflow.
        const SIGNAL_UNDERFLOW = 1 << 13;
        /// `signal_overflow`: report AMO FP overflow.
        const SIGNAL_OVERFLOW = 1 << 14;
        /// `signal_inexact`: report AMO FP inexact.
        const SIGNAL_INEXACT = 1 << 15;
        /// `en_match_on_vni` (Cassini 2 only).
        const EN_MATCH_ON_VNI = 1 << 16;
    }
}

c_flags! {
    /// `CXI_CQ_*` (`cxi-abi.h`): `cxi_cq_alloc_opts.flags`.
    pub struct CqAllocFlags: u32 {
        /// `CXI_CQ_USER`: allocated for a user process (driver use only).
        const USER = 1 << 0;
        /// `CXI_CQ_IS_TX`: transmit CQ (else target CQ).
        const IS_TX = 1 << 1;
        /// `CXI_CQ_TX_ETHERNET`: raw Ethernet TX CQ (privileged).
        const TX_ETHERNET = 1 << 2;
        /// `CXI_CQ_TX_WITH_TRIG_CMDS`: trigger queue (CT commands only).
        const TX_WITH_TRIG_CMDS = 1 << 3;
    }
}

c_enum! {
    /// `enum cxi_cq_update_policy` (`cxi-abi.h`): CQ status write-back frequency.
    pub enum CqUpdatePolicy("cxi_cq_update_policy") {
        /// `CXI_CQ_UPDATE_ALWAYS`: whenever the read pointer advances.
        Always = 0 => "ALWAYS",
        /// `CXI_CQ_UPDATE_HIGH_FREQ_EMPTY`: high frequency and on empty.
        HighFreqEmpty = 1 => "HIGH_FREQ_EMPTY",
        /// `CXI_CQ_UPDATE_LOW_FREQ_EMPTY`: low frequency and on empty.
        LowFreqEmpty = 2 => "LOW_FREQ_EMPTY",
        /// `CXI_CQ_UPDATE_LOW_FREQ`: low frequency.
        LowFreq = 3 => "LOW_FREQ",
    }
}

c_flags! {
    /// `enum cxi_atu_map_flags` (`cxi-abi.h`): `cxil_map()` flags.
    pub struct MapFlags: u32 {
        /// `CXI_MAP_PIN`: pin pages (else on-demand paging).
        const PIN = 1 << 0;
        /// `CXI_MAP_ATS`.
        const ATS = 1 << 1;
        /// `CXI_MAP_WRITE`: the NIC may write.
        const WRITE = 1 << 2;
        /// `CXI_MAP_READ`: the NIC may read.
        const READ = 1 << 3;
        /// `CXI_MAP_FAULT`: fault pages in now.
        const FAULT = 1 << 4;
        /// `CXI_MAP_NOCACHE`.
        const NOCACHE = 1 << 5;
        /// `CXI_MAP_USER_ADDR`.
        const USER_ADDR = 1 << 6;
        /// `CXI_MAP_ATS_PT`.
        const ATS_PT = 1 << 7;
        /// `CXI_MAP_ATS_DYN`.
        const ATS_DYN = 1 << 8;
        /// `CXI_MAP_DEVICE`: device (GPU / dmabuf) memory.
        const DEVICE = 1 << 9;
        /// `CXI_MAP_UNUSED`.
        const UNUSED = 1 << 10;
        /// `CXI_MAP_ALLOC_MD`: reserve IOVA only, fill later with `cxil_update_md`.
        const ALLOC_MD = 1 << 11;
        /// `CXI_MAP_PREFETCH`.
        const PREFETCH = 1 << 12;
        /// `CXI_MAP_HUGEPAGE` (newer `cxi-abi.h`).
        const HUGEPAGE = 1 << 13;
    }
}

c_flags! {
    /// `CXI_EQ_*` (`cxi-abi.h`): `cxi_eq_attr.flags`.
    pub struct EqFlags: u64 {
        /// `CXI_EQ_USER`: allocated for a user process (driver use only).
        const USER = 1 << 0;
        /// `CXI_EQ_PASSTHROUGH`: physically contiguous buffer, no translation.
        const PASSTHROUGH = 1 << 1;
        /// `CXI_EQ_INIT_LONG`: all initiator events long (32 B).
        const INIT_LONG = 1 << 2;
        /// `CXI_EQ_TGT_LONG`: all target events long (64 B).
        const TGT_LONG = 1 << 3;
        /// `CXI_EQ_DROP_STATUS_DISABLE`: no status write-back on drops.
        const DROP_STATUS_DISABLE = 1 << 4;
        /// `CXI_EQ_TIMESTAMP_EVENTS`: periodic `C_EVENT_TIMESTAMP`.
        const TIMESTAMP_EVENTS = 1 << 5;
        /// `CXI_EQ_EC_DISABLE`: no event combining.
        const EC_DISABLE = 1 << 6;
        /// `CXI_EQ_REGISTER_PCT`: EQ registered with the PCT block.
        const REGISTER_PCT = 1 << 7;
    }
}

c_enum! {
    /// `enum cxi_traffic_class` (`cxi-abi.h`).
    pub enum TrafficClass("cxi_traffic_class") {
        /// `CXI_TC_DEDICATED_ACCESS`.
        DedicatedAccess = 0 => "DEDICATED_ACCESS",
        /// `CXI_TC_LOW_LATENCY`.
        LowLatency = 1 => "LOW_LATENCY",
        /// `CXI_TC_BULK_DATA`.
        BulkData = 2 => "BULK_DATA",
        /// `CXI_TC_BEST_EFFORT`.
        BestEffort = 3 => "BEST_EFFORT",
        /// `CXI_TC_ETH`: Ethernet.
        Eth = 4 => "ETH",
    }
}

/// `CXI_TC_MAX`: number of traffic classes.
pub const CXI_TC_MAX: usize = 5;

c_enum! {
    /// `enum cxi_traffic_class_type` (`cxi-abi.h`).
    pub enum TcType("cxi_traffic_class_type") {
        /// `CXI_TC_TYPE_DEFAULT`.
        Default = 0 => "DEFAULT",
        /// `CXI_TC_TYPE_HRP`: high-rate put.
        Hrp = 1 => "HRP",
        /// `CXI_TC_TYPE_RESTRICTED`.
        Restricted = 2 => "RESTRICTED",
        /// `CXI_TC_TYPE_COLL_LEAF`.
        CollLeaf = 3 => "COLL_LEAF",
    }
}

c_enum! {
    /// `enum cxi_trig_cp` (`cxi-abi.h`): which CQs a communication profile serves.
    pub enum TrigCp("cxi_trig_cp") {
        /// `TRIG_LCID`: trigger CQs.
        TrigLcid = 0 => "TRIG_LCID",
        /// `NON_TRIG_LCID`: ordinary CQs.
        NonTrigLcid = 1 => "NON_TRIG_LCID",
        /// `ANY_LCID`.
        AnyLcid = 2 => "ANY_LCID",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_exact() {
        assert_eq!(PtlList::Unexpected as u8, 3);
        assert_eq!(PtlteState::Ethernet as u8, 4);
        assert!(PtlteState::try_from(5).is_err());
        assert_eq!(ScReason::DisUncor as u8, 6);
        assert!(ScReason::try_from(7).is_err());
        assert_eq!(LeFlags::OP_PUT.bits(), 0x4000);
        assert_eq!(LeFlags::RESTART_SEQ.bits(), 0x8000);
        assert_eq!(LeFlags::all().bits(), 0xFFFF);
        assert_eq!(PtAllocOpts::IS_MATCHING.bits(), 0x80);
        assert_eq!(PtAllocOpts::all().bits(), 0x1_FFFF);
        assert_eq!(CqAllocFlags::TX_WITH_TRIG_CMDS.bits(), 8);
        assert_eq!(MapFlags::PREFETCH.bits(), 0x1000);
        assert_eq!(MapFlags::ALLOC_MD.bits(), 0x800);
        assert_eq!(EqFlags::REGISTER_PCT.bits(), 0x80);
        assert_eq!(TrafficClass::Eth as u8, 4);
        assert_eq!(TrafficClass::ALL.len(), CXI_TC_MAX);
        assert_eq!(TcType::CollLeaf as u8, 3);
    }

    #[test]
    fn flag_ops() {
        let f = LeFlags::OP_PUT | LeFlags::USE_ONCE;
        assert!(f.contains(LeFlags::OP_PUT));
        assert!(!f.contains(LeFlags::OP_GET));
        assert_eq!((f - LeFlags::OP_PUT).bits(), LeFlags::USE_ONCE.bits());
        assert_eq!(f.with(LeFlags::OP_GET, true).bits(), 0x6400);
        assert_eq!(format!("{f:?}"), "LeFlags(USE_ONCE | OP_PUT)");
        assert_eq!(LeFlags(0x1_0001).unknown_bits(), 0x1_0000);
    }
}
