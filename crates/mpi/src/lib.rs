//! An MPI layer over the user libraries: communicators, point-to-point, collectives and
//! one-sided RMA written once over a [`transport::Transport`], with a transport for each NIC
//! family doing what the real stacks do on it (CXI provider on Cassini, GNI netmod on Gemini).
//!
//! The crate depends on `userlib` (and `driver`, `firmware-spec`) only, never on an emulator:
//! the same code runs on an emulated NIC or on a real one bound through vfio.

// `deny`, not `forbid`: `pmi::fd` adopts the launcher's inherited socket, the crate's only
// unsafe block.
#![deny(unsafe_code)]

pub mod collective;
pub mod communicator;
pub mod datatype;
pub mod env;
pub mod error;
pub mod matching;
pub mod op;
pub mod pmi;
pub mod point_to_point;
pub mod request;
pub mod transport;
pub mod typemap;
pub mod universe;
pub mod window;

pub use env::Env;
pub use error::{Error, Result};
pub use universe::Universe;

/// What `use mpi::traits::*;` brings in, as in rsmpi.
pub mod traits {
    pub use crate::collective::Root;
    pub use crate::datatype::{Buffer, BufferMut, Equivalence};
}

/// rsmpi-style paths of the common types.
pub mod topology {
    pub use crate::communicator::{
        CommRank as Rank, CommunicatorRelation, Group, SimpleCommunicator,
    };
}

pub use communicator::{ANY_TAG, SimpleCommunicator, TAG_UB, Tag};
pub use datatype::{Kind, Vector};
pub use op::SystemOperation;
pub use point_to_point::{Message, Status};
pub use request::{Request, scope};
pub use window::{AccumulateOp, LockType, Window};
