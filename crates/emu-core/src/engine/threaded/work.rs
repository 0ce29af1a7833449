//! The threaded engine's work loop: the actions a handler leaves are applied (packets into
//! the fabric, timers into the scheduler, interrupts to their sink); the deliveries due now
//! run in the same loop up to a budget, the rest is deferred to the engine threads, which
//! take timers and deferred work from the scheduler (`worker`) or run it for a caller
//! waiting on [`Progress`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::engine::{Action, Progress};
use crate::time::SimTime;

use super::config::{
    CLOCK_EVERY, CLOCK_HELD_RECHECK, FabricTiming, TIMER_RECHECK, WORKER_BATCH, WORKER_BUDGET,
};
use super::counters::{Tally, bump};
use super::sched::{Sched, Taken, Timed, Work};
use super::scratch::Scratch;
use super::shared::{Shared, lock};
use super::slot::{Net, Slot};

impl Shared {
    /// Apply the actions `slot`'s handler (run at `now`) queued; deliveries due now go to
    /// `q`.
    pub(super) fn apply(
        &self,
        slot: &Arc<Slot>,
        now: SimTime,
        actions: &mut Vec<Action>,
        q: &mut VecDeque<Work>,
    ) {
        for a in actions.drain(..) {
            match a {
                Action::Send(pkt) => {
                    if slot.port.is_none() {
                        bump(&self.c.unattached_sends);
                        continue;
                    }
                    let deliveries = {
                        let mut n = lock(&self.net);
                        let Net { fabric, rng, .. } = &mut *n;
                        match self.cfg.timing {
                            FabricTiming::Immediate => fabric.inject_immediate(now, pkt, rng),
                            FabricTiming::Modeled => fabric.inject(now, pkt, rng),
                        }
                    };
                    for (t, p) in deliveries {
                        if let Some(o) = self.outlet.get()
                            && self.slot_for_port(p.dst).is_none()
                        {
                            // Hosted by another process: its engine delivers it, no
                            // earlier than the arrival this fabric computed.
                            o.forward(t.since(now), p);
                            continue;
                        }
                        if self.cfg.timing == FabricTiming::Immediate || t <= now {
                            q.push_back(Work::Deliver(p));
                        } else {
                            self.schedule(t, Work::Deliver(p));
                        }
                    }
                }
                Action::Timer { after, token } => {
                    let t = now + after;
                    self.schedule(
                        t,
                        Work::Timer {
                            slot: slot.clone(),
                            token,
                        },
                    );
                }
                Action::Interrupt { vector } => {
                    bump(&self.c.interrupts);
                    let sink = slot.sink.read().unwrap_or_else(|e| e.into_inner()).clone();
                    if let Some(s) = sink {
                        s(vector);
                    }
                }
            }
        }
    }

    /// Queue `work` for `time`. An engine thread is woken only when the item becomes the
    /// earliest: a thread already sleeps until the earlier head (or runs work and looks at
    /// the heap before it sleeps again), so a retry timer armed behind another costs no
    /// thread hand-off.
    pub(super) fn schedule(&self, time: SimTime, work: Work) {
        let wake = {
            let mut s = lock(&self.sched);
            if s.shutdown {
                return;
            }
            let wake = s.heap.peek().is_none_or(|head| time < head.time);
            let seq = s.seq;
            s.seq += 1;
            s.heap.push(Timed { time, seq, work });
            self.pending.fetch_add(1, Ordering::AcqRel);
            if wake {
                self.head_changed(Some(time));
            }
            wake
        };
        bump(&self.c.deferred);
        if wake {
            self.cond.notify_one();
        }
    }

    pub(super) fn defer(&self, q: &mut VecDeque<Work>) {
        let n = q.len();
        {
            let mut s = lock(&self.sched);
            if s.shutdown {
                q.clear();
                return;
            }
            s.deferred.extend(q.drain(..));
            self.pending.fetch_add(n, Ordering::AcqRel);
            self.backlog.fetch_add(n, Ordering::AcqRel);
        }
        self.c.deferred.fetch_add(n as u64, Ordering::Relaxed);
        self.cond.notify_one();
    }

    /// Take work that is due into `q`: up to `max` deferred items (in order) unless another
    /// thread is running deferred work, or else the earliest due timer once nothing is in
    /// flight ([`Shared::in_flight`]). What was taken counts as one active item. Called with
    /// the scheduler lock held.
    pub(super) fn take_ready(
        &self,
        s: &mut Sched,
        now: SimTime,
        q: &mut VecDeque<Work>,
        max: usize,
    ) -> Option<Taken> {
        let taken = if !s.draining && !s.deferred.is_empty() {
            let n = s.deferred.len().min(max.max(1));
            q.extend(s.deferred.drain(..n));
            s.draining = true;
            Taken::Deferred(n)
        } else if s.heap.peek().is_some_and(|t| t.time <= now)
            && !self.in_flight()
            && !self.peer_behind()
            && let Some(t) = s.heap.pop()
        {
            q.push_back(t.work);
            self.head_changed(s.heap.peek().map(|h| h.time));
            Taken::Timer
        } else {
            return None;
        };
        self.pending.fetch_sub(q.len(), Ordering::AcqRel);
        self.active.fetch_add(1, Ordering::AcqRel);
        Some(taken)
    }

