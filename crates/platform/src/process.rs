//! One node per process: this process hosts one node of a job's machine (its Cassini or
//! Gemini on a threaded engine), connected to the other processes' nodes through the fabric
//! between processes ([`crate::remote`]): shared memory with processes on this host, TCP with
//! the others. [`join`] is what a process started by a launcher does once its PMI client is
//! up, before any software opens the NIC:
//!
//! 1. build this rank's node (node = fabric port = rank) in a fabric of `size` ports;
//! 2. publish through PMI its host name, fabric port, shared-memory segment and TCP
//!    address (`nicemu-fabric-*` keys), like the real stacks publish endpoint names; fence;
//! 3. link to every peer: shared memory when it published the same host name (unless
//!    `NICEMU_FABRIC=tcp`), TCP otherwise; fence, then seal the segment (nothing can open it
//!    any more).
//!
//! What runs on the node then is the caller's: the MPI runtime opens a transport on it, the
//! libfabric provider its endpoints. The node's engine runs on a clock that stands still
//! while a peer process does not run ([`HostedNode::clock`]), so the NICs' timeouts keep
//! their hardware values (Gemini's 100 ms request watchdog, Cassini's 1 s request timeout
//! and retransmissions) whatever the host's scheduler does. A peer that dies is noticed by
//! the fabric (its pid gone, its connection reset, its host unreachable for
//! `NICEMU_FABRIC_TIMEOUT_MS`); [`HostedNode::watch_peers`] wraps the job's PMI so that from
//! then on it reports the job aborted with the reason, and the packets that could not reach
//! the peer are counted as network timeouts ([`HostedNode::network_summary`]).
//!
//! Variables ([`HostConfig::from_lookup`]): `NICEMU_NIC` (`cassini`/`cxi` or `gemini`/`gni`,
//! default cassini), `NICEMU_FABRIC` (`auto` or `tcp`), `NICEMU_FABRIC_TIMEOUT_MS` (how long a
//! TCP peer's host may stay unreachable; default 10000), `NICEMU_FABRIC_RING_KIB` (inbound ring per peer, default 1024),
//! `NICEMU_FABRIC_IP` (the address published for TCP; default this host's address on the
//! route to the PMI server when that is on another host, else the first address the host
//! name resolves to that is not loopback, else 127.0.0.1), `NICEMU_HOST` (the host name
//! published: ranks with the same one link through shared memory; default the kernel's host
//! name; `nicemu run --hosts` sets it), `NICEMU_NODE_MEMORY_MIB` (the node's RAM, default
//! 1024: committed only as it is touched; the OSU one-sided bandwidth tests allocate a
//! 256 MiB window), `NICEMU_PROCESS_MEMORY` (`1`, the default: the node reaches this
//! process's own registered memory beside its RAM, `emu_core::procmem`; `0`: only its RAM),
//! the launcher's `PMI_PORT`, and on a Gemini node the job credentials
//! `PMI_GNI_PTAG`/`PMI_GNI_COOKIE` (`pmi::gni`): the node's job is configured with them, as
//! ALPS configures the job a Cray launcher hands them for.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use pmi::Pmi;
use thiserror::Error;

use crate::remote::{Outlet, PortId, ProcessFabric, RemoteConfig, RemoteCounters, RemoteError};
use crate::{Cluster, EngineKind, GeminiCluster, Nic};

/// The smallest and largest node memory `NICEMU_NODE_MEMORY_MIB` may ask for, MiB.
pub const NODE_MEMORY_MIB: std::ops::RangeInclusive<u64> = 16..=1 << 20;

/// A value of `NICEMU_NODE_MEMORY_MIB` (MiB) as bytes: every kind of job (a rank process,
/// an in-process job, the libfabric provider) reads the variable through this.
pub fn node_memory(value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|m| NODE_MEMORY_MIB.contains(m))
        .map(|mib| mib << 20)
        .ok_or_else(|| {
            format!(
                "expected MiB between {} and {}",
                NODE_MEMORY_MIB.start(),
                NODE_MEMORY_MIB.end()
            )
        })
}

