//! A minimal host side for emulated Cassinis, used by the tests, the demo and the benchmarks
//! of this crate: it programs the NIC exactly as `docs/cassini-programming.md` says a driver
//! does — CSR stores through the BAR0 MMIO handle, page tables, command rings and event rings
//! in host memory — and drives the data path through rings and doorbells only. The real
//! driver is `crates/driver`; this is the smallest thing that exercises the device the same
//! way.
//!
//! Fixed choices: every node has its own host memory, seen by its NIC through a passthrough
//! platform IOMMU; AC 1 is a PASSTHROUGH context for "kernel" memory (command rings), AC 2 an
//! NTA context for "user" memory (buffers, event rings) reached through LAC 0 of RGID 1.

use std::sync::Arc;
use std::time::{Duration, Instant};

use emu_core::dma::DmaPort;
use emu_core::engine::deterministic::{Deterministic, EngineSnapshot};
use emu_core::engine::threaded::{Threaded, ThreadedConfig};
use emu_core::engine::{DeviceId, Engine, EngineError};
use emu_core::fabric::{Fabric, FabricConfig, LinkParams, Topology};
use emu_core::memory::{GuestAddress, HostMemory, MemorySnapshot};
use emu_core::mmio::{Mmio, MmioError};
use firmware_spec::cassini::cmd::{CmdHeader, CmdSize, CmdType, DmaOp};
use firmware_spec::cassini::csr::{self, Csr, Field, fields as f};
use firmware_spec::cassini::dfa::{PidBits, build_dfa};
use firmware_spec::cassini::event::{Event, EventType, peek_event};
use firmware_spec::cassini::le::{PtAllocOpts, PtlteState};
use firmware_spec::cassini::pci::{
    CQ_LAUNCH_PAGE_SIZE, CQ_LAUNCH_TGT_BASE, CSR_BASE, EE_SW_STATE_BASE, EE_SW_STATE_PAGE_SIZE,
    TOU_BASE, TOU_LAUNCH_PAGE_SIZE,
};
use firmware_spec::cassini::status::{
    C_CQ_FIRST_WR_PTR, CT_INC_FAILURE_OFFSET, CT_INC_SUCCESS_OFFSET, CT_RESET_FAILURE_OFFSET,
    CT_RESET_SUCCESS_OFFSET, CqStatus, CtWriteback, EqSwState, pad_slots32,
};
use thiserror::Error;

use crate::{Cassini, CassiniConfig};

/// Page size of the harness's tables and buffers.
pub const PAGE: u64 = 4096;
/// AC of kernel memory (PASSTHROUGH).
pub const AC_KERNEL: u16 = 1;
/// AC of user memory (NTA).
pub const AC_USER: u16 = 2;
/// The resource group every harness object belongs to.
pub const RGID: u8 = 1;
/// First IOVA of the user context.
pub const USER_IOVA_BASE: u64 = 0x10_0000_0000;
/// Pages of the user context (`mem_size`).
pub const USER_IOVA_PAGES: u64 = 1 << 20;

/// Why a harness operation failed.
#[derive(Debug, Error)]
pub enum HarnessError {
    /// The engine refused an operation.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// An MMIO access failed.
    #[error(transparent)]
    Mmio(#[from] MmioError),
    /// Host memory could not be allocated or accessed.
    #[error("host memory: {0}")]
    Memory(String),
    /// A command ring is full.
    #[error("command queue {0} is full")]
    CqFull(u16),
    /// Nothing arrived in time.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// Bad argument (e.g. a command of the wrong size).
    #[error("{0}")]
    Invalid(String),
}

fn mem_err<E: std::fmt::Display>(e: E) -> HarnessError {
    HarnessError::Memory(e.to_string())
}

/// A memory descriptor: `len` bytes at `iova` in the user context, backed by host memory at
/// `host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Md {
    /// IOVA in AC 2 (LAC 0).
    pub iova: u64,
    /// Host address of the first byte.
    pub host: u64,
    /// Length in bytes.
    pub len: u64,
}

/// One emulated NIC with its host memory and the software state the harness keeps for it.
pub struct Node {
    /// The NIC's NID (= its fabric port).
    pub nid: u32,
    /// The engine's id of the device.
    pub dev: DeviceId,
    /// BAR0.
    pub bar: Arc<dyn Mmio>,
    /// The node's host memory.
    pub mem: HostMemory,
    root: u64,
    next_iova: u64,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("nid", &self.nid)
            .finish_non_exhaustive()
    }
}

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

/// Bytes of host memory per node (unless a constructor says otherwise).
pub const NODE_MEM: u64 = 64 << 20;

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

/// Build an entry image from its reset value and `fields`.
pub fn entry_image(c: &Csr, fields: &[(&Field, u64)]) -> Vec<u8> {
    let mut b = c.reset_bytes();
    for (fld, v) in fields {
        fld.set(&mut b, *v);
    }
    b
}

