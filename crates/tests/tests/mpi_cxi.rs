//! MPI over the cxi transport on emulated Cassini nodes: the semantics suite in hardware,
//! software and hybrid matching modes.

use mpi::Universe;
use runtime::{Job, Nic};

fn suite(mode: &str, sizes: &[u32]) {
    for &ranks in sizes {
        Job::new(Nic::Cassini, ranks)
            .env("FI_CXI_RX_MATCH_MODE", mode)
            .run(|u: Universe| tests::mpi_semantics::run(&u.world()))
            .unwrap_or_else(|e| panic!("{mode}, {ranks} ranks: {e}"));
    }
}

#[test]
fn the_semantics_suite_passes_with_hardware_matching() {
    suite("hardware", &[1, 2, 3, 5, 8]);
}

#[test]
fn the_semantics_suite_passes_with_software_matching() {
    suite("software", &[1, 2, 3, 5, 8]);
}

#[test]
fn the_semantics_suite_passes_with_hybrid_matching() {
    suite("hybrid", &[1, 2, 3, 5, 8]);
}

/// The suite in hybrid mode with one small overflow buffer: collectives flood it, the
/// receive PtlTEs go into flow control and the endpoints switch to software matching
/// while the suite runs. (A transport step that waits gives up after 20 s, so that a
/// broken recovery fails the test soon instead of hanging it.)
#[test]
fn the_semantics_suite_passes_in_hybrid_mode_through_flow_control() {
    let mut episodes = 0;
    for ranks in [5u32, 8] {
        let stats = Job::new(Nic::Cassini, ranks)
            .env("FI_CXI_RX_MATCH_MODE", "hybrid")
            .env("FI_CXI_OFLOW_BUF_COUNT", "1")
            .env("FI_CXI_OFLOW_BUF_SIZE", "36K")
            .env("NICEMU_CXI_TIMEOUT", "20")
            .run(|u: Universe| {
                tests::mpi_semantics::run(&u.world());
                u.with_transport(|t| t.stats())
            })
            .unwrap_or_else(|e| panic!("hybrid, {ranks} ranks: {e}"));
        episodes += stats
            .iter()
            .map(|s| s.get("flow_control").copied().unwrap_or(0))
            .sum::<u64>();
        eprintln!("{ranks} ranks: {stats:?}");
    }
    assert!(episodes > 0, "no rank went through flow control");
}

