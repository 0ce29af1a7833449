//! `nicemu devices`: the PCI functions of an emulated Cassini cluster and an emulated Gemini
//! cluster (probed by their drivers), and any real Cassini/Gemini functions visible in sysfs
//! with their driver binding.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use platform::gemini::GeminiCluster;
use platform::{BuildProgress, Cluster, EngineKind, list_emulated_and_real};

/// Most NICs of one kind `nicemu devices` builds in one process. An idle NIC costs at most
/// 256 KiB of emulator state plus its node's host memory bookkeeping (docs/PERFORMANCE.md,
/// "Idle NIC memory"); 16,384 NICs of both kinds stay within a few GiB.
pub const MAX_NICS: usize = 16_384;

/// Refuse a cluster larger than [`MAX_NICS`] before allocating anything.
fn check_limit(flag: &str, n: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        n <= MAX_NICS,
        "{flag} {n}: at most {MAX_NICS} emulated NICs of one kind are built in one process \
         (each idle NIC holds up to 256 KiB of device state; see docs/PERFORMANCE.md, \
         \"Idle NIC memory\")"
    );
    Ok(())
}

/// Progress on stderr while a large cluster is built, when stderr is a terminal.
fn progress(kind: &'static str, n: usize) -> Option<BuildProgress> {
    if n < 256 || !std::io::stderr().is_terminal() {
        return None;
    }
    let step = (n / 100).max(1);
    Some(Arc::new(move |done: usize, total: usize| {
        if done.is_multiple_of(step) || done == total {
            let mut err = std::io::stderr();
            let _ = write!(err, "\rbuilding {kind} cluster: {done}/{total} NICs");
            if done == total {
                let _ = writeln!(err);
            }
        }
    }))
}

#[derive(Args)]
pub struct DevicesArgs {
    /// Emulated Cassini NICs (one per node; at most 16,384).
    #[arg(long, default_value_t = 2)]
    cassini: usize,
    /// Emulated Gemini NICs (2 per router, on a torus of that many routers along x; at most
    /// 16,384).
    #[arg(long, default_value_t = 2)]
    gemini: usize,
    /// Root of the sysfs tree to scan for real devices.
    #[arg(long, default_value = "/sys")]
    sysfs: PathBuf,
}

pub fn run(args: DevicesArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    check_limit("--cassini", args.cassini)?;
    check_limit("--gemini", args.gemini)?;
    let mut emulated = Vec::new();
    let cassini = if args.cassini > 0 {
        let mut b = Cluster::builder()
            .nics(args.cassini)
            .engine(EngineKind::Deterministic { seed: 0 });
        if let Some(p) = progress("Cassini", args.cassini) {
            b = b.on_node_built(p);
        }
        Some(b.build()?)
    } else {
        None
    };
    if let Some(c) = &cassini {
        emulated.extend(c.devices());
    }
    if args.gemini > 0 {
        anyhow::ensure!(
            args.gemini.is_multiple_of(2),
            "--gemini must be even: two NICs share a Gemini router"
        );
        let mut b = GeminiCluster::builder().dims([(args.gemini / 2) as u32, 1, 1]);
        if let Some(p) = progress("Gemini", args.gemini) {
            b = b.on_node_built(p);
        }
        let g = b.build()?;
        emulated.extend(g.devices());
    }
    write!(out, "{}", list_emulated_and_real(emulated, &args.sysfs))?;
    Ok(())
}