/// Why a process could not host its node or join the job.
#[derive(Debug, Error)]
pub enum HostError {
    /// A bad environment variable.
    #[error("{var}={value:?}: {reason}")]
    Config {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The node could not be built.
    #[error("building this rank's node: {0}")]
    Machine(String),
    /// The fabric between processes failed.
    #[error("fabric between processes: {0}")]
    Fabric(#[from] RemoteError),
    /// The exchange of addresses through PMI failed.
    #[error(transparent)]
    Pmi(#[from] pmi::Error),
    /// The launcher's variables do not describe a job, or its rendezvous directory cannot
    /// be used ([`crate::rendezvous`]).
    #[error("{0}")]
    Launch(String),
}

/// How this process hosts its node and joins the job (see the module doc for the variables).
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// The NIC family (every rank must agree).
    pub nic: Nic,
    /// Host memory of the node, bytes.
    pub memory: u64,
    /// Always TCP, even to peers on this host.
    pub force_tcp: bool,
    /// How long a TCP peer's host may stay unreachable (data unacknowledged, keepalives
    /// unanswered) before the peer is declared gone.
    pub timeout: Duration,
    /// Data bytes of each inbound ring.
    pub ring_bytes: usize,
    /// The address the TCP listener binds to (all interfaces by default).
    pub tcp_bind: IpAddr,
    /// The address published for TCP (`None`: found from the host name).
    pub tcp_advertise: Option<IpAddr>,
    /// This host's name as compared between ranks (`None`: the kernel's host name).
    pub host: Option<String>,
    /// The launcher's `PMI_PORT` (`host:port`), if it gave one: the route to it tells which
    /// of this host's addresses the other hosts reach.
    pub pmi_port: Option<String>,
    /// The Cassini driver's module parameters.
    pub driver: driver::cassini::DriverConfig,
    /// Whether the node reaches this process's own memory (registered ranges) beside its RAM.
    pub process_memory: bool,
    /// The ptag and cookie of the job a Gemini node configures.
    pub gni: pmi::gni::Credentials,
}

impl HostConfig {
    /// Defaults for `nic`.
    pub fn new(nic: Nic) -> Self {
        HostConfig {
            nic,
            memory: 1 << 30,
            force_tcp: false,
            timeout: Duration::from_secs(10),
            ring_bytes: 1 << 20,
            tcp_bind: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            tcp_advertise: None,
            host: None,
            pmi_port: None,
            driver: driver::cassini::DriverConfig::default(),
            process_memory: true,
            gni: pmi::gni::Credentials::default(),
        }
    }

    /// The configuration the variables seen through `lookup` ask for (`std::env::var` in a
    /// real process); a bad value is an error naming the variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, HostError> {
        let bad = |var: &str, value: &str, reason: &str| HostError::Config {
            var: var.into(),
            value: value.into(),
            reason: reason.into(),
        };
        let nic = match lookup("NICEMU_NIC") {
            None => Nic::Cassini,
            Some(v) => v.parse().map_err(|e: String| bad("NICEMU_NIC", &v, &e))?,
        };
        let mut cfg = HostConfig::new(nic);
        if let Some(v) = lookup("NICEMU_FABRIC") {
            match v.to_ascii_lowercase().as_str() {
                "auto" => {}
                "tcp" => cfg.force_tcp = true,
                _ => return Err(bad("NICEMU_FABRIC", &v, "expected auto or tcp")),
            }
        }
        if let Some(v) = lookup("NICEMU_FABRIC_TIMEOUT_MS") {
            let ms: u64 =
                v.trim().parse().ok().filter(|&ms| ms > 0).ok_or_else(|| {
                    bad("NICEMU_FABRIC_TIMEOUT_MS", &v, "expected milliseconds > 0")
                })?;
            cfg.timeout = Duration::from_millis(ms);
        }
        if let Some(v) = lookup("NICEMU_FABRIC_RING_KIB") {
            let kib: usize = v
                .trim()
                .parse()
                .ok()
                .filter(|&k: &usize| k >= 4 && k.is_power_of_two())
                .ok_or_else(|| bad("NICEMU_FABRIC_RING_KIB", &v, "expected a power of two >= 4"))?;
            cfg.ring_bytes = kib << 10;
        }
        if let Some(v) = lookup("NICEMU_NODE_MEMORY_MIB") {
            cfg.memory = node_memory(&v).map_err(|why| bad("NICEMU_NODE_MEMORY_MIB", &v, &why))?;
        }
        if let Some(v) = lookup("NICEMU_HOST") {
            let v = v.trim();
            if v.is_empty() || v.contains(char::is_whitespace) {
                return Err(bad("NICEMU_HOST", v, "expected a host name"));
            }
            cfg.host = Some(v.to_string());
        }
        if let Some(v) = lookup("NICEMU_FABRIC_IP") {
            cfg.tcp_advertise = Some(
                v.trim()
                    .parse()
                    .map_err(|_| bad("NICEMU_FABRIC_IP", &v, "expected an IP address"))?,
            );
        }
        if let Some(v) = lookup("NICEMU_PROCESS_MEMORY") {
            cfg.process_memory = match v.trim() {
                "1" => true,
                "0" => false,
                _ => return Err(bad("NICEMU_PROCESS_MEMORY", &v, "expected 0 or 1")),
            };
        }
        cfg.pmi_port = lookup("PMI_PORT");
        cfg.gni = pmi::gni::Credentials::from_lookup(&lookup)
            .map_err(|e| bad(e.var, &e.value, "expected a decimal number"))?;
        Ok(cfg)
    }
}

const KEY_HOST: &str = "nicemu-fabric-host";
const KEY_PORT: &str = "nicemu-fabric-port";
const KEY_SHM: &str = "nicemu-fabric-shm";
const KEY_TCP: &str = "nicemu-fabric-tcp";

/// This rank's node (either NIC).
enum Machine {
    Cassini(Cluster),
    Gemini(GeminiCluster),
}

/// The node this process hosts, linked to its peers. Dropping it stops the links, then tears
/// the node down (close what runs on the node first).
pub struct HostedNode {
    rank: u32,
    fabric: Arc<ProcessFabric>,
    machine: Option<Machine>,
}

impl std::fmt::Debug for HostedNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostedNode")
            .field("rank", &self.rank)
            .field("fabric", &self.fabric)
            .finish_non_exhaustive()
    }
}

