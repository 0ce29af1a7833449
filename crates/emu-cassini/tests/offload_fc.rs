//! Flow control (cassini.md §4.3) through rings and doorbells: a flow-controlled PtlTE goes
//! DISABLED when unexpected-header space (the LE pool) or the EQ runs out; senders get
//! PT_DISABLED, the drop count counts, a STATE_CHANGE reports it; software recovers with
//! libfabric's protocol (onload the unexpected headers, FC_NOTIFY drop counts from the
//! initiators, SETSTATE with the matching drop count, FC_RESUME, replay) and every message
//! is delivered exactly once. Also: SETSTATE with a wrong drop count, and recovery into the
//! SOFTWARE_MANAGED state with the REQUEST list.

mod offload_support;

use std::collections::BTreeMap;

use firmware_spec::cassini::event::{Event, StateChangeFields, TargetLong};
use firmware_spec::cassini::le::ScReason;
use offload_support::*;

const TGT_NODE: usize = 0;
/// The flow-controlled receive PtlTE (index 4) and the control PtlTE (index 5, EQ 3) that
/// carries FC_NOTIFY / FC_RESUME side-band messages (libfabric uses index 117).
const PT_FC: u16 = 10;
const PT_CTRL: u16 = 11;
const IDX_FC: u32 = 4;
const IDX_CTRL: u32 = 5;
const EQ_CTRL: u16 = 3;
const MSG: u32 = 512;
/// Messages per initiator (the EQ-full test sends more than a one-page EQ holds).
const M: u64 = 20;
const M_EQ: u64 = 80;

fn long(e: &Event) -> TargetLong {
    match e {
        Event::TargetLong(t) => *t,
        other => panic!("not a long target event: {other:?}"),
    }
}

/// The target and `inits` initiators; every node has a control PtlTE with a persistent
/// buffer; the target has the flow-controlled PtlTE with `fc_opts` and two overflow buffers.
struct Fc {
    net: Net,
    /// Messages per initiator.
    m: u64,
    ctrl_eq: Vec<EqRing>,
    src: Vec<Md>,
    data: Vec<Vec<u8>>,
    ovf: Vec<Md>,
}

fn tag(init: usize, seq: u64) -> u64 {
    ((init as u64) << 32) | seq
}

fn setup(inits: usize, m: u64, fc_opts: PtAllocOpts, tgt_eq: EqOpts) -> Fc {
    let mut net = Net::new(inits as u32 + 1);
    let mut ctrl_eq = Vec::new();
    for i in 0..=inits {
        let n = &mut net.c.nodes[i];
        let eq_opts = if i == TGT_NODE {
            tgt_eq
        } else {
            EqOpts::default()
        };
        ctrl_eq.push(n.alloc_eq(EQ_CTRL, 16 * PAGE, eq_opts).unwrap());
        n.alloc_pte(
            PT_CTRL,
            EQ_CTRL,
            PtAllocOpts::IS_MATCHING | PtAllocOpts::USE_LONG_EVENT,
            VNI,
            PID,
            IDX_CTRL,
            0,
            5,
        )
        .unwrap();
        let buf = n.map(64 * 1024, true, true).unwrap();
        net.tgt_cmd(i, &set_state(PT_CTRL, PtlteState::Enabled, 0));
        net.settle();
        let sc = ctrl_eq[i].next(&net.c.nodes[i]).unwrap().unwrap();
        assert_eq!(sc.event_type(), EventType::StateChange);
        net.tgt_cmd(
            i,
            &le_cmd(
                TgtOp::Append,
                PT_CTRL,
                PtlList::Priority,
                1,
                &buf,
                LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL | LeFlags::EVENT_LINK_DISABLE,
                0,
                u64::MAX,
            ),
        );
    }
    net.c.nodes[TGT_NODE]
        .alloc_pte(
            PT_FC,
            EQ_TGT,
            PtAllocOpts::IS_MATCHING | PtAllocOpts::USE_LONG_EVENT | fc_opts,
            VNI,
            PID,
            IDX_FC,
            0,
            4,
        )
        .unwrap();
    net.enable(TGT_NODE, PT_FC);
    let mut ovf = Vec::new();
    for b in 0..2u16 {
        let md = net.c.nodes[TGT_NODE].map(4096, true, true).unwrap();
        net.tgt_cmd(TGT_NODE, &overflow_le(100 + b, &md));
        ovf.push(md);
    }
    let mut src = Vec::new();
    let mut data = Vec::new();
    for i in 1..=inits {
        let md = net.c.nodes[i].map(m * u64::from(MSG), true, true).unwrap();
        let d = pattern((m * u64::from(MSG)) as usize, i as u8);
        net.node(i).write_host(md.host, &d).unwrap();
        src.push(md);
        data.push(d);
    }
    net.settle();
    for i in 0..=inits {
        assert!(net.tgt_events(i).is_empty());
    }
    Fc {
        net,
        m,
        ctrl_eq,
        src,
        data,
        ovf,
    }
}

