//! Emulated Cassini clusters: the engine and its fabric, one host memory per node, one
//! emulated Cassini per node on that node's PCI bus, the Cassini driver probed by id.
//! Everything it hands out is a driver type ([`CxiDevice`], [`HostMem`]) or an emu-core seam
//! ([`Progress`]), so the code above runs the same on a real NIC.
//!
//! ```no_run
//! use platform::{Cluster, EngineKind};
//! let cluster = Cluster::builder().nics(2).engine(EngineKind::Deterministic { seed: 7 }).build()?;
//! let dev = cluster.node(0).and_then(|n| n.cxi(0)).expect("node 0 has a Cassini");
//! let client = dev.open();
//! # let _ = client;
//! # Ok::<(), platform::ClusterError>(())
//! ```

#![forbid(unsafe_code)]

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use driver::cassini::{CassiniDriver, CxiDevice, DriverConfig};
use driver::mem::HostMem;
use driver::pci::{BindState, PciAddress, PciBus, PciDriver, PciError};
use emu_core::engine::deterministic::Deterministic;
use emu_core::engine::threaded::Threaded;
use emu_core::engine::{DeviceId, Engine, EngineError, Progress};
use emu_core::fabric::{CaptureSink, Fabric, FabricConfig, FabricError, PortId, Topology};
use emu_core::memory::HostMemory;
use thiserror::Error;

use crate::devices::EmulatedDevice;
use crate::engine::{EngineKind, ProgressWrap, wrap_progress};
use crate::function::{AttachError, attach};

/// Why a cluster could not be built.
#[derive(Debug, Error)]
pub enum ClusterError {
    /// A cluster needs at least one NIC.
    #[error("a cluster needs at least one NIC")]
    NoNics,
    /// The fabric could not be built (bad topology for this many NICs).
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The engine refused something.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A node or its NIC could not be put together.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// The PCI layer refused an operation.
    #[error(transparent)]
    Pci(#[from] PciError),
    /// The node to host is not in the cluster.
    #[error("node {node} is not in a cluster of {nodes} nodes")]
    NoSuchNode {
        /// The node asked for.
        node: usize,
        /// Nodes of the cluster.
        nodes: usize,
    },
    /// The driver did not bind a node's NIC.
    #[error("node {node}: the Cassini driver did not bind {address}: {reason}")]
    NotBound {
        /// The node.
        node: usize,
        /// The function.
        address: PciAddress,
        /// What the bus recorded.
        reason: String,
    },
}

/// Builder of a [`Cluster`].
#[derive(Clone)]
pub struct ClusterBuilder {
    nics: usize,
    engine: EngineKind,
    topology: Option<Topology>,
    memory: u64,
    driver: DriverConfig,
    msix_vectors: u16,
    bind: bool,
    wrap: Option<ProgressWrap>,
    hosted: Option<usize>,
    process_memory: bool,
    capture: Option<Arc<dyn CaptureSink>>,
    on_node: Option<BuildProgress>,
}

/// Called after each node of a cluster is built, with (nodes built, nodes to build): how a
/// front end shows progress while a large cluster comes up.
pub type BuildProgress = Arc<dyn Fn(usize, usize) + Send + Sync>;

impl fmt::Debug for ClusterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterBuilder")
            .field("nics", &self.nics)
            .field("engine", &self.engine)
            .field("topology", &self.topology)
            .field("memory", &self.memory)
            .field("msix_vectors", &self.msix_vectors)
            .field("bind", &self.bind)
            .field("progress_wrap", &self.wrap.is_some())
            .field("hosted", &self.hosted)
            .field("process_memory", &self.process_memory)
            .field("capture", &self.capture.is_some())
            .field("on_node", &self.on_node.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            nics: 2,
            engine: EngineKind::Deterministic { seed: 0 },
            topology: None,
            memory: 256 << 20,
            driver: DriverConfig::default(),
            msix_vectors: 128,
            bind: true,
            wrap: None,
            hosted: None,
            process_memory: false,
            capture: None,
            on_node: None,
        }
    }
}

impl ClusterBuilder {
    /// Number of nodes, one Cassini each (default 2).
    pub fn nics(mut self, n: usize) -> Self {
        self.nics = n;
        self
    }

    /// The engine (default deterministic, seed 0).
    pub fn engine(mut self, e: EngineKind) -> Self {
        self.engine = e;
        self
    }

    /// The fabric topology (default: one switch with a port per NIC).
    pub fn topology(mut self, t: Topology) -> Self {
        self.topology = Some(t);
        self
    }

    /// Host memory per node in bytes (default 256 MiB, committed lazily).
    pub fn memory_per_node(mut self, bytes: u64) -> Self {
        self.memory = bytes;
        self
    }

    /// Driver module parameters.
    pub fn driver_config(mut self, c: DriverConfig) -> Self {
        self.driver = c;
        self
    }

    /// The drivers' fault sites (default none; `driver::faults`).
    pub fn driver_faults(mut self, f: driver::faults::DriverFaults) -> Self {
        self.driver.faults = f;
        self
    }

