//! Register-level model of the HPE Slingshot-11 Cassini NIC, driven exactly as the real one:
//! commands fetched by DMA from rings in host memory after a doorbell store, packets exchanged
//! over the emu-core fabric, events written to rings in host memory.
//!
//! Blocks (named after the hardware): [`lpe`] list processing engine (matching).
#![forbid(unsafe_code)]

pub mod amo;
pub mod ct;
pub mod lpe;