/// An overflow buffer (libfabric: MANAGE_LOCAL, NO_TRUNCATE, OP_PUT), unlinked when less
/// than one message fits.
fn overflow_le(bid: u16, md: &Md) -> [u8; 64] {
    let mut t = TargetCmd::decode(&le_cmd(
        TgtOp::Append,
        PT_FC,
        PtlList::Overflow,
        bid,
        md,
        LeFlags::OP_PUT
            | LeFlags::MANAGE_LOCAL
            | LeFlags::NO_TRUNCATE
            | LeFlags::EVENT_LINK_DISABLE
            | LeFlags::EVENT_UNLINK_DISABLE,
        0,
        u64::MAX,
    ))
    .unwrap();
    t.min_free = MSG;
    t.encode()
}

/// Message `seq` of initiator `i` (1-based node) to the flow-controlled PtlTE.
fn send(fc: &Fc, i: usize, seq: u64) -> [u8; 64] {
    dma(
        DmaOp::Put,
        i,
        TGT_NODE,
        IDX_FC,
        fc.src[i - 1].iova + seq * u64::from(MSG),
        MSG,
        tag(i, seq),
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        0,
        seq,
    )
    .encode()
}

/// A side-band control message (zero payload) from `src` to `dst` carrying `value`.
fn ctrl(src: usize, dst: usize, local: &Md, kind: u64, value: u64) -> [u8; 64] {
    let mut d = dma(
        DmaOp::Put,
        src,
        dst,
        IDX_CTRL,
        local.iova,
        8,
        kind,
        DmaFlags {
            event_send_disable: true,
            event_success_disable: true,
            ..DmaFlags::default()
        },
        0,
        0,
    );
    d.header_data = value;
    d.encode()
}

const FC_NOTIFY: u64 = 1;
const FC_RESUME: u64 = 2;

fn ctrl_events(fc: &mut Fc, node: usize) -> Vec<TargetLong> {
    let mut v = Vec::new();
    while let Some(e) = fc.ctrl_eq[node].next(&fc.net.c.nodes[node]).unwrap() {
        v.push(long(&e));
    }
    fc.ctrl_eq[node].ack(&fc.net.c.nodes[node]).unwrap();
    v
}

fn drop_count(net: &Net) -> u64 {
    net.node(TGT_NODE)
        .csr_field(
            csr::C_LPE_CFG_PTL_TABLE,
            u32::from(PT_FC),
            f::c_lpe_cfg_ptl_table::DROP_COUNT,
        )
        .unwrap()
}

fn state(net: &Net) -> PtlteState {
    let raw = net
        .node(TGT_NODE)
        .csr_field(
            csr::C_LPE_CFG_PTL_TABLE,
            u32::from(PT_FC),
            f::c_lpe_cfg_ptl_table::PTL_STATE,
        )
        .unwrap();
    PtlteState::try_from(raw as u8).unwrap()
}

/// Every initiator sends all its messages at once; returns, per initiator, the sequence
/// numbers dropped with PT_DISABLED, in order (the ones to replay).
fn blast(fc: &mut Fc, inits: usize) -> Vec<Vec<u64>> {
    for seq in 0..fc.m {
        for i in 1..=inits {
            let cmd = send(fc, i, seq);
            fc.net.tx(i, &[&cmd]);
        }
    }
    fc.net.settle();
    let mut dropped = Vec::new();
    for i in 1..=inits {
        let mut d = Vec::new();
        let ev = fc.net.tx_events(i);
        assert_eq!(ev.len() as u64, fc.m);
        for e in &ev {
            let (t, rc, _, user_ptr, _) = init_fields(e);
            assert_eq!(t, EventType::Ack);
            match rc {
                ReturnCode::Ok => {}
                ReturnCode::PtDisabled => d.push(user_ptr),
                other => panic!("unexpected {other:?}"),
            }
        }
        dropped.push(d);
    }
    dropped
}

