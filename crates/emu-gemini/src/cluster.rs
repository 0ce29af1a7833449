//! A cluster of emulated Gemini NICs on a 3D torus (two NICs per router, as on a Gemini
//! ASIC), on either engine, with one [`Nic`] client per node.

use crate::config::GeminiConfig;
use crate::device::Gemini;
use crate::host::{HostError, Nic};
use crate::link::{gemini_link_params, gemini_link_retry};
use emu_core::dma::DmaPort;
use emu_core::engine::deterministic::{Deterministic, EngineSnapshot};
use emu_core::engine::threaded::{Threaded, ThreadedConfig};
use emu_core::engine::{Engine, EngineError};
use emu_core::fabric::{Fabric, FabricConfig, FaultConfig, LinkParams, PortId, Topology};
use emu_core::memory::{HostMemory, MemorySnapshot};
use emu_core::time::SimTime;
use std::sync::Arc;
use thiserror::Error;

/// Which engine drives the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// Virtual time, one thread, seeded.
    Deterministic {
        /// The seed.
        seed: u64,
    },
    /// Real time, engine threads.
    Threaded(ThreadedConfig),
}

/// How to build a cluster.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Routers along x, y, z.
    pub dims: [u32; 3],
    /// NICs per router (2 on Gemini).
    pub nics_per_router: u32,
    /// Link timing.
    pub link: LinkParams,
    /// Fabric faults.
    pub faults: FaultConfig,
    /// The engine.
    pub engine: EngineChoice,
    /// RAM per node in bytes.
    pub mem_per_node: u64,
    /// NIC parameters; `pe` and `name` are set per node.
    pub nic: GeminiConfig,
}

impl ClusterConfig {
    /// A deterministic cluster of `dims` routers, 2 NICs each, 64 MiB per node.
    pub fn deterministic(dims: [u32; 3], seed: u64) -> Self {
        ClusterConfig {
            dims,
            nics_per_router: 2,
            link: gemini_link_params(),
            faults: FaultConfig::none(),
            engine: EngineChoice::Deterministic { seed },
            mem_per_node: 64 << 20,
            nic: GeminiConfig::new(0),
        }
    }

    /// A threaded cluster of `dims` routers, 2 NICs each, 64 MiB per node.
    pub fn threaded(dims: [u32; 3], config: ThreadedConfig) -> Self {
        ClusterConfig {
            engine: EngineChoice::Threaded(config),
            ..Self::deterministic(dims, 0)
        }
    }
}

/// Why a cluster could not be built.
#[derive(Debug, Error)]
pub enum ClusterError {
    /// Engine or fabric setup failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Fabric setup failed.
    #[error(transparent)]
    Fabric(#[from] emu_core::fabric::FabricError),
    /// Host memory could not be created.
    #[error(transparent)]
    Memory(#[from] emu_core::memory::MemoryError),
    /// The device model could not be built.
    #[error(transparent)]
    Device(#[from] crate::device::GeminiError),
    /// A NIC client could not be created.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// The state of a [`Cluster`] at one moment ([`Cluster::snapshot`]).
#[derive(Debug)]
pub struct ClusterSnapshot {
    engine: EngineSnapshot,
    mems: Vec<MemorySnapshot>,
}

/// NICs on an engine.
pub struct Cluster {
    /// The engine (both kinds).
    pub engine: Arc<dyn Engine>,
    det: Option<Deterministic>,
    threaded: Option<Arc<Threaded>>,
    /// One client per NIC; `nics[p].pe == p`.
    pub nics: Vec<Nic>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("kind", &self.engine.kind())
            .field("nics", &self.nics.len())
            .finish()
    }
}

impl Cluster {
    /// Build the fabric, the engine and one NIC (with its own host memory) per port.
    pub fn new(cfg: ClusterConfig) -> Result<Cluster, ClusterError> {
        let mut fabric = Fabric::new(FabricConfig {
            topology: Topology::Torus3D {
                dims: cfg.dims,
                nics_per_router: cfg.nics_per_router,
            },
            link: cfg.link,
            faults: cfg.faults,
        })?;
        fabric.set_link_retry(Some(gemini_link_retry()));
        let ports = fabric.ports();
        let (engine, det, threaded): (Arc<dyn Engine>, _, _) = match &cfg.engine {
            EngineChoice::Deterministic { seed } => {
                let d = Deterministic::new(*seed, fabric);
                (Arc::new(d.clone()), Some(d), None)
            }
            EngineChoice::Threaded(tc) => {
                let t = Arc::new(Threaded::new(fabric, tc.clone())?);
                (t.clone(), None, Some(t))
            }
        };
        let mut nics = Vec::with_capacity(ports as usize);
        for pe in 0..ports {
            let mem = HostMemory::new(cfg.mem_per_node)?;
            let nic_cfg = GeminiConfig {
                pe,
                name: format!("gemini{pe}"),
                ..cfg.nic.clone()
            };
            let model = Gemini::new(nic_cfg)?;
            let dev = engine.add_device(
                Box::new(model),
                DmaPort::passthrough(mem.clone()),
                Some(PortId(pe)),
            )?;
            nics.push(Nic::new(&engine, dev, pe, mem)?);
        }
        Ok(Cluster {
            engine,
            det,
            threaded,
            nics,
        })
    }

    /// The deterministic engine, if that is the one.
    pub fn deterministic(&self) -> Option<&Deterministic> {
        self.det.as_ref()
    }

    /// The threaded engine, if that is the one.
    pub fn threaded(&self) -> Option<&Threaded> {
        self.threaded.as_deref()
    }

    /// The whole state of a cluster on the deterministic engine: the engine with every NIC
    /// ([`Deterministic::snapshot`]) and every node's host memory
    /// ([`HostMemory::snapshot`]). Take it with the engine idle. Software state kept
    /// outside (a [`crate::host::Cq`]'s read index) is the caller's to copy. Fails on the
    /// threaded engine.
    pub fn snapshot(&self) -> Result<ClusterSnapshot, ClusterError> {
        let det = self.det.as_ref().ok_or_else(|| {
            EngineError::Snapshot("only a deterministic cluster can be snapshotted".into())
        })?;
        Ok(ClusterSnapshot {
            engine: det.snapshot()?,
            mems: self.nics.iter().map(|n| n.mem.snapshot()).collect(),
        })
    }

    /// Go back to the state of `snap` ([`Cluster::snapshot`]): the cluster then runs exactly
    /// as it did after the snapshot.
    pub fn restore(&self, snap: &ClusterSnapshot) -> Result<(), ClusterError> {
        let det = self.det.as_ref().ok_or_else(|| {
            EngineError::Snapshot("only a deterministic cluster can be snapshotted".into())
        })?;
        if snap.mems.len() != self.nics.len() {
            return Err(EngineError::Snapshot("the snapshot has another NIC count".into()).into());
        }
        det.restore(&snap.engine)?;
        for (n, m) in self.nics.iter().zip(&snap.mems) {
            n.mem.restore(m)?;
        }
        Ok(())
    }

    /// The engine's current time.
    pub fn now(&self) -> SimTime {
        self.engine.now()
    }

    /// Program the same job on every NIC: NTT logical PE `i` -> physical PE `i`.
    pub fn setup_ntt(&self) -> Result<(), HostError> {
        let n = self.nics.len() as u64;
        for nic in &self.nics {
            for p in 0..n {
                nic.ntt_set(p, p as u32)?;
            }
        }
        Ok(())
    }
}
