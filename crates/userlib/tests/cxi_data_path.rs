//! End-to-end data path through `userlib::cxi` only (no emulator or driver internals): two
//! emulated Cassinis from the driver's cluster builder, every object allocated through the
//! library, commands written into rings and rung with doorbells, completions read from
//! event queues and counter write-backs.

mod cxi_common;

use cxi_common::{Ep, TIMEOUT, cluster};
use firmware_spec::cassini::amo::{AmoOp, AmoType};
use firmware_spec::cassini::cmd::{
    CState, DmaAmo, DmaFlags, DmaOp, FullDma, IdcAmo, IdcMsg, Payload,
};
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::le::{LeFlags, PtAllocOpts, PtlList, TcType, TrafficClass, TrigCp};
use firmware_spec::cassini::rc::ReturnCode;
use platform::EngineKind;
use userlib::cxi::{CqOptions, trig};

const DET: EngineKind = EngineKind::Deterministic { seed: 3 };

fn target_long(ev: &Event) -> firmware_spec::cassini::event::TargetLong {
    match ev {
        Event::TargetLong(t) => *t,
        other => panic!("expected a long target event, got {other:?}"),
    }
}

fn initiator(ev: &Event) -> (u64, u32, ReturnCode) {
    match ev {
        Event::InitiatorShort(i) => (i.user_ptr, i.mlength, i.return_code),
        Event::InitiatorLong(i) => (i.user_ptr, i.mlength, i.return_code),
        other => panic!("expected an initiator event, got {other:?}"),
    }
}

/// A full DMA PUT of `len` bytes at `offset` of `src`'s buffer to PtlTE `index` of `dst`.
fn put(src: &Ep, dst: &Ep, index: u32, offset: u64, len: u32, match_bits: u64) -> FullDma {
    let (dfa, index_ext) = dst.dfa(index);
    FullDma {
        opcode: DmaOp::Put,
        index_ext,
        lac: src.md.lac(),
        flags: DmaFlags::default(),
        dfa,
        remote_offset: 0,
        local_addr: src.md.iova_of(&src.buf, offset).unwrap(),
        request_len: len,
        ct: 0,
        eq: src.eq.eqn() as u16,
        initiator: src.match_id(),
        match_bits,
        user_ptr: 0xabc0 + u64::from(len),
        ..FullDma::default()
    }
}

fn tagged_send_matched_into_posted_buffers(engine: EngineKind) {
    let c = cluster(engine);
    let mut a = Ep::new(&c, 0, 1 << 16);
    let mut b = Ep::new(&c, 1, 1 << 16);
    let rx = b.portal(0, PtAllocOpts::IS_MATCHING);
    // Two posted receives (priority LEs) with different tags.
    let flags = LeFlags::OP_PUT | LeFlags::USE_ONCE;
    b.append(&rx, PtlList::Priority, 0, 4096, flags, 0x1111, 1, 0);
    b.append(&rx, PtlList::Priority, 4096, 4096, flags, 0x2222, 2, 0);

    // Tag 0x2222 first, as a DMA send of 1000 bytes.
    let msg: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
    a.buf.write(0, &msg).unwrap();
    a.txq.emit_dma(&put(&a, &b, 0, 0, 1000, 0x2222)).unwrap();
    a.txq.ring().unwrap();
    let ack = a.event_of(EventType::Ack);
    let (user_ptr, mlength, rc) = initiator(&ack);
    assert_eq!(
        (user_ptr, mlength, rc),
        (0xabc0 + 1000, 1000, ReturnCode::Ok)
    );

    let ev = b.event_of(EventType::Put);
    let t = target_long(&ev);
    assert_eq!(t.return_code, ReturnCode::Ok);
    assert_eq!(t.match_bits, 0x2222);
    assert_eq!(t.buffer_id, 2, "matched the LE with tag 0x2222");
    assert_eq!(t.ptl_list, PtlList::Priority);
    assert_eq!(t.mlength, 1000);
    assert_eq!(t.initiator, a.match_id());
    assert_eq!(t.start, b.md.iova_of(&b.buf, 4096).unwrap());
    let mut got = vec![0u8; 1000];
    b.buf.read(4096, &mut got).unwrap();
    assert_eq!(got, msg, "data landed in the posted buffer of tag 0x2222");
    let mut other = vec![0u8; 16];
    b.buf.read(0, &mut other).unwrap();
    assert_eq!(other, vec![0u8; 16], "the tag 0x1111 buffer is untouched");

    // Tag 0x1111 as an IDC small message (inline payload, C_STATE carries the initiator).
    let (dfa, index_ext) = b.dfa(0);
    let cstate = CState {
        initiator: a.match_id(),
        index_ext,
        eq: a.eq.eqn() as u16,
        user_ptr: 0x77,
        ..CState::default()
    };
    let small = b"hello, cassini";
    a.txq
        .emit_idc_msg(
            &cstate,
            &IdcMsg {
                dfa,
                match_bits: 0x1111,
                header_data: 0xfeed,
                user_ptr: 0x77,
                payload: Payload::new(small).unwrap(),
            },
        )
        .unwrap();
    a.txq.ring().unwrap();
    let (_, mlength, rc) = initiator(&a.event_of(EventType::Ack));
    assert_eq!((mlength, rc), (small.len() as u32, ReturnCode::Ok));
    let t = target_long(&b.event_of(EventType::Put));
    assert_eq!(
        (t.match_bits, t.buffer_id, t.header_data),
        (0x1111, 1, 0xfeed)
    );
    let mut got = vec![0u8; small.len()];
    b.buf.read(0, &mut got).unwrap();
    assert_eq!(&got, small);
}

