//! SMSG end to end through the user library only: credits run out (NOT_DONE) and come back
//! with the receiver's releases (a back-credit event in the sender's remote CQ, or the
//! control word every send carries), tags, ordering, message contents, and the events on
//! both sides; on the deterministic and the threaded engine.

mod gni_common;

use std::time::Duration;

use gni_common::*;
use platform::EngineKind;
use userlib::gni::smsg::mailbox_attr;
use userlib::gni::{CqEventType, Ep, ReturnCode, cq};

/// Bind an endpoint on each side to the other and start SMSG with mailboxes at the start of
/// each side's registered buffer.
fn connect(a: &Side, b: &Side, credits: u16, maxsize: u32) -> (Ep, Ep) {
    let ea = a.nic.ep_create(Some(&a.tx)).unwrap();
    ea.bind(b.pe, b.inst).unwrap();
    let eb = b.nic.ep_create(Some(&b.tx)).unwrap();
    eb.bind(a.pe, a.inst).unwrap();
    let la = mailbox_attr(a.buf.va(), 0, a.mh, credits, maxsize).unwrap();
    let lb = mailbox_attr(b.buf.va(), 0, b.mh, credits, maxsize).unwrap();
    ea.smsg_init(&la, &lb).unwrap();
    eb.smsg_init(&lb, &la).unwrap();
    (ea, eb)
}

fn drain(q: &userlib::gni::Cq) -> Vec<userlib::gni::CqEvent> {
    let mut v = Vec::new();
    while let Some(e) = q.get_event().unwrap() {
        v.push(e);
    }
    v
}

#[test]
fn credits_run_out_with_not_done_and_come_back_with_back_credits() {
    let c = cluster(EngineKind::Deterministic { seed: 3 });
    let a = side(&c, 0, 100);
    let b = side(&c, 1, 200);
    let (ea, eb) = connect(&a, &b, 4, 64);
    assert_eq!(ea.smsg_credits().unwrap(), 4);

    let body = |i: u32| pattern(40, i);
    for i in 0..4u32 {
        ea.smsg_send_w_tag(&[i as u8, 0xAB], &body(i), 1000 + i, 7)
            .unwrap();
    }
    // Out of credits: GNI_RC_NOT_DONE (value 1), and nothing is sent.
    let e = ea.smsg_send_w_tag(b"x", b"y", 9999, 7).unwrap_err();
    assert_eq!(e.rc(), ReturnCode::NotDone);
    assert_eq!(e.rc().code(), 1);
    assert_eq!(ea.smsg_credits().unwrap(), 0);
    settle(&c);

    // The sender's local events carry the msg ids, in order.
    let local = drain(&a.tx);
    assert_eq!(local.len(), 4);
    for (i, ev) in local.iter().enumerate() {
        assert_eq!(ev.rc, ReturnCode::Success);
        assert_eq!(cq::get_type(&ev.cqe), Some(CqEventType::Smsg));
        assert_eq!(cq::get_msg_id(&ev.cqe), 1000 + i as u32);
    }
    // The receiver's remote CQ got one SMSG event per message, carrying the sender's id.
    let remote = drain(&b.rx);
    assert_eq!(remote.len(), 4);
    for ev in &remote {
        assert_eq!(cq::get_type(&ev.cqe), Some(CqEventType::Smsg));
        assert_eq!(cq::get_inst_id(&ev.cqe), 100);
    }

    // A tag filter that does not match leaves the message where it is.
    assert_eq!(
        eb.smsg_get_next_w_tag(9).unwrap_err().rc(),
        ReturnCode::NoMatch
    );
    let m = eb.smsg_get_next_w_tag(7).unwrap().expect("message 0");
    assert_eq!((m.tag, m.seqno), (7, 0));
    assert_eq!(m.header(), &[0, 0xAB]);
    assert_eq!(m.data(), body(0).as_slice());
    // Until released, the same message is current.
    assert_eq!(eb.smsg_get_next().unwrap().unwrap(), m);
    eb.smsg_release().unwrap();
    settle(&c);
    // One release of four is not worth a credit message yet.
    assert!(drain(&a.rx).is_empty());
    assert_eq!(
        ea.smsg_send_w_tag(b"x", b"y", 9999, 7).unwrap_err().rc(),
        ReturnCode::NotDone
    );

    // The second release returns credits: a back-credit event in the sender's remote CQ.
    let m = eb.smsg_get_next().unwrap().expect("message 1");
    assert_eq!(m.header(), &[1, 0xAB]);
    assert_eq!(m.data(), body(1).as_slice());
    eb.smsg_release().unwrap();
    let credit = a.rx.poll_event(T).unwrap();
    assert_eq!(credit.rc, ReturnCode::Success);
    assert_eq!(cq::get_type(&credit.cqe), Some(CqEventType::Smsg));
    assert_eq!(cq::get_inst_id(&credit.cqe), 200);
    // It is a credit event, not a message.
    assert!(ea.smsg_get_next().unwrap().is_none());
    assert_eq!(ea.smsg_credits().unwrap(), 2);

    // Recovered: two more sends go, the third is NOT_DONE again.
    for i in 4..6u32 {
        ea.smsg_send_w_tag(&[i as u8, 0xAB], &body(i), 1000 + i, 7)
            .unwrap();
    }
    assert_eq!(
        ea.smsg_send_w_tag(b"x", b"y", 9999, 7).unwrap_err().rc(),
        ReturnCode::NotDone
    );
    settle(&c);
    for i in 2..6u32 {
        let m = eb.smsg_get_next().unwrap().expect("in-order message");
        assert_eq!(m.seqno, i);
        assert_eq!(m.header(), &[i as u8, 0xAB]);
        assert_eq!(m.data(), body(i).as_slice(), "message {i} intact");
        eb.smsg_release().unwrap();
    }
    assert!(eb.smsg_get_next().unwrap().is_none());
    assert_eq!(eb.smsg_release().unwrap_err().rc(), ReturnCode::NotDone);
    settle(&c);
    assert_eq!(ea.smsg_credits().unwrap(), 4);
}

