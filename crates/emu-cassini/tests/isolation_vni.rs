//! Isolation through rings and doorbells (docs/cassini-reliability.md, "Isolation"): a
//! PtlTE is reachable only on the VNI of its domain (the RMU's VNI and portal TCAMs), so
//! traffic on any other VNI is dropped at the target, counted, and reported to the
//! initiator; the CP's traffic class is the packet's fabric class, and the five
//! `cxi_traffic_class` values keep their priority order on the fabric.

mod common;
use common::*;
use emu_core::fabric::TrafficClass;
use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::pci::CSR_BASE;

/// Counter `name` of view `view` (element `i` of a counter array), read through BAR0.
fn cntr_at(n: &Node, view: &str, name: &str, i: u64) -> u64 {
    let v = csr::lookup(view).unwrap();
    let fld = v.field(name).unwrap();
    n.bar
        .read_u64(CSR_BASE + v.offset + u64::from(fld.bit / 8) + 8 * i)
        .unwrap()
}

fn cntr(n: &Node, view: &str, name: &str) -> u64 {
    cntr_at(n, view, name, 0)
}

/// Second domain on the target: VNI 20, PID 4, PtlTE 9 (VNI TCAM slot 1, portal slot 2).
const VNI_B: u16 = 20;
const PID_B: u32 = 4;
const PT_B: u16 = 9;
/// A VNI the target does not know.
const VNI_X: u16 = 30;

/// A persistent LE over a fresh 4 KiB buffer on PtlTE `pt` (matches any bits).
fn window(p: &mut Pair, pt: u16, bid: u16) -> Md {
    let md = p.c.nodes[TGT].map(4096, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        pt,
        PtlList::Priority,
        bid,
        &md,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE,
        0,
        !0,
    ));
    p.c.settle();
    md
}

/// An 8-byte DMA put to PtlTE index 0 of `pid` on the target.
fn put(p: &Pair, src: &Md, pid: u32, user_ptr: u64) -> [u8; 64] {
    let (dfa, ext) = dfa(TGT as u32, pid, 0);
    FullDma {
        opcode: DmaOp::Put,
        index_ext: ext,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        dfa,
        local_addr: src.iova,
        request_len: 8,
        eq: EQ_TX,
        user_ptr,
        initiator: p.initiator(),
        ..FullDma::default()
    }
    .encode()
}

/// Send `cmd` on `q` (or the pair's CQ 0, which uses VNI 10) and return the (type, rc,
/// user_ptr) of its initiator event.
fn send(p: &mut Pair, q: Option<&mut CmdQueue>, cmd: &[u8]) -> (EventType, ReturnCode, u64) {
    match q {
        Some(q) => q.submit(&p.c.nodes[INIT], cmd).unwrap(),
        None => p.txq.submit(&p.c.nodes[INIT], cmd).unwrap(),
    }
    p.c.settle();
    let e = init_fields(&p.wait_tx());
    (e.0, e.1, e.3)
}

