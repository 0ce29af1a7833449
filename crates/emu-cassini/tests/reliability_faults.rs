//! Reliability (docs/cassini-reliability.md) through rings and doorbells: unrestricted
//! traffic survives a fabric that drops, duplicates, reorders and corrupts packets, and
//! arrives intact and exactly once; a dead link ends in UNDELIVERABLE after the retries;
//! restricted traffic is sent once and may be lost; the counters are read through CSR space.

mod common;
use common::*;
use emu_core::fabric::{FaultConfig, PortId};
use emu_core::time::SimDuration;
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

/// The same counter summed over both nodes.
fn both(p: &Pair, view: &str, name: &str) -> u64 {
    cntr(p.init(), view, name) + cntr(p.tgt(), view, name)
}

/// A persistent priority LE over `len` bytes on the matching PtlTE (matches any bits).
fn window(p: &mut Pair, len: u64) -> Md {
    let md = p.c.nodes[TGT].map(len, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        1,
        &md,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE,
        0,
        !0,
    ));
    p.c.settle();
    md
}

/// A DMA put of `len` bytes from `local` to offset `off` of the matching PtlTE.
fn put(p: &Pair, local: u64, off: u64, len: u32, user_ptr: u64) -> [u8; 64] {
    let (dfa, ext) = p.dfa(0);
    FullDma {
        opcode: DmaOp::Put,
        index_ext: ext,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        dfa,
        remote_offset: off,
        local_addr: local,
        request_len: len,
        eq: EQ_TX,
        user_ptr,
        initiator: p.initiator(),
        ..FullDma::default()
    }
    .encode()
}

fn faults(p: &Pair, cfg: FaultConfig) {
    p.c.deterministic_engine()
        .unwrap()
        .with_fabric(|fab| fab.set_faults(cfg));
}

const N: usize = 10_000;
const SLOT: usize = 8;
const BATCH: usize = 128;

