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
use crate::fabric::{Packet, PortId};
use crate::mmio::MmioError;
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};

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
    now: SimTime,
    port: Option<PortId>,
    dma: &'a DmaPort,
    rng: &'a mut SimRng,
    actions: &'a mut Vec<Action>,
}

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
            now,
            port,
            dma,
            rng,
            actions,
        }
    }
    /// The current time (virtual for the deterministic engine, elapsed real time for the
    /// threaded one). A model must take time only from here.
    pub fn now(&self) -> SimTime {
        self.now
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
    /// A packet arrived at this device's fabric port.
    fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet);
    /// A timer armed with [`DeviceIo::timer`] expired.
    fn timer(&mut self, io: &mut DeviceIo<'_>, token: u64);
    /// Size of BAR `bar` in bytes (0 if the BAR is not implemented).
    fn bar_size(&self, bar: u8) -> u64;
}

/// Lets code that waits for a device (a user library polling an event ring) make progress
/// on engines that need it: the deterministic engine advances virtual time by running the next
/// event; the threaded engine yields. Returns `true` if any device work was done.
pub trait Progress: Send + Sync {
    fn progress(&self) -> bool;
}
