//! Deterministic scenarios that check the reference model itself against hand-worked
//! expectations from the published semantics, so that a bug in the model is caught without
//! the emulator (which `portals_emulated.rs` compares against the model).

use firmware_spec::cassini::dfa::{C_NID_ANY, C_PID_ANY, CXI_MATCH_ID_ANY, PidBits, match_id};
use firmware_spec::cassini::event::EventType;
use firmware_spec::cassini::le::{LeFlags, PtlList};
use firmware_spec::cassini::rc::ReturnCode;
use tests::portals::{
    InitiatorEvent, Le, ModelError, Op, PtlTe, Request, Search, TargetEvent, bits_match,
    initiator_matches,
};

const PB: PidBits = PidBits::DEFAULT;

fn alice() -> u32 {
    match_id(PB, 4, 1)
}

fn bob() -> u32 {
    match_id(PB, 9, 2)
}

fn le(buffer_id: u16, list: PtlList, start: u64, length: u64, match_bits: u64) -> Le {
    Le {
        buffer_id,
        list,
        start,
        length,
        match_bits,
        ignore_bits: 0,
        match_id: CXI_MATCH_ID_ANY,
        flags: LeFlags::OP_PUT | LeFlags::OP_GET,
        min_free: 0,
        local_offset: 0,
    }
}

fn put(initiator: u32, match_bits: u64, len: u64, fill: u8) -> Request {
    Request {
        op: Op::Put,
        initiator,
        match_bits,
        header_data: 0xabc,
        remote_offset: 0,
        rlength: len,
        payload: vec![fill; len as usize],
    }
}

fn get(initiator: u32, match_bits: u64, len: u64, remote_offset: u64) -> Request {
    Request {
        op: Op::Get,
        initiator,
        match_bits,
        header_data: 0,
        remote_offset,
        rlength: len,
        payload: Vec::new(),
    }
}

fn types(evs: &[TargetEvent]) -> Vec<(EventType, ReturnCode, u16)> {
    evs.iter()
        .map(|e| (e.event_type, e.return_code, e.buffer_id))
        .collect()
}

fn pte() -> PtlTe {
    PtlTe::new(PB, 64 << 10)
}

#[test]
fn match_rule_and_initiator_wildcards() {
    assert!(bits_match(0x12, 0x12, 0));
    assert!(!bits_match(0x12, 0x13, 0));
    assert!(bits_match(0x12, 0x13, 0x1), "ignored bit");
    assert!(bits_match(0xdead, 0, u64::MAX), "everything ignored");
    assert!(
        !bits_match(0x1_0000_0012, 0x12, 0xFF),
        "high bits still compared"
    );

    assert!(initiator_matches(PB, CXI_MATCH_ID_ANY, alice()));
    assert!(initiator_matches(PB, alice(), alice()));
    assert!(!initiator_matches(PB, alice(), bob()));
    // PID wildcard on alice's NID: any process on NID 1.
    let nid1 = match_id(PB, C_PID_ANY, 1);
    assert!(initiator_matches(PB, nid1, alice()));
    assert!(initiator_matches(PB, nid1, match_id(PB, 7, 1)));
    assert!(!initiator_matches(PB, nid1, bob()));
    // NID wildcard with alice's PID: PID 4 on any NID.
    let pid4 = match_id(PB, 4, C_NID_ANY);
    assert!(initiator_matches(PB, pid4, alice()));
    assert!(initiator_matches(PB, pid4, match_id(PB, 4, 2)));
    assert!(!initiator_matches(PB, pid4, bob()));
}

#[test]
fn priority_first_then_overflow_first_match_wins() {
    let mut p = pte();
    p.append(le(1, PtlList::Overflow, 0, 256, 7)).unwrap();
    p.append(le(2, PtlList::Priority, 1024, 256, 7)).unwrap();
    p.append(le(3, PtlList::Priority, 2048, 256, 7)).unwrap();
    let fx = p.incoming(&put(alice(), 7, 10, 0x5a)).unwrap();
    assert_eq!(types(&fx.target), [(EventType::Put, ReturnCode::Ok, 2)]);
    let ev = &fx.target[0];
    assert_eq!(ev.ptl_list, Some(PtlList::Priority));
    assert_eq!(
        (ev.mlength, ev.rlength, ev.start),
        (Some(10), Some(10), Some(1024))
    );
    assert_eq!(ev.auto_unlinked, Some(false));
    assert_eq!(
        fx.initiator,
        Some(InitiatorEvent {
            event_type: EventType::Ack,
            return_code: ReturnCode::Ok,
            mlength: Some(10),
            ptl_list: Some(PtlList::Priority),
        })
    );
    assert_eq!(p.memory().slice(1024, 11), [&[0x5a; 10][..], &[0]].concat());
    assert!(p.memory().slice(2048, 10).iter().all(|b| *b == 0));
    // Persistent, remotely managed: the same entry matches again at the same offset.
    let fx = p.incoming(&put(bob(), 7, 4, 0x33)).unwrap();
    assert_eq!(types(&fx.target), [(EventType::Put, ReturnCode::Ok, 2)]);
    assert_eq!(p.memory().slice(1024, 5), [0x33, 0x33, 0x33, 0x33, 0x5a]);
}

