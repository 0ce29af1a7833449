//! The PMI probe as a program of its own: `mpiexec -n 4 pmi-probe` or
//! `nicemu run -n 4 -- pmi-probe` (see `launch::probe`).

#![forbid(unsafe_code)]

use clap::Parser;

fn main() -> std::process::ExitCode {
    launch::probe::main(launch::probe::ProbeArgs::parse())
}