/// Onload: SEARCH_AND_DELETE every unexpected header into software's unexpected list (tag
/// -> data read from where the header's data landed in an overflow buffer).
fn onload(fc: &mut Fc, sw: &mut BTreeMap<u64, Vec<u8>>) {
    let mut t = TargetCmd::decode(&le_cmd(
        TgtOp::SearchAndDelete,
        PT_FC,
        PtlList::Unexpected,
        0,
        &fc.ovf[0],
        LeFlags::empty(),
        0,
        u64::MAX,
    ))
    .unwrap();
    t.length = u64::MAX >> 8;
    fc.net.tgt_cmd(TGT_NODE, &t.encode());
    fc.net.settle();
    let ev = fc.net.tgt_events(TGT_NODE);
    let (last, headers) = ev.split_last().unwrap();
    assert_eq!(long(last).event_type, EventType::Search);
    for e in headers {
        let h = long(e);
        assert_eq!(h.event_type, EventType::PutOverflow);
        let host = fc
            .ovf
            .iter()
            .find(|m| h.start >= m.iova && h.start < m.iova + m.len)
            .map(|m| m.host + (h.start - m.iova))
            .expect("header data lies in an overflow buffer");
        let bytes = fc
            .net
            .node(TGT_NODE)
            .read_host(host, h.mlength as usize)
            .unwrap();
        assert!(sw.insert(h.match_bits, bytes).is_none(), "onloaded twice");
    }
}

