//! The Cassini data path end to end, driven through rings and doorbells only: two emulated
//! NICs on a fabric, on the deterministic engine.

mod common;
use common::*;
use emu_core::fabric::LinkParams;

#[test]
fn small_message_matches_a_priority_le() {
    let mut p = Pair::deterministic();
    let mut tgt = p.c.nodes[TGT].map(4096, true, true).unwrap();
    tgt.len = 64;
    let cmd = le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        77,
        &tgt,
        LeFlags::OP_PUT | LeFlags::USE_ONCE,
        0x42,
        0,
    );
    p.target_cmd(&cmd);
    let link = p.wait_tgt();
    assert_eq!(tgt_fields(&link).0, EventType::Link);

    let (dfa, _) = p.dfa(0);
    let cs = p.cstate(0, DmaFlags::default());
    let msg = IdcMsg {
        dfa,
        match_bits: 0x42,
        header_data: 0xDA7A,
        user_ptr: 0xFEED,
        payload: Payload::new(b"hello, cassini!!").unwrap(),
    }
    .encode()
    .unwrap();
    p.tx(&[&cs, &msg]);
    p.c.settle();

    // The use_once entry's UNLINK comes first (it goes at match time), then the PUT (HPE's
    // libcxi tests, msg.c, expect this order).
    let unlink = p.wait_tgt();
    assert_eq!(tgt_fields(&unlink).0, EventType::Unlink);
    let put = p.wait_tgt();
    let (ty, rc, bid, mlen, mb, list, unlinked) = tgt_fields(&put);
    assert_eq!(
        (ty, rc, bid, mlen, mb, list),
        (
            EventType::Put,
            ReturnCode::Ok,
            77,
            16,
            0x42,
            PtlList::Priority
        )
    );
    assert!(unlinked, "use_once LE unlinks on its match");
    assert_eq!(
        p.tgt().read_host(tgt.host, 16).unwrap(),
        b"hello, cassini!!"
    );

    let mut seen = Vec::new();
    while let Some(e) = p.poll_tx() {
        seen.push(init_fields(&e));
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, EventType::Send);
    assert_eq!(
        seen[1],
        (
            EventType::Ack,
            ReturnCode::Ok,
            16,
            0xFEED,
            PtlList::Priority
        )
    );
}

