//! The knobs of the cxi transport, read once at init. Names and defaults follow the CXI
//! provider (fi_cxi.7, cassini.md §§4.3, 6): `FI_CXI_RX_MATCH_MODE`, `FI_CXI_RDZV_THRESHOLD`,
//! `FI_CXI_RDZV_EAGER_SIZE`, `FI_CXI_OFLOW_BUF_SIZE`, `FI_CXI_OFLOW_BUF_COUNT`,
//! `FI_CXI_REQ_BUF_SIZE`, `FI_CXI_REQ_BUF_MIN_POSTED`. Buffer sizes default smaller than the
//! provider's 12 MiB because an emulated node has a few hundred MiB of host memory.

use std::time::Duration;

use crate::env::Env;
use crate::error::{Error, Result};

/// Largest payload of an unrestricted IDC message (`C_MAX_IDC_PAYLOAD_UNR`, cassini.md §6).
pub const IDC_MAX: usize = 192;

/// Where receives are matched (`FI_CXI_RX_MATCH_MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchMode {
    /// Matching in the NIC (priority / overflow lists, unexpected headers).
    Hardware,
    /// The PtlTE is software managed; every message lands in request buffers.
    Software,
    /// Hardware until the PtlTE enters flow control, then software.
    Hybrid,
}

/// The transport's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// `FI_CXI_RX_MATCH_MODE`.
    pub mode: MatchMode,
    /// `FI_CXI_RDZV_THRESHOLD`: larger messages use the rendezvous protocol.
    pub rdzv_threshold: usize,
    /// `FI_CXI_RDZV_EAGER_SIZE`: bytes a rendezvous put carries eagerly.
    pub rdzv_eager: usize,
    /// `FI_CXI_OFLOW_BUF_SIZE`.
    pub oflow_size: usize,
    /// `FI_CXI_OFLOW_BUF_COUNT`.
    pub oflow_count: usize,
    /// `FI_CXI_REQ_BUF_SIZE`.
    pub req_size: usize,
    /// `FI_CXI_REQ_BUF_MIN_POSTED`.
    pub req_count: usize,
    /// `MPICH_OFI_NIC_POLICY` resolved to a device index (`NICEMU_CXI_DEVICE` overrides).
    pub device: u32,
    /// How long a blocking step inside the transport may wait (`NICEMU_CXI_TIMEOUT`, s).
    pub timeout: Duration,
}

impl Config {
    /// Read the knobs; a bad value is an [`Error::Config`] naming the variable.
    pub fn from_env(env: &Env, local_index: u32, devices: usize) -> Result<Config> {
        let mode = match env.choice(
            "FI_CXI_RX_MATCH_MODE",
            &["hardware", "software", "hybrid"],
            "hardware",
        )? {
            "software" => MatchMode::Software,
            "hybrid" => MatchMode::Hybrid,
            _ => MatchMode::Hardware,
        };
        let rdzv_threshold = env.size("FI_CXI_RDZV_THRESHOLD", 16384)?;
        let rdzv_eager = env.size("FI_CXI_RDZV_EAGER_SIZE", 2048)?;
        let oflow_size = env.size("FI_CXI_OFLOW_BUF_SIZE", 2 << 20)?;
        let oflow_count = env.parse("FI_CXI_OFLOW_BUF_COUNT", 4usize)?;
        let req_size = env.size("FI_CXI_REQ_BUF_SIZE", 2 << 20)?;
        let req_count = env.parse("FI_CXI_REQ_BUF_MIN_POSTED", 4usize)?;
        let timeout = env.parse("NICEMU_CXI_TIMEOUT", 120u64)?;
        let bad = |var: &str, value: String, reason: &str| Error::Config {
            var: var.into(),
            value,
            reason: reason.into(),
        };
        // The eager part of a rendezvous put is a 20-bit field (cassini.md §2.1).
        if rdzv_eager >= (1 << 20) || rdzv_eager > rdzv_threshold {
            return Err(bad(
                "FI_CXI_RDZV_EAGER_SIZE",
                rdzv_eager.to_string(),
                "must be below 1 MiB and not above FI_CXI_RDZV_THRESHOLD",
            ));
        }
        // An eager message must fit an overflow / request buffer with room to spare.
        let min_buf = rdzv_threshold.max(IDC_MAX) * 2 + 4096;
        if rdzv_threshold >= (1 << 24) {
            return Err(bad(
                "FI_CXI_RDZV_THRESHOLD",
                rdzv_threshold.to_string(),
                "must be below 16 MiB",
            ));
        }
        for (var, v) in [
            ("FI_CXI_OFLOW_BUF_SIZE", oflow_size),
            ("FI_CXI_REQ_BUF_SIZE", req_size),
        ] {
            if v < min_buf {
                return Err(bad(
                    var,
                    v.to_string(),
                    &format!("must hold two eager messages (at least {min_buf} bytes)"),
                ));
            }
        }
        for (var, v) in [
            ("FI_CXI_OFLOW_BUF_COUNT", oflow_count),
            ("FI_CXI_REQ_BUF_MIN_POSTED", req_count),
        ] {
            if !(1..=64).contains(&v) {
                return Err(bad(var, v.to_string(), "must be between 1 and 64"));
            }
        }
        let policy = env.choice(
            "MPICH_OFI_NIC_POLICY",
            &["BLOCK", "ROUND-ROBIN", "NUMA", "USER"],
            "BLOCK",
        )?;
        let device = match env.get("NICEMU_CXI_DEVICE") {
            Some(_) => env.parse("NICEMU_CXI_DEVICE", 0u32)?,
            None if policy == "ROUND-ROBIN" && devices > 0 => local_index % devices as u32,
            None => 0,
        };
        Ok(Config {
            mode,
            rdzv_threshold,
            rdzv_eager,
            oflow_size,
            oflow_count,
            req_size,
            req_count,
            device,
            timeout: Duration::from_secs(timeout.max(1)),
        })
    }
}
