//! Errors of the uGNI-like library. Each carries the `gni_return_t` uGNI reports for it
//! ([`GniError::rc`]); the numeric values are the real ones (`gni_pub.h`).

use driver::gemini::KgniError;
use driver::mem::MemError;
use driver::pci::MmioError;
use firmware_spec::gemini::gni::ReturnCode;
use thiserror::Error;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GniError {
    /// A uGNI return code decided by the library (a bad argument, no credits, ...).
    #[error("{rc}: {what}")]
    Rc {
        /// The return code.
        rc: ReturnCode,
        /// What it concerns.
        what: &'static str,
    },
    /// A kgni request failed (its `gni_return_t` is the driver's).
    #[error("kgni: {0}")]
    Kgni(#[from] KgniError),
    /// A store to or load from a mapped device page failed (a revoked mapping, a device
    /// gone): `GNI_RC_TRANSACTION_ERROR`.
    #[error("device access: {0}")]
    Mmio(#[from] MmioError),
    /// An access to mapped host memory failed: `GNI_RC_INVALID_STATE` when the mapping was
    /// revoked, else `GNI_RC_INVALID_PARAM`.
    #[error("memory access: {0}")]
    Memory(#[from] MemError),
}

impl GniError {
    /// An error with return code `rc`.
    pub(crate) fn new(rc: ReturnCode, what: &'static str) -> GniError {
        GniError::Rc { rc, what }
    }

    /// `GNI_RC_INVALID_PARAM` about `what`.
    pub(crate) fn param(what: &'static str) -> GniError {
        GniError::new(ReturnCode::InvalidParam, what)
    }

    /// `GNI_RC_INVALID_STATE` about `what`.
    pub(crate) fn state(what: &'static str) -> GniError {
        GniError::new(ReturnCode::InvalidState, what)
    }

    /// The `gni_return_t` of the error.
    pub fn rc(&self) -> ReturnCode {
        match self {
            GniError::Rc { rc, .. } => *rc,
            GniError::Kgni(e) => e.gni_rc(),
            GniError::Mmio(_) => ReturnCode::TransactionError,
            GniError::Memory(MemError::Revoked) => ReturnCode::InvalidState,
            GniError::Memory(_) => ReturnCode::InvalidParam,
        }
    }

    /// Whether this is `GNI_RC_NOT_DONE` (try again later).
    pub fn is_not_done(&self) -> bool {
        self.rc() == ReturnCode::NotDone
    }
}

/// Result of the library's calls.
pub type Result<T> = std::result::Result<T, GniError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_a_real_return_code() {
        assert_eq!(
            GniError::new(ReturnCode::NotDone, "x").rc(),
            ReturnCode::NotDone
        );
        assert!(GniError::new(ReturnCode::NotDone, "x").is_not_done());
        assert_eq!(
            GniError::from(KgniError::Busy("b")).rc(),
            ReturnCode::ErrorResource
        );
        assert_eq!(
            GniError::from(MmioError::DeviceGone).rc(),
            ReturnCode::TransactionError
        );
        assert_eq!(
            GniError::from(MemError::Revoked).rc(),
            ReturnCode::InvalidState
        );
        assert_eq!(GniError::param("p").to_string(), "GNI_RC_INVALID_PARAM: p");
    }
}