#[test]
fn unmatched_request_is_dropped_with_entry_not_found() {
    let mut p = pte();
    p.append(le(1, PtlList::Priority, 0, 64, 1)).unwrap();
    let fx = p.incoming(&put(alice(), 2, 8, 1)).unwrap();
    assert_eq!(
        types(&fx.target),
        [(EventType::Put, ReturnCode::EntryNotFound, 0)]
    );
    assert_eq!(fx.initiator.unwrap().return_code, ReturnCode::EntryNotFound);
    assert!(fx.touched.is_empty());
    assert!(p.memory().bytes().iter().all(|b| *b == 0));
}

#[test]
fn unexpected_put_is_claimed_by_a_later_use_once_append() {
    let mut p = pte();
    p.append(le(1, PtlList::Overflow, 4096, 1024, 0x42))
        .unwrap();
    let fx = p.incoming(&put(alice(), 0x42, 100, 0x77)).unwrap();
    assert_eq!(types(&fx.target), [(EventType::Put, ReturnCode::Ok, 1)]);
    assert_eq!(fx.target[0].ptl_list, Some(PtlList::Overflow));
    assert_eq!(fx.initiator.unwrap().ptl_list, Some(PtlList::Overflow));
    assert_eq!(p.unexpected().len(), 1);
    assert_eq!(p.memory().slice(4096, 100), [0x77; 100]);

    // A USE_ONCE receive matching it is satisfied from the header: PUT_OVERFLOW pointing at
    // the overflow buffer, an UNLINK, and no LINK; it never reaches the priority list.
    let mut recv = le(2, PtlList::Priority, 0, 512, 0x42);
    recv.flags = LeFlags::OP_PUT | LeFlags::USE_ONCE;
    let fx = p.append(recv).unwrap();
    assert_eq!(
        types(&fx.target),
        [
            (EventType::PutOverflow, ReturnCode::Ok, 2),
            (EventType::Unlink, ReturnCode::Ok, 2)
        ]
    );
    let ev = &fx.target[0];
    assert_eq!(
        (ev.start, ev.mlength, ev.rlength),
        (Some(4096), Some(100), Some(100))
    );
    assert_eq!((ev.initiator, ev.header_data), (Some(alice()), Some(0xabc)));
    assert_eq!(ev.auto_unlinked, Some(true));
    assert!(p.unexpected().is_empty());
    assert!(p.priority().is_empty());

    // A later append of the same tag finds nothing and links.
    let fx = p.append(le(3, PtlList::Priority, 0, 512, 0x42)).unwrap();
    assert_eq!(types(&fx.target), [(EventType::Link, ReturnCode::Ok, 3)]);
}

#[test]
fn persistent_append_consumes_every_matching_header_then_links() {
    let mut oflow = le(1, PtlList::Overflow, 8192, 4096, 0);
    oflow.ignore_bits = u64::MAX;
    let mut p2 = pte();
    p2.append(oflow).unwrap();
    for (mb, who) in [(5, alice()), (6, bob()), (5, bob())] {
        p2.incoming(&put(who, mb, 16, mb as u8)).unwrap();
    }
    assert_eq!(p2.unexpected().len(), 3);
    // Only alice's headers with tag 5, and only bob's are left behind otherwise.
    let mut recv = le(9, PtlList::Priority, 0, 256, 5);
    recv.match_id = match_id(PB, 9, C_NID_ANY);
    let fx = p2.append(recv).unwrap();
    assert_eq!(
        types(&fx.target),
        [
            (EventType::PutOverflow, ReturnCode::Ok, 9),
            (EventType::Link, ReturnCode::Ok, 9)
        ]
    );
    assert_eq!(fx.target[0].initiator, Some(bob()));
    assert_eq!(fx.target[0].match_bits, Some(5));
    assert_eq!(p2.unexpected().len(), 2);
    assert_eq!(p2.priority().len(), 1);

    let mut any = le(10, PtlList::Priority, 0, 256, 0);
    any.ignore_bits = u64::MAX;
    let fx = p2.append(any).unwrap();
    assert_eq!(
        types(&fx.target),
        [
            (EventType::PutOverflow, ReturnCode::Ok, 10),
            (EventType::PutOverflow, ReturnCode::Ok, 10),
            (EventType::Link, ReturnCode::Ok, 10)
        ]
    );
    assert_eq!(fx.target[0].match_bits, Some(5), "oldest first");
    assert_eq!(fx.target[1].match_bits, Some(6));
    assert!(p2.unexpected().is_empty());
}

