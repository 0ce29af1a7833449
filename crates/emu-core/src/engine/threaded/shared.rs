//! The state the threaded engine's threads share ([`Shared`]): the devices, the fabric, the
//! scheduler, the counters and the handles to the world outside (the fabric between
//! processes, the NIC fault profile); how a handler runs with its device's lock held
//! (`call`, `call_lazy`); and whether packets are still on their way.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};

use crate::clock::JobClock;
use crate::engine::{Action, DeviceId, DeviceIo, DeviceModel, EngineError};
use crate::fabric::remote::Outlet;
use crate::fabric::{BufferPool, PortId};
use crate::nic_faults::{NicFaultCounters, NicFaults};
use crate::time::SimTime;

use super::config::{FabricTiming, QUEUE_SLACK, ThreadedConfig};
use super::counters::Counters;
use super::sched::Sched;
use super::slot::{Net, Slot, SlotState};

pub(super) struct Shared {
    /// Real time since the engine started, unless a job of processes holds it
    /// ([`Threaded::clock`](super::Threaded::clock)).
    pub(super) clock: Arc<JobClock>,
    pub(super) cfg: ThreadedConfig,
    /// Devices by id (append-only).
    pub(super) devices: RwLock<Vec<Arc<Slot>>>,
    /// Devices by fabric port: set once when a device is attached, then read without a
    /// lock on every delivery.
    pub(super) by_port: Box<[OnceLock<Arc<Slot>>]>,
    pub(super) net: Mutex<Net>,
    pub(super) sched: Mutex<Sched>,
    pub(super) cond: Condvar,
    /// Items in the scheduler (timer heap + deferred queue).
    pub(super) pending: AtomicUsize,
    /// Scheduler items taken by an engine thread or a progress call and still running.
    pub(super) active: AtomicUsize,
    /// Deferred items queued or in a batch being run. While it is non-zero, the packets a
    /// host access causes queue up behind them instead of running inline (FIFO).
    pub(super) backlog: AtomicUsize,
    /// Inline work loops running in host threads (an MMIO access's deliveries). Like the
    /// backlog, they hold packets that exist at the current time but have not arrived yet.
    pub(super) inline_loops: AtomicUsize,
    pub(super) down: AtomicBool,
    pub(super) c: Counters,
    /// Packet buffers lent to handlers ([`DeviceIo::packet_buffer`]).
    pub(super) buffers: BufferPool,
    /// Where packets to ports with no device in this engine go (the fabric between
    /// processes, [`Threaded::set_outlet`]).
    pub(super) outlet: OnceLock<Arc<dyn Outlet>>,
    /// The NIC fault profile lent to handlers, and whether any site is on (read without
    /// the lock on every handler call).
    pub(super) nic_faults: RwLock<NicFaults>,
    pub(super) nic_faults_on: AtomicBool,
    /// NIC fault sites that fired.
    pub(super) nic_fault_counts: Mutex<NicFaultCounters>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking device model poisons its lock; the engine's own state is updated
    // atomically with respect to its locks, so carrying on is safe.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// The engine's time (one clock read): real time since the engine started, less the
    /// time a job of processes held its clock ([`JobClock`]).
    pub(super) fn now(&self) -> SimTime {
        self.clock.now()
    }

    pub(super) fn slot(&self, dev: DeviceId) -> Result<Arc<Slot>, EngineError> {
        let r = self.devices.read().unwrap_or_else(|e| e.into_inner());
        r.get(dev.0 as usize)
            .cloned()
            .ok_or(EngineError::NoSuchDevice(dev))
    }

    pub(super) fn slot_for_port(&self, port: PortId) -> Option<&Arc<Slot>> {
        self.by_port.get(port.0 as usize).and_then(OnceLock::get)
    }

    /// Whether a packet to `dst` may be a train ([`crate::fabric::Train`]): delivered at
    /// once ([`FabricTiming::Immediate`]) to a device of this engine, on a fabric with no
    /// fault site, no NIC fault site and no capture hook, so that no one needs the bytes of
    /// its frames.
    pub(super) fn train_ok(&self, dst: PortId) -> bool {
        if self.cfg.timing != FabricTiming::Immediate
            || self.nic_faults_on.load(Ordering::Acquire)
            || self.slot_for_port(dst).is_none()
        {
            return false;
        }
        let n = lock(&self.net);
        !n.fabric.faults().any() && !n.fabric.capturing()
    }

    pub(super) fn check_up(&self) -> Result<(), EngineError> {
        if self.down.load(Ordering::Relaxed) {
            Err(EngineError::ShutDown)
        } else {
            Ok(())
        }
    }

    /// Run a handler of `slot` at `now` with its lock held (and nothing else). Returns its
    /// result and the time it ran at (the time its actions take effect): `now`, or the
    /// device's last time if another thread already ran it later.
    pub(super) fn call<R>(
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
    pub(super) fn call_lazy<R>(
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

    /// Whether packets that were sent at or before the current time are still on their way:
    /// deferred deliveries queued or running, or an inline work loop in a host thread.
    ///
    /// A due timer waits for them (see [`Shared::take_ready`]). With the immediate fabric
    /// every such packet has arrived by now in the modelled world; that the host CPU has not
    /// yet run its handler is the emulator's slowness, and a request timeout or retry timer
    /// that fired before the response it waits for is handled would turn that slowness into
    /// a hardware error (a 4 MiB BTE list whose responses queue behind its own requests on a
    /// loaded host did exactly that).
    pub(super) fn in_flight(&self) -> bool {
        self.backlog.load(Ordering::Acquire) > 0
            || self.inline_loops.load(Ordering::Acquire) > 0
            || self.outlet.get().is_some_and(|o| o.in_flight())
    }

    /// Whether a timer waits for a process of the job on this host that has an earlier
    /// timer it has not run ([`Outlet::peer_behind`]).
    pub(super) fn peer_behind(&self) -> bool {
        self.outlet.get().is_some_and(|o| o.peer_behind())
    }

    /// Tell the clock and the fabric between processes when the earliest timer (or
    /// delayed packet) not run yet falls due (`None`: none). Called with the scheduler lock
    /// held, whenever the head of the timer heap changes.
    pub(super) fn head_changed(&self, next: Option<SimTime>) {
        self.clock.set_queue_limit(next.map(|t| t + QUEUE_SLACK));
        if let Some(o) = self.outlet.get() {
            o.next_timer(next.map(|t| self.clock.host_time_of(t)));
        }
    }

    /// See [`Progress::before_sleep`](crate::engine::Progress::before_sleep).
    pub(super) fn may_sleep(&self) -> bool {
        self.cfg.workers > 0
            && !self.down.load(Ordering::Relaxed)
            && self.outlet.get().is_none_or(|o| o.before_sleep())
    }

    /// Whether every packet handed to this engine has been handled: no deferred delivery
    /// is queued or running (what a host thread runs inline has finished when the call
    /// that delivered it returns). See [`Arrivals::settled`].
    pub(super) fn is_settled(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.backlog.load(Ordering::SeqCst) == 0
    }

    /// The deferred deliveries just ran out: tell the fabric between processes, which
    /// credits the packets it took from peers only once their handling has finished.
    pub(super) fn settled(&self) {
        if let Some(o) = self.outlet.get() {
            std::sync::atomic::fence(Ordering::SeqCst);
            o.settled();
        }
    }
}
