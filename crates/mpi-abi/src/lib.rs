//! The MPI 5.0 standard ABI (MPI-5.0 chapter 20) over the [`mpi`] crate: `libmpi_abi.so.1`
//! (and a static library), exporting the C functions of MPI with the standard's handle
//! values, constants and `MPI_Status` layout, so a C program compiled against the standard
//! `mpi.h` (`include/mpi.h` here) runs on nicemu's emulated NICs.
//!
//! Layout: [`consts`] holds the ABI's numbers; [`init`] starts the world (`MPI_Init`);
//! `state` keeps the objects behind the program's handles and routes errors to error
//! handlers; `p2p`, `requests`, `coll`, `types`, `comm` and `rma` are the logic of the calls,
//! in safe Rust. `ffi` is the C boundary: the exported functions, which turn raw pointers
//! into values and slices and call the logic; it is the only module with `unsafe` code.
//! See docs/c-abi.md.

#![deny(unsafe_code)]

mod coll;
mod comm;
pub mod consts;
pub mod error;
mod ffi;
pub mod init;
mod p2p;
mod requests;
mod rma;
mod state;
pub mod testing;
mod types;

/// The exported C functions, callable from Rust as well (`unsafe`: their contract is the C
/// one). The in-process tests of `testing` call them on several ranks.
pub use ffi::MpiStatus;
pub use ffi::coll::*;
pub use ffi::comm::*;
pub use ffi::convert::*;
pub use ffi::dtype::*;
pub use ffi::env::*;
pub use ffi::p2p::*;
pub use ffi::rma::*;
pub use ffi::unsupported::*;
