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

use emu_core::engine::{DeviceId, EngineError, Progress};
use emu_core::fabric::{Fabric, FabricConfig, FabricError, FaultConfig, PortId, Topology};
use emu_core::memory::HostMemory;
use emu_core::time::SimDuration;
use firmware_spec::gemini::gni::{self, JobLimits};
use thiserror::Error;

use driver::gemini::{JobConfig, Kgni, KgniClient, KgniConfig, KgniDriver, Waiter};
use driver::mem::HostMem;
use driver::pci::{BindState, PciBus, PciDriver, PciError, PciFunction};

use crate::function::{AttachError, attach};
use crate::machine::{EmulatedDevice, Machine, MachineBuilder, MachineNode, NicParts, NodeBuild};

/// The ptag of the job a cluster configures by default (in the user range; the one
/// `nicemu run` hands its ranks as `PMI_GNI_PTAG`).
pub const DEFAULT_PTAG: u8 = pmi::gni::DEFAULT_PTAG;
/// The protection key of the default job (in the user range 128..=65407).
pub const DEFAULT_PKEY: u16 = pmi::gni::DEFAULT_PKEY;

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

/// The Gemini parts of a machine ([`NicParts`]): a 3D torus of routers with two NICs each
/// (as on a Gemini ASIC), kgni probed on every node and the job configured on it by a
/// privileged launcher client; waits progress through the engine and every node's
/// interrupt-handler work.
#[derive(Debug)]
pub struct GeminiParts;

/// The Gemini settings of a [`GeminiClusterBuilder`].
#[derive(Clone, Debug)]
pub struct GeminiSettings {
    dims: [u32; 3],
    nics_per_router: u32,
    config: KgniConfig,
    job: Option<JobConfig>,
    ntt: bool,
    faults: FaultConfig,
    request_timeout: Option<SimDuration>,
}

impl Default for GeminiSettings {
    fn default() -> Self {
        GeminiSettings {
            dims: [1, 1, 1],
            nics_per_router: 2,
            config: KgniConfig::default(),
            job: None,
            ntt: true,
            faults: FaultConfig::none(),
            request_timeout: None,
        }
    }
}

/// What a Gemini machine keeps besides its nodes: the cluster-wide progress and the job.
pub struct GeminiShared {
    progress: Arc<ClusterProgress>,
    job: JobConfig,
}

/// Builder of a [`GeminiCluster`].
pub type GeminiClusterBuilder = MachineBuilder<GeminiParts>;

/// An emulated Gemini cluster.
pub type GeminiCluster = Machine<GeminiParts>;

impl NicParts for GeminiParts {
    type Settings = GeminiSettings;
    type Node = GeminiNode;
    type Shared = GeminiShared;
    type Error = GeminiClusterError;

    const DEFAULT_MEMORY: u64 = 64 << 20;

    fn set_driver_faults(s: &mut GeminiSettings, faults: driver::faults::DriverFaults) {
        s.config.faults = faults;
    }

    fn fabric(s: &GeminiSettings) -> Result<(Fabric, usize), GeminiClusterError> {
        let mut fabric = Fabric::new(FabricConfig {
            topology: Topology::Torus3D {
                dims: s.dims,
                nics_per_router: s.nics_per_router,
            },
            link: emu_gemini::link::gemini_link_params(),
            faults: s.faults,
        })?;
        // Gemini links retry lost and damaged packets themselves (LCB link-level retry).
        fabric.set_link_retry(Some(emu_gemini::link::gemini_link_retry()));
        let ports = fabric.ports() as usize;
        Ok((fabric, ports))
    }

    fn shared(s: &GeminiSettings, engine: Arc<dyn Progress>, nodes: usize) -> GeminiShared {
        let job = s.job.clone().unwrap_or_else(|| JobConfig {
            ptag: DEFAULT_PTAG,
            cookie: gni::job_create_cookie(DEFAULT_PKEY, 0),
            limits: JobLimits::default(),
            ntt: if s.ntt {
                (0..nodes as u32).collect()
            } else {
                Vec::new()
            },
        });
        GeminiShared {
            progress: Arc::new(ClusterProgress {
                engine,
                nodes: Mutex::new(Vec::new()),
            }),
            job,
        }
    }

    fn progress(shared: &GeminiShared) -> Arc<dyn Progress> {
        Arc::clone(&shared.progress) as Arc<dyn Progress>
    }

    fn no_such_node(node: usize, nodes: usize) -> GeminiClusterError {
        GeminiClusterError::NoSuchNode { node, nodes }
    }

