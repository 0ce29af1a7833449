//! The threaded engine: real time, short work inline in the caller's thread, timers and long
//! work on a small pool of engine threads.
//!
//! Policy (see docs/emu-core-engines.md):
//! - An MMIO access runs the device handler in the caller's thread (like a VMM handling an
//!   MMIO exit). The packets it sends are delivered inline too: the destination's
//!   [`DeviceModel::packet`] runs right away in the same thread, after the source device's
//!   lock was released. Follow-on work is processed by a loop (never by recursion) up to
//!   [`ThreadedConfig::inline_budget`] handler calls; what is left is handed to the engine
//!   threads, so a caller is never trapped by an endless exchange between devices.
//! - Timers (and, with [`FabricTiming::Modeled`], packets whose modelled arrival is in the
//!   future) go to a timer heap served by the engine threads, which block on a condition
//!   variable (with an optional short bounded spin) when there is nothing due.
//! - Lock discipline: each device has its own mutex, held only while its handler runs; the
//!   engine never holds two device locks, nor a device lock together with the fabric or the
//!   scheduler lock. Actions are collected while the handler runs and applied after its lock
//!   is released; interrupt sinks are called with no engine lock held.

use super::{
    Action, DeviceId, DeviceIo, DeviceModel, Engine, EngineCounters, EngineError, EngineKind,
    InterruptSink, NUM_BARS, Progress, bar_sizes, check_access, check_burst,
};
use crate::dma::DmaPort;
use crate::fabric::remote::{Arrivals, Outlet};
use crate::fabric::{BufferPool, Fabric, FabricCounters, FaultConfig, LinkId, Packet, PortId};
use crate::mmio::{Mmio, MmioError};
use crate::nic_faults::{NicFaultCounters, NicFaults};
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How the threaded engine applies the fabric's timing model.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum FabricTiming {
    /// Deliver every packet at once (inline); the real cost of the emulation is the latency.
    /// Fault sites (drop, duplicate, corrupt) still apply; reorder delays are ignored.
    #[default]
    Immediate,
    /// Honour the fabric's modelled arrival time: a packet due in the future is delivered by
    /// an engine thread when real time reaches it.
    Modeled,
}

/// Configuration of a [`Threaded`] engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadedConfig {
    /// Engine threads serving timers and deferred work (0 is allowed: then only
    /// [`Progress::progress`] calls run that work).
    pub workers: usize,
    /// Seed of the random streams (fault sites, device draws). Runs are not reproducible
    /// (thread timing is real), but the fault probabilities are honoured.
    pub seed: u64,
    /// How fabric timing is applied.
    pub timing: FabricTiming,
    /// Handler calls an MMIO access may run inline before the rest is deferred to the
    /// engine threads (0: deliver nothing inline).
    pub inline_budget: usize,
    /// Iterations an idle engine thread spins (checking for new work) before it blocks.
    pub spin: u32,
}

impl Default for ThreadedConfig {
    fn default() -> Self {
        ThreadedConfig {
            workers: 1,
            seed: 0,
            timing: FabricTiming::Immediate,
            inline_budget: 1024,
            spin: 0,
        }
    }
}

/// Handler calls an engine thread runs before it looks at the scheduler again.
const WORKER_BUDGET: usize = 256;

/// Deferred items an engine thread takes from the scheduler at once (in order): one lock
/// round trip per batch instead of per packet when a burst was handed over.
const WORKER_BATCH: usize = 64;

/// How long an engine thread waits before it looks again at a due timer held back by
/// packets in flight ([`Shared::in_flight`]).
const TIMER_RECHECK: Duration = Duration::from_micros(50);

/// Handler calls a work loop runs on one reading of the clock (see [`Shared::run`]).
const CLOCK_EVERY: usize = 16;

struct SlotState {
    model: Box<dyn DeviceModel>,
    rng: SimRng,
    /// The time the device's last handler ran at: a device never sees time go backwards,
    /// whichever thread runs it.
    last: SimTime,
}

