//! The in-process MPI runtime: builds an emulated machine with `platform` and runs the ranks of
//! one MPI program on it, each rank with its own transport on its node's NIC, as a launcher
//! (`mpiexec` + PMI) would on a real machine.
//!
//! On the threaded engine every rank is an OS thread. On the deterministic engine every rank
//! is a coroutine and the whole job runs on one thread ([`sched`]): the same seed replays it
//! bit for bit ([`Job::run_with_digest`]).
//!
//! `unsafe` code is denied in the crate and allowed in one module only (`coop`, the rank
//! coroutines' yield point); every other module forbids it.

#![deny(unsafe_code)]

pub mod cassini;
mod coop;
pub mod gemini;
pub mod inproc_pmi;
pub mod memory;
pub mod process;
pub mod sched;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::{Env, Universe};
use platform::{
    CaptureSink, DriverFaults, EngineKind, FabricCounters, FaultConfig, NicFaultCounters, NicFaults,
};
use pmi::Pmi;
use thiserror::Error;
use transport::Transport;

pub use inproc_pmi::{InProcessPmi, Shared};
pub use memory::{host_memory_available, node_memory_from_env};

pub use platform::Nic;

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
    /// Deterministic engine: a rank aborted the job (a fatal network error, `MPI_Abort`) and
    /// the others were still waiting when no rank could run and no event was pending. They
    /// notice an abort only at their next periodic check (every 4096 polls), which a waiting
    /// rank of the deterministic scheduler does not reach; with real time they would fail
    /// with the abort.
    #[error("job aborted: {why} (ranks {} waiting)", rank_list(waiting))]
    Aborted {
        /// The reason the aborting rank gave.
        why: String,
        /// Every rank that had not finished.
        waiting: Vec<u32>,
    },
    /// A rank's program failed ([`Job::try_run`]): the first failure of the job, which
    /// ended it (the other ranks' failures followed from it).
    #[error("{0}")]
    Failed(String),
    /// The host does not have the memory the job is estimated to need
    /// ([`Job::check_memory`]).
    #[error(
        "a job of {ranks} ranks needs about {} of host memory, more than the {} available \
         (MemAvailable in /proc/meminfo)",
        memory::human(*need),
        memory::human(*available)
    )]
    Memory {
        /// The ranks of the job.
        ranks: u32,
        /// The estimate, bytes.
        need: u64,
        /// What the host has available, bytes.
        available: u64,
    },
    /// Deterministic engine: no rank could run and no engine event was pending.
    #[error("deadlock: ranks {} wait{} (no rank can run and no event is pending at virtual time {at:?})",
        rank_list(waiting),
        if in_fence.is_empty() { String::new() } else { format!("; in a PMI fence: {}", rank_list(in_fence)) })]
    Deadlock {
        /// Every rank that had not finished.
        waiting: Vec<u32>,
        /// Those of them waiting in a PMI fence.
        in_fence: Vec<u32>,
        /// The virtual time.
        at: Duration,
    },
}

/// `0, 1, 2` (the first 32 ranks, then how many more).
fn rank_list(ranks: &[u32]) -> String {
    let mut s = ranks
        .iter()
        .take(32)
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if ranks.len() > 32 {
        s.push_str(&format!(" and {} more", ranks.len() - 32));
    }
    s
}

/// What a job returned, and how it ran.
#[derive(Debug)]
pub struct JobReport<R> {
    /// What each rank returned, by rank.
    pub results: Vec<R>,
    /// Wall-clock time of the job (machine built, ranks run, machine torn down not counted).
    pub wall: Duration,
    /// Deterministic engine: virtual time at the end of the job.
    pub virtual_time: Option<Duration>,
    /// Deterministic engine: the replay digest — the engine's trace digest (every event,
    /// MMIO access and interrupt, with its virtual time), the virtual end time, the order in
    /// which the scheduler ran the ranks, and the rank count. The same seed gives the same
    /// digest.
    pub digest: Option<u64>,
    /// Engine events processed.
    pub events: u64,
    /// Deterministic engine: scheduling rounds.
    pub rounds: u64,
    /// Deterministic engine: the fabric's counters at the end of the job (packets injected,
    /// delivered, lost to each fault site).
    pub fabric: Option<FabricCounters>,
    /// Deterministic engine: how often each NIC fault site fired.
    pub nic_faults: Option<NicFaultCounters>,
    /// Packets injected into the machine's fabric while it ran (its fabric counter,
    /// `FabricCounters::injected`, at the end of the job).
    pub packets_injected: u64,
}

/// Fold `w` into the running digest `h` (order sensitive).
pub(crate) fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// Device id -> node index, from the device id of each node.
pub(crate) fn node_of_device(devices: &[usize]) -> Vec<usize> {
    let mut v = vec![usize::MAX; devices.iter().copied().max().map_or(0, |m| m + 1)];
    for (node, &d) in devices.iter().enumerate() {
        v[d] = node;
    }
    v
}

