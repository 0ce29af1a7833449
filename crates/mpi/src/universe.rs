//! The MPI environment of one rank (`MPI_Init` .. `MPI_Finalize`): the transport under it and
//! what every communicator of the rank shares.

use std::cell::RefCell;
use std::rc::Rc;

use crate::communicator::SimpleCommunicator;
use crate::progress::{Core, CoreRef};
use transport::Transport;
use transport::error::Result;

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
            pending: Vec::new(),
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

impl Universe {
    /// Abort the whole job with reason `why` (`MPI_Abort`, a fatal error handler): the
    /// process manager ends every rank, so no peer waits for this one. The caller then exits
    /// without finalizing (finalize is collective, and the peers are not coming).
    pub fn abort(&self, why: &str) {
        if let Ok(mut core) = self.core.try_borrow_mut() {
            core.transport.abort(why);
        }
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        // Immediate collectives never completed hold handles on the core: let them go (after
        // the borrow, as dropping one cancels its receives through the core).
        let abandoned = self
            .core
            .try_borrow_mut()
            .map(|mut c| std::mem::take(&mut c.pending));
        drop(abandoned);
        // Finalizing twice is harmless: the transport's step is idempotent once drained.
        if let Ok(mut core) = self.core.try_borrow_mut()
            && let Err(e) = core.transport.finalize()
        {
            tracing::warn!(error = %e, "MPI finalize failed");
        }
    }
}
