//! Commands may only name objects of their queue's resource group: the CQ block checks the
//! EQ and counting event a transmit command names against `c_cq_cfg_eq_rgid_table` and
//! `c_cq_cfg_ct_rgid_table`, and the PtlTE of a target command against
//! `c_cq_cfg_ptlte_rgid_table`. A command naming another group's object fails its queue with
//! PERM_VIOLATION (COMMAND_FAILURE event, `c_cq_status`), counted in
//! `c_cq_cntrs.num_{tx,tgt}_cmd_perm_errors`, and touches nothing of the other group.
//!
//! The harness's queues are in resource group 1; the "other process" objects here are moved
//! to group 2 by rewriting their table entries, as the driver does for another LNI.

mod common;
use common::*;
use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::pci::CSR_BASE;

fn cq_counter(n: &Node, name: &str) -> u64 {
    let c = csr::lookup("c_cq_cntrs").unwrap();
    let fld = c.field(name).unwrap();
    n.bar
        .read_u64(CSR_BASE + c.offset + u64::from(fld.bit / 8))
        .unwrap()
}

fn command_failure(ev: &Event) -> (u16, bool, ReturnCode) {
    match ev {
        Event::CommandFailure(c) => (c.cq_id, c.is_target, c.return_code),
        other => panic!("not a COMMAND_FAILURE: {other:?}"),
    }
}

#[test]
fn a_transmit_command_naming_another_groups_eq_or_ct_fails_its_queue() {
    for victim_is_ct in [false, true] {
        let mut p = Pair::deterministic();
        // The other group's EQ 3 and CT 7 on the initiator's node.
        let mut victim_eq = p.c.nodes[INIT]
            .alloc_eq(3, 4 * PAGE, EqOpts::default())
            .unwrap();
        let wb = p.c.nodes[INIT].map(PAGE, true, true).unwrap();
        p.c.nodes[INIT].alloc_ct(7, Some(&wb)).unwrap();
        let n = &p.c.nodes[INIT];
        n.csr_write(
            csr::C_CQ_CFG_EQ_RGID_TABLE,
            3,
            &[(f::c_cq_cfg_eq_rgid_table::RGID, 2)],
        )
        .unwrap();
        n.csr_write(
            csr::C_CQ_CFG_CT_RGID_TABLE,
            7,
            &[(f::c_cq_cfg_ct_rgid_table::RGID, 2)],
        )
        .unwrap();
        let wb_before = n.read_host(wb.host, 8).unwrap();
        let (dfa, ext) = p.dfa(0);
        let cs = CState {
            write_lac: 0,
            flags: DmaFlags::default(),
            initiator: p.initiator(),
            index_ext: ext,
            user_ptr: 0xBAD,
            ct: if victim_is_ct { 7 } else { 0 },
            eq: if victim_is_ct { EQ_TX } else { 3 },
        };
        let msg = IdcMsg {
            dfa,
            match_bits: 1,
            header_data: 0,
            user_ptr: 0xBAD,
            payload: Payload::new(b"not yours").unwrap(),
        }
        .encode()
        .unwrap();
        p.tx(&[&cs.encode(), &msg]);
        p.c.settle();
        let ev = p.wait_tx();
        assert_eq!(command_failure(&ev), (0, false, ReturnCode::PermViolation));
        let st = p.init().cq_status(&p.txq).unwrap();
        assert_eq!(st.return_code, ReturnCode::PermViolation);
        assert_eq!(cq_counter(p.init(), "num_tx_cmd_perm_errors"), 1);
        assert_eq!(cq_counter(p.init(), "num_tx_cmd_arg_errors"), 0);
        // Nothing reached the other group's objects or the wire.
        assert!(victim_eq.next(p.init()).unwrap().is_none());
        assert_eq!(p.init().read_host(wb.host, 8).unwrap(), wb_before);
        assert!(p.poll_tgt().is_none(), "nothing was delivered");
    }
}

#[test]
fn a_target_command_naming_another_groups_ptlte_fails_its_queue() {
    let mut p = Pair::deterministic();
    let n = &p.c.nodes[TGT];
    n.csr_write(
        csr::C_CQ_CFG_PTLTE_RGID_TABLE,
        u32::from(PT_MATCH),
        &[(f::c_cq_cfg_ptlte_rgid_table::RGID, 2)],
    )
    .unwrap();
    // Disabling the other group's PtlTE is refused...
    p.target_cmd(&set_state(PT_MATCH, PtlteState::Disabled, 0));
    p.c.settle();
    let ev = p.wait_tgt();
    assert_eq!(command_failure(&ev), (0, true, ReturnCode::PermViolation));
    assert_eq!(cq_counter(p.tgt(), "num_tgt_cmd_perm_errors"), 1);
    assert_eq!(cq_counter(p.tgt(), "num_tgt_cmd_arg_errors"), 0);
    assert!(p.poll_tgt().is_none(), "no STATE_CHANGE");
    // ...and the PtlTE still takes its owner's traffic: a message to it with no LE is an
    // ENTRY_NOT_FOUND drop of an ENABLED PtlTE, not PT_DISABLED.
    let (dfa, _) = p.dfa(0);
    let msg = IdcMsg {
        dfa,
        match_bits: 1,
        header_data: 0,
        user_ptr: 5,
        payload: Payload::new(b"still on").unwrap(),
    }
    .encode()
    .unwrap();
    let cs = p.cstate(0, DmaFlags::default());
    p.tx(&[&cs, &msg]);
    p.c.settle();
    let acks: Vec<_> = std::iter::from_fn(|| p.poll_tx())
        .filter(|e| e.event_type() == EventType::Ack)
        .map(|e| init_fields(&e).1)
        .collect();
    assert_eq!(acks, vec![ReturnCode::EntryNotFound]);
}
