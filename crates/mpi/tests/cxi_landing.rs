//! The cxi transport's receive path: a receive with a buffer of its own (`receive_into`,
//! `immediate_receive_into`) gets the message's bytes with one copy out of the memory the NIC
//! filled (the receive's LE buffer, or the eager part taken from an overflow or request
//! buffer), straight into the caller's buffer (`Transport::test_into`, counted
//! `recv_landed`), with no vector in between (`recv_copied` counts receives that take one:
//! owned receives, matched probes). Payloads are patterned and checked byte by byte around
//! the IDC, eager and rendezvous thresholds, expected and unexpected, in every matching mode;
//! these tests fail if a landed receive loses, shifts or truncates bytes, writes past the
//! message, or if receives into buffers stop taking the one-copy path.

use mpi::Universe;
use mpi::{Error, Source};
use runtime::{Job, Nic};
use transport::Stats;

/// IDC ≤ 192 B, eager ≤ 16 KiB (`FI_CXI_RDZV_THRESHOLD`), rendezvous above with 2 KiB of
/// eager bytes (`FI_CXI_RDZV_EAGER_SIZE`): the defaults.
const LENS: [usize; 12] = [
    0,
    1,
    192,
    193,
    2047,
    2048,
    2049,
    16_383,
    16_384,
    16_385,
    65_536,
    1 << 20,
];

fn job(extra: &[(&str, &str)]) -> Job {
    let mut j = Job::new(Nic::Cassini, 2);
    for (k, v) in extra {
        j = j.env(k, v);
    }
    j
}

/// The bytes of message `seed` of `n` bytes.
fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n)
        .map(|k| (k.wrapping_mul(131) ^ (k >> 8) ^ seed.wrapping_mul(29)) as u8)
        .collect()
}

fn get(s: &Stats, k: &str) -> u64 {
    s.get(k).copied().unwrap_or(0)
}

/// What changed between two snapshots of a rank's stats (collectives run between the
/// point-to-point parts of a test receive through owned vectors of their own).
fn delta(before: &Stats, after: &Stats) -> Stats {
    after
        .iter()
        .map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0)))
        .collect()
}

fn check(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(k) = (0..want.len()).find(|&k| got[k] != want[k]) {
        panic!("{what}: byte {k} of {} differs", want.len());
    }
}

/// Rank 0 sends one message of each length (tag = index); rank 1 receives each with a
/// blocking `receive_into` into a buffer `slack` bytes longer than the message, placed
/// `offset` bytes into an allocation, and checks the message and that the slack is untouched.
/// With `unexpected`, every message is sent (nonblocking) before the receiver posts anything.
/// The stats of both ranks.
fn blocking_into(
    lens: &[usize],
    offset: usize,
    slack: usize,
    unexpected: bool,
    extra: &[(&str, &str)],
) -> [Stats; 2] {
    let lens = lens.to_vec();
    let out = job(extra)
        .run(move |u: Universe| {
            let w = u.world();
            let msgs: Vec<Vec<u8>> = lens
                .iter()
                .enumerate()
                .map(|(i, &n)| pattern(n, i))
                .collect();
            let before = u.with_transport(|t| t.stats());
            if w.rank() == 0 {
                if unexpected {
                    {
                        let reqs: Vec<_> = msgs
                            .iter()
                            .enumerate()
                            .map(|(i, d)| {
                                w.process_at_rank(1)
                                    .immediate_send_with_tag(&d[..], i as i32)
                                    .unwrap()
                            })
                            .collect();
                        let sent = u.with_transport(|t| t.stats());
                        w.barrier().unwrap();
                        mpi::request::wait_all(reqs).unwrap();
                        return delta(&before, &sent);
                    }
                }
                for (i, d) in msgs.iter().enumerate() {
                    w.process_at_rank(1)
                        .send_with_tag(&d[..], i as i32)
                        .unwrap();
                }
                delta(&before, &u.with_transport(|t| t.stats()))
            } else {
                if unexpected {
                    w.barrier().unwrap();
                }
                let before = u.with_transport(|t| t.stats());
                for (i, want) in msgs.iter().enumerate() {
                    let n = want.len();
                    let mut buf = vec![0xEEu8; offset + n + slack];
                    let st = w
                        .process_at_rank(0)
                        .receive_into_with_tag(&mut buf[offset..], i as i32)
                        .unwrap();
                    assert_eq!(st.len(), n, "message {i}: status length");
                    check(
                        &buf[offset..offset + n],
                        want,
                        &format!("message {i} ({n} B)"),
                    );
                    assert!(
                        buf[..offset]
                            .iter()
                            .chain(&buf[offset + n..])
                            .all(|&b| b == 0xEE),
                        "message {i} ({n} B): bytes outside the message were written"
                    );
                }
                delta(&before, &u.with_transport(|t| t.stats()))
            }
        })
        .expect("job");
    [out[0].clone(), out[1].clone()]
}