#[test]
fn traffic_for_a_foreign_vni_is_never_delivered() {
    let mut p = Pair::deterministic();
    // Domain B on the target.
    p.c.nodes[TGT]
        .alloc_pte(
            PT_B,
            EQ_TGT,
            PtAllocOpts::IS_MATCHING,
            VNI_B,
            PID_B,
            0,
            1,
            2,
        )
        .unwrap();
    p.target_cmd(&set_state(PT_B, PtlteState::Enabled, 0));
    assert_eq!(p.wait_tgt().event_type(), EventType::StateChange);
    let win_a = window(&mut p, PT_MATCH, 1);
    let win_b = window(&mut p, PT_B, 2);
    // Initiator: CQ 1 sends on VNI B (CP 1), CQ 2 on an unknown VNI (CP 2).
    let mut q_b = {
        let n = &mut p.c.nodes[INIT];
        n.set_cp(1, 1, VNI_B, 1).unwrap();
        n.set_cp(2, 2, VNI_X, 1).unwrap();
        n.alloc_txq(1, 64, EQ_TX, 1).unwrap()
    };
    let mut q_x = p.c.nodes[INIT].alloc_txq(2, 64, EQ_TX, 2).unwrap();
    let src = p.c.nodes[INIT].map(8, true, true).unwrap();
    p.init().write_host(src.host, &[0xAB; 8]).unwrap();

    // VNI B to domain A's PID: the VNI is known, but no portal entry joins it to that
    // PtlTE.
    let cmd = put(&p, &src, PID, 1);
    assert_eq!(
        send(&mut p, Some(&mut q_b), &cmd),
        (EventType::Ack, ReturnCode::PtlteNotFound, 1)
    );
    // VNI A (CQ 0) to domain B's PID: likewise.
    let cmd = put(&p, &src, PID_B, 2);
    assert_eq!(
        send(&mut p, None, &cmd),
        (EventType::Ack, ReturnCode::PtlteNotFound, 2)
    );
    // An unknown VNI: rejected by the VNI TCAM.
    let cmd = put(&p, &src, PID, 3);
    assert_eq!(
        send(&mut p, Some(&mut q_x), &cmd),
        (EventType::Ack, ReturnCode::VniNotFound, 3)
    );
    // Nothing was delivered: no target event, no byte written, no LPE work.
    assert!(p.poll_tgt().is_none());
    assert!(
        p.tgt()
            .read_host(win_a.host, 4096)
            .unwrap()
            .iter()
            .all(|&b| b == 0)
    );
    assert!(
        p.tgt()
            .read_host(win_b.host, 4096)
            .unwrap()
            .iter()
            .all(|&b| b == 0)
    );
    assert_eq!(cntr(p.tgt(), "c_lpe_cntrs", "put_cmds"), 0);
    assert_eq!(cntr(p.tgt(), "c_rmu_cntrs", "ptl_no_ptlte_cntr"), 2);
    assert_eq!(cntr(p.tgt(), "c_rmu_cntrs", "ptl_invld_vni_cntr"), 1);
    assert_eq!(cntr(p.tgt(), "c_ixe_cntrs", "rx_pkt_drop_rmu_wrsp"), 3);

    // Each domain's own VNI reaches it.
    let cmd = put(&p, &src, PID_B, 4);
    assert_eq!(
        send(&mut p, Some(&mut q_b), &cmd),
        (EventType::Ack, ReturnCode::Ok, 4)
    );
    let cmd = put(&p, &src, PID, 5);
    assert_eq!(
        send(&mut p, None, &cmd),
        (EventType::Ack, ReturnCode::Ok, 5)
    );
    assert_eq!(p.tgt().read_host(win_a.host, 8).unwrap(), [0xAB; 8]);
    assert_eq!(p.tgt().read_host(win_b.host, 8).unwrap(), [0xAB; 8]);
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Put);
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Put);
    assert_eq!(cntr(p.tgt(), "c_rmu_cntrs", "ptl_success_cntr"), 2);

    // The driver withdraws VNI B from the VNI TCAM: domain B is unreachable again.
    p.tgt()
        .csr_write(
            csr::C_RMU_CFG_VNI_LIST_INVALIDATE,
            1,
            &[(f::c_rmu_cfg_vni_list_invalidate::INVALIDATE, 1)],
        )
        .unwrap();
    let cmd = put(&p, &src, PID_B, 6);
    assert_eq!(
        send(&mut p, Some(&mut q_b), &cmd),
        (EventType::Ack, ReturnCode::VniNotFound, 6)
    );
    assert!(p.poll_tgt().is_none());
    assert_eq!(cntr(p.tgt(), "c_lpe_cntrs", "put_cmds"), 2);
    assert_eq!(cntr(p.tgt(), "c_rmu_cntrs", "ptl_invld_vni_cntr"), 2);
}

/// `enum cxi_traffic_class` (cxi-abi.h).
const DEDICATED_ACCESS: u8 = 0;
const LOW_LATENCY: u8 = 1;
const BULK_DATA: u8 = 2;
const BEST_EFFORT: u8 = 3;
const ETH: u8 = 4;

