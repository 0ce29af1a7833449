//! The gni transport's R0 receive path: the receiver's BTE GET fills a registered buffer, and a
//! receive with a buffer of its own (`receive_into`, `immediate_receive_into`) gets the bytes
//! with one copy out of it (`Transport::test_into`, counted `R0 landed`), with no vector in
//! between (`R0 copied` counts receives that take one: owned receives, matched probes).
//! Payloads are patterned and checked byte by byte; these tests fail if a landed receive
//! loses, shifts or truncates bytes, or if receives into buffers stop taking the one-copy path.

use mpi::Universe;
use mpi::{Error, Source};
use runtime::{Job, Nic};
use transport::Stats;

/// Thresholds small enough to cross cheaply: E0 ≤ 256, E1 ≤ 4096, R0 ≤ 64 KiB, R1 above.
const KNOBS: [(&str, &str); 4] = [
    ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "256"),
    ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "4096"),
    ("MPICH_GNI_RDMA_THRESHOLD", "2048"),
    ("MPICH_GNI_NDREG_MAXSIZE", "64K"),
];

fn job(extra: &[(&str, &str)]) -> Job {
    let mut j = Job::new(Nic::Gemini, 2);
    for (k, v) in KNOBS.iter().chain(extra) {
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

fn check(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(k) = (0..want.len()).find(|&k| got[k] != want[k]) {
        panic!("{what}: byte {k} of {} differs", want.len());
    }
}

/// Rank 0 sends one message of each length (tag = index); rank 1 receives each with a
/// blocking `receive_into` into a buffer `slack` bytes longer than the message, placed
/// `offset` bytes into an allocation (so its address is not 4-byte aligned for odd offsets),
/// and checks the message and that the slack is untouched. The stats of both ranks.
fn blocking_into(
    lens: &[usize],
    offset: usize,
    slack: usize,
    extra: &[(&str, &str)],
) -> [Stats; 2] {
    let out = job(extra)
        .run(|u: Universe| {
            let w = u.world();
            for (i, &n) in lens.iter().enumerate() {
                let data = pattern(n, i);
                if w.rank() == 0 {
                    w.process_at_rank(1)
                        .send_with_tag(&data[..], i as i32)
                        .unwrap();
                } else {
                    let mut buf = vec![0xEEu8; offset + n + slack];
                    let st = w
                        .process_at_rank(0)
                        .receive_into_with_tag(&mut buf[offset..], i as i32)
                        .unwrap();
                    assert_eq!(st.len(), n, "message {i}: status length");
                    check(
                        &buf[offset..offset + n],
                        &data,
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
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    [out[0].clone(), out[1].clone()]
}

#[test]
fn r0_receives_land_in_the_buffer_at_sizes_around_the_thresholds() {
    // 4096: E1 (the last eager size); 4100..=65536 with lengths of whole words: R0 by GET;
    // 65540: R1.
    let lens = [4096, 4100, 4104, 8192, 12_288, 65_532, 65_536, 65_540];
    let [s, r] = blocking_into(&lens, 0, 0, &[]);
    assert_eq!(get(&s, "R0"), 6, "sender {s:?}");
    assert_eq!(get(&s, "R1"), 1, "sender {s:?}");
    assert_eq!(get(&r, "R0 landed"), 6, "receiver {r:?}");
    assert_eq!(get(&r, "R0 copied"), 0, "receiver {r:?}");
    assert_eq!(get(&r, "PutFallback"), 0, "receiver {r:?}");
}

#[test]
fn unaligned_receive_buffers_and_room_to_spare_get_exactly_the_message() {
    for offset in [1, 2, 3] {
        let [s, r] = blocking_into(&[4100, 20_000, 65_536], offset, 7, &[]);
        assert_eq!(get(&s, "R0"), 3, "offset {offset}: sender {s:?}");
        assert_eq!(get(&r, "R0 landed"), 3, "offset {offset}: receiver {r:?}");
        assert_eq!(get(&r, "R0 copied"), 0, "offset {offset}: receiver {r:?}");
    }
}

#[test]
fn lengths_and_sources_the_get_cannot_take_still_arrive_through_put_fallback() {
    // Odd lengths (Gemini GETs move whole 4-byte words) and a misaligned send buffer: the
    // receiver answers CTS and the sender PUTs, as before, into one buffer the receive then
    // copies out of.
    let out = job(&[])
        .run(|u: Universe| {
            let w = u.world();
            let msgs = [(4101usize, 0usize), (9_999, 0), (8192, 1), (8192, 3)];
            for (i, &(n, skew)) in msgs.iter().enumerate() {
                let data = pattern(n, i);
                if w.rank() == 0 {
                    let mut buf = vec![0u8; n + skew];
                    buf[skew..].copy_from_slice(&data);
                    w.process_at_rank(1)
                        .send_with_tag(&buf[skew..], i as i32)
                        .unwrap();
                } else {
                    let mut buf = vec![0u8; n + 1];
                    w.process_at_rank(0)
                        .receive_into_with_tag(&mut buf[1..], i as i32)
                        .unwrap();
                    check(&buf[1..], &data, &format!("message {i}"));
                }
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    assert_eq!(get(&out[1], "PutFallback"), 4, "receiver {:?}", out[1]);
    // The PUT fills one granted buffer; the receive takes the bytes from it with one copy.
    assert_eq!(get(&out[1], "R0 landed"), 4, "receiver {:?}", out[1]);
    assert_eq!(get(&out[1], "R0 copied"), 0, "receiver {:?}", out[1]);
}

#[test]
fn a_window_of_nonblocking_receives_lands_every_message_in_its_own_buffer() {
    // osu_bw's pattern: 16 receives posted, then 16 sends from one buffer, rounds of it.
    const W: usize = 16;
    const N: usize = 32 << 10;
    let out = job(&[])
        .run(|u: Universe| {
            let w = u.world();
            for round in 0..3 {
                if w.rank() == 0 {
                    let data = pattern(N, round);
                    let reqs: Vec<_> = (0..W)
                        .map(|k| {
                            w.process_at_rank(1)
                                .immediate_send_with_tag(&data[..], k as i32)
                                .unwrap()
                        })
                        .collect();
                    mpi::request::wait_all(reqs).unwrap();
                } else {
                    let mut bufs = vec![vec![0u8; N]; W];
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
                    let want = pattern(N, round);
                    for (k, b) in bufs.iter().enumerate() {
                        check(b, &want, &format!("round {round}, message {k}"));
                    }
                }
                w.barrier().unwrap();
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    assert_eq!(get(&out[0], "R0"), 3 * W as u64, "sender {:?}", out[0]);
    assert_eq!(
        get(&out[1], "R0 landed"),
        3 * W as u64,
        "receiver {:?}",
        out[1]
    );
    assert_eq!(get(&out[1], "R0 copied"), 0, "receiver {:?}", out[1]);
}

#[test]
fn a_receive_too_short_is_truncated_with_its_bytes_in_place() {
    // 16 KiB by GET, 9,999 bytes by Put Fallback (odd length), both into 5,000 bytes.
    let lens = [16_384usize, 9_999];
    let out = job(&[])
        .run(|u: Universe| {
            let w = u.world();
            for (i, &n) in lens.iter().enumerate() {
                let data = pattern(n, 5 + i);
                if w.rank() == 0 {
                    w.process_at_rank(1)
                        .send_with_tag(&data[..], i as i32)
                        .unwrap();
                } else {
                    let mut buf = vec![0u8; 5_000];
                    match w
                        .process_at_rank(0)
                        .receive_into_with_tag(&mut buf[..], i as i32)
                    {
                        Err(Error::Truncate { len, capacity }) => {
                            assert_eq!((len, capacity), (n, 5_000));
                        }
                        other => panic!("{n} bytes: expected MPI_ERR_TRUNCATE, got {other:?}"),
                    }
                    check(
                        &buf,
                        &data[..5_000],
                        &format!("the truncated {n}-byte receive"),
                    );
                }
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    assert_eq!(get(&out[1], "PutFallback"), 1, "receiver {:?}", out[1]);
    assert_eq!(get(&out[1], "R0 landed"), 2, "receiver {:?}", out[1]);
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
    assert_eq!(get(&out[1], "R0 copied"), 2, "receiver {:?}", out[1]);
    assert_eq!(get(&out[1], "R0 landed"), 0, "receiver {:?}", out[1]);
}

#[test]
fn a_cancelled_receive_takes_nothing_and_the_next_one_lands_the_message() {
    let n = 40_000;
    let out = job(&[])
        .run(|u: Universe| {
            let w = u.world();
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
                w.process_at_rank(0)
                    .receive_into_with_tag(&mut second[..], 4)
                    .unwrap();
                assert!(
                    first.iter().all(|&b| b == 0),
                    "the cancelled buffer was written"
                );
                check(&second, &data, "the receive after the cancel");
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    assert_eq!(get(&out[1], "R0 landed"), 1, "receiver {:?}", out[1]);
}

#[test]
fn gets_re_posted_after_transaction_errors_still_land_every_byte() {
    // The first completions are reported as transaction errors; the transport re-posts the
    // GETs, and the receives still land what the sender sent.
    let lens = [8192, 30_000, 65_536, 16_384];
    let [s, r] = blocking_into(&lens, 1, 0, &[("NICEMU_GNI_INJECT_POST_ERRORS", "3")]);
    assert_eq!(get(&s, "R0"), 4, "sender {s:?}");
    assert_eq!(get(&r, "R0 landed"), 4, "receiver {r:?}");
    assert!(get(&r, "reposts") + get(&s, "reposts") >= 1, "{s:?} {r:?}");
}
