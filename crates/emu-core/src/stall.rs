//! Timed NIC fault sites inside a model ([`crate::nic_faults`]): a [`Stall`] holds the
//! items offered while it lasts and releases them in order when it ends, and
//! [`FaultTimers`] arms the model's timers that end them.

use std::collections::VecDeque;

use crate::engine::DeviceIo;
use crate::time::{SimDuration, SimTime};

/// A stall of a timed fault site: once it begins, every item offered before it ends waits, and
/// all of them are released, in arrival order, when it is over (a slow target's packets,
/// held SMSG credit returns). Items offered after the end still queue behind held ones, so
/// order is kept until the next [`Stall::release`].
#[derive(Clone, Debug)]
pub struct Stall<T> {
    until: SimTime,
    held: VecDeque<T>,
}

impl<T> Default for Stall<T> {
    fn default() -> Self {
        Stall {
            until: SimTime::ZERO,
            held: VecDeque::new(),
        }
    }
}

impl<T> Stall<T> {
    /// Offer `item` at `now`; `fires`: the site fired on it, beginning a stall of `length`
    /// unless one is running. Returns the item if it may be processed now (else it is held)
    /// and the end of a stall that began, for which the caller arms a timer.
    pub fn offer(
        &mut self,
        now: SimTime,
        item: T,
        fires: bool,
        length: SimDuration,
    ) -> (Option<T>, Option<SimTime>) {
        let mut begun = None;
        if fires && now >= self.until {
            self.until = now + length;
            begun = Some(self.until);
        }
        if now < self.until || !self.held.is_empty() {
            self.held.push_back(item);
            return (None, begun);
        }
        (Some(item), begun)
    }

    /// Whether an item offered at `now` (`fires`: the site fired on it) would be held, so a
    /// caller can skip building an item that would be applied at once.
    pub fn would_hold(&self, now: SimTime, fires: bool) -> bool {
        fires || now < self.until || !self.held.is_empty()
    }

    /// The held items, in arrival order, if the stall is over at `now`; else none.
    pub fn release(&mut self, now: SimTime) -> Vec<T> {
        if now >= self.until {
            self.held.drain(..).collect()
        } else {
            Vec::new()
        }
    }
}

/// The due times of a model's fault timers, all on one token: a time is armed once however
/// many held items wait for it.
#[derive(Clone, Debug, Default)]
pub struct FaultTimers {
    armed: Vec<SimTime>,
}

impl FaultTimers {
    /// Arm a timer with `token` for `at`, unless one is armed for that time.
    pub fn arm(&mut self, io: &mut DeviceIo<'_>, at: SimTime, token: u64) {
        if self.armed.contains(&at) {
            return;
        }
        self.armed.push(at);
        io.timer(at.since(io.now()), token);
    }

    /// Offer `item` to `stall` at the device's time (see [`Stall::offer`]) and arm a timer
    /// with `token` for the end of a stall that begins. Returns the item if it may be
    /// processed now.
    pub fn hold<T>(
        &mut self,
        io: &mut DeviceIo<'_>,
        stall: &mut Stall<T>,
        item: T,
        fires: bool,
        length: SimDuration,
        token: u64,
    ) -> Option<T> {
        let (now, begun) = stall.offer(io.now(), item, fires, length);
        if let Some(end) = begun {
            self.arm(io, end, token);
        }
        now
    }

    /// The timer fired at `now`: forget the times that have passed.
    pub fn fired(&mut self, now: SimTime) {
        self.armed.retain(|&t| t > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_holds_items_until_it_ends_and_keeps_their_order() {
        let mut s = Stall::default();
        let t = SimTime::ZERO;
        let len = SimDuration::from_us(10);
        assert_eq!(s.offer(t, 1, false, len), (Some(1), None));
        let end = t + len;
        assert_eq!(s.offer(t, 2, true, len), (None, Some(end)));
        assert_eq!(
            s.offer(t + SimDuration::from_us(5), 3, true, len),
            (None, None)
        );
        assert!(s.release(t + SimDuration::from_us(9)).is_empty());
        // After the end but before the release, a new item still queues behind the held.
        assert_eq!(s.offer(end, 4, false, len), (None, None));
        assert_eq!(s.release(end), vec![2, 3, 4]);
        assert_eq!(s.offer(end, 5, false, len), (Some(5), None));
    }
}
