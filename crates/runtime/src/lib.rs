//! The in-process MPI runtime: builds an emulated machine with `platform` and runs the ranks of
//! one MPI program on it, each rank with its own transport on its node's NIC, as a launcher
//! (`mpiexec` + PMI) would on a real machine.
//!
//! On the threaded engine every rank is an OS thread.

#![forbid(unsafe_code)]

pub mod cassini;
pub mod gemini;
pub mod pmi;

use std::sync::Arc;

use mpi::pmi::Pmi;
use mpi::transport::Transport;
use mpi::{Env, Universe};
use platform::EngineKind;
use thiserror::Error;

pub use pmi::{InProcessPmi, Shared};

/// Which NIC the machine has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nic {
    /// HPE Slingshot-11 Cassini (the cxi transport).
    Cassini,
    /// Cray Gemini (the gni transport).
    Gemini,
}

impl std::str::FromStr for Nic {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cassini" | "cxi" => Ok(Nic::Cassini),
            "gemini" | "gni" => Ok(Nic::Gemini),
            _ => Err(format!("unknown NIC {s:?} (expected cassini or gemini)")),
        }
    }
}

/// Why a job failed.
#[derive(Debug, Error)]
pub enum JobError {
    /// The machine could not be built.
    #[error("building the machine: {0}")]
    Machine(String),
    /// A bad job shape.
    #[error("{0}")]
    Shape(String),
    /// A rank failed to initialize MPI (bad knob, no resources).
    #[error("rank {rank}: MPI init failed: {error}")]
    Init {
        /// The rank.
        rank: u32,
        /// Why.
        error: mpi::Error,
    },
    /// A rank's program panicked.
    #[error("rank {rank} panicked: {message}")]
    Panicked {
        /// The rank.
        rank: u32,
        /// The panic message.
        message: String,
    },
}

/// The shape of a job and the machine it runs on.
#[derive(Clone, Debug)]
pub struct Job {
    /// The NIC family.
    pub nic: Nic,
    /// Nodes (one NIC each).
    pub nodes: u32,
    /// Ranks per node.
    pub ranks_per_node: u32,
    /// The engine.
    pub engine: EngineKind,
    /// The environment every rank sees (knobs such as `FI_CXI_RX_MATCH_MODE`).
    pub env: Env,
    /// Host memory per node, bytes.
    pub memory_per_node: u64,
}

impl Job {
    /// `ranks` ranks, one per node, on `nic`, threaded engine, empty environment.
    pub fn new(nic: Nic, ranks: u32) -> Self {
        Job {
            nic,
            nodes: ranks,
            ranks_per_node: 1,
            engine: EngineKind::Threaded,
            env: Env::new(),
            memory_per_node: 256 << 20,
        }
    }

    /// The number of ranks.
    pub fn ranks(&self) -> u32 {
        self.nodes * self.ranks_per_node
    }

    /// This job on `engine`.
    pub fn engine(mut self, engine: EngineKind) -> Self {
        self.engine = engine;
        self
    }

    /// This job with `var=value` in every rank's environment.
    pub fn env(mut self, var: &str, value: &str) -> Self {
        self.env.set(var, value);
        self
    }

    /// Run `f` as every rank of the job on an emulated machine of its NIC; what each rank
    /// returned, by rank.
    pub fn run<R: Send>(&self, f: impl Fn(Universe) -> R + Sync) -> Result<Vec<R>, JobError> {
        match self.nic {
            Nic::Gemini => gemini::run_gemini(self, f),
            Nic::Cassini => cassini::run_cassini(self, f),
        }
    }

    /// This job with `n` ranks on each node (the node count divided accordingly).
    pub fn ranks_per_node(mut self, n: u32) -> Self {
        let ranks = self.ranks();
        self.ranks_per_node = n.max(1);
        self.nodes = ranks.div_ceil(self.ranks_per_node);
        self
    }
}

/// Run `f` as every rank of a job of `job.ranks()` ranks: rank `r` lives on node
/// `r / ranks_per_node`; `make` builds its transport on that node from its PMI handle.
/// Returns what each rank returned, by rank.
pub fn run_ranks<R, T, M, F>(job: &Job, make: M, f: F) -> Result<Vec<R>, JobError>
where
    R: Send,
    T: Transport + 'static,
    M: Fn(u32, Box<dyn Pmi>) -> mpi::Result<T> + Sync,
    F: Fn(Universe) -> R + Sync,
{
    let size = job.ranks();
    if size == 0 {
        return Err(JobError::Shape("a job needs at least one rank".into()));
    }
    let shared = Shared::new();
    let results: Vec<Result<R, JobError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let shared = Arc::clone(&shared);
                let (make, f) = (&make, &f);
                let local = (job.ranks_per_node, rank % job.ranks_per_node);
                std::thread::Builder::new()
                    .name(format!("rank {rank}"))
                    .spawn_scoped(s, move || {
                        let pmi = InProcessPmi::new(Arc::clone(&shared), rank, size, local);
                        let guard = AbortOnPanic(&shared, rank);
                        let transport = make(rank, Box::new(pmi)).map_err(|error| {
                            shared.abort(&format!("rank {rank}: {error}"));
                            JobError::Init { rank, error }
                        })?;
                        let out = f(Universe::new(Box::new(transport)));
                        std::mem::forget(guard);
                        Ok(out)
                    })
                    .expect("spawning a rank thread")
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(rank, h)| {
                h.join().unwrap_or_else(|p| {
                    Err(JobError::Panicked {
                        rank: rank as u32,
                        message: panic_message(&p),
                    })
                })
            })
            .collect()
    });
    results.into_iter().collect()
}

/// Aborts the job's PMI fences if the rank's thread unwinds.
struct AbortOnPanic<'a>(&'a Shared, u32);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        self.0.abort(&format!("rank {} panicked", self.1));
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
