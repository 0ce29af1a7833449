//! A device in the threaded engine ([`Slot`]: its model behind its own mutex, its DMA port,
//! fabric port, interrupt sink and BAR sizes) and the fabric with its random streams
//! ([`Net`]).

use std::sync::{Mutex, RwLock};

use crate::dma::DmaPort;
use crate::engine::{DeviceId, DeviceModel, InterruptSink, NUM_BARS};
use crate::fabric::{Fabric, PortId};
use crate::rng::SimRng;
use crate::time::SimTime;

pub(super) struct SlotState {
    pub(super) model: Box<dyn DeviceModel>,
    pub(super) rng: SimRng,
    /// The time the device's last handler ran at: a device never sees time go backwards,
    /// whichever thread runs it.
    pub(super) last: SimTime,
}

pub(super) struct Slot {
    pub(super) id: DeviceId,
    pub(super) state: Mutex<SlotState>,
    pub(super) dma: DmaPort,
    pub(super) port: Option<PortId>,
    pub(super) sink: RwLock<Option<InterruptSink>>,
    pub(super) bars: [u64; NUM_BARS],
}

pub(super) struct Net {
    pub(super) fabric: Fabric,
    pub(super) rng: SimRng,
    pub(super) root: SimRng,
}
