//! The MPI layer: communicators, point-to-point, collectives and one-sided RMA written once
//! over a [`transport::Transport`] (the `transport` crate: a transport for each NIC family
//! doing what the real stacks do on it, CXI provider on Cassini, GNI netmod on Gemini), as
//! MPICH's MPI layer sits on its netmods. Processes bootstrap through `pmi`.
//!
//! The crate depends on `transport` (and through it on `userlib`, `driver`, `firmware-spec`,
//! `pmi`) only, never on an emulator: the same code runs on an emulated NIC or on a real one
//! bound through vfio.

#![forbid(unsafe_code)]

pub mod collective;
pub mod communicator;
pub mod datatype;
pub mod op;
pub mod point_to_point;
mod progress;
pub mod request;
mod status;
pub mod typemap;
pub mod universe;
pub mod window;

pub use transport::{Env, Error, Result};
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
