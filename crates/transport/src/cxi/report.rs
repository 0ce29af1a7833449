//! `MPICH_OFI_CXI_COUNTER_REPORT`: Cassini hardware counters sampled when the transport
//! starts and again at finalize, reported as deltas.
//!
//! Levels (an integer, 0..=5; default 1), after the Cray MPICH knob of that name and the
//! counter report Open MPI's `hwpc_cxi` describes (a network timeout is a retransmission
//! timeout of the NIC's reliability layer: SCT plus SPT timeouts; docs/trace.md):
//!
//! * 0: nothing;
//! * 1: at finalize, world rank 0 prints one network summary line if any NIC of the job
//!   counted a timeout;
//! * 2: the summary line always, and every rank prints one line of the default counter set
//!   of its NIC;
//! * 3..=5: as 2 with the extended counter set (the real library writes per-NIC detail
//!   files at these levels; this one prints the extended set instead).
//!
//! The lines go to standard error (the in-process runtime shares one stdout among every
//! rank and the launcher). Counters are read through the user library's CSR mapping (`cxil_read_cntr`); they are
//! NIC-wide, so ranks that share a NIC show the same deltas, and only the first local rank
//! of each NIC contributes to the job's timeout count.

use userlib::cxi::csr::Csrs;

use crate::env::Env;
use crate::error::{Error, Result};

/// The variable.
pub const VAR: &str = "MPICH_OFI_CXI_COUNTER_REPORT";
/// The highest level.
pub const MAX_LEVEL: u32 = 5;
/// The level without the variable.
pub const DEFAULT_LEVEL: u32 = 1;

/// The counters whose sum is the network timeout count.
pub const TIMEOUT_COUNTERS: [&str; 2] = ["c_pct_cntrs.sct_timeouts", "c_pct_cntrs.spt_timeouts"];

/// The default set (level 2): timeouts, retries, NACKs, link packets.
pub const DEFAULT_SET: [&str; 8] = [
    "c_pct_cntrs.sct_timeouts",
    "c_pct_cntrs.spt_timeouts",
    "c_pct_cntrs.retry_srb_requests",
    "c_pct_cntrs.bad_seq_nacks",
    "c_hni_cntrs.tx_ok_opt",
    "c_hni_cntrs.rx_ok_opt",
    "c_hni_cntrs.rx_bad_opt",
    "c_ixe_cntrs.rx_pkt_drop_pct",
];

/// Added at levels 3..=5: commands, matching, ordered requests, messages, connections.
pub const EXTENDED_SET: [&str; 8] = [
    "c_cq_cntrs.success_tx_cntr",
    "c_cq_cntrs.fail_tx_cntr",
    "c_lpe_cntrs.put_cmds",
    "c_lpe_cntrs.get_cmds",
    "c_lpe_cntrs.event_put_overflow",
    "c_pct_cntrs.req_ordered",
    "c_ixe_cntrs.rx_ptl_msgs",
    "c_pct_cntrs.conn_sct_open",
];

/// The report level from `env`; a value that is not an integer in `0..=5` is an
/// [`Error::Config`] naming the variable.
pub fn level(env: &Env) -> Result<u32> {
    let Some(v) = env.get(VAR) else {
        return Ok(DEFAULT_LEVEL);
    };
    match v.trim().parse::<u32>() {
        Ok(l) if l <= MAX_LEVEL => Ok(l),
        _ => Err(Error::Config {
            var: VAR.into(),
            value: v.into(),
            reason: format!("must be an integer from 0 (off) to {MAX_LEVEL}"),
        }),
    }
}

/// The counters a level samples (always the timeout ones first).
pub fn counter_set(level: u32) -> Vec<&'static str> {
    match level {
        0 => Vec::new(),
        1 => TIMEOUT_COUNTERS.to_vec(),
        2 => DEFAULT_SET.to_vec(),
        _ => DEFAULT_SET.iter().chain(&EXTENDED_SET).copied().collect(),
    }
}

/// Counters sampled at init, for the report at finalize.
pub struct CounterReport {
    level: u32,
    names: Vec<&'static str>,
    start: Vec<u64>,
    csrs: Csrs,
}

impl std::fmt::Debug for CounterReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CounterReport")
            .field("level", &self.level)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

fn read_all(csrs: &Csrs, names: &[&str]) -> Result<Vec<u64>> {
    names
        .iter()
        .map(|n| {
            csrs.read_cntr(n)
                .map_err(|e| Error::Transport(format!("cxi: {VAR}: reading {n}: {e}")))
        })
        .collect()
}