    fn build_node(
        s: &GeminiSettings,
        shared: &GeminiShared,
        b: NodeBuild<'_>,
    ) -> Result<GeminiNode, GeminiClusterError> {
        let index = b.index;
        let pe = index as u32;
        let waiter = if b.threaded {
            Waiter::Threaded(b.progress)
        } else {
            Waiter::Deterministic(b.progress)
        };
        let job = &shared.job;
        let mut model_cfg = emu_gemini::GeminiConfig::new(pe);
        if let Some(t) = s.request_timeout {
            model_cfg.request_timeout = t;
        }
        let model = emu_gemini::Gemini::new(model_cfg).map_err(|e| GeminiClusterError::Device {
            node: index,
            reason: e.to_string(),
        })?;
        let nic = attach(
            b.engine,
            index,
            b.memory,
            b.process_memory,
            Box::new(model),
            PortId(pe),
        )?;
        let (host, ram, mut bus, address, device) =
            (nic.host, nic.ram, nic.bus, nic.address, nic.device);
        let driver = KgniDriver::new(Arc::clone(&host), s.config.clone());
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
        kgni.set_waiter(waiter);
        let launcher = kgni.open_privileged();
        launcher
            .configure_job(job.clone())
            .map_err(|e| GeminiClusterError::Job {
                node: index,
                reason: e.to_string(),
            })?;
        shared
            .progress
            .nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&kgni));
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

    fn before_shutdown(nodes: &mut [GeminiNode]) {
        // Close the launchers while the engine still runs.
        for n in nodes {
            n.launcher = None;
        }
    }
}

impl MachineBuilder<GeminiParts> {
    /// Routers along x, y, z (default 1×1×1).
    pub fn dims(mut self, dims: [u32; 3]) -> Self {
        self.nic.dims = dims;
        self
    }

    /// NICs per router (default 2).
    pub fn nics_per_router(mut self, n: u32) -> Self {
        self.nic.nics_per_router = n;
        self
    }

    /// Driver settings of every node (`device_id` is kept per node).
    pub fn kgni_config(mut self, c: KgniConfig) -> Self {
        self.nic.config = c;
        self
    }

    /// The job to configure on every node (default: [`DEFAULT_PTAG`], a cookie from
    /// [`DEFAULT_PKEY`], no limits, an NTT mapping logical PE `i` to node `i`).
    pub fn job(mut self, job: JobConfig) -> Self {
        self.nic.job = Some(job);
        self
    }

    /// Whether the default job gets an NTT (default true).
    pub fn ntt(mut self, on: bool) -> Self {
        self.nic.ntt = on;
        self
    }

    /// Fabric faults (default none).
    pub fn faults(mut self, f: FaultConfig) -> Self {
        self.nic.faults = f;
        self
    }

    /// Build only the node of PE `pe` (the torus still has a port for every node): what
    /// one process of a multi-process job hosts. Packets to the other nodes' ports leave
    /// through the engine's outlet (`emu_core::fabric::remote`).
    pub fn hosted_node(self, pe: u32) -> Self {
        self.hosted(pe as usize)
    }

    /// How long a request may go unanswered before the NIC fails it with `REQUEST_TIMEOUT`
    /// (default the model's 100 ms, `GeminiConfig::request_timeout`).
    pub fn request_timeout(mut self, t: SimDuration) -> Self {
        self.nic.request_timeout = Some(t);
        self
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

    fn before_sleep(&self) -> bool {
        self.engine.before_sleep()
    }

    fn can_sleep(&self) -> bool {
        self.engine.can_sleep()
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

impl MachineNode for GeminiNode {
    fn node_index(&self) -> usize {
        self.pe as usize
    }

    fn bus(&self) -> &Mutex<PciBus> {
        &self.bus
    }

    fn describe(&self, bus: &PciBus, f: &PciFunction) -> EmulatedDevice {
        EmulatedDevice::describe(
            self.pe as usize,
            bus,
            f,
            Some(self.pe),
            Some("Gemini".to_string()),
            Some("emulated".to_string()),
        )
    }
}

impl Machine<GeminiParts> {
    /// A builder (one router with 2 NICs, deterministic engine, seed 0).
    pub fn builder() -> GeminiClusterBuilder {
        GeminiClusterBuilder::default()
    }

    /// The job configured on every node.
    pub fn job(&self) -> &JobConfig {
        &self.shared.job
    }

    /// Progress: engine work plus every node's interrupt-handler work.
    pub fn progress(&self) -> Arc<dyn Progress> {
        Arc::clone(self.progress_handle())
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