impl Node {
    /// Store a whole CSR entry image (64-bit stores, in order).
    pub fn csr_write_image(&self, c: &Csr, entry: u32, image: &[u8]) -> Result<(), HarnessError> {
        let base = c
            .bar0_offset(entry)
            .ok_or_else(|| HarnessError::Invalid(format!("{}[{entry}]", c.name)))?;
        for (i, q) in image.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b[..q.len()].copy_from_slice(q);
            self.bar.write(base + 8 * i as u64, &b)?;
        }
        Ok(())
    }

    /// Store CSR entry `entry` of `c` with `fields` set (others at their reset values).
    pub fn csr_write(
        &self,
        c: &Csr,
        entry: u32,
        fields: &[(&Field, u64)],
    ) -> Result<(), HarnessError> {
        self.csr_write_image(c, entry, &entry_image(c, fields))
    }

    /// Load CSR entry `entry` of `c`.
    pub fn csr_read(&self, c: &Csr, entry: u32) -> Result<Vec<u8>, HarnessError> {
        let base = c
            .bar0_offset(entry)
            .ok_or_else(|| HarnessError::Invalid(format!("{}[{entry}]", c.name)))?;
        let mut out = vec![0u8; c.size as usize];
        for (i, q) in out.chunks_mut(8).enumerate() {
            let mut b = [0u8; 8];
            self.bar.read(base + 8 * i as u64, &mut b)?;
            q.copy_from_slice(&b[..q.len()]);
        }
        Ok(out)
    }

    /// Load one field of a CSR entry.
    pub fn csr_field(&self, c: &Csr, entry: u32, fld: &Field) -> Result<u64, HarnessError> {
        Ok(fld.get(&self.csr_read(c, entry)?))
    }

    /// Address contexts, LAC 0 of RGID 1, and the ATU root table.
    fn init(&mut self) -> Result<(), HarnessError> {
        use f::c_atu_cfg_ac_table as ac;
        self.csr_write(
            csr::C_ATU_CFG_AC_TABLE,
            u32::from(AC_KERNEL),
            &[(ac::CONTEXT_EN, 1), (ac::TA_MODE, 3)],
        )?;
        // nta_root_ptr shares bits 12..57 with ta_mode_opts: the raw bits are the address.
        self.csr_write(
            csr::C_ATU_CFG_AC_TABLE,
            u32::from(AC_USER),
            &[
                (ac::CONTEXT_EN, 1),
                (ac::TA_MODE, 1),
                (ac::TA_MODE_OPTS, self.root >> 12),
                (ac::MEM_BASE, USER_IOVA_BASE >> 12),
                (ac::MEM_SIZE, USER_IOVA_PAGES),
            ],
        )?;
        self.csr_write(
            csr::C_CQ_CFG_AC_ARRAY,
            u32::from(RGID) * 8,
            &[(f::c_cq_cfg_ac_array::AC, u64::from(AC_USER))],
        )
    }

    /// Allocate `len` bytes of zeroed host memory (page aligned).
    pub fn alloc_host(&self, len: u64) -> Result<u64, HarnessError> {
        let r = self.mem.alloc(len.max(1), PAGE).map_err(mem_err)?;
        self.mem.fill(r.start, r.len, 0).map_err(mem_err)?;
        Ok(r.start.0)
    }

    /// Write a page-table entry for IOVA `va` -> host `pa`.
    fn map_page(&self, va: u64, pa: u64, r: bool, w: bool) -> Result<(), HarnessError> {
        const P: u64 = 1 << 60;
        const LEAF: u64 = 1 << 59;
        let mut table = self.root;
        for level in (1..5u32).rev() {
            let idx = (va >> (12 + 9 * level)) & 0x1FF;
            let a = GuestAddress(table + idx * 8);
            let pte = self.mem.read_u64(a).map_err(mem_err)?;
            if pte & P != 0 {
                table = pte & 0x01FF_FFFF_FFFF_F000;
                continue;
            }
            let next = self.alloc_host(PAGE)?;
            self.mem.write_u64(a, next | P).map_err(mem_err)?;
            table = next;
        }
        let idx = (va >> 12) & 0x1FF;
        let mut pte = pa | P | LEAF;
        if r {
            pte |= 1 << 57;
        }
        if w {
            pte |= 1 << 58;
        }
        self.mem
            .write_u64(GuestAddress(table + idx * 8), pte)
            .map_err(mem_err)
    }

    /// Register `len` bytes of fresh host memory in the user context (`cxil_map`).
    pub fn map(&mut self, len: u64, read: bool, write: bool) -> Result<Md, HarnessError> {
        let len = len.max(1);
        let pages = len.div_ceil(PAGE);
        let host = self.alloc_host(pages * PAGE)?;
        let iova = self.next_iova;
        // Leave an unmapped guard page after every MD.
        self.next_iova += (pages + 1) * PAGE;
        for p in 0..pages {
            self.map_page(iova + p * PAGE, host + p * PAGE, read, write)?;
        }
        self.atu_invalidate(AC_USER)?;
        Ok(Md { iova, host, len })
    }

    /// Change the access of the pages of `md` that `[offset, offset + len)` touches: `read`
    /// and `write` as in [`Node::map`], or not present at all when `present` is false; then
    /// invalidate the context's translations (an unmap or `mprotect` under a transfer).
    pub fn protect(
        &self,
        md: &Md,
        offset: u64,
        len: u64,
        present: bool,
        read: bool,
        write: bool,
    ) -> Result<(), HarnessError> {
        let first = offset / PAGE;
        let end = offset.saturating_add(len).min(md.len).div_ceil(PAGE);
        for p in first..end {
            let (va, pa) = (md.iova + p * PAGE, md.host + p * PAGE);
            self.map_page(va, pa, read, write)?;
            if !present {
                self.unmap_page(va)?;
            }
        }
        self.atu_invalidate(AC_USER)
    }

    /// Clear the leaf page-table entry of IOVA `va` (mapped before).
    fn unmap_page(&self, va: u64) -> Result<(), HarnessError> {
        let mut table = self.root;
        for level in (1..5u32).rev() {
            let idx = (va >> (12 + 9 * level)) & 0x1FF;
            let pte = self
                .mem
                .read_u64(GuestAddress(table + idx * 8))
                .map_err(mem_err)?;
            table = pte & 0x01FF_FFFF_FFFF_F000;
        }
        let idx = (va >> 12) & 0x1FF;
        self.mem
            .write_u64(GuestAddress(table + idx * 8), 0)
            .map_err(mem_err)
    }

    /// `C_ATU_INVALIDATE_PAGES` for a whole context.
    pub fn atu_invalidate(&self, acid: u16) -> Result<(), HarnessError> {
        let qw = (1u64 << 62) | u64::from(acid & 0x3FF);
        self.bar
            .write_u64(CSR_BASE + csr::C_ATU_CFG_CQ_TABLE.offset, qw)
            .map_err(Into::into)
    }

    /// Read `len` bytes of host memory at `host`.
    pub fn read_host(&self, host: u64, len: usize) -> Result<Vec<u8>, HarnessError> {
        let mut v = vec![0u8; len];
        self.mem.read(GuestAddress(host), &mut v).map_err(mem_err)?;
        Ok(v)
    }

    /// Write host memory.
    pub fn write_host(&self, host: u64, data: &[u8]) -> Result<(), HarnessError> {
        self.mem.write(GuestAddress(host), data).map_err(mem_err)
    }

    /// A communication profile: CP `cp` with `vni` and traffic class `tc`, reached through
    /// LCID `lcid` of RGID 1.
    pub fn set_cp(&self, cp: u8, lcid: u8, vni: u16, tc: u8) -> Result<(), HarnessError> {
        self.csr_write(
            csr::C_CQ_CFG_CP_TABLE,
            u32::from(cp),
            &[
                (f::c_cq_cfg_cp_table::VNI, u64::from(vni)),
                (f::c_cq_cfg_cp_table::VALID, 1),
            ],
        )?;
        self.csr_write(
            csr::C_CQ_CFG_CP_FL_TABLE,
            u32::from(cp),
            &[(f::c_cq_cfg_cp_fl_table::TC, u64::from(tc))],
        )?;
        self.csr_write(
            csr::C_CQ_CFG_CID_ARRAY,
            u32::from(RGID) * 16 + u32::from(lcid),
            &[(f::c_cq_cfg_cid_array::CID, u64::from(cp))],
        )
    }

    /// Event queue `n` with `bytes` of ring (a multiple of 4 KiB) in the user context.
    pub fn alloc_eq(&mut self, n: u16, bytes: u64, opts: EqOpts) -> Result<EqRing, HarnessError> {
        use f::c_ee_cfg_eq_descriptor as d;
        // In the kernel's bypass context the ring's address is its host address.
        let (host, addr, acid) = if opts.kernel_context {
            let host = self.alloc_host(bytes)?;
            (host, host, AC_KERNEL)
        } else {
            let md = self.map(bytes, true, true)?;
            (md.host, md.iova, AC_USER)
        };
        self.csr_write(
            csr::C_CQ_CFG_EQ_RGID_TABLE,
            u32::from(n),
            &[(f::c_cq_cfg_eq_rgid_table::RGID, u64::from(RGID))],
        )?;
        self.csr_write(
            csr::C_EE_CFG_EQ_DESCRIPTOR,
            u32::from(n),
            &[
                (d::EQ_ENABLE, 1),
                (d::BUFFER_A_EN, 1),
                (d::BUFFER_A_SIZE, bytes / PAGE),
                (d::BUFFER_A_ADDR, addr >> 12),
                (d::ACID, u64::from(acid)),
                (d::EQ_STS_DROPPED_EN, u64::from(opts.drop_status)),
                (d::RESERVED_FC, u64::from(opts.reserved_fc)),
                (d::EVENT_INT_EN, u64::from(opts.interrupt.is_some())),
                (d::EVENT_INT_IDX, u64::from(opts.interrupt.unwrap_or(0))),
            ],
        )?;
        if opts.long_initiator || opts.long_target {
            let entry = u32::from(n) / 32;
            let shift = 2 * (u32::from(n) % 32);
            let mut qw = u64::from_le_bytes(
                self.csr_read(csr::C_EE_CFG_LONG_EVNT_OVR_TABLE, entry)?[..8]
                    .try_into()
                    .map_err(|_| HarnessError::Invalid("csr".into()))?,
            );
            let v = u64::from(opts.long_initiator) | (u64::from(opts.long_target) << 1);
            qw = (qw & !(3 << shift)) | (v << shift);
            self.csr_write_image(csr::C_EE_CFG_LONG_EVNT_OVR_TABLE, entry, &qw.to_le_bytes())?;
        }
        let eq = EqRing {
            n,
            host,
            size: bytes,
            rd: 64,
            sw: EqSwState::default(),
            unacked: 0,
        };
        eq.write_sw_state(self)?;
        Ok(eq)
    }

    #[allow(clippy::too_many_arguments)]
    fn alloc_cq(
        &mut self,
        tgt: bool,
        n: u16,
        slots: u32,
        eq: u16,
        lcid: u8,
        trig_pool: Option<u8>,
    ) -> Result<CmdQueue, HarnessError> {
        let bytes = u64::from(slots) * 64;
        let host = self.alloc_host(bytes)?;
        if tgt {
            use f::c_cq_tgq_table as t;
            self.csr_write(
                csr::C_CQ_TGQ_TABLE,
                u32::from(n),
                &[
                    (t::MEM_Q_BASE, host >> 12),
                    (t::MEM_Q_MAX_PTR, u64::from(slots - 1)),
                    (t::MEM_Q_EQ, u64::from(eq)),
                    (t::MEM_Q_RGID, u64::from(RGID)),
                    (t::MEM_Q_ACID, u64::from(AC_KERNEL)),
                ],
            )?;
            self.csr_write(
                csr::C_CQ_TGQ_ENABLE,
                u32::from(n),
                &[(f::c_cq_tgq_enable::TGQ_ENABLE, 1)],
            )?;
        } else {
            use f::c_cq_txq_base_table as t;
            self.csr_write(
                csr::C_CQ_TXQ_BASE_TABLE,
                u32::from(n),
                &[
                    (t::MEM_Q_BASE, host >> 12),
                    (t::MEM_Q_MAX_PTR, u64::from(slots - 1)),
                    (t::MEM_Q_EQ, u64::from(eq)),
                    (t::MEM_Q_RGID, u64::from(RGID)),
                    (t::MEM_Q_LCID, u64::from(lcid)),
                    (t::MEM_Q_ACID, u64::from(AC_KERNEL)),
                    // A trigger CQ draws its TLEs from pool `mem_q_pfq` (cass_cq.c).
                    (t::MEM_Q_PFQ, u64::from(trig_pool.unwrap_or(0))),
                ],
            )?;
            self.csr_write(
                csr::C_CQ_TXQ_TC_TABLE,
                u32::from(n),
                &[(
                    f::c_cq_txq_tc_table::MEM_Q_TRIG,
                    u64::from(trig_pool.is_some()),
                )],
            )?;
            self.csr_write(
                csr::C_CQ_TXQ_ENABLE,
                u32::from(n),
                &[(f::c_cq_txq_enable::TXQ_ENABLE, 1)],
            )?;
        }
        Ok(CmdQueue {
            tgt,
            n,
            host,
            slots: u64::from(slots),
            wp32: 2 * C_CQ_FIRST_WR_PTR,
            rd: C_CQ_FIRST_WR_PTR,
        })
    }

    /// Transmit CQ `n` with `slots` 64 B slots (power of two, at least 64), failures to `eq`,
    /// starting on LCID `lcid`.
    pub fn alloc_txq(
        &mut self,
        n: u16,
        slots: u32,
        eq: u16,
        lcid: u8,
    ) -> Result<CmdQueue, HarnessError> {
        self.alloc_cq(false, n, slots, eq, lcid, None)
    }

    /// Trigger CQ `n` (`CXI_CQ_TX_WITH_TRIG_CMDS`: CT commands only, LCID 0) whose pending
    /// triggered operations take TLEs from pool `tle_pool`.
    pub fn alloc_trig_txq(
        &mut self,
        n: u16,
        slots: u32,
        eq: u16,
        tle_pool: u8,
    ) -> Result<CmdQueue, HarnessError> {
        self.alloc_cq(false, n, slots, eq, 0, Some(tle_pool & 3))
    }

    /// Target CQ `n`.
    pub fn alloc_tgq(&mut self, n: u16, slots: u32, eq: u16) -> Result<CmdQueue, HarnessError> {
        self.alloc_cq(true, n, slots, eq, 0, None)
    }

    /// Counting event `ct` (`cxil_alloc_ct`): counts zeroed (`c_cq_cfg_init_ct_hw_state`
    /// init), RGID 1, written back to the first 8 bytes of `wb` (or never), enabled.
    pub fn alloc_ct(&self, ct: u16, wb: Option<&Md>) -> Result<Ct, HarnessError> {
        use f::c_cq_cfg_ct_wb_mem_addr as w;
        self.csr_write(
            csr::C_CQ_CFG_INIT_CT_HW_STATE,
            0,
            &[
                (f::c_cq_cfg_init_ct_hw_state::CT_HANDLE, u64::from(ct)),
                (f::c_cq_cfg_init_ct_hw_state::INIT, 1),
            ],
        )?;
        self.csr_write(csr::C_CQ_CFG_INIT_CT_HW_STATE, 0, &[])?;
        self.csr_write(
            csr::C_CQ_CFG_CT_RGID_TABLE,
            u32::from(ct),
            &[(f::c_cq_cfg_ct_rgid_table::RGID, u64::from(RGID))],
        )?;
        let (ctx, addr) = wb.map_or((0, 0), |m| (u64::from(AC_USER), m.iova >> 3));
        self.csr_write(
            csr::C_CQ_CFG_CT_WB_MEM_ADDR,
            u32::from(ct),
            &[(w::WB_MEM_CONTEXT, ctx), (w::WB_MEM_ADDR, addr)],
        )?;
        self.csr_write(
            csr::C_CQ_CFG_CT_ENABLE,
            u32::from(ct),
            &[(f::c_cq_cfg_ct_enable::CT_ENABLE, 1)],
        )?;
        Ok(Ct {
            n: ct,
            wb_host: wb.map(|m| m.host),
        })
    }

    /// TLE pool `pool` (`c_cq_cfg_tle_pool`): `num_reserved` of its own, at most `max_alloc`.
    pub fn set_tle_pool(
        &self,
        pool: u8,
        num_reserved: u16,
        max_alloc: u16,
    ) -> Result<(), HarnessError> {
        use f::c_cq_cfg_tle_pool as t;
        self.csr_write(
            csr::C_CQ_CFG_TLE_POOL,
            u32::from(pool),
            &[
                (t::NUM_RESERVED, u64::from(num_reserved)),
                (t::MAX_ALLOC, u64::from(max_alloc)),
            ],
        )
    }

    /// The shared TLE reserve (`c_cq_cfg_sts_tle_shared.num_shared`).
    pub fn set_tle_shared(&self, num_shared: u16) -> Result<(), HarnessError> {
        self.csr_write(
            csr::C_CQ_CFG_STS_TLE_SHARED,
            0,
            &[(
                f::c_cq_cfg_sts_tle_shared::NUM_SHARED,
                u64::from(num_shared),
            )],
        )
    }

    /// Hardware counter `name` of view `view` (e.g. `c1_oxe_cntrs`, `err_no_translation`),
    /// read from its slot of the block's event-counter array as software reads it.
    pub fn counter(&self, view: &str, name: &str) -> Result<u64, HarnessError> {
        let off = crate::counters::offset_of(view, name)
            .ok_or_else(|| HarnessError::Invalid(format!("no counter {view}.{name}")))?;
        Ok(self
            .bar
            .read_u64(firmware_spec::cassini::csr::CSR_BASE + off)?)
    }

    /// The ack counter of transmit CQ `n` (`CXI_OP_CQ_ACK_COUNTER`): its triggered
    /// operations still pending.
    pub fn ack_counter(&self, n: u16) -> Result<u64, HarnessError> {
        self.csr_field(
            csr::C_CQ_TXQ_ACK_CTR,
            u32::from(n),
            f::c_cq_txq_ack_ctr::MEM_Q_ACK_CTR,
        )
    }

    /// Rendezvous Gets as the driver programs them (`c_lpe_cfg_get_ctrl`): to index
    /// `rdzv_get_idx` 255 of the initiator's PID granule, transaction type 0xF, issued by
    /// the NIC if `enable` (`rdzv_get_en`).
    pub fn set_rendezvous_gets(&self, enable: bool) -> Result<(), HarnessError> {
        use f::c_lpe_cfg_get_ctrl as g;
        let (d, ext) = build_dfa(0, 0, PidBits::DEFAULT, 255);
        self.csr_write(
            csr::C_LPE_CFG_GET_CTRL,
            0,
            &[
                (g::GET_INDEX, u64::from(d & 0xFFF)),
                (g::GET_INDEX_EXT, u64::from(ext)),
                (g::TRANSACTION_TYPE, 0xF),
                (g::GET_EN, u64::from(enable)),
            ],
        )
    }

    /// Limits of LE pool `pool` of processing engine `pe` (`c_lpe_cfg_pe_le_pools`); the
    /// harness's PtlTEs use PE 0, pool 0.
    pub fn set_le_pool(
        &self,
        pe: u8,
        pool: u8,
        num_reserved: u32,
        max_alloc: u32,
    ) -> Result<(), HarnessError> {
        use f::c_lpe_cfg_pe_le_pools as l;
        self.csr_write(
            csr::C_LPE_CFG_PE_LE_POOLS,
            u32::from(pe) * 16 + u32::from(pool),
            &[
                (l::NUM_RESERVED, u64::from(num_reserved)),
                (l::MAX_ALLOC, u64::from(max_alloc)),
            ],
        )
    }

    /// PtlTE `pt` (DISABLED, options `opts`, events to `eq`), reachable at (`vni`, `pid`,
    /// index `idx`) through VNI TCAM entry `vni_slot` and portal TCAM entry `portal_slot`.
    #[allow(clippy::too_many_arguments)]
    pub fn alloc_pte(
        &self,
        pt: u16,
        eq: u16,
        opts: PtAllocOpts,
        vni: u16,
        pid: u32,
        idx: u32,
        vni_slot: u32,
        portal_slot: u32,
    ) -> Result<(), HarnessError> {
        use f::c_lpe_cfg_ptl_table as p;
        let o = |x: PtAllocOpts| u64::from(opts.contains(x));
        self.csr_write(
            csr::C_CQ_CFG_PTLTE_RGID_TABLE,
            u32::from(pt),
            &[(f::c_cq_cfg_ptlte_rgid_table::RGID, u64::from(RGID))],
        )?;
        self.csr_write(
            csr::C_LPE_CFG_PTL_TABLE,
            u32::from(pt),
            &[
                (p::EQ_HANDLE, u64::from(eq)),
                (p::EQ_HANDLE_NO_RGET, u64::from(eq)),
                (p::EN_FLOWCTRL, o(PtAllocOpts::EN_FLOWCTRL)),
                (p::USE_LONG_EVENT, o(PtAllocOpts::USE_LONG_EVENT)),
                (p::EN_EVENT_MATCH, o(PtAllocOpts::EN_EVENT_MATCH)),
                (p::USE_LOGICAL, o(PtAllocOpts::USE_LOGICAL)),
                (p::IS_MATCHING, o(PtAllocOpts::IS_MATCHING)),
                (p::DO_SPACE_CHECK, o(PtAllocOpts::DO_SPACE_CHECK)),
                (p::EN_SW_HW_ST_CHNG, o(PtAllocOpts::EN_SW_HW_ST_CHNG)),
                (
                    p::EN_RESTRICTED_UNICAST_LM,
                    o(PtAllocOpts::EN_RESTRICTED_UNICAST_LM),
                ),
                (p::SIGNAL_INVALID, o(PtAllocOpts::SIGNAL_INVALID)),
                (p::SIGNAL_UNDERFLOW, o(PtAllocOpts::SIGNAL_UNDERFLOW)),
                (p::SIGNAL_OVERFLOW, o(PtAllocOpts::SIGNAL_OVERFLOW)),
                (p::SIGNAL_INEXACT, o(PtAllocOpts::SIGNAL_INEXACT)),
                (p::PTL_STATE, u64::from(u8::from(PtlteState::Disabled))),
            ],
        )?;
        // RMU: exact VNI, exact (index_ext, endpoint, vni_list_idx).
        let mask16 = 0xFFFF;
        self.csr_write(
            csr::C_RMU_CFG_VNI_LIST_X,
            vni_slot,
            &[(f::c_rmu_cfg_vni_list_x::VNI, u64::from(vni))],
        )?;
        self.csr_write(
            csr::C_RMU_CFG_VNI_LIST_Y,
            vni_slot,
            &[(f::c_rmu_cfg_vni_list_y::VNI, !u64::from(vni) & mask16)],
        )?;
        let (dfa, ext) = build_dfa(0, pid, PidBits::DEFAULT, idx);
        let key = u64::from(ext) | (u64::from(dfa & 0xFFF) << 5) | (u64::from(vni_slot) << 24);
        let mask = 0x1F | (0xFFF << 5) | (1 << 20) | (0xFF << 24);
        self.csr_write_image(
            csr::C_RMU_CFG_PORTAL_LIST_X,
            portal_slot,
            &key.to_le_bytes(),
        )?;
        self.csr_write_image(
            csr::C_RMU_CFG_PORTAL_LIST_Y,
            portal_slot,
            &(!key & mask).to_le_bytes(),
        )?;
        let entry = portal_slot / 4;
        let mut img = self.csr_read(csr::C_RMU_CFG_PORTAL_INDEX_TABLE, entry)?;
        let fld = match portal_slot % 4 {
            0 => f::c_rmu_cfg_portal_index_table::N0_PHYS_PORTAL_TABLE_IDX,
            1 => f::c_rmu_cfg_portal_index_table::N1_PHYS_PORTAL_TABLE_IDX,
            2 => f::c_rmu_cfg_portal_index_table::N2_PHYS_PORTAL_TABLE_IDX,
            _ => f::c_rmu_cfg_portal_index_table::N3_PHYS_PORTAL_TABLE_IDX,
        };
        fld.set(&mut img, u64::from(pt));
        self.csr_write_image(csr::C_RMU_CFG_PORTAL_INDEX_TABLE, entry, &img)
    }

    /// Read `c_cq_status` of a queue from its ring.
    pub fn cq_status(&self, q: &CmdQueue) -> Result<CqStatus, HarnessError> {
        let b = self.read_host(q.host, 8)?;
        CqStatus::decode(&b).map_err(|e| HarnessError::Invalid(e.to_string()))
    }
}

