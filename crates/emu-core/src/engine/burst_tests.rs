//! Write-combined bursts through both engines: one access per burst, split into 64-bit
//! stores for models that do not take bursts whole.

use super::deterministic::Deterministic;
use super::threaded::{Threaded, ThreadedConfig};
use super::{DeviceIo, DeviceModel, Engine, EngineError};
use crate::bus::RamRegion;
use crate::dma::DmaPort;
use crate::fabric::{Fabric, FabricConfig, Packet, Topology};
use crate::memory::HostMemory;
use crate::mmio::{MAX_BURST, Mmio, MmioError};
use std::sync::{Arc, Mutex};

/// Records every store it receives: (offset, bytes, came as a burst).
struct Recorder {
    log: Log,
}

impl DeviceModel for Recorder {
    fn name(&self) -> &str {
        "recorder"
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
        _io: &mut DeviceIo<'_>,
        _bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        if offset >= 0x100 {
            return Err(MmioError::Misaligned { offset, width: 8 });
        }
        self.log
            .lock()
            .unwrap()
            .push((offset, data.to_vec(), false));
        Ok(())
    }
    fn mmio_write_burst(
        &mut self,
        _io: &mut DeviceIo<'_>,
        _bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        self.log.lock().unwrap().push((offset, data.to_vec(), true));
        Ok(())
    }
    fn packet(&mut self, _io: &mut DeviceIo<'_>, _pkt: Packet) {}
    fn timer(&mut self, _io: &mut DeviceIo<'_>, _token: u64) {}
    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { 0x200 } else { 0 }
    }
}

/// The same recorder keeping the provided `mmio_write_burst` (which splits the burst).
struct Plain(Recorder);

impl DeviceModel for Plain {
    fn name(&self) -> &str {
        "plain"
    }
    fn config_read(&mut self, reg: u16) -> u32 {
        self.0.config_read(reg)
    }
    fn config_write(&mut self, reg: u16, value: u32) {
        self.0.config_write(reg, value);
    }
    fn mmio_read(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError> {
        self.0.mmio_read(io, bar, offset, data)
    }
    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        self.0.mmio_write(io, bar, offset, data)
    }
    fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        self.0.packet(io, pkt);
    }
    fn timer(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        self.0.timer(io, token);
    }
    fn bar_size(&self, bar: u8) -> u64 {
        self.0.bar_size(bar)
    }
}

type Log = Arc<Mutex<Vec<(u64, Vec<u8>, bool)>>>;

fn engines() -> Vec<Arc<dyn Engine>> {
    let fabric = || Fabric::new(FabricConfig::new(Topology::PointToPoint)).unwrap();
    vec![
        Arc::new(Deterministic::new(1, fabric())),
        Arc::new(Threaded::new(fabric(), ThreadedConfig::default()).unwrap()),
    ]
}

fn attach(e: &dyn Engine, whole: bool) -> (super::DeviceId, Log) {
    let log: Log = Arc::default();
    let rec = Recorder { log: log.clone() };
    let model: Box<dyn DeviceModel> = if whole {
        Box::new(rec)
    } else {
        Box::new(Plain(rec))
    };
    let dma = DmaPort::passthrough(HostMemory::new(2 * 4096).unwrap());
    (e.add_device(model, dma, None).unwrap(), log)
}

fn block(n: usize) -> Vec<u8> {
    (0..n).map(|i| i as u8).collect()
}

#[test]
fn a_burst_is_one_access_taken_whole_or_split_in_order() {
    for e in engines() {
        let (whole, wlog) = attach(e.as_ref(), true);
        let (split, slog) = attach(e.as_ref(), false);
        let data = block(64);
        let before = e.counters().mmio_writes;
        e.mmio(whole, 0).unwrap().write_burst(0x40, &data).unwrap();
        e.mmio(split, 0).unwrap().write_burst(0x40, &data).unwrap();
        assert_eq!(e.counters().mmio_writes - before, 2, "one access per burst");
        assert_eq!(*wlog.lock().unwrap(), vec![(0x40, data.clone(), true)]);
        let got = slog.lock().unwrap().clone();
        assert_eq!(got.len(), 8);
        for (i, (off, bytes, burst)) in got.into_iter().enumerate() {
            assert_eq!(off, 0x40 + 8 * i as u64);
            assert_eq!(bytes, data[8 * i..8 * i + 8]);
            assert!(!burst);
        }
        // The largest burst, through the engine interface.
        e.mmio_write_burst(whole, 0, 0x80, &block(MAX_BURST))
            .unwrap();
        assert_eq!(wlog.lock().unwrap().last().unwrap().1.len(), MAX_BURST);
    }
}

#[test]
fn bad_bursts_are_errors_not_panics() {
    for e in engines() {
        let (dev, log) = attach(e.as_ref(), true);
        let bar = e.mmio(dev, 0).unwrap();
        for len in [0usize, 4, 12, MAX_BURST + 8] {
            assert_eq!(
                bar.write_burst(0, &block(len)),
                Err(MmioError::BadWidth {
                    offset: 0,
                    width: len
                }),
                "len {len}"
            );
        }
        assert_eq!(
            bar.write_burst(0x1f0, &block(32)),
            Err(MmioError::OutOfRange {
                offset: 0x1f0,
                width: 32,
                size: 0x200
            })
        );
        assert!(log.lock().unwrap().is_empty());
        // A split burst stops at the model's first error.
        let (split, slog) = attach(e.as_ref(), false);
        assert_eq!(
            e.mmio_write_burst(split, 0, 0xf0, &block(64)),
            Err(EngineError::Mmio(MmioError::Misaligned {
                offset: 0x100,
                width: 8
            }))
        );
        assert_eq!(slog.lock().unwrap().len(), 2);
    }
}

#[test]
fn the_provided_region_burst_is_a_sequence_of_stores() {
    let ram = RamRegion::new(256);
    ram.write_burst(8, &block(128)).unwrap();
    let snap = ram.snapshot();
    assert_eq!(&snap[8..136], block(128).as_slice());
    assert!(snap[..8].iter().chain(&snap[136..]).all(|&b| b == 0));
    assert!(ram.write_burst(200, &block(64)).is_err());
    assert_eq!(
        ram.write_burst(0, &block(20)),
        Err(MmioError::BadWidth {
            offset: 0,
            width: 20
        })
    );
}