/// A job's PMI plus the fabric's view of dead peers, so that a peer that died aborts every
/// wait of the software on the node with the reason.
struct FabricPmi {
    inner: Box<dyn Pmi>,
    fabric: Arc<ProcessFabric>,
}

impl Pmi for FabricPmi {
    fn rank(&self) -> u32 {
        self.inner.rank()
    }
    fn size(&self) -> u32 {
        self.inner.size()
    }
    fn local(&self) -> (u32, u32) {
        self.inner.local()
    }
    fn put(&mut self, key: &str, value: &[u8]) -> pmi::Result<()> {
        self.inner.put(key, value)
    }
    fn fence(&mut self) -> pmi::Result<()> {
        self.fabric
            .check()
            .map_err(|e| pmi::Error::Failed(e.to_string()))?;
        self.inner.fence()
    }
    fn get(&mut self, rank: u32, key: &str) -> pmi::Result<Vec<u8>> {
        self.inner.get(rank, key)
    }
    fn abort(&self, why: &str) {
        self.inner.abort(why);
    }
    fn aborted(&self) -> Option<String> {
        self.inner
            .aborted()
            .or_else(|| self.fabric.check().err().map(|e| e.to_string()))
    }
    fn finalize(&mut self) {
        self.inner.finalize();
    }
}

fn host_name(cfg: &HostConfig) -> String {
    cfg.host.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "localhost".into())
    })
}

