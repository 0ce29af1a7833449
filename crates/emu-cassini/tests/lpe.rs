//! Scenarios of the list processing engine: matching, lists, unexpected headers, flow control,
//! target commands, and order properties checked against a naive reference model.

use emu_cassini::lpe::{
    CommandOutcome, DROP_COUNT_IGNORE, EventType, IncomingOutcome, IncomingRequest, Le, LeFlags,
    Lpe, LpeConfig, LpeError, MATCH_ID_ANY, NID_ANY, NetOp, PID_ANY, PidBits, PoolLimits,
    PtAllocOpts, PtlList, PtlteConfig, PtlteState, ReturnCode, ScReason, TargetEvent, match_id,
};

const EQ: u16 = 7;
const PID_BITS: PidBits = PidBits::DEFAULT;

fn matching_opts() -> PtAllocOpts {
    PtAllocOpts::IS_MATCHING | PtAllocOpts::USE_LONG_EVENT
}

/// An LPE with one PtlTE (pool (0, 0) limited to `pool_max` entries), enabled.
fn setup(opts: PtAllocOpts, pool_max: u32) -> (Lpe, u16) {
    let mut lpe = Lpe::default();
    lpe.set_pool_limits(
        0,
        0,
        PoolLimits {
            num_reserved: 0,
            max_alloc: pool_max,
        },
    )
    .unwrap();
    let pt = lpe.alloc(PtlteConfig::new(opts, EQ)).unwrap();
    assert_eq!(pt, 1, "index 0 is never handed out");
    assert_eq!(lpe.state(pt), Some(PtlteState::Disabled));
    let out = lpe
        .set_state(pt, PtlteState::Enabled, DROP_COUNT_IGNORE)
        .unwrap();
    assert_eq!(out.events.len(), 1);
    assert_eq!(out.events[0].event_type, EventType::StateChange);
    assert_eq!(out.events[0].return_code, ReturnCode::Ok);
    assert_eq!(lpe.state(pt), Some(PtlteState::Enabled));
    (lpe, pt)
}

fn recv_flags() -> LeFlags {
    LeFlags::OP_PUT | LeFlags::USE_ONCE
}

fn put(match_bits: u64, rlength: u64) -> IncomingRequest {
    IncomingRequest {
        op: NetOp::Put,
        initiator: match_id(PID_BITS, 3, 0x42),
        source_nid: 0x42,
        match_bits,
        header_data: 0xDA7A,
        rlength,
        vni: 10,
        ..IncomingRequest::default()
    }
}

fn append_ok(lpe: &mut Lpe, pt: u16, list: PtlList, le: Le) -> CommandOutcome {
    let out = lpe.append(pt, list, le).unwrap();
    let link: Vec<_> = out
        .events
        .iter()
        .filter(|e| e.event_type == EventType::Link)
        .collect();
    assert_eq!(link.len(), 1, "one LINK event: {out:?}");
    assert_eq!(link[0].return_code, ReturnCode::Ok);
    assert_eq!(link[0].buffer_id, le.buffer_id);
    out
}

fn only(events: &[TargetEvent], ty: EventType) -> TargetEvent {
    let v: Vec<_> = events.iter().filter(|e| e.event_type == ty).collect();
    assert_eq!(v.len(), 1, "expected one {ty:?} in {events:?}");
    *v[0]
}

fn types(events: &[TargetEvent]) -> Vec<EventType> {
    events.iter().map(|e| e.event_type).collect()
}

fn delivered_to(out: &IncomingOutcome) -> Option<u16> {
    out.delivery.map(|d| d.buffer_id)
}

#[test]
fn posted_receive_is_matched() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let le = Le::new(11, 0x10_0000, 4096, recv_flags())
        .with_match(0x1234, 0)
        .with_lac(2);
    append_ok(&mut lpe, pt, PtlList::Priority, le);
    assert_eq!(lpe.status(pt).unwrap().les_allocated, 1);

    let out = lpe.incoming(pt, put(0x1234, 100));
    assert_eq!(out.return_code, ReturnCode::Ok);
    assert_eq!(out.list, Some(PtlList::Priority));
    let d = out.delivery.unwrap();
    assert_eq!(
        (d.buffer_id, d.start, d.length, d.lac),
        (11, 0x10_0000, 100, 2)
    );
    let ev = only(&out.events, EventType::Put);
    assert_eq!(ev.return_code, ReturnCode::Ok);
    assert_eq!(ev.eq, EQ);
    assert_eq!(ev.ptlte_index, pt);
    assert!(ev.long_format);
    assert_eq!((ev.mlength, ev.rlength, ev.start), (100, 100, 0x10_0000));
    assert_eq!(ev.match_bits, 0x1234);
    assert_eq!(ev.header_data, 0xDA7A);
    assert_eq!(ev.initiator, match_id(PID_BITS, 3, 0x42));
    assert_eq!(ev.vni, 10);
    assert_eq!(ev.ptl_list, PtlList::Priority);
    assert!(ev.auto_unlinked, "use_once entry unlinked by this put");
    // use_once: the entry is gone and its pool entry returned.
    assert!(lpe.entries(pt, PtlList::Priority).is_empty());
    assert_eq!(lpe.status(pt).unwrap().les_allocated, 0);
    assert_eq!(lpe.counters().net_match_priority[0], 1);
    assert_eq!(lpe.counters().net_match_useonce[0], 1);
}

#[test]
fn use_once_matches_only_once() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 64, recv_flags()).with_match(9, 0),
    );
    assert_eq!(lpe.incoming(pt, put(9, 8)).return_code, ReturnCode::Ok);
    let second = lpe.incoming(pt, put(9, 8));
    assert_eq!(second.return_code, ReturnCode::EntryNotFound);
    assert_eq!(second.delivery, None);
    // The drop is reported on the EQ with buffer id 0.
    let ev = only(&second.events, EventType::Put);
    assert_eq!(ev.return_code, ReturnCode::EntryNotFound);
    assert_eq!(ev.buffer_id, 0);
}

#[test]
fn ignore_bits_widen_the_match() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let persistent = LeFlags::OP_PUT;
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 64, persistent).with_match(0xAB00, 0xFF),
    );
    assert_eq!(delivered_to(&lpe.incoming(pt, put(0xAB42, 8))), Some(1));
    assert_eq!(delivered_to(&lpe.incoming(pt, put(0xABFF, 8))), Some(1));
    let miss = lpe.incoming(pt, put(0xAC42, 8));
    assert_eq!(miss.return_code, ReturnCode::EntryNotFound);
    assert_eq!(
        lpe.counters().err_entry_not_found_no_match_in_overflow,
        1,
        "no flow control: counted as ENTRY_NOT_FOUND"
    );
}

