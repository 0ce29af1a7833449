//! The process's Gemini: what `/dev/kgni0` is for a program linked with `libugni.so.0`.
//!
//! The first call that needs the device (`GNI_CdmCreate`) builds it, once per process:
//!
//! - a process that runs alone (no launcher variables, or a job of one process) hosts a
//!   one-node Gemini machine (threaded engine) whose node is PE 0;
//! - a process that a launcher started as one rank of several hosts its rank's node of the
//!   job's machine (node = PE = fabric port = rank) and joins the fabric between processes
//!   ([`platform::process::join`]), finding the other ranks through the rendezvous
//!   directory of [`pmi::rendezvous`] (variables `NICEMU_UGNI_*`; Open MPI's `mpirun`,
//!   hydra, Slurm and `nicemu run` are recognised).
//!
//! Either way the node's kgni has the job configured with the credentials a Cray launcher
//! hands the process, `PMI_GNI_PTAG`/`PMI_GNI_COOKIE` (`pmi::gni`; nicemu's defaults when
//! unset), as ALPS does before the application starts: a domain created with other
//! credentials fails the ptag/cookie check at `GNI_CdmAttach` (`GNI_RC_PERMISSION_ERROR`).
//! The node lives as long as the process. When the process exits, the node is let finish
//! what it still has to send (kgni's queued datagram messages, BTE transfers, packets on
//! their way to other processes) for a short while, and its links are closed cleanly
//! ([`at_exit`]): on a real system kgni and the NIC outlive the process that posted the
//! work, so a peer waiting for the last answer of a process that exited right after its
//! own wait ended still gets it.
//!
//! Other variables: those of `platform::process` (`NICEMU_NODE_MEMORY_MIB`,
//! `NICEMU_FABRIC*`, ...), and `NICEMU_UGNI_COUNTER_REPORT=1`, which prints the NIC's and the
//! library's counters on stderr when the last domain is destroyed.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use driver::gemini::{Kgni, KgniClient};
use driver::mem::UserSpace;
use platform::process::{HostConfig, HostedNode};
use platform::{EngineKind, GeminiCluster, GeminiNode};
use pmi::gni::Credentials;
use pmi::rendezvous::{Job as Launch, Rendezvous};

/// The prefix of the library's rendezvous variables (`NICEMU_UGNI_*`) and directory
/// (`nicemu-ugni-<job>`).
pub const RENDEZVOUS_NAME: &str = "NICEMU_UGNI";

/// The variable asking for the counter report.
pub const COUNTER_REPORT: &str = "NICEMU_UGNI_COUNTER_REPORT";

/// The variable asking for a trace of the calls that fail (1) or of every call (2).
pub const TRACE: &str = "NICEMU_UGNI_TRACE";

