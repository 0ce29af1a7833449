//! Print the Gemini figures of docs/PERFORMANCE.md:
//! `cargo run --release -p emu-gemini --example perf`.

use emu_core::engine::EngineKind;
use emu_gemini::bench;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for kind in [EngineKind::Deterministic, EngineKind::Threaded] {
        println!("{}", bench::fma_put_rate(kind, 100_000)?);
        println!("{}", bench::fma_store_rate(kind, 1_000_000)?);
        println!("{}", bench::bte_bandwidth(kind, 256 << 20, true)?);
        println!("{}", bench::bte_bandwidth(kind, 256 << 20, false)?);
    }
    Ok(())
}
