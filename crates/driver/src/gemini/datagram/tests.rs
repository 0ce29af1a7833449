use super::*;
use firmware_spec::gemini::gni::PostState;

const D: Domain = Domain {
    ptag: 10,
    cookie: 0x1234_0000,
};

fn spec(ep: u64, inst: u32, target: Option<(u32, u32)>, data: &[u8]) -> PostSpec {
    PostSpec {
        ep,
        cdm: ep,
        domain: D,
        local_inst: inst,
        target,
        user_id: None,
        data: data.to_vec(),
        out_len: MAX_PAYLOAD,
    }
}

/// Deliver messages between matchers until none are left.
fn run(nodes: &mut [Matcher], mut msgs: Vec<Outgoing>) {
    while let Some(m) = msgs.pop() {
        let n = nodes
            .iter_mut()
            .find(|n| n.local_pe() == m.dest_pe)
            .unwrap();
        msgs.extend(n.incoming(m.wire));
    }
}

fn completed(m: &Matcher, ep: u64) -> (u32, u32, Vec<u8>) {
    match &m.post_of(ep).unwrap().state {
        DgramState::Completed {
            remote_pe,
            remote_inst,
            data,
        } => (*remote_pe, *remote_inst, data.clone()),
        s => panic!("not completed: {s:?}"),
    }
}

#[test]
fn wire_round_trip_and_golden_header() {
    let w = Wire {
        kind: WireKind::Response,
        domain: D,
        src_pe: 0x3_0001,
        src_inst: 7,
        dst_inst: 9,
        seq: 0x1122_3344_5566_7788,
        consumed: 5,
        data: vec![1, 2, 3],
    };
    let b = w.encode();
    assert_eq!(b.len(), WIRE_HEADER + 3);
    assert_eq!(&b[..8], &[0x67, 0x44, 1, 2, 10, 0, 3, 0]);
    assert_eq!(&b[8..12], &0x1234_0000u32.to_le_bytes());
    assert_eq!(&b[12..16], &[0x01, 0, 3, 0]);
    assert_eq!(b[24], 0x88);
    assert_eq!(b[32], 5);
    let mut padded = b.clone();
    padded.resize(256, 0xEE);
    assert_eq!(Wire::decode(&padded).unwrap(), w);
    assert_eq!(Wire::decode(&b[..10]), Err(WireError::Short(10)));
    assert!(matches!(
        Wire::decode(&[0u8; 64]),
        Err(WireError::Foreign { .. })
    ));
    let mut bad = b.clone();
    bad[3] = 9;
    assert_eq!(Wire::decode(&bad), Err(WireError::Kind(9)));
    let mut long = b;
    long[6] = 200;
    assert_eq!(Wire::decode(&long), Err(WireError::TooLong(200)));
}

#[test]
fn bound_pair_exchanges_both_orders_and_crossing() {
    for order in 0..3 {
        let mut n = [Matcher::new(1, 8), Matcher::new(2, 8)];
        let a = spec(100, 10, Some((2, 20)), b"from a");
        let b = spec(200, 20, Some((1, 10)), b"from b");
        match order {
            0 => {
                // a's request arrives before b posts.
                let (_, o) = n[0].post(a).unwrap();
                run(&mut n, o);
                let (_, o) = n[1].post(b).unwrap();
                assert_eq!(o.len(), 1, "answered from the unexpected list");
                run(&mut n, o);
            }
            1 => {
                let (_, o) = n[1].post(b).unwrap();
                run(&mut n, o);
                let (_, o) = n[0].post(a).unwrap();
                run(&mut n, o);
            }
            _ => {
                // Both post before any message moves: the requests cross.
                let (_, oa) = n[0].post(a).unwrap();
                let (_, ob) = n[1].post(b).unwrap();
                let mut all = oa;
                all.extend(ob);
                run(&mut n, all);
            }
        }
        assert_eq!(completed(&n[0], 100), (2, 20, b"from b".to_vec()));
        assert_eq!(completed(&n[1], 200), (1, 10, b"from a".to_vec()));
        assert_eq!(n[0].unexpected() + n[1].unexpected(), 0, "order {order}");
        assert!(n[0].take_finished(100).is_some());
        assert!(n[0].take_finished(100).is_none());
        assert_eq!(n[0].posts(), 0);
    }
}

