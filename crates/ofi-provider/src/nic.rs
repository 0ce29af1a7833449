//! Opening this process's NIC.
//!
//! A process running alone (no launcher, or a job of one process) builds a one-node emulated
//! Cassini machine inside itself (one NIC, threaded engine): all its endpoints live on that
//! NIC. A process that a launcher started as one rank of several ([`launch_from_env`])
//! hosts its rank's node of the job's machine and joins the fabric between processes
//! ([`platform::process::join`]: shared memory with ranks on this host, TCP with others), so
//! its endpoints reach the endpoints of every other rank. The ranks find each other's fabric
//! addresses through the [`crate::rendezvous`] directory; endpoint names (the NIC address
//! `fi_getname` returns) are exchanged by the application, as with any provider.
//!
//! `NICEMU_OFI_COUNTER_REPORT=1` prints, when the NIC is closed, one line per process on
//! stderr with the NIC's non-zero hardware counters and the fabric's packet and byte counts
//! to and from other processes: evidence that the traffic went through the emulated NICs.

#![forbid(unsafe_code)]

use std::sync::{Arc, OnceLock};

use driver::cassini::CxiDevice;
use platform::process::{HostConfig, HostedNode};
use platform::{Cluster, EngineKind};
use transport::Env;

use crate::error::{Error, Result};
use crate::rendezvous::{Launch, launch_from_env, start};

/// Host memory of the emulated node unless `NICEMU_NODE_MEMORY_MIB` names another size:
/// staging and landing buffers of every endpoint and the mirrors of memory regions open to
/// remote access. Committed only where written (`emu_core::memory`), so a large node costs
/// address space, not RAM.
pub const NODE_MEMORY_DEFAULT: u64 = 2 << 30;

/// The node's memory, once [`open`] built it.
static NODE_MEMORY: OnceLock<u64> = OnceLock::new();

/// Host memory of this process's emulated node, bytes (what the limits in error messages
/// name).
pub fn node_memory() -> u64 {
    NODE_MEMORY.get().copied().unwrap_or(NODE_MEMORY_DEFAULT)
}

/// The node memory `env` asks for (`NICEMU_NODE_MEMORY_MIB`, checked as `platform::process` checks
/// it), else [`NODE_MEMORY_DEFAULT`].
fn node_memory_of(env: &Env) -> Result<HostConfig> {
    let mut cfg = HostConfig::from_lookup(|v| env.get(v).map(str::to_string))
        .map_err(|e| Error::Nic(e.to_string()))?;
    if env.get("NICEMU_NODE_MEMORY_MIB").is_none() {
        cfg.memory = NODE_MEMORY_DEFAULT;
    }
    let _ = NODE_MEMORY.set(cfg.memory);
    Ok(cfg)
}

/// The variable asking for the counter line at close.
pub const COUNTER_REPORT: &str = "NICEMU_OFI_COUNTER_REPORT";

/// Where the node lives.
enum Host {
    /// A one-node machine in this process.
    Alone(Cluster),
    /// This rank's node of the job's machine, linked to the other processes.
    Process(HostedNode),
}

/// This process's NIC: the devices endpoints open, and what keeps them alive.
pub struct Nic {
    devices: Vec<Arc<CxiDevice>>,
    rank: u32,
    size: u32,
    report: bool,
    /// The emulated machine hosting the NIC (dropped after the devices).
    host: Host,
}

impl Nic {
    /// The cxi devices of this node.
    pub fn devices(&self) -> &[Arc<CxiDevice>] {
        &self.devices
    }

    /// This process's rank and the job's size (`(0, 1)` when alone).
    pub fn rank_and_size(&self) -> (u32, u32) {
        (self.rank, self.size)
    }

    /// The NIC's non-zero hardware counters by name, then the fabric's counters between
    /// processes (none when alone).
    pub fn counters(&self) -> Vec<(String, u64)> {
        match &self.host {
            Host::Alone(c) => platform::process::cassini_counters(c, 0),
            Host::Process(g) => {
                let f = g.fabric_counters();
                let mut v = g.nic_counters();
                v.extend([
                    ("fabric.packets_sent".to_owned(), f.sent),
                    ("fabric.bytes_sent".to_owned(), f.bytes_sent),
                    ("fabric.packets_received".to_owned(), f.received),
                    ("fabric.bytes_received".to_owned(), f.bytes_received),
                    ("fabric.network_timeouts".to_owned(), f.network_timeouts),
                ]);
                v
            }
        }
    }

