//! Latency tools: `gni-send-lat`, `gni-write-lat`, `gni-read-lat`, `gni-atomic-lat`.

use std::io::Write;
use std::time::{Duration, Instant};

use firmware_spec::gemini::amo::AmoCmd;
use firmware_spec::gemini::gni::{CdmMode, DlvrMode, PostType, ReturnCode};
use firmware_spec::gemini::post::PostDescriptor;
use platform::EngineKind;

use super::pair::{Pair, SmsgParams};
use super::{LatStats, RDMA_THRESHOLD, SMSG_MAX, ToolError, ToolResult, sizes};
use crate::cxi::ToolKind as Kind;
use crate::cxi::{RULE, engine_name};
use userlib::gni::amo::amo_desc;
use userlib::gni::post::put_desc;

/// Options of the latency tools.
#[derive(Clone, Debug)]
pub struct LatOptions {
    /// Engine driving the pair (threaded by default).
    pub engine: EngineKind,
    /// Measured iterations per size (ignored with `duration`).
    pub iters: u64,
    /// Run each size for this long instead of `iters`.
    pub duration: Option<Duration>,
    /// Unmeasured iterations before each size.
    pub warmup: u64,
    /// Pause between iterations.
    pub gap: Duration,
    /// Smallest size (bytes).
    pub min_size: u64,
    /// Largest size (bytes).
    pub max_size: u64,
    /// Writes and reads up to this size use FMA, larger ones the BTE.
    pub rdma_threshold: u64,
    /// Delivery mode of the posts.
    pub dlvr: DlvrMode,
    /// SMSG credits of the mailboxes (`gni-send-lat`).
    pub credits: u16,
    /// `gni-atomic-lat`: the AMO command.
    pub amo: AmoCmd,
    /// Print every measurement.
    pub report_all: bool,
}

impl Default for LatOptions {
    fn default() -> Self {
        LatOptions {
            engine: EngineKind::Threaded,
            iters: 100,
            duration: None,
            warmup: 10,
            gap: Duration::ZERO,
            min_size: 8,
            max_size: 8,
            rdma_threshold: RDMA_THRESHOLD,
            dlvr: DlvrMode::PERFORMANCE,
            credits: 16,
            amo: AmoCmd::Fadd,
            report_all: false,
        }
    }
}

/// `gni-send-lat`: SMSG sends; latency to the send's local event.
pub fn send_lat(opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    run(Kind::Send, opts, out)
}

/// `gni-write-lat`: FMA PUT (BTE above the threshold); latency to the GLOBAL event.
pub fn write_lat(opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    run(Kind::Write, opts, out)
}

/// `gni-read-lat`: FMA GET (BTE above the threshold); latency to the GLOBAL event. Lengths
/// are rounded up to a multiple of 4 (Gemini GET rule).
pub fn read_lat(opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    run(Kind::Read, opts, out)
}

/// `gni-atomic-lat`: FMA AMOs on one 8-byte word; latency to the GLOBAL event.
pub fn atomic_lat(opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    run(Kind::Atomic, opts, out)
}

/// The operation of one iteration, built once per size.
enum Op {
    Send(Vec<u8>),
    Fma(PostDescriptor),
    Rdma(PostDescriptor),
}

fn build_op(kind: Kind, opts: &LatOptions, pair: &Pair, size: u64) -> ToolResult<Op> {
    let c = &pair.client;
    let rdma = size > opts.rdma_threshold;
    let mut d = match kind {
        Kind::Send => {
            let mut data = vec![0u8; size as usize];
            c.buf
                .read(0, &mut data)
                .map_err(userlib::gni::GniError::from)?;
            return Ok(Op::Send(data));
        }
        Kind::Write => put_desc(
            if rdma {
                PostType::RdmaPut
            } else {
                PostType::FmaPut
            },
            c.buf.va(),
            c.mh,
            pair.remote_va,
            pair.remote_mh,
            size,
        ),
        Kind::Read => put_desc(
            if rdma {
                PostType::RdmaGet
            } else {
                PostType::FmaGet
            },
            c.buf.va(),
            c.mh,
            pair.remote_va,
            pair.remote_mh,
            size.next_multiple_of(4),
        ),
        Kind::Atomic => {
            let local = opts.amo.is_fetching().then_some((c.buf.va() + 64, c.mh));
            let (op1, op2) = match opts.amo {
                AmoCmd::Cswap | AmoCmd::CswapC => (0, 0),
                _ => (1, 0),
            };
            amo_desc(opts.amo, local, pair.remote_va, pair.remote_mh, op1, op2)
        }
    };
    d.dlvr_mode = opts.dlvr;
    Ok(if d.post_type.is_rdma() {
        Op::Rdma(d)
    } else {
        Op::Fma(d)
    })
}

