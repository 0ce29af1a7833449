//! Two emulated Geminis on one switch, set up like `emu-gemini`'s test jobs: on each NIC an
//! identity NTT, a local CQ (1) and a remote CQ (2), a writable data region (MDH 1, remote
//! events to CQ 2), a result region (MDH 2), a read-only region (MDH 3) filled with a known
//! pattern, FMA descriptor 0 of the job (ptag 10, local events to CQ 1), and BTE channel 0
//! on TXD slots 0..16. Port 2 carries an [`Injector`] for raw frames.

use std::sync::Arc;

use emu_core::dma::DmaPort;
use emu_core::engine::deterministic::{Deterministic, EngineSnapshot};
use emu_core::engine::{DeviceId, Engine};
use emu_core::fabric::{Fabric, FabricConfig, PortId, Topology, TrafficClass};
use emu_core::memory::{HostMemory, MemorySnapshot};
use emu_gemini::host::{BteChan, Cq, Fma, HostError, Nic, Region};
use emu_gemini::{Gemini, GeminiConfig};
use firmware_spec::gemini::map;

use crate::Fixture;
use crate::injector::{Frames, Injector};

/// Protection tag of the job.
pub const PTAG: u8 = 10;
/// Data region.
pub const BUF_MDH: u16 = 1;
/// Result region.
pub const RES_MDH: u16 = 2;
/// Read-only region.
pub const RO_MDH: u16 = 3;
/// Bytes of each region.
pub const REGION: u64 = 64 << 10;
/// The pattern of the read-only regions.
pub const RO_BYTE: u8 = 0xC3;

/// One NIC of the fixture and its objects.
pub struct Side {
    /// The NIC.
    pub nic: Nic,
    /// Local events.
    pub local_cq: Cq,
    /// Remote events.
    pub remote_cq: Cq,
    /// Writable data region.
    pub buf: Region,
    /// Result region.
    pub res: Region,
    /// Read-only region.
    pub ro: Region,
    /// FMA descriptor 0.
    pub fma: Fma,
}

/// The fixture.
pub struct Rig {
    /// The engine.
    pub engine: Deterministic,
    /// PE 0 and PE 1.
    pub sides: Vec<Side>,
    /// BTE channel 0 of PE 0.
    pub bte: BteChan,
    /// Frames for the injector on port 2.
    pub frames: Frames,
    /// Frames the NICs sent to port 2.
    pub received: Frames,
    injector: DeviceId,
}

