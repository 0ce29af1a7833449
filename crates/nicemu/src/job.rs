//! `nicemu job`: an MPI job of many ranks on emulated NICs — allreduce, barrier and an 8-byte
//! alltoall, each result checked on every rank — with its wall time, virtual time, peak RSS
//! and replay digest. On the deterministic engine the ranks are coroutines on one thread and
//! the same seed prints the same digest.

use std::io::Write;

use anyhow::{Context, bail};
use clap::Args;
use mpi::{Env, SystemOperation, Universe};
use platform::EngineKind;
use runtime::{Job, Nic};

use crate::args::{EngineArg, NicArg};

#[derive(Args)]
pub struct JobArgs {
    /// NIC family of the emulated machine.
    #[arg(long, value_enum)]
    nic: NicArg,
    /// Ranks (one node each).
    #[arg(long)]
    ranks: u32,
    /// Engine: deterministic (ranks as coroutines on one thread, virtual time) or threaded
    /// (ranks as threads, real time).
    #[arg(long, value_enum, default_value_t = EngineArg::Deterministic)]
    engine: EngineArg,
    /// Seed of the deterministic engine.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The most ranks a job may have.
pub const MAX_RANKS: u32 = 1 << 16;

/// What every rank runs: the three collectives, each checked; a checksum of what it got.
/// An error names the call that failed, or the wrong result (the runtime adds the rank).
fn program(u: &Universe) -> Result<u64, String> {
    let w = u.world();
    let (rank, size) = (w.rank() as u64, w.size() as u64);
    let mut sum = 0u64;
    w.all_reduce_into(&(rank + 1), &mut sum, SystemOperation::sum())
        .map_err(|e| format!("allreduce: {e}"))?;
    if sum != size * (size + 1) / 2 {
        return Err(format!("wrong result: allreduce gave {sum}"));
    }
    w.barrier().map_err(|e| format!("barrier: {e}"))?;
    let send: Vec<u64> = (0..size).map(|i| rank * size + i).collect();
    let mut recv = vec![0u64; size as usize];
    w.all_to_all_into(&send[..], &mut recv[..])
        .map_err(|e| format!("alltoall: {e}"))?;
    for (j, &v) in recv.iter().enumerate() {
        if v != j as u64 * size + rank {
            return Err(format!("wrong result: alltoall block {j} holds {v}"));
        }
    }
    Ok(recv
        .iter()
        .fold(sum, |h, &v| (h ^ v).wrapping_mul(0x100_0000_01b3)))
}

/// Bytes of the program's own buffers over all ranks: each rank's alltoall sends and
/// receives 8 bytes to and from every rank.
fn program_bytes(ranks: u32) -> u64 {
    16 * u64::from(ranks) * u64::from(ranks)
}

/// An in-process job of `ranks` ranks on `nic`: the knobs of this process's environment,
/// the nodes' memory from `NICEMU_NODE_MEMORY_MIB` when it is set.
pub fn in_process(nic: Nic, ranks: u32, engine: EngineKind) -> anyhow::Result<Job> {
    let mut job = Job::new(nic, ranks).engine(engine);
    job.env = Env::from_process();
    if let Some(bytes) = runtime::node_memory_from_env(&job.env)
        .map_err(|why| anyhow::anyhow!("NICEMU_NODE_MEMORY_MIB: {why}"))?
    {
        job.memory_per_node = bytes;
    }
    Ok(job)
}

/// Peak resident set size of this process (`VmHWM` in `/proc/self/status`), bytes.
fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub fn run(args: JobArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.ranks == 0 || args.ranks > MAX_RANKS {
        bail!(
            "--ranks must be between 1 and {MAX_RANKS} (got {})",
            args.ranks
        );
    }
    let (nic, nic_name) = match args.nic {
        NicArg::Cassini => (Nic::Cassini, "Cassini"),
        NicArg::Gemini => (Nic::Gemini, "Gemini"),
    };
    let engine = match args.engine {
        EngineArg::Threaded => EngineKind::Threaded,
        EngineArg::Deterministic => EngineKind::Deterministic { seed: args.seed },
    };
    let job = in_process(nic, args.ranks, engine)?;
    // A job the host cannot hold is refused before the machine is built.
    job.check_memory(program_bytes(args.ranks))?;
    match args.engine {
        EngineArg::Deterministic => writeln!(
            out,
            "job: {} ranks on emulated {nic_name}, deterministic engine (seed {}), ranks as \
             coroutines on one thread",
            args.ranks, args.seed
        )?,
        EngineArg::Threaded => writeln!(
            out,
            "job: {} ranks on emulated {nic_name}, threaded engine, ranks as threads",
            args.ranks
        )?,
    }
    let report = job.try_run_with_digest(program).context("the job failed")?;
    let check = report
        .results
        .iter()
        .fold(0u64, |h, c| (h ^ c).wrapping_mul(0x100_0000_01b3));
    writeln!(
        out,
        "allreduce, barrier, alltoall (8 B): correct on all {} ranks (checksum {check:016x})",
        report.results.len()
    )?;
    writeln!(out, "wall time: {:.3} s", report.wall.as_secs_f64())?;
    match report.virtual_time {
        Some(t) => writeln!(out, "virtual time: {:.3} us", t.as_nanos() as f64 / 1e3)?,
        None => writeln!(out, "virtual time: none (threaded engine)")?,
    }
    writeln!(out, "engine events: {}", report.events)?;
    match peak_rss() {
        Some(b) => writeln!(out, "peak RSS: {:.1} MiB", b as f64 / (1 << 20) as f64)?,
        None => writeln!(out, "peak RSS: unknown (no /proc/self/status)")?,
    }
    match report.digest {
        Some(d) => writeln!(out, "digest: {d:016x}")?,
        None => writeln!(out, "digest: none (threaded engine)")?,
    }
    Ok(())
}