#[test]
fn initiator_wildcards_and_exact_ids() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let f = LeFlags::OP_PUT;
    let exact = match_id(PID_BITS, 3, 7);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 64, f).with_match_id(exact),
    );
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(2, 0, 64, f).with_match_id(match_id(PID_BITS, PID_ANY, 8)),
    );
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(3, 0, 64, f).with_match_id(match_id(PID_BITS, 4, NID_ANY)),
    );
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(4, 0, 64, f).with_match_id(MATCH_ID_ANY),
    );
    let from = |pid, nid| IncomingRequest {
        initiator: match_id(PID_BITS, pid, nid),
        ..put(0, 8)
    };
    assert_eq!(delivered_to(&lpe.incoming(pt, from(3, 7))), Some(1));
    assert_eq!(delivered_to(&lpe.incoming(pt, from(5, 8))), Some(2));
    assert_eq!(delivered_to(&lpe.incoming(pt, from(4, 99))), Some(3));
    assert_eq!(delivered_to(&lpe.incoming(pt, from(3, 8))), Some(2));
    assert_eq!(delivered_to(&lpe.incoming(pt, from(9, 9))), Some(4));
}

#[test]
fn logical_ptlte_matches_ranks() {
    let (mut lpe, pt) = setup(matching_opts() | PtAllocOpts::USE_LOGICAL, 64);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 64, LeFlags::OP_PUT).with_match_id(match_id(PID_BITS, 3, 12)),
    );
    let from_rank = |rank| IncomingRequest {
        initiator: match_id(PID_BITS, 3, rank),
        ..put(0, 8)
    };
    assert_eq!(delivered_to(&lpe.incoming(pt, from_rank(12))), Some(1));
    assert_eq!(
        lpe.incoming(pt, from_rank(13)).return_code,
        ReturnCode::EntryNotFound
    );
}

#[test]
fn manage_local_consumes_and_auto_unlinks_at_min_free() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let f = LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL;
    let base = 0x4000;
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(5, base, 100, f).with_min_free(30),
    );
    let put_at = |len, off| IncomingRequest {
        remote_offset: off,
        ..put(0, len)
    };
    // The remote offset is ignored: the NIC keeps the local offset.
    let a = lpe.incoming(pt, put_at(40, 999));
    assert_eq!(a.delivery.unwrap().start, base);
    assert!(!only(&a.events, EventType::Put).auto_unlinked);
    let b = lpe.incoming(pt, put_at(20, 0));
    assert_eq!(b.delivery.unwrap().start, base + 40);
    assert_eq!(b.delivery.unwrap().offset, 40);
    assert!(!only(&b.events, EventType::Put).auto_unlinked);
    assert_eq!(lpe.entries(pt, PtlList::Priority)[0].local_offset, 60);
    // 40 left; consuming 15 leaves 25 < min_free 30: auto-unlink.
    let c = lpe.incoming(pt, put_at(15, 0));
    assert_eq!(c.delivery.unwrap().start, base + 60);
    let ev = only(&c.events, EventType::Put);
    assert!(ev.auto_unlinked);
    assert_eq!(ev.mlength, 15);
    let unlink = only(&c.events, EventType::Unlink);
    assert!(unlink.auto_unlinked);
    assert_eq!(unlink.buffer_id, 5);
    // The UNLINK first: the entry goes at match time (HPE's libcxi tests, msg.c).
    assert_eq!(types(&c.events), vec![EventType::Unlink, EventType::Put]);
    assert!(lpe.entries(pt, PtlList::Priority).is_empty());
    assert_eq!(lpe.counters().net_match_local[0], 3);
}

#[test]
fn unlink_disable_keeps_only_the_auto_unlinked_flag() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let f = LeFlags::OP_PUT
        | LeFlags::MANAGE_LOCAL
        | LeFlags::EVENT_UNLINK_DISABLE
        | LeFlags::EVENT_LINK_DISABLE;
    let out = lpe
        .append(pt, PtlList::Priority, Le::new(5, 0, 10, f).with_min_free(5))
        .unwrap();
    assert!(out.events.is_empty(), "LINK disabled");
    let c = lpe.incoming(pt, put(0, 8));
    assert_eq!(types(&c.events), vec![EventType::Put]);
    assert!(c.events[0].auto_unlinked);
}

#[test]
fn no_truncate_skips_but_plain_entries_truncate() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0x100, 8, LeFlags::OP_PUT | LeFlags::NO_TRUNCATE),
    );
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(2, 0x200, 8, LeFlags::OP_PUT),
    );
    let big = lpe.incoming(pt, put(0, 16));
    assert_eq!(delivered_to(&big), Some(2), "NO_TRUNCATE entry skipped");
    let ev = only(&big.events, EventType::Put);
    assert_eq!((ev.mlength, ev.rlength), (8, 16));
    assert_eq!(big.delivery.unwrap().length, 8);
    assert_eq!(lpe.counters().num_truncated[0], 1);
    // A fitting message takes the first entry.
    assert_eq!(delivered_to(&lpe.incoming(pt, put(0, 8))), Some(1));
    // Remote offset past the end truncates to zero bytes.
    let far = lpe.incoming(
        pt,
        IncomingRequest {
            remote_offset: 100,
            ..put(0, 4)
        },
    );
    assert_eq!(delivered_to(&far), Some(2));
    assert_eq!(far.delivery.unwrap().length, 0);
}

#[test]
fn op_violation_drops_without_rematching() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 64, LeFlags::OP_GET | LeFlags::USE_ONCE),
    );
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(2, 0, 64, LeFlags::OP_PUT),
    );
    let out = lpe.incoming(pt, put(0, 8));
    assert_eq!(out.return_code, ReturnCode::OpViolation);
    assert_eq!(out.delivery, None, "not re-matched to the permitting entry");
    let ev = only(&out.events, EventType::Put);
    assert_eq!(ev.return_code, ReturnCode::OpViolation);
    assert_eq!(ev.buffer_id, 1);
    assert_eq!(
        lpe.entries(pt, PtlList::Priority).len(),
        2,
        "entry untouched"
    );
    assert_eq!(lpe.counters().err_op_violation, 1);
    // A Get is permitted by the first entry.
    let get = lpe.incoming(
        pt,
        IncomingRequest {
            op: NetOp::Get,
            ..put(0, 8)
        },
    );
    assert_eq!(get.return_code, ReturnCode::Ok);
    assert_eq!(only(&get.events, EventType::Get).buffer_id, 1);
    // Fetching atomics need both permissions.
    let famo = lpe.incoming(
        pt,
        IncomingRequest {
            op: NetOp::FetchAtomic,
            ..put(0, 8)
        },
    );
    assert_eq!(famo.return_code, ReturnCode::OpViolation);
}

