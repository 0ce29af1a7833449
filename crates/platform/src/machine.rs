//! What every emulated machine shares, whatever its NIC: a builder of the settings common to
//! all ([`MachineBuilder`]: engine, host memory per node, progress wrap, the node hosted by
//! this process, capture, build progress) over the NIC's own ([`NicParts::Settings`]), the
//! build itself (fabric, engine, the hosted nodes one by one), and the machine it gives
//! ([`Machine`]: engine handles, nodes, run, the devices for `nicemu devices`).
//!
//! A NIC brings the rest through [`NicParts`]: the shape of its fabric, what the machine keeps
//! besides its nodes, how one node is put together and probed, how its functions are
//! described. `cassini` ([`crate::CassiniParts`]) and `gemini` ([`crate::GeminiParts`])
//! implement it; [`crate::Cluster`] and [`crate::GeminiCluster`] are the two machines.

#![forbid(unsafe_code)]

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use driver::pci::{NicKind, PciAddress, PciBus, PciFunction, PciId};
use emu_core::engine::deterministic::Deterministic;
use emu_core::engine::threaded::Threaded;
use emu_core::engine::{Engine, EngineError, Progress};
use emu_core::fabric::{CaptureSink, Fabric, FabricError};

use crate::engine::{EngineKind, ProgressWrap, wrap_progress};
use crate::function::AttachError;

/// Called after each node of a machine is built, with (nodes built, nodes to build): how a
/// front end shows progress while a large machine comes up.
pub type BuildProgress = Arc<dyn Fn(usize, usize) + Send + Sync>;

/// One emulated PCI function of a machine, as `nicemu devices` lists it.
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
    pub fn describe(
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

/// A node of a machine, whatever its NIC.
pub trait MachineNode {
    /// The node's index in the machine (its fabric port).
    fn node_index(&self) -> usize;
    /// The node's PCI bus.
    fn bus(&self) -> &Mutex<PciBus>;
    /// The listing entry of function `f` of the node's bus.
    fn describe(&self, bus: &PciBus, f: &PciFunction) -> EmulatedDevice;
}

/// A node's view of the machine being built: the engine, whether it is the threaded one, and
/// the node's progress handle (the machine's, wrapped by the builder's [`ProgressWrap`]).
pub struct NodeBuild<'a> {
    /// The node's index.
    pub index: usize,
    /// The engine.
    pub engine: &'a Arc<dyn Engine>,
    /// Whether the engine is the threaded one.
    pub threaded: bool,
    /// The node's progress handle.
    pub progress: Arc<dyn Progress>,
    /// Host memory of the node in bytes.
    pub memory: u64,
    /// Whether the node's host memory includes this process's own memory
    /// ([`MachineBuilder::process_memory`]).
    pub process_memory: bool,
}

/// What a NIC brings to a machine (see the module documentation).
pub trait NicParts: Sized + 'static {
    /// The builder settings of this NIC's machines.
    type Settings: Clone + Default + fmt::Debug;
    /// A node.
    type Node: MachineNode;
    /// What the machine keeps besides its nodes.
    type Shared;
    /// Why a build failed.
    type Error: From<FabricError> + From<EngineError> + From<AttachError>;

    /// Host memory per node by default (bytes).
    const DEFAULT_MEMORY: u64;

    /// The drivers' fault sites of `settings` (`driver::faults`).
    fn set_driver_faults(settings: &mut Self::Settings, faults: driver::faults::DriverFaults);

    /// The fabric of a machine with `settings`, and how many nodes it has.
    fn fabric(settings: &Self::Settings) -> Result<(Fabric, usize), Self::Error>;

    /// What the machine keeps besides its nodes, made once its engine runs; `engine` is the
    /// engine's progress handle.
    fn shared(settings: &Self::Settings, engine: Arc<dyn Progress>, nodes: usize) -> Self::Shared;

    /// The machine-wide progress handle (what each node's handle wraps, and [`Machine::run`]
    /// calls).
    fn progress(shared: &Self::Shared) -> Arc<dyn Progress>;

    /// The error of a build asked to host node `node` of a machine of `nodes`.
    fn no_such_node(node: usize, nodes: usize) -> Self::Error;

    /// Put node `b.index` together: its NIC model attached, its driver probed (per
    /// `settings`); `shared` learns of the node.
    fn build_node(
        settings: &Self::Settings,
        shared: &Self::Shared,
        b: NodeBuild<'_>,
    ) -> Result<Self::Node, Self::Error>;

    /// Called before the engine of a machine being dropped shuts down.
    fn before_shutdown(_nodes: &mut [Self::Node]) {}
}

/// Builder of a [`Machine`]: the settings every machine has, then the NIC's.
pub struct MachineBuilder<K: NicParts> {
    engine: EngineKind,
    memory: u64,
    wrap: Option<ProgressWrap>,
    hosted: Option<usize>,
    process_memory: bool,
    capture: Option<Arc<dyn CaptureSink>>,
    on_node: Option<BuildProgress>,
    pub(crate) nic: K::Settings,
}

impl<K: NicParts> Clone for MachineBuilder<K> {
    fn clone(&self) -> Self {
        MachineBuilder {
            engine: self.engine.clone(),
            memory: self.memory,
            wrap: self.wrap.clone(),
            hosted: self.hosted,
            process_memory: self.process_memory,
            capture: self.capture.clone(),
            on_node: self.on_node.clone(),
            nic: self.nic.clone(),
        }
    }
}

