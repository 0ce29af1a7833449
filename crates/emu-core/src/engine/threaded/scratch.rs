//! The buffers of a work loop, kept per thread so that the inline path allocates nothing once
//! warm.

use std::collections::VecDeque;

use crate::engine::Action;

use super::sched::Work;

/// The buffers of one work loop (action list, work queue, a batch of deferred items), kept
/// per thread between loops so that the inline path allocates nothing once warm.
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) actions: Vec<Action>,
    pub(super) q: VecDeque<Work>,
    pub(super) batch: VecDeque<Work>,
}

/// Buffers above this capacity are not kept (a burst of thousands of packets should not
/// pin its memory in every thread).
const SCRATCH_KEEP: usize = 1024;

thread_local! {
    static SCRATCH: std::cell::Cell<Option<Scratch>> = const { std::cell::Cell::new(None) };
}

impl Scratch {
    /// This thread's buffers (empty), or new ones if they are in use (a re-entrant call
    /// from an interrupt sink) or the thread has none yet.
    pub(super) fn take() -> Scratch {
        SCRATCH
            .try_with(|c| c.take())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Give the (drained) buffers back to this thread.
    pub(super) fn give(mut self) {
        if self.actions.capacity() > SCRATCH_KEEP
            || self.q.capacity() > SCRATCH_KEEP
            || self.batch.capacity() > SCRATCH_KEEP
        {
            return;
        }
        self.actions.clear();
        self.q.clear();
        self.batch.clear();
        let _ = SCRATCH.try_with(|c| c.set(Some(self)));
    }
}
