//! A cluster of NICs on one single-switch fabric, driven by one engine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use emu_core::dma::DmaPort;
use emu_core::engine::deterministic::{Deterministic, EngineSnapshot};
use emu_core::engine::threaded::{Threaded, ThreadedConfig};
use emu_core::engine::{Engine, EngineError};
use emu_core::fabric::{Fabric, FabricConfig, LinkParams, Topology};
use emu_core::memory::{GuestAddress, HostMemory, MemorySnapshot};
use firmware_spec::cassini::event::Event;

use crate::{Cassini, CassiniConfig};

use super::error::{HarnessError, mem_err};
use super::fixed::{NODE_MEM, PAGE, USER_IOVA_BASE};
use super::node::Node;
use super::queues::EqRing;

/// The state of a [`Cluster`] at one moment ([`Cluster::snapshot`]).
#[derive(Debug)]
pub struct ClusterSnapshot {
    engine: EngineSnapshot,
    mems: Vec<MemorySnapshot>,
    next_iova: Vec<u64>,
}

/// A cluster of NICs on one single-switch fabric, driven by one engine.
pub struct Cluster {
    /// The engine (deterministic or threaded).
    pub engine: Arc<dyn Engine>,
    det: Option<Deterministic>,
    threaded: Option<Arc<Threaded>>,
    /// The nodes, node `i` with NID `i`.
    pub nodes: Vec<Node>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// `n` NICs on the deterministic engine (virtual time) with `seed`.
    pub fn deterministic(n: u32, seed: u64) -> Result<Cluster, HarnessError> {
        Self::deterministic_with_memory(n, seed, NODE_MEM)
    }

    /// `n` NICs on the deterministic engine with `node_mem` bytes of host memory each
    /// (mapped lazily: untouched pages cost nothing).
    pub fn deterministic_with_memory(
        n: u32,
        seed: u64,
        node_mem: u64,
    ) -> Result<Cluster, HarnessError> {
        Self::deterministic_with_ports(n, n.max(2), seed, node_mem)
    }

    /// `n` NICs (on ports `0..n`) on a single switch of `ports` ports, so that ports
    /// `n..ports` stay free for other devices (a test's packet source), on the deterministic
    /// engine with `node_mem` bytes of host memory per node.
    pub fn deterministic_with_ports(
        n: u32,
        ports: u32,
        seed: u64,
        node_mem: u64,
    ) -> Result<Cluster, HarnessError> {
        Self::deterministic_with_link(n, ports, seed, node_mem, LinkParams::default())
    }

    /// [`Cluster::deterministic_with_ports`] with the fabric's links timed by `link` (a
    /// slow link makes a long transfer take long in engine time).
    pub fn deterministic_with_link(
        n: u32,
        ports: u32,
        seed: u64,
        node_mem: u64,
        link: LinkParams,
    ) -> Result<Cluster, HarnessError> {
        let mut cfg = FabricConfig::new(Topology::SingleSwitch {
            ports: ports.max(n).max(2),
        });
        cfg.link = link;
        let fabric = Fabric::new(cfg).map_err(EngineError::from)?;
        let det = Deterministic::new(seed, fabric);
        let engine: Arc<dyn Engine> = Arc::new(det.clone());
        let mut c = Cluster {
            engine,
            det: Some(det),
            threaded: None,
            nodes: Vec::new(),
        };
        c.add_nodes(n, node_mem)?;
        Ok(c)
    }

    /// `n` NICs on the threaded engine (real time; packets delivered inline).
    pub fn threaded(n: u32) -> Result<Cluster, HarnessError> {
        Self::threaded_with(
            n,
            ThreadedConfig {
                workers: 1,
                ..ThreadedConfig::default()
            },
        )
    }

    /// `n` NICs on a threaded engine configured by `cfg` (e.g. no engine threads and no
    /// inline deliveries: nothing moves but in [`Cluster::progress`]).
    pub fn threaded_with(n: u32, cfg: ThreadedConfig) -> Result<Cluster, HarnessError> {
        let fabric = Fabric::new(FabricConfig::new(Topology::SingleSwitch {
            ports: n.max(2),
        }))
        .map_err(EngineError::from)?;
        let t = Arc::new(Threaded::new(fabric, cfg)?);
        let engine: Arc<dyn Engine> = t.clone();
        let mut c = Cluster {
            engine,
            det: None,
            threaded: Some(t),
            nodes: Vec::new(),
        };
        c.add_nodes(n, NODE_MEM)?;
        Ok(c)
    }

