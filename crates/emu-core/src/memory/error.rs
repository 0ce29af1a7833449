//! Why a host-memory access ([`MemoryError`]) or a page allocation ([`AllocError`]) failed.

use thiserror::Error;

use crate::procmem::ProcError;

/// Why a host-memory access failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MemoryError {
    /// Some byte of `[addr, addr + len)` is outside the node's RAM (or the range overflows).
    #[error("host memory access [{addr:#x}, +{len:#x}) is out of range")]
    OutOfRange { addr: u64, len: u64 },
    /// An atomic access of `align` bytes at an address that is not a multiple of `align`.
    #[error("atomic access at {addr:#x} is not aligned to {align} bytes")]
    Misaligned { addr: u64, align: u64 },
    /// The RAM could not be created (bad size or the mmap failed).
    #[error("cannot create host memory of {size:#x} bytes: {reason}")]
    Create { size: u64, reason: String },
    /// [`HostMemory::restore`] of a snapshot of other RAM, or of one older than the RAM's
    /// latest snapshot.
    #[error("cannot restore host memory: {0}")]
    Snapshot(&'static str),
    /// An access outside the RAM of a node hosted in this process, to the process's own
    /// memory, failed ([`crate::procmem`]).
    #[error(transparent)]
    Process(#[from] ProcError),
}

/// Why a page allocation or free failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AllocError {
    /// A request for zero bytes.
    #[error("allocation of zero bytes")]
    ZeroLength,
    /// The alignment is not a power of two.
    #[error("alignment {align:#x} is not a power of two")]
    BadAlignment { align: u64 },
    /// No free range is large enough (after alignment).
    #[error("out of memory: no free range of {len:#x} bytes aligned to {align:#x}")]
    Exhausted { len: u64, align: u64 },
    /// `free` of a range that is not exactly one live allocation.
    #[error("free of [{start:#x}, +{len:#x}) which is not a live allocation")]
    NotAllocated { start: u64, len: u64 },
    /// The allocator's managed range is invalid (empty, unaligned or overflowing).
    #[error("invalid allocator range [{base:#x}, +{size:#x})")]
    BadRange { base: u64, size: u64 },
}