#[test]
fn exhausted_unexpected_space_disables_and_recovery_delivers_every_message_once() {
    const INITS: usize = 2;
    let mut fc = setup(INITS, M, PtAllocOpts::EN_FLOWCTRL, EqOpts::default());
    // Unexpected-header space: the PtlTE's LE pool holds the two overflow buffers, two
    // control buffers of other PtlTEs... and 8 headers.
    let held = 2 + 1;
    fc.net
        .node(TGT_NODE)
        .set_le_pool(0, 0, 0, held + 8)
        .unwrap();

    let dropped = blast(&mut fc, INITS);
    let total_dropped: usize = dropped.iter().map(Vec::len).sum();
    // Eight headers fit, and one more once the first overflow buffer (4 KiB, eight
    // messages) unlinked itself and returned its entry to the pool.
    let accepted = 2 * M as usize - total_dropped;
    assert_eq!(accepted, 9, "the rest were dropped");
    // STATE_CHANGE: DISABLED by the NIC, reason FC_UNEXPECTED_FAIL.
    let ev = fc.net.tgt_events(TGT_NODE);
    let sc: Vec<TargetLong> = ev
        .iter()
        .map(long)
        .filter(|e| e.event_type == EventType::StateChange)
        .collect();
    assert_eq!(sc.len(), 1, "{ev:?}");
    let f = StateChangeFields::from_initiator(sc[0].initiator).unwrap();
    assert_eq!(
        (f.ptlte_state, f.sc_reason, f.sc_nic_auto),
        (PtlteState::Disabled, ScReason::FcUnexpectedFail, true)
    );
    assert_eq!(state(&fc.net), PtlteState::Disabled);
    // Cassini 1 does not count the message that triggered flow control (libfabric starts
    // its count at -1 there).
    let dc = drop_count(&fc.net);
    assert_eq!(dc, total_dropped as u64 - 1);

    // Target: onload the unexpected headers (frees their pool entries).
    let mut sw = BTreeMap::new();
    onload(&mut fc, &mut sw);
    assert_eq!(sw.len(), accepted);
    // A premature SETSTATE (wrong drop count) is refused: NO_MATCH, still DISABLED.
    fc.net
        .tgt_cmd(TGT_NODE, &set_state(PT_FC, PtlteState::Enabled, 0));
    fc.net.settle();
    let ev = fc.net.tgt_events(TGT_NODE);
    assert_eq!(
        (long(&ev[0]).event_type, long(&ev[0]).return_code),
        (EventType::StateChange, ReturnCode::NoMatch)
    );
    assert_eq!(state(&fc.net), PtlteState::Disabled);

    // Initiators: every send to the peer has completed; report the drops (FC_NOTIFY).
    let note = fc.net.c.nodes[1].map(8, true, true).unwrap();
    let note2 = fc.net.c.nodes[2].map(8, true, true).unwrap();
    for (i, md) in [(1usize, note), (2usize, note2)] {
        let n = dropped[i - 1].len() as u64;
        if n > 0 {
            let cmd = ctrl(i, TGT_NODE, &md, FC_NOTIFY, n);
            fc.net.tx(i, &[&cmd]);
        }
    }
    fc.net.settle();
    let notes = ctrl_events(&mut fc, TGT_NODE);
    let reported: u64 = notes
        .iter()
        .filter(|e| e.match_bits == FC_NOTIFY)
        .map(|e| e.header_data)
        .sum();
    // libfabric on Cassini 1: the reported drops equal the PtlTE's count plus one.
    assert_eq!(reported, drop_count(&fc.net) + 1);
    // Re-enable with the matching drop count.
    fc.net
        .tgt_cmd(TGT_NODE, &set_state(PT_FC, PtlteState::Enabled, dc as u32));
    fc.net.settle();
    let ev = fc.net.tgt_events(TGT_NODE);
    assert_eq!(
        (long(&ev[0]).event_type, long(&ev[0]).return_code),
        (EventType::StateChange, ReturnCode::Ok)
    );
    assert_eq!(state(&fc.net), PtlteState::Enabled);
    assert_eq!(drop_count(&fc.net), 0, "the count restarts");

    // Post every receive: onloaded messages are matched in software, the others get a
    // priority LE before their replay arrives. The receives need list entries from the same
    // pool the headers exhausted: the pool is given room again (as a service with more LEs).
    fc.net
        .node(TGT_NODE)
        .set_le_pool(0, 0, 0, held + 2 * M as u32)
        .unwrap();
    let mut delivered: BTreeMap<u64, Vec<u8>> = sw;
    let recv = fc.net.c.nodes[TGT_NODE]
        .map(2 * M * u64::from(MSG), true, true)
        .unwrap();
    let mut posted = BTreeMap::new();
    for i in 1..=INITS {
        for seq in 0..M {
            let t = tag(i, seq);
            if delivered.contains_key(&t) {
                continue;
            }
            let slot = ((i as u64 - 1) * M + seq) * u64::from(MSG);
            let md = Md {
                iova: recv.iova + slot,
                host: recv.host + slot,
                len: u64::from(MSG),
            };
            fc.net.tgt_cmd(
                TGT_NODE,
                &le(
                    PT_FC,
                    (1000 + slot / u64::from(MSG)) as u16,
                    &md,
                    LeFlags::OP_PUT
                        | LeFlags::USE_ONCE
                        | LeFlags::EVENT_LINK_DISABLE
                        | LeFlags::EVENT_UNLINK_DISABLE,
                    t,
                ),
            );
            posted.insert(t, md);
        }
    }
    // FC_RESUME to every peer that reported drops; they replay in order.
    let resume = fc.net.c.nodes[TGT_NODE].map(8, true, true).unwrap();
    for e in &notes {
        let peer = (e.initiator & 0xF_FFFF) as usize;
        let cmd = ctrl(TGT_NODE, peer, &resume, FC_RESUME, 0);
        fc.net.tx(TGT_NODE, &[&cmd]);
    }
    fc.net.settle();
    for i in 1..=INITS {
        let r = ctrl_events(&mut fc, i);
        if dropped[i - 1].is_empty() {
            continue;
        }
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].match_bits, FC_RESUME);
        let cmds: Vec<[u8; 64]> = dropped[i - 1].iter().map(|s| send(&fc, i, *s)).collect();
        let refs: Vec<&[u8]> = cmds.iter().map(|c| &c[..]).collect();
        fc.net.tx(i, &refs);
    }
    fc.net.settle();
    for i in 1..=INITS {
        let ev = fc.net.tx_events(i);
        assert_eq!(ev.len(), dropped[i - 1].len());
        assert!(ev.iter().all(|e| e.return_code() == ReturnCode::Ok));
    }
    // Every replayed message matched its posted receive, once.
    let ev = fc.net.tgt_events(TGT_NODE);
    assert_eq!(ev.len(), posted.len());
    for e in &ev {
        let h = long(e);
        assert_eq!(
            (h.event_type, h.ptl_list),
            (EventType::Put, PtlList::Priority)
        );
        let md = posted[&h.match_bits];
        let bytes = fc
            .net
            .node(TGT_NODE)
            .read_host(md.host, MSG as usize)
            .unwrap();
        assert!(
            delivered.insert(h.match_bits, bytes).is_none(),
            "delivered twice"
        );
    }
    // Exactly once, and the right bytes.
    assert_eq!(delivered.len(), 2 * M as usize);
    for i in 1..=INITS {
        for seq in 0..M {
            let at = (seq * u64::from(MSG)) as usize;
            assert_eq!(
                delivered[&tag(i, seq)],
                fc.data[i - 1][at..at + MSG as usize],
                "message {seq} of initiator {i}"
            );
        }
    }
    assert_eq!(state(&fc.net), PtlteState::Enabled);
}