/// The sender's protocol counts of `LENS`: 3 IDC (0..=192 B), 6 eager, 3 rendezvous.
fn assert_protocols(s: &Stats) {
    assert_eq!(get(s, "idc"), 3, "sender {s:?}");
    assert_eq!(get(s, "eager"), 6, "sender {s:?}");
    assert_eq!(get(s, "rendezvous"), 3, "sender {s:?}");
}

#[test]
fn expected_receives_land_in_the_buffer_at_sizes_around_the_thresholds() {
    let [s, r] = blocking_into(&LENS, 0, 0, false, &[]);
    assert_protocols(&s);
    assert_eq!(get(&r, "recv_landed"), LENS.len() as u64, "receiver {r:?}");
    assert_eq!(get(&r, "recv_copied"), 0, "receiver {r:?}");
}

#[test]
fn unexpected_messages_land_in_the_buffer_at_sizes_around_the_thresholds() {
    let [s, r] = blocking_into(&LENS, 0, 0, true, &[]);
    assert_protocols(&s);
    // Messages that were on the NIC before their receive was posted are not `expected`.
    assert!(get(&r, "expected") < LENS.len() as u64, "receiver {r:?}");
    assert_eq!(get(&r, "recv_landed"), LENS.len() as u64, "receiver {r:?}");
    assert_eq!(get(&r, "recv_copied"), 0, "receiver {r:?}");
}

#[test]
fn unaligned_receive_buffers_and_room_to_spare_get_exactly_the_message() {
    for offset in [1, 3] {
        for unexpected in [false, true] {
            let [_, r] = blocking_into(&[100, 5_000, 40_000], offset, 7, unexpected, &[]);
            let what = format!("offset {offset}, unexpected {unexpected}: receiver {r:?}");
            assert_eq!(get(&r, "recv_landed"), 3, "{what}");
            assert_eq!(get(&r, "recv_copied"), 0, "{what}");
        }
    }
}

#[test]
fn software_and_hybrid_matching_land_receives_too() {
    for mode in ["software", "hybrid"] {
        for unexpected in [false, true] {
            let env = [("FI_CXI_RX_MATCH_MODE", mode)];
            let [s, r] = blocking_into(&LENS, 0, 0, unexpected, &env);
            let what = format!("{mode}, unexpected {unexpected}: receiver {r:?}");
            assert_protocols(&s);
            assert_eq!(get(&r, "recv_landed"), LENS.len() as u64, "{what}");
            assert_eq!(get(&r, "recv_copied"), 0, "{what}");
        }
    }
}

#[test]
fn a_window_of_nonblocking_receives_lands_every_message_in_its_own_buffer() {
    // osu_bw's pattern: 16 receives posted, then 16 sends from one buffer, rounds of it.
    const W: usize = 16;
    for n in [8 << 10, 64 << 10] {
        let out = job(&[])
            .run(move |u: Universe| {
                let w = u.world();
                let mut landed = Stats::new();
                for round in 0..3 {
                    if w.rank() == 0 {
                        let data = pattern(n, round);
                        {
                            let reqs: Vec<_> = (0..W)
                                .map(|k| {
                                    w.process_at_rank(1)
                                        .immediate_send_with_tag(&data[..], k as i32)
                                        .unwrap()
                                })
                                .collect();
                            mpi::request::wait_all(reqs).unwrap();
                        }
                    } else {
                        let before = u.with_transport(|t| t.stats());
                        let mut bufs = vec![vec![0u8; n]; W];
                        mpi::scope(|s| {
                            let reqs: Vec<_> = bufs
                                .iter_mut()
                                .enumerate()
                                .map(|(k, b)| {
                                    w.process_at_rank(0)
                                        .immediate_receive_into_with_tag(s, &mut b[..], k as i32)
                                        .unwrap()
                                })
                                .collect();
                            mpi::request::wait_all(reqs).unwrap();
                        });
                        let want = pattern(n, round);
                        for (k, b) in bufs.iter().enumerate() {
                            check(b, &want, &format!("{n} B, round {round}, message {k}"));
                        }
                        let d = delta(&before, &u.with_transport(|t| t.stats()));
                        for (k, v) in d {
                            *landed.entry(k).or_default() += v;
                        }
                    }
                    w.barrier().unwrap();
                }
                landed
            })
            .expect("job");
        let r = &out[1];
        assert_eq!(get(r, "recv_landed"), 3 * W as u64, "{n} B: receiver {r:?}");
        assert_eq!(get(r, "recv_copied"), 0, "{n} B: receiver {r:?}");
    }
}

