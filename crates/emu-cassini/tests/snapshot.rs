//! `Cluster::snapshot` / `Cluster::restore`: a restored pair of NICs does exactly what it did
//! after the snapshot, whatever ran in between (messages that landed, a queue stopped by a
//! bad command, buffers mapped).

mod common;
use common::*;

/// Map a buffer on the target, append it to the overflow list, send `bytes` as an IDC
/// message, then a bad command; everything observable afterwards.
fn scenario(p: &mut Pair, bytes: &[u8], bits: u64) -> Vec<String> {
    let buf = p.c.nodes[TGT].map(8192, true, true).unwrap();
    let cmd = le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Overflow,
        900,
        &buf,
        LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL | LeFlags::EVENT_UNLINK_DISABLE,
        0,
        u64::MAX,
    );
    p.target_cmd(&cmd);
    let (dfa, _) = p.dfa(0);
    let cs = p.cstate(0, DmaFlags::default());
    let m = IdcMsg {
        dfa,
        match_bits: bits,
        header_data: 5,
        user_ptr: 1,
        payload: Payload::new(bytes).unwrap(),
    }
    .encode()
    .unwrap();
    p.tx(&[&cs, &m, &[0xFF; 64]]);
    p.c.settle();
    let mut out = vec![format!("{buf:?}")];
    while let Some(e) = p.poll_tx() {
        out.push(format!("{e:?}"));
    }
    while let Some(e) = p.poll_tgt() {
        out.push(format!("{e:?}"));
    }
    out.push(format!("{:?}", p.tgt().read_host(buf.host, 64).unwrap()));
    let det = p.c.deterministic_engine().unwrap();
    out.push(format!("{} {:?}", det.trace_digest(), det.now()));
    out
}

#[test]
fn a_restored_cluster_repeats_the_run_after_the_snapshot() {
    let mut p = Pair::deterministic();
    p.c.settle();
    let snap = p.c.snapshot().unwrap();
    let queues = (
        p.eq_tx.clone(),
        p.txq.clone(),
        p.eq_tgt.clone(),
        p.tgq.clone(),
    );
    let first = scenario(&mut p, &[0xA1; 40], 1);
    assert!(first.len() > 4, "events were seen: {first:?}");
    for (bytes, bits) in [(&[0x5Au8; 100][..], 2), (&[1u8; 3][..], 1)] {
        let other = scenario(&mut p, bytes, bits);
        assert_ne!(other, first);
        p.c.restore(&snap).unwrap();
        (p.eq_tx, p.txq, p.eq_tgt, p.tgq) = queues.clone();
        assert_eq!(scenario(&mut p, &[0xA1; 40], 1), first);
        p.c.restore(&snap).unwrap();
        (p.eq_tx, p.txq, p.eq_tgt, p.tgq) = queues.clone();
    }
}

#[test]
fn a_threaded_cluster_has_no_snapshot() {
    let p = Pair::threaded();
    assert!(matches!(
        p.c.snapshot(),
        Err(HarnessError::Engine(
            emu_core::engine::EngineError::Snapshot(_)
        ))
    ));
}