/// Software's side of a counting event ([`Node::alloc_ct`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ct {
    /// CT number.
    pub n: u16,
    /// Host address of the write-back buffer, if any.
    pub wb_host: Option<u64>,
}

impl Ct {
    fn doorbell(&self, node: &Node, offset: u64, value: u64) -> Result<(), HarnessError> {
        let at = TOU_BASE + u64::from(self.n) * TOU_LAUNCH_PAGE_SIZE + offset;
        node.bar.write_u64(at, value).map_err(Into::into)
    }

    /// `cxi_ct_inc_success`: a doorbell store adding `v` to the success count.
    pub fn inc_success(&self, node: &Node, v: u64) -> Result<(), HarnessError> {
        self.doorbell(node, CT_INC_SUCCESS_OFFSET as u64, v)
    }

    /// `cxi_ct_inc_failure`.
    pub fn inc_failure(&self, node: &Node, v: u64) -> Result<(), HarnessError> {
        self.doorbell(node, CT_INC_FAILURE_OFFSET as u64, v)
    }

    /// `cxi_ct_reset_success`.
    pub fn reset_success(&self, node: &Node) -> Result<(), HarnessError> {
        self.doorbell(node, CT_RESET_SUCCESS_OFFSET as u64, 0)
    }

    /// `cxi_ct_reset_failure`.
    pub fn reset_failure(&self, node: &Node) -> Result<(), HarnessError> {
        self.doorbell(node, CT_RESET_FAILURE_OFFSET as u64, 0)
    }

