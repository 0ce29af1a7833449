//! Seeded fault-injection simulation of MPI jobs (`nicemu sim`).
//!
//! A run is one MPI job on the deterministic engine (every rank a coroutine, the whole job on
//! one thread, `runtime::sched`) over a fabric with seeded faults — drops, duplicates,
//! reordering, corruption, link flaps ([`faults`]) — running a checked program
//! ([`workload`]). Everything is drawn from the seed, so the same seed and commit replay a
//! run bit for bit ([`run`]); a campaign runs many seeds and lists the replay command of
//! every failure ([`campaign`]). docs/RELIABILITY.md describes the fault model and the
//! campaigns.

#![forbid(unsafe_code)]

pub mod campaign;
pub mod faults;
pub mod run;
pub mod workload;

pub use campaign::{Campaign, CampaignReport};
pub use faults::{FaultSpec, FaultSpecError};
pub use run::{Derived, SimConfig, SimOutcome, nic_name, run};
pub use workload::{Program, Workload};
