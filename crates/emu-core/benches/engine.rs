//! Engine throughput and latency: `cargo bench -p emu-core --bench engine`.
//!
//! - `deterministic/ring_packets`: events/s of the deterministic engine, 16 devices passing
//!   packets round a ring through a single-switch fabric (every event: queue pop, device
//!   handler, fabric route + timing + CRC, queue push, digest).
//! - `deterministic/timers`: events/s with timer events only.
//! - `threaded/pingpong_inline`: time per MMIO doorbell that causes a packet A -> B and its
//!   echo B -> A, all delivered inline (the threaded engine's overhead per round trip).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use emu_core::engine::bench;
use std::time::Duration;

const EVENTS: u64 = 200_000;

fn deterministic(c: &mut Criterion) {
    let mut g = c.benchmark_group("deterministic");
    g.throughput(Throughput::Elements(EVENTS));
    g.bench_function("ring_packets", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (n, d) = bench::deterministic_events(EVENTS).expect("ring workload");
                assert_eq!(n, EVENTS);
                total += d;
            }
            total
        })
    });
    g.bench_function("timers", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (n, d) = bench::deterministic_timers(EVENTS).expect("timer workload");
                assert_eq!(n, EVENTS);
                total += d;
            }
            total
        })
    });
    g.finish();
}

fn threaded(c: &mut Criterion) {
    let mut g = c.benchmark_group("threaded");
    g.throughput(Throughput::Elements(1));
    g.bench_function("pingpong_inline", |b| {
        b.iter_custom(|iters| {
            let (n, d) = bench::threaded_pingpong(iters).expect("ping-pong workload");
            assert_eq!(n, iters);
            d
        })
    });
    g.finish();
}

criterion_group!(benches, deterministic, threaded);
criterion_main!(benches);
