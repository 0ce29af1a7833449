//! The device-model contract and the engines that drive models.
//!
//! A device model is a state machine (architecture seam 3). It never spawns threads, sleeps or
//! reads a clock. It is driven by exactly three inputs:
//! - MMIO accesses from the CPU ([`DeviceModel::mmio_read`] / [`DeviceModel::mmio_write`]),
//! - packets arriving from the fabric ([`DeviceModel::packet`]),
//! - timers it armed itself ([`DeviceModel::timer`]).
//!
//! Each input handler gets a [`DeviceIo`]: the current time, the device's DMA port, the seeded
//! random source, and an outbox for the effects the handler wants (send a packet, arm a timer,
//! raise an interrupt). The engine applies those effects after the handler returns, so a model
//! never calls into another model and never holds two locks.
//!
//! Two engines drive the same models (seam 4): [`deterministic::Deterministic`] (one thread,
//! virtual time, one seeded RNG: same seed, same run) and [`threaded::Threaded`] (real time,
//! short work inline in the caller's thread, long work on parked engine threads).

use crate::dma::DmaPort;
use crate::fabric::{BufferPool, FabricCounters, FabricError, FaultConfig, LinkId, Packet, PortId};
use crate::mmio::{Mmio, MmioError};
use crate::nic_faults::{NicFaultCounters, NicFaults, NicSite};
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};
use std::sync::Arc;
use thiserror::Error;

#[cfg(feature = "harness")]
pub mod bench;
pub mod deterministic;
pub mod threaded;

/// Index of a device inside an engine (assigned by `add_device`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId(pub u32);

/// An effect a device handler asks the engine to carry out once the handler has returned.
#[derive(Debug)]
pub enum Action {
    /// Inject a packet into the fabric at this device's port.
    Send(Packet),
    /// Call [`DeviceModel::timer`] with `token` after `after` has elapsed.
    Timer { after: SimDuration, token: u64 },
    /// Signal MSI-X vector `vector` (the engine hands it to the device's interrupt sink).
    Interrupt { vector: u16 },
}

/// What a device handler may use: time, DMA, randomness, and an outbox of [`Action`]s.
pub struct DeviceIo<'a> {
    /// The time of the handler, or (with `clock` still set) the floor below which it may
    /// not go: the device's last time.
    now: std::cell::Cell<SimTime>,
    /// Read on the first [`DeviceIo::now`] and then dropped (a host access whose handler
    /// never asks for the time costs no clock read).
    clock: std::cell::Cell<Option<&'a dyn Fn() -> SimTime>>,
    port: Option<PortId>,
    dma: &'a DmaPort,
    rng: &'a mut SimRng,
    actions: &'a mut Vec<Action>,
    buffers: Option<&'a BufferPool>,
    faults: &'a NicFaults,
    fault_counts: Option<&'a mut NicFaultCounters>,
    trains: Option<&'a dyn Fn(PortId) -> bool>,
}

/// The profile of a handler whose engine set none.
static NO_FAULTS: NicFaults = NicFaults::none();

