//! `nicemu bench`: measurements of the emulation core, printed as tables.

use std::io::Write;
use std::time::Duration;

use clap::{Args, Subcommand};

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: Option<BenchWhat>,
}

#[derive(Subcommand, Clone, Copy)]
enum BenchWhat {
    /// Event rate of the deterministic and threaded engines.
    Engine {
        /// Events (or round trips) per measurement.
        #[arg(long, default_value_t = 2_000_000)]
        events: u64,
    },
}

pub fn run(args: BenchArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    match args.what.unwrap_or(BenchWhat::Engine { events: 2_000_000 }) {
        BenchWhat::Engine { events } => engine(events, out),
    }
}

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

/// The engine table: events/s of the deterministic engine (packets through the fabric, and
/// timers only) and the threaded engine's inline ping-pong round trip.
pub fn engine(events: u64, out: &mut dyn Write) -> anyhow::Result<()> {
    use emu_core::engine::bench;
    writeln!(out, "# nicemu engine benchmark")?;
    writeln!(out, "{:<40} {:>12} {:>16}", "# workload", "events", "rate")?;
    let (n, d) = bench::deterministic_events(events)?;
    writeln!(
        out,
        "{:<40} {:>12} {:>12.2} M/s",
        "deterministic: packets via fabric",
        n,
        rate(n, d) / 1e6
    )?;
    let (n, d) = bench::deterministic_timers(events)?;
    writeln!(
        out,
        "{:<40} {:>12} {:>12.2} M/s",
        "deterministic: timers only",
        n,
        rate(n, d) / 1e6
    )?;
    let rounds = (events / 20).max(1000);
    let (n, d) = bench::threaded_pingpong(rounds)?;
    writeln!(
        out,
        "{:<40} {:>12} {:>12.3} us/rtt",
        "threaded: doorbell ping-pong",
        n,
        d.as_secs_f64() * 1e6 / n.max(1) as f64
    )?;
    Ok(())
}