#[test]
fn unexpected_message_lands_on_overflow_then_append_yields_put_overflow() {
    let mut p = Pair::deterministic();
    let ovf = p.c.nodes[TGT].map(8192, true, true).unwrap();
    let cmd = le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Overflow,
        900,
        &ovf,
        LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL | LeFlags::EVENT_UNLINK_DISABLE,
        0,
        u64::MAX,
    );
    p.target_cmd(&cmd);
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);

    // Two unexpected messages: eager data goes to the overflow buffer, back to back.
    let (dfa, _) = p.dfa(0);
    let cs = p.cstate(0, DmaFlags::default());
    let m1 = IdcMsg {
        dfa,
        match_bits: 0x1,
        header_data: 11,
        user_ptr: 1,
        payload: Payload::new(&[0xA1; 40]).unwrap(),
    }
    .encode()
    .unwrap();
    let m2 = IdcMsg {
        dfa,
        match_bits: 0x2,
        header_data: 22,
        user_ptr: 2,
        payload: Payload::new(&[0xB2; 24]).unwrap(),
    }
    .encode()
    .unwrap();
    p.tx(&[&cs, &m1, &m2]);
    p.c.settle();
    let e1 = p.wait_tgt();
    let e2 = p.wait_tgt();
    let f1 = tgt_fields(&e1);
    let f2 = tgt_fields(&e2);
    assert_eq!(
        (f1.0, f1.1, f1.2, f1.3, f1.5),
        (EventType::Put, ReturnCode::Ok, 900, 40, PtlList::Overflow)
    );
    assert_eq!(
        (f2.0, f2.2, f2.3, f2.5),
        (EventType::Put, 900, 24, PtlList::Overflow)
    );
    let data = p.tgt().read_host(ovf.host, 64).unwrap();
    assert_eq!(&data[..40], &[0xA1; 40]);
    assert_eq!(
        &data[40..64],
        &[0xB2; 24],
        "manage_local packs the second message after the first"
    );
    let acks: Vec<_> = std::iter::from_fn(|| p.poll_tx())
        .map(|e| init_fields(&e))
        .filter(|f| f.0 == EventType::Ack)
        .collect();
    assert_eq!(acks.len(), 2);
    assert!(
        acks.iter()
            .all(|a| a.1 == ReturnCode::Ok && a.4 == PtlList::Overflow),
        "{acks:?}"
    );

    // A priority append matching the second message consumes its unexpected header: a
    // PUT_OVERFLOW event pointing at the eager data in the overflow buffer, and no LINK
    // (use_once).
    let prio = p.c.nodes[TGT].map(256, true, true).unwrap();
    let cmd = le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        5,
        &prio,
        LeFlags::OP_PUT | LeFlags::USE_ONCE,
        0x2,
        0,
    );
    p.target_cmd(&cmd);
    let ev = p.wait_tgt();
    let f = tgt_fields(&ev);
    assert_eq!(
        (f.0, f.1, f.2, f.3, f.4),
        (EventType::PutOverflow, ReturnCode::Ok, 5, 24, 0x2)
    );
    // Never linked: its auto-unlink is reported (UNLINK, not LINK).
    let u = tgt_fields(&p.wait_tgt());
    assert_eq!((u.0, u.2, u.6), (EventType::Unlink, 5, true));
    assert!(p.poll_tgt().is_none());
    assert!(
        p.tgt()
            .read_host(prio.host, 24)
            .unwrap()
            .iter()
            .all(|&b| b == 0),
        "the hardware does not copy eager data"
    );

    // SEARCH finds the remaining header; SEARCH_AND_DELETE removes it (PUT_OVERFLOW + SEARCH).
    let crit = Md {
        iova: 0,
        host: 0,
        len: 0,
    };
    p.target_cmd(&le_cmd(
        TgtOp::Search,
        PT_MATCH,
        PtlList::Unexpected,
        1,
        &crit,
        LeFlags::empty(),
        0x1,
        0,
    ));
    let s = tgt_fields(&p.wait_tgt());
    assert_eq!((s.0, s.1, s.4), (EventType::Search, ReturnCode::Ok, 0x1));
    p.target_cmd(&le_cmd(
        TgtOp::SearchAndDelete,
        PT_MATCH,
        PtlList::Unexpected,
        2,
        &crit,
        LeFlags::empty(),
        0,
        u64::MAX,
    ));
    let a = tgt_fields(&p.wait_tgt());
    let b = tgt_fields(&p.wait_tgt());
    assert_eq!((a.0, a.4), (EventType::PutOverflow, 0x1));
    assert_eq!((b.0, b.1), (EventType::Search, ReturnCode::Ok));
    p.target_cmd(&le_cmd(
        TgtOp::Search,
        PT_MATCH,
        PtlList::Unexpected,
        3,
        &crit,
        LeFlags::empty(),
        0,
        u64::MAX,
    ));
    let s = tgt_fields(&p.wait_tgt());
    assert_eq!((s.0, s.1), (EventType::Search, ReturnCode::NoMatch));
}

