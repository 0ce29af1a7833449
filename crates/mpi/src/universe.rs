//! The MPI environment of one rank (`MPI_Init` .. `MPI_Finalize`): the transport under it and
//! what every communicator of the rank shares.

use std::cell::RefCell;
use std::rc::Rc;

use crate::transport::Transport;

/// What the communicators of one rank share: the transport and the context-id allocator.
pub(crate) struct Core {
    pub(crate) transport: Box<dyn Transport>,
    /// Context ids handed out so far (world uses 0 and 1).
    #[allow(dead_code)] // used by communicator creation
    pub(crate) next_context: u16,
}

/// One rank's MPI environment. Dropping it finalizes (the transport's resources go back to
/// the driver).
pub struct Universe {
    pub(crate) core: Rc<RefCell<Core>>,
}

impl Universe {
    /// Initialize MPI on `transport` (what `mpi::initialize()` does once the launcher has
    /// chosen the NIC).
    pub fn new(transport: Box<dyn Transport>) -> Self {
        Universe {
            core: Rc::new(RefCell::new(Core {
                transport,
                next_context: 2,
            })),
        }
    }

    /// Run `f` on the transport (protocol statistics, tests of the transport itself).
    pub fn with_transport<R>(&self, f: impl FnOnce(&mut dyn Transport) -> R) -> R {
        f(self.core.borrow_mut().transport.as_mut())
    }

    /// The name of the transport (`cxi` or `gni`).
    pub fn transport_name(&self) -> &'static str {
        self.core.borrow().transport.name()
    }
}
