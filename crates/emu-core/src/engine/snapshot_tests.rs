//! `Deterministic::snapshot` / `restore` together with `HostMemory::snapshot` / `restore`:
//! after a restore the engine runs exactly as it did after the snapshot, whatever ran in
//! between.

use super::deterministic::Deterministic;
use super::{DeviceIo, DeviceModel, EngineError};
use crate::dma::DmaPort;
use crate::fabric::{Fabric, FabricConfig, Packet, PortId, Topology, TrafficClass};
use crate::memory::{GuestAddress, HostMemory};
use crate::mmio::MmioError;
use crate::time::SimDuration;

/// Each store to BAR 0 sends its value to the other port; each packet received is counted,
/// logged into host memory with a random word, and answered after a timer until its hop
/// count runs out.
#[derive(Clone)]
struct Bouncer {
    port: u32,
    received: u64,
    sum: u64,
}

impl DeviceModel for Bouncer {
    fn name(&self) -> &str {
        "bouncer"
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
        let v = self.received.to_le_bytes();
        data.copy_from_slice(&v[..data.len()]);
        Ok(())
    }
    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        _bar: u8,
        _offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        let to = PortId(1 - self.port);
        io.send(Packet::new(
            PortId(self.port),
            to,
            TrafficClass(0),
            data.to_vec(),
        ));
        Ok(())
    }
    fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        self.received += 1;
        let hops = pkt.data.first().copied().unwrap_or(0);
        let r = io.rng().next_u64();
        self.sum = self.sum.wrapping_add(r);
        let at = 0x1000 + (self.received % 512) * 8;
        let _ = io.dma().write_u64(at, r);
        if hops > 0 {
            io.timer(SimDuration(10 + r % 50), u64::from(hops - 1));
        }
    }
    fn timer(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        let to = PortId(1 - self.port);
        io.send(Packet::new(
            PortId(self.port),
            to,
            TrafficClass(0),
            vec![token as u8],
        ));
    }
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 64 } else { 0 }
    }
    fn snapshot(&self) -> Option<Box<dyn DeviceModel>> {
        Some(Box::new(self.clone()))
    }
}

fn rig() -> (Deterministic, Vec<HostMemory>) {
    let fabric = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
    let e = Deterministic::new(5, fabric);
    let mut mems = Vec::new();
    for p in 0..2 {
        let m = HostMemory::new(1 << 16).unwrap();
        let dev = Bouncer {
            port: p,
            received: 0,
            sum: 0,
        };
        e.add_device(
            Box::new(dev),
            DmaPort::passthrough(m.clone()),
            Some(PortId(p)),
        )
        .unwrap();
        mems.push(m);
    }
    (e, mems)
}

/// Send `hops` from device 0, run part of the way or to the end; what is observable.
fn run(e: &Deterministic, mems: &[HostMemory], hops: u8, events: Option<u64>) -> Vec<u64> {
    let dev = super::DeviceId(0);
    e.mmio_write(dev, 0, 0, &[hops, 0, 0, 0, 0, 0, 0, 0])
        .unwrap();
    match events {
        Some(n) => e.run_events(n),
        None => e.run_until_idle(),
    };
    let mut out = vec![e.trace_digest(), e.now().0, e.pending() as u64];
    for m in mems {
        for i in 0..512u64 {
            out.push(m.read_u64(GuestAddress(0x1000 + 8 * i)).unwrap());
        }
    }
    let mut b = [0u8; 8];
    e.mmio_read(super::DeviceId(1), 0, 0, &mut b).unwrap();
    out.push(u64::from_le_bytes(b));
    out
}

#[test]
fn a_restored_engine_repeats_the_run_after_the_snapshot() {
    let (e, mems) = rig();
    // Some history before the snapshot, with events still pending at it.
    run(&e, &mems, 9, Some(5));
    let snap = e.snapshot().unwrap();
    let msnaps: Vec<_> = mems.iter().map(HostMemory::snapshot).collect();
    let first = run(&e, &mems, 20, None);
    for hops in [3, 40, 1] {
        // Something else in between, then back.
        let other = run(&e, &mems, hops, None);
        assert_ne!(other, first);
        e.restore(&snap).unwrap();
        for (m, s) in mems.iter().zip(&msnaps) {
            m.restore(s).unwrap();
        }
        assert_eq!(run(&e, &mems, 20, None), first);
        e.restore(&snap).unwrap();
        for (m, s) in mems.iter().zip(&msnaps) {
            m.restore(s).unwrap();
        }
    }
}

#[test]
fn snapshots_need_copyable_devices_and_the_same_engine() {
    let (e, _mems) = rig();
    let (other, _m) = rig();
    let snap = e.snapshot().unwrap();
    assert!(matches!(
        other.restore(&snap),
        Err(EngineError::Snapshot(_))
    ));
    // A device that cannot be copied.
    struct Plain;
    impl DeviceModel for Plain {
        fn name(&self) -> &str {
            "plain"
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
            _data: &mut [u8],
        ) -> Result<(), MmioError> {
            Ok(())
        }
        fn mmio_write(
            &mut self,
            _io: &mut DeviceIo<'_>,
            _bar: u8,
            _offset: u64,
            _data: &[u8],
        ) -> Result<(), MmioError> {
            Ok(())
        }
        fn packet(&mut self, _io: &mut DeviceIo<'_>, _pkt: Packet) {}
        fn timer(&mut self, _io: &mut DeviceIo<'_>, _token: u64) {}
        fn bar_size(&self, _bar: u8) -> u64 {
            0
        }
    }
    let m = HostMemory::new(1 << 16).unwrap();
    e.add_device(Box::new(Plain), DmaPort::passthrough(m), None)
        .unwrap();
    assert!(matches!(e.snapshot(), Err(EngineError::Snapshot(_))));
    // The earlier snapshot has fewer devices than the engine now.
    assert!(matches!(e.restore(&snap), Err(EngineError::Snapshot(_))));
}
