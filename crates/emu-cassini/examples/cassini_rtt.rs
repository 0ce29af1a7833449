//! Only the threaded 8 B round trip (for profiling):
//! `cargo run --release -p emu-cassini --example cassini_rtt`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let r = emu_cassini::perf::threaded_rtt_8b(200_000)?;
    println!("8 B round trip: {:.3} us", r.us_per_op());
    Ok(())
}
