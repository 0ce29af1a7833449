//! Options the Cassini tools ([`crate::cxi_tools`]) and the Gemini tools
//! ([`crate::gni_tools`]) share: the engine of the emulated pair, how a latency test runs
//! (iterations or a duration, warmup, the pause between iterations, what is reported) and how
//! a bandwidth test runs (iterations or a duration, the data buffers).

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

/// How every bandwidth tool runs.
#[derive(Args, Clone, Debug)]
pub struct BwRun {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Iterations per size (each `--list-size` operations).
    #[arg(short = 'n', long, default_value_t = 10)]
    pub iters: u64,
    /// Run each size for this many seconds instead (fractions allowed, at most a day).
    #[arg(short = 'D', long, value_parser = args::seconds)]
    pub duration: Option<Duration>,
    /// Largest data buffer on each side (offsets wrap inside it); at least the largest size.
    #[arg(long, value_parser = args::positive_size, default_value = "64M")]
    pub buf_sz: u64,
    /// Alignment of operations in the buffers (at least 1; Gemini rounds it up to 4).
    #[arg(long, default_value_t = 64)]
    pub buf_align: u64,
}