    /// The counter line of [`COUNTER_REPORT`].
    pub fn report_line(&self) -> String {
        let (rank, size) = self.rank_and_size();
        let list: Vec<String> = self
            .counters()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("nicemu-ofi: rank {rank} of {size}: {}", list.join(" "))
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        if self.report {
            transport::env::eprint_line(&self.report_line());
        }
    }
}

/// The knobs of this process (`FI_`, `NICEMU_`, `PMI_`, ...) and Open MPI's launcher
/// variables (`OMPI_`, `PMIX_`).
fn process_env() -> Env {
    let mut env = Env::from_process();
    for (k, v) in std::env::vars() {
        if k.starts_with("OMPI_") || k.starts_with("PMIX_") {
            env.set(&k, &v);
        }
    }
    env
}

fn report_wanted(env: &Env) -> Result<bool> {
    env.flag(COUNTER_REPORT, false)
        .map_err(|e| Error::Nic(e.to_string()))
}

/// Open this process's NIC: alone, or as its rank's node of the job's machine (module doc).
pub fn open() -> Result<Nic> {
    let env = process_env();
    let report = report_wanted(&env)?;
    match launch_from_env(&env)? {
        None => open_alone(node_memory_of(&env)?.memory, report),
        Some(launch) => open_in_job(&env, launch, report),
    }
}

fn open_alone(memory: u64, report: bool) -> Result<Nic> {
    let machine = Cluster::builder()
        .nics(1)
        .engine(EngineKind::Threaded)
        .memory_per_node(memory)
        .build()
        .map_err(|e| Error::Nic(format!("building the emulated Cassini node: {e}")))?;
    let devices = machine.node(0).map(|n| n.cxi_devices()).unwrap_or_default();
    if devices.is_empty() {
        return Err(Error::Nic("the emulated node has no cxi device".into()));
    }
    Ok(Nic {
        devices,
        rank: 0,
        size: 1,
        report,
        host: Host::Alone(machine),
    })
}

fn open_in_job(env: &Env, launch: Launch, report: bool) -> Result<Nic> {
    let (rank, size) = (launch.rank, launch.size);
    let cfg = node_memory_of(env)?;
    if cfg.nic != platform::Nic::Cassini {
        return Err(Error::Nic(
            "NICEMU_NIC: the libfabric provider drives a Cassini (cxi) only".into(),
        ));
    }
    let mut rdv = start(launch)?;
    let joined = platform::process::join(&mut rdv, &cfg);
    rdv.leave();
    let guard = joined.map_err(|e| Error::Nic(format!("rank {rank} of {size}: {e}")))?;
    let devices = guard.cxi_devices();
    if devices.is_empty() {
        return Err(Error::Nic(format!(
            "rank {rank}: the node has no cxi device"
        )));
    }
    Ok(Nic {
        devices,
        rank,
        size,
        report,
        host: Host::Process(guard),
    })
}

/// The process's NIC, opened by the first domain and shared by every later one while any
/// is open (so all endpoints of the process are on one NIC and can reach each other).
pub fn shared() -> Result<Arc<Nic>> {
    static NIC: std::sync::Mutex<std::sync::Weak<Nic>> =
        std::sync::Mutex::new(std::sync::Weak::new());
    let mut slot = NIC.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = slot.upgrade() {
        return Ok(n);
    }
    let n = Arc::new(open()?);
    *slot = Arc::downgrade(&n);
    Ok(n)
}

/// The NID this process's NIC has or will have, without opening it (for `fi_getinfo`): its
/// rank in a launched job (node = NID = rank), 0 alone.
pub fn local_nid() -> Result<u32> {
    Ok(launch_from_env(&process_env())?.map_or(0, |l| l.rank))
}
