//! Hardware rendezvous (cassini.md §6) through rings and doorbells: a RENDEZVOUS_PUT carries
//! its eager bytes; when the target matches it, the target NIC issues the Get to the source's
//! PtlTE at index 255 of its PID granule and lands the rest in the matched buffer, reporting
//! PUT, RENDEZVOUS (`get_issued`) and REPLY (`rendezvous`, `cxi_rdzv_user_ptr`); the source
//! sees its ACK and a GET event on its rendezvous LE. Nothing runs on any CPU between the
//! doorbells and the last event; a header that arrived unexpected is completed the same way
//! by a later append.

mod offload_support;

use firmware_spec::cassini::event::{Event, InitiatorShort, TargetLong};
use offload_support::*;

/// Rendezvous source PtlTE on the initiator: index 255 of its PID (`rdzv_get_idx`).
const PT_SRC: u16 = 20;
/// A receive PtlTE with long target events on the target (index 2 of PID 3).
const PT_RECV: u16 = 8;
const SRC: usize = 0;
const DST: usize = 1;
const RID: u8 = 0x5A;

/// Two nodes set up for rendezvous: rendezvous Gets enabled (or not) on both, the source
/// PtlTE with one LE over the whole user IOVA space (`cxip_rdzv_pte.c`: start 0, length -1,
/// OP_GET, any match bits), and the receive PtlTE.
fn rdzv_net(mem: u64, get_en: bool) -> Net {
    rdzv_setup(Net::with_memory(2, mem), get_en)
}

/// [`rdzv_net`] on the nodes of `net`.
fn rdzv_setup(mut net: Net, get_en: bool) -> Net {
    for i in [SRC, DST] {
        net.node(i).set_rendezvous_gets(get_en).unwrap();
    }
    net.node(SRC)
        .alloc_pte(
            PT_SRC,
            EQ_TGT,
            PtAllocOpts::IS_MATCHING | PtAllocOpts::USE_LONG_EVENT,
            VNI,
            SRC_PID,
            255,
            0,
            2,
        )
        .unwrap();
    net.enable(SRC, PT_SRC);
    let mut src_le = TargetCmd {
        opcode: TgtOp::Append,
        ptl_list: PtlList::Priority,
        ptlte_index: PT_SRC,
        buffer_id: 255,
        start: 0,
        length: (1 << 56) - 1,
        match_id: u32::MAX,
        ignore_bits: u64::MAX,
        ..TargetCmd::default()
    };
    src_le.set_opts(LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE | LeFlags::EVENT_UNLINK_DISABLE);
    net.tgt_cmd(SRC, &src_le.encode());
    net.node(DST)
        .alloc_pte(
            PT_RECV,
            EQ_TGT,
            PtAllocOpts::IS_MATCHING | PtAllocOpts::USE_LONG_EVENT,
            VNI,
            PID,
            2,
            0,
            2,
        )
        .unwrap();
    net.enable(DST, PT_RECV);
    net.settle();
    assert!(net.tgt_events(SRC).is_empty());
    net
}

/// A RENDEZVOUS_PUT of `len` bytes at `src` with `eager` bytes sent eagerly.
fn rdzv_put(src: &Md, len: u32, eager: u32, mb: u64) -> [u8; 64] {
    let mut d = dma(
        DmaOp::RendezvousPut,
        SRC,
        DST,
        2,
        src.iova,
        len,
        mb,
        DmaFlags {
            event_send_disable: true,
            use_offset_for_get: true,
            ..DmaFlags::default()
        },
        0,
        0x5E4D,
    );
    d.remote_offset = src.iova;
    d.eager_length = eager;
    d.rendezvous_id = RID;
    d.encode()
}

fn long(e: &Event) -> TargetLong {
    match e {
        Event::TargetLong(t) => *t,
        other => panic!("not a long target event: {other:?}"),
    }
}

fn short_init(e: &Event) -> InitiatorShort {
    match e {
        Event::InitiatorShort(i) => *i,
        other => panic!("not a short initiator event: {other:?}"),
    }
}

