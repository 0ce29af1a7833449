//! CQ overrun: observable (lost events, sticky flag, ERROR_RESOURCE at the next event, the
//! sender's REM_OVERRUN) and recoverable (drain, rescan, clear).

mod common;

use common::*;
use emu_gemini::host::{PostOpts, Remote};
use emu_gemini::regs::counter;
use firmware_spec::gemini::cqe::HwStatus;
use firmware_spec::gemini::fma::SyncType;
use firmware_spec::gemini::gni::ReturnCode;

#[test]
fn overrun_is_observable_and_recoverable() {
    // Rings of 8 entries hold 7 events.
    let mut j = job_with(det([1, 1, 1], 21), 8);
    let (n0, n1) = (j.nic(0).clone(), j.nic(1).clone());
    let f = j.nodes[0].fma;
    // Node 0 sends 10 remote-event PUTs ("SMSG messages") into node 1's mailbox region;
    // node 1 does not poll its remote CQ.
    for i in 0..10u64 {
        let o = PostOpts {
            sync: SyncType::LOCAL_EVENT | SyncType::REMOTE_EVENT,
            data: 100 + i,
            ..PostOpts::default()
        };
        let to = Remote {
            pe: 1,
            mdh: BUF_MDH,
            offset: j.nodes[1].buf.off(64 * i),
        };
        n0.fma_put(f, to, &i.to_le_bytes(), o).unwrap();
        let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
        assert_eq!(e.status(), Ok(HwStatus::Ok));
        // The sender learns that its remote event was lost (GNI_CQ_REM_OVERRUN).
        assert_eq!(e.rem_overrun, u64::from(i >= 7), "event {i}");
    }
    // Observable: 3 events lost, sticky flag set.
    assert_eq!(n1.cq_status(&j.nodes[1].remote_cq).unwrap(), (true, 3));
    assert_eq!(n1.counter(counter::CQ_LOST).unwrap(), 3);
    // The 7 events that made it are intact and in order.
    let rcq = &mut j.nodes[1].remote_cq;
    for i in 0..7u64 {
        let e = n1.cq_poll(rcq).unwrap().unwrap();
        assert_eq!(e.data(), 100 + i);
        assert_eq!(e.get_event_rc(), ReturnCode::Success);
    }
    assert_eq!(n1.cq_poll(rcq).unwrap(), None);
    // The next event after the loss reports ERROR_RESOURCE (GNI_CQ_OVERRUN) ...
    let o = PostOpts {
        sync: SyncType::LOCAL_EVENT | SyncType::REMOTE_EVENT,
        data: 200,
        ..PostOpts::default()
    };
    let to = Remote {
        pe: 1,
        mdh: BUF_MDH,
        offset: j.nodes[1].buf.off(64 * 10),
    };
    n0.fma_put(f, to, &10u64.to_le_bytes(), o).unwrap();
    n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    let e = n1.cq_wait(&mut j.nodes[1].remote_cq).unwrap();
    assert_eq!(e.data(), 200);
    assert_eq!(e.overrun, 1);
    assert_eq!(e.get_event_rc(), ReturnCode::ErrorResource);
    // ... and recovery rescans the mailboxes: every message is in memory even though its
    // event was lost.
    for i in 0..=10u64 {
        let v = n1.read_u64(j.nodes[1].buf.addr + 64 * i).unwrap();
        assert_eq!(v, i);
    }
    n1.cq_clear_overrun(&j.nodes[1].remote_cq).unwrap();
    assert!(!n1.cq_status(&j.nodes[1].remote_cq).unwrap().0);
    // After recovery events are normal again.
    let o = PostOpts { data: 300, ..o };
    n0.fma_put(f, to, &11u64.to_le_bytes(), o).unwrap();
    assert_eq!(n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().rem_overrun, 0);
    let e = n1.cq_wait(&mut j.nodes[1].remote_cq).unwrap();
    assert_eq!((e.data(), e.overrun), (300, 0));
    assert_eq!(e.get_event_rc(), ReturnCode::Success);
}

#[test]
fn local_cq_overrun_from_many_posts() {
    // 4-entry local CQ, 6 posts in flight without polling.
    let mut j = job_with(det([1, 1, 1], 22), 4);
    let n0 = j.nic(0).clone();
    let f = j.nodes[0].fma;
    for i in 0..6u64 {
        let to = Remote {
            pe: 1,
            mdh: BUF_MDH,
            offset: 8 * i,
        };
        let o = PostOpts {
            data: i,
            ..PostOpts::default()
        };
        n0.fma_put(f, to, &[1; 8], o).unwrap();
    }
    j.c.deterministic().unwrap().run_until_idle();
    assert_eq!(n0.cq_status(&j.nodes[0].local_cq).unwrap(), (true, 3));
    let got: Vec<u64> = (0..3)
        .map(|_| {
            n0.cq_poll(&mut j.nodes[0].local_cq)
                .unwrap()
                .unwrap()
                .data()
        })
        .collect();
    assert_eq!(got, vec![0, 1, 2]);
    assert_eq!(n0.cq_poll(&mut j.nodes[0].local_cq).unwrap(), None);
}

#[test]
fn a_message_carrying_its_remote_event_reports_the_overrun_too() {
    // As above with SMSG messages (PUT_MSG): each message is the only request of its
    // sequence, so it travels with its remote event, one request per message.
    let mut j = job_with(det([1, 1, 1], 22), 8);
    let (n0, n1) = (j.nic(0).clone(), j.nic(1).clone());
    let f = j.nodes[0].fma;
    for i in 0..10u64 {
        let o = PostOpts {
            sync: SyncType::LOCAL_EVENT | SyncType::REMOTE_EVENT,
            data: 300 + i,
            msg: true,
            ..PostOpts::default()
        };
        let to = Remote {
            pe: 1,
            mdh: BUF_MDH,
            offset: j.nodes[1].buf.off(64 * i),
        };
        let sent = n0.counter(counter::PACKETS_TX).unwrap();
        n0.fma_put(f, to, &[i as u8; 24], o).unwrap();
        let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
        assert_eq!(e.status(), Ok(HwStatus::Ok));
        assert_eq!(e.data(), 300 + i);
        assert_eq!(e.rem_overrun, u64::from(i >= 7), "message {i}");
        assert_eq!(
            n0.counter(counter::PACKETS_TX).unwrap() - sent,
            1,
            "message {i}: one request"
        );
    }
    assert_eq!(n1.cq_status(&j.nodes[1].remote_cq).unwrap(), (true, 3));
    assert_eq!(n1.counter(counter::CQ_LOST).unwrap(), 3);
    let rcq = &mut j.nodes[1].remote_cq;
    for i in 0..7u64 {
        let e = n1.cq_poll(rcq).unwrap().unwrap();
        assert_eq!(e.data(), 300 + i);
    }
    let mut got = [0u8; 24];
    n1.read_mem(j.nodes[1].buf.addr + 64 * 9, &mut got).unwrap();
    assert_eq!(
        got, [9u8; 24],
        "the message whose event was lost is in memory"
    );
}
