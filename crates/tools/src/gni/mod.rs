//! The bodies of the `nicemu gni-*` tools, run over an emulated pair of Geminis built with
//! the platform's cluster builder ([`platform::GeminiCluster`]): the latency tools
//! [`send_lat`], [`write_lat`], [`read_lat`], [`atomic_lat`] and the bandwidth tools
//! [`send_bw`], [`write_bw`], [`read_bw`]. Each takes its options and a `&mut dyn Write` and
//! prints a table with the columns of the HPE `cxi_*_lat` / `cxi_*_bw` utilities (and of
//! [`crate::cxi`]): a summary of the options, then
//! `Size[B] Count Min[us] Max[us] Mean[us] StdDev[us]` or
//! `Size[B] Count BW[MB/s] PktRate[Mpkt/s]`.
//!
//! Node 0 is the client, node 1 the server; they connect as MPI runtimes do (a wildcard
//! datagram on the server, a bound one from the client, carrying SMSG mailbox attributes and
//! the data buffer's memory handle). Sends are SMSG messages; writes and reads are FMA
//! PUT/GET up to `rdma_threshold` bytes and BTE (`PostRdma`) above, as uGNI users switch
//! (`MPICH_GNI_RDMA_THRESHOLD`); atomics are FMA AMOs. A latency is the time from just
//! before the post to just after its local completion event is taken from the CQ (GLOBAL
//! events for posts, the SMSG send's local event); a bandwidth iteration posts `list_size`
//! operations and waits for all their completion events. The server needs no CPU for RMA;
//! for SMSG the tool takes and releases the server's messages between posts (the single
//! thread plays both processes), so credits come back.

mod bw;
mod lat;
mod pair;

pub use bw::{BwOptions, read_bw, send_bw, write_bw};
pub use lat::{LatOptions, atomic_lat, read_lat, send_lat, write_lat};

pub use crate::cxi::{BwStats, LatStats, sizes};

use std::time::Duration;

use firmware_spec::gemini::gni::ReturnCode;
use platform::gemini::GeminiClusterError;
use thiserror::Error;

use userlib::gni::GniError;

/// Why a tool failed.
#[derive(Debug, Error)]
pub enum ToolError {
    /// A library call failed.
    #[error(transparent)]
    Gni(#[from] GniError),
    /// The emulated pair could not be built.
    #[error(transparent)]
    Cluster(#[from] GeminiClusterError),
    /// Writing the output failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A bad option.
    #[error("{0}")]
    Option(String),
    /// An operation completed with an error.
    #[error("{op} completed with {rc}: {detail}")]
    Completion {
        /// What completed.
        op: &'static str,
        /// Its return code.
        rc: ReturnCode,
        /// The event, decoded.
        detail: String,
    },
}

/// Result of a tool.
pub type ToolResult<T> = std::result::Result<T, ToolError>;

/// Default switch from FMA to the BTE for writes and reads, in bytes ("BTE profitable
/// around 1–4K", gemini.md §2; Chapel and gasnet use 4096).
pub const RDMA_THRESHOLD: u64 = 4096;

/// Payload of one Gemini network packet (an FMA request or GET response carries at most
/// 64 bytes: `GCW` lengths 4..=64, write-combined PUT lines of 64), for `PktRate`.
pub const PACKET_PAYLOAD: u64 = 64;

/// Largest SMSG message (`GNI_SMSG_MAX_SIZE`).
pub const SMSG_MAX: u64 = firmware_spec::gemini::limits::SMSG_MAX_SIZE as u64;

/// How long one operation may take before the tool gives up.
pub(crate) const OP_TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));

/// Packets of an operation of `size` bytes.
pub(crate) fn packets(size: u64) -> u64 {
    size.div_ceil(PACKET_PAYLOAD).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_counts() {
        assert_eq!(packets(0), 1);
        assert_eq!(packets(8), 1);
        assert_eq!(packets(64), 1);
        assert_eq!(packets(65), 2);
        assert_eq!(packets(4 << 20), 65536);
    }
}