/// An overflow buffer like libfabric's: locally managed, no truncation, puts only.
fn overflow_le(buffer_id: u16, start: u64, len: u64) -> Le {
    Le::new(
        buffer_id,
        start,
        len,
        LeFlags::OP_PUT
            | LeFlags::MANAGE_LOCAL
            | LeFlags::NO_TRUNCATE
            | LeFlags::EVENT_UNLINK_DISABLE,
    )
    .with_match(0, u64::MAX)
}

#[test]
fn unexpected_message_then_priority_append() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Overflow,
        overflow_le(100, 0x9000, 4096),
    );

    let first = lpe.incoming(
        pt,
        IncomingRequest {
            remote_offset: 40,
            ..put(0x77, 24)
        },
    );
    assert_eq!(first.return_code, ReturnCode::Ok);
    assert_eq!(first.list, Some(PtlList::Overflow));
    assert_eq!(first.delivery.unwrap().start, 0x9000);
    let ule1 = first.unexpected.expect("header recorded");
    let ovf_ev = only(&first.events, EventType::Put);
    assert_eq!(ovf_ev.ptl_list, PtlList::Overflow);
    assert_eq!(ovf_ev.buffer_id, 100);
    let second = lpe.incoming(
        pt,
        IncomingRequest {
            remote_offset: 8,
            ..put(0x77, 10)
        },
    );
    assert_eq!(second.delivery.unwrap().start, 0x9000 + 24);
    let ule2 = second.unexpected.unwrap();
    let status = lpe.status(pt).unwrap();
    assert_eq!(status.ule_count, 2);
    assert_eq!(
        status.ule_offsets,
        vec![0x9000, 0x9000 + 24],
        "where the eager data landed, oldest first"
    );
    assert_eq!(status.les_allocated, 3, "overflow LE + two headers");

    // A use_once posted receive consumes the oldest header: PUT_OVERFLOW, no LINK.
    let out = lpe
        .append(
            pt,
            PtlList::Priority,
            Le::new(1, 0x1_0000, 64, recv_flags()).with_match(0x77, 0),
        )
        .unwrap();
    assert_eq!(
        types(&out.events),
        vec![EventType::PutOverflow, EventType::Unlink]
    );
    let ev = out.events[0];
    assert_eq!(ev.return_code, ReturnCode::Ok);
    assert_eq!(
        ev.start, 0x9000,
        "points at the data in the overflow buffer"
    );
    assert_eq!((ev.mlength, ev.rlength), (24, 24));
    assert_eq!(ev.buffer_id, 1);
    assert_eq!(ev.header_data, 0xDA7A);
    assert!(ev.auto_unlinked);
    assert_eq!(out.released_ules, vec![ule1]);
    assert!(lpe.entries(pt, PtlList::Priority).is_empty());
    let status = lpe.status(pt).unwrap();
    assert_eq!(status.ule_offsets, vec![0x9000 + 24]);
    assert_eq!(status.les_allocated, 2);

    // A persistent entry with the link event enabled takes the second header and links.
    let out = lpe
        .append(
            pt,
            PtlList::Priority,
            Le::new(2, 0x2_0000, 64, LeFlags::OP_PUT).with_match(0x77, 0),
        )
        .unwrap();
    assert_eq!(
        types(&out.events),
        vec![EventType::PutOverflow, EventType::Link]
    );
    assert_eq!(out.events[0].mlength, 10);
    assert_eq!(out.released_ules, vec![ule2]);
    assert_eq!(lpe.status(pt).unwrap().ule_count, 0);
    assert_eq!(lpe.counters().event_put_overflow, 2);
}

#[test]
fn unexpected_header_disable_keeps_no_header() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let mut le = overflow_le(100, 0x9000, 4096);
    le.flags |= LeFlags::UNEXPECTED_HDR_DISABLE;
    append_ok(&mut lpe, pt, PtlList::Overflow, le);
    let out = lpe.incoming(pt, put(1, 8));
    assert_eq!(out.return_code, ReturnCode::Ok);
    assert_eq!(out.unexpected, None);
    assert_eq!(lpe.status(pt).unwrap().ule_count, 0);
}

#[test]
fn search_and_search_and_delete() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    append_ok(&mut lpe, pt, PtlList::Overflow, overflow_le(100, 0, 4096));
    for bits in [5u64, 6, 5] {
        assert!(lpe.incoming(pt, put(bits, 8)).unexpected.is_some());
    }
    let crit = |bits, ignore| Le {
        buffer_id: 77,
        match_bits: bits,
        ignore_bits: ignore,
        match_id: MATCH_ID_ANY,
        length: u64::MAX >> 8,
        ..Le::default()
    };
    let hit = lpe.search(pt, PtlList::Unexpected, &crit(6, 0)).unwrap();
    let ev = only(&hit.events, EventType::Search);
    assert_eq!(ev.return_code, ReturnCode::Ok);
    assert_eq!((ev.match_bits, ev.buffer_id, ev.rlength), (6, 77, 8));
    assert_eq!(
        lpe.status(pt).unwrap().ule_count,
        3,
        "search does not remove"
    );
    let miss = lpe.search(pt, PtlList::Unexpected, &crit(9, 0)).unwrap();
    assert_eq!(
        only(&miss.events, EventType::Search).return_code,
        ReturnCode::NoMatch
    );
    // NO_TRUNCATE with length 0 matches nothing (libfabric's flush trick).
    let mut flush = crit(5, 0);
    flush.flags = LeFlags::NO_TRUNCATE;
    flush.length = 0;
    let f = lpe.search(pt, PtlList::Unexpected, &flush).unwrap();
    assert_eq!(f.events[0].return_code, ReturnCode::NoMatch);

    // Search-and-delete with use_once removes only the first match.
    let mut once = crit(5, 0);
    once.flags = LeFlags::USE_ONCE;
    let one = lpe
        .search_and_delete(pt, PtlList::Unexpected, &once)
        .unwrap();
    assert_eq!(
        types(&one.events),
        vec![EventType::PutOverflow, EventType::Search]
    );
    assert_eq!(one.released_ules.len(), 1);
    // Delete everything: one PUT_OVERFLOW per header (arrival order), then SEARCH OK.
    let all = lpe
        .search_and_delete(pt, PtlList::Unexpected, &crit(0, u64::MAX))
        .unwrap();
    assert_eq!(
        types(&all.events),
        vec![
            EventType::PutOverflow,
            EventType::PutOverflow,
            EventType::Search
        ]
    );
    assert_eq!(all.events[0].match_bits, 6);
    assert_eq!(all.events[1].match_bits, 5);
    assert_eq!(all.events[2].return_code, ReturnCode::Ok);
    assert_eq!(lpe.status(pt).unwrap().ule_count, 0);
    assert_eq!(lpe.status(pt).unwrap().les_allocated, 1);
    let none = lpe
        .search_and_delete(pt, PtlList::Unexpected, &crit(0, u64::MAX))
        .unwrap();
    assert_eq!(types(&none.events), vec![EventType::Search]);
    assert_eq!(none.events[0].return_code, ReturnCode::NoMatch);
    // Only the UNEXPECTED list can be searched.
    assert!(lpe.search(pt, PtlList::Priority, &crit(0, 0)).is_err());
}

