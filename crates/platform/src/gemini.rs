//! Emulated clusters of Gemini nodes: the engine and a 3D-torus fabric (two NICs per router,
//! as on a Gemini ASIC), one host memory and one emulated Gemini per node on that node's PCI
//! bus, and the kgni driver probed by id. A privileged "launcher" client configures one job
//! (ptag, cookie, NTT) on every node, as ALPS does before starting an application, and the
//! application learns them from [`GeminiCluster::job`] (the `PMI_GNI_PTAG`/`PMI_GNI_COOKIE`
//! of a real launch).
//!
//! Waits in the driver progress through a cluster-wide handle: it runs engine work and the
//! interrupt-handler work (`Kgni::service`) of every node, so a single thread can drive a
//! datagram exchange between two nodes on the deterministic engine.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use emu_core::engine::deterministic::Deterministic;
use emu_core::engine::threaded::Threaded;
use emu_core::engine::{DeviceId, Engine, EngineError, Progress};
use emu_core::fabric::{
    CaptureSink, Fabric, FabricConfig, FabricError, FaultConfig, PortId, Topology,
};
use emu_core::memory::HostMemory;
use emu_core::time::SimDuration;
use firmware_spec::gemini::gni::{self, JobLimits};
use thiserror::Error;

use driver::gemini::{JobConfig, Kgni, KgniClient, KgniConfig, KgniDriver, Waiter};
use driver::mem::HostMem;
use driver::pci::{BindState, PciBus, PciDriver, PciError};

use crate::devices::EmulatedDevice;
use crate::engine::{EngineKind, ProgressWrap, wrap_progress};
use crate::function::{AttachError, attach};

/// The ptag of the job a cluster configures by default (in the user range).
pub const DEFAULT_PTAG: u8 = 16;
/// The protection key of the default job (in the user range 128..=65407).
pub const DEFAULT_PKEY: u16 = 0x4000;

