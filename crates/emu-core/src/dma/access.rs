//! What a DMA access is made of: the permissions it needs ([`Perm`]), the pieces a
//! translation yields ([`Segment`]), and why an access ([`DmaError`]) or a map request
//! ([`MapError`]) fails.

use std::fmt;

use thiserror::Error;

use crate::memory::MemoryError;

/// Access permissions of a mapping, and the access an operation needs.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Default)]
pub struct Perm(u8);

impl Perm {
    /// No access.
    pub const NONE: Perm = Perm(0);
    /// The device may read (host memory -> device).
    pub const READ: Perm = Perm(1);
    /// The device may write (device -> host memory).
    pub const WRITE: Perm = Perm(2);
    /// Read and write.
    pub const RW: Perm = Perm(3);

    /// Build from two flags.
    pub const fn new(read: bool, write: bool) -> Perm {
        Perm((read as u8) | ((write as u8) << 1))
    }
    /// Whether every permission in `other` is also in `self`.
    pub const fn contains(self, other: Perm) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether reading is allowed.
    pub const fn can_read(self) -> bool {
        self.contains(Perm::READ)
    }
    /// Whether writing is allowed.
    pub const fn can_write(self) -> bool {
        self.contains(Perm::WRITE)
    }
    /// Whether no permission is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for Perm {
    type Output = Perm;
    fn bitor(self, rhs: Perm) -> Perm {
        Perm(self.0 | rhs.0)
    }
}

impl fmt::Display for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = if self.can_read() { "R" } else { "-" };
        let w = if self.can_write() { "W" } else { "-" };
        write!(f, "{r}{w}")
    }
}

impl fmt::Debug for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Perm({self})")
    }
}

/// A contiguous piece of a translated range: `len` bytes at `addr` of the next address space
/// down (bus address for a device table, host physical address for the IOMMU).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// First byte in the output address space.
    pub addr: u64,
    /// Length in bytes (never 0 when produced by a translation).
    pub len: u64,
}

/// Why a DMA access failed. Nothing was read or written when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DmaError {
    /// No mapping covers `iova` (the first unmapped byte of the access).
    #[error("no translation for IOVA {iova:#x}")]
    NoTranslation { iova: u64 },
    /// The mapping covering `iova` lacks a permission the access needs.
    #[error("IOVA {iova:#x}: access {needed} not permitted")]
    PermissionDenied { iova: u64, needed: Perm },
    /// `iova + len` overflows, or (passthrough) the range runs past the end of host memory.
    #[error("DMA range [{iova:#x}, +{len:#x}) is out of bounds")]
    OutOfBounds { iova: u64, len: u64 },
    /// An atomic access at an IOVA that is not naturally aligned or does not translate to
    /// one contiguous host range.
    #[error("atomic DMA access at IOVA {iova:#x} is not aligned to {align} bytes")]
    Misaligned { iova: u64, align: u64 },
    /// A scatter/gather list whose total length differs from the buffer.
    #[error("segments cover {segments:#x} bytes but the buffer has {buffer:#x}")]
    LengthMismatch { segments: u64, buffer: u64 },
    /// The translation pointed outside host memory.
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

/// Why a map or unmap request was refused. The table is unchanged when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MapError {
    /// A mapping of zero bytes.
    #[error("mapping of zero bytes")]
    ZeroLength,
    /// `iova + len` or `target + len` overflows 64 bits.
    #[error("mapping [{iova:#x}, +{len:#x}) overflows the address space")]
    Overflow { iova: u64, len: u64 },
    /// The new mapping overlaps an existing one.
    #[error("mapping [{iova:#x}, +{len:#x}) overlaps an existing mapping")]
    Overlap { iova: u64, len: u64 },
    /// Unmap of a range that is not entirely mapped.
    #[error("unmap of [{iova:#x}, +{len:#x}) which is not entirely mapped")]
    NotMapped { iova: u64, len: u64 },
    /// Map/unmap on an IOMMU in passthrough mode.
    #[error("the IOMMU is in passthrough mode")]
    Passthrough,
}
