//! Datagrams (`EpPostData`) matched by kgni and carried by BTE SENDs between emulated Gemini
//! nodes: bound pairs, wildcards, probes, cancel, limits.

use std::time::Duration;

use driver::gemini::{CdmId, EpId, JobConfig, KgniClient, KgniError, Request, Response};
use firmware_spec::gemini::gni::{JobLimits, PostState, ReturnCode, job_create_cookie};
use platform::gemini::GeminiCluster;

fn attach(c: &GeminiCluster, client: &KgniClient, inst: u32) -> CdmId {
    let job = c.job();
    let cdm = client.cdm_create(inst, job.ptag, job.cookie, 0).unwrap();
    client.cdm_attach(cdm).unwrap();
    cdm
}

fn ep(client: &KgniClient, cdm: CdmId, bind: Option<(u32, u32)>) -> EpId {
    let ep = client.ep_create(cdm, None).unwrap();
    if let Some((addr, id)) = bind {
        client.ep_bind(ep, addr, id).unwrap();
    }
    ep
}

#[test]
fn bound_pair_exchanges_payloads_across_nodes() {
    let c = GeminiCluster::builder().build().unwrap();
    let a = c.node(0).unwrap().open();
    let b = c.node(1).unwrap().open();
    let (ca, cb) = (attach(&c, &a, 10), attach(&c, &b, 20));
    let ea = ep(&a, ca, Some((1, 20)));
    let eb = ep(&b, cb, Some((0, 10)));
    a.post_data(ea, None, b"hello from a", 64).unwrap();
    // Nothing has come back yet.
    assert_eq!(a.post_data_test(ea), Err(KgniError::NotDone));
    b.post_data(eb, None, b"and from b", 64).unwrap();
    let ra = a.post_data_wait(ea, Some(Duration::from_secs(10))).unwrap();
    assert_eq!(ra.state, PostState::Completed);
    assert_eq!((ra.remote_addr, ra.remote_id), (1, 20));
    assert_eq!(ra.data, b"and from b");
    let rb = b.post_data_wait(eb, Some(Duration::from_secs(10))).unwrap();
    assert_eq!((rb.remote_addr, rb.remote_id), (0, 10));
    assert_eq!(rb.data, b"hello from a");
    // Collected: the endpoints are free for the next exchange.
    assert!(matches!(
        a.post_data_test(ea),
        Err(KgniError::NoSuchHandle { .. })
    ));
    a.post_data(ea, None, b"again", 8).unwrap();
    b.post_data(eb, None, b"too", 8).unwrap();
    assert_eq!(a.post_data_wait(ea, None).unwrap().data, b"too");
    assert_eq!(b.post_data_wait(eb, None).unwrap().data, b"again");
    for n in c.nodes() {
        let f = n.kgni().free_counts();
        assert_eq!((f.datagram_posts, f.datagram_unexpected), (0, 0));
    }
}

