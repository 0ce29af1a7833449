//! Bandwidth tools: `gni-send-bw`, `gni-write-bw`, `gni-read-bw`.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::progress::{Plan, Progress};

use firmware_spec::gemini::gni::{CdmMode, DlvrMode, PostType, ReturnCode};
use firmware_spec::gemini::post::PostDescriptor;
use platform::EngineKind;

use super::pair::{Pair, SmsgParams};
use super::{BwStats, OP_TIMEOUT, RDMA_THRESHOLD, SMSG_MAX, ToolError, ToolResult, packets, sizes};
use crate::cxi::ToolKind as Kind;
use crate::cxi::{RULE, engine_name};
use userlib::gni::GniError;
use userlib::gni::post::put_desc;

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
    /// Operations posted before waiting for their completions.
    pub list_size: u32,
    /// Writes and reads up to this size use FMA, larger ones the BTE.
    pub rdma_threshold: u64,
    /// Delivery mode of the posts.
    pub dlvr: DlvrMode,
    /// SMSG credits of the mailboxes (`gni-send-bw`).
    pub credits: u16,
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
            rdma_threshold: RDMA_THRESHOLD,
            dlvr: DlvrMode::PERFORMANCE,
            credits: 64,
            buf_size: 64 << 20,
            buf_align: 64,
            progress: false,
        }
    }
}

/// `gni-send-bw`: streams of SMSG sends (at most 65535 bytes each).
pub fn send_bw(opts: &BwOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, BwStats)>> {
    run(Kind::Send, opts, out)
}

/// `gni-write-bw`: streams of FMA PUTs (BTE above the threshold).
pub fn write_bw(opts: &BwOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, BwStats)>> {
    run(Kind::Write, opts, out)
}

/// `gni-read-bw`: streams of FMA GETs (BTE above the threshold); lengths rounded up to a
/// multiple of 4.
pub fn read_bw(opts: &BwOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, BwStats)>> {
    run(Kind::Read, opts, out)
}

struct Ctx<'a> {
    kind: Kind,
    opts: &'a BwOptions,
    span: u64,
    pair: Pair,
    msg: Vec<u8>,
    sent: u64,
}

