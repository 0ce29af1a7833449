//! A node hosted in this process reaches the process's own memory: buffers and event queues
//! that the program mapped itself are registered with `cxil_map`-like calls of their
//! pointers, and the NIC puts, gets, does atomics and writes events straight into and out of
//! them. Memory that is not registered, or that the program unmapped since, is the
//! hardware's error, never a crash or a write into whatever is mapped there now.

mod cxi_common;
mod own_common;

use cxi_common::{Ep, VNI};
use driver::cassini::Errno;
use firmware_spec::cassini::amo::{AmoOp, AmoType};
use firmware_spec::cassini::cmd::{CState, DmaFlags, DmaOp, FullDma, IdcAmo};
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::le::{LeFlags, MapFlags, PtAllocOpts, PtlList};
use firmware_spec::cassini::rc::ReturnCode;
use own_common::Mapping;
use platform::{Cluster, EngineKind};
use userlib::cxi::CxiError;

const EQ_LEN: usize = 4 * 4096;

/// Two nodes, each with the process's memory beside its RAM.
fn cluster() -> Cluster {
    Cluster::builder()
        .nics(2)
        .engine(EngineKind::Deterministic { seed: 5 })
        .memory_per_node(64 << 20)
        .process_memory(true)
        .build()
        .expect("cluster")
}

/// An endpoint whose event queue and data buffer are the process's own mappings.
fn endpoint(c: &Cluster, node: usize, eq: &Mapping, data: &Mapping) -> Ep {
    Ep::with_buffers(c, node, |dev| {
        assert!(dev.process_memory());
        (
            dev.attach_buffer(eq.addr(), EQ_LEN as u64)
                .expect("eq buffer"),
            dev.attach_buffer(data.addr(), data.len() as u64)
                .expect("data buffer"),
        )
    })
}

fn initiator(ev: &Event) -> (u32, ReturnCode) {
    match ev {
        Event::InitiatorShort(i) => (i.mlength, i.return_code),
        Event::InitiatorLong(i) => (i.mlength, i.return_code),
        other => panic!("expected an initiator event, got {other:?}"),
    }
}

fn target(ev: &Event) -> firmware_spec::cassini::event::TargetLong {
    match ev {
        Event::TargetLong(t) => *t,
        other => panic!("expected a long target event, got {other:?}"),
    }
}

fn dma(src: &Ep, dst: &Ep, index: u32, op: DmaOp, local: u64, remote: u64, len: u32) -> FullDma {
    let (dfa, index_ext) = dst.dfa(index);
    FullDma {
        opcode: op,
        index_ext,
        lac: src.md.lac(),
        flags: DmaFlags::default(),
        dfa,
        remote_offset: remote,
        local_addr: src.md.iova_of(&src.buf, local).unwrap(),
        request_len: len,
        eq: src.eq.eqn() as u16,
        initiator: src.match_id(),
        user_ptr: 0x1234,
        ..FullDma::default()
    }
}

#[test]
fn put_get_atomic_and_events_land_in_the_programs_own_memory() {
    let c = cluster();
    let (a_eq, a_mem) = (Mapping::new(EQ_LEN), Mapping::new(1 << 20));
    let (b_eq, b_mem) = (Mapping::new(EQ_LEN), Mapping::new(1 << 20));
    let mut a = endpoint(&c, 0, &a_eq, &a_mem);
    let mut b = endpoint(&c, 1, &b_eq, &b_mem);
    let mr = b.portal(17, PtAllocOpts::empty());
    b.append(
        &mr,
        PtlList::Priority,
        0,
        1 << 20,
        LeFlags::OP_PUT | LeFlags::OP_GET,
        0,
        9,
        0,
    );

    // The program stores its data with plain stores; the NIC reads it from there.
    let len = 200 * 1024u32;
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    a_mem.write(0, &data);
    a.txq
        .emit_dma(&dma(&a, &b, 17, DmaOp::Put, 0, 4096, len))
        .unwrap();
    a.txq.ring().unwrap();
    assert_eq!(
        initiator(&a.event_of(EventType::Ack)),
        (len, ReturnCode::Ok)
    );
    let t = target(&b.event_of(EventType::Put));
    assert_eq!(
        (t.return_code, t.mlength, t.remote_offset),
        (ReturnCode::Ok, len, 4096)
    );
    assert_eq!(
        b_mem.read(4096, len as usize),
        data,
        "the put landed in b's own memory"
    );
    assert_eq!(b_mem.read(0, 4096), vec![0u8; 4096], "and nowhere else");

    // A get back into a's memory at 512 KiB.
    let rlen = 64 * 1024u32;
    a.txq
        .emit_dma(&dma(&a, &b, 17, DmaOp::Get, 512 << 10, 8192, rlen))
        .unwrap();
    a.txq.ring().unwrap();
    assert_eq!(
        initiator(&a.event_of(EventType::Reply)),
        (rlen, ReturnCode::Ok)
    );
    assert_eq!(
        a_mem.read(512 << 10, rlen as usize),
        &data[4096..4096 + rlen as usize]
    );

    // A fetching atomic on a word of b's memory, the old value fetched into a's.
    b_mem.write(64, &40u64.to_le_bytes());
    let (dfa, index_ext) = b.dfa(17);
    let cstate = CState {
        write_lac: a.md.lac(),
        initiator: a.match_id(),
        index_ext,
        eq: a.eq.eqn() as u16,
        user_ptr: 0x5a,
        ..CState::default()
    };
    a.txq
        .emit_idc_amo(
            &cstate,
            &IdcAmo {
                opcode: DmaOp::FetchingAtomic,
                dfa,
                remote_offset: 64,
                local_addr: a.md.iova_of(&a.buf, 256).unwrap(),
                atomic_op: AmoOp::Sum,
                atomic_type: AmoType::Uint64,
                op1_word1: 2,
                ..IdcAmo::default()
            },
        )
        .unwrap();
    a.txq.ring().unwrap();
    assert_eq!(initiator(&a.event_of(EventType::Reply)).1, ReturnCode::Ok);
    assert_eq!(a_mem.read_u64(256), 40, "old value fetched into a's memory");
    assert_eq!(b_mem.read_u64(64), 42, "b's word updated");

    // Events are written into the queues' own memory (the library zeroes them when it
    // acknowledges them: look before that).
    assert!(a_eq.read(0, EQ_LEN).iter().all(|&x| x == 0));
    a.txq
        .emit_dma(&dma(&a, &b, 17, DmaOp::Put, 0, 0, 8))
        .unwrap();
    a.txq.ring().unwrap();
    let ev = a.eq.poll(cxi_common::TIMEOUT).expect("an event");
    assert_eq!(initiator(&ev), (8, ReturnCode::Ok));
    assert!(
        a_eq.read(0, EQ_LEN).iter().any(|&x| x != 0),
        "the ACK is in a's own memory"
    );
    a.eq.ack().unwrap();
}

