//! `nicemu`: the command-line front end of the emulated clusters.
//!
//! One subcommand group per module: `spec` ([`spec`]) prints the hardware contract from
//! `firmware-spec`; `demo` ([`demo`]) runs the main job; `bench` ([`bench`]) prints
//! measurement tables; `stat`, `dump-csrs` and the `*-lat` / `*-bw` tools ([`cxi_tools`])
//! run the Cassini user tools over an emulated pair; the `gni-*` tools ([`gni_tools`]) the
//! Gemini ones; `osu` ([`osu`]) runs the OSU-format MPI benchmarks as an MPI job; `job`
//! ([`job`]) runs a large MPI job (ranks as coroutines on the deterministic engine);
//! `sim` ([`sim`]) runs MPI jobs over a faulty fabric, one seed or a campaign; `run`
//! starts a job of N processes with a PMI-1 server (`launch`, docs/launch.md); `trace`
//! ([`trace`]) writes every fabric packet of a short job to a pcapng file (docs/trace.md).
#![forbid(unsafe_code)]

mod args;
mod bench;
mod cxi_tools;
mod demo;
mod devices;
mod gni_tools;
mod install;
mod job;
mod mpi_check;
mod osu;
mod plot;
mod sim;
mod spec;
mod tool_args;
mod trace;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

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
    /// List emulated NICs (probed by the driver) and real Cassini/Gemini functions in sysfs.
    Devices(devices::DevicesArgs),
    /// Measure the emulation and print OSU-style tables.
    Bench(bench::BenchArgs),
    /// Cassini devices of an emulated pair, like cxi_stat.
    Stat(cxi_tools::StatArgs),
    /// CSRs of an emulated Cassini read through the user library, like cxi_dump_csrs.
    DumpCsrs(cxi_tools::DumpArgs),
    /// Send latency over an emulated Cassini pair, like cxi_send_lat.
    SendLat(cxi_tools::LatArgs),
    /// RDMA write latency, like cxi_write_lat.
    WriteLat(cxi_tools::LatArgs),
    /// RDMA read latency, like cxi_read_lat.
    ReadLat(cxi_tools::LatArgs),
    /// Atomic latency, like cxi_atomic_lat.
    AtomicLat(cxi_tools::AtomicLatArgs),
    /// Send bandwidth, like cxi_send_bw.
    SendBw(cxi_tools::BwArgs),
    /// RDMA write bandwidth, like cxi_write_bw.
    WriteBw(cxi_tools::BwArgs),
    /// RDMA read bandwidth, like cxi_read_bw.
    ReadBw(cxi_tools::BwArgs),
    /// SMSG send latency over an emulated Gemini pair.
    GniSendLat(gni_tools::LatArgs),
    /// Gemini RDMA write latency (FMA PUT, BTE above the threshold).
    GniWriteLat(gni_tools::LatArgs),
    /// Gemini RDMA read latency (FMA GET, BTE above the threshold).
    GniReadLat(gni_tools::LatArgs),
    /// Gemini AMO latency.
    GniAtomicLat(gni_tools::AtomicLatArgs),
    /// SMSG send bandwidth over an emulated Gemini pair.
    GniSendBw(gni_tools::BwArgs),
    /// Gemini RDMA write bandwidth.
    GniWriteBw(gni_tools::BwArgs),
    /// Gemini RDMA read bandwidth.
    GniReadBw(gni_tools::BwArgs),
    /// OSU-format MPI micro-benchmarks as an MPI job on emulated NICs.
    Osu(osu::OsuArgs),
    /// An MPI job of N ranks (allreduce, barrier, alltoall of 8 B, checked): wall time,
    /// virtual time, peak RSS and the replay digest.
    Job(job::JobArgs),
    /// An MPI job on the deterministic engine over a fabric with seeded faults (drop,
    /// reorder, corrupt, link flaps, ...), checked; the same seed replays it bit for bit.
    /// `--campaign K` runs K seeds and prints the replay command of every failure.
    Sim(sim::SimArgs),
    /// Run a short MPI job and write every fabric packet to a pcapng file (docs/trace.md).
    Trace(trace::TraceArgs),
    /// Start N processes of PROGRAM as one job, with a PMI-1 server (PMI_PORT, PMI_RANK,
    /// PMI_SIZE); end the job when a rank fails.
    Run(launch::cli::RunArgs),
    /// One rank of a multi-process MPI job that checks itself: messages of 0 B to 4 MiB around
    /// a ring and an allreduce, each rank on its own emulated NIC (`nicemu run -n 4 -- nicemu
    /// mpi-check`, or under mpiexec); prints each rank's NIC and fabric counters.
    MpiCheck(mpi_check::MpiCheckArgs),
    /// Check a PMI launch: put, fence, get every rank's values (`nicemu run -n 4 -- nicemu
    /// pmi-probe`, or under mpiexec).
    #[command(hide = true)]
    PmiProbe(launch::probe::ProbeArgs),
    /// Draw OSU-format tables (from `nicemu osu`, OSU programs, bench/compare.sh) as one SVG
    /// plot against message size.
    Plot(plot::PlotArgs),
    /// Install nicemu, nicemu-mpicc, libmpi_abi.so.1 with mpi.h, the libfabric provider,
    /// pkg-config files and an environment file under a prefix (copied from the cargo target
    /// directory; builds nothing).
    Install(install::InstallArgs),
}

