//! The Gemini user tools (`tools::gni::gni`) as subcommands: `gni-send-lat`,
//! `gni-write-lat`, `gni-read-lat`, `gni-atomic-lat`, `gni-send-bw`, `gni-write-bw`,
//! `gni-read-bw`, each over an emulated pair of Geminis, with options in the style of the
//! Cassini tools.

use std::io::{IsTerminal, Write};

use clap::Args;
use tools::gni::{BwOptions, LatOptions};
use userlib::gni::{AmoCmd, DlvrMode};

use crate::args;
use crate::tool_args::{BwRun, LatRun};

fn parse_amo(s: &str) -> Result<AmoCmd, String> {
    let want: String = s.chars().filter(|c| *c != '_').collect();
    AmoCmd::ALL
        .iter()
        .copied()
        .find(|c| format!("{c:?}").eq_ignore_ascii_case(&want))
        .ok_or_else(|| format!("unknown Gemini AMO '{s}' (FADD, FAND, FOR, FXOR, FAX, CSWAP, ADD, AND, OR, XOR, AX, and _C variants)"))
}

fn dlvr(in_order: bool) -> DlvrMode {
    if in_order {
        DlvrMode::IN_ORDER
    } else {
        DlvrMode::PERFORMANCE
    }
}

/// Options of every latency tool.
#[derive(Args, Clone, Debug)]
pub struct LatCommon {
    #[command(flatten)]
    run: LatRun,
    /// In-order delivery (GNI_DLVMODE_IN_ORDER) instead of adaptive routing.
    #[arg(long)]
    in_order: bool,
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
            dlvr: dlvr(self.in_order),
            report_all: r.report_all,
            ..LatOptions::default()
        }
    }
}

/// Options of `gni-send-lat`, `gni-write-lat` and `gni-read-lat`.
#[derive(Args, Clone, Debug)]
pub struct LatArgs {
    #[command(flatten)]
    common: LatCommon,
    /// Size or MIN:MAX range (powers of two in between), e.g. 8 or 1:4M.
    #[arg(short = 's', long, value_parser = args::tool_size_range, default_value = "8")]
    size: (u64, u64),
    /// Writes and reads up to this many bytes use FMA, larger ones the BTE.
    #[arg(long, value_parser = args::size, default_value_t = tools::gni::RDMA_THRESHOLD)]
    rdma_threshold: u64,
    /// SMSG credits per mailbox (gni-send-lat).
    #[arg(long, default_value_t = 16)]
    credits: u16,
}

impl LatArgs {
    fn options(&self) -> LatOptions {
        LatOptions {
            min_size: self.size.0,
            max_size: self.size.1,
            rdma_threshold: self.rdma_threshold,
            credits: self.credits,
            ..self.common.options()
        }
    }
}

/// Options of `gni-atomic-lat`: an AMO is one 8-byte word through FMA, so it takes no size,
/// threshold or SMSG option.
#[derive(Args, Clone, Debug)]
pub struct AtomicLatArgs {
    #[command(flatten)]
    lat: LatCommon,
    /// Gemini AMO command (FADD, FAND, FOR, FXOR, FAX, CSWAP, ADD, AND, OR, XOR, AX; _C for
    /// the cached variants).
    #[arg(long, value_parser = parse_amo, default_value = "FADD")]
    amo: AmoCmd,
}

/// Options of the bandwidth tools.
#[derive(Args, Clone, Debug)]
pub struct BwArgs {
    #[command(flatten)]
    run: BwRun,
    /// Size or MIN:MAX range, e.g. 64K or 1:4M (default 8K for sends, 64K otherwise).
    #[arg(short = 's', long, value_parser = args::tool_size_range)]
    size: Option<(u64, u64)>,
    /// Operations posted before waiting for their completions.
    #[arg(short = 'l', long, default_value_t = 256)]
    list_size: u32,
    /// Writes and reads up to this many bytes use FMA, larger ones the BTE.
    #[arg(long, value_parser = args::size, default_value_t = tools::gni::RDMA_THRESHOLD)]
    rdma_threshold: u64,
    /// In-order delivery (GNI_DLVMODE_IN_ORDER) instead of adaptive routing.
    #[arg(long)]
    in_order: bool,
    /// SMSG credits per mailbox (gni-send-bw).
    #[arg(long, default_value_t = 64)]
    credits: u16,
}

impl BwArgs {
    fn options(&self, default_size: u64) -> BwOptions {
        let (min_size, max_size) = self.size.unwrap_or((default_size, default_size));
        let r = &self.run;
        BwOptions {
            engine: r.engine.kind(),
            iters: r.iters,
            duration: r.duration,
            min_size,
            max_size,
            list_size: self.list_size,
            rdma_threshold: self.rdma_threshold,
            dlvr: dlvr(self.in_order),
            credits: self.credits,
            buf_size: r.buf_sz,
            buf_align: r.buf_align,
            progress: std::io::stderr().is_terminal(),
        }
    }
}

/// Which latency tool.
#[derive(Clone, Copy, Debug)]
pub enum Lat {
    /// `gni-send-lat`.
    Send,
    /// `gni-write-lat`.
    Write,
    /// `gni-read-lat`.
    Read,
}

/// `nicemu gni-send-lat` / `gni-write-lat` / `gni-read-lat`.
pub fn lat(which: Lat, args: LatArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let o = args.options();
    match which {
        Lat::Send => tools::gni::send_lat(&o, out)?,
        Lat::Write => tools::gni::write_lat(&o, out)?,
        Lat::Read => tools::gni::read_lat(&o, out)?,
    };
    Ok(())
}

/// `nicemu gni-atomic-lat`.
pub fn atomic_lat(args: AtomicLatArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let o = LatOptions {
        amo: args.amo,
        ..args.lat.options()
    };
    tools::gni::atomic_lat(&o, out)?;
    Ok(())
}

/// Which bandwidth tool.
#[derive(Clone, Copy, Debug)]
pub enum Bw {
    /// `gni-send-bw`.
    Send,
    /// `gni-write-bw`.
    Write,
    /// `gni-read-bw`.
    Read,
}

/// `nicemu gni-send-bw` / `gni-write-bw` / `gni-read-bw`.
pub fn bw(which: Bw, args: BwArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    match which {
        Bw::Send => tools::gni::send_bw(&args.options(8192), out)?,
        Bw::Write => tools::gni::write_bw(&args.options(65536), out)?,
        Bw::Read => tools::gni::read_bw(&args.options(65536), out)?,
    };
    Ok(())
}
