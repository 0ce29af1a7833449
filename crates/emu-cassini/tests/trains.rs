//! Trains (emu_core::fabric::Train): on the threaded engine, a restricted put of several
//! frames to a NIC of the same process goes as one packet standing for its continuation
//! frames, whose payload the target copies straight from the initiator's host memory. It
//! must land every byte, keep the SEND/ACK events' meaning and order, and leave every
//! counter the hardware keeps as the frame-by-frame path leaves it; with a fault site or a
//! capture hook on the fabric, and on the deterministic engine, frames go one by one.

mod common;
use common::*;
use emu_core::engine::threaded::ThreadedConfig;
use emu_core::fabric::{CaptureBuffer, FaultConfig};
use emu_core::time::SimDuration;

const LEN: usize = 4 << 20;
/// Frames of a `LEN` put (2 KiB each).
const FRAMES: u64 = (LEN / 2048) as u64;

/// Counters (node, view, name) that only a put's own frames move, on its initiator or its
/// target.
const PUT_COUNTERS: &[(usize, &str, &str)] = &[
    (INIT, "c1_oxe_cntrs", "ptl_tx_put_msgs_tsc"),
    (INIT, "c1_oxe_cntrs", "ptl_tx_put_pkts_tsc"),
    (INIT, "c_pct_cntrs", "req_unordered"),
    (INIT, "c_atu_cntrs", "cache_hit_base_page_size"),
    (TGT, "c_ixe_cntrs", "rx_ptl_restricted_pkt"),
    (TGT, "c_ixe_cntrs", "rx_ptl_continuation_pkt"),
    (TGT, "c_ixe_cntrs", "rx_ptl_multi_msgs"),
    (TGT, "c_atu_cntrs", "cache_hit_base_page_size"),
];

/// Bytes on the wire of a response without data, and of a standalone PCT acknowledgement.
const RESPONSE_BYTES: u64 = 56;
const PCT_ACK_BYTES: u64 = 40;

/// What one put left behind: the counters its frames move, and the packets and bytes of its
/// frames as the fabric counted them. (The ACK travels sequenced: on the threaded engine a
/// late PCT acknowledgement may have it sent again, so the packets of the way back are
/// checked for consistency but not compared.)
#[derive(Debug, PartialEq, Eq)]
struct Moved {
    counters: Vec<u64>,
    put_packets: u64,
    put_bytes: u64,
}

/// Set up a `LEN` landing buffer on the target and a source of `data` on the initiator;
/// returns the source and destination.
fn prepare(p: &mut Pair, data: &[u8]) -> (Md, Md) {
    let src = p.c.nodes[INIT].map(LEN as u64, true, false).unwrap();
    p.init().write_host(src.host, data).unwrap();
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
    (src, dst)
}

/// The put command of `LEN` bytes from `src` (restricted, or sequenced by the PCT).
fn put_cmd(p: &Pair, src: &Md, restricted: bool) -> [u8; 64] {
    let (dfa, ext) = p.dfa(1);
    FullDma {
        opcode: DmaOp::Put,
        index_ext: ext,
        lac: 0,
        dfa,
        local_addr: src.iova,
        request_len: LEN as u32,
        eq: EQ_TX,
        user_ptr: 0x7a17,
        initiator: p.initiator(),
        flags: DmaFlags {
            restricted,
            ..DmaFlags::default()
        },
        ..FullDma::default()
    }
    .encode()
}

