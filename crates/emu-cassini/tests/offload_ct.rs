//! Counting events and triggered operations through rings and doorbells (cassini.md §5):
//! the 8-byte write-back, doorbells, CT commands, `event_ct_*` flags of commands and list
//! entries, triggered operations firing at `success + failure >= threshold`, cancel, the ack
//! counter, the 2,048 TLEs and what happens past them, and a chain of triggered operations
//! across three NICs that runs with no software action between its first command and its
//! last event.

mod offload_support;

use firmware_spec::cassini::event::Event;
use offload_support::*;

fn wb(n: &Node, ct: &Ct) -> (u64, u8, bool) {
    let w = ct.writeback(n).unwrap();
    (w.ct_success, w.ct_failure, w.ct_writeback)
}

fn set_cmd(ct: u16, success: Option<u64>, failure: Option<u8>) -> [u8; 64] {
    ct64(CtCmd {
        opcode: CtOp::CtSet,
        ct,
        ct_success: success.unwrap_or(0),
        set_ct_success: success.is_some(),
        ct_failure: failure.unwrap_or(0),
        set_ct_failure: failure.is_some(),
        ..CtCmd::default()
    })
}

fn inc_cmd(ct: u16, success: u64, failure: u8) -> [u8; 64] {
    ct64(CtCmd {
        opcode: CtOp::CtInc,
        ct,
        ct_success: success,
        ct_failure: failure,
        ..CtCmd::default()
    })
}

