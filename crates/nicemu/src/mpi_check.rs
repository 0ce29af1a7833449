//! `nicemu mpi-check`: an MPI program for jobs of one rank per process, started by a PMI
//! launcher (`nicemu run -n N -- nicemu mpi-check`, or hydra's `mpiexec -n N nicemu
//! mpi-check`). Each rank hosts its own node's emulated NIC (`NICEMU_NIC`); the nodes meet on
//! the fabric between processes (`runtime::process`). The ranks pass messages of every size
//! from 0 B to `--max` around a ring, check every byte, run an allreduce and check its sum,
//! then each prints its NIC's and its fabric's counters, so the traffic provably went through
//! the emulated NICs.

use anyhow::{Context, bail};
use clap::Args;
use mpi::{Source, SystemOperation};
use runtime::process::{self, ProcessConfig};

/// Options of `nicemu mpi-check`.
#[derive(Args, Debug)]
pub struct MpiCheckArgs {
    /// Largest message of the ring exchange, bytes, optionally with K, M or G (sizes go 0,
    /// 1, 4, 16, ... up to it).
    #[arg(long, value_parser = crate::args::size_usize, default_value = "4M")]
    max: usize,
    /// Elements (u64) of the allreduce.
    #[arg(long, default_value_t = 4096)]
    reduce: usize,
    /// Make this rank leave abruptly (exit status 9, no finalize) after the first message, to
    /// see how the others end.
    #[arg(long, value_name = "RANK")]
    die_rank: Option<u32>,
    /// After the checks, time ranks 0 and 1: 8 B ping-pong latency (half the round trip)
    /// and 4 MiB one-way bandwidth (rank 0 prints them).
    #[arg(long)]
    pingpong: bool,
    /// After the size sweep, pass this many more messages of `--max` bytes around the ring
    /// (each checked); each rank prints a line per round (`rank R: round K ok`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    big_rounds: usize,
    /// Print `rank R pid P` once the rank has joined the job (for tests that signal a
    /// rank's process).
    #[arg(long)]
    announce: bool,
    /// Instead of the checks: rank 0 sleeps this many seconds while the others wait in a
    /// barrier; each rank prints the CPU time its process used meanwhile (a waiting rank
    /// should sleep on its NIC's interrupt, not spin).
    #[arg(long, value_name = "SECS")]
    idle: Option<f64>,
}

/// CPU time this process used so far (user + system, every thread), from `/proc/self/stat`.
fn cpu_time() -> anyhow::Result<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
    let after = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("/proc/self/stat has no command")?;
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat(5) (utime, stime), 11 and 12 after the command.
    let ticks: u64 = [11, 12]
        .iter()
        .map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
        .sum();
    // USER_HZ is 100 on Linux.
    Ok(std::time::Duration::from_millis(ticks * 10))
}

/// `--idle`: rank 0 sleeps while the others wait in a barrier; each prints its CPU time.
fn idle(world: &mpi::SimpleCommunicator, rank: u32, secs: f64) -> anyhow::Result<()> {
    world.barrier()?;
    let (cpu, wall) = (cpu_time()?, std::time::Instant::now());
    if rank == 0 {
        std::thread::sleep(std::time::Duration::from_secs_f64(secs));
    }
    world.barrier()?;
    let (used, wall) = (cpu_time()? - cpu, wall.elapsed());
    println!(
        "rank {rank}: idle {:.2} s, CPU {:.3} s ({:.2} % of a CPU)",
        wall.as_secs_f64(),
        used.as_secs_f64(),
        100.0 * used.as_secs_f64() / wall.as_secs_f64()
    );
    Ok(())
}

/// The bytes rank `from` sends in round `round`.
fn pattern(len: usize, from: u32, round: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(from * 7 + round as u32) as u8
        })
        .map(|b| b ^ (from as u8))
        .collect()
}

/// The message sizes of the ring exchange.
fn sizes(max: usize) -> Vec<usize> {
    let mut v = vec![0];
    let mut s = 1;
    while s <= max {
        v.push(s);
        s *= 4;
    }
    if *v.last().unwrap_or(&0) != max {
        v.push(max);
    }
    v
}

/// Run the check; errors name what failed. A rank whose check fails aborts the job (PMI
/// abort), so the launcher ends every rank with its reason instead of the others waiting.
pub fn run(args: &MpiCheckArgs) -> anyhow::Result<()> {
    let env = mpi::Env::from_process();
    let cfg = ProcessConfig::from_env(&env)?;
    let pmi = pmi::from_env()?.context(
        "nicemu mpi-check runs one rank per process: start it with `nicemu run -n N -- nicemu mpi-check` or `mpiexec -n N nicemu mpi-check`",
    )?;
    let (universe, guard) = process::init(pmi, &cfg)?;
    match check(args, &universe, &cfg, &guard) {
        Ok(()) => {
            guard.finish(universe)?;
            Ok(())
        }
        Err(e) => {
            universe.abort(&format!("{e:#}"));
            Err(e)
        }
    }
}