#[test]
fn wildcard_matches_any_sender_and_reposts() {
    let mut n = [Matcher::new(1, 8), Matcher::new(2, 8), Matcher::new(3, 8)];
    let (_, o) = n[1].post(spec(1, 20, None, b"server")).unwrap();
    assert!(o.is_empty(), "a wildcard sends nothing");
    let (_, o) = n[0].post(spec(2, 10, Some((2, 20)), b"client a")).unwrap();
    run(&mut n, o);
    assert_eq!(completed(&n[1], 1), (1, 10, b"client a".to_vec()));
    assert_eq!(completed(&n[0], 2), (2, 20, b"server".to_vec()));
    // The second client waits until the server reposts its wildcard.
    let (_, o) = n[2].post(spec(3, 30, Some((2, 20)), b"client c")).unwrap();
    run(&mut n, o);
    assert_eq!(n[1].unexpected(), 1);
    assert_eq!(n[1].probe(1), Some((1, 10)));
    assert!(n[1].take_finished(1).is_some());
    let (_, o) = n[1].post(spec(1, 20, None, b"server 2")).unwrap();
    run(&mut n, o);
    assert_eq!(completed(&n[1], 1), (3, 30, b"client c".to_vec()));
    assert_eq!(completed(&n[2], 3), (2, 20, b"server 2".to_vec()));
}

#[test]
fn domains_instances_and_local_loopback() {
    let mut m = Matcher::new(5, 8);
    // Same NIC: two instances exchange without any message leaving.
    let (_, o) = m.post(spec(1, 1, Some((5, 2)), b"one")).unwrap();
    assert!(o.is_empty());
    let other_domain = PostSpec {
        domain: Domain {
            ptag: 11,
            cookie: 1,
        },
        ..spec(9, 2, None, b"x")
    };
    m.post(other_domain).unwrap();
    assert_eq!(m.post_of(1).unwrap().state, DgramState::Pending);
    let (_, o) = m.post(spec(2, 2, Some((5, 1)), b"two")).unwrap();
    assert!(o.is_empty());
    assert_eq!(completed(&m, 1), (5, 2, b"two".to_vec()));
    assert_eq!(completed(&m, 2), (5, 1, b"one".to_vec()));
    assert_eq!(m.post_of(9).unwrap().state, DgramState::Pending);
}

#[test]
fn one_outstanding_per_endpoint_and_sizes() {
    let mut m = Matcher::new(1, 8);
    m.post(spec(1, 1, None, b"a")).unwrap();
    assert_eq!(m.post(spec(1, 1, None, b"b")), Err(PostError::Busy));
    assert_eq!(
        m.post(spec(2, 1, None, &[0u8; 129])),
        Err(PostError::TooLong(129))
    );
    let mut s = spec(3, 1, None, b"");
    s.out_len = 200;
    assert_eq!(m.post(s), Err(PostError::TooLong(200)));
    // Pending posts cannot be collected; cancelling frees the endpoint.
    assert!(m.take_finished(1).is_none());
    assert!(m.cancel(1).is_some());
    assert!(m.cancel(1).is_none());
    m.post(spec(1, 1, None, b"b")).unwrap();
}

#[test]
fn truncation_reject_cancel_and_stray() {
    let mut n = [Matcher::new(1, 1), Matcher::new(2, 1)];
    // out_len cuts the peer's payload.
    let mut s = spec(1, 20, None, b"srv");
    s.out_len = 2;
    n[1].post(s).unwrap();
    let (_, o) = n[0].post(spec(2, 10, Some((2, 20)), b"hello")).unwrap();
    run(&mut n, o);
    assert_eq!(completed(&n[1], 1).2, b"he".to_vec());
    // Fill the unexpected list (limit 1), then a third request is rejected.
    let (_, o) = n[0].post(spec(3, 11, Some((2, 20)), b"q1")).unwrap();
    run(&mut n, o);
    let (_, o) = n[0].post(spec(4, 12, Some((2, 20)), b"q2")).unwrap();
    run(&mut n, o);
    assert_eq!(
        n[0].post_of(4).unwrap().state,
        DgramState::Failed(PostState::Error)
    );
    assert_eq!(n[1].counters().rejected, 1);
    // Cancelling a post whose request waits at the peer removes it there.
    let (_, o) = n[0].cancel(3).unwrap();
    run(&mut n, o);
    assert_eq!(n[1].unexpected(), 0);
    // A response for nothing is counted, not applied.
    let stray = Wire {
        kind: WireKind::Response,
        domain: D,
        src_pe: 2,
        src_inst: 20,
        dst_inst: 10,
        seq: 999,
        consumed: 0,
        data: vec![],
    };
    assert!(n[0].incoming(stray).is_empty());
    assert_eq!(n[0].counters().stray, 1);
    assert!(
        n[0].send_failed(2).is_empty(),
        "a finished post sends nothing"
    );
    assert!(matches!(
        n[0].post_of(2).unwrap().state,
        DgramState::Completed { .. }
    ));
}