impl<'a> DeviceIo<'a> {
    /// Built by engines (and by unit tests of device models).
    pub fn new(
        now: SimTime,
        port: Option<PortId>,
        dma: &'a DmaPort,
        rng: &'a mut SimRng,
        actions: &'a mut Vec<Action>,
    ) -> Self {
        DeviceIo {
            now: std::cell::Cell::new(now),
            clock: std::cell::Cell::new(None),
            port,
            dma,
            rng,
            actions,
            buffers: None,
            faults: &NO_FAULTS,
            fault_counts: None,
            trains: None,
        }
    }
    /// Let the handler send trains ([`crate::fabric::Train`]) to the ports for which `ok`
    /// says nothing needs their frames' bytes ([`DeviceIo::train_ok`]).
    pub fn with_trains(mut self, ok: &'a dyn Fn(PortId) -> bool) -> Self {
        self.trains = Some(ok);
        self
    }
    /// Whether a packet to `dst` may carry a [`crate::fabric::Train`]: the engine delivers
    /// it inside this process and nothing between here and the receiving device needs the
    /// bytes of its frames (no fabric fault site, no capture hook, no NIC fault site).
    /// Always false on the deterministic engine, whose runs stay frame by frame.
    pub fn train_ok(&self, dst: PortId) -> bool {
        self.trains.is_some_and(|ok| ok(dst)) && !self.faults.any()
    }
    /// Lend the handler the engine's NIC fault profile and the counters of sites that
    /// fired ([`DeviceIo::fault`]).
    pub fn with_faults(mut self, faults: &'a NicFaults, counts: &'a mut NicFaultCounters) -> Self {
        self.faults = faults;
        self.fault_counts = Some(counts);
        self
    }
    /// The engine's NIC fault profile (all off unless a campaign set one).
    pub fn faults(&self) -> &NicFaults {
        self.faults
    }
    /// Whether NIC fault site `site` fires here: drawn from the device's seeded stream, and
    /// only when the site is on (an off site draws nothing). A firing is counted.
    pub fn fault(&mut self, site: NicSite) -> bool {
        let p = self.faults.probability(site);
        if p > 0.0 && self.rng.chance(p) {
            if let Some(c) = self.fault_counts.as_deref_mut() {
                c.bump(site);
            }
            true
        } else {
            false
        }
    }
    /// Like [`DeviceIo::new`], but the time is read from `clock` only when the handler asks
    /// for it ([`DeviceIo::now`]), and never reads below `floor` (the device's last time).
    /// [`DeviceIo::time_taken`] tells the engine whether it was read.
    pub fn lazy(
        floor: SimTime,
        clock: &'a dyn Fn() -> SimTime,
        port: Option<PortId>,
        dma: &'a DmaPort,
        rng: &'a mut SimRng,
        actions: &'a mut Vec<Action>,
    ) -> Self {
        let io = DeviceIo::new(floor, port, dma, rng, actions);
        io.clock.set(Some(clock));
        io
    }
    /// The time the handler ran at, if it was fixed: always for [`DeviceIo::new`], for
    /// [`DeviceIo::lazy`] only once the handler asked for it.
    pub fn time_taken(&self) -> Option<SimTime> {
        match self.clock.get() {
            Some(_) => None,
            None => Some(self.now.get()),
        }
    }
    /// Lend the handler a pool of packet buffers ([`DeviceIo::packet_buffer`],
    /// [`DeviceIo::recycle`]); both engines do.
    pub fn with_buffers(mut self, pool: &'a BufferPool) -> Self {
        self.buffers = Some(pool);
        self
    }
    /// An empty buffer of at least `cap` bytes for a frame this device is about to send:
    /// a recycled one from the engine's pool when there is one, else a new allocation.
    /// Devices that stream many frames should build them in such buffers, and receivers
    /// should [`DeviceIo::recycle`] them, so a large transfer does not allocate (and page
    /// fault) a fresh buffer per frame.
    pub fn packet_buffer(&mut self, cap: usize) -> Vec<u8> {
        match self.buffers {
            Some(p) => p.take(cap),
            None => Vec::with_capacity(cap),
        }
    }
    /// Give back the buffer of a frame this device has finished with (typically
    /// `pkt.data` once the payload was placed), for [`DeviceIo::packet_buffer`] to reuse.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if let Some(p) = self.buffers {
            p.give(buf);
        }
    }
    /// The current time (virtual for the deterministic engine, elapsed real time for the
    /// threaded one). A model must take time only from here.
    pub fn now(&self) -> SimTime {
        if let Some(clock) = self.clock.take() {
            self.now.set(self.now.get().max(clock()));
        }
        self.now.get()
    }
    /// This device's fabric port, if it is attached to a fabric.
    pub fn port(&self) -> Option<PortId> {
        self.port
    }
    /// The device's window onto host memory (through the platform IOMMU).
    pub fn dma(&self) -> &DmaPort {
        self.dma
    }
    /// The engine's seeded random source; every nondeterministic choice a model makes
    /// (e.g. arbitration) must be drawn from it.
    pub fn rng(&mut self) -> &mut SimRng {
        self.rng
    }
    /// Queue a packet for the fabric. Its `src` is overwritten with this device's port.
    pub fn send(&mut self, mut pkt: Packet) {
        if let Some(p) = self.port {
            pkt.src = p;
        }
        self.actions.push(Action::Send(pkt));
    }
    /// Arm a one-shot timer.
    pub fn timer(&mut self, after: SimDuration, token: u64) {
        self.actions.push(Action::Timer { after, token });
    }
    /// Raise an MSI-X vector.
    pub fn interrupt(&mut self, vector: u16) {
        self.actions.push(Action::Interrupt { vector });
    }
}

