//! The threaded engine's scheduler: a heap of timers (and packets whose modelled arrival is
//! in the future) and a queue of deferred work, in the order it was handed over.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use crate::fabric::Packet;
use crate::time::SimTime;

use super::slot::Slot;

pub(super) enum Work {
    Deliver(Packet),
    Timer { slot: Arc<Slot>, token: u64 },
}

pub(super) struct Timed {
    pub(super) time: SimTime,
    pub(super) seq: u64,
    pub(super) work: Work,
}

impl PartialEq for Timed {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timed {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

#[derive(Default)]
pub(super) struct Sched {
    pub(super) heap: BinaryHeap<Timed>,
    pub(super) deferred: VecDeque<Work>,
    /// A thread is running a batch taken from `deferred` (one at a time, so deferred work
    /// runs in the order it was queued).
    pub(super) draining: bool,
    pub(super) seq: u64,
    pub(super) shutdown: bool,
}

/// What `Shared::take_ready` took.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Taken {
    /// This many deferred items, in order.
    Deferred(usize),
    /// One due timer (or delayed packet).
    Timer,
}