/// The address peers on other hosts reach this one at.
fn advertise(cfg: &HostConfig, host: &str) -> IpAddr {
    if let Some(ip) = cfg.tcp_advertise {
        return ip;
    }
    if !cfg.tcp_bind.is_unspecified() {
        return cfg.tcp_bind;
    }
    route_to_pmi(cfg)
        .or_else(|| {
            (host, 0)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.find(|a| !a.ip().is_loopback()).map(|a| a.ip()))
        })
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// When the PMI server is on another host (`PMI_PORT` not a loopback address): this host's
/// address on the route to it, which the launcher's other hosts can reach too. No packet is
/// sent; a UDP socket is only connected.
fn route_to_pmi(cfg: &HostConfig) -> Option<IpAddr> {
    let server: SocketAddr = cfg
        .pmi_port
        .as_deref()?
        .trim()
        .to_socket_addrs()
        .ok()?
        .next()?;
    if server.ip().is_loopback() {
        return None;
    }
    let sock = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    sock.connect(server).ok()?;
    let ip = sock.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

fn published(rank: u32, key: &str) -> pmi::Error {
    pmi::Error::Failed(format!("PMI: rank {rank} published a bad {key}"))
}

fn utf8(rank: u32, key: &str, v: Vec<u8>) -> Result<String, HostError> {
    String::from_utf8(v).map_err(|_| published(rank, key).into())
}

/// Host this rank's node and link it to every peer, as `pmi` says (see the module doc). On
/// failure the job is aborted through `pmi`, so no peer waits forever for this one. Only
/// `pmi`'s put, fence and get are used.
pub fn join(pmi: &mut dyn Pmi, cfg: &HostConfig) -> Result<HostedNode, HostError> {
    match link(pmi, cfg) {
        Ok((fabric, machine)) => Ok(HostedNode {
            rank: pmi.rank(),
            fabric,
            machine: Some(machine),
        }),
        Err(e) => {
            pmi.abort(&e.to_string());
            Err(e)
        }
    }
}

fn build(rank: u32, size: u32, cfg: &HostConfig) -> Result<Machine, HostError> {
    let engine = EngineKind::Threaded;
    let machine = match cfg.nic {
        Nic::Cassini => Machine::Cassini(
            Cluster::builder()
                .nics(size as usize)
                .engine(engine)
                .memory_per_node(cfg.memory)
                .driver_config(cfg.driver.clone())
                .process_memory(cfg.process_memory)
                .hosted_node(rank as usize)
                .build()
                .map_err(|e| HostError::Machine(e.to_string()))?,
        ),
        Nic::Gemini => {
            let (dims, per_router) = crate::gemini::torus_of(size);
            Machine::Gemini(
                GeminiCluster::builder()
                    .dims(dims)
                    .nics_per_router(per_router)
                    .engine(engine)
                    .memory_per_node(cfg.memory)
                    .process_memory(cfg.process_memory)
                    .hosted_node(rank)
                    .job(driver::gemini::JobConfig {
                        ptag: cfg.gni.ptag,
                        cookie: cfg.gni.cookie,
                        limits: Default::default(),
                        ntt: Vec::new(),
                    })
                    .build()
                    .map_err(|e| HostError::Machine(e.to_string()))?,
            )
        }
    };
    Ok(machine)
}

fn link(pmi: &mut dyn Pmi, cfg: &HostConfig) -> Result<(Arc<ProcessFabric>, Machine), HostError> {
    let (rank, size) = (pmi.rank(), pmi.size());
    let machine = build(rank, size, cfg)?;
    let threaded = match &machine {
        Machine::Cassini(c) => c.threaded(),
        Machine::Gemini(g) => g.threaded(),
    }
    .ok_or_else(|| HostError::Machine("the node has no threaded engine".into()))?;
    let rcfg = RemoteConfig {
        timeout: cfg.timeout,
        ring_bytes: cfg.ring_bytes,
        tcp_bind: cfg.tcp_bind,
        ..RemoteConfig::new(PortId(rank), size)
    };
    let fabric = Arc::new(ProcessFabric::new(rcfg, threaded.arrivals())?);
    threaded
        .set_outlet(Arc::clone(&fabric) as Arc<dyn Outlet>)
        .map_err(|e| HostError::Machine(e.to_string()))?;

    let host = host_name(cfg);
    let tcp = SocketAddr::new(advertise(cfg, &host), fabric.tcp_address().port());
    pmi.put(KEY_HOST, host.as_bytes())?;
    pmi.put(KEY_PORT, &rank.to_le_bytes())?;
    pmi.put(KEY_SHM, fabric.shm_address().as_bytes())?;
    pmi.put(KEY_TCP, tcp.to_string().as_bytes())?;
    pmi.fence()?;
    for r in (0..size).filter(|&r| r != rank) {
        let port = pmi.get(r, KEY_PORT)?;
        let port = <[u8; 4]>::try_from(port.as_slice())
            .map(u32::from_le_bytes)
            .ok()
            .filter(|&p| p < size)
            .ok_or_else(|| published(r, "fabric port"))?;
        let peer_host = utf8(r, KEY_HOST, pmi.get(r, KEY_HOST)?)?;
        if !cfg.force_tcp && peer_host == host {
            let shm = utf8(r, KEY_SHM, pmi.get(r, KEY_SHM)?)?;
            fabric.connect_shm(PortId(port), &shm)?;
        } else {
            let addr = utf8(r, KEY_TCP, pmi.get(r, KEY_TCP)?)?;
            let addr: SocketAddr = addr.parse().map_err(|_| published(r, "TCP address"))?;
            fabric.connect_tcp(PortId(port), addr)?;
        }
    }
    // Every peer has mapped our segment (and connected): nothing may open it any more.
    pmi.fence()?;
    fabric.seal();
    Ok((fabric, machine))
}

impl HostedNode {
    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// `pmi` (the job's), also reporting the job aborted once the fabric lost a peer: the PMI
    /// to hand the software that runs on the node.
    pub fn watch_peers(&self, pmi: Box<dyn Pmi>) -> Box<dyn Pmi> {
        Box::new(FabricPmi {
            inner: pmi,
            fabric: Arc::clone(&self.fabric),
        })
    }

    /// The fabric's counters (packets and bytes to and from other processes, network
    /// timeouts, dead peers).
    pub fn fabric_counters(&self) -> RemoteCounters {
        self.fabric.counters()
    }

    /// The cxi devices of this rank's node (none on a Gemini node).
    pub fn cxi_devices(&self) -> Vec<Arc<driver::cassini::CxiDevice>> {
        match self.machine.as_ref() {
            Some(Machine::Cassini(c)) => c
                .node(self.rank as usize)
                .map(|n| n.cxi_devices())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// The Gemini machine and this rank's node on it (`None` on a Cassini node).
    pub fn gemini(&self) -> Option<(&GeminiCluster, &crate::GeminiNode)> {
        match self.machine.as_ref() {
            Some(Machine::Gemini(g)) => g.node(self.rank as usize).map(|n| (g, n)),
            _ => None,
        }
    }

    /// The fabric between processes.
    pub fn fabric(&self) -> &Arc<ProcessFabric> {
        &self.fabric
    }

    /// The node's engine clock: real time that stands still while a process of the job
    /// does not run (docs/fabric-between-processes.md, "Time"). Host software that installs
    /// it on its thread ([`emu_core::clock::install_virtual`]) counts its own timeouts the
    /// same way.
    pub fn clock(&self) -> Arc<crate::remote::JobClock> {
        let threaded = match self.machine.as_ref() {
            Some(Machine::Cassini(c)) => c.threaded(),
            Some(Machine::Gemini(g)) => g.threaded(),
            None => None,
        };
        threaded.map_or_else(|| Arc::new(crate::remote::JobClock::new()), |t| t.clock())
    }

    /// `Network Summary: N network timeouts` (packets that could not reach a peer that died
    /// or stopped answering).
    pub fn network_summary(&self) -> String {
        let c = self.fabric.counters();
        format!(
            "Network Summary: {} network timeouts{}",
            c.network_timeouts,
            if c.dead_peers > 0 {
                format!(" ({} peers lost)", c.dead_peers)
            } else {
                String::new()
            }
        )
    }

    /// The NIC's traffic counters, by name (Cassini: the non-zero hardware counters read
    /// through the CSR window, `c_cq_cntrs.success_tx_cntr`, ...; Gemini: the model's
    /// packet and byte counters).
    pub fn nic_counters(&self) -> Vec<(String, u64)> {
        match self.machine.as_ref() {
            Some(Machine::Cassini(c)) => cassini_counters(c, self.rank as usize),
            Some(Machine::Gemini(g)) => gemini_counters(g, self.rank as usize),
            None => Vec::new(),
        }
    }
}

/// How long a node that leaves the job lets its NIC finish what it owes its peers (the
/// acknowledgements its retransmission scan sends) before it closes its links.
const SETTLE_ON_LEAVE: Duration = Duration::from_millis(500);

impl Drop for HostedNode {
    fn drop(&mut self) {
        // A NIC owes its peers acknowledgements of what it received last, sent by its next
        // timer scan: closing the links before would make the peers retransmit into a closed
        // port (network timeouts of a clean finish).
        let threaded = match self.machine.as_ref() {
            Some(Machine::Cassini(c)) => c.threaded(),
            Some(Machine::Gemini(g)) => g.threaded(),
            None => None,
        };
        if let Some(t) = threaded {
            t.wait_idle(SETTLE_ON_LEAVE);
        }
        // Stop the links first (no arrival into a node being torn down), then the node.
        self.fabric.close();
        self.machine = None;
    }
}

/// The non-zero hardware counters of `node`'s Cassini in `c`, by name (read through the CSR
/// window, as [`HostedNode::nic_counters`]).
pub fn cassini_counters(c: &Cluster, node: usize) -> Vec<(String, u64)> {
    let Some(devs) = c.node(node).map(|n| n.cxi_devices()) else {
        return Vec::new();
    };
    let opts = userlib::cxi::OpenOptions {
        admin: true,
        space: None,
    };
    let Ok(dev) = userlib::cxi::open_device_with(&devs, 0, opts) else {
        return Vec::new();
    };
    let Ok(csrs) = dev.map_csr() else {
        return Vec::new();
    };
    userlib::cxi::csr::counters(csrs.generation())
        .into_iter()
        .filter_map(|k| {
            let v = csrs.read_counter(&k).ok()?;
            (v != 0).then(|| (format!("{}.{}", k.view, k.name), v))
        })
        .collect()
}

/// The Gemini model's counter registers (`COUNTERS_BASE + 8 * index`, the model's register
/// contract): traffic, the kinds of request (FMA PUTs, including SMSG messages, GETs, AMOs,
/// BTE transfers), CQ events, lost events and timeouts.
const GEMINI_COUNTERS: &[(u32, &str)] = &[
    (0, "packets_tx"),
    (1, "packets_rx"),
    (2, "bytes_tx"),
    (3, "bytes_rx"),
    (5, "fma_puts"),
    (6, "fma_gets"),
    (7, "amos"),
    (8, "bte_txds"),
    (9, "cq_events"),
    (10, "cq_lost"),
    (12, "timeouts"),
];

/// The Gemini counters of `node` in `g`, by name (as [`HostedNode::nic_counters`]).
pub fn gemini_counters(g: &GeminiCluster, node: usize) -> Vec<(String, u64)> {
    let Some(n) = g.node(node) else {
        return Vec::new();
    };
    GEMINI_COUNTERS
        .iter()
        .filter_map(|&(i, name)| Some((name.to_string(), n.kgni().hw().counter(i).ok()?)))
        .collect()
}
