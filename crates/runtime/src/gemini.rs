//! Jobs on Gemini: a 3D torus of Gemini nodes (two NICs per router when the node count is
//! even, as on a Gemini ASIC), the job's ptag and cookie handed to every rank as
//! `PMI_GNI_PTAG` / `PMI_GNI_COOKIE` (what ALPS does), one gni transport per rank.

use mpi::Universe;
use mpi::transport::gni::GniTransport;
use platform::GeminiCluster;

use crate::{Job, JobError, run_ranks};

/// Run `f` as every rank of `job` on an emulated Gemini machine.
pub fn run_gemini<R: Send>(
    job: &Job,
    f: impl Fn(Universe) -> R + Sync,
) -> Result<Vec<R>, JobError> {
    if job.nodes == 0 {
        return Err(JobError::Shape("a job needs at least one node".into()));
    }
    let (dims, per_router) = if job.nodes.is_multiple_of(2) {
        ([job.nodes / 2, 1, 1], 2)
    } else {
        ([job.nodes, 1, 1], 1)
    };
    let cluster = GeminiCluster::builder()
        .dims(dims)
        .nics_per_router(per_router)
        .engine(job.engine.clone())
        .memory_per_node(job.memory_per_node)
        .build()
        .map_err(|e| JobError::Machine(e.to_string()))?;
    let mut env = job.env.clone();
    let creds = cluster.job();
    env.set("PMI_GNI_PTAG", &creds.ptag.to_string());
    env.set("PMI_GNI_COOKIE", &format!("{:#x}", creds.cookie));
    run_ranks(
        job,
        |rank, pmi| {
            let node = cluster
                .node((rank / job.ranks_per_node) as usize)
                .ok_or_else(|| mpi::Error::Transport(format!("rank {rank}: no node")))?;
            GniTransport::new(node.kgni(), pmi, &env)
        },
        f,
    )
}