/// One iteration: post, wait for the completion; the latency in microseconds.
fn iteration(pair: &Pair, op: &Op, n: u64) -> ToolResult<f64> {
    let c = &pair.client;
    let t0 = Instant::now();
    match op {
        Op::Send(data) => loop {
            match c.ep.smsg_send(b"", data, n as u32) {
                Ok(()) => break,
                Err(e) if e.rc() == ReturnCode::NotDone => pair.service()?,
                Err(e) => return Err(e.into()),
            }
        },
        Op::Fma(d) => c.ep.post_fma(d)?,
        Op::Rdma(d) => c.ep.post_rdma(d)?,
    }
    c.wait_one("the operation")?;
    let t1 = Instant::now();
    if matches!(op, Op::Send(_)) {
        pair.service()?;
    }
    Ok((t1 - t0).as_secs_f64() * 1e6)
}

fn header(kind: Kind, opts: &LatOptions, pair: &Pair, out: &mut dyn Write) -> ToolResult<()> {
    let c = &pair.client;
    let s = &pair.server;
    writeln!(out, "{RULE}")?;
    writeln!(out, "    {}", kind.title("GNI", "SMSG Send", "Latency"))?;
    writeln!(out, "Device           : kgni{} (Gemini)", c.nic.device_id())?;
    writeln!(out, "Ptag / Cookie    : {} / {:#x}", pair.job.0, pair.job.1)?;
    writeln!(out, "Engine           : {}", engine_name(&opts.engine))?;
    match opts.duration {
        Some(d) => {
            writeln!(out, "Test Type        : Duration")?;
            writeln!(out, "Duration         : {} seconds", d.as_secs_f64())?;
        }
        None => {
            writeln!(out, "Test Type        : Iteration")?;
            writeln!(out, "Iterations       : {}", opts.iters)?;
        }
    }
    writeln!(out, "Warmup Iters     : {}", opts.warmup)?;
    writeln!(
        out,
        "Inter-Iter Gap   : {} microseconds",
        opts.gap.as_micros()
    )?;
    match kind {
        Kind::Atomic => {
            writeln!(
                out,
                "Atomic Op        : {:?} ({:#05x})",
                opts.amo,
                opts.amo.code()
            )?;
            writeln!(
                out,
                "Fetching         : {}",
                if opts.amo.is_fetching() {
                    "Enabled"
                } else {
                    "Disabled"
                }
            )?;
            writeln!(
                out,
                "AMO Cache        : {}",
                if opts.amo.is_cached() {
                    "Enabled (GNI_CDM_MODE_CACHED_AMO_ENABLED)"
                } else {
                    "Disabled"
                }
            )?;
        }
        _ if opts.min_size == opts.max_size => {
            writeln!(out, "Size             : {}", opts.min_size)?;
        }
        _ => {
            writeln!(out, "Min Size         : {}", opts.min_size)?;
            writeln!(out, "Max Size         : {}", opts.max_size)?;
        }
    }
    match kind {
        Kind::Send => writeln!(
            out,
            "SMSG Mailbox     : {} credits x {} B",
            pair.smsg.credits, pair.smsg.maxsize
        )?,
        Kind::Write | Kind::Read => writeln!(
            out,
            "Transfer         : FMA up to {} B, BTE above",
            opts.rdma_threshold
        )?,
        Kind::Atomic => writeln!(out, "Transfer         : FMA")?,
    }
    if kind == Kind::Read {
        writeln!(out, "GET Length       : rounded up to 4 B (Gemini)")?;
    }
    writeln!(out, "Delivery Mode    : {:#x}", opts.dlvr.bits())?;
    writeln!(
        out,
        "Results Reported : {}",
        if opts.report_all { "All" } else { "Summary" }
    )?;
    writeln!(
        out,
        "Local (client)   : PE {} Inst {} CQ {}",
        c.pe,
        c.inst,
        c.tx.id()
    )?;
    writeln!(out, "Remote (server)  : PE {} Inst {}", s.pe, s.inst)?;
    writeln!(out, "{RULE}")?;
    Ok(())
}

