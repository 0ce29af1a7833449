//! `nicemu`: the command-line front end of the emulated clusters.
//!
//! One subcommand group per module: `spec` ([`spec`]) prints the hardware contract from
//! `firmware-spec`.
#![forbid(unsafe_code)]

mod spec;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "nicemu",
    version,
    about = "Register-level emulation of HPC NICs (Cassini, Gemini)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the hardware contract: CSR map, BAR maps, address maps.
    Spec(spec::SpecArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = std::io::stdout().lock();
    let res = match cli.command {
        Command::Spec(args) => spec::run(args, &mut out),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
