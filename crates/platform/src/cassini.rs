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
use driver::pci::{BindState, PciAddress, PciBus, PciDriver, PciError, PciFunction};
use emu_core::engine::{DeviceId, EngineError, Progress};
use emu_core::fabric::{Fabric, FabricConfig, FabricError, PortId, Topology};
use emu_core::memory::HostMemory;
use thiserror::Error;

use crate::function::{AttachError, attach};
use crate::machine::{EmulatedDevice, Machine, MachineBuilder, MachineNode, NicParts, NodeBuild};

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

/// The Cassini parts of a machine ([`NicParts`]): one Cassini per node on a fabric of the
/// builder's topology (one switch by default), the Cassini driver probed on each.
#[derive(Debug)]
pub struct CassiniParts;

/// The Cassini settings of a [`ClusterBuilder`].
#[derive(Clone, Debug)]
pub struct CassiniSettings {
    nics: usize,
    topology: Option<Topology>,
    driver: DriverConfig,
    msix_vectors: u16,
    bind: bool,
}

impl Default for CassiniSettings {
    fn default() -> Self {
        CassiniSettings {
            nics: 2,
            topology: None,
            driver: DriverConfig::default(),
            msix_vectors: 128,
            bind: true,
        }
    }
}

/// Builder of a [`Cluster`].
pub type ClusterBuilder = MachineBuilder<CassiniParts>;

/// An emulated Cassini cluster: engine, fabric, nodes.
pub type Cluster = Machine<CassiniParts>;

impl NicParts for CassiniParts {
    type Settings = CassiniSettings;
    type Node = Node;
    type Shared = Arc<dyn Progress>;
    type Error = ClusterError;

    const DEFAULT_MEMORY: u64 = 256 << 20;

    fn set_driver_faults(s: &mut CassiniSettings, faults: driver::faults::DriverFaults) {
        s.driver.faults = faults;
    }

    fn fabric(s: &CassiniSettings) -> Result<(Fabric, usize), ClusterError> {
        if s.nics == 0 {
            return Err(ClusterError::NoNics);
        }
        let topology = s.topology.clone().unwrap_or(Topology::SingleSwitch {
            ports: s.nics as u32,
        });
        Ok((Fabric::new(FabricConfig::new(topology))?, s.nics))
    }

    fn shared(_: &CassiniSettings, engine: Arc<dyn Progress>, _: usize) -> Arc<dyn Progress> {
        engine
    }

    fn progress(shared: &Arc<dyn Progress>) -> Arc<dyn Progress> {
        Arc::clone(shared)
    }

    fn no_such_node(node: usize, nodes: usize) -> ClusterError {
        ClusterError::NoSuchNode { node, nodes }
    }

    fn build_node(
        s: &CassiniSettings,
        _: &Arc<dyn Progress>,
        b: NodeBuild<'_>,
    ) -> Result<Node, ClusterError> {
        let i = b.index;
        let nid = i as u32;
        let model = emu_cassini::Cassini::new(emu_cassini::CassiniConfig {
            nid,
            nid_base: 0,
            msix_vectors: s.msix_vectors,
            ..emu_cassini::CassiniConfig::default()
        });
        let nic = attach(
            b.engine,
            i,
            b.memory,
            b.process_memory,
            Box::new(model),
            PortId(nid),
        )?;
        let node = Node {
            index: i,
            nid,
            device: nic.device,
            memory: Arc::clone(&nic.host),
            ram: nic.ram,
            driver: CassiniDriver::new(nic.host, s.driver.clone()),
            bus: Mutex::new(nic.bus),
            cxi: Mutex::new(Vec::new()),
            progress: b.progress,
        };
        if s.bind {
            node.probe()?;
        }
        Ok(node)
    }
}

impl MachineBuilder<CassiniParts> {
    /// Number of nodes, one Cassini each (default 2).
    pub fn nics(mut self, n: usize) -> Self {
        self.nic.nics = n;
        self
    }

    /// The fabric topology (default: one switch with a port per NIC).
    pub fn topology(mut self, t: Topology) -> Self {
        self.nic.topology = Some(t);
        self
    }

    /// Driver module parameters.
    pub fn driver_config(mut self, c: DriverConfig) -> Self {
        self.nic.driver = c;
        self
    }

    /// MSI-X vectors of each emulated function.
    pub fn msix_vectors(mut self, n: u16) -> Self {
        self.nic.msix_vectors = n;
        self
    }

    /// Whether to load the driver at build time (default true). With `false` the devices sit
    /// unbound on their buses, out of reset, until [`Node::probe`].
    pub fn bind_drivers(mut self, bind: bool) -> Self {
        self.nic.bind = bind;
        self
    }

    /// Build only node `i` of the cluster (the fabric still has a port for every node):
    /// what one process of a multi-process job hosts. Packets to the other nodes' ports
    /// leave through the engine's outlet (`emu_core::fabric::remote`).
    pub fn hosted_node(self, i: usize) -> Self {
        self.hosted(i)
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

impl MachineNode for Node {
    fn node_index(&self) -> usize {
        self.index
    }

    fn bus(&self) -> &Mutex<PciBus> {
        &self.bus
    }

    fn describe(&self, bus: &PciBus, f: &PciFunction) -> EmulatedDevice {
        let dev = bus.drvdata::<CxiDevice>(f.address());
        EmulatedDevice::describe(
            self.index,
            bus,
            f,
            dev.as_ref().map(|d| d.info().nid),
            dev.as_ref().map(|d| format!("{:?}", d.info().version)),
            dev.as_ref().map(|d| format!("{:?}", d.info().platform)),
        )
    }
}

impl Machine<CassiniParts> {
    /// A builder (2 NICs, deterministic engine, seed 0).
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// The engine's progress handle.
    pub fn progress(&self) -> &Arc<dyn Progress> {
        self.progress_handle()
    }
}