#[test]
fn each_traffic_class_travels_as_its_own_fabric_class() {
    let mut p = Pair::deterministic();
    window(&mut p, PT_MATCH, 1);
    let src = p.c.nodes[INIT].map(8, true, true).unwrap();
    let det = p.c.deterministic_engine().unwrap().clone();
    // The fabric serves the five classes in their order of priority.
    let prio: Vec<u8> = [DEDICATED_ACCESS, LOW_LATENCY, BULK_DATA, BEST_EFFORT, ETH]
        .iter()
        .map(|&tc| det.with_fabric(|fab| fab.priority(TrafficClass(tc))))
        .collect();
    assert!(prio.windows(2).all(|w| w[0] < w[1]), "{prio:?}");
    for tc in [DEDICATED_ACCESS, LOW_LATENCY, BULK_DATA, BEST_EFFORT, ETH] {
        let cp = 4 + tc;
        let n = &mut p.c.nodes[INIT];
        n.set_cp(cp, cp, VNI, tc).unwrap();
        let mut q = n.alloc_txq(u16::from(cp), 64, EQ_TX, cp).unwrap();
        let before = det.with_fabric(|fab| fab.tc_counters(TrafficClass(tc)).injected);
        let cmd = put(&p, &src, PID, u64::from(tc));
        assert_eq!(
            send(&mut p, Some(&mut q), &cmd),
            (EventType::Ack, ReturnCode::Ok, u64::from(tc))
        );
        assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Put);
        // The request went out on the CP's class, and the response came back on it.
        let on_fabric = det.with_fabric(|fab| fab.tc_counters(TrafficClass(tc)).injected);
        assert!(on_fabric - before >= 2, "tc {tc}");
        let tc = u64::from(tc);
        assert!(cntr_at(p.init(), "c_hni_cntrs", "pkts_sent_by_tc", tc) >= 1);
        assert!(cntr_at(p.tgt(), "c_hni_cntrs", "pkts_recv_by_tc", tc) >= 1);
        assert!(cntr_at(p.tgt(), "c_hni_cntrs", "pkts_sent_by_tc", tc) >= 1);
    }
    // Classes 5..7 carried nothing.
    for tc in 5..8 {
        assert_eq!(cntr_at(p.init(), "c_hni_cntrs", "pkts_sent_by_tc", tc), 0);
    }
    // A clean fabric: nothing was ever retransmitted; each class had its own connection.
    for n in [p.init(), p.tgt()] {
        assert_eq!(cntr(n, "c_pct_cntrs", "spt_timeouts"), 0);
        assert_eq!(cntr(n, "c_pct_cntrs", "retry_srb_requests"), 0);
    }
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "conn_sct_open"), 5);
    assert_eq!(cntr(p.tgt(), "c_pct_cntrs", "conn_tct_open"), 5);
}

/// A 256 KiB put on `bulk_tc`, then an 8-byte put on `small_tc` from another CQ: the
/// user_ptr of the first ACK to arrive.
fn first_ack(bulk_tc: u8, small_tc: u8) -> u64 {
    let mut p = Pair::deterministic();
    let big = p.c.nodes[TGT].map(1 << 18, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        1,
        &big,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE,
        0,
        !0,
    ));
    p.c.settle();
    let src = p.c.nodes[INIT].map(1 << 18, true, true).unwrap();
    let (mut q_bulk, mut q_small) = {
        let n = &mut p.c.nodes[INIT];
        n.set_cp(1, 1, VNI, bulk_tc).unwrap();
        n.set_cp(2, 2, VNI, small_tc).unwrap();
        (
            n.alloc_txq(1, 64, EQ_TX, 1).unwrap(),
            n.alloc_txq(2, 64, EQ_TX, 2).unwrap(),
        )
    };
    let (dfa, ext) = p.dfa(0);
    let mut bulk = FullDma::decode(&put(&p, &src, PID, 1)).unwrap();
    bulk.request_len = 1 << 18;
    bulk.index_ext = ext;
    bulk.dfa = dfa;
    q_bulk.submit(&p.c.nodes[INIT], &bulk.encode()).unwrap();
    let small = put(&p, &src, PID, 2);
    q_small.submit(&p.c.nodes[INIT], &small).unwrap();
    p.c.settle();
    let a = init_fields(&p.wait_tx());
    let b = init_fields(&p.wait_tx());
    assert_eq!((a.1, b.1), (ReturnCode::Ok, ReturnCode::Ok));
    a.3
}

#[test]
fn a_higher_priority_class_overtakes_bulk_traffic() {
    // Same class: the small put waits behind the 128 packets of the bulk one.
    assert_eq!(first_ack(BULK_DATA, BULK_DATA), 1);
    // LOW_LATENCY has priority over BULK_DATA on every link: it completes first.
    assert_eq!(first_ack(BULK_DATA, LOW_LATENCY), 2);
}