/// `nicemu run`: the ranks' output goes to this process's stdout and stderr, line by line.
fn run_job(args: &launch::cli::RunArgs) -> ExitCode {
    let out: launch::job::Sink = Arc::new(Mutex::new(std::io::stdout()));
    let err: launch::job::Sink = Arc::new(Mutex::new(std::io::stderr()));
    match launch::cli::run(args, out, err) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nicemu run: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `RUST_LOG` (tracing's filter syntax, e.g. `emu_cassini=trace` or `emu_cassini::pct=debug`)
/// turns on the device models' events and, at `trace`, a span per hardware block entered
/// (printed as it opens), on stderr. Unset: nothing is installed and the spans cost a
/// disabled-callsite check.
fn init_logging() -> Result<(), String> {
    let Ok(spec) = std::env::var("RUST_LOG") else {
        return Ok(());
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&spec)
        .map_err(|e| format!("RUST_LOG={spec:?}: {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NEW)
        .try_init()
        .map_err(|e| format!("RUST_LOG: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_logging() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let mut out = std::io::stdout().lock();
    let res = match cli.command {
        Command::Spec(args) => spec::run(args, &mut out),
        Command::Demo(args) => demo::run(args, &mut out),
        Command::Devices(args) => devices::run(args, &mut out),
        Command::Bench(args) => bench::run(args, &mut out),
        Command::Stat(args) => cxi_tools::stat(args, &mut out),
        Command::DumpCsrs(args) => cxi_tools::dump_csrs(args, &mut out),
        Command::SendLat(args) => cxi_tools::lat(cxi_tools::Lat::Send, args, &mut out),
        Command::WriteLat(args) => cxi_tools::lat(cxi_tools::Lat::Write, args, &mut out),
        Command::ReadLat(args) => cxi_tools::lat(cxi_tools::Lat::Read, args, &mut out),
        Command::AtomicLat(args) => cxi_tools::atomic_lat(args, &mut out),
        Command::SendBw(args) => cxi_tools::bw(cxi_tools::Bw::Send, args, &mut out),
        Command::WriteBw(args) => cxi_tools::bw(cxi_tools::Bw::Write, args, &mut out),
        Command::ReadBw(args) => cxi_tools::bw(cxi_tools::Bw::Read, args, &mut out),
        Command::GniSendLat(args) => gni_tools::lat(gni_tools::Lat::Send, args, &mut out),
        Command::GniWriteLat(args) => gni_tools::lat(gni_tools::Lat::Write, args, &mut out),
        Command::GniReadLat(args) => gni_tools::lat(gni_tools::Lat::Read, args, &mut out),
        Command::GniAtomicLat(args) => gni_tools::atomic_lat(args, &mut out),
        Command::GniSendBw(args) => gni_tools::bw(gni_tools::Bw::Send, args, &mut out),
        Command::GniWriteBw(args) => gni_tools::bw(gni_tools::Bw::Write, args, &mut out),
        Command::GniReadBw(args) => gni_tools::bw(gni_tools::Bw::Read, args, &mut out),
        Command::Osu(args) => osu::run_args(args, &mut out),
        Command::Job(args) => job::run(args, &mut out),
        Command::Sim(args) => sim::run(args, &mut out),
        Command::Trace(args) => trace::run(args, &mut out),
        Command::Plot(args) => plot::run(args, &mut out),
        Command::Install(args) => install::run(args, &mut out),
        Command::Run(args) => {
            drop(out);
            return run_job(&args);
        }
        Command::MpiCheck(args) => {
            drop(out);
            mpi_check::run(&args)
        }
        Command::PmiProbe(args) => {
            drop(out);
            return launch::probe::main(args);
        }
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