#[test]
fn unlink_of_missing_entry_reports_entry_not_found() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let f = LeFlags::OP_PUT | LeFlags::EVENT_UNLINK_DISABLE;
    append_ok(&mut lpe, pt, PtlList::Priority, Le::new(3, 0, 8, f));
    let ok = lpe.unlink(pt, PtlList::Priority, 3).unwrap();
    let ev = only(&ok.events, EventType::Unlink);
    assert_eq!(
        ev.return_code,
        ReturnCode::Ok,
        "manual unlink always reports"
    );
    assert!(!ev.auto_unlinked);
    assert_eq!(lpe.status(pt).unwrap().les_allocated, 0);
    let gone = lpe.unlink(pt, PtlList::Priority, 3).unwrap();
    let ev = only(&gone.events, EventType::Unlink);
    assert_eq!(ev.return_code, ReturnCode::EntryNotFound);
    assert_eq!(ev.buffer_id, 3);
    assert_eq!(lpe.counters().err_entry_not_found_unlink_failed, 1);
}

#[test]
fn flow_control_cycle_on_unexpected_exhaustion() {
    // Pool of 3 entries: the overflow LE and two headers.
    let (mut lpe, pt) = setup(matching_opts() | PtAllocOpts::EN_FLOWCTRL, 3);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Overflow,
        overflow_le(100, 0, 1 << 20),
    );
    assert!(lpe.incoming(pt, put(1, 8)).unexpected.is_some());
    assert!(lpe.incoming(pt, put(2, 8)).unexpected.is_some());

    let trigger = lpe.incoming(pt, put(3, 8));
    assert_eq!(trigger.return_code, ReturnCode::PtDisabled);
    assert_eq!(trigger.delivery, None);
    assert_eq!(trigger.unexpected, None);
    let sc = only(&trigger.events, EventType::StateChange);
    let fields = sc.state_change.unwrap();
    assert_eq!(fields.ptlte_state, PtlteState::Disabled);
    assert_eq!(fields.sc_reason, Some(ScReason::FcUnexpectedFail));
    assert!(fields.sc_nic_auto);
    assert_eq!(lpe.state(pt), Some(PtlteState::Disabled));
    assert_eq!(lpe.counters().err_pt_disabled_cant_alloc_unexpected, 1);
    // Cassini 1: the triggering request is not counted.
    assert_eq!(lpe.status(pt).unwrap().drop_count, 0);

    for i in 1..=3u32 {
        let d = lpe.incoming(pt, put(4, 8));
        assert_eq!(d.return_code, ReturnCode::PtDisabled);
        assert!(d.events.is_empty());
        assert_eq!(lpe.status(pt).unwrap().drop_count, i);
    }

    // Software onloads the headers, then re-enables with the wrong and the right count.
    let all = Le {
        ignore_bits: u64::MAX,
        match_id: MATCH_ID_ANY,
        length: u64::MAX >> 8,
        ..Le::default()
    };
    let onload = lpe
        .search_and_delete(pt, PtlList::Unexpected, &all)
        .unwrap();
    assert_eq!(onload.released_ules.len(), 2);
    let wrong = lpe.set_state(pt, PtlteState::Enabled, 2).unwrap();
    let ev = only(&wrong.events, EventType::StateChange);
    assert_eq!(ev.return_code, ReturnCode::NoMatch);
    assert_eq!(ev.state_change.unwrap().ptlte_state, PtlteState::Disabled);
    assert_eq!(lpe.state(pt), Some(PtlteState::Disabled));
    assert_eq!(lpe.counters().err_setstate_no_match, 1);

    let right = lpe.set_state(pt, PtlteState::Enabled, 3).unwrap();
    let ev = only(&right.events, EventType::StateChange);
    assert_eq!(ev.return_code, ReturnCode::Ok);
    let f = ev.state_change.unwrap();
    assert_eq!(f.ptlte_state, PtlteState::Enabled);
    assert!(!f.sc_nic_auto);
    assert_eq!(lpe.state(pt), Some(PtlteState::Enabled));
    assert_eq!(lpe.status(pt).unwrap().drop_count, 0, "count restarts");
    assert!(lpe.incoming(pt, put(5, 8)).unexpected.is_some());
}

#[test]
fn cassini2_counts_the_triggering_drop() {
    let mut lpe = Lpe::new(LpeConfig {
        count_triggering_drop: true,
        ..LpeConfig::default()
    })
    .unwrap();
    let pt = lpe
        .alloc(PtlteConfig::new(
            matching_opts() | PtAllocOpts::EN_FLOWCTRL,
            EQ,
        ))
        .unwrap();
    lpe.set_state(pt, PtlteState::Enabled, 0).unwrap();
    let out = lpe.incoming(pt, put(1, 8));
    assert_eq!(out.return_code, ReturnCode::PtDisabled);
    let f = only(&out.events, EventType::StateChange)
        .state_change
        .unwrap();
    assert_eq!(f.sc_reason, Some(ScReason::FcNoMatch));
    assert_eq!(lpe.status(pt).unwrap().drop_count, 1);
}

#[test]
fn exhaustion_without_flow_control_is_entry_not_found() {
    let (mut lpe, pt) = setup(matching_opts(), 2);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Overflow,
        overflow_le(100, 0, 1 << 20),
    );
    assert!(lpe.incoming(pt, put(1, 8)).unexpected.is_some());
    let out = lpe.incoming(pt, put(2, 8));
    assert_eq!(out.return_code, ReturnCode::EntryNotFound);
    assert_eq!(lpe.state(pt), Some(PtlteState::Enabled));
    assert_eq!(
        only(&out.events, EventType::Put).return_code,
        ReturnCode::EntryNotFound
    );
    assert_eq!(lpe.counters().err_entry_not_found_cant_alloc_unexpected, 1);
    assert_eq!(lpe.status(pt).unwrap().drop_count, 0);
}

