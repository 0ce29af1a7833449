//! The knobs of the cxi transport, read once at init. Names and defaults follow the CXI
//! provider (fi_cxi.7, cassini.md §§4.3, 6): `FI_CXI_RX_MATCH_MODE`, `FI_CXI_RDZV_THRESHOLD`,
//! `FI_CXI_RDZV_EAGER_SIZE`, `FI_CXI_OFLOW_BUF_SIZE`, `FI_CXI_OFLOW_BUF_COUNT`,
//! `FI_CXI_REQ_BUF_SIZE`, `FI_CXI_REQ_BUF_MIN_POSTED`. Buffer sizes default smaller than the
//! provider's 12 MiB because an emulated node has a few hundred MiB of host memory.
//!
//! And the Cray MPICH ones: `MPICH_OFI_DEFAULT_TCLASS` (the traffic class of the
//! communication profile every command of the transport uses), `MPICH_OFI_NIC_POLICY`
//! (`BLOCK`, `ROUND-ROBIN`, `NUMA`, `USER` with `MPICH_OFI_NIC_MAPPING`) and
//! `MPICH_OFI_NIC_VERBOSE` (print the rank → NIC choice).

use std::time::Duration;

use firmware_spec::cassini::le::TrafficClass;

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
    /// The policy that chose `device` (`NICEMU_CXI_DEVICE` when that variable did).
    pub nic_policy: &'static str,
    /// `MPICH_OFI_NIC_VERBOSE`: 0 quiet, 1 or more print the NIC choice at init.
    pub nic_verbose: u32,
    /// `MPICH_OFI_DEFAULT_TCLASS`: traffic class of the transport's communication profile.
    pub traffic_class: TrafficClass,
    /// How long a blocking step inside the transport may wait (`NICEMU_CXI_TIMEOUT`, s).
    pub timeout: Duration,
    /// `NICEMU_CXI_INJECT_BUG=ux-flip`: a deliberate bug for checking that fault campaigns
    /// find bugs (`nicemu sim --inject-bug`, docs/RELIABILITY.md): the first unexpected
    /// eager message matched in hardware mode is delivered with its last byte flipped.
    /// Off unless set; never set it otherwise.
    pub inject_ux_bug: bool,
    /// `MPICH_OFI_CXI_COUNTER_REPORT` level (0..=5, [`super::report`]).
    pub counter_report: u32,
    /// Whether this rank is the first local rank on its NIC (it alone adds the NIC's
    /// counters to job-wide sums).
    pub first_on_nic: bool,
}

impl Config {
    /// Read the knobs for local rank `local_index` of `local_size` on a node with `devices`
    /// NICs; a bad value is an [`Error::Config`] naming the variable.
    pub fn from_env(
        env: &Env,
        local_size: u32,
        local_index: u32,
        devices: usize,
    ) -> Result<Config> {
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
        if rdzv_eager >= (1 << 20) {
            return Err(bad(
                "FI_CXI_RDZV_EAGER_SIZE",
                rdzv_eager.to_string(),
                "must be below 1 MiB",
            ));
        }
        // The eager part is part of a rendezvous message: blame the variable that was set.
        if rdzv_eager > rdzv_threshold {
            return Err(if env.get("FI_CXI_RDZV_EAGER_SIZE").is_some() {
                bad(
                    "FI_CXI_RDZV_EAGER_SIZE",
                    rdzv_eager.to_string(),
                    &format!("must not be above FI_CXI_RDZV_THRESHOLD ({rdzv_threshold})"),
                )
            } else {
                bad(
                    "FI_CXI_RDZV_THRESHOLD",
                    rdzv_threshold.to_string(),
                    &format!(
                        "must not be below FI_CXI_RDZV_EAGER_SIZE ({rdzv_eager}, its default)"
                    ),
                )
            });
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
        let (device, nic_policy) = match env.get("NICEMU_CXI_DEVICE") {
            Some(_) => (env.parse("NICEMU_CXI_DEVICE", 0u32)?, "NICEMU_CXI_DEVICE"),
            None => select_nic(env, local_size, local_index, devices)?,
        };
        let nic_verbose = env.parse("MPICH_OFI_NIC_VERBOSE", 0u32)?;
        let counter_report = super::report::level(env)?;
        let first_on_nic = if env.get("NICEMU_CXI_DEVICE").is_some() {
            local_index == 0
        } else {
            let mut first = true;
            for i in 0..local_index {
                if select_nic(env, local_size, i, devices)?.0 == device {
                    first = false;
                    break;
                }
            }
            first
        };
        let traffic_class = match env.choice(
            "MPICH_OFI_DEFAULT_TCLASS",
            &[
                "TC_DEDICATED_ACCESS",
                "TC_LOW_LATENCY",
                "TC_BULK_DATA",
                "TC_BEST_EFFORT",
            ],
            "TC_BEST_EFFORT",
        )? {
            "TC_DEDICATED_ACCESS" => TrafficClass::DedicatedAccess,
            "TC_LOW_LATENCY" => TrafficClass::LowLatency,
            "TC_BULK_DATA" => TrafficClass::BulkData,
            _ => TrafficClass::BestEffort,
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
            nic_policy,
            nic_verbose,
            traffic_class,
            timeout: Duration::from_secs(timeout.max(1)),
            inject_ux_bug: env.choice("NICEMU_CXI_INJECT_BUG", &["none", "ux-flip"], "none")?
                == "ux-flip",
            counter_report,
            first_on_nic,
        })
    }

