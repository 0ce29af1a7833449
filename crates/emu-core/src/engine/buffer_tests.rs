//! Both engines lend their packet-buffer pool to handlers: a frame buffer recycled by the
//! receiver is the one the sender gets for its next frame.

use super::deterministic::Deterministic;
use super::threaded::{Threaded, ThreadedConfig};
use super::{DeviceId, DeviceIo, DeviceModel, Engine};
use crate::dma::DmaPort;
use crate::fabric::{Fabric, FabricConfig, Packet, PortId, Topology, TrafficClass};
use crate::memory::HostMemory;
use crate::mmio::MmioError;
use std::sync::{Arc, Mutex};

/// Port 0 sends one 2 KiB frame per store, built in a pooled buffer (recording the
/// buffer's address); port 1 checks the frame and recycles its buffer.
struct Node {
    addrs: Arc<Mutex<Vec<usize>>>,
    ok: Arc<Mutex<u32>>,
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
        let mut buf = io.packet_buffer(2048);
        assert!(buf.is_empty() && buf.capacity() >= 2048);
        self.addrs.lock().unwrap().push(buf.as_ptr() as usize);
        buf.resize(2048, data[0]);
        io.send(Packet::new(PortId(0), PortId(1), TrafficClass(0), buf));
        Ok(())
    }
    fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        if pkt.crc_ok() && pkt.data.len() == 2048 && pkt.data.iter().all(|&b| b == 0x5a) {
            *self.ok.lock().unwrap() += 1;
        }
        io.recycle(pkt.data);
    }
    fn timer(&mut self, _io: &mut DeviceIo<'_>, _token: u64) {}
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 64 } else { 0 }
    }
}

#[test]
fn recycled_frame_buffers_are_reused() {
    let fabric = || Fabric::new(FabricConfig::new(Topology::PointToPoint)).unwrap();
    let det = Deterministic::new(1, fabric());
    let engines: Vec<(Arc<dyn Engine>, Option<Deterministic>)> = vec![
        (Arc::new(det.clone()), Some(det)),
        (
            Arc::new(Threaded::new(fabric(), ThreadedConfig::default()).unwrap()),
            None,
        ),
    ];
    for (e, det) in engines {
        let addrs = Arc::new(Mutex::new(Vec::new()));
        let ok = Arc::new(Mutex::new(0));
        let dma = DmaPort::passthrough(HostMemory::new(2 * 4096).unwrap());
        for port in 0..2 {
            let node = Node {
                addrs: addrs.clone(),
                ok: ok.clone(),
            };
            e.add_device(Box::new(node), dma.clone(), Some(PortId(port)))
                .unwrap();
        }
        for _ in 0..4 {
            e.mmio_write(DeviceId(0), 0, 0, &[0x5a]).unwrap();
            if let Some(d) = &det {
                d.run_until_idle();
            }
        }
        assert_eq!(*ok.lock().unwrap(), 4);
        let a = addrs.lock().unwrap().clone();
        assert_eq!(a.len(), 4);
        assert!(
            a.iter().all(|&x| x == a[0]),
            "one buffer went round: {a:x?}"
        );
    }
}
