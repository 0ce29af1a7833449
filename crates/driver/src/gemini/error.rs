//! Errors of the kgni uAPI: each has the errno a kernel ioctl would return and the
//! `gni_return_t` the user library reports for it.

use std::fmt;

use firmware_spec::gemini::gni::ReturnCode;
use thiserror::Error;

use super::hw::HwError;

/// The kinds of objects a client names by handle.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Object {
    /// A communication domain.
    Cdm,
    /// A completion queue.
    Cq,
    /// An FMA descriptor.
    Fma,
    /// A memory registration (memory handle).
    MemHandle,
    /// An endpoint.
    Endpoint,
    /// A datagram.
    Datagram,
    /// A job (ptag/cookie domain).
    Job,
    /// An mmap token.
    MmapToken,
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Object::Cdm => "CDM",
            Object::Cq => "CQ",
            Object::Fma => "FMA descriptor",
            Object::MemHandle => "memory handle",
            Object::Endpoint => "endpoint",
            Object::Datagram => "datagram",
            Object::Job => "job",
            Object::MmapToken => "mmap token",
        })
    }
}

/// The allocators of the driver.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    /// CDM slots (ours: a bounded kernel table).
    Cdm,
    /// CQ descriptors.
    Cq,
    /// General (user) FMA descriptors.
    Fma,
    /// OS FMA descriptors.
    FmaOs,
    /// Memory domain descriptors.
    Mdd,
    /// MRT entries.
    Mrt,
    /// NTT entries.
    Ntt,
    /// BTE TX ring slots.
    BteSlot,
    /// Endpoints.
    Endpoint,
    /// Datagram slots (the peer's unexpected list, or this NIC's outstanding posts).
    Datagram,
    /// Host memory for rings.
    Memory,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Resource::Cdm => "CDM slot",
            Resource::Cq => "CQ descriptor",
            Resource::Fma => "FMA descriptor",
            Resource::FmaOs => "OS FMA descriptor",
            Resource::Mdd => "MDD",
            Resource::Mrt => "MRT entry",
            Resource::Ntt => "NTT entry",
            Resource::BteSlot => "BTE TX slot",
            Resource::Endpoint => "endpoint",
            Resource::Datagram => "datagram slot",
            Resource::Memory => "host memory",
        })
    }
}