#[test]
fn eq_full_triggers_flow_control_only_when_an_event_is_due() {
    let (mut lpe, pt) = setup(matching_opts() | PtAllocOpts::EN_FLOWCTRL, 64);
    let quiet = LeFlags::OP_PUT | LeFlags::EVENT_COMM_DISABLE;
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 64, quiet).with_match(1, 0),
    );
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(2, 0, 64, LeFlags::OP_PUT).with_match(2, 0),
    );
    let full = |bits| IncomingRequest {
        eq_full: true,
        ..put(bits, 8)
    };
    let q = lpe.incoming(pt, full(1));
    assert_eq!(
        q.return_code,
        ReturnCode::Ok,
        "no event: EQ room irrelevant"
    );
    assert!(q.events.is_empty());
    let loud = lpe.incoming(pt, full(2));
    assert_eq!(loud.return_code, ReturnCode::PtDisabled);
    let f = only(&loud.events, EventType::StateChange)
        .state_change
        .unwrap();
    assert_eq!(f.sc_reason, Some(ScReason::FcEqFull));
    assert_eq!(lpe.counters().err_pt_disabled_eq_full, 1);
}

#[test]
fn restart_seq_reopens_an_append_disabled_list() {
    let (mut lpe, pt) = setup(matching_opts(), 1);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 8, LeFlags::OP_PUT),
    );
    let fail = lpe
        .append(pt, PtlList::Priority, Le::new(2, 0, 8, LeFlags::OP_PUT))
        .unwrap();
    assert_eq!(
        only(&fail.events, EventType::Link).return_code,
        ReturnCode::NoSpace
    );
    assert!(lpe.append_disabled(pt, PtlList::Priority));
    assert_eq!(lpe.counters().err_no_space_append, 1);
    // Space comes back, but the list stays append-disabled without RESTART_SEQ.
    lpe.unlink(pt, PtlList::Priority, 1).unwrap();
    let still = lpe
        .append(pt, PtlList::Priority, Le::new(3, 0, 8, LeFlags::OP_PUT))
        .unwrap();
    assert_eq!(
        only(&still.events, EventType::Link).return_code,
        ReturnCode::NoSpace
    );
    assert!(lpe.entries(pt, PtlList::Priority).is_empty());
    // Other lists are not affected.
    append_ok(&mut lpe, pt, PtlList::Overflow, overflow_le(9, 0, 64));
    lpe.unlink(pt, PtlList::Overflow, 9).unwrap();
    // RESTART_SEQ re-opens it.
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(4, 0, 8, LeFlags::OP_PUT | LeFlags::RESTART_SEQ),
    );
    assert!(!lpe.append_disabled(pt, PtlList::Priority));
    assert_eq!(lpe.entries(pt, PtlList::Priority)[0].le.buffer_id, 4);
}

#[test]
fn non_matching_ptlte_addresses_by_offset() {
    let (mut lpe, pt) = setup(PtAllocOpts::empty(), 64);
    let mr = LeFlags::OP_PUT | LeFlags::OP_GET;
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0x8000, 256, mr).with_match(0xDEAD, 0),
    );
    let w = IncomingRequest {
        remote_offset: 64,
        ..put(0x1234, 32)
    };
    let out = lpe.incoming(pt, w);
    assert_eq!(
        out.return_code,
        ReturnCode::Ok,
        "match bits are not looked at"
    );
    let d = out.delivery.unwrap();
    assert_eq!((d.start, d.offset, d.length), (0x8000 + 64, 64, 32));
    assert_eq!(only(&out.events, EventType::Put).start, 0x8000 + 64);
    // Out of bounds on a PtlTE without space check: dropped NO_SPACE.
    let oob = lpe.incoming(
        pt,
        IncomingRequest {
            remote_offset: 240,
            ..put(0, 32)
        },
    );
    assert_eq!(oob.return_code, ReturnCode::NoSpace);
    assert_eq!(lpe.counters().err_no_space_net, 1);
    // With do_space_check it is truncated instead.
    let (mut lpe2, pt2) = setup(PtAllocOpts::DO_SPACE_CHECK, 64);
    append_ok(
        &mut lpe2,
        pt2,
        PtlList::Priority,
        Le::new(1, 0x8000, 256, mr),
    );
    let t = lpe2.incoming(
        pt2,
        IncomingRequest {
            remote_offset: 240,
            ..put(0, 32)
        },
    );
    assert_eq!(t.return_code, ReturnCode::Ok);
    assert_eq!(t.delivery.unwrap().length, 16);
}

#[test]
fn unallocated_and_disabled_ptltes() {
    let mut lpe = Lpe::default();
    assert_eq!(
        lpe.incoming(0, put(0, 8)).return_code,
        ReturnCode::PtlteNotFound
    );
    assert_eq!(
        lpe.incoming(5, put(0, 8)).return_code,
        ReturnCode::PtlteNotFound
    );
    assert_eq!(
        lpe.incoming(4000, put(0, 8)).return_code,
        ReturnCode::PtlteNotFound
    );
    assert!(lpe.append(5, PtlList::Priority, Le::default()).is_err());
    assert_eq!(
        lpe.configure(0, PtlteConfig::default()),
        Err(LpeError::InvalidIndex(0))
    );
    let pt = lpe.alloc(PtlteConfig::new(matching_opts(), EQ)).unwrap();
    // Freshly allocated PtlTEs are DISABLED: requests count as drops.
    assert_eq!(
        lpe.incoming(pt, put(0, 8)).return_code,
        ReturnCode::PtDisabled
    );
    assert_eq!(lpe.status(pt).unwrap().drop_count, 1);
    assert_eq!(
        lpe.configure(pt, PtlteConfig::default()),
        Err(LpeError::InUse(pt))
    );
    lpe.free(pt).unwrap();
    assert_eq!(
        lpe.incoming(pt, put(0, 8)).return_code,
        ReturnCode::PtlteNotFound
    );
}

