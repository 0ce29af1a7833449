//! The Cassini fault sites of `emu_core::nic_faults`, each on its own, through rings and
//! doorbells: `ct_delay` holds a counting event's write-back for `ct_delay_time` and writes
//! the newest count when it ends; `atu_miss` ends a command whose local buffer misses with an
//! initiator event `C_RC_NO_TRANSLATION` and the `err_no_translation` counter, delivering
//! nothing; `eq_full` and `le_exhaust` take a flow-controlled PtlTE to DISABLED (reason
//! FC_EQ_FULL / FC_UNEXPECTED_FAIL, sender sees PT_DISABLED) or, without flow control, drop
//! the request with ENTRY_NOT_FOUND, each counted by its LPE counter; `slow_target` holds
//! every arriving packet (the acknowledgement at the initiator too) for `slow_target_time`
//! and processes them in order when it ends. A site at probability 1 fires on every chance;
//! off, nothing changes.

mod offload_support;

use emu_core::nic_faults::NicFaults;
use emu_core::time::SimDuration;
use firmware_spec::cassini::event::StateChangeFields;
use firmware_spec::cassini::le::ScReason;
use offload_support::*;

fn engine(net: &Net) -> &emu_core::engine::deterministic::Deterministic {
    net.c.deterministic_engine().expect("deterministic engine")
}

fn success(n: &Node, host: u64) -> u64 {
    read_u64(n, host) & ((1 << 48) - 1)
}

#[test]
fn ct_delay_holds_a_write_back_and_writes_the_newest_count_when_it_ends() {
    let mut net = Net::new(1);
    let md = net.c.nodes[0].map(64, true, true).unwrap();
    let ct = net.node(0).alloc_ct(9, Some(&md)).unwrap();
    net.c.engine.set_nic_faults(NicFaults {
        ct_delay: 1.0,
        ct_delay_time: SimDuration::from_us(5),
        ..NicFaults::none()
    });
    let start = engine(&net).now();
    let n = net.node(0);
    ct.inc_success(n, 5).unwrap();
    assert_eq!(read_u64(n, md.host), 0, "the write-back is held");
    ct.inc_success(n, 2).unwrap();
    engine(&net).run_until(start + SimDuration::from_us(4));
    assert_eq!(read_u64(net.node(0), md.host), 0, "still held after 4 us");
    engine(&net).run_until(start + SimDuration::from_us(6));
    assert_eq!(
        success(net.node(0), md.host),
        7,
        "one write-back with the newest count, never the older 5"
    );
    assert!(net.c.engine.nic_fault_counters().ct_delay >= 1);

    // Off again: a write-back reaches memory with its doorbell.
    net.c.engine.set_nic_faults(NicFaults::none());
    ct.inc_success(net.node(0), 1).unwrap();
    assert_eq!(success(net.node(0), md.host), 8);
}

#[test]
fn atu_miss_ends_a_put_with_no_translation_and_delivers_nothing() {
    let (a, b) = (0, 1);
    let mut net = Net::new(2);
    let src = net.c.nodes[a].map(4096, true, true).unwrap();
    net.node(a).write_host(src.host, &[0xAB; 256]).unwrap();
    let dst = net.c.nodes[b].map(4096, true, true).unwrap();
    net.tgt_cmd(b, &le(PT_MATCH, 1, &dst, LeFlags::OP_PUT, 1));
    net.settle();
    assert_eq!(net.tgt_events(b).len(), 1, "the LE's LINK event");
    let before = net
        .node(a)
        .counter("c1_oxe_cntrs", "err_no_translation")
        .unwrap();

    net.c.engine.set_nic_faults(NicFaults {
        atu_miss: 1.0,
        ..NicFaults::none()
    });
    let put = dma(
        DmaOp::Put,
        a,
        b,
        0,
        src.iova,
        256,
        1,
        DmaFlags::default(),
        0,
        0x11,
    )
    .encode();
    net.tx(a, &[&put]);
    net.settle();
    let ev = net.tx_events(a);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].return_code(), ReturnCode::NoTranslation);
    assert_eq!(
        net.node(b).read_host(dst.host, 256).unwrap(),
        vec![0u8; 256],
        "nothing delivered"
    );
    assert!(net.tgt_events(b).is_empty());
    assert_eq!(
        net.node(a)
            .counter("c1_oxe_cntrs", "err_no_translation")
            .unwrap(),
        before + 1
    );
    assert!(net.c.engine.nic_fault_counters().atu_miss >= 1);

    // Off again: the same command succeeds.
    net.c.engine.set_nic_faults(NicFaults::none());
    let put = dma(
        DmaOp::Put,
        a,
        b,
        0,
        src.iova,
        256,
        1,
        DmaFlags::default(),
        0,
        0x12,
    )
    .encode();
    net.tx(a, &[&put]);
    net.settle();
    let ev = net.tx_events(a);
    assert!(
        ev.iter().all(|e| e.return_code() == ReturnCode::Ok),
        "{ev:?}"
    );
    assert_eq!(
        net.node(b).read_host(dst.host, 256).unwrap(),
        vec![0xAB; 256]
    );
}

