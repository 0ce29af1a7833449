//! MPI over the gni transport on emulated Gemini nodes: the semantics suite (with lazy and
//! with all-to-all connections), the protocol chosen at every threshold and by every knob
//! (E0, E1 / Eager GET, R0, Put Fallback, R1; FMA vs BTE), lazy connections, bad knobs.
//! Payloads are patterned and checked byte by byte.

use mpi::{Source, Universe};
use runtime::{Job, JobError, Nic};
use transport::Stats;

fn job(ranks: u32) -> Job {
    Job::new(Nic::Gemini, ranks)
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

/// Rank 0 sends one message per `(len, skew)` to rank 1 from `skew` bytes into a buffer
/// (skew 1 misaligns it), tag = index; rank 1 checks every byte. The stats of both ranks.
fn exchange(env: &[(&str, &str)], msgs: &[(usize, usize)]) -> (Stats, Stats) {
    let mut j = job(2);
    for (k, v) in env {
        j = j.env(k, v);
    }
    let out = j
        .run(|u: Universe| {
            let w = u.world();
            for (i, &(n, skew)) in msgs.iter().enumerate() {
                let data = pattern(n, i);
                if w.rank() == 0 {
                    let mut buf = vec![0u8; n + skew];
                    buf[skew..].copy_from_slice(&data);
                    w.process_at_rank(1)
                        .send_with_tag(&buf[skew..], i as i32)
                        .unwrap();
                } else {
                    let (got, st) = w.process_at_rank(0).receive_vec::<u8>().unwrap();
                    assert_eq!(st.tag(), i as i32);
                    assert_eq!(got.len(), n, "message {i}");
                    if let Some(k) = (0..n).find(|&k| got[k] != data[k]) {
                        panic!("message {i} of {n} bytes: byte {k} differs");
                    }
                }
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    (out[0].clone(), out[1].clone())
}

#[test]
fn every_threshold_picks_its_protocol_and_the_bytes_arrive() {
    let env = [
        ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "256"),
        ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "4096"),
        ("MPICH_GNI_RDMA_THRESHOLD", "2048"),
        ("MPICH_GNI_NDREG_MAXSIZE", "64K"),
    ];
    let msgs = [
        (0, 0),       // E0
        (255, 0),     // E0
        (256, 0),     // E0
        (257, 0),     // E1, GET 260 B: FMA
        (4095, 0),    // E1, GET 4096 B: BTE
        (4096, 0),    // E1, BTE
        (4100, 0),    // R0, GET: BTE
        (5001, 0),    // R0, odd length: Put Fallback (PUT on the BTE)
        (8192, 1),    // R0, misaligned buffer: Put Fallback
        (2000, 0),    // E1, GET 2000 B: FMA
        (65536, 0),   // R0, BTE
        (65537, 0),   // R1: chunks of 65536 (BTE PUT) and 1 (FMA PUT)
        (200_003, 3), // R1: 3 x 65536 + 3395, all BTE PUTs
    ];
    let (s, r) = exchange(&env, &msgs);
    assert_eq!(
        [get(&s, "E0"), get(&s, "E1"), get(&s, "R0"), get(&s, "R1")],
        [3, 4, 4, 2],
        "sender {s:?}"
    );
    assert_eq!(get(&r, "PutFallback"), 2, "receiver {r:?}");
    // GETs are the receiver's: E1 257 and 2000 by FMA; E1 4095, 4096, R0 4100, 65536 BTE.
    assert_eq!((get(&r, "fma"), get(&r, "bte")), (2, 4), "receiver {r:?}");
    // PUTs are the sender's: 5001, 8192, 65536 + 1, 3 x 65536 + 3395.
    assert_eq!((get(&s, "fma"), get(&s, "bte")), (1, 7), "sender {s:?}");
}

#[test]
fn puts_and_gets_that_fail_with_a_transaction_error_are_reposted_and_delivered_once() {
    // The first 3 PUT/GET completions of each rank are reported as transaction errors
    // (REQUEST_TIMEOUT, recoverable): the transport posts each again, and every message of
    // every protocol still arrives once, intact and in order.
    let env = [
        ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "256"),
        ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "4096"),
        ("MPICH_GNI_RDMA_THRESHOLD", "2048"),
        ("MPICH_GNI_NDREG_MAXSIZE", "64K"),
        ("NICEMU_GNI_INJECT_POST_ERRORS", "3"),
    ];
    let msgs = [
        (257, 0),     // E1, FMA GET
        (4096, 0),    // E1, BTE GET
        (4100, 0),    // R0, BTE GET
        (5001, 0),    // Put Fallback, BTE PUT
        (2000, 0),    // E1, FMA GET
        (65537, 0),   // R1: BTE PUT + FMA PUT
        (200_003, 3), // R1: BTE PUTs
    ];
    let (s, r) = exchange(&env, &msgs);
    assert_eq!(get(&r, "reposts"), 3, "receiver {r:?}");
    assert_eq!(get(&s, "reposts"), 3, "sender {s:?}");
    // Re-posts are not new posts.
    assert_eq!((get(&r, "fma"), get(&r, "bte")), (2, 2), "receiver {r:?}");
    assert_eq!((get(&s, "fma"), get(&s, "bte")), (1, 6), "sender {s:?}");
}