#[test]
fn locally_managed_entry_packs_messages_and_unlinks_below_min_free() {
    let mut p = pte();
    let mut ml = le(4, PtlList::Priority, 1000, 64, 0);
    ml.flags = LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL;
    ml.min_free = 16;
    p.append(ml).unwrap();
    let mut first = put(alice(), 0, 30, 0x11);
    first.remote_offset = 500; // ignored: the NIC manages the offset
    let fx = p.incoming(&first).unwrap();
    assert_eq!(fx.target[0].start, Some(1000));
    assert_eq!(fx.target[0].auto_unlinked, Some(false));
    assert_eq!(fx.target[0].remote_offset, None);
    assert_eq!(p.priority()[0].local_offset, 30);
    // 34 bytes left >= 16: stays. The next 20 bytes land right after; 14 left < 16: unlink,
    // at match time, so the UNLINK event comes before the PUT.
    let fx = p.incoming(&put(alice(), 0, 20, 0x22)).unwrap();
    assert_eq!(
        types(&fx.target),
        [
            (EventType::Unlink, ReturnCode::Ok, 4),
            (EventType::Put, ReturnCode::Ok, 4)
        ]
    );
    assert_eq!(fx.target[1].start, Some(1030));
    assert_eq!(fx.target[1].auto_unlinked, Some(true));
    assert!(p.priority().is_empty());
    assert_eq!(
        p.memory().slice(1000, 50),
        [[0x11; 30].as_slice(), &[0x22; 20]].concat()
    );

    // Truncation at the end of a locally managed buffer.
    let mut ml = le(5, PtlList::Priority, 2000, 64, 0);
    ml.flags = LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL;
    p.append(ml).unwrap();
    p.incoming(&put(alice(), 0, 50, 1)).unwrap();
    let fx = p.incoming(&put(alice(), 0, 50, 2)).unwrap();
    assert_eq!(
        (fx.target[0].mlength, fx.target[0].start),
        (Some(14), Some(2050))
    );
    let fx = p.incoming(&put(alice(), 0, 50, 3)).unwrap();
    assert_eq!(
        (fx.target[0].mlength, fx.target[0].start),
        (Some(0), Some(2064))
    );
    assert_eq!(
        fx.target[0].auto_unlinked,
        Some(false),
        "min_free 0 never unlinks"
    );
}

#[test]
fn no_truncate_skips_entries_that_do_not_fit() {
    let mut p = pte();
    let mut small = le(1, PtlList::Priority, 0, 32, 3);
    small.flags = LeFlags::OP_PUT | LeFlags::NO_TRUNCATE;
    p.append(small).unwrap();
    p.append(le(2, PtlList::Priority, 512, 16, 3)).unwrap();
    // 40 bytes skip the NO_TRUNCATE entry and are truncated into the second one.
    let fx = p.incoming(&put(alice(), 3, 40, 9)).unwrap();
    assert_eq!(types(&fx.target), [(EventType::Put, ReturnCode::Ok, 2)]);
    assert_eq!(
        (fx.target[0].mlength, fx.target[0].rlength),
        (Some(16), Some(40))
    );
    assert_eq!(fx.initiator.unwrap().mlength, Some(16));
    // 32 bytes fit the first.
    let fx = p.incoming(&put(alice(), 3, 32, 9)).unwrap();
    assert_eq!(types(&fx.target), [(EventType::Put, ReturnCode::Ok, 1)]);
    // A remote offset counts against the room of a NO_TRUNCATE entry.
    let mut off = put(alice(), 3, 30, 9);
    off.remote_offset = 8;
    let fx = p.incoming(&off).unwrap();
    assert_eq!(types(&fx.target), [(EventType::Put, ReturnCode::Ok, 2)]);
    assert_eq!(
        (fx.target[0].mlength, fx.target[0].start),
        (Some(8), Some(520))
    );
}

