//! Bandwidth tools: `send-bw`, `write-bw`, `read-bw`.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::progress::{Plan, Progress};

use firmware_spec::cassini::cmd::{CState, DmaFlags, DmaOp, FullDma, IdcMsg, IdcPut, Payload};
use firmware_spec::cassini::limits::{C_MAX_IDC_PAYLOAD_RES, C_MAX_IDC_PAYLOAD_UNR};
use platform::EngineKind;

use super::ToolKind as Kind;
use super::pair::{MSG_INDEX, Pair, RMA_INDEX, VNI};
use super::{
    BwStats, OP_TIMEOUT, PORTALS_MTU, RULE, ToolError, ToolResult, engine_name, failure_codes,
    sizes,
};
use firmware_spec::cassini::status::CtWriteback;
use userlib::cxi::{CxiError, ct::Ct};

/// Options of the bandwidth tools.
#[derive(Clone, Debug)]
pub struct BwOptions {
    /// Engine driving the pair (threaded by default).
    pub engine: EngineKind,
    /// Iterations per size (each `list_size` operations), ignored with `duration`.
    pub iters: u64,
    /// Run each size for this long instead of `iters`.
    pub duration: Option<Duration>,
    /// Smallest size (bytes).
    pub min_size: u64,
    /// Largest size (bytes).
    pub max_size: u64,
    /// Operations written per doorbell.
    pub list_size: u32,
    /// Use IDC commands where the payload fits.
    pub idc: bool,
    /// Restricted writes and reads (sends are always unrestricted).
    pub restricted: bool,
    /// Largest data buffer on each side; offsets wrap inside it.
    pub buf_size: u64,
    /// Alignment of the operations in the buffers.
    pub buf_align: u64,
    /// Progress on stderr (the caller's choice: when stderr is a terminal).
    pub progress: bool,
}

impl Default for BwOptions {
    fn default() -> Self {
        BwOptions {
            engine: EngineKind::Threaded,
            iters: 10,
            duration: None,
            min_size: 65536,
            max_size: 65536,
            list_size: 256,
            idc: true,
            restricted: true,
            buf_size: 64 << 20,
            buf_align: 64,
            progress: false,
        }
    }
}

/// `cxi_send_bw`: tagged sends to a matching PtlTE.
pub fn send_bw(opts: &BwOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, BwStats)>> {
    run(Kind::Send, opts, out)
}

/// `cxi_write_bw`: RDMA writes to a non-matching PtlTE.
pub fn write_bw(opts: &BwOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, BwStats)>> {
    run(Kind::Write, opts, out)
}

/// `cxi_read_bw`: RDMA reads from a non-matching PtlTE.
pub fn read_bw(opts: &BwOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, BwStats)>> {
    run(Kind::Read, opts, out)
}

/// Ring slots of the client queue: a list of the largest commands, twice over.
fn cq_slots(list: u32) -> u32 {
    (list.saturating_mul(8))
        .clamp(256, 65536)
        .next_power_of_two()
}

struct Ctx<'a> {
    kind: Kind,
    opts: &'a BwOptions,
    /// Before `pair`: freed while the device is still there.
    ct: Ct,
    /// Completions counted so far.
    expected: u64,
    span: u64,
    pair: Pair,
}