/// A device model: a state machine driven by MMIO, packets and timers.
pub trait DeviceModel: Send {
    /// A short name for traces ("cassini0", "gemini3").
    fn name(&self) -> &str;
    /// Read PCI configuration space (dword `reg`, i.e. byte offset `reg * 4`).
    fn config_read(&mut self, reg: u16) -> u32;
    /// Write PCI configuration space (dword `reg`), with byte mask semantics left to the model.
    fn config_write(&mut self, reg: u16, value: u32);
    /// CPU load from BAR `bar` at `offset`, `data.len()` bytes.
    fn mmio_read(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError>;
    /// CPU store to BAR `bar` at `offset`, `data.len()` bytes.
    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError>;
    /// A write-combined burst of CPU stores to BAR `bar` at `offset` ([`Mmio::write_burst`]):
    /// `data.len()` is a multiple of 8 from 8 to [`crate::mmio::MAX_BURST`] bytes (the engine
    /// checks it, and that the burst lies inside the BAR), delivered in one access.
    ///
    /// The default splits it into 64-bit [`DeviceModel::mmio_write`]s in order (what the
    /// CPU's stores were), stopping at the first error. A model with write-combining regions
    /// (low-latency command windows) overrides it to take the burst whole, as the hardware
    /// receives one PCIe write of up to 64 B (or 128 B) there.
    fn mmio_write_burst(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        for (i, q) in data.chunks_exact(8).enumerate() {
            self.mmio_write(io, bar, offset + 8 * i as u64, q)?;
        }
        Ok(())
    }
    /// A packet arrived at this device's fabric port.
    fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet);
    /// A timer armed with [`DeviceIo::timer`] expired.
    fn timer(&mut self, io: &mut DeviceIo<'_>, token: u64);
    /// Size of BAR `bar` in bytes (0 if the BAR is not implemented).
    fn bar_size(&self, bar: u8) -> u64;
    /// A copy of this device's whole state, for
    /// [`deterministic::Deterministic::snapshot`]; `None` (the default) for a model that
    /// cannot be copied. The copy must behave exactly as the original would from here on.
    fn snapshot(&self) -> Option<Box<dyn DeviceModel>> {
        None
    }
}

/// Lets code that waits for a device (a user library polling an event ring) make progress
/// on engines that need it: the deterministic engine advances virtual time by running the next
/// event; the threaded engine yields. Returns `true` if any device work was done.
pub trait Progress: Send + Sync {
    fn progress(&self) -> bool;
    /// The calling host thread has nothing to do and is about to block until the device
    /// interrupts it (or a time limit passes). True when that is safe: the device progresses
    /// without the caller (a threaded engine with engine threads, real hardware), and no
    /// work already waits for the caller to take it (then it should poll again instead).
    /// The default, and the deterministic engine, say no: there nothing happens unless the
    /// waiter runs the next event.
    fn before_sleep(&self) -> bool {
        false
    }
    /// Whether [`Progress::before_sleep`] can ever say yes (the device progresses without
    /// the caller), asked once at set-up and without side effects: a driver sets up its
    /// sleeping machinery (wait objects, interrupts) only then, so the deterministic
    /// engine's event sequence stays what it was.
    fn can_sleep(&self) -> bool {
        false
    }
}

/// Where a device's MSI-X interrupts go (the driver's interrupt handler). Called with the
/// vector number, with no engine lock held, so it may call back into the engine.
pub type InterruptSink = Arc<dyn Fn(u16) + Send + Sync>;

/// Why an engine operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EngineError {
    /// No device with this id.
    #[error("no device {0:?} in this engine")]
    NoSuchDevice(DeviceId),
    /// The port does not exist in the fabric.
    #[error("port {port} does not exist (the fabric has {ports} ports)")]
    NoSuchPort {
        /// The requested port.
        port: u32,
        /// Ports of the fabric.
        ports: u32,
    },
    /// Another device is already attached to the port.
    #[error("port {0} already has a device attached")]
    PortInUse(u32),
    /// The device refused the MMIO access (or the access was malformed).
    #[error(transparent)]
    Mmio(#[from] MmioError),
    /// A fabric operation failed.
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// The engine has been shut down.
    #[error("the engine is shut down")]
    ShutDown,
    /// An engine thread could not be started, or setup failed.
    #[error("engine setup failed: {0}")]
    Setup(String),
    /// A snapshot cannot be taken or restored (a device model that cannot be copied, or a
    /// snapshot of another engine or of a different set of devices).
    #[error("engine snapshot: {0}")]
    Snapshot(String),
}

impl From<EngineError> for MmioError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Mmio(m) => m,
            _ => MmioError::DeviceGone,
        }
    }
}