impl<K: NicParts> Default for MachineBuilder<K> {
    fn default() -> Self {
        MachineBuilder {
            engine: EngineKind::Deterministic { seed: 0 },
            memory: K::DEFAULT_MEMORY,
            wrap: None,
            hosted: None,
            process_memory: false,
            capture: None,
            on_node: None,
            nic: K::Settings::default(),
        }
    }
}

impl<K: NicParts> fmt::Debug for MachineBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MachineBuilder")
            .field("engine", &self.engine)
            .field("memory", &self.memory)
            .field("nic", &self.nic)
            .field("progress_wrap", &self.wrap.is_some())
            .field("hosted", &self.hosted)
            .field("process_memory", &self.process_memory)
            .field("capture", &self.capture.is_some())
            .field("on_node", &self.on_node.is_some())
            .finish_non_exhaustive()
    }
}

impl<K: NicParts> MachineBuilder<K> {
    /// The engine (default deterministic, seed 0).
    pub fn engine(mut self, e: EngineKind) -> Self {
        self.engine = e;
        self
    }

    /// Host memory per node in bytes (committed lazily; the default is the NIC's).
    pub fn memory_per_node(mut self, bytes: u64) -> Self {
        self.memory = bytes;
        self
    }

    /// The drivers' fault sites (default none; `driver::faults`).
    pub fn driver_faults(mut self, f: driver::faults::DriverFaults) -> Self {
        K::set_driver_faults(&mut self.nic, f);
        self
    }

    /// Wrap each node's progress handle (see [`ProgressWrap`]): the node's driver (and so
    /// every wait of the user library and of the code above it) calls the wrapped handle;
    /// [`Machine::run`] stays the machine's own.
    pub fn progress_wrap(mut self, wrap: ProgressWrap) -> Self {
        self.wrap = Some(wrap);
        self
    }

    /// Build only node `i` (the fabric still has a port for every node): what one process of
    /// a multi-process job hosts. Packets to the other nodes' ports leave through the
    /// engine's outlet (`emu_core::fabric::remote`).
    pub(crate) fn hosted(mut self, i: usize) -> Self {
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

    /// The nodes this process builds: all, or the hosted one.
    fn hosted_range(&self, nodes: usize) -> Result<Range<usize>, K::Error> {
        match self.hosted {
            Some(i) if i >= nodes => Err(K::no_such_node(i, nodes)),
            Some(i) => Ok(i..i + 1),
            None => Ok(0..nodes),
        }
    }

    /// Build the engine, fabric and nodes (each with its NIC and, per the settings, its
    /// driver probed).
    pub fn build(self) -> Result<Machine<K>, K::Error> {
        let (mut fabric, count) = K::fabric(&self.nic)?;
        fabric.set_capture(self.capture.clone());
        let started = self.engine.start(fabric)?;
        let engine = started.engine;
        let shared = K::shared(&self.nic, engine.progress_handle(), count);
        let progress = K::progress(&shared);
        let hosted = self.hosted_range(count)?;
        let total = hosted.len();
        let mut nodes = Vec::with_capacity(total);
        for i in hosted {
            let b = NodeBuild {
                index: i,
                engine: &engine,
                threaded: started.threaded.is_some(),
                progress: wrap_progress(self.wrap.as_ref(), i, &progress),
                memory: self.memory,
                process_memory: self.process_memory,
            };
            nodes.push(K::build_node(&self.nic, &shared, b)?);
            if let Some(f) = &self.on_node {
                f(nodes.len(), total);
            }
        }
        Ok(Machine {
            engine,
            threaded: started.threaded,
            deterministic: started.deterministic,
            progress,
            nodes,
            kind: self.engine,
            shared,
        })
    }
}

/// An emulated machine: engine, fabric, the nodes hosted here.
pub struct Machine<K: NicParts> {
    engine: Arc<dyn Engine>,
    threaded: Option<Arc<Threaded>>,
    deterministic: Option<Deterministic>,
    progress: Arc<dyn Progress>,
    nodes: Vec<K::Node>,
    kind: EngineKind,
    pub(crate) shared: K::Shared,
}

impl<K: NicParts> fmt::Debug for Machine<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Machine")
            .field("engine", &self.kind)
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

impl<K: NicParts> Machine<K> {
    /// The nodes hosted here, in order.
    pub fn nodes(&self) -> &[K::Node] {
        &self.nodes
    }

    /// Node `i` (`None` if it is not in the machine, or not hosted here).
    pub fn node(&self, i: usize) -> Option<&K::Node> {
        match self.nodes.get(i) {
            Some(n) if n.node_index() == i => Some(n),
            _ => self.nodes.iter().find(|n| n.node_index() == i),
        }
    }

    /// The threaded engine's own handle, when the machine runs on one (to connect it to the
    /// fabric between processes).
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

    /// The deterministic engine's own handle (to step it event by event, read its trace
    /// digest), when the machine runs on one.
    pub fn deterministic(&self) -> Option<&Deterministic> {
        self.deterministic.as_ref()
    }

    /// The machine-wide progress handle.
    pub(crate) fn progress_handle(&self) -> &Arc<dyn Progress> {
        &self.progress
    }

    /// Run until nothing is left to do or `max` steps ran (deterministic engine: each step
    /// is one event; threaded: each step yields). Returns the steps that did work.
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
            let bus = node.bus().lock().unwrap_or_else(PoisonError::into_inner);
            for f in bus.functions() {
                out.push(node.describe(&bus, f));
            }
        }
        out
    }
}

impl<K: NicParts> Drop for Machine<K> {
    fn drop(&mut self) {
        K::before_shutdown(&mut self.nodes);
        if let Some(t) = &self.threaded {
            t.shutdown();
        }
    }
}
