//! The Cassini fault sites of `emu_core::nic_faults`, each on its own, through rings and
//! doorbells: `ct_delay` holds a counting event's write-back for `ct_delay_time` and writes
//! the newest count when it ends; `atu_miss` ends a command whose local buffer misses with an
//! initiator event `C_RC_NO_TRANSLATION` and the `err_no_translation` counter, delivering
//! nothing. A site at probability 1 fires on every chance; off, nothing changes.

mod offload_support;

use emu_core::nic_faults::NicFaults;
use emu_core::time::SimDuration;
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
