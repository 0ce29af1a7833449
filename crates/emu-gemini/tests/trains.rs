//! Trains (emu_core::fabric::Train) on the Gemini BTE: on the threaded engine, the frames of
//! a BTE PUT that the step and the flow-control window let out together go as one packet
//! standing for them, whose payload the target copies straight from the initiator's host
//! memory. It must land every byte, keep the local, global and remote events' meaning and
//! order (the local event only once the data was placed), and leave every counter of the
//! NICs and the fabric as the frame-by-frame path leaves it; with a fault site or a capture
//! hook on the fabric, and on the deterministic engine, frames go one by one. A BTE GET's
//! requests go as trains too, answered by one train of the target's memory.

mod common;

use common::*;
use emu_core::engine::threaded::ThreadedConfig;
use emu_core::fabric::{CaptureBuffer, FabricCounters, FaultConfig};
use emu_core::time::SimDuration;
use emu_gemini::cluster::{Cluster, ClusterConfig};
use emu_gemini::config::GeminiConfig;
use emu_gemini::host::{Local, Nic, Region, Remote, rdma_txd};
use emu_gemini::regs::counter;
use firmware_spec::gemini::bte::{TxDescriptor, TxdMode1};
use firmware_spec::gemini::cqe::{CqeSource, HwStatus};

const LEN: u64 = 4 << 20;
/// Frames of a `LEN` PUT (16 KiB each, the default `bte_packet_bytes`).
const FRAMES: u64 = LEN / (16 * 1024);
const BIG_MDH: u16 = 3;
const TGT: usize = 1;

/// NIC parameters of these tests: unpaced steps of 1 MiB, so a step is not what limits a
/// train (the flow-control window of 512 KiB, 32 frames, is).
fn nic_config() -> GeminiConfig {
    GeminiConfig {
        bte_bandwidth: 0,
        bte_step_bytes: 1 << 20,
        ..GeminiConfig::new(0)
    }
}

fn deterministic() -> Cluster {
    let mut cfg = ClusterConfig::deterministic([1, 1, 1], 7);
    cfg.nic = nic_config();
    Cluster::new(cfg).unwrap()
}

fn threaded_with(tc: ThreadedConfig) -> Cluster {
    let mut cfg = ClusterConfig::threaded([1, 1, 1], tc);
    cfg.nic = nic_config();
    Cluster::new(cfg).unwrap()
}

fn threaded() -> Cluster {
    threaded_with(ThreadedConfig {
        workers: 1,
        seed: 5,
        ..ThreadedConfig::default()
    })
}

/// A BTE descriptor of `op` moving `LEN` bytes between the starts of `local` (this node)
/// and `remote` (node `TGT`), its events to `LOCAL_CQ`.
fn txd(
    op: TxdMode1,
    local: &Region,
    remote: &Region,
    events: TxdMode1,
    data: u64,
    user_data: u64,
) -> TxDescriptor {
    rdma_txd(
        op,
        PTAG,
        Local {
            mdh: local.mdh,
            offset: local.off(0),
        },
        Remote {
            pe: TGT as u32,
            mdh: remote.mdh,
            offset: remote.off(0),
        },
        LEN,
        LOCAL_CQ,
        events,
        data,
        user_data,
    )
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9) >> 7 ^ seed) as u8)
        .collect()
}

fn region(nic: &Nic, cq: Option<u16>) -> Region {
    let a = nic.alloc(LEN).unwrap();
    nic.register(BIG_MDH, PTAG, a, LEN, true, cq).unwrap()
}

fn counters(nic: &Nic) -> Vec<u64> {
    (0..counter::COUNT)
        .map(|c| nic.counter(c).unwrap())
        .collect()
}

/// What one PUT left behind: every counter of both NICs, the fabric's counters, and the
/// packets the engine handed to the NICs.
#[derive(Debug)]
struct Moved {
    nic_counters: [Vec<u64>; 2],
    fabric: FabricCounters,
    packets: u64,
}

