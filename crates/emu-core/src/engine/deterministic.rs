//! The deterministic engine: one thread, virtual time, one seeded random source.
//!
//! Events (packet arrivals and timers) wait in a priority queue keyed by `(time, seq)`, where
//! `seq` is a counter incremented every time an event is scheduled: events at the same
//! virtual time run in the order they were scheduled. Host-side accesses (MMIO, config space)
//! run at the current virtual time, between events. Every random choice — the fabric's fault
//! sites and the devices' own draws — comes from streams forked from the one seed, so the
//! same seed (and the same inputs) gives the same run, bit for bit; [`Deterministic::trace_digest`]
//! summarises a run so that two runs can be compared.
//!
//! [`Deterministic`] is a cheap handle (`Clone`) onto a core behind a mutex, so [`Mmio`]
//! handles (`Send + Sync`) can be given to a driver; the mutex is never contended in a
//! single-threaded run. Interrupt sinks are called with the lock released.

use super::{
    DeviceId, DeviceIo, DeviceModel, Engine, EngineCounters, EngineError, EngineKind,
    InterruptSink, NUM_BARS, Progress, bar_sizes, check_access, check_burst, digest_mix, le_value,
};
use crate::dma::DmaPort;
use crate::engine::Action;
use crate::fabric::{BufferPool, Fabric, FabricCounters, FaultConfig, LinkId, Packet, PortId};
use crate::mmio::{Mmio, MmioError};
use crate::nic_faults::{NicFaultCounters, NicFaults};
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, MutexGuard};

// Event kinds, as folded into the trace digest.
const K_PACKET: u64 = 1;
const K_TIMER: u64 = 2;
const K_MMIO_READ: u64 = 3;
const K_MMIO_WRITE: u64 = 4;
const K_INTERRUPT: u64 = 5;
const K_CONFIG_WRITE: u64 = 6;

struct DevEntry {
    model: Box<dyn DeviceModel>,
    dma: DmaPort,
    rng: SimRng,
    port: Option<PortId>,
    sink: Option<InterruptSink>,
    bars: [u64; NUM_BARS],
}

#[derive(Clone)]
enum EventKind {
    Packet(Packet),
    Timer(u64),
}

#[derive(Clone)]
struct Event {
    time: SimTime,
    seq: u64,
    dev: u32,
    kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest `(time, seq)` first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

struct Core {
    now: SimTime,
    seq: u64,
    queue: BinaryHeap<Event>,
    devices: Vec<DevEntry>,
    by_port: Vec<Option<u32>>,
    fabric: Fabric,
    fabric_rng: SimRng,
    root_rng: SimRng,
    seed: u64,
    actions: Vec<Action>,
    irqs: Vec<(InterruptSink, u16)>,
    digest: u64,
    counters: EngineCounters,
    /// Packet buffers lent to handlers (buffer reuse never changes behaviour).
    buffers: BufferPool,
    /// The NIC fault profile lent to handlers.
    nic_faults: NicFaults,
    /// NIC fault sites that fired.
    nic_fault_counts: NicFaultCounters,
}

impl Core {
    fn schedule(&mut self, time: SimTime, dev: u32, kind: EventKind) {
        let seq = self.seq;
        self.seq += 1;
        self.queue.push(Event {
            time,
            seq,
            dev,
            kind,
        });
    }

    fn mix(&mut self, words: &[u64]) {
        let mut h = self.digest;
        for w in words {
            h = digest_mix(h, *w);
        }
        self.digest = h;
    }

    fn entry(&mut self, dev: DeviceId) -> Result<&mut DevEntry, EngineError> {
        self.devices
            .get_mut(dev.0 as usize)
            .ok_or(EngineError::NoSuchDevice(dev))
    }

