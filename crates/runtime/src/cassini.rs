//! Jobs on emulated Cassini machines: every rank runs the cxi transport on its node's NIC.

#![forbid(unsafe_code)]

use std::sync::Arc;

use mpi::Universe;
use platform::{Cluster, EngineKind};
use transport::cxi::CxiTransport;

use crate::sched::{self, Machine};
use crate::{Job, JobError, JobReport, run_ranks, threaded_report};

/// Build a Cassini cluster of `job.nodes` nodes on `job.engine` and run `f` as every rank
/// of the job over the cxi transport. Returns what each rank returned, by rank.
pub fn run_cassini<R: Send>(
    job: &Job,
    f: impl Fn(Universe) -> R + Sync,
) -> Result<Vec<R>, JobError> {
    run_cassini_report(job, f).map(|r| r.results)
}

/// [`run_cassini`], with the job's report (virtual time and replay digest on the
/// deterministic engine, where the ranks run as coroutines).
pub fn run_cassini_report<R: Send>(
    job: &Job,
    f: impl Fn(Universe) -> R + Sync,
) -> Result<JobReport<R>, JobError> {
    if job.nodes == 0 || job.ranks_per_node == 0 {
        return Err(JobError::Shape(
            "a job needs at least one node and one rank".into(),
        ));
    }
    let mut builder = Cluster::builder()
        .nics(job.nodes as usize)
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
    let make = |rank: u32, pmi| {
        let node = (rank / job.ranks_per_node) as usize;
        let devices = cluster
            .node(node)
            .map(|n| n.cxi_devices())
            .unwrap_or_default();
        CxiTransport::new(&devices, pmi, &job.env)
    };
    let report = match cluster.deterministic() {
        Some(engine) => {
            let devices: Vec<usize> = cluster
                .nodes()
                .iter()
                .map(|n| n.device_id().0 as usize)
                .collect();
            let m = Machine {
                engine,
                node_of_device: crate::node_of_device(&devices),
                service: None,
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