#[test]
fn a_request_whose_acknowledgement_was_lost_is_sent_again_and_matched_once() {
    let mut n = [Matcher::new(1, 8), Matcher::new(2, 8)];
    // A dial to a peer whose wildcard is posted later: the request waits there.
    let (seq, o) = n[0].post(spec(1, 10, Some((2, 20)), b"dial")).unwrap();
    let first = o[0].clone();
    run(&mut n, o);
    assert_eq!(n[1].unexpected(), 1);
    // The sender's NIC reports the send failed (only the acknowledgement was lost): the
    // copy is dropped while the first waits.
    let again = n[0].send_failed(seq);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].wire, first.wire, "the same request, same sequence");
    run(&mut n, again);
    assert_eq!(n[1].unexpected(), 1);
    assert_eq!(n[1].counters().duplicates, 1);
    // The listener posts its wildcard and matches the request once.
    n[1].post(spec(7, 20, None, b"listen")).unwrap();
    assert_eq!(n[1].unexpected(), 0);
    assert_eq!(completed(&n[1], 7), (1, 10, b"dial".to_vec()));
    // The response of that match is lost here. A further copy of the request gets the
    // same response again, and the listener's next wildcard is not matched by it.
    n[1].take_finished(7).unwrap();
    n[1].post(spec(7, 20, None, b"listen2")).unwrap();
    let answer = n[1].incoming(first.wire.clone());
    assert_eq!(answer.len(), 1);
    assert_eq!(answer[0].wire.kind, WireKind::Response);
    assert_eq!(answer[0].wire.data, b"listen".to_vec());
    assert_eq!(n[1].post_of(7).unwrap().state, DgramState::Pending);
    run(&mut n, answer);
    assert_eq!(completed(&n[0], 1), (2, 20, b"listen".to_vec()));
    assert_eq!(n[1].counters().duplicates, 2);
    assert_eq!(n[0].counters().resent, 1);
}

#[test]
fn a_request_that_keeps_failing_fails_its_post() {
    let mut m = Matcher::new(1, 8);
    let (seq, _) = m.post(spec(1, 10, Some((2, 20)), b"dial")).unwrap();
    for _ in 0..REQUEST_RESENDS {
        assert_eq!(m.send_failed(seq).len(), 1);
    }
    assert!(m.send_failed(seq).is_empty());
    assert_eq!(
        m.post_of(1).unwrap().state,
        DgramState::Failed(PostState::Error)
    );
    // A post whose request never reached the NIC fails at once.
    let (seq, _) = m.post(spec(2, 11, Some((2, 20)), b"dial")).unwrap();
    m.fail(seq);
    assert_eq!(
        m.post_of(2).unwrap().state,
        DgramState::Failed(PostState::Error)
    );
}

#[test]
fn reordered_crossing_uses_tombstones() {
    // a and b cross; b's response to a overtakes b's own request.
    let mut a = Matcher::new(1, 8);
    let mut b = Matcher::new(2, 8);
    let (_, oa) = a.post(spec(1, 10, Some((2, 20)), b"A")).unwrap();
    let (_, ob) = b.post(spec(2, 20, Some((1, 10)), b"B")).unwrap();
    let req_b = ob.into_iter().next().unwrap();
    let rsp = b.incoming(oa.into_iter().next().unwrap().wire);
    let rsp = rsp.into_iter().next().unwrap();
    assert_eq!(rsp.wire.kind, WireKind::Response);
    assert_eq!(
        rsp.wire.consumed, 1,
        "b's own request (its first post) was consumed"
    );
    assert!(a.incoming(rsp.wire).is_empty());
    assert_eq!(completed(&a, 1).2, b"B".to_vec());
    // a reposts to b before b's stale request arrives: the stale request must not match.
    a.take_finished(1).unwrap();
    a.post(spec(1, 10, Some((2, 20)), b"A2")).unwrap();
    assert!(a.incoming(req_b.wire).is_empty());
    assert_eq!(a.post_of(1).unwrap().state, DgramState::Pending);
    assert_eq!(a.counters().tombstoned, 1);
}
