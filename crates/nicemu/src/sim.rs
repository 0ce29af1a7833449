//! `nicemu sim`: an MPI job on the deterministic engine over a fabric with seeded faults,
//! checked; the same seed replays it bit for bit (crate `sim`, docs/RELIABILITY.md).
//! `--campaign K` runs K seeds and lists the replay command of every failure.

use std::io::{IsTerminal, Write};

use anyhow::bail;
use clap::Args;
use runtime::Nic;
use sim::{Campaign, FaultSpec, SimConfig, SimOutcome, Workload};

use crate::args::NicArg;

/// The default fault mix.
pub const DEFAULT_FAULTS: &str = "drop=0.05,reorder,corrupt=0.01,linkflap";

#[derive(Args)]
pub struct SimArgs {
    /// The program every rank runs: semantics (the MPI semantics suite), collectives (a
    /// seeded collective mix) or random (a seeded point-to-point and RMA program).
    #[arg(default_value = "semantics", value_parser = parse_workload)]
    workload: Workload,
    /// The seed of the run (of the first run of a campaign: see --seed-base).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Nodes (one rank each).
    #[arg(long, default_value_t = 4)]
    nodes: u32,
    /// NIC family of the emulated machine.
    #[arg(long, value_enum, default_value_t = NicArg::Cassini)]
    nic: NicArg,
    /// Fabric faults: comma-separated sites, each `name` or `name=value`: drop, dup,
    /// reorder, reorder-max (us), corrupt, linkflap, flap-down (us), or `none`.
    #[arg(long, default_value = DEFAULT_FAULTS, value_parser = parse_faults)]
    faults: FaultSpec,
    /// Run this many seeds (from --seed-base) and report the failures.
    #[arg(long)]
    campaign: Option<u64>,
    /// The first seed of a campaign (default: --seed).
    #[arg(long)]
    seed_base: Option<u64>,
    /// Cassini: switch on a deliberate transport bug (one unexpected message delivered with
    /// a wrong byte), to check that campaigns find bugs.
    #[arg(long, hide = true)]
    inject_bug: bool,
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    s.parse()
}

fn parse_faults(s: &str) -> Result<FaultSpec, String> {
    FaultSpec::parse(s).map_err(|e| e.to_string())
}

/// The most nodes a simulated job may have.
const MAX_NODES: u32 = 1024;

pub fn run(args: SimArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    // A rank's panic is a finding of the run, reported with its message and replay command
    // (the runtime catches it); the default hook would print it, with a backtrace, for
    // every failing seed of a campaign.
    std::panic::set_hook(Box::new(|_| {}));
    if args.nodes == 0 || args.nodes > MAX_NODES {
        bail!(
            "--nodes must be between 1 and {MAX_NODES} (got {})",
            args.nodes
        );
    }
    let nic = match args.nic {
        NicArg::Cassini => Nic::Cassini,
        NicArg::Gemini => Nic::Gemini,
    };
    args.faults.check_nic(nic)?;
    let cfg = SimConfig {
        seed: args.seed,
        nodes: args.nodes,
        nic,
        faults: args.faults,
        workload: args.workload,
        inject_bug: args.inject_bug,
    };
    if args.inject_bug && nic != Nic::Cassini {
        bail!("--inject-bug exists for --nic cassini only");
    }
    match args.campaign {
        None => {
            if args.seed_base.is_some() {
                bail!("--seed-base needs --campaign");
            }
            single(&cfg, out)
        }
        Some(0) => bail!("--campaign needs at least one seed"),
        Some(k) => campaign(cfg, args.seed_base.unwrap_or(args.seed), k, out),
    }
}

fn describe(cfg: &SimConfig, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "sim: seed {}, {} nodes, {} NIC, workload {}, deterministic engine",
        cfg.seed,
        cfg.nodes,
        sim::nic_name(cfg.nic),
        cfg.workload.name()
    )?;
    writeln!(out, "faults: {}", cfg.faults.to_arg())?;
    let d = cfg.derived();
    let env: Vec<String> = d.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    writeln!(out, "derived from the seed: {}", env.join(" "))
}

/// The NIC fault sites that fired, as `name=count` by `--faults` key.
fn nic_sites(n: &platform::NicFaultCounters) -> String {
    [
        ("eq_full", n.eq_full),
        ("le_exhaust", n.le_exhaust),
        ("atu_miss", n.atu_miss),
        ("ct_delay", n.ct_delay),
        ("slow_target", n.slow_target),
        ("gni_cq_overrun", n.cq_overrun),
        ("smsg_starve", n.smsg_starve),
    ]
    .iter()
    .filter(|(_, c)| *c > 0)
    .map(|(k, c)| format!("{k}={c}"))
    .collect::<Vec<_>>()
    .join(" ")
}

