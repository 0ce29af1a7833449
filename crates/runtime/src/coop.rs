//! The yield point of ranks that run as coroutines: code deep inside a rank (a progress
//! handle called by a user library's poll loop, a PMI fence) suspends the rank's coroutine
//! and hands control back to the scheduler ([`crate::sched`]).
//!
//! corosensei gives a coroutine its `Yielder` only as a reference to the coroutine's body, so
//! the body publishes it in a thread-local slot for the code it calls. This is the only module
//! of the crate with `unsafe` code: one dereference of that pointer, whose validity the slot's
//! protocol guarantees (see [`suspend`]).

#![allow(unsafe_code)]

use std::cell::Cell;
use std::ptr;

use corosensei::Yielder;

/// Why a rank gives control back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// A poll loop found nothing: wake the rank when its node's NIC did something.
    Poll,
    /// A PMI fence waits for other ranks: wake the rank when the PMI state changes.
    Pmi,
}

/// What the scheduler tells a rank it resumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    /// Carry on.
    Go,
    /// The job is over: unwind the rank (its destructors run, the job's PMI is aborted).
    Abort,
}

/// The panic payload that unwinds a rank the scheduler aborts.
pub(crate) struct RankAborted;

pub(crate) type RankYielder = Yielder<Resume, Suspend>;

thread_local! {
    /// The yielder of the rank coroutine running on this thread, null when none runs.
    static CURRENT: Cell<*const RankYielder> = const { Cell::new(ptr::null()) };
}

/// Marks the running coroutine as a rank until dropped (at the end of the coroutine's body).
pub(crate) struct Entered(());

/// Publish `y`, the yielder of the coroutine whose body is calling this, for [`suspend`].
/// The returned guard must live in that body and is dropped before the body returns.
pub(crate) fn enter(y: &RankYielder) -> Entered {
    CURRENT.with(|c| c.set(ptr::from_ref(y)));
    Entered(())
}

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(ptr::null()));
    }
}

/// Whether the caller runs inside a rank coroutine.
pub(crate) fn in_rank() -> bool {
    CURRENT.with(|c| !c.get().is_null())
}

/// Suspend the running rank for `why`, returning `true` once the scheduler resumes it.
/// Returns `false` at once, without suspending, outside a rank coroutine or while the rank
/// unwinds (its destructors must run to the end). A rank resumed with [`Resume::Abort`]
/// unwinds from here with a [`RankAborted`] payload.
pub(crate) fn suspend(why: Suspend) -> bool {
    let p = CURRENT.with(Cell::get);
    if p.is_null() || std::thread::panicking() {
        return false;
    }
    CURRENT.with(|c| c.set(ptr::null()));
    // SAFETY: `CURRENT` is non-null only while a rank coroutine executes on this thread: its
    // body sets it (`enter`) on entry, and `suspend` sets it back right after the switch back
    // into the coroutine; it is cleared before every switch out of the coroutine (here, before
    // suspending) and when the body ends (`Entered::drop`). So a non-null `p` was set by the
    // coroutine that is running now, and points to the `Yielder` that corosensei passed to
    // that coroutine's body, which stays valid for the whole execution of the body.
    let y = unsafe { &*p };
    let r = y.suspend(why);
    CURRENT.with(|c| c.set(p));
    if r == Resume::Abort {
        std::panic::resume_unwind(Box::new(RankAborted));
    }
    true
}