    /// The line `MPICH_OFI_NIC_VERBOSE` prints for world rank `rank`.
    pub fn nic_line(&self, rank: u32, local_size: u32, local_index: u32) -> String {
        format!(
            "cxi: rank {rank} (local rank {local_index} of {local_size}) uses cxi{} \
             (MPICH_OFI_NIC_POLICY {}, traffic class {:?})",
            self.device, self.nic_policy, self.traffic_class
        )
    }
}

/// The NIC of local rank `local_index` of `local_size` among `devices` by
/// `MPICH_OFI_NIC_POLICY`: `BLOCK` (default) gives each NIC a contiguous block of the local
/// ranks, `ROUND-ROBIN` deals them out in turn, `NUMA` picks the NIC of the rank's NUMA
/// node — an emulated node has no NUMA topology, so each NIC is taken to sit with an equal
/// share of the local ranks, which is `BLOCK` — and `USER` reads `MPICH_OFI_NIC_MAPPING`.
fn select_nic(
    env: &Env,
    local_size: u32,
    local_index: u32,
    devices: usize,
) -> Result<(u32, &'static str)> {
    let policy = env.choice(
        "MPICH_OFI_NIC_POLICY",
        &["BLOCK", "ROUND-ROBIN", "NUMA", "USER"],
        "BLOCK",
    )?;
    let n = u64::try_from(devices).unwrap_or(u64::MAX).max(1);
    let size = u64::from(local_size.max(1));
    let index = u64::from(local_index).min(size - 1);
    let device = match policy {
        "ROUND-ROBIN" => index % n,
        "USER" => return Ok((user_mapping(env, local_size, local_index, devices)?, policy)),
        _ => index * n / size,
    };
    Ok((u32::try_from(device).unwrap_or(0), policy))
}