#[test]
fn writeback_doorbells_and_ct_commands() {
    let mut net = Net::new(1);
    let md = net.c.nodes[0].map(64, true, true).unwrap();
    let ct = net.node(0).alloc_ct(9, Some(&md)).unwrap();
    let n = net.node(0);
    assert_eq!(read_u64(n, md.host), 0, "allocation writes nothing back");

    // Doorbells: +0 success, +64 failure, +128 / +192 resets; each writes back.
    ct.inc_success(n, 5).unwrap();
    assert_eq!(wb(n, &ct), (5, 0, true));
    ct.clear_writeback(n).unwrap();
    ct.inc_failure(n, 3).unwrap();
    assert_eq!(wb(n, &ct), (5, 3, true));
    ct.clear_writeback(n).unwrap();
    ct.reset_success(n).unwrap();
    assert_eq!(wb(n, &ct), (0, 3, true));
    ct.reset_failure(n).unwrap();
    assert_eq!(wb(n, &ct), (0, 0, true));

    // CT commands on the trigger CQ.
    let max = (1u64 << 48) - 1;
    net.trig(0, &[&set_cmd(9, Some(max), None)]);
    net.settle();
    let n = net.node(0);
    assert_eq!(wb(n, &ct), (max, 0, true));
    ct.inc_success(n, 1).unwrap();
    assert_eq!(wb(n, &ct).0, 0, "success is 48 bits and wraps");
    net.trig(0, &[&inc_cmd(9, 7, 2), &inc_cmd(9, 0, 127)]);
    net.settle();
    let n = net.node(0);
    assert_eq!(
        wb(n, &ct),
        (7, 1, true),
        "failure is 7 bits: 2 + 127 wraps to 1"
    );
    net.trig(0, &[&set_cmd(9, None, Some(9))]);
    net.settle();
    assert_eq!(wb(net.node(0), &ct), (7, 9, true), "SET of failure only");
    // CT_GET writes the current value back again.
    ct.clear_writeback(net.node(0)).unwrap();
    net.trig(0, &[&ct64(ct_cmd(CtOp::CtGet, 9)), &ct64(CtCmd::noop())]);
    net.settle();
    assert_eq!(wb(net.node(0), &ct), (7, 9, true));
    // A CT without a write-back address counts but writes nothing anywhere.
    let silent = net.node(0).alloc_ct(10, None).unwrap();
    silent.inc_success(net.node(0), 4).unwrap();
    assert_eq!(
        read_u64(net.node(0), md.host) & ((1 << 48) - 1),
        7,
        "CT 10 has no write-back address"
    );
    // A CT command on a disabled CT fails the trigger CQ (COMMAND_FAILURE, CMD_INVALID_ARG).
    net.trig(0, &[&inc_cmd(11, 1, 0)]);
    net.settle();
    let ev = net.tx_events(0);
    match ev.as_slice() {
        [Event::CommandFailure(f)] => {
            assert_eq!((f.cq_id, f.return_code), (TRIGQ, ReturnCode::CmdInvalidArg));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn event_ct_flags_of_commands_and_list_entries() {
    let mut net = Net::new(2);
    let (a, b) = (0usize, 1usize);
    // Initiator CTs: 4 ACK events, 5 ACK bytes, 6 SEND events, 7 REPLY bytes.
    let mds: Vec<Md> = (0..5)
        .map(|_| net.c.nodes[a].map(64, true, true).unwrap())
        .collect();
    let cts: Vec<Ct> = (0..4)
        .map(|i| net.node(a).alloc_ct(4 + i as u16, Some(&mds[i])).unwrap())
        .collect();
    // Target CTs: 3 counts bytes of PUTs on LE 1, 8 counts events on LE 2, 9 counts
    // overflow events of an appended LE.
    let tmds: Vec<Md> = (0..3)
        .map(|_| net.c.nodes[b].map(64, true, true).unwrap())
        .collect();
    let t3 = net.node(b).alloc_ct(3, Some(&tmds[0])).unwrap();
    let t8 = net.node(b).alloc_ct(8, Some(&tmds[1])).unwrap();
    let t9 = net.node(b).alloc_ct(9, Some(&tmds[2])).unwrap();
    let win = net.c.nodes[b].map(8192, true, true).unwrap();
    let win2 = net.c.nodes[b].map(8192, true, true).unwrap();
    let ovf = net.c.nodes[b].map(8192, true, true).unwrap();
    let put_get = LeFlags::OP_PUT | LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE;
    net.tgt_cmd(
        b,
        &le_ct(
            PT_MATCH,
            1,
            &win,
            put_get | LeFlags::EVENT_CT_COMM | LeFlags::EVENT_CT_BYTES,
            1,
            3,
        ),
    );
    net.tgt_cmd(
        b,
        &le_ct(PT_MATCH, 2, &win2, put_get | LeFlags::EVENT_CT_COMM, 2, 8),
    );
    net.tgt_cmd(
        b,
        &le_cmd(
            TgtOp::Append,
            PT_MATCH,
            PtlList::Overflow,
            50,
            &ovf,
            LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL | LeFlags::EVENT_LINK_DISABLE,
            0,
            u64::MAX,
        ),
    );
    net.settle();
    let src = net.c.nodes[a].map(8192, true, true).unwrap();
    net.node(a).write_host(src.host, &pattern(8192, 3)).unwrap();
    let quiet = DmaFlags {
        event_send_disable: true,
        event_success_disable: true,
        ..DmaFlags::default()
    };
    let ack = DmaFlags {
        event_ct_ack: true,
        ..quiet
    };
    let ack_bytes = DmaFlags {
        event_ct_ack: true,
        event_ct_bytes: true,
        ..quiet
    };
    let send = DmaFlags {
        event_ct_send: true,
        ..quiet
    };
    let reply_bytes = DmaFlags {
        event_ct_reply: true,
        event_ct_bytes: true,
        ..quiet
    };
    let cmds = [
        dma(DmaOp::Put, a, b, 0, src.iova, 1000, 1, ack, 4, 0).encode(),
        dma(DmaOp::Put, a, b, 0, src.iova, 300, 2, ack_bytes, 5, 0).encode(),
        dma(DmaOp::Put, a, b, 0, src.iova, 20, 2, send, 6, 0).encode(),
        dma(
            DmaOp::Get,
            a,
            b,
            0,
            src.iova + 4096,
            500,
            1,
            reply_bytes,
            7,
            0,
        )
        .encode(),
        // Matches nothing but the overflow LE: unexpected.
        dma(DmaOp::Put, a, b, 0, src.iova, 64, 3, ack, 4, 0).encode(),
    ];
    let refs: Vec<&[u8]> = cmds.iter().map(|c| &c[..]).collect();
    net.tx(a, &refs);
    net.settle();
    let (na, nb) = (net.node(a), net.node(b));
    assert_eq!(wb(na, &cts[0]), (2, 0, true), "two ACKs counted on CT 4");
    assert_eq!(wb(na, &cts[1]).0, 300, "ACK bytes");
    assert_eq!(wb(na, &cts[2]).0, 1, "one SEND");
    assert_eq!(wb(na, &cts[3]).0, 500, "REPLY bytes");
    assert_eq!(
        wb(nb, &t3).0,
        1000 + 500,
        "LE 1 counts bytes of the PUT and the GET"
    );
    assert_eq!(wb(nb, &t8).0, 2, "LE 2 counts two PUT events");
    assert_eq!(read_u64(nb, tmds[2].host), 0, "nothing counted on CT 9 yet");
    // The append that consumes the unexpected header counts it (EVENT_CT_OVERFLOW).
    let win3 = net.c.nodes[b].map(4096, true, true).unwrap();
    net.tgt_cmd(
        b,
        &le_ct(
            PT_MATCH,
            3,
            &win3,
            LeFlags::OP_PUT | LeFlags::USE_ONCE | LeFlags::EVENT_CT_OVERFLOW,
            3,
            9,
        ),
    );
    net.settle();
    assert_eq!(wb(net.node(b), &t9), (1, 0, true));
    // A failed operation adds to the failure count even without an event_ct flag.
    let bad = dma(DmaOp::Put, a, b, 0, src.iova, 8, 77, quiet, 4, 0);
    let (d9, ext9) = dfa(b as u32, PID, 9);
    let bad = FullDma {
        dfa: d9,
        index_ext: ext9,
        ..bad
    }
    .encode();
    net.tx(a, &[&bad]);
    net.settle();
    let w = wb(net.node(a), &cts[0]);
    assert_eq!((w.0, w.1), (2, 1), "PTLTE_NOT_FOUND counted as a failure");
    let ev = net.tx_events(a);
    assert_eq!(ev.len(), 1, "only the error is reported: {ev:?}");
    assert_eq!(ev[0].return_code(), ReturnCode::PtlteNotFound);
}

#[test]
fn triggered_ops_fire_when_success_plus_failure_reaches_the_threshold() {
    let mut net = Net::new(1);
    let mds: Vec<Md> = (0..3)
        .map(|_| net.c.nodes[0].map(64, true, true).unwrap())
        .collect();
    let c10 = net.node(0).alloc_ct(10, Some(&mds[0])).unwrap();
    let c11 = net.node(0).alloc_ct(11, Some(&mds[1])).unwrap();
    let c12 = net.node(0).alloc_ct(12, Some(&mds[2])).unwrap();
    let mut ev = trig_cmd(CtOp::CtTrigEvent, 10, 3, 0);
    ev.eq = EQ_TX;
    let mut inc = trig_cmd(CtOp::CtTrigInc, 10, 3, 11);
    inc.ct_success = 5;
    let mut set = trig_cmd(CtOp::CtTrigSet, 10, 4, 12);
    set.ct_success = 42;
    set.set_ct_success = true;
    net.trig(0, &[&ct64(ev), &ct64(inc), &ct64(set)]);
    net.settle();
    assert_eq!(net.node(0).ack_counter(TRIGQ).unwrap(), 3, "three pending");
    assert!(net.tx_events(0).is_empty());

    let n = net.node(0);
    c10.inc_success(n, 2).unwrap();
    assert_eq!(n.ack_counter(TRIGQ).unwrap(), 3, "2 < 3: nothing fired");
    assert_eq!(read_u64(n, mds[1].host), 0);
    c10.inc_failure(n, 1).unwrap();
    // success 2 + failure 1 = 3: the TRIG_EVENT and the TRIG_INC fire.
    assert_eq!(n.ack_counter(TRIGQ).unwrap(), 1);
    assert_eq!(wb(n, &c11), (5, 0, true));
    assert_eq!(read_u64(n, mds[2].host), 0, "threshold 4 not reached");
    let evs = net.tx_events(0);
    match evs.as_slice() {
        [Event::TrigOpShort(t)] => {
            assert_eq!(
                (t.threshold, t.ct_handle, t.return_code),
                (3, 10, ReturnCode::Ok)
            );
        }
        other => panic!("{other:?}"),
    }
    let n = net.node(0);
    c10.inc_success(n, 1).unwrap();
    assert_eq!(wb(n, &c12), (42, 0, true), "TRIG_SET fired at 4");
    assert_eq!(n.ack_counter(TRIGQ).unwrap(), 0);

    // Already reached when appended: fires at once, never pending.
    let mut inc1 = trig_cmd(CtOp::CtTrigInc, 10, 1, 11);
    inc1.ct_success = 1;
    net.trig(0, &[&ct64(inc1)]);
    net.settle();
    assert_eq!(wb(net.node(0), &c11).0, 6);
    assert_eq!(net.node(0).ack_counter(TRIGQ).unwrap(), 0);

    // Cancel: pending operations go away without effect.
    let mut late_ev = trig_cmd(CtOp::CtTrigEvent, 10, 100, 0);
    late_ev.eq = EQ_TX;
    let mut late_inc = trig_cmd(CtOp::CtTrigInc, 10, 100, 11);
    late_inc.ct_success = 1000;
    net.trig(0, &[&ct64(late_ev), &ct64(late_inc)]);
    net.settle();
    assert_eq!(net.node(0).ack_counter(TRIGQ).unwrap(), 2);
    net.trig(0, &[&ct64(ct_cmd(CtOp::CtCancel, 10))]);
    net.settle();
    assert_eq!(net.node(0).ack_counter(TRIGQ).unwrap(), 0);
    c10.inc_success(net.node(0), 200).unwrap();
    net.settle();
    assert_eq!(wb(net.node(0), &c11).0, 6, "cancelled TRIG_INC never fires");
    assert!(
        net.tx_events(0).is_empty(),
        "cancelled TRIG_EVENT never fires"
    );

    // TRIG_EVENT without an EQ only writes back its trigger CT (fi_cntr_wait's use).
    c10.clear_writeback(net.node(0)).unwrap();
    let quiet = trig_cmd(CtOp::CtTrigEvent, 10, 300, 0);
    net.trig(0, &[&ct64(quiet)]);
    net.settle();
    assert_eq!(read_u64(net.node(0), mds[0].host), 0);
    c10.inc_failure(net.node(0), 2).unwrap();
    c10.clear_writeback(net.node(0)).unwrap();
    c10.inc_success(net.node(0), 94).unwrap();
    let w = wb(net.node(0), &c10);
    assert_eq!((w.0 + u64::from(w.1), w.2), (300, true));
    assert!(net.tx_events(0).is_empty());
    assert_eq!(net.node(0).ack_counter(TRIGQ).unwrap(), 0);
}

#[test]
fn triggered_chain_across_three_nics_runs_without_software() {
    // Node 0 puts to node 1 (completion on CT 20); CT 20 reaching 1 fires a DMA put from
    // node 0 to node 2; it lands on an LE of node 2 that bumps node 2's CT 30; CT 30 reaching
    // 1 fires a TRIGGERED_OP event on node 2: the last event of the chain.
    let mut net = Net::new(3);
    let (a, b, c) = (0usize, 1usize, 2usize);
    let len = 6000u32;
    let src = net.c.nodes[a].map(2 * u64::from(len), true, true).unwrap();
    let data = pattern(2 * len as usize, 0x3C);
    net.node(a).write_host(src.host, &data).unwrap();
    let dst_b = net.c.nodes[b].map(u64::from(len), true, true).unwrap();
    let dst_c = net.c.nodes[c].map(u64::from(len), true, true).unwrap();
    let wb_a = net.c.nodes[a].map(64, true, true).unwrap();
    let wb_c = net.c.nodes[c].map(64, true, true).unwrap();
    let ct20 = net.node(a).alloc_ct(20, Some(&wb_a)).unwrap();
    let ct30 = net.node(c).alloc_ct(30, Some(&wb_c)).unwrap();
    let quiet = LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE | LeFlags::EVENT_COMM_DISABLE;
    net.tgt_cmd(b, &le(PT_MATCH, 1, &dst_b, quiet, 1));
    net.tgt_cmd(
        c,
        &le_ct(PT_MATCH, 7, &dst_c, quiet | LeFlags::EVENT_CT_COMM, 7, 30),
    );
    // The triggered DMA (from node 0's trigger CQ) and node 2's final TRIG_EVENT.
    let fwd = dma(
        DmaOp::Put,
        a,
        c,
        0,
        src.iova + u64::from(len),
        len,
        7,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        0,
        0xF0D,
    );
    net.trig(a, &[&trig_dma(20, 1, EmbeddedDma::Full(fwd))]);
    let mut last = trig_cmd(CtOp::CtTrigEvent, 30, 1, 0);
    last.eq = EQ_TX;
    net.trig(c, &[&ct64(last)]);
    net.settle();
    assert_eq!(net.node(a).ack_counter(TRIGQ).unwrap(), 1);
    assert_eq!(net.node(c).ack_counter(TRIGQ).unwrap(), 1);
    assert_eq!(
        net.node(c).read_host(dst_c.host, 16).unwrap(),
        vec![0u8; 16],
        "nothing reached node 2 before the first command"
    );
    assert!(net.tx_events(a).is_empty() && net.tx_events(c).is_empty());

    // The first command; from here on only the engine runs.
    let first = dma(
        DmaOp::Put,
        a,
        b,
        0,
        src.iova,
        len,
        1,
        DmaFlags {
            event_send_disable: true,
            event_ct_ack: true,
            ..DmaFlags::default()
        },
        20,
        0xF1,
    );
    net.tx(a, &[&first.encode()]);
    let before = net.c.engine.counters();
    net.settle();
    let after = net.c.engine.counters();
    assert_eq!(
        (after.mmio_reads, after.mmio_writes),
        (before.mmio_reads, before.mmio_writes),
        "no software action between the first command and the last event"
    );
    assert!(
        after.packets > before.packets + 6,
        "the chain used the fabric"
    );

    // Every step happened.
    assert_eq!(
        net.node(b).read_host(dst_b.host, len as usize).unwrap(),
        data[..len as usize]
    );
    assert_eq!(
        net.node(c).read_host(dst_c.host, len as usize).unwrap(),
        data[len as usize..]
    );
    assert_eq!(wb(net.node(a), &ct20), (1, 0, true));
    assert_eq!(wb(net.node(c), &ct30), (1, 0, true));
    assert_eq!(net.node(a).ack_counter(TRIGQ).unwrap(), 0);
    assert_eq!(net.node(c).ack_counter(TRIGQ).unwrap(), 0);
    let ea = net.tx_events(a);
    let kinds: Vec<_> = ea.iter().map(init_fields).collect();
    assert_eq!(kinds.len(), 2, "{ea:?}");
    assert_eq!((kinds[0].0, kinds[0].3), (EventType::Ack, 0xF1));
    assert_eq!(
        (kinds[1].0, kinds[1].1, kinds[1].2, kinds[1].3),
        (EventType::Ack, ReturnCode::Ok, len, 0xF0D),
        "the triggered put completed"
    );
    match net.tx_events(c).as_slice() {
        [Event::TrigOpShort(t)] => assert_eq!((t.threshold, t.ct_handle), (1, 30)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn two_thousand_forty_eight_tles_then_the_trigger_cq_stalls() {
    let mut net = Net::new(1);
    let n0 = &mut net.c.nodes[0];
    // Pool 0 may take every TLE of the device: only the device limit (2,048) applies.
    n0.set_tle_shared(2048).unwrap();
    n0.set_tle_pool(0, 0, 4095).unwrap();
    let mut q = n0.alloc_trig_txq(2, 4096, EQ_TX, 0).unwrap();
    let md = n0.map(64, true, true).unwrap();
    let ct = n0.alloc_ct(40, Some(&md)).unwrap();
    let n = &net.c.nodes[0];
    for t in 1..=2048u64 {
        q.emit(n, &ct64(trig_cmd(CtOp::CtTrigEvent, 40, t, 0)))
            .unwrap();
    }
    q.ring(n).unwrap();
    net.settle();
    let n = &net.c.nodes[0];
    assert_eq!(n.ack_counter(2).unwrap(), 2048);
    assert_eq!(u64::from(n.cq_status(&q).unwrap().rd_ptr), q.wr_ptr());
    let total = n
        .csr_field(
            csr::C_CQ_CFG_STS_TLE_SHARED,
            0,
            f::c_cq_cfg_sts_tle_shared::NUM_TOTAL_ALLOCATED,
        )
        .unwrap();
    assert_eq!(total, 2048);
    let oversub = |n: &Node| {
        n.csr_field(csr::C_CQ_ERR_FLG, 0, f::c_cq_err_flg::TLE_OVERSUBSCRIBED)
            .unwrap()
    };
    assert_eq!(oversub(n), 0);

    // The 2,049th is refused: the queue stops at it.
    q.emit(n, &ct64(trig_cmd(CtOp::CtTrigEvent, 40, 5000, 0)))
        .unwrap();
    q.ring(n).unwrap();
    net.settle();
    let n = &net.c.nodes[0];
    assert_eq!(n.ack_counter(2).unwrap(), 2048);
    assert_eq!(
        u64::from(n.cq_status(&q).unwrap().rd_ptr) + 1,
        q.wr_ptr(),
        "the read pointer waits at the 2,049th command"
    );
    assert_eq!(
        n.cq_status(&q).unwrap().return_code,
        ReturnCode::Ok,
        "not a failure"
    );
    assert_eq!(oversub(n), 1, "c_cq_err_flg.tle_oversubscribed");
    n.csr_write(csr::C_CQ_ERR_CLR, 0, &[(f::c_cq_err_clr::ERR_CLR, 1 << 33)])
        .unwrap();
    assert_eq!(oversub(n), 0);

    // Ten fire; the waiting command takes one of the freed entries.
    ct.inc_success(n, 10).unwrap();
    net.settle();
    let n = &net.c.nodes[0];
    assert_eq!(n.ack_counter(2).unwrap(), 2048 - 10 + 1);
    assert_eq!(u64::from(n.cq_status(&q).unwrap().rd_ptr), q.wr_ptr());
    let in_use = n
        .csr_field(csr::C_CQ_STS_TLE_IN_USE, 0, f::c_cq_sts_tle_in_use::COUNT)
        .unwrap();
    assert_eq!(in_use, 2039);
    // Everything fires in the end.
    ct.inc_success(n, 5000).unwrap();
    net.settle();
    assert_eq!(net.c.nodes[0].ack_counter(2).unwrap(), 0);
}

#[test]
fn an_exhausted_pool_fills_the_ring_until_software_gets_enospc() {
    let mut net = Net::new(1);
    let n0 = &mut net.c.nodes[0];
    // Pool 1 holds four TLEs, as a service with a TLE limit of 4 gets from the driver.
    n0.set_tle_pool(1, 4, 4).unwrap();
    let mut q = n0.alloc_trig_txq(3, 64, EQ_TX, 1).unwrap();
    let md = n0.map(64, true, true).unwrap();
    let ct = n0.alloc_ct(41, Some(&md)).unwrap();
    let n = &net.c.nodes[0];
    let mut accepted = 0u64;
    let enospc = loop {
        let cmd = ct64(trig_cmd(CtOp::CtTrigEvent, 41, 100 + accepted, 0));
        match q.emit(n, &cmd) {
            Ok(()) => {
                q.ring(n).unwrap();
                net.settle();
                accepted += 1;
            }
            Err(e) => break e,
        }
        assert!(accepted < 1000, "the ring never filled");
    };
    assert!(matches!(enospc, HarnessError::CqFull(3)), "{enospc}");
    let n = &net.c.nodes[0];
    assert_eq!(n.ack_counter(3).unwrap(), 4, "the pool's limit");
    assert!(accepted > 50, "the ring filled behind the stalled command");
    // Reaching the thresholds drains everything: each firing frees an entry for the next.
    ct.inc_success(n, 10_000).unwrap();
    net.settle();
    let n = &net.c.nodes[0];
    assert_eq!(n.ack_counter(3).unwrap(), 0);
    assert_eq!(u64::from(n.cq_status(&q).unwrap().rd_ptr), q.wr_ptr());
    let max = n
        .csr_field(
            csr::C_CQ_STS_MAX_TLE_IN_USE,
            1,
            f::c_cq_sts_max_tle_in_use::MAX,
        )
        .unwrap();
    assert_eq!(max, 4, "high-water mark of pool 1");
}
