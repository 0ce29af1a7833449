//! The PCI layer through its public API: probe by id, the emulated backend (config, BARs,
//! MSI-X, DMA), wait objects across threads, vfio host diagnostics on fake sysfs trees and on
//! this machine, and sysfs discovery of real NICs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use driver::pci::vfio::{VfioError, VfioFunction, VfioHost};
use driver::pci::{
    BackendKind, BindState, DmaError, DriverData, EmulatedFunction, HostRange, InterruptSink,
    MsixError, NicKind, PciAddress, PciBus, PciDriver, PciError, PciFunction, PciId, ProbeError,
    SysfsError, WaitObject, ids, list_real_devices, sysfs,
};
use emu_core::mmio::{Mmio, MmioError};

// ---------------------------------------------------------------------------------------------
// An emulated function: config space in an array, BAR0 a plain RAM, MSI-X through a sink.

struct Ram {
    size: u64,
    bytes: Mutex<HashMap<u64, u8>>,
}

impl Mmio for Ram {
    fn size(&self) -> u64 {
        self.size
    }
    fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        let b = self.bytes.lock().unwrap();
        for (i, d) in data.iter_mut().enumerate() {
            *d = *b.get(&(offset + i as u64)).unwrap_or(&0);
        }
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        let mut b = self.bytes.lock().unwrap();
        for (i, d) in data.iter().enumerate() {
            b.insert(offset + i as u64, *d);
        }
        Ok(())
    }
}

struct FakeNic {
    config: Mutex<Vec<u32>>,
    bar0: Arc<Ram>,
    msix: u32,
    sink: Mutex<Option<InterruptSink>>,
    dma: Mutex<Vec<String>>,
}

impl FakeNic {
    fn new(id: PciId, revision: u8, bar0_size: u64) -> Arc<Self> {
        let mut config = vec![0u32; 1024];
        config[0] = u32::from(id.vendor) | u32::from(id.device) << 16;
        config[2] = 0x0200_0000 | u32::from(revision);
        Arc::new(FakeNic {
            config: Mutex::new(config),
            bar0: Arc::new(Ram {
                size: bar0_size,
                bytes: Mutex::new(HashMap::new()),
            }),
            msix: 16,
            sink: Mutex::new(None),
            dma: Mutex::new(Vec::new()),
        })
    }

    /// The device raises an MSI-X vector (what an engine thread would do).
    fn raise(&self, vector: u32) -> bool {
        match &*self.sink.lock().unwrap() {
            Some(s) => s.fire(vector),
            None => false,
        }
    }
}

impl EmulatedFunction for FakeNic {
    fn config_read(&self, offset: u16) -> u32 {
        self.config.lock().unwrap()[usize::from(offset / 4)]
    }
    fn config_write(&self, offset: u16, value: u32) {
        self.config.lock().unwrap()[usize::from(offset / 4)] = value;
    }
    fn bar(&self, index: u8) -> Option<Arc<dyn Mmio>> {
        (index == 0).then(|| Arc::clone(&self.bar0) as Arc<dyn Mmio>)
    }
    fn msix_vectors(&self) -> u32 {
        self.msix
    }
    fn set_interrupt_sink(&self, sink: Option<InterruptSink>) {
        *self.sink.lock().unwrap() = sink;
    }
    fn dma_map(&self, iova: u64, host: HostRange) -> Result<(), DmaError> {
        if host.addr == 0xbad {
            return Err(DmaError::Rejected("translation table full".into()));
        }
        self.dma
            .lock()
            .unwrap()
            .push(format!("map {iova:#x}+{:#x}", host.len));
        Ok(())
    }
    fn dma_unmap(&self, iova: u64, len: u64) -> Result<(), DmaError> {
        self.dma
            .lock()
            .unwrap()
            .push(format!("unmap {iova:#x}+{len:#x}"));
        Ok(())
    }
}