/// `struct cxi_rdzv_user_ptr` {src_nid@0:20, src_pid@20:9, ptlte_index@29:11,
/// rendezvous_id@40:8, buffer_id@48:16}.
fn rdzv_user_ptr(nid: u64, pid: u64, pt: u64, rid: u64, bid: u64) -> u64 {
    nid | (pid << 20) | (pt << 29) | (rid << 40) | (bid << 48)
}

/// Ring the initiator's doorbell, then let only the engine run; returns the packets moved.
fn run_untouched(net: &mut Net, cmd: &[u8; 64]) -> u64 {
    net.tx(SRC, &[cmd]);
    let before = net.c.engine.counters();
    net.settle();
    let after = net.c.engine.counters();
    assert_eq!(
        (after.mmio_reads, after.mmio_writes),
        (before.mmio_reads, before.mmio_writes),
        "no software action between the doorbell and the last event"
    );
    after.packets - before.packets
}

/// Check the three target events, the source's ACK and GET, for a rendezvous of `len` bytes
/// with `eager` eager bytes into buffer id `bid`.
fn check_events(net: &mut Net, len: u32, eager: u32, bid: u16, first: EventType) {
    let t = net.tgt_events(DST);
    assert_eq!(t.len(), 3, "{t:?}");
    let put = long(&t[0]);
    assert_eq!(put.event_type, first);
    assert!(put.rendezvous);
    // PUT reports the matched length; PUT_OVERFLOW the eager bytes stored in the overflow
    // buffer (where `start` points).
    let stored = if first == EventType::PutOverflow {
        eager
    } else {
        len
    };
    assert_eq!((put.mlength, put.rlength), (stored, len));
    let rdv = long(&t[1]);
    assert_eq!(rdv.event_type, EventType::Rendezvous);
    assert!(rdv.get_issued, "the NIC issued the Get");
    assert_eq!(rdv.rendezvous_id, RID);
    assert_eq!(
        rdv.initiator,
        (SRC as u32) << 12 | SRC_PID,
        "RENDEZVOUS reports the source DFA"
    );
    let rep = short_init(&t[2]);
    assert_eq!(
        (rep.event_type, rep.return_code),
        (EventType::Reply, ReturnCode::Ok)
    );
    assert!(rep.rendezvous);
    assert_eq!(rep.mlength, len - eager);
    assert_eq!(
        rep.user_ptr,
        rdzv_user_ptr(
            SRC as u64,
            u64::from(SRC_PID),
            u64::from(PT_RECV),
            u64::from(RID),
            u64::from(bid)
        )
    );
    // The source: ACK of the put, GET on its rendezvous LE (send completion).
    let a = net.tx_events(SRC);
    assert_eq!(a.len(), 1, "{a:?}");
    let ack = init_fields(&a[0]);
    assert_eq!(
        (ack.0, ack.1, ack.3),
        (EventType::Ack, ReturnCode::Ok, 0x5E4D)
    );
    let g = net.tgt_events(SRC);
    assert_eq!(g.len(), 1, "{g:?}");
    let get = long(&g[0]);
    assert_eq!(
        (get.event_type, get.return_code, get.buffer_id),
        (EventType::Get, ReturnCode::Ok, 255)
    );
    assert_eq!(get.mlength, len - eager);
    assert_eq!(get.match_bits & 0xFFF, 0xF00 | u64::from(RID));
}

