//! Latency tools: `send-lat`, `write-lat`, `read-lat`, `atomic-lat`.

use std::io::Write;
use std::time::{Duration, Instant};

use firmware_spec::cassini::amo::{AmoOp, AmoType, CswapOp};
use firmware_spec::cassini::cmd::{
    CState, DmaAmo, DmaFlags, DmaOp, FullDma, IdcAmo, IdcMsg, IdcPut, Payload,
};
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::limits::{C_MAX_IDC_PAYLOAD_RES, C_MAX_IDC_PAYLOAD_UNR};
use firmware_spec::cassini::rc::ReturnCode;
use platform::EngineKind;

use super::ToolKind as Kind;
use super::pair::{MSG_INDEX, Pair, RMA_INDEX, Side, VNI};
use super::{LatStats, OP_TIMEOUT, RULE, ToolError, ToolResult, engine_name, sizes};

/// Options of the latency tools (the `cxi_*_lat` options that make sense here).
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
    /// Use IDC commands where the payload fits (192 B unrestricted, 224 B restricted).
    pub idc: bool,
    /// Restricted writes, reads and atomics (sends are always unrestricted).
    pub restricted: bool,
    /// Launch through the low-latency windows.
    pub ll: bool,
    /// Print every measurement.
    pub report_all: bool,
    /// `atomic-lat`: the operation.
    pub atomic_op: AmoOp,
    /// `atomic-lat`: the operand type.
    pub atomic_type: AmoType,
    /// `atomic-lat`: the CSWAP comparison.
    pub cswap_op: CswapOp,
    /// `atomic-lat`: fetching (wait for the REPLY carrying the old value).
    pub fetching: bool,
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
            idc: true,
            restricted: true,
            ll: true,
            report_all: false,
            atomic_op: AmoOp::Sum,
            atomic_type: AmoType::Uint64,
            cswap_op: CswapOp::Eq,
            fetching: false,
        }
    }
}

/// `cxi_send_lat`: tagged sends to a matching PtlTE; latency to the ACK.
pub fn send_lat(opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    run(Kind::Send, opts, out)
}

/// `cxi_write_lat`: RDMA writes to a non-matching PtlTE; latency to the ACK.
pub fn write_lat(opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    run(Kind::Write, opts, out)
}

/// `cxi_read_lat`: RDMA reads from a non-matching PtlTE; latency to the REPLY.
pub fn read_lat(opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    run(Kind::Read, opts, out)
}

/// `cxi_atomic_lat`: AMOs on a non-matching PtlTE; latency to the ACK (REPLY if fetching).
pub fn atomic_lat(opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    run(Kind::Atomic, opts, out)
}

/// The command of one iteration, built once per size.
enum Op {
    Msg(CState, IdcMsg),
    Put(CState, IdcPut),
    Amo(CState, IdcAmo),
    Dma(FullDma),
    DmaAmo(DmaAmo),
}

