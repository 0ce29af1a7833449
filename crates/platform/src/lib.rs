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
//! - [`machine`]: what every machine shares whatever its NIC: the builder's common settings,
//!   the build, the engine handles and nodes of the result ([`Machine`]).
//! - [`cassini`]: clusters of Cassini nodes ([`Cluster`], a machine of [`CassiniParts`]).
//! - [`gemini`]: clusters of Gemini nodes on a 3D torus ([`GeminiCluster`], a machine of
//!   [`GeminiParts`]), with a job configured as a launcher would.
//! - [`engine`]: which engine drives a cluster ([`EngineKind`]).
//! - [`devices`]: the listing behind `nicemu devices`.
//! - [`process`]: one node of a job's machine hosted in this process, linked to the other
//!   processes' nodes ([`process::join`]).

#![forbid(unsafe_code)]

pub mod cassini;
pub mod devices;
pub mod engine;
mod function;
pub mod gemini;
pub mod machine;
pub mod process;

pub use cassini::{CassiniParts, Cluster, ClusterBuilder, ClusterError, Node};
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
pub use gemini::{
    GeminiCluster, GeminiClusterBuilder, GeminiClusterError, GeminiNode, GeminiParts,
};
pub use machine::{BuildProgress, Machine, MachineBuilder};

/// Which NIC a machine has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nic {
    /// HPE Slingshot-11 Cassini (the cxi transport).
    Cassini,
    /// Cray Gemini (the gni transport).
    Gemini,
}

impl std::str::FromStr for Nic {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cassini" | "cxi" => Ok(Nic::Cassini),
            "gemini" | "gni" => Ok(Nic::Gemini),
            _ => Err(format!("unknown NIC {s:?} (expected cassini or gemini)")),
        }
    }
}
