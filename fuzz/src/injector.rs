//! A device with nothing but a fabric port: every store to its BAR 0 sends the next frame
//! queued in its [`Frames`] as a packet, unchecked, to the port the store's value names.
//! This is how the receive-side fuzz targets put arbitrary frames on a NIC's link; what the
//! NICs send to its port is kept (the seed generator records real frames that way).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use emu_core::engine::{DeviceIo, DeviceModel};
use emu_core::fabric::{Packet, PortId, TrafficClass};
use emu_core::mmio::MmioError;

/// Frames waiting to be sent, shared with the test.
pub type Frames = Arc<Mutex<VecDeque<(TrafficClass, Vec<u8>)>>>;

/// The frame source.
pub struct Injector {
    /// Frames to send, oldest first.
    pub frames: Frames,
    /// Frames that arrived at its port (what the NICs sent to it), oldest first.
    pub received: Frames,
}

impl DeviceModel for Injector {
    fn name(&self) -> &str {
        "injector"
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
        let mut v = [0u8; 8];
        v[..data.len().min(8)].copy_from_slice(&data[..data.len().min(8)]);
        let dst = PortId(u32::from_le_bytes([v[0], v[1], v[2], v[3]]));
        let next = self.frames.lock().ok().and_then(|mut q| q.pop_front());
        if let Some((tc, frame)) = next {
            io.send(Packet::new(PortId(0), dst, tc, frame));
        }
        Ok(())
    }
    fn packet(&mut self, _io: &mut DeviceIo<'_>, pkt: Packet) {
        if let Ok(mut q) = self.received.lock() {
            q.push_back((pkt.tc, pkt.data));
        }
    }
    fn timer(&mut self, _io: &mut DeviceIo<'_>, _token: u64) {}
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 4096 } else { 0 }
    }
    fn snapshot(&self) -> Option<Box<dyn DeviceModel>> {
        // The queues are the fixture's; it empties them when it restores.
        Some(Box::new(Injector {
            frames: Arc::clone(&self.frames),
            received: Arc::clone(&self.received),
        }))
    }
}