#[test]
fn wildcard_listens_for_any_peer_with_probes_and_ids() {
    let c = GeminiCluster::builder().dims([2, 1, 1]).build().unwrap();
    let server = c.node(3).unwrap().open();
    let cs = attach(&c, &server, 99);
    let listen = ep(&server, cs, None);
    // An unbound endpoint needs an id, and -1 is not one.
    assert!(matches!(
        server.post_data(listen, None, b"x", 8),
        Err(KgniError::InvalidParam(_))
    ));
    assert!(matches!(
        server.post_data(listen, Some(u64::MAX), b"x", 8),
        Err(KgniError::InvalidParam(_))
    ));
    server.post_data(listen, Some(7), b"welcome", 32).unwrap();
    assert_eq!(
        server
            .request(Request::PostDataProbe { cdm: cs })
            .unwrap_err(),
        KgniError::NoMatch
    );
    let mut clients = Vec::new();
    for pe in 0..3u32 {
        let cl = c.node(pe as usize).unwrap().open();
        let cc = attach(&c, &cl, pe);
        let e = ep(&cl, cc, Some((3, 99)));
        cl.post_data(e, None, format!("client {pe}").as_bytes(), 32)
            .unwrap();
        clients.push((cl, e));
    }
    // One exchange per wildcard post: the server serves the clients one by one.
    let mut served = Vec::new();
    for _ in 0..3 {
        c.run(u64::MAX);
        let Response::Probe {
            remote_addr,
            remote_id,
        } = server.request(Request::PostDataProbe { cdm: cs }).unwrap()
        else {
            panic!("probe answers a peer")
        };
        assert_eq!(remote_addr, remote_id, "client inst ids equal their PEs");
        let Response::ProbeId(id) = server
            .request(Request::PostDataProbeById { cdm: cs })
            .unwrap()
        else {
            panic!("probe by id answers an id")
        };
        assert_eq!(id, 7);
        let Response::Datagram(d) = server
            .request(Request::PostDataTestById { cdm: cs, id: 7 })
            .unwrap()
        else {
            panic!("test answers a datagram")
        };
        assert_eq!(d.data, format!("client {remote_addr}").as_bytes());
        assert_eq!(d.id, Some(7));
        served.push(remote_addr);
        server.post_data(listen, Some(7), b"welcome", 32).unwrap();
    }
    served.sort_unstable();
    assert_eq!(served, vec![0, 1, 2]);
    for (cl, e) in &clients {
        let r = cl.post_data_wait(*e, None).unwrap();
        assert_eq!(r.data, b"welcome");
        assert_eq!((r.remote_addr, r.remote_id), (3, 99));
    }
    // The fourth wildcard post is still waiting; cancel it.
    let Response::Datagram(d) = server
        .request(Request::PostDataCancelById { cdm: cs, id: 7 })
        .unwrap()
    else {
        panic!("cancel answers a datagram")
    };
    assert_eq!(d.state, PostState::Terminated);
}

#[test]
fn same_node_instances_exchange_without_the_network() {
    let c = GeminiCluster::builder().build().unwrap();
    let node = c.node(0).unwrap();
    let a = node.open();
    let b = node.open();
    let (ca, cb) = (attach(&c, &a, 1), attach(&c, &b, 2));
    let ea = ep(&a, ca, Some((0, 2)));
    let eb = ep(&b, cb, None);
    b.post_data(eb, Some(1), b"server", 16).unwrap();
    a.post_data(ea, None, b"client", 16).unwrap();
    // Completed at post time: no engine work needed.
    assert_eq!(a.post_data_test(ea).unwrap().data, b"server");
    let r = b.post_data_test(eb).unwrap();
    assert_eq!(
        (r.remote_addr, r.remote_id, r.data.as_slice()),
        (0, 1, &b"client"[..])
    );
    assert_eq!(
        node.kgni().hw().bte_tx_stats(3).unwrap().1,
        0,
        "no SEND was posted"
    );
}

#[test]
fn limits_cancel_and_timeouts() {
    let c = GeminiCluster::builder().build().unwrap();
    let a = c.node(0).unwrap().open();
    let b = c.node(1).unwrap().open();
    let (ca, cb) = (attach(&c, &a, 10), attach(&c, &b, 20));
    let ea = ep(&a, ca, Some((1, 20)));
    // Payloads are at most 128 bytes each way.
    assert!(matches!(
        a.post_data(ea, None, &[0u8; 129], 8),
        Err(KgniError::InvalidParam(_))
    ));
    assert!(matches!(
        a.post_data(ea, None, b"x", 129),
        Err(KgniError::InvalidParam(_))
    ));
    a.post_data(ea, None, &[5u8; 128], 128).unwrap();
    // One outstanding per endpoint.
    let e = a.post_data(ea, None, b"second", 8).unwrap_err();
    assert_eq!(e.gni_rc(), ReturnCode::ErrorResource);
    // A bound endpoint with a datagram outstanding cannot be rebound or unbound.
    assert_eq!(
        a.request(Request::EpUnbind { ep: ea }).unwrap_err(),
        KgniError::NotDone
    );
    // Nobody answers: the wait times out (the deterministic engine runs dry).
    assert_eq!(
        a.post_data_wait(ea, Some(Duration::from_secs(1))),
        Err(KgniError::Timeout)
    );
    // The request waits at node 1; cancelling removes it there.
    assert_eq!(
        c.node(1).unwrap().kgni().free_counts().datagram_unexpected,
        1
    );
    let Response::Datagram(d) = a.request(Request::PostDataCancel { ep: ea }).unwrap() else {
        panic!("cancel answers a datagram")
    };
    assert_eq!(d.state, PostState::Terminated);
    c.run(u64::MAX);
    assert_eq!(
        c.node(1).unwrap().kgni().free_counts().datagram_unexpected,
        0
    );
    // A wildcard posted afterwards does not see the cancelled request.
    let eb = ep(&b, cb, None);
    b.post_data(eb, Some(3), b"late", 8).unwrap();
    c.run(u64::MAX);
    assert_eq!(b.post_data_test(eb), Err(KgniError::NotDone));
    // Destroying the endpoint drops its post.
    b.request(Request::EpDestroy { ep: eb }).unwrap();
    assert_eq!(c.node(1).unwrap().kgni().free_counts().datagram_posts, 0);
    // Payload longer than the receiver accepts is cut to its out_len.
    let eb = ep(&b, cb, Some((0, 10)));
    b.post_data(eb, None, b"0123456789", 4).unwrap();
    a.post_data(ea, None, b"abcdefghij", 3).unwrap();
    assert_eq!(a.post_data_wait(ea, None).unwrap().data, b"012");
    assert_eq!(b.post_data_wait(eb, None).unwrap().data, b"abcd");
}