#[test]
fn software_managed_delivers_headers_to_request_buffers() {
    let (mut lpe, pt) = setup(matching_opts() | PtAllocOpts::EN_FLOWCTRL, 64);
    lpe.set_state(pt, PtlteState::Disabled, 0).unwrap();
    lpe.transition_sm(pt, 0).unwrap();
    assert_eq!(lpe.state(pt), Some(PtlteState::SoftwareManaged));
    let req_buf = Le::new(
        50,
        0xA000,
        128,
        LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL | LeFlags::NO_TRUNCATE,
    )
    .with_match(0, u64::MAX);
    append_ok(&mut lpe, pt, PtlList::Request, req_buf);
    // Priority appends are refused in SOFTWARE_MANAGED.
    let refused = lpe
        .append(pt, PtlList::Priority, Le::new(1, 0, 8, LeFlags::OP_PUT))
        .unwrap();
    assert_eq!(
        only(&refused.events, EventType::Link).return_code,
        ReturnCode::PtlteSwManaged
    );
    let msg = IncomingRequest {
        wire_header_len: 63,
        ..put(9, 40)
    };
    let out = lpe.incoming(pt, msg);
    assert_eq!(out.list, Some(PtlList::Request));
    let d = out.delivery.unwrap();
    assert_eq!((d.start, d.length, d.header_bytes), (0xA000, 103, 63));
    assert_eq!(only(&out.events, EventType::Put).mlength, 103);
    // The next one does not fit (25 bytes left): request list exhausted -> flow control.
    let out = lpe.incoming(pt, msg);
    assert_eq!(out.return_code, ReturnCode::PtDisabled);
    let f = only(&out.events, EventType::StateChange)
        .state_change
        .unwrap();
    assert_eq!(f.sc_reason, Some(ScReason::FcRequestFull));
    // transition_sm checks the count exactly.
    lpe.incoming(pt, msg);
    assert_eq!(
        lpe.transition_sm(pt, 0),
        Err(LpeError::DropCountMismatch {
            expected: 0,
            actual: 1
        })
    );
    assert_eq!(lpe.transition_sm(pt, 1), Ok(()));
    let (mut lpe2, pt2) = setup(matching_opts(), 64);
    assert_eq!(lpe2.transition_sm(pt2, 0), Err(LpeError::NotDisabled(pt2)));
}

#[test]
fn nic_moves_to_software_managed_when_headers_run_out() {
    let opts = matching_opts() | PtAllocOpts::EN_FLOWCTRL | PtAllocOpts::EN_SW_HW_ST_CHNG;
    let (mut lpe, pt) = setup(opts, 3);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Overflow,
        overflow_le(100, 0, 1 << 20),
    );
    let req_buf =
        Le::new(50, 0xA000, 4096, LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL).with_match(0, u64::MAX);
    append_ok(&mut lpe, pt, PtlList::Request, req_buf);
    assert!(lpe.incoming(pt, put(1, 8)).unexpected.is_some());
    let out = lpe.incoming(pt, put(2, 8));
    assert_eq!(out.return_code, ReturnCode::Ok);
    assert_eq!(out.list, Some(PtlList::Request));
    assert_eq!(
        types(&out.events),
        vec![EventType::StateChange, EventType::Put]
    );
    let f = out.events[0].state_change.unwrap();
    assert_eq!(f.ptlte_state, PtlteState::SoftwareManaged);
    assert_eq!(f.sc_reason, Some(ScReason::SmUnexpectedFail));
    assert!(f.sc_nic_auto);
    assert_eq!(lpe.state(pt), Some(PtlteState::SoftwareManaged));
}

#[test]
fn failed_priority_append_moves_to_software_managed() {
    let opts = matching_opts() | PtAllocOpts::EN_SW_HW_ST_CHNG;
    let (mut lpe, pt) = setup(opts, 1);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 8, LeFlags::OP_PUT),
    );
    let out = lpe
        .append(pt, PtlList::Priority, Le::new(2, 0, 8, LeFlags::OP_PUT))
        .unwrap();
    assert_eq!(
        types(&out.events),
        vec![EventType::Link, EventType::StateChange]
    );
    assert_eq!(out.events[0].return_code, ReturnCode::PtlteSwManaged);
    let f = out.events[1].state_change.unwrap();
    assert_eq!(f.sc_reason, Some(ScReason::SmAppendFail));
    assert_eq!(lpe.state(pt), Some(PtlteState::SoftwareManaged));
}

#[test]
fn rendezvous_put_hooks() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let rdzv = |bits| IncomingRequest {
        op: NetOp::RendezvousPut,
        rlength: 10_000,
        eager_length: 1000,
        rendezvous_id: 0x5A,
        use_offset_for_get: true,
        remote_offset: 0xBEEF_0000,
        source_nid: 0x42,
        ..put(bits, 10_000)
    };
    // libfabric receive entries are locally managed, so the remote offset (the source
    // address of a rendezvous put) does not move the data. Expected: matched directly.
    let recv = recv_flags() | LeFlags::MANAGE_LOCAL | LeFlags::EVENT_UNLINK_DISABLE;
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0x10_0000, 1 << 20, recv).with_match(1, 0),
    );
    let out = lpe.incoming(pt, rdzv(1));
    assert_eq!(
        out.delivery.unwrap().length,
        1000,
        "only the eager part moves now"
    );
    assert_eq!(
        types(&out.events),
        vec![EventType::Put, EventType::Rendezvous]
    );
    assert!(out.events[0].rendezvous);
    assert_eq!(out.events[0].mlength, 10_000);
    let r = out.events[1];
    assert!(r.get_issued);
    assert_eq!(r.rendezvous_id, 0x5A);
    assert_eq!(r.initiator >> 12, 0x42, "source DFA carries the NID");
    let g = out.rendezvous.unwrap();
    assert_eq!((g.length, g.dest_start), (9000, 0x10_0000 + 1000));
    assert_eq!(
        (g.source_nid, g.source_pid, g.rendezvous_id),
        (0x42, 3, 0x5A)
    );
    assert_eq!(g.remote_offset, 0xBEEF_0000);
    assert_eq!(g.ule_id, None);

    // Unexpected: eager bytes in the overflow buffer, completed by the append.
    append_ok(
        &mut lpe,
        pt,
        PtlList::Overflow,
        overflow_le(100, 0x9000, 1 << 16),
    );
    let ux = lpe.incoming(pt, rdzv(2));
    assert_eq!(ux.delivery.unwrap().length, 1000);
    assert!(ux.rendezvous.is_none());
    let id = ux.unexpected.unwrap();
    assert_eq!(
        lpe.status(pt).unwrap().ule_offsets,
        vec![0xBEEF_0000],
        "a rendezvous header reports its remote offset"
    );
    let out = lpe
        .append(
            pt,
            PtlList::Priority,
            Le::new(2, 0x20_0000, 1 << 20, recv).with_match(2, 0),
        )
        .unwrap();
    assert_eq!(
        types(&out.events),
        vec![EventType::PutOverflow, EventType::Rendezvous]
    );
    assert!(out.events[0].rendezvous);
    assert_eq!(out.events[0].start, 0x9000);
    let g = out.rendezvous[0];
    assert_eq!(g.ule_id, Some(id));
    assert_eq!((g.length, g.dest_start), (9000, 0x20_0000 + 1000));

    // Receive entries no longer than the eager part (truncating receives): nothing is left
    // to pull, so the NIC issues no Get and the RENDEZVOUS event says so (software then
    // pulls what lets the source complete), expected and unexpected alike.
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(3, 0x30_0000, 600, recv).with_match(3, 0),
    );
    let out = lpe.incoming(pt, rdzv(3));
    assert_eq!(out.delivery.unwrap().length, 600);
    assert_eq!(
        types(&out.events),
        vec![EventType::Put, EventType::Rendezvous]
    );
    assert!(
        !out.events[1].get_issued,
        "no Get for an entry the eager part filled"
    );
    assert!(!out.rendezvous.unwrap().get_issued);
    let ux = lpe.incoming(pt, rdzv(4));
    assert!(ux.rendezvous.is_none());
    let out = lpe
        .append(
            pt,
            PtlList::Priority,
            Le::new(4, 0x40_0000, 600, recv).with_match(4, 0),
        )
        .unwrap();
    assert_eq!(
        types(&out.events),
        vec![EventType::PutOverflow, EventType::Rendezvous]
    );
    assert!(!out.events[1].get_issued);
    assert!(!out.rendezvous[0].get_issued);
}