    /// The write-back buffer as it is in host memory now.
    pub fn writeback(&self, node: &Node) -> Result<CtWriteback, HarnessError> {
        let host = self
            .wb_host
            .ok_or_else(|| HarnessError::Invalid("CT without write-back".into()))?;
        CtWriteback::decode(&node.read_host(host, 8)?)
            .map_err(|e| HarnessError::Invalid(e.to_string()))
    }

    /// Zero the write-back buffer (software clearing `ct_writeback` before waiting).
    pub fn clear_writeback(&self, node: &Node) -> Result<(), HarnessError> {
        match self.wb_host {
            Some(h) => node.write_host(h, &[0u8; 8]),
            None => Ok(()),
        }
    }
}

/// Options of [`Node::alloc_eq`].
#[derive(Debug, Clone, Copy, Default)]
pub struct EqOpts {
    /// Write the status block on drops (`eq_sts_dropped_en`).
    pub drop_status: bool,
    /// `reserved_fc` slots.
    pub reserved_fc: u16,
    /// Initiator events in the long format.
    pub long_initiator: bool,
    /// Target events in the long format.
    pub long_target: bool,
    /// Raise this MSI-X vector per event.
    pub interrupt: Option<u16>,
    /// Put the ring in the kernel's bypass context (as a driver-owned EQ) instead of the user
    /// context: no LAC of the user's resource group reaches it, so no command a process
    /// issues can write over it (a user-context ring can be overwritten by the process's own
    /// Gets, as on the hardware).
    pub kernel_context: bool,
}