impl Rig {
    /// Build the fixture.
    pub fn new() -> Result<Rig, HostError> {
        let fabric = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 3 }))
            .map_err(|_| HostError::Invalid("fabric"))?;
        let det = Deterministic::new(11, fabric);
        let engine: Arc<dyn Engine> = Arc::new(det.clone());
        let mut sides = Vec::new();
        for pe in 0..2u32 {
            let mem = HostMemory::new(8 << 20).map_err(|_| HostError::Invalid("memory"))?;
            let model =
                Gemini::new(GeminiConfig::new(pe)).map_err(|_| HostError::Invalid("nic"))?;
            let dev = engine
                .add_device(
                    Box::new(model),
                    DmaPort::passthrough(mem.clone()),
                    Some(PortId(pe)),
                )
                .map_err(|_| HostError::Invalid("device"))?;
            let nic = Nic::new(&engine, dev, pe, mem)?;
            for p in 0..2u64 {
                nic.ntt_set(p, p as u32)?;
            }
            let local_cq = nic.cq_create(1, 64)?;
            let remote_cq = nic.cq_create(2, 64)?;
            let a = nic.alloc(REGION)?;
            let buf = nic.register(BUF_MDH, PTAG, a, REGION, true, Some(2))?;
            let r = nic.alloc(REGION)?;
            let res = nic.register(RES_MDH, PTAG, r, REGION, true, None)?;
            let o = nic.alloc(REGION)?;
            nic.write_mem(o, &vec![RO_BYTE; REGION as usize])?;
            let ro = nic.register(RO_MDH, PTAG, o, REGION, false, Some(2))?;
            let fma = nic.fma_alloc(0, PTAG, 1, None)?;
            sides.push(Side {
                nic,
                local_cq,
                remote_cq,
                buf,
                res,
                ro,
                fma,
            });
        }
        let bte = sides[0].nic.bte_enable(0, 0, 16, 0, false)?;
        let frames = Frames::default();
        let received = Frames::default();
        let dma =
            DmaPort::passthrough(HostMemory::new(8192).map_err(|_| HostError::Invalid("memory"))?);
        let injector = engine
            .add_device(
                Box::new(Injector {
                    frames: Arc::clone(&frames),
                    received: Arc::clone(&received),
                }),
                dma,
                Some(PortId(2)),
            )
            .map_err(|_| HostError::Invalid("injector"))?;
        det.run_until_idle();
        Ok(Rig {
            engine: det,
            sides,
            bte,
            frames,
            received,
            injector,
        })
    }

    /// Queue `frame` on traffic class `tc` and have the injector send it to `port`.
    pub fn inject(&self, port: u32, tc: u8, frame: Vec<u8>) -> Result<(), HostError> {
        if let Ok(mut q) = self.frames.lock() {
            q.push_back((TrafficClass(tc), frame));
        }
        let bar = Engine::mmio(&self.engine, self.injector, 0)
            .map_err(|_| HostError::Invalid("injector"))?;
        bar.write_u64(0, u64::from(port))?;
        Ok(())
    }

    /// Run until nothing is left to do.
    pub fn settle(&self) {
        self.engine.run_until_idle();
    }

    /// Consume every event of every CQ; check each NIC still answers MMIO.
    pub fn drain(&mut self) -> Result<usize, HostError> {
        let mut n = 0;
        for s in &mut self.sides {
            while s.nic.cq_poll(&mut s.local_cq)?.is_some() {
                n += 1;
            }
            while s.nic.cq_poll(&mut s.remote_cq)?.is_some() {
                n += 1;
            }
            assert_eq!(s.nic.node_id()?, s.nic.pe, "the NIC still answers");
        }
        Ok(n)
    }

    /// True when both read-only regions still hold their pattern.
    pub fn read_only_intact(&self) -> Result<bool, HostError> {
        let pattern = [RO_BYTE; 4096];
        let mut b = [0u8; 4096];
        for s in &self.sides {
            for at in (0..s.ro.len).step_by(b.len()) {
                let n = (s.ro.len - at).min(b.len() as u64) as usize;
                s.nic.read_mem(s.ro.addr + at, &mut b[..n])?;
                // A slice comparison (one memcmp), not a loop the coverage instrumentation
                // would slow down byte by byte.
                if b[..n] != pattern[..n] {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

/// What [`Rig::restore`] goes back to.
pub struct RigSaved {
    engine: EngineSnapshot,
    mems: Vec<MemorySnapshot>,
    cqs: Vec<(Cq, Cq)>,
    bte: BteChan,
}

impl Fixture for Rig {
    type Saved = RigSaved;
    fn build() -> Rig {
        Rig::new().expect("fixture")
    }
    fn save(&self) -> RigSaved {
        RigSaved {
            engine: self.engine.snapshot().expect("snapshot"),
            mems: self.sides.iter().map(|s| s.nic.mem.snapshot()).collect(),
            cqs: self
                .sides
                .iter()
                .map(|s| (s.local_cq.clone(), s.remote_cq.clone()))
                .collect(),
            bte: self.bte.clone(),
        }
    }
    fn restore(&mut self, saved: &RigSaved) {
        self.engine.restore(&saved.engine).expect("restore");
        for ((s, m), (l, r)) in self.sides.iter_mut().zip(&saved.mems).zip(&saved.cqs) {
            s.nic.mem.restore(m).expect("restore");
            s.local_cq = l.clone();
            s.remote_cq = r.clone();
        }
        self.bte = saved.bte.clone();
        for q in [&self.frames, &self.received] {
            if let Ok(mut q) = q.lock() {
                q.clear();
            }
        }
    }
    fn digest(&self) -> u64 {
        let mut regions = Vec::new();
        for s in &self.sides {
            for r in [&s.buf, &s.res] {
                let mut b = vec![0u8; r.len as usize];
                regions.push(s.nic.read_mem(r.addr, &mut b).ok().map(|()| b));
            }
        }
        crate::digest((self.engine.trace_digest(), self.engine.now().0, regions))
    }
}

/// BAR 0 offset of register `r` of user FMA descriptor `id`.
pub fn fma_user(id: u8, r: u64) -> u64 {
    map::FMA_DESC_USER_BASE + map::DESC_PAGE_SIZE * u64::from(id) + r
}

/// BAR 0 offset of register `r` of privileged FMA descriptor `id`.
pub fn fma_priv(id: u8, r: u64) -> u64 {
    map::FMA_DESC_BASE + map::DESC_PAGE_SIZE * u64::from(id) + r
}
