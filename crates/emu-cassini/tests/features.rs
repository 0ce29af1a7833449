//! Command-queue and matching features beyond the basic data path: low-latency windows,
//! FENCE, LCID switching, event suppression, LE options (manage_local + min_free, no_truncate,
//! op permissions), UNLINK, non-matching put/get, counting events, interrupts, and the same
//! data path on the threaded engine.

mod common;
use common::*;
use firmware_spec::cassini::csr::{self, fields as f};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

fn prio_le(p: &mut Pair, bid: u16, len: u64, flags: LeFlags, mb: u64) -> Md {
    let mut md = p.c.nodes[TGT].map(len.max(1), true, true).unwrap();
    md.len = len;
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        bid,
        &md,
        flags,
        mb,
        0,
    ));
    p.c.settle();
    md
}

fn msg(p: &Pair, mb: u64, data: &[u8]) -> Vec<u8> {
    IdcMsg {
        dfa: p.dfa(0).0,
        match_bits: mb,
        header_data: 0,
        user_ptr: mb,
        payload: Payload::new(data).unwrap(),
    }
    .encode()
    .unwrap()
}

#[test]
fn low_latency_window_launches_a_command() {
    let mut p = Pair::deterministic();
    let md = prio_le(
        &mut p,
        1,
        64,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE,
        0x5,
    );
    let cs = p.cstate(
        0,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
    );
    p.tx(&[&cs]);
    p.c.settle();
    let m = msg(&p, 0x5, &[0x77; 16]);
    let mut cmd = [0u8; 64];
    cmd.copy_from_slice(&m);
    // No doorbell store: only the 8 qword stores into the ll_64 window.
    p.txq.submit_ll64(&p.c.nodes[INIT], &cmd).unwrap();
    p.c.settle();
    let ev = tgt_fields(&p.wait_tgt());
    assert_eq!((ev.0, ev.3), (EventType::Put, 16));
    assert_eq!(p.tgt().read_host(md.host, 16).unwrap(), [0x77; 16]);
    assert_eq!(init_fields(&p.wait_tx()).0, EventType::Ack);
    // The write pointer moved past the command and the status block caught up.
    let st = p.init().cq_status(&p.txq).unwrap();
    assert_eq!(u64::from(st.rd_ptr), p.txq.wr_ptr());
}

#[test]
fn fence_waits_for_earlier_commands_and_lcid_switches_profile() {
    let mut p = Pair::deterministic();
    let md = prio_le(
        &mut p,
        1,
        4096,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE,
        0x1,
    );
    let cs = p.cstate(
        0,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
    );
    let fence = CqCmd {
        opcode: CqOp::CqFence,
        lcid: 0,
    }
    .encode();
    let m1 = msg(&p, 0x1, &[1; 8]);
    p.tx(&[&cs, &m1, &fence, &m1]);
    // Before the engine runs, the first message is in flight and the CQ is fenced.
    let en = p.init().csr_read(csr::C_CQ_TXQ_ENABLE, 0).unwrap();
    assert_eq!(
        f::c_cq_txq_enable::FENCE.get(&en),
        1,
        "stopped at the fence"
    );
    p.c.settle();
    assert_eq!(
        f::c_cq_txq_enable::FENCE.get(&p.init().csr_read(csr::C_CQ_TXQ_ENABLE, 0).unwrap()),
        0
    );
    let a = init_fields(&p.wait_tx());
    let b = init_fields(&p.wait_tx());
    assert_eq!((a.0, b.0), (EventType::Ack, EventType::Ack));
    let _ = md;

    // LCID 1 uses CP 1 on VNI 99, which the target does not know: VNI_NOT_FOUND.
    p.init().set_cp(1, 1, 99, 2).unwrap();
    let lcid = CqCmd {
        opcode: CqOp::CqLcid,
        lcid: 1,
    }
    .encode();
    let noop = CqCmd {
        opcode: CqOp::CqNoop,
        lcid: 0,
    }
    .encode();
    // LCID must be 128 B aligned: pad to an even slot first.
    while !p.txq.wp32().is_multiple_of(4) {
        p.txq.emit(&p.c.nodes[INIT], &[0u8; 32]).unwrap();
    }
    p.tx(&[&lcid, &noop, &m1]);
    p.c.settle();
    let r = init_fields(&p.wait_tx());
    assert_eq!((r.0, r.1), (EventType::Ack, ReturnCode::VniNotFound));
    // And back to LCID 0.
    while !p.txq.wp32().is_multiple_of(4) {
        p.txq.emit(&p.c.nodes[INIT], &[0u8; 32]).unwrap();
    }
    let lcid0 = CqCmd {
        opcode: CqOp::CqLcid,
        lcid: 0,
    }
    .encode();
    p.tx(&[&lcid0, &noop, &m1]);
    p.c.settle();
    assert_eq!(init_fields(&p.wait_tx()).1, ReturnCode::Ok);
    // An LCID command not followed by a NOOP fails the CQ with CMD_ALIGN_ERROR.
    while !p.txq.wp32().is_multiple_of(4) {
        p.txq.emit(&p.c.nodes[INIT], &[0u8; 32]).unwrap();
    }
    p.tx(&[&lcid0, &m1]);
    p.c.settle();
    match p.wait_tx() {
        Event::CommandFailure(f) => assert_eq!(f.return_code, ReturnCode::CmdAlignError),
        other => panic!("{other:?}"),
    }
}

