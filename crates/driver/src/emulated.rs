//! Assembling an emulated cluster: the engine and its fabric, one host memory per node, one
//! emulated Cassini per node on that node's PCI bus, the Cassini driver probed by id. This is
//! the only place that instantiates emulator crates; everything it hands out is a driver
//! type ([`CxiDevice`], [`HostMem`]) or an emu-core seam ([`Progress`]).
//!
//! ```no_run
//! use driver::emulated::{Cluster, EngineKind};
//! let cluster = Cluster::builder().nics(2).engine(EngineKind::Deterministic { seed: 7 }).build()?;
//! let dev = cluster.node(0).and_then(|n| n.cxi(0)).expect("node 0 has a Cassini");
//! let client = dev.open();
//! # let _ = client;
//! # Ok::<(), driver::emulated::ClusterError>(())
//! ```

#![forbid(unsafe_code)]

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use emu_core::dma::{DmaPort, Iommu};
use emu_core::engine::deterministic::Deterministic;
use emu_core::engine::threaded::{Threaded, ThreadedConfig};
use emu_core::engine::{DeviceId, Engine, EngineError};
use emu_core::fabric::PortId;
use emu_core::fabric::Topology;
use emu_core::fabric::{Fabric, FabricConfig, FabricError};
use emu_core::memory::HostMemory;
use emu_core::mmio::Mmio;
use thiserror::Error;

pub use emu_core::engine::Progress;

use crate::cassini::{CassiniDriver, CxiDevice, DriverConfig};
use crate::mem::{EmulatedHostMemory, HostMem};
use crate::pci::{
    BindState, DmaError, EmulatedFunction, HostRange, InterruptSink, NicKind, PciAddress, PciBus,
    PciDriver, PciError, PciFunction, PciId, RealDevice, SysfsError,
};

/// Which engine drives the cluster's devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// One thread, virtual time, every choice drawn from `seed`: same seed, same run.
    Deterministic {
        /// The seed.
        seed: u64,
    },
    /// Real time, device work inline or on engine threads (default settings).
    Threaded,
    /// Real time with explicit settings.
    ThreadedWith(ThreadedConfig),
}

/// A started engine, and the threaded engine's own handle when it is one (for shutdown).
pub(crate) type Started = (Arc<dyn Engine>, Option<Arc<Threaded>>);

