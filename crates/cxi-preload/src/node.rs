//! The emulated Cassini this process hosts, created on the first open of `/dev/cxi0` (or the
//! first read of a file that needs the device), kept until the process exits.
//!
//! - A process that no launcher started, or a job of one process, builds a one-node machine
//!   (one Cassini, NID 0, threaded engine).
//! - A process that a PMI-1 launcher started as one rank of several (`nicemu run`, hydra's
//!   `mpiexec`: `PMI_PORT`/`PMI_FD`) hosts its rank's node of the job's machine (NID = rank)
//!   and links it to the other ranks' nodes ([`platform::process::join`]: shared memory on
//!   this host, TCP between hosts).
//! - A rank of Open MPI's `mpirun` (no PMI-1: `OMPI_COMM_WORLD_RANK`/`SIZE`) finds the others
//!   through a rendezvous directory ([`pmi::rendezvous`]), as libnicemu-fi.so does.
//!
//! Every rank of a job must open the device (the join is collective). With
//! `NICEMU_CXI_JOIN=start` ([`JOIN_VAR`]) each process joins as it starts, in a thread of its
//! own, instead of on its first open: programs that exchange addresses over a socket before
//! opening the device (fabtests, libcxi's utilities) need that, as a real NIC is there before
//! the program starts. Every process that loads the library then joins, so the variable
//! belongs to the program itself, not to a shell wrapping it. The PMI client is
//! finalized when the process exits ([`finalize`], from an `atexit` handler), so launchers
//! see a clean end; the node itself is never torn down (its threads end with the process).

#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex, PoisonError};

use driver::cassini::CxiDevice;
use platform::process::{HostConfig, HostedNode};
use platform::{Cluster, EngineKind};
use pmi::Pmi;

/// Why the node could not be brought up (the `open` of `/dev/cxi0` fails with `ENODEV` and
/// this is printed on stderr once).
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The launcher's variables or nicemu's are wrong.
    #[error("{0}")]
    Config(String),
    /// The machine or the fabric between processes failed.
    #[error("{0}")]
    Host(String),
    /// PMI failed.
    #[error(transparent)]
    Pmi(#[from] pmi::Error),
}

enum Host {
    /// Kept for the life of the process: the node lives in it.
    Alone(#[allow(dead_code)] Cluster),
    Job {
        node: HostedNode,
        pmi: Option<Box<dyn Pmi>>,
    },
}

/// This process's node.
pub struct Node {
    devices: Vec<Arc<CxiDevice>>,
    rank: u32,
    size: u32,
    host: Mutex<Host>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// `/dev/cxi<i>`.
    pub fn device(&self, i: usize) -> Option<&Arc<CxiDevice>> {
        self.devices.get(i)
    }

    /// This process's rank and the job's size (`(0, 1)` alone).
    pub fn rank_and_size(&self) -> (u32, u32) {
        (self.rank, self.size)
    }

