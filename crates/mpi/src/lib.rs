//! An MPI layer over the user libraries: communicators, point-to-point, collectives and
//! one-sided RMA written once over a [`transport::Transport`], with a transport for each NIC
//! family doing what the real stacks do on it (CXI provider on Cassini, GNI netmod on Gemini).
//!
//! The crate depends on `userlib` (and `driver`, `firmware-spec`) only, never on an emulator:
//! the same code runs on an emulated NIC or on a real one bound through vfio.

#![forbid(unsafe_code)]

pub mod env;
pub mod error;
pub mod matching;
pub mod pmi;
pub mod transport;
pub mod universe;

pub use env::Env;
pub use error::{Error, Result};
pub use universe::Universe;
