//! The C side: libfabric's provider interface ([`types`]), the entry point and `getinfo`
//! ([`prov`]), the object tables ([`objects`]) and user buffers ([`mem`]). All of the crate's
//! `unsafe` lives here; each block states why it holds.

#![allow(unsafe_code)]

pub mod mem;
pub mod objects;
pub mod prov;
pub mod region;
pub mod rma;
pub mod rma_types;
pub mod types;
