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
    InterruptSink, NUM_BARS, Progress, bar_sizes, check_access,
};
use crate::dma::DmaPort;
use crate::fabric::{Fabric, FabricCounters, FaultConfig, LinkId, Packet, PortId};
use crate::mmio::{Mmio, MmioError};
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
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
            inline_budget: 64,
            spin: 0,
        }
    }
}

/// Handler calls an engine thread runs before it looks at the scheduler again.
const WORKER_BUDGET: usize = 256;

struct SlotState {
    model: Box<dyn DeviceModel>,
    rng: SimRng,
}

struct Slot {
    id: DeviceId,
    state: Mutex<SlotState>,
    dma: DmaPort,
    port: Option<PortId>,
    sink: RwLock<Option<InterruptSink>>,
    bars: [u64; NUM_BARS],
}

struct Registry {
    devices: Vec<Arc<Slot>>,
    by_port: Vec<Option<Arc<Slot>>>,
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
    seq: u64,
    shutdown: bool,
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

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking device model poisons its lock; the engine's own state is updated
    // atomically with respect to its locks, so carrying on is safe.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Shared {
    start: Instant,
    cfg: ThreadedConfig,
    registry: RwLock<Registry>,
    net: Mutex<Net>,
    sched: Mutex<Sched>,
    cond: Condvar,
    /// Items in the scheduler (timer heap + deferred queue).
    pending: AtomicUsize,
    /// Scheduler items taken by an engine thread or a progress call and still running.
    active: AtomicUsize,
    down: AtomicBool,
    c: Counters,
}

impl Shared {
    fn now(&self) -> SimTime {
        SimTime(SimDuration::from_std(self.start.elapsed()).0)
    }

    fn slot(&self, dev: DeviceId) -> Result<Arc<Slot>, EngineError> {
        let r = self.registry.read().unwrap_or_else(|e| e.into_inner());
        r.devices
            .get(dev.0 as usize)
            .cloned()
            .ok_or(EngineError::NoSuchDevice(dev))
    }

    fn slot_for_port(&self, port: PortId) -> Option<Arc<Slot>> {
        let r = self.registry.read().unwrap_or_else(|e| e.into_inner());
        r.by_port.get(port.0 as usize).cloned().flatten()
    }

    fn check_up(&self) -> Result<(), EngineError> {
        if self.down.load(Ordering::Relaxed) {
            Err(EngineError::ShutDown)
        } else {
            Ok(())
        }
    }

