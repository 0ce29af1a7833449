//! The PCI layer: a bus of functions, drivers bound to them by vendor/device id, and two
//! backends behind the same [`PciFunction`]:
//!
//! - **Emulated**: an in-process device model, adapted to [`EmulatedFunction`] by whoever
//!   assembles a node; BAR accesses call the model (trap and emulate).
//! - **Vfio**: a real device bound to vfio-pci ([`vfio`]); BAR accesses are volatile loads and
//!   stores on the mmap'd BAR, DMA goes through the IOMMU, MSI-X through eventfds.
//!
//! Either way a BAR is an [`emu_core::mmio::Mmio`], interrupts land in [`WaitObject`]s, and DMA
//! mappings are checked by one [`DmaTable`]. [`sysfs`] finds real NICs on a host.
//! See `docs/driver-pci.md`.

mod address;
mod bus;
mod dma;
mod emulated;
mod function;
mod header;
pub mod sysfs;
pub mod vfio;
mod wait;

pub use address::{AddressError, NicKind, PciAddress, PciId, ids};
pub use bus::{BindState, DriverData, PciBus, PciDriver, ProbeError, ProbeFailure};
pub use dma::{DmaError, DmaMapping, DmaTable, HostRange};
/// The MMIO seam every BAR access goes through (re-exported for the user libraries, which
/// store doorbells through mapped windows and never see emulator types).
pub use emu_core::mmio::{MAX_BURST, Mmio, MmioError};
pub use emulated::EmulatedFunction;
pub use function::{BackendKind, PciError, PciFunction};
pub use header::{CONFIG_SPACE_SIZE, NUM_BARS};
pub use sysfs::{RealDevice, SysfsError, SysfsFunction, list_real_devices};
pub use wait::{InterruptSink, Interrupts, MsixError, WaitObject, check_msix_request};
