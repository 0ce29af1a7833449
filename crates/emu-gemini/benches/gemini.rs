//! Criterion benches of the Gemini model: FMA put rate and BTE bandwidth.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use emu_core::engine::EngineKind;
use emu_gemini::bench;
use std::hint::black_box;

fn fma(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemini_fma");
    g.throughput(Throughput::Elements(1_000));
    g.sample_size(10);
    for kind in [EngineKind::Deterministic, EngineKind::Threaded] {
        g.bench_function(format!("put_rate_1000_{kind:?}"), |b| {
            b.iter(|| black_box(bench::fma_put_rate(kind, 1_000)))
        });
    }
    g.finish();
}

fn bte(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemini_bte");
    g.throughput(Throughput::Bytes(16 << 20));
    g.sample_size(10);
    for kind in [EngineKind::Deterministic, EngineKind::Threaded] {
        g.bench_function(format!("put_16MiB_unpaced_{kind:?}"), |b| {
            b.iter(|| black_box(bench::bte_bandwidth(kind, 16 << 20, false)))
        });
    }
    g.finish();
}

criterion_group!(benches, fma, bte);
criterion_main!(benches);
