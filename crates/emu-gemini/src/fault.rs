//! Why the NIC refused or failed a request, and how each reason is reported.
//!
//! One internal reason ([`Fault`]) maps to three hardware-visible reports, as listed in
//! docs/gemini-programming.md: the completion status ([`HwStatus`], public `GHAL_TXD_STATUS_*`
//! codes), the FMA descriptor error flag ([`FmaFlags`], public `GHAL_FMA_FLAG_*`) and the
//! `gni_return_t` code a user library returns for a locally rejected request (the model's
//! `ERR_RC` registers; our choice).

use firmware_spec::gemini::cqe::HwStatus;
use firmware_spec::gemini::fma::FmaFlags;
use firmware_spec::gemini::gni::ReturnCode;
use thiserror::Error;

/// A reason a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum Fault {
    /// Address or length not aligned as the operation needs (GET: 4 B, AMO: 8 B).
    #[error("misaligned request")]
    Misaligned,
    /// An unknown, unsupported (Aries-only) or malformed command.
    #[error("unknown or unsupported command")]
    BadCommand,
    /// The FMA descriptor or BTE channel is not enabled.
    #[error("descriptor or channel not enabled")]
    NotEnabled,
    /// A logical PE outside the descriptor's NTT group (`num_pes`).
    #[error("PE outside the NTT group")]
    PeOutsideGroup,
    /// The NTT entry of a logical PE was never programmed.
    #[error("NTT entry not programmed")]
    NttUnset,
    /// No sequence id (SSID) left on the FMA descriptor.
    #[error("no sequence id available")]
    NoSyncId,
    /// A length the operation cannot take.
    #[error("bad length")]
    BadLength,
    /// The memory domain descriptor is out of range or not valid.
    #[error("invalid memory domain")]
    MddInvalid,
    /// The vMDH entry of the ptag is not enabled.
    #[error("invalid vMDH entry")]
    VmdhInvalid,
    /// Protection tag mismatch, or a write into a read-only domain.
    #[error("protection violation")]
    Protection,
    /// The access leaves the domain's bounds.
    #[error("access out of bounds")]
    Bounds,
    /// An MRT entry on the way is not valid.
    #[error("address translation error")]
    Translation,
    /// The platform IOMMU or host memory refused the DMA.
    #[error("host DMA error")]
    Dma,
    /// A CQ write into a domain without a CQ.
    #[error("domain has no completion queue")]
    NoCq,
    /// No answer within the request timeout.
    #[error("request timed out")]
    Timeout,
    /// A BTE SEND found no receive buffer.
    #[error("no receive buffer")]
    NoRxBuffer,
    /// The target reported an error status.
    #[error("remote error {0:?}")]
    Remote(HwStatus),
}

impl Fault {
    /// The completion status reported in a CQE or a TXD.
    pub const fn status(self) -> HwStatus {
        match self {
            Fault::Misaligned
            | Fault::BadCommand
            | Fault::NotEnabled
            | Fault::PeOutsideGroup
            | Fault::NoSyncId
            | Fault::BadLength
            | Fault::NoCq => HwStatus::InvCmd,
            Fault::NttUnset | Fault::Translation => HwStatus::UncorrectableTranslationErr,
            Fault::MddInvalid => HwStatus::MddInv,
            Fault::VmdhInvalid => HwStatus::VmdhInv,
            Fault::Protection => HwStatus::ProtectionViolation,
            Fault::Bounds => HwStatus::MemBoundsErr,
            Fault::Dma => HwStatus::HtDataError,
            Fault::Timeout => HwStatus::RequestTimeout,
            Fault::NoRxBuffer => HwStatus::SequenceTerminate,
            Fault::Remote(s) => s,
        }
    }

    /// The `gni_return_t` a user library reports for this reason.
    pub const fn return_code(self) -> ReturnCode {
        match self {
            Fault::Misaligned => ReturnCode::AlignmentError,
            Fault::BadCommand => ReturnCode::IllegalOp,
            Fault::NotEnabled => ReturnCode::InvalidState,
            Fault::PeOutsideGroup | Fault::NttUnset | Fault::BadLength | Fault::Bounds => {
                ReturnCode::InvalidParam
            }
            Fault::NoCq => ReturnCode::InvalidParam,
            Fault::NoSyncId => ReturnCode::ErrorResource,
            Fault::MddInvalid | Fault::VmdhInvalid | Fault::Protection => {
                ReturnCode::PermissionError
            }
            Fault::Translation
            | Fault::Dma
            | Fault::Timeout
            | Fault::NoRxBuffer
            | Fault::Remote(_) => ReturnCode::TransactionError,
        }
    }

    /// The FMA descriptor error flag raised when an FMA request fails locally.
    pub const fn fma_flag(self) -> FmaFlags {
        match self {
            Fault::PeOutsideGroup | Fault::NttUnset => FmaFlags::NPES_ERROR,
            Fault::NoSyncId => FmaFlags::SNCID_ALLOC_ERROR,
            _ => FmaFlags::HT_REQ_ERROR,
        }
    }

    /// The reason behind a status code received from the network.
    pub fn from_wire(code: u8) -> Option<Fault> {
        match HwStatus::try_from(code) {
            Ok(HwStatus::Ok) => None,
            Ok(s) => Some(Fault::Remote(s)),
            Err(_) => Some(Fault::Remote(HwStatus::UncorrectableErr)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_reports_alignment_error() {
        assert_eq!(Fault::Misaligned.return_code(), ReturnCode::AlignmentError);
        assert_eq!(Fault::Misaligned.status(), HwStatus::InvCmd);
        assert_eq!(Fault::Misaligned.fma_flag(), FmaFlags::HT_REQ_ERROR);
        assert_eq!(Fault::NttUnset.fma_flag(), FmaFlags::NPES_ERROR);
    }

    #[test]
    fn wire_codes_round_trip() {
        assert_eq!(Fault::from_wire(0), None);
        assert_eq!(
            Fault::from_wire(HwStatus::MemBoundsErr.code()),
            Some(Fault::Remote(HwStatus::MemBoundsErr))
        );
        assert_eq!(
            Fault::from_wire(0xE),
            Some(Fault::Remote(HwStatus::UncorrectableErr))
        );
        assert_eq!(Fault::Bounds.status(), HwStatus::MemBoundsErr);
        assert_eq!(
            Fault::Remote(HwStatus::ProtectionViolation).return_code(),
            ReturnCode::TransactionError
        );
    }
}
