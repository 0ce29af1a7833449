//! `nicemu osu <benchmark>`: the OSU-format MPI micro-benchmarks (`tools::osu`) run by the
//! in-process runtime as an MPI job on emulated NICs. Knobs (`MPICH_GNI_*`, `FI_CXI_*`) come
//! from the environment, as for a real MPI job.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use platform::EngineKind;
use runtime::{Job, Nic};
use tools::osu::{Bench, Options, run};

use crate::args::{self, EngineArg, NicArg};
use crate::job::MAX_RANKS;

/// Which benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Which {
    /// osu_latency (2 ranks).
    Latency,
    /// osu_bw.
    Bw,
    /// osu_bibw.
    Bibw,
    /// osu_mbw_mr (nodes / 2 pairs).
    #[value(name = "mbw_mr", alias = "mbw-mr")]
    MbwMr,
    /// osu_bcast.
    Bcast,
    /// osu_allreduce.
    Allreduce,
    /// osu_alltoall.
    Alltoall,
    /// osu_barrier.
    Barrier,
    /// osu_put_latency.
    #[value(name = "put_latency", alias = "put-latency")]
    PutLatency,
    /// osu_get_bw.
    #[value(name = "get_bw", alias = "get-bw")]
    GetBw,
    /// Every benchmark in turn.
    All,
}

impl Which {
    fn benches(self) -> Vec<Bench> {
        match self {
            Which::Latency => vec![Bench::Latency],
            Which::Bw => vec![Bench::Bw],
            Which::Bibw => vec![Bench::Bibw],
            Which::MbwMr => vec![Bench::MbwMr],
            Which::Bcast => vec![Bench::Bcast],
            Which::Allreduce => vec![Bench::Allreduce],
            Which::Alltoall => vec![Bench::Alltoall],
            Which::Barrier => vec![Bench::Barrier],
            Which::PutLatency => vec![Bench::PutLatency],
            Which::GetBw => vec![Bench::GetBw],
            Which::All => Bench::ALL.to_vec(),
        }
    }
}

#[derive(Args)]
pub struct OsuArgs {
    /// The benchmark.
    #[arg(value_enum)]
    bench: Which,
    /// NIC family of the emulated machine.
    #[arg(long, value_enum, default_value_t = NicArg::Gemini)]
    nic: NicArg,
    /// Nodes (one rank each; point-to-point and one-sided tests use ranks 0 and 1), 2 to
    /// 65536.
    #[arg(long, default_value_t = 2)]
    nodes: u32,
    /// Engine.
    #[arg(long, value_enum, default_value_t = EngineArg::Threaded)]
    engine: EngineArg,
    /// Seed of the deterministic engine.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Message sizes `min:max` (or `max`), bytes, as OSU's `-m`.
    #[arg(short = 'm', long, value_parser = args::osu_size_range)]
    message_size: Option<(usize, usize)>,
    /// Timed iterations per size up to 8 KiB (OSU's `-i`).
    #[arg(short = 'i', long, value_parser = args::count, default_value = "1000")]
    iterations: usize,
    /// Timed iterations per size above 8 KiB.
    #[arg(long, value_parser = args::count, default_value = "100")]
    iterations_large: usize,
    /// Untimed iterations first (OSU's `-x`).
    #[arg(short = 'x', long, default_value_t = 10)]
    warmup: usize,
    /// Window of the bandwidth tests (OSU's `-W`).
    #[arg(short = 'W', long, value_parser = args::count, default_value = "64")]
    window: usize,
    /// Also write the tables as an SVG plot against message size to FILE (one panel per
    /// benchmark; `nicemu plot` draws several runs in one figure).
    #[arg(long, value_name = "FILE")]
    svg: Option<std::path::PathBuf>,
}

impl OsuArgs {
    fn options(&self) -> Options {
        let (min_size, max_size) = self.message_size.unwrap_or((1, 1 << 20));
        Options {
            min_size,
            max_size,
            iterations: self.iterations,
            iterations_large: self.iterations_large,
            warmup: self.warmup,
            window: self.window,
        }
    }

