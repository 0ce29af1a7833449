//! Emulated machines. This crate assembles what a real machine would have: an engine driving
//! the devices (deterministic or threaded), a fabric of a given topology (single switch,
//! dragonfly, 3D torus), one host memory per node, and the emulated Cassini or Gemini NIC of
//! each node as a PCI function on that node's bus, with the driver probed on it by id.
//!
//! It is the only crate that instantiates the emulators next to the driver. Everything it hands
//! out is a driver type (`CxiDevice`, `Kgni`, `HostMem`) or an emu-core seam (`Progress`), so
//! the driver, the user libraries and the MPI layer above them never link an emulator and run
//! the same on a real NIC bound through vfio.
//!
//! - [`cassini`]: clusters of Cassini nodes ([`Cluster`]).
//! - [`gemini`]: clusters of Gemini nodes on a 3D torus ([`GeminiCluster`]), with a job
//!   configured as a launcher would.
//! - [`engine`]: which engine drives a cluster ([`EngineKind`]).
//! - [`devices`]: the listing behind `nicemu devices`.

#![forbid(unsafe_code)]

pub mod cassini;
pub mod devices;
pub mod engine;
mod function;
pub mod gemini;

pub use cassini::{BuildProgress, Cluster, ClusterBuilder, ClusterError, Node};
pub use devices::{DeviceListing, EmulatedDevice, list_devices, list_emulated_and_real};
pub use driver::faults::DriverFaults;
pub use emu_core::engine::deterministic::Deterministic;
pub use emu_core::engine::threaded::ThreadedConfig;
pub use emu_core::engine::{DeviceId, Engine, Progress};
pub use emu_core::fabric::remote;
pub use emu_core::fabric::{CaptureBuffer, CaptureSink, FabricCounters, FaultConfig, Topology};
pub use emu_core::nic_faults::{NicFaultCounters, NicFaults};
pub use emu_core::time::{SimDuration, SimTime};
pub use engine::{EngineKind, ProgressWrap};
pub use function::AttachError;
pub use gemini::{GeminiCluster, GeminiClusterBuilder, GeminiClusterError, GeminiNode};
