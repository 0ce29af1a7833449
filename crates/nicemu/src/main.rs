//! `nicemu`: the command-line front end of the emulated clusters.
//!
//! One subcommand group per module: `spec` ([`spec`]) prints the hardware contract from
//! `firmware-spec`; `demo` ([`demo`]) runs the main job; `bench` ([`bench`]) prints
//! measurement tables.
#![forbid(unsafe_code)]

mod bench;
mod demo;
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
    /// Run the emulated clusters with built-in defaults and print results (the main job).
    Demo(demo::DemoArgs),
    /// Measure the emulation and print OSU-style tables.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = std::io::stdout().lock();
    let res = match cli.command {
        Command::Spec(args) => spec::run(args, &mut out),
        Command::Demo(args) => demo::run(args, &mut out),
        Command::Bench(args) => bench::run(args, &mut out),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