/// `MPICH_OFI_NIC_MAPPING` for `MPICH_OFI_NIC_POLICY=USER`: `nic:ranks;nic:ranks...`, each
/// `ranks` a comma-separated list of local ranks and ranges (`0:0-3,8; 1:4-7`). Every local
/// rank of the node must be named exactly once, and only NICs the node has.
fn user_mapping(env: &Env, local_size: u32, local_index: u32, devices: usize) -> Result<u32> {
    const VAR: &str = "MPICH_OFI_NIC_MAPPING";
    let raw = env.get(VAR).unwrap_or("");
    let bad = |reason: String| Error::Config {
        var: VAR.into(),
        value: raw.into(),
        reason,
    };
    if raw.trim().is_empty() {
        return Err(bad("required with MPICH_OFI_NIC_POLICY=USER".into()));
    }
    let num = |s: &str, what: &str| -> Result<u32> {
        s.trim()
            .parse::<u32>()
            .map_err(|_| bad(format!("{what} `{}` is not a number", s.trim())))
    };
    let mut owner: Vec<Option<u32>> = vec![None; local_size as usize];
    for part in raw.split(';').filter(|p| !p.trim().is_empty()) {
        let (nic, ranks) = part
            .split_once(':')
            .ok_or_else(|| bad(format!("`{}` is not `nic:ranks`", part.trim())))?;
        let nic = num(nic, "NIC index")?;
        if nic as usize >= devices {
            return Err(bad(format!(
                "NIC {nic} does not exist (the node has {devices})"
            )));
        }
        for item in ranks.split(',') {
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (num(a, "local rank")?, num(b, "local rank")?),
                None => {
                    let r = num(item, "local rank")?;
                    (r, r)
                }
            };
            if lo > hi || hi >= local_size {
                return Err(bad(format!(
                    "local ranks {lo}-{hi} are not among the node's {local_size}"
                )));
            }
            for r in lo..=hi {
                let slot = &mut owner[r as usize];
                if slot.is_some() {
                    return Err(bad(format!("local rank {r} is mapped twice")));
                }
                *slot = Some(nic);
            }
        }
    }
    if let Some(r) = owner.iter().position(Option::is_none) {
        return Err(bad(format!("local rank {r} is not mapped")));
    }
    Ok(owner
        .get(local_index as usize)
        .copied()
        .flatten()
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(vars: &[(&str, &str)], size: u32, index: u32, devices: usize) -> Result<Config> {
        let mut env = Env::new();
        for (k, v) in vars {
            env.set(k, v);
        }
        Config::from_env(&env, size, index, devices)
    }

    fn nics(vars: &[(&str, &str)], size: u32, devices: usize) -> Vec<u32> {
        (0..size)
            .map(|i| cfg(vars, size, i, devices).expect("config").device)
            .collect()
    }

    fn bad_var(r: Result<Config>) -> String {
        match r {
            Err(Error::Config { var, .. }) => var,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn nic_policies_map_local_ranks() {
        assert_eq!(nics(&[], 8, 4), [0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(nics(&[], 3, 1), [0, 0, 0]);
        let rr = [("MPICH_OFI_NIC_POLICY", "round-robin")];
        assert_eq!(nics(&rr, 6, 4), [0, 1, 2, 3, 0, 1]);
        let numa = [("MPICH_OFI_NIC_POLICY", "NUMA")];
        assert_eq!(nics(&numa, 4, 2), [0, 0, 1, 1]);
        let user = [
            ("MPICH_OFI_NIC_POLICY", "USER"),
            ("MPICH_OFI_NIC_MAPPING", "1:0-1, 4; 0:2,3 ;3:5"),
        ];
        assert_eq!(nics(&user, 6, 4), [1, 1, 0, 0, 1, 3]);
        assert_eq!(cfg(&user, 6, 5, 4).unwrap().nic_policy, "USER");
        let forced = [("NICEMU_CXI_DEVICE", "2"), ("MPICH_OFI_NIC_POLICY", "USER")];
        assert_eq!(nics(&forced, 2, 4), [2, 2]);
    }

    #[test]
    fn bad_nic_mappings_name_the_variable() {
        let user = |m: &'static str| {
            [
                ("MPICH_OFI_NIC_POLICY", "USER"),
                ("MPICH_OFI_NIC_MAPPING", m),
            ]
        };
        // Missing, malformed, an unknown NIC, a rank twice, a rank left out, out of range.
        for m in [
            "",
            "0-3",
            "x:0",
            "0:a",
            "2:0-3",
            "0:0-2;1:2-3",
            "0:0-2",
            "0:0-4",
            "0:3-1",
        ] {
            assert_eq!(
                bad_var(cfg(&user(m), 4, 0, 2)),
                "MPICH_OFI_NIC_MAPPING",
                "{m:?}"
            );
        }
        let only_policy = [("MPICH_OFI_NIC_POLICY", "USER")];
        assert_eq!(bad_var(cfg(&only_policy, 1, 0, 1)), "MPICH_OFI_NIC_MAPPING");
        let policy = [("MPICH_OFI_NIC_POLICY", "GPU-ish")];
        assert_eq!(bad_var(cfg(&policy, 1, 0, 1)), "MPICH_OFI_NIC_POLICY");
        let verbose = [("MPICH_OFI_NIC_VERBOSE", "loud")];
        assert_eq!(bad_var(cfg(&verbose, 1, 0, 1)), "MPICH_OFI_NIC_VERBOSE");
    }

    #[test]
    fn traffic_classes() {
        let tc = |v: &str| cfg(&[("MPICH_OFI_DEFAULT_TCLASS", v)], 1, 0, 1);
        assert_eq!(
            cfg(&[], 1, 0, 1).unwrap().traffic_class,
            TrafficClass::BestEffort
        );
        for (v, want) in [
            ("TC_DEDICATED_ACCESS", TrafficClass::DedicatedAccess),
            ("TC_LOW_LATENCY", TrafficClass::LowLatency),
            ("tc_bulk_data", TrafficClass::BulkData),
            ("TC_BEST_EFFORT", TrafficClass::BestEffort),
        ] {
            assert_eq!(tc(v).unwrap().traffic_class, want, "{v}");
        }
        for v in ["TC_ETH", "LOW_LATENCY", "2"] {
            assert_eq!(bad_var(tc(v)), "MPICH_OFI_DEFAULT_TCLASS", "{v}");
        }
    }

    #[test]
    fn the_verbose_line_names_rank_nic_and_policy() {
        let c = cfg(&[("MPICH_OFI_NIC_POLICY", "ROUND-ROBIN")], 4, 3, 2).unwrap();
        let line = c.nic_line(7, 4, 3);
        assert!(line.contains("rank 7") && line.contains("cxi1"), "{line}");
        assert!(
            line.contains("ROUND-ROBIN") && line.contains("local rank 3 of 4"),
            "{line}"
        );
    }
}