    /// Apply the actions the handler of `dev` queued in `self.actions`.
    fn apply(&mut self, dev: u32) {
        if self.actions.is_empty() {
            return;
        }
        let mut actions = std::mem::take(&mut self.actions);
        for a in actions.drain(..) {
            match a {
                Action::Send(pkt) => {
                    if self.devices[dev as usize].port.is_none() {
                        self.counters.unattached_sends += 1;
                        continue;
                    }
                    let deliveries = self.fabric.inject(self.now, pkt, &mut self.fabric_rng);
                    for (t, p) in deliveries {
                        match self.by_port.get(p.dst.0 as usize).copied().flatten() {
                            Some(d) => self.schedule(t, d, EventKind::Packet(p)),
                            None => self.counters.undeliverable += 1,
                        }
                    }
                }
                Action::Timer { after, token } => {
                    let t = self.now + after;
                    self.schedule(t, dev, EventKind::Timer(token));
                }
                Action::Interrupt { vector } => {
                    self.counters.interrupts += 1;
                    self.mix(&[self.now.0, K_INTERRUPT, u64::from(dev), u64::from(vector)]);
                    if let Some(s) = &self.devices[dev as usize].sink {
                        self.irqs.push((s.clone(), vector));
                    }
                }
            }
        }
        self.actions = actions;
    }

    /// Run the next event. False if the queue is empty.
    fn step(&mut self) -> bool {
        self.step_device().is_some()
    }

    /// Run the next event; the device that handled it, `None` if the queue is empty.
    fn step_device(&mut self) -> Option<DeviceId> {
        let ev = self.queue.pop()?;
        self.now = self.now.max(ev.time);
        self.counters.events += 1;
        let dev = ev.dev;
        let entry = &mut self.devices[dev as usize];
        let mut io = DeviceIo::new(
            self.now,
            entry.port,
            &entry.dma,
            &mut entry.rng,
            &mut self.actions,
        )
        .with_buffers(&self.buffers)
        .with_faults(&self.nic_faults, &mut self.nic_fault_counts);
        match ev.kind {
            EventKind::Packet(pkt) => {
                self.counters.packets += 1;
                let words = [
                    ev.time.0,
                    K_PACKET,
                    u64::from(dev),
                    u64::from(pkt.src.0),
                    u64::from(pkt.crc),
                    pkt.data.len() as u64,
                ];
                entry.model.packet(&mut io, pkt);
                self.mix(&words);
            }
            EventKind::Timer(token) => {
                self.counters.timers += 1;
                entry.model.timer(&mut io, token);
                self.mix(&[ev.time.0, K_TIMER, u64::from(dev), token]);
            }
        }
        self.apply(dev);
        Some(DeviceId(dev))
    }

    fn next_time(&self) -> Option<SimTime> {
        self.queue.peek().map(|e| e.time)
    }
}

/// The whole state of a [`Deterministic`] engine at one moment: virtual time, pending
/// events, every device model, the fabric and every random stream (see
/// [`Deterministic::snapshot`]).
pub struct EngineSnapshot {
    engine: usize,
    now: SimTime,
    seq: u64,
    queue: Vec<Event>,
    devices: Vec<(Box<dyn DeviceModel>, SimRng)>,
    fabric: Fabric,
    fabric_rng: SimRng,
    root_rng: SimRng,
    digest: u64,
    counters: EngineCounters,
    nic_faults: NicFaults,
    nic_fault_counts: NicFaultCounters,
}

impl std::fmt::Debug for EngineSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineSnapshot")
            .field("now", &self.now)
            .field("devices", &self.devices.len())
            .field("pending", &self.queue.len())
            .finish_non_exhaustive()
    }
}

/// The deterministic, virtual-time engine (a cheap, cloneable handle).
#[derive(Clone)]
pub struct Deterministic {
    core: Arc<Mutex<Core>>,
}

impl std::fmt::Debug for Deterministic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.lock();
        f.debug_struct("Deterministic")
            .field("seed", &c.seed)
            .field("now", &c.now)
            .field("devices", &c.devices.len())
            .field("pending", &c.queue.len())
            .finish()
    }
}

