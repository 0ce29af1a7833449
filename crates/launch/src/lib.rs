//! Multi-process jobs on this host or several: [`job`] starts the N processes of a job around a
//! PMI-1 server (`pmi::server`: the key-value space, barriers and abort of one job) and ends it
//! as a whole when one fails (its ranks' output forwarded by [`forward`]), [`hosts`] places
//! ranks on hosts and starts them there, [`cli`] is `nicemu run`, and [`probe`] is a program
//! that checks a launch using only the PMI client (the `pmi` crate). How to launch, with
//! `nicemu run` or hydra's `mpiexec`: docs/launch.md.

#![forbid(unsafe_code)]

pub mod cli;
pub mod error;
pub mod forward;
pub mod hosts;
pub mod job;
pub mod probe;
