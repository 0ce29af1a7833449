//! What every emulated device needs: MMIO, DMA through an IOMMU, PCI config space, a fabric,
//! and the engines that drive device models.
//!
//! Layering inside this crate (lower first):
//! - [`time`], [`rng`]: virtual time and the one seeded random source.
//! - [`mmio`]: the MMIO seam (seam 1 of the architecture): a BAR is something you read and
//!   write at an offset with a width.
//! - [`memory`], [`dma`]: host memory (vm-memory) and the DMA port through which a device
//!   reaches it, only via a translation table (seam 2).
//! - [`procmem`]: host memory's second backend, for a node hosted in a process: the process's
//!   own registered memory, reached with no crash and no stray write.
//! - [`pci`]: type-0 configuration space, BAR sizing, MSI-X.
//! - [`fabric`]: packets, links, topologies, traffic classes, CRC, fault sites.
//! - [`engine`]: the device-model contract ([`engine::DeviceModel`]) and the two engines that
//!   drive models (seams 3 and 4).
//! - [`sparse`]: tables stored sparsely, reading as their reset value until written.
//! - [`clock`]: the clock host software reads for its timeouts (real time, or the
//!   deterministic engine's virtual time inside a virtual-time runtime).

pub mod bus;
pub mod clock;
pub mod dma;
pub mod engine;
pub mod fabric;
pub mod hash;
pub mod memory;
pub mod mmio;
pub mod nic_faults;
pub mod pci;
pub mod procmem;
pub mod rng;
pub mod sparse;
pub mod time;