/// Run `ranks` (threads) and time it; the report of a threaded job.
pub(crate) fn threaded_report<R>(
    ranks: impl FnOnce() -> Result<Vec<R>, JobError>,
) -> Result<JobReport<R>, JobError> {
    let wall = Instant::now();
    let results = ranks()?;
    Ok(JobReport {
        results,
        wall: wall.elapsed(),
        virtual_time: None,
        digest: None,
        events: 0,
        rounds: 0,
        fabric: None,
        nic_faults: None,
        packets_injected: 0,
    })
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
    /// Fabric faults, switched on once the machine is built (default none).
    pub faults: FaultConfig,
    /// NIC fault sites (EQ full, ATU miss, slow target, ...), switched on once the machine
    /// is built (default none).
    pub nic_faults: NicFaults,
    /// Driver fault sites (pinning failures), drawn per driver from the profile's seed
    /// (default none).
    pub driver_faults: DriverFaults,
    /// A sink that sees every packet injected into the machine's fabric (`nicemu trace`);
    /// none by default.
    pub capture: Option<Arc<dyn CaptureSink>>,
    /// Whether each node reaches this process's own memory beside its RAM (default false),
    /// as a node hosted in a rank process does: the transports then send from and receive
    /// into the ranks' own buffers without a copy (zero copy).
    pub process_memory: bool,
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
            faults: FaultConfig::none(),
            nic_faults: NicFaults::none(),
            driver_faults: DriverFaults::none(),
            capture: None,
            process_memory: false,
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

    /// This job on a fabric with `faults` (drops, reordering, corruption, link flaps, ...),
    /// drawn from the engine's seed on the deterministic engine.
    pub fn faults(mut self, faults: FaultConfig) -> Self {
        self.faults = faults;
        self
    }

    /// This job with NIC fault sites switched on, drawn from the engine's seed on the
    /// deterministic engine.
    pub fn nic_faults(mut self, faults: NicFaults) -> Self {
        self.nic_faults = faults;
        self
    }

    /// This job with the drivers' fault sites switched on.
    pub fn driver_faults(mut self, faults: DriverFaults) -> Self {
        self.driver_faults = faults;
        self
    }

    /// This job with the process's own memory reachable by every node (zero copy, see
    /// [`Job::process_memory`]).
    pub fn process_memory(mut self, on: bool) -> Self {
        self.process_memory = on;
        self
    }

    /// This job with every fabric packet shown to `sink` ([`platform::CaptureSink`]).
    pub fn capture(mut self, sink: Arc<dyn CaptureSink>) -> Self {
        self.capture = Some(sink);
        self
    }

    /// This job with `var=value` in every rank's environment.
    pub fn env(mut self, var: &str, value: &str) -> Self {
        self.env.set(var, value);
        self
    }

    /// Run `f` as every rank of the job on an emulated machine of its NIC; what each rank
    /// returned, by rank.
    ///
    /// On the deterministic engine the ranks are coroutines on one thread ([`sched`]); on
    /// the threaded engine they are threads.
    pub fn run<R: Send>(&self, f: impl Fn(Universe) -> R + Sync) -> Result<Vec<R>, JobError> {
        self.run_with_digest(f).map(|r| r.results)
    }

    /// [`Job::run`], with the job's report: wall time, and on the deterministic engine the
    /// virtual end time and the replay digest (two runs with one seed give the same digest).
    pub fn run_with_digest<R: Send>(
        &self,
        f: impl Fn(Universe) -> R + Sync,
    ) -> Result<JobReport<R>, JobError> {
        match self.nic {
            Nic::Gemini => gemini::run_gemini_report(self, f),
            Nic::Cassini => cassini::run_cassini_report(self, f),
        }
    }

    /// [`Job::run`] for a program that can fail: the first rank whose program returns an
    /// error aborts the job with it (as `MPI_Abort` would), so the other ranks end at their
    /// next wait instead of waiting for it, and the job's error is that first failure
    /// ([`JobError::Failed`], `rank R: why`), not what it caused on the other ranks.
    pub fn try_run<T: Send, E: std::fmt::Display>(
        &self,
        f: impl Fn(&Universe) -> Result<T, E> + Sync,
    ) -> Result<Vec<T>, JobError> {
        self.try_run_with_digest(f).map(|r| r.results)
    }

    /// [`Job::try_run`], with the job's report.
    pub fn try_run_with_digest<T: Send, E: std::fmt::Display>(
        &self,
        f: impl Fn(&Universe) -> Result<T, E> + Sync,
    ) -> Result<JobReport<T>, JobError> {
        let report = self.run_with_digest(|u| {
            f(&u).map_err(|e| {
                // The first abort of the job is its cause: this failure, or the one that
                // made this rank fail.
                u.abort(&e.to_string());
                u.with_transport(|t| t.aborted())
                    .unwrap_or_else(|| e.to_string())
            })
        })?;
        let mut results = Vec::with_capacity(report.results.len());
        for r in report.results {
            results.push(r.map_err(JobError::Failed)?);
        }
        Ok(JobReport {
            results,
            wall: report.wall,
            virtual_time: report.virtual_time,
            digest: report.digest,
            events: report.events,
            rounds: report.rounds,
            fabric: report.fabric,
            nic_faults: report.nic_faults,
            packets_injected: report.packets_injected,
        })
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

pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
