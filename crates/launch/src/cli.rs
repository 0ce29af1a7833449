//! `nicemu run -n N [--nic cassini|gemini] [--hosts h1,h2] -- PROGRAM ARGS...`: start a job
//! of N processes, on this host or on the hosts listed, with a PMI-1 server (see
//! [`crate::job`], [`crate::hosts`] and docs/launch.md).

#![forbid(unsafe_code)]

use std::time::Duration;

use crate::hosts::{self, Launcher};
use crate::job::{self, JobError, JobSpec, Sink};

/// `nicemu run`'s arguments.
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// Number of processes (ranks).
    #[arg(short = 'n', long = "np", value_name = "N")]
    pub ranks: u32,
    /// The NIC the ranks emulate, passed to them as NICEMU_NIC.
    #[arg(long, value_parser = ["cassini", "gemini"])]
    pub nic: Option<String>,
    /// Kill the job if it has not finished after this many seconds (default: no limit).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Seconds the other ranks of a failed job get to end by themselves before they are
    /// killed.
    #[arg(long, value_name = "SECS", default_value_t = job::DEFAULT_GRACE.as_secs_f64())]
    pub grace: f64,
    /// Place the ranks on these hosts, hydra's syntax: `h1,h2:4` (a host and its slots, 1
    /// when left out); slots are filled in order, then the list starts over. Ranks on
    /// other hosts are started with --launcher; each rank is told its host as NICEMU_HOST.
    #[arg(long, value_name = "HOSTS")]
    pub hosts: Option<String>,
    /// How ranks on other hosts are started: `ssh` (`ssh HOST 'COMMAND'`) or `exec`
    /// (`PROGRAM HOST COMMAND...` with --launcher-exec, no shell in between).
    #[arg(long, value_name = "KIND", default_value = "ssh")]
    pub launcher: String,
    /// The program (and its first arguments) --launcher runs, e.g. `ssh -p 2222` or
    /// `ip netns exec`.
    #[arg(long, value_name = "PROGRAM")]
    pub launcher_exec: Option<String>,
    /// The address ranks on other hosts reach this launcher's PMI server at (default: this
    /// host's address on the route to the first other host).
    #[arg(long, value_name = "IP")]
    pub pmi_address: Option<std::net::IpAddr>,
    /// Prefix every output line with the rank, as `[3] `.
    #[arg(short = 'l', long)]
    pub label: bool,
    /// Do not give Cassini ranks `/dev/cxi0`: by default, when the NIC is Cassini and
    /// `libnicemu_cxi.so` is found (beside this program, or at NICEMU_CXI_LIBRARY), every
    /// rank gets it in LD_PRELOAD, so unmodified libcxi and libfabric CXI programs see an
    /// emulated Cassini (docs/real-cxi.md).
    #[arg(long)]
    pub no_cxi_device: bool,
    /// The program to run and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    pub command: Vec<String>,
}

/// The library that gives a process `/dev/cxi0` (crate `cxi-preload`): NICEMU_CXI_LIBRARY,
/// else `libnicemu_cxi.so` beside this program (where cargo builds both).
pub fn cxi_library() -> Option<String> {
    if let Ok(p) = std::env::var("NICEMU_CXI_LIBRARY")
        && !p.trim().is_empty()
    {
        return Some(p);
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("libnicemu_cxi.so"),
        dir.join("deps/libnicemu_cxi.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .map(|p| p.to_string_lossy().into_owned())
}

fn seconds(flag: &str, v: f64) -> Result<Duration, JobError> {
    Duration::try_from_secs_f64(v)
        .map_err(|_| JobError::Invalid(format!("{flag} {v}: expected a number of seconds")))
}

impl RunArgs {
    /// The job these arguments describe.
    pub fn spec(&self) -> Result<JobSpec, JobError> {
        let mut spec = JobSpec::new(self.ranks, self.command.clone());
        if let Some(nic) = &self.nic {
            spec.env.push(("NICEMU_NIC".into(), nic.clone()));
        }
        let nic = self
            .nic
            .clone()
            .or_else(|| std::env::var("NICEMU_NIC").ok())
            .unwrap_or_else(|| "cassini".into());
        if !self.no_cxi_device
            && matches!(nic.trim().to_ascii_lowercase().as_str(), "cassini" | "cxi")
            && let Some(lib) = cxi_library()
        {
            let preload = match std::env::var("LD_PRELOAD") {
                Ok(p) if !p.trim().is_empty() => format!("{lib} {p}"),
                _ => lib,
            };
            spec.env.push(("LD_PRELOAD".into(), preload));
        }
        spec.timeout = self.timeout.map(|t| seconds("--timeout", t)).transpose()?;
        spec.grace = seconds("--grace", self.grace)?;
        spec.label = self.label;
        // As hydra: rank 0 reads the launcher's standard input.
        spec.stdin_to_rank0 = true;
        if let Some(list) = &self.hosts {
            spec.hosts = hosts::parse(list)?;
        }
        spec.launcher = Launcher::new(&self.launcher, self.launcher_exec.as_deref())?;
        spec.pmi_address = self.pmi_address;
        Ok(spec)
    }
}

/// Run the job; output of the ranks goes to `out` and `err`.
pub fn run(args: &RunArgs, out: Sink, err: Sink) -> Result<(), JobError> {
    job::run(&args.spec()?, out, err)
}
