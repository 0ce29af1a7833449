//! Shared set-up of the offload tests: N emulated Cassinis on one deterministic fabric, each
//! programmed through CSR stores (see `emu_cassini::harness`) with a transmit CQ, a trigger CQ,
//! a target CQ, an initiator EQ, a target EQ and two enabled PtlTEs. After set-up a test only
//! writes commands into rings, rings doorbells (or CT doorbells), runs the engine and reads
//! host memory and event rings.
#![allow(dead_code, unused_imports)]

#[path = "../common/mod.rs"]
mod common;

pub use common::*;
pub use emu_cassini::harness::*;
pub use firmware_spec::cassini::amo::{AmoOp, AmoType, CswapOp};
pub use firmware_spec::cassini::cmd::{CtCmd, CtOp, DmaAmo, IdcAmo, IdcSmallAmo};
pub use firmware_spec::cassini::csr::{self, fields as f};
pub use firmware_spec::cassini::ct::{EmbeddedDma, TrigDma};

/// Transmit CQ, trigger CQ and target CQ numbers on every node.
pub const TXQ: u16 = 0;
pub const TRIGQ: u16 = 1;
pub const TGQ: u16 = 0;

/// One node's software objects.
pub struct Side {
    /// Transmit CQ 0 (failures to EQ 1).
    pub txq: CmdQueue,
    /// Trigger CQ 1 (TLE pool 0).
    pub trig: CmdQueue,
    /// Target CQ 0.
    pub tgq: CmdQueue,
    /// EQ 1: initiator events.
    pub eq_tx: EqRing,
    /// EQ 2: target events of PtlTEs 5 and 6.
    pub eq_tgt: EqRing,
}

/// N nodes on one engine (deterministic unless made by [`Net::on`]).
pub struct Net {
    pub c: Cluster,
    pub s: Vec<Side>,
}

impl Net {
    /// `n` nodes with the default host memory.
    pub fn new(n: u32) -> Net {
        Self::with_memory(n, NODE_MEM)
    }

    /// `n` nodes with `mem` bytes of host memory each.
    pub fn with_memory(n: u32, mem: u64) -> Net {
        Self::on(Cluster::deterministic_with_memory(n, 7, mem).unwrap())
    }

    /// The nodes of `c` (e.g. on the threaded engine), set up as [`Net::new`] sets them up.
    pub fn on(mut c: Cluster) -> Net {
        let n = c.nodes.len() as u32;
        let mut s = Vec::new();
        for i in 0..n as usize {
            let node = &mut c.nodes[i];
            node.set_cp(0, 0, VNI, 1).unwrap();
            let eq_tx = node.alloc_eq(EQ_TX, 16 * PAGE, EqOpts::default()).unwrap();
            let eq_tgt = node.alloc_eq(EQ_TGT, 16 * PAGE, EqOpts::default()).unwrap();
            let txq = node.alloc_txq(TXQ, 256, EQ_TX, 0).unwrap();
            let trig = node.alloc_trig_txq(TRIGQ, 256, EQ_TX, 0).unwrap();
            let tgq = node.alloc_tgq(TGQ, 256, EQ_TGT).unwrap();
            node.alloc_pte(
                PT_MATCH,
                EQ_TGT,
                PtAllocOpts::IS_MATCHING,
                VNI,
                PID,
                0,
                0,
                0,
            )
            .unwrap();
            node.alloc_pte(PT_NOMATCH, EQ_TGT, PtAllocOpts::empty(), VNI, PID, 1, 0, 1)
                .unwrap();
            s.push(Side {
                txq,
                trig,
                tgq,
                eq_tx,
                eq_tgt,
            });
        }
        let mut net = Net { c, s };
        for i in 0..n as usize {
            net.enable(i, PT_MATCH);
            net.enable(i, PT_NOMATCH);
        }
        net
    }

    pub fn node(&self, i: usize) -> &Node {
        &self.c.nodes[i]
    }

    /// Run the engine until nothing is left to do.
    pub fn settle(&self) {
        self.c.settle();
    }

