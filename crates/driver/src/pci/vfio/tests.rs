//! The vfio logic against a fake device: region discovery, BAR windows, config space, DMA
//! bookkeeping and MSI-X delivery, up to the OS-call boundary.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use emu_core::mmio::{Mmio, MmioError};
use vfio_bindings::bindings::vfio::{
    VFIO_REGION_INFO_FLAG_MMAP, VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE,
};
use vm_memory::{MmapRegion, VolatileMemory};
use vmm_sys_util::eventfd::EventFd;

use super::*;
use crate::pci::{BackendKind, PciError, PciFunction};

const RW: u32 = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
const RWM: u32 = RW | VFIO_REGION_INFO_FLAG_MMAP;

/// File offset of region `index`, as vfio-pci lays them out.
fn region_offset(index: u32) -> u64 {
    u64::from(index) << 40
}

fn info(index: u32, flags: u32, size: u64, caps: Vec<RegionCap>) -> RegionInfo {
    RegionInfo {
        flags,
        size,
        offset: region_offset(index),
        caps,
    }
}

fn area(offset: u64, size: u64) -> SparseArea {
    SparseArea { offset, size }
}

#[derive(Default)]
struct Fake {
    regions: HashMap<u32, RegionInfo>,
    msix: u32,
    /// The device file outside mmap'd areas: byte offset -> value.
    file: Mutex<HashMap<u64, u8>>,
    /// Every mmap made: (file offset, mapping).
    mmaps: Mutex<Vec<(u64, Arc<MmapRegion>)>>,
    fail_mmap: bool,
    /// Every pread/pwrite: (write?, file offset, length).
    file_io: Mutex<Vec<(bool, u64, usize)>>,
    dma_calls: Mutex<Vec<String>>,
    dma_errno: Mutex<Option<i32>>,
    msix_fds: Mutex<Vec<EventFd>>,
    msix_sets: Mutex<Vec<usize>>,
}

impl Fake {
    /// A device with a 16 KiB BAR0 whose middle is trapped (sparse areas at 0 and 0x3000),
    /// no BAR1, a 4 KiB trapped BAR2, and a config space holding ids 0x17db:0x0501 rev 2.
    fn cassini_like() -> Fake {
        let mut f = Fake {
            msix: 8,
            ..Fake::default()
        };
        f.regions.insert(
            0,
            info(
                0,
                RWM,
                0x4000,
                vec![RegionCap::SparseMmap(vec![
                    area(0x3000, 0x1000),
                    area(0, 0x1000),
                ])],
            ),
        );
        f.regions.insert(1, info(1, 0, 0, vec![]));
        f.regions.insert(2, info(2, RW, 0x1000, vec![]));
        f.regions.insert(7, info(7, RW, 4096, vec![]));
        f.poke(region_offset(7), &0x0501_17dbu32.to_le_bytes());
        f.poke(region_offset(7) + 8, &0x0200_0002u32.to_le_bytes());
        f
    }

    fn poke(&self, offset: u64, bytes: &[u8]) {
        let mut file = self.file.lock().unwrap();
        for (i, b) in bytes.iter().enumerate() {
            file.insert(offset + i as u64, *b);
        }
    }

    fn peek(&self, offset: u64, len: usize) -> Vec<u8> {
        let file = self.file.lock().unwrap();
        (0..len as u64)
            .map(|i| *file.get(&(offset + i)).unwrap_or(&0))
            .collect()
    }

    /// The mapping made at `file_offset`.
    fn mapping(&self, file_offset: u64) -> Arc<MmapRegion> {
        let maps = self.mmaps.lock().unwrap();
        let (_, m) = maps.iter().find(|(o, _)| *o == file_offset).unwrap();
        Arc::clone(m)
    }
}