/// `MPICH_OFI_DEFAULT_TCLASS` picks the traffic class of every packet the transport sends:
/// two ranks on two emulated nodes exchange messages of every protocol, and the sending
/// NIC's `pkts_sent_by_tc` counters (read through the privileged CSR mapping) moved for that
/// class only.
#[test]
fn the_default_traffic_class_is_the_class_of_every_packet() {
    use std::sync::Arc;

    use firmware_spec::cassini::csr;
    use platform::{Cluster, EngineKind};
    use runtime::{InProcessPmi, Shared};
    use transport::cxi::CxiTransport;
    use transport::env::Env;
    use transport::{Completion, MatchBits, MatchSpec, SendMode, Transport};
    use userlib::cxi::{OpenOptions, open_device_with};

    let by_tc = |devs: &[Arc<driver::cassini::CxiDevice>]| -> Vec<u64> {
        let dev = open_device_with(
            devs,
            0,
            OpenOptions {
                admin: true,
                ..OpenOptions::default()
            },
        )
        .expect("admin open");
        let csrs = dev.map_csr().expect("CSR mapping");
        let view = csr::lookup("c_hni_cntrs").expect("c_hni_cntrs");
        let field = view.field("pkts_sent_by_tc").expect("pkts_sent_by_tc");
        (0..4)
            .map(|tc| {
                csrs.read_u64(view.offset + u64::from(field.bit / 8) + 8 * tc)
                    .expect("counter")
            })
            .collect()
    };
    for (name, tc) in [
        ("TC_DEDICATED_ACCESS", 0usize),
        ("TC_LOW_LATENCY", 1),
        ("TC_BULK_DATA", 2),
        ("TC_BEST_EFFORT", 3),
    ] {
        let cluster = Cluster::builder()
            .nics(2)
            .engine(EngineKind::Threaded)
            .build()
            .expect("cluster");
        let env = Env::new().with("MPICH_OFI_DEFAULT_TCLASS", name);
        let shared = Shared::new();
        let bits = MatchBits::of(1, 5);
        std::thread::scope(|s| {
            for rank in 0..2u32 {
                let (cluster, env, shared) = (&cluster, &env, &shared);
                s.spawn(move || {
                    let devs = cluster.node(rank as usize).expect("node").cxi_devices();
                    let pmi = InProcessPmi::new(Arc::clone(shared), rank, 2, (1, 0));
                    let mut t = CxiTransport::new(&devs, Box::new(pmi), env).expect("init");
                    let wait = |t: &mut CxiTransport, op| loop {
                        if let Some(c) = t.test(op).expect("test") {
                            break c;
                        }
                    };
                    for len in [8usize, 4000, 40_000] {
                        if rank == 0 {
                            let op = t
                                .send(1, bits, &vec![7; len], SendMode::Standard)
                                .expect("send");
                            assert_eq!(wait(&mut t, op), Completion::Sent);
                        } else {
                            let spec = MatchSpec {
                                source: Some(0),
                                bits,
                                ignore: 0,
                            };
                            let op = t.recv(spec, len).expect("recv");
                            assert!(matches!(wait(&mut t, op), Completion::Received { .. }));
                        }
                    }
                    t.finalize().expect("finalize");
                });
            }
        });
        for node in 0..2 {
            let counts = by_tc(&cluster.node(node).expect("node").cxi_devices());
            for (class, &n) in counts.iter().enumerate() {
                assert_eq!(
                    n > 0,
                    class == tc,
                    "{name}: node {node} sent {counts:?} by class"
                );
            }
        }
    }
}

