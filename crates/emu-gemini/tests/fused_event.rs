//! An SMSG message that is the only request of its sequence carries the sequence's remote
//! event (one request and one acknowledgement instead of two of each): what software sees
//! when that request, or its acknowledgement, is lost, and when the fabric delivers it twice.
//! Every delivered request raises its event exactly once; a lost one raises none and the
//! sender gets `REQUEST_TIMEOUT` (docs/gemini-programming.md, "SMSG").

mod common;

use common::*;
use emu_core::fabric::FaultConfig;
use emu_core::time::SimDuration;
use emu_gemini::cluster::{Cluster, ClusterConfig};
use emu_gemini::host::{Nic, PostOpts, Remote};
use emu_gemini::regs::counter;
use firmware_spec::gemini::cqe::HwStatus;
use firmware_spec::gemini::fma::SyncType;

/// Two nodes on one router with a short request timeout, fault-free until the test says.
fn pair() -> Job {
    let mut cfg = ClusterConfig::deterministic([1, 1, 1], 61);
    cfg.nic.request_timeout = SimDuration::from_us(500);
    job(Cluster::new(cfg).unwrap())
}

/// The message (an SMSG slot image is at least its 16-byte header) at offset 0 of node 1's
/// buffer, closed with a local and a remote event.
const MSG: [u8; 24] = [0x5A; 24];

fn msg_opts(data: u64, in_order: bool) -> PostOpts {
    PostOpts {
        sync: SyncType::LOCAL_EVENT | SyncType::REMOTE_EVENT,
        data,
        in_order,
        msg: true,
        ..PostOpts::default()
    }
}

fn to_node1(j: &Job) -> Remote {
    Remote {
        pe: 1,
        mdh: BUF_MDH,
        offset: j.nodes[1].buf.off(0),
    }
}

/// Run the engine until nothing is left (copies, stray answers, the watchdog).
fn settle(j: &Job) {
    j.c.deterministic()
        .expect("deterministic engine")
        .run_until_idle();
}

/// The data of every event waiting in node `n`'s remote CQ.
fn remote_events(j: &mut Job, n: usize) -> Vec<u64> {
    let nic: Nic = j.nic(n).clone();
    let mut v = Vec::new();
    while let Some(e) = nic.cq_poll(&mut j.nodes[n].remote_cq).unwrap() {
        v.push(e.data());
    }
    v
}

fn message_at_node1(j: &Job) -> [u8; 24] {
    let mut got = [0u8; 24];
    j.nic(1).read_mem(j.nodes[1].buf.addr, &mut got).unwrap();
    got
}

#[test]
fn a_lost_message_raises_no_remote_event_and_its_sender_times_out() {
    let mut j = pair();
    let n0 = j.nic(0).clone();
    j.c.engine.set_faults(FaultConfig {
        drop: 1.0,
        ..FaultConfig::none()
    });
    let sent = n0.counter(counter::PACKETS_TX).unwrap();
    n0.fma_put(j.nodes[0].fma, to_node1(&j), &MSG, msg_opts(7, true))
        .unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(e.status(), Ok(HwStatus::RequestTimeout));
    assert_eq!(e.data(), 7);
    assert_eq!(n0.counter(counter::PACKETS_TX).unwrap() - sent, 1);
    assert_eq!(n0.counter(counter::TIMEOUTS).unwrap(), 1);
    settle(&j);
    assert_eq!(remote_events(&mut j, 1), Vec::<u64>::new());
    assert_eq!(message_at_node1(&j), [0u8; 24]);

    // The network heals and the message is written again (as the library retransmits):
    // the message and one event.
    j.c.engine.set_faults(FaultConfig::none());
    n0.fma_put(j.nodes[0].fma, to_node1(&j), &MSG, msg_opts(8, true))
        .unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::Ok), 8));
    settle(&j);
    assert_eq!(remote_events(&mut j, 1), vec![8]);
    assert_eq!(message_at_node1(&j), MSG);
}

#[test]
fn a_message_whose_acknowledgement_is_lost_raised_its_event_once() {
    let mut j = pair();
    let n0 = j.nic(0).clone();
    // The request leaves while the fabric is clean; everything after it (the
    // acknowledgement) is lost.
    n0.fma_put(j.nodes[0].fma, to_node1(&j), &MSG, msg_opts(9, true))
        .unwrap();
    j.c.engine.set_faults(FaultConfig {
        drop: 1.0,
        ..FaultConfig::none()
    });
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::RequestTimeout), 9));
    settle(&j);
    // The target applied the request: the message and its event, once.
    assert_eq!(message_at_node1(&j), MSG);
    assert_eq!(remote_events(&mut j, 1), vec![9]);
    assert_eq!(j.nic(1).counter(counter::CQ_EVENTS).unwrap(), 1);
    assert_eq!(n0.counter(counter::TIMEOUTS).unwrap(), 1);
    assert_eq!(
        n0.cq_poll(&mut j.nodes[0].local_cq).unwrap(),
        None,
        "one local event"
    );
}

/// Send one message through a fabric that delivers every packet twice; returns node 1's
/// remote events and its counter `c`.
fn duplicated(in_order: bool, msg: bool, c: u32) -> (Vec<u64>, u64) {
    let mut j = pair();
    let n0 = j.nic(0).clone();
    j.c.engine.set_faults(FaultConfig {
        duplicate: 1.0,
        ..FaultConfig::none()
    });
    let o = PostOpts {
        msg,
        ..msg_opts(11, in_order)
    };
    n0.fma_put(j.nodes[0].fma, to_node1(&j), &MSG, o).unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::Ok), 11));
    settle(&j);
    assert_eq!(message_at_node1(&j), MSG);
    assert_eq!(
        n0.cq_poll(&mut j.nodes[0].local_cq).unwrap(),
        None,
        "one local event"
    );
    assert!(j.c.engine.fabric_counters().duplicated > 0);
    let c = j.nic(1).counter(c).unwrap();
    (remote_events(&mut j, 1), c)
}

#[test]
fn a_message_delivered_twice_raises_its_event_once() {
    // In order: the copy falls behind the stream's position and is dropped as stale.
    let (ev, stale) = duplicated(true, true, counter::ORDER_STALE);
    assert_eq!(ev, vec![11]);
    assert_eq!(stale, 1);
    // Adaptive routing: the target recognises the copy (same source, tag and bytes).
    let (ev, dups) = duplicated(false, true, counter::DUPLICATES);
    assert_eq!(ev, vec![11]);
    assert_eq!(dups, 1);
}

#[test]
fn a_remote_event_request_delivered_twice_raises_its_event_once() {
    // A plain PUT closed with a remote event: the PUT (idempotent) may be applied twice,
    // the separate remote-event request is recognised as a copy.
    let (ev, dups) = duplicated(false, false, counter::DUPLICATES);
    assert_eq!(ev, vec![11]);
    assert_eq!(dups, 1);
}