fn build_op(kind: Kind, opts: &LatOptions, pair: &Pair, size: u64) -> ToolResult<Op> {
    let c = &pair.client;
    let s = &pair.server;
    let index = if kind == Kind::Send {
        MSG_INDEX
    } else {
        RMA_INDEX
    };
    let (dfa, index_ext) = s.dfa(index);
    let restricted = opts.restricted && kind != Kind::Send;
    let flags = DmaFlags {
        event_send_disable: true,
        restricted,
        ..DmaFlags::default()
    };
    let cstate = CState {
        write_lac: c.md.lac(),
        flags,
        initiator: c.match_id(),
        index_ext,
        user_ptr: 0,
        ct: 0,
        eq: (c.eq.eqn() & 0x7FF) as u16,
    };
    let local = c.md.iova();
    let len = u32::try_from(size).map_err(|_| ToolError::Option("size above 4 GiB".into()))?;
    let dma = FullDma {
        opcode: if kind == Kind::Read {
            DmaOp::Get
        } else {
            DmaOp::Put
        },
        index_ext,
        lac: c.md.lac(),
        flags,
        dfa,
        remote_offset: 0,
        local_addr: local,
        request_len: len,
        eq: cstate.eq,
        initiator: c.match_id(),
        match_bits: 0x5e4d,
        ..FullDma::default()
    };
    let idc_max = if restricted {
        C_MAX_IDC_PAYLOAD_RES
    } else {
        C_MAX_IDC_PAYLOAD_UNR
    } as u64;
    let payload = || -> ToolResult<Payload> {
        let mut data = vec![0u8; size as usize];
        c.buf
            .read(0, &mut data)
            .map_err(userlib::cxi::CxiError::from)?;
        Payload::new(&data).map_err(|e| ToolError::Cxi(e.into()))
    };
    Ok(match kind {
        Kind::Send if opts.idc && size <= C_MAX_IDC_PAYLOAD_UNR as u64 => Op::Msg(
            cstate,
            IdcMsg {
                dfa,
                match_bits: 0x5e4d,
                header_data: 0,
                user_ptr: 0,
                payload: payload()?,
            },
        ),
        Kind::Write if opts.idc && size <= idc_max => Op::Put(
            cstate,
            IdcPut {
                dfa,
                remote_offset: 0,
                payload: payload()?,
            },
        ),
        Kind::Send | Kind::Write | Kind::Read => Op::Dma(dma),
        Kind::Atomic => {
            let opcode = if opts.fetching {
                DmaOp::FetchingAtomic
            } else {
                DmaOp::Atomic
            };
            if opts.idc {
                Op::Amo(
                    cstate,
                    IdcAmo {
                        opcode,
                        dfa,
                        remote_offset: 0,
                        local_addr: local + 64,
                        atomic_op: opts.atomic_op,
                        atomic_type: opts.atomic_type,
                        cswap_op: opts.cswap_op,
                        op1_word1: 1,
                        op1_word2: 0,
                        op2_word1: 0,
                        op2_word2: 0,
                    },
                )
            } else {
                Op::DmaAmo(DmaAmo {
                    opcode,
                    index_ext,
                    lac: c.md.lac(),
                    flags,
                    dfa,
                    local_read_addr: local,
                    eq: cstate.eq,
                    initiator: c.match_id(),
                    local_write_addr: local + 64,
                    atomic_op: opts.atomic_op,
                    atomic_type: opts.atomic_type,
                    cswap_op: opts.cswap_op,
                    write_lac: c.md.lac(),
                    ..DmaAmo::default()
                })
            }
        }
    })
}

fn emit(c: &mut Side, op: &Op) -> ToolResult<()> {
    match op {
        Op::Msg(cs, m) => c.txq.emit_idc_msg(cs, m)?,
        Op::Put(cs, p) => c.txq.emit_idc_put(cs, p)?,
        Op::Amo(cs, a) => c.txq.emit_idc_amo(cs, a)?,
        Op::Dma(d) => c.txq.emit_dma(d)?,
        Op::DmaAmo(a) => c.txq.emit_dma_amo(a)?,
    }
    Ok(())
}

/// The event that completes an operation of `kind`.
fn completion(kind: Kind, opts: &LatOptions) -> EventType {
    match kind {
        Kind::Read => EventType::Reply,
        Kind::Atomic if opts.fetching => EventType::Reply,
        _ => EventType::Ack,
    }
}

/// Events between two acknowledgements of the client EQ.
const ACK_BATCH: u64 = 16;

/// One iteration: write, launch, wait for the completion; the latency in microseconds.
fn iteration(c: &mut Side, op: &Op, want: EventType, ll: bool, done: &mut u64) -> ToolResult<f64> {
    let t0 = Instant::now();
    emit(c, op)?;
    if ll {
        c.txq.ll_ring()?;
    } else {
        c.txq.ring()?;
    }
    let ev: Event = c.eq.poll(OP_TIMEOUT)?;
    let t1 = Instant::now();
    *done += 1;
    if (*done).is_multiple_of(ACK_BATCH) {
        c.eq.ack()?;
    }
    if ev.event_type() != want || ev.return_code() != ReturnCode::Ok {
        return Err(ToolError::Completion {
            op: if ev.event_type() == EventType::CommandFailure {
                "a command"
            } else {
                "the operation"
            },
            rc: ev.return_code(),
        });
    }
    Ok((t1 - t0).as_secs_f64() * 1e6)
}

