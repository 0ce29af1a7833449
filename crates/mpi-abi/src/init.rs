//! World startup: the one place where `MPI_Init` finds out how this process was launched and
//! builds the MPI environment of its rank.
//!
//! Two launch modes exist:
//!
//! - **singleton** (a program started directly, no process manager): a one-node emulated
//!   machine inside the process (`NICEMU_NIC=cassini`, the default, or `gemini`), with the
//!   in-process runtime's pieces (platform cluster on the threaded engine, in-process PMI),
//!   the NIC's transport opened as rank 0 of 1, the machine kept alive until `MPI_Finalize`;
//! - **process manager** (`nicemu run`, hydra's `mpiexec`: the PMI variables `PMI_RANK`,
//!   `PMI_FD` or `PMI_PORT` are set): the PMI-1 client (`pmi::from_env`) and this rank's
//!   own node on the fabric between processes (`runtime::process::init`, configured by
//!   `NICEMU_NIC` and the `NICEMU_FABRIC*` variables, docs/fabric-between-processes.md).

#![forbid(unsafe_code)]

use std::sync::Arc;

use mpi::{Env, Universe};
use platform::{Cluster, EngineKind, GeminiCluster};
use runtime::process::{self, ProcessConfig, ProcessGuard};
use runtime::{InProcessPmi, Nic, Shared};
use transport::Transport;
use transport::cxi::CxiTransport;
use transport::gni::GniTransport;

use crate::consts::MPI_ERR_OTHER;
use crate::error::{AResult, AbiError};

/// Host memory of the singleton's emulated node (committed lazily).
const SINGLETON_MEMORY: u64 = 256 << 20;

/// The PMI variables a process manager sets (PMI-1 simple protocol, as hydra does).
pub const PMI_VARS: [&str; 3] = ["PMI_RANK", "PMI_FD", "PMI_PORT"];

/// The emulated machine behind a rank (kept alive while MPI is initialized; never read).
#[allow(dead_code)]
pub(crate) enum Machine {
    /// A singleton's one-node Cassini machine.
    Cassini(Cluster),
    /// A singleton's one-node Gemini machine.
    Gemini(GeminiCluster),
    /// A machine the caller owns (a rank of an in-process job, see `testing`).
    Hosted,
    /// This rank's node of a multi-process job and its fabric links.
    Process(ProcessGuard),
}

/// The MPI environment of this process's rank. Fields drop in order: the universe (the
/// transport) before the machine it runs on.
pub(crate) struct World {
    /// The rank's MPI environment.
    pub universe: Universe,
    /// The index of the node this rank runs on (colors of `MPI_COMM_TYPE_SHARED`).
    pub node: u32,
    /// The NIC family.
    pub nic: Nic,
    /// Held for its lifetime.
    _machine: Machine,
}

impl World {
    /// The world of a rank whose machine and universe the caller made (the in-process
    /// runtime's jobs).
    pub(crate) fn hosted(universe: Universe, nic: Nic, node: u32) -> Self {
        World {
            universe,
            node,
            nic,
            _machine: Machine::Hosted,
        }
    }

    /// `MPI_Finalize`: complete this rank's traffic, release the transport, then the machine.
    pub(crate) fn finalize(self) -> AResult<()> {
        let World {
            universe, _machine, ..
        } = self;
        if let Machine::Process(guard) = _machine {
            return guard
                .finish(universe)
                .map(|_| ())
                .map_err(|e| other("finalizing", e));
        }
        let r = universe
            .finalize()
            .map_err(|e| other("finalizing the transport", e));
        drop(_machine);
        r
    }
}

/// How the process was started.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Launch {
    /// No process manager: one rank.
    Singleton,
    /// Started by a process manager (the PMI variables named are set).
    ProcessManager(Vec<&'static str>),
}

/// The launch mode the process environment says.
pub(crate) fn launch_mode(get: impl Fn(&str) -> Option<String>) -> Launch {
    let set: Vec<&'static str> = PMI_VARS.into_iter().filter(|v| get(v).is_some()).collect();
    if set.is_empty() {
        Launch::Singleton
    } else {
        Launch::ProcessManager(set)
    }
}

