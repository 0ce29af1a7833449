//! DMA: the port through which a device reads and writes host memory, only via a translation
//! table (IOVA -> host range, permissions, bounds). PLACEHOLDER: being implemented.

/// A device's window onto host memory through the platform IOMMU.
#[derive(Clone, Debug)]
pub struct DmaPort {}
