//! FMA through the user library only (OS bypass: the descriptor is programmed through its
//! mapped user alias, data goes through the mapped windows): PUT and GetCompleted, GET,
//! PUT with a sync flag, AMOs (fetch-add with the fetched value checked, compare-and-swap,
//! non-fetching add, AND-XOR), CQ writes, and the errors GNI_PostFma returns.

mod gni_common;

use std::collections::HashSet;

use gni_common::*;
use platform::EngineKind;
use userlib::gni::amo::{self, AmoCmd};
use userlib::gni::post::put_desc;
use userlib::gni::{
    CqEventMode, CqEventType, CqeSource, DlvrMode, Ep, PostDescriptor, PostType, ReturnCode, cq,
};

fn bound(a: &Side, b: &Side) -> Ep {
    let ep = a.nic.ep_create(Some(&a.tx)).unwrap();
    ep.bind(b.pe, b.inst).unwrap();
    ep
}

fn read(s: &Side, off: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    s.buf.read(off, &mut v).unwrap();
    v
}

fn word(s: &Side, off: u64) -> u64 {
    s.buf.read_u64(off).unwrap()
}

#[test]
fn fma_put_lands_and_get_completed_returns_the_descriptor() {
    let c = cluster(EngineKind::Deterministic { seed: 1 });
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let ep = bound(&a, &b);
    let data = pattern(1000, 5);
    a.buf.write(0x100, &data).unwrap();
    // An unaligned PUT (PUTs have no alignment rule) with a remote event.
    let mut d = put_desc(
        PostType::FmaPut,
        a.buf.va() + 0x100,
        a.mh,
        b.buf.va() + 0x203,
        b.mh,
        1000,
    );
    d.post_id = 0xfeed;
    d.cq_mode = CqEventMode::GLOBAL_EVENT | CqEventMode::REMOTE_EVENT;
    ep.post_fma(&d).unwrap();
    let ev = next_ok(&a.tx);
    assert_eq!(cq::get_type(&ev.cqe), Some(CqEventType::Post));
    assert!(cq::get_source(&ev.cqe).is_some_and(|s| s.is_ssid()));
    assert_eq!(
        cq::get_inst_id(&ev.cqe),
        10,
        "GLOBAL events carry the local inst id"
    );
    assert_eq!(read(&b, 0x203, 1000), data, "every byte landed");
    assert_eq!(read(&b, 0x202, 1), [0], "nothing before");
    assert_eq!(read(&b, 0x203 + 1000, 1), [0], "nothing after");
    let done = a.tx.get_completed(&ev.cqe).unwrap();
    assert_eq!(done.rc, ReturnCode::Success);
    assert_eq!(done.desc.post_id, 0xfeed);
    assert_eq!(done.desc.length, 1000);
    assert_eq!(done.ep, ep.id().0);
    // Each post completes once.
    assert_eq!(
        a.tx.get_completed(&ev.cqe).unwrap_err().rc(),
        ReturnCode::DescriptorError
    );
    // The target's CQ got the remote event after the data.
    let r = next_ok(&b.rx);
    assert_eq!(cq::get_source(&r.cqe), Some(CqeSource::RmtDreq));
    assert_eq!(cq::get_inst_id(&r.cqe), 10);
}

#[test]
fn many_outstanding_posts_each_complete_exactly_once() {
    let c = cluster(EngineKind::Deterministic { seed: 4 });
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let ep = bound(&a, &b);
    a.buf.write(0, &pattern(4096, 1)).unwrap();
    for i in 0..64u64 {
        let ty = if i % 2 == 0 {
            PostType::FmaPut
        } else {
            PostType::FmaGet
        };
        let mut d = put_desc(
            ty,
            a.buf.va() + 4096 + 64 * i,
            a.mh,
            b.buf.va() + 64 * i,
            b.mh,
            64,
        );
        if ty == PostType::FmaPut {
            d.local_addr = a.buf.va() + 64 * i;
        }
        d.post_id = i;
        ep.post_fma(&d).unwrap();
    }
    let mut seen = HashSet::new();
    for _ in 0..64 {
        let ev = next_ok(&a.tx);
        let done = a.tx.get_completed(&ev.cqe).unwrap();
        assert!(seen.insert(done.desc.post_id), "completed twice");
    }
    assert_eq!(seen.len(), 64);
    assert_eq!(a.tx.outstanding_posts(), 0);
}