#[test]
fn the_semantics_suite_passes_when_puts_and_gets_fail_and_are_reposted() {
    let stats = job(4)
        .env("NICEMU_GNI_INJECT_POST_ERRORS", "6")
        .run(|u: Universe| {
            tests::mpi_semantics::run(&u.world());
            u.with_transport(|t| t.stats())
        })
        .expect("semantics suite with transaction errors");
    let reposts: u64 = stats.iter().map(|s| get(s, "reposts")).sum();
    assert!(reposts > 0, "{stats:?}");
}

#[test]
fn a_post_that_keeps_failing_ends_the_job_after_its_retry_budget() {
    // One eager-GET message; its GET fails 17 times: 16 re-posts, then the job fails with
    // the transport's reason instead of retrying forever.
    let n = transport::gni::POST_RETRIES + 1;
    let err = job(2)
        .env("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "256")
        .env("NICEMU_GNI_INJECT_POST_ERRORS", &n.to_string())
        .run(|u: Universe| {
            let w = u.world();
            if w.rank() == 0 {
                w.process_at_rank(1).send(&pattern(1000, 1)[..]).unwrap();
            } else {
                let got = w.process_at_rank(0).receive_vec::<u8>();
                panic!("receive ended: {:?}", got.map(|(v, _)| v.len()));
            }
        })
        .expect_err("a post that never succeeds");
    let why = err.to_string();
    assert!(why.contains("transaction failed"), "{why}");
    assert!(why.contains("16 re-posts"), "{why}");
    // What failed is the descriptor's status, not the event's (which reads OK).
    assert!(why.contains("status REQUEST_TIMEOUT"), "{why}");
}

#[test]
fn the_default_thresholds_by_size() {
    // Two ranks: E0 up to 1024, E1 up to 8192, R0 up to 4 MiB, then R1.
    let msgs = [
        (1024, 0),
        (1025, 0),
        (8192, 0),
        (8193, 0),
        (4 << 20, 0),
        ((4 << 20) + 4, 0),
    ];
    let (s, r) = exchange(&[], &msgs);
    assert_eq!(
        [get(&s, "E0"), get(&s, "E1"), get(&s, "R0"), get(&s, "R1")],
        [1, 2, 2, 1],
        "sender {s:?}"
    );
    assert_eq!(get(&r, "PutFallback"), 1, "8193 bytes: {r:?}");
}

/// Each knob moved both ways moves the protocol choice: (env, below, above, protocols).
#[test]
fn every_knob_moves_its_threshold() {
    type Case = (
        &'static [(&'static str, &'static str)],
        usize,
        usize,
        [&'static str; 2],
    );
    let cases: [Case; 8] = [
        (
            &[("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "128")],
            128,
            129,
            ["E0", "E1"],
        ),
        (
            &[("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "1024")],
            1024,
            1025,
            ["E0", "E1"],
        ),
        (
            &[
                ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "64"),
                ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "1024"),
            ],
            1024,
            1028,
            ["E1", "R0"],
        ),
        (
            &[
                ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "64"),
                ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "16K"),
            ],
            16384,
            16388,
            ["E1", "R0"],
        ),
        (
            &[
                ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "64"),
                ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "64"),
                ("MPICH_GNI_NDREG_MAXSIZE", "8K"),
            ],
            8192,
            8196,
            ["R0", "R1"],
        ),
        (
            &[
                ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "64"),
                ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "64"),
                ("MPICH_GNI_NDREG_MAXSIZE", "16K"),
            ],
            16384,
            16388,
            ["R0", "R1"],
        ),
        (
            &[
                ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "64"),
                ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "64"),
                ("MPICH_GNI_RDMA_THRESHOLD", "4096"),
            ],
            4092,
            4096,
            ["fma", "bte"],
        ),
        (
            &[
                ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "64"),
                ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "64"),
                ("MPICH_GNI_RDMA_THRESHOLD", "8K"),
            ],
            8188,
            8192,
            ["fma", "bte"],
        ),
    ];
    for (env, below, above, [p, q]) in cases {
        let (s, r) = exchange(env, &[(below, 0), (above, 0)]);
        // Protocols are counted by the sender, GET engines by the receiver.
        let st = if p == "fma" { &r } else { &s };
        assert_eq!(
            (get(st, p), get(st, q)),
            (1, 1),
            "{env:?} {below}/{above}: {st:?}"
        );
    }
}