/// Software's side of an event queue.
#[derive(Debug, Clone)]
pub struct EqRing {
    /// EQ number.
    pub n: u16,
    /// Host address of the ring.
    pub host: u64,
    /// Ring bytes.
    pub size: u64,
    rd: u64,
    sw: EqSwState,
    unacked: u32,
}

impl EqRing {
    fn write_sw_state(&self, node: &Node) -> Result<(), HarnessError> {
        let off = EE_SW_STATE_BASE + u64::from(self.n) * EE_SW_STATE_PAGE_SIZE;
        node.bar
            .write_u64(off, self.sw.to_u64())
            .map_err(Into::into)
    }

    /// The next event, if one is there (`cxi_eq_peek_event` + `cxi_eq_next_event`): NULL
    /// events are skipped; consumed bytes are zeroed; the read pointer is written back every
    /// [`EqRing::ACK_BATCH`] events (or by [`EqRing::ack`]).
    pub fn next(&mut self, node: &Node) -> Result<Option<Event>, HarnessError> {
        loop {
            let avail = ((self.size - self.rd) as usize).min(64);
            let mut b = [0u8; 64];
            let at = GuestAddress(self.host + self.rd);
            node.mem.read(at, &mut b[..avail]).map_err(mem_err)?;
            let h = match peek_event(&b[..avail]) {
                Ok(Some(h)) => h,
                Ok(None) => return Ok(None),
                Err(e) => return Err(HarnessError::Invalid(e.to_string())),
            };
            let size = h.size.bytes();
            let ev = Event::decode(&b[..size]).map_err(|e| HarnessError::Invalid(e.to_string()))?;
            node.mem.fill(at, size as u64, 0).map_err(mem_err)?;
            self.rd += size as u64;
            if self.rd >= self.size {
                self.rd = 64;
            }
            self.unacked += 1;
            if self.unacked >= Self::ACK_BATCH {
                self.ack(node)?;
            }
            if ev.event_type() == EventType::NullEvent {
                continue;
            }
            return Ok(Some(ev));
        }
    }

