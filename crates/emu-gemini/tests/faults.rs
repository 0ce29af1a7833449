//! Delivery modes under adaptive-routing reordering, packets lost or damaged on a link
//! retried by the link layer (invisible to software), and requests that never get an
//! answer (every retransmission lost or damaged) failing with REQUEST_TIMEOUT instead of
//! hanging.

mod common;

use common::*;
use emu_core::fabric::FaultConfig;
use emu_core::time::SimDuration;
use emu_gemini::cluster::{Cluster, ClusterConfig};
use emu_gemini::host::{Amo, Local, PostOpts, Remote, rdma_txd};
use emu_gemini::regs::counter;
use firmware_spec::gemini::amo::AmoCmd;
use firmware_spec::gemini::bte::{TxdFlags, TxdMode1};
use firmware_spec::gemini::cqe::HwStatus;
use firmware_spec::gemini::fma::SyncType;

fn reordering(seed: u64) -> Job {
    let mut cfg = ClusterConfig::deterministic([2, 1, 1], seed);
    cfg.faults = FaultConfig {
        reorder: 0.5,
        reorder_max_delay: SimDuration::from_us(3),
        ..FaultConfig::none()
    };
    job(Cluster::new(cfg).unwrap())
}

/// 150 uncached 8-byte PUTs of 1..=150 to one word; returns the final value.
fn last_writer_wins(seed: u64, in_order: bool) -> u64 {
    let j = reordering(seed);
    let n0 = j.nic(0).clone();
    let to = Remote {
        pe: 3,
        mdh: BUF_MDH,
        offset: j.nodes[3].buf.off(0),
    };
    for v in 1..=150u64 {
        let o = PostOpts {
            sync: SyncType::NO_EVENT,
            in_order,
            uncached: true,
            ..PostOpts::default()
        };
        n0.fma_put(j.nodes[0].fma, to, &v.to_le_bytes(), o).unwrap();
    }
    j.c.deterministic().unwrap().run_until_idle();
    assert!(j.c.engine.fabric_counters().reordered > 0);
    j.nic(3).read_u64(j.nodes[3].buf.addr).unwrap()
}

#[test]
fn in_order_delivery_survives_reordering_adaptive_does_not() {
    for seed in 0..4 {
        assert_eq!(last_writer_wins(seed, true), 150, "seed {seed}");
    }
    let adaptive: Vec<u64> = (0..4).map(|s| last_writer_wins(s, false)).collect();
    assert!(
        adaptive.iter().any(|&v| v != 150),
        "adaptive routing never reordered: {adaptive:?}"
    );
}

fn lossy(faults: FaultConfig) -> Job {
    let mut cfg = ClusterConfig::deterministic([1, 1, 1], 41);
    cfg.nic.request_timeout = SimDuration::from_us(500);
    let j = job(Cluster::new(cfg).unwrap());
    j.c.engine.set_faults(faults);
    j
}

#[test]
fn packets_lost_or_damaged_on_a_link_are_retried_by_the_link_and_arrive_once() {
    // A third of the packets is lost on a hop and a fifth damaged: the links send them
    // again, so every AMO is executed exactly once and every completion is clean.
    let mut j = lossy(FaultConfig {
        drop: 0.3,
        corrupt: 0.2,
        ..FaultConfig::none()
    });
    let n0 = j.nic(0).clone();
    let word = Remote {
        pe: 1,
        mdh: BUF_MDH,
        offset: j.nodes[1].buf.off(0),
    };
    let adds = 60u64;
    for i in 0..adds {
        let o = PostOpts {
            sync: SyncType::LOCAL_EVENT,
            ..PostOpts::default()
        };
        n0.fma_amo(
            j.nodes[0].fma,
            word,
            Amo::new(AmoCmd::Add, i + 1, 0),
            None,
            o,
        )
        .unwrap();
        let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
        assert_eq!(e.status(), Ok(HwStatus::Ok), "AMO {i}");
    }
    let data: Vec<u8> = (0..200u32).map(|k| (k * 7) as u8).collect();
    let to = Remote {
        pe: 1,
        mdh: BUF_MDH,
        offset: j.nodes[1].buf.off(64),
    };
    n0.fma_put(j.nodes[0].fma, to, &data, PostOpts::default())
        .unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::Ok)
    );
    j.c.deterministic().unwrap().run_until_idle();
    let n1 = j.nic(1).clone();
    assert_eq!(
        n1.read_u64(j.nodes[1].buf.addr).unwrap(),
        adds * (adds + 1) / 2,
        "every AMO executed exactly once"
    );
    let mut got = vec![0u8; data.len()];
    n1.read_mem(j.nodes[1].buf.addr + 64, &mut got).unwrap();
    assert_eq!(got, data);
    let f = j.c.engine.fabric_counters();
    assert!(f.link_recovered_drops > 0, "{f:?}");
    assert!(f.link_recovered_corruptions > 0, "{f:?}");
    assert!(f.link_retries >= f.link_recovered_drops + f.link_recovered_corruptions);
    assert_eq!(
        (f.dropped, f.corrupted),
        (0, 0),
        "nothing reached the NICs damaged"
    );
    assert_eq!(n0.counter(counter::TIMEOUTS).unwrap(), 0);
    assert_eq!(n1.counter(counter::CRC_DROPS).unwrap(), 0);
}