#[test]
fn full_eq_disables_and_recovery_can_enter_software_managed_mode() {
    // The target EQ holds few events: receive events stop at its reserved slots.
    let mut fc = setup(
        1,
        M_EQ,
        PtAllocOpts::EN_FLOWCTRL,
        EqOpts {
            reserved_fc: 1,
            ..EqOpts::default()
        },
    );
    // A small target EQ 4 for PT_FC: one page = 63 64-byte slots, long events.
    let small = fc.net.c.nodes[TGT_NODE]
        .alloc_eq(
            4,
            PAGE,
            EqOpts {
                reserved_fc: 1,
                ..EqOpts::default()
            },
        )
        .unwrap();
    let mut small = small;
    // Re-point PT_FC's events at EQ 4 (the driver rewriting the table entry, options kept).
    {
        let n = fc.net.node(TGT_NODE);
        let mut img = n
            .csr_read(csr::C_LPE_CFG_PTL_TABLE, u32::from(PT_FC))
            .unwrap();
        f::c_lpe_cfg_ptl_table::EQ_HANDLE.set(&mut img, 4);
        n.csr_write_image(csr::C_LPE_CFG_PTL_TABLE, u32::from(PT_FC), &img)
            .unwrap();
    }
    // Receives for everything: no unexpected headers, only events.
    let recv = fc.net.c.nodes[TGT_NODE]
        .map(M_EQ * u64::from(MSG), true, true)
        .unwrap();
    for seq in 0..M_EQ {
        let slot = seq * u64::from(MSG);
        let md = Md {
            iova: recv.iova + slot,
            host: recv.host + slot,
            len: u64::from(MSG),
        };
        fc.net.tgt_cmd(
            TGT_NODE,
            &le(
                PT_FC,
                seq as u16,
                &md,
                LeFlags::OP_PUT
                    | LeFlags::USE_ONCE
                    | LeFlags::EVENT_LINK_DISABLE
                    | LeFlags::EVENT_UNLINK_DISABLE,
                tag(1, seq),
            ),
        );
    }
    fc.net.settle();
    // The EQ has room for fewer PUT events than messages: don't read it while they arrive.
    let dropped = blast(&mut fc, 1);
    assert!(!dropped[0].is_empty(), "some messages were refused");
    let mut events = Vec::new();
    while let Some(e) = small.next(fc.net.node(TGT_NODE)).unwrap() {
        events.push(long(&e));
    }
    small.ack(fc.net.node(TGT_NODE)).unwrap();
    let (last, puts) = events.split_last().unwrap();
    assert!(puts.iter().all(|e| e.event_type == EventType::Put));
    assert_eq!(puts.len() as u64 + dropped[0].len() as u64, M_EQ);
    let f = StateChangeFields::from_initiator(last.initiator).unwrap();
    assert_eq!(last.event_type, EventType::StateChange);
    assert_eq!(
        (f.ptlte_state, f.sc_reason, f.sc_nic_auto),
        (PtlteState::Disabled, ScReason::FcEqFull, true),
        "the STATE_CHANGE used the reserved slot"
    );
    // Hybrid recovery: the EQ is drained; go to SOFTWARE_MANAGED with the drop count.
    // Messages then land in REQUEST buffers with their wire headers.
    let dc = drop_count(&fc.net);
    let req = fc.net.c.nodes[TGT_NODE].map(64 * 1024, true, true).unwrap();
    fc.net.tgt_cmd(
        TGT_NODE,
        &le_cmd(
            TgtOp::Append,
            PT_FC,
            PtlList::Request,
            500,
            &req,
            LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL | LeFlags::EVENT_LINK_DISABLE,
            0,
            u64::MAX,
        ),
    );
    // The unmatched receives are cancelled by software first (they stay on the priority
    // list otherwise and would still match first).
    for seq in &dropped[0] {
        let mut t = TargetCmd::decode(&le(PT_FC, *seq as u16, &recv, LeFlags::empty(), 0)).unwrap();
        t.opcode = TgtOp::Unlink;
        fc.net.tgt_cmd(TGT_NODE, &t.encode());
    }
    fc.net.tgt_cmd(
        TGT_NODE,
        &set_state(PT_FC, PtlteState::SoftwareManaged, dc as u32),
    );
    fc.net.settle();
    let mut ev = Vec::new();
    while let Some(e) = small.next(fc.net.node(TGT_NODE)).unwrap() {
        ev.push(long(&e));
    }
    small.ack(fc.net.node(TGT_NODE)).unwrap();
    let sc = ev.last().unwrap();
    assert_eq!(
        (sc.event_type, sc.return_code),
        (EventType::StateChange, ReturnCode::Ok)
    );
    assert_eq!(state(&fc.net), PtlteState::SoftwareManaged);
    // Replay: every dropped message lands in the request buffer, once, in order.
    let cmds: Vec<[u8; 64]> = dropped[0].iter().map(|s| send(&fc, 1, *s)).collect();
    let refs: Vec<&[u8]> = cmds.iter().map(|c| &c[..]).collect();
    fc.net.tx(1, &refs);
    fc.net.settle();
    let mut got = Vec::new();
    while let Some(e) = small.next(fc.net.node(TGT_NODE)).unwrap() {
        got.push(long(&e));
    }
    assert_eq!(got.len(), dropped[0].len());
    let hdr = 20 + 43;
    for (e, seq) in got.iter().zip(&dropped[0]) {
        assert_eq!(
            (e.event_type, e.ptl_list, e.match_bits),
            (EventType::Put, PtlList::Request, tag(1, *seq))
        );
        assert_eq!(e.mlength, MSG + hdr, "wire headers in front of the payload");
        let off = e.start - req.iova + u64::from(hdr);
        let bytes = fc
            .net
            .node(TGT_NODE)
            .read_host(req.host + off, MSG as usize)
            .unwrap();
        let at = (seq * u64::from(MSG)) as usize;
        assert_eq!(bytes, fc.data[0][at..at + MSG as usize]);
    }
}