#[test]
fn event_suppression_flags() {
    let mut p = Pair::deterministic();
    prio_le(
        &mut p,
        1,
        4096,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE | LeFlags::EVENT_COMM_DISABLE,
        0x1,
    );
    assert!(p.poll_tgt().is_none(), "LINK suppressed");
    let quiet = p.cstate(
        0,
        DmaFlags {
            event_send_disable: true,
            event_success_disable: true,
            ..DmaFlags::default()
        },
    );
    p.tx(&[&quiet, &msg(&p, 0x1, &[1; 8])]);
    p.c.settle();
    assert!(p.poll_tx().is_none(), "SEND and ACK suppressed");
    assert!(
        p.poll_tgt().is_none(),
        "PUT suppressed by EVENT_COMM_DISABLE"
    );
    // Errors are never suppressed: a message nobody matches.
    p.tx(&[&msg(&p, 0xDEAD, &[1; 8])]);
    p.c.settle();
    let r = init_fields(&p.wait_tx());
    assert_eq!((r.0, r.1), (EventType::Ack, ReturnCode::EntryNotFound));
    let t = tgt_fields(&p.wait_tgt());
    assert_eq!((t.0, t.1), (EventType::Put, ReturnCode::EntryNotFound));
    // SEND alone.
    let send_only = p.cstate(0, DmaFlags::default());
    p.tx(&[&send_only, &msg(&p, 0x1, &[1; 8])]);
    p.c.settle();
    assert_eq!(init_fields(&p.wait_tx()).0, EventType::Send);
    assert_eq!(init_fields(&p.wait_tx()).0, EventType::Ack);
}