/// Why a cluster could not be built.
#[derive(Debug, Error)]
pub enum GeminiClusterError {
    /// The fabric could not be built.
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The engine refused something.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A node or its NIC could not be put together.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// The device model could not be built.
    #[error("device model of node {node}: {reason}")]
    Device {
        /// The node.
        node: usize,
        /// Why.
        reason: String,
    },
    /// The PCI layer refused a function.
    #[error(transparent)]
    Pci(#[from] PciError),
    /// The driver did not bind a node's NIC.
    #[error("node {node}: kgni did not bind {address}: {reason}")]
    NotBound {
        /// The node.
        node: usize,
        /// The function.
        address: String,
        /// What the bus recorded.
        reason: String,
    },
    /// The node to host is not in the cluster.
    #[error("node {node} is not in a cluster of {nodes} nodes")]
    NoSuchNode {
        /// The node asked for.
        node: usize,
        /// Nodes of the cluster.
        nodes: usize,
    },
    /// The job could not be configured.
    #[error("node {node}: job setup failed: {reason}")]
    Job {
        /// The node.
        node: usize,
        /// Why.
        reason: String,
    },
}

/// Builder of a [`GeminiCluster`].
#[derive(Clone)]
pub struct GeminiClusterBuilder {
    dims: [u32; 3],
    nics_per_router: u32,
    engine: EngineKind,
    memory: u64,
    config: KgniConfig,
    job: Option<JobConfig>,
    ntt: bool,
    faults: FaultConfig,
    wrap: Option<ProgressWrap>,
    hosted: Option<u32>,
    process_memory: bool,
    request_timeout: Option<SimDuration>,
    capture: Option<Arc<dyn CaptureSink>>,
    on_node: Option<crate::cassini::BuildProgress>,
}

impl fmt::Debug for GeminiClusterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiClusterBuilder")
            .field("dims", &self.dims)
            .field("nics_per_router", &self.nics_per_router)
            .field("engine", &self.engine)
            .field("memory", &self.memory)
            .field("job", &self.job)
            .field("ntt", &self.ntt)
            .field("progress_wrap", &self.wrap.is_some())
            .field("hosted", &self.hosted)
            .field("process_memory", &self.process_memory)
            .field("capture", &self.capture.is_some())
            .field("on_node", &self.on_node.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for GeminiClusterBuilder {
    fn default() -> Self {
        GeminiClusterBuilder {
            dims: [1, 1, 1],
            nics_per_router: 2,
            engine: EngineKind::Deterministic { seed: 0 },
            memory: 64 << 20,
            config: KgniConfig::default(),
            job: None,
            ntt: true,
            faults: FaultConfig::none(),
            wrap: None,
            hosted: None,
            process_memory: false,
            request_timeout: None,
            capture: None,
            on_node: None,
        }
    }
}

impl GeminiClusterBuilder {
    /// Routers along x, y, z (default 1×1×1).
    pub fn dims(mut self, dims: [u32; 3]) -> Self {
        self.dims = dims;
        self
    }

    /// NICs per router (default 2).
    pub fn nics_per_router(mut self, n: u32) -> Self {
        self.nics_per_router = n;
        self
    }

    /// The engine (default deterministic, seed 0).
    pub fn engine(mut self, e: EngineKind) -> Self {
        self.engine = e;
        self
    }

    /// RAM per node (default 64 MiB).
    pub fn memory_per_node(mut self, bytes: u64) -> Self {
        self.memory = bytes;
        self
    }

    /// Driver settings of every node (`device_id` is kept per node).
    pub fn kgni_config(mut self, c: KgniConfig) -> Self {
        self.config = c;
        self
    }

    /// The drivers' fault sites (default none; `driver::faults`).
    pub fn driver_faults(mut self, f: driver::faults::DriverFaults) -> Self {
        self.config.faults = f;
        self
    }

    /// The job to configure on every node (default: [`DEFAULT_PTAG`], a cookie from
    /// [`DEFAULT_PKEY`], no limits, an NTT mapping logical PE `i` to node `i`).
    pub fn job(mut self, job: JobConfig) -> Self {
        self.job = Some(job);
        self
    }

    /// Whether the default job gets an NTT (default true).
    pub fn ntt(mut self, on: bool) -> Self {
        self.ntt = on;
        self
    }

    /// Fabric faults (default none).
    pub fn faults(mut self, f: FaultConfig) -> Self {
        self.faults = f;
        self
    }

    /// Wrap each node's progress handle (see [`ProgressWrap`]): the node's kgni waits and
    /// the uGNI library's polls (through `Kgni::progress`) call the wrapped handle.
    pub fn progress_wrap(mut self, wrap: ProgressWrap) -> Self {
        self.wrap = Some(wrap);
        self
    }

    /// Build only the node of PE `pe` (the torus still has a port for every node): what
    /// one process of a multi-process job hosts. Packets to the other nodes' ports leave
    /// through the engine's outlet (`emu_core::fabric::remote`).
    pub fn hosted_node(mut self, pe: u32) -> Self {
        self.hosted = Some(pe);
        self
    }

    /// How long a request may go unanswered before the NIC fails it with `REQUEST_TIMEOUT`
    /// (default the model's 100 ms, `GeminiConfig::request_timeout`).
    pub fn request_timeout(mut self, t: SimDuration) -> Self {
        self.request_timeout = Some(t);
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

    /// Call `f` after each node is built (see [`crate::cassini::BuildProgress`]).
    pub fn on_node_built(mut self, f: crate::cassini::BuildProgress) -> Self {
        self.on_node = Some(f);
        self
    }

    /// Build the engine, fabric and nodes, probe kgni on every node, configure the job.
    pub fn build(self) -> Result<GeminiCluster, GeminiClusterError> {
        let mut fabric = Fabric::new(FabricConfig {
            topology: Topology::Torus3D {
                dims: self.dims,
                nics_per_router: self.nics_per_router,
            },
            link: emu_gemini::cluster::gemini_link_params(),
            faults: self.faults,
        })?;
        fabric.set_capture(self.capture.clone());
        // Gemini links retry lost and damaged packets themselves (LCB link-level retry).
        fabric.set_link_retry(Some(emu_gemini::cluster::gemini_link_retry()));
        let ports = fabric.ports();
        let started = self.engine.start(fabric)?;
        let (engine, threaded) = (started.engine, started.threaded);
        let progress = Arc::new(ClusterProgress {
            engine: engine.progress_handle(),
            nodes: Mutex::new(Vec::new()),
        });
        let cluster_progress = Arc::clone(&progress) as Arc<dyn Progress>;
        let waiter = |node: usize| {
            let p = wrap_progress(self.wrap.as_ref(), node, &cluster_progress);
            if threaded.is_some() {
                Waiter::Threaded(p)
            } else {
                Waiter::Deterministic(p)
            }
        };
        let job = self.job.clone().unwrap_or_else(|| JobConfig {
            ptag: DEFAULT_PTAG,
            cookie: gni::job_create_cookie(DEFAULT_PKEY, 0),
            limits: JobLimits::default(),
            ntt: if self.ntt {
                (0..ports).collect()
            } else {
                Vec::new()
            },
        });
        let hosted = match self.hosted {
            Some(pe) if pe >= ports => {
                return Err(GeminiClusterError::NoSuchNode {
                    node: pe as usize,
                    nodes: ports as usize,
                });
            }
            Some(pe) => pe..pe + 1,
            None => 0..ports,
        };
        let total = hosted.len();
        let mut nodes = Vec::with_capacity(total);
        for pe in hosted {
            let node = self.build_node(pe, &engine, &waiter(pe as usize), &job)?;
            progress
                .nodes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Arc::downgrade(&node.kgni));
            nodes.push(node);
            if let Some(f) = &self.on_node {
                f(nodes.len(), total);
            }
        }
        Ok(GeminiCluster {
            engine,
            threaded,
            deterministic: started.deterministic,
            progress,
            nodes,
            job,
            kind: self.engine,
        })
    }

    fn build_node(
        &self,
        pe: u32,
        engine: &Arc<dyn Engine>,
        waiter: &Waiter,
        job: &JobConfig,
    ) -> Result<GeminiNode, GeminiClusterError> {
        let index = pe as usize;
        let mut model_cfg = emu_gemini::GeminiConfig::new(pe);
        if let Some(t) = self.request_timeout {
            model_cfg.request_timeout = t;
        }
        let model = emu_gemini::Gemini::new(model_cfg).map_err(|e| GeminiClusterError::Device {
            node: index,
            reason: e.to_string(),
        })?;
        let nic = attach(
            engine,
            index,
            self.memory,
            self.process_memory,
            Box::new(model),
            PortId(pe),
        )?;
        let (host, ram, mut bus, address, device) =
            (nic.host, nic.ram, nic.bus, nic.address, nic.device);
        let driver = KgniDriver::new(Arc::clone(&host), self.config.clone());
        let report = bus.probe_all(&[&driver as &dyn PciDriver]);
        let kgni = match report.first() {
            Some((a, BindState::Bound { .. })) => bus.drvdata::<Kgni>(*a),
            Some((a, state)) => {
                return Err(GeminiClusterError::NotBound {
                    node: index,
                    address: a.to_string(),
                    reason: format!("{state:?}"),
                });
            }
            None => None,
        }
        .ok_or_else(|| GeminiClusterError::NotBound {
            node: index,
            address: address.to_string(),
            reason: "no driver data".into(),
        })?;
        kgni.set_waiter(waiter.clone());
        let launcher = kgni.open_privileged();
        launcher
            .configure_job(job.clone())
            .map_err(|e| GeminiClusterError::Job {
                node: index,
                reason: e.to_string(),
            })?;
        Ok(GeminiNode {
            pe,
            device,
            memory: host,
            ram,
            bus: Mutex::new(bus),
            kgni,
            launcher: Some(launcher),
        })
    }
}

/// Engine progress plus the interrupt-handler work of every node.
struct ClusterProgress {
    engine: Arc<dyn Progress>,
    nodes: Mutex<Vec<Weak<Kgni>>>,
}

impl Progress for ClusterProgress {
    fn progress(&self) -> bool {
        let mut did = self.engine.progress();
        let nodes: Vec<Arc<Kgni>> = self
            .nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for n in nodes {
            did |= n.service();
        }
        did
    }
}

/// One node: its RAM, its PCI bus, the Gemini kgni brought up.
pub struct GeminiNode {
    pe: u32,
    device: DeviceId,
    memory: Arc<dyn HostMem>,
    ram: HostMemory,
    bus: Mutex<PciBus>,
    kgni: Arc<Kgni>,
    launcher: Option<KgniClient>,
}

impl fmt::Debug for GeminiNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiNode")
            .field("pe", &self.pe)
            .finish_non_exhaustive()
    }
}