fn single(cfg: &SimConfig, out: &mut dyn Write) -> anyhow::Result<()> {
    describe(cfg, out)?;
    let o = sim::run(cfg);
    if let Some(f) = &o.fabric {
        writeln!(
            out,
            "fabric: {} packets injected, {} delivered, {} dropped ({} by the drop site, {} on \
             a down link), {} duplicated, {} reordered, {} corrupted, {} link flaps",
            f.injected,
            f.delivered,
            f.dropped,
            f.dropped_fault,
            f.dropped_link_down,
            f.duplicated,
            f.reordered,
            f.corrupted,
            f.link_flaps
        )?;
        if f.link_retries + f.link_held_for_flap > 0 {
            writeln!(
                out,
                "link-level retry: {} retransmissions, {} lost and {} damaged packets \
                 recovered, {} held for a flapped link",
                f.link_retries,
                f.link_recovered_drops,
                f.link_recovered_corruptions,
                f.link_held_for_flap
            )?;
        }
    }
    if let Some(f) = &o.fabric
        && f.port_downs > 0
    {
        writeln!(out, "switch ports taken down: {}", f.port_downs)?;
    }
    if let Some(n) = o.nic_faults.as_ref().filter(|n| n.total() > 0) {
        writeln!(out, "NIC fault sites: {}", nic_sites(n))?;
    }
    if o.pin_failures > 0 {
        writeln!(out, "driver fault sites: pin_fail={}", o.pin_failures)?;
    }
    if let Some(t) = o.virtual_time {
        writeln!(
            out,
            "virtual time: {:.3} us, engine events: {}",
            t.as_nanos() as f64 / 1e3,
            o.events
        )?;
    }
    writeln!(out, "wall time: {:.3} s", o.wall.as_secs_f64())?;
    match (&o.failure, o.digest) {
        (None, Some(d)) => {
            writeln!(
                out,
                "result: every rank's data checked, no message lost or duplicated"
            )?;
            writeln!(out, "digest: {d:016x}")?;
            Ok(())
        }
        (failure, _) => {
            let why = failure.clone().unwrap_or_else(|| "no digest".into());
            writeln!(out, "FAILED: {why}")?;
            writeln!(out, "replay: {}", cfg.replay_command())?;
            bail!("seed {} failed", cfg.seed)
        }
    }
}

fn campaign(
    base: SimConfig,
    seed_base: u64,
    count: u64,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let c = Campaign {
        base,
        seed_base,
        count,
    };
    let Some(last) = c.last_seed() else {
        bail!(
            "--seed-base {seed_base} with --campaign {count}: the seeds would run past \
             {} (the largest seed)",
            u64::MAX
        );
    };
    writeln!(
        out,
        "campaign: seeds {seed_base}..={last}, {} nodes, {} NIC, workload {}, faults {}",
        c.base.nodes,
        sim::nic_name(c.base.nic),
        c.base.workload.name(),
        c.base.faults.to_arg()
    )?;
    let tty = std::io::stderr().is_terminal();
    let mut failed = 0u64;
    let rep = c.run(|i, cfg, o: &SimOutcome| {
        failed += u64::from(!o.passed());
        if tty {
            eprint!(
                "\r[{}/{count}] seed {} {} ({failed} failed)   ",
                i + 1,
                cfg.seed,
                if o.passed() { "ok" } else { "FAILED" },
            );
            if i + 1 == count {
                eprintln!();
            }
        }
    });
    writeln!(
        out,
        "{} passed, {} failed, wall time {:.1} s",
        rep.passed,
        rep.failures.len(),
        rep.wall.as_secs_f64()
    )?;
    writeln!(
        out,
        "faults injected over all runs: {} packets dropped, {} duplicated, {} reordered, {} \
         corrupted, {} link flaps",
        rep.dropped, rep.duplicated, rep.reordered, rep.corrupted, rep.link_flaps
    )?;
    if rep.port_downs > 0 {
        writeln!(
            out,
            "switch ports taken down over all runs: {}",
            rep.port_downs
        )?;
    }
    if rep.nic.total() > 0 {
        writeln!(
            out,
            "NIC fault sites over all runs: {}",
            nic_sites(&rep.nic)
        )?;
    }
    if rep.pin_failures > 0 {
        writeln!(
            out,
            "driver fault sites over all runs: pin_fail={}",
            rep.pin_failures
        )?;
    }
    if rep.link_retries + rep.link_held_for_flap > 0 {
        writeln!(
            out,
            "link-level retry over all runs: {} retransmissions, {} packets held for a \
             flapped link",
            rep.link_retries, rep.link_held_for_flap
        )?;
    }
    for (cfg, why) in &rep.failures {
        writeln!(out, "FAILED seed {}: {why}", cfg.seed)?;
        writeln!(out, "  replay: {}", cfg.replay_command())?;
    }
    if !rep.failures.is_empty() {
        bail!("{} of {count} seeds failed", rep.failures.len());
    }
    Ok(())
}
