//! MPI micro-benchmarks in the manner and output format of the OSU Micro-Benchmarks 7.4
//! (`osu_latency`, `osu_bw`, `osu_bibw`, `osu_mbw_mr`, `osu_bcast`, `osu_allreduce`,
//! `osu_alltoall`, `osu_barrier`, `osu_put_latency`, `osu_get_bw`), written against the `mpi`
//! crate so they run on any transport. Every rank calls [`run`]; rank 0 returns the table.
//!
//! Method, as OSU's: latency is a ping-pong between ranks 0 and 1, half the round trip,
//! averaged over `iterations` after `warmup`; bandwidth posts a window of `window` immediate
//! sends, the receiver answers with a 4-byte ack, bytes × window / time; bidirectional
//! bandwidth does it both ways at once; the message rate (`mbw_mr`) runs `nodes / 2` pairs; a
//! collective's latency is the average time of one call, averaged over the ranks.

use std::fmt::Write as _;
use std::time::Instant;

use mpi::collective::Root;
use mpi::request::wait_all;
use mpi::{Result, SimpleCommunicator, Source, SystemOperation};

/// The benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bench {
    /// `osu_latency`.
    Latency,
    /// `osu_bw`.
    Bw,
    /// `osu_bibw`.
    Bibw,
    /// `osu_mbw_mr`.
    MbwMr,
    /// `osu_bcast`.
    Bcast,
    /// `osu_allreduce`.
    Allreduce,
    /// `osu_alltoall`.
    Alltoall,
    /// `osu_barrier`.
    Barrier,
    /// `osu_put_latency`.
    PutLatency,
    /// `osu_get_bw`.
    GetBw,
}

impl Bench {
    /// Every benchmark, in the order of `nicemu osu all`.
    pub const ALL: [Bench; 10] = [
        Bench::Latency,
        Bench::Bw,
        Bench::Bibw,
        Bench::MbwMr,
        Bench::Bcast,
        Bench::Allreduce,
        Bench::Alltoall,
        Bench::Barrier,
        Bench::PutLatency,
        Bench::GetBw,
    ];

    /// The OSU program name.
    pub fn program(self) -> &'static str {
        match self {
            Bench::Latency => "osu_latency",
            Bench::Bw => "osu_bw",
            Bench::Bibw => "osu_bibw",
            Bench::MbwMr => "osu_mbw_mr",
            Bench::Bcast => "osu_bcast",
            Bench::Allreduce => "osu_allreduce",
            Bench::Alltoall => "osu_alltoall",
            Bench::Barrier => "osu_barrier",
            Bench::PutLatency => "osu_put_latency",
            Bench::GetBw => "osu_get_bw",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Bench::Latency => "OSU MPI Latency Test",
            Bench::Bw => "OSU MPI Bandwidth Test",
            Bench::Bibw => "OSU MPI Bi-Directional Bandwidth Test",
            Bench::MbwMr => "OSU MPI Multiple Bandwidth / Message Rate Test",
            Bench::Bcast => "OSU MPI Broadcast Latency Test",
            Bench::Allreduce => "OSU MPI Allreduce Latency Test",
            Bench::Alltoall => "OSU MPI All-to-All Personalized Exchange Latency Test",
            Bench::Barrier => "OSU MPI Barrier Latency Test",
            Bench::PutLatency => "OSU MPI_Put Latency Test",
            Bench::GetBw => "OSU MPI_Get Bandwidth Test",
        }
    }

    /// Whether it needs exactly two ranks (point-to-point and one-sided tests).
    pub fn pairwise(self) -> bool {
        matches!(
            self,
            Bench::Latency | Bench::Bw | Bench::Bibw | Bench::PutLatency | Bench::GetBw
        )
    }
}

/// Sizes and counts.
#[derive(Clone, Debug)]
pub struct Options {
    /// Smallest message size in bytes (OSU 7.4 starts at 1).
    pub min_size: usize,
    /// Largest message size in bytes.
    pub max_size: usize,
    /// Timed iterations per size up to 8 KiB.
    pub iterations: usize,
    /// Timed iterations per size above 8 KiB.
    pub iterations_large: usize,
    /// Untimed iterations first.
    pub warmup: usize,
    /// Messages in flight per bandwidth iteration.
    pub window: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            min_size: 1,
            max_size: 1 << 20,
            iterations: 1000,
            iterations_large: 100,
            warmup: 10,
            window: 64,
        }
    }
}

