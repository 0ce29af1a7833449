//! The driver targets' machines: a one-node Cassini cluster with the Cassini driver bound
//! (`cxi_uapi`), and the default two-node Gemini cluster with kgni bound and the job
//! configured by its launcher (`kgni_uapi`), both built by the `platform` crate as every
//! other user of the driver builds them.
//!
//! Restoring one puts back the engine with every device model (`Deterministic::restore`),
//! each node's RAM with its page allocator (`HostMemory::restore`) and the driver's state
//! (`CxiDevice::restore_idle_state`, `Kgni::restore_idle_state`: allocators, device-wide
//! tables, statistics, interrupt counts). The driver's state is restored first: the objects
//! an input may have left behind are dropped then, and whatever host pages they give back
//! the RAM's restore takes back again.

use std::sync::Arc;

use driver::cassini::{CxiDevice, CxiIdleState};
use driver::gemini::KgniIdleState;
use emu_core::engine::deterministic::{Deterministic, EngineSnapshot};
use emu_core::memory::MemorySnapshot;
use platform::{Cluster, EngineKind, GeminiCluster};

use crate::Fixture;

/// Host memory of the Cassini node.
const CXI_MEM: u64 = 32 << 20;

/// One Cassini node, its device bound by the driver.
pub struct CxiRig {
    /// The cluster.
    pub cl: Cluster,
    /// `/dev/cxi0` of node 0.
    pub dev: Arc<CxiDevice>,
}

/// What [`CxiRig`]'s restore goes back to.
pub struct CxiSaved {
    engine: EngineSnapshot,
    ram: MemorySnapshot,
    driver: CxiIdleState,
}

impl CxiRig {
    fn det(&self) -> &Deterministic {
        self.cl.deterministic().expect("deterministic engine")
    }
}

impl Fixture for CxiRig {
    type Saved = CxiSaved;
    fn build() -> CxiRig {
        let cl = Cluster::builder()
            .nics(1)
            .engine(EngineKind::Deterministic { seed: 1 })
            .memory_per_node(CXI_MEM)
            .build()
            .expect("cluster");
        let dev = cl.node(0).and_then(|n| n.cxi(0)).expect("device");
        CxiRig { cl, dev }
    }
    fn save(&self) -> CxiSaved {
        CxiSaved {
            driver: self.dev.save_idle_state().expect("the driver is idle"),
            engine: self.det().snapshot().expect("snapshot"),
            ram: self.cl.nodes()[0].ram().snapshot(),
        }
    }
    fn restore(&mut self, saved: &CxiSaved) {
        self.dev
            .restore_idle_state(&saved.driver)
            .expect("restore the driver");
        self.cl.nodes()[0]
            .ram()
            .restore(&saved.ram)
            .expect("restore the RAM");
        self.det()
            .restore(&saved.engine)
            .expect("restore the engine");
    }
    fn digest(&self) -> u64 {
        let det = self.det();
        crate::digest((
            det.trace_digest(),
            det.now().0,
            format!("{:?}", self.dev.free_counts()),
            self.dev.refused_requests(),
            self.cl.nodes()[0].ram().free_bytes(),
        ))
    }
}

/// The default Gemini cluster (two nodes on one router), kgni bound, the job configured.
pub struct KgniRig {
    /// The cluster.
    pub c: GeminiCluster,
}

/// What [`KgniRig`]'s restore goes back to.
pub struct KgniSaved {
    engine: EngineSnapshot,
    rams: Vec<MemorySnapshot>,
    drivers: Vec<KgniIdleState>,
}

impl KgniRig {
    fn det(&self) -> &Deterministic {
        self.c.deterministic().expect("deterministic engine")
    }
}

impl Fixture for KgniRig {
    type Saved = KgniSaved;
    fn build() -> KgniRig {
        KgniRig {
            c: GeminiCluster::builder().build().expect("cluster"),
        }
    }
    fn save(&self) -> KgniSaved {
        let nodes = self.c.nodes();
        KgniSaved {
            drivers: nodes
                .iter()
                .map(|n| n.kgni().save_idle_state().expect("kgni is idle"))
                .collect(),
            engine: self.det().snapshot().expect("snapshot"),
            rams: nodes.iter().map(|n| n.ram().snapshot()).collect(),
        }
    }
    fn restore(&mut self, saved: &KgniSaved) {
        let nodes = self.c.nodes();
        for (n, s) in nodes.iter().zip(&saved.drivers) {
            n.kgni().restore_idle_state(s).expect("restore kgni");
        }
        for (n, s) in nodes.iter().zip(&saved.rams) {
            n.ram().restore(s).expect("restore the RAM");
        }
        self.det()
            .restore(&saved.engine)
            .expect("restore the engine");
    }
    fn digest(&self) -> u64 {
        let det = self.det();
        let nodes: Vec<_> = self
            .c
            .nodes()
            .iter()
            .map(|n| {
                let k = n.kgni();
                (
                    format!("{:?}", k.free_counts()),
                    k.refused_requests(),
                    n.ram().free_bytes(),
                    k.interrupts()
                        .iter()
                        .map(|w| w.counts())
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        crate::digest((det.trace_digest(), det.now().0, nodes))
    }
}