impl EngineKind {
    /// Start an engine of this kind over `fabric`: the engine, and the threaded engine's own
    /// handle when it is one (for shutdown).
    pub(crate) fn start(&self, fabric: Fabric) -> Result<Started, EngineError> {
        Ok(match self {
            EngineKind::Deterministic { seed } => {
                (Arc::new(Deterministic::new(*seed, fabric)), None)
            }
            EngineKind::Threaded | EngineKind::ThreadedWith(_) => {
                let cfg = match self {
                    EngineKind::ThreadedWith(c) => c.clone(),
                    _ => ThreadedConfig::default(),
                };
                let t = Arc::new(Threaded::new(fabric, cfg)?);
                (Arc::clone(&t) as Arc<dyn Engine>, Some(t))
            }
        })
    }
}

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
    /// A node's memory could not be created.
    #[error("host memory of node {node}: {reason}")]
    Memory {
        /// The node.
        node: usize,
        /// Why.
        reason: String,
    },
    /// The PCI layer refused a function.
    #[error(transparent)]
    Pci(#[from] PciError),
    /// A PCI address could not be formed.
    #[error("bad PCI address: {0}")]
    Address(String),
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
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    nics: usize,
    engine: EngineKind,
    topology: Option<Topology>,
    memory: u64,
    driver: DriverConfig,
    msix_vectors: u16,
    bind: bool,
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

    /// Build the engine, fabric, nodes and devices, and probe the driver on every node.
    pub fn build(self) -> Result<Cluster, ClusterError> {
        if self.nics == 0 {
            return Err(ClusterError::NoNics);
        }
        let topology = self.topology.clone().unwrap_or(Topology::SingleSwitch {
            ports: self.nics as u32,
        });
        let fabric = Fabric::new(FabricConfig::new(topology))?;
        let (engine, threaded) = self.engine.start(fabric)?;
        let progress = engine.progress_handle();
        let mut nodes = Vec::with_capacity(self.nics);
        for i in 0..self.nics {
            nodes.push(self.build_node(i, &engine, &progress)?);
        }
        Ok(Cluster {
            engine,
            threaded,
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
        let memory = HostMemory::new(self.memory).map_err(|e| ClusterError::Memory {
            node: i,
            reason: e.to_string(),
        })?;
        let nid = i as u32;
        let model = emu_cassini::Cassini::new(emu_cassini::CassiniConfig {
            nid,
            nid_base: 0,
            msix_vectors: self.msix_vectors,
            ..emu_cassini::CassiniConfig::default()
        });
        // The node's device reaches its RAM through a passthrough platform IOMMU: bus address
        // = RAM address (see `HostMem::bus_address`).
        let iommu = Iommu::passthrough();
        let dma = DmaPort::new(memory.clone(), iommu.clone());
        let dev = engine.add_device(Box::new(model), dma, Some(PortId(nid)))?;
        let function = EngineFunction::new(Arc::clone(engine), dev, iommu)?;
        let host: Arc<dyn HostMem> = Arc::new(EmulatedHostMemory::new(memory.clone()));
        let address = node_address()?;
        let mut bus = PciBus::new();
        bus.add(PciFunction::emulated(address, Arc::new(function)))?;
        let node = Node {
            index: i,
            nid,
            memory: Arc::clone(&host),
            driver: CassiniDriver::new(host, self.driver.clone()),
            bus: Mutex::new(bus),
            cxi: Mutex::new(Vec::new()),
            progress: Arc::clone(progress),
        };
        if self.bind {
            node.probe()?;
        }
        Ok(node)
    }
}

/// The PCI address of each node's NIC on its own bus: bus 0x3b, device 0, function 0.
fn node_address() -> Result<PciAddress, ClusterError> {
    PciAddress::new(0, 0x3b, 0, 0).map_err(|e| ClusterError::Address(e.to_string()))
}

/// One node: its RAM, its PCI bus, the Cassini device(s) the driver brought up.
pub struct Node {
    index: usize,
    nid: u32,
    memory: Arc<dyn HostMem>,
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

    /// The engine's progress handle: code waiting for the device calls `progress()`.
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

    /// Node `i`.
    pub fn node(&self, i: usize) -> Option<&Node> {
        self.nodes.get(i)
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

/// One emulated PCI function of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatedDevice {
    /// Node.
    pub node: usize,
    /// PCI address on the node's bus.
    pub address: PciAddress,
    /// Vendor/device id.
    pub id: PciId,
    /// Which NIC.
    pub kind: Option<NicKind>,
    /// Revision id.
    pub revision: u8,
    /// Bound driver.
    pub driver: Option<String>,
    /// NID.
    pub nid: Option<u32>,
    /// Chip version.
    pub version: Option<String>,
    /// Platform reported by the device.
    pub platform: Option<String>,
}

impl EmulatedDevice {
    /// The listing entry of function `f` on `bus` of node `node`; the driver-specific facts
    /// (NID, chip version, platform) come from whoever probed it.
    pub(crate) fn describe(
        node: usize,
        bus: &PciBus,
        f: &PciFunction,
        nid: Option<u32>,
        version: Option<String>,
        platform: Option<String>,
    ) -> Self {
        EmulatedDevice {
            node,
            address: f.address(),
            id: f.id(),
            kind: f.nic_kind(),
            revision: f.revision(),
            driver: bus
                .binding(f.address())
                .and_then(|b| b.driver().map(str::to_string)),
            nid,
            version,
            platform,
        }
    }
}

/// What `nicemu devices` shows: a cluster's emulated devices and the real NICs in sysfs.
#[derive(Debug)]
pub struct DeviceListing {
    /// Emulated devices.
    pub emulated: Vec<EmulatedDevice>,
    /// Real Cassini/Gemini functions, or why sysfs could not be read.
    pub real: Result<Vec<RealDevice>, SysfsError>,
}

/// List the emulated devices of `cluster` (if any) and the real NICs under `sysfs_root`
/// (normally `/sys`).
pub fn list_devices(cluster: Option<&Cluster>, sysfs_root: &Path) -> DeviceListing {
    list_emulated_and_real(
        cluster.map(Cluster::devices).unwrap_or_default(),
        sysfs_root,
    )
}

/// A listing of the given emulated devices (of any clusters) and the real NICs under
/// `sysfs_root`.
pub fn list_emulated_and_real(emulated: Vec<EmulatedDevice>, sysfs_root: &Path) -> DeviceListing {
    DeviceListing {
        emulated,
        real: crate::pci::list_real_devices(sysfs_root),
    }
}

impl fmt::Display for DeviceListing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Emulated devices:")?;
        if self.emulated.is_empty() {
            writeln!(f, "  (none)")?;
        }
        for d in &self.emulated {
            writeln!(
                f,
                "  node {:<3} {}  {}  {:<12} rev {:#04x}  driver {:<8} nid {:<7} {} {}",
                d.node,
                d.address,
                d.id,
                d.kind.map_or("unknown".to_string(), |k| k.to_string()),
                d.revision,
                d.driver.as_deref().unwrap_or("-"),
                d.nid.map_or("-".to_string(), |n| format!("{n:#x}")),
                d.version.as_deref().unwrap_or("-"),
                d.platform.as_deref().unwrap_or("-"),
            )?;
        }
        writeln!(f, "Real devices (sysfs):")?;
        match &self.real {
            Ok(v) if v.is_empty() => writeln!(f, "  (none)")?,
            Ok(v) => {
                for r in v {
                    writeln!(
                        f,
                        "  {}  {}  {:<12} driver {:<10} iommu group {}{}",
                        r.function.address,
                        r.function.id,
                        r.kind.to_string(),
                        r.function.driver.as_deref().unwrap_or("-"),
                        r.function
                            .iommu_group
                            .map_or("-".to_string(), |g| g.to_string()),
                        if r.vfio_ready() { "  (vfio ready)" } else { "" },
                    )?;
                }
            }
            Err(e) => writeln!(f, "  unavailable: {e}")?,
        }
        Ok(())
    }
}

/// An engine device seen as a PCI function (the emulated backend's [`EmulatedFunction`]).
/// Shared by the Cassini cluster here and the Gemini cluster (`gemini::cluster`).
pub(crate) struct EngineFunction {
    engine: Arc<dyn Engine>,
    dev: DeviceId,
    bars: Vec<Option<Arc<dyn Mmio>>>,
    msix: u32,
    iommu: Iommu,
}

/// Config offset of the capabilities pointer; MSI-X capability id.
const CAP_PTR: u16 = 0x34;
const CAP_MSIX: u32 = 0x11;

impl EngineFunction {
    pub(crate) fn new(
        engine: Arc<dyn Engine>,
        dev: DeviceId,
        iommu: Iommu,
    ) -> Result<Self, EngineError> {
        let mut bars = Vec::with_capacity(6);
        for b in 0..6u8 {
            let size = engine.bar_size(dev, b)?;
            bars.push(if size > 0 {
                Some(engine.mmio(dev, b)?)
            } else {
                None
            });
        }
        let mut f = EngineFunction {
            engine,
            dev,
            bars,
            msix: 0,
            iommu,
        };
        f.msix = f.find_msix_vectors();
        Ok(f)
    }

    /// Table size from the MSI-X capability (message control bits 0..11, N - 1).
    fn find_msix_vectors(&self) -> u32 {
        let mut ptr = (self.config_read(CAP_PTR) & 0xfc) as u16;
        for _ in 0..48 {
            if ptr == 0 {
                break;
            }
            let dw = self.config_read(ptr);
            if dw & 0xff == CAP_MSIX {
                return ((dw >> 16) & 0x7ff) + 1;
            }
            ptr = ((dw >> 8) & 0xfc) as u16;
        }
        0
    }
}

impl EmulatedFunction for EngineFunction {
    fn config_read(&self, offset: u16) -> u32 {
        self.engine
            .config_read(self.dev, offset / 4)
            .unwrap_or(u32::MAX)
    }

    fn config_write(&self, offset: u16, value: u32) {
        if let Err(e) = self.engine.config_write(self.dev, offset / 4, value) {
            tracing::warn!(offset, error = %e, "config write to an emulated function failed");
        }
    }

    fn bar(&self, index: u8) -> Option<Arc<dyn Mmio>> {
        self.bars.get(usize::from(index)).cloned().flatten()
    }

    fn msix_vectors(&self) -> u32 {
        self.msix
    }

    fn set_interrupt_sink(&self, sink: Option<InterruptSink>) {
        let s: emu_core::engine::InterruptSink = match sink {
            Some(s) => Arc::new(move |v: u16| {
                if !s.fire(u32::from(v)) {
                    tracing::debug!(vector = v, "interrupt to a vector that is not enabled");
                }
            }),
            None => Arc::new(|_v: u16| {}),
        };
        if let Err(e) = self.engine.set_interrupt_sink(self.dev, s) {
            tracing::warn!(error = %e, "cannot route interrupts of an emulated function");
        }
    }

    fn dma_map(&self, iova: u64, host: HostRange) -> Result<(), DmaError> {
        // The node's device reaches its RAM through a passthrough IOMMU: only identity
        // mappings describe it.
        if self.iommu.is_passthrough() && iova == host.addr {
            return Ok(());
        }
        self.iommu
            .map(
                iova,
                emu_core::memory::GuestAddress(host.addr),
                host.len,
                emu_core::dma::Perm::READ | emu_core::dma::Perm::WRITE,
            )
            .map_err(|e| DmaError::Rejected(e.to_string()))
    }

    fn dma_unmap(&self, iova: u64, len: u64) -> Result<(), DmaError> {
        if self.iommu.is_passthrough() {
            return Ok(());
        }
        self.iommu
            .unmap(iova, len)
            .map_err(|e| DmaError::Rejected(e.to_string()))
    }
}