#[test]
fn ten_thousand_puts_arrive_intact_and_exactly_once_over_a_faulty_fabric() {
    let mut p = Pair::deterministic();
    let le = window(&mut p, (N * SLOT) as u64);
    let src = p.c.nodes[INIT].map((N * SLOT) as u64, true, true).unwrap();
    let data: Vec<u8> = (0..N as u64)
        .flat_map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1).to_le_bytes())
        .collect();
    p.init().write_host(src.host, &data).unwrap();
    faults(
        &p,
        FaultConfig {
            drop: 0.05,
            duplicate: 0.02,
            reorder: 0.05,
            reorder_max_delay: SimDuration::from_us(3),
            corrupt: 0.05,
            ..FaultConfig::none()
        },
    );
    let mut acks = vec![0u32; N];
    let mut tgt_events = 0usize;
    for start in (0..N).step_by(BATCH) {
        for i in start..(start + BATCH).min(N) {
            let off = (i * SLOT) as u64;
            let cmd = put(&p, src.iova + off, off, SLOT as u32, i as u64);
            p.txq.emit(&p.c.nodes[INIT], &cmd).unwrap();
        }
        p.txq.ring(&p.c.nodes[INIT]).unwrap();
        p.c.settle();
        while let Some(ev) = p.poll_tx() {
            let (ty, rc, mlength, up, _) = init_fields(&ev);
            assert_eq!(
                (ty, rc, mlength),
                (EventType::Ack, ReturnCode::Ok, SLOT as u32),
                "put {up}"
            );
            acks[up as usize] += 1;
        }
        while let Some(ev) = p.poll_tgt() {
            let t = tgt_fields(&ev);
            assert_eq!(
                (t.0, t.1, t.3),
                (EventType::Put, ReturnCode::Ok, SLOT as u64)
            );
            tgt_events += 1;
        }
    }
    // Exactly one ACK per put, one PUT event per put, every byte in place.
    let wrong: Vec<usize> = (0..N).filter(|&i| acks[i] != 1).collect();
    assert!(wrong.is_empty(), "puts without exactly one ACK: {wrong:?}");
    assert_eq!(tgt_events, N);
    assert!(p.tgt().read_host(le.host, N * SLOT).unwrap() == data);
    assert_eq!(cntr(p.tgt(), "c_lpe_cntrs", "put_cmds"), N as u64);

    // The fabric did its worst...
    let fc = p.c.engine.fabric_counters();
    assert!(fc.dropped_fault > 100, "{fc:?}");
    assert!(fc.corrupted > 100 && fc.reordered > 100 && fc.duplicated > 10);
    // ... and the PCT repaired it, as its counters show through CSR space.
    let timeouts = cntr(p.init(), "c_pct_cntrs", "spt_timeouts");
    assert!(timeouts > 0, "the initiator's retry timer fired");
    assert!(both(&p, "c_pct_cntrs", "retry_srb_requests") >= timeouts);
    assert!(both(&p, "c_pct_cntrs", "bad_seq_nacks") > 0);
    assert!(both(&p, "c_hni_cntrs", "rx_bad_opt") > 0, "CRC failures");
    assert!(both(&p, "c_ixe_cntrs", "rx_pkt_drop_pct") > 0, "duplicates");
    assert_eq!(both(&p, "c_pct_cntrs", "sct_timeouts"), 0);
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "conn_sct_open"), 1);
    assert_eq!(cntr(p.tgt(), "c_pct_cntrs", "conn_tct_open"), 1);
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "req_ordered"), N as u64);
    assert_eq!(cntr(p.tgt(), "c_pct_cntrs", "ptls_response"), N as u64);
    assert_eq!(
        cntr(p.init(), "c_pct_cntrs", "responses_received"),
        N as u64
    );
    // Every frame a port sent was counted under its traffic class (the CP's TC 1).
    let sent = both(&p, "c_hni_cntrs", "tx_ok_opt");
    assert_eq!(sent, fc.injected);
    assert_eq!(
        cntr_at(p.init(), "c_hni_cntrs", "pkts_sent_by_tc", 1)
            + cntr_at(p.tgt(), "c_hni_cntrs", "pkts_sent_by_tc", 1),
        sent
    );
    let good = both(&p, "c_hni_cntrs", "rx_ok_opt");
    let bad = both(&p, "c_hni_cntrs", "rx_bad_opt");
    assert_eq!(good + bad, fc.delivered);
}

/// The fabric link of the target's port.
fn target_link(p: &Pair) -> emu_core::fabric::LinkId {
    p.c.deterministic_engine()
        .unwrap()
        .with_fabric(|fab| fab.graph().port_link(PortId(TGT as u32)))
        .unwrap()
}

fn set_link(p: &Pair, up: bool) {
    let link = target_link(p);
    p.c.deterministic_engine()
        .unwrap()
        .with_fabric(|fab| fab.set_link_up(link, up))
        .unwrap();
}

