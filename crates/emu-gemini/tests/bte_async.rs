//! A 64 MiB BTE PUT between two NICs on the threaded engine: the doorbell returns at once,
//! the engine thread moves the data while the test thread computes, and every byte arrives.

use emu_core::engine::threaded::ThreadedConfig;
use emu_gemini::cluster::{Cluster, ClusterConfig};
use emu_gemini::host::{Local, Remote, rdma_txd};
use firmware_spec::gemini::bte::TxdMode1;
use firmware_spec::gemini::cqe::HwStatus;
use std::time::{Duration, Instant};

const LEN: u64 = 64 << 20;
const PTAG: u8 = 20;

fn word(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 7)
}

#[test]
fn sixty_four_mib_put_progresses_while_the_cpu_works() {
    let mut cfg = ClusterConfig::threaded(
        [1, 1, 1],
        ThreadedConfig {
            workers: 1,
            seed: 3,
            ..ThreadedConfig::default()
        },
    );
    cfg.mem_per_node = LEN + (16 << 20);
    let c = Cluster::new(cfg).unwrap();
    let (a, b) = (c.nics[0].clone(), c.nics[1].clone());
    let mut cq = a.cq_create(1, 64).unwrap();
    let src = a.alloc(LEN).unwrap();
    let dst = b.alloc(LEN).unwrap();
    // Fill the source with a pattern, 1 MiB at a time.
    let mut chunk = vec![0u8; 1 << 20];
    for m in 0..(LEN >> 20) {
        for (k, w) in chunk.chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&word((m << 17) + k as u64).to_le_bytes());
        }
        a.write_mem(src + (m << 20), &chunk).unwrap();
    }
    let s = a.register(1, PTAG, src, LEN, false, None).unwrap();
    let d = b.register(1, PTAG, dst, LEN, true, None).unwrap();
    let mut ch = a.bte_enable(0, 0, 8, 0, false).unwrap();
    let txd = rdma_txd(
        TxdMode1::PUT,
        PTAG,
        Local {
            mdh: s.mdh,
            offset: s.off(0),
        },
        Remote {
            pe: 1,
            mdh: d.mdh,
            offset: d.off(0),
        },
        LEN,
        1,
        TxdMode1::CQ_GLOBAL,
        0,
        0xB7E,
    );
    let t0 = Instant::now();
    a.bte_post(&mut ch, &txd).unwrap();
    let doorbell = t0.elapsed();
    // The CPU does other work and only looks at the CQ now and then; it never drives the
    // engine.
    let mut work = 0u64;
    let mut rounds = 0u64;
    let e = loop {
        for i in 0..20_000u64 {
            work = work.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        rounds += 1;
        if let Some(e) = a.cq_poll(&mut cq).unwrap() {
            break e;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "transfer did not finish"
        );
    };
    let total = t0.elapsed();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::Ok), 0xB7E));
    assert!(
        rounds > 1,
        "the transfer was done before the CPU got to work"
    );
    // The doorbell returned long before the transfer was done: the CPU ran rounds of its own
    // work meanwhile (the paced transfer takes at least 64 MiB / 6.911 GB/s = 9.7 ms).
    assert!(doorbell < total, "doorbell {doorbell:?} of {total:?}");
    assert_ne!(work, 0);
    // The BTE ran in steps of at most `bte_max_burst` (1 MiB), each a timer on the engine
    // thread, never in the caller's thread.
    let counters = c.engine.counters();
    assert!(counters.timers >= LEN >> 20, "{counters:?}");
    assert_eq!(counters.inline_calls, 0, "{counters:?}");
    // Every byte right.
    let mut got = vec![0u8; 1 << 20];
    for m in 0..(LEN >> 20) {
        b.read_mem(dst + (m << 20), &mut got).unwrap();
        for (k, w) in got.chunks_exact(8).enumerate() {
            let v = u64::from_le_bytes(w.try_into().unwrap());
            assert_eq!(v, word((m << 17) + k as u64), "MiB {m} word {k}");
        }
    }
}