impl Ctx<'_> {
    /// Write `list_size` operations of `size`, ring once, wait until the CT has counted
    /// them all.
    fn iteration(&mut self, size: u64) -> ToolResult<()> {
        let kind = self.kind;
        let o = self.opts;
        let c = &mut self.pair.client;
        let s = &self.pair.server;
        let index = if kind == Kind::Send {
            MSG_INDEX
        } else {
            RMA_INDEX
        };
        let (dfa, index_ext) = s.dfa(index);
        let restricted = o.restricted && kind != Kind::Send;
        let flags = DmaFlags {
            event_send_disable: true,
            event_success_disable: true,
            event_ct_ack: kind != Kind::Read,
            event_ct_reply: kind == Kind::Read,
            restricted,
            ..DmaFlags::default()
        };
        let ctn = self.ct.ctn();
        let cstate = CState {
            write_lac: c.md.lac(),
            flags,
            initiator: c.match_id(),
            index_ext,
            user_ptr: 0,
            ct: ctn,
            eq: (c.eq.eqn() & 0x7FF) as u16,
        };
        let idc_max = if restricted {
            C_MAX_IDC_PAYLOAD_RES
        } else {
            C_MAX_IDC_PAYLOAD_UNR
        } as u64;
        let idc_max = if kind == Kind::Send {
            C_MAX_IDC_PAYLOAD_UNR as u64
        } else {
            idc_max
        };
        let use_idc = o.idc && kind != Kind::Read && size <= idc_max;
        let stride = size.next_multiple_of(o.buf_align);
        let per_span = (self.span / stride).max(1);
        let len = u32::try_from(size).map_err(|_| ToolError::Option("size above 4 GiB".into()))?;
        let payload = if use_idc {
            let mut data = vec![0u8; size as usize];
            c.buf.read(0, &mut data).map_err(CxiError::from)?;
            Some(Payload::new(&data).map_err(CxiError::from)?)
        } else {
            None
        };
        for i in 0..u64::from(o.list_size) {
            let off = (i % per_span) * stride;
            loop {
                let r = match (&payload, kind) {
                    (Some(p), Kind::Send) => c.txq.emit_idc_msg(
                        &cstate,
                        &IdcMsg {
                            dfa,
                            match_bits: 0x5e4d,
                            header_data: 0,
                            user_ptr: 0,
                            payload: *p,
                        },
                    ),
                    (Some(p), _) => c.txq.emit_idc_put(
                        &cstate,
                        &IdcPut {
                            dfa,
                            remote_offset: off,
                            payload: *p,
                        },
                    ),
                    (None, _) => c.txq.emit_dma(&FullDma {
                        opcode: if kind == Kind::Read {
                            DmaOp::Get
                        } else {
                            DmaOp::Put
                        },
                        index_ext,
                        lac: c.md.lac(),
                        flags,
                        dfa,
                        remote_offset: off,
                        local_addr: c.md.iova() + off,
                        request_len: len,
                        ct: ctn,
                        eq: cstate.eq,
                        initiator: c.match_id(),
                        match_bits: 0x5e4d,
                        ..FullDma::default()
                    }),
                };
                match r {
                    Ok(()) => break,
                    Err(CxiError::Again) => {
                        c.txq.ring()?;
                        c.dev.progress();
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        c.txq.ring()?;
        self.expected += u64::from(o.list_size);
        let wb = wait_progressing(&self.ct, self.expected)?;
        if wb.ct_failure != 0 {
            return Err(ToolError::Failed {
                count: wb.ct_failure.into(),
                why: failure_codes(&mut c.eq),
            });
        }
        Ok(())
    }
}

/// Wait until `ct` counts `expected` successes (or any failure), giving up only when it
/// has not moved for [`OP_TIMEOUT`]: a long list on a loaded host is slow, not stuck.
fn wait_progressing(ct: &Ct, expected: u64) -> ToolResult<CtWriteback> {
    let Some(limit) = OP_TIMEOUT else {
        return Ok(ct.wait(expected, None)?);
    };
    let slice = limit.min(Duration::from_secs(1));
    let mut seen = ct.writeback()?.ct_success;
    let mut since = Instant::now();
    loop {
        match ct.wait(expected, Some(slice)) {
            Ok(wb) => return Ok(wb),
            Err(CxiError::Timeout) => {
                let now = ct.writeback()?.ct_success;
                if now != seen {
                    seen = now;
                    since = Instant::now();
                } else if since.elapsed() >= limit {
                    return Err(CxiError::Timeout.into());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn header(
    kind: Kind,
    o: &BwOptions,
    pair: &Pair,
    span: u64,
    out: &mut dyn Write,
) -> ToolResult<()> {
    let c = &pair.client;
    let s = &pair.server;
    let on = |b: bool| if b { "Enabled" } else { "Disabled" };
    writeln!(out, "{RULE}")?;
    writeln!(out, "    {}", kind.title("CXI", "Send", "Bandwidth"))?;
    writeln!(out, "Device           : {}", c.dev.info().device_name)?;
    writeln!(
        out,
        "Service ID       : {}",
        userlib::cxi::CXI_DEFAULT_SVC_ID
    )?;
    writeln!(out, "Engine           : {}", engine_name(&o.engine))?;
    match o.duration {
        Some(d) => {
            writeln!(out, "Test Type        : Duration")?;
            writeln!(out, "Duration         : {} seconds", d.as_secs_f64())?;
        }
        None => {
            writeln!(out, "Test Type        : Iteration")?;
            writeln!(out, "Iterations       : {}", o.iters)?;
        }
    }
    if o.min_size == o.max_size {
        writeln!(out, "Size             : {}", o.min_size)?;
    } else {
        writeln!(out, "Min Size         : {}", o.min_size)?;
        writeln!(out, "Max Size         : {}", o.max_size)?;
    }
    writeln!(out, "List Size        : {}", o.list_size)?;
    writeln!(
        out,
        "IDC              : {}",
        on(o.idc && kind != Kind::Read)
    )?;
    if kind != Kind::Send {
        writeln!(out, "Restricted       : {}", on(o.restricted))?;
    }
    writeln!(out, "Max RDMA Buf     : {} ({span} used)", o.buf_size)?;
    writeln!(out, "RDMA Buf Align   : {}", o.buf_align)?;
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

fn run(kind: Kind, o: &BwOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, BwStats)>> {
    if o.list_size == 0 || (o.iters == 0 && o.duration.is_none()) {
        return Err(ToolError::Option(
            "need a list size and at least one iteration".into(),
        ));
    }
    let list = sizes(o.min_size, o.max_size);
    let max = list.iter().copied().max().unwrap_or(1);
    super::check_buffer(o.buf_size, o.buf_align, max).map_err(ToolError::Option)?;
    let want = max
        .next_multiple_of(o.buf_align)
        .saturating_mul(u64::from(o.list_size));
    let span = want.min(o.buf_size).max(4096).next_multiple_of(4096);
    let pair = Pair::new(&o.engine, span, cq_slots(o.list_size))?;
    let pattern: Vec<u8> = (0..span.min(1 << 20)).map(|i| (i % 251) as u8).collect();
    pair.client.buf.write(0, &pattern).map_err(CxiError::from)?;
    let wb = pair.client.dev.alloc_buffer(4096)?;
    let ct = pair.client.lni.alloc_ct(&wb, 0)?;
    header(kind, o, &pair, span, out)?;
    writeln!(
        out,
        "{}  {:>10}  {:>10}  {:>15}",
        kind.size_col(),
        kind.count_col(),
        "BW[MB/s]",
        "PktRate[Mpkt/s]"
    )?;
    let mut ctx = Ctx {
        kind,
        opts: o,
        pair,
        ct,
        expected: 0,
        span,
    };
    let mut results = Vec::with_capacity(list.len());
    let progress = Progress::new(kind.bw_tool(false), o.progress);
    let plan = match o.duration {
        Some(d) => Plan::Duration(d),
        None => Plan::Iterations(o.iters),
    };
    for &size in &list {
        // One unmeasured iteration.
        ctx.iteration(size)?;
        let start = Instant::now();
        let mut iters = 0u64;
        loop {
            // A timed run measures at least one iteration: a row is always a measurement.
            let more = match o.duration {
                Some(d) => iters == 0 || start.elapsed() < d,
                None => iters < o.iters,
            };
            if !more {
                break;
            }
            ctx.iteration(size)?;
            iters += 1;
            progress.show(size, iters, o.list_size, plan, start.elapsed());
        }
        progress.finish();
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        let ops = iters * u64::from(o.list_size);
        let pkts = ops * size.div_ceil(PORTALS_MTU).max(1);
        let st = BwStats {
            ops,
            mb_per_s: (ops * size) as f64 / secs / 1e6,
            mpkt_per_s: pkts as f64 / secs / 1e6,
        };
        writeln!(
            out,
            "{:>w$}  {:>10}  {:>10.2}  {:>15.6}",
            size,
            st.ops,
            st.mb_per_s,
            st.mpkt_per_s,
            w = kind.size_col().len()
        )?;
        results.push((size, st));
    }
    writeln!(out, "{RULE}")?;
    Ok(results)
}