fn env(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

/// Where the node lives.
enum Host {
    /// A one-node machine in this process.
    Alone(GeminiCluster),
    /// This rank's node of the job's machine.
    Job(HostedNode),
}

/// The process's hosted Gemini.
pub(crate) struct Process {
    host: Host,
    rank: u32,
    size: u32,
    /// The address space every kgni client of the process shares.
    space: UserSpace,
    /// The job's credentials (what the node's kgni was configured with).
    pub(crate) credentials: Credentials,
    /// `NICEMU_UGNI_COUNTER_REPORT` was set.
    pub(crate) report: bool,
    admin: OnceLock<Arc<KgniClient>>,
    /// Free positions of the BTE channels when nothing is in flight.
    idle_bte: [u16; 4],
}

impl Process {
    fn node(&self) -> Option<&GeminiNode> {
        match &self.host {
            Host::Alone(c) => c.node(0),
            Host::Job(h) => h.gemini().map(|(_, n)| n),
        }
    }

    /// The node's kgni.
    pub(crate) fn kgni(&self) -> Option<&Arc<Kgni>> {
        self.node().map(GeminiNode::kgni)
    }

    /// Open the device (`open("/dev/kgni0")`): a client in the process's address space.
    pub(crate) fn open(&self) -> Option<Arc<KgniClient>> {
        let k = self.kgni()?;
        Some(Arc::new(k.open_with(false, Some(self.space.clone()))))
    }

    /// The privileged client of the node (the launcher's requests: `GNI_ConfigureJob`),
    /// opened once: the jobs it configures live as long as it does.
    pub(crate) fn admin(&self) -> Option<Arc<KgniClient>> {
        if let Some(a) = self.admin.get() {
            return Some(Arc::clone(a));
        }
        let k = self.kgni()?;
        let a = self
            .admin
            .get_or_init(|| Arc::new(k.open_with(true, Some(self.space.clone()))));
        Some(Arc::clone(a))
    }

    /// The node's NIC address (physical PE).
    pub(crate) fn nic_address(&self) -> Option<u32> {
        self.node().map(GeminiNode::pe)
    }

    /// This process's rank and the job's size (`(0, 1)` alone).
    pub(crate) fn rank_and_size(&self) -> (u32, u32) {
        (self.rank, self.size)
    }

    /// The NIC's counters, then the fabric's between processes (none alone).
    pub(crate) fn counters(&self) -> Vec<(String, u64)> {
        match &self.host {
            Host::Alone(c) => platform::process::gemini_counters(c, 0),
            Host::Job(h) => {
                let f = h.fabric_counters();
                let mut v = h.nic_counters();
                v.extend([
                    ("fabric.packets_sent".to_owned(), f.sent),
                    ("fabric.bytes_sent".to_owned(), f.bytes_sent),
                    ("fabric.packets_received".to_owned(), f.received),
                    ("fabric.bytes_received".to_owned(), f.bytes_received),
                ]);
                v
            }
        }
    }
}

static PROCESS: Mutex<Option<Arc<Process>>> = Mutex::new(None);

/// The job this process belongs to (`None`: alone).
pub(crate) fn launch() -> Result<Option<Launch>, String> {
    Launch::from_lookup(RENDEZVOUS_NAME, env).map_err(|e| e.to_string())
}

/// The process's Gemini, built by the first call (module doc). The error says why there is
/// none.
pub(crate) fn process() -> Result<Arc<Process>, String> {
    let mut slot = PROCESS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(p) = slot.as_ref() {
        return Ok(Arc::clone(p));
    }
    let p = Arc::new(build()?);
    *slot = Some(Arc::clone(&p));
    crate::ffi::exit_hook();
    Ok(p)
}

/// The process's Gemini if it was built already.
pub(crate) fn built() -> Option<Arc<Process>> {
    PROCESS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

fn build() -> Result<Process, String> {
    let mut cfg = HostConfig::from_lookup(env).map_err(|e| e.to_string())?;
    cfg.nic = platform::Nic::Gemini;
    let report = matches!(
        env(COUNTER_REPORT).as_deref().map(str::trim),
        Some("1" | "yes" | "true" | "on")
    );
    let (host, rank, size) = match launch()? {
        None => {
            let machine = GeminiCluster::builder()
                .dims([1, 1, 1])
                .nics_per_router(1)
                .engine(EngineKind::Threaded)
                .memory_per_node(cfg.memory)
                .process_memory(cfg.process_memory)
                .job(driver::gemini::JobConfig {
                    ptag: cfg.gni.ptag,
                    cookie: cfg.gni.cookie,
                    limits: Default::default(),
                    ntt: Vec::new(),
                })
                .build()
                .map_err(|e| format!("building the emulated Gemini node: {e}"))?;
            (Host::Alone(machine), 0, 1)
        }
        Some(launch) => {
            let (rank, size) = (launch.rank, launch.size);
            let mut rdv = Rendezvous::new(launch).map_err(|e| e.to_string())?;
            let joined = platform::process::join(&mut rdv, &cfg);
            rdv.leave();
            let node = joined.map_err(|e| format!("rank {rank} of {size}: {e}"))?;
            (Host::Job(node), rank, size)
        }
    };
    let memory = match &host {
        Host::Alone(c) => c.node(0).map(|n| Arc::clone(n.memory())),
        Host::Job(h) => h.gemini().map(|(_, n)| Arc::clone(n.memory())),
    }
    .ok_or("the emulated node has no Gemini")?;
    let idle_bte = match &host {
        Host::Alone(c) => c.node(0).map(|n| n.kgni().free_counts().bte),
        Host::Job(h) => h.gemini().map(|(_, n)| n.kgni().free_counts().bte),
    }
    .unwrap_or_default();
    Ok(Process {
        idle_bte,
        host,
        rank,
        size,
        space: UserSpace::new(memory),
        credentials: cfg.gni,
        report,
        admin: OnceLock::new(),
    })
}

/// How long an exiting process lets its node finish sending at most.
const LINGER: Duration = Duration::from_secs(2);
/// How long the node must have had nothing to do (nothing received, sent or queued) for the
/// exit to go on.
const QUIET: Duration = Duration::from_millis(20);

/// The process is exiting (an `atexit` handler): let the node finish sending, then close
/// its links to the other processes (module doc).
pub fn at_exit() {
    let Some(p) = built() else {
        return;
    };
    let Some(k) = p.kgni() else {
        return;
    };
    let idle_bte = p.idle_bte;
    let sent = |p: &Process| match &p.host {
        Host::Job(h) => h.fabric_counters().sent,
        Host::Alone(_) => 0,
    };
    let start = Instant::now();
    let mut last = (sent(&p), Instant::now());
    while start.elapsed() < LINGER {
        let did = k.service();
        let busy = did || k.free_counts().bte != idle_bte;
        let s = sent(&p);
        if busy || s != last.0 {
            last = (s, Instant::now());
        } else if last.1.elapsed() >= QUIET {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    if let Host::Job(h) = &p.host {
        h.fabric().close();
    }
}

/// The NIC address device `device_id` has or will have, without building the node: what
/// `PMI_GNI_DEV_ID`/`PMI_GNI_LOC_ADDR` say, else the node's PE when built, else the rank in a
/// launched job (node = PE = rank), else 0. `None` for a device other than 0.
pub(crate) fn nic_address(device_id: u32) -> Result<Option<u32>, String> {
    if device_id != 0 {
        return Ok(None);
    }
    if let Some(a) = pmi::gni::local_address(env, device_id) {
        return Ok(Some(a));
    }
    if let Some(p) = built() {
        return Ok(p.nic_address());
    }
    Ok(Some(launch()?.map_or(0, |l| l.rank)))
}