    /// The work loop: run the work in `sc.q`, at most `budget` handler calls, then defer the
    /// rest. `now` is the time of the access or item that started the loop; the clock is
    /// read again every [`CLOCK_EVERY`] handler calls (a packet delivered inline arrives
    /// at the time it was sent, as the immediate fabric timing says; a long loop still
    /// follows real time).
    pub(super) fn run(
        &self,
        sc: &mut Scratch,
        budget: usize,
        inline: bool,
        mut now: SimTime,
    ) -> SimTime {
        let mut tally = Tally::default();
        let mut calls = 0usize;
        while let Some(w) = sc.q.pop_front() {
            if calls >= budget {
                sc.q.push_front(w);
                self.defer(&mut sc.q);
                break;
            }
            if calls > 0 && calls.is_multiple_of(CLOCK_EVERY) {
                now = now.max(self.now());
            }
            calls += 1;
            tally.events += 1;
            match w {
                Work::Deliver(pkt) => {
                    let Some(slot) = self.slot_for_port(pkt.dst) else {
                        tally.undeliverable += 1;
                        continue;
                    };
                    tally.packets += 1;
                    let ((), t) = self.call(slot, now, &mut sc.actions, |m, io| m.packet(io, pkt));
                    self.apply(slot, t, &mut sc.actions, &mut sc.q);
                }
                Work::Timer { slot, token } => {
                    tally.timers += 1;
                    let ((), t) =
                        self.call(&slot, now, &mut sc.actions, |m, io| m.timer(io, token));
                    self.apply(&slot, t, &mut sc.actions, &mut sc.q);
                }
            }
        }
        tally.flush(&self.c, inline);
        now
    }

    /// Run the work taken from the scheduler into `sc.q` and what follows from it, then
    /// mark it done. A batch of deferred items runs item by item, each with its own budget
    /// (as if taken one at a time), checking for shutdown in between; then the next thread
    /// may take deferred work.
    pub(super) fn run_taken(
        &self,
        mut sc: Scratch,
        taken: Taken,
        budget: usize,
        inline: bool,
        now: SimTime,
    ) {
        match taken {
            Taken::Timer => {
                self.run(&mut sc, budget, inline, now);
            }
            Taken::Deferred(n) => {
                std::mem::swap(&mut sc.q, &mut sc.batch);
                let mut now = now;
                while let Some(w) = sc.batch.pop_front() {
                    if self.down.load(Ordering::Relaxed) {
                        break;
                    }
                    sc.q.push_back(w);
                    now = self.run(&mut sc, budget, inline, now);
                }
                sc.batch.clear();
                if self.backlog.fetch_sub(n, Ordering::AcqRel) == n {
                    self.settled();
                }
                let mut s = lock(&self.sched);
                s.draining = false;
                if !s.deferred.is_empty() {
                    self.cond.notify_one();
                }
            }
        }
        sc.give();
        self.active.fetch_sub(1, Ordering::AcqRel);
    }

    /// One unit of engine-owned work in the caller's thread (for [`Progress`]).
    pub(super) fn progress_once(&self) -> bool {
        // Packets from other processes first: the waiting host thread takes them from the
        // fabric itself and runs their deliveries inline, with no hand-off to another thread
        // (see [`Outlet::poll`]).
        if !self.down.load(Ordering::Relaxed)
            && let Some(o) = self.outlet.get()
            && o.poll()
        {
            return true;
        }
        if self.down.load(Ordering::Relaxed) || self.pending.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
            return false;
        }
        let now = self.now();
        let mut sc = Scratch::take();
        let took = {
            let mut s = lock(&self.sched);
            self.take_ready(&mut s, now, &mut sc.q, 1)
        };
        if let Some(taken) = took {
            self.run_taken(sc, taken, self.cfg.inline_budget.max(1), true, now);
            true
        } else {
            sc.give();
            std::thread::yield_now();
            false
        }
    }

    pub(super) fn worker(self: Arc<Self>) {
        loop {
            for _ in 0..self.cfg.spin {
                if self.pending.load(Ordering::Acquire) > 0 || self.down.load(Ordering::Relaxed) {
                    break;
                }
                std::hint::spin_loop();
            }
            let mut sc = Scratch::take();
            let (taken, now) = {
                let mut s = lock(&self.sched);
                loop {
                    if s.shutdown {
                        return;
                    }
                    let now = self.now();
                    if let Some(taken) = self.take_ready(&mut s, now, &mut sc.q, WORKER_BATCH) {
                        if s.heap.peek().is_some_and(|t| t.time <= now)
                            || (!s.draining && !s.deferred.is_empty())
                        {
                            self.cond.notify_one();
                        }
                        break (taken, now);
                    }
                    s = match s.heap.peek().map(|t| t.time) {
                        Some(t) if t <= now => {
                            // A due timer waits for packets in flight (their runners do
                            // not signal when they finish): look again shortly.
                            self.cond
                                .wait_timeout(s, TIMER_RECHECK)
                                .unwrap_or_else(|e| e.into_inner())
                                .0
                        }
                        Some(t) => {
                            let mut wait = t.since(now).to_std().max(Duration::from_micros(1));
                            if self.clock.held() {
                                // The clock stands still (a process of the job does not
                                // run): the timer is not due before it moves again.
                                wait = wait.max(CLOCK_HELD_RECHECK);
                            }
                            self.cond
                                .wait_timeout(s, wait)
                                .unwrap_or_else(|e| e.into_inner())
                                .0
                        }
                        None => self.cond.wait(s).unwrap_or_else(|e| e.into_inner()),
                    };
                }
            };
            self.run_taken(sc, taken, WORKER_BUDGET, false, now);
        }
    }
}

impl Progress for Shared {
    fn progress(&self) -> bool {
        self.progress_once()
    }

    fn before_sleep(&self) -> bool {
        self.may_sleep()
    }

    fn can_sleep(&self) -> bool {
        self.cfg.workers > 0
    }
}