/// A PtlTE of node `b` at `PT_SITE` (portal index `IDX_SITE`, long events on `EQ_TGT`) with
/// `opts`, enabled, its STATE_CHANGE consumed.
const PT_SITE: u16 = 12;
const IDX_SITE: u32 = 6;

fn site_pte(net: &mut Net, b: usize, opts: PtAllocOpts) {
    net.node(b)
        .alloc_pte(
            PT_SITE,
            EQ_TGT,
            PtAllocOpts::IS_MATCHING | PtAllocOpts::USE_LONG_EVENT | opts,
            VNI,
            PID,
            IDX_SITE,
            0,
            IDX_SITE,
        )
        .unwrap();
    net.enable(b, PT_SITE);
}

/// Two nodes; node `b` has the site PtlTE (flow-controlled or not), node `a` a 4 KiB
/// source buffer whose first 256 bytes are `fill`.
fn site_net(a: usize, b: usize, flow_control: bool, fill: u8) -> (Net, Md) {
    let mut net = Net::new(2);
    let opts = if flow_control {
        PtAllocOpts::EN_FLOWCTRL
    } else {
        PtAllocOpts::empty()
    };
    site_pte(&mut net, b, opts);
    let src = net.c.nodes[a].map(4096, true, true).unwrap();
    net.node(a).write_host(src.host, &[fill; 256]).unwrap();
    (net, src)
}

/// A 256 B put from node `a` to `PT_SITE` of node `b` with match bits 1.
fn put_to_site(net: &mut Net, a: usize, b: usize, src: &Md, user_ptr: u64) {
    let put = dma(
        DmaOp::Put,
        a,
        b,
        IDX_SITE,
        src.iova,
        256,
        1,
        DmaFlags::default(),
        0,
        user_ptr,
    )
    .encode();
    net.tx(a, &[&put]);
}

fn lpe(n: &Node, name: &str) -> u64 {
    n.counter("c_lpe_cntrs", name).unwrap()
}

/// The acknowledgements among `ev`.
fn acks(ev: &[Event]) -> Vec<&Event> {
    ev.iter()
        .filter(|e| e.event_type() == EventType::Ack)
        .collect()
}

/// The return code of a put's ACK event, and the target events it caused.
fn put_outcome(net: &mut Net, a: usize, b: usize) -> (ReturnCode, Vec<Event>) {
    net.settle();
    let ev = net.tx_events(a);
    let ack = acks(&ev);
    assert_eq!(ack.len(), 1, "{ev:?}");
    (ack[0].return_code(), net.tgt_events(b))
}

fn state_changes(ev: &[Event]) -> Vec<StateChangeFields> {
    ev.iter()
        .filter_map(|e| match e {
            Event::TargetLong(t) => t.state_change().map(|f| f.unwrap()),
            Event::TargetShort(t) => t.state_change().map(|f| f.unwrap()),
            _ => None,
        })
        .collect()
}

