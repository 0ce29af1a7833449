//! Property test: random two-way SMSG traffic (sends of random sizes and tags, receives with
//! release) against a model of the credit protocol of `docs/userlib-gni.md`. After every step
//! the deterministic engine runs dry, so the model predicts exactly: a send is NOT_DONE iff
//! the sender has `maxcredit` messages the receiver has not reported released; every message
//! arrives once, in order, intact.

mod gni_common;

use std::collections::VecDeque;

use gni_common::*;
use platform::EngineKind;
use proptest::prelude::*;
use userlib::gni::smsg::mailbox_attr;
use userlib::gni::{Ep, ReturnCode};

#[derive(Clone, Debug)]
enum Op {
    /// Send from side 0 or 1: data length and tag.
    Send(usize, usize, u8),
    /// Receive (and release) on side 0 or 1.
    Recv(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..2usize, 0..=47usize, 0..4u8).prop_map(|(s, l, t)| Op::Send(s, l, t)),
        2 => (0..2usize).prop_map(Op::Recv),
    ]
}

/// One direction X -> Y of the model.
#[derive(Default)]
struct Dir {
    sent: u32,
    /// Released by the receiver.
    released: u32,
    /// Released and made known to the sender.
    reported: u32,
    queue: VecDeque<(u8, Vec<u8>)>,
}

fn run(credits: u16, ops: Vec<Op>) {
    let c = cluster(EngineKind::Deterministic { seed: 77 });
    let s = [side(&c, 0, 1), side(&c, 1, 2)];
    let ep: Vec<Ep> = (0..2)
        .map(|i| {
            let e = s[i].nic.ep_create(Some(&s[i].tx)).unwrap();
            e.bind(s[1 - i].pe, s[1 - i].inst).unwrap();
            e
        })
        .collect();
    let attr: Vec<_> = (0..2)
        .map(|i| mailbox_attr(s[i].buf.va(), 0, s[i].mh, credits, 48).unwrap())
        .collect();
    for i in 0..2 {
        ep[i].smsg_init(&attr[i], &attr[1 - i]).unwrap();
    }
    let threshold = (u32::from(credits) / 2).max(1);
    // dir[i]: messages from side i to side 1 - i.
    let mut dir = [Dir::default(), Dir::default()];
    for (n, o) in ops.into_iter().enumerate() {
        match o {
            Op::Send(i, len, tag) => {
                let data = pattern(len, n as u32);
                let r = ep[i].smsg_send_w_tag(&[tag], &data, n as u32, tag);
                let d = &mut dir[i];
                let in_flight = d.sent - d.reported;
                if in_flight >= u32::from(credits) {
                    assert_eq!(r.unwrap_err().rc(), ReturnCode::NotDone, "step {n}");
                } else {
                    r.unwrap();
                    d.sent += 1;
                    d.queue.push_back((tag, data));
                    // The send carries side i's control word: its releases are reported.
                    let back = &mut dir[1 - i];
                    back.reported = back.released;
                }
            }
            Op::Recv(j) => {
                let d = &mut dir[1 - j];
                match ep[j].smsg_get_next().unwrap() {
                    Some(m) => {
                        let (tag, data) = d.queue.pop_front().expect("a message the model sent");
                        assert_eq!((m.tag, m.header()), (tag, &[tag][..]), "step {n}");
                        assert_eq!(m.data(), data.as_slice(), "step {n}");
                        ep[j].smsg_release().unwrap();
                        d.released += 1;
                        if d.released - d.reported >= threshold {
                            d.reported = d.released;
                        }
                    }
                    None => assert!(d.queue.is_empty(), "step {n}: a message is missing"),
                }
            }
        }
        settle(&c);
        for (i, d) in dir.iter().enumerate() {
            let expect = u32::from(credits) - (d.sent - d.reported);
            assert_eq!(ep[i].smsg_credits().unwrap(), expect, "step {n}, side {i}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn smsg_credits_and_order_follow_the_model(
        credits in 1u16..=4,
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        run(credits, ops);
    }
}
