//! The one error type of the library: what the driver refused (an errno), what the device
//! reported (a return code), or why the library itself refused.

use driver::cassini::Errno;
use driver::mem::MemError;
use driver::pci::MmioError;
use firmware_spec::cassini::layout::FormatError;
use firmware_spec::cassini::rc::ReturnCode;
use thiserror::Error;

/// Why a `cxi` call failed. [`CxiError::errno`] gives the `-errno` a libcxi call would
/// return.
#[derive(Debug, Error)]
pub enum CxiError {
    /// The driver refused a control operation (`write()` returned `-errno`).
    #[error("driver: {0}")]
    Driver(#[from] Errno),
    /// The device reported a return code (a failed command queue, an error event).
    #[error("device return code {0}")]
    Device(ReturnCode),
    /// A command queue has no room for the command (`-EAGAIN`); ring the doorbell and retry
    /// once the device has read some commands.
    #[error("command queue full")]
    Again,
    /// Nothing happened before the timeout.
    #[error("timed out")]
    Timeout,
    /// A mapped ring or user buffer could not be accessed (revoked mapping, bad offset).
    #[error("memory: {0}")]
    Memory(#[from] MemError),
    /// A doorbell or CSR access through a mapped BAR window failed.
    #[error("mmio: {0}")]
    Mmio(#[from] MmioError),
    /// A command or event did not fit its format (a payload too long, an undecodable event).
    #[error("format: {0}")]
    Format(#[from] FormatError),
    /// A bad argument (checked by the library before anything reaches the driver).
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// No device with that index.
    #[error("no device cxi{0}")]
    NoDevice(u32),
    /// A mapping token gave the wrong kind of mapping.
    #[error("unexpected mapping for {0}")]
    Mapping(&'static str),
}

impl CxiError {
    /// The negative errno a libcxi function returns for this error (`-EINVAL` = -22).
    pub fn errno(&self) -> i32 {
        const EAGAIN: i32 = 11;
        const EFAULT: i32 = 14;
        const ENODEV: i32 = 19;
        const EINVAL: i32 = 22;
        const EIO: i32 = 5;
        const ETIMEDOUT: i32 = 110;
        -match self {
            CxiError::Driver(e) => e.code(),
            CxiError::Device(_) | CxiError::Mmio(_) => EIO,
            CxiError::Again => EAGAIN,
            CxiError::Timeout => ETIMEDOUT,
            CxiError::Memory(_) => EFAULT,
            CxiError::Format(_) | CxiError::Invalid(_) | CxiError::Mapping(_) => EINVAL,
            CxiError::NoDevice(_) => ENODEV,
        }
    }
}

/// Result of a `cxi` call.
pub type Result<T> = std::result::Result<T, CxiError>;
