//! BTE (GNI_PostRdma, OS-mediated through kgni) through the user library only: GET and PUT
//! of large buffers with every byte checked, GetCompleted on local and global events, the
//! remote event, and the Gemini GET alignment rule.

mod gni_common;

use gni_common::*;
use platform::EngineKind;
use userlib::gni::post::put_desc;
use userlib::gni::{CdmMode, CqEventMode, CqeSource, PostType, ReturnCode, cq};

#[test]
fn bte_get_brings_every_byte() {
    let c = cluster(EngineKind::Deterministic { seed: 11 });
    let len = 200_000u64;
    let a = side_with(&c, 0, 10, 512 * 1024, CdmMode::empty(), 64);
    let b = side_with(&c, 1, 20, 512 * 1024, CdmMode::empty(), 64);
    let src = pattern(len as usize, 42);
    b.buf.write(4096, &src).unwrap();
    let ep = a.nic.ep_create(Some(&a.tx)).unwrap();
    ep.bind(b.pe, b.inst).unwrap();
    let mut d = put_desc(
        PostType::RdmaGet,
        a.buf.va() + 8,
        a.mh,
        b.buf.va() + 4096,
        b.mh,
        len,
    );
    d.post_id = 77;
    ep.post_rdma(&d).unwrap();
    let ev = next_ok(&a.tx);
    assert_eq!(cq::get_source(&ev.cqe), Some(CqeSource::Bte));
    let mut got = vec![0u8; len as usize];
    a.buf.read(8, &mut got).unwrap();
    let bad = got.iter().zip(&src).position(|(x, y)| x != y);
    assert_eq!(bad, None, "first differing byte");
    let mut edge = [0u8; 8];
    a.buf.read(0, &mut edge).unwrap();
    assert_eq!(edge, [0; 8], "nothing before the landing zone");
    a.buf.read(8 + len, &mut edge).unwrap();
    assert_eq!(edge, [0; 8], "nothing after it");
    let done = a.tx.get_completed(&ev.cqe).unwrap();
    assert_eq!((done.rc, done.desc.post_id), (ReturnCode::Success, 77));
    assert_eq!(a.tx.outstanding_posts(), 0);
}

#[test]
fn bte_put_with_dual_events_and_a_remote_event() {
    let c = cluster(EngineKind::Deterministic { seed: 12 });
    let a = side_with(&c, 0, 10, 256 * 1024, CdmMode::DUAL_EVENTS, 64);
    let b = side_with(&c, 1, 20, 256 * 1024, CdmMode::empty(), 64);
    let src = pattern(100_001, 7);
    a.buf.write(0, &src).unwrap();
    let ep = a.nic.ep_create(Some(&a.tx)).unwrap();
    ep.bind(b.pe, b.inst).unwrap();
    let mut d = put_desc(
        PostType::RdmaPut,
        a.buf.va(),
        a.mh,
        b.buf.va() + 3,
        b.mh,
        100_001,
    );
    d.cq_mode = CqEventMode::DUAL_EVENTS;
    d.post_id = 5;
    ep.post_rdma(&d).unwrap();
    // Local (request sent: the peer's inst id) and global (acknowledged: ours) events, each
    // completing the same descriptor.
    let mut data = Vec::new();
    for _ in 0..2 {
        let ev = next_ok(&a.tx);
        data.push(cq::get_inst_id(&ev.cqe));
        assert_eq!(a.tx.get_completed(&ev.cqe).unwrap().desc.post_id, 5);
    }
    data.sort();
    assert_eq!(data, vec![10, 20]);
    assert_eq!(a.tx.outstanding_posts(), 0);
    let mut got = vec![0u8; src.len()];
    b.buf.read(3, &mut got).unwrap();
    assert!(got == src, "PUT data intact");
    let r = next_ok(&b.rx);
    assert_eq!(
        cq::get_inst_id(&r.cqe),
        10,
        "remote events carry the initiator's id"
    );
    // Without DUAL_EVENTS both at once is INVALID_PARAM.
    let plain = b.nic.ep_create(Some(&b.tx)).unwrap();
    plain.bind(a.pe, a.inst).unwrap();
    let mut back = put_desc(PostType::RdmaPut, b.buf.va(), b.mh, a.buf.va(), a.mh, 8);
    back.cq_mode = CqEventMode::DUAL_EVENTS;
    assert_eq!(
        plain.post_rdma(&back).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
}

#[test]
fn bte_get_alignment_and_other_refusals() {
    let c = cluster(EngineKind::Deterministic { seed: 13 });
    let a = side(&c, 0, 10);
    let b = side(&c, 1, 20);
    let ep = a.nic.ep_create(Some(&a.tx)).unwrap();
    ep.bind(b.pe, b.inst).unwrap();
    for (loff, roff, len) in [(1, 0, 8), (0, 2, 8), (0, 0, 10)] {
        let d = put_desc(
            PostType::RdmaGet,
            a.buf.va() + loff,
            a.mh,
            b.buf.va() + roff,
            b.mh,
            len,
        );
        assert_eq!(
            ep.post_rdma(&d).unwrap_err().rc(),
            ReturnCode::AlignmentError,
            "GET {loff}/{roff}/{len}"
        );
    }
    let fma = put_desc(PostType::FmaPut, a.buf.va(), a.mh, b.buf.va(), b.mh, 8);
    assert_eq!(ep.post_rdma(&fma).unwrap_err().rc(), ReturnCode::IllegalOp);
    // A local range outside its registration: kgni refuses it.
    let out = put_desc(
        PostType::RdmaPut,
        a.buf.va() + a.buf.len() - 4,
        a.mh,
        b.buf.va(),
        b.mh,
        8,
    );
    assert_eq!(
        ep.post_rdma(&out).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
    // A src_cq_hndl that names no CQ of ours.
    let mut bad_cq = put_desc(PostType::RdmaPut, a.buf.va(), a.mh, b.buf.va(), b.mh, 8);
    bad_cq.src_cq_hndl = 999;
    assert_eq!(
        ep.post_rdma(&bad_cq).unwrap_err().rc(),
        ReturnCode::InvalidParam
    );
    assert_eq!(a.tx.outstanding_posts(), 0, "refused posts are not awaited");
    // An explicit src_cq_hndl is honoured.
    let mut other = put_desc(PostType::RdmaPut, a.buf.va(), a.mh, b.buf.va(), b.mh, 64);
    other.src_cq_hndl = u64::from(a.rx.id());
    ep.post_rdma(&other).unwrap();
    let ev = next_ok(&a.rx);
    assert!(a.rx.get_completed(&ev.cqe).is_ok());
    assert!(a.tx.get_event().unwrap().is_none());
}