#[test]
fn no_truncate_overflow_entry_skips_a_get_it_cannot_hold() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let small = Le::new(5, 0x9000, 8, LeFlags::OP_PUT | LeFlags::NO_TRUNCATE);
    append_ok(&mut lpe, pt, PtlList::Overflow, small);
    let get = |rlength| IncomingRequest {
        op: NetOp::Get,
        ..put(0, rlength)
    };
    let out = lpe.incoming(pt, get(9));
    assert_eq!(
        out.return_code,
        ReturnCode::EntryNotFound,
        "9 bytes do not fit"
    );
    // One that fits matches, and is refused by the entry's permissions.
    let out = lpe.incoming(pt, get(8));
    assert_eq!(out.return_code, ReturnCode::OpViolation);
}

#[test]
fn get_on_overflow_is_delayed_until_append() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let mut ovf = overflow_le(100, 0x9000, 4096);
    ovf.flags |= LeFlags::OP_GET;
    append_ok(&mut lpe, pt, PtlList::Overflow, ovf);
    let get = IncomingRequest {
        op: NetOp::Get,
        ..put(3, 16)
    };
    let out = lpe.incoming(pt, get);
    assert_eq!(out.return_code, ReturnCode::Delayed);
    assert!(out.delivery.is_none());
    let id = out.unexpected.unwrap();
    assert_eq!(lpe.counters().unexpected_get_amo[0], 1);
    let out = lpe
        .append(
            pt,
            PtlList::Priority,
            Le::new(7, 0x5000, 64, LeFlags::OP_GET | LeFlags::USE_ONCE).with_match(3, 0),
        )
        .unwrap();
    assert_eq!(out.events[0].event_type, EventType::GetOverflow);
    let d = out.delayed[0];
    assert_eq!(
        (d.ule_id, d.op, d.start, d.mlength),
        (id, NetOp::Get, 0x5000, 16)
    );
}

#[test]
fn ct_updates_follow_le_flags() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let f = LeFlags::OP_PUT | LeFlags::EVENT_CT_COMM | LeFlags::EVENT_CT_BYTES;
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 64, f).with_ct(9),
    );
    let out = lpe.incoming(pt, put(0, 24));
    let ct = out.ct.unwrap();
    assert_eq!((ct.ct, ct.success_increment), (9, 24));
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(2, 0, 64, LeFlags::OP_PUT | LeFlags::EVENT_CT_COMM)
            .with_ct(4)
            .with_match(1, 0),
    );
    assert_eq!(
        lpe.incoming(pt, put(1, 24)).ct.unwrap().success_increment,
        1
    );
}

#[test]
fn match_events_and_success_disable() {
    let (mut lpe, pt) = setup(matching_opts() | PtAllocOpts::EN_EVENT_MATCH, 64);
    let f = LeFlags::OP_PUT | LeFlags::EVENT_SUCCESS_DISABLE;
    let out = lpe
        .append(pt, PtlList::Priority, Le::new(1, 0, 64, f))
        .unwrap();
    assert_eq!(
        types(&out.events),
        vec![EventType::Link],
        "SUCCESS_DISABLE keeps LINK"
    );
    let out = lpe.incoming(pt, put(0, 8));
    assert_eq!(types(&out.events), vec![EventType::Match]);
    let once = LeFlags::OP_PUT | LeFlags::USE_ONCE | LeFlags::EVENT_SUCCESS_DISABLE;
    let (mut lpe, pt) = setup(matching_opts(), 64);
    let out = lpe
        .append(pt, PtlList::Priority, Le::new(2, 0, 64, once))
        .unwrap();
    assert_eq!(types(&out.events), vec![EventType::Link]);
    let out = lpe.incoming(pt, put(0, 8));
    assert_eq!(
        types(&out.events),
        vec![EventType::Unlink],
        "PUT suppressed, auto-UNLINK kept"
    );
}

#[test]
fn restricted_op_on_locally_managed_entry() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 64, LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL),
    );
    let r = IncomingRequest {
        restricted: true,
        ..put(0, 8)
    };
    assert_eq!(
        lpe.incoming(pt, r).return_code,
        ReturnCode::RestrictedUnicast
    );
    let (mut lpe2, pt2) = setup(matching_opts() | PtAllocOpts::EN_RESTRICTED_UNICAST_LM, 64);
    append_ok(
        &mut lpe2,
        pt2,
        PtlList::Priority,
        Le::new(1, 0, 64, LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL),
    );
    assert_eq!(lpe2.incoming(pt2, r).return_code, ReturnCode::Ok);
}

#[test]
fn free_returns_every_entry_to_the_pool() {
    let (mut lpe, pt) = setup(matching_opts(), 64);
    append_ok(&mut lpe, pt, PtlList::Overflow, overflow_le(100, 0, 4096));
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(1, 0, 8, LeFlags::OP_PUT).with_match(1, 0),
    );
    let id = lpe.incoming(pt, put(2, 8)).unexpected.unwrap();
    assert_eq!(lpe.pool_usage(0, 0).allocated, 3);
    assert_eq!(lpe.free(pt).unwrap(), vec![id]);
    assert_eq!(lpe.pool_usage(0, 0).allocated, 0);
    assert_eq!(lpe.pe_usage(0), (0, 0));
}

