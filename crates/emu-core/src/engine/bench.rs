//! Engine micro-benchmarks as plain functions, shared by the criterion bench
//! (`cargo bench -p emu-core --bench engine`) and the CLI, which prints the figures.
//!
//! The workloads use toy devices with trivial handlers, so they measure engine and fabric
//! overhead only.

use super::deterministic::Deterministic;
use super::threaded::{Threaded, ThreadedConfig};
use super::{DeviceIo, DeviceModel, Engine, EngineError};
use crate::dma::DmaPort;
use crate::fabric::{Fabric, FabricConfig, LinkParams, Packet, PortId, Topology, TrafficClass};
use crate::memory::HostMemory;
use crate::mmio::MmioError;
use crate::time::SimDuration;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Devices in the ring workload.
pub const RING: u32 = 16;

fn toy_dma() -> Result<DmaPort, EngineError> {
    let mem = HostMemory::new(2 * 4096).map_err(|e| EngineError::Setup(e.to_string()))?;
    Ok(DmaPort::passthrough(mem))
}

/// A ring node: forwards every packet it receives to the next port; a store to BAR 0
/// injects a new packet; a timer re-arms itself.
struct RingNode {
    next: PortId,
    period: SimDuration,
}

impl DeviceModel for RingNode {
    fn name(&self) -> &str {
        "ring"
    }
    fn config_read(&mut self, _reg: u16) -> u32 {
        0
    }
    fn config_write(&mut self, _reg: u16, _value: u32) {}
    fn mmio_read(
        &mut self,
        _io: &mut DeviceIo<'_>,
        _bar: u8,
        _offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError> {
        data.fill(0);
        Ok(())
    }
    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        _bar: u8,
        offset: u64,
        _data: &[u8],
    ) -> Result<(), MmioError> {
        if offset == 0 {
            let src = io.port().unwrap_or_default();
            io.send(Packet::new(src, self.next, TrafficClass(1), vec![0u8; 64]));
        } else {
            io.timer(self.period, 0);
        }
        Ok(())
    }
    fn packet(&mut self, io: &mut DeviceIo<'_>, mut pkt: Packet) {
        pkt.dst = self.next;
        io.send(pkt);
    }
    fn timer(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        io.timer(self.period, token.wrapping_add(1));
    }
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 4096 } else { 0 }
    }
}

fn ring(seed: u64) -> Result<Deterministic, EngineError> {
    let fabric = Fabric::new(FabricConfig {
        link: LinkParams::default(),
        ..FabricConfig::new(Topology::SingleSwitch { ports: RING })
    })?;
    let e = Deterministic::new(seed, fabric);
    let dma = toy_dma()?;
    for i in 0..RING {
        e.add_device(
            Box::new(RingNode {
                next: PortId((i + 1) % RING),
                period: SimDuration::from_ns(100 + u64::from(i)),
            }),
            dma.clone(),
            Some(PortId(i)),
        )?;
    }
    Ok(e)
}

/// Deterministic engine, packet workload: 16 devices on one switch pass 16 packets (64 B)
/// round a ring, each arrival forwarding the packet to the next device through the fabric.
/// Runs `n` events and returns (events run, wall time taken).
pub fn deterministic_events(n: u64) -> Result<(u64, Duration), EngineError> {
    let e = ring(1)?;
    for i in 0..RING {
        e.mmio_write(super::DeviceId(i), 0, 0, &[1u8; 8])?;
    }
    let t = Instant::now();
    let done = e.run_events(n);
    Ok((done, t.elapsed()))
}

/// Deterministic engine, timer workload: 16 devices each re-arm a periodic timer. Runs `n`
/// events and returns (events run, wall time taken).
pub fn deterministic_timers(n: u64) -> Result<(u64, Duration), EngineError> {
    let e = ring(1)?;
    for i in 0..RING {
        e.mmio_write(super::DeviceId(i), 0, 8, &[1u8; 8])?;
    }
    let t = Instant::now();
    let done = e.run_events(n);
    Ok((done, t.elapsed()))
}

/// A ping-pong endpoint: a store to BAR 0 sends a packet to `peer`; a packet from the peer
/// is bounced back unless this is the initiator, which counts the completed round trip.
struct PingPong {
    peer: PortId,
    initiator: bool,
    done: Arc<AtomicU64>,
}

impl DeviceModel for PingPong {
    fn name(&self) -> &str {
        "pingpong"
    }
    fn config_read(&mut self, _reg: u16) -> u32 {
        0
    }
    fn config_write(&mut self, _reg: u16, _value: u32) {}
    fn mmio_read(
        &mut self,
        _io: &mut DeviceIo<'_>,
        _bar: u8,
        _offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError> {
        data.fill(0);
        Ok(())
    }
    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        _bar: u8,
        _offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        let src = io.port().unwrap_or_default();
        io.send(Packet::new(src, self.peer, TrafficClass(1), data.to_vec()));
        Ok(())
    }
    fn packet(&mut self, io: &mut DeviceIo<'_>, mut pkt: Packet) {
        if self.initiator {
            self.done.fetch_add(1, Ordering::Release);
        } else {
            pkt.dst = self.peer;
            io.send(pkt);
        }
    }
    fn timer(&mut self, _io: &mut DeviceIo<'_>, _token: u64) {}
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 4096 } else { 0 }
    }
}

/// Threaded engine, inline ping-pong: `rounds` MMIO doorbells on device A, each causing a
/// packet A -> B and its echo B -> A, all delivered inline in the calling thread. Returns
/// (round trips completed, wall time taken); the time per round trip is the engine's
/// overhead for two packet deliveries plus one MMIO store.
pub fn threaded_pingpong(rounds: u64) -> Result<(u64, Duration), EngineError> {
    let fabric = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 }))?;
    let e = Threaded::new(
        fabric,
        ThreadedConfig {
            workers: 1,
            ..ThreadedConfig::default()
        },
    )?;
    let dma = toy_dma()?;
    let done = Arc::new(AtomicU64::new(0));
    let a = e.add_device(
        Box::new(PingPong {
            peer: PortId(1),
            initiator: true,
            done: done.clone(),
        }),
        dma.clone(),
        Some(PortId(0)),
    )?;
    e.add_device(
        Box::new(PingPong {
            peer: PortId(0),
            initiator: false,
            done: done.clone(),
        }),
        dma,
        Some(PortId(1)),
    )?;
    let bar = Engine::mmio(&e, a, 0)?;
    let t = Instant::now();
    for i in 0..rounds {
        bar.write_u64(0, i)?;
    }
    let elapsed = t.elapsed();
    e.shutdown();
    Ok((done.load(Ordering::Acquire), elapsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_run_the_requested_events() {
        let (n, _) = deterministic_events(5_000).unwrap();
        assert_eq!(n, 5_000);
        let (n, _) = deterministic_timers(1_000).unwrap();
        assert_eq!(n, 1_000);
        let (n, _) = threaded_pingpong(100).unwrap();
        assert_eq!(n, 100, "every round trip completes inline");
    }
}
