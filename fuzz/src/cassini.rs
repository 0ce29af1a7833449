//! Two emulated Cassinis on one switch, set up like `emu-cassini`'s test pair: node 0
//! initiates (transmit CQ 0, initiator EQ 1, an MD to send from), node 1 is the target
//! (target CQ 0, target EQ 2, a matching PtlTE 5 and a non-matching PtlTE 6, both enabled,
//! with one persistent LE each over a registered buffer). Port 2 of the switch carries an
//! [`Injector`] for raw frames.

use std::sync::Arc;

use emu_cassini::harness::{
    Cluster, ClusterSnapshot, CmdQueue, EqOpts, EqRing, HarnessError, Md, Node, PAGE,
};
use emu_core::dma::DmaPort;
use emu_core::engine::DeviceId;
use emu_core::fabric::TrafficClass;
use emu_core::memory::HostMemory;
use firmware_spec::cassini::cmd::{CState, DmaFlags, SetStateCmd, TargetCmd, TgtOp};
use firmware_spec::cassini::dfa::{PidBits, build_dfa, match_id};
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::le::{LeFlags, PtAllocOpts, PtlList, PtlteState};
use firmware_spec::cassini::pci::{CQ_LAUNCH_PAGE_SIZE, CQ_LAUNCH_TGT_BASE};

use crate::Fixture;
use crate::injector::{Frames, Injector};

/// VNI of the traffic.
pub const VNI: u16 = 10;
/// PID of the target endpoint.
pub const PID: u32 = 3;
/// PID of the initiator.
pub const SRC_PID: u32 = 7;
/// Initiator EQ.
pub const EQ_TX: u16 = 1;
/// Target EQ.
pub const EQ_TGT: u16 = 2;
/// Matching PtlTE (index 0 of the PID granule).
pub const PT_MATCH: u16 = 5;
/// Non-matching PtlTE (index 1).
pub const PT_NOMATCH: u16 = 6;
/// Node numbers.
pub const INIT: usize = 0;
/// The target node.
pub const TGT: usize = 1;
/// Slots of each command ring.
pub const SLOTS: u32 = 256;

/// The fixture.
pub struct Pair {
    /// The two NICs.
    pub c: Cluster,
    /// Initiator events.
    pub eq_tx: EqRing,
    /// Initiator transmit CQ 0.
    pub txq: CmdQueue,
    /// Target events.
    pub eq_tgt: EqRing,
    /// Target CQ 0.
    pub tgq: CmdQueue,
    /// An MD of the initiator (8 KiB, read/write).
    pub src: Md,
    /// The buffer behind the LE of the matching PtlTE (8 KiB).
    pub dst: Md,
    /// The buffer behind the LE of the non-matching PtlTE (8 KiB).
    pub rma: Md,
    /// Frames for the injector on port 2.
    pub frames: Frames,
    /// Frames the NICs sent to port 2.
    pub received: Frames,
    injector: DeviceId,
}

impl Pair {
    /// Both event queues live in the kernel's context: a fuzzed Get or fetching AMO may name
    /// any address of the user context, and one that lands on a user-context ring would
    /// leave an event that does not decode through no fault of the NIC.
    const EQ_OPTS: EqOpts = EqOpts {
        drop_status: false,
        reserved_fc: 0,
        long_initiator: false,
        long_target: false,
        interrupt: None,
        kernel_context: true,
    };

