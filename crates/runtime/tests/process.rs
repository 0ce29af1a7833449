//! One rank per process, with threads playing the processes: each thread builds its own
//! engine and node and talks to the others only through the fabric between processes
//! (shared memory, or TCP on 127.0.0.1 when forced), exchanging endpoints through an
//! in-process PMI. Point-to-point from 0 B to 4 MiB and allreduce on Cassini and Gemini,
//! a dead peer, and nothing left in /dev/shm.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::{Source, SystemOperation, Universe};
use platform::remote::{LinkKind, PortId, RemoteCounters};
use runtime::process::{self, ProcessConfig, ProcessGuard};
use runtime::{InProcessPmi, Nic, Shared};

const SIZES: [usize; 7] = [0, 1, 8, 4096, 65536, 1 << 20, 4 << 20];

fn config(nic: Nic, tcp: bool) -> ProcessConfig {
    let mut cfg = ProcessConfig::new(nic);
    cfg.node.memory = 96 << 20;
    cfg.node.force_tcp = tcp;
    cfg.node.tcp_bind = "127.0.0.1".parse().unwrap();
    cfg.node.timeout = Duration::from_secs(30);
    cfg
}

/// Run `f` on `n` threads-as-processes; what each returned and its fabric counters.
fn job<R: Send>(
    n: u32,
    cfg: &ProcessConfig,
    f: impl Fn(&Universe, &ProcessGuard) -> R + Sync,
) -> Vec<(R, RemoteCounters)> {
    let shared = Shared::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let (shared, f) = (Arc::clone(&shared), &f);
                s.spawn(move || {
                    let pmi = InProcessPmi::new(shared, rank, n, (1, 0));
                    let (u, g) = process::init(Box::new(pmi), cfg).expect("init");
                    let r = f(&u, &g);
                    let c = g.finish(u).expect("finalize");
                    (r, c)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(131).wrapping_add(u32::from(seed)) as u8)
        .collect()
}

/// Names in /dev/shm that look like ours.
fn shm_names() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("nicemu"))
                .collect()
        })
        .unwrap_or_default()
}

/// Ping-pong of every size between ranks 0 and 1, an allreduce over all ranks; checks the
/// data, the link kind, and that the traffic shows in the fabric and NIC counters.
fn traffic(nic: Nic, n: u32, tcp: bool) {
    let before = shm_names();
    let cfg = config(nic, tcp);
    let out = job(n, &cfg, |u, g| {
        let w = u.world();
        let rank = w.rank();
        let want = if tcp { LinkKind::Tcp } else { LinkKind::Shm };
        for p in (0..n).filter(|&p| p != rank as u32) {
            assert_eq!(g.fabric().link_kind(PortId(p)), Some(want));
        }
        for (i, &len) in SIZES.iter().enumerate() {
            let data = pattern(len, i as u8);
            match rank {
                0 => {
                    w.process_at_rank(1).send(&data[..]).unwrap();
                    let (back, st) = w.process_at_rank(1).receive_vec::<u8>().unwrap();
                    assert_eq!(st.source_rank(), 1);
                    assert!(back == data, "{len} bytes came back damaged");
                }
                1 => {
                    let (got, _) = w.process_at_rank(0).receive_vec::<u8>().unwrap();
                    assert!(got == data, "{len} bytes arrived damaged");
                    w.process_at_rank(0).send(&got[..]).unwrap();
                }
                _ => {}
            }
        }
        let mine: Vec<u64> = (0..4096).map(|k| k * (rank as u64 + 1)).collect();
        let mut sum = vec![0u64; 4096];
        w.all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum())
            .unwrap();
        let ranks = u64::from(n) * (u64::from(n) + 1) / 2;
        for (k, &s) in sum.iter().enumerate() {
            assert_eq!(s, k as u64 * ranks);
        }
        w.barrier().unwrap();
        // The fabric first: every packet it sent, the NIC had sent before.
        let fabric = g.fabric_counters();
        (g.nic_counters(), fabric)
    });
    for (rank, ((nic_counters, now), fabric)) in out.iter().enumerate() {
        assert!(
            fabric.sent > 0 && fabric.received > 0,
            "rank {rank}: {fabric:?}"
        );
        assert_eq!(fabric.network_timeouts, 0);
        assert_eq!(fabric.dead_peers, 0);
        assert_eq!(fabric.wire_crc_errors, 0);
        if rank < 2 {
            // Both directions carried the 4 MiB message (and more).
            assert!(fabric.bytes_sent > 4 << 20, "rank {rank}: {fabric:?}");
            assert!(fabric.bytes_received > 4 << 20, "rank {rank}: {fabric:?}");
        }
        let get = |name: &str| {
            nic_counters
                .iter()
                .find(|(k, _)| k == name)
                .map_or(0, |&(_, v)| v)
        };
        match nic {
            Nic::Cassini => {
                assert!(get("c_cq_cntrs.success_tx_cntr") > 0, "{nic_counters:?}");
                assert!(get("c_lpe_cntrs.put_cmds") > 0, "{nic_counters:?}");
            }
            Nic::Gemini => {
                // Every packet the fabric carried out of this process, the NIC sent.
                assert!(get("packets_tx") >= now.sent, "{nic_counters:?} {now:?}");
                assert!(get("packets_rx") > 0, "{nic_counters:?}");
                if rank < 2 {
                    assert!(get("bytes_tx") > 4 << 20, "{nic_counters:?}");
                    assert!(get("bytes_rx") > 4 << 20, "{nic_counters:?}");
                }
            }
        }
    }
    assert_eq!(shm_names(), before, "a segment was left in /dev/shm");
}

