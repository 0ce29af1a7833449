//! Kernel-style driver model for the emulated (and real) Cassini and Gemini NICs: a PCI bus with
//! probe by id, per-device resource allocators, a uAPI of opcodes and mmap tokens, memory
//! registration, interrupts. Backends: emulated (in-process device) and vfio (real device).
//!
//! - [`pci`]: the bus, functions, backends, wait objects.
//! - [`mem`]: host memory as the driver and user processes see it.
//! - [`cassini`]: the Cassini driver (`cass_*` hardware access, `cxi_*` client services,
//!   the uAPI).
//!
//! The driver knows nothing of emulators: it probes whatever PCI functions it is given (an
//! emulated function from the `platform` crate, or a vfio-bound real device), and takes only
//! emu-core's seams (MMIO, memory, [`Progress`], the [`clock`] host software reads for its
//! timeouts).

pub mod alloc;
pub mod cassini;
pub mod faults;
pub mod gemini;
pub mod mem;
pub mod pci;

pub use emu_core::clock;
pub use emu_core::engine::Progress;