#[test]
fn a_receive_too_short_is_truncated_with_its_bytes_in_place() {
    // Eager (10,000 B) and rendezvous (100,000 B and 20,000 B), expected and unexpected;
    // the last one into less than its eager part (2 KiB): nothing is left for the NIC to
    // pull, and the receive and its send still complete.
    let cases = [
        (10_000usize, 5_000usize),
        (100_000, 5_000),
        (20_000, 3_000),
        (20_000, 1_500),
    ];
    for unexpected in [false, true] {
        let out = job(&[])
            .run(move |u: Universe| {
                let w = u.world();
                if w.rank() == 0 {
                    let msgs: Vec<_> = cases
                        .iter()
                        .enumerate()
                        .map(|(i, &(n, _))| pattern(n, 5 + i))
                        .collect();
                    {
                        let reqs: Vec<_> = msgs
                            .iter()
                            .enumerate()
                            .map(|(i, d)| {
                                w.process_at_rank(1)
                                    .immediate_send_with_tag(&d[..], i as i32)
                                    .unwrap()
                            })
                            .collect();
                        if unexpected {
                            w.barrier().unwrap();
                        }
                        mpi::request::wait_all(reqs).unwrap();
                    }
                    if !unexpected {
                        w.barrier().unwrap();
                    }
                    Stats::new()
                } else {
                    if unexpected {
                        w.barrier().unwrap();
                    }
                    let before = u.with_transport(|t| t.stats());
                    for (i, &(n, cap)) in cases.iter().enumerate() {
                        let mut buf = vec![0xEEu8; cap + 16];
                        match w
                            .process_at_rank(0)
                            .receive_into_with_tag(&mut buf[..cap], i as i32)
                        {
                            Err(Error::Truncate { len, capacity }) => {
                                assert_eq!((len, capacity), (n, cap));
                            }
                            other => {
                                panic!("{n} bytes: expected MPI_ERR_TRUNCATE, got {other:?}")
                            }
                        }
                        let want = pattern(n, 5 + i);
                        check(
                            &buf[..cap],
                            &want[..cap],
                            &format!("the truncated {n}-byte receive"),
                        );
                        assert!(
                            buf[cap..].iter().all(|&b| b == 0xEE),
                            "{n} bytes: written past the receive buffer"
                        );
                    }
                    let d = delta(&before, &u.with_transport(|t| t.stats()));
                    if !unexpected {
                        w.barrier().unwrap();
                    }
                    d
                }
            })
            .expect("job");
        let r = &out[1];
        assert_eq!(get(r, "recv_landed"), 4, "unexpected {unexpected}: {r:?}");
        assert_eq!(get(r, "recv_copied"), 0, "unexpected {unexpected}: {r:?}");
    }
}

#[test]
fn owned_receives_and_matched_probes_take_the_bytes_in_a_vector() {
    let out = job(&[])
        .run(|u: Universe| {
            let w = u.world();
            let (a, b) = (pattern(20_000, 1), pattern(30_000, 2));
            if w.rank() == 0 {
                w.process_at_rank(1).send_with_tag(&a[..], 1).unwrap();
                w.process_at_rank(1).send_with_tag(&b[..], 2).unwrap();
            } else {
                let (got, st) = w.process_at_rank(0).receive_vec_with_tag::<u8>(1).unwrap();
                assert_eq!(st.tag(), 1);
                check(&got, &a, "receive_vec");
                let st = w.process_at_rank(0).probe_with_tag(2).unwrap();
                assert_eq!(st.len(), b.len());
                let (m, _) = w.process_at_rank(0).matched_probe_with_tag(2).unwrap();
                let mut buf = vec![0u8; b.len()];
                m.matched_receive_into(&mut buf[..]).unwrap();
                check(&buf, &b, "matched receive");
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    assert_eq!(get(&out[1], "recv_copied"), 2, "receiver {:?}", out[1]);
    assert_eq!(get(&out[1], "recv_landed"), 0, "receiver {:?}", out[1]);
}

#[test]
fn a_cancelled_receive_takes_nothing_and_the_next_one_lands_the_message() {
    let n = 40_000;
    let out = job(&[])
        .run(move |u: Universe| {
            let w = u.world();
            let mut before = u.with_transport(|t| t.stats());
            let data = pattern(n, 3);
            if w.rank() == 0 {
                w.barrier().unwrap();
                w.process_at_rank(1).send_with_tag(&data[..], 4).unwrap();
            } else {
                let mut first = vec![0u8; n];
                let mut second = vec![0u8; n];
                mpi::scope(|s| {
                    let r = w
                        .process_at_rank(0)
                        .immediate_receive_into_with_tag(s, &mut first[..], 4)
                        .unwrap();
                    r.cancel().unwrap();
                    let st = r.wait().unwrap();
                    assert!(st.is_cancelled());
                });
                w.barrier().unwrap();
                before = u.with_transport(|t| t.stats());
                w.process_at_rank(0)
                    .receive_into_with_tag(&mut second[..], 4)
                    .unwrap();
                assert!(
                    first.iter().all(|&b| b == 0),
                    "the cancelled buffer was written"
                );
                check(&second, &data, "the receive after the cancel");
            }
            delta(&before, &u.with_transport(|t| t.stats()))
        })
        .expect("job");
    assert_eq!(get(&out[1], "recv_landed"), 1, "receiver {:?}", out[1]);
    assert_eq!(get(&out[1], "recv_copied"), 0, "receiver {:?}", out[1]);
}