impl Deterministic {
    /// An engine driving devices over `fabric`, with every random choice derived from
    /// `seed`.
    pub fn new(seed: u64, fabric: Fabric) -> Self {
        let mut root = SimRng::new(seed);
        let fabric_rng = root.fork();
        let ports = fabric.ports() as usize;
        Deterministic {
            core: Arc::new(Mutex::new(Core {
                now: SimTime::ZERO,
                seq: 0,
                queue: BinaryHeap::new(),
                devices: Vec::new(),
                by_port: vec![None; ports],
                fabric,
                fabric_rng,
                root_rng: root,
                seed,
                actions: Vec::new(),
                irqs: Vec::new(),
                digest: 0xcbf2_9ce4_8422_2325,
                counters: EngineCounters::default(),
                nic_faults: NicFaults::none(),
                nic_fault_counts: NicFaultCounters::default(),
                buffers: BufferPool::default(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic inside a device model poisons the lock; the engine state itself stays
        // consistent between events, so carry on.
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `f` on the core, then call the interrupt sinks it collected, lock released.
    fn with_core<R>(&self, f: impl FnOnce(&mut Core) -> R) -> R {
        let (r, irqs) = {
            let mut c = self.lock();
            let r = f(&mut c);
            (r, std::mem::take(&mut c.irqs))
        };
        for (sink, v) in irqs {
            sink(v);
        }
        r
    }

    /// Run events while `more(next_event_time, processed)` allows, returning how many ran.
    fn run_while(&self, mut more: impl FnMut(SimTime, u64) -> bool) -> u64 {
        let mut n = 0u64;
        loop {
            let (stop, irqs) = {
                let mut c = self.lock();
                let mut stop = false;
                while c.irqs.is_empty() {
                    match c.next_time() {
                        Some(t) if more(t, n) => {
                            c.step();
                            n += 1;
                        }
                        _ => {
                            stop = true;
                            break;
                        }
                    }
                }
                (stop, std::mem::take(&mut c.irqs))
            };
            for (sink, v) in irqs {
                sink(v);
            }
            if stop {
                return n;
            }
        }
    }

    /// The engine's whole state: virtual time, pending events, a copy of every device model
    /// ([`DeviceModel::snapshot`]), the fabric, every random stream, the trace digest and
    /// the counters. The devices' DMA ports, fabric ports and interrupt sinks are not part
    /// of it (they stay as attached; host memory has its own
    /// [`crate::memory::HostMemory::snapshot`]). Fails if a device model cannot be copied.
    pub fn snapshot(&self) -> Result<EngineSnapshot, EngineError> {
        let c = self.lock();
        let mut devices = Vec::with_capacity(c.devices.len());
        for d in &c.devices {
            let model = d.model.snapshot().ok_or_else(|| {
                EngineError::Snapshot(format!("device {} cannot be copied", d.model.name()))
            })?;
            devices.push((model, d.rng.clone()));
        }
        Ok(EngineSnapshot {
            engine: Arc::as_ptr(&self.core) as usize,
            now: c.now,
            seq: c.seq,
            queue: c.queue.iter().cloned().collect(),
            devices,
            fabric: c.fabric.clone(),
            fabric_rng: c.fabric_rng.clone(),
            root_rng: c.root_rng.clone(),
            digest: c.digest,
            counters: c.counters,
            nic_faults: c.nic_faults,
            nic_fault_counts: c.nic_fault_counts,
        })
    }

    /// Put the engine back in the state `snap` recorded: from here on it runs exactly as
    /// it did after [`Deterministic::snapshot`] (given the same host memory, see
    /// [`crate::memory::HostMemory::restore`]). The snapshot stays usable for further
    /// restores. Fails, changing nothing, for a snapshot of another engine or one taken
    /// with a different number of devices attached.
    pub fn restore(&self, snap: &EngineSnapshot) -> Result<(), EngineError> {
        let mut c = self.lock();
        if snap.engine != Arc::as_ptr(&self.core) as usize {
            return Err(EngineError::Snapshot(
                "the snapshot is of another engine".into(),
            ));
        }
        if snap.devices.len() != c.devices.len() {
            return Err(EngineError::Snapshot(format!(
                "the snapshot has {} devices, the engine {}",
                snap.devices.len(),
                c.devices.len()
            )));
        }
        let mut models = Vec::with_capacity(snap.devices.len());
        for (m, _) in &snap.devices {
            models.push(m.snapshot().ok_or_else(|| {
                EngineError::Snapshot(format!("device {} cannot be copied", m.name()))
            })?);
        }
        for (d, (model, (_, rng))) in c
            .devices
            .iter_mut()
            .zip(models.into_iter().zip(&snap.devices))
        {
            d.model = model;
            d.rng = rng.clone();
        }
        c.now = snap.now;
        c.seq = snap.seq;
        c.queue = snap.queue.iter().cloned().collect();
        c.fabric = snap.fabric.clone();
        c.fabric_rng = snap.fabric_rng.clone();
        c.root_rng = snap.root_rng.clone();
        c.digest = snap.digest;
        c.counters = snap.counters;
        c.nic_faults = snap.nic_faults;
        c.nic_fault_counts = snap.nic_fault_counts;
        c.actions.clear();
        c.irqs.clear();
        Ok(())
    }

    /// Attach a device (see [`Engine::add_device`]). Its random stream is forked from the
    /// engine's seed in attachment order.
    pub fn add_device(
        &self,
        model: Box<dyn DeviceModel>,
        dma: DmaPort,
        port: Option<PortId>,
    ) -> Result<DeviceId, EngineError> {
        let mut c = self.lock();
        if let Some(p) = port {
            let ports = c.fabric.ports();
            match c.by_port.get(p.0 as usize) {
                None => return Err(EngineError::NoSuchPort { port: p.0, ports }),
                Some(Some(_)) => return Err(EngineError::PortInUse(p.0)),
                Some(None) => {}
            }
        }
        let id = u32::try_from(c.devices.len())
            .map_err(|_| EngineError::Setup("too many devices".into()))?;
        let rng = c.root_rng.fork();
        let bars = bar_sizes(model.as_ref());
        c.devices.push(DevEntry {
            model,
            dma,
            rng,
            port,
            sink: None,
            bars,
        });
        if let Some(p) = port {
            c.by_port[p.0 as usize] = Some(id);
        }
        Ok(DeviceId(id))
    }

    /// Route a device's interrupts to `sink`.
    pub fn set_interrupt_sink(
        &self,
        dev: DeviceId,
        sink: InterruptSink,
    ) -> Result<(), EngineError> {
        self.lock().entry(dev)?.sink = Some(sink);
        Ok(())
    }

    /// CPU load: runs the device handler at the current virtual time, then applies its
    /// actions.
    pub fn mmio_read(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), EngineError> {
        self.with_core(|c| {
            let now = c.now;
            let e = c
                .devices
                .get_mut(dev.0 as usize)
                .ok_or(EngineError::NoSuchDevice(dev))?;
            check_access(&e.bars, bar, offset, data.len())?;
            let mut io = DeviceIo::new(now, e.port, &e.dma, &mut e.rng, &mut c.actions)
                .with_buffers(&c.buffers)
                .with_faults(&c.nic_faults, &mut c.nic_fault_counts);
            let r = e.model.mmio_read(&mut io, bar, offset, data);
            c.counters.mmio_reads += 1;
            c.mix(&[
                now.0,
                K_MMIO_READ,
                u64::from(dev.0),
                u64::from(bar),
                offset,
                data.len() as u64,
                le_value(data),
            ]);
            c.apply(dev.0);
            r.map_err(EngineError::from)
        })
    }

    /// CPU store: runs the device handler at the current virtual time, then applies its
    /// actions.
    pub fn mmio_write(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        self.with_core(|c| {
            let now = c.now;
            let e = c
                .devices
                .get_mut(dev.0 as usize)
                .ok_or(EngineError::NoSuchDevice(dev))?;
            check_access(&e.bars, bar, offset, data.len())?;
            let mut io = DeviceIo::new(now, e.port, &e.dma, &mut e.rng, &mut c.actions)
                .with_buffers(&c.buffers)
                .with_faults(&c.nic_faults, &mut c.nic_fault_counts);
            let r = e.model.mmio_write(&mut io, bar, offset, data);
            c.counters.mmio_writes += 1;
            c.mix(&[
                now.0,
                K_MMIO_WRITE,
                u64::from(dev.0),
                u64::from(bar),
                offset,
                data.len() as u64,
                le_value(data),
            ]);
            c.apply(dev.0);
            r.map_err(EngineError::from)
        })
    }

    /// A write-combined burst (see [`Mmio::write_burst`]): one access to the device
    /// ([`DeviceModel::mmio_write_burst`]), folded into the trace digest as the 64-bit stores
    /// it is made of.
    pub fn mmio_write_burst(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        self.with_core(|c| {
            let now = c.now;
            let e = c
                .devices
                .get_mut(dev.0 as usize)
                .ok_or(EngineError::NoSuchDevice(dev))?;
            check_burst(&e.bars, bar, offset, data.len())?;
            let mut io = DeviceIo::new(now, e.port, &e.dma, &mut e.rng, &mut c.actions)
                .with_buffers(&c.buffers)
                .with_faults(&c.nic_faults, &mut c.nic_fault_counts);
            let r = e.model.mmio_write_burst(&mut io, bar, offset, data);
            c.counters.mmio_writes += 1;
            for (i, q) in data.chunks_exact(8).enumerate() {
                c.mix(&[
                    now.0,
                    K_MMIO_WRITE,
                    u64::from(dev.0),
                    u64::from(bar),
                    offset + 8 * i as u64,
                    8,
                    le_value(q),
                ]);
            }
            c.apply(dev.0);
            r.map_err(EngineError::from)
        })
    }

    /// Read PCI configuration space.
    pub fn config_read(&self, dev: DeviceId, reg: u16) -> Result<u32, EngineError> {
        Ok(self.lock().entry(dev)?.model.config_read(reg))
    }

    /// Write PCI configuration space.
    pub fn config_write(&self, dev: DeviceId, reg: u16, value: u32) -> Result<(), EngineError> {
        let mut c = self.lock();
        let now = c.now;
        c.entry(dev)?.model.config_write(reg, value);
        c.mix(&[
            now.0,
            K_CONFIG_WRITE,
            u64::from(dev.0),
            u64::from(reg),
            u64::from(value),
        ]);
        Ok(())
    }

    /// Size of a BAR (as reported by the model when it was attached).
    pub fn bar_size(&self, dev: DeviceId, bar: u8) -> Result<u64, EngineError> {
        Ok(self
            .lock()
            .entry(dev)?
            .bars
            .get(usize::from(bar))
            .copied()
            .unwrap_or(0))
    }

    /// An [`Mmio`] handle for one BAR of a device.
    pub fn mmio(&self, dev: DeviceId, bar: u8) -> Result<Arc<dyn Mmio>, EngineError> {
        let size = self.bar_size(dev, bar)?;
        Ok(Arc::new(DetMmio {
            engine: self.clone(),
            dev,
            bar,
            size,
        }))
    }

    /// Run the next event (advancing virtual time to it). False if nothing is pending.
    pub fn step(&self) -> bool {
        self.with_core(Core::step)
    }

    /// Run the next event (advancing virtual time to it) and tell which device handled it
    /// (a scheduler uses it to wake only the code waiting on that device); `None` if nothing
    /// is pending.
    pub fn step_event(&self) -> Option<DeviceId> {
        self.with_core(Core::step_device)
    }

    /// The virtual time of the next pending event, `None` if nothing is pending.
    pub fn next_event_time(&self) -> Option<SimTime> {
        self.lock().next_time()
    }

    /// Run until no event is pending; returns the number of events run. A device that
    /// re-arms a timer forever never lets this return: use [`Deterministic::run_for`] or
    /// [`Deterministic::run_events`] for such workloads.
    pub fn run_until_idle(&self) -> u64 {
        self.run_while(|_, _| true)
    }

    /// Run at most `max` events; returns the number run.
    pub fn run_events(&self, max: u64) -> u64 {
        self.run_while(|_, n| n < max)
    }

    /// Run every event due at or before `t`, then set the virtual time to `t` (if it is
    /// later than now). Returns the number of events run.
    pub fn run_until(&self, t: SimTime) -> u64 {
        let n = self.run_while(|next, _| next <= t);
        let mut c = self.lock();
        c.now = c.now.max(t);
        n
    }

    /// Run for `d` of virtual time from now (see [`Deterministic::run_until`]).
    pub fn run_for(&self, d: SimDuration) -> u64 {
        let t = self.now() + d;
        self.run_until(t)
    }

    /// The current virtual time.
    pub fn now(&self) -> SimTime {
        self.lock().now
    }

    /// The seed this engine was built with (print it to replay a failing run).
    pub fn seed(&self) -> u64 {
        self.lock().seed
    }

    /// Number of events waiting in the queue.
    pub fn pending(&self) -> usize {
        self.lock().queue.len()
    }

    /// A digest of every event processed so far (time, kind, device, and the packet's
    /// source, CRC and length or the timer token) and every host access (MMIO data, config
    /// writes) and interrupt: two runs with equal digests processed the same events in the
    /// same order at the same virtual times.
    pub fn trace_digest(&self) -> u64 {
        self.lock().digest
    }

    /// Event counters.
    pub fn counters(&self) -> EngineCounters {
        self.lock().counters
    }

    /// Run `f` with the fabric (to read counters, take links down, change faults).
    pub fn with_fabric<R>(&self, f: impl FnOnce(&mut Fabric) -> R) -> R {
        f(&mut self.lock().fabric)
    }
}

impl Progress for Deterministic {
    /// Runs the next event.
    fn progress(&self) -> bool {
        self.step()
    }
}

impl Engine for Deterministic {
    fn kind(&self) -> EngineKind {
        EngineKind::Deterministic
    }
    fn now(&self) -> SimTime {
        Deterministic::now(self)
    }
    fn add_device(
        &self,
        model: Box<dyn DeviceModel>,
        dma: DmaPort,
        port: Option<PortId>,
    ) -> Result<DeviceId, EngineError> {
        Deterministic::add_device(self, model, dma, port)
    }
    fn set_interrupt_sink(&self, dev: DeviceId, sink: InterruptSink) -> Result<(), EngineError> {
        Deterministic::set_interrupt_sink(self, dev, sink)
    }
    fn mmio_read(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), EngineError> {
        Deterministic::mmio_read(self, dev, bar, offset, data)
    }
    fn mmio_write(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        Deterministic::mmio_write(self, dev, bar, offset, data)
    }
    fn mmio_write_burst(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        Deterministic::mmio_write_burst(self, dev, bar, offset, data)
    }
    fn mmio(&self, dev: DeviceId, bar: u8) -> Result<Arc<dyn Mmio>, EngineError> {
        Deterministic::mmio(self, dev, bar)
    }
    fn config_read(&self, dev: DeviceId, reg: u16) -> Result<u32, EngineError> {
        Deterministic::config_read(self, dev, reg)
    }
    fn config_write(&self, dev: DeviceId, reg: u16, value: u32) -> Result<(), EngineError> {
        Deterministic::config_write(self, dev, reg, value)
    }
    fn bar_size(&self, dev: DeviceId, bar: u8) -> Result<u64, EngineError> {
        Deterministic::bar_size(self, dev, bar)
    }
    fn progress_handle(&self) -> Arc<dyn Progress> {
        Arc::new(self.clone())
    }
    fn next_event_time(&self) -> Option<SimTime> {
        Deterministic::next_event_time(self)
    }
    fn counters(&self) -> EngineCounters {
        Deterministic::counters(self)
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
        self.with_core(|c| c.nic_faults = faults);
    }
    fn nic_fault_counters(&self) -> NicFaultCounters {
        self.with_core(|c| c.nic_fault_counts)
    }
}

/// One BAR of a device driven by a [`Deterministic`] engine, as an [`Mmio`] region.
#[derive(Debug)]
pub struct DetMmio {
    engine: Deterministic,
    dev: DeviceId,
    bar: u8,
    size: u64,
}

impl Mmio for DetMmio {
    fn size(&self) -> u64 {
        self.size
    }
    fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        Ok(self.engine.mmio_read(self.dev, self.bar, offset, data)?)
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        Ok(self.engine.mmio_write(self.dev, self.bar, offset, data)?)
    }
    fn write_burst(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        Ok(self
            .engine
            .mmio_write_burst(self.dev, self.bar, offset, data)?)
    }
}