fn bdf(s: &str) -> PciAddress {
    s.parse().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Probe by id.

/// What the test drivers keep per bound function.
#[derive(Debug, PartialEq)]
struct Bound {
    driver: &'static str,
    bar0: u64,
}

struct TestDriver {
    name: &'static str,
    ids: Vec<PciId>,
    /// Smallest BAR0 this driver accepts.
    min_bar0: u64,
    /// Refuse Cassini 2 VFs.
    no_vfs: bool,
    probes: AtomicUsize,
}

impl TestDriver {
    fn new(name: &'static str, ids: &[PciId], min_bar0: u64, no_vfs: bool) -> Self {
        TestDriver {
            name,
            ids: ids.to_vec(),
            min_bar0,
            no_vfs,
            probes: AtomicUsize::new(0),
        }
    }
}

impl PciDriver for TestDriver {
    fn name(&self) -> &str {
        self.name
    }
    fn id_table(&self) -> &[PciId] {
        &self.ids
    }
    fn probe(&self, f: &Arc<PciFunction>) -> Result<DriverData, ProbeError> {
        self.probes.fetch_add(1, Ordering::SeqCst);
        if self.no_vfs && f.id() == ids::CASSINI_2_VF {
            return Err(ProbeError::Unsupported("virtual functions".into()));
        }
        // Probing touches the device through the PCI layer, as a real driver does.
        f.config_write(0x04, 0x6)?;
        let bar0 = f.bar_size(0).unwrap_or(0);
        if bar0 < self.min_bar0 {
            return Err(ProbeError::Unsupported(format!(
                "BAR0 is only {bar0:#x} bytes"
            )));
        }
        Ok(Arc::new(Bound {
            driver: self.name,
            bar0,
        }))
    }
}

fn failure_drivers(state: &BindState) -> Vec<String> {
    match state {
        BindState::Bound { failures, .. } | BindState::Failed { failures } => {
            failures.iter().map(|f| f.driver.clone()).collect()
        }
        BindState::Unbound => vec![],
    }
}

#[test]
fn functions_bind_to_the_first_matching_driver_that_probes() {
    let mut bus = PciBus::new();
    let c1 = FakeNic::new(ids::CASSINI_1, 2, 0x8000_0000);
    bus.add(PciFunction::emulated(bdf("0000:01:00.0"), c1.clone()))
        .unwrap();
    for (addr, id, bar0) in [
        ("0000:02:00.0", ids::GEMINI, 0x1000),
        ("0000:03:00.0", PciId::new(0x8086, 0x1234), 0x1000),
        ("0000:04:00.1", ids::CASSINI_2_VF, 0x2000_0000),
        ("0000:05:00.0", ids::CASSINI_2_PF, 0x1000),
    ] {
        bus.add(PciFunction::emulated(bdf(addr), FakeNic::new(id, 1, bar0)))
            .unwrap();
    }
    assert_eq!(bus.len(), 5);
    assert!(matches!(
        bus.add(PciFunction::emulated(bdf("0000:01:00.0"), c1.clone())),
        Err(PciError::DuplicateAddress(_))
    ));

    let cxi = TestDriver::new("cxi_ss1", ids::CASSINI, 0x2000_0000, true);
    let kgni = TestDriver::new("kgni", ids::GEMINI_IDS, 0, false);
    let greedy = TestDriver::new("greedy", &[ids::CASSINI_1, ids::GEMINI], 0, false);
    let vf = TestDriver::new("cxi_vf", &[ids::CASSINI_2_VF], 0, false);
    let report = bus.probe_all(&[&cxi, &kgni, &greedy, &vf]);
    assert_eq!(report.len(), 5);

    // Cassini 1: cxi_ss1 comes first and wins over the later "greedy".
    let s = bus.binding(bdf("0000:01:00.0")).unwrap();
    assert_eq!(s.driver(), Some("cxi_ss1"));
    assert!(failure_drivers(s).is_empty());
    assert_eq!(
        *bus.drvdata::<Bound>(bdf("0000:01:00.0")).unwrap(),
        Bound {
            driver: "cxi_ss1",
            bar0: 0x8000_0000
        }
    );
    assert_eq!(c1.config_read(0x04), 0x6, "probe reached the device");
    assert!(bus.drvdata::<String>(bdf("0000:01:00.0")).is_none());
    // Gemini: kgni (before greedy).
    assert_eq!(
        bus.binding(bdf("0000:02:00.0")).unwrap().driver(),
        Some("kgni")
    );
    // Unknown id: nobody matched, nobody was asked.
    assert!(matches!(
        bus.binding(bdf("0000:03:00.0")),
        Some(BindState::Unbound)
    ));
    assert!(bus.drvdata::<Bound>(bdf("0000:03:00.0")).is_none());
    // Cassini 2 VF: cxi_ss1 refused it, the next matching driver took it; the failure is kept.
    let s = bus.binding(bdf("0000:04:00.1")).unwrap();
    assert_eq!(s.driver(), Some("cxi_vf"));
    assert_eq!(failure_drivers(s), vec!["cxi_ss1"]);
    // Cassini 2 PF with a BAR0 too small: the only matching driver failed; recorded.
    match bus.binding(bdf("0000:05:00.0")).unwrap() {
        BindState::Failed { failures } => {
            assert_eq!(failures.len(), 1);
            assert_eq!(failures[0].driver, "cxi_ss1");
            assert!(matches!(*failures[0].error, ProbeError::Unsupported(_)));
            assert!(
                failures[0]
                    .error
                    .to_string()
                    .contains("BAR0 is only 0x1000")
            );
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    assert_eq!(cxi.probes.load(Ordering::SeqCst), 3);
    assert_eq!(greedy.probes.load(Ordering::SeqCst), 0);

    // Probing again offers only what is not bound: the failed PF (and the unknown function,
    // which still matches nothing).
    let again = bus.probe_all(&[&cxi, &kgni]);
    let offered: Vec<String> = again.iter().map(|(a, _)| a.to_string()).collect();
    assert_eq!(offered, vec!["0000:03:00.0", "0000:05:00.0"]);
    assert_eq!(cxi.probes.load(Ordering::SeqCst), 4);
    assert_eq!(kgni.probes.load(Ordering::SeqCst), 1);

    // Unbinding drops the driver's state and frees the function for the next probe.
    assert_eq!(
        bus.unbind(bdf("0000:02:00.0")).unwrap().driver(),
        Some("kgni")
    );
    assert!(bus.drvdata::<Bound>(bdf("0000:02:00.0")).is_none());
    bus.probe_all(&[&greedy]);
    assert_eq!(
        bus.binding(bdf("0000:02:00.0")).unwrap().driver(),
        Some("greedy")
    );
}

#[test]
fn no_drivers_leave_everything_unbound() {
    let mut bus = PciBus::new();
    bus.add(PciFunction::emulated(
        bdf("00:01.0"),
        FakeNic::new(ids::CASSINI_1, 2, 0x1000),
    ))
    .unwrap();
    let report = bus.probe_all(&[]);
    assert_eq!(report.len(), 1);
    assert!(matches!(report[0].1, BindState::Unbound));
}

// ---------------------------------------------------------------------------------------------
// The emulated backend.

#[test]
fn an_emulated_function_exposes_ids_config_and_bars() {
    let nic = FakeNic::new(ids::GEMINI, 3, 0x4000);
    let f = PciFunction::emulated(bdf("0000:00:08.0"), nic.clone());
    assert_eq!(f.backend_kind(), BackendKind::Emulated);
    assert_eq!(f.id(), ids::GEMINI);
    assert_eq!(f.nic_kind(), Some(NicKind::Gemini));
    assert_eq!((f.revision(), f.class_code()), (3, 0x02_0000));
    assert_eq!(f.address().to_string(), "0000:00:08.0");
    f.config_write(0x10, 0xfeed_0000).unwrap();
    assert_eq!(f.config_read(0x10).unwrap(), 0xfeed_0000);
    assert!(matches!(
        f.config_read(0x11),
        Err(PciError::ConfigOffset { offset: 0x11 })
    ));
    assert!(matches!(
        f.config_read(4096),
        Err(PciError::ConfigOffset { .. })
    ));
    let bar0 = f.bar(0).unwrap();
    bar0.write_u64(0x100, 0x1122_3344_5566_7788).unwrap();
    assert_eq!(nic.bar0.read_u64(0x100).unwrap(), 0x1122_3344_5566_7788);
    assert_eq!(f.bar_size(0), Some(0x4000));
    assert!(f.bar(1).is_none() && f.bar(6).is_none());
    assert!(f.as_vfio().is_none());
}

#[test]
fn emulated_msix_reaches_wait_objects_from_another_thread() {
    let nic = FakeNic::new(ids::CASSINI_1, 2, 0x1000);
    let f = PciFunction::emulated(bdf("00:01.0"), nic.clone());
    assert_eq!(f.msix_vectors(), 16);
    assert!(matches!(
        f.enable_msix(17),
        Err(PciError::Msix(MsixError::Count {
            requested: 17,
            supported: 16
        }))
    ));
    assert!(!nic.raise(0), "no sink before MSI-X is enabled");
    let irqs = f.enable_msix(4).unwrap();
    assert!(matches!(
        f.enable_msix(4),
        Err(PciError::Msix(MsixError::AlreadyEnabled))
    ));
    let device = {
        let nic = nic.clone();
        thread::spawn(move || {
            for _ in 0..5 {
                assert!(nic.raise(3));
            }
            assert!(!nic.raise(4), "vector 4 was not enabled");
        })
    };
    let mut got = 0;
    while got < 5 {
        got += irqs
            .vector(3)
            .unwrap()
            .wait(Some(Duration::from_secs(10)))
            .expect("interrupt within 10 s");
    }
    device.join().unwrap();
    assert_eq!(got, 5);
    assert_eq!(irqs.vector(0).unwrap().signal_count(), 0);
    assert_eq!(f.interrupts().unwrap().len(), 4);
    f.disable_msix().unwrap();
    assert!(!nic.raise(3), "sink removed on disable");
    assert!(f.interrupts().is_none());
    f.disable_msix().unwrap();
}

#[test]
fn emulated_dma_is_checked_then_forwarded() {
    let nic = FakeNic::new(ids::CASSINI_1, 2, 0x1000);
    let f = PciFunction::emulated(bdf("00:01.0"), nic.clone());
    f.dma_map(0x1000, HostRange::new(0x20_0000, 0x800)).unwrap();
    assert!(matches!(
        f.dma_map(0x1400, HostRange::new(0x30_0000, 0x10)),
        Err(PciError::Dma(DmaError::Overlap { .. }))
    ));
    assert!(matches!(
        f.dma_map(0x9000, HostRange::new(0xbad, 0x10)),
        Err(PciError::Dma(DmaError::Rejected(_)))
    ));
    assert!(matches!(
        f.dma_unmap(0x2000, 0x10),
        Err(PciError::Dma(DmaError::NotMapped { iova: 0x2000 }))
    ));
    assert_eq!(f.dma_mappings().len(), 1, "rejected map not recorded");
    f.dma_unmap(0x1000, 0x800).unwrap();
    assert_eq!(
        *nic.dma.lock().unwrap(),
        vec!["map 0x1000+0x800", "unmap 0x1000+0x800"]
    );
    assert!(f.dma_mappings().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Wait objects across threads.

#[test]
fn wait_objects_carry_every_signal_across_threads() {
    let w = Arc::new(WaitObject::new());
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let w = Arc::clone(&w);
            thread::spawn(move || {
                for _ in 0..500 {
                    w.signal();
                }
            })
        })
        .collect();
    let mut total = 0;
    while total < 2000 {
        total += w
            .wait(Some(Duration::from_secs(10)))
            .expect("signals within 10 s");
    }
    for s in senders {
        s.join().unwrap();
    }
    assert_eq!(total, 2000);
    assert_eq!(w.signal_count(), 2000);
    assert_eq!(w.poll(), 0);
}

#[test]
fn a_blocked_waiter_is_woken_by_a_signal() {
    let w = Arc::new(WaitObject::new());
    let waiter = {
        let w = Arc::clone(&w);
        thread::spawn(move || w.wait(None))
    };
    // Signal only once the waiter is (very likely) blocked; correctness does not depend on it.
    thread::sleep(Duration::from_millis(20));
    w.signal_n(2);
    assert_eq!(waiter.join().unwrap(), Some(2));
    assert_eq!(w.pending(), 0);
}

#[test]
fn wait_times_out_when_nothing_arrives() {
    let w = WaitObject::new();
    let start = Instant::now();
    assert_eq!(w.wait(Some(Duration::from_millis(30))), None);
    assert!(
        start.elapsed() >= Duration::from_millis(30),
        "returned early"
    );
    w.signal();
    assert_eq!(w.wait(Some(Duration::from_millis(30))), Some(1));
}

// ---------------------------------------------------------------------------------------------
// Fake sysfs / dev trees.

struct Tree(PathBuf);

impl Tree {
    fn new(name: &str) -> Tree {
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "nicemu-pci-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        std::fs::create_dir_all(root.join("dev")).unwrap();
        Tree(root)
    }
    fn sys(&self) -> PathBuf {
        self.0.join("sys")
    }
    fn dev(&self) -> PathBuf {
        self.0.join("dev")
    }
    fn host(&self) -> VfioHost {
        VfioHost::new(self.sys(), self.dev())
    }
    fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }
    fn touch(&self, rel: &str) {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }
    /// A PCI function the way sysfs shows it: a directory under devices/ linked from
    /// bus/pci/devices, with optional driver and iommu_group links.
    fn function(&self, addr: &str, id: PciId, driver: Option<&str>, group: Option<u32>) -> PathBuf {
        let dir = self.mkdir(&format!("sys/devices/pci0000:00/{addr}"));
        std::fs::write(dir.join("vendor"), format!("0x{:04x}\n", id.vendor)).unwrap();
        std::fs::write(dir.join("device"), format!("0x{:04x}\n", id.device)).unwrap();
        std::fs::write(dir.join("class"), "0x020000\n").unwrap();
        std::fs::write(dir.join("revision"), "0x02\n").unwrap();
        std::os::unix::fs::symlink(&dir, self.sys().join("bus/pci/devices").join(addr)).unwrap();
        if let Some(d) = driver {
            let drv = self.mkdir(&format!("sys/bus/pci/drivers/{d}"));
            std::os::unix::fs::symlink(drv, dir.join("driver")).unwrap();
        }
        if let Some(g) = group {
            let grp = self.mkdir(&format!("sys/kernel/iommu_groups/{g}"));
            std::os::unix::fs::symlink(grp, dir.join("iommu_group")).unwrap();
        }
        dir
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------
// vfio host diagnostics.

#[test]
fn each_missing_piece_of_the_vfio_setup_is_named() {
    let t = Tree::new("diag");
    let host = t.host();
    let a = bdf("0000:3b:00.0");

    // Nothing at all: the module is not loaded.
    let e = host.check_device(a).unwrap_err();
    assert!(matches!(e, VfioError::ModuleNotLoaded { .. }), "{e}");
    assert!(e.to_string().contains("vfio/vfio") && e.to_string().contains("not loaded"));

    // vfio is loaded (its misc device is in sysfs) but /dev lacks the node.
    t.mkdir("sys/class/misc/vfio");
    let e = host.check_device(a).unwrap_err();
    assert!(matches!(e, VfioError::ContainerNodeMissing { .. }), "{e}");

    // The node exists but there are no IOMMU groups.
    t.touch("dev/vfio/vfio");
    let e = host.check_device(a).unwrap_err();
    assert!(matches!(e, VfioError::NoIommuGroups { .. }), "{e}");
    assert!(e.to_string().contains("intel_iommu=on"));

    // Groups exist, but not the device.
    t.mkdir("sys/kernel/iommu_groups/0");
    let e = host.check_device(a).unwrap_err();
    assert!(
        matches!(e, VfioError::NoSuchDevice { address, .. } if address == a),
        "{e}"
    );

    // The device without an IOMMU group.
    let dir = t.function("0000:3b:00.0", ids::CASSINI_2_PF, None, None);
    let e = host.check_device(a).unwrap_err();
    assert!(matches!(e, VfioError::NoDeviceGroup { .. }), "{e}");

    // In group 17, but bound to no driver.
    let grp = t.mkdir("sys/kernel/iommu_groups/17");
    std::os::unix::fs::symlink(grp, dir.join("iommu_group")).unwrap();
    let e = host.check_device(a).unwrap_err();
    assert!(matches!(e, VfioError::Unbound { .. }), "{e}");

    // Bound to the kernel driver.
    let cxi = t.mkdir("sys/bus/pci/drivers/cxi_ss1");
    std::os::unix::fs::symlink(&cxi, dir.join("driver")).unwrap();
    let e = host.check_device(a).unwrap_err();
    match &e {
        VfioError::WrongDriver { driver, .. } => assert_eq!(driver, "cxi_ss1"),
        other => panic!("expected WrongDriver, got {other}"),
    }
    assert!(
        e.to_string()
            .contains("device 0000:3b:00.0 is bound to driver 'cxi_ss1', not vfio-pci")
    );

    // Bound to vfio-pci, but /dev/vfio/17 is missing.
    std::fs::remove_file(dir.join("driver")).unwrap();
    let vfio = t.mkdir("sys/bus/pci/drivers/vfio-pci");
    std::os::unix::fs::symlink(vfio, dir.join("driver")).unwrap();
    let e = host.check_device(a).unwrap_err();
    assert!(
        matches!(e, VfioError::GroupNodeMissing { group: 17, .. }),
        "{e}"
    );

    // Everything in place: the group number comes back.
    t.touch("dev/vfio/17");
    assert_eq!(host.check_device(a).unwrap(), 17);
}

#[test]
fn opening_a_device_on_this_machine_names_what_is_missing() {
    let container = Path::new("/dev/vfio/vfio");
    // Any function on this host will do; without a PCI bus, a made-up address.
    let address = sysfs::scan(Path::new("/sys"))
        .ok()
        .and_then(|fs| fs.first().map(|f| f.address))
        .unwrap_or_else(|| bdf("0000:00:00.0"));
    let result = VfioFunction::open(address);
    if container.exists() {
        eprintln!(
            "skipped: {} exists, so this host has vfio; open({address}) gave {:?}",
            container.display(),
            result.as_ref().err()
        );
        return;
    }
    let e = result.expect_err("no vfio, yet the open succeeded");
    assert!(
        matches!(
            e,
            VfioError::ModuleNotLoaded { .. } | VfioError::ContainerNodeMissing { .. }
        ),
        "unexpected error: {e}"
    );
    assert!(e.to_string().contains("/dev/vfio/vfio"), "{e}");
    // The same error through the PCI layer's error type.
    let pe = PciError::from(e);
    assert!(pe.to_string().contains("/dev/vfio/vfio"));
}

// ---------------------------------------------------------------------------------------------
// sysfs discovery.

#[test]
fn sysfs_scan_finds_the_known_nics_with_their_bindings() {
    let t = Tree::new("scan");
    t.function("0000:3b:00.0", ids::CASSINI_1, Some("cxi_ss1"), Some(7));
    t.function(
        "0000:00:1f.3",
        PciId::new(0x8086, 0xa348),
        Some("snd_hda_intel"),
        Some(3),
    );
    t.function(
        "0000:5e:00.0",
        ids::CASSINI_2_PF,
        Some("vfio-pci"),
        Some(12),
    );
    t.function("0000:5e:00.1", ids::CASSINI_2_VF, None, Some(13));
    t.function("0001:02:00.0", ids::GEMINI, None, None);
    // Entries that are not readable functions are skipped, not fatal.
    t.mkdir("sys/bus/pci/devices/not-an-address");
    let broken = t.function("0000:7f:00.0", ids::CASSINI_1, None, None);
    std::fs::remove_file(broken.join("vendor")).unwrap();

    let all = sysfs::scan(&t.sys()).unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(all[0].address, bdf("0000:00:1f.3"), "sorted by address");

    let nics = list_real_devices(&t.sys()).unwrap();
    type Row = (String, NicKind, Option<String>, Option<u32>, bool);
    let summary: Vec<Row> = nics
        .iter()
        .map(|d| {
            (
                d.function.address.to_string(),
                d.kind,
                d.function.driver.clone(),
                d.function.iommu_group,
                d.vfio_ready(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "0000:3b:00.0".into(),
                NicKind::Cassini1,
                Some("cxi_ss1".into()),
                Some(7),
                false
            ),
            (
                "0000:5e:00.0".into(),
                NicKind::Cassini2Pf,
                Some("vfio-pci".into()),
                Some(12),
                true
            ),
            (
                "0000:5e:00.1".into(),
                NicKind::Cassini2Vf,
                None,
                Some(13),
                false
            ),
            ("0001:02:00.0".into(), NicKind::Gemini, None, None, false),
        ]
    );
    assert_eq!(nics[0].function.id, ids::CASSINI_1);
    assert_eq!(nics[0].function.revision, 2);
    assert_eq!(nics[0].function.class, 0x02_0000);
}

#[test]
fn sysfs_without_a_pci_bus_is_an_error() {
    let t = Tree::new("nobus");
    std::fs::remove_dir_all(t.sys().join("bus")).unwrap();
    match list_real_devices(&t.sys()) {
        Err(SysfsError::NoPciBus { path }) => assert!(path.ends_with("bus/pci/devices")),
        other => panic!("expected NoPciBus, got {other:?}"),
    }
}

#[test]
fn this_machine_scans_without_error() {
    // Whatever is installed, every device reported is one of ours.
    if Path::new("/sys/bus/pci/devices").exists() {
        let devs = list_real_devices(Path::new("/sys")).unwrap();
        for d in devs {
            assert_eq!(NicKind::from_id(d.function.id), Some(d.kind));
        }
    }
}