    /// MSI-X vectors of each emulated function.
    pub fn msix_vectors(mut self, n: u16) -> Self {
        self.msix_vectors = n;
        self
    }

    /// Whether to load the driver at build time (default true). With `false` the devices sit
    /// unbound on their buses, out of reset, until [`Node::probe`].
    pub fn bind_drivers(mut self, bind: bool) -> Self {
        self.bind = bind;
        self
    }

    /// Wrap each node's progress handle (see [`ProgressWrap`]): the node's Cassini driver
    /// (and so every wait of the user library and of the code above it) calls the wrapped
    /// handle; [`Cluster::progress`] stays the engine's own.
    pub fn progress_wrap(mut self, wrap: ProgressWrap) -> Self {
        self.wrap = Some(wrap);
        self
    }

    /// Build only node `i` of the cluster (the fabric still has a port for every node):
    /// what one process of a multi-process job hosts. Packets to the other nodes' ports
    /// leave through the engine's outlet (`emu_core::fabric::remote`).
    pub fn hosted_node(mut self, i: usize) -> Self {
        self.hosted = Some(i);
        self
    }

    /// Give each node the process's own memory beside its RAM (default off): the RAM sits at
    /// its own virtual addresses, and the driver registers any mapped memory of this process
    /// (`cxil_map` of a program's pointer, `GNI_MemRegister` of its buffer), which the NIC then
    /// reads and writes directly (`emu_core::procmem`, docs/emu-core-memory.md). What a node
    /// hosted in a rank process has; [`crate::process::join`] turns it on.
    pub fn process_memory(mut self, on: bool) -> Self {
        self.process_memory = on;
        self
    }

    /// Capture every packet injected into the fabric with `sink` (`nicemu trace`), from the
    /// moment the machine is built. Off by default.
    pub fn capture(mut self, sink: Arc<dyn CaptureSink>) -> Self {
        self.capture = Some(sink);
        self
    }

    /// Call `f` after each node is built (see [`BuildProgress`]).
    pub fn on_node_built(mut self, f: BuildProgress) -> Self {
        self.on_node = Some(f);
        self
    }

    /// Build the engine, fabric, nodes and devices, and probe the driver on every node.
    pub fn build(self) -> Result<Cluster, ClusterError> {
        if self.nics == 0 {
            return Err(ClusterError::NoNics);
        }
        let topology = self.topology.clone().unwrap_or(Topology::SingleSwitch {
            ports: self.nics as u32,
        });
        let mut fabric = Fabric::new(FabricConfig::new(topology))?;
        fabric.set_capture(self.capture.clone());
        let started = self.engine.start(fabric)?;
        let engine = started.engine;
        let progress = engine.progress_handle();
        let hosted = match self.hosted {
            Some(i) if i >= self.nics => {
                return Err(ClusterError::NoSuchNode {
                    node: i,
                    nodes: self.nics,
                });
            }
            Some(i) => i..i + 1,
            None => 0..self.nics,
        };
        let total = hosted.len();
        let mut nodes = Vec::with_capacity(total);
        for i in hosted {
            let node_progress = wrap_progress(self.wrap.as_ref(), i, &progress);
            nodes.push(self.build_node(i, &engine, &node_progress)?);
            if let Some(f) = &self.on_node {
                f(nodes.len(), total);
            }
        }
        Ok(Cluster {
            engine,
            threaded: started.threaded,
            deterministic: started.deterministic,
            progress,
            nodes,
            kind: self.engine,
        })
    }

    fn build_node(
        &self,
        i: usize,
        engine: &Arc<dyn Engine>,
        progress: &Arc<dyn Progress>,
    ) -> Result<Node, ClusterError> {
        let nid = i as u32;
        let model = emu_cassini::Cassini::new(emu_cassini::CassiniConfig {
            nid,
            nid_base: 0,
            msix_vectors: self.msix_vectors,
            ..emu_cassini::CassiniConfig::default()
        });
        let nic = attach(
            engine,
            i,
            self.memory,
            self.process_memory,
            Box::new(model),
            PortId(nid),
        )?;
        let node = Node {
            index: i,
            nid,
            device: nic.device,
            memory: Arc::clone(&nic.host),
            ram: nic.ram,
            driver: CassiniDriver::new(nic.host, self.driver.clone()),
            bus: Mutex::new(nic.bus),
            cxi: Mutex::new(Vec::new()),
            progress: Arc::clone(progress),
        };
        if self.bind {
            node.probe()?;
        }
        Ok(node)
    }
}

/// One node: its RAM, its PCI bus, the Cassini device(s) the driver brought up.
pub struct Node {
    index: usize,
    nid: u32,
    device: DeviceId,
    memory: Arc<dyn HostMem>,
    ram: HostMemory,
    driver: CassiniDriver,
    bus: Mutex<PciBus>,
    cxi: Mutex<Vec<Arc<CxiDevice>>>,
    progress: Arc<dyn Progress>,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("index", &self.index)
            .field("nid", &self.nid)
            .field("cxi", &self.cxi_devices().len())
            .finish()
    }
}

impl Node {
    /// The node's index in the cluster.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The NID of the node's NIC.
    pub fn nid(&self) -> u32 {
        self.nid
    }

