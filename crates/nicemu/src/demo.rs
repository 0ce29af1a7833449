//! `nicemu demo`: the main job with built-in defaults. Runs the emulated clusters doing real
//! work and prints what happened, then the measurement tables.

use std::io::Write;

use clap::Args;

#[derive(Args)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(out, "== nicemu: emulation core")?;
    crate::bench::engine(1_000_000, out)?;
    Ok(())
}
