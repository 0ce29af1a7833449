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
    /// What a device access costs: node RAM beside the process's own registered memory
    /// (`NICEMU_PROCMEM_ACCESS=syscall` for the system-call path), and pinning.
    Memory {
        /// Bytes moved per measurement.
        #[arg(long, default_value_t = 256 << 20)]
        bytes: usize,
    },
}

pub fn run(args: BenchArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    match args.what.unwrap_or(BenchWhat::Engine { events: 2_000_000 }) {
        BenchWhat::Engine { events } => engine(events, out),
        BenchWhat::Memory { bytes } => memory(bytes, out),
    }
}

/// The memory table: ns per device write and read by size, node RAM and process memory;
/// then the cost of a pin.
pub fn memory(bytes: usize, out: &mut dyn Write) -> anyhow::Result<()> {
    use emu_core::procmem::{self, bench};
    let sizes = [8, 64, 2048, 4096, 65536, 4 << 20];
    let rows = bench::access_costs(&sizes, bytes).map_err(anyhow::Error::msg)?;
    writeln!(
        out,
        "# nicemu memory benchmark (process memory: {:?} accesses, monitor {:?})",
        procmem::access_mode(),
        procmem::monitor()
    )?;
    writeln!(
        out,
        "{:>10} {:>14} {:>14} {:>14} {:>14}",
        "# bytes", "RAM write ns", "RAM read ns", "proc write ns", "proc read ns"
    )?;
    let ns = |d: Duration| d.as_secs_f64() * 1e9;
    for r in rows {
        writeln!(
            out,
            "{:>10} {:>14.1} {:>14.1} {:>14.1} {:>14.1}",
            r.bytes,
            ns(r.ram_write),
            ns(r.ram_read),
            ns(r.process_write),
            ns(r.process_read)
        )?;
    }
    for len in [4096usize, 64 << 10, 4 << 20] {
        let d = bench::pin_cost(len, 200).map_err(anyhow::Error::msg)?;
        writeln!(
            out,
            "pin + unpin of {len} bytes: {:.1} us",
            d.as_secs_f64() * 1e6
        )?;
    }
    Ok(())
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