#[test]
fn eager_get_lands_in_a_posted_receive_and_unexpected_e1_waits() {
    let out = job(2)
        .env("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "64")
        .run(|u: Universe| {
            let w = u.world();
            let (a, b) = (pattern(3001, 1), pattern(777, 2));
            if w.rank() == 0 {
                // Wait until rank 1 has posted its receive, then send: Eager GET.
                w.process_at_rank(1).receive_vec::<u8>().unwrap();
                w.process_at_rank(1).send_with_tag(&a[..], 1).unwrap();
                // Unexpected: sent before any receive, announced by a later E0.
                w.process_at_rank(1).send_with_tag(&b[..], 2).unwrap();
                w.process_at_rank(1).send_with_tag(&[9u8][..], 3).unwrap();
            } else {
                let mut got = vec![0u8; 3001];
                mpi::scope(|s| {
                    let req = w
                        .process_at_rank(0)
                        .immediate_receive_into_with_tag(s, &mut got[..], 1)
                        .unwrap();
                    w.process_at_rank(0).send(&[0u8][..]).unwrap();
                    req.wait().unwrap();
                });
                assert!(got == a, "the Eager GET message differs");
                w.process_at_rank(0).receive_vec_with_tag::<u8>(3).unwrap();
                let (v, _) = w.process_at_rank(0).receive_vec_with_tag::<u8>(2).unwrap();
                assert!(v == b, "the unexpected E1 message differs");
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    assert_eq!(get(&out[0], "E1"), 2, "{:?}", out[0]);
    assert_eq!(get(&out[1], "EagerGET"), 1, "{:?}", out[1]);
}

#[test]
fn messages_of_every_protocol_in_flight_any_source_and_ssend() {
    // Ranks 1 and 2 each send rank 0 every protocol at once (immediate sends), then each
    // protocol again as a synchronous send; rank 0 receives everything with ANY_SOURCE and
    // ANY_TAG and checks each message by its source and tag.
    let sizes = [3usize, 200, 257, 3001, 4100, 4101, 70_001, 140_000];
    for dynamic in ["enabled", "disabled"] {
        let out = job(3)
            .env("MPICH_GNI_DYNAMIC_CONN", dynamic)
            .env("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "256")
            .env("MPICH_GNI_MAX_EAGER_MSG_SIZE", "4096")
            .env("MPICH_GNI_NDREG_MAXSIZE", "64K")
            .run(|u: Universe| {
                let w = u.world();
                let n = sizes.len();
                if w.rank() == 0 {
                    let mut seen = vec![false; 2 * 2 * n];
                    for _ in 0..seen.len() {
                        let (v, st) = w.any_process().receive_vec::<u8>().unwrap();
                        let (src, tag) = (st.source_rank() as usize, st.tag() as usize);
                        let want = pattern(sizes[tag % n], src * 100 + tag);
                        assert!(v == want, "from {src} tag {tag}: {} bytes differ", v.len());
                        let k = (src - 1) * 2 * n + tag;
                        assert!(!seen[k], "from {src} tag {tag} twice");
                        seen[k] = true;
                    }
                } else {
                    let me = w.rank() as usize;
                    let bufs: Vec<Vec<u8>> =
                        (0..n).map(|t| pattern(sizes[t], me * 100 + t)).collect();
                    let reqs = bufs
                        .iter()
                        .enumerate()
                        .map(|(t, b)| {
                            w.process_at_rank(0)
                                .immediate_send_with_tag(&b[..], t as i32)
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .unwrap();
                    mpi::request::wait_all(reqs).unwrap();
                    for t in n..2 * n {
                        let b = pattern(sizes[t % n], me * 100 + t);
                        w.process_at_rank(0)
                            .synchronous_send_with_tag(&b[..], t as i32)
                            .unwrap();
                    }
                }
                u.with_transport(|t| t.stats())
            })
            .expect("job");
        for s in &out[1..] {
            assert_eq!(
                [get(s, "E0"), get(s, "E1"), get(s, "R0"), get(s, "R1")],
                [4, 4, 4, 4],
                "{dynamic}: {s:?}"
            );
        }
        assert_eq!(get(&out[0], "PutFallback"), 4, "{dynamic}: {:?}", out[0]);
    }
}

#[test]
fn lazy_connections_connect_only_the_peers_that_talk() {
    let talk = |u: Universe| {
        let w = u.world();
        let msg = pattern(100, 5);
        match w.rank() {
            0 => {
                w.process_at_rank(1).send(&msg[..]).unwrap();
                let (v, _) = w.process_at_rank(1).receive_vec::<u8>().unwrap();
                assert!(v == msg);
            }
            1 => {
                let (v, _) = w.process_at_rank(0).receive_vec::<u8>().unwrap();
                w.process_at_rank(0).send(&v[..]).unwrap();
            }
            _ => {}
        }
        u.with_transport(|t| t.stats())
    };
    let lazy = job(4).run(talk).expect("job");
    let conns: Vec<u64> = lazy.iter().map(|s| get(s, "connections")).collect();
    assert_eq!(conns, [1, 1, 0, 0], "{lazy:?}");
    assert_eq!(get(&lazy[0], "dials"), 1, "{:?}", lazy[0]);
    assert_eq!(get(&lazy[1], "accepts"), 1, "{:?}", lazy[1]);
    assert_eq!(
        get(&lazy[1], "dials"),
        0,
        "the reply rides the accepted connection"
    );
    let eager = job(4)
        .env("MPICH_GNI_DYNAMIC_CONN", "disabled")
        .run(talk)
        .expect("job");
    let conns: Vec<u64> = eager.iter().map(|s| get(s, "connections")).collect();
    assert_eq!(conns, [3, 3, 3, 3], "{eager:?}");
    assert!(eager.iter().all(|s| get(s, "dials") == 0));
}

#[test]
fn the_semantics_suite_passes_on_gemini() {
    for dynamic in ["enabled", "disabled"] {
        for ranks in [1, 2, 3, 5, 8, 13, 17] {
            job(ranks)
                .env("MPICH_GNI_DYNAMIC_CONN", dynamic)
                .run(|u: Universe| tests::mpi_semantics::run(&u.world()))
                .unwrap_or_else(|e| panic!("{ranks} ranks, dynamic {dynamic}: {e}"));
        }
    }
}

#[test]
fn bad_knobs_are_init_errors_naming_the_variable() {
    for (var, value) in [
        ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "lots"),
        ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "20000"),
        ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "4G"),
        ("MPICH_GNI_RDMA_THRESHOLD", "-1"),
        ("MPICH_GNI_NDREG_MAXSIZE", "12"),
        ("MPICH_GNI_DYNAMIC_CONN", "maybe"),
    ] {
        match job(2).env(var, value).run(|_u: Universe| ()) {
            Err(JobError::Init { error, .. }) => {
                assert!(error.to_string().contains(var), "{error}");
            }
            other => panic!("{var}={value}: expected an init error, got {other:?}"),
        }
    }
}

#[test]
fn many_rendezvous_in_flight_arrive_intact() {
    // Sixteen 1 MiB messages in flight at once: sixteen BTE GETs on one channel, whose
    // completions must reach the right receives (a BTE channel retires its TXDs in order).
    let n = 1 << 20;
    let out = job(2)
        .run(|u: Universe| -> Result<(), String> {
            let w = u.world();
            for it in 0..3u8 {
                if w.rank() == 0 {
                    let bufs: Vec<Vec<u8>> = (0..16u8).map(|k| vec![k ^ it; n]).collect();
                    let reqs = bufs
                        .iter()
                        .map(|b| w.process_at_rank(1).immediate_send_with_tag(&b[..], 5))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| e.to_string())?;
                    mpi::request::wait_all(reqs).map_err(|e| e.to_string())?;
                } else {
                    let mut bufs = vec![vec![0u8; n]; 16];
                    mpi::scope(|s| -> Result<(), String> {
                        let reqs = bufs
                            .iter_mut()
                            .map(|b| {
                                w.process_at_rank(0).immediate_receive_into_with_tag(
                                    s,
                                    &mut b[..],
                                    5,
                                )
                            })
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| e.to_string())?;
                        mpi::request::wait_all(reqs).map_err(|e| e.to_string())?;
                        Ok(())
                    })?;
                    for (k, b) in bufs.iter().enumerate() {
                        if b.iter().any(|&x| x != k as u8 ^ it) {
                            return Err(format!("round {it}: message {k} corrupt"));
                        }
                    }
                }
            }
            Ok(())
        })
        .expect("job");
    assert!(out.iter().all(Result::is_ok), "{out:?}");
}

#[test]
fn a_ring_of_32_ranks_makes_two_connections_per_rank() {
    let out = job(32)
        .run(|u: Universe| {
            let w = u.world();
            let (me, n) = (w.rank(), w.size());
            let msg = pattern(300, me as usize);
            let mut got = vec![0u8; 300];
            let next = w.process_at_rank((me + 1) % n);
            let prev = w.process_at_rank((me + n - 1) % n);
            mpi::scope(|s| {
                let r = prev.immediate_receive_into(s, &mut got[..]).unwrap();
                next.send(&msg[..]).unwrap();
                r.wait().unwrap();
            });
            assert!(got == pattern(300, ((me + n - 1) % n) as usize));
            // Echo back: reading the reply needs this rank's own dial finished.
            let echo = got.clone();
            mpi::scope(|s| {
                let r = next.immediate_receive_into(s, &mut got[..]).unwrap();
                prev.send(&echo[..]).unwrap();
                r.wait().unwrap();
            });
            assert!(got == msg);
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    for (r, s) in out.iter().enumerate() {
        assert_eq!(get(s, "connections"), 2, "rank {r}: {s:?}");
        assert_eq!(
            (get(s, "dials"), get(s, "accepts")),
            (1, 1),
            "rank {r}: {s:?}"
        );
    }
}