#[test]
fn eq_full_disables_a_flow_controlled_ptlte_and_drops_without_flow_control() {
    let (a, b) = (0, 1);
    for flow_control in [true, false] {
        let (mut net, src) = site_net(a, b, flow_control, 0x5A);
        let dst = net.c.nodes[b].map(4096, true, true).unwrap();
        net.tgt_cmd(b, &le(PT_SITE, 1, &dst, LeFlags::OP_PUT, 1));
        net.settle();
        assert_eq!(net.tgt_events(b).len(), 1, "the LE's LINK event");
        let (disabled, not_found) = (
            lpe(net.node(b), "err_pt_disabled_eq_full"),
            lpe(net.node(b), "err_entry_not_found_eq_full"),
        );

        net.c.engine.set_nic_faults(NicFaults {
            eq_full: 1.0,
            ..NicFaults::none()
        });
        put_to_site(&mut net, a, b, &src, 0x21);
        let (rc, tgt) = put_outcome(&mut net, a, b);
        assert_eq!(
            net.node(b).read_host(dst.host, 256).unwrap(),
            vec![0u8; 256],
            "nothing delivered (flow control {flow_control})"
        );
        assert!(net.c.engine.nic_fault_counters().eq_full >= 1);
        if flow_control {
            assert_eq!(rc, ReturnCode::PtDisabled);
            let sc = state_changes(&tgt);
            assert_eq!(
                tgt.len(),
                1,
                "only the STATE_CHANGE, in the reserved slot: {tgt:?}"
            );
            assert_eq!(
                (sc[0].ptlte_state, sc[0].sc_reason, sc[0].sc_nic_auto),
                (PtlteState::Disabled, ScReason::FcEqFull, true)
            );
            assert_eq!(lpe(net.node(b), "err_pt_disabled_eq_full"), disabled + 1);
        } else {
            assert_eq!(rc, ReturnCode::EntryNotFound);
            assert!(tgt.is_empty(), "no room for an event: {tgt:?}");
            assert_eq!(
                lpe(net.node(b), "err_entry_not_found_eq_full"),
                not_found + 1
            );
        }

        // Off again: without flow control the PtlTE stayed enabled and takes the same put.
        net.c.engine.set_nic_faults(NicFaults::none());
        if !flow_control {
            put_to_site(&mut net, a, b, &src, 0x22);
            let (rc, tgt) = put_outcome(&mut net, a, b);
            assert_eq!(rc, ReturnCode::Ok);
            assert_eq!(tgt.len(), 1, "{tgt:?}");
            assert_eq!(
                net.node(b).read_host(dst.host, 256).unwrap(),
                vec![0x5A; 256]
            );
        }
    }
}

#[test]
fn le_exhaust_refuses_an_unexpected_header_and_counts_it() {
    let (a, b) = (0, 1);
    for flow_control in [true, false] {
        let (mut net, src) = site_net(a, b, flow_control, 0xC3);
        // No priority entry: the put lands in an overflow buffer and keeps an unexpected
        // header, which needs a list entry from the PtlTE's pool.
        let ovf = net.c.nodes[b].map(4096, true, true).unwrap();
        net.tgt_cmd(
            b,
            &le_cmd(
                TgtOp::Append,
                PT_SITE,
                PtlList::Overflow,
                2,
                &ovf,
                LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL,
                0,
                u64::MAX,
            ),
        );
        net.settle();
        assert_eq!(net.tgt_events(b).len(), 1, "the overflow LE's LINK event");
        let (disabled, not_found) = (
            lpe(net.node(b), "err_pt_disabled_cant_alloc_unexpected"),
            lpe(net.node(b), "err_entry_not_found_cant_alloc_unexpected"),
        );

        net.c.engine.set_nic_faults(NicFaults {
            le_exhaust: 1.0,
            ..NicFaults::none()
        });
        put_to_site(&mut net, a, b, &src, 0x31);
        let (rc, tgt) = put_outcome(&mut net, a, b);
        assert!(net.c.engine.nic_fault_counters().le_exhaust >= 1);
        assert_eq!(
            net.node(b).read_host(ovf.host, 256).unwrap(),
            vec![0u8; 256],
            "nothing landed in the overflow buffer (flow control {flow_control})"
        );
        if flow_control {
            assert_eq!(rc, ReturnCode::PtDisabled);
            let sc = state_changes(&tgt);
            assert_eq!(sc.len(), 1, "{tgt:?}");
            assert_eq!(
                (sc[0].ptlte_state, sc[0].sc_reason),
                (PtlteState::Disabled, ScReason::FcUnexpectedFail)
            );
            assert_eq!(
                lpe(net.node(b), "err_pt_disabled_cant_alloc_unexpected"),
                disabled + 1
            );
        } else {
            assert_eq!(rc, ReturnCode::EntryNotFound);
            assert!(
                tgt.iter()
                    .all(|e| e.return_code() == ReturnCode::EntryNotFound),
                "{tgt:?}"
            );
            assert_eq!(
                lpe(net.node(b), "err_entry_not_found_cant_alloc_unexpected"),
                not_found + 1
            );
            // Off again: the same put is kept as an unexpected message.
            net.c.engine.set_nic_faults(NicFaults::none());
            put_to_site(&mut net, a, b, &src, 0x32);
            let (rc, tgt) = put_outcome(&mut net, a, b);
            assert_eq!(rc, ReturnCode::Ok);
            let put = tgt.iter().find_map(|e| match e {
                Event::TargetLong(t) if t.event_type == EventType::Put => Some(t),
                _ => None,
            });
            assert_eq!(put.map(|t| t.ptl_list), Some(PtlList::Overflow), "{tgt:?}");
            assert_eq!(
                net.node(b).read_host(ovf.host, 256).unwrap(),
                vec![0xC3; 256]
            );
        }
    }
}