    /// Run a handler of `slot` with its lock held (and nothing else). Returns its result and
    /// the time it ran at (the time its actions take effect).
    fn call<R>(
        &self,
        slot: &Slot,
        actions: &mut Vec<Action>,
        f: impl FnOnce(&mut dyn DeviceModel, &mut DeviceIo<'_>) -> R,
    ) -> (R, SimTime) {
        let now = self.now();
        let mut g = lock(&slot.state);
        let SlotState { model, rng } = &mut *g;
        let mut io = DeviceIo::new(now, slot.port, &slot.dma, rng, actions);
        (f(model.as_mut(), &mut io), now)
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
                        fabric.inject(now, pkt, rng)
                    };
                    for (t, p) in deliveries {
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

    fn schedule(&self, time: SimTime, work: Work) {
        {
            let mut s = lock(&self.sched);
            if s.shutdown {
                return;
            }
            let seq = s.seq;
            s.seq += 1;
            s.heap.push(Timed { time, seq, work });
            self.pending.fetch_add(1, Ordering::AcqRel);
        }
        bump(&self.c.deferred);
        self.cond.notify_one();
    }

    fn defer(&self, q: VecDeque<Work>) {
        let n = q.len();
        {
            let mut s = lock(&self.sched);
            if s.shutdown {
                return;
            }
            s.deferred.extend(q);
            self.pending.fetch_add(n, Ordering::AcqRel);
        }
        self.c.deferred.fetch_add(n as u64, Ordering::Relaxed);
        self.cond.notify_one();
    }

    /// Take one item that is due (deferred work first, then the earliest due timer), marking
    /// it active. Called with the scheduler lock held.
    fn take_ready(&self, s: &mut Sched, now: SimTime) -> Option<Work> {
        let w = if let Some(w) = s.deferred.pop_front() {
            Some(w)
        } else if s.heap.peek().is_some_and(|t| t.time <= now) {
            s.heap.pop().map(|t| t.work)
        } else {
            None
        };
        if w.is_some() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            self.active.fetch_add(1, Ordering::AcqRel);
        }
        w
    }

    /// The work loop: run queued work, at most `budget` handler calls, then defer the rest.
    fn run(&self, mut q: VecDeque<Work>, budget: usize, inline: bool, mut actions: Vec<Action>) {
        let mut calls = 0usize;
        while let Some(w) = q.pop_front() {
            if calls >= budget {
                q.push_front(w);
                self.defer(q);
                return;
            }
            calls += 1;
            bump(&self.c.events);
            if inline {
                bump(&self.c.inline_calls);
            }
            match w {
                Work::Deliver(pkt) => {
                    let Some(slot) = self.slot_for_port(pkt.dst) else {
                        bump(&self.c.undeliverable);
                        continue;
                    };
                    bump(&self.c.packets);
                    let ((), now) = self.call(&slot, &mut actions, |m, io| m.packet(io, pkt));
                    self.apply(&slot, now, &mut actions, &mut q);
                }
                Work::Timer { slot, token } => {
                    bump(&self.c.timers);
                    let ((), now) = self.call(&slot, &mut actions, |m, io| m.timer(io, token));
                    self.apply(&slot, now, &mut actions, &mut q);
                }
            }
        }
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
        let mut actions = Vec::new();
        let (r, now) = self.call(slot, &mut actions, |m, io| {
            m.mmio_read(io, bar, offset, data)
        });
        self.finish_host_access(slot, now, actions);
        Ok(r?)
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
        let mut actions = Vec::new();
        let (r, now) = self.call(slot, &mut actions, |m, io| {
            m.mmio_write(io, bar, offset, data)
        });
        self.finish_host_access(slot, now, actions);
        Ok(r?)
    }

    fn finish_host_access(&self, slot: &Arc<Slot>, now: SimTime, mut actions: Vec<Action>) {
        if actions.is_empty() {
            return;
        }
        let mut q = VecDeque::new();
        self.apply(slot, now, &mut actions, &mut q);
        if !q.is_empty() {
            self.run(q, self.cfg.inline_budget, true, actions);
        }
    }

    /// One unit of engine-owned work in the caller's thread (for [`Progress`]).
    fn progress_once(&self) -> bool {
        if self.down.load(Ordering::Relaxed) || self.pending.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
            return false;
        }
        let w = {
            let mut s = lock(&self.sched);
            let now = self.now();
            self.take_ready(&mut s, now)
        };
        match w {
            Some(w) => {
                self.run(
                    VecDeque::from([w]),
                    self.cfg.inline_budget.max(1),
                    true,
                    Vec::new(),
                );
                self.active.fetch_sub(1, Ordering::AcqRel);
                true
            }
            None => {
                std::thread::yield_now();
                false
            }
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
            let w = {
                let mut s = lock(&self.sched);
                loop {
                    if s.shutdown {
                        return;
                    }
                    let now = self.now();
                    if let Some(w) = self.take_ready(&mut s, now) {
                        if !s.deferred.is_empty() {
                            self.cond.notify_one();
                        }
                        break w;
                    }
                    s = match s.heap.peek().map(|t| t.time) {
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
            self.run(VecDeque::from([w]), WORKER_BUDGET, false, Vec::new());
            self.active.fetch_sub(1, Ordering::AcqRel);
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
    pub fn new(fabric: Fabric, config: ThreadedConfig) -> Result<Self, EngineError> {
        let mut root = SimRng::new(config.seed);
        let rng = root.fork();
        let ports = fabric.ports() as usize;
        let shared = Arc::new(Shared {
            start: Instant::now(),
            registry: RwLock::new(Registry {
                devices: Vec::new(),
                by_port: vec![None; ports],
            }),
            net: Mutex::new(Net { fabric, rng, root }),
            sched: Mutex::new(Sched::default()),
            cond: Condvar::new(),
            pending: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            down: AtomicBool::new(false),
            c: Counters::default(),
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
            .registry
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .devices
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
        let mut r = self
            .shared
            .registry
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(p) = port {
            let ports = r.by_port.len() as u32;
            match r.by_port.get(p.0 as usize) {
                None => return Err(EngineError::NoSuchPort { port: p.0, ports }),
                Some(Some(_)) => return Err(EngineError::PortInUse(p.0)),
                Some(None) => {}
            }
        }
        let id = DeviceId(
            u32::try_from(r.devices.len())
                .map_err(|_| EngineError::Setup("too many devices".into()))?,
        );
        let slot = Arc::new(Slot {
            id,
            bars: bar_sizes(model.as_ref()),
            state: Mutex::new(SlotState { model, rng }),
            dma,
            port,
            sink: RwLock::new(None),
        });
        if let Some(p) = port {
            r.by_port[p.0 as usize] = Some(slot.clone());
        }
        r.devices.push(slot);
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

    /// Run `f` with the fabric locked.
    pub fn with_fabric<R>(&self, f: impl FnOnce(&mut Fabric) -> R) -> R {
        f(&mut lock(&self.shared.net).fabric)
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
}