/// `cxil_pte_transition_sm` as the driver writes it: the PtlTE table entry with state
/// SOFTWARE_MANAGED and the drop count software checked. The NIC takes it only if no
/// message was dropped since: with a count that a later drop made stale, the PtlTE stays
/// DISABLED and keeps its count (the sender of that drop has yet to report it, and the
/// receiver must wait for that report). The check used to compare with the NIC's live
/// count, so that any write moved the PtlTE and forgot the drop.
#[test]
fn a_software_managed_transition_with_a_stale_drop_count_is_refused() {
    const INITS: usize = 2;
    let mut fc = setup(INITS, M, PtAllocOpts::EN_FLOWCTRL, EqOpts::default());
    fc.net.node(TGT_NODE).set_le_pool(0, 0, 0, 3 + 8).unwrap();
    let dropped = blast(&mut fc, INITS);
    assert!(dropped.iter().any(|d| !d.is_empty()), "flow control");
    assert_eq!(state(&fc.net), PtlteState::Disabled);
    let dc = drop_count(&fc.net);
    assert!(dc > 0, "drops counted");
    let write = |fc: &Fc, drops: u64| {
        fc.net
            .node(TGT_NODE)
            .csr_write(
                csr::C_LPE_CFG_PTL_TABLE,
                u32::from(PT_FC),
                &[
                    (
                        f::c_lpe_cfg_ptl_table::PTL_STATE,
                        u64::from(u8::from(PtlteState::SoftwareManaged)),
                    ),
                    (f::c_lpe_cfg_ptl_table::DROP_COUNT, drops),
                ],
            )
            .unwrap();
    };
    // Software read the count before the last drop came in.
    write(&fc, dc - 1);
    assert_eq!(state(&fc.net), PtlteState::Disabled, "stale count refused");
    assert_eq!(drop_count(&fc.net), dc, "the count is kept");
    write(&fc, dc);
    assert_eq!(state(&fc.net), PtlteState::SoftwareManaged);
    assert_eq!(
        drop_count(&fc.net),
        0,
        "a successful exit restarts the count"
    );
}