#[test]
fn fma_get_and_flagged_get_and_sync_flag_put() {
    let c = cluster(EngineKind::Deterministic { seed: 2 });
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let ep = bound(&a, &b);
    let src = pattern(300, 77);
    b.buf.write(0x400, &src).unwrap();
    let mut d = put_desc(
        PostType::FmaGet,
        a.buf.va() + 0x800,
        a.mh,
        b.buf.va() + 0x400,
        b.mh,
        300,
    );
    d.dlvr_mode = DlvrMode::IN_ORDER;
    ep.post_fma(&d).unwrap();
    let ev = next_ok(&a.tx);
    assert_eq!(cq::get_source(&ev.cqe), Some(CqeSource::SsidSrsp));
    assert_eq!(read(&a, 0x800, 300), src);
    assert_eq!(
        a.tx.get_completed(&ev.cqe).unwrap().desc.post_type,
        PostType::FmaGet
    );

    // Flagged GET: the 4-byte flag (value 1) follows the data.
    d.post_type = PostType::FmaGetWFlag;
    d.local_addr = a.buf.va() + 0x1000;
    d.length = 64;
    ep.post_fma(&d).unwrap();
    next_ok(&a.tx);
    assert_eq!(read(&a, 0x1000, 64), src[..64]);
    assert_eq!(read(&a, 0x1040, 4), [1, 0, 0, 0]);

    // PUT with a sync flag: the flag word is written after the data.
    a.buf.write(0, &[9u8; 24]).unwrap();
    let mut p = put_desc(
        PostType::FmaPutWSyncflag,
        a.buf.va(),
        a.mh,
        b.buf.va() + 0x2000,
        b.mh,
        24,
    );
    p.sync_flag_addr = b.buf.va() + 0x2100;
    p.sync_flag_value = 0x5151_5151_5151_5151;
    ep.post_fma(&p).unwrap();
    next_ok(&a.tx);
    assert_eq!(read(&b, 0x2000, 24), [9u8; 24]);
    assert_eq!(word(&b, 0x2100), 0x5151_5151_5151_5151);
}

#[test]
fn amos_fetch_add_compare_swap_add_and_xor() {
    let c = cluster(EngineKind::Deterministic { seed: 5 });
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let ep = bound(&a, &b);
    b.buf.write_u64(0x100, 40).unwrap();

    // Fetch-add: the old value comes back, the target grows.
    let d = amo::fetch_add(a.buf.va() + 0x10, a.mh, b.buf.va() + 0x100, b.mh, 2);
    ep.post_fma(&d).unwrap();
    let ev = next_ok(&a.tx);
    assert_eq!(word(&a, 0x10), 40, "fetched the old value");
    assert_eq!(word(&b, 0x100), 42);
    let done = a.tx.get_completed(&ev.cqe).unwrap();
    assert_eq!(done.desc.amo_cmd, AmoCmd::Fadd.code());

    let d = amo::fetch_add(a.buf.va() + 0x18, a.mh, b.buf.va() + 0x100, b.mh, u64::MAX);
    ep.post_fma(&d).unwrap();
    next_ok(&a.tx);
    assert_eq!((word(&a, 0x18), word(&b, 0x100)), (42, 41), "wrapping add");

    // Compare-and-swap: a miss leaves the word, a hit swaps; both fetch.
    let miss = amo::compare_swap(a.buf.va() + 0x20, a.mh, b.buf.va() + 0x100, b.mh, 7, 99);
    ep.post_fma(&miss).unwrap();
    next_ok(&a.tx);
    assert_eq!((word(&a, 0x20), word(&b, 0x100)), (41, 41));
    let hit = amo::compare_swap(a.buf.va() + 0x28, a.mh, b.buf.va() + 0x100, b.mh, 41, 99);
    ep.post_fma(&hit).unwrap();
    next_ok(&a.tx);
    assert_eq!((word(&a, 0x28), word(&b, 0x100)), (41, 99));

    // Non-fetching add and AND-XOR.
    ep.post_fma(&amo::add(b.buf.va() + 0x100, b.mh, 1)).unwrap();
    next_ok(&a.tx);
    assert_eq!(word(&b, 0x100), 100);
    let ax = amo::amo_desc(AmoCmd::Ax, None, b.buf.va() + 0x100, b.mh, 0xF0, 0x3);
    ep.post_fma(&ax).unwrap();
    next_ok(&a.tx);
    assert_eq!(word(&b, 0x100), (100 & 0xF0) ^ 0x3);
}