#[test]
fn one_mib_dma_put_is_segmented_and_every_byte_lands() {
    let mut p = Pair::deterministic();
    const LEN: usize = 1 << 20;
    let src = p.c.nodes[INIT].map(LEN as u64, true, false).unwrap();
    let data = pattern(LEN, 0x5A);
    p.init().write_host(src.host, &data).unwrap();
    let dst = p.c.nodes[TGT].map(LEN as u64 + 4096, true, true).unwrap();
    // A persistent RMA-style LE on the non-matching PtlTE, addressed by remote offset.
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        8,
        &dst,
        LeFlags::OP_PUT | LeFlags::OP_GET,
        0,
        0,
    ));
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    let pkts_before = p.c.engine.fabric_counters().injected;

    let (dfa, ext) = p.dfa(1);
    let put = FullDma {
        opcode: DmaOp::Put,
        index_ext: ext,
        lac: 0,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        dfa,
        remote_offset: 4096,
        local_addr: src.iova,
        request_len: LEN as u32,
        eq: EQ_TX,
        user_ptr: 0x1111,
        initiator: p.initiator(),
        ..FullDma::default()
    }
    .encode();
    p.tx(&[&put]);
    p.c.settle();

    let ack = init_fields(&p.wait_tx());
    assert_eq!(
        ack,
        (
            EventType::Ack,
            ReturnCode::Ok,
            LEN as u32,
            0x1111,
            PtlList::Priority
        )
    );
    assert!(p.poll_tx().is_none(), "SEND was disabled");
    let ev = tgt_fields(&p.wait_tgt());
    assert_eq!((ev.0, ev.1, ev.2), (EventType::Put, ReturnCode::Ok, 8));
    let got = p.tgt().read_host(dst.host + 4096, LEN).unwrap();
    assert!(got == data, "every byte of the 1 MiB put lands in place");
    assert!(
        p.tgt()
            .read_host(dst.host, 4096)
            .unwrap()
            .iter()
            .all(|&b| b == 0)
    );
    let pkts = p.c.engine.fabric_counters().injected - pkts_before;
    // Besides them, each PCT acknowledged the packets it received
    // (docs/cassini-reliability.md): connection-management frames the other side counts.
    let v = firmware_spec::cassini::csr::lookup("c_ixe_cntrs").unwrap();
    let f = v.field("rx_ptl_connmgmt_pkt").unwrap();
    let off = firmware_spec::cassini::pci::CSR_BASE + v.offset + u64::from(f.bit / 8);
    let acks = p.init().bar.read_u64(off).unwrap() + p.tgt().bar.read_u64(off).unwrap();
    assert!(acks > 0);
    assert_eq!(
        pkts - acks,
        (LEN / 2048) as u64 + 1,
        "512 MTU packets and one ACK"
    );
}

#[test]
fn get_pulls_remote_data_into_the_local_buffer() {
    let mut p = Pair::deterministic();
    let remote = p.c.nodes[TGT].map(3 * 4096, true, true).unwrap();
    let data = pattern(10_000, 3);
    p.tgt().write_host(remote.host, &data).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        9,
        &remote,
        LeFlags::OP_GET,
        0,
        0,
    ));
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    let local = p.c.nodes[INIT].map(10_000, true, true).unwrap();
    let (dfa, ext) = p.dfa(1);
    let get = FullDma {
        opcode: DmaOp::Get,
        index_ext: ext,
        dfa,
        remote_offset: 100,
        local_addr: local.iova,
        request_len: 9_000,
        eq: EQ_TX,
        user_ptr: 0x6E7,
        initiator: p.initiator(),
        ..FullDma::default()
    }
    .encode();
    p.tx(&[&get]);
    p.c.settle();
    let r = init_fields(&p.wait_tx());
    assert_eq!(
        r,
        (
            EventType::Reply,
            ReturnCode::Ok,
            9_000,
            0x6E7,
            PtlList::Priority
        )
    );
    assert_eq!(
        p.init().read_host(local.host, 9_000).unwrap(),
        &data[100..9_100]
    );
    let g = tgt_fields(&p.wait_tgt());
    assert_eq!(
        (g.0, g.1, g.2, g.3),
        (EventType::Get, ReturnCode::Ok, 9, 9_000)
    );

    // A Get on an LE without OP_GET: OP_VIOLATION at both ends, nothing written.
    let put_only = p.c.nodes[TGT].map(4096, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        10,
        &put_only,
        LeFlags::OP_PUT,
        0x77,
        0,
    ));
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    let local2 = p.c.nodes[INIT].map(64, true, true).unwrap();
    let (dfa0, ext0) = p.dfa(0);
    let get = FullDma {
        opcode: DmaOp::Get,
        index_ext: ext0,
        dfa: dfa0,
        local_addr: local2.iova,
        request_len: 64,
        match_bits: 0x77,
        eq: EQ_TX,
        initiator: p.initiator(),
        ..FullDma::default()
    }
    .encode();
    p.tx(&[&get]);
    p.c.settle();
    let r = init_fields(&p.wait_tx());
    assert_eq!((r.0, r.1), (EventType::Reply, ReturnCode::OpViolation));
    assert!(
        p.init()
            .read_host(local2.host, 64)
            .unwrap()
            .iter()
            .all(|&b| b == 0)
    );
}