    /// Build the fixture (deterministic engine, seed 7).
    pub fn new() -> Result<Pair, HarnessError> {
        let mut c = Cluster::deterministic_with_ports(2, 3, 7, NODE_MEM)?;
        let (eq_tx, txq, src) = {
            let n = &mut c.nodes[INIT];
            n.set_cp(0, 0, VNI, 1)?;
            let eq = n.alloc_eq(EQ_TX, 16 * PAGE, Self::EQ_OPTS)?;
            let q = n.alloc_txq(0, SLOTS, EQ_TX, 0)?;
            let src = n.map(2 * PAGE, true, true)?;
            n.write_host(src.host, &[0x5A; 2 * PAGE as usize])?;
            (eq, q, src)
        };
        let (eq_tgt, tgq, dst, rma) = {
            let n = &mut c.nodes[TGT];
            n.set_cp(0, 0, VNI, 1)?;
            let eq = n.alloc_eq(EQ_TGT, 16 * PAGE, Self::EQ_OPTS)?;
            let q = n.alloc_tgq(0, SLOTS, EQ_TGT)?;
            n.alloc_pte(
                PT_MATCH,
                EQ_TGT,
                PtAllocOpts::IS_MATCHING,
                VNI,
                PID,
                0,
                0,
                0,
            )?;
            n.alloc_pte(PT_NOMATCH, EQ_TGT, PtAllocOpts::empty(), VNI, PID, 1, 0, 1)?;
            let dst = n.map(2 * PAGE, true, true)?;
            let rma = n.map(2 * PAGE, true, true)?;
            (eq, q, dst, rma)
        };
        let frames = Frames::default();
        let received = Frames::default();
        let dma = DmaPort::passthrough(
            HostMemory::new(2 * PAGE).map_err(|e| HarnessError::Memory(e.to_string()))?,
        );
        let injector = c.engine.add_device(
            Box::new(Injector {
                frames: Arc::clone(&frames),
                received: Arc::clone(&received),
            }),
            dma,
            Some(emu_core::fabric::PortId(2)),
        )?;
        let mut p = Pair {
            c,
            eq_tx,
            txq,
            eq_tgt,
            tgq,
            src,
            dst,
            rma,
            frames,
            received,
            injector,
        };
        let node = &p.c.nodes[TGT];
        for pt in [PT_MATCH, PT_NOMATCH] {
            p.tgq.emit(node, &set_state(pt, PtlteState::Enabled))?;
        }
        let le = |pt, md: &Md, id| {
            let mut t = TargetCmd {
                opcode: TgtOp::Append,
                ptl_list: PtlList::Priority,
                ptlte_index: pt,
                buffer_id: id,
                lac: 0,
                start: md.iova,
                length: md.len,
                match_id: u32::MAX,
                ..TargetCmd::default()
            };
            t.set_opts(LeFlags::OP_PUT | LeFlags::OP_GET);
            t.encode()
        };
        p.tgq.emit(node, &le(PT_MATCH, &p.dst, 1))?;
        p.tgq.emit(node, &le(PT_NOMATCH, &p.rma, 2))?;
        p.tgq.ring(node)?;
        p.c.settle();
        p.drain()?;
        Ok(p)
    }

    /// The initiator node.
    pub fn init(&self) -> &Node {
        &self.c.nodes[INIT]
    }

    /// The target node.
    pub fn tgt(&self) -> &Node {
        &self.c.nodes[TGT]
    }

    /// The DFA and index_ext of PtlTE index `idx` of the target.
    pub fn dfa(&self, idx: u32) -> (u32, u8) {
        build_dfa(TGT as u32, PID, PidBits::DEFAULT, idx)
    }

    /// A C_STATE for commands to PtlTE index `idx` of the target.
    pub fn cstate(&self, idx: u32) -> [u8; 32] {
        let (_, ext) = self.dfa(idx);
        CState {
            write_lac: 0,
            flags: DmaFlags::default(),
            initiator: match_id(PidBits::DEFAULT, SRC_PID, INIT as u32),
            index_ext: ext,
            user_ptr: 0xC57A7E,
            ct: 0,
            eq: EQ_TX,
        }
        .encode()
    }

    /// Consume every event both EQs hold. An event the NIC wrote that does not decode is an
    /// error (the harness reports it as `Invalid`).
    pub fn drain(&mut self) -> Result<Vec<Event>, HarnessError> {
        let mut out = Vec::new();
        while let Some(e) = self.eq_tx.next(&self.c.nodes[INIT])? {
            out.push(e);
        }
        while let Some(e) = self.eq_tgt.next(&self.c.nodes[TGT])? {
            out.push(e);
        }
        Ok(out)
    }

