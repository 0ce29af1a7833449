//! Many NICs fetch-add the same word at once; the sum is exact and every fetched value is
//! distinct (each AMO saw a different old value). Deterministic and threaded engines.

mod common;

use common::*;
use emu_core::engine::threaded::ThreadedConfig;
use emu_gemini::cluster::{Cluster, ClusterConfig};
use emu_gemini::host::{Amo, Local, PostOpts, Remote};
use firmware_spec::gemini::amo::AmoCmd;
use firmware_spec::gemini::cqe::HwStatus;

const PER_NIC: u64 = 25;
const INC: u64 = 3;

fn check_results(j: &Job, target: usize) {
    let nics = j.c.nics.len() as u64;
    let total = j.nic(target).read_u64(j.nodes[target].buf.addr).unwrap();
    assert_eq!(total, nics * PER_NIC * INC);
    let mut olds = Vec::new();
    for (i, n) in j.nodes.iter().enumerate() {
        for k in 0..PER_NIC {
            olds.push(j.nic(i).read_u64(n.res.addr + 8 * k).unwrap());
        }
    }
    olds.sort_unstable();
    let want: Vec<u64> = (0..nics * PER_NIC).map(|i| i * INC).collect();
    assert_eq!(olds, want);
}

fn fadd(j: &Job, i: usize, k: u64, target: usize) {
    let at = Remote {
        pe: target as u32,
        mdh: BUF_MDH,
        offset: j.nodes[target].buf.off(0),
    };
    let res = Local {
        mdh: RES_MDH,
        offset: j.nodes[i].res.off(8 * k),
    };
    let o = PostOpts {
        data: k,
        ..PostOpts::default()
    };
    j.nic(i)
        .fma_amo(
            j.nodes[i].fma,
            at,
            Amo::new(AmoCmd::Fadd, INC, 0),
            Some(res),
            o,
        )
        .unwrap();
}

#[test]
fn sixteen_nics_fetch_add_one_word_deterministic() {
    // 2x2x2 routers, 16 NICs; every NIC posts all its AMOs before waiting.
    let mut j = job(det([2, 2, 2], 31));
    let target = 5;
    for i in 0..j.c.nics.len() {
        for k in 0..PER_NIC {
            fadd(&j, i, k, target);
        }
    }
    for i in 0..j.c.nics.len() {
        let nic = j.nic(i).clone();
        for _ in 0..PER_NIC {
            let e = nic.cq_wait(&mut j.nodes[i].local_cq).unwrap();
            assert_eq!(e.status(), Ok(HwStatus::Ok));
        }
    }
    check_results(&j, target);
}

#[test]
fn eight_threads_fetch_add_one_word_threaded() {
    let cfg = ClusterConfig::threaded(
        [2, 2, 1],
        ThreadedConfig {
            workers: 1,
            seed: 7,
            ..ThreadedConfig::default()
        },
    );
    let j = job(Cluster::new(cfg).unwrap());
    let target = 2;
    std::thread::scope(|s| {
        for i in 0..j.c.nics.len() {
            let j = &j;
            s.spawn(move || {
                let mut cq = j.nodes[i].local_cq.clone();
                for k in 0..PER_NIC {
                    fadd(j, i, k, target);
                    let e = j.nic(i).cq_wait(&mut cq).unwrap();
                    assert_eq!(e.status(), Ok(HwStatus::Ok));
                }
            });
        }
    });
    check_results(&j, target);
}
