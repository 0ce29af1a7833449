//! The OSU-format benchmarks run on the loopback reference transport and print well-formed
//! tables: the OSU header, one row per size, positive finite figures.

use std::sync::Arc;

use mpi::Universe;
use tests::mpi_loopback::{Fabric, Loopback};
use tools::osu::{Bench, Options, run};

fn table(bench: Bench, ranks: u32, o: &Options) -> String {
    let fabric = Fabric::new(ranks);
    let outs: Vec<Option<String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..ranks)
            .map(|rank| {
                let fabric = Arc::clone(&fabric);
                s.spawn(move || {
                    let u = Universe::new(Box::new(Loopback::new(fabric, rank)));
                    run(bench, &u.world(), o).expect("benchmark")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("rank")).collect()
    });
    assert!(outs[1..].iter().all(Option::is_none), "only rank 0 prints");
    outs[0].clone().expect("rank 0 prints the table")
}

#[test]
fn every_benchmark_prints_an_osu_table() {
    let o = Options {
        min_size: 1,
        max_size: 64,
        iterations: 5,
        iterations_large: 2,
        warmup: 1,
        window: 4,
    };
    for bench in Bench::ALL {
        let t = table(bench, 4, &o);
        let mut lines = t.lines();
        let first = lines.next().unwrap();
        assert!(
            first.starts_with("# OSU MPI") && first.ends_with("v7.4"),
            "{first}"
        );
        let rows: Vec<&str> = t.lines().filter(|l| !l.starts_with('#')).collect();
        let want = if bench == Bench::Barrier { 1 } else { 7 };
        assert_eq!(rows.len(), want, "{bench:?}:\n{t}");
        for r in rows {
            let nums: Vec<f64> = r
                .split_whitespace()
                .map(|x| x.parse().expect("a number"))
                .collect();
            assert!(nums.iter().all(|x| x.is_finite() && *x >= 0.0), "{r}");
            assert!(
                *nums.last().unwrap() > 0.0,
                "{bench:?}: a zero figure in {r}"
            );
        }
    }
}

#[test]
fn pairwise_tests_refuse_a_single_rank() {
    let o = Options::default();
    let fabric = Fabric::new(1);
    let u = Universe::new(Box::new(Loopback::new(fabric, 0)));
    assert!(run(Bench::Latency, &u.world(), &o).is_err());
}