#[test]
fn slow_target_holds_arriving_packets_and_processes_them_in_order_when_it_ends() {
    let (a, b) = (0, 1);
    let mut net = Net::new(2);
    let src = net.c.nodes[a].map(4096, true, true).unwrap();
    net.node(a).write_host(src.host, &[1; 256]).unwrap();
    net.node(a).write_host(src.host + 256, &[2; 256]).unwrap();
    let dst = net.c.nodes[b].map(4096, true, true).unwrap();
    // MANAGE_LOCAL: the two puts land one after the other, in arrival order.
    net.tgt_cmd(
        b,
        &le(
            PT_MATCH,
            1,
            &dst,
            LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL,
            1,
        ),
    );
    net.settle();
    assert_eq!(net.tgt_events(b).len(), 1, "the LE's LINK event");

    let stall = SimDuration::from_us(20);
    net.c.engine.set_nic_faults(NicFaults {
        slow_target: 1.0,
        slow_target_time: stall,
        ..NicFaults::none()
    });
    let start = engine(&net).now();
    let puts: Vec<[u8; 64]> = (0..2u64)
        .map(|i| {
            dma(
                DmaOp::Put,
                a,
                b,
                0,
                src.iova + 256 * i,
                256,
                1,
                DmaFlags::default(),
                0,
                0x40 + i,
            )
            .encode()
        })
        .collect();
    net.tx(a, &[&puts[0], &puts[1]]);
    engine(&net).run_until(start + SimDuration::from_us(18));
    assert!(net.tgt_events(b).is_empty(), "held by the stall");
    assert_eq!(
        net.node(b).read_host(dst.host, 512).unwrap(),
        vec![0u8; 512],
        "nothing placed during the stall"
    );
    // The stall ends 20 us after the first arrival; the acknowledgements then stall at the
    // initiator in turn.
    engine(&net).run_until(start + SimDuration::from_us(25));
    let tgt = net.tgt_events(b);
    assert_eq!(tgt.len(), 2, "{tgt:?}");
    let mut want = vec![1u8; 256];
    want.extend([2u8; 256]);
    assert_eq!(
        net.node(b).read_host(dst.host, 512).unwrap(),
        want,
        "both placed, in the order sent"
    );
    let early = net.tx_events(a);
    assert!(
        acks(&early).is_empty(),
        "the acknowledgements wait out the initiator's own stall: {early:?}"
    );
    net.settle();
    let ev = net.tx_events(a);
    let ack = acks(&ev);
    assert_eq!(ack.len(), 2, "{ev:?}");
    assert!(ack.iter().all(|e| e.return_code() == ReturnCode::Ok));
    assert!(net.c.engine.nic_fault_counters().slow_target >= 2);
}
