//! What application-level network software links against: [`cxi`] (modelled on libcxi, for
//! Cassini) and [`gni`] (modelled on uGNI, for Gemini). Control operations go through the
//! driver's uAPI and mmap tokens; commands are written straight into mapped rings and doorbells
//! are MMIO stores (OS bypass); both wait for their device the same way ([`wait`]). This crate
//! never sees emulator types.
#![forbid(unsafe_code)]

pub mod cxi;
pub mod gni;
pub mod wait;
