//! Register-level model of the Cray Gemini NIC (XE6/XK7).
//!
//! One [`Gemini`] is one NIC (a Gemini ASIC holds two NICs and a router): a PCI function
//! (0x17DB:0x0201) whose BAR 0 is the public Gemini address map, driven by MMIO, fabric
//! packets and its own timers ([`emu_core::engine::DeviceModel`]). The driver/device
//! contract is docs/gemini-programming.md; formats come from `firmware_spec::gemini`.
//!
//! Blocks: [`fma`] (descriptors, windows, AMOs, sequences), [`bte`] (TX rings, channels, RX
//! channels), [`target`] (requests from the network, answers to ours), [`cq`] (completion
//! queues), [`mdd`] (MDD/MRT/vMDH and every network DMA), [`ntt`], [`amo`], [`smsg`] and
//! [`datagram`] (device side), [`packet`] (our wire format), [`regs`] (BAR decode, model
//! registers), [`device`] (the `DeviceModel`, and the one place that wires the blocks
//! together). No block imports the device: each takes what it needs through a port trait
//! the device implements. The [`device`] module documentation draws a packet's journey
//! through them.
//!
//! [`link`] holds the torus links' timing and retry, for whoever builds a Gemini fabric.
//!
//! With the `harness` feature (tests, examples, benchmarks, the CLI): `cluster` builds a
//! 3D-torus cluster of NICs on either engine, `host` programs a NIC through its registers
//! as a driver and user library would, `demo` prints a short exchange, `bench` measures FMA
//! put rate and BTE bandwidth.
#![forbid(unsafe_code)]

pub mod amo;
#[cfg(feature = "harness")]
pub mod bench;
pub mod bte;
#[cfg(feature = "harness")]
pub mod cluster;
pub mod config;
pub mod cq;
pub mod datagram;
#[cfg(feature = "harness")]
pub mod demo;
pub mod device;
pub mod fault;
mod faults;
pub mod fma;
#[cfg(feature = "harness")]
pub mod host;
pub mod link;
pub mod mdd;
pub mod ntt;
pub mod packet;
pub mod regs;
mod request;
pub mod smsg;
pub mod target;

pub use config::GeminiConfig;
pub use device::{Gemini, GeminiError};
pub use fault::Fault;