impl VfioDeviceOps for Fake {
    fn region_info(&self, index: u32) -> Option<RegionInfo> {
        self.regions.get(&index).cloned()
    }
    fn irq_count(&self, index: u32) -> u32 {
        if index == VFIO_PCI_MSIX_IRQ_INDEX {
            self.msix
        } else {
            0
        }
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file_io
            .lock()
            .unwrap()
            .push((false, offset, buf.len()));
        buf.copy_from_slice(&self.peek(offset, buf.len()));
        Ok(())
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.file_io.lock().unwrap().push((true, offset, buf.len()));
        self.poke(offset, buf);
        Ok(())
    }
    fn mmap(&self, offset: u64, len: usize) -> io::Result<Arc<MmapRegion>> {
        if self.fail_mmap {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let m = Arc::new(MmapRegion::new(len).map_err(io::Error::other)?);
        self.mmaps.lock().unwrap().push((offset, Arc::clone(&m)));
        Ok(m)
    }
    fn dma_map(&self, iova: u64, host: HostRange) -> io::Result<()> {
        if let Some(errno) = *self.dma_errno.lock().unwrap() {
            return Err(io::Error::from_raw_os_error(errno));
        }
        self.dma_calls
            .lock()
            .unwrap()
            .push(format!("map {iova:#x} {:#x} {:#x}", host.addr, host.len));
        Ok(())
    }
    fn dma_unmap(&self, iova: u64, len: u64) -> io::Result<()> {
        self.dma_calls
            .lock()
            .unwrap()
            .push(format!("unmap {iova:#x} {len:#x}"));
        Ok(())
    }
    fn set_msix(&self, eventfds: &[&EventFd]) -> io::Result<()> {
        self.msix_sets.lock().unwrap().push(eventfds.len());
        *self.msix_fds.lock().unwrap() = eventfds
            .iter()
            .map(|e| e.try_clone())
            .collect::<io::Result<_>>()?;
        Ok(())
    }
    fn reset(&self) -> io::Result<()> {
        Ok(())
    }
}

fn addr() -> PciAddress {
    "0000:3b:00.0".parse().unwrap()
}

fn open(fake: &Arc<Fake>) -> Result<VfioFunction, VfioError> {
    VfioFunction::from_device(addr(), Arc::clone(fake) as Arc<dyn VfioDeviceOps>)
}

#[test]
fn regions_are_discovered_with_their_sparse_areas() {
    let fake = Arc::new(Fake::cassini_like());
    let f = open(&fake).unwrap();
    let bar0 = f.bar(0).unwrap();
    assert_eq!(bar0.size(), 0x4000);
    assert_eq!(bar0.mapped_areas(), vec![(0, 0x1000), (0x3000, 0x1000)]);
    assert!(bar0.region().readable && bar0.region().writable);
    // Each area was mapped at its own file offset, with its own length.
    let mut maps: Vec<(u64, usize)> = fake
        .mmaps
        .lock()
        .unwrap()
        .iter()
        .map(|(o, m)| (*o, m.size()))
        .collect();
    maps.sort();
    assert_eq!(maps, vec![(0, 0x1000), (0x3000, 0x1000)]);
    assert!(f.bar(1).is_none(), "a zero-sized BAR is absent");
    assert_eq!(f.bar(2).unwrap().mapped_areas(), vec![]);
    assert!(f.bar(3).is_none() && f.bar(6).is_none());
    assert_eq!(f.config_region().size, 4096);
    assert_eq!(f.msix_vectors(), 8);
}

#[test]
fn a_mmap_region_without_sparse_caps_is_mapped_whole() {
    let mut fake = Fake::cassini_like();
    fake.regions.insert(4, info(4, RWM, 0x2000, vec![]));
    let fake = Arc::new(fake);
    let f = open(&fake).unwrap();
    assert_eq!(f.bar(4).unwrap().mapped_areas(), vec![(0, 0x2000)]);
    assert_eq!(fake.mapping(region_offset(4)).size(), 0x2000);
}

#[test]
fn impossible_sparse_areas_are_refused() {
    let cases = [
        vec![area(0x3000, 0x2000)],                  // runs past the 16 KiB region
        vec![area(0, 0x2000), area(0x1000, 0x1000)], // overlap
        vec![area(0x800, 0x800)],                    // not page aligned
        vec![area(u64::MAX - 0xfff, 0x1000)],        // wraps
    ];
    for areas in cases {
        let mut fake = Fake::cassini_like();
        fake.regions.insert(
            0,
            info(0, RWM, 0x4000, vec![RegionCap::SparseMmap(areas.clone())]),
        );
        match open(&Arc::new(fake)) {
            Err(VfioError::BadRegion { index: 0, reason }) => assert!(!reason.is_empty()),
            other => panic!("{areas:?}: expected BadRegion, got {other:?}"),
        }
    }
}

#[test]
fn zero_sized_sparse_areas_and_msix_mappable_are_understood() {
    let r = VfioRegion::discover(
        0,
        &info(
            0,
            RWM,
            0x2000,
            vec![
                RegionCap::MsixMappable,
                RegionCap::SparseMmap(vec![area(0x1000, 0), area(0, 0x1000)]),
                RegionCap::Other,
            ],
        ),
    )
    .unwrap()
    .unwrap();
    assert_eq!(r.mmap_areas, vec![area(0, 0x1000)]);
    assert!(r.msix_mappable);
    assert_eq!(r.mmap_len(), 0x1000);
    // Not mmap'able: no areas whatever the caps say.
    let r = VfioRegion::discover(
        0,
        &info(
            0,
            RW,
            0x2000,
            vec![RegionCap::SparseMmap(vec![area(0, 0x1000)])],
        ),
    )
    .unwrap()
    .unwrap();
    assert!(r.mmap_areas.is_empty());
    let unaligned = RegionInfo {
        offset: 0x10,
        ..info(0, RWM, 0x2000, vec![])
    };
    assert!(matches!(
        VfioRegion::discover(0, &unaligned),
        Err(VfioError::BadRegion { .. })
    ));
}

#[test]
fn mapped_accesses_hit_the_mapping_and_trapped_ones_the_file() {
    let fake = Arc::new(Fake::cassini_like());
    let f = open(&fake).unwrap();
    let bar0 = f.bar(0).unwrap();

    // In the first area: a store lands in the mapping at the same offset, no file I/O.
    bar0.write_u32(0x10, 0xdead_beef).unwrap();
    bar0.write_u64(0x3008, 0x0102_0304_0506_0708).unwrap();
    assert!(fake.file_io.lock().unwrap().is_empty());
    let m0 = fake.mapping(0);
    assert_eq!(m0.get_ref::<u32>(0x10).unwrap().load(), 0xdead_beef);
    let m3 = fake.mapping(0x3000);
    assert_eq!(
        m3.get_ref::<u64>(0x8).unwrap().load(),
        0x0102_0304_0506_0708
    );
    assert_eq!(bar0.read_u32(0x10).unwrap(), 0xdead_beef);
    let mut b = [0u8; 2];
    bar0.read(0x3008, &mut b).unwrap();
    assert_eq!(b, [0x08, 0x07], "little-endian bytes");
    let mut one = [0u8; 1];
    bar0.write(0x3fff, &[0x5a]).unwrap();
    bar0.read(0x3fff, &mut one).unwrap();
    assert_eq!(one, [0x5a]);

    // In the trapped hole: pwrite/pread of the device file at region offset + offset.
    assert!(!bar0.is_mapped(0x2000, 4));
    bar0.write_u32(0x2000, 0x1234_5678).unwrap();
    assert_eq!(fake.peek(0x2000, 4), 0x1234_5678u32.to_le_bytes());
    assert_eq!(bar0.read_u32(0x2000).unwrap(), 0x1234_5678);
    assert_eq!(
        *fake.file_io.lock().unwrap(),
        vec![(true, 0x2000, 4), (false, 0x2000, 4)]
    );

    // A BAR with no mmap at all goes through the file, at its own region offset.
    let bar2 = f.bar(2).unwrap();
    bar2.write_u64(0xff8, 7).unwrap();
    assert_eq!(fake.peek(region_offset(2) + 0xff8, 8), 7u64.to_le_bytes());
}

/// Every access width, loads and stores, through the mapping: the volatile accesses of
/// `bar.rs` (the ones Miri checks, see docs/testing.md), with the bytes seen from the
/// mapping's side.
#[test]
fn mapped_accesses_of_every_width_round_trip() {
    let fake = Arc::new(Fake::cassini_like());
    let f = open(&fake).unwrap();
    let bar0 = f.bar(0).unwrap();
    let m0 = fake.mapping(0);
    bar0.write(0x41, &[0xA1]).unwrap();
    bar0.write(0x42, &[0xB2, 0xC3]).unwrap();
    bar0.write_u32(0x44, 0x1122_3344).unwrap();
    bar0.write_u64(0x48, 0x5566_7788_99AA_BBCC).unwrap();
    let mut raw = [0u8; 16];
    for (i, b) in raw.iter_mut().enumerate() {
        *b = m0.get_ref::<u8>(0x40 + i).unwrap().load();
    }
    assert_eq!(
        raw,
        [
            0, 0xA1, 0xB2, 0xC3, 0x44, 0x33, 0x22, 0x11, 0xCC, 0xBB, 0xAA, 0x99, 0x88, 0x77, 0x66,
            0x55
        ]
    );
    let mut one = [0u8; 1];
    bar0.read(0x41, &mut one).unwrap();
    assert_eq!(one, [0xA1]);
    let mut two = [0u8; 2];
    bar0.read(0x42, &mut two).unwrap();
    assert_eq!(two, [0xB2, 0xC3]);
    assert_eq!(bar0.read_u32(0x44).unwrap(), 0x1122_3344);
    assert_eq!(bar0.read_u64(0x48).unwrap(), 0x5566_7788_99AA_BBCC);
    assert_eq!(bar0.read_u64(0x40).unwrap(), 0x1122_3344_C3B2_A100);
    assert!(
        fake.file_io.lock().unwrap().is_empty(),
        "no access was trapped"
    );
}

#[test]
fn bar_accesses_are_bounds_checked() {
    let fake = Arc::new(Fake::cassini_like());
    let f = open(&fake).unwrap();
    let bar0 = f.bar(0).unwrap();
    assert_eq!(
        bar0.read_u32(0x4000),
        Err(MmioError::OutOfRange {
            offset: 0x4000,
            width: 4,
            size: 0x4000
        })
    );
    assert!(matches!(
        bar0.write_u64(u64::MAX - 7, 0),
        Err(MmioError::OutOfRange { .. })
    ));
    assert_eq!(
        bar0.read_u32(0x12),
        Err(MmioError::Misaligned {
            offset: 0x12,
            width: 4
        })
    );
    let mut three = [0u8; 3];
    assert_eq!(
        bar0.read(0, &mut three),
        Err(MmioError::BadWidth {
            offset: 0,
            width: 3
        })
    );
    assert_eq!(
        bar0.write(0, &[]),
        Err(MmioError::BadWidth {
            offset: 0,
            width: 0
        })
    );
    // The last 8 bytes are fine.
    bar0.write_u64(0x3ff8, 1).unwrap();
    assert!(fake.file_io.lock().unwrap().is_empty());
}

#[test]
fn region_permissions_are_enforced() {
    let mut fake = Fake::cassini_like();
    fake.regions
        .insert(3, info(3, VFIO_REGION_INFO_FLAG_WRITE, 0x100, vec![]));
    fake.regions
        .insert(5, info(5, VFIO_REGION_INFO_FLAG_READ, 0x100, vec![]));
    let fake = Arc::new(fake);
    let f = open(&fake).unwrap();
    assert_eq!(
        f.bar(3).unwrap().read_u32(0),
        Err(MmioError::Unmapped { addr: 0 })
    );
    f.bar(3).unwrap().write_u32(0, 1).unwrap();
    assert_eq!(
        f.bar(5).unwrap().write_u32(4, 1),
        Err(MmioError::Unmapped { addr: 4 })
    );
    assert_eq!(f.bar(5).unwrap().read_u32(0).unwrap(), 0);
}

#[test]
fn mmap_failure_and_missing_config_are_errors() {
    let fake = Fake {
        fail_mmap: true,
        ..Fake::cassini_like()
    };
    match open(&Arc::new(fake)) {
        Err(VfioError::Mmap {
            index: 0, source, ..
        }) => assert_eq!(source.raw_os_error(), Some(libc::EINVAL)),
        other => panic!("expected Mmap error, got {other:?}"),
    }
    let mut fake = Fake::cassini_like();
    fake.regions.remove(&7);
    assert!(matches!(
        open(&Arc::new(fake)),
        Err(VfioError::NoConfigRegion)
    ));
}

#[test]
fn config_space_goes_through_the_config_region() {
    let fake = Arc::new(Fake::cassini_like());
    let f = PciFunction::vfio(open(&fake).unwrap()).unwrap();
    assert_eq!(f.backend_kind(), BackendKind::Vfio);
    assert_eq!((f.vendor_id(), f.device_id()), (0x17db, 0x0501));
    assert_eq!(f.revision(), 2);
    assert_eq!(f.class_code(), 0x02_0000);
    assert_eq!(f.address(), addr());
    f.config_write(0x04, 0x0000_0406).unwrap();
    assert_eq!(fake.peek(region_offset(7) + 4, 4), 0x406u32.to_le_bytes());
    assert_eq!(f.config_read(0x04).unwrap(), 0x406);
    assert!(matches!(
        f.config_read(0x02),
        Err(PciError::ConfigOffset { offset: 2 })
    ));
    assert!(matches!(
        f.config_write(4096, 0),
        Err(PciError::ConfigOffset { offset: 4096 })
    ));
    assert_eq!(f.bar_size(0), Some(0x4000));
    assert_eq!(f.bar_size(1), None);
}

#[test]
fn dma_maps_are_checked_before_reaching_the_iommu() {
    let fake = Arc::new(Fake::cassini_like());
    let f = PciFunction::vfio(open(&fake).unwrap()).unwrap();
    f.dma_map(0x10_0000, HostRange::new(0x7f00_0000_0000, 0x4000))
        .unwrap();
    // Overlap, misalignment and empty ranges never reach the ioctl.
    assert!(matches!(
        f.dma_map(0x10_2000, HostRange::new(0x7f00_1000_0000, 0x4000)),
        Err(PciError::Dma(DmaError::Overlap {
            existing_iova: 0x10_0000,
            ..
        }))
    ));
    assert!(matches!(
        f.dma_map(0x20_0800, HostRange::new(0x7f00_1000_0000, 0x1000)),
        Err(PciError::Vfio(VfioError::Dma(DmaError::Misaligned { .. })))
    ));
    assert!(matches!(
        f.dma_map(0x30_0000, HostRange::new(0x7f00_1000_0000, 0)),
        Err(PciError::Dma(DmaError::ZeroLength { .. }))
    ));
    // Unmapping what is not mapped fails cleanly and reaches nothing.
    assert!(matches!(
        f.dma_unmap(0x40_0000, 0x1000),
        Err(PciError::Dma(DmaError::NotMapped { iova: 0x40_0000 }))
    ));
    assert!(matches!(
        f.dma_unmap(0x10_0000, 0x1000),
        Err(PciError::Dma(DmaError::LengthMismatch { .. }))
    ));
    assert_eq!(
        *fake.dma_calls.lock().unwrap(),
        vec!["map 0x100000 0x7f0000000000 0x4000".to_string()]
    );
    f.dma_unmap(0x10_0000, 0x4000).unwrap();
    assert!(f.dma_mappings().is_empty());
    assert_eq!(fake.dma_calls.lock().unwrap().len(), 2);
    // The same IOVA can be mapped again once free.
    f.dma_map(0x10_0000, HostRange::new(0x7f00_2000_0000, 0x1000))
        .unwrap();
    assert_eq!(f.dma_mappings().len(), 1);
}

#[test]
fn a_failed_dma_map_is_reported_and_not_recorded() {
    let fake = Arc::new(Fake::cassini_like());
    let f = PciFunction::vfio(open(&fake).unwrap()).unwrap();
    *fake.dma_errno.lock().unwrap() = Some(libc::ENOMEM);
    let e = f
        .dma_map(0x1000, HostRange::new(0x10_0000, 0x1000))
        .unwrap_err();
    assert!(matches!(
        e,
        PciError::Vfio(VfioError::DmaMemlock { iova: 0x1000, .. })
    ));
    assert!(e.to_string().contains("RLIMIT_MEMLOCK"), "{e}");
    *fake.dma_errno.lock().unwrap() = Some(libc::EFAULT);
    match f.dma_map(0x1000, HostRange::new(0x10_0000, 0x1000)) {
        Err(PciError::Vfio(VfioError::DmaMap { source, .. })) => {
            assert_eq!(source.raw_os_error(), Some(libc::EFAULT))
        }
        other => panic!("expected DmaMap, got {other:?}"),
    }
    assert!(f.dma_mappings().is_empty());
    *fake.dma_errno.lock().unwrap() = None;
    f.dma_map(0x1000, HostRange::new(0x10_0000, 0x1000))
        .unwrap();
    assert_eq!(f.dma_mappings().len(), 1);
}

#[test]
fn msix_vector_counts_are_checked() {
    let fake = Arc::new(Fake::cassini_like());
    let f = open(&fake).unwrap();
    assert!(matches!(
        f.enable_msix(0),
        Err(VfioError::Msix(MsixError::Count {
            requested: 0,
            supported: 8
        }))
    ));
    assert!(matches!(
        f.enable_msix(9),
        Err(VfioError::Msix(MsixError::Count {
            requested: 9,
            supported: 8
        }))
    ));
    assert!(fake.msix_sets.lock().unwrap().is_empty());
    let none = Arc::new(Fake {
        msix: 0,
        ..Fake::cassini_like()
    });
    assert!(matches!(
        open(&none).unwrap().enable_msix(1),
        Err(VfioError::Msix(MsixError::Unsupported))
    ));
}

#[test]
// The delivery thread waits on the eventfds with epoll (edge-less), which Miri does not
// emulate.
#[cfg_attr(miri, ignore)]
fn msix_eventfds_are_delivered_to_wait_objects() {
    let fake = Arc::new(Fake::cassini_like());
    let f = PciFunction::vfio(open(&fake).unwrap()).unwrap();
    let irqs = f.enable_msix(4).unwrap();
    assert_eq!(irqs.len(), 4);
    assert_eq!(*fake.msix_sets.lock().unwrap(), vec![4]);
    assert!(matches!(
        f.enable_msix(2),
        Err(PciError::Msix(MsixError::AlreadyEnabled))
    ));
    // The "device" signals vector 2 three times (an eventfd accumulates).
    fake.msix_fds.lock().unwrap()[2].write(3).unwrap();
    let w2 = irqs.vector(2).unwrap();
    assert_eq!(w2.wait(Some(Duration::from_secs(10))), Some(3));
    fake.msix_fds.lock().unwrap()[0].write(1).unwrap();
    assert_eq!(
        irqs.vector(0).unwrap().wait(Some(Duration::from_secs(10))),
        Some(1)
    );
    assert_eq!(irqs.vector(1).unwrap().signal_count(), 0);
    assert_eq!(w2.signal_count(), 3);
    assert!(f.interrupts().is_some());

    f.disable_msix().unwrap();
    assert_eq!(*fake.msix_sets.lock().unwrap(), vec![4, 0]);
    assert!(f.interrupts().is_none());
    // Enabled again with fresh eventfds and wait objects.
    let again = f.enable_msix(1).unwrap();
    fake.msix_fds.lock().unwrap()[0].write(1).unwrap();
    assert_eq!(
        again.vector(0).unwrap().wait(Some(Duration::from_secs(10))),
        Some(1)
    );
}

/// Opens through `open_with` after the host checks, handing out one fake device.
struct FakeOps(Arc<Fake>, Mutex<Vec<(PciAddress, u32)>>);

impl VfioOps for FakeOps {
    fn open_device(
        &self,
        _host: &VfioHost,
        address: PciAddress,
        group: u32,
    ) -> Result<Arc<dyn VfioDeviceOps>, VfioError> {
        self.1.lock().unwrap().push((address, group));
        Ok(Arc::clone(&self.0) as Arc<dyn VfioDeviceOps>)
    }
}

#[test]
// Builds a fake sysfs in a temporary directory: host file-system calls, which Miri's
// isolation refuses (and there is no unsafe code on this path).
#[cfg_attr(miri, ignore)]
fn open_with_passes_the_checked_group_to_the_ops() {
    let root = std::env::temp_dir().join(format!("nicemu-vfio-open-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let sys = root.join("sys");
    let dev = root.join("dev");
    let devdir = sys.join("devices/pci0000:3a/0000:3b:00.0");
    for d in [
        sys.join("bus/pci/devices"),
        sys.join("kernel/iommu_groups/42"),
        sys.join("bus/pci/drivers/vfio-pci"),
        dev.join("vfio"),
        devdir.clone(),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::os::unix::fs::symlink(&devdir, sys.join("bus/pci/devices/0000:3b:00.0")).unwrap();
    std::os::unix::fs::symlink(
        sys.join("kernel/iommu_groups/42"),
        devdir.join("iommu_group"),
    )
    .unwrap();
    std::os::unix::fs::symlink(sys.join("bus/pci/drivers/vfio-pci"), devdir.join("driver"))
        .unwrap();
    std::fs::write(dev.join("vfio/vfio"), b"").unwrap();
    std::fs::write(dev.join("vfio/42"), b"").unwrap();

    let ops = FakeOps(Arc::new(Fake::cassini_like()), Mutex::new(Vec::new()));
    let host = VfioHost::new(&sys, &dev);
    let f = VfioFunction::open_with(&host, &ops, addr()).unwrap();
    assert_eq!(*ops.1.lock().unwrap(), vec![(addr(), 42)]);
    assert_eq!(f.bar(0).unwrap().size(), 0x4000);
    std::fs::remove_dir_all(&root).unwrap();
}
