//! One rank per process: this process hosts one node of the job's machine
//! ([`platform::process`]: its Cassini or Gemini on a threaded engine, linked to the other
//! ranks' nodes through the fabric between processes) and runs its MPI on it. [`init`] is
//! what `MPI_Init` does in a process started by a launcher, once the PMI client is up: join
//! the job's fabric ([`platform::process::join`]), then open the transport (cxi or gni),
//! which publishes its NIC address through the same PMI, and hand back the rank's
//! [`Universe`] and a [`ProcessGuard`] that tears the node down after finalize.
//!
//! A peer that dies is noticed by the fabric (its process gone, its connection reset, its
//! host unreachable for `NICEMU_FABRIC_TIMEOUT_MS`); from then on the transport's PMI
//! reports the job aborted with the reason, so every wait of the MPI layer fails with a
//! clear error instead of hanging, and the packets that could not reach it are counted as
//! network timeouts ([`ProcessGuard::network_summary`]). A peer that is only stopped or slow
//! is not a fault: the node's clock, which the MPI layer's and the transport's timeouts read
//! on the rank's thread, stands still until it runs again.
//!
//! Environment: the `NICEMU_*` variables of [`platform::process`], and the transports'
//! knobs (`FI_CXI_*`, `MPICH_GNI_*`, ...).

#![forbid(unsafe_code)]

use std::ops::Deref;

use mpi::{Env, Universe};
use platform::process::{HostConfig, HostError, HostedNode};
use pmi::Pmi;
use thiserror::Error;
use transport::cxi::CxiTransport;
use transport::gni::GniTransport;

use crate::Nic;

/// Why a process could not join the job.
#[derive(Debug, Error)]
pub enum ProcessError {
    /// Hosting the node or linking it to the job failed.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The transport failed.
    #[error(transparent)]
    Mpi(#[from] mpi::Error),
}

/// How this process joins the job.
#[derive(Clone, Debug)]
pub struct ProcessConfig {
    /// The node and its links ([`platform::process`]'s variables).
    pub node: HostConfig,
    /// The environment the transport reads its knobs from.
    pub env: Env,
}

impl ProcessConfig {
    /// Defaults for `nic`, with an empty environment.
    pub fn new(nic: Nic) -> Self {
        ProcessConfig {
            node: HostConfig::new(nic),
            env: Env::new(),
        }
    }

    /// The configuration the variables of `env` ask for.
    pub fn from_env(env: &Env) -> Result<Self, ProcessError> {
        Ok(ProcessConfig {
            node: HostConfig::from_lookup(|v| env.get(v).map(str::to_string))?,
            env: env.clone(),
        })
    }
}

/// The NIC `NICEMU_NIC` names in `env` (cassini when unset); a bad value is an error that
/// names the variable.
pub fn nic_from_env(env: &Env) -> Result<Nic, ProcessError> {
    ProcessConfig::from_env(env).map(|c| c.node.nic)
}

/// What [`init`] leaves running besides the [`Universe`]: the hosted node and its links
/// (see [`HostedNode`] for the counters). [`ProcessGuard::finish`] finalizes the universe and
/// tears the node down; dropping the guard tears it down (finalize the universe first).
#[derive(Debug)]
pub struct ProcessGuard {
    node: HostedNode,
    /// The node's clock installed as the rank thread's clock for host software timeouts.
    _clock: driver::clock::VirtualClockGuard,
}

impl Deref for ProcessGuard {
    type Target = HostedNode;
    fn deref(&self) -> &HostedNode {
        &self.node
    }
}

/// Join the job as the rank `pmi` says: host the node, link the fabric to every peer, open
/// the transport. Returns the rank's MPI world and the guard of its node. On failure the
/// job is aborted through `pmi`, so no peer waits forever for this one.
pub fn init(
    mut pmi: Box<dyn Pmi>,
    cfg: &ProcessConfig,
) -> Result<(Universe, ProcessGuard), ProcessError> {
    let node = platform::process::join(pmi.as_mut(), &cfg.node)?;
    let rank = node.rank();
    // The MPI layer's and the transport's own timeouts (retry budgets, flow-control
    // replays, the wait limit) count the node's time, which stands still while a process
    // of the job does not run, like the NICs' timers.
    let job_clock = node.clock();
    let clock = driver::clock::install_virtual(std::sync::Arc::new(move || job_clock.now()));
    let pmi = node.watch_peers(pmi);
    let transport: Box<dyn transport::Transport> = if let Some((g, n)) = node.gemini() {
        let mut env = cfg.env.clone();
        env.set("PMI_GNI_PTAG", &g.job().ptag.to_string());
        env.set("PMI_GNI_COOKIE", &format!("{:#x}", g.job().cookie));
        Box::new(GniTransport::new(n.kgni(), pmi, &env)?)
    } else {
        let devices = node.cxi_devices();
        if devices.is_empty() {
            let why = format!("rank {rank}: the node has no cxi device");
            return Err(HostError::Machine(why).into());
        }
        Box::new(CxiTransport::new(&devices, pmi, &cfg.env)?)
    };
    Ok((
        Universe::new(transport),
        ProcessGuard {
            node,
            _clock: clock,
        },
    ))
}

impl ProcessGuard {
    /// `MPI_Finalize`, then tear the node down. Prints the network summary to stderr when
    /// packets were lost to dead peers.
    pub fn finish(
        self,
        universe: Universe,
    ) -> Result<platform::remote::RemoteCounters, ProcessError> {
        let r = universe.finalize();
        let c = self.node.fabric_counters();
        if c.network_timeouts > 0 {
            eprintln!("rank {}: {}", self.node.rank(), self.node.network_summary());
        }
        drop(self);
        r?;
        Ok(c)
    }
}
