//! The bodies of the HPE-style diagnostics, run over an emulated pair of Cassinis built with
//! the platform's cluster builder ([`platform::Cluster`]): [`stat`] (like `cxi_stat`),
//! [`dump_csrs`] (like `cxi_dump_csrs`), the latency tools [`send_lat`], [`write_lat`],
//! [`read_lat`], [`atomic_lat`] and the bandwidth tools [`send_bw`], [`write_bw`],
//! [`read_bw`]. Each takes its options and a `&mut dyn Write` and prints a table in the
//! style of the `cxi_*_lat` / `cxi_*_bw` utilities (a summary of the options, then
//! `Size[B] Count Min[us] Max[us] Mean[us] StdDev[us]` or
//! `Size[B] Count BW[MB/s] PktRate[Mpkt/s]`).
//!
//! Like the HPE tools, a latency is the time from just before a command is written to just
//! after its completion event (ACK for sends, writes and non-fetching atomics, REPLY for
//! reads and fetching atomics) is seen; a bandwidth iteration writes `list_size` commands,
//! rings the doorbell once and waits until a counting event has counted every completion.
//! The target side is passive: persistent LEs with communication events disabled.

mod bw;
mod lat;
mod pair;
mod stat;

pub use bw::{BwOptions, read_bw, send_bw, write_bw};
pub use lat::{LatOptions, atomic_lat, read_lat, send_lat, write_lat};
pub use stat::{DumpOptions, StatOptions, dump_csrs, stat};

use std::time::Duration;

use platform::{ClusterError, EngineKind};
use thiserror::Error;

use userlib::cxi::CxiError;

/// Why a tool failed.
#[derive(Debug, Error)]
pub enum ToolError {
    /// A library call failed.
    #[error(transparent)]
    Cxi(#[from] CxiError),
    /// The emulated pair could not be built.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// Writing the output failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A bad option.
    #[error("{0}")]
    Option(String),
    /// Operations counted as failures by a counting event (its failure count is 7 bits
    /// wide); `why` names the return codes
    /// their events carried.
    #[error("{count} operations failed ({why})")]
    Failed {
        /// How many the counter counted.
        count: u64,
        /// The return codes seen on the event queue, with counts.
        why: String,
    },
    /// A command completed with an error.
    #[error("{op} completed with return code {rc}{}", hint_suffix(*.rc))]
    Completion {
        /// What completed.
        op: &'static str,
        /// Its return code.
        rc: firmware_spec::cassini::rc::ReturnCode,
    },
}

/// The limit behind a return code the tools commonly meet, for the user.
pub(crate) fn rc_hint(rc: firmware_spec::cassini::rc::ReturnCode) -> Option<&'static str> {
    use firmware_spec::cassini::rc::ReturnCode;
    match rc {
        ReturnCode::PtDisabled => Some(
            "the target PtlTE was disabled by flow control: its event queue or list entries \
             ran out (lower -l)",
        ),
        ReturnCode::Undeliverable => Some(
            "no response within the 1 s request timeout (a restricted put: 1 s plus its \
             length at 50 MB/s, as it is answered only once all of it has landed), or \
             retries exhausted: the target could not keep up (--unrestricted streams a large \
             put, acknowledged as it goes)",
        ),
        _ => None,
    }
}

/// `" (hint)"` for a return code with a hint, else nothing.
fn hint_suffix(rc: firmware_spec::cassini::rc::ReturnCode) -> String {
    rc_hint(rc).map(|h| format!(" ({h})")).unwrap_or_default()
}

/// The return codes of the failure events waiting on `eq` (successful events are disabled
/// in the bandwidth loops, so what is there is what failed), as `"PT_DISABLED x 82"`, with a
/// hint at the limit behind the commonest ones, and whether events were dropped.
pub(crate) fn failure_codes(eq: &mut userlib::cxi::evtq::EventQueue) -> String {
    use firmware_spec::cassini::rc::ReturnCode;
    let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
    let mut hints = Vec::new();
    while let Ok(Some(ev)) = eq.get_event() {
        let rc = ev.return_code();
        if rc == ReturnCode::Ok {
            continue;
        }
        let hint = rc_hint(rc);
        if let Some(h) = hint
            && !hints.contains(&h)
        {
            hints.push(h);
        }
        *counts.entry(rc.to_string()).or_default() += 1;
    }
    let _ = eq.ack();
    let mut why: Vec<String> = counts
        .into_iter()
        .map(|(rc, n)| format!("{rc} x {n}"))
        .collect();
    if eq.drops().unwrap_or(false) {
        why.push("further events dropped: the event queue was full".into());
    }
    if why.is_empty() {
        why.push("no failure event was delivered".into());
    }
    let mut s = why.join(", ");
    for h in hints {
        s.push_str("; ");
        s.push_str(h);
    }
    s
}

/// Result of a tool.
pub type ToolResult<T> = std::result::Result<T, ToolError>;

/// The Portals MTU: writes larger than this are split into packets (for `PktRate`).
pub const PORTALS_MTU: u64 = 2048;

/// How long one operation may take before the tool gives up.
pub(crate) const OP_TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));

/// Which tool of a family. The cxi and gni tools print the same table columns, so one type
/// serves both; each family names its tests with [`ToolKind::title`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolKind {
    Send,
    Write,
    Read,
    Atomic,
}

