//! Register-level model of the HPE Slingshot-11 Cassini NIC, driven exactly as the real one:
//! commands fetched by DMA from rings in host memory after a doorbell store, packets exchanged
//! over the emu-core fabric, events written to rings in host memory. No Rust call bypasses
//! that path.
//!
//! The public surface is the device ([`Cassini`], [`CassiniConfig`], which implements
//! `emu_core::engine::DeviceModel`); the driver/device contract it follows is
//! `docs/cassini-programming.md`. Beside it, the pure state machines the device is built
//! from: [`lpe`] (matching), [`ct`] (counting events, triggered operations), [`amo`]
//! (atomics). With the `harness` feature (tests, examples, the CLI): `harness` (a minimal
//! host side that programs the NIC through MMIO only), `demo` and `perf` built on it.
//!
//! Internal blocks, named after the hardware: `device` (PCI function, BAR0 decode), `csr`
//! (register file, access classes), `csr_hooks` (what a CSR read or write does: a table of
//! hooks, a row per register), `hw` (the blocks wired together), `cq`
//! (command queues), `ixe` (initiator: transmit commands, segmentation, ACK/REPLY), `tgt`
//! (target: incoming packets, data placement, target commands, portal table), `pct`
//! (reliability: connections, sequence numbers, retransmission), `rmu` (VNI and portal
//! TCAMs), `atu` (address translation), `ee` (event queues), `tou` (CT glue), `wire`
//! (packet headers), `counters` (hardware counters by public name). Leaves they share:
//! `block` (command outcomes, event classes, NIC-wide counters), `tables` (decoded CQ
//! configuration), `config` ([`CassiniConfig`]). A block reaches its siblings only through
//! its context trait, which `hw` implements; no block imports `hw` or `device` (see `hw`'s
//! module doc for a packet's journey through them).
#![forbid(unsafe_code)]

pub mod amo;
mod atu;
mod block;
mod config;
mod counters;
mod cq;
mod csr;
mod csr_hooks;
pub mod ct;
#[cfg(feature = "harness")]
pub mod demo;
mod device;
mod ee;
mod faults;
#[cfg(feature = "harness")]
pub mod harness;
mod hw;
mod ixe;
pub mod lpe;
mod pct;
#[cfg(feature = "harness")]
pub mod perf;
mod rmu;
mod tables;
mod tgt;
mod tou;
mod wire;

pub use config::CassiniConfig;
pub use device::Cassini;
