//! `libugni.so.0`: the uGNI C API (`include/gni_pub.h`, our own writing of the documented
//! ABI) over the uGNI-like user library `userlib::gni`, so software written against Cray's
//! uGNI — Open MPI's ugni BTL, libfabric's gni provider, Cray's example programs — runs
//! unmodified on nicemu's emulated Gemini.
//!
//! Each process hosts its own Gemini ([`host`]: alone, or its rank's node of a job's machine
//! linked to the other processes' nodes), with the job credentials a Cray launcher hands it
//! (`PMI_GNI_*`). The C handles are numbers resolved through tables ([`handles`]), so a bad
//! handle is a return code, never a crash. [`stats`] counts what the library did (SMSG
//! messages, FMA and BTE transfers by kind) for the counter report. The C boundary, with
//! every `unsafe` block, is [`ffi`]. See docs/real-ugni.md.

#![deny(unsafe_code)]

pub mod ffi;
mod handles;
pub mod host;
pub mod stats;

pub use ffi::*;