#[test]
fn manage_local_min_free_no_truncate_and_permissions() {
    let mut p = Pair::deterministic();
    let cs = p.cstate(
        0,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
    );
    p.tx(&[&cs]);
    // manage_local with min_free 40 over 100 bytes: 30 + 30 leaves 40, the third put leaves
    // 10 < 40 and unlinks the LE.
    let mut md = p.c.nodes[TGT].map(4096, true, true).unwrap();
    md.len = 100;
    let mut t = TargetCmd {
        opcode: TgtOp::Append,
        ptl_list: PtlList::Priority,
        ptlte_index: PT_MATCH,
        buffer_id: 3,
        start: md.iova,
        length: 100,
        min_free: 40,
        match_id: u32::MAX,
        match_bits: 0x3,
        ..TargetCmd::default()
    };
    t.set_opts(LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL);
    p.target_cmd(&t.encode());
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    for i in 0..3u8 {
        p.tx(&[&msg(&p, 0x3, &[i + 1; 30])]);
    }
    p.c.settle();
    let evs: Vec<_> = (0..4).map(|_| tgt_fields(&p.wait_tgt())).collect();
    assert_eq!(evs.iter().filter(|e| e.0 == EventType::Put).count(), 3);
    // The entry goes when the third PUT matches: its UNLINK comes before that PUT.
    assert_eq!(evs[2].0, EventType::Unlink, "{evs:?}");
    assert!(
        !evs[0].6 && !evs[1].6 && evs[3].6,
        "third PUT auto-unlinked: {evs:?}"
    );
    for _ in 0..3 {
        assert_eq!(init_fields(&p.wait_tx()).1, ReturnCode::Ok);
    }
    let data = p.tgt().read_host(md.host, 90).unwrap();
    assert_eq!(
        (&data[0..30], &data[30..60], &data[60..90]),
        (&[1; 30][..], &[2; 30][..], &[3; 30][..])
    );

    // no_truncate: a 32 B message does not match a 16 B LE; without it, it is truncated.
    prio_le(
        &mut p,
        4,
        16,
        LeFlags::OP_PUT | LeFlags::NO_TRUNCATE | LeFlags::EVENT_LINK_DISABLE,
        0x4,
    );
    p.tx(&[&msg(&p, 0x4, &[9; 32])]);
    p.c.settle();
    assert_eq!(init_fields(&p.wait_tx()).1, ReturnCode::EntryNotFound);
    assert_eq!(tgt_fields(&p.wait_tgt()).1, ReturnCode::EntryNotFound);
    prio_le(
        &mut p,
        5,
        16,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE,
        0x5,
    );
    p.tx(&[&msg(&p, 0x5, &[9; 32])]);
    p.c.settle();
    let ack = init_fields(&p.wait_tx());
    assert_eq!((ack.1, ack.2), (ReturnCode::Ok, 16), "truncated to the LE");

    // A put to a Get-only LE: OP_VIOLATION.
    prio_le(
        &mut p,
        6,
        64,
        LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE,
        0x6,
    );
    while p.poll_tgt().is_some() {}
    p.tx(&[&msg(&p, 0x6, &[1; 8])]);
    p.c.settle();
    assert_eq!(init_fields(&p.wait_tx()).1, ReturnCode::OpViolation);
    let t = tgt_fields(&p.wait_tgt());
    assert_eq!((t.1, t.2), (ReturnCode::OpViolation, 6));

    // UNLINK: OK once, ENTRY_NOT_FOUND after.
    let md7 = prio_le(
        &mut p,
        7,
        64,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE,
        0x7,
    );
    for rc in [ReturnCode::Ok, ReturnCode::EntryNotFound] {
        p.target_cmd(&le_cmd(
            TgtOp::Unlink,
            PT_MATCH,
            PtlList::Priority,
            7,
            &md7,
            LeFlags::empty(),
            0,
            0,
        ));
        let u = tgt_fields(&p.wait_tgt());
        assert_eq!((u.0, u.1), (EventType::Unlink, rc));
    }
}

