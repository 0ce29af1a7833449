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
//!
//! Modules: `config` (the configuration), `slot` (a device), `sched` (timer heap and deferred
//! queue), `shared` (the state the threads share, a handler run under its device's lock),
//! `work` (the work loop and the engine threads), `host` (MMIO accesses inline), `counters`
//! and `scratch` (per-loop tallies and buffers). This module holds the [`Threaded`] handle.

mod config;
mod counters;
mod host;
mod sched;
mod scratch;
mod shared;
mod slot;
mod work;

pub use config::{FabricTiming, ThreadedConfig};

use super::{
    DeviceId, DeviceModel, Engine, EngineCounters, EngineError, EngineKind, InterruptSink,
    Progress, bar_sizes,
};
use crate::clock::JobClock;
use crate::dma::DmaPort;
use crate::fabric::remote::{Arrivals, Outlet};
use crate::fabric::{BufferPool, Fabric, FabricCounters, FaultConfig, LinkId, Packet, PortId};
use crate::mmio::{Mmio, MmioError};
use crate::nic_faults::{NicFaultCounters, NicFaults};
use crate::rng::SimRng;
use crate::time::SimTime;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use counters::Counters;
use sched::{Sched, Work};
use scratch::Scratch;
use shared::{Shared, lock};
use slot::{Net, Slot, SlotState};

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
            clock: Arc::new(JobClock::new()),
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
            self.shared.head_changed(None);
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

    /// The engine's time: real time since it started, less the time its [`JobClock`] was
    /// held.
    pub fn now(&self) -> SimTime {
        self.shared.now()
    }

    /// The engine's clock. The fabric between processes limits it so that emulated time
    /// stands still while a process of the job does not run ([`JobClock::allow`]).
    pub fn clock(&self) -> Arc<JobClock> {
        Arc::clone(&self.shared.clock)
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

    fn clock(&self) -> Option<Arc<JobClock>> {
        self.0.upgrade().map(|s| Arc::clone(&s.clock))
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
        s.run_or_defer(&mut sc, now);
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

    /// True when engine threads run timers and deferred work without the caller, and the
    /// fabric between processes has no arrival waiting for it.
    fn before_sleep(&self) -> bool {
        self.shared.may_sleep()
    }

    fn can_sleep(&self) -> bool {
        self.shared.cfg.workers > 0
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
