//! Collective operations (MPI 4.1 ch. 6) over point-to-point messages on the communicator's
//! collective context, with the algorithms MPICH chooses by message and communicator size
//! (Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in
//! MPICH", IJHPCA 2005):
//!
//! | operation | small | large |
//! |---|---|---|
//! | barrier | dissemination | — |
//! | bcast | binomial tree | scatter + ring allgather (≥ 512 KiB, ≥ 8 ranks) |
//! | reduce | binomial tree | — |
//! | allreduce | recursive doubling (non-powers of two folded in) | ring reduce-scatter + ring allgather (≥ 64 KiB) |
//! | gather, scatter | binomial tree | — |
//! | gatherv, scatterv, alltoallv | linear / pairwise | — |
//! | allgather | Bruck (total < 80 KiB) | ring |
//! | allgatherv | ring | ring |
//! | alltoall | Bruck (block ≤ 256 B, ≥ 8 ranks) | pairwise exchange |
//! | reduce_scatter(_block) | ring | ring |
//! | scan, exscan | recursive doubling | — |
//!
//! Reductions use the predefined operations, which are commutative, in a fixed order for a
//! given communicator size, so every rank gets the same bits.

mod algorithms;
mod api;
mod blocks;
pub(crate) mod exec;
mod immediate;

pub use api::Root;

/// Tags of the collective context, one per operation, so interleaved collectives of different
/// kinds never match each other's messages.
pub(crate) mod tag {
    pub const BARRIER: u32 = 1;
    pub const BCAST: u32 = 2;
    pub const REDUCE: u32 = 3;
    pub const ALLREDUCE: u32 = 4;
    pub const GATHER: u32 = 5;
    pub const SCATTER: u32 = 6;
    pub const ALLGATHER: u32 = 7;
    pub const ALLTOALL: u32 = 8;
    pub const REDUCE_SCATTER: u32 = 9;
    pub const SCAN: u32 = 10;
    pub const EXSCAN: u32 = 11;
}