    /// Write `bytes` (zero-padded to whole 64 B slots, at most what the ring holds) into the
    /// transmit ring (`tgt` false) or the target ring, starting at the software write
    /// pointer, and ring the doorbell once. No check of what the bytes are: this is what a
    /// buggy or hostile process can do with its mapped ring.
    pub fn raw_commands(&mut self, tgt: bool, bytes: &[u8]) -> Result<(), HarnessError> {
        let (node, q) = if tgt {
            (&self.c.nodes[TGT], &mut self.tgq)
        } else {
            (&self.c.nodes[INIT], &mut self.txq)
        };
        // Keep to the slots up to the end of the ring (the NIC's view of a full ring is
        // exercised by the ring-full tests of emu-cassini).
        let first = q.wr_ptr();
        let room = (q.slots - first) as usize * 64;
        let len = bytes.len().min(room);
        if len == 0 {
            return Ok(());
        }
        let mut buf = bytes[..len].to_vec();
        buf.resize(len.div_ceil(64) * 64, 0);
        node.write_host(q.host + first * 64, &buf)?;
        let wp = (first + (buf.len() / 64) as u64) % q.slots;
        let launch = if tgt {
            CQ_LAUNCH_TGT_BASE + u64::from(q.n) * CQ_LAUNCH_PAGE_SIZE
        } else {
            u64::from(q.n) * CQ_LAUNCH_PAGE_SIZE
        };
        node.bar.write_u64(launch, wp)?;
        Ok(())
    }

    /// Queue `frame` on traffic class `tc` and have the injector send it to `port`.
    pub fn inject(&self, port: u32, tc: u8, frame: Vec<u8>) -> Result<(), HarnessError> {
        if let Ok(mut q) = self.frames.lock() {
            q.push_back((TrafficClass(tc), frame));
        }
        let bar = self.c.engine.mmio(self.injector, 0)?;
        bar.write_u64(0, u64::from(port))?;
        Ok(())
    }
}

/// Host memory per node (restores copy back only what an input wrote, so the size costs
/// nothing per input).
const NODE_MEM: u64 = 8 << 20;

/// What [`Pair::restore`] goes back to.
pub struct PairSaved {
    cluster: ClusterSnapshot,
    queues: (EqRing, CmdQueue, EqRing, CmdQueue),
}

impl Fixture for Pair {
    type Saved = PairSaved;
    fn build() -> Pair {
        Pair::new().expect("fixture")
    }
    fn save(&self) -> PairSaved {
        PairSaved {
            cluster: self.c.snapshot().expect("snapshot"),
            queues: (
                self.eq_tx.clone(),
                self.txq.clone(),
                self.eq_tgt.clone(),
                self.tgq.clone(),
            ),
        }
    }
    fn restore(&mut self, saved: &PairSaved) {
        self.c.restore(&saved.cluster).expect("restore");
        (self.eq_tx, self.txq, self.eq_tgt, self.tgq) = saved.queues.clone();
        for q in [&self.frames, &self.received] {
            if let Ok(mut q) = q.lock() {
                q.clear();
            }
        }
    }
    fn digest(&self) -> u64 {
        let det = self.c.deterministic_engine().expect("deterministic");
        let mut mem = Vec::new();
        for (node, md) in [(INIT, &self.src), (TGT, &self.dst), (TGT, &self.rma)] {
            mem.push(self.c.nodes[node].read_host(md.host, md.len as usize).ok());
        }
        crate::digest((det.trace_digest(), det.now().0, mem))
    }
}

/// A SETSTATE target command.
pub fn set_state(pt: u16, state: PtlteState) -> [u8; 64] {
    SetStateCmd {
        ptlte_state: state,
        ptlte_index: pt,
        current_addr: 0,
        drop_count: 0,
    }
    .encode()
}

/// Whether `ev` reports a failed command queue.
pub fn is_command_failure(ev: &Event) -> bool {
    ev.event_type() == EventType::CommandFailure
}