#[test]
fn malformed_command_fails_only_its_cq() {
    let mut p = Pair::deterministic();
    let n = &mut p.c.nodes[INIT];
    let mut q2 = n.alloc_txq(2, 64, EQ_TX, 0).unwrap();
    // DMA opcode 14 does not exist.
    let mut bad = [0u8; 64];
    bad[0] = CmdHeader::new(CmdType::Dma, CmdSize::B64, 14).to_byte();
    q2.submit(&p.c.nodes[INIT], &bad).unwrap();
    p.c.settle();
    let ev = p.wait_tx();
    match ev {
        Event::CommandFailure(f) => {
            assert_eq!(f.cq_id, 2);
            assert!(!f.is_target);
            assert_eq!(f.return_code, ReturnCode::IllegalOp);
            assert_eq!(f.fail_command.to_byte(), bad[0]);
            assert_eq!(u64::from(f.fail_loc), 4);
        }
        other => panic!("{other:?}"),
    }
    let st = p.init().cq_status(&q2).unwrap();
    assert_eq!(st.return_code, ReturnCode::IllegalOp);
    assert_eq!(st.fail_command.to_byte(), bad[0]);
    assert_eq!(st.rd_ptr, 4);
    let en = p
        .init()
        .csr_field(
            firmware_spec::cassini::csr::C_CQ_TXQ_ENABLE,
            2,
            firmware_spec::cassini::csr::fields::c_cq_txq_enable::TXQ_ENABLE,
        )
        .unwrap();
    assert_eq!(en, 0, "the failed CQ is disabled");

    // A later good command on the failed CQ is ignored; CQ 0 keeps working.
    let mut tgt = p.c.nodes[TGT].map(64, true, true).unwrap();
    tgt.len = 64;
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        1,
        &tgt,
        LeFlags::OP_PUT,
        0x9,
        0,
    ));
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    let (dfa, _) = p.dfa(0);
    let cs = p.cstate(
        0,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
    );
    let msg = IdcMsg {
        dfa,
        match_bits: 0x9,
        payload: Payload::new(&[7; 8]).unwrap(),
        ..IdcMsg::default()
    }
    .encode()
    .unwrap();
    q2.emit(&p.c.nodes[INIT], &cs).unwrap();
    q2.emit(&p.c.nodes[INIT], &msg).unwrap();
    q2.ring(&p.c.nodes[INIT]).unwrap();
    p.c.settle();
    assert!(
        p.poll_tx().is_none() && p.poll_tgt().is_none(),
        "disabled CQ executes nothing"
    );
    p.tx(&[&cs, &msg]);
    p.c.settle();
    assert_eq!(init_fields(&p.wait_tx()).0, EventType::Ack);
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Put);

    // Misalignment: a 64 B command at an odd half-slot (no NOOP padding) is CMD_ALIGN_ERROR.
    let mut q3 = p.c.nodes[INIT].alloc_txq(3, 64, EQ_TX, 0).unwrap();
    let node = &p.c.nodes[INIT];
    q3.emit(node, &cs).unwrap(); // 32 B at slot 4, first half
    let host = q3.host + q3.wp32() * 32;
    node.write_host(host, &msg).unwrap(); // 64 B starting on the second half of slot 4
    node.bar.write_u64(3 * 0x1_0000, 6).unwrap();
    p.c.settle();
    match p.wait_tx() {
        Event::CommandFailure(f) => {
            assert_eq!((f.cq_id, f.return_code), (3, ReturnCode::CmdAlignError));
        }
        other => panic!("{other:?}"),
    }
    let st = p.init().cq_status(&q3).unwrap();
    assert!(st.fail_loc_32, "the failure is in the second 32 B half");
}

