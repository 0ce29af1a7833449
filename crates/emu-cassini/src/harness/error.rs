//! How a harness operation fails.

use emu_core::engine::EngineError;
use emu_core::mmio::MmioError;
use thiserror::Error;

/// Why a harness operation failed.
#[derive(Debug, Error)]
pub enum HarnessError {
    /// The engine refused an operation.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// An MMIO access failed.
    #[error(transparent)]
    Mmio(#[from] MmioError),
    /// Host memory could not be allocated or accessed.
    #[error("host memory: {0}")]
    Memory(String),
    /// A command ring is full.
    #[error("command queue {0} is full")]
    CqFull(u16),
    /// Nothing arrived in time.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// Bad argument (e.g. a command of the wrong size).
    #[error("{0}")]
    Invalid(String),
}

pub(super) fn mem_err<E: std::fmt::Display>(e: E) -> HarnessError {
    HarnessError::Memory(e.to_string())
}