#[test]
fn long_lists_match_quickly_and_exactly() {
    // 16,000 entries: close to the 16,384 of one processing engine.
    let (mut lpe, pt) = setup(matching_opts(), 16_384);
    let n = 16_000u64;
    for i in 0..n {
        let le = Le::new((i % 60_000) as u16, i * 64, 64, recv_flags()).with_match(i, 0);
        let out = lpe.append(pt, PtlList::Priority, le).unwrap();
        assert_eq!(out.events[0].return_code, ReturnCode::Ok);
    }
    // A wildcard entry at the tail must not win over an exact one earlier in the list.
    append_ok(
        &mut lpe,
        pt,
        PtlList::Priority,
        Le::new(60_001, 0, 64, LeFlags::OP_PUT).with_match(0, u64::MAX),
    );
    for i in (0..n).rev() {
        let out = lpe.incoming(pt, put(i, 8));
        assert_eq!(out.delivery.unwrap().start, i * 64);
    }
    assert_eq!(delivered_to(&lpe.incoming(pt, put(5, 8))), Some(60_001));
}

mod order {
    //! Property: the engine agrees with a naive in-order walk (first match wins on the
    //! priority list; unexpected headers are consumed in arrival order).
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Append {
            bits: u64,
            ignore: u64,
            id_kind: u8,
            len: u64,
            no_truncate: bool,
            use_once: bool,
        },
        Put {
            bits: u64,
            src: u32,
            len: u64,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (
                0u64..4,
                prop_oneof![Just(0u64), Just(1), Just(u64::MAX)],
                0u8..3,
                prop_oneof![Just(8u64), Just(32)],
                any::<bool>(),
                any::<bool>()
            )
                .prop_map(|(bits, ignore, id_kind, len, no_truncate, use_once)| {
                    Op::Append {
                        bits,
                        ignore,
                        id_kind,
                        len,
                        no_truncate,
                        use_once,
                    }
                }),
            (0u64..4, 0u32..2, prop_oneof![Just(4u64), Just(16)])
                .prop_map(|(bits, src, len)| Op::Put { bits, src, len }),
        ]
    }

    #[derive(Debug, Clone, Copy)]
    struct RefLe {
        id: u16,
        bits: u64,
        ignore: u64,
        /// 0 = any, 1 = source 0 only, 2 = source 1 only.
        id_kind: u8,
        len: u64,
        no_truncate: bool,
        use_once: bool,
    }

    #[derive(Debug, Clone, Copy)]
    struct RefUle {
        id: u64,
        bits: u64,
        src: u32,
        len: u64,
    }

    fn src_id(src: u32) -> u32 {
        match_id(PID_BITS, 1, 100 + src)
    }

    fn le_id(kind: u8) -> u32 {
        match kind {
            0 => MATCH_ID_ANY,
            k => src_id(u32::from(k) - 1),
        }
    }

    fn accepts(le: &RefLe, bits: u64, src: u32, len: u64) -> bool {
        (bits | le.ignore) == (le.bits | le.ignore)
            && (le.id_kind == 0 || u32::from(le.id_kind) - 1 == src)
            && (!le.no_truncate || len <= le.len)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn engine_matches_reference_walk(ops in proptest::collection::vec(op(), 1..60)) {
            let (mut lpe, pt) = setup(matching_opts(), 10_000);
            append_ok(&mut lpe, pt, PtlList::Overflow, overflow_le(9999, 0x100_0000, 1 << 30));
            let mut prio: Vec<RefLe> = Vec::new();
            let mut ules: Vec<RefUle> = Vec::new();
            let mut next_id = 1u16;
            for op in ops {
                match op {
                    Op::Append { bits, ignore, id_kind, len, no_truncate, use_once } => {
                        let r = RefLe { id: next_id, bits, ignore, id_kind, len, no_truncate, use_once };
                        next_id += 1;
                        let mut flags = LeFlags::OP_PUT;
                        if no_truncate { flags |= LeFlags::NO_TRUNCATE; }
                        if use_once { flags |= LeFlags::USE_ONCE; }
                        let le = Le::new(r.id, 0, len, flags)
                            .with_match(bits, ignore)
                            .with_match_id(le_id(id_kind));
                        let out = lpe.append(pt, PtlList::Priority, le).unwrap();
                        // Reference: consume headers in arrival order.
                        let mut expected = Vec::new();
                        let mut linked = true;
                        while let Some(pos) = ules.iter().position(|u| accepts(&r, u.bits, u.src, u.len)) {
                            let u = ules.remove(pos);
                            expected.push(u.id);
                            if use_once { linked = false; break; }
                        }
                        prop_assert_eq!(&out.released_ules, &expected);
                        let overflow_bits: Vec<u64> = out.events.iter()
                            .filter(|e| e.event_type == EventType::PutOverflow)
                            .map(|e| e.match_bits).collect();
                        prop_assert_eq!(overflow_bits.len(), expected.len());
                        let has_link = out.events.iter().any(|e| e.event_type == EventType::Link);
                        prop_assert_eq!(has_link, linked);
                        if linked { prio.push(r); }
                    }
                    Op::Put { bits, src, len } => {
                        let req = IncomingRequest { initiator: src_id(src), ..put(bits, len) };
                        let out = lpe.incoming(pt, req);
                        match prio.iter().position(|le| accepts(le, bits, src, len)) {
                            Some(pos) => {
                                let le = prio[pos];
                                prop_assert_eq!(delivered_to(&out), Some(le.id));
                                prop_assert_eq!(out.delivery.map(|d| d.length), Some(len.min(le.len)));
                                if le.use_once { prio.remove(pos); }
                            }
                            None => {
                                prop_assert_eq!(out.list, Some(PtlList::Overflow));
                                let id = out.unexpected;
                                prop_assert!(id.is_some());
                                ules.push(RefUle { id: id.unwrap_or(0), bits, src, len });
                            }
                        }
                    }
                }
                let linked: Vec<u16> = lpe.entries(pt, PtlList::Priority).iter().map(|e| e.le.buffer_id).collect();
                let want: Vec<u16> = prio.iter().map(|l| l.id).collect();
                prop_assert_eq!(linked, want);
                let ule_ids: Vec<u64> = lpe.unexpected_headers(pt).iter().map(|u| u.id).collect();
                let want: Vec<u64> = ules.iter().map(|u| u.id).collect();
                prop_assert_eq!(ule_ids, want);
                prop_assert_eq!(
                    lpe.status(pt).map(|s| s.les_allocated as usize).unwrap_or(0),
                    1 + prio.len() + ules.len()
                );
            }
        }
    }
}