struct Slot {
    id: DeviceId,
    state: Mutex<SlotState>,
    dma: DmaPort,
    port: Option<PortId>,
    sink: RwLock<Option<InterruptSink>>,
    bars: [u64; NUM_BARS],
}

struct Net {
    fabric: Fabric,
    rng: SimRng,
    root: SimRng,
}

enum Work {
    Deliver(Packet),
    Timer { slot: Arc<Slot>, token: u64 },
}

struct Timed {
    time: SimTime,
    seq: u64,
    work: Work,
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
struct Sched {
    heap: BinaryHeap<Timed>,
    deferred: VecDeque<Work>,
    /// A thread is running a batch taken from `deferred` (one at a time, so deferred work
    /// runs in the order it was queued).
    draining: bool,
    seq: u64,
    shutdown: bool,
}

/// What [`Shared::take_ready`] took.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Taken {
    /// This many deferred items, in order.
    Deferred(usize),
    /// One due timer (or delayed packet).
    Timer,
}

#[derive(Default)]
struct Counters {
    events: AtomicU64,
    packets: AtomicU64,
    timers: AtomicU64,
    mmio_reads: AtomicU64,
    mmio_writes: AtomicU64,
    interrupts: AtomicU64,
    undeliverable: AtomicU64,
    unattached_sends: AtomicU64,
    inline_calls: AtomicU64,
    deferred: AtomicU64,
}

/// Counts of one work loop, added to the shared [`Counters`] once when the loop ends (one
/// atomic add per counter and loop instead of several per handler call).
#[derive(Default)]
struct Tally {
    events: u64,
    packets: u64,
    timers: u64,
    undeliverable: u64,
}

impl Tally {
    fn flush(&self, c: &Counters, inline: bool) {
        let add = |a: &AtomicU64, n: u64| {
            if n > 0 {
                a.fetch_add(n, Ordering::Relaxed);
            }
        };
        add(&c.events, self.events);
        add(&c.packets, self.packets);
        add(&c.timers, self.timers);
        add(&c.undeliverable, self.undeliverable);
        if inline {
            add(&c.inline_calls, self.events);
        }
    }
}

/// Counts one inline work loop in [`Shared::inline_loops`] while it lives (also when a
/// device handler panics through it).
struct InlineLoop<'a>(&'a AtomicUsize);

impl<'a> InlineLoop<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        InlineLoop(count)
    }
}

impl Drop for InlineLoop<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking device model poisons its lock; the engine's own state is updated
    // atomically with respect to its locks, so carrying on is safe.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The buffers of one work loop (action list, work queue, a batch of deferred items), kept
