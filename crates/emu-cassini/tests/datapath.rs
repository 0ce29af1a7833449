//! The Cassini data path end to end, driven through rings and doorbells only: two emulated
//! NICs on a fabric, on the deterministic engine.

mod common;
use common::*;

#[test]
fn small_message_matches_a_priority_le() {
    let mut p = Pair::deterministic();
    let mut tgt = p.c.nodes[TGT].map(4096, true, true).unwrap();
    tgt.len = 64;
    let cmd = le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        77,
        &tgt,
        LeFlags::OP_PUT | LeFlags::USE_ONCE,
        0x42,
        0,
    );
    p.target_cmd(&cmd);
    let link = p.wait_tgt();
    assert_eq!(tgt_fields(&link).0, EventType::Link);

    let (dfa, _) = p.dfa(0);
    let cs = p.cstate(0, DmaFlags::default());
    let msg = IdcMsg {
        dfa,
        match_bits: 0x42,
        header_data: 0xDA7A,
        user_ptr: 0xFEED,
        payload: Payload::new(b"hello, cassini!!").unwrap(),
    }
    .encode()
    .unwrap();
    p.tx(&[&cs, &msg]);
    p.c.settle();

    let put = p.wait_tgt();
    let (ty, rc, bid, mlen, mb, list, unlinked) = tgt_fields(&put);
    assert_eq!(
        (ty, rc, bid, mlen, mb, list),
        (
            EventType::Put,
            ReturnCode::Ok,
            77,
            16,
            0x42,
            PtlList::Priority
        )
    );
    assert!(unlinked, "use_once LE unlinks on its match");
    assert_eq!(
        p.tgt().read_host(tgt.host, 16).unwrap(),
        b"hello, cassini!!"
    );

    let mut seen = Vec::new();
    while let Some(e) = p.poll_tx() {
        seen.push(init_fields(&e));
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, EventType::Send);
    assert_eq!(
        seen[1],
        (
            EventType::Ack,
            ReturnCode::Ok,
            16,
            0xFEED,
            PtlList::Priority
        )
    );
}