/// One restricted `LEN` put on `p`: every byte lands, SEND then ACK (both OK) on the
/// initiator, PUT on the target. Returns what it moved.
fn put(p: &mut Pair) -> Moved {
    let data = pattern(LEN, 0x5a);
    let (src, dst) = prepare(p, &data);
    let before = p.c.engine.fabric_counters();
    let counters_before = read_counters(p);
    let hni = |p: &Pair, node: usize, name: &str| p.c.nodes[node].counter("c_hni_cntrs", name);
    let hni_before: Vec<u64> = [(INIT, "tx_ok_opt"), (TGT, "tx_ok_opt"), (TGT, "rx_ok_opt")]
        .iter()
        .map(|&(n, c)| hni(p, n, c).unwrap())
        .collect();
    p.tx(&[&put_cmd(p, &src, true)]);
    p.c.settle();
    let send = init_fields(&p.wait_tx());
    assert_eq!(
        (send.0, send.1, send.2),
        (EventType::Send, ReturnCode::Ok, LEN as u32)
    );
    let ack = init_fields(&p.wait_tx());
    assert_eq!(
        (ack.0, ack.1, ack.2, ack.3),
        (EventType::Ack, ReturnCode::Ok, LEN as u32, 0x7a17)
    );
    let ev = tgt_fields(&p.wait_tgt());
    assert_eq!((ev.0, ev.1), (EventType::Put, ReturnCode::Ok));
    assert!(
        p.tgt().read_host(dst.host, LEN).unwrap() == data,
        "not every byte landed"
    );
    let after = p.c.engine.fabric_counters();
    let counters: Vec<u64> = read_counters(p)
        .into_iter()
        .zip(counters_before)
        .map(|(a, b)| a - b)
        .collect();
    let init_tx = hni(p, INIT, "tx_ok_opt").unwrap() - hni_before[0];
    let tgt_tx = hni(p, TGT, "tx_ok_opt").unwrap() - hni_before[1];
    let tgt_rx = hni(p, TGT, "rx_ok_opt").unwrap() - hni_before[2];
    let (unordered, restricted_rx) = (counters[2], counters[4]);
    let injected = after.injected - before.injected;
    let bytes = after.bytes_injected - before.bytes_injected;
    // Every frame a NIC counted as sent, the fabric counted as injected, and delivered.
    assert_eq!(injected, init_tx + tgt_tx, "fabric and NICs disagree");
    assert_eq!(after.delivered - before.delivered, injected);
    // The initiator's other packets (acknowledgements of the ACK) all reached the target.
    assert_eq!(init_tx - unordered, tgt_rx - restricted_rx);
    Moved {
        counters,
        put_packets: injected - tgt_tx - (init_tx - unordered),
        put_bytes: bytes - RESPONSE_BYTES * tgt_tx - PCT_ACK_BYTES * (init_tx - unordered),
    }
}

fn read_counters(p: &Pair) -> Vec<u64> {
    PUT_COUNTERS
        .iter()
        .map(|&(node, view, name)| p.c.nodes[node].counter(view, name).unwrap())
        .collect()
}

/// Packets handed to the NICs while `f` ran.
fn deliveries(p: &mut Pair, f: impl FnOnce(&mut Pair) -> Moved) -> (Moved, u64) {
    let before = p.c.engine.counters().packets;
    let m = f(p);
    (m, p.c.engine.counters().packets - before)
}

#[test]
fn a_long_restricted_put_goes_as_one_train_and_counts_as_its_frames() {
    // Frame by frame: the deterministic engine.
    let mut det = Pair::deterministic();
    let (frame_by_frame, det_packets) = deliveries(&mut det, put);
    assert!(
        det_packets > FRAMES,
        "the deterministic engine delivered {det_packets} packets for {FRAMES} frames"
    );

    // A train: the threaded engine, nothing on the fabric that needs the bytes.
    let mut thr = Pair::threaded();
    let (train, thr_packets) = deliveries(&mut thr, put);
    assert!(
        thr_packets <= 4,
        "{thr_packets} packets handed to the NICs: the put did not go as a train"
    );
    assert_eq!(
        train, frame_by_frame,
        "a train must count as the frames it stands for"
    );
    // The counts are the frames' (not just equal to each other).
    assert_eq!(train.put_packets, FRAMES);
    assert_eq!(train.counters[1], FRAMES, "ptl_tx_put_pkts");
    assert_eq!(train.counters[5], FRAMES - 1, "rx_ptl_continuation_pkt");
}

#[test]
fn with_a_capture_hook_or_a_fault_site_the_frames_go_one_by_one() {
    // Capture (`nicemu trace`): every frame is seen with its bytes.
    let mut p = Pair::threaded();
    let buf = CaptureBuffer::new();
    let t = p.c.threaded_engine().unwrap().clone();
    t.with_fabric(|f| f.set_capture(Some(buf.clone())));
    let (captured, packets) = deliveries(&mut p, put);
    assert!(
        packets > FRAMES,
        "{packets} packets delivered under capture"
    );
    let seen = buf.take();
    assert!(
        seen.len() as u64 > FRAMES,
        "the capture saw {} packets",
        seen.len()
    );
    assert!(seen.iter().all(|(_, pkt)| pkt.train.is_none()));
    t.with_fabric(|f| f.set_capture(None));

    // A fault site on (reordering, whose delays the immediate threaded fabric ignores, so
    // the put still completes): frames again.
    let mut q = Pair::threaded();
    q.c.engine.set_faults(FaultConfig {
        reorder: 0.5,
        reorder_max_delay: SimDuration::from_ns(1),
        ..FaultConfig::none()
    });
    let (faulty, packets) = deliveries(&mut q, put);
    assert!(
        packets > FRAMES,
        "{packets} packets delivered with faults on"
    );
    assert_eq!(faulty, captured, "both per-frame runs count alike");
}