#[test]
fn bind_goes_through_the_jobs_ntt() {
    // Logical PE k is physical PE 3 - k.
    let c = GeminiCluster::builder()
        .dims([2, 1, 1])
        .job(JobConfig {
            ptag: 30,
            cookie: job_create_cookie(0x5000, 0),
            limits: JobLimits::default(),
            ntt: vec![3, 2, 1, 0],
        })
        .build()
        .unwrap();
    let a = c.node(0).unwrap().open();
    let b = c.node(2).unwrap().open();
    let (ca, cb) = (attach(&c, &a, 0), attach(&c, &b, 1));
    // Node 2 is logical PE 1; node 0 is logical PE 3.
    let ea = ep(&a, ca, Some((1, 1)));
    let eb = ep(&b, cb, Some((3, 0)));
    assert!(matches!(
        a.request(Request::EpBind {
            ep: a.ep_create(ca, None).unwrap(),
            remote_addr: 4,
            remote_id: 0
        }),
        Err(KgniError::InvalidParam(_))
    ));
    a.post_data(ea, None, b"to logical 1", 16).unwrap();
    b.post_data(eb, None, b"to logical 3", 16).unwrap();
    let r = a.post_data_wait(ea, None).unwrap();
    assert_eq!(r.remote_addr, 2, "completions report the physical PE");
    assert_eq!(r.data, b"to logical 3");
    assert_eq!(b.post_data_wait(eb, None).unwrap().remote_addr, 0);
}

#[test]
fn threaded_engine_exchange_between_two_threads() {
    use platform::EngineKind;
    let c = GeminiCluster::builder()
        .engine(EngineKind::Threaded)
        .build()
        .unwrap();
    let job = c.job().clone();
    std::thread::scope(|s| {
        for (me, peer) in [(0u32, 1u32), (1, 0)] {
            let node = c.node(me as usize).unwrap();
            let job = job.clone();
            s.spawn(move || {
                let cl = node.open();
                let cdm = cl.cdm_create(100 + me, job.ptag, job.cookie, 0).unwrap();
                cl.cdm_attach(cdm).unwrap();
                // Each side exchanges three times with the other.
                for round in 0..3u8 {
                    let e = ep(&cl, cdm, Some((peer, 100 + peer)));
                    cl.post_data(e, None, &[me as u8, round], 8).unwrap();
                    let r = cl.post_data_wait(e, Some(Duration::from_secs(20))).unwrap();
                    assert_eq!(r.data, vec![peer as u8, round]);
                    assert_eq!((r.remote_addr, r.remote_id), (peer, 100 + peer));
                    cl.request(Request::EpDestroy { ep: e }).unwrap();
                }
            });
        }
    });
    for n in c.nodes() {
        assert_eq!(n.kgni().free_counts().datagram_posts, 0);
    }
}