impl Options {
    fn sizes(&self, min: usize) -> Vec<usize> {
        let mut v = Vec::new();
        let mut s = self.min_size.max(min).max(1);
        while s <= self.max_size {
            v.push(s);
            s *= 2;
        }
        v
    }

    fn iters(&self, size: usize) -> usize {
        if size > 8192 {
            self.iterations_large
        } else {
            self.iterations
        }
    }

    /// Figures of zero iterations or of an empty window would be no measurement.
    fn check(&self) -> Result<()> {
        for (what, n) in [
            ("iterations", self.iterations),
            ("iterations of large sizes", self.iterations_large),
            ("window", self.window),
        ] {
            if n == 0 {
                return Err(mpi::Error::Arg(format!("{what} must be at least 1")));
            }
        }
        Ok(())
    }
}

impl Bench {
    /// Bytes of message buffers one rank of a job of `ranks` ranks allocates for `o`'s
    /// largest size (saturating: a request beyond any memory stays beyond it).
    pub fn buffer_bytes(self, ranks: u32, o: &Options) -> u64 {
        let size = o.max_size as u64;
        let window = o.window as u64;
        match self {
            Bench::Latency | Bench::Bcast => size,
            Bench::Allreduce | Bench::PutLatency => size.saturating_mul(2),
            Bench::Alltoall => size.saturating_mul(2).saturating_mul(u64::from(ranks)),
            Bench::Bw | Bench::Bibw | Bench::MbwMr | Bench::GetBw => {
                size.saturating_mul(window.saturating_add(1))
            }
            Bench::Barrier => 0,
        }
    }
}

const WIDTH: usize = 18;

/// Run `bench` on `world` (every rank calls it); rank 0 gets the table.
pub fn run(bench: Bench, world: &SimpleCommunicator, o: &Options) -> Result<Option<String>> {
    o.check()?;
    let me = world.rank();
    let mut out = String::new();
    let _ = writeln!(out, "# {} v7.4", bench.title());
    if bench == Bench::MbwMr {
        let _ = writeln!(
            out,
            "# [ pairs: {} ] [ window size: {} ]",
            world.size() / 2,
            o.window
        );
    }
    if bench != Bench::Barrier {
        let _ = writeln!(out, "# Datatype: MPI_CHAR.");
    }
    let _ = match bench {
        Bench::Latency | Bench::PutLatency | Bench::Bcast | Bench::Allreduce | Bench::Alltoall => {
            writeln!(out, "# Size       Avg Latency(us)")
        }
        Bench::Bw | Bench::Bibw | Bench::GetBw => writeln!(out, "# Size      Bandwidth (MB/s)"),
        Bench::MbwMr => writeln!(out, "# Size                  MB/s        Messages/s"),
        Bench::Barrier => writeln!(out, "# Avg Latency(us)"),
    };
    if bench.pairwise() && world.size() < 2 {
        return Err(mpi::Error::Arg(format!(
            "{} needs at least two ranks",
            bench.program()
        )));
    }
    match bench {
        Bench::Latency => latency(world, o, &mut out)?,
        Bench::Bw => bandwidth(world, o, false, &mut out)?,
        Bench::Bibw => bandwidth(world, o, true, &mut out)?,
        Bench::MbwMr => message_rate(world, o, &mut out)?,
        Bench::Bcast | Bench::Allreduce | Bench::Alltoall => collective(bench, world, o, &mut out)?,
        Bench::Barrier => {
            let t = timed(world, o.warmup, o.iterations, || world.barrier())?;
            let avg = average(world, t)?;
            let _ = writeln!(out, "{:>WIDTH$.2}", avg);
        }
        Bench::PutLatency => put_latency(world, o, &mut out)?,
        Bench::GetBw => get_bandwidth(world, o, &mut out)?,
    }
    world.barrier()?;
    Ok((me == 0).then_some(out))
}