fn check(
    args: &MpiCheckArgs,
    universe: &mpi::Universe,
    cfg: &ProcessConfig,
    guard: &process::ProcessGuard,
) -> anyhow::Result<()> {
    let world = universe.world();
    let (rank, size) = (world.rank() as u32, world.size() as u32);
    if size < 2 {
        bail!("nicemu mpi-check needs at least 2 ranks (got {size})");
    }
    if let Some(r) = args.die_rank.filter(|&r| r >= size) {
        bail!("--die-rank {r}: the job has ranks 0 to {} only", size - 1);
    }
    if args.announce {
        println!("rank {rank} pid {}", std::process::id());
    }
    if let Some(secs) = args.idle {
        return idle(&world, rank, secs).with_context(|| format!("rank {rank}: idle barrier"));
    }
    let next = ((rank + 1) % size) as i32;
    let prev = ((rank + size - 1) % size) as i32;
    let sizes = sizes(args.max);
    let rounds = sizes
        .iter()
        .copied()
        .chain(std::iter::repeat_n(args.max, args.big_rounds));
    for (round, len) in rounds.enumerate() {
        let data = pattern(len, rank, round);
        let mut got = vec![0u8; len];
        let st = world
            .sendrecv_into(
                &data[..],
                next,
                round as i32,
                &mut got[..],
                Some(prev),
                Some(round as i32),
            )
            .with_context(|| format!("rank {rank}: exchanging {len} B"))?;
        if st.source_rank() != prev || st.len() != len {
            bail!(
                "rank {rank}: {len} B from rank {prev}: status says {} B from rank {}",
                st.len(),
                st.source_rank()
            );
        }
        if got != pattern(len, prev as u32, round) {
            bail!("rank {rank}: the {len} B from rank {prev} arrived damaged");
        }
        if args.die_rank == Some(rank) {
            eprintln!("rank {rank}: leaving without finalize (--die-rank)");
            std::process::exit(9);
        }
        if round >= sizes.len() {
            println!("rank {rank}: round {} ok", round + 1 - sizes.len());
        }
    }
    let mine: Vec<u64> = (0..args.reduce as u64)
        .map(|k| k * u64::from(rank + 1))
        .collect();
    let mut sum = vec![0u64; args.reduce];
    world
        .all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum())
        .with_context(|| format!("rank {rank}: allreduce"))?;
    let ranks = u64::from(size) * u64::from(size + 1) / 2;
    if let Some(k) = (0..args.reduce).find(|&k| sum[k] != k as u64 * ranks) {
        bail!(
            "rank {rank}: allreduce element {k} is {}, expected {}",
            sum[k],
            k as u64 * ranks
        );
    }
    world
        .barrier()
        .with_context(|| format!("rank {rank}: barrier"))?;
    if args.pingpong {
        pingpong(&world, rank).with_context(|| format!("rank {rank}: ping-pong"))?;
        world
            .barrier()
            .with_context(|| format!("rank {rank}: barrier"))?;
    }
    let nic = guard.nic_counters();
    let fabric = guard.fabric_counters();
    let counters: Vec<String> = nic.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!(
        "rank {rank}/{size} {:?}: {} messages 0..{} B ok, allreduce of {} u64 ok; fabric sent {} packets / {} B, received {} / {} B, network timeouts {}, clock held {} times / {} ms; NIC {}",
        cfg.node.nic,
        sizes.len() + args.big_rounds,
        args.max,
        args.reduce,
        fabric.sent,
        fabric.bytes_sent,
        fabric.received,
        fabric.bytes_received,
        fabric.network_timeouts,
        fabric.clock_holds,
        fabric.clock_held_ms,
        counters.join(" ")
    );
    Ok(())
}

/// 8 B latency and 4 MiB bandwidth between ranks 0 and 1 (the others wait at the barrier).
fn pingpong(world: &mpi::SimpleCommunicator, rank: u32) -> anyhow::Result<()> {
    const ITERS: usize = 2000;
    const WARMUP: usize = 200;
    const BIG: usize = 4 << 20;
    const BIG_ITERS: usize = 10;
    if rank > 1 {
        return Ok(());
    }
    let peer = world.process_at_rank(1 - rank as i32);
    let small = [7u8; 8];
    let mut buf = [0u8; 8];
    let mut start = std::time::Instant::now();
    for i in 0..WARMUP + ITERS {
        if i == WARMUP {
            start = std::time::Instant::now();
        }
        if rank == 0 {
            peer.send(&small[..])?;
            peer.receive_into(&mut buf[..])?;
        } else {
            peer.receive_into(&mut buf[..])?;
            peer.send(&small[..])?;
        }
    }
    let lat_us = start.elapsed().as_secs_f64() * 1e6 / (2 * ITERS) as f64;
    let big = vec![1u8; BIG];
    let mut into = vec![0u8; BIG];
    let start = std::time::Instant::now();
    for _ in 0..BIG_ITERS {
        if rank == 0 {
            peer.send(&big[..])?;
        } else {
            peer.receive_into(&mut into[..])?;
        }
    }
    if rank == 0 {
        peer.receive_into(&mut buf[..])?;
    } else {
        peer.send(&small[..])?;
    }
    let mbs = (BIG * BIG_ITERS) as f64 / start.elapsed().as_secs_f64() / 1e6;
    if rank == 0 {
        println!("pingpong 0<->1: 8 B latency {lat_us:.2} us, 4 MiB bandwidth {mbs:.0} MB/s");
    }
    Ok(())
}