#[test]
fn matched_rendezvous_is_pulled_by_the_target_nic() {
    let mut net = rdzv_net(NODE_MEM, true);
    let len = (1 << 20) + 123;
    let eager = 3000;
    let src = net.c.nodes[SRC].map(u64::from(len), true, true).unwrap();
    let data = pattern(len as usize, 0x71);
    net.node(SRC).write_host(src.host, &data).unwrap();
    let dst = net.c.nodes[DST].map(u64::from(len), true, true).unwrap();
    // The receive counts bytes on CT 50: counted once the Get has landed everything.
    let wbmd = net.c.nodes[DST].map(64, true, true).unwrap();
    let ct = net.node(DST).alloc_ct(50, Some(&wbmd)).unwrap();
    net.tgt_cmd(
        DST,
        &le_ct(
            PT_RECV,
            9,
            &dst,
            LeFlags::OP_PUT
                | LeFlags::USE_ONCE
                | LeFlags::EVENT_LINK_DISABLE
                | LeFlags::EVENT_UNLINK_DISABLE
                | LeFlags::EVENT_CT_COMM
                | LeFlags::EVENT_CT_BYTES,
            0x42,
            50,
        ),
    );
    net.settle();
    let pkts = run_untouched(&mut net, &rdzv_put(&src, len, eager, 0x42));
    assert!(pkts > u64::from(len) / 2048, "the data crossed the fabric");
    assert_eq!(
        net.node(DST).read_host(dst.host, len as usize).unwrap(),
        data,
        "every byte landed: eager part by the put, the rest by the Get"
    );
    check_events(&mut net, len, eager, 9, EventType::Put);
    let w = ct.writeback(net.node(DST)).unwrap();
    assert_eq!((w.ct_success, w.ct_failure), (u64::from(len), 0));
}

#[test]
fn unexpected_rendezvous_is_completed_by_a_later_append() {
    let mut net = rdzv_net(NODE_MEM, true);
    let len = 200_000u32;
    let eager = 2048;
    let src = net.c.nodes[SRC].map(u64::from(len), true, true).unwrap();
    let data = pattern(len as usize, 0x19);
    net.node(SRC).write_host(src.host, &data).unwrap();
    let ovf = net.c.nodes[DST].map(64 * 1024, true, true).unwrap();
    net.tgt_cmd(
        DST,
        &le_cmd(
            TgtOp::Append,
            PT_RECV,
            PtlList::Overflow,
            77,
            &ovf,
            LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL | LeFlags::EVENT_LINK_DISABLE,
            0,
            u64::MAX,
        ),
    );
    net.settle();
    // The put arrives first: its eager bytes wait in the overflow buffer, nothing is pulled.
    let pkts = run_untouched(&mut net, &rdzv_put(&src, len, eager, 0x77));
    assert!(pkts < 10, "only the eager part moved: {pkts} packets");
    let t = net.tgt_events(DST);
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(
        (long(&t[0]).event_type, long(&t[0]).ptl_list),
        (EventType::Put, PtlList::Overflow)
    );
    assert_eq!(
        net.node(DST).read_host(ovf.host, eager as usize).unwrap(),
        data[..eager as usize]
    );
    assert!(net.tgt_events(SRC).is_empty(), "no Get yet");
    // The receive is posted: the append matches the header and the NIC pulls the rest.
    let dst = net.c.nodes[DST].map(u64::from(len), true, true).unwrap();
    net.tgt_cmd(
        DST,
        &le(
            PT_RECV,
            12,
            &dst,
            LeFlags::OP_PUT
                | LeFlags::USE_ONCE
                | LeFlags::EVENT_LINK_DISABLE
                | LeFlags::EVENT_UNLINK_DISABLE,
            0x77,
        ),
    );
    let before = net.c.engine.counters();
    net.settle();
    let after = net.c.engine.counters();
    assert_eq!(after.mmio_writes, before.mmio_writes);
    let got = net.node(DST).read_host(dst.host, len as usize).unwrap();
    assert_eq!(
        got[eager as usize..],
        data[eager as usize..],
        "the Get landed the rest after the eager part"
    );
    check_events(&mut net, len, eager, 12, EventType::PutOverflow);
}

