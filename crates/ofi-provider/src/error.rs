//! Errors of the provider and their libfabric error numbers.

#![forbid(unsafe_code)]

use crate::ffi::types::{
    FI_EAGAIN, FI_EINVAL, FI_EMSGSIZE, FI_ENOMEM, FI_ENOSYS, FI_EOPBADSTATE, FI_EOTHER,
};

/// An error of a provider call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening the NIC failed.
    #[error("nicemu: {0}")]
    Nic(String),
    /// The cxi transport failed.
    #[error("nicemu: {0}")]
    Transport(#[from] transport::Error),
    /// A bad argument (unknown address, bad flags, ...).
    #[error("nicemu: {0}")]
    Invalid(String),
    /// A message longer than [`crate::ep::MAX_MSG_SIZE`].
    #[error("nicemu: a message of {0} bytes exceeds max_msg_size")]
    TooLong(usize),
    /// The object is not ready for this call (e.g. no CQ bound).
    #[error("nicemu: {0}")]
    State(String),
    /// The emulated node's memory ([`crate::nic::node_memory`]) cannot hold the staging
    /// buffer of one more message in flight.
    #[error(
        "nicemu: {0} (the emulated node has {mib} MiB for the staging buffers of every message in flight; complete some before posting more)",
        mib = crate::nic::node_memory() >> 20
    )]
    OutOfMemory(String),
    /// The operation cannot start now for want of a resource that completions give back
    /// (`-FI_EAGAIN`: the application progresses its CQs and tries again).
    #[error("nicemu: {0}; try again once operations in flight have completed")]
    Again(String),
    /// Not implemented by this provider.
    #[error("nicemu: {0} is not supported")]
    Unsupported(&'static str),
    /// A failure with its own libfabric error number (memory registration keys, ...).
    #[error("nicemu: {1}")]
    Errno(i32, String),
}

impl Error {
    /// The (positive) libfabric error number.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Nic(_) | Error::Transport(_) => FI_EOTHER,
            Error::Invalid(_) => FI_EINVAL,
            Error::TooLong(_) => FI_EMSGSIZE,
            Error::State(_) => FI_EOPBADSTATE,
            Error::OutOfMemory(_) => FI_ENOMEM,
            Error::Again(_) => FI_EAGAIN,
            Error::Unsupported(_) => FI_ENOSYS,
            Error::Errno(n, _) => *n,
        }
    }
}

/// A transport error of posting a message: out of node memory when a staging buffer could
/// not be allocated.
pub fn posting(e: transport::Error) -> Error {
    let text = e.to_string();
    if text.contains("staging buffer") {
        Error::OutOfMemory(text)
    } else {
        Error::Transport(e)
    }
}

/// Results of provider calls.
pub type Result<T> = std::result::Result<T, Error>;
