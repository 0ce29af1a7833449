//! The process-management interface a transport uses to learn its peers' addresses, modelled on
//! PMI-1 (`PMI_Get_rank`, `PMI_Get_size`, `PMI_KVS_Put`, `PMI_KVS_Commit` + `PMI_Barrier`,
//! `PMI_KVS_Get`). An in-process job implements it over shared memory; a multi-process launch
//! over the launcher's PMI wire protocol ([`WireClient`], found by [`from_env`]), served by a
//! launcher's [`server::Server`].
//!
//! As in MPICH, PMI is apart from the MPI library and from its network modules: the
//! transports bootstrap through the [`Pmi`] trait, and a launcher needs only this crate.

// `deny`, not `forbid`: `fd` adopts the launcher's inherited socket, the crate's only unsafe
// block.
#![deny(unsafe_code)]

mod client;
mod error;
mod fd;
pub mod gni;
mod launch;
mod mapping;
pub mod rendezvous;
pub mod server;
pub mod wire;

pub use error::{Error, Result};

pub use client::{WireClient, from_env};
pub use launch::{Endpoint, Launch};
pub use mapping::local_of;

/// One process's view of the job's key-value space.
pub trait Pmi: Send {
    /// This process's rank in the job.
    fn rank(&self) -> u32;
    /// The number of processes in the job.
    fn size(&self) -> u32;
    /// The number of processes on this node, and this one's index among them (for NIC and PID
    /// assignment).
    fn local(&self) -> (u32, u32);
    /// Publish `value` under `key` for this rank.
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()>;
    /// Commit what was put and wait until every process has done so (`PMI_Barrier`).
    fn fence(&mut self) -> Result<()>;
    /// The value `rank` published under `key` before the last fence.
    fn get(&mut self, rank: u32, key: &str) -> Result<Vec<u8>>;

    /// Abort the job (`PMI_Abort`): every rank's waits end with `why`.
    fn abort(&self, why: &str);

    /// Why the job was aborted, if it was.
    fn aborted(&self) -> Option<String>;

    /// Tell the launcher this process is done with the job (`PMI_Finalize`); called by the
    /// transports at the end of `MPI_Finalize`. Idempotent; a launcher that sees a process
    /// exit without it counts the process as failed.
    fn finalize(&mut self) {}
}
