//! Return codes (`enum c_return_code`, `cassini_user_defs.h`; cassini.md §3.3). Six bits in
//! every event and in `c_cq_status`.

use super::layout::c_enum;

c_enum! {
    /// `enum c_return_code`: the outcome reported in events and CQ status.
    pub enum ReturnCode("c_return_code") {
        /// `C_RC_NO_EVENT`: slot not (completely) written.
        NoEvent = 0 => "NO_EVENT",
        /// `C_RC_OK`.
        Ok = 1 => "OK",
        /// `C_RC_UNDELIVERABLE`.
        Undeliverable = 2 => "UNDELIVERABLE",
        /// `C_RC_PT_DISABLED`: target PtlTE disabled (flow control).
        PtDisabled = 3 => "PT_DISABLED",
        /// `C_RC_DROPPED`.
        Dropped = 4 => "DROPPED",
        /// `C_RC_PERM_VIOLATION`.
        PermViolation = 5 => "PERM_VIOLATION",
        /// `C_RC_OP_VIOLATION`: operation not allowed by the LE (`op_put`/`op_get`).
        OpViolation = 6 => "OP_VIOLATION",
        /// `C_RC_NO_MATCH`.
        NoMatch = 8 => "NO_MATCH",
        /// `C_RC_UNCOR`: uncorrectable error.
        Uncor = 9 => "UNCOR",
        /// `C_RC_UNCOR_TRNSNT`: uncorrectable transient error.
        UncorTrnsnt = 10 => "UNCOR_TRNSNT",
        /// `C_RC_NO_SPACE`: no LE available for an append.
        NoSpace = 16 => "NO_SPACE",
        /// `C_RC_ENTRY_NOT_FOUND`.
        EntryNotFound = 18 => "ENTRY_NOT_FOUND",
        /// `C_RC_NO_TARGET_CONN`.
        NoTargetConn = 19 => "NO_TARGET_CONN",
        /// `C_RC_NO_TARGET_MST`.
        NoTargetMst = 20 => "NO_TARGET_MST",
        /// `C_RC_NO_TARGET_TRS`.
        NoTargetTrs = 21 => "NO_TARGET_TRS",
        /// `C_RC_SEQUENCE_ERROR`.
        SequenceError = 22 => "SEQUENCE_ERROR",
        /// `C_RC_NO_MATCHING_CONN`.
        NoMatchingConn = 23 => "NO_MATCHING_CONN",
        /// `C_RC_INVALID_DFA_FORMAT`.
        InvalidDfaFormat = 24 => "INVALID_DFA_FORMAT",
        /// `C_RC_VNI_NOT_FOUND`.
        VniNotFound = 25 => "VNI_NOT_FOUND",
        /// `C_RC_PTLTE_NOT_FOUND`.
        PtlteNotFound = 26 => "PTLTE_NOT_FOUND",
        /// `C_RC_PTLTE_SW_MANAGED`.
        PtlteSwManaged = 27 => "PTLTE_SW_MANAGED",
        /// `C_RC_SRC_ERROR`.
        SrcError = 28 => "SRC_ERROR",
        /// `C_RC_MST_CANCELLED`: target DMA cancelled (LE invalidated).
        MstCancelled = 29 => "MST_CANCELLED",
        /// `C_RC_HRP_CONFIG_ERROR`.
        HrpConfigError = 30 => "HRP_CONFIG_ERROR",
        /// `C_RC_HRP_RSP_ERROR`.
        HrpRspError = 31 => "HRP_RSP_ERROR",
        /// `C_RC_HRP_RSP_DISCARD`.
        HrpRspDiscard = 32 => "HRP_RSP_DISCARD",
        /// `C_RC_INVALID_AC`: address context not valid.
        InvalidAc = 33 => "INVALID_AC",
        /// `C_RC_PAGE_PERM_ERROR`: page permission violation.
        PagePermError = 34 => "PAGE_PERM_ERROR",
        /// `C_RC_ATS_ERROR`.
        AtsError = 35 => "ATS_ERROR",
        /// `C_RC_NO_TRANSLATION`: IOVA not mapped.
        NoTranslation = 36 => "NO_TRANSLATION",
        /// `C_RC_PAGE_REQ_ERROR`.
        PageReqError = 37 => "PAGE_REQ_ERROR",
        /// `C_RC_PCIE_ERROR_POISONED`.
        PcieErrorPoisoned = 38 => "PCIE_ERROR_POISONED",
        /// `C_RC_PCIE_UNSUCCESS_CMPL`.
        PcieUnsuccessCmpl = 39 => "PCIE_UNSUCCESS_CMPL",
        /// `C_RC_AMO_INVAL_OP_ERROR`.
        AmoInvalOpError = 40 => "AMO_INVAL_OP_ERROR",
        /// `C_RC_AMO_ALIGN_ERROR`.
        AmoAlignError = 41 => "AMO_ALIGN_ERROR",
        /// `C_RC_AMO_FP_INVALID`.
        AmoFpInvalid = 42 => "AMO_FP_INVALID",
        /// `C_RC_AMO_FP_UNDERFLOW`.
        AmoFpUnderflow = 43 => "AMO_FP_UNDERFLOW",
        /// `C_RC_AMO_FP_OVERFLOW`.
        AmoFpOverflow = 44 => "AMO_FP_OVERFLOW",
        /// `C_RC_AMO_FP_INEXACT`.
        AmoFpInexact = 45 => "AMO_FP_INEXACT",
        /// `C_RC_ILLEGAL_OP`.
        IllegalOp = 46 => "ILLEGAL_OP",
        /// `C_RC_INVALID_ENDPOINT`.
        InvalidEndpoint = 47 => "INVALID_ENDPOINT",
        /// `C_RC_RESTRICTED_UNICAST`.
        RestrictedUnicast = 48 => "RESTRICTED_UNICAST",
        /// `C_RC_CMD_ALIGN_ERROR`: misaligned command in a CQ.
        CmdAlignError = 49 => "CMD_ALIGN_ERROR",
        /// `C_RC_CMD_INVALID_ARG`: bad command argument.
        CmdInvalidArg = 50 => "CMD_INVALID_ARG",
        /// `C_RC_INVALID_EVENT`.
        InvalidEvent = 51 => "INVALID_EVENT",
        /// `C_RC_ADDR_OUT_OF_RANGE`.
        AddrOutOfRange = 52 => "ADDR_OUT_OF_RANGE",
        /// `C_RC_CONN_CLOSED`.
        ConnClosed = 53 => "CONN_CLOSED",
        /// `C_RC_CANCELED`.
        Canceled = 54 => "CANCELED",
        /// `C_RC_NO_MATCHING_TRS`.
        NoMatchingTrs = 55 => "NO_MATCHING_TRS",
        /// `C_RC_NO_MATCHING_MST`.
        NoMatchingMst = 56 => "NO_MATCHING_MST",
        /// `C_RC_DELAYED`.
        Delayed = 57 => "DELAYED",
        /// `C_RC_AMO_LENGTH_ERROR`.
        AmoLengthError = 58 => "AMO_LENGTH_ERROR",
        /// `C_RC_PKTBUF_ERROR`.
        PktbufError = 59 => "PKTBUF_ERROR",
        /// `C_RC_RESOURCE_BUSY`.
        ResourceBusy = 60 => "RESOURCE_BUSY",
        /// `C_RC_FLUSH_TRANSLATION`.
        FlushTranslation = 61 => "FLUSH_TRANSLATION",
        /// `C_RC_TRS_PEND_RSP`.
        TrsPendRsp = 62 => "TRS_PEND_RSP",
    }
}

