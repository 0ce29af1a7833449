//! Register-level model of the HPE Slingshot-11 Cassini NIC, driven exactly as the real one:
//! commands fetched by DMA from rings in host memory after a doorbell store, packets exchanged
//! over the emu-core fabric, events written to rings in host memory.
//!
//! The public surface is the device ([`Cassini`], [`CassiniConfig`], which implements
//! `emu_core::engine::DeviceModel`); the driver/device contract it follows is
//! `docs/cassini-programming.md`. Blocks (named after the hardware): [`lpe`] list processing
//! engine (matching), `csr` register file, `device` PCI function and BAR0.
#![forbid(unsafe_code)]

pub mod amo;
mod atu;
mod counters;
mod cq;
mod csr;
pub mod ct;
pub mod demo;
mod device;
mod ee;
mod fasthash;
pub mod harness;
mod hw;
mod ixe;
pub mod lpe;
pub mod perf;
mod rmu;
mod tgt;
mod tou;
mod wire;

pub use device::{Cassini, CassiniConfig};
