//! Jobs on emulated Cassini machines: every rank runs the cxi transport on its node's NIC.

use mpi::Universe;
use mpi::transport::cxi::CxiTransport;
use platform::Cluster;

use crate::{Job, JobError, run_ranks};

/// Build a Cassini cluster of `job.nodes` nodes on `job.engine` and run `f` as every rank
/// of the job over the cxi transport. Returns what each rank returned, by rank.
pub fn run_cassini<R: Send>(
    job: &Job,
    f: impl Fn(Universe) -> R + Sync,
) -> Result<Vec<R>, JobError> {
    if job.nodes == 0 || job.ranks_per_node == 0 {
        return Err(JobError::Shape(
            "a job needs at least one node and one rank".into(),
        ));
    }
    let cluster = Cluster::builder()
        .nics(job.nodes as usize)
        .engine(job.engine.clone())
        .memory_per_node(job.memory_per_node)
        .build()
        .map_err(|e| JobError::Machine(e.to_string()))?;
    run_ranks(
        job,
        |rank, pmi| {
            let node = (rank / job.ranks_per_node) as usize;
            let devices = cluster
                .node(node)
                .map(|n| n.cxi_devices())
                .unwrap_or_default();
            CxiTransport::new(&devices, pmi, &job.env)
        },
        f,
    )
}
