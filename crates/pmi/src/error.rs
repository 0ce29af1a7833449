//! What a PMI call can fail with.

use thiserror::Error;

/// Why a PMI call failed.
#[derive(Debug, Error)]
pub enum Error {
    /// A bad value of a launcher variable (`PMI_FD`, `PMI_PORT`, `PMI_RANK`, ...).
    #[error("{var}={value:?}: {reason}")]
    Config {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A rank outside the job.
    #[error("MPI_ERR_RANK: rank {rank} is not in a communicator of size {size}")]
    Rank {
        /// The rank given.
        rank: i64,
        /// The job's size.
        size: usize,
    },
    /// The exchange failed: the launcher broke the protocol or went away, a key was not
    /// published, or the job was aborted. The message says which.
    #[error("{0}")]
    Failed(String),
}

/// Results of PMI calls.
pub type Result<T> = std::result::Result<T, Error>;