fn header(kind: Kind, opts: &LatOptions, pair: &Pair, out: &mut dyn Write) -> ToolResult<()> {
    let c = &pair.client;
    let s = &pair.server;
    let on = |b: bool| if b { "Enabled" } else { "Disabled" };
    writeln!(out, "{RULE}")?;
    writeln!(out, "    {}", kind.title("CXI", "Send", "Latency"))?;
    writeln!(out, "Device           : {}", c.dev.info().device_name)?;
    writeln!(
        out,
        "Service ID       : {}",
        userlib::cxi::CXI_DEFAULT_SVC_ID
    )?;
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
    if kind == Kind::Atomic {
        writeln!(out, "Atomic Op        : {}", opts.atomic_op)?;
        if opts.atomic_op == AmoOp::Cswap {
            writeln!(out, "CSWAP Op         : {}", opts.cswap_op)?;
        }
        writeln!(out, "Atomic Type      : {}", opts.atomic_type)?;
        writeln!(out, "Fetching         : {}", on(opts.fetching))?;
    } else if opts.min_size == opts.max_size {
        writeln!(out, "Size             : {}", opts.min_size)?;
    } else {
        writeln!(out, "Min Size         : {}", opts.min_size)?;
        writeln!(out, "Max Size         : {}", opts.max_size)?;
    }
    writeln!(
        out,
        "IDC              : {}",
        on(opts.idc && kind != Kind::Read)
    )?;
    if kind != Kind::Send {
        writeln!(out, "Restricted       : {}", on(opts.restricted))?;
    }
    writeln!(out, "LL Cmd Launch    : {}", on(opts.ll))?;
    writeln!(
        out,
        "Results Reported : {}",
        if opts.report_all { "All" } else { "Summary" }
    )?;
    writeln!(
        out,
        "Local (client)   : NIC {:#x} PID {} VNI {VNI}",
        c.nid,
        c.domain.pid()
    )?;
    writeln!(
        out,
        "Remote (server)  : NIC {:#x} PID {}",
        s.nid,
        s.domain.pid()
    )?;
    writeln!(out, "{RULE}")?;
    Ok(())
}

fn run(kind: Kind, opts: &LatOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, LatStats)>> {
    if opts.iters == 0 && opts.duration.is_none() {
        return Err(ToolError::Option("need at least one iteration".into()));
    }
    let list = if kind == Kind::Atomic {
        vec![opts.atomic_type.size() as u64]
    } else {
        sizes(opts.min_size, opts.max_size)
    };
    let max = list.iter().copied().max().unwrap_or(8);
    let buf_len = max.max(4096).next_multiple_of(4096);
    let mut pair = Pair::new(&opts.engine, buf_len, 256)?;
    let pattern: Vec<u8> = (0..buf_len.min(1 << 20)).map(|i| (i % 253) as u8).collect();
    pair.client
        .buf
        .write(0, &pattern)
        .map_err(userlib::cxi::CxiError::from)?;
    header(kind, opts, &pair, out)?;
    let want = completion(kind, opts);
    let mut results = Vec::with_capacity(list.len());
    let mut done = 0u64;
    if !opts.report_all {
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
    }
    for &size in &list {
        let op = build_op(kind, opts, &pair, size)?;
        for _ in 0..opts.warmup {
            iteration(&mut pair.client, &op, want, opts.ll, &mut done)?;
        }
        let mut us = Vec::with_capacity(opts.iters.min(1 << 20) as usize);
        let start = Instant::now();
        if opts.report_all {
            writeln!(
                out,
                "  {:>8}  {:>11}",
                format!("{}Num", &kind.count_col()[..kind.count_col().len() - 1]),
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
            let t = iteration(&mut pair.client, &op, want, opts.ll, &mut done)?;
            if opts.report_all {
                writeln!(out, "  {:>8}  {:>11.3}", us.len(), t)?;
            }
            us.push(t);
        }
        let st = LatStats::of(&us);
        if opts.report_all {
            writeln!(out, "{RULE}")?;
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
    pair.client.eq.ack()?;
    writeln!(out, "{RULE}")?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A low-latency launch is one write-combined burst: the engine sees one MMIO store per
    /// launch, like a doorbell, instead of one per 64-bit word of the command.
    #[test]
    fn a_low_latency_launch_is_one_mmio_access() {
        for engine in [EngineKind::Deterministic { seed: 3 }, EngineKind::Threaded] {
            let opts = LatOptions {
                engine: engine.clone(),
                ..LatOptions::default()
            };
            let mut pair = Pair::new(&engine, 4096, 64).unwrap();
            let op = build_op(Kind::Send, &opts, &pair, 8).unwrap();
            let want = completion(Kind::Send, &opts);
            let mut done = 0;
            for ll in [true, false, true] {
                let before = pair.cluster().engine().counters().mmio_writes;
                iteration(&mut pair.client, &op, want, ll, &mut done).unwrap();
                let after = pair.cluster().engine().counters().mmio_writes;
                assert_eq!(after - before, 1, "ll {ll} on {engine:?}");
            }
            assert_eq!(done, 3);
        }
    }
}