    /// The job, its nodes' memory from `NICEMU_NODE_MEMORY_MIB` when set.
    fn job(&self) -> anyhow::Result<Job> {
        let nic = match self.nic {
            NicArg::Cassini => Nic::Cassini,
            NicArg::Gemini => Nic::Gemini,
        };
        let engine = match self.engine {
            EngineArg::Threaded => EngineKind::Threaded,
            EngineArg::Deterministic => EngineKind::Deterministic { seed: self.seed },
        };
        crate::job::in_process(nic, self.nodes, engine)
    }
}

/// Refuse what cannot run before building the machine: a message longer than an emulated
/// node's memory (it is staged there), and a job whose ranks' buffers and staging copies,
/// with the machine, are more than the host has.
fn check_fits(job: &Job, bench: Bench, o: &Options) -> anyhow::Result<()> {
    let node = job.memory_per_node;
    if o.max_size as u64 > node {
        bail!(
            "-m: a message of {} is larger than an emulated node's memory ({}); \
             NICEMU_NODE_MEMORY_MIB sets it",
            runtime::memory::human(o.max_size as u64),
            runtime::memory::human(node)
        );
    }
    let buffers = bench.buffer_bytes(job.ranks(), o);
    let program = buffers
        .saturating_mul(2)
        .saturating_mul(u64::from(job.ranks()));
    job.check_memory(program)?;
    Ok(())
}

/// Run the chosen benchmarks and print their tables.
pub fn run_args(args: OsuArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.nodes < 2 || args.nodes > MAX_RANKS {
        bail!(
            "--nodes must be between 2 and {MAX_RANKS} (got {})",
            args.nodes
        );
    }
    let o = args.options();
    let job = args.job()?;
    for bench in args.bench.benches() {
        check_fits(&job, bench, &o)?;
    }
    let progress = std::io::stderr().is_terminal();
    let label = format!("nicemu {:?} ({:?} engine)", args.nic, args.engine).to_lowercase();
    let mut drawn = Vec::new();
    for bench in args.bench.benches() {
        let t = Instant::now();
        if progress {
            eprintln!(
                "{}: {} ranks on emulated {:?} ({:?} engine)...",
                bench.program(),
                job.ranks(),
                args.nic,
                args.engine
            );
        }
        // A rank that fails (out of node memory, a network error) ends the job with its
        // error rather than leaving its peer waiting.
        let tables = job
            .try_run(|u| run(bench, &u.world(), &o))
            .with_context(|| {
                format!(
                    "{} on {} emulated {:?} nodes of {} each (NICEMU_NODE_MEMORY_MIB sets it)",
                    bench.program(),
                    job.ranks(),
                    args.nic,
                    runtime::memory::human(job.memory_per_node)
                )
            })?;
        let table = tables
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("the job had no rank 0"))?
            .ok_or_else(|| anyhow::anyhow!("rank 0 printed no table"))?;
        write!(out, "{table}")?;
        writeln!(out)?;
        drawn.push((label.clone(), table));
        if progress {
            eprintln!(
                "{}: done in {:.1} s",
                bench.program(),
                t.elapsed().as_secs_f64()
            );
        }
    }
    if let Some(path) = &args.svg {
        let title = format!("{label}, {} ranks", job.ranks());
        crate::plot::write_svg(path, &tools::plot::from_osu_tables(&title, &drawn))?;
    }
    Ok(())
}

/// A short run for the main job: latency and bandwidth on two ranks, allreduce on four.
pub fn demo(out: &mut dyn Write) -> anyhow::Result<()> {
    let o = Options {
        min_size: 8,
        max_size: 4 << 20,
        iterations: 500,
        iterations_large: 20,
        warmup: 10,
        window: 16,
    };
    for (bench, ranks, sizes) in [
        (Bench::Latency, 2, (8, 1 << 20)),
        (Bench::Bw, 2, (8, 4 << 20)),
        (Bench::Allreduce, 4, (8, 1 << 16)),
    ] {
        let o = Options {
            min_size: sizes.0,
            max_size: sizes.1,
            ..o.clone()
        };
        let tables = Job::new(Nic::Gemini, ranks).try_run(|u| run(bench, &u.world(), &o))?;
        let table = tables
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("the job had no rank 0"))?
            .ok_or_else(|| anyhow::anyhow!("rank 0 printed no table"))?;
        writeln!(out, "{} ({ranks} ranks, gni transport)", bench.program())?;
        write!(out, "{table}")?;
        writeln!(out)?;
    }
    Ok(())
}