/// Microseconds per iteration of `f`, after `warmup` untimed ones.
fn timed(
    world: &SimpleCommunicator,
    warmup: usize,
    iters: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    for _ in 0..warmup {
        f()?;
    }
    world.barrier()?;
    let t = Instant::now();
    for _ in 0..iters {
        f()?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / iters as f64)
}

/// The average of `t` over the ranks.
fn average(world: &SimpleCommunicator, t: f64) -> Result<f64> {
    let mut sum = 0f64;
    world.all_reduce_into(&t, &mut sum, SystemOperation::sum())?;
    Ok(sum / f64::from(world.size()))
}

fn row(out: &mut String, size: usize, v: f64) {
    let _ = writeln!(out, "{:<10}{:>WIDTH$.2}", size, v);
}

fn latency(w: &SimpleCommunicator, o: &Options, out: &mut String) -> Result<()> {
    let r = w.rank();
    for size in o.sizes(1) {
        let mut buf = vec![b'a'; size];
        let t = timed(w, o.warmup, o.iters(size), || {
            if r == 0 {
                w.process_at_rank(1).send_with_tag(&buf[..], 1)?;
                w.process_at_rank(1)
                    .receive_into_with_tag(&mut buf[..], 1)?;
            } else if r == 1 {
                w.process_at_rank(0)
                    .receive_into_with_tag(&mut buf[..], 1)?;
                w.process_at_rank(0).send_with_tag(&buf[..], 1)?;
            }
            Ok(())
        })?;
        row(out, size, t / 2.0);
    }
    Ok(())
}

/// One bandwidth iteration from `from` to `to`: a window of sends, then a 4-byte ack.
fn window_to(
    w: &SimpleCommunicator,
    from: i32,
    to: i32,
    buf: &[u8],
    rbuf: &mut [Vec<u8>],
    window: usize,
) -> Result<()> {
    let r = w.rank();
    if r == from {
        let reqs = (0..window)
            .map(|_| w.process_at_rank(to).immediate_send_with_tag(buf, 100))
            .collect::<Result<Vec<_>>>()?;
        wait_all(reqs)?;
        let mut ack = [0u8; 4];
        w.process_at_rank(to).receive_into_with_tag(&mut ack, 101)?;
    } else if r == to {
        mpi::scope(|s| -> Result<()> {
            let reqs = rbuf
                .iter_mut()
                .take(window)
                .map(|b| {
                    w.process_at_rank(from)
                        .immediate_receive_into_with_tag(s, &mut b[..], 100)
                })
                .collect::<Result<Vec<_>>>()?;
            wait_all(reqs)?;
            Ok(())
        })?;
        w.process_at_rank(from).send_with_tag(&[0u8; 4], 101)?;
    }
    Ok(())
}

fn bandwidth(w: &SimpleCommunicator, o: &Options, bidir: bool, out: &mut String) -> Result<()> {
    let window = o.window;
    for size in o.sizes(1) {
        let buf = vec![b'a'; size];
        let mut rbuf = vec![vec![0u8; size]; window];
        let iters = o.iters(size).min(if size > 8192 { 20 } else { 100 });
        let t = timed(w, o.warmup.min(2), iters, || {
            if bidir {
                bidir_window(w, &buf, &mut rbuf, window)
            } else {
                window_to(w, 0, 1, &buf, &mut rbuf, window)
            }
        })?;
        let bytes = size as f64 * window as f64 * if bidir { 2.0 } else { 1.0 };
        row(out, size, bytes / t);
    }
    Ok(())
}

fn bidir_window(
    w: &SimpleCommunicator,
    buf: &[u8],
    rbuf: &mut [Vec<u8>],
    window: usize,
) -> Result<()> {
    let r = w.rank();
    if r > 1 {
        return Ok(());
    }
    let peer = 1 - r;
    mpi::scope(|s| -> Result<()> {
        let mut reqs = rbuf
            .iter_mut()
            .take(window)
            .map(|b| {
                w.process_at_rank(peer)
                    .immediate_receive_into_with_tag(s, &mut b[..], 100)
            })
            .collect::<Result<Vec<_>>>()?;
        for _ in 0..window {
            reqs.push(w.process_at_rank(peer).immediate_send_with_tag(buf, 100)?);
        }
        wait_all(reqs)?;
        Ok(())
    })
}