impl Ctx<'_> {
    fn desc(&self, size: u64) -> PostDescriptor {
        let c = &self.pair.client;
        let rdma = size > self.opts.rdma_threshold;
        let ty = match (self.kind, rdma) {
            (Kind::Read, true) => PostType::RdmaGet,
            (Kind::Read, false) => PostType::FmaGet,
            (_, true) => PostType::RdmaPut,
            (_, false) => PostType::FmaPut,
        };
        let len = if self.kind == Kind::Read {
            size.next_multiple_of(4)
        } else {
            size
        };
        let mut d = put_desc(
            ty,
            c.buf.va(),
            c.mh,
            self.pair.remote_va,
            self.pair.remote_mh,
            len,
        );
        d.dlvr_mode = self.opts.dlvr;
        d
    }

    /// Post `list_size` operations of `size`, then wait until each has completed.
    fn iteration(&mut self, size: u64) -> ToolResult<()> {
        let o = self.opts;
        let list = u64::from(o.list_size);
        let align = o.buf_align.max(4);
        let stride = size.next_multiple_of(align);
        let per_span = (self.span / stride).max(1);
        let base = self.desc(size);
        if self.kind == Kind::Send && self.msg.len() as u64 != size {
            self.msg = vec![0u8; size as usize];
            self.pair
                .client
                .buf
                .read(0, &mut self.msg)
                .map_err(GniError::from)?;
        }
        // The tool gives up when no operation completed for OP_TIMEOUT (not when the whole
        // list took longer: a long list on a loaded host is slow, not stuck).
        let mut waiting = Waiting::new();
        let c = &self.pair.client;
        let (mut posted, mut done) = (0u64, 0u64);
        while posted < list {
            let off = (posted % per_span) * stride;
            let r = match self.kind {
                Kind::Send => c.ep.smsg_send(b"", &self.msg, self.sent as u32),
                _ => {
                    let mut d = base;
                    d.local_addr += off;
                    d.remote_addr += off;
                    if d.post_type.is_rdma() {
                        c.ep.post_rdma(&d)
                    } else {
                        c.ep.post_fma(&d)
                    }
                }
            };
            match r {
                Ok(()) => {
                    posted += 1;
                    self.sent += 1;
                    if posted.is_multiple_of(16) {
                        done += waiting.count(c.consume()?);
                    }
                }
                Err(e) if matches!(e.rc(), ReturnCode::NotDone | ReturnCode::ErrorResource) => {
                    if waiting.timed_out() {
                        return Err(e.into());
                    }
                    done += waiting.count(c.consume()?);
                    self.pair.service_stalled()?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        while done < list {
            done += waiting.count(c.consume()?);
            if done < list {
                if waiting.timed_out() {
                    return Err(ToolError::Option(format!(
                        "only {done} of {list} operations completed (none for {} s)",
                        OP_TIMEOUT.map_or(0, |t| t.as_secs())
                    )));
                }
                self.pair.service()?;
            }
        }
        if self.kind == Kind::Send {
            self.pair.service_stalled()?;
        }
        Ok(())
    }
}

/// The wait for one operation: [`OP_TIMEOUT`] from the start of the list or the last
/// completion.
struct Waiting(Option<Instant>);

impl Waiting {
    fn new() -> Self {
        Waiting(OP_TIMEOUT.and_then(|t| Instant::now().checked_add(t)))
    }

    /// An operation completed: the wait starts again.
    fn progress(&mut self) {
        *self = Waiting::new();
    }

    /// `n` operations completed (restarts the wait if `n > 0`); returns `n`.
    fn count(&mut self, n: u64) -> u64 {
        if n > 0 {
            self.progress();
        }
        n
    }

    fn timed_out(&self) -> bool {
        self.0.is_some_and(|d| Instant::now() >= d)
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
    writeln!(out, "{RULE}")?;
    writeln!(out, "    {}", kind.title("GNI", "SMSG Send", "Bandwidth"))?;
    writeln!(out, "Device           : kgni{} (Gemini)", c.nic.device_id())?;
    writeln!(out, "Ptag / Cookie    : {} / {:#x}", pair.job.0, pair.job.1)?;
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
    if kind == Kind::Send {
        writeln!(
            out,
            "SMSG Mailbox     : {} credits x {} B",
            pair.smsg.credits, pair.smsg.maxsize
        )?;
    } else {
        writeln!(
            out,
            "Transfer         : FMA up to {} B, BTE above",
            o.rdma_threshold
        )?;
        writeln!(out, "Max RDMA Buf     : {} ({span} used)", o.buf_size)?;
        writeln!(out, "RDMA Buf Align   : {}", o.buf_align.max(4))?;
    }
    if kind == Kind::Read {
        writeln!(out, "GET Length       : rounded up to 4 B (Gemini)")?;
    }
    writeln!(out, "Delivery Mode    : {:#x}", o.dlvr.bits())?;
    writeln!(
        out,
        "Packet Payload   : {} B (PktRate)",
        super::PACKET_PAYLOAD
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

fn run(kind: Kind, o: &BwOptions, out: &mut dyn Write) -> ToolResult<Vec<(u64, BwStats)>> {
    if o.list_size == 0 || (o.iters == 0 && o.duration.is_none()) {
        return Err(ToolError::Option(
            "need a list size and at least one iteration".into(),
        ));
    }
    if o.credits == 0 {
        return Err(ToolError::Option("SMSG needs at least one credit".into()));
    }
    let list = sizes(o.min_size, o.max_size);
    let max = list.iter().copied().max().unwrap_or(1);
    if kind == Kind::Send && max > SMSG_MAX {
        return Err(ToolError::Option(format!(
            "SMSG messages carry at most {SMSG_MAX} bytes (use a smaller --size)"
        )));
    }
    crate::cxi::check_buffer(o.buf_size, o.buf_align, max).map_err(ToolError::Option)?;
    let align = o.buf_align.max(4);
    let want = max
        .next_multiple_of(align)
        .saturating_mul(u64::from(o.list_size));
    let span = want
        .min(o.buf_size.max(max.next_multiple_of(align)))
        .max(4096)
        .next_multiple_of(4096);
    let smsg = SmsgParams {
        credits: o.credits,
        maxsize: if kind == Kind::Send { max as u32 } else { 64 },
    };
    let cq_entries = (2 * o.list_size).max(1024) + 64;
    let pair = Pair::new(&o.engine, span, smsg, cq_entries, CdmMode::empty())?;
    let pattern: Vec<u8> = (0..span.min(1 << 20)).map(|i| (i % 251) as u8).collect();
    pair.client.buf.write(0, &pattern).map_err(GniError::from)?;
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
        span,
        pair,
        msg: Vec::new(),
        sent: 0,
    };
    let mut results = Vec::with_capacity(list.len());
    let progress = Progress::new(kind.bw_tool(true), o.progress);
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
        let st = BwStats {
            ops,
            mb_per_s: (ops * size) as f64 / secs / 1e6,
            mpkt_per_s: (ops * packets(size)) as f64 / secs / 1e6,
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
