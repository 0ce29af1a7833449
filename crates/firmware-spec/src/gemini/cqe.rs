//! The 64-bit completion queue entry (`gni_cq_entry_t`).
//!
//! Public (`gemini_hw.h` "CQ Event format"): `source` bits 56–58, `status` bits 59–62,
//! `overrun` bit 63; an entry whose source is 0 is not ready (`GHAL_CQ_IS_EVENT_READY`).
//! The hardware fills the low 56 bits from the descriptor's 56-bit CQ data
//! (`src_cq_data`, `synccmp_data`, `ghal_tx_desc_t` / `ghal_fma_desc_t`).
//!
//! Our choice (the uGNI packing is private to libugni): inside those 56 bits, `data` is
//! bits 0–47 (the 48-bit CQ-write payload; for other events `inst_id` / `msg_id` is its low
//! 32 bits and `tid` its high 16), the 2-bit event type is bits 48–49, `rem_overrun` bit 50,
//! bits 51–55 are zero.

use super::codes::{UnknownCode, code_enum};
use super::gni::{CqEventType, ReturnCode};
use super::layout::{FormatError, bit_format};

bit_format! {
    /// A CQ entry, as written to the CQ ring in host memory (8 bytes, little endian).
    pub struct Cqe, 8, {
        /// Event data: 48-bit CQ-write value, or `tid << 32 | inst_id` (our choice).
        data: 0, 48;
        /// `GNI_CQ_EVENT_TYPE_*` (our choice of position).
        event_type: 48, 2;
        /// The remote CQ of this transaction overran (`GNI_CQ_REM_OVERRUN`; our choice).
        rem_overrun: 50, 1;
        /// Which NIC block wrote the event (`GHAL_CQE_SOURCE_*`); 0 = slot empty.
        source: 56, 3;
        /// Hardware status, 0 = OK (`GNI_CQ_STATUS_OK`).
        status: 59, 4;
        /// Events were lost before this one (`GNI_CQ_OVERRUN`).
        overrun: 63, 1;
    }
}

code_enum! {
    /// `GHAL_CQE_SOURCE_*`: the block that generated the event.
    pub enum CqeSource: u8 {
        /// `GHAL_CQE_SOURCE_SSID_SREQ`: local FMA, source request.
        SsidSreq = 1,
        /// `GHAL_CQE_SOURCE_SSID_DREQ`: local FMA, destination request.
        SsidDreq = 2,
        /// `GHAL_CQE_SOURCE_SSID_SRSP`: local FMA, source response.
        SsidSrsp = 3,
        /// `GHAL_CQE_SOURCE_BTE`: local BTE.
        Bte = 4,
        /// `GHAL_CQE_SOURCE_RMT_SREQ`: remote, source request.
        RmtSreq = 5,
        /// `GHAL_CQE_SOURCE_RMT_DREQ`: remote, destination request.
        RmtDreq = 6,
        /// `GHAL_CQE_SOURCE_RMT_SRSP`: remote, source response.
        RmtSrsp = 7,
    }
}

impl CqeSource {
    /// `GHAL_CQ_SOURCE_RMT`: a remote event (source >= RMT_SREQ).
    pub const fn is_remote(self) -> bool {
        self as u8 >= CqeSource::RmtSreq as u8
    }

    /// `GHAL_CQ_SOURCE_SSID`: an FMA (SSID) event on the local side.
    pub const fn is_ssid(self) -> bool {
        (self as u8) & 0x3 != 0 && !self.is_remote()
    }
}

code_enum! {
    /// Hardware transaction status. Values are the public BTE TX status codes
    /// (`GHAL_TXD_STATUS_*`, `gemini_hw.h`); using them for the CQE `status` field is our
    /// choice.
    pub enum HwStatus: u8 {
        /// `GHAL_TXD_STATUS_OK`
        Ok = 0x0,
        /// `GHAL_TXD_STATUS_UNCORRECTABLE_ERR`
        UncorrectableErr = 0x2,
        /// `GHAL_TXD_STATUS_INV_CMD`
        InvCmd = 0x3,
        /// `GHAL_TXD_STATUS_UNCORRECTABLE_TRANSLATION_ERR`
        UncorrectableTranslationErr = 0x5,
        /// `GHAL_TXD_STATUS_VMDH_INV`
        VmdhInv = 0x6,
        /// `GHAL_TXD_STATUS_MDD_INV`
        MddInv = 0x7,
        /// `GHAL_TXD_STATUS_PROTECTION_VIOLATION`
        ProtectionViolation = 0x8,
        /// `GHAL_TXD_STATUS_MEM_BOUNDS_ERR`
        MemBoundsErr = 0x9,
        /// `GHAL_TXD_STATUS_SEQUENCE_TERMINATE`
        SequenceTerminate = 0xA,
        /// `GHAL_TXD_STATUS_REQUEST_TIMEOUT`
        RequestTimeout = 0xB,
        /// `GHAL_TXD_STATUS_HT_DATA_ERROR`
        HtDataError = 0xD,
    }
}