#[test]
fn tagged_send_is_matched_by_hardware_into_a_posted_buffer() {
    tagged_send_matched_into_posted_buffers(DET);
}

#[test]
fn tagged_send_on_the_threaded_engine() {
    tagged_send_matched_into_posted_buffers(EngineKind::Threaded);
}

#[test]
fn rma_write_and_read_on_a_non_matching_ptlte() {
    let c = cluster(DET);
    let mut a = Ep::new(&c, 0, 1 << 20);
    let mut b = Ep::new(&c, 1, 1 << 20);
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
    // Write 200 KiB at remote offset 4096 (several MTU packets).
    let len = 200 * 1024u32;
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    a.buf.write(0, &data).unwrap();
    let mut w = put(&a, &b, 17, 0, len, 0);
    w.remote_offset = 4096;
    a.txq.emit_dma(&w).unwrap();
    a.txq.ring().unwrap();
    let (_, mlength, rc) = initiator(&a.event_of(EventType::Ack));
    assert_eq!((mlength, rc), (len, ReturnCode::Ok));
    let t = target_long(&b.event_of(EventType::Put));
    assert_eq!((t.mlength, t.remote_offset, t.buffer_id), (len, 4096, 9));
    let mut got = vec![0u8; len as usize];
    b.buf.read(4096, &mut got).unwrap();
    assert_eq!(got, data);

    // Read 64 KiB back from remote offset 8192 into local offset 512 KiB.
    let rlen = 64 * 1024u32;
    let mut r = put(&a, &b, 17, 512 * 1024, rlen, 0);
    r.opcode = DmaOp::Get;
    r.remote_offset = 8192;
    a.txq.emit_dma(&r).unwrap();
    a.txq.ring().unwrap();
    let (_, mlength, rc) = initiator(&a.event_of(EventType::Reply));
    assert_eq!((mlength, rc), (rlen, ReturnCode::Ok));
    let t = target_long(&b.event_of(EventType::Get));
    assert_eq!((t.mlength, t.remote_offset), (rlen, 8192));
    let mut got = vec![0u8; rlen as usize];
    a.buf.read(512 * 1024, &mut got).unwrap();
    assert_eq!(&got[..], &data[4096..4096 + rlen as usize]);
}

#[test]
fn fetching_atomic_sum_returns_the_old_value() {
    let c = cluster(DET);
    let mut a = Ep::new(&c, 0, 1 << 16);
    let mut b = Ep::new(&c, 1, 1 << 16);
    let mr = b.portal(18, PtAllocOpts::empty());
    b.append(
        &mr,
        PtlList::Priority,
        0,
        4096,
        LeFlags::OP_PUT | LeFlags::OP_GET,
        0,
        3,
        0,
    );
    b.buf.write_u64(64, 40).unwrap();
    let (dfa, index_ext) = b.dfa(18);

    // IDC fetching AMO: operand inline, fetched value written to local offset 256.
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
    let (_, _, rc) = initiator(&a.event_of(EventType::Reply));
    assert_eq!(rc, ReturnCode::Ok);
    assert_eq!(a.buf.read_u64(256).unwrap(), 40, "fetched the old value");
    assert_eq!(b.buf.read_u64(64).unwrap(), 42, "target updated");
    let t = target_long(&b.event_of(EventType::FetchAtomic));
    assert_eq!((t.atomic_op, t.atomic_type), (AmoOp::Sum, AmoType::Uint64));

    // DMA fetching AMO: operand 1 read from local offset 512, result to 768.
    a.buf.write_u64(512, 100).unwrap();
    a.txq
        .emit_dma_amo(&DmaAmo {
            opcode: DmaOp::FetchingAtomic,
            index_ext,
            lac: a.md.lac(),
            dfa,
            remote_offset: 64,
            local_read_addr: a.md.iova_of(&a.buf, 512).unwrap(),
            eq: a.eq.eqn() as u16,
            initiator: a.match_id(),
            local_write_addr: a.md.iova_of(&a.buf, 768).unwrap(),
            atomic_op: AmoOp::Sum,
            atomic_type: AmoType::Uint64,
            write_lac: a.md.lac(),
            ..DmaAmo::default()
        })
        .unwrap();
    a.txq.ring().unwrap();
    let (_, _, rc) = initiator(&a.event_of(EventType::Reply));
    assert_eq!(rc, ReturnCode::Ok);
    assert_eq!(a.buf.read_u64(768).unwrap(), 42);
    assert_eq!(b.buf.read_u64(64).unwrap(), 142);
}

