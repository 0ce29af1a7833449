//! The MPI environment of one rank (`MPI_Init` .. `MPI_Finalize`): the transport under it and
//! what every communicator of the rank shares.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use driver::clock::Instant;

use crate::collective::exec::{Slot, progress_pending};
use crate::communicator::SimpleCommunicator;
use transport::error::{Error, Result};
use transport::{Completion, OpId, Transport};

/// How long one operation may wait before the job is declared hung (the transports have
/// their own, shorter, network timeouts; this catches a peer that never answers).
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(300);

/// What the communicators of one rank share: the transport and the context-id allocator.
pub(crate) struct Core {
    pub(crate) transport: Box<dyn Transport>,
    /// The lowest context id this rank has not used yet (world uses 0 and 1).
    pub(crate) next_context: u16,
    /// The immediate collectives in flight, advanced by every blocking wait of the rank.
    pub(crate) pending: Vec<Rc<Slot>>,
}

/// Shared handle on a rank's [`Core`].
pub(crate) type CoreRef = Rc<RefCell<Core>>;

/// A network failure is fatal to the job (`MPI_ERRORS_ARE_FATAL`): tell every rank, so no
/// peer waits forever for this one. Errors in the caller's arguments are returned only.
pub(crate) fn fatal(core: &CoreRef, e: Error) -> Error {
    if matches!(e, Error::Transport(_) | Error::Timeout(_))
        && let Ok(mut c) = core.try_borrow_mut()
    {
        c.transport.abort(&e.to_string());
    }
    e
}

/// Fails once some rank aborted the job.
pub(crate) fn check_aborted(core: &CoreRef) -> Result<()> {
    match core.borrow().transport.aborted() {
        Some(why) => Err(Error::Transport(format!("job aborted: {why}"))),
        None => Ok(()),
    }
}

/// A waiting loop's bookkeeping: every 4096 polls, check for an aborted job and for the
/// wait limit.
pub(crate) struct Waiter {
    start: Instant,
    polls: u32,
}

impl Waiter {
    pub(crate) fn new() -> Self {
        Waiter {
            start: Instant::now(),
            polls: 0,
        }
    }

    /// Called once per poll: advances the rank's pending immediate collectives; fails when
    /// the job was aborted or the wait lasted too long. `what` is formatted only then (a
    /// poll is on the latency path of every blocking call).
    pub(crate) fn tick(&mut self, core: &CoreRef, what: &dyn std::fmt::Display) -> Result<()> {
        progress_pending(core);
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(4096) {
            check_aborted(core)?;
            if self.start.elapsed() > WAIT_LIMIT {
                return Err(fatal(
                    core,
                    Error::Timeout(format!("{what} did not complete in {WAIT_LIMIT:?}")),
                ));
            }
        }
        Ok(())
    }
}

/// Progress `op` until it completes.
pub(crate) fn wait_op(core: &CoreRef, op: OpId) -> Result<Completion> {
    wait_op_into(core, op, None)
}

/// Wait for `op`; a receive into `out` may complete with its bytes already there
/// ([`Completion::Landed`], `Transport::test_into`).
pub(crate) fn wait_op_into(
    core: &CoreRef,
    op: OpId,
    mut out: Option<&mut [u8]>,
) -> Result<Completion> {
    let mut w = Waiter::new();
    loop {
        let r = match out.as_deref_mut() {
            Some(buf) => core.borrow_mut().transport.test_into(op, buf),
            None => core.borrow_mut().transport.test(op),
        };
        match r {
            Ok(Some(c)) => return Ok(c),
            Ok(None) => {}
            Err(e) => return Err(fatal(core, e)),
        }
        w.tick(core, &format_args!("operation {op:?}"))?;
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
