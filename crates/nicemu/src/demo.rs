//! `nicemu demo [cassini|gemini|all]`: the main job with built-in defaults. Runs emulated
//! clusters doing real work and prints what happened: a two-node Cassini exchange (commands
//! issued, events received), a Gemini FMA/BTE/AMO exchange on a torus, then the measurement
//! tables.

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
        writeln!(out)?;
        writeln!(out, "== Emulation core")?;
        crate::bench::engine(1_000_000, out)?;
    }
    Ok(())
}