    /// Events consumed between two read-pointer write-backs.
    pub const ACK_BATCH: u32 = 8;

    /// Write the read pointer back (`cxi_eq_ack_events`).
    pub fn ack(&mut self, node: &Node) -> Result<(), HarnessError> {
        self.sw.rd_ptr = (self.rd / 64) as u32;
        self.unacked = 0;
        self.write_sw_state(node)
    }

    /// The status block at the head of the ring.
    pub fn status(
        &self,
        node: &Node,
    ) -> Result<firmware_spec::cassini::status::EqStatus, HarnessError> {
        let b = node.read_host(self.host, 64)?;
        firmware_spec::cassini::status::EqStatus::decode(&b)
            .map_err(|e| HarnessError::Invalid(e.to_string()))
    }

    /// Acknowledge dropped events (`cxi_eq_ack_drops`).
    pub fn ack_drops(&mut self, node: &Node) -> Result<(), HarnessError> {
        let st = self.status(node)?;
        self.sw.event_drop_seq_no = st.event_drop_seq_no;
        self.write_sw_state(node)
    }
}

/// Software's side of a command queue.
#[derive(Debug, Clone)]
pub struct CmdQueue {
    /// Target queue.
    pub tgt: bool,
    /// Queue number.
    pub n: u16,
    /// Host address of the ring.
    pub host: u64,
    /// Slots.
    pub slots: u64,
    wp32: u64,
    rd: u64,
}