#[test]
fn cq_write_reaches_the_remote_cq() {
    let c = cluster(EngineKind::Deterministic { seed: 6 });
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let ep = bound(&a, &b);
    let mut d = PostDescriptor::new(PostType::CqWrite);
    d.remote_mem_hndl = b.mh;
    d.remote_addr = b.buf.va();
    d.cqwrite_value = 0xABCD_0123_4567_89EF;
    d.cq_mode = CqEventMode::GLOBAL_EVENT;
    d.dlvr_mode = DlvrMode::NO_ADAPT;
    ep.post_cq_write(&d).unwrap();
    let ev = next_ok(&a.tx);
    assert_eq!(
        a.tx.get_completed(&ev.cqe).unwrap().desc.post_type,
        PostType::CqWrite
    );
    let r = next_ok(&b.rx);
    assert_eq!(cq::get_source(&r.cqe), Some(CqeSource::RmtSreq));
    assert_eq!(cq::get_data(&r.cqe), 0x0123_4567_89EF, "the low 48 bits");
}

#[test]
fn post_fma_refuses_what_gemini_refuses() {
    let c = cluster(EngineKind::Deterministic { seed: 7 });
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let unbound = a.nic.ep_create(Some(&a.tx)).unwrap();
    let d = put_desc(PostType::FmaPut, a.buf.va(), a.mh, b.buf.va(), b.mh, 8);
    assert_eq!(
        unbound.post_fma(&d).unwrap_err().rc(),
        ReturnCode::InvalidState
    );
    let ep = bound(&a, &b);
    // GETs need 4-byte aligned addresses and length on Gemini.
    let mut g = put_desc(PostType::FmaGet, a.buf.va(), a.mh, b.buf.va() + 2, b.mh, 8);
    assert_eq!(
        ep.post_fma(&g).unwrap_err().rc(),
        ReturnCode::AlignmentError
    );
    g.remote_addr = b.buf.va();
    g.length = 6;
    assert_eq!(
        ep.post_fma(&g).unwrap_err().rc(),
        ReturnCode::AlignmentError
    );
    g.length = 0;
    assert_eq!(ep.post_fma(&g).unwrap_err().rc(), ReturnCode::InvalidParam);
    // One FMA post moves at most 1 GiB.
    let mut huge = put_desc(
        PostType::FmaPut,
        a.buf.va(),
        a.mh,
        b.buf.va(),
        b.mh,
        1 << 31,
    );
    assert_eq!(
        ep.post_fma(&huge).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
    huge.length = 64;
    huge.local_addr = u64::MAX - 8;
    assert_eq!(
        ep.post_fma(&huge).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
    // RDMA types go through PostRdma.
    let r = put_desc(PostType::RdmaPut, a.buf.va(), a.mh, b.buf.va(), b.mh, 8);
    assert_eq!(ep.post_fma(&r).unwrap_err().rc(), ReturnCode::IllegalOp);
    // AMO targets are 8-byte aligned; Aries-only commands and cached ones without the mode
    // are invalid.
    let mut m = amo::add(b.buf.va() + 4, b.mh, 1);
    assert_eq!(
        ep.post_fma(&m).unwrap_err().rc(),
        ReturnCode::AlignmentError
    );
    m.remote_addr = b.buf.va();
    m.amo_cmd = 0x55;
    assert_eq!(ep.post_fma(&m).unwrap_err().rc(), ReturnCode::InvalidParam);
    m.amo_cmd = AmoCmd::AddC.code();
    assert_eq!(ep.post_fma(&m).unwrap_err().rc(), ReturnCode::InvalidParam);
    // A local GET landing outside its registration.
    let mut out = put_desc(
        PostType::FmaGet,
        a.buf.va() + a.buf.len() - 4,
        a.mh,
        b.buf.va(),
        b.mh,
        8,
    );
    assert_eq!(
        ep.post_fma(&out).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
    // Events need an endpoint CQ.
    let no_cq = a.nic.ep_create(None).unwrap();
    no_cq.bind(b.pe, b.inst).unwrap();
    out.local_addr = a.buf.va();
    assert_eq!(
        no_cq.post_fma(&out).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
    // Nothing above reached the NIC.
    settle(&c);
    assert!(a.tx.get_event().unwrap().is_none());
    // A remote bound violation is the NIC's: an error completion.
    let mut far = put_desc(PostType::FmaPut, a.buf.va(), a.mh, b.buf.va(), b.mh, 8);
    far.remote_addr = b.buf.va() + b.buf.len() + 4096;
    ep.post_fma(&far).unwrap();
    let ev = a.tx.poll_event(T).unwrap();
    assert_eq!(ev.rc, ReturnCode::TransactionError);
    assert!(!cq::error_recoverable(&ev.cqe));
    assert!(cq::error_str(&ev.cqe).contains("MEM_BOUNDS_ERR"));
    let done = a.tx.get_completed(&ev.cqe).unwrap();
    assert_eq!(done.rc, ReturnCode::TransactionError);
    assert_ne!(done.desc.status, 0);
}

#[test]
fn endpoints_with_different_cqs_get_their_own_completions() {
    let c = cluster(EngineKind::Threaded);
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let other = a
        .nic
        .cq_create(64, 1, userlib::gni::CqMode::NOBLOCK)
        .unwrap();
    let e1 = bound(&a, &b);
    let e2 = a.nic.ep_create(Some(&other)).unwrap();
    e2.bind(b.pe, b.inst).unwrap();
    a.buf.write(0, &pattern(512, 3)).unwrap();
    for i in 0..20u64 {
        // Alternate: the descriptor's CQ switches between the two every post.
        let ep = if i % 2 == 0 { &e1 } else { &e2 };
        let mut d = put_desc(
            PostType::FmaPut,
            a.buf.va(),
            a.mh,
            b.buf.va() + 512 * i,
            b.mh,
            512,
        );
        d.post_id = i;
        ep.post_fma(&d).unwrap();
    }
    for i in 0..10u64 {
        let ev = next_ok(&a.tx);
        let done = a.tx.get_completed(&ev.cqe).unwrap();
        assert_eq!(done.ep, e1.id().0);
        assert_eq!(done.desc.post_id % 2, 0, "round {i}");
        let ev = next_ok(&other);
        let done = other.get_completed(&ev.cqe).unwrap();
        assert_eq!(done.ep, e2.id().0);
        assert_eq!(done.desc.post_id % 2, 1);
    }
    assert!(a.tx.get_event().unwrap().is_none());
    assert!(other.get_event().unwrap().is_none());
    for i in 0..20u64 {
        let mut got = vec![0u8; 512];
        b.buf.read(512 * i, &mut got).unwrap();
        assert_eq!(got, pattern(512, 3));
    }
}
