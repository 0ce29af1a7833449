//! DMA: the port through which a device reads and writes host memory (architecture seam 2).
//!
//! A device never holds a host pointer. It names memory by an I/O virtual address (IOVA) and
//! its [`DmaPort`] translates that address through the platform [`Iommu`] into host physical
//! ranges of a [`HostMemory`], checking permissions and bounds. A bad IOVA is a [`DmaError`]
//! the device turns into whatever the hardware reports (an error event, a return code); it
//! never becomes a panic or a stray write.
//!
//! Two translation levels compose:
//! 1. inside the device (the Cassini ATU, the Gemini MDD/MRT): a [`TranslationTable`] that the
//!    device model owns, mapping the addresses found in commands to bus addresses;
//! 2. the platform IOMMU: another [`TranslationTable`] (or passthrough), owned by the driver
//!    side through an [`Iommu`] handle, mapping bus addresses to host memory.
//!
//! A device model translates through its own table with [`TranslationTable::translate`] and
//! hands the resulting [`Segment`]s to [`DmaPort::read_segments`] /
//! [`DmaPort::write_segments`]. Every access is checked as a whole before any byte moves: a
//! violation anywhere in the range returns `Err` and touches no memory.
//!
//! Modules: `access` (permissions, segments, errors), `table` ([`TranslationTable`]),
//! `iommu` ([`Iommu`]), `port` ([`DmaPort`]).

mod access;
mod iommu;
mod port;
mod table;

pub use access::{DmaError, MapError, Perm, Segment};
pub use iommu::{Iommu, IommuMode};
pub use port::DmaPort;
pub use table::{Mapping, Segments, TranslationTable};

#[cfg(test)]
mod tests;
