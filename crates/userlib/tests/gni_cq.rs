//! Completion queues through the user library only: overrun is observable as
//! GNI_RC_ERROR_RESOURCE with the sticky flag, recoverable by draining and clearing, and a
//! blocking CQ waits in kgni; CqDestroy refuses a CQ still in use.

mod gni_common;

use gni_common::*;
use platform::EngineKind;
use userlib::gni::post::put_desc;
use userlib::gni::{CdmMode, CqEventMode, CqMode, PostType, ReturnCode, cq};

#[test]
fn overrun_gives_error_resource_and_recovers() {
    let c = cluster(EngineKind::Deterministic { seed: 21 });
    let a = side(&c, 0, 10);
    // The target's remote CQ holds 4 events.
    let b = side_with(&c, 1, 20, 64 * 1024, CdmMode::empty(), 4);
    assert_eq!(b.rx.capacity(), 4);
    let ep = a.nic.ep_create(Some(&a.tx)).unwrap();
    ep.bind(b.pe, b.inst).unwrap();
    a.buf.write(0, &[0x5a; 64]).unwrap();
    let put = |i: u64| {
        let mut d = put_desc(
            PostType::FmaPut,
            a.buf.va(),
            a.mh,
            b.buf.va() + 64 * i,
            b.mh,
            64,
        );
        d.cq_mode = CqEventMode::GLOBAL_EVENT | CqEventMode::REMOTE_EVENT;
        d.post_id = i;
        ep.post_fma(&d).unwrap();
    };
    for i in 0..10 {
        put(i);
    }
    settle(&c);
    // Every PUT landed; 6 remote events were lost.
    let mut all = vec![0u8; 640];
    b.buf.read(0, &mut all).unwrap();
    assert!(all.iter().all(|&x| x == 0x5a));
    let (flag, lost) = b.rx.overrun().unwrap();
    assert!(flag);
    assert_eq!(lost, 6);
    // The initiator learns its remote CQ overran.
    let mut rem_overrun = 0;
    for _ in 0..10 {
        let ev = next_ok(&a.tx);
        rem_overrun += usize::from(cq::rem_overrun(&ev.cqe));
        a.tx.get_completed(&ev.cqe).unwrap();
    }
    assert_eq!(rem_overrun, 6);

    // Draining: the four events written before the loss, then ERROR_RESOURCE (value 3) once,
    // with GNI_CQ_OVERRUN set.
    for _ in 0..4 {
        let ev = b.rx.get_event().unwrap().expect("event before the loss");
        assert_eq!(ev.rc, ReturnCode::Success);
    }
    let ev = b.rx.get_event().unwrap().expect("overrun report");
    assert_eq!(ev.rc, ReturnCode::ErrorResource);
    assert_eq!(ev.rc.code(), 3);
    assert!(cq::overrun(&ev.cqe));
    assert!(b.rx.get_event().unwrap().is_none());

    // Sticky: an event that arrives before the flag is cleared still reports it.
    put(10);
    settle(&c);
    let ev = b.rx.get_event().unwrap().expect("event after the loss");
    assert_eq!(ev.rc, ReturnCode::ErrorResource);
    assert!(cq::overrun(&ev.cqe));
    next_ok(&a.tx);

    // Recovery: cleared, later events are SUCCESS again.
    b.rx.clear_overrun().unwrap();
    assert!(!b.rx.overrun().unwrap().0);
    put(11);
    let ev = next_ok(&b.rx);
    assert!(!cq::overrun(&ev.cqe));
    next_ok(&a.tx);
    assert!(b.rx.get_event().unwrap().is_none());
}

