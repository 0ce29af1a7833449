//! Test harness: two (or more) emulated Cassinis on one fabric, programmed like a minimal
//! driver through CSR stores (see `emu_cassini::harness`), with the usual objects of a test
//! already set up. Nothing here touches the device model except through MMIO stores, host
//! memory and the engine.
#![allow(dead_code, unused_imports)]

pub use emu_cassini::harness::*;
pub use firmware_spec::cassini::cmd::{
    CState, CmdHeader, CmdSize, CmdType, CqCmd, CqOp, DmaFlags, DmaOp, FullDma, IdcMsg, IdcPut,
    NomatchDma, Payload, SetStateCmd, TargetCmd, TgtOp,
};
pub use firmware_spec::cassini::dfa::{PidBits, match_id};
pub use firmware_spec::cassini::event::{Event, EventType};
pub use firmware_spec::cassini::le::{LeFlags, PtAllocOpts, PtlList, PtlteState};
pub use firmware_spec::cassini::rc::ReturnCode;

/// VNI of the test traffic.
pub const VNI: u16 = 10;
/// PID of the target endpoint.
pub const PID: u32 = 3;
/// PID of the initiator (its match id).
pub const SRC_PID: u32 = 7;
/// EQ numbers.
pub const EQ_TX: u16 = 1;
pub const EQ_TGT: u16 = 2;
/// The matching PtlTE (index 0 of the PID granule) and a non-matching one (index 1).
pub const PT_MATCH: u16 = 5;
pub const PT_NOMATCH: u16 = 6;

/// Two nodes: node 0 initiates, node 1 is the target.
pub struct Pair {
    pub c: Cluster,
    /// Initiator: EQ for initiator events, transmit CQ 0.
    pub eq_tx: EqRing,
    pub txq: CmdQueue,
    /// Target: EQ for target events, target CQ 0.
    pub eq_tgt: EqRing,
    pub tgq: CmdQueue,
}

pub const INIT: usize = 0;
pub const TGT: usize = 1;

impl Pair {
    pub fn deterministic() -> Pair {
        Self::build(Cluster::deterministic(2, 7).unwrap(), EqOpts::default())
    }

    pub fn threaded() -> Pair {
        Self::build(Cluster::threaded(2).unwrap(), EqOpts::default())
    }

    pub fn with_tgt_eq(c: Cluster, tgt_eq: EqOpts) -> Pair {
        Self::build(c, tgt_eq)
    }