impl GeminiNode {
    /// The node's physical PE (= its fabric port).
    pub fn pe(&self) -> u32 {
        self.pe
    }

    /// The node's host memory.
    pub fn memory(&self) -> &Arc<dyn HostMem> {
        &self.memory
    }

    /// The node's NIC in the engine (engine events name it).
    pub fn device_id(&self) -> DeviceId {
        self.device
    }

    /// The node's RAM as the emulator sees it, to snapshot and restore it together with the
    /// engine (`HostMemory::snapshot`, `Deterministic::snapshot`) and the driver
    /// (`Kgni::save_idle_state`): the fuzz targets' fixtures.
    pub fn ram(&self) -> &HostMemory {
        &self.ram
    }

    /// The node's kgni device (`/dev/kgni0`).
    pub fn kgni(&self) -> &Arc<Kgni> {
        &self.kgni
    }

    /// Open `/dev/kgni0` as a new process of this node.
    pub fn open(&self) -> KgniClient {
        self.kgni.open()
    }

    /// The job launcher's privileged client.
    pub fn launcher(&self) -> Option<&KgniClient> {
        self.launcher.as_ref()
    }

    /// Run `f` on the node's PCI bus.
    pub fn with_bus<R>(&self, f: impl FnOnce(&mut PciBus) -> R) -> R {
        f(&mut self.bus.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// An emulated Gemini cluster.
pub struct GeminiCluster {
    engine: Arc<dyn Engine>,
    threaded: Option<Arc<Threaded>>,
    deterministic: Option<Deterministic>,
    progress: Arc<ClusterProgress>,
    nodes: Vec<GeminiNode>,
    job: JobConfig,
    kind: EngineKind,
}

impl fmt::Debug for GeminiCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiCluster")
            .field("engine", &self.kind)
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

impl GeminiCluster {
    /// A builder (one router with 2 NICs, deterministic engine, seed 0).
    pub fn builder() -> GeminiClusterBuilder {
        GeminiClusterBuilder::default()
    }

    /// The nodes, by PE.
    pub fn nodes(&self) -> &[GeminiNode] {
        &self.nodes
    }

    /// Node `pe` (`None` if it is not in the cluster, or not hosted here).
    pub fn node(&self, pe: usize) -> Option<&GeminiNode> {
        match self.nodes.get(pe) {
            Some(n) if n.pe as usize == pe => Some(n),
            _ => self.nodes.iter().find(|n| n.pe as usize == pe),
        }
    }

    /// The threaded engine's own handle, when the cluster runs on one (to connect it to
    /// the fabric between processes).
    pub fn threaded(&self) -> Option<&Arc<Threaded>> {
        self.threaded.as_ref()
    }

    /// The job configured on every node.
    pub fn job(&self) -> &JobConfig {
        &self.job
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// The engine kind.
    pub fn engine_kind(&self) -> &EngineKind {
        &self.kind
    }

    /// The deterministic engine's own handle (to step it event by event, read its trace
    /// digest), when the cluster runs on one.
    pub fn deterministic(&self) -> Option<&Deterministic> {
        self.deterministic.as_ref()
    }

    /// The cluster's PCI functions, for `nicemu devices` (NID = the node's PE).
    pub fn devices(&self) -> Vec<EmulatedDevice> {
        let mut out = Vec::new();
        for node in &self.nodes {
            node.with_bus(|bus| {
                for f in bus.functions() {
                    out.push(EmulatedDevice::describe(
                        node.pe as usize,
                        bus,
                        f,
                        Some(node.pe),
                        Some("Gemini".to_string()),
                        Some("emulated".to_string()),
                    ));
                }
            });
        }
        out
    }

    /// Progress: engine work plus every node's interrupt-handler work.
    pub fn progress(&self) -> Arc<dyn Progress> {
        Arc::clone(&self.progress) as Arc<dyn Progress>
    }

    /// Run until nothing is left to do or `max` steps ran; returns the steps that did work.
    pub fn run(&self, max: u64) -> u64 {
        let mut n = 0;
        while n < max && self.progress.progress() {
            n += 1;
        }
        n
    }
}

impl Drop for GeminiCluster {
    fn drop(&mut self) {
        // Close the launchers while the engine still runs.
        for n in &mut self.nodes {
            n.launcher = None;
        }
        if let Some(t) = &self.threaded {
            t.shutdown();
        }
    }
}

/// The torus of `nodes` nodes: two NICs per router along x when the count is even, one
/// otherwise.
pub fn torus_of(nodes: u32) -> ([u32; 3], u32) {
    if nodes.is_multiple_of(2) {
        ([nodes / 2, 1, 1], 2)
    } else {
        ([nodes, 1, 1], 1)
    }
}
