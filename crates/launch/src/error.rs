//! Why a job failed ([`JobError`]): the vocabulary the launcher's modules share.

#![forbid(unsafe_code)]

use std::io;
use std::time::Duration;

use thiserror::Error;

/// Why a job failed.
#[derive(Debug, Error)]
pub enum JobError {
    /// The request cannot be run.
    #[error("{0}")]
    Invalid(String),
    /// The PMI server or a process could not be started.
    #[error("{what}: {source}")]
    Start {
        /// What was being started.
        what: String,
        /// The system's error.
        source: io::Error,
    },
    /// A rank failed (exited non-zero, was killed, aborted, left the PMI session); the
    /// other ranks were ended.
    #[error("{cause}; {ended}")]
    Failed {
        /// The first failure.
        cause: String,
        /// What became of the other ranks.
        ended: String,
    },
    /// The job ran longer than its timeout; every rank was killed.
    #[error("the job did not finish within {0:?} (--timeout); every rank was killed")]
    Timeout(Duration),
}