impl HwStatus {
    /// What `GNI_CqErrorRecoverable` answers (our choice: timeouts and terminated
    /// sequences may be retried; translation and protection errors may not).
    pub const fn recoverable(self) -> bool {
        matches!(
            self,
            HwStatus::Ok | HwStatus::RequestTimeout | HwStatus::SequenceTerminate
        )
    }
}

/// Bits of the CQE that the hardware copies from descriptor CQ data.
pub const HW_DATA_BITS: u32 = 56;
/// Bits of `data`.
pub const DATA_BITS: u32 = 48;

impl Cqe {
    /// The entry as the 64-bit word software reads.
    pub fn to_u64(&self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.encode()?))
    }

    /// Split a 64-bit word (never fails: every bit pattern has a reading).
    pub fn from_u64(v: u64) -> Cqe {
        // An 8-byte buffer always decodes; the fallback is unreachable.
        Cqe::decode(&v.to_le_bytes()).unwrap_or_default()
    }

    /// The software part (low 56 bits) a descriptor carries as CQ data.
    pub fn sw_data56(&self) -> Result<u64, FormatError> {
        Ok(self.to_u64()? & crate::bits::mask(HW_DATA_BITS))
    }

    /// Software event data: `tid << 32 | inst_id`, or a 48-bit CQ-write value, plus type.
    pub fn sw(event_type: CqEventType, data: u64) -> Cqe {
        Cqe {
            data: data & crate::bits::mask(DATA_BITS),
            event_type: event_type.code() as u64,
            ..Cqe::default()
        }
    }

    /// The entry the hardware writes: 56 bits of descriptor CQ data plus source and status.
    pub fn from_hw(source: CqeSource, status: HwStatus, cq_data56: u64) -> Cqe {
        let mut e = Cqe::from_u64(cq_data56 & crate::bits::mask(HW_DATA_BITS));
        e.source = source.code() as u64;
        e.status = status.code() as u64;
        e
    }

    /// Whether the slot holds an event (`source != 0`).
    pub const fn is_ready(&self) -> bool {
        self.source != 0
    }

    /// `GNI_CQ_GET_TYPE`.
    pub fn event_type(&self) -> Result<CqEventType, UnknownCode> {
        CqEventType::try_from(self.event_type as u8)
    }

    /// `GNI_CQ_GET_SOURCE`, typed.
    pub fn source(&self) -> Result<CqeSource, UnknownCode> {
        CqeSource::try_from(self.source as u8)
    }

    /// `GNI_CQ_GET_STATUS`, typed.
    pub fn status(&self) -> Result<HwStatus, UnknownCode> {
        HwStatus::try_from(self.status as u8)
    }

    /// `GNI_CQ_STATUS_OK`.
    pub const fn status_ok(&self) -> bool {
        self.status == 0
    }

    /// `GNI_CQ_GET_INST_ID` (32 bits on Gemini).
    pub const fn inst_id(&self) -> u32 {
        self.data as u32
    }

    /// `GNI_CQ_GET_MSG_ID` (same bits as the inst id: an SMSG local event carries the
    /// `msg_id` of the send instead).
    pub const fn msg_id(&self) -> u32 {
        self.data as u32
    }

    /// `GNI_CQ_GET_TID` (our choice: bits 32–47).
    pub const fn tid(&self) -> u16 {
        (self.data >> 32) as u16
    }

    /// `GNI_CQ_GET_DATA`: the 48-bit payload.
    pub const fn data(&self) -> u64 {
        self.data
    }

    /// What `GNI_CqGetEvent` returns for this entry: ERROR_RESOURCE on overrun,
    /// TRANSACTION_ERROR on a bad status, else SUCCESS.
    pub const fn get_event_rc(&self) -> ReturnCode {
        if self.overrun != 0 {
            ReturnCode::ErrorResource
        } else if self.status != 0 {
            ReturnCode::TransactionError
        } else {
            ReturnCode::Success
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_public_bits() {
        super::super::layout::check_table(Cqe::FIELDS, Cqe::SIZE).unwrap();
        let e = Cqe::from_hw(CqeSource::RmtSreq, HwStatus::MddInv, u64::MAX);
        let w = e.to_u64().unwrap();
        assert_eq!((w >> 56) & 7, 5);
        assert_eq!((w >> 59) & 0xF, 7);
        assert_eq!(w >> 63, 0);
        assert_eq!(Cqe::from_u64(w), e);
        assert!(e.source().unwrap().is_remote());
        assert!(CqeSource::SsidSrsp.is_ssid() && !CqeSource::Bte.is_ssid());
        assert!(!Cqe::default().is_ready());
        assert_eq!(e.get_event_rc(), ReturnCode::TransactionError);
        let sw = Cqe::sw(CqEventType::Smsg, 0x0001_2345_6789);
        assert_eq!(sw.inst_id(), 0x2345_6789);
        assert_eq!(sw.tid(), 1);
        assert_eq!(sw.event_type().unwrap(), CqEventType::Smsg);
    }
}