fn diff(a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

/// One `LEN` BTE PUT from NIC 0 to NIC 1 with local, global and remote events: the local
/// event, then the global one, on the initiator; the remote event on the target; every
/// byte landed when the global event is seen, and when the local one is if `trains` (frame
/// by frame, the local event may come as soon as the last frame left with its copy of the
/// data).
fn put(j: &mut Job, trains: bool) -> Moved {
    let (n0, n1) = (j.nic(0).clone(), j.nic(TGT).clone());
    let src = region(&n0, None);
    let dst = region(&n1, Some(REMOTE_CQ));
    let data = pattern(3, LEN as usize);
    n0.write_mem(src.addr, &data).unwrap();
    let mut ch = n0.bte_enable(0, 0, 16, 0, false).unwrap();
    let before = [counters(&n0), counters(&n1)];
    let fabric_before = j.c.engine.fabric_counters();
    let packets = j.c.engine.counters().packets;
    let txd = txd(
        TxdMode1::PUT,
        &src,
        &dst,
        TxdMode1::CQ_LOCAL | TxdMode1::CQ_GLOBAL,
        0x31,
        0x1031,
    );
    n0.bte_post(&mut ch, &txd).unwrap();
    let local = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(local.source(), Ok(CqeSource::Bte));
    assert_eq!((local.status(), local.data()), (Ok(HwStatus::Ok), 0x31));
    let mut got = vec![0u8; LEN as usize];
    if trains {
        n1.read_mem(dst.addr, &mut got).unwrap();
        assert!(got == data, "the local event came before every byte landed");
    }
    let global = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((global.status(), global.data()), (Ok(HwStatus::Ok), 0x1031));
    n1.read_mem(dst.addr, &mut got).unwrap();
    assert!(
        got == data,
        "the global event came before every byte landed"
    );
    let remote = n1.cq_wait(&mut j.nodes[TGT].remote_cq).unwrap();
    assert_eq!(
        (remote.source(), remote.data()),
        (Ok(CqeSource::RmtDreq), 0x1031)
    );
    assert_eq!(n0.bte_completed(0).unwrap(), 1);
    assert_eq!(n0.cq_poll(&mut j.nodes[0].local_cq).unwrap(), None);
    let after = [counters(&n0), counters(&n1)];
    let f = j.c.engine.fabric_counters();
    Moved {
        nic_counters: [diff(&after[0], &before[0]), diff(&after[1], &before[1])],
        fabric: FabricCounters {
            injected: f.injected - fabric_before.injected,
            bytes_injected: f.bytes_injected - fabric_before.bytes_injected,
            delivered: f.delivered - fabric_before.delivered,
            ..FabricCounters::default()
        },
        packets: j.c.engine.counters().packets - packets,
    }
}

#[test]
fn a_bte_put_goes_as_trains_and_counts_as_its_frames() {
    let det = put(&mut job(deterministic()), false);
    assert!(
        det.packets > 2 * FRAMES,
        "the deterministic engine handed {} packets for {FRAMES} frames and their answers",
        det.packets
    );
    let thr = put(&mut job(threaded()), true);
    assert!(
        thr.packets <= 2 * FRAMES / 16,
        "{} packets handed to the NICs: the PUT did not go as trains",
        thr.packets
    );
    assert_eq!(thr.nic_counters, det.nic_counters, "NIC counters");
    assert_eq!(thr.fabric, det.fabric, "fabric counters");
    // The counts are the frames' (not only equal to each other): the PUT's frames, the
    // remote event, and an answer for each.
    let c = &thr.nic_counters[0];
    assert_eq!(c[counter::PACKETS_TX as usize], FRAMES + 1);
    assert_eq!(c[counter::PACKETS_RX as usize], FRAMES + 1);
    assert_eq!(
        thr.nic_counters[1][counter::PACKETS_RX as usize],
        FRAMES + 1
    );
    assert_eq!(c[counter::BTE_TXDS as usize], 1);
    assert_eq!(c[counter::CQ_EVENTS as usize], 2);
    assert_eq!(thr.fabric.injected, 2 * (FRAMES + 1));
}

#[test]
fn with_a_capture_hook_or_a_fault_site_the_frames_go_one_by_one() {
    let c = threaded();
    let buf = CaptureBuffer::new();
    let t = c.threaded().unwrap();
    t.with_fabric(|f| f.set_capture(Some(buf.clone())));
    let captured = put(&mut job(c), false);
    assert!(
        captured.packets > 2 * FRAMES,
        "{} packets delivered under capture",
        captured.packets
    );
    let seen = buf.take();
    assert!(
        seen.len() as u64 > 2 * FRAMES,
        "the capture saw {}",
        seen.len()
    );
    assert!(seen.iter().all(|(_, p)| p.train.is_none()));

    // Reordering, whose delays the immediate threaded fabric ignores: the PUT completes,
    // frame by frame.
    let c = threaded();
    c.engine.set_faults(FaultConfig {
        reorder: 0.5,
        reorder_max_delay: SimDuration::from_ns(1),
        ..FaultConfig::none()
    });
    let faulty = put(&mut job(c), false);
    assert!(
        faulty.packets > 2 * FRAMES,
        "{} packets delivered with a fault site on",
        faulty.packets
    );
    assert_eq!(faulty.nic_counters, captured.nic_counters);
}

/// With no engine thread and nothing delivered inline, nothing moves after the doorbell
/// until the test makes progress: the local event (the source may be reused) must not be
/// there before the trains were delivered and copied.
#[test]
fn the_local_event_follows_the_copy() {
    let c = threaded_with(ThreadedConfig {
        workers: 0,
        inline_budget: 0,
        ..ThreadedConfig::default()
    });
    let mut j = job(c);
    let moved = put(&mut j, true);
    assert!(moved.packets <= 2 * FRAMES / 16, "{moved:?}");
}

/// A PUT running past the end of the target's domain fails as frame by frame: the frames
/// (trains) that fit land, the transfer ends with one `MemBoundsErr` event carrying the
/// global event's data, and the channel reports the error; on both engines.
#[test]
fn a_put_past_the_target_domain_fails_as_frame_by_frame() {
    const SHORT: u64 = 1 << 20;
    for c in [deterministic(), threaded()] {
        let mut j = job(c);
        let (n0, n1) = (j.nic(0).clone(), j.nic(TGT).clone());
        let src = region(&n0, None);
        let a = n1.alloc(SHORT).unwrap();
        let dst = n1.register(BIG_MDH, PTAG, a, SHORT, true, None).unwrap();
        let data = pattern(9, LEN as usize);
        n0.write_mem(src.addr, &data).unwrap();
        let mut ch = n0.bte_enable(0, 0, 16, 0, false).unwrap();
        let packets = j.c.engine.counters().packets;
        let txd = txd(
            TxdMode1::PUT,
            &src,
            &dst,
            TxdMode1::CQ_LOCAL | TxdMode1::CQ_GLOBAL,
            0x41,
            0x1041,
        );
        n0.bte_post(&mut ch, &txd).unwrap();
        let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
        assert_eq!((e.status(), e.data()), (Ok(HwStatus::MemBoundsErr), 0x1041));
        assert_ne!(n0.bte_err_rc(0).unwrap(), 0);
        assert_eq!(n0.bte_completed(0).unwrap(), 1);
        assert_eq!(n0.cq_poll(&mut j.nodes[0].local_cq).unwrap(), None);
        let mut got = vec![0u8; SHORT as usize];
        n1.read_mem(dst.addr, &mut got).unwrap();
        assert!(
            got == data[..SHORT as usize],
            "the frames that fit did not land"
        );
        assert!(n0.counter(counter::ERRORS).unwrap() > 0);
        let handed = j.c.engine.counters().packets - packets;
        if j.c.threaded().is_some() {
            assert!(handed <= 2 * FRAMES / 16, "{handed} packets: no trains");
        }
    }
}

/// A `LEN` BTE GET by NIC 0 from NIC 1 with a global event: every byte lands when the event
/// is seen. Returns the NIC counters' and the fabric's changes and the packets handed over.
fn get(j: &mut Job) -> Moved {
    let (n0, n1) = (j.nic(0).clone(), j.nic(TGT).clone());
    let local = region(&n0, None);
    let remote = region(&n1, None);
    let data = pattern(5, LEN as usize);
    n1.write_mem(remote.addr, &data).unwrap();
    let mut ch = n0.bte_enable(0, 0, 16, 0, false).unwrap();
    let before = [counters(&n0), counters(&n1)];
    let fabric_before = j.c.engine.fabric_counters();
    let packets = j.c.engine.counters().packets;
    let txd = txd(
        TxdMode1::GET,
        &local,
        &remote,
        TxdMode1::CQ_GLOBAL,
        0x51,
        0x1051,
    );
    n0.bte_post(&mut ch, &txd).unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::Ok), 0x1051));
    let mut got = vec![0u8; LEN as usize];
    n0.read_mem(local.addr, &mut got).unwrap();
    assert!(got == data, "the GET's event came before every byte landed");
    assert_eq!(n0.cq_poll(&mut j.nodes[0].local_cq).unwrap(), None);
    let after = [counters(&n0), counters(&n1)];
    let f = j.c.engine.fabric_counters();
    Moved {
        nic_counters: [diff(&after[0], &before[0]), diff(&after[1], &before[1])],
        fabric: FabricCounters {
            injected: f.injected - fabric_before.injected,
            bytes_injected: f.bytes_injected - fabric_before.bytes_injected,
            delivered: f.delivered - fabric_before.delivered,
            ..FabricCounters::default()
        },
        packets: j.c.engine.counters().packets - packets,
    }
}

#[test]
fn a_bte_get_is_answered_by_trains_and_counts_as_its_frames() {
    let det = get(&mut job(deterministic()));
    assert!(det.packets >= 2 * FRAMES, "{det:?}");
    let thr = get(&mut job(threaded()));
    assert!(
        thr.packets <= 2 * FRAMES / 16,
        "{} packets handed to the NICs: the GET did not go as trains",
        thr.packets
    );
    assert_eq!(thr.nic_counters, det.nic_counters, "NIC counters");
    assert_eq!(thr.fabric, det.fabric, "fabric counters");
    assert_eq!(thr.nic_counters[0][counter::PACKETS_RX as usize], FRAMES);
    assert_eq!(
        thr.nic_counters[0][counter::BYTES_RX as usize],
        LEN + FRAMES * emu_gemini::packet::HEADER_LEN as u64
    );
}
