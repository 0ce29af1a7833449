//! The MMIO seam: a region (a BAR, or part of one) that is read and written at an offset with
//! a width of 1, 2, 4 or 8 bytes (`data.len()`), little-endian. The emulated backend implements
//! it by calling a device model (trap-and-emulate); the vfio backend with volatile loads and
//! stores on an mmap'd BAR. Userlib doorbells and driver CSR programming use nothing else.
//!
//! A block copy to a write-combining region (a low-latency command launch) is
//! [`Mmio::write_burst`]: on a CPU the consecutive 64-bit stores fill a write-combining
//! buffer that leaves as one PCIe write; an emulated region delivers the burst to the device
//! model as one access ([`crate::engine::DeviceModel::mmio_write_burst`]) instead of one
//! trap per store.

use thiserror::Error;

/// Why an MMIO access failed. Never a panic: a bad access is reported to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MmioError {
    #[error("no region mapped at address {addr:#x}")]
    Unmapped { addr: u64 },
    #[error("access of width {width} at offset {offset:#x} is not supported by this region")]
    BadWidth { offset: u64, width: usize },
    #[error("access at offset {offset:#x} (width {width}) is outside the region of size {size:#x}")]
    OutOfRange {
        offset: u64,
        width: usize,
        size: u64,
    },
    #[error("access at offset {offset:#x} is not aligned to its width {width}")]
    Misaligned { offset: u64, width: usize },
    #[error("the device is gone (reset, removed or shut down)")]
    DeviceGone,
}

/// Largest write-combined burst in bytes ([`Mmio::write_burst`]): two 64 B write-combining
/// buffers, the largest low-latency command copy (Cassini's 128 B `ll_128` windows).
pub const MAX_BURST: usize = 128;

/// Check the shape of a burst: a multiple of 8 bytes, 8 to [`MAX_BURST`] of them.
pub fn check_burst_len(offset: u64, len: usize) -> Result<(), MmioError> {
    if len == 0 || len > MAX_BURST || !len.is_multiple_of(8) {
        return Err(MmioError::BadWidth { offset, width: len });
    }
    Ok(())
}

/// A memory-mapped I/O region as seen from the CPU.
pub trait Mmio: Send + Sync {
    /// Size of the region in bytes.
    fn size(&self) -> u64;
    /// Load `data.len()` bytes (1, 2, 4 or 8) at `offset`.
    fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError>;
    /// Store `data.len()` bytes (1, 2, 4 or 8) at `offset`.
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError>;

    fn read_u32(&self, offset: u64) -> Result<u32, MmioError> {
        let mut b = [0u8; 4];
        self.read(offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn read_u64(&self, offset: u64) -> Result<u64, MmioError> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn write_u32(&self, offset: u64, v: u32) -> Result<(), MmioError> {
        self.write(offset, &v.to_le_bytes())
    }
    fn write_u64(&self, offset: u64, v: u64) -> Result<(), MmioError> {
        self.write(offset, &v.to_le_bytes())
    }

    /// Store `data` at `offset` as one write-combined burst, the way a CPU copies a block to
    /// a write-combining mapping with consecutive 64-bit stores. `data.len()` is a multiple
    /// of 8 from 8 to [`MAX_BURST`] (else [`MmioError::BadWidth`]).
    ///
    /// The default issues the 64-bit stores in order, stopping at the first error: what
    /// the CPU does, and what a region without a cheaper path (a real BAR) should do.
    /// Emulated regions override it to hand the whole burst to the device in one access.
    fn write_burst(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        check_burst_len(offset, data.len())?;
        for (i, q) in data.chunks_exact(8).enumerate() {
            self.write(offset + 8 * i as u64, q)?;
        }
        Ok(())
    }
}
