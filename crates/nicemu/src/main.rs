//! `nicemu`: the command-line front end of the emulated clusters.
#![forbid(unsafe_code)]

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "nicemu",
    about = "Register-level emulation of HPC NICs (Cassini, Gemini)"
)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