#[test]
fn permission_is_checked_after_the_match_and_drops_without_rematching() {
    let mut p = pte();
    let mut get_only = le(1, PtlList::Priority, 0, 64, 8);
    get_only.flags = LeFlags::OP_GET | LeFlags::USE_ONCE;
    p.append(get_only).unwrap();
    p.append(le(2, PtlList::Priority, 256, 64, 8)).unwrap();
    let fx = p.incoming(&put(alice(), 8, 8, 1)).unwrap();
    assert_eq!(
        types(&fx.target),
        [(EventType::Put, ReturnCode::OpViolation, 1)]
    );
    assert_eq!(fx.initiator.unwrap().return_code, ReturnCode::OpViolation);
    assert_eq!(p.priority().len(), 2, "a refused request consumes nothing");
    assert!(p.memory().bytes().iter().all(|b| *b == 0));
    // A Get is allowed by entry 1, which is use-once.
    let fx = p.incoming(&get(bob(), 8, 16, 0)).unwrap();
    assert_eq!(
        types(&fx.target),
        [
            (EventType::Unlink, ReturnCode::Ok, 1),
            (EventType::Get, ReturnCode::Ok, 1)
        ]
    );
    assert_eq!(fx.reply, Some(vec![0; 16]));
    assert_eq!(fx.initiator.unwrap().event_type, EventType::Reply);
}

#[test]
fn get_reads_what_was_put_and_starts_past_the_end_read_nothing() {
    let mut p = pte();
    p.append(le(1, PtlList::Priority, 100, 32, 0)).unwrap();
    let mut w = put(alice(), 0, 10, 0);
    w.payload = (1..=10).collect();
    w.remote_offset = 4;
    p.incoming(&w).unwrap();
    let fx = p.incoming(&get(bob(), 0, 8, 6)).unwrap();
    assert_eq!(fx.reply, Some(vec![3, 4, 5, 6, 7, 8, 9, 10]));
    assert_eq!(fx.target[0].remote_offset, Some(6));
    let fx = p.incoming(&get(bob(), 0, 8, 40)).unwrap();
    assert_eq!(fx.reply, Some(Vec::new()));
    assert_eq!(
        (fx.target[0].mlength, fx.target[0].start),
        (Some(0), Some(140))
    );
}

#[test]
fn event_suppression_flags() {
    let mut p = pte();
    let mut quiet = le(1, PtlList::Priority, 0, 64, 1);
    quiet.flags = LeFlags::OP_PUT
        | LeFlags::USE_ONCE
        | LeFlags::EVENT_LINK_DISABLE
        | LeFlags::EVENT_COMM_DISABLE;
    assert!(p.append(quiet).unwrap().target.is_empty(), "no LINK");
    let fx = p.incoming(&put(alice(), 1, 8, 1)).unwrap();
    assert_eq!(
        types(&fx.target),
        [(EventType::Unlink, ReturnCode::Ok, 1)],
        "no PUT"
    );
    assert_eq!(
        fx.initiator.unwrap().return_code,
        ReturnCode::Ok,
        "the ACK is not the LE's"
    );

    let mut silent = le(2, PtlList::Priority, 0, 64, 1);
    silent.flags = LeFlags::OP_PUT
        | LeFlags::USE_ONCE
        | LeFlags::EVENT_SUCCESS_DISABLE
        | LeFlags::EVENT_UNLINK_DISABLE;
    assert_eq!(
        types(&p.append(silent).unwrap().target),
        [(EventType::Link, ReturnCode::Ok, 2)]
    );
    assert!(
        p.incoming(&put(alice(), 1, 8, 1))
            .unwrap()
            .target
            .is_empty()
    );

    // Errors are never suppressed.
    let mut refusing = le(3, PtlList::Priority, 0, 64, 1);
    refusing.flags = LeFlags::OP_GET | LeFlags::EVENT_SUCCESS_DISABLE | LeFlags::EVENT_COMM_DISABLE;
    p.append(refusing).unwrap();
    let fx = p.incoming(&put(alice(), 1, 8, 1)).unwrap();
    assert_eq!(
        types(&fx.target),
        [(EventType::Put, ReturnCode::OpViolation, 3)]
    );

    // An overflow entry without unexpected headers keeps the data but leaves no header.
    let mut nohdr = le(4, PtlList::Overflow, 1024, 64, 2);
    nohdr.flags = LeFlags::OP_PUT | LeFlags::UNEXPECTED_HDR_DISABLE;
    p.append(nohdr).unwrap();
    let fx = p.incoming(&put(alice(), 2, 8, 6)).unwrap();
    assert_eq!(types(&fx.target), [(EventType::Put, ReturnCode::Ok, 4)]);
    assert!(p.unexpected().is_empty());
    assert_eq!(p.memory().slice(1024, 8), [6; 8]);
}

