//! One simulated run: a job on the deterministic engine with seeded fabric faults, its
//! options derived from the seed, its outcome and the command that replays it.

use std::time::{Duration, Instant};

use platform::{EngineKind, FabricCounters, NicFaultCounters};
use runtime::{Job, Nic};

use crate::faults::FaultSpec;
use crate::workload::{self, Workload, fold};

/// What a run is asked to do.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// The seed: engine, fabric faults, derived options, random programs.
    pub seed: u64,
    /// Nodes (one rank each).
    pub nodes: u32,
    /// The NIC family.
    pub nic: Nic,
    /// Fabric faults.
    pub faults: FaultSpec,
    /// The program.
    pub workload: Workload,
    /// Cassini only: switch on the transport's deliberate bug (`NICEMU_CXI_INJECT_BUG=ux-flip`:
    /// the first unexpected eager message matched by the NIC is delivered with one byte
    /// wrong), to check that campaigns find bugs and that their replay commands reproduce
    /// them.
    pub inject_bug: bool,
}

/// The options of a run that are drawn from its seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Derived {
    /// Environment variables every rank sees.
    pub env: Vec<(String, String)>,
}

impl SimConfig {
    /// The options drawn from the seed (printed with every run).
    pub fn derived(&self) -> Derived {
        let pick = |salt: u64, n: u64| {
            let x = (self.seed ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (x ^ (x >> 29)) % n
        };
        let mut env = Vec::new();
        match self.nic {
            Nic::Cassini => {
                let mode = ["hardware", "software"][pick(0xC551, 2) as usize];
                env.push(("FI_CXI_RX_MATCH_MODE".into(), mode.into()));
                if self.inject_bug {
                    env.push(("NICEMU_CXI_INJECT_BUG".into(), "ux-flip".into()));
                }
            }
            Nic::Gemini => {
                let dynamic = ["enabled", "disabled"][pick(0x6E1, 2) as usize];
                env.push(("MPICH_GNI_DYNAMIC_CONN".into(), dynamic.into()));
            }
        }
        Derived { env }
    }

    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        format!(
            "nicemu sim --seed {} --nodes {} --nic {} --faults {}{} {}",
            self.seed,
            self.nodes,
            nic_name(self.nic),
            self.faults.to_arg(),
            if self.inject_bug { " --inject-bug" } else { "" },
            self.workload.name()
        )
    }
}

/// `cassini` or `gemini`.
pub fn nic_name(nic: Nic) -> &'static str {
    match nic {
        Nic::Cassini => "cassini",
        Nic::Gemini => "gemini",
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct SimOutcome {
    /// Why it failed (a rank's wrong result or panic, a deadlock, a machine error), or `None`.
    pub failure: Option<String>,
    /// The digest of the run: the engine's trace (every event, packet, MMIO access and
    /// interrupt with its virtual time), the scheduler's order, and every rank's checksum of
    /// what it received. `None` when the job did not finish.
    pub digest: Option<u64>,
    /// Virtual time at the end.
    pub virtual_time: Option<Duration>,
    /// Engine events.
    pub events: u64,
    /// Fabric counters at the end.
    pub fabric: Option<FabricCounters>,
    /// How often each NIC fault site fired.
    pub nic_faults: Option<NicFaultCounters>,
    /// Registrations whose pinning the drivers failed (`pin_fail`).
    pub pin_failures: u64,
    /// Wall time of the run.
    pub wall: Duration,
}

impl SimOutcome {
    /// Whether the run passed.
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// Run `cfg`.
pub fn run(cfg: &SimConfig) -> SimOutcome {
    let start = Instant::now();
    let mut job = Job::new(cfg.nic, cfg.nodes)
        .engine(EngineKind::Deterministic { seed: cfg.seed })
        .faults(cfg.faults.config())
        .nic_faults(cfg.faults.nic());
    let driver = cfg.faults.driver(cfg.seed);
    job = job.driver_faults(driver.clone());
    job.memory_per_node = 64 << 20;
    for (k, v) in cfg.derived().env {
        job = job.env(&k, &v);
    }
    let (w, seed) = (cfg.workload, cfg.seed);
    // A rank that finds a wrong value panics, which ends the job at once with its message
    // (a rank that merely returned would leave its peers waiting for it: a deadlock that
    // hides the reason).
    let res = job.run_with_digest(move |u| match workload::run_rank(w, seed, u) {
        Ok(h) => h,
        Err(e) => panic!("{e}"),
    });
    let wall = start.elapsed();
    match res {
        Err(e) => SimOutcome {
            failure: Some(e.to_string()),
            digest: None,
            virtual_time: None,
            events: 0,
            fabric: None,
            nic_faults: None,
            pin_failures: driver.pin_failures(),
            wall,
        },
        Ok(report) => {
            let digest = report
                .results
                .iter()
                .fold(report.digest.unwrap_or(0), |d, &h| fold(d, h));
            SimOutcome {
                digest: Some(digest),
                failure: None,
                virtual_time: report.virtual_time,
                events: report.events,
                fabric: report.fabric,
                nic_faults: report.nic_faults,
                pin_failures: driver.pin_failures(),
                wall,
            }
        }
    }
}
