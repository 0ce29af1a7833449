//! The emulated backend's contract: what an in-process device must offer to appear on the
//! driver's PCI bus. The device models never see the driver, so whoever assembles a node (the
//! engine/cluster code) adapts a model to this trait.

use std::sync::Arc;

use emu_core::mmio::Mmio;

use super::dma::{DmaError, HostRange};
use super::wait::InterruptSink;

/// A PCI function implemented in this process.
///
/// Config space accesses reach the function already checked (dword-aligned, inside the 4 KiB
/// extended config space). DMA requests reach it already checked against the function's live
/// mappings (no overlap, unmap of exactly one mapping).
pub trait EmulatedFunction: Send + Sync {
    /// Read the config-space dword at `offset` (a multiple of 4, below 4096), little-endian.
    /// Registers that do not exist read as 0 (or all-ones, as the device model chooses).
    fn config_read(&self, offset: u16) -> u32;

    /// Write the config-space dword at `offset` (a multiple of 4, below 4096).
    fn config_write(&self, offset: u16, value: u32);

    /// The MMIO handle of BAR `index` (0..6), or `None` if the BAR is not implemented.
    fn bar(&self, index: u8) -> Option<Arc<dyn Mmio>>;

    /// How many MSI-X vectors the function has (0: no MSI-X).
    fn msix_vectors(&self) -> u32;

    /// Route the function's MSI-X messages to `sink` (vector `i` raises `sink.fire(i)`), or stop
    /// delivering them (`None`). The sink has at most `msix_vectors()` vectors.
    fn set_interrupt_sink(&self, sink: Option<InterruptSink>);

    /// Let the device reach `host` at device addresses `iova..iova+host.len` (program the
    /// platform IOMMU the device's DMA port translates through).
    fn dma_map(&self, iova: u64, host: HostRange) -> Result<(), DmaError>;

    /// Remove the mapping made by `dma_map(iova, host)` with `host.len == len`.
    fn dma_unmap(&self, iova: u64, len: u64) -> Result<(), DmaError>;
}
