//! What keeps one rank's MPI going: the [`Core`] its communicators share (the transport, the
//! context-id allocator, the immediate collectives in flight), and the waiting loops that
//! progress them — MPI's progress rule (MPI 4.1 §11.7): every blocking wait advances the
//! rank's pending nonblocking collectives too.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use driver::clock::Instant;
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

/// A waiting loop's bookkeeping: every 64 polls, look at the clock: a wait that found
/// nothing for [`spin_time`] asks the transport to sleep until the NIC interrupts (or
/// [`SLEEP_SLICE`] passes), so that a rank blocked in a wait uses no CPU; every 4096 polls,
/// and after every sleep, check for an aborted job and for the wait limit.
pub(crate) struct Waiter {
    start: Instant,
    polls: u32,
    /// When this stretch of fruitless polls began (since the start or the last sleep).
    idle_from: Option<Instant>,
}

/// The longest a rank sleeps at once waiting for its NIC: it then looks whether the job
/// was aborted (a peer lost) and sleeps again.
pub(crate) const SLEEP_SLICE: Duration = Duration::from_millis(100);

/// How long a wait polls before it sleeps on the NIC's interrupt: `NICEMU_WAIT_SPIN_US`
/// microseconds (default 50; a ping-pong's round trip on one host is shorter, so latency
/// never pays for a wake-up).
pub(crate) fn spin_time() -> Duration {
    static SPIN: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *SPIN.get_or_init(|| {
        let us = std::env::var("NICEMU_WAIT_SPIN_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(50);
        Duration::from_micros(us)
    })
}

impl Waiter {
    pub(crate) fn new() -> Self {
        Waiter {
            start: Instant::now(),
            polls: 0,
            idle_from: None,
        }
    }

    /// Called once per poll that found nothing: advances the rank's pending immediate
    /// collectives; sleeps once the wait has polled for [`spin_time`]; fails when the job
    /// was aborted or the wait lasted too long. `what` is formatted only then (a poll is on
    /// the latency path of every blocking call).
    pub(crate) fn tick(&mut self, core: &CoreRef, what: &dyn std::fmt::Display) -> Result<()> {
        progress_pending(core);
        self.polls = self.polls.wrapping_add(1);
        if !self.polls.is_multiple_of(64) {
            return Ok(());
        }
        let now = Instant::now();
        let from = *self.idle_from.get_or_insert(now);
        let slept = if now.saturating_duration_since(from) >= spin_time() {
            let r = core.borrow_mut().transport.sleep(SLEEP_SLICE);
            let slept = r.map_err(|e| fatal(core, e))?;
            if slept {
                self.idle_from = None;
            }
            slept
        } else {
            false
        };
        if slept || self.polls.is_multiple_of(4096) {
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

/// The future of an immediate collective: it owns everything it touches and yields its
/// output bytes (empty when the calling rank gets none).
pub(crate) type CollFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>>>>>;

enum State {
    Running(CollFuture),
    Done(Result<Vec<u8>>),
    Taken,
}

/// An immediate collective in flight.
pub(crate) struct Slot(RefCell<State>);

impl Slot {
    pub(crate) fn new(fut: CollFuture) -> Rc<Self> {
        Rc::new(Slot(RefCell::new(State::Running(fut))))
    }

    /// Poll the future once if it still runs; whether it has finished. A slot being polled
    /// further up the stack is left alone.
    pub(crate) fn advance(&self) -> bool {
        let Ok(mut s) = self.0.try_borrow_mut() else {
            return false;
        };
        if let State::Running(f) = &mut *s {
            let mut cx = Context::from_waker(Waker::noop());
            match f.as_mut().poll(&mut cx) {
                Poll::Ready(r) => *s = State::Done(r),
                Poll::Pending => return false,
            }
        }
        true
    }

    fn finished(&self) -> bool {
        self.0
            .try_borrow()
            .is_ok_and(|s| !matches!(*s, State::Running(_)))
    }

    /// The output of a finished collective (once).
    pub(crate) fn take(&self) -> Result<Vec<u8>> {
        let mut s = self.0.borrow_mut();
        match std::mem::replace(&mut *s, State::Taken) {
            State::Done(r) => r,
            State::Running(f) => {
                *s = State::Running(f);
                Err(Error::Transport(
                    "collective taken before completion".into(),
                ))
            }
            State::Taken => Err(Error::Transport("collective completed twice".into())),
        }
    }
}

/// Poll every pending immediate collective of the rank once; forget the finished ones.
pub(crate) fn progress_pending(core: &CoreRef) {
    let slots: Vec<Rc<Slot>> = {
        let c = core.borrow();
        if c.pending.is_empty() {
            return;
        }
        c.pending.clone()
    };
    let mut finished = false;
    for s in &slots {
        finished |= s.advance();
    }
    if finished {
        core.borrow_mut().pending.retain(|s| !s.finished());
    }
}