#[test]
fn registering_memory_that_is_not_mapped_is_efault() {
    let c = cluster();
    let (eq, mem) = (Mapping::new(EQ_LEN), Mapping::new(1 << 16));
    let a = endpoint(&c, 0, &eq, &mem);
    let flags = MapFlags::READ | MapFlags::WRITE;
    // Page 1 is below mmap_min_addr: never mapped.
    assert!(matches!(
        a.lni.map(0x1000, 4096, flags),
        Err(CxiError::Driver(Errno::Efault))
    ));
    let gone = Mapping::new(8192).unmap();
    assert!(matches!(
        a.lni.map(gone, 8192, flags),
        Err(CxiError::Driver(Errno::Efault))
    ));
    assert!(a.dev.attach_buffer(gone, 8192).is_err());
    // A range of which only a part is mapped.
    let mut two = Mapping::new(8192);
    two.unmap_last_page();
    assert!(matches!(
        a.lni.map(two.addr(), 8192, flags),
        Err(CxiError::Driver(Errno::Efault))
    ));
    // A mapped range registers by its plain pointer.
    let md = a.lni.map(mem.addr() + 100, 5000, flags).unwrap();
    assert_eq!((md.va(), md.len()), (mem.addr(), 8192));
    let _ = VNI;
}

#[test]
fn memory_unmapped_after_registration_is_the_hardwares_error_and_never_written() {
    let c = cluster();
    let (a_eq, a_mem) = (Mapping::new(EQ_LEN), Mapping::new(1 << 16));
    let (b_eq, b_mem) = (Mapping::new(EQ_LEN), Mapping::new(1 << 16));
    let mut a = endpoint(&c, 0, &a_eq, &a_mem);
    let mut b = endpoint(&c, 1, &b_eq, &b_mem);
    let mr = b.portal(17, PtAllocOpts::empty());
    b.append(
        &mr,
        PtlList::Priority,
        0,
        1 << 16,
        LeFlags::OP_PUT | LeFlags::OP_GET,
        0,
        9,
        0,
    );
    a_mem.write(0, &[0xC3; 8192]);
    // b's buffer goes away under its registration, and something else is mapped there.
    let b_len = b_mem.len();
    let addr = b_mem.unmap();
    assert!(!b.buf.is_valid());
    let there = Mapping::at(addr, b_len, 0x5A);
    a.txq
        .emit_dma(&dma(&a, &b, 17, DmaOp::Put, 0, 0, 8192))
        .unwrap();
    a.txq.ring().unwrap();
    let (_, rc) = initiator(&a.event_of(EventType::Ack));
    let t = target(&b.event_of(EventType::Put));
    assert_eq!(t.return_code, ReturnCode::NoTranslation, "{t:?}");
    assert_eq!(rc, ReturnCode::NoTranslation);
    assert!(
        there.read(0, b_len).iter().all(|&x| x == 0x5A),
        "the new mapping was not written"
    );

    // The source side: a's buffer unmapped, a put from it reads nothing.
    let _ = a_mem.unmap();
    a.txq
        .emit_dma(&dma(&a, &b, 17, DmaOp::Put, 0, 0, 4096))
        .unwrap();
    a.txq.ring().unwrap();
    let (_, rc) = initiator(&a.event_of(EventType::Ack));
    assert_ne!(rc, ReturnCode::Ok);
    assert!(there.read(0, b_len).iter().all(|&x| x == 0x5A));
}