/// Why a kgni request failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KgniError {
    /// A malformed argument (`EINVAL`, `GNI_RC_INVALID_PARAM`).
    #[error("invalid argument: {0}")]
    InvalidParam(&'static str),
    /// No object with this handle (`EINVAL`, `GNI_RC_INVALID_PARAM`).
    #[error("no {kind} with handle {handle:#x}")]
    NoSuchHandle {
        /// Object kind.
        kind: Object,
        /// The handle given.
        handle: u64,
    },
    /// The object belongs to another client (`EPERM`, `GNI_RC_PERMISSION_ERROR`).
    #[error("{kind} {handle:#x} belongs to another client")]
    NotOwner {
        /// Object kind.
        kind: Object,
        /// The handle given.
        handle: u64,
    },
    /// The ptag/cookie check or a privilege check failed (`EPERM`,
    /// `GNI_RC_PERMISSION_ERROR`).
    #[error("permission denied: {0}")]
    Permission(&'static str),
    /// A user address outside the client's memory (`EFAULT`, `GNI_RC_INVALID_PARAM`).
    #[error("bad address: {0}")]
    Fault(&'static str),
    /// An allocator is exhausted (`ENOSPC`, `GNI_RC_ERROR_RESOURCE`).
    #[error("no free {0}")]
    NoResource(Resource),
    /// The job's limit for a resource is reached (`EDQUOT`, `GNI_RC_ERROR_RESOURCE`).
    #[error("the job's {0} limit is reached")]
    JobLimit(Resource),
    /// The object is still in use (`EBUSY`, `GNI_RC_ERROR_RESOURCE`).
    #[error("busy: {0}")]
    Busy(&'static str),
    /// The object is in the wrong state (`EINVAL`, `GNI_RC_INVALID_STATE`).
    #[error("invalid state: {0}")]
    InvalidState(&'static str),
    /// Host memory for a ring could not be allocated (`ENOMEM`, `GNI_RC_ERROR_NOMEM`).
    #[error("out of memory")]
    NoMemory,
    /// Nothing to report yet (`EAGAIN`, `GNI_RC_NOT_DONE`).
    #[error("not done")]
    NotDone,
    /// A probe found nothing (`ENOMSG`, `GNI_RC_NO_MATCH`).
    #[error("no match")]
    NoMatch,
    /// A wait ended without its condition (`ETIMEDOUT`, `GNI_RC_TIMEOUT`).
    #[error("timed out")]
    Timeout,
    /// A post descriptor was refused before reaching the NIC, with the `gni_return_t` of
    /// `GNI_PostRdma` (`EINVAL`).
    #[error("post rejected: {0}")]
    Post(ReturnCode),
    /// A feature the emulated Gemini or this driver does not offer (`EOPNOTSUPP`,
    /// `GNI_RC_ILLEGAL_OP`).
    #[error("not supported: {0}")]
    Unsupported(&'static str),
    /// The hardware refused an access (`EIO`, `GNI_RC_TRANSACTION_ERROR`).
    #[error(transparent)]
    Hw(#[from] HwError),
}

impl KgniError {
    /// The errno a kernel ioctl returns for this error (positive value).
    pub fn errno(&self) -> i32 {
        match self {
            KgniError::InvalidParam(_)
            | KgniError::NoSuchHandle { .. }
            | KgniError::InvalidState(_)
            | KgniError::Post(_) => libc::EINVAL,
            KgniError::NotOwner { .. } | KgniError::Permission(_) => libc::EPERM,
            KgniError::Fault(_) => libc::EFAULT,
            KgniError::NoResource(_) => libc::ENOSPC,
            KgniError::JobLimit(_) => libc::EDQUOT,
            KgniError::Busy(_) => libc::EBUSY,
            KgniError::NoMemory => libc::ENOMEM,
            KgniError::NotDone => libc::EAGAIN,
            KgniError::NoMatch => libc::ENOMSG,
            KgniError::Timeout => libc::ETIMEDOUT,
            KgniError::Unsupported(_) => libc::EOPNOTSUPP,
            KgniError::Hw(_) => libc::EIO,
        }
    }

    /// The `gni_return_t` uGNI reports for this error.
    pub fn gni_rc(&self) -> ReturnCode {
        match self {
            KgniError::InvalidParam(_) | KgniError::NoSuchHandle { .. } | KgniError::Fault(_) => {
                ReturnCode::InvalidParam
            }
            KgniError::NotOwner { .. } | KgniError::Permission(_) => ReturnCode::PermissionError,
            KgniError::NoResource(_) | KgniError::JobLimit(_) | KgniError::Busy(_) => {
                ReturnCode::ErrorResource
            }
            KgniError::InvalidState(_) => ReturnCode::InvalidState,
            KgniError::NoMemory => ReturnCode::ErrorNomem,
            KgniError::NotDone => ReturnCode::NotDone,
            KgniError::NoMatch => ReturnCode::NoMatch,
            KgniError::Timeout => ReturnCode::Timeout,
            KgniError::Post(rc) => *rc,
            KgniError::Unsupported(_) => ReturnCode::IllegalOp,
            KgniError::Hw(_) => ReturnCode::TransactionError,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        let e = KgniError::NotOwner {
            kind: Object::Cq,
            handle: 3,
        };
        assert_eq!(e.errno(), libc::EPERM);
        assert_eq!(e.gni_rc(), ReturnCode::PermissionError);
        assert_eq!(e.to_string(), "CQ 0x3 belongs to another client");
        assert_eq!(
            KgniError::NoResource(Resource::Mdd).gni_rc(),
            ReturnCode::ErrorResource
        );
        assert_eq!(
            KgniError::Post(ReturnCode::AlignmentError).gni_rc(),
            ReturnCode::AlignmentError
        );
        assert_eq!(KgniError::Timeout.errno(), libc::ETIMEDOUT);
    }
}
