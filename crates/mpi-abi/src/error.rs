//! Errors of the C bindings: an MPI error class and a message, the classes' texts
//! (`MPI_Error_string`) and the mapping from the mpi crate's errors.

#![forbid(unsafe_code)]

use std::ffi::c_int;

use crate::consts::*;

/// An error of an MPI call: its class (the code returned) and what went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbiError {
    /// The MPI error class.
    pub class: c_int,
    /// A message naming the problem.
    pub msg: String,
}

/// Results of the bindings' logic.
pub type AResult<T> = Result<T, AbiError>;

impl AbiError {
    /// An error of `class`.
    pub fn new(class: c_int, msg: impl Into<String>) -> Self {
        AbiError {
            class,
            msg: msg.into(),
        }
    }

    /// A call this library does not implement (`MPI_ERR_UNSUPPORTED_OPERATION`).
    pub fn unsupported(what: &str) -> Self {
        Self::new(
            MPI_ERR_UNSUPPORTED_OPERATION,
            format!("{what} is not supported by nicemu's MPI library (see docs/c-abi.md)"),
        )
    }
}

impl From<mpi::Error> for AbiError {
    fn from(e: mpi::Error) -> Self {
        use mpi::Error as E;
        let class = match &e {
            E::Truncate { .. } => MPI_ERR_TRUNCATE,
            E::Rank { .. } => MPI_ERR_RANK,
            E::Tag(_) => MPI_ERR_TAG,
            E::Count(_) => MPI_ERR_COUNT,
            E::Arg(_) => MPI_ERR_ARG,
            E::Op(_) => MPI_ERR_OP,
            E::Rma(m) if m.contains("outside") => MPI_ERR_RMA_RANGE,
            E::Rma(_) => MPI_ERR_RMA_SYNC,
            E::Config { .. } | E::Transport(_) | E::Timeout(_) => MPI_ERR_OTHER,
        };
        AbiError::new(class, e.to_string())
    }
}

/// The name and text of an error class (`MPI_Error_string` of a class).
pub fn class_text(class: c_int) -> Option<&'static str> {
    Some(match class {
        MPI_SUCCESS => "MPI_SUCCESS: no error",
        MPI_ERR_BUFFER => "MPI_ERR_BUFFER: invalid buffer pointer",
        MPI_ERR_COUNT => "MPI_ERR_COUNT: invalid count argument",
        MPI_ERR_TYPE => "MPI_ERR_TYPE: invalid datatype",
        MPI_ERR_TAG => "MPI_ERR_TAG: invalid tag",
        MPI_ERR_COMM => "MPI_ERR_COMM: invalid communicator",
        MPI_ERR_RANK => "MPI_ERR_RANK: invalid rank",
        MPI_ERR_REQUEST => "MPI_ERR_REQUEST: invalid request",
        MPI_ERR_ROOT => "MPI_ERR_ROOT: invalid root",
        MPI_ERR_GROUP => "MPI_ERR_GROUP: invalid group",
        MPI_ERR_OP => "MPI_ERR_OP: invalid operation",
        11 => "MPI_ERR_TOPOLOGY: invalid topology",
        12 => "MPI_ERR_DIMS: invalid dimension argument",
        MPI_ERR_ARG => "MPI_ERR_ARG: invalid argument of some other kind",
        MPI_ERR_UNKNOWN => "MPI_ERR_UNKNOWN: unknown error",
        MPI_ERR_TRUNCATE => "MPI_ERR_TRUNCATE: message truncated",
        MPI_ERR_OTHER => "MPI_ERR_OTHER: known error not in this list",
        MPI_ERR_INTERN => "MPI_ERR_INTERN: internal error",
        18 => "MPI_ERR_PENDING: pending request",
        MPI_ERR_IN_STATUS => "MPI_ERR_IN_STATUS: error code is in status",
        MPI_ERR_INFO_KEY => "MPI_ERR_INFO_KEY: invalid info key",
        MPI_ERR_INFO_NOKEY => "MPI_ERR_INFO_NOKEY: info key not defined",
        MPI_ERR_INFO => "MPI_ERR_INFO: invalid info object",
        MPI_ERR_KEYVAL => "MPI_ERR_KEYVAL: invalid attribute key",
        MPI_ERR_LOCKTYPE => "MPI_ERR_LOCKTYPE: invalid lock type",
        MPI_ERR_NO_MEM => "MPI_ERR_NO_MEM: out of memory",
        MPI_ERR_RMA_ATTACH => "MPI_ERR_RMA_ATTACH: memory cannot be attached",
        MPI_ERR_RMA_RANGE => "MPI_ERR_RMA_RANGE: target memory is not part of the window",
        MPI_ERR_RMA_SYNC => "MPI_ERR_RMA_SYNC: wrong synchronization of RMA calls",
        MPI_ERR_SIZE => "MPI_ERR_SIZE: invalid size",
        MPI_ERR_UNSUPPORTED_OPERATION => "MPI_ERR_UNSUPPORTED_OPERATION: operation not supported",
        MPI_ERR_WIN => "MPI_ERR_WIN: invalid window",
        MPI_ERR_RMA_FLAVOR => "MPI_ERR_RMA_FLAVOR: wrong window flavor",
        MPI_ERR_ERRHANDLER => "MPI_ERR_ERRHANDLER: invalid error handler",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_errors_map_to_classes() {
        let e: AbiError = mpi::Error::Rank { rank: 5, size: 1 }.into();
        assert_eq!(e.class, MPI_ERR_RANK);
        assert!(e.msg.contains("rank 5"));
        let e: AbiError = mpi::Error::Truncate {
            len: 8,
            capacity: 4,
        }
        .into();
        assert_eq!(e.class, MPI_ERR_TRUNCATE);
        assert_eq!(AbiError::unsupported("MPI_Foo").class, 55);
        assert!(class_text(MPI_ERR_TAG).unwrap().starts_with("MPI_ERR_TAG"));
        assert!(class_text(9999).is_none());
    }
}