fn message_rate(w: &SimpleCommunicator, o: &Options, out: &mut String) -> Result<()> {
    let pairs = w.size() / 2;
    if pairs == 0 {
        return Err(mpi::Error::Arg(
            "osu_mbw_mr needs at least two ranks".into(),
        ));
    }
    let r = w.rank();
    let window = o.window;
    for size in o.sizes(1) {
        let buf = vec![b'a'; size];
        let mut rbuf = vec![vec![0u8; size]; window];
        let iters = o.iters(size).min(if size > 8192 { 20 } else { 100 });
        // Rank i < pairs sends to i + pairs.
        let (from, to) = if r < pairs {
            (r, r + pairs)
        } else {
            (r - pairs, r)
        };
        let t = timed(w, o.warmup.min(2), iters, || {
            if r < 2 * pairs {
                window_to(w, from, to, &buf, &mut rbuf, window)
            } else {
                Ok(())
            }
        })?;
        // Each sender's rate, summed over pairs.
        let mine = if r < pairs {
            (size * window) as f64 / t
        } else {
            0.0
        };
        let mut mbs = 0f64;
        w.all_reduce_into(&mine, &mut mbs, SystemOperation::sum())?;
        let _ = writeln!(
            out,
            "{:<10}{:>WIDTH$.2}{:>WIDTH$.2}",
            size,
            mbs,
            mbs * 1e6 / size as f64
        );
    }
    Ok(())
}

fn collective(b: Bench, w: &SimpleCommunicator, o: &Options, out: &mut String) -> Result<()> {
    let p = w.size() as usize;
    for size in o.sizes(1) {
        let t = match b {
            Bench::Bcast => {
                let mut buf = vec![1u8; size];
                timed(w, o.warmup, o.iters(size), || {
                    w.process_at_rank(0).broadcast_into(&mut buf[..])
                })?
            }
            Bench::Allreduce => {
                // MPI_CHAR elements with MPI_SUM, OSU 7.4's default.
                let send = vec![1u8; size];
                let mut recv = vec![0u8; size];
                timed(w, o.warmup, o.iters(size), || {
                    w.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum())
                })?
            }
            _ => {
                let send = vec![1u8; size * p];
                let mut recv = vec![0u8; size * p];
                timed(w, o.warmup, o.iters(size), || {
                    w.all_to_all_into(&send[..], &mut recv[..])
                })?
            }
        };
        row(out, size, average(w, t)?);
    }
    Ok(())
}

fn put_latency(w: &SimpleCommunicator, o: &Options, out: &mut String) -> Result<()> {
    let r = w.rank();
    let mut win = w.window_allocate::<u8>(o.max_size.max(1))?;
    for size in o.sizes(1) {
        let buf = vec![b'a'; size];
        // Lock/unlock epochs, as `osu_put_latency -w create -s lock` does.
        let t = timed(w, o.warmup, o.iters(size), || {
            if r == 0 {
                win.lock(mpi::LockType::Exclusive, 1)?;
                win.put(&buf, 1, 0)?;
                win.unlock(1)?;
            }
            Ok(())
        })?;
        row(out, size, t);
    }
    w.barrier()?;
    win.free()
}

fn get_bandwidth(w: &SimpleCommunicator, o: &Options, out: &mut String) -> Result<()> {
    let r = w.rank();
    let window = o.window;
    let mut win = w.window_allocate::<u8>(o.max_size.max(1))?;
    for size in o.sizes(1) {
        let iters = o.iters(size).min(if size > 8192 { 20 } else { 100 });
        let t = timed(w, o.warmup.min(2), iters, || {
            if r == 0 {
                win.lock(mpi::LockType::Shared, 1)?;
                for _ in 0..window {
                    win.get(1, 0, size)?;
                }
                win.unlock(1)?;
            }
            Ok(())
        })?;
        row(out, size, (size * window) as f64 / t);
    }
    w.barrier()?;
    win.free()
}