#[test]
fn iova_outside_md_is_rejected_without_touching_memory() {
    let mut p = Pair::deterministic();
    // Target side: an LE whose buffer runs past its MD (into the guard page).
    let md = p.c.nodes[TGT].map(4096, true, true).unwrap();
    let next = p.c.nodes[TGT].map(4096, true, true).unwrap();
    p.tgt().write_host(next.host, &[0xEE; 4096]).unwrap();
    let over = Md {
        iova: md.iova,
        host: md.host,
        len: 8192,
    };
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        4,
        &over,
        LeFlags::OP_PUT,
        0,
        0,
    ));
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    let src = p.c.nodes[INIT].map(8192, true, true).unwrap();
    p.init().write_host(src.host, &[0x11; 8192]).unwrap();
    let (dfa, ext) = p.dfa(1);
    let put = |len: u32, local: u64, ro: u64| {
        FullDma {
            opcode: DmaOp::Put,
            index_ext: ext,
            flags: DmaFlags {
                event_send_disable: true,
                ..DmaFlags::default()
            },
            dfa,
            remote_offset: ro,
            local_addr: local,
            request_len: len,
            eq: EQ_TX,
            initiator: 0,
            ..FullDma::default()
        }
        .encode()
    };
    p.tx(&[&put(6000, src.iova, 0)]);
    p.c.settle();
    let ack = init_fields(&p.wait_tx());
    assert_eq!((ack.0, ack.1), (EventType::Ack, ReturnCode::NoTranslation));
    let ev = tgt_fields(&p.wait_tgt());
    assert_eq!((ev.0, ev.1), (EventType::Put, ReturnCode::NoTranslation));
    assert!(
        p.tgt()
            .read_host(md.host, 4096)
            .unwrap()
            .iter()
            .all(|&b| b == 0),
        "nothing written inside the MD either"
    );
    assert!(
        p.tgt()
            .read_host(next.host, 4096)
            .unwrap()
            .iter()
            .all(|&b| b == 0xEE)
    );

    // Initiator side: a local buffer beyond the user context's bounds, and one in a hole.
    p.tx(&[&put(64, USER_IOVA_BASE + (USER_IOVA_PAGES << 12) - 32, 0)]);
    p.c.settle();
    let ack = init_fields(&p.wait_tx());
    assert_eq!((ack.0, ack.1), (EventType::Ack, ReturnCode::AddrOutOfRange));
    p.tx(&[&put(64, src.iova + 8192 + 16, 0)]);
    p.c.settle();
    let ack = init_fields(&p.wait_tx());
    assert_eq!((ack.0, ack.1), (EventType::Ack, ReturnCode::NoTranslation));
    assert!(p.poll_tgt().is_none(), "nothing was sent");

    // A read-only MD cannot be written by a Get reply: PAGE_PERM_ERROR, nothing sent.
    let ro = p.c.nodes[INIT].map(4096, true, false).unwrap();
    let get = FullDma {
        opcode: DmaOp::Get,
        index_ext: ext,
        dfa,
        local_addr: ro.iova,
        request_len: 16,
        eq: EQ_TX,
        ..FullDma::default()
    }
    .encode();
    p.tx(&[&get]);
    p.c.settle();
    let r = init_fields(&p.wait_tx());
    assert_eq!((r.0, r.1), (EventType::Reply, ReturnCode::PagePermError));
}