    /// The node's NIC in the engine (engine events name it).
    pub fn device_id(&self) -> DeviceId {
        self.device
    }

    /// Cassini device `i` of the node (`/dev/cxi<i>`), once the driver is bound.
    pub fn cxi(&self, i: usize) -> Option<Arc<CxiDevice>> {
        self.cxi_devices().get(i).cloned()
    }

    /// Every Cassini device of the node.
    pub fn cxi_devices(&self) -> Vec<Arc<CxiDevice>> {
        self.cxi
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Load the driver: offer the node's unbound functions to the Cassini driver (probe by
    /// id). Returns the devices bound so far.
    pub fn probe(&self) -> Result<Vec<Arc<CxiDevice>>, ClusterError> {
        let mut bus = self.bus.lock().unwrap_or_else(PoisonError::into_inner);
        let report = bus.probe_all(&[&self.driver as &dyn PciDriver]);
        let mut cxi = self.cxi.lock().unwrap_or_else(PoisonError::into_inner);
        for (address, state) in report {
            match state {
                BindState::Bound { .. } => {
                    if let Some(dev) = bus.drvdata::<CxiDevice>(address) {
                        dev.set_progress(Arc::clone(&self.progress));
                        cxi.push(dev);
                    }
                }
                BindState::Failed { failures } => {
                    return Err(ClusterError::NotBound {
                        node: self.index,
                        address,
                        reason: failures
                            .iter()
                            .map(|f| format!("{}: {}", f.driver, f.error))
                            .collect::<Vec<_>>()
                            .join("; "),
                    });
                }
                BindState::Unbound => {}
            }
        }
        Ok(cxi.clone())
    }

    /// The node's host memory (where its processes' buffers live).
    pub fn memory(&self) -> &Arc<dyn HostMem> {
        &self.memory
    }

    /// The node's RAM as the emulator sees it, to snapshot and restore it together with the
    /// engine (`HostMemory::snapshot`, `Deterministic::snapshot`) and the driver
    /// (`CxiDevice::save_idle_state`): the fuzz targets' fixtures.
    pub fn ram(&self) -> &HostMemory {
        &self.ram
    }

    /// The node's progress handle (the engine's, or what the builder's
    /// [`ClusterBuilder::progress_wrap`] made of it): code waiting for the device calls
    /// `progress()`.
    pub fn progress(&self) -> &Arc<dyn Progress> {
        &self.progress
    }

    /// Run `f` on the node's PCI bus.
    pub fn with_bus<R>(&self, f: impl FnOnce(&mut PciBus) -> R) -> R {
        f(&mut self.bus.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// An emulated cluster: engine, fabric, nodes.
pub struct Cluster {
    engine: Arc<dyn Engine>,
    threaded: Option<Arc<Threaded>>,
    deterministic: Option<Deterministic>,
    progress: Arc<dyn Progress>,
    nodes: Vec<Node>,
    kind: EngineKind,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("engine", &self.kind)
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

impl Cluster {
    /// A builder (2 NICs, deterministic engine, seed 0).
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Node `i` (`None` if it is not in the cluster, or not hosted here).
    pub fn node(&self, i: usize) -> Option<&Node> {
        match self.nodes.get(i) {
            Some(n) if n.index == i => Some(n),
            _ => self.nodes.iter().find(|n| n.index == i),
        }
    }

    /// The threaded engine's own handle, when the cluster runs on one (to connect it to
    /// the fabric between processes).
    pub fn threaded(&self) -> Option<&Arc<Threaded>> {
        self.threaded.as_ref()
    }

    /// The engine kind.
    pub fn engine_kind(&self) -> &EngineKind {
        &self.kind
    }

    /// The engine (for counters, link faults, and running it).
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// The engine's progress handle.
    pub fn progress(&self) -> &Arc<dyn Progress> {
        &self.progress
    }

    /// The deterministic engine's own handle (to step it event by event, read its trace
    /// digest), when the cluster runs on one.
    pub fn deterministic(&self) -> Option<&Deterministic> {
        self.deterministic.as_ref()
    }

    /// Run engine work until nothing is left or `max` steps ran (deterministic engine: each
    /// step is one event; threaded: each step yields). Returns the steps that did work.
    pub fn run(&self, max: u64) -> u64 {
        let mut n = 0;
        while n < max && self.progress.progress() {
            n += 1;
        }
        n
    }

    /// The emulated devices, for `nicemu devices`.
    pub fn devices(&self) -> Vec<EmulatedDevice> {
        let mut out = Vec::new();
        for node in &self.nodes {
            node.with_bus(|bus| {
                for f in bus.functions() {
                    let dev = bus.drvdata::<CxiDevice>(f.address());
                    out.push(EmulatedDevice::describe(
                        node.index,
                        bus,
                        f,
                        dev.as_ref().map(|d| d.info().nid),
                        dev.as_ref().map(|d| format!("{:?}", d.info().version)),
                        dev.as_ref().map(|d| format!("{:?}", d.info().platform)),
                    ));
                }
            });
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(t) = &self.threaded {
            t.shutdown();
        }
    }
}