#[test]
fn ping_pong_returns_credits_with_every_send() {
    let c = cluster(EngineKind::Deterministic { seed: 9 });
    let a = side(&c, 0, 1);
    let b = side(&c, 1, 2);
    let (ea, eb) = connect(&a, &b, 8, 256);
    let rounds = 40u32;
    for i in 0..rounds {
        let ping = pattern(100 + i as usize, i);
        ea.smsg_send(b"ping", &ping, i).unwrap();
        let m = b
            .nic
            .poll_until(T, || eb.smsg_get_next())
            .expect("ping arrives");
        assert_eq!(m.header(), b"ping");
        assert_eq!(m.data(), ping.as_slice());
        eb.smsg_release().unwrap();
        eb.smsg_send(b"pong", &m.data()[..10], i).unwrap();
        let r = a
            .nic
            .poll_until(T, || ea.smsg_get_next())
            .expect("pong arrives");
        assert_eq!(r.header(), b"pong");
        assert_eq!(r.data(), &ping[..10]);
        ea.smsg_release().unwrap();
    }
    settle(&c);
    // Far more round trips than credits, and no credit-only message was needed: each side's
    // remote CQ saw exactly one event per message it received.
    assert_eq!(drain(&a.rx).len(), rounds as usize);
    assert_eq!(drain(&b.rx).len(), rounds as usize);
    assert_eq!(drain(&a.tx).len(), rounds as usize);
    assert_eq!(ea.smsg_credits().unwrap(), 8);
}

#[test]
fn smsg_argument_and_state_errors() {
    let c = cluster(EngineKind::Deterministic { seed: 0 });
    let a = side(&c, 0, 1);
    let b = side(&c, 1, 2);
    let la = mailbox_attr(a.buf.va(), 0, a.mh, 2, 32).unwrap();
    let lb = mailbox_attr(b.buf.va(), 0, b.mh, 2, 32).unwrap();
    let ep = a.nic.ep_create(Some(&a.tx)).unwrap();
    // Unbound: INVALID_STATE.
    assert_eq!(
        ep.smsg_init(&la, &lb).unwrap_err().rc(),
        ReturnCode::InvalidState
    );
    ep.bind(b.pe, b.inst).unwrap();
    assert_eq!(
        ep.smsg_send(b"", b"x", 0).unwrap_err().rc(),
        ReturnCode::InvalidState
    );
    let mut small = la;
    small.buff_size = 64;
    assert_eq!(
        ep.smsg_init(&small, &lb).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
    ep.smsg_init(&la, &lb).unwrap();
    assert_eq!(
        ep.smsg_init(&la, &lb).unwrap_err().rc(),
        ReturnCode::InvalidState
    );
    // Header + data above msg_maxsize: ERROR_RESOURCE.
    assert_eq!(
        ep.smsg_send(&[0; 16], &[0; 17], 0).unwrap_err().rc(),
        ReturnCode::ErrorResource
    );
    ep.smsg_send(&[0; 16], &[0; 16], 0).unwrap();
    // Unbinding frees the SMSG state.
    ep.unbind().unwrap();
    ep.bind(b.pe, b.inst).unwrap();
    assert_eq!(
        ep.smsg_get_next().unwrap_err().rc(),
        ReturnCode::InvalidState
    );
}

#[test]
fn threaded_engine_stream_with_a_releasing_receiver() {
    let c = cluster(EngineKind::Threaded);
    let a = side(&c, 0, 11);
    let b = side(&c, 1, 22);
    let (ea, eb) = connect(&a, &b, 4, 128);
    let total = 300u32;
    // The receiver starts consuming only once the sender has run out of credits, so the
    // stream goes through at least one credit stall whatever the threads' timing (with credits
    // not enforced the sender never stalls and the receiver gives up, receiving nothing).
    let stalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let receiver = {
        let stalled = stalled.clone();
        std::thread::spawn(move || {
            let mut got = 0u32;
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !stalled.load(std::sync::atomic::Ordering::Acquire)
                && std::time::Instant::now() < deadline
            {
                b.nic.progress();
            }
            while got < total && std::time::Instant::now() < deadline {
                match eb.smsg_get_next().unwrap() {
                    Some(m) => {
                        assert_eq!(m.seqno, got);
                        assert_eq!(m.data(), pattern(64, got).as_slice());
                        eb.smsg_release().unwrap();
                        got += 1;
                    }
                    None => {
                        b.nic.progress();
                    }
                }
            }
            (got, b, eb)
        })
    };
    let mut not_done = 0u32;
    for i in 0..total {
        let data = pattern(64, i);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            match ea.smsg_send(b"", &data, i) {
                Ok(()) => break,
                Err(e) if e.is_not_done() => {
                    not_done += 1;
                    stalled.store(true, std::sync::atomic::Ordering::Release);
                    assert!(
                        std::time::Instant::now() < deadline,
                        "credits never came back"
                    );
                    // Consume events (local completions, back-credit events) meanwhile.
                    while a.tx.get_event().unwrap().is_some() {}
                    while a.rx.get_event().unwrap().is_some() {}
                    a.nic.progress();
                }
                Err(e) => panic!("send {i}: {e}"),
            }
        }
    }
    let (got, _b, _eb) = receiver.join().expect("receiver");
    assert_eq!(got, total);
    assert!(
        not_done > 0,
        "with 4 credits the sender must have waited for the receiver"
    );
}

