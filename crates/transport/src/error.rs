//! MPI error classes (MPI 4.1 §9.4) and the errors of this implementation, shared by the
//! transports and the MPI layer above them (as an MPICH netmod returns MPI error codes).

use thiserror::Error;

/// What went wrong. The variant names follow the MPI error classes where one applies.
#[derive(Debug, Error)]
pub enum Error {
    /// `MPI_ERR_TRUNCATE`: a message was longer than the receive buffer.
    #[error("MPI_ERR_TRUNCATE: a message of {len} bytes arrived for a buffer of {capacity}")]
    Truncate {
        /// The message length in bytes.
        len: usize,
        /// The receive buffer's capacity in bytes.
        capacity: usize,
    },
    /// `MPI_ERR_RANK`: a rank outside the communicator.
    #[error("MPI_ERR_RANK: rank {rank} is not in a communicator of size {size}")]
    Rank {
        /// The rank given.
        rank: i64,
        /// The communicator size.
        size: usize,
    },
    /// `MPI_ERR_TAG`: a tag outside `0..=TAG_UB` (or a wildcard where none is allowed).
    #[error("MPI_ERR_TAG: tag {0} is not valid here")]
    Tag(i64),
    /// `MPI_ERR_COUNT` / `MPI_ERR_BUFFER`: sizes that do not fit the operation.
    #[error("MPI_ERR_COUNT: {0}")]
    Count(String),
    /// `MPI_ERR_ARG`: an argument that cannot be right.
    #[error("MPI_ERR_ARG: {0}")]
    Arg(String),
    /// `MPI_ERR_OP`: an operation that does not apply to the datatype.
    #[error("MPI_ERR_OP: {0}")]
    Op(String),
    /// `MPI_ERR_WIN` / `MPI_ERR_RMA_*`: a bad window access.
    #[error("MPI_ERR_RMA: {0}")]
    Rma(String),
    /// A bad value of an environment knob, found at init.
    #[error("{var}={value:?}: {reason}")]
    Config {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The network failed (`MPI_ERR_OTHER` with the transport's message). Fatal resource
    /// exhaustion messages of the real stacks arrive here verbatim.
    #[error("{0}")]
    Transport(String),
    /// An operation waited longer than the transport's fatal timeout.
    #[error("timed out: {0}")]
    Timeout(String),
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl From<pmi::Error> for Error {
    fn from(e: pmi::Error) -> Self {
        match e {
            pmi::Error::Config { var, value, reason } => Error::Config { var, value, reason },
            pmi::Error::Rank { rank, size } => Error::Rank { rank, size },
            pmi::Error::Failed(why) => Error::Transport(why),
        }
    }
}
