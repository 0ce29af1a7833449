//! The Cassini user tools (`tools::cxi::cxi`) as subcommands: `stat`, `dump-csrs`,
//! `send-lat`, `write-lat`, `read-lat`, `atomic-lat`, `send-bw`, `write-bw`, `read-bw`, each
//! over an emulated pair of Cassinis, with the options of the HPE `cxi_*` utilities.

use std::io::{IsTerminal, Write};

use clap::Args;
use firmware_spec::cassini::amo::{AmoOp, AmoType, CswapOp};
use tools::cxi::{BwOptions, DumpOptions, LatOptions, StatOptions};

use crate::args;
use crate::tool_args::{BwRun, EngineArgs, LatRun};

/// Bytes a default list keeps in flight at most.
const DEFAULT_LIST_BYTES: u64 = 64 << 20;

/// The HPE tools' default list of 256 operations, shortened so that a list of the largest
/// size moves at most [`DEFAULT_LIST_BYTES`].
fn default_list_size(max_size: u64) -> u32 {
    (DEFAULT_LIST_BYTES / max_size.max(1)).clamp(1, 256) as u32
}

/// `nicemu stat`.
#[derive(Args, Clone, Debug)]
pub struct StatArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Also print the non-zero hardware counters.
    #[arg(long)]
    counters: bool,
}

/// `nicemu dump-csrs`.
#[derive(Args, Clone, Debug)]
pub struct DumpArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Node of the pair whose device is dumped (0 or 1).
    #[arg(long, default_value_t = 0)]
    node: usize,
    /// Only CSRs whose name contains this.
    #[arg(long)]
    grep: Option<String>,
    /// Entries dumped per CSR array.
    #[arg(long, default_value_t = 1)]
    max_entries: u32,
    /// Decode the fields of each entry.
    #[arg(long)]
    fields: bool,
}

/// Options of every latency tool (`cxi_atomic_lat` takes no `--size`: the size is the
/// operand type's).
#[derive(Args, Clone, Debug)]
pub struct LatCommon {
    #[command(flatten)]
    run: LatRun,
    /// Unrestricted writes/reads/atomics (restricted by default).
    #[arg(long)]
    unrestricted: bool,
    /// Do not use IDC commands.
    #[arg(long)]
    no_idc: bool,
    /// Do not use low-latency command launch.
    #[arg(long)]
    no_ll: bool,
}

/// Options of `send-lat`, `write-lat` and `read-lat`.
#[derive(Args, Clone, Debug)]
pub struct LatArgs {
    #[command(flatten)]
    common: LatCommon,
    /// Size or MIN:MAX range (powers of two in between), e.g. 8 or 1:4M.
    #[arg(short = 's', long, value_parser = args::tool_size_range, default_value = "8")]
    size: (u64, u64),
}

impl LatArgs {
    fn options(&self) -> LatOptions {
        LatOptions {
            min_size: self.size.0,
            max_size: self.size.1,
            ..self.common.options()
        }
    }
}

impl LatCommon {
    fn options(&self) -> LatOptions {
        let r = &self.run;
        LatOptions {
            engine: r.engine.kind(),
            iters: r.iters,
            duration: r.duration,
            warmup: r.warmup,
            gap: r.latency_gap,
            idc: !self.no_idc,
            restricted: !self.unrestricted,
            ll: !self.no_ll,
            report_all: r.report_all,
            ..LatOptions::default()
        }
    }
}

fn parse_amo_op(s: &str) -> Result<AmoOp, String> {
    AmoOp::ALL
        .iter()
        .copied()
        .find(|o| o.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| format!("unknown atomic op '{s}'"))
}

fn parse_amo_type(s: &str) -> Result<AmoType, String> {
    AmoType::ALL
        .iter()
        .copied()
        .find(|t| {
            t.name().eq_ignore_ascii_case(s)
                || t.name().trim_end_matches("_T").eq_ignore_ascii_case(s)
        })
        .ok_or_else(|| format!("unknown atomic type '{s}'"))
}

fn parse_cswap_op(s: &str) -> Result<CswapOp, String> {
    CswapOp::ALL
        .iter()
        .copied()
        .find(|o| o.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| format!("unknown CSWAP op '{s}'"))
}