#[test]
fn dropped_requests_time_out() {
    let mut j = lossy(FaultConfig {
        drop: 1.0,
        ..FaultConfig::none()
    });
    let n0 = j.nic(0).clone();
    let to = Remote {
        pe: 1,
        mdh: BUF_MDH,
        offset: 0,
    };
    let t0 = j.c.now();
    n0.fma_put(j.nodes[0].fma, to, &[1; 16], PostOpts::default())
        .unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(e.status(), Ok(HwStatus::RequestTimeout));
    assert!(e.status().unwrap().recoverable());
    assert!(j.c.now().since(t0) >= SimDuration::from_us(500));
    assert_eq!(n0.counter(counter::TIMEOUTS).unwrap(), 1);

    // A BTE transfer fails the same way and reports TIMEOUT_ERR in its TXD copy.
    let ring = n0.alloc(64 * 8).unwrap();
    let mut ch = n0.bte_enable(0, 0, 8, ring, false).unwrap();
    let t = rdma_txd(
        TxdMode1::PUT,
        PTAG,
        Local {
            mdh: BUF_MDH,
            offset: 0,
        },
        to,
        64 * 1024,
        LOCAL_CQ,
        TxdMode1::CQ_GLOBAL,
        7,
        7,
    );
    n0.bte_post(&mut ch, &t).unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::RequestTimeout), 7));
    let mut img = [0u8; 48];
    n0.read_mem(ring, &mut img).unwrap();
    let copy = firmware_spec::gemini::bte::TxDescriptor::decode(&img).unwrap();
    assert_ne!(copy.flags & u64::from(TxdFlags::TIMEOUT_ERR.bits()), 0);
    assert_eq!(copy.status(), Ok(HwStatus::RequestTimeout));

    // The network heals: the same NIC works again.
    j.c.engine.set_faults(FaultConfig::none());
    n0.fma_put(j.nodes[0].fma, to, &[2; 16], PostOpts::default())
        .unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::Ok)
    );
    assert_eq!(j.nic(1).read_mem_u8(j.nodes[1].buf.addr), 2);
}

#[test]
fn corrupted_packets_are_dropped_and_time_out() {
    let mut j = lossy(FaultConfig {
        corrupt: 1.0,
        ..FaultConfig::none()
    });
    let n0 = j.nic(0).clone();
    let to = Remote {
        pe: 1,
        mdh: BUF_MDH,
        offset: 0,
    };
    n0.fma_put(j.nodes[0].fma, to, &[1; 8], PostOpts::default())
        .unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(e.status(), Ok(HwStatus::RequestTimeout));
    assert_eq!(j.nic(1).counter(counter::CRC_DROPS).unwrap(), 1);
    assert_eq!(j.nic(1).read_mem_u8(j.nodes[1].buf.addr), 0);
}

/// A busy run with reordering, AMOs and a BTE transfer: its trace digest.
fn busy_run(seed: u64) -> (u64, u64) {
    let mut j = reordering(seed);
    let n0 = j.nic(0).clone();
    let mut ch = n0.bte_enable(0, 0, 8, 0, false).unwrap();
    let t = rdma_txd(
        TxdMode1::PUT,
        PTAG,
        Local {
            mdh: BUF_MDH,
            offset: 0,
        },
        Remote {
            pe: 2,
            mdh: BUF_MDH,
            offset: 0,
        },
        512 * 1024,
        LOCAL_CQ,
        TxdMode1::CQ_GLOBAL,
        0,
        0,
    );
    n0.bte_post(&mut ch, &t).unwrap();
    for i in 1..4 {
        let to = Remote {
            pe: 3,
            mdh: BUF_MDH,
            offset: 8 * i,
        };
        j.nic(i as usize)
            .fma_put(
                j.nodes[i as usize].fma,
                to,
                &[i as u8; 8],
                PostOpts::default(),
            )
            .unwrap();
    }
    for i in 0..4 {
        let nic = j.nic(i).clone();
        nic.cq_wait(&mut j.nodes[i].local_cq).unwrap();
    }
    let d = j.c.deterministic().unwrap();
    d.run_until_idle();
    (d.trace_digest(), d.now().as_ps())
}

#[test]
fn same_seed_same_run() {
    assert_eq!(busy_run(77), busy_run(77));
    assert_ne!(busy_run(77).0, busy_run(78).0);
}
