//! Jobs on Gemini: a 3D torus of Gemini nodes (two NICs per router when the node count is
//! even, as on a Gemini ASIC), the job's ptag and cookie handed to every rank as
//! `PMI_GNI_PTAG` / `PMI_GNI_COOKIE` (what ALPS does), one gni transport per rank.

#![forbid(unsafe_code)]

use std::sync::Arc;

use mpi::Universe;
use platform::{EngineKind, GeminiCluster};
use transport::gni::GniTransport;

use crate::sched::{self, Machine};
use crate::{Job, JobError, JobReport, run_ranks, threaded_report};

/// Run `f` as every rank of `job` on an emulated Gemini machine.
pub fn run_gemini<R: Send>(
    job: &Job,
    f: impl Fn(Universe) -> R + Sync,
) -> Result<Vec<R>, JobError> {
    run_gemini_report(job, f).map(|r| r.results)
}

/// [`run_gemini`], with the job's report (virtual time and replay digest on the
/// deterministic engine, where the ranks run as coroutines).
pub fn run_gemini_report<R: Send>(
    job: &Job,
    f: impl Fn(Universe) -> R + Sync,
) -> Result<JobReport<R>, JobError> {
    if job.nodes == 0 || job.ranks_per_node == 0 {
        return Err(JobError::Shape("a job needs at least one node".into()));
    }
    let (dims, per_router) = platform::gemini::torus_of(job.nodes);
    let mut builder = GeminiCluster::builder()
        .dims(dims)
        .nics_per_router(per_router)
        .engine(job.engine.clone())
        .memory_per_node(job.memory_per_node)
        .process_memory(job.process_memory)
        .driver_faults(job.driver_faults.clone());
    if matches!(job.engine, EngineKind::Deterministic { .. }) {
        builder = builder.progress_wrap(sched::yielding_progress());
    }
    if let Some(sink) = &job.capture {
        builder = builder.capture(Arc::clone(sink));
    }
    let cluster = builder
        .build()
        .map_err(|e| JobError::Machine(e.to_string()))?;
    if job.faults.any() {
        cluster.engine().set_faults(job.faults);
    }
    if job.nic_faults.any() {
        cluster.engine().set_nic_faults(job.nic_faults);
    }
    let mut env = job.env.clone();
    let creds = cluster.job();
    env.set("PMI_GNI_PTAG", &creds.ptag.to_string());
    env.set("PMI_GNI_COOKIE", &format!("{:#x}", creds.cookie));
    let make = |rank: u32, pmi| {
        let node = cluster
            .node((rank / job.ranks_per_node) as usize)
            .ok_or_else(|| mpi::Error::Transport(format!("rank {rank}: no node")))?;
        GniTransport::new(node.kgni(), pmi, &env)
    };
    let report = match cluster.deterministic() {
        Some(engine) => {
            let devices: Vec<usize> = cluster
                .nodes()
                .iter()
                .map(|n| n.device_id().0 as usize)
                .collect();
            // The interrupt-handler work of a node's kgni (datagrams, kernel CQ), which the
            // cluster's own progress handle would do for every node on every call.
            let service = |node: usize| cluster.node(node).is_some_and(|n| n.kgni().service());
            let m = Machine {
                engine,
                node_of_device: crate::node_of_device(&devices),
                service: Some(&service),
            };
            sched::run_coroutines(job, m, make, f)
        }
        None => threaded_report(|| run_ranks(job, make, f)),
    };
    report.map(|mut r| {
        r.packets_injected = cluster.engine().fabric_counters().injected;
        r
    })
}