    fn build(mut c: Cluster, tgt_eq: EqOpts) -> Pair {
        let (eq_tx, txq) = {
            let n = &mut c.nodes[INIT];
            n.set_cp(0, 0, VNI, 1).unwrap();
            let eq = n.alloc_eq(EQ_TX, 16 * PAGE, EqOpts::default()).unwrap();
            let q = n.alloc_txq(0, 256, EQ_TX, 0).unwrap();
            (eq, q)
        };
        let (eq_tgt, tgq) = {
            let n = &mut c.nodes[TGT];
            n.set_cp(0, 0, VNI, 1).unwrap();
            let eq = n.alloc_eq(EQ_TGT, 16 * PAGE, tgt_eq).unwrap();
            let q = n.alloc_tgq(0, 256, EQ_TGT).unwrap();
            n.alloc_pte(
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
            n.alloc_pte(PT_NOMATCH, EQ_TGT, PtAllocOpts::empty(), VNI, PID, 1, 0, 1)
                .unwrap();
            (eq, q)
        };
        let mut p = Pair {
            c,
            eq_tx,
            txq,
            eq_tgt,
            tgq,
        };
        for pt in [PT_MATCH, PT_NOMATCH] {
            let cmd = set_state(pt, PtlteState::Enabled, 0);
            p.tgq.submit(&p.c.nodes[TGT], &cmd).unwrap();
            let ev = p.wait_tgt();
            assert_eq!(ev.event_type(), EventType::StateChange);
            assert_eq!(ev.return_code(), ReturnCode::Ok);
        }
        p
    }

    pub fn init(&self) -> &Node {
        &self.c.nodes[INIT]
    }
    pub fn tgt(&self) -> &Node {
        &self.c.nodes[TGT]
    }

    /// Next initiator event (waits).
    pub fn wait_tx(&mut self) -> Event {
        self.c.wait_event(INIT, &mut self.eq_tx).unwrap()
    }
    /// Next target event (waits).
    pub fn wait_tgt(&mut self) -> Event {
        self.c.wait_event(TGT, &mut self.eq_tgt).unwrap()
    }
    /// Initiator event if one is there now.
    pub fn poll_tx(&mut self) -> Option<Event> {
        self.eq_tx.next(&self.c.nodes[INIT]).unwrap()
    }
    /// Target event if one is there now.
    pub fn poll_tgt(&mut self) -> Option<Event> {
        self.eq_tgt.next(&self.c.nodes[TGT]).unwrap()
    }

    /// Submit a target command on the target CQ.
    pub fn target_cmd(&mut self, cmd: &[u8; 64]) {
        self.tgq.submit(&self.c.nodes[TGT], cmd).unwrap();
    }

    /// Submit transmit commands and ring once.
    pub fn tx(&mut self, cmds: &[&[u8]]) {
        for c in cmds {
            self.txq.emit(&self.c.nodes[INIT], c).unwrap();
        }
        self.txq.ring(&self.c.nodes[INIT]).unwrap();
    }

    /// The DFA / index_ext of PtlTE index `idx` of the target PID.
    pub fn dfa(&self, idx: u32) -> (u32, u8) {
        dfa(TGT as u32, PID, idx)
    }

    /// Initiator match id of node 0.
    pub fn initiator(&self) -> u32 {
        match_id(PidBits::DEFAULT, SRC_PID, INIT as u32)
    }

    /// A C_STATE for IDC commands to PtlTE index `idx` of the target.
    pub fn cstate(&self, idx: u32, flags: DmaFlags) -> [u8; 32] {
        let (_, ext) = self.dfa(idx);
        CState {
            write_lac: 0,
            flags,
            initiator: self.initiator(),
            index_ext: ext,
            user_ptr: 0xC57A7E,
            ct: 0,
            eq: EQ_TX,
        }
        .encode()
    }
}

/// A SETSTATE target command.
pub fn set_state(pt: u16, state: PtlteState, drop_count: u32) -> [u8; 64] {
    SetStateCmd {
        ptlte_state: state,
        ptlte_index: pt,
        current_addr: 0,
        drop_count,
    }
    .encode()
}

/// An APPEND (or other list command) of an LE over `md`.
#[allow(clippy::too_many_arguments)]
pub fn le_cmd(
    op: TgtOp,
    pt: u16,
    list: PtlList,
    buffer_id: u16,
    md: &Md,
    flags: LeFlags,
    match_bits: u64,
    ignore_bits: u64,
) -> [u8; 64] {
    let mut t = TargetCmd {
        opcode: op,
        ptl_list: list,
        ptlte_index: pt,
        buffer_id,
        lac: 0,
        start: md.iova,
        length: md.len,
        match_id: u32::MAX,
        match_bits,
        ignore_bits,
        ..TargetCmd::default()
    };
    t.set_opts(flags);
    t.encode()
}

/// Bytes `0, 1, 2, ...` scrambled by `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed)
        .collect()
}

/// The target-event fields of an event (short or long).
pub fn tgt_fields(ev: &Event) -> (EventType, ReturnCode, u16, u64, u64, PtlList, bool) {
    match ev {
        Event::TargetShort(e) => (
            e.event_type,
            e.return_code,
            e.buffer_id,
            u64::from(e.length),
            e.match_bits,
            e.ptl_list,
            e.auto_unlinked,
        ),
        Event::TargetLong(e) => (
            e.event_type,
            e.return_code,
            e.buffer_id,
            u64::from(e.mlength),
            e.match_bits,
            e.ptl_list,
            e.auto_unlinked,
        ),
        other => panic!("not a target event: {other:?}"),
    }
}

/// (type, rc, mlength, user_ptr, ptl_list) of an initiator event.
pub fn init_fields(ev: &Event) -> (EventType, ReturnCode, u32, u64, PtlList) {
    match ev {
        Event::InitiatorShort(e) => (
            e.event_type,
            e.return_code,
            e.mlength,
            e.user_ptr,
            e.ptl_list,
        ),
        Event::InitiatorLong(e) => (
            e.event_type,
            e.return_code,
            e.mlength,
            e.user_ptr,
            e.ptl_list,
        ),
        other => panic!("not an initiator event: {other:?}"),
    }
}
