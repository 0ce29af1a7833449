//! Errors of the provider and their libfabric error numbers.

#![forbid(unsafe_code)]

use crate::ffi::types::{FI_EINVAL, FI_EMSGSIZE, FI_ENOSYS, FI_EOPBADSTATE, FI_EOTHER};

/// An error of a provider call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening the NIC failed.
    #[error("nicemu: {0}")]
    Nic(String),
    /// The cxi transport failed.
    #[error("nicemu: {0}")]
    Transport(#[from] mpi::Error),
    /// A bad argument (unknown address, bad flags, ...).
    #[error("nicemu: {0}")]
    Invalid(String),
    /// A message longer than [`crate::ep::MAX_MSG_SIZE`].
    #[error("nicemu: a message of {0} bytes exceeds max_msg_size")]
    TooLong(usize),
    /// The object is not ready for this call (e.g. no CQ bound).
    #[error("nicemu: {0}")]
    State(String),
    /// Not implemented by this provider.
    #[error("nicemu: {0} is not supported")]
    Unsupported(&'static str),
}

impl Error {
    /// The (positive) libfabric error number.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Nic(_) | Error::Transport(_) => FI_EOTHER,
            Error::Invalid(_) => FI_EINVAL,
            Error::TooLong(_) => FI_EMSGSIZE,
            Error::State(_) => FI_EOPBADSTATE,
            Error::Unsupported(_) => FI_ENOSYS,
        }
    }
}

/// Results of provider calls.
pub type Result<T> = std::result::Result<T, Error>;