#[test]
fn full_eq_drops_events_and_flags_them_in_the_status_block() {
    let mut p = Pair::deterministic();
    // A one-page initiator EQ: 63 slots of 64 B with one kept free, so 62 * 4 = 248 short
    // (16 B) ACK events fit.
    let n = &mut p.c.nodes[INIT];
    let mut small = n
        .alloc_eq(
            9,
            PAGE,
            EqOpts {
                drop_status: true,
                ..EqOpts::default()
            },
        )
        .unwrap();
    let buf = p.c.nodes[TGT].map(4096, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        1,
        &buf,
        LeFlags::OP_PUT,
        0,
        0,
    ));
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    let (dfa, ext) = p.dfa(1);
    let cs = CState {
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        index_ext: ext,
        user_ptr: 0,
        eq: 9,
        ..CState::default()
    }
    .encode();
    let put = IdcPut {
        dfa,
        remote_offset: 0,
        payload: Payload::new(&[1; 8]).unwrap(),
    }
    .encode()
    .unwrap();
    p.tx(&[&cs]);
    for _ in 0..260 {
        p.tx(&[&put]);
        p.c.settle();
        while p.poll_tgt().is_some() {}
    }
    let st = small.status(&p.c.nodes[INIT]).unwrap();
    assert!(
        st.unackd_dropped_event,
        "drops are flagged in the status block"
    );
    assert_eq!(st.event_slots_free, 0);
    // The ring holds exactly what fit; nothing was overwritten: 248 ACKs.
    let mut count = 0;
    while let Some(e) = small.next(&p.c.nodes[INIT]).unwrap() {
        assert_eq!(init_fields(&e).0, EventType::Ack);
        count += 1;
    }
    small.ack(&p.c.nodes[INIT]).unwrap();
    assert_eq!(count, 248);
    // Acknowledge the drops: the flag clears, new events flow again.
    small.ack_drops(&p.c.nodes[INIT]).unwrap();
    assert!(!small.status(&p.c.nodes[INIT]).unwrap().unackd_dropped_event);
    p.tx(&[&put]);
    p.c.settle();
    assert_eq!(
        init_fields(&small.next(&p.c.nodes[INIT]).unwrap().unwrap()).0,
        EventType::Ack
    );
}

/// The same scenario under the same seed replays exactly (the model draws nothing from
/// outside the engine and iterates no hash map to make a choice).
#[test]
fn same_seed_same_run() {
    let run = || {
        let c = Cluster::deterministic(2, 42).unwrap();
        let mut p = Pair::with_tgt_eq(c, EqOpts::default());
        let win = p.c.nodes[TGT].map(1 << 16, true, true).unwrap();
        p.target_cmd(&le_cmd(
            TgtOp::Append,
            PT_NOMATCH,
            PtlList::Priority,
            1,
            &win,
            LeFlags::OP_PUT,
            0,
            0,
        ));
        let src = p.c.nodes[INIT].map(1 << 16, true, true).unwrap();
        p.init().write_host(src.host, &pattern(1 << 16, 8)).unwrap();
        let (dfa, ext) = p.dfa(1);
        let put = FullDma {
            opcode: DmaOp::Put,
            index_ext: ext,
            dfa,
            local_addr: src.iova,
            request_len: 1 << 16,
            eq: EQ_TX,
            ..FullDma::default()
        }
        .encode();
        p.tx(&[&put, &put]);
        p.c.settle();
        let mut n = 0;
        while p.poll_tx().is_some() {
            n += 1;
        }
        let d = p.c.deterministic_engine().unwrap();
        (d.trace_digest(), d.now(), n)
    };
    let a = run();
    let b = run();
    assert_eq!(a, b);
    assert_eq!(a.2, 4, "two SENDs and two ACKs");
}