impl CounterReport {
    /// Sample the counters of `level` (None at level 0).
    pub fn start(level: u32, csrs: Csrs) -> Result<Option<CounterReport>> {
        if level == 0 {
            return Ok(None);
        }
        let names = counter_set(level);
        let start = read_all(&csrs, &names)?;
        Ok(Some(CounterReport {
            level,
            names,
            start,
            csrs,
        }))
    }

    /// The level.
    pub fn level(&self) -> u32 {
        self.level
    }

    /// Every counter's change since [`CounterReport::start`], by name (56-bit counters,
    /// so a wrap is taken into account).
    pub fn deltas(&self) -> Result<Vec<(&'static str, u64)>> {
        let now = read_all(&self.csrs, &self.names)?;
        let mask = (1u64 << userlib::cxi::csr::CNTR_BITS) - 1;
        Ok(self
            .names
            .iter()
            .zip(now.iter().zip(&self.start))
            .map(|(n, (a, b))| (*n, a.wrapping_sub(*b) & mask))
            .collect())
    }
}

/// The network timeouts among `deltas` (SCT plus SPT timeouts).
pub fn timeouts(deltas: &[(&str, u64)]) -> u64 {
    deltas
        .iter()
        .filter(|(n, _)| TIMEOUT_COUNTERS.contains(n))
        .map(|(_, v)| v)
        .sum()
}

/// A rank's counter line (levels 2..=5).
pub fn rank_line(rank: u32, device: u32, deltas: &[(&str, u64)]) -> String {
    let mut s = format!("cxi counters: rank {rank} (cxi{device}):");
    for (n, v) in deltas {
        let short = n.split_once('.').map_or(*n, |(_, c)| c);
        s.push_str(&format!(" {short}={v}"));
    }
    s
}

/// World rank 0's summary line at `level`, given the job's network timeouts; `None` when
/// the level asks for nothing (level 0, or level 1 without timeouts).
pub fn summary_line(level: u32, nics: u32, timeouts: u64) -> Option<String> {
    if level == 0 || (level == 1 && timeouts == 0) {
        return None;
    }
    let s = if timeouts == 1 { "" } else { "s" };
    Some(format!(
        "MPICH Slingshot Network Summary: {timeouts} network timeout{s} ({nics} NIC{} \
         reporting)",
        if nics == 1 { "" } else { "s" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(v: &str) -> Env {
        let mut e = Env::new();
        e.set(VAR, v);
        e
    }

    #[test]
    fn levels_parse_and_bad_values_name_the_variable() {
        assert_eq!(level(&Env::new()).unwrap(), DEFAULT_LEVEL);
        for (v, l) in [("0", 0), ("2", 2), (" 5 ", 5)] {
            assert_eq!(level(&env(v)).unwrap(), l);
        }
        for v in ["6", "-1", "yes", "", "2.5"] {
            match level(&env(v)) {
                Err(e @ Error::Config { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains(VAR) && msg.contains("0 (off) to 5"), "{msg}");
                }
                other => panic!("{v:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn sets_grow_with_the_level_and_start_with_the_timeouts() {
        assert!(counter_set(0).is_empty());
        assert_eq!(counter_set(1), TIMEOUT_COUNTERS);
        assert_eq!(counter_set(2).len(), DEFAULT_SET.len());
        assert_eq!(counter_set(5).len(), DEFAULT_SET.len() + EXTENDED_SET.len());
        for l in 1..=5 {
            assert_eq!(&counter_set(l)[..2], TIMEOUT_COUNTERS);
        }
    }

    #[test]
    fn the_summary_counts_sct_and_spt_timeouts() {
        let d = [
            ("c_pct_cntrs.sct_timeouts", 2),
            ("c_pct_cntrs.spt_timeouts", 5),
            ("c_hni_cntrs.tx_ok_opt", 100),
        ];
        assert_eq!(timeouts(&d), 7);
        assert_eq!(summary_line(1, 4, 0), None);
        assert_eq!(summary_line(0, 4, 7), None);
        assert_eq!(
            summary_line(1, 4, 7).unwrap(),
            "MPICH Slingshot Network Summary: 7 network timeouts (4 NICs reporting)"
        );
        assert_eq!(
            summary_line(2, 1, 1).unwrap(),
            "MPICH Slingshot Network Summary: 1 network timeout (1 NIC reporting)"
        );
        assert_eq!(
            rank_line(3, 0, &d),
            "cxi counters: rank 3 (cxi0): sct_timeouts=2 spt_timeouts=5 tx_ok_opt=100"
        );
    }
}