/// The 32 B IDC NOOP used as padding (first 8 bytes zero).
const NOOP32: [u8; 32] = [0u8; 32];

impl CmdQueue {
    fn launch_offset(&self) -> u64 {
        if self.tgt {
            CQ_LAUNCH_TGT_BASE + u64::from(self.n) * CQ_LAUNCH_PAGE_SIZE
        } else {
            u64::from(self.n) * CQ_LAUNCH_PAGE_SIZE
        }
    }

    /// Free half-slots (one 64 B slot always stays free), re-reading the written-back read
    /// pointer when the cached one leaves less than `need` (`__cxi_cq_free_slots`).
    fn free32(&mut self, node: &Node, need: u64) -> Result<u64, HarnessError> {
        let total = 2 * (self.slots - C_CQ_FIRST_WR_PTR);
        let free = |wp: u64, rd: u64| total - 2 - (wp + total - 2 * rd) % total;
        let mut n = free(self.wp32, self.rd);
        if n < need.max(16) {
            self.rd = u64::from(node.cq_status(self)?.rd_ptr);
            n = free(self.wp32, self.rd);
        }
        Ok(n)
    }

    fn put32(&mut self, node: &Node, bytes: &[u8]) -> Result<(), HarnessError> {
        node.write_host(self.host + self.wp32 * 32, bytes)?;
        self.wp32 += (bytes.len() / 32) as u64;
        if self.wp32 >= 2 * self.slots {
            self.wp32 = 2 * C_CQ_FIRST_WR_PTR;
        }
        Ok(())
    }

