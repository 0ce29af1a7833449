//! Arbitrary bytes as commands in a command ring of an emulated Cassini, then the doorbell.
//!
//! Input: one flag byte, then the ring contents. Flag bit 0: the target CQ of the target
//! node (else the transmit CQ of the initiator); bit 1: the ring starts with a valid
//! C_STATE (so IDC commands can reach the wire), bit 2 picks its PtlTE index.
//!
//! Whatever the bytes, the NIC must not panic, every event it writes must decode, and a
//! queue it stops must be reported as the hardware does: `c_cq_status.return_code` set and
//! a COMMAND_FAILURE event with the same code and queue on the queue's EQ — and no
//! COMMAND_FAILURE without a failed status.
#![no_main]

use firmware_spec::cassini::event::Event;
use firmware_spec::cassini::rc::ReturnCode;
use libfuzzer_sys::fuzz_target;
use nicemu_fuzz::cassini::Pair;
use nicemu_fuzz::{Bytes, Reused, run_reused};

thread_local! {
    static PAIR: Reused<Pair> = Reused::default();
}

fuzz_target!(|data: &[u8]| {
    run_reused(&PAIR, data, one);
});

fn one(p: &mut Pair, data: &[u8]) -> Vec<Event> {
    let mut b = Bytes(data);
    let flags = b.u8();
    let tgt = flags & 1 != 0;
    let mut ring = Vec::new();
    if flags & 2 != 0 && !tgt {
        ring.extend_from_slice(&p.cstate(u32::from(flags >> 2 & 1)));
        ring.extend_from_slice(&[0u8; 32]);
    }
    ring.extend_from_slice(b.take(8 << 10));
    p.raw_commands(tgt, &ring).expect("ring");
    p.c.settle();
    let events = p
        .drain()
        .expect("the NIC wrote an event that does not decode");
    let (node, q) = if tgt {
        (p.tgt(), &p.tgq)
    } else {
        (p.init(), &p.txq)
    };
    let st = node.cq_status(q).expect("c_cq_status decodes");
    let failures: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::CommandFailure(f) => Some(*f),
            _ => None,
        })
        .collect();
    if st.return_code == ReturnCode::Ok {
        assert!(
            failures.is_empty(),
            "COMMAND_FAILURE without a failed status: {failures:?}"
        );
    } else {
        assert_eq!(
            failures.len(),
            1,
            "one failure per stopped queue: {failures:?}"
        );
        let f = failures[0];
        assert_eq!(
            (f.cq_id, f.is_target, f.return_code),
            (q.n, tgt, st.return_code),
            "status and event agree"
        );
    }
    events
}