    /// The fabric's counters between processes (none alone): packets and bytes sent and
    /// received, network timeouts, dead peers.
    pub fn fabric_line(&self) -> Option<String> {
        let h = self.host.lock().unwrap_or_else(PoisonError::into_inner);
        match &*h {
            Host::Alone(_) => None,
            Host::Job { node, .. } => {
                let c = node.fabric_counters();
                Some(format!(
                    "fabric: sent {} packets ({} B), received {} packets ({} B), {} network \
                     timeouts, {} dead peers",
                    c.sent,
                    c.bytes_sent,
                    c.received,
                    c.bytes_received,
                    c.network_timeouts,
                    c.dead_peers
                ))
            }
        }
    }
}

static NODE: Mutex<Option<Result<Arc<Node>, String>>> = Mutex::new(None);

/// The node, built on the first call (later calls return the same node, or the same
/// failure).
pub fn get() -> Result<Arc<Node>, String> {
    let mut slot = NODE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(r) = slot.as_ref() {
        return r.clone();
    }
    let r = build().map(Arc::new).map_err(|e| {
        let msg = format!("nicemu-cxi: cannot host the emulated Cassini: {e}");
        eprintln!("{msg}");
        msg
    });
    *slot = Some(r.clone());
    r
}

/// The node if it was built, without building it.
pub fn existing() -> Option<Arc<Node>> {
    let slot = NODE.lock().unwrap_or_else(PoisonError::into_inner);
    slot.as_ref().and_then(|r| r.as_ref().ok().cloned())
}

/// Finalize the job's PMI client (at exit): the launcher then sees this rank end cleanly.
pub fn finalize() {
    // `try_lock`: an exit from inside a device call (a signal handler calling exit) must not
    // wait for a lock the interrupted code holds.
    let Ok(slot) = NODE.try_lock() else {
        return;
    };
    if let Some(Ok(node)) = slot.as_ref()
        && let Ok(mut h) = node.host.try_lock()
        && let Host::Job { pmi, .. } = &mut *h
        && let Some(mut p) = pmi.take()
    {
        p.finalize();
    }
}

/// `NICEMU_CXI_JOIN`: `start` brings the node up when the library is loaded; `open` (the
/// default) on the first open of the device.
pub const JOIN_VAR: &str = "NICEMU_CXI_JOIN";

/// Whether this process brings its node up at load ([`JOIN_VAR`] = `start`).
pub fn join_at_start() -> bool {
    lookup(JOIN_VAR).is_some_and(|v| v.trim().eq_ignore_ascii_case("start"))
}

fn lookup(v: &str) -> Option<String> {
    std::env::var(v).ok()
}

/// `NICEMU_CXI_QOS_PROFILE`: the driver's `active_qos_profile` (1 HPC, 2 LL_BE_BD_ET, 3
/// LL_BE_BD_ET1_ET2; default 2, the module's default). HPE's libcxi test VMs load the
/// driver with 1, libfabric's with the default.
pub const QOS_VAR: &str = "NICEMU_CXI_QOS_PROFILE";

fn host_config() -> Result<HostConfig, NodeError> {
    let mut cfg = HostConfig::from_lookup(lookup).map_err(|e| NodeError::Config(e.to_string()))?;
    cfg.nic = platform::Nic::Cassini;
    let qos = match lookup(QOS_VAR) {
        None => 2,
        Some(v) => v
            .trim()
            .parse::<u8>()
            .ok()
            .filter(|p| (1..=3).contains(p))
            .ok_or_else(|| NodeError::Config(format!("{QOS_VAR}={v:?}: expected 1, 2 or 3")))?,
    };
    cfg.driver.qos_profile = Some(qos);
    Ok(cfg)
}

fn build() -> Result<Node, NodeError> {
    let cfg = host_config()?;
    let pmi: Option<Box<dyn Pmi>> = match pmi::from_env()? {
        Some(p) => Some(p),
        None => pmi::rendezvous::from_env("NICEMU_CXI", lookup)
            .map_err(|e| NodeError::Config(e.to_string()))?
            .map(|r| Box::new(r) as Box<dyn Pmi>),
    };
    match pmi {
        Some(mut pmi) if pmi.size() > 1 => {
            let (rank, size) = (pmi.rank(), pmi.size());
            let node = platform::process::join(&mut *pmi, &cfg)
                .map_err(|e| NodeError::Host(e.to_string()))?;
            let devices = node.cxi_devices();
            if devices.is_empty() {
                return Err(NodeError::Host("the node has no Cassini".into()));
            }
            let pmi = node.watch_peers(pmi);
            Ok(Node {
                devices,
                rank,
                size,
                host: Mutex::new(Host::Job {
                    node,
                    pmi: Some(pmi),
                }),
            })
        }
        _ => {
            let cluster = Cluster::builder()
                .nics(1)
                .engine(EngineKind::Threaded)
                .memory_per_node(cfg.memory)
                .driver_config(cfg.driver.clone())
                .process_memory(cfg.process_memory)
                .build()
                .map_err(|e| NodeError::Host(e.to_string()))?;
            let devices = cluster.node(0).map(|n| n.cxi_devices()).unwrap_or_default();
            if devices.is_empty() {
                return Err(NodeError::Host("the node has no Cassini".into()));
            }
            Ok(Node {
                devices,
                rank: 0,
                size: 1,
                host: Mutex::new(Host::Alone(cluster)),
            })
        }
    }
}
