//! The fabric: ports, links with latency and bandwidth, topologies, traffic classes, CRC32 on
//! every packet, and seeded fault sites.
//!
//! - [`topology`]: network shapes (point-to-point, single switch, dragonfly, 3D torus), their
//!   links and deterministic routes.
//! - [`link`]: link timing ([`LinkParams`]) and the per-direction, per-priority queue model.
//! - [`faults`]: the seeded fault sites ([`FaultConfig`]).
//! - [`Fabric`] (`network`): all of it together; engines call [`Fabric::inject`] (`inject`)
//!   for every packet sent.
//! - [`pool`]: a free list of packet buffers that engines lend to devices.
//! - [`remote`]: the fabric between processes (shared-memory rings on one host, TCP
//!   between hosts) when each process hosts one node.
//! - [`capture`]: an optional hook that sees every injected packet (`nicemu trace`).
//!
//! The timing, priority and fault models are described in docs/emu-core-engines.md.

pub mod capture;
pub mod faults;
mod inject;
pub mod link;
mod network;
#[cfg(test)]
mod network_tests;
pub mod pool;
pub mod remote;
pub mod topology;

use crate::dma::{DmaPort, Segment};
use std::sync::Arc;

pub use capture::{CaptureBuffer, CaptureSink, Captured};
pub use faults::FaultConfig;
pub use inject::Deliveries;
pub use link::{LinkCounters, LinkParams, LinkRetry, NUM_PRIORITIES};
pub use network::{Fabric, FabricConfig, FabricCounters, FabricError, TcCounters};
pub use pool::{BufferPool, PoolStats};
pub use topology::{Dir, Graph, Hop, LinkId, Node, Topology};

/// A fabric endpoint (one NIC port). Dense, assigned by the topology: 0..ports.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortId(pub u32);

/// A traffic class; the fabric maps it to a priority (0 is the highest priority).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrafficClass(pub u8);

/// A packet on the wire. `data` is the device-defined frame (headers and payload); the
/// fabric never interprets it. `crc` is the CRC32 of `data`, computed by the fabric when the
/// packet is injected and checked by the receiver ([`Packet::crc_ok`]) — or
/// [`Packet::CRC_TRUSTED`] when the fabric vouches for the data without computing one
/// ([`Fabric::set_crc_elision`]). `train`, when set, makes the packet stand for further
/// frames whose payload stays in the sender's host memory ([`Train`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    pub src: PortId,
    pub dst: PortId,
    pub tc: TrafficClass,
    pub data: Vec<u8>,
    pub crc: u32,
    pub train: Option<Arc<Train>>,
}

/// A run of frames that travels as one packet: the frames that follow the packet's own
/// `data`, counted by the fabric as the `frames` packets of `bytes` bytes they stand for,
/// their payload not copied into frames but left where it is, `segments` of the sender's
/// host memory read through `source` (its DMA port). The receiving device copies it
/// straight into its own host memory ([`DmaPort::copy_to`]): one copy, as CMA/XPMEM
/// single-copy transfers do in MPI shared memory.
///
/// Only an engine that delivers packets between devices of one process, with no fault site
/// and no capture hook on the fabric, lets a device send one
/// ([`crate::engine::DeviceIo::train_ok`]): nothing then needs the frames' bytes. The
/// deterministic engine never does, so its runs stay frame by frame.
#[derive(Clone, Debug)]
pub struct Train {
    /// Frames the train stands for after the packet's own frame.
    pub frames: u32,
    /// Bytes those frames would carry on the wire (headers, payload and trailers).
    pub bytes: u64,
    /// The sender's window onto its host memory.
    pub source: DmaPort,
    /// The payload, in order: bus addresses (IOVAs) of `source`.
    pub segments: Vec<Segment>,
}

impl Train {
    /// Payload bytes of the train (the sum of its segments).
    pub fn payload_len(&self) -> u64 {
        self.segments.iter().map(|s| s.len).sum()
    }
}

impl PartialEq for Train {
    fn eq(&self, other: &Self) -> bool {
        self.frames == other.frames
            && self.bytes == other.bytes
            && self.segments == other.segments
            && self.source.memory().same_as(other.source.memory())
            && self.source.iommu().same_as(other.source.iommu())
    }
}

impl Eq for Train {}

impl Packet {
    /// The `crc` of a packet whose integrity the fabric vouches for without computing a CRC:
    /// with CRC elision on and no corruption fault configured nothing can damage the data
    /// between injection and delivery ([`Fabric::set_crc_elision`]). [`Packet::crc_ok`]
    /// accepts it without hashing and [`Packet::seal`] keeps it; the corruption fault never
    /// leaves it on a damaged packet, so every corrupted packet still fails
    /// [`Packet::crc_ok`].
    pub const CRC_TRUSTED: u32 = 0x7E57_ED0C;

    /// A packet with its CRC computed over `data`.
    pub fn new(src: PortId, dst: PortId, tc: TrafficClass, data: Vec<u8>) -> Self {
        let crc = crc32fast::hash(&data);
        Packet {
            src,
            dst,
            tc,
            data,
            crc,
            train: None,
        }
    }
    /// Frames the packet stands for: 1, plus those of its [`Train`].
    pub fn frames(&self) -> u64 {
        1 + self.train.as_ref().map_or(0, |t| u64::from(t.frames))
    }
    /// Bytes the packet stands for on the wire: `data`, plus those of its [`Train`].
    pub fn wire_bytes(&self) -> u64 {
        self.data.len() as u64 + self.train.as_ref().map_or(0, |t| t.bytes)
    }
    /// Recompute the CRC after changing `data` (a packet the fabric vouched for,
    /// [`Packet::CRC_TRUSTED`], stays so: nothing between the device and its own check can
    /// damage it).
    pub fn seal(&mut self) {
        if self.crc != Self::CRC_TRUSTED {
            self.crc = crc32fast::hash(&self.data);
        }
    }
    /// Whether `data` still matches its CRC (false if the fabric corrupted it).
    pub fn crc_ok(&self) -> bool {
        self.crc == Self::CRC_TRUSTED || crc32fast::hash(&self.data) == self.crc
    }
}