/// per thread between loops so that the inline path allocates nothing once warm.
#[derive(Default)]
struct Scratch {
    actions: Vec<Action>,
    q: VecDeque<Work>,
    batch: VecDeque<Work>,
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
    fn take() -> Scratch {
        SCRATCH
            .try_with(|c| c.take())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Give the (drained) buffers back to this thread.
    fn give(mut self) {
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

struct Shared {
    start: Instant,
    cfg: ThreadedConfig,
    /// Devices by id (append-only).
    devices: RwLock<Vec<Arc<Slot>>>,
    /// Devices by fabric port: set once when a device is attached, then read without a
    /// lock on every delivery.
    by_port: Box<[OnceLock<Arc<Slot>>]>,
    net: Mutex<Net>,
    sched: Mutex<Sched>,
    cond: Condvar,
    /// Items in the scheduler (timer heap + deferred queue).
    pending: AtomicUsize,
    /// Scheduler items taken by an engine thread or a progress call and still running.
    active: AtomicUsize,
    /// Deferred items queued or in a batch being run. While it is non-zero, the packets a
    /// host access causes queue up behind them instead of running inline (FIFO).
    backlog: AtomicUsize,
    /// Inline work loops running in host threads (an MMIO access's deliveries). Like the
    /// backlog, they hold packets that exist at the current time but have not arrived yet.
    inline_loops: AtomicUsize,
    down: AtomicBool,
    c: Counters,
    /// Packet buffers lent to handlers ([`DeviceIo::packet_buffer`]).
    buffers: BufferPool,
    /// Where packets to ports with no device in this engine go (the fabric between
    /// processes, [`Threaded::set_outlet`]).
    outlet: OnceLock<Arc<dyn Outlet>>,
    /// The NIC fault profile lent to handlers, and whether any site is on (read without
    /// the lock on every handler call).
    nic_faults: RwLock<NicFaults>,
    nic_faults_on: AtomicBool,
    /// NIC fault sites that fired.
    nic_fault_counts: Mutex<NicFaultCounters>,
}

impl Shared {
    /// Real time since the engine started (one clock read).
    fn now(&self) -> SimTime {
        SimTime(SimDuration::from_std(self.start.elapsed()).0)
    }

    fn slot(&self, dev: DeviceId) -> Result<Arc<Slot>, EngineError> {
        let r = self.devices.read().unwrap_or_else(|e| e.into_inner());
        r.get(dev.0 as usize)
            .cloned()
            .ok_or(EngineError::NoSuchDevice(dev))
    }

    fn slot_for_port(&self, port: PortId) -> Option<&Arc<Slot>> {
        self.by_port.get(port.0 as usize).and_then(OnceLock::get)
    }

    /// Whether a packet to `dst` may be a train ([`crate::fabric::Train`]): delivered at
    /// once ([`FabricTiming::Immediate`]) to a device of this engine, on a fabric with no
    /// fault site, no NIC fault site and no capture hook, so that no one needs the bytes of
    /// its frames.
    fn train_ok(&self, dst: PortId) -> bool {
        if self.cfg.timing != FabricTiming::Immediate
            || self.nic_faults_on.load(Ordering::Acquire)
            || self.slot_for_port(dst).is_none()
        {
            return false;
        }
        let n = lock(&self.net);
        !n.fabric.faults().any() && !n.fabric.capturing()
    }

    fn check_up(&self) -> Result<(), EngineError> {
        if self.down.load(Ordering::Relaxed) {
            Err(EngineError::ShutDown)
        } else {
            Ok(())
        }
    }

    /// Run a handler of `slot` at `now` with its lock held (and nothing else). Returns its
    /// result and the time it ran at (the time its actions take effect): `now`, or the
    /// device's last time if another thread already ran it later.
    fn call<R>(
        &self,
        slot: &Slot,
        now: SimTime,
        actions: &mut Vec<Action>,
        f: impl FnOnce(&mut dyn DeviceModel, &mut DeviceIo<'_>) -> R,
    ) -> (R, SimTime) {
        let mut g = lock(&slot.state);
        let SlotState { model, rng, last } = &mut *g;
        let now = now.max(*last);
        *last = now;
        let trains = |dst: PortId| self.train_ok(dst);
        let io = DeviceIo::new(now, slot.port, &slot.dma, rng, actions)
            .with_buffers(&self.buffers)
            .with_trains(&trains);
        if !self.nic_faults_on.load(Ordering::Acquire) {
            let mut io = io;
            return (f(model.as_mut(), &mut io), now);
        }
        let faults = *self.nic_faults.read().unwrap_or_else(|e| e.into_inner());
        let mut counts = NicFaultCounters::default();
        let mut io = io.with_faults(&faults, &mut counts);
        let r = f(model.as_mut(), &mut io);
        if counts.total() > 0 {
            lock(&self.nic_fault_counts).add(&counts);
        }
        (r, now)
    }

    /// Run a host access's handler of `slot` with its lock held, reading the clock only if
    /// the handler asks for the time or leaves actions to apply. Returns its result and the
    /// time it ran at (`None`: the time was never needed).
    fn call_lazy<R>(
        &self,
        slot: &Slot,
        actions: &mut Vec<Action>,
        f: impl FnOnce(&mut dyn DeviceModel, &mut DeviceIo<'_>) -> R,
    ) -> (R, Option<SimTime>) {
        let mut g = lock(&slot.state);
        let SlotState { model, rng, last } = &mut *g;
        let clock = || self.now();
        let trains = |dst: PortId| self.train_ok(dst);
        let mut io = DeviceIo::lazy(*last, &clock, slot.port, &slot.dma, rng, actions)
            .with_buffers(&self.buffers)
            .with_trains(&trains);
        let r = f(model.as_mut(), &mut io);
        let taken = io.time_taken();
        let t = taken.or_else(|| (!actions.is_empty()).then(|| self.now().max(*last)));
        if let Some(t) = t {
            *last = t;
        }
        (r, t)
    }

    /// Apply the actions `slot`'s handler (run at `now`) queued; deliveries due now go to
    /// `q`.
    fn apply(
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
    fn schedule(&self, time: SimTime, work: Work) {
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
            wake
        };
        bump(&self.c.deferred);
        if wake {
            self.cond.notify_one();
        }
    }

    fn defer(&self, q: &mut VecDeque<Work>) {
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

    /// Whether packets that were sent at or before the current time are still on their way:
    /// deferred deliveries queued or running, or an inline work loop in a host thread.
    ///
    /// A due timer waits for them (see [`Shared::take_ready`]). With the immediate fabric
    /// every such packet has arrived by now in the modelled world; that the host CPU has not
    /// yet run its handler is the emulator's slowness, and a request timeout or retry timer
    /// that fired before the response it waits for is handled would turn that slowness into
    /// a hardware error (a 4 MiB BTE list whose responses queue behind its own requests on a
    /// loaded host did exactly that).
    fn in_flight(&self) -> bool {
        self.backlog.load(Ordering::Acquire) > 0
            || self.inline_loops.load(Ordering::Acquire) > 0
            || self.outlet.get().is_some_and(|o| o.in_flight())
    }

    /// Take work that is due into `q`: up to `max` deferred items (in order) unless another
    /// thread is running deferred work, or else the earliest due timer once nothing is in
    /// flight ([`Shared::in_flight`]). What was taken counts as one active item. Called with
    /// the scheduler lock held.
    fn take_ready(
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
            && let Some(t) = s.heap.pop()
        {
            q.push_back(t.work);
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
    fn run(&self, sc: &mut Scratch, budget: usize, inline: bool, mut now: SimTime) -> SimTime {
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

    /// Whether every packet handed to this engine has been handled: no deferred delivery
    /// is queued or running (what a host thread runs inline has finished when the call
    /// that delivered it returns). See [`Arrivals::settled`].
    fn is_settled(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.backlog.load(Ordering::SeqCst) == 0
    }

    /// The deferred deliveries just ran out: tell the fabric between processes, which
    /// credits the packets it took from peers only once their handling has finished.
    fn settled(&self) {
        if let Some(o) = self.outlet.get() {
            std::sync::atomic::fence(Ordering::SeqCst);
            o.settled();
        }
    }

    /// Run the work taken from the scheduler into `sc.q` and what follows from it, then
    /// mark it done. A batch of deferred items runs item by item, each with its own budget
    /// (as if taken one at a time), checking for shutdown in between; then the next thread
    /// may take deferred work.
    fn run_taken(&self, mut sc: Scratch, taken: Taken, budget: usize, inline: bool, now: SimTime) {
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

    fn mmio_read_slot(
        &self,
        slot: &Arc<Slot>,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), EngineError> {
        self.check_up()?;
        check_access(&slot.bars, bar, offset, data.len())?;
        bump(&self.c.mmio_reads);
        self.host_access(slot, |m, io| m.mmio_read(io, bar, offset, data))
    }

    fn mmio_write_slot(
        &self,
        slot: &Arc<Slot>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        self.check_up()?;
        check_access(&slot.bars, bar, offset, data.len())?;
        bump(&self.c.mmio_writes);
        self.host_access(slot, |m, io| m.mmio_write(io, bar, offset, data))
    }

    /// A write-combined burst: one trap, one handler call ([`DeviceModel::mmio_write_burst`]).
    fn mmio_burst_slot(
        &self,
        slot: &Arc<Slot>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        self.check_up()?;
        check_burst(&slot.bars, bar, offset, data.len())?;
        bump(&self.c.mmio_writes);
        self.host_access(slot, |m, io| m.mmio_write_burst(io, bar, offset, data))
    }

    /// Run a host access's handler now, then apply its actions and run what follows inline
    /// (up to the inline budget).
    fn host_access(
        &self,
        slot: &Arc<Slot>,
        f: impl FnOnce(&mut dyn DeviceModel, &mut DeviceIo<'_>) -> Result<(), MmioError>,
    ) -> Result<(), EngineError> {
        let mut sc = Scratch::take();
        let (r, now) = self.call_lazy(slot, &mut sc.actions, f);
        if let Some(now) = now
            && !sc.actions.is_empty()
        {
            self.apply(slot, now, &mut sc.actions, &mut sc.q);
            if !sc.q.is_empty() {
                if self.backlog.load(Ordering::Acquire) > 0 {
                    // Deferred deliveries are waiting: these go behind them.
                    self.defer(&mut sc.q);
                } else {
                    let _loop = InlineLoop::enter(&self.inline_loops);
                    self.run(&mut sc, self.cfg.inline_budget, true, now);
                }
            }
        }
        sc.give();
        Ok(r?)
    }

    /// One unit of engine-owned work in the caller's thread (for [`Progress`]).
    fn progress_once(&self) -> bool {
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

    fn worker(self: Arc<Self>) {
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
                            let wait = t.since(now).to_std().max(Duration::from_micros(1));
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
}

/// The threaded, real-time engine. Dropping it shuts it down (see [`Threaded::shutdown`]).
pub struct Threaded {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Threaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Threaded")
            .field("config", &self.shared.cfg)
            .field("pending", &self.shared.pending.load(Ordering::Relaxed))
            .field("shut_down", &self.shared.down.load(Ordering::Relaxed))
            .finish()
    }
}

impl Threaded {
    /// Start an engine over `fabric` with `config.workers` engine threads.
    /// The fabric's CRC elision is turned on ([`Fabric::set_crc_elision`]): packets are
    /// CRC-checked only while a corruption fault is configured.
    pub fn new(mut fabric: Fabric, config: ThreadedConfig) -> Result<Self, EngineError> {
        fabric.set_crc_elision(true);
        let mut root = SimRng::new(config.seed);
        let rng = root.fork();
        let ports = fabric.ports() as usize;
        let shared = Arc::new(Shared {
            start: Instant::now(),
            devices: RwLock::new(Vec::new()),
            by_port: (0..ports).map(|_| OnceLock::new()).collect(),
            net: Mutex::new(Net { fabric, rng, root }),
            sched: Mutex::new(Sched::default()),
            cond: Condvar::new(),
            pending: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            backlog: AtomicUsize::new(0),
            inline_loops: AtomicUsize::new(0),
            down: AtomicBool::new(false),
            c: Counters::default(),
            buffers: BufferPool::default(),
            outlet: OnceLock::new(),
            nic_faults: RwLock::new(NicFaults::none()),
            nic_faults_on: AtomicBool::new(false),
            nic_fault_counts: Mutex::new(NicFaultCounters::default()),
            cfg: config,
        });
        let engine = Threaded {
            shared: shared.clone(),
            workers: Mutex::new(Vec::new()),
        };
        for i in 0..shared.cfg.workers {
            let s = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("nicemu-engine-{i}"))
                .spawn(move || s.worker())
                .map_err(|e| EngineError::Setup(format!("cannot spawn engine thread: {e}")))?;
            lock(&engine.workers).push(h);
        }
        Ok(engine)
    }

    /// Stop the engine threads and join them; drop pending timers and deferred work, and
    /// the interrupt sinks. Later MMIO accesses fail with [`EngineError::ShutDown`]
    /// ([`MmioError::DeviceGone`] through an [`Mmio`] handle). Idempotent.
    pub fn shutdown(&self) {
        self.shared.down.store(true, Ordering::SeqCst);
        let dropped = {
            let mut s = lock(&self.shared.sched);
            s.shutdown = true;
            let heap = std::mem::take(&mut s.heap);
            let deferred = std::mem::take(&mut s.deferred);
            self.shared.pending.store(0, Ordering::SeqCst);
            (heap, deferred)
        };
        drop(dropped);
        self.shared.cond.notify_all();
        let handles = std::mem::take(&mut *lock(&self.workers));
        let me = std::thread::current().id();
        for h in handles {
            if h.thread().id() != me {
                // A worker that panicked (a device model bug) has nothing left to clean up.
                let _ = h.join();
            }
        }
        let devices = self
            .shared
            .devices
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for d in devices {
            *d.sink.write().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }

    /// Whether [`Threaded::shutdown`] has run.
    pub fn is_shut_down(&self) -> bool {
        self.shared.down.load(Ordering::SeqCst)
    }

    /// Attach a device (see [`Engine::add_device`]).
    pub fn add_device(
        &self,
        model: Box<dyn DeviceModel>,
        dma: DmaPort,
        port: Option<PortId>,
    ) -> Result<DeviceId, EngineError> {
        self.shared.check_up()?;
        let rng = lock(&self.shared.net).root.fork();
        // The device table's write lock also serialises attachments to ports.
        let mut devices = self
            .shared
            .devices
            .write()
            .unwrap_or_else(|e| e.into_inner());
        let port_cell = match port {
            Some(p) => {
                let ports = self.shared.by_port.len() as u32;
                match self.shared.by_port.get(p.0 as usize) {
                    None => return Err(EngineError::NoSuchPort { port: p.0, ports }),
                    Some(c) if c.get().is_some() => return Err(EngineError::PortInUse(p.0)),
                    Some(c) => Some(c),
                }
            }
            None => None,
        };
        let id = DeviceId(
            u32::try_from(devices.len())
                .map_err(|_| EngineError::Setup("too many devices".into()))?,
        );
        let slot = Arc::new(Slot {
            id,
            bars: bar_sizes(model.as_ref()),
            state: Mutex::new(SlotState {
                model,
                rng,
                last: SimTime::ZERO,
            }),
            dma,
            port,
            sink: RwLock::new(None),
        });
        if let Some(c) = port_cell
            && let Some(p) = port
            && c.set(slot.clone()).is_err()
        {
            return Err(EngineError::PortInUse(p.0));
        }
        devices.push(slot);
        Ok(id)
    }

    /// Route a device's interrupts to `sink`.
    pub fn set_interrupt_sink(
        &self,
        dev: DeviceId,
        sink: InterruptSink,
    ) -> Result<(), EngineError> {
        self.shared.check_up()?;
        let slot = self.shared.slot(dev)?;
        *slot.sink.write().unwrap_or_else(|e| e.into_inner()) = Some(sink);
        Ok(())
    }

    /// CPU load, handled inline in the caller's thread.
    pub fn mmio_read(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), EngineError> {
        let slot = self.shared.slot(dev)?;
        self.shared.mmio_read_slot(&slot, bar, offset, data)
    }

    /// CPU store, handled inline in the caller's thread (with inline delivery of the packets
    /// it causes, up to the inline budget).
    pub fn mmio_write(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        let slot = self.shared.slot(dev)?;
        self.shared.mmio_write_slot(&slot, bar, offset, data)
    }

    /// A write-combined burst, handled inline as one access (see [`Mmio::write_burst`]).
    pub fn mmio_write_burst(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        let slot = self.shared.slot(dev)?;
        self.shared.mmio_burst_slot(&slot, bar, offset, data)
    }

    /// An [`Mmio`] handle for one BAR (holds the device directly: no lookup per access).
    pub fn mmio(&self, dev: DeviceId, bar: u8) -> Result<Arc<dyn Mmio>, EngineError> {
        let slot = self.shared.slot(dev)?;
        let size = slot.bars.get(usize::from(bar)).copied().unwrap_or(0);
        Ok(Arc::new(ThreadedMmio {
            shared: self.shared.clone(),
            slot,
            bar,
            size,
        }))
    }

    /// Read PCI configuration space.
    pub fn config_read(&self, dev: DeviceId, reg: u16) -> Result<u32, EngineError> {
        let slot = self.shared.slot(dev)?;
        Ok(lock(&slot.state).model.config_read(reg))
    }

    /// Write PCI configuration space.
    pub fn config_write(&self, dev: DeviceId, reg: u16, value: u32) -> Result<(), EngineError> {
        let slot = self.shared.slot(dev)?;
        lock(&slot.state).model.config_write(reg, value);
        Ok(())
    }

    /// Size of a BAR.
    pub fn bar_size(&self, dev: DeviceId, bar: u8) -> Result<u64, EngineError> {
        let slot = self.shared.slot(dev)?;
        Ok(slot.bars.get(usize::from(bar)).copied().unwrap_or(0))
    }

    /// Elapsed real time since the engine started.
    pub fn now(&self) -> SimTime {
        self.shared.now()
    }

    /// Scheduled work not yet run (timers, delayed packets, deferred work).
    pub fn pending(&self) -> usize {
        self.shared.pending.load(Ordering::Acquire)
    }

    /// Wait (sleeping, not spinning) until no engine-owned work is scheduled or running, or
    /// `timeout` has passed; true if idle. Work another thread is running inline is not
    /// waited for.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let _s = lock(&self.shared.sched);
                if self.shared.pending.load(Ordering::Acquire) == 0
                    && self.shared.active.load(Ordering::Acquire) == 0
                {
                    return true;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Event counters.
    pub fn counters(&self) -> EngineCounters {
        let c = &self.shared.c;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EngineCounters {
            events: g(&c.events),
            packets: g(&c.packets),
            timers: g(&c.timers),
            mmio_reads: g(&c.mmio_reads),
            mmio_writes: g(&c.mmio_writes),
            interrupts: g(&c.interrupts),
            undeliverable: g(&c.undeliverable),
            unattached_sends: g(&c.unattached_sends),
            inline_calls: g(&c.inline_calls),
            deferred: g(&c.deferred),
        }
    }

    /// Send packets whose destination port has no device in this engine to `outlet` (the
    /// fabric between processes: another process hosts that port), with the delay this
    /// engine's fabric computed for them. Set once.
    pub fn set_outlet(&self, outlet: Arc<dyn Outlet>) -> Result<(), EngineError> {
        self.shared
            .outlet
            .set(outlet)
            .map_err(|_| EngineError::Setup("the engine already has an outlet".into()))
    }

    /// The handle through which packets from other processes enter this engine: one due
    /// now is delivered inline in the calling thread (behind deferred work, as a host
    /// access's packets are); one due later goes to the timer heap.
    pub fn arrivals(&self) -> Arc<dyn Arrivals> {
        Arc::new(EngineArrivals(Arc::downgrade(&self.shared)))
    }

    /// Run `f` with the fabric locked.
    pub fn with_fabric<R>(&self, f: impl FnOnce(&mut Fabric) -> R) -> R {
        f(&mut lock(&self.shared.net).fabric)
    }
}

/// [`Threaded::arrivals`]. Holds the engine weakly: the engine holds the outlet, which
/// holds this.
struct EngineArrivals(std::sync::Weak<Shared>);

impl Arrivals for EngineArrivals {
    fn now(&self) -> SimTime {
        self.0.upgrade().map_or(SimTime::ZERO, |s| s.now())
    }

    fn settled(&self) -> bool {
        self.0.upgrade().is_none_or(|s| s.is_settled())
    }

    fn arrive(&self, at: SimTime, pkt: Packet) {
        let Some(s) = self.0.upgrade() else {
            return;
        };
        if s.down.load(Ordering::Relaxed) {
            return;
        }
        let now = s.now();
        if at > now {
            s.schedule(at, Work::Deliver(pkt));
            return;
        }
        let mut sc = Scratch::take();
        sc.q.push_back(Work::Deliver(pkt));
        if s.backlog.load(Ordering::Acquire) > 0 {
            s.defer(&mut sc.q);
        } else {
            let _loop = InlineLoop::enter(&s.inline_loops);
            s.run(&mut sc, s.cfg.inline_budget, true, now);
        }
        sc.give();
    }
}

impl Drop for Threaded {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Progress for Threaded {
    /// Runs one due timer or deferred item in the caller's thread if there is one;
    /// otherwise yields the CPU.
    fn progress(&self) -> bool {
        self.shared.progress_once()
    }
}

impl Engine for Threaded {
    fn kind(&self) -> EngineKind {
        EngineKind::Threaded
    }
    fn now(&self) -> SimTime {
        Threaded::now(self)
    }
    fn add_device(
        &self,
        model: Box<dyn DeviceModel>,
        dma: DmaPort,
        port: Option<PortId>,
    ) -> Result<DeviceId, EngineError> {
        Threaded::add_device(self, model, dma, port)
    }
    fn set_interrupt_sink(&self, dev: DeviceId, sink: InterruptSink) -> Result<(), EngineError> {
        Threaded::set_interrupt_sink(self, dev, sink)
    }
    fn mmio_read(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), EngineError> {
        Threaded::mmio_read(self, dev, bar, offset, data)
    }
    fn mmio_write(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        Threaded::mmio_write(self, dev, bar, offset, data)
    }
    fn mmio_write_burst(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        Threaded::mmio_write_burst(self, dev, bar, offset, data)
    }
    fn mmio(&self, dev: DeviceId, bar: u8) -> Result<Arc<dyn Mmio>, EngineError> {
        Threaded::mmio(self, dev, bar)
    }
    fn config_read(&self, dev: DeviceId, reg: u16) -> Result<u32, EngineError> {
        Threaded::config_read(self, dev, reg)
    }
    fn config_write(&self, dev: DeviceId, reg: u16, value: u32) -> Result<(), EngineError> {
        Threaded::config_write(self, dev, reg, value)
    }
    fn bar_size(&self, dev: DeviceId, bar: u8) -> Result<u64, EngineError> {
        Threaded::bar_size(self, dev, bar)
    }
    fn progress_handle(&self) -> Arc<dyn Progress> {
        self.shared.clone()
    }
    fn counters(&self) -> EngineCounters {
        Threaded::counters(self)
    }
    fn fabric_counters(&self) -> FabricCounters {
        self.with_fabric(|f| f.counters())
    }
    fn set_link_up(&self, link: LinkId, up: bool) -> Result<(), EngineError> {
        Ok(self.with_fabric(|f| f.set_link_up(link, up))?)
    }
    fn set_faults(&self, faults: FaultConfig) {
        self.with_fabric(|f| f.set_faults(faults));
    }
    fn set_nic_faults(&self, faults: NicFaults) {
        *self
            .shared
            .nic_faults
            .write()
            .unwrap_or_else(|e| e.into_inner()) = faults;
        self.shared
            .nic_faults_on
            .store(faults.any(), Ordering::Release);
    }
    fn nic_fault_counters(&self) -> NicFaultCounters {
        *lock(&self.shared.nic_fault_counts)
    }
}

/// One BAR of a device driven by a [`Threaded`] engine, as an [`Mmio`] region. Accesses run
/// inline in the calling thread.
pub struct ThreadedMmio {
    shared: Arc<Shared>,
    slot: Arc<Slot>,
    bar: u8,
    size: u64,
}

impl std::fmt::Debug for ThreadedMmio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedMmio")
            .field("dev", &self.slot.id)
            .field("bar", &self.bar)
            .field("size", &self.size)
            .finish()
    }
}

impl Mmio for ThreadedMmio {
    fn size(&self) -> u64 {
        self.size
    }
    fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        Ok(self
            .shared
            .mmio_read_slot(&self.slot, self.bar, offset, data)?)
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        Ok(self
            .shared
            .mmio_write_slot(&self.slot, self.bar, offset, data)?)
    }
    fn write_burst(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        Ok(self
            .shared
            .mmio_burst_slot(&self.slot, self.bar, offset, data)?)
    }
}