/// Options of `atomic-lat`.
#[derive(Args, Clone, Debug)]
pub struct AtomicLatArgs {
    #[command(flatten)]
    lat: LatCommon,
    /// Atomic operation (MIN, MAX, SUM, LOR, LAND, BOR, BAND, LXOR, BXOR, SWAP, CSWAP, AXOR).
    #[arg(long, value_parser = parse_amo_op, default_value = "SUM")]
    atomic_op: AmoOp,
    /// Operand type (INT8 .. UINT64, FLOAT, DOUBLE, FLOAT_COMPLEX, DOUBLE_COMPLEX, UINT128).
    #[arg(long, value_parser = parse_amo_type, default_value = "UINT64")]
    atomic_type: AmoType,
    /// CSWAP comparison (EQ, NE, LE, LT, GE, GT).
    #[arg(long, value_parser = parse_cswap_op, default_value = "EQ")]
    cswap_op: CswapOp,
    /// Fetching atomics.
    #[arg(long)]
    fetching: bool,
}

/// Options of the bandwidth tools.
#[derive(Args, Clone, Debug)]
pub struct BwArgs {
    #[command(flatten)]
    run: BwRun,
    /// Size or MIN:MAX range, e.g. 64K or 1:4M.
    #[arg(short = 's', long, value_parser = args::tool_size_range, default_value = "65536")]
    size: (u64, u64),
    /// Operations written per doorbell [default: 256, fewer for large sizes so that at most
    /// 64 MiB are in flight: the emulated initiator builds every frame of a list at once].
    #[arg(short = 'l', long)]
    list_size: Option<u32>,
    /// Unrestricted writes/reads (restricted by default).
    #[arg(long)]
    unrestricted: bool,
    /// Do not use IDC commands.
    #[arg(long)]
    no_idc: bool,
}

impl BwArgs {
    fn options(&self) -> BwOptions {
        let r = &self.run;
        BwOptions {
            engine: r.engine.kind(),
            iters: r.iters,
            duration: r.duration,
            min_size: self.size.0,
            max_size: self.size.1,
            list_size: self
                .list_size
                .unwrap_or_else(|| default_list_size(self.size.1)),
            idc: !self.no_idc,
            restricted: !self.unrestricted,
            buf_size: r.buf_sz,
            buf_align: r.buf_align,
            progress: std::io::stderr().is_terminal(),
        }
    }
}

/// `nicemu stat`.
pub fn stat(args: StatArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    tools::cxi::stat(
        &StatOptions {
            engine: args.engine.kind(),
            counters: args.counters,
        },
        out,
    )?;
    Ok(())
}

/// `nicemu dump-csrs`.
pub fn dump_csrs(args: DumpArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    tools::cxi::dump_csrs(
        &DumpOptions {
            engine: args.engine.kind(),
            node: args.node,
            grep: args.grep,
            max_entries: args.max_entries,
            fields: args.fields,
        },
        out,
    )?;
    Ok(())
}

/// Which latency tool.
#[derive(Clone, Copy, Debug)]
pub enum Lat {
    /// `send-lat`.
    Send,
    /// `write-lat`.
    Write,
    /// `read-lat`.
    Read,
}

/// `nicemu send-lat` / `write-lat` / `read-lat`.
pub fn lat(which: Lat, args: LatArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let o = args.options();
    match which {
        Lat::Send => tools::cxi::send_lat(&o, out)?,
        Lat::Write => tools::cxi::write_lat(&o, out)?,
        Lat::Read => tools::cxi::read_lat(&o, out)?,
    };
    Ok(())
}

/// `nicemu atomic-lat`.
pub fn atomic_lat(args: AtomicLatArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let o = LatOptions {
        atomic_op: args.atomic_op,
        atomic_type: args.atomic_type,
        cswap_op: args.cswap_op,
        fetching: args.fetching,
        ..args.lat.options()
    };
    tools::cxi::atomic_lat(&o, out)?;
    Ok(())
}

/// Which bandwidth tool.
#[derive(Clone, Copy, Debug)]
pub enum Bw {
    /// `send-bw`.
    Send,
    /// `write-bw`.
    Write,
    /// `read-bw`.
    Read,
}

/// `nicemu send-bw` / `write-bw` / `read-bw`.
pub fn bw(which: Bw, args: BwArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let o = args.options();
    match which {
        Bw::Send => tools::cxi::send_bw(&o, out)?,
        Bw::Write => tools::cxi::write_bw(&o, out)?,
        Bw::Read => tools::cxi::read_bw(&o, out)?,
    };
    Ok(())
}