#[test]
fn cassini_ranks_in_separate_processes_over_shared_memory() {
    traffic(Nic::Cassini, 3, false);
}

#[test]
fn cassini_ranks_in_separate_processes_over_tcp() {
    traffic(Nic::Cassini, 2, true);
}

#[test]
fn gemini_ranks_in_separate_processes_over_shared_memory() {
    traffic(Nic::Gemini, 3, false);
}

#[test]
fn gemini_ranks_in_separate_processes_over_tcp() {
    traffic(Nic::Gemini, 2, true);
}

/// Rank 1 dies (its fabric stops as a killed process's would, and it never finalizes);
/// rank 0's receive from it fails with the reason instead of hanging, the packets it sent
/// toward it are counted, and its finalize fails rather than waiting in a fence.
fn dead_peer(tcp: bool) {
    let before = shm_names();
    let mut cfg = config(Nic::Cassini, tcp);
    cfg.node.timeout = Duration::from_millis(500);
    let shared = Shared::new();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Mutex::new(rx);
    std::thread::scope(|s| {
        let dead = {
            let (shared, cfg) = (Arc::clone(&shared), &cfg);
            s.spawn(move || {
                let pmi = InProcessPmi::new(shared, 1, 2, (1, 0));
                let (u, g) = process::init(Box::new(pmi), cfg).expect("init");
                u.world().barrier().unwrap();
                rx.lock().unwrap().recv().unwrap();
                g.fabric().abandon();
                // A killed process runs no destructors and says no goodbye.
                std::mem::forget(u);
                std::mem::forget(g);
            })
        };
        let pmi = InProcessPmi::new(Arc::clone(&shared), 0, 2, (1, 0));
        let (u, g) = process::init(Box::new(pmi), &cfg).expect("init");
        let w = u.world();
        w.barrier().unwrap();
        tx.send(()).unwrap();
        dead.join().unwrap();
        let t0 = Instant::now();
        // Eager and rendezvous sends toward the dead rank, then a receive from it.
        let _ = w.process_at_rank(1).send(&pattern(64, 1)[..]);
        let _ = w.process_at_rank(1).send(&pattern(1 << 20, 2)[..]);
        let e = w.process_at_rank(1).receive_vec::<u8>().unwrap_err();
        let took = t0.elapsed();
        let msg = e.to_string();
        // Either the fabric's verdict (through PMI) or the NIC's own (its retries toward
        // the dead port ran out) comes first; both name what happened.
        assert!(
            msg.contains("port 1 is unreachable") || msg.contains("Undeliverable"),
            "{msg}"
        );
        assert!(took < Duration::from_secs(60), "the error took {took:?}");
        let c = g.fabric_counters();
        assert_eq!(c.dead_peers, 1);
        assert!(c.network_timeouts >= 1, "{c:?}");
        let summary = g.network_summary();
        assert!(
            summary.starts_with(&format!(
                "Network Summary: {} network timeouts",
                c.network_timeouts
            )),
            "{summary}"
        );
        assert!(g.finish(u).is_err(), "finalize with a dead peer must fail");
    });
    assert_eq!(shm_names(), before, "a segment was left in /dev/shm");
}

#[test]
fn a_dead_shared_memory_peer_fails_operations_instead_of_hanging() {
    dead_peer(false);
}

#[test]
fn a_dead_tcp_peer_fails_operations_instead_of_hanging() {
    dead_peer(true);
}

#[test]
fn bad_nic_and_fabric_settings_are_clear_errors() {
    let env = mpi::Env::new().with("NICEMU_NIC", "myrinet");
    let e = process::nic_from_env(&env).unwrap_err().to_string();
    assert!(e.contains("NICEMU_NIC") && e.contains("myrinet"), "{e}");
    let env = mpi::Env::new().with("NICEMU_NIC", "gni");
    assert_eq!(process::nic_from_env(&env).unwrap(), Nic::Gemini);
    assert_eq!(
        process::nic_from_env(&mpi::Env::new()).unwrap(),
        Nic::Cassini
    );
    for (var, value) in [
        ("NICEMU_FABRIC", "carrier-pigeon"),
        ("NICEMU_FABRIC_TIMEOUT_MS", "0"),
        ("NICEMU_FABRIC_RING_KIB", "3"),
        ("NICEMU_FABRIC_IP", "not-an-ip"),
        ("NICEMU_HOST", "two words"),
        ("NICEMU_NODE_MEMORY_MIB", "8"),
        ("NICEMU_NODE_MEMORY_MIB", "lots"),
    ] {
        let e = ProcessConfig::from_env(&mpi::Env::new().with(var, value))
            .unwrap_err()
            .to_string();
        assert!(e.contains(var), "{e}");
    }
    let c = ProcessConfig::from_env(
        &mpi::Env::new()
            .with("NICEMU_FABRIC", "tcp")
            .with("NICEMU_FABRIC_TIMEOUT_MS", "250")
            .with("NICEMU_FABRIC_RING_KIB", "64")
            .with("NICEMU_NODE_MEMORY_MIB", "512"),
    )
    .unwrap();
    assert!(c.node.force_tcp);
    assert_eq!(c.node.memory, 512 << 20);
    assert_eq!(c.node.timeout, Duration::from_millis(250));
    assert_eq!(c.node.ring_bytes, 64 << 10);
}
