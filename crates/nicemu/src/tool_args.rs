//! Options the Cassini tools ([`crate::cxi_tools`]) and the Gemini tools
//! ([`crate::gni_tools`]) share: the engine of the emulated pair, and how a latency test
//! runs (iterations or a duration, warmup, the pause between iterations, what is reported).

use std::time::Duration;

use clap::{Args, ValueEnum};
use platform::EngineKind;

use crate::args;

/// Which engine drives the emulated pair.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Engine {
    /// Real time: device work inline in the caller or on engine threads.
    Threaded,
    /// Virtual time, one thread, seeded.
    Deterministic,
}

/// Engine options shared by every tool.
#[derive(Args, Clone, Debug)]
pub struct EngineArgs {
    /// Engine driving the emulated pair.
    #[arg(long, value_enum, default_value_t = Engine::Threaded)]
    engine: Engine,
    /// Seed of the deterministic engine.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl EngineArgs {
    pub fn kind(&self) -> EngineKind {
        match self.engine {
            Engine::Threaded => EngineKind::Threaded,
            Engine::Deterministic => EngineKind::Deterministic { seed: self.seed },
        }
    }
}

/// How every latency tool runs.
#[derive(Args, Clone, Debug)]
pub struct LatRun {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Iterations per size.
    #[arg(short = 'n', long, default_value_t = 100)]
    pub iters: u64,
    /// Run each size for this many seconds instead (fractions allowed, at most a day).
    #[arg(short = 'D', long, value_parser = args::seconds)]
    pub duration: Option<Duration>,
    /// Unmeasured iterations per size.
    #[arg(long, default_value_t = 10)]
    pub warmup: u64,
    /// Microseconds between iterations (at most 1000000).
    #[arg(long, value_parser = args::gap_micros, default_value = "0")]
    pub latency_gap: Duration,
    /// Print every measurement.
    #[arg(long)]
    pub report_all: bool,
}