impl ToolKind {
    /// The banner of a test: `"{family} {send} Latency Test"`, `"{family} RDMA Write
    /// Bandwidth Test"`, ... (`send` names the send operation, e.g. "Send" or "SMSG Send";
    /// `measure` is "Latency" or "Bandwidth").
    pub(crate) fn title(self, family: &str, send: &str, measure: &str) -> String {
        let what = match self {
            ToolKind::Send => send,
            ToolKind::Write => "RDMA Write",
            ToolKind::Read => "RDMA Read",
            ToolKind::Atomic => "Atomic Memory Operation",
        };
        format!("{family} {what} {measure} Test")
    }

    /// The command name of a family's bandwidth tool (`gni` for the Gemini family), as the
    /// CLI spells it.
    pub(crate) fn bw_tool(self, gni: bool) -> &'static str {
        match (self, gni) {
            (ToolKind::Send, false) => "send-bw",
            (ToolKind::Write, false) => "write-bw",
            (ToolKind::Read, false) => "read-bw",
            (ToolKind::Atomic, false) => "atomic-bw",
            (ToolKind::Send, true) => "gni-send-bw",
            (ToolKind::Write, true) => "gni-write-bw",
            (ToolKind::Read, true) => "gni-read-bw",
            (ToolKind::Atomic, true) => "gni-atomic-bw",
        }
    }

    /// The size column's heading.
    pub(crate) fn size_col(self) -> &'static str {
        match self {
            ToolKind::Send => "Send Size[B]",
            ToolKind::Write | ToolKind::Read => "RDMA Size[B]",
            ToolKind::Atomic => " AMO Size[B]",
        }
    }

    /// The operation-count column's heading.
    pub(crate) fn count_col(self) -> &'static str {
        match self {
            ToolKind::Send => "Sends",
            ToolKind::Write => "Writes",
            ToolKind::Read => "Reads",
            ToolKind::Atomic => "Atomics",
        }
    }
}

/// The sizes a `MIN[:MAX]` range covers: `min`, then every power of two above it up to
/// `max`, then `max`.
pub fn sizes(min: u64, max: u64) -> Vec<u64> {
    let mut out = vec![min];
    let mut s = min.max(1);
    loop {
        s = if s.is_power_of_two() {
            s.saturating_mul(2)
        } else {
            s.next_power_of_two()
        };
        if s >= max {
            break;
        }
        out.push(s);
    }
    if max > min {
        out.push(max);
    }
    out
}

/// The largest data buffer of a bandwidth tool (each side of the emulated pair holds one in
/// its node's memory).
pub const MAX_BUF_SIZE: u64 = 4 << 30;

/// The bandwidth tools' data buffer options, checked as `cxi_write_bw` checks them: an
/// alignment of 0 is invalid, and the buffer must hold the largest operation ("Max RDMA
/// buffer size < max write size"). An alignment larger than the buffer leaves room for one
/// operation only, so it is refused too; and a buffer is at most [`MAX_BUF_SIZE`].
pub(crate) fn check_buffer(buf_size: u64, buf_align: u64, max_size: u64) -> Result<(), String> {
    if buf_size > MAX_BUF_SIZE {
        return Err(format!(
            "the data buffer (--buf-sz {buf_size}) is larger than {} GiB",
            MAX_BUF_SIZE >> 30
        ));
    }
    if buf_align == 0 {
        return Err("invalid buffer alignment 0 (--buf-align must be at least 1)".into());
    }
    if buf_size < max_size {
        return Err(format!(
            "the data buffer (--buf-sz {buf_size}) is smaller than the largest operation \
             ({max_size} bytes)"
        ));
    }
    if buf_align > buf_size {
        return Err(format!(
            "the buffer alignment (--buf-align {buf_align}) is larger than the data buffer \
             (--buf-sz {buf_size})"
        ));
    }
    Ok(())
}

/// The engine's name for the option summary.
pub(crate) fn engine_name(e: &EngineKind) -> String {
    match e {
        EngineKind::Deterministic { seed } => format!("deterministic (seed {seed})"),
        EngineKind::Threaded => "threaded".to_string(),
        EngineKind::ThreadedWith(_) => "threaded (custom)".to_string(),
    }
}

/// Latency statistics of one size, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatStats {
    /// Measurements.
    pub count: u64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation (population).
    pub stddev: f64,
}

impl LatStats {
    /// Statistics of `us` (microseconds).
    pub fn of(us: &[f64]) -> LatStats {
        if us.is_empty() {
            return LatStats::default();
        }
        let n = us.len() as f64;
        let mean = us.iter().sum::<f64>() / n;
        let var = us.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        LatStats {
            count: us.len() as u64,
            min: us.iter().copied().fold(f64::INFINITY, f64::min),
            max: us.iter().copied().fold(0.0, f64::max),
            mean,
            stddev: var.sqrt(),
        }
    }
}

/// Bandwidth of one size.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BwStats {
    /// Operations completed.
    pub ops: u64,
    /// Megabytes (10^6 B) per second.
    pub mb_per_s: f64,
    /// Million packets per second.
    pub mpkt_per_s: f64,
}

/// A separator line of the tables.
pub(crate) const RULE: &str =
    "------------------------------------------------------------------------";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_ranges() {
        assert_eq!(sizes(8, 8), vec![8]);
        assert_eq!(sizes(1, 16), vec![1, 2, 4, 8, 16]);
        assert_eq!(sizes(3, 20), vec![3, 4, 8, 16, 20]);
    }

    #[test]
    fn latency_statistics() {
        let s = LatStats::of(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((s.count, s.min, s.max, s.mean), (4, 1.0, 4.0, 2.5));
        assert!((s.stddev - 1.118_033_988_749_895).abs() < 1e-12);
        assert_eq!(LatStats::of(&[]).count, 0);
    }
}
