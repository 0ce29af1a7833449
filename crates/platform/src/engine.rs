//! Which engine drives an emulated machine, and starting it over a fabric.

#![forbid(unsafe_code)]

use std::sync::Arc;

use emu_core::engine::deterministic::Deterministic;
use emu_core::engine::threaded::{Threaded, ThreadedConfig};
use emu_core::engine::{Engine, EngineError, Progress};
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

/// A started engine, with its concrete handle: the threaded engine's (for shutdown) or the
/// deterministic engine's (for schedulers that step it event by event).
pub(crate) struct Started {
    pub engine: Arc<dyn Engine>,
    pub threaded: Option<Arc<Threaded>>,
    pub deterministic: Option<Deterministic>,
}

/// Wraps the progress handle a cluster gives each node's driver: called once per node with
/// the node's index and the handle it would have had; what it returns is what the node's
/// waits (the user libraries' and transports' poll loops, the driver's waits) call instead.
/// A runtime that runs ranks as coroutines uses it to turn every wait into a yield point.
pub type ProgressWrap = Arc<dyn Fn(usize, Arc<dyn Progress>) -> Arc<dyn Progress> + Send + Sync>;

/// Apply `wrap` (if any) to node `node`'s progress handle.
pub(crate) fn wrap_progress(
    wrap: Option<&ProgressWrap>,
    node: usize,
    p: &Arc<dyn Progress>,
) -> Arc<dyn Progress> {
    match wrap {
        Some(w) => w(node, Arc::clone(p)),
        None => Arc::clone(p),
    }
}

impl EngineKind {
    /// Start an engine of this kind over `fabric`.
    pub(crate) fn start(&self, fabric: Fabric) -> Result<Started, EngineError> {
        Ok(match self {
            EngineKind::Deterministic { seed } => {
                let d = Deterministic::new(*seed, fabric);
                Started {
                    engine: Arc::new(d.clone()),
                    threaded: None,
                    deterministic: Some(d),
                }
            }
            EngineKind::Threaded | EngineKind::ThreadedWith(_) => {
                let cfg = match self {
                    EngineKind::ThreadedWith(c) => c.clone(),
                    _ => ThreadedConfig::default(),
                };
                let t = Arc::new(Threaded::new(fabric, cfg)?);
                Started {
                    engine: Arc::clone(&t) as Arc<dyn Engine>,
                    threaded: Some(t),
                    deterministic: None,
                }
            }
        })
    }
}
