//! A Gemini node hosted in this process reaches the process's own memory: a buffer the
//! program mapped itself is registered with `GNI_MemRegister` of its pointer, and FMA
//! puts, gets and AMOs and BTE transfers go straight into and out of it. Memory that is not
//! registered, or that the program unmapped since, is the NIC's error completion, never a
//! crash or a write into whatever is mapped there now.

mod gni_common;
mod own_common;

use gni_common::*;
use own_common::Mapping;
use platform::EngineKind;
use platform::gemini::GeminiCluster;
use userlib::gni::post::put_desc;
use userlib::gni::{CdmMode, Ep, MemFlags, PostType, ReturnCode, amo, cq};

fn cluster() -> GeminiCluster {
    GeminiCluster::builder()
        .engine(EngineKind::Deterministic { seed: 21 })
        .memory_per_node(32 << 20)
        .process_memory(true)
        .build()
        .expect("cluster")
}

/// A side whose registered buffer is `m`, the process's own mapping.
fn side_in(c: &GeminiCluster, pe: usize, inst: u32, m: &Mapping) -> Side {
    side_on(c, pe, inst, CdmMode::empty(), 64, |nic| {
        assert!(nic.process_memory());
        nic.attach_buffer(m.addr(), m.len() as u64)
            .expect("own buffer")
    })
}

fn bound(a: &Side, b: &Side) -> Ep {
    let ep = a.nic.ep_create(Some(&a.tx)).unwrap();
    ep.bind(b.pe, b.inst).unwrap();
    ep
}

#[test]
fn fma_and_bte_move_data_straight_between_the_programs_own_buffers() {
    let c = cluster();
    let (am, bm) = (Mapping::new(512 << 10), Mapping::new(512 << 10));
    let a = side_in(&c, 0, 10, &am);
    let b = side_in(&c, 1, 20, &bm);
    assert_eq!(
        a.buf.va(),
        am.addr(),
        "the handle names the program's own address"
    );
    let ep = bound(&a, &b);

    // FMA PUT: the program's stores, read by the NIC, landing in b's mapping.
    let data = pattern(1000, 5);
    am.write(0x100, &data);
    let d = put_desc(
        PostType::FmaPut,
        am.addr() + 0x100,
        a.mh,
        bm.addr() + 0x203,
        b.mh,
        1000,
    );
    ep.post_fma(&d).unwrap();
    next_ok(&a.tx);
    assert_eq!(bm.read(0x203, 1000), data);
    assert_eq!(bm.read(0x202, 1), [0]);

    // FMA GET back into a's mapping.
    let d = put_desc(
        PostType::FmaGet,
        am.addr() + 0x800,
        a.mh,
        bm.addr() + 0x200,
        b.mh,
        300,
    );
    ep.post_fma(&d).unwrap();
    next_ok(&a.tx);
    assert_eq!(am.read(0x800, 300), bm.read(0x200, 300));

    // An AMO on a word of b's mapping, fetched into a's.
    bm.write(0x1000, &40u64.to_le_bytes());
    let d = amo::fetch_add(am.addr() + 0x10, a.mh, bm.addr() + 0x1000, b.mh, 2);
    ep.post_fma(&d).unwrap();
    next_ok(&a.tx);
    assert_eq!((am.read_u64(0x10), bm.read_u64(0x1000)), (40, 42));

    // BTE PUT and GET of 200,000 bytes.
    let len = 200_000usize;
    let src = pattern(len, 42);
    am.write(0x2000, &src);
    let d = put_desc(
        PostType::RdmaPut,
        am.addr() + 0x2000,
        a.mh,
        bm.addr() + 0x4000,
        b.mh,
        len as u64,
    );
    ep.post_rdma(&d).unwrap();
    let ev = next_ok(&a.tx);
    assert_eq!(cq::get_source(&ev.cqe), Some(userlib::gni::CqeSource::Bte));
    assert_eq!(bm.read(0x4000, len), src);
    let d = put_desc(
        PostType::RdmaGet,
        am.addr() + 0x40000,
        a.mh,
        bm.addr() + 0x4000,
        b.mh,
        len as u64,
    );
    ep.post_rdma(&d).unwrap();
    next_ok(&a.tx);
    assert_eq!(am.read(0x40000, len), src);
}

#[test]
fn unregistered_and_unmapped_memory_is_the_nics_error() {
    let c = cluster();
    let (am, bm) = (Mapping::new(64 << 10), Mapping::new(64 << 10));
    let a = side_in(&c, 0, 10, &am);
    let b = side_in(&c, 1, 20, &bm);
    // Registering memory that is not mapped fails as pinning does.
    let gone = Mapping::new(8192).unmap();
    let e = a
        .nic
        .mem_register(gone, 8192, None, MemFlags::READWRITE)
        .unwrap_err();
    assert_eq!(e.rc(), ReturnCode::InvalidParam, "{e:?}");
    let ep = bound(&a, &b);
    am.write(0, &[0xC3; 4096]);

    // b's buffer goes away under its registration; something else is mapped there.
    let blen = bm.len();
    let addr = bm.unmap();
    let there = Mapping::at(addr, blen, 0x5A);
    for (post, len) in [(PostType::FmaPut, 1000u64), (PostType::RdmaPut, 8192)] {
        let d = put_desc(post, am.addr(), a.mh, addr, b.mh, len);
        if post == PostType::FmaPut {
            ep.post_fma(&d).unwrap();
        } else {
            ep.post_rdma(&d).unwrap();
        }
        let ev = a.tx.poll_event(T).expect("a completion");
        assert_eq!(ev.rc, ReturnCode::TransactionError, "{post:?}");
        let done = a.tx.get_completed(&ev.cqe).unwrap();
        assert_eq!(done.rc, ReturnCode::TransactionError);
    }
    assert!(
        there.read(0, blen).iter().all(|&x| x == 0x5A),
        "the new mapping was not written"
    );
    drop(there);
}