/// A put larger than the PCT's window is streamed: its frames are read from host memory as
/// the window opens, not all at the doorbell (so a 1 GiB put does not stage 1 GiB of frames).
/// Bytes the initiator changes after the first frames left but before the stream reached
/// them are the bytes that land; the SEND event follows the last frame read, before the ACK.
#[test]
fn a_put_beyond_the_window_is_read_from_host_memory_as_it_streams() {
    let mut p = Pair::deterministic();
    const LEN: usize = 8 << 20;
    const TAIL: usize = 1 << 20;
    let src = p.c.nodes[INIT].map(LEN as u64, true, false).unwrap();
    let data = pattern(LEN, 0x11);
    p.init().write_host(src.host, &data).unwrap();
    let dst = p.c.nodes[TGT].map(LEN as u64, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        8,
        &dst,
        LeFlags::OP_PUT | LeFlags::OP_GET,
        0,
        0,
    ));
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    let before = p.c.engine.fabric_counters().injected;
    let (dfa, ext) = p.dfa(1);
    let put = FullDma {
        opcode: DmaOp::Put,
        index_ext: ext,
        lac: 0,
        dfa,
        local_addr: src.iova,
        request_len: LEN as u32,
        eq: EQ_TX,
        user_ptr: 0x2222,
        initiator: p.initiator(),
        ..FullDma::default()
    }
    .encode();
    p.tx(&[&put]);
    // Step until the first frames are on the fabric, then change the last MiB.
    let mut steps = 0;
    while p.c.engine.fabric_counters().injected == before {
        assert!(p.c.progress(), "the engine stopped before the put left");
        steps += 1;
        assert!(steps < 100_000, "the put never left");
    }
    let tail = pattern(TAIL, 0x77);
    p.init()
        .write_host(src.host + (LEN - TAIL) as u64, &tail)
        .unwrap();
    p.c.settle();

    let send = init_fields(&p.wait_tx());
    assert_eq!(
        (send.0, send.1, send.2),
        (EventType::Send, ReturnCode::Ok, LEN as u32)
    );
    let ack = init_fields(&p.wait_tx());
    assert_eq!(
        (ack.0, ack.1, ack.3),
        (EventType::Ack, ReturnCode::Ok, 0x2222)
    );
    let ev = tgt_fields(&p.wait_tgt());
    assert_eq!((ev.0, ev.1), (EventType::Put, ReturnCode::Ok));
    let got = p.tgt().read_host(dst.host, LEN).unwrap();
    assert!(
        got[..LEN - TAIL] == data[..LEN - TAIL],
        "the head lands as it was"
    );
    assert!(
        got[LEN - TAIL..] == tail[..],
        "the tail was read when its frames left, after it was changed"
    );
}

/// A restricted put is answered only once all of it has landed. On a link slow enough that
/// 32 MiB take 1.34 s of engine time (longer than the 1 s request timeout), the put still
/// completes with its ACK: its timeout is extended by its length at the emulator's floor
/// rate (`ixe::RESTRICTED_FLOOR_BYTES_PER_S`, 0.67 s for 32 MiB), so a slow carrier is not
/// reported as UNDELIVERABLE.
#[test]
fn a_restricted_put_slower_than_the_request_timeout_is_not_undeliverable() {
    const LEN: usize = 32 << 20;
    let link = LinkParams {
        bandwidth: 25_000_000,
        ..LinkParams::default()
    };
    let c = Cluster::deterministic_with_link(2, 2, 11, 2 * LEN as u64, link).unwrap();
    let mut p = Pair::with_tgt_eq(c, EqOpts::default());
    let src = p.c.nodes[INIT].map(LEN as u64, true, false).unwrap();
    let data = pattern(LEN, 0x5a);
    p.init().write_host(src.host, &data).unwrap();
    let dst = p.c.nodes[TGT].map(LEN as u64, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        8,
        &dst,
        LeFlags::OP_PUT | LeFlags::OP_GET,
        0,
        0,
    ));
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    let (dfa, ext) = p.dfa(1);
    let put = FullDma {
        opcode: DmaOp::Put,
        index_ext: ext,
        lac: 0,
        dfa,
        local_addr: src.iova,
        request_len: LEN as u32,
        eq: EQ_TX,
        user_ptr: 0x3333,
        initiator: p.initiator(),
        flags: DmaFlags {
            restricted: true,
            ..DmaFlags::default()
        },
        ..FullDma::default()
    }
    .encode();
    let t0 = p.c.engine.now();
    p.tx(&[&put]);
    p.c.settle();
    let send = init_fields(&p.wait_tx());
    assert_eq!((send.0, send.1), (EventType::Send, ReturnCode::Ok));
    let ack = init_fields(&p.wait_tx());
    assert_eq!(
        (ack.0, ack.1, ack.3),
        (EventType::Ack, ReturnCode::Ok, 0x3333)
    );
    let took = p.c.engine.now().as_ps() - t0.as_ps();
    assert!(
        took > 1_000_000_000_000,
        "the put took {took} ps: the link no longer makes it outlast the request timeout"
    );
    assert_eq!(p.tgt().read_host(dst.host, LEN).unwrap(), data);
}

