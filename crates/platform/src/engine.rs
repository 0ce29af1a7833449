//! Which engine drives an emulated machine, and starting it over a fabric.

#![forbid(unsafe_code)]

use std::sync::Arc;

use emu_core::engine::deterministic::Deterministic;
use emu_core::engine::threaded::{Threaded, ThreadedConfig};
use emu_core::engine::{Engine, EngineError};
use emu_core::fabric::Fabric;

/// Which engine drives the cluster's devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// One thread, virtual time, every choice drawn from `seed`: same seed, same run.
    Deterministic {
        /// The seed.
        seed: u64,
    },
    /// Real time, device work inline or on engine threads (default settings).
    Threaded,
    /// Real time with explicit settings.
    ThreadedWith(ThreadedConfig),
}

/// A started engine, and the threaded engine's own handle when it is one (for shutdown).
pub(crate) type Started = (Arc<dyn Engine>, Option<Arc<Threaded>>);

impl EngineKind {
    /// Start an engine of this kind over `fabric`: the engine, and the threaded engine's own
    /// handle when it is one (for shutdown).
    pub(crate) fn start(&self, fabric: Fabric) -> Result<Started, EngineError> {
        Ok(match self {
            EngineKind::Deterministic { seed } => {
                (Arc::new(Deterministic::new(*seed, fabric)), None)
            }
            EngineKind::Threaded | EngineKind::ThreadedWith(_) => {
                let cfg = match self {
                    EngineKind::ThreadedWith(c) => c.clone(),
                    _ => ThreadedConfig::default(),
                };
                let t = Arc::new(Threaded::new(fabric, cfg)?);
                (Arc::clone(&t) as Arc<dyn Engine>, Some(t))
            }
        })
    }
}
