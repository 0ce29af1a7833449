//! The C side: libfabric's provider interface ([`types`]), the entry point and `getinfo`
//! ([`prov`]), the object tables ([`objects`]) and user buffers ([`mem`]); the API version
//! declared ([`version`]) and the layouts of the libfabric versions served ([`layout`]). All of the crate's
//! `unsafe` lives here; each block states why it holds.

#![allow(unsafe_code)]

mod children;
pub mod cntr;
pub mod layout;
pub mod mem;
pub mod objects;
pub mod peek;
pub mod prov;
pub mod region;
pub mod rma;
pub mod rma_types;
pub mod types;
pub mod version;
pub mod wait;
