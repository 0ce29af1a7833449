//! `nicemu demo`: the main job with built-in defaults. Runs emulated clusters doing real work
//! and prints what happened: a two-node Cassini exchange (commands issued, events received), a
//! Gemini FMA/BTE/AMO exchange on a torus, then the measurement tables.

use std::io::Write;

use clap::Args;

#[derive(Args)]
pub struct DemoArgs {
    /// Skip the measurement tables (only run the exchanges).
    #[arg(long)]
    no_bench: bool,
}

pub fn run(args: DemoArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "== Cassini (Slingshot-11): two emulated NICs, deterministic engine"
    )?;
    emu_cassini::demo::run(out)?;
    writeln!(out)?;
    writeln!(out, "== Gemini (XE6/XK7): emulated NICs on a 3D torus")?;
    emu_gemini::demo::run(out)?;
    if !args.no_bench {
        writeln!(out)?;
        writeln!(out, "== Emulation core")?;
        crate::bench::engine(1_000_000, out)?;
    }
    Ok(())
}