fn table_header(kind: Kind, out: &mut dyn Write) -> ToolResult<()> {
    writeln!(
        out,
        "{}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}",
        kind.size_col(),
        kind.count_col(),
        "Min[us]",
        "Max[us]",
        "Mean[us]",
        "StdDev[us]"
    )?;
    Ok(())
}

/// The communication domain mode the test needs: the `_C` AMOs go through the NIC's AMO
/// cache, which a CDM must enable (`GNI_CDM_MODE_CACHED_AMO_ENABLED`, gni_pub.h).
fn cdm_mode(kind: Kind, opts: &LatOptions) -> CdmMode {
    if kind == Kind::Atomic && opts.amo.is_cached() {
        CdmMode::CACHED_AMO_ENABLED
    } else {
        CdmMode::empty()
    }
}

fn run(kind: Kind, opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    if opts.iters == 0 && opts.duration.is_none() {
        return Err(ToolError::Option("need at least one iteration".into()));
    }
    let list = if kind == Kind::Atomic {
        vec![userlib::gni::amo::AMO_SIZE]
    } else {
        sizes(opts.min_size, opts.max_size)
    };
    let max = list.iter().copied().max().unwrap_or(8);
    if kind == Kind::Send && max > SMSG_MAX {
        return Err(ToolError::Option(format!(
            "SMSG messages carry at most {SMSG_MAX} bytes"
        )));
    }
    if opts.credits == 0 {
        return Err(ToolError::Option("SMSG needs at least one credit".into()));
    }
    let buf_len = max.next_multiple_of(4).max(4096).next_multiple_of(4096);
    let smsg = SmsgParams {
        credits: opts.credits,
        maxsize: if kind == Kind::Send { max as u32 } else { 64 },
    };
    let pair = Pair::new(&opts.engine, buf_len, smsg, 1024, cdm_mode(kind, opts))?;
    let pattern: Vec<u8> = (0..buf_len.min(1 << 20)).map(|i| (i % 253) as u8).collect();
    pair.client
        .buf
        .write(0, &pattern)
        .map_err(userlib::gni::GniError::from)?;
    header(kind, opts, &pair, out)?;
    if !opts.report_all {
        table_header(kind, out)?;
    }
    let mut results = Vec::with_capacity(list.len());
    let mut n = 0u64;
    for &size in &list {
        let op = build_op(kind, opts, &pair, size)?;
        for _ in 0..opts.warmup {
            iteration(&pair, &op, n)?;
            n += 1;
        }
        let mut us = Vec::with_capacity(opts.iters.min(1 << 20) as usize);
        let start = Instant::now();
        if opts.report_all {
            let c = kind.count_col();
            writeln!(
                out,
                "  {:>8}  {:>11}",
                format!("{}Num", &c[..c.len() - 1]),
                "Latency[us]"
            )?;
        }
        loop {
            // A timed run measures at least one iteration: a row is always a measurement.
            let more = match opts.duration {
                Some(d) => us.is_empty() || start.elapsed() < d,
                None => (us.len() as u64) < opts.iters,
            };
            if !more {
                break;
            }
            if !opts.gap.is_zero() {
                std::thread::sleep(opts.gap);
            }
            let t = iteration(&pair, &op, n)?;
            n += 1;
            if opts.report_all {
                writeln!(out, "  {:>8}  {:>11.3}", us.len(), t)?;
            }
            us.push(t);
        }
        let st = LatStats::of(&us);
        if opts.report_all {
            writeln!(out, "{RULE}")?;
            table_header(kind, out)?;
        }
        writeln!(
            out,
            "{:>w$}  {:>10}  {:>10.2}  {:>10.2}  {:>10.2}  {:>10.2}",
            size,
            st.count,
            st.min,
            st.max,
            st.mean,
            st.stddev,
            w = kind.size_col().len()
        )?;
        results.push((size, st));
    }
    writeln!(out, "{RULE}")?;
    Ok(results)
}