#[test]
fn nomatch_put_and_get_and_counting_events() {
    let mut p = Pair::deterministic();
    let win = p.c.nodes[TGT].map(8192, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        2,
        &win,
        LeFlags::OP_PUT | LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE,
        0,
        0,
    ));
    // CT 5 on the initiator, written back to user memory.
    let wb = p.c.nodes[INIT].map(64, true, true).unwrap();
    let n = p.init();
    n.csr_write(
        csr::C_CQ_CFG_CT_WB_MEM_ADDR,
        5,
        &[
            (
                f::c_cq_cfg_ct_wb_mem_addr::WB_MEM_CONTEXT,
                u64::from(AC_USER),
            ),
            (f::c_cq_cfg_ct_wb_mem_addr::WB_MEM_ADDR, wb.iova >> 3),
        ],
    )
    .unwrap();
    n.csr_write(
        csr::C_CQ_CFG_CT_RGID_TABLE,
        5,
        &[(f::c_cq_cfg_ct_rgid_table::RGID, u64::from(RGID))],
    )
    .unwrap();
    n.csr_write(
        csr::C_CQ_CFG_CT_ENABLE,
        5,
        &[(f::c_cq_cfg_ct_enable::CT_ENABLE, 1)],
    )
    .unwrap();
    let src = p.c.nodes[INIT].map(4096, true, true).unwrap();
    p.init().write_host(src.host, &pattern(4096, 9)).unwrap();
    let (dfa, ext) = p.dfa(1);
    let flags = DmaFlags {
        event_ct_ack: true,
        event_ct_reply: true,
        event_ct_bytes: true,
        restricted: true,
        ..DmaFlags::default()
    };
    let put = NomatchDma {
        opcode: DmaOp::NomatchPut,
        index_ext: ext,
        flags,
        dfa,
        remote_offset: 1000,
        local_addr: src.iova,
        request_len: 3000,
        ct: 5,
        eq: EQ_TX,
        lac: 0,
    }
    .encode();
    let get = NomatchDma {
        opcode: DmaOp::NomatchGet,
        remote_offset: 1000,
        local_addr: src.iova + 3000,
        request_len: 1000,
        ..NomatchDma::decode(&put).unwrap()
    }
    .encode();
    p.tx(&[&put]);
    p.c.settle();
    p.tx(&[&get]);
    p.c.settle();
    assert!(
        p.poll_tx().is_none(),
        "non-matching commands report errors only"
    );
    assert_eq!(
        p.tgt().read_host(win.host + 1000, 3000).unwrap(),
        pattern(4096, 9)[..3000]
    );
    assert_eq!(
        p.init().read_host(src.host + 3000, 1000).unwrap(),
        pattern(4096, 9)[..1000]
    );
    // CT: 3000 + 1000 bytes, written back with ct_writeback set.
    let w = firmware_spec::cassini::status::CtWriteback::decode(
        &p.init().read_host(wb.host, 8).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (w.ct_success, w.ct_failure, w.ct_writeback),
        (4000, 0, true)
    );
    // Doorbell increment.
    p.init()
        .bar
        .write_u64(0x0800_0000 + 5 * 0x1_0000, 5)
        .unwrap();
    let w = firmware_spec::cassini::status::CtWriteback::decode(
        &p.init().read_host(wb.host, 8).unwrap(),
    )
    .unwrap();
    assert_eq!(w.ct_success, 4005);
}

#[test]
fn events_raise_msix_interrupts() {
    let mut p = Pair::deterministic();
    let hits = Arc::new(AtomicU32::new(0));
    let h = hits.clone();
    let dev = p.c.nodes[TGT].dev;
    p.c.engine
        .set_interrupt_sink(
            dev,
            Arc::new(move |v| {
                if v == 33 {
                    h.fetch_add(1, Ordering::SeqCst);
                }
            }),
        )
        .unwrap();
    // Enable MSI-X in config space and unmask vector 33 in the table (CSR space).
    let cap = p.c.engine.config_read(dev, 0x34 / 4).unwrap() & 0xFF;
    let reg = (cap / 4) as u16;
    let ctl = p.c.engine.config_read(dev, reg).unwrap();
    p.c.engine.config_write(dev, reg, ctl | (1 << 31)).unwrap();
    let n = &mut p.c.nodes[TGT];
    let mut eq = n
        .alloc_eq(
            12,
            PAGE,
            EqOpts {
                interrupt: Some(33),
                ..EqOpts::default()
            },
        )
        .unwrap();
    let entry =
        firmware_spec::cassini::pci::CSR_BASE + csr::C_PI_IPD_CFG_MSIX_TABLE.offset + 33 * 16;
    n.bar.write_u64(entry, 0xFEE0_0000).unwrap();
    n.bar.write_u64(entry + 8, 0x21).unwrap(); // data 0x21, unmasked
    n.alloc_pte(30, 12, PtAllocOpts::IS_MATCHING, VNI, PID, 3, 0, 3)
        .unwrap();
    p.target_cmd(&set_state(30, PtlteState::Enabled, 0));
    p.c.settle();
    assert!(eq.next(&p.c.nodes[TGT]).unwrap().is_some());
    assert_eq!(hits.load(Ordering::SeqCst), 1, "one event, one interrupt");
}