/// Restricted frames travel unordered (cassini.md §2). With the fabric reordering frames, a
/// restricted put whose ACK reports success has landed every byte: the frame flagged
/// end-of-message, arriving before others of its message, no longer completes the put with
/// bytes missing (a put whose request frame came after some of its continuations still fails
/// at its request timeout).
#[test]
fn a_restricted_put_with_reordered_frames_succeeds_only_once_every_byte_landed() {
    use emu_core::fabric::FaultConfig;
    use emu_core::time::SimDuration;
    const LEN: usize = 256 << 10;
    let data = pattern(LEN, 0x3c);
    let (mut ok, mut reordered) = (0, 0);
    for seed in 1..=6 {
        let link = LinkParams::default();
        let c = Cluster::deterministic_with_link(2, 2, seed, 2 * LEN as u64, link).unwrap();
        let mut p = Pair::with_tgt_eq(c, EqOpts::default());
        let src = p.c.nodes[INIT].map(LEN as u64, true, false).unwrap();
        p.init().write_host(src.host, &data).unwrap();
        let dst = p.c.nodes[TGT].map(LEN as u64, true, true).unwrap();
        p.target_cmd(&le_cmd(
            TgtOp::Append,
            PT_NOMATCH,
            PtlList::Priority,
            8,
            &dst,
            LeFlags::OP_PUT | LeFlags::OP_GET,
            0,
            0,
        ));
        assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
        p.c.engine.set_faults(FaultConfig {
            reorder: 0.25,
            reorder_max_delay: SimDuration::from_us(4),
            ..FaultConfig::none()
        });
        let (dfa, ext) = p.dfa(1);
        let put = FullDma {
            opcode: DmaOp::Put,
            index_ext: ext,
            lac: 0,
            dfa,
            local_addr: src.iova,
            request_len: LEN as u32,
            eq: EQ_TX,
            user_ptr: 0x4444,
            initiator: p.initiator(),
            flags: DmaFlags {
                restricted: true,
                event_send_disable: true,
                ..DmaFlags::default()
            },
            ..FullDma::default()
        }
        .encode();
        p.tx(&[&put]);
        p.c.settle();
        let ack = init_fields(&p.wait_tx());
        assert_eq!((ack.0, ack.3), (EventType::Ack, 0x4444));
        reordered += p.c.engine.fabric_counters().reordered;
        if ack.1 == ReturnCode::Ok {
            ok += 1;
            assert!(
                p.tgt().read_host(dst.host, LEN).unwrap() == data,
                "seed {seed}: ACK OK, but not every byte landed"
            );
        } else {
            assert_eq!(ack.1, ReturnCode::Undeliverable, "seed {seed}");
        }
    }
    assert!(reordered > 0, "the fabric reordered no frame");
    assert!(ok > 0, "no seed completed its put");
}