#[test]
fn a_send_is_four_stores_and_two_round_trips_once_aimed_at_the_mailbox() {
    let c = cluster(EngineKind::Deterministic { seed: 5 });
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let (ea, eb) = connect(&a, &b, 8, 64);
    let writes = || c.engine().counters().mmio_writes;
    let packets = || c.engine().counters().packets;
    for i in 0..6u32 {
        let before = writes();
        let sent_before = packets();
        ea.smsg_send(b"h", &pattern(8, i), 500 + i).unwrap();
        let stores = writes() - before;
        if i == 0 {
            // The first send also aims the descriptor: QW2 and BASE_OFFSET.
            assert!(stores > 4, "first send: {stores} stores");
        } else {
            // The message burst, SYNC_COMPLETE with the remote event, the control word,
            // SYNC_COMPLETE with the local event: no BASE_OFFSET store between them.
            assert_eq!(stores, 4, "send {i}");
        }
        settle(&c);
        // The message carries its remote event (one request and its answer), then the
        // control word and its answer.
        assert_eq!(packets() - sent_before, 4, "send {i}: packets");
        let ev = next_ok(&a.tx);
        assert_eq!(cq::get_msg_id(&ev.cqe), 500 + i);
        let r = next_ok(&b.rx);
        assert_eq!(cq::get_inst_id(&r.cqe), 10);
        let m = eb.smsg_get_next().unwrap().expect("message");
        assert_eq!((m.seqno, m.header()), (i, &b"h"[..]));
        assert_eq!(m.data(), pattern(8, i).as_slice());
        eb.smsg_release().unwrap();
        settle(&c);
    }
    // The control word every send carries still reaches the peer: the receiver's releases
    // came back to the sender.
    eb.smsg_send(b"", b"back", 1).unwrap();
    settle(&c);
    assert_eq!(ea.smsg_credits().unwrap(), 8);
}

#[test]
fn slots_beyond_a_small_window_are_reached_by_aiming_at_them() {
    use userlib::gni::CdmMode;
    let c = cluster(EngineKind::Deterministic { seed: 6 });
    let a = side_with(&c, 0, 11, 256 * 1024, CdmMode::FMA_SMALL_WINDOW, 256);
    let b = side_with(&c, 1, 21, 256 * 1024, CdmMode::FMA_SMALL_WINDOW, 256);
    // Eight slots of 8 KiB: the mailbox is about 66 KiB, twice the 32 KiB window.
    let (ea, eb) = connect(&a, &b, 8, 8192);
    for round in 0..2u32 {
        for i in 0..8u32 {
            let n = round * 8 + i;
            ea.smsg_send(&[n as u8], &pattern(4000 + n as usize, n), n)
                .unwrap();
        }
        settle(&c);
        for i in 0..8u32 {
            let n = round * 8 + i;
            assert_eq!(cq::get_msg_id(&next_ok(&a.tx).cqe), n);
            let m = eb.smsg_get_next().unwrap().expect("message");
            assert_eq!(m.seqno, n);
            assert_eq!(m.header(), &[n as u8]);
            assert_eq!(m.data(), pattern(4000 + n as usize, n).as_slice());
            eb.smsg_release().unwrap();
        }
        settle(&c);
    }
    assert_eq!(ea.smsg_credits().unwrap(), 8);
}
