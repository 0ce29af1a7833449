//! `nicemu demo [cassini|gemini|all]`: the main job with built-in defaults. Runs emulated
//! clusters doing real work and prints what happened: a two-node Cassini exchange (commands
//! issued, events received), a Gemini FMA/BTE/AMO exchange on a torus, then the measurement
//! tables: the HPE-style latency and bandwidth tools over an emulated pair of each NIC (threaded
//! engine; 8 B latency, 4 MiB bandwidth) and the engine's event rates.

use std::io::Write;

use clap::{Args, ValueEnum};

#[derive(Args)]
pub struct DemoArgs {
    /// Which NIC to demonstrate (default: both, then the measurement tables).
    #[arg(value_enum, default_value_t = Which::All)]
    which: Which,
    /// Skip the measurement tables (only run the exchanges).
    #[arg(long)]
    no_bench: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    /// Two emulated Cassini NICs on a switch.
    Cassini,
    /// Emulated Gemini NICs on a 3D torus.
    Gemini,
    /// Both, then the engine table.
    All,
}

pub fn run(args: DemoArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if matches!(args.which, Which::Cassini | Which::All) {
        writeln!(
            out,
            "== Cassini (Slingshot-11): two emulated NICs, deterministic engine"
        )?;
        emu_cassini::demo::run(out)?;
    }
    if matches!(args.which, Which::Gemini | Which::All) {
        if args.which == Which::All {
            writeln!(out)?;
        }
        writeln!(out, "== Gemini (XE6/XK7): emulated NICs on a 3D torus")?;
        emu_gemini::demo::run(out)?;
    }
    if args.which == Which::All && !args.no_bench {
        tools(out)?;
        writeln!(out)?;
        writeln!(
            out,
            "== MPI on emulated Geminis (threaded engine, ranks as threads): OSU benchmarks"
        )?;
        crate::osu::demo(out)?;
        writeln!(out)?;
        writeln!(out, "== Emulation core")?;
        crate::bench::engine(1_000_000, out)?;
    }
    Ok(())
}

/// 8 B latency and 4 MiB bandwidth over each emulated pair, with the tools' own tables.
fn tools(out: &mut dyn Write) -> anyhow::Result<()> {
    const EIGHT: u64 = 8;
    const FOUR_MIB: u64 = 4 << 20;
    writeln!(out)?;
    writeln!(
        out,
        "== Cassini pair (threaded engine): cxi_send_lat, cxi_write_bw"
    )?;
    let lat = tools::cxi::LatOptions {
        iters: 2000,
        min_size: EIGHT,
        max_size: EIGHT,
        ..Default::default()
    };
    tools::cxi::send_lat(&lat, out)?;
    let bw = tools::cxi::BwOptions {
        iters: 4,
        min_size: FOUR_MIB,
        max_size: FOUR_MIB,
        list_size: 4,
        ..Default::default()
    };
    tools::cxi::write_bw(&bw, out)?;
    writeln!(out)?;
    writeln!(
        out,
        "== Gemini pair (threaded engine): SMSG send latency, BTE write bandwidth"
    )?;
    let lat = tools::gni::LatOptions {
        iters: 2000,
        min_size: EIGHT,
        max_size: EIGHT,
        ..Default::default()
    };
    tools::gni::send_lat(&lat, out)?;
    let bw = tools::gni::BwOptions {
        iters: 4,
        min_size: FOUR_MIB,
        max_size: FOUR_MIB,
        list_size: 4,
        ..Default::default()
    };
    tools::gni::write_bw(&bw, out)?;
    Ok(())
}