/// Hybrid mode, still matching in hardware: a receive whose priority LE finds no list entry
/// (NO_SPACE; the receiving NIC's LE pool is cut down to a few entries above what init
/// took) makes the endpoint disable its PtlTE itself and switch to software matching; every
/// receive, the failed ones included, and every message sent meanwhile arrive once and in
/// order.
#[test]
fn a_failed_append_switches_a_hybrid_endpoint_to_software_matching() {
    use std::sync::{Arc, Barrier};

    use firmware_spec::cassini::csr::{self, fields as f};
    use platform::{Cluster, EngineKind};
    use runtime::{InProcessPmi, Shared};
    use transport::cxi::CxiTransport;
    use transport::env::Env;
    use transport::{Completion, MatchBits, MatchSpec, SendMode, Transport};
    use userlib::cxi::{OpenOptions, open_device_with};

    const POSTED: u32 = 40;
    const BURST: u32 = 300;
    let cluster = Cluster::builder()
        .nics(2)
        .engine(EngineKind::Threaded)
        .build()
        .expect("cluster");
    let env = Env::new().with("FI_CXI_RX_MATCH_MODE", "hybrid");
    let shared = Shared::new();
    let posted = Barrier::new(2);
    let bits = |tag| MatchBits::of(3, tag);
    let payload = |tag: u32| -> Vec<u8> { (0..24).map(|i| (tag * 3 + i) as u8).collect() };
    let stats = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u32)
            .map(|rank| {
                let (cluster, env, shared, posted) = (&cluster, &env, &shared, &posted);
                s.spawn(move || {
                    let devs = cluster.node(rank as usize).expect("node").cxi_devices();
                    let pmi = InProcessPmi::new(Arc::clone(shared), rank, 2, (1, 0));
                    let mut t = CxiTransport::new(&devs, Box::new(pmi), env).expect("init");
                    let wait = |t: &mut CxiTransport, op| loop {
                        if let Some(c) = t.test(op).expect("test") {
                            break c;
                        }
                    };
                    if rank == 1 {
                        // Leave pool 0 of every processing engine six entries.
                        let dev = open_device_with(
                            &devs,
                            0,
                            OpenOptions {
                                admin: true,
                                ..OpenOptions::default()
                            },
                        )
                        .expect("admin open");
                        let csrs = dev.map_csr().expect("CSR mapping");
                        for pe in 0..4u32 {
                            let i = pe * 16;
                            let used = csrs
                                .read_field("c_lpe_sts_pe_le_alloc", i, "num_allocated")
                                .expect("pool usage");
                            let c = csr::C_LPE_CFG_PE_LE_POOLS;
                            let mut e = csrs.read_entry(c, i).expect("pool entry");
                            f::c_lpe_cfg_pe_le_pools::MAX_ALLOC.set(&mut e, used + 6);
                            e.resize(e.len().next_multiple_of(8), 0);
                            csrs.write(c.entry_offset(i).expect("entry"), &e)
                                .expect("pool write");
                        }
                        let ops: Vec<_> = (0..POSTED)
                            .map(|tag| {
                                let spec = MatchSpec {
                                    source: Some(0),
                                    bits: bits(tag),
                                    ignore: 0,
                                };
                                t.recv(spec, 64).expect("recv")
                            })
                            .collect();
                        posted.wait();
                        for (tag, op) in (0..POSTED).zip(ops) {
                            match wait(&mut t, op) {
                                Completion::Received { envelope, data } => {
                                    assert_eq!(envelope.bits, bits(tag));
                                    assert_eq!(data, payload(tag), "receive {tag}");
                                }
                                other => panic!("receive {tag}: {other:?}"),
                            }
                        }
                        for seq in 0..BURST {
                            let spec = MatchSpec {
                                source: Some(0),
                                bits: bits(1000),
                                ignore: 0,
                            };
                            let op = t.recv(spec, 64).expect("recv");
                            match wait(&mut t, op) {
                                Completion::Received { data, .. } => {
                                    assert_eq!(data, seq.to_le_bytes(), "burst order");
                                }
                                other => panic!("burst {seq}: {other:?}"),
                            }
                        }
                    } else {
                        posted.wait();
                        let mut ops: Vec<_> = (0..POSTED)
                            .map(|tag| {
                                t.send(1, bits(tag), &payload(tag), SendMode::Standard)
                                    .expect("send")
                            })
                            .collect();
                        for seq in 0..BURST {
                            let op = t
                                .send(1, bits(1000), &seq.to_le_bytes(), SendMode::Standard)
                                .expect("send");
                            ops.push(op);
                        }
                        for op in ops {
                            assert_eq!(wait(&mut t, op), Completion::Sent);
                        }
                    }
                    t.finalize().expect("finalize");
                    (t.software_matching(), t.stats())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank"))
            .collect::<Vec<_>>()
    });
    let (software, st) = &stats[1];
    eprintln!("receiver: {st:?}");
    assert!(*software, "the receiver switched to software matching");
    assert!(st["append_failed"] >= 1, "{st:?}");
    assert!(st["reposted"] >= 1, "{st:?}");
    assert_eq!(st["fc_recovered"], st["flow_control"], "{st:?}");
}

/// Two ranks on two emulated Cassini nodes, each running `f(rank, transport)` in a thread of
/// its own; their results in rank order.
fn two_ranks<R: Send>(
    env: &transport::env::Env,
    f: impl Fn(u32, &mut transport::cxi::CxiTransport) -> R + Sync,
) -> Vec<R> {
    use std::sync::Arc;

    use platform::{Cluster, EngineKind};
    use runtime::{InProcessPmi, Shared};
    use transport::Transport;
    use transport::cxi::CxiTransport;

    let cluster = Cluster::builder()
        .nics(2)
        .engine(EngineKind::Threaded)
        .build()
        .expect("cluster");
    let shared = Shared::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u32)
            .map(|rank| {
                let (cluster, env, shared, f) = (&cluster, env, &shared, &f);
                s.spawn(move || {
                    let devs = cluster.node(rank as usize).expect("node").cxi_devices();
                    let pmi = InProcessPmi::new(Arc::clone(shared), rank, 2, (1, 0));
                    let mut t = CxiTransport::new(&devs, Box::new(pmi), env).expect("init");
                    let r = f(rank, &mut t);
                    t.finalize().expect("finalize");
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank"))
            .collect()
    })
}

/// Batched EQ acknowledgements never fill the EQ: the receiver handles a warm-up that leaves
/// it one event short of an acknowledgement, then stays away from the NIC while a burst
/// lands in its request buffers (software matching: one 64 B event per message) — as many
/// messages as the EQ of an endpoint that acknowledged every event could take without flow
/// control (64 pages, the status block, one free slot, 1,024 slots reserved for the rank's
/// own sends) — three times over. Every burst must land without the PtlTE entering flow
/// control (FC_EQ_FULL), which it would if the unacknowledged events took room from the
/// ring, or if the EQ were never acknowledged between bursts.
#[test]
fn batched_eq_acknowledgements_never_let_a_burst_fill_the_eq() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    use transport::cxi::CxiTransport;
    use transport::env::Env;
    use transport::{Completion, MatchBits, MatchSpec, SendMode, Transport};

    const WARM_UP: u32 = 31;
    const BURST: u32 = (64 * 4096 - 64) / 64 - 1 - 1024;
    const ROUNDS: u32 = 3;
    let env = Env::new()
        .with("FI_CXI_RX_MATCH_MODE", "software")
        .with("NICEMU_CXI_TIMEOUT", "20");
    // 2 r + 1: the receiver is idle for round r; 2 r + 2: round r's burst is in (or the
    // sender gave up on it).
    let phase = AtomicU32::new(0);
    let bits = MatchBits::of(4, 9);
    let spec = MatchSpec {
        source: Some(0),
        bits,
        ignore: 0,
    };
    let wait_until = |t: &mut CxiTransport, op, deadline: Instant| loop {
        if let Some(c) = t.test(op).expect("test") {
            return Some(c);
        }
        if Instant::now() > deadline {
            return None;
        }
    };
    let wait =
        |t: &mut CxiTransport, op| wait_until(t, op, Instant::now() + Duration::from_secs(20));
    let out = two_ranks(&env, |rank, t| {
        let mut seq = 0u32;
        let mut sent = 0;
        let mut received = 0;
        for _ in 0..WARM_UP {
            let op = if rank == 1 {
                t.recv(spec, 8).expect("recv")
            } else {
                t.send(1, bits, &seq.to_le_bytes(), SendMode::Standard)
                    .expect("send")
            };
            match wait(t, op) {
                Some(Completion::Received { data, .. }) => assert_eq!(data, seq.to_le_bytes()),
                Some(Completion::Sent) => {}
                other => panic!("warm-up {seq}: {other:?}"),
            }
            seq += 1;
        }
        for round in 0..ROUNDS {
            if rank == 0 {
                // The sender keeps making progress while it waits (it replays what a PtlTE
                // in flow control refused).
                let deadline = Instant::now() + Duration::from_secs(60);
                while phase.load(Ordering::Acquire) < 2 * round + 1 && Instant::now() < deadline {
                    t.progress().expect("progress");
                }
                let ops: Vec<_> = (0..BURST)
                    .map(|k| {
                        let n = seq + k;
                        t.send(1, bits, &n.to_le_bytes(), SendMode::Standard)
                            .expect("send")
                    })
                    .collect();
                // A burst refused by a PtlTE in flow control waits for the receiver: give
                // up after a deadline and let the receiver's statistics tell.
                let deadline = Instant::now() + Duration::from_secs(5);
                sent += ops
                    .into_iter()
                    .filter(|&op| wait_until(t, op, deadline) == Some(Completion::Sent))
                    .count();
                seq += BURST;
                phase.store(2 * round + 2, Ordering::Release);
            } else {
                // Away from the NIC until the burst is in.
                phase.store(2 * round + 1, Ordering::Release);
                while phase.load(Ordering::Acquire) < 2 * round + 2 {
                    std::thread::yield_now();
                }
                for _ in 0..BURST {
                    let op = t.recv(spec, 8).expect("recv");
                    match wait(t, op) {
                        Some(Completion::Received { data, .. }) => {
                            assert_eq!(data, seq.to_le_bytes(), "round {round}: order");
                            received += 1;
                        }
                        other => panic!("round {round}, message {seq}: {other:?}"),
                    }
                    seq += 1;
                }
            }
        }
        if rank == 0 {
            // Stay until the receiver has everything (replays need this rank).
            let deadline = Instant::now() + Duration::from_secs(60);
            while phase.load(Ordering::Acquire) < 2 * ROUNDS + 1 && Instant::now() < deadline {
                t.progress().expect("progress");
            }
        } else {
            phase.store(2 * ROUNDS + 1, Ordering::Release);
        }
        (sent, received, t.stats())
    });
    let (sent, _, _) = &out[0];
    let (_, received, st) = &out[1];
    eprintln!("receiver: {st:?}");
    assert_eq!(*received, BURST * ROUNDS, "every message arrived");
    assert_eq!(st["flow_control"], 0, "the EQ filled: {st:?}");
    assert_eq!(
        *sent,
        (BURST * ROUNDS) as usize,
        "every send completed in time"
    );
}

/// Sends are written to the transmit queue without their doorbell and rung by the next
/// progress, so every way of waiting must ring first: a rank sends a window of messages
/// (IDC and eager) and then only waits — for a receive with `test`, with `probe`, or in
/// plain `progress` calls until its peer says it got them — and its peer, which gets the
/// window only if it was rung, answers.
#[test]
fn every_wait_rings_the_sends_issued_before_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use transport::env::Env;
    use transport::{Completion, MatchBits, MatchSpec, SendMode, Transport};

    let data = |k: u32| -> Vec<u8> {
        let len = if k.is_multiple_of(2) { 8 } else { 3000 };
        (0..len).map(|i| (i as u32 + k) as u8).collect()
    };
    const WINDOW: u32 = 5;
    for how in ["test", "probe", "progress"] {
        let env = Env::new().with("NICEMU_CXI_TIMEOUT", "20");
        let got_window = AtomicBool::new(false);
        let out = two_ranks(&env, |rank, t| {
            let deadline = Instant::now() + Duration::from_secs(20);
            let spec = |tag| MatchSpec {
                source: Some(1 - rank),
                bits: MatchBits::of(5, tag),
                ignore: 0,
            };
            let wait = |t: &mut transport::cxi::CxiTransport, op| loop {
                if let Some(c) = t.test(op).expect("test") {
                    break Some(c);
                }
                if Instant::now() > deadline {
                    break None;
                }
            };
            if rank == 0 {
                let reply = (how == "test").then(|| t.recv(spec(99), 8).expect("recv"));
                for k in 0..WINDOW {
                    t.send(1, MatchBits::of(5, k), &data(k), SendMode::Standard)
                        .expect("send");
                }
                // Only the one way of waiting until the window is known to have arrived.
                loop {
                    let got = match (how, reply) {
                        ("test", Some(op)) => t.test(op).expect("test").is_some(),
                        ("probe", _) => t.probe(spec(99)).expect("probe").is_some(),
                        _ => {
                            t.progress().expect("progress");
                            got_window.load(Ordering::Acquire)
                        }
                    };
                    if got {
                        break;
                    }
                    if Instant::now() > deadline {
                        return false;
                    }
                }
                if how != "test" {
                    let op = t.recv(spec(99), 8).expect("recv");
                    assert!(wait(t, op).is_some(), "{how}: the reply");
                }
                true
            } else {
                for k in 0..WINDOW {
                    let op = t.recv(spec(k), 4096).expect("recv");
                    match wait(t, op) {
                        Some(Completion::Received { data: d, .. }) => assert_eq!(d, data(k)),
                        None => return false,
                        other => panic!("{how}: message {k}: {other:?}"),
                    }
                }
                got_window.store(true, Ordering::Release);
                let op = t
                    .send(0, MatchBits::of(5, 99), &[1], SendMode::Standard)
                    .expect("send");
                wait(t, op) == Some(Completion::Sent)
            }
        });
        assert_eq!(
            out,
            vec![true, true],
            "{how}: a wait did not ring the sends"
        );
    }
}
