//! Prints the Cassini figures recorded in docs/PERFORMANCE.md:
//! `cargo run --release -p emu-cassini --example cassini_perf`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 200_000;
    let m = emu_cassini::perf::cq_eq_commands_per_sec(n)?;
    println!(
        "deterministic engine, one CQ -> one EQ, 8 B IDC put + ACK event: {} commands in {:.3} s = {:.0} commands/s ({:.2} us/command)",
        m.count,
        m.elapsed.as_secs_f64(),
        m.per_sec(),
        m.us_per_op()
    );
    let iters = 100_000;
    let r = emu_cassini::perf::threaded_rtt_8b(iters)?;
    println!(
        "threaded engine, 8 B ping-pong between two NICs: {} round trips in {:.3} s = {:.3} us per round trip",
        r.count,
        r.elapsed.as_secs_f64(),
        r.us_per_op()
    );
    let a = emu_cassini::perf::amo_rate(200_000)?;
    println!(
        "deterministic engine, fetching 8 B SUM (IDC AMO) + REPLY event, 64 in flight: {} AMOs in {:.3} s = {:.0} AMOs/s wall clock; {:.1} M AMOs/s engine time",
        a.count,
        a.wall.as_secs_f64(),
        a.per_sec(),
        a.modelled_per_sec() / 1e6
    );
    let r = emu_cassini::perf::rendezvous_bandwidth(64 << 20)?;
    println!(
        "deterministic engine, 64 MiB hardware rendezvous (2 KiB eager, target NIC pulls the rest): {:.3} s = {:.2} GB/s wall clock; {:.2} GB/s engine time",
        r.wall.as_secs_f64(),
        r.gb_per_sec(),
        r.modelled_gb_per_sec()
    );
    Ok(())
}