/// The NIC `NICEMU_NIC` names (default Cassini).
pub(crate) fn nic_choice(value: Option<&str>) -> AResult<Nic> {
    match value {
        None => Ok(Nic::Cassini),
        Some(v) => v
            .parse()
            .map_err(|e: String| AbiError::new(MPI_ERR_OTHER, format!("NICEMU_NIC: {e}"))),
    }
}

/// Build this process's MPI world (`MPI_Init`).
pub(crate) fn start_world() -> AResult<World> {
    let env = Env::from_process();
    let nic = nic_choice(env.get("NICEMU_NIC"))?;
    match launch_mode(|v| std::env::var(v).ok()) {
        Launch::Singleton => singleton(nic, env),
        Launch::ProcessManager(vars) => process_manager(nic, env, &vars),
    }
}

/// A rank of a multi-process job started by a process manager: the PMI-1 client, then this
/// rank's node on the fabric between processes. `vars` are the PMI variables that were set
/// (named in the error when the launcher's variables are unusable).
fn process_manager(nic: Nic, env: Env, vars: &[&str]) -> AResult<World> {
    let mut cfg = ProcessConfig::from_env(&env).map_err(|e| other("the job's settings", e))?;
    cfg.node.nic = nic;
    let pmi = pmi::from_env()
        .map_err(|e| other("connecting to the process manager", e))?
        .ok_or_else(|| {
            other(
                "connecting to the process manager",
                format!("{} set but no PMI connection found", vars.join(", ")),
            )
        })?;
    let (universe, guard) =
        process::init(pmi, &cfg).map_err(|e| other("joining the job's fabric", e))?;
    Ok(World {
        universe,
        node: guard.rank(),
        nic,
        _machine: Machine::Process(guard),
    })
}

fn other(what: &str, e: impl std::fmt::Display) -> AbiError {
    AbiError::new(MPI_ERR_OTHER, format!("{what}: {e}"))
}

/// A one-rank job on a one-node emulated machine in this process.
fn singleton(nic: Nic, mut env: Env) -> AResult<World> {
    let pmi = Box::new(InProcessPmi::new(Shared::new(), 0, 1, (1, 0)));
    let (transport, machine): (Box<dyn Transport>, Machine) = match nic {
        Nic::Cassini => {
            let cluster = Cluster::builder()
                .nics(1)
                .engine(EngineKind::Threaded)
                .memory_per_node(SINGLETON_MEMORY)
                .build()
                .map_err(|e| other("building the emulated Cassini node", e))?;
            let devices = cluster.node(0).map(|n| n.cxi_devices()).unwrap_or_default();
            let t = CxiTransport::new(&devices, pmi, &env)
                .map_err(|e| other("opening the cxi transport", e))?;
            (Box::new(t), Machine::Cassini(cluster))
        }
        Nic::Gemini => {
            let cluster = GeminiCluster::builder()
                .dims([1, 1, 1])
                .nics_per_router(1)
                .engine(EngineKind::Threaded)
                .memory_per_node(SINGLETON_MEMORY)
                .build()
                .map_err(|e| other("building the emulated Gemini node", e))?;
            let creds = cluster.job();
            env.set("PMI_GNI_PTAG", &creds.ptag.to_string());
            env.set("PMI_GNI_COOKIE", &format!("{:#x}", creds.cookie));
            let kgni = Arc::clone(
                cluster
                    .node(0)
                    .ok_or_else(|| other("the emulated Gemini node", "missing"))?
                    .kgni(),
            );
            let t = GniTransport::new(&kgni, pmi, &env)
                .map_err(|e| other("opening the gni transport", e))?;
            (Box::new(t), Machine::Gemini(cluster))
        }
    };
    Ok(World {
        universe: Universe::new(transport),
        node: 0,
        nic,
        _machine: machine,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_mode_and_nic_choice() {
        assert_eq!(launch_mode(|_| None), Launch::Singleton);
        let pm = launch_mode(|v| (v == "PMI_FD").then(|| "3".to_string()));
        assert_eq!(pm, Launch::ProcessManager(vec!["PMI_FD"]));
        assert_eq!(nic_choice(None).unwrap(), Nic::Cassini);
        assert_eq!(nic_choice(Some("gemini")).unwrap(), Nic::Gemini);
        let e = nic_choice(Some("myrinet")).unwrap_err();
        assert!(
            e.msg.contains("NICEMU_NIC") && e.msg.contains("myrinet"),
            "{e:?}"
        );
    }
}
