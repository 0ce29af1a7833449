//! `nicemu devices`: the PCI functions of an emulated Cassini cluster and an emulated Gemini
//! cluster (probed by their drivers), and any real Cassini/Gemini functions visible in sysfs
//! with their driver binding.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use platform::gemini::GeminiCluster;
use platform::{Cluster, EngineKind, list_emulated_and_real};

#[derive(Args)]
pub struct DevicesArgs {
    /// Emulated Cassini NICs (one per node).
    #[arg(long, default_value_t = 2)]
    cassini: usize,
    /// Emulated Gemini NICs (2 per router, on a torus of that many routers along x).
    #[arg(long, default_value_t = 2)]
    gemini: usize,
    /// Root of the sysfs tree to scan for real devices.
    #[arg(long, default_value = "/sys")]
    sysfs: PathBuf,
}

pub fn run(args: DevicesArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut emulated = Vec::new();
    let cassini = if args.cassini > 0 {
        Some(
            Cluster::builder()
                .nics(args.cassini)
                .engine(EngineKind::Deterministic { seed: 0 })
                .build()?,
        )
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
        let g = GeminiCluster::builder()
            .dims([(args.gemini / 2) as u32, 1, 1])
            .build()?;
        emulated.extend(g.devices());
    }
    write!(out, "{}", list_emulated_and_real(emulated, &args.sysfs))?;
    Ok(())
}