/// Which engine implementation drives the devices.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// [`deterministic::Deterministic`]: one thread, virtual time.
    Deterministic,
    /// [`threaded::Threaded`]: real time, inline + worker threads.
    Threaded,
}

/// Event counters of an engine.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// Queued events processed (packet arrivals and timers; the deterministic engine's
    /// events/s figure counts these).
    pub events: u64,
    /// Packets handed to a device's [`DeviceModel::packet`].
    pub packets: u64,
    /// Timers fired ([`DeviceModel::timer`]).
    pub timers: u64,
    /// MMIO loads performed.
    pub mmio_reads: u64,
    /// MMIO stores performed.
    pub mmio_writes: u64,
    /// Interrupts raised by devices.
    pub interrupts: u64,
    /// Packets that reached a port with no device attached (discarded).
    pub undeliverable: u64,
    /// Packets sent by a device that is not attached to the fabric (discarded).
    pub unattached_sends: u64,
    /// Threaded engine: handler calls run inline in the caller's thread.
    pub inline_calls: u64,
    /// Threaded engine: work items handed to the engine threads (timers, delayed packets,
    /// inline work over budget).
    pub deferred: u64,
}

/// The interface common to both engines, so device crates, the driver and tests can be
/// written once (`Arc<dyn Engine>`). Host-side calls run the device handler at the engine's
/// current time and then apply the actions it queued.
pub trait Engine: Progress {
    /// Which engine this is.
    fn kind(&self) -> EngineKind;
    /// The current time (virtual, or real time elapsed since the engine started).
    fn now(&self) -> SimTime;
    /// Attach a device, optionally to a fabric port (each port takes at most one device).
    fn add_device(
        &self,
        model: Box<dyn DeviceModel>,
        dma: DmaPort,
        port: Option<PortId>,
    ) -> Result<DeviceId, EngineError>;
    /// Route the device's interrupts to `sink` (replacing any previous sink). Without a sink
    /// interrupts are counted and discarded.
    fn set_interrupt_sink(&self, dev: DeviceId, sink: InterruptSink) -> Result<(), EngineError>;
    /// CPU load from BAR `bar` of `dev`.
    fn mmio_read(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), EngineError>;
    /// CPU store to BAR `bar` of `dev`.
    fn mmio_write(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError>;
    /// A write-combined burst to BAR `bar` of `dev` (see [`Mmio::write_burst`]). The
    /// default issues 64-bit [`Engine::mmio_write`]s in order.
    fn mmio_write_burst(
        &self,
        dev: DeviceId,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        crate::mmio::check_burst_len(offset, data.len())?;
        for (i, q) in data.chunks_exact(8).enumerate() {
            self.mmio_write(dev, bar, offset + 8 * i as u64, q)?;
        }
        Ok(())
    }
    /// A handle onto one BAR, for the driver and user library (`Arc<dyn Mmio>`).
    fn mmio(&self, dev: DeviceId, bar: u8) -> Result<Arc<dyn Mmio>, EngineError>;
    /// Read PCI configuration space dword `reg`.
    fn config_read(&self, dev: DeviceId, reg: u16) -> Result<u32, EngineError>;
    /// Write PCI configuration space dword `reg`.
    fn config_write(&self, dev: DeviceId, reg: u16, value: u32) -> Result<(), EngineError>;
    /// Size of BAR `bar` of `dev` (0 if not implemented).
    fn bar_size(&self, dev: DeviceId, bar: u8) -> Result<u64, EngineError>;
    /// A handle that makes progress on this engine (for pollers).
    fn progress_handle(&self) -> Arc<dyn Progress>;
    /// The time of the next queued event, if the engine keeps a queue it can tell (the
    /// deterministic engine; `None` on the threaded one).
    fn next_event_time(&self) -> Option<SimTime> {
        None
    }
    /// Engine event counters.
    fn counters(&self) -> EngineCounters;
    /// Fabric counters.
    fn fabric_counters(&self) -> FabricCounters;
    /// Take a fabric link down or up.
    fn set_link_up(&self, link: LinkId, up: bool) -> Result<(), EngineError>;
    /// Change the fabric's fault probabilities.
    fn set_faults(&self, faults: FaultConfig);
    /// Set the NIC fault profile every device handler sees ([`DeviceIo::faults`]).
    fn set_nic_faults(&self, faults: NicFaults);
    /// How often each NIC fault site fired, over all devices.
    fn nic_fault_counters(&self) -> NicFaultCounters;
}

/// Number of BARs of a PCI type-0 function.
pub(crate) const NUM_BARS: usize = 6;

/// Check an MMIO access against the BAR size and the widths the [`Mmio`] seam allows.
pub(crate) fn check_access(
    bars: &[u64; NUM_BARS],
    bar: u8,
    offset: u64,
    width: usize,
) -> Result<(), MmioError> {
    let size = bars.get(usize::from(bar)).copied().unwrap_or(0);
    if !matches!(width, 1 | 2 | 4 | 8) {
        return Err(MmioError::BadWidth { offset, width });
    }
    if offset
        .checked_add(width as u64)
        .is_none_or(|end| end > size)
    {
        return Err(MmioError::OutOfRange {
            offset,
            width,
            size,
        });
    }
    Ok(())
}

/// Check a write-combined burst: its length (see [`crate::mmio::check_burst_len`]) and that
/// it lies inside the BAR.
pub(crate) fn check_burst(
    bars: &[u64; NUM_BARS],
    bar: u8,
    offset: u64,
    len: usize,
) -> Result<(), MmioError> {
    crate::mmio::check_burst_len(offset, len)?;
    let size = bars.get(usize::from(bar)).copied().unwrap_or(0);
    if offset.checked_add(len as u64).is_none_or(|end| end > size) {
        return Err(MmioError::OutOfRange {
            offset,
            width: len,
            size,
        });
    }
    Ok(())
}

/// The BAR sizes of a model, read once when it is attached.
pub(crate) fn bar_sizes(model: &dyn DeviceModel) -> [u64; NUM_BARS] {
    let mut bars = [0u64; NUM_BARS];
    for (i, b) in bars.iter_mut().enumerate() {
        *b = model.bar_size(i as u8);
    }
    bars
}

/// Fold one 64-bit word into a running trace digest (a multiplicative, FxHash-style mix:
/// order-sensitive and cheap enough to run on every event).
pub(crate) fn digest_mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// Little-endian value of up to 8 bytes (for digests of MMIO data).
pub(crate) fn le_value(data: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = data.len().min(8);
    b[..n].copy_from_slice(&data[..n]);
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod burst_tests;

#[cfg(test)]
mod buffer_tests;
#[cfg(test)]
mod lazy_time_tests;
#[cfg(test)]
mod order_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod timer_tests;