    /// SETSTATE(ENABLED, drop count 0) on node `i`'s PtlTE `pt`; consumes the STATE_CHANGE.
    pub fn enable(&mut self, i: usize, pt: u16) {
        self.tgt_cmd(i, &set_state(pt, PtlteState::Enabled, 0));
        self.settle();
        let ev = self.tgt_events(i);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].event_type(), EventType::StateChange);
        assert_eq!(ev[0].return_code(), ReturnCode::Ok);
    }

    /// Write transmit commands into node `i`'s transmit CQ and ring once.
    pub fn tx(&mut self, i: usize, cmds: &[&[u8]]) {
        let (n, s) = (&self.c.nodes[i], &mut self.s[i]);
        for c in cmds {
            s.txq.emit(n, c).unwrap();
        }
        s.txq.ring(n).unwrap();
    }

    /// Write CT commands into node `i`'s trigger CQ and ring once.
    pub fn trig(&mut self, i: usize, cmds: &[&[u8]]) {
        let (n, s) = (&self.c.nodes[i], &mut self.s[i]);
        for c in cmds {
            s.trig.emit(n, c).unwrap();
        }
        s.trig.ring(n).unwrap();
    }

    /// A target command on node `i`'s target CQ (rung at once).
    pub fn tgt_cmd(&mut self, i: usize, cmd: &[u8; 64]) {
        self.s[i].tgq.submit(&self.c.nodes[i], cmd).unwrap();
    }

    /// Every initiator event node `i` has now.
    pub fn tx_events(&mut self, i: usize) -> Vec<Event> {
        let mut v = Vec::new();
        while let Some(e) = self.s[i].eq_tx.next(&self.c.nodes[i]).unwrap() {
            v.push(e);
        }
        self.s[i].eq_tx.ack(&self.c.nodes[i]).unwrap();
        v
    }

    /// Every target event node `i` has now.
    pub fn tgt_events(&mut self, i: usize) -> Vec<Event> {
        let mut v = Vec::new();
        while let Some(e) = self.s[i].eq_tgt.next(&self.c.nodes[i]).unwrap() {
            v.push(e);
        }
        self.s[i].eq_tgt.ack(&self.c.nodes[i]).unwrap();
        v
    }

    /// Initiator match id of node `i` (PID 7).
    pub fn initiator(&self, i: usize) -> u32 {
        match_id(PidBits::DEFAULT, SRC_PID, i as u32)
    }
}

/// A 64 B CT command (the 24 B `c_ct_cmd` padded to its ring size).
pub fn ct64(c: CtCmd) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[..24].copy_from_slice(&c.encode());
    b
}

/// A CT command of `opcode` on `ct`.
pub fn ct_cmd(opcode: CtOp, ct: u16) -> CtCmd {
    CtCmd {
        opcode,
        ct,
        ..CtCmd::default()
    }
}

/// A triggered CT command (CT_TRIG_SET / CT_TRIG_INC / CT_TRIG_EVENT) waiting on `trig_ct`.
pub fn trig_cmd(opcode: CtOp, trig_ct: u16, threshold: u64, ct: u16) -> CtCmd {
    CtCmd {
        opcode,
        ct,
        trig_ct,
        threshold,
        ..CtCmd::default()
    }
}

/// CT_TRIG_DMA: launch `dma` when `trig_ct` reaches `threshold`.
pub fn trig_dma(trig_ct: u16, threshold: u64, dma: EmbeddedDma) -> [u8; 128] {
    TrigDma::new(trig_ct, threshold, dma).encode().unwrap()
}

/// A full DMA command to PtlTE index `idx` of PID 3 on node `dst`, from node `src`.
#[allow(clippy::too_many_arguments)]
pub fn dma(
    op: DmaOp,
    src: usize,
    dst: usize,
    idx: u32,
    local: u64,
    len: u32,
    match_bits: u64,
    flags: DmaFlags,
    ct: u16,
    user_ptr: u64,
) -> FullDma {
    let (d, ext) = dfa(dst as u32, PID, idx);
    FullDma {
        opcode: op,
        index_ext: ext,
        lac: 0,
        flags,
        dfa: d,
        remote_offset: 0,
        local_addr: local,
        request_len: len,
        ct,
        eq: EQ_TX,
        eager_length: 0,
        rendezvous_id: 0,
        initiator: match_id(PidBits::DEFAULT, SRC_PID, src as u32),
        match_bits,
        header_data: 0,
        user_ptr,
    }
}

/// A persistent priority LE over `md` on PtlTE `pt`, matching `mb` exactly.
pub fn le(pt: u16, bid: u16, md: &Md, flags: LeFlags, mb: u64) -> [u8; 64] {
    le_cmd(TgtOp::Append, pt, PtlList::Priority, bid, md, flags, mb, 0)
}

/// An LE with a counting event.
pub fn le_ct(pt: u16, bid: u16, md: &Md, flags: LeFlags, mb: u64, ct: u16) -> [u8; 64] {
    let mut t = TargetCmd::decode(&le(pt, bid, md, flags, mb)).unwrap();
    t.ct = ct;
    t.encode()
}

/// The u64 at `host`.
pub fn read_u64(n: &Node, host: u64) -> u64 {
    u64::from_le_bytes(n.read_host(host, 8).unwrap().try_into().unwrap())
}