    /// Write one command (its `cmd_size` bytes) into the ring, padding with 32 B NOOPs so it
    /// is naturally aligned (`__cxi_pad_slots`). Does not ring the doorbell.
    pub fn emit(&mut self, node: &Node, cmd: &[u8]) -> Result<(), HarnessError> {
        let size = match cmd.len() {
            32 => CmdSize::B32,
            64 => CmdSize::B64,
            128 => CmdSize::B128,
            256 => CmdSize::B256,
            n => return Err(HarnessError::Invalid(format!("command of {n} bytes"))),
        };
        let pad = pad_slots32(self.wp32, size);
        let need = pad + size.slots32() as u64;
        if self.free32(node, need + 1)? < need + 1 {
            return Err(HarnessError::CqFull(self.n));
        }
        for _ in 0..pad {
            self.put32(node, &NOOP32)?;
        }
        self.put32(node, cmd)
    }

    /// Ring the doorbell (padding an odd half-slot with a NOOP first).
    pub fn ring(&mut self, node: &Node) -> Result<(), HarnessError> {
        if self.wp32 % 2 == 1 {
            self.put32(node, &NOOP32)?;
        }
        node.bar
            .write_u64(self.launch_offset(), self.wp32 / 2)
            .map_err(Into::into)
    }

    /// Emit and ring in one go.
    pub fn submit(&mut self, node: &Node, cmd: &[u8]) -> Result<(), HarnessError> {
        self.emit(node, cmd)?;
        self.ring(node)
    }

    /// Write pointer in 64 B slots (after the last `ring`).
    pub fn wr_ptr(&self) -> u64 {
        self.wp32.div_ceil(2)
    }

    /// Half-slot write pointer (where the next command goes).
    pub fn wp32(&self) -> u64 {
        self.wp32
    }

    /// Write a command through the 64 B low-latency window instead of ringing: the command
    /// (64 B, slot aligned) is also written to the ring, then copied into the `ll_64` window at
    /// `LL_OFFSET` with 8-byte stores.
    pub fn submit_ll64(&mut self, node: &Node, cmd: &[u8; 64]) -> Result<(), HarnessError> {
        if self.wp32 % 2 == 1 {
            self.put32(node, &NOOP32)?;
        }
        let wp32 = self.wp32;
        self.emit(node, cmd)?;
        let off = self.launch_offset()
            + firmware_spec::cassini::status::CQ_LAUNCH_LL_64 as u64
            + firmware_spec::cassini::status::ll_offset(wp32) as u64;
        for (i, q) in cmd.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(q);
            node.bar.write(off + 8 * i as u64, &b)?;
        }
        Ok(())
    }
}

/// The DFA and index_ext of PtlTE index `idx` of `pid` on `nid`.
pub fn dfa(nid: u32, pid: u32, idx: u32) -> (u32, u8) {
    build_dfa(nid, pid, PidBits::DEFAULT, idx)
}

/// A `c_cmd` header byte.
pub fn header(t: CmdType, size: CmdSize, op: DmaOp) -> u8 {
    CmdHeader::new(t, size, op as u8).to_byte()
}
