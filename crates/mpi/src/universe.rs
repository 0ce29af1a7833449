//! The MPI environment of one rank (`MPI_Init` .. `MPI_Finalize`): the transport under it and
//! what every communicator of the rank shares.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::communicator::SimpleCommunicator;
use crate::error::{Error, Result};
use crate::transport::{Completion, OpId, Transport};

/// How long one operation may wait before the job is declared hung (the transports have
/// their own, shorter, network timeouts; this catches a peer that never answers).
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(300);

/// What the communicators of one rank share: the transport and the context-id allocator.
pub(crate) struct Core {
    pub(crate) transport: Box<dyn Transport>,
    /// The lowest context id this rank has not used yet (world uses 0 and 1).
    pub(crate) next_context: u16,
}

/// Shared handle on a rank's [`Core`].
pub(crate) type CoreRef = Rc<RefCell<Core>>;

/// Progress `op` until it completes.
pub(crate) fn wait_op(core: &CoreRef, op: OpId) -> Result<Completion> {
    let start = Instant::now();
    let mut polls = 0u32;
    loop {
        if let Some(c) = core.borrow_mut().transport.test(op)? {
            return Ok(c);
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(4096) && start.elapsed() > WAIT_LIMIT {
            return Err(Error::Timeout(format!(
                "operation {op:?} did not complete in {WAIT_LIMIT:?}"
            )));
        }
    }
}

/// One rank's MPI environment. Dropping it finalizes (the transport's resources go back to
/// the driver).
pub struct Universe {
    pub(crate) core: CoreRef,
    world: SimpleCommunicator,
}

impl Universe {
    /// Initialize MPI on `transport` (what `mpi::initialize()` does once the launcher has
    /// chosen the NIC).
    pub fn new(transport: Box<dyn Transport>) -> Self {
        let core = Rc::new(RefCell::new(Core {
            transport,
            next_context: 2,
        }));
        let world = SimpleCommunicator::world(Rc::clone(&core));
        Universe { core, world }
    }

    /// `MPI_COMM_WORLD`.
    pub fn world(&self) -> SimpleCommunicator {
        self.world.clone()
    }

    /// Run `f` on the transport (protocol statistics, tests of the transport itself).
    pub fn with_transport<R>(&self, f: impl FnOnce(&mut dyn Transport) -> R) -> R {
        f(self.core.borrow_mut().transport.as_mut())
    }

    /// `MPI_Finalize`: complete this rank's traffic and wait for every rank to do so, then
    /// release the transport. Dropping a `Universe` does the same, ignoring errors.
    pub fn finalize(self) -> Result<()> {
        self.core.borrow_mut().transport.finalize()
    }

    /// The name of the transport (`cxi` or `gni`).
    pub fn transport_name(&self) -> &'static str {
        self.core.borrow().transport.name()
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        // Finalizing twice is harmless: the transport's step is idempotent once drained.
        if let Ok(mut core) = self.core.try_borrow_mut()
            && let Err(e) = core.transport.finalize()
        {
            tracing::warn!(error = %e, "MPI finalize failed");
        }
    }
}