#[test]
fn threaded_engine_runs_the_same_data_path() {
    let mut p = Pair::threaded();
    let md = prio_le(
        &mut p,
        1,
        1 << 16,
        LeFlags::OP_PUT | LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE,
        0x1,
    );
    let src = p.c.nodes[INIT].map(1 << 16, true, true).unwrap();
    let data = pattern(1 << 16, 1);
    p.init().write_host(src.host, &data).unwrap();
    let (dfa, ext) = p.dfa(0);
    let put = FullDma {
        opcode: DmaOp::Put,
        index_ext: ext,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        dfa,
        local_addr: src.iova,
        request_len: 1 << 16,
        match_bits: 0x1,
        eq: EQ_TX,
        initiator: p.initiator(),
        ..FullDma::default()
    }
    .encode();
    p.tx(&[&put]);
    let ack = init_fields(&p.wait_tx());
    assert_eq!(
        (ack.0, ack.1, ack.2),
        (EventType::Ack, ReturnCode::Ok, 1 << 16)
    );
    let ev = tgt_fields(&p.wait_tgt());
    assert_eq!((ev.0, ev.1), (EventType::Put, ReturnCode::Ok));
    assert!(p.tgt().read_host(md.host, 1 << 16).unwrap() == data);
    let cs = p.cstate(
        0,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
    );
    for i in 0..50u8 {
        p.tx(&[&cs, &msg(&p, 0x1, &[i; 8])]);
        let a = init_fields(&p.wait_tx());
        assert_eq!(a.1, ReturnCode::Ok);
        assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Put);
    }
}

#[test]
fn lost_requests_complete_undeliverable() {
    let mut p = Pair::deterministic();
    // NID 9 has no port on this two-port fabric: the packet is dropped.
    let (dfa9, ext) = dfa(9, PID, 0);
    let cs = CState {
        index_ext: ext,
        eq: EQ_TX,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        ..CState::default()
    }
    .encode();
    let m = IdcMsg {
        dfa: dfa9,
        payload: Payload::new(&[1; 8]).unwrap(),
        ..IdcMsg::default()
    }
    .encode()
    .unwrap();
    p.tx(&[&cs, &m]);
    let before = p.c.engine.now();
    p.c.settle();
    let r = init_fields(&p.wait_tx());
    assert_eq!((r.0, r.1), (EventType::Ack, ReturnCode::Undeliverable));
    // The PCT retransmitted it until its connection was declared dead, well before the
    // initiator's 1 s request timeout (docs/cassini-reliability.md).
    let waited = p.c.engine.now().as_ns() - before.as_ns();
    assert!(
        (1_000_000..100_000_000).contains(&waited),
        "after the retries, before the request timeout: {waited} ns"
    );
    // The CQ is not stuck: a FENCE after it passes, and later traffic works.
    let fence = CqCmd {
        opcode: CqOp::CqFence,
        lcid: 0,
    }
    .encode();
    let md = p.c.nodes[TGT].map(64, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        1,
        &md,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE,
        0,
        0,
    ));
    let ok = IdcMsg {
        dfa: p.dfa(0).0,
        payload: Payload::new(&[2; 8]).unwrap(),
        ..IdcMsg::default()
    }
    .encode()
    .unwrap();
    let cs0 = p.cstate(
        0,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
    );
    p.tx(&[&fence, &cs0, &ok]);
    p.c.settle();
    assert_eq!(init_fields(&p.wait_tx()).1, ReturnCode::Ok);
}

#[test]
fn software_managed_request_list_gets_wire_headers() {
    let mut p = Pair::deterministic();
    p.target_cmd(&set_state(PT_MATCH, PtlteState::SoftwareManaged, 0));
    let sc = p.wait_tgt();
    assert_eq!(tgt_fields(&sc).0, EventType::StateChange);
    let md = p.c.nodes[TGT].map(4096, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Request,
        50,
        &md,
        LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL | LeFlags::EVENT_LINK_DISABLE,
        0,
        u64::MAX,
    ));
    let cs = p.cstate(
        0,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
    );
    let m = IdcMsg {
        dfa: p.dfa(0).0,
        match_bits: 0xABC,
        payload: Payload::new(b"payload!").unwrap(),
        ..IdcMsg::default()
    }
    .encode()
    .unwrap();
    p.tx(&[&cs, &m]);
    p.c.settle();
    let ev = tgt_fields(&p.wait_tgt());
    // c_port_fab_hdr (20 B) + c_port_small_msg_hdr (29 B) + 8 B of payload.
    assert_eq!(
        (ev.0, ev.1, ev.2, ev.3, ev.5),
        (
            EventType::Put,
            ReturnCode::Ok,
            50,
            20 + 29 + 8,
            PtlList::Request
        )
    );
    let b = p.tgt().read_host(md.host, 57).unwrap();
    assert_eq!(b[0] >> 4, 4, "fabric header version 4");
    assert_eq!((b[20] >> 4) & 7, 1, "C_V4_PKT_SMALLMSG");
    assert_eq!(&b[49..57], b"payload!");
}

