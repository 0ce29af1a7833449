//! The Gemini driver on emulated Gemini NICs: probe by id and the device's reset values.

use driver::gemini::{KgniConfig, KgniDriver};
use driver::pci::{PciDriver, ids};
use firmware_spec::gemini::fma::PrivMask;
use firmware_spec::gemini::{map, pci};
use platform::gemini::{DEFAULT_PTAG, GeminiCluster};

#[test]
fn probed_by_id_with_the_reset_values_of_the_contract() {
    let c = GeminiCluster::builder().dims([2, 1, 1]).build().unwrap();
    assert_eq!(c.nodes().len(), 4, "2 routers x 2 NICs");
    for node in c.nodes() {
        let binding = node.with_bus(|bus| {
            let f = bus.functions().next().unwrap().clone();
            assert_eq!(f.id(), ids::GEMINI);
            assert_eq!((f.vendor_id(), f.device_id()), (0x17db, 0x0201));
            bus.binding(f.address()).cloned().unwrap()
        });
        assert_eq!(binding.driver(), Some("kgni"));
        let k = node.kgni();
        let r = k.reset_report();
        assert_eq!(r.node_id, node.pe(), "NODE_ID is the fabric port");
        assert_eq!(k.nic_addr(), node.pe());
        assert_eq!(r.revision, pci::REVISION);
        assert_eq!(r.class_code, 0x02_80_00);
        assert_eq!(r.bar0_size, map::ADDRESS_SPACE_SIZE);
        assert_eq!(r.msix_vectors, 33);
        assert_eq!(r.mrt_page_code, 2, "MRT_PAGESIZE resets to 2 MiB");
        assert!(
            r.fma_masks_not_default.is_empty(),
            "PRVMASK resets to DEFAULT"
        );
        assert!(r.fma_enabled.is_empty());
        assert!(r.cqs_enabled.is_empty());
        assert!(r.mdds_valid.is_empty());
        assert_eq!(r.tx_rings, ([0; 4], [0; 4]));
        // After probe: the TX ring partition the driver programmed reads back.
        let (base, count) = k.hw().bte_tx_rings().unwrap();
        assert_eq!(count, KgniConfig::default().tx_ring);
        assert_eq!(base, [0, 256, 512, 768]);
        assert_eq!(k.hw().fma_prvmask(0).unwrap(), PrivMask::DEFAULT.bits());
    }
    assert_eq!(c.job().ptag, DEFAULT_PTAG);
}

#[test]
fn driver_matches_only_gemini_ids() {
    let mem: std::sync::Arc<dyn driver::mem::HostMem> = std::sync::Arc::new(
        driver::mem::EmulatedHostMemory::new(emu_core::memory::HostMemory::new(1 << 20).unwrap()),
    );
    let d = KgniDriver::new(mem, KgniConfig::default());
    assert_eq!(d.name(), "kgni");
    assert_eq!(d.id_table(), &[ids::GEMINI]);
    assert!(!d.id_table().contains(&ids::CASSINI_1));
}
