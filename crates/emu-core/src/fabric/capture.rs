//! Packet capture: a hook on [`Fabric::inject`](super::Fabric::inject) that hands every packet
//! the fabric is asked to carry (as injected, before routing and fault sites) to a
//! [`CaptureSink`], with the virtual time of the injection.
//!
//! Capture is off unless a sink is installed ([`Fabric::set_capture`](super::Fabric::set_capture));
//! when off, the fabric pays one test of an `Option` per packet. The sink sees the packet's
//! real CRC32 even when the fabric elides it ([`Packet::CRC_TRUSTED`]): [`Captured::crc`]
//! computes it then. `nicemu trace` installs a sink that writes a pcapng file (docs/trace.md).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::Packet;
use crate::time::SimTime;

/// What a [`CaptureSink`] is shown for one injected packet.
#[derive(Debug, Clone, Copy)]
pub struct Captured<'a> {
    /// Virtual time of the injection.
    pub time: SimTime,
    /// The packet as injected (its `crc` as the fabric sealed it).
    pub packet: &'a Packet,
}

impl Captured<'_> {
    /// The CRC32 of the packet's data: the sealed one, or computed when the fabric vouched
    /// for the data without one ([`Packet::CRC_TRUSTED`]).
    pub fn crc(&self) -> u32 {
        if self.packet.crc == Packet::CRC_TRUSTED {
            crc32fast::hash(&self.packet.data)
        } else {
            self.packet.crc
        }
    }
}

/// Receives every packet injected into a fabric while installed. Called with the fabric
/// locked, so it should be quick (copy the packet out; write it elsewhere).
pub trait CaptureSink: Send + Sync + fmt::Debug {
    /// One injected packet.
    fn record(&self, captured: Captured<'_>);
}

/// A [`CaptureSink`] that keeps every packet in memory, in injection order.
#[derive(Debug, Default)]
pub struct CaptureBuffer {
    packets: Mutex<Vec<(SimTime, Packet)>>,
}

impl CaptureBuffer {
    /// An empty buffer, ready to be installed.
    pub fn new() -> Arc<Self> {
        Arc::new(CaptureBuffer::default())
    }
    /// Take every packet recorded so far (time, packet with its real CRC).
    pub fn take(&self) -> Vec<(SimTime, Packet)> {
        std::mem::take(&mut *self.packets.lock().unwrap_or_else(PoisonError::into_inner))
    }
    /// Packets recorded and not yet taken.
    pub fn len(&self) -> usize {
        self.packets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
    /// Whether nothing is waiting to be taken.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl CaptureSink for CaptureBuffer {
    fn record(&self, c: Captured<'_>) {
        let mut p = c.packet.clone();
        p.crc = c.crc();
        self.packets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((c.time, p));
    }
}