    fn add_nodes(&mut self, n: u32, node_mem: u64) -> Result<(), HarnessError> {
        for nid in 0..n {
            let mem = HostMemory::new(node_mem).map_err(mem_err)?;
            let dma = DmaPort::passthrough(mem.clone());
            let dev = self.engine.add_device(
                Box::new(Cassini::new(CassiniConfig {
                    nid,
                    ..CassiniConfig::default()
                })),
                dma,
                Some(emu_core::fabric::PortId(nid)),
            )?;
            let bar = self.engine.mmio(dev, 0)?;
            let root = mem.alloc(PAGE, PAGE).map_err(mem_err)?.start.0;
            mem.fill(GuestAddress(root), PAGE, 0).map_err(mem_err)?;
            let mut node = Node {
                nid,
                dev,
                bar,
                mem,
                root,
                next_iova: USER_IOVA_BASE,
            };
            node.init()?;
            self.nodes.push(node);
        }
        Ok(())
    }

    /// Let the engine finish everything in flight (deterministic: run until idle; threaded:
    /// wait until no engine work is left).
    pub fn settle(&self) {
        if let Some(d) = &self.det {
            d.run_until_idle();
        }
        if let Some(t) = &self.threaded {
            t.wait_idle(Duration::from_secs(5));
        }
    }

    /// The whole state of a cluster on the deterministic engine: the engine with every NIC
    /// ([`Deterministic::snapshot`]), every node's host memory
    /// ([`HostMemory::snapshot`]) and the harness's own allocation state. Take it with the
    /// engine idle ([`Cluster::settle`]). Software objects made from the cluster
    /// ([`CmdQueue`], [`EqRing`]) keep their own state: clone them beside the snapshot.
    /// Fails on the threaded engine.
    pub fn snapshot(&self) -> Result<ClusterSnapshot, HarnessError> {
        let det = self.det.as_ref().ok_or_else(|| {
            EngineError::Snapshot("only a deterministic cluster can be snapshotted".into())
        })?;
        Ok(ClusterSnapshot {
            engine: det.snapshot()?,
            mems: self.nodes.iter().map(|n| n.mem.snapshot()).collect(),
            next_iova: self.nodes.iter().map(|n| n.next_iova).collect(),
        })
    }

    /// Go back to the state of `snap` (see [`Cluster::snapshot`]): the cluster then runs
    /// exactly as it did after the snapshot. Devices attached beside the NICs keep their
    /// own host memory, which is theirs to restore.
    pub fn restore(&mut self, snap: &ClusterSnapshot) -> Result<(), HarnessError> {
        let det = self.det.as_ref().ok_or_else(|| {
            EngineError::Snapshot("only a deterministic cluster can be snapshotted".into())
        })?;
        if snap.mems.len() != self.nodes.len() {
            return Err(EngineError::Snapshot("the snapshot has another node count".into()).into());
        }
        det.restore(&snap.engine)?;
        for ((n, m), iova) in self.nodes.iter_mut().zip(&snap.mems).zip(&snap.next_iova) {
            n.mem
                .restore(m)
                .map_err(|e| HarnessError::Memory(e.to_string()))?;
            n.next_iova = *iova;
        }
        Ok(())
    }

    /// Make a little progress (one event, or a yield).
    pub fn progress(&self) -> bool {
        self.engine.progress()
    }

    /// The deterministic engine, if this cluster runs on it.
    pub fn deterministic_engine(&self) -> Option<&Deterministic> {
        self.det.as_ref()
    }

    /// The threaded engine, if this cluster runs on it.
    pub fn threaded_engine(&self) -> Option<&Arc<Threaded>> {
        self.threaded.as_ref()
    }

    /// Poll `eq` of node `node` until an event arrives, making progress on the engine.
    pub fn wait_event(&self, node: usize, eq: &mut EqRing) -> Result<Event, HarnessError> {
        let n = &self.nodes[node];
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(e) = eq.next(n)? {
                return Ok(e);
            }
            if !self.engine.progress() && self.threaded.is_none() {
                // Deterministic and idle: nothing more will come.
                return eq.next(n)?.ok_or(HarnessError::Timeout("an event"));
            }
            if Instant::now() > deadline {
                return Err(HarnessError::Timeout("an event"));
            }
        }
    }
}