#[test]
fn counters_count_acks_and_fire_a_triggered_put() {
    let c = cluster(DET);
    let mut a = Ep::new(&c, 0, 1 << 16);
    let mut b = Ep::new(&c, 1, 1 << 16);
    let mr = b.portal(19, PtAllocOpts::empty());
    b.append(
        &mr,
        PtlList::Priority,
        0,
        1 << 16,
        LeFlags::OP_PUT | LeFlags::OP_GET,
        0,
        4,
        0,
    );
    let wb = a.dev.alloc_buffer(4096).unwrap();
    let acks = a.lni.alloc_ct(&wb, 0).unwrap();
    let trigger = a.lni.alloc_ct(&wb, 8).unwrap();
    let done = a.lni.alloc_ct(&wb, 16).unwrap();

    // Three puts counted on `acks` (success events disabled: only the CT sees them).
    a.buf.write(0, &[0x5u8; 256]).unwrap();
    for i in 0..3u64 {
        let mut p = put(&a, &b, 19, 0, 256, 0);
        p.remote_offset = i * 256;
        p.ct = acks.ctn();
        p.flags = DmaFlags {
            event_ct_ack: true,
            event_success_disable: true,
            ..DmaFlags::default()
        };
        a.txq.emit_dma(&p).unwrap();
    }
    a.txq.ring().unwrap();
    let wbv = acks.wait(3, TIMEOUT).unwrap();
    assert_eq!((wbv.ct_success, wbv.ct_failure), (3, 0));
    assert!(wbv.ct_writeback);

    // A put on a trigger queue, fired when `trigger` reaches 2, completion counted on
    // `done`.
    let tcp = a
        .lni
        .alloc_trig_cp(
            10,
            TrafficClass::BestEffort,
            TcType::Default,
            TrigCp::TrigLcid,
        )
        .unwrap();
    let mut tq = a
        .lni
        .alloc_cmdq(Some(&a.eq), &CqOptions::trigger(64, &tcp))
        .unwrap();
    a.buf.write(4096, &[0xc3u8; 512]).unwrap();
    let mut p = put(&a, &b, 19, 4096, 512, 0);
    p.remote_offset = 8192;
    p.ct = done.ctn();
    p.flags = DmaFlags {
        event_ct_ack: true,
        event_success_disable: true,
        ..DmaFlags::default()
    };
    tq.emit_trig_dma(&trig::full_dma(trigger.ctn(), 2, p))
        .unwrap();
    tq.ring().unwrap();
    tq.wait_empty(TIMEOUT).unwrap();
    assert_eq!(tq.ack_counter().unwrap(), 1, "one triggered op pending");

    trigger.inc_success(1).unwrap();
    assert_eq!(trigger.wait(1, TIMEOUT).unwrap().ct_success, 1);
    // Let the device run out of work: the put must not have fired at 1 of 2.
    while a.dev.progress() {}
    assert_eq!(b.buf.read_u64(8192).unwrap(), 0, "fired early");
    assert_eq!(done.writeback().unwrap().ct_success, 0);

    trigger.inc_success(1).unwrap();
    let d = done.wait(1, TIMEOUT).unwrap();
    assert_eq!((d.ct_success, d.ct_failure), (1, 0));
    let mut got = vec![0u8; 512];
    b.buf.read(8192, &mut got).unwrap();
    assert_eq!(got, vec![0xc3u8; 512]);
    assert_eq!(tq.ack_counter().unwrap(), 0);

    // CT_SET through the trigger queue, and the reset doorbell.
    acks.set(&mut tq, Some(10), None).unwrap();
    tq.ring().unwrap();
    assert_eq!(acks.wait(10, TIMEOUT).unwrap().ct_success, 10);
    acks.reset_success().unwrap();
    while a.dev.progress() {}
    assert_eq!(acks.writeback().unwrap().ct_success, 0);
    drop(tq);
    drop(tcp);
}
