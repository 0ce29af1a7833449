//! `Cluster::snapshot` / `Cluster::restore`: a restored Gemini cluster does exactly what it
//! did after the snapshot, whatever ran in between.

mod common;

use common::*;
use emu_gemini::host::{PostOpts, Remote};

/// An FMA PUT of `data` from PE 0 to PE 3, run to the end; everything observable.
fn scenario(j: &mut Job, data: &[u8], at: u64) -> Vec<String> {
    let n0 = j.nic(0).clone();
    let f = j.nodes[0].fma;
    let to = Remote {
        pe: 3,
        mdh: BUF_MDH,
        offset: j.nodes[3].buf.off(at),
    };
    let opts = PostOpts {
        data: 0xAB,
        ..PostOpts::default()
    };
    n0.fma_put(f, to, data, opts).unwrap();
    let mut out = Vec::new();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    out.push(format!("{e:?}"));
    j.c.deterministic().unwrap().run_until_idle();
    let n3 = j.nic(3).clone();
    while let Some(e) = n3.cq_poll(&mut j.nodes[3].remote_cq).unwrap() {
        out.push(format!("{e:?}"));
    }
    let mut got = vec![0u8; 256];
    j.nic(3).read_mem(j.nodes[3].buf.addr, &mut got).unwrap();
    out.push(format!("{got:?}"));
    let det = j.c.deterministic().unwrap();
    out.push(format!("{} {:?}", det.trace_digest(), det.now()));
    out
}

#[test]
fn a_restored_cluster_repeats_the_run_after_the_snapshot() {
    let mut j = job(det([2, 1, 1], 3));
    j.c.deterministic().unwrap().run_until_idle();
    let snap = j.c.snapshot().unwrap();
    let cqs: Vec<_> = j
        .nodes
        .iter()
        .map(|n| (n.local_cq.clone(), n.remote_cq.clone()))
        .collect();
    let reset = |j: &mut Job| {
        j.c.restore(&snap).unwrap();
        for (n, (l, r)) in j.nodes.iter_mut().zip(&cqs) {
            n.local_cq = l.clone();
            n.remote_cq = r.clone();
        }
    };
    let first = scenario(&mut j, &[7u8; 100], 5);
    for (data, at) in [(&[1u8; 40][..], 0), (&[9u8; 200][..], 17)] {
        let other = scenario(&mut j, data, at);
        assert_ne!(other, first);
        reset(&mut j);
        assert_eq!(scenario(&mut j, &[7u8; 100], 5), first);
        reset(&mut j);
    }
}
