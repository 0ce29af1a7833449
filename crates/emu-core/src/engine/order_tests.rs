//! The threaded engine keeps a flow's packets in order when a burst exceeds the inline
//! budget: deferred work runs in queue order, one batch at a time, and packets caused by
//! a later host access queue up behind the backlog.

use super::threaded::{Threaded, ThreadedConfig};
use super::{DeviceId, DeviceIo, DeviceModel, Progress};
use crate::dma::DmaPort;
use crate::fabric::{Fabric, FabricConfig, Packet, PortId, Topology, TrafficClass};
use crate::memory::HostMemory;
use crate::mmio::MmioError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Port 0 sends `n` numbered packets to port 1 per store (n = the stored value); port 1
/// records what it receives.
struct Node {
    next: u64,
    got: Arc<Mutex<Vec<u64>>>,
    count: Arc<AtomicU64>,
}

impl DeviceModel for Node {
    fn name(&self) -> &str {
        "node"
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
        let mut b = [0u8; 8];
        b[..data.len()].copy_from_slice(data);
        for _ in 0..u64::from_le_bytes(b) {
            let seq = self.next;
            self.next += 1;
            io.send(Packet::new(
                PortId(0),
                PortId(1),
                TrafficClass(0),
                seq.to_le_bytes().to_vec(),
            ));
        }
        Ok(())
    }
    fn packet(&mut self, _io: &mut DeviceIo<'_>, pkt: Packet) {
        let mut b = [0u8; 8];
        b.copy_from_slice(&pkt.data[..8]);
        self.got.lock().unwrap().push(u64::from_le_bytes(b));
        self.count.fetch_add(1, Ordering::Release);
    }
    fn timer(&mut self, _io: &mut DeviceIo<'_>, _token: u64) {}
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 64 } else { 0 }
    }
}

#[test]
fn bursts_over_the_inline_budget_arrive_in_order() {
    let fabric = Fabric::new(FabricConfig::new(Topology::PointToPoint)).unwrap();
    let e = Threaded::new(
        fabric,
        ThreadedConfig {
            workers: 2,
            inline_budget: 8,
            ..ThreadedConfig::default()
        },
    )
    .unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicU64::new(0));
    let dma = DmaPort::passthrough(HostMemory::new(2 * 4096).unwrap());
    for port in 0..2 {
        let node = Node {
            next: 0,
            got: got.clone(),
            count: count.clone(),
        };
        e.add_device(Box::new(node), dma.clone(), Some(PortId(port)))
            .unwrap();
    }
    let progress = Progress::progress;
    // Two bursts back to back: the second is rung while the first is still being
    // delivered by the engine threads (and by this thread's progress calls).
    const N: u64 = 3000;
    e.mmio_write(DeviceId(0), 0, 0, &N.to_le_bytes()).unwrap();
    e.mmio_write(DeviceId(0), 0, 0, &N.to_le_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while count.load(Ordering::Acquire) < 2 * N && Instant::now() < deadline {
        progress(&e);
    }
    assert!(e.wait_idle(Duration::from_secs(10)));
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len() as u64, 2 * N);
    let first_out_of_order = got.iter().enumerate().find(|(i, s)| **s != *i as u64);
    assert_eq!(first_out_of_order, None);
    assert_eq!(e.counters().packets, 2 * N);
}