#[test]
fn largest_idc_put_and_long_event_formats() {
    let c = Cluster::deterministic(2, 5).unwrap();
    let mut p = Pair::with_tgt_eq(
        c,
        EqOpts {
            long_target: true,
            ..EqOpts::default()
        },
    );
    let win = p.c.nodes[TGT].map(4096, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        3,
        &win,
        LeFlags::OP_PUT,
        0,
        0,
    ));
    match p.wait_tgt() {
        Event::TargetLong(e) => assert_eq!(e.event_type, EventType::Link),
        other => panic!("long target events expected: {other:?}"),
    }
    // A long-format initiator EQ too.
    let mut eq_long = p.c.nodes[INIT]
        .alloc_eq(
            11,
            PAGE,
            EqOpts {
                long_initiator: true,
                ..EqOpts::default()
            },
        )
        .unwrap();
    let (dfa1, ext) = p.dfa(1);
    let cs = CState {
        index_ext: ext,
        eq: 11,
        user_ptr: 0x77,
        ..CState::default()
    }
    .encode();
    // 224 B of payload (C_MAX_IDC_PAYLOAD_RES): a 256 B command, 256 B aligned in the ring.
    let data = pattern(224, 4);
    let put = IdcPut {
        dfa: dfa1,
        remote_offset: 512,
        payload: Payload::new(&data).unwrap(),
    }
    .encode()
    .unwrap();
    assert_eq!(put.len(), 256);
    p.tx(&[&cs, &put]);
    p.c.settle();
    assert_eq!(p.tgt().read_host(win.host + 512, 224).unwrap(), data);
    match p.wait_tgt() {
        Event::TargetLong(e) => {
            assert_eq!(
                (e.event_type, e.mlength, e.remote_offset, e.start),
                (EventType::Put, 224, 512, win.iova + 512)
            );
        }
        other => panic!("{other:?}"),
    }
    let node = &p.c.nodes[INIT];
    let send = eq_long.next(node).unwrap().unwrap();
    let ack = eq_long.next(node).unwrap().unwrap();
    match (send, ack) {
        (Event::InitiatorLong(s), Event::InitiatorLong(a)) => {
            assert_eq!(
                (s.event_type, a.event_type, a.mlength, a.user_ptr),
                (EventType::Send, EventType::Ack, 224, 0x77)
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn atomics_run_on_target_memory() {
    use firmware_spec::cassini::amo::{AmoOp, AmoType, CswapOp};
    use firmware_spec::cassini::cmd::{DmaAmo, IdcAmo, IdcSmallAmo};
    let mut p = Pair::deterministic();
    let win = p.c.nodes[TGT].map(4096, true, true).unwrap();
    p.tgt().write_host(win.host, &100u64.to_le_bytes()).unwrap();
    p.tgt()
        .write_host(win.host + 8, &1000u32.to_le_bytes())
        .unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        2,
        &win,
        LeFlags::OP_PUT | LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE,
        0,
        0,
    ));
    let res = p.c.nodes[INIT].map(64, true, true).unwrap();
    let (dfa1, _) = p.dfa(1);
    let cs = p.cstate(
        1,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
    );
    // Non-fetching SUM, then a fetching SWAP returning the old value.
    let sum = IdcAmo {
        opcode: DmaOp::Atomic,
        dfa: dfa1,
        remote_offset: 0,
        atomic_op: AmoOp::Sum,
        atomic_type: AmoType::Uint64,
        op1_word1: 5,
        ..IdcAmo::default()
    }
    .encode();
    let swap = IdcAmo {
        opcode: DmaOp::FetchingAtomic,
        dfa: dfa1,
        local_addr: res.iova,
        atomic_op: AmoOp::Swap,
        atomic_type: AmoType::Uint64,
        op1_word1: 7,
        ..IdcAmo::default()
    }
    .encode();
    let small = IdcSmallAmo {
        dfa: dfa1,
        remote_offset: 8,
        atomic_op: AmoOp::Sum,
        atomic_type: AmoType::Uint32,
        op1_word1: 3,
    }
    .encode();
    p.tx(&[&cs, &sum, &swap, &small]);
    p.c.settle();
    let a = init_fields(&p.wait_tx());
    let r = init_fields(&p.wait_tx());
    let a2 = init_fields(&p.wait_tx());
    assert_eq!((a.0, a.1, a.2), (EventType::Ack, ReturnCode::Ok, 8));
    assert_eq!((r.0, r.1, r.2), (EventType::Reply, ReturnCode::Ok, 8));
    assert_eq!((a2.0, a2.1), (EventType::Ack, ReturnCode::Ok));
    assert_eq!(
        u64::from_le_bytes(p.init().read_host(res.host, 8).unwrap().try_into().unwrap()),
        105,
        "fetched the value after SUM"
    );
    assert_eq!(
        u64::from_le_bytes(p.tgt().read_host(win.host, 8).unwrap().try_into().unwrap()),
        7
    );
    assert_eq!(
        u32::from_le_bytes(
            p.tgt()
                .read_host(win.host + 8, 4)
                .unwrap()
                .try_into()
                .unwrap()
        ),
        1003
    );
    let t = tgt_fields(&p.wait_tgt());
    assert_eq!((t.0, t.1), (EventType::Atomic, ReturnCode::Ok));
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::FetchAtomic);

    // DMA AMO: fetching CSWAP with operand 1 read from local memory.
    let src = p.c.nodes[INIT].map(64, true, true).unwrap();
    p.init().write_host(src.host, &99u64.to_le_bytes()).unwrap();
    let (_, ext) = p.dfa(1);
    let cswap = DmaAmo {
        opcode: DmaOp::FetchingAtomic,
        index_ext: ext,
        dfa: dfa1,
        local_read_addr: src.iova,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        request_len: 8,
        eq: EQ_TX,
        user_ptr: 0xA70,
        local_write_addr: res.iova + 8,
        atomic_op: AmoOp::Cswap,
        atomic_type: AmoType::Uint64,
        cswap_op: CswapOp::Eq,
        op2_word1: 7,
        ..DmaAmo::default()
    };
    let mut cmd = [0u8; 128];
    cmd[..96].copy_from_slice(&cswap.encode());
    p.tx(&[&cmd]);
    p.c.settle();
    let r = init_fields(&p.wait_tx());
    assert_eq!((r.0, r.1, r.3), (EventType::Reply, ReturnCode::Ok, 0xA70));
    assert_eq!(
        u64::from_le_bytes(
            p.init()
                .read_host(res.host + 8, 8)
                .unwrap()
                .try_into()
                .unwrap()
        ),
        7
    );
    assert_eq!(
        u64::from_le_bytes(p.tgt().read_host(win.host, 8).unwrap().try_into().unwrap()),
        99,
        "compared equal, swapped"
    );
    // Misaligned: AMO_ALIGN_ERROR, memory unchanged.
    let bad = IdcAmo {
        opcode: DmaOp::Atomic,
        dfa: dfa1,
        remote_offset: 4,
        atomic_op: AmoOp::Sum,
        atomic_type: AmoType::Uint64,
        op1_word1: 1,
        ..IdcAmo::default()
    }
    .encode();
    p.tx(&[&bad]);
    p.c.settle();
    while let Some(e) = p.poll_tgt() {
        let _ = e;
    }
    let r = init_fields(&p.wait_tx());
    assert_eq!((r.0, r.1), (EventType::Ack, ReturnCode::AmoAlignError));
    assert_eq!(
        u64::from_le_bytes(p.tgt().read_host(win.host, 8).unwrap().try_into().unwrap()),
        99
    );
}