#[test]
fn blocking_cq_waits_in_kgni_and_destroy_is_refused_while_used() {
    let c = cluster(EngineKind::Deterministic { seed: 22 });
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let blocking = a.nic.cq_create(16, 1, CqMode::BLOCKING).unwrap();
    // Nothing to wait for: the deterministic engine runs dry, kgni says TIMEOUT.
    assert_eq!(
        blocking.wait_event(T).unwrap_err().rc(),
        ReturnCode::Timeout
    );
    assert_eq!(
        a.tx.wait_event(T).unwrap_err().rc(),
        ReturnCode::InvalidParam,
        "GNI_CqWaitEvent needs a BLOCKING CQ"
    );
    let ep = a.nic.ep_create(Some(&blocking)).unwrap();
    ep.bind(b.pe, b.inst).unwrap();
    let d = put_desc(PostType::FmaPut, a.buf.va(), a.mh, b.buf.va(), b.mh, 8);
    ep.post_fma(&d).unwrap();
    let ev = blocking.wait_event(T).unwrap();
    assert_eq!(ev.rc, ReturnCode::Success);
    assert!(blocking.test_event().is_ok_and(|x| !x));
    blocking.get_completed(&ev.cqe).unwrap();
    // The endpoint still uses the CQ: ERROR_RESOURCE.
    let e = blocking.destroy().unwrap_err();
    assert_eq!(e.rc(), ReturnCode::ErrorResource);
}

/// A polled CQ stores its read index every `RD_BATCH` events, not every event, and its ring
/// is that much larger: however many events were consumed and not yet stored, the CQ takes
/// `capacity()` more without overrunning — round after round, so a CQ whose read index were
/// never stored would overrun by the second. One event more than that still overruns.
#[test]
fn batched_read_index_stores_never_overrun_a_cq() {
    const ENTRIES: u32 = 600;
    let c = cluster(EngineKind::Deterministic { seed: 23 });
    let a = side(&c, 0, 10);
    let b = side_with(&c, 1, 20, 64 * 1024, CdmMode::empty(), ENTRIES);
    const { assert!(ENTRIES >= cq::RD_BATCH_MIN_ENTRIES) };
    assert_eq!(b.rx.capacity(), ENTRIES);
    let ep = a.nic.ep_create(Some(&a.tx)).unwrap();
    ep.bind(b.pe, b.inst).unwrap();
    let mut id = 0u64;
    // `n` PUTs, each with a remote event on `b.rx`, in steps the FMA descriptor and the
    // initiator's CQ take.
    let mut put = |n: u32| {
        let mut left = n;
        while left > 0 {
            let step = left.min(16);
            for _ in 0..step {
                let mut d = put_desc(PostType::FmaPut, a.buf.va(), a.mh, b.buf.va(), b.mh, 8);
                d.cq_mode = CqEventMode::GLOBAL_EVENT | CqEventMode::REMOTE_EVENT;
                d.post_id = id;
                id += 1;
                ep.post_fma(&d).unwrap();
            }
            settle(&c);
            for _ in 0..step {
                let ev = next_ok(&a.tx);
                a.tx.get_completed(&ev.cqe).unwrap();
            }
            left -= step;
        }
    };
    for round in 0..3 {
        // Events consumed and not stored: RD_BATCH - 1 in round 0 (the most there can be),
        // whatever the count leaves in later rounds.
        put(cq::RD_BATCH - 1);
        for _ in 0..cq::RD_BATCH - 1 {
            next_ok(&b.rx);
        }
        put(ENTRIES);
        assert!(!b.rx.overrun().unwrap().0, "round {round}: overrun");
        for k in 0..ENTRIES {
            let ev = b.rx.get_event().unwrap().expect("event");
            assert_eq!(ev.rc, ReturnCode::Success, "round {round}, event {k}");
        }
        assert!(b.rx.get_event().unwrap().is_none(), "round {round}");
    }
    // More than the ring holds: the events past it are lost, and the drained CQ reports the
    // loss once.
    for _ in 0..cq::RD_BATCH {
        put(1);
        next_ok(&b.rx);
    }
    put(ENTRIES + cq::RD_BATCH);
    assert!(b.rx.overrun().unwrap().0, "no overrun past the capacity");
    let mut ok = 0;
    loop {
        let ev = b.rx.get_event().unwrap().expect("event or overrun report");
        if ev.rc == ReturnCode::ErrorResource {
            assert!(cq::overrun(&ev.cqe));
            break;
        }
        ok += 1;
    }
    assert!(ok >= ENTRIES, "{ok} events before the loss");
    assert!(b.rx.get_event().unwrap().is_none());
}