#[test]
fn unlink_reports_ok_once_then_entry_not_found() {
    let mut p = pte();
    let mut e = le(7, PtlList::Priority, 0, 64, 0);
    e.flags |= LeFlags::EVENT_UNLINK_DISABLE;
    p.append(e).unwrap();
    let fx = p.unlink(PtlList::Overflow, 7);
    assert_eq!(
        types(&fx.target),
        [(EventType::Unlink, ReturnCode::EntryNotFound, 7)],
        "wrong list"
    );
    let fx = p.unlink(PtlList::Priority, 7);
    assert_eq!(
        types(&fx.target),
        [(EventType::Unlink, ReturnCode::Ok, 7)],
        "manual unlink always reports"
    );
    let fx = p.unlink(PtlList::Priority, 7);
    assert_eq!(
        types(&fx.target),
        [(EventType::Unlink, ReturnCode::EntryNotFound, 7)]
    );
    assert!(p.priority().is_empty());
}

#[test]
fn search_and_search_and_delete_on_the_unexpected_list() {
    let mut p = pte();
    let mut oflow = le(1, PtlList::Overflow, 0, 4096, 0);
    oflow.ignore_bits = u64::MAX;
    oflow.flags |= LeFlags::MANAGE_LOCAL;
    p.append(oflow).unwrap();
    p.incoming(&put(alice(), 1, 8, 1)).unwrap();
    p.incoming(&put(bob(), 2, 8, 2)).unwrap();
    p.incoming(&put(alice(), 3, 8, 3)).unwrap();
    let search = |match_bits, ignore_bits, match_id, delete| Search {
        buffer_id: 50,
        match_bits,
        ignore_bits,
        match_id,
        delete,
    };
    let fx = p.search(&search(9, 0, CXI_MATCH_ID_ANY, false));
    assert_eq!(
        types(&fx.target),
        [(EventType::Search, ReturnCode::NoMatch, 50)]
    );
    let fx = p.search(&search(2, 0, CXI_MATCH_ID_ANY, false));
    assert_eq!(types(&fx.target), [(EventType::Search, ReturnCode::Ok, 50)]);
    assert_eq!(p.unexpected().len(), 3, "a search removes nothing");

    // Delete alice's headers: two PUT_OVERFLOW (oldest first) and the SEARCH.
    let fx = p.search(&search(0, u64::MAX, alice(), true));
    assert_eq!(
        types(&fx.target),
        [
            (EventType::PutOverflow, ReturnCode::Ok, 50),
            (EventType::PutOverflow, ReturnCode::Ok, 50),
            (EventType::Search, ReturnCode::Ok, 50)
        ]
    );
    assert_eq!(fx.target[0].match_bits, Some(1));
    assert_eq!(fx.target[1].match_bits, Some(3));
    assert_eq!(
        (fx.target[1].start, fx.target[1].mlength),
        (Some(16), Some(8))
    );
    assert_eq!(p.unexpected().len(), 1);
    assert_eq!(p.unexpected()[0].initiator, bob());
    let fx = p.search(&search(0, u64::MAX, alice(), true));
    assert_eq!(
        types(&fx.target),
        [(EventType::Search, ReturnCode::NoMatch, 50)]
    );
}

#[test]
fn bad_input_is_refused() {
    let mut p = pte();
    assert_eq!(
        p.append(le(1, PtlList::Unexpected, 0, 8, 0)),
        Err(ModelError::BadList(PtlList::Unexpected))
    );
    assert!(matches!(
        p.append(le(1, PtlList::Priority, 64 << 10, 8, 0)),
        Err(ModelError::OutOfMemory { .. })
    ));
    let mut bad = put(alice(), 0, 8, 0);
    bad.payload.pop();
    assert!(matches!(p.incoming(&bad), Err(ModelError::Payload { .. })));
}