#[test]
fn retries_exhausted_on_a_dead_link_complete_undeliverable() {
    let mut p = Pair::deterministic();
    let le = window(&mut p, 64);
    let src = p.c.nodes[INIT].map(64, true, true).unwrap();
    p.init().write_host(src.host, &pattern(64, 3)).unwrap();
    set_link(&p, false);
    let before = p.c.engine.now();
    p.tx(&[&put(&p, src.iova, 0, 64, 1)]);
    // Step the engine only until the event is there, so `now` is its time.
    let ev = init_fields(&p.wait_tx());
    assert_eq!(
        (ev.0, ev.1, ev.3),
        (EventType::Ack, ReturnCode::Undeliverable, 1)
    );
    // Eight transmissions, about 1 ms apart (spt_timeout_epoch_sel reset value), then the
    // connection is declared dead: long before the 1 s request timeout.
    let waited = p.c.engine.now().as_ns() - before.as_ns();
    assert!((7_000_000..10_000_000).contains(&waited), "{waited} ns");
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "spt_timeouts"), 8);
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "retry_srb_requests"), 7);
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "sct_timeouts"), 1);
    assert_eq!(cntr(p.tgt(), "c_lpe_cntrs", "put_cmds"), 0);
    assert!(
        p.tgt()
            .read_host(le.host, 64)
            .unwrap()
            .iter()
            .all(|&b| b == 0)
    );

    // With the link back, the next put opens a new connection and lands.
    set_link(&p, true);
    p.tx(&[&put(&p, src.iova, 0, 64, 2)]);
    p.c.settle();
    let ev = init_fields(&p.wait_tx());
    assert_eq!((ev.0, ev.1, ev.3), (EventType::Ack, ReturnCode::Ok, 2));
    assert_eq!(p.tgt().read_host(le.host, 64).unwrap(), pattern(64, 3));
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "conn_sct_open"), 2);
    assert_eq!(cntr(p.tgt(), "c_pct_cntrs", "conn_tct_open"), 1);
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "sct_timeouts"), 1);
}

#[test]
fn the_retry_timeout_is_programmable() {
    let mut p = Pair::deterministic();
    window(&mut p, 64);
    let src = p.c.nodes[INIT].map(64, true, true).unwrap();
    // spt_timeout_epoch_sel 10: 2^14 ns per try.
    let img = p.init().csr_read(csr::C_PCT_CFG_TIMING, 0).unwrap();
    let mut img = img.clone();
    f::c_pct_cfg_timing::SPT_TIMEOUT_EPOCH_SEL.set(&mut img, 10);
    p.init()
        .csr_write_image(csr::C_PCT_CFG_TIMING, 0, &img)
        .unwrap();
    assert_eq!(
        p.init()
            .csr_field(
                csr::C_PCT_CFG_TIMING,
                0,
                f::c_pct_cfg_timing::SPT_TIMEOUT_EPOCH_SEL
            )
            .unwrap(),
        10
    );
    set_link(&p, false);
    let before = p.c.engine.now();
    p.tx(&[&put(&p, src.iova, 0, 8, 1)]);
    let ev = init_fields(&p.wait_tx());
    assert_eq!((ev.0, ev.1), (EventType::Ack, ReturnCode::Undeliverable));
    let waited = p.c.engine.now().as_ns() - before.as_ns();
    assert!((8 * 16_384..1_000_000).contains(&waited), "{waited} ns");
}

