//! `libnicemu-fi.so`: a libfabric provider named `nicemu` over the cxi transport
//! (`transport::cxi`, itself over `userlib::cxi`) on an emulated Cassini hosted in the
//! process; each process of a launched job hosts its own NIC on the fabric between
//! processes ([`nic`], [`rendezvous`]). `FI_EP_RDM` endpoints with tagged and untagged
//! messages, address vectors, and completion queues with manual progress. See
//! docs/ofi-provider.md.
//!
//! The safe core: [`nic`] (where the NIC comes from), [`av`], [`cq`], [`ep`], [`wire`] (match
//! bits), [`cntr`] (counters), [`wait`] (file-descriptor wait objects, wait sets). The C interface and every `unsafe` block: [`ffi`].

pub mod atomic;
pub mod av;
pub mod cntr;
pub mod cq;
pub mod ep;
pub mod eq;
pub mod error;
pub mod ffi;
pub mod info;
pub mod mr;
pub mod nic;
pub mod rendezvous;
pub mod rma;
pub mod wait;
pub mod wire;

/// The provider's name (`fi_info -p nicemu`, `FI_PROVIDER=nicemu`).
pub const PROVIDER_NAME: &str = "nicemu";