impl ReturnCode {
    /// Width of the field in events and `c_cq_status`.
    pub const BITS: u32 = 6;

    /// Whether this is `C_RC_OK`.
    pub const fn is_ok(self) -> bool {
        matches!(self, ReturnCode::Ok)
    }
}

/// `cxi_rc_to_str()`-like text for any raw 6-bit code (`"(n)"` for unnamed values).
pub fn rc_to_str(raw: u8) -> std::borrow::Cow<'static, str> {
    match ReturnCode::try_from(raw) {
        Ok(rc) => rc.name().into(),
        Err(_) => format!("({raw})").into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_exact() {
        assert_eq!(ReturnCode::ALL.len(), 56);
        assert_eq!(ReturnCode::NoEvent as u8, 0);
        assert_eq!(ReturnCode::OpViolation as u8, 6);
        assert_eq!(ReturnCode::NoMatch as u8, 8);
        assert_eq!(ReturnCode::NoSpace as u8, 16);
        assert_eq!(ReturnCode::EntryNotFound as u8, 18);
        assert_eq!(ReturnCode::PtlteNotFound as u8, 26);
        assert_eq!(ReturnCode::MstCancelled as u8, 29);
        assert_eq!(ReturnCode::AmoInvalOpError as u8, 40);
        assert_eq!(ReturnCode::CmdInvalidArg as u8, 50);
        assert_eq!(ReturnCode::TrsPendRsp as u8, 62);
        for raw in [7u8, 11, 12, 13, 14, 15, 17, 63, 64, 255] {
            assert!(ReturnCode::try_from(raw).is_err(), "{raw}");
        }
        for rc in ReturnCode::ALL {
            assert_eq!(ReturnCode::try_from(*rc as u8), Ok(*rc));
        }
        assert_eq!(rc_to_str(3), "PT_DISABLED");
        assert_eq!(rc_to_str(7), "(7)");
    }
}