#[test]
fn restricted_requests_are_sent_once_and_may_be_lost() {
    let mut p = Pair::deterministic();
    let win = p.c.nodes[TGT].map(4096, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_NOMATCH,
        PtlList::Priority,
        2,
        &win,
        LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE,
        0,
        0,
    ));
    p.c.settle();
    let src = p.c.nodes[INIT].map(4096, true, true).unwrap();
    p.init().write_host(src.host, &pattern(3000, 5)).unwrap();
    let (dfa, ext) = p.dfa(1);
    let restricted_put = |len: u32| {
        NomatchDma {
            opcode: DmaOp::NomatchPut,
            index_ext: ext,
            flags: DmaFlags {
                restricted: true,
                ..DmaFlags::default()
            },
            dfa,
            remote_offset: 0,
            local_addr: src.iova,
            request_len: len,
            ct: 0,
            eq: EQ_TX,
            lac: 0,
        }
        .encode()
    };
    // Every packet lost: the PCT does not retransmit restricted packets; the initiator's
    // request timeout reports the loss.
    faults(
        &p,
        FaultConfig {
            drop: 1.0,
            ..FaultConfig::none()
        },
    );
    let injected = p.c.engine.fabric_counters().injected;
    let before = p.c.engine.now();
    p.tx(&[&restricted_put(64)]);
    let ev = init_fields(&p.wait_tx());
    assert_eq!((ev.0, ev.1), (EventType::Ack, ReturnCode::Undeliverable));
    assert!(p.c.engine.now().as_ns() - before.as_ns() >= 1_000_000_000);
    assert_eq!(
        p.c.engine.fabric_counters().injected - injected,
        1,
        "sent once"
    );
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "req_unordered"), 1);
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "req_ordered"), 0);
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "retry_srb_requests"), 0);

    // A corrupted restricted packet is dropped at the target's port and counted.
    faults(
        &p,
        FaultConfig {
            corrupt: 1.0,
            ..FaultConfig::none()
        },
    );
    p.tx(&[&restricted_put(64)]);
    p.c.settle();
    assert_eq!(init_fields(&p.wait_tx()).1, ReturnCode::Undeliverable);
    assert_eq!(cntr(p.tgt(), "c_hni_cntrs", "rx_bad_opt"), 1);
    assert_eq!(cntr(p.tgt(), "c_lpe_cntrs", "put_cmds"), 0);
    assert!(
        p.tgt()
            .read_host(win.host, 64)
            .unwrap()
            .iter()
            .all(|&b| b == 0)
    );

    // On a clean fabric a multi-packet restricted put lands (its response comes back on
    // the reliable path); non-matching commands report errors only.
    faults(&p, FaultConfig::none());
    p.tx(&[&restricted_put(3000)]);
    p.c.settle();
    assert!(p.poll_tx().is_none());
    assert_eq!(p.tgt().read_host(win.host, 3000).unwrap(), pattern(3000, 5));
    assert_eq!(cntr(p.tgt(), "c_ixe_cntrs", "rx_ptl_restricted_pkt"), 2);
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "req_unordered"), 4);
    assert_eq!(cntr(p.init(), "c_pct_cntrs", "req_ordered"), 0);
}

#[test]
fn the_threaded_engine_retransmits_in_real_time() {
    const PUTS: usize = 600;
    const PER_RING: usize = 100;
    let mut p = Pair::threaded();
    let le = window(&mut p, (PUTS * SLOT) as u64);
    let src = p.c.nodes[INIT]
        .map((PUTS * SLOT) as u64, true, true)
        .unwrap();
    let data = pattern(PUTS * SLOT, 11);
    p.init().write_host(src.host, &data).unwrap();
    // The threaded engine applies drops, duplicates and corruption (not reorder delays).
    p.c.engine.set_faults(FaultConfig {
        drop: 0.05,
        duplicate: 0.02,
        corrupt: 0.05,
        ..FaultConfig::none()
    });
    let mut acks = vec![0u32; PUTS];
    for start in (0..PUTS).step_by(PER_RING) {
        for i in start..start + PER_RING {
            let off = (i * SLOT) as u64;
            let cmd = put(&p, src.iova + off, off, SLOT as u32, i as u64);
            p.txq.emit(&p.c.nodes[INIT], &cmd).unwrap();
        }
        p.txq.ring(&p.c.nodes[INIT]).unwrap();
        for _ in 0..PER_RING {
            let (ty, rc, _, up, _) = init_fields(&p.wait_tx());
            assert_eq!((ty, rc), (EventType::Ack, ReturnCode::Ok), "put {up}");
            acks[up as usize] += 1;
        }
        for _ in 0..PER_RING {
            assert_eq!(tgt_fields(&p.wait_tgt()).1, ReturnCode::Ok);
        }
    }
    p.c.settle();
    assert!(acks.iter().all(|&n| n == 1));
    assert!(p.poll_tx().is_none() && p.poll_tgt().is_none());
    assert!(p.tgt().read_host(le.host, PUTS * SLOT).unwrap() == data);
    assert_eq!(cntr(p.tgt(), "c_lpe_cntrs", "put_cmds"), PUTS as u64);
    assert!(both(&p, "c_pct_cntrs", "retry_srb_requests") > 0);
    assert_eq!(both(&p, "c_pct_cntrs", "sct_timeouts"), 0);
}