#[test]
fn without_hardware_gets_software_must_pull() {
    let mut net = rdzv_net(NODE_MEM, false);
    let len = 50_000u32;
    let src = net.c.nodes[SRC].map(u64::from(len), true, true).unwrap();
    net.node(SRC)
        .write_host(src.host, &pattern(len as usize, 3))
        .unwrap();
    let dst = net.c.nodes[DST].map(u64::from(len), true, true).unwrap();
    net.tgt_cmd(
        DST,
        &le(
            PT_RECV,
            5,
            &dst,
            LeFlags::OP_PUT
                | LeFlags::USE_ONCE
                | LeFlags::EVENT_LINK_DISABLE
                | LeFlags::EVENT_UNLINK_DISABLE,
            1,
        ),
    );
    net.settle();
    run_untouched(&mut net, &rdzv_put(&src, len, 1024, 1));
    let t = net.tgt_events(DST);
    assert_eq!(t.len(), 2, "PUT and RENDEZVOUS, no REPLY: {t:?}");
    assert!(!long(&t[1]).get_issued);
    assert_eq!(
        net.node(DST).read_host(dst.host + 1024, 16).unwrap(),
        vec![0u8; 16],
        "nothing beyond the eager part"
    );
    assert!(net.tgt_events(SRC).is_empty());
    assert_eq!(
        net.node(DST)
            .csr_field(csr::C_LPE_CFG_GET_CTRL, 0, f::c_lpe_cfg_get_ctrl::GET_EN)
            .unwrap(),
        0
    );
}

/// 64 MiB, checked byte by byte. At debug opt-level 1 this takes a few seconds (see
/// docs/PERFORMANCE.md for the release-mode bandwidth).
#[test]
fn sixty_four_mib_rendezvous_with_no_software_in_between() {
    let len: u32 = 64 << 20;
    let mut net = rdzv_net(96 << 20, true);
    let src = net.c.nodes[SRC].map(u64::from(len), true, true).unwrap();
    let data = pattern(len as usize, 0xA5);
    net.node(SRC).write_host(src.host, &data).unwrap();
    let dst = net.c.nodes[DST].map(u64::from(len), true, true).unwrap();
    net.tgt_cmd(
        DST,
        &le(
            PT_RECV,
            64,
            &dst,
            LeFlags::OP_PUT
                | LeFlags::USE_ONCE
                | LeFlags::EVENT_LINK_DISABLE
                | LeFlags::EVENT_UNLINK_DISABLE,
            0x64,
        ),
    );
    net.settle();
    let eager = 16 * 1024;
    let pkts = run_untouched(&mut net, &rdzv_put(&src, len, eager, 0x64));
    assert!(pkts >= u64::from(len) / 2048);
    let got = net.node(DST).read_host(dst.host, len as usize).unwrap();
    assert!(got == data, "every byte of 64 MiB landed");
    check_events(&mut net, len, eager, 64, EventType::Put);
}

/// On the threaded engine, with nothing on the fabric that needs the frames' bytes, the
/// REPLY frames of the Get the target NIC issues go as trains (emu_core::fabric::Train):
/// every byte lands, the events are those of the frame-by-frame runs above, and the
/// source's GET event (its send completion) is there once the bytes have been read. Fails
/// if the reply went frame by frame (2,000-odd packets).
#[test]
fn on_the_threaded_engine_the_pull_goes_as_trains() {
    let len: u32 = (4 << 20) + 123;
    let mut net = rdzv_setup(Net::on(Cluster::threaded(2).unwrap()), true);
    let src = net.c.nodes[SRC].map(u64::from(len), true, true).unwrap();
    let data = pattern(len as usize, 0x3C);
    net.node(SRC).write_host(src.host, &data).unwrap();
    let dst = net.c.nodes[DST].map(u64::from(len), true, true).unwrap();
    net.tgt_cmd(
        DST,
        &le(
            PT_RECV,
            64,
            &dst,
            LeFlags::OP_PUT
                | LeFlags::USE_ONCE
                | LeFlags::EVENT_LINK_DISABLE
                | LeFlags::EVENT_UNLINK_DISABLE,
            0x64,
        ),
    );
    net.settle();
    let eager = 16 * 1024;
    let pkts = run_untouched(&mut net, &rdzv_put(&src, len, eager, 0x64));
    assert!(pkts < 64, "{pkts} packets: the pull did not go as trains");
    let got = net.node(DST).read_host(dst.host, len as usize).unwrap();
    assert!(got == data, "every byte landed");
    check_events(&mut net, len, eager, 64, EventType::Put);
}