/// The SEND event of a put sent as a train says its source buffer may be reused: it must not
/// come before the target has copied the bytes. With no engine thread and nothing delivered
/// inline, nothing moves after the doorbell until the test makes progress: no SEND event may
/// be there yet, and once it is, every byte has landed. Restricted and sequenced puts.
#[test]
fn a_train_s_send_event_follows_the_copy() {
    for restricted in [true, false] {
        let cfg = ThreadedConfig {
            workers: 0,
            inline_budget: 0,
            ..ThreadedConfig::default()
        };
        let c = Cluster::threaded_with(2, cfg).unwrap();
        let mut p = Pair::with_tgt_eq(c, EqOpts::default());
        let data = pattern(LEN, 0x2e);
        let (src, dst) = prepare(&mut p, &data);
        let packets = p.c.engine.counters().packets;
        p.tx(&[&put_cmd(&p, &src, restricted)]);
        assert!(
            p.poll_tx().is_none(),
            "restricted {restricted}: a SEND event before the train was delivered"
        );
        assert!(
            p.tgt().read_host(dst.host, 4096).unwrap() != data[..4096],
            "bytes landed before any delivery"
        );
        let send = init_fields(&p.wait_tx());
        assert_eq!((send.0, send.1), (EventType::Send, ReturnCode::Ok));
        assert!(
            p.tgt().read_host(dst.host, LEN).unwrap() == data,
            "restricted {restricted}: SEND came before every byte landed"
        );
        let ack = init_fields(&p.wait_tx());
        assert_eq!((ack.0, ack.1), (EventType::Ack, ReturnCode::Ok));
        assert_eq!(tgt_fields(&p.wait_tgt()).1, ReturnCode::Ok);
        assert!(
            p.c.engine.counters().packets - packets < 64,
            "restricted {restricted}: the put did not go as trains"
        );
    }
}

/// A sequenced (unrestricted) put streams through the PCT's window: on the threaded engine
/// each window's room goes as one train, which takes the sequence numbers of all its frames
/// and is acknowledged as they would be. Every byte lands, SEND comes before ACK, and the
/// counters of the put's frames are those of the same put on the deterministic engine.
#[test]
fn a_sequenced_put_goes_as_one_train_per_window() {
    fn sequenced(p: &mut Pair) -> (Vec<u64>, u64) {
        const NAMES: &[(usize, &str, &str)] = &[
            (INIT, "c1_oxe_cntrs", "ptl_tx_put_pkts_tsc"),
            (INIT, "c_pct_cntrs", "req_ordered"),
            (INIT, "c_atu_cntrs", "cache_hit_base_page_size"),
            (TGT, "c_ixe_cntrs", "rx_ptl_continuation_pkt"),
            (TGT, "c_ixe_cntrs", "rx_ptl_multi_msgs"),
            (TGT, "c_atu_cntrs", "cache_hit_base_page_size"),
        ];
        let read = |p: &Pair| -> Vec<u64> {
            NAMES
                .iter()
                .map(|&(n, v, c)| p.c.nodes[n].counter(v, c).unwrap())
                .collect()
        };
        let data = pattern(LEN, 0x93);
        let (src, dst) = prepare(p, &data);
        let before = read(p);
        let packets = p.c.engine.counters().packets;
        p.tx(&[&put_cmd(p, &src, false)]);
        p.c.settle();
        let send = init_fields(&p.wait_tx());
        assert_eq!(
            (send.0, send.1, send.2),
            (EventType::Send, ReturnCode::Ok, LEN as u32)
        );
        let ack = init_fields(&p.wait_tx());
        assert_eq!(
            (ack.0, ack.1, ack.3),
            (EventType::Ack, ReturnCode::Ok, 0x7a17)
        );
        assert_eq!(tgt_fields(&p.wait_tgt()).1, ReturnCode::Ok);
        assert!(
            p.tgt().read_host(dst.host, LEN).unwrap() == data,
            "not every byte landed"
        );
        let moved = read(p)
            .into_iter()
            .zip(before)
            .map(|(a, b)| a - b)
            .collect();
        (moved, p.c.engine.counters().packets - packets)
    }
    let (frame_by_frame, det_packets) = sequenced(&mut Pair::deterministic());
    assert!(
        det_packets > FRAMES,
        "{det_packets} packets on the deterministic engine"
    );
    let (train, thr_packets) = sequenced(&mut Pair::threaded());
    // Two windows' worth of trains, their acknowledgements, the ACK and its acknowledgement
    // (plus any the threaded engine's real-time PCT timers added); far below the frames.
    assert!(
        thr_packets < 64,
        "{thr_packets} packets handed to the NICs: the put did not go as trains"
    );
    assert_eq!(train, frame_by_frame);
    assert_eq!(train[0], FRAMES, "ptl_tx_put_pkts");
    assert_eq!(train[1], FRAMES, "req_ordered");
    assert_eq!(train[3], FRAMES - 1, "rx_ptl_continuation_pkt");
}
