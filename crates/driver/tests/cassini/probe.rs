//! Probe by id, reset values read back through BAR0, what the driver programs at probe.

use driver::cassini::CassiniDriver;
use driver::pci::{BindState, NicKind, ids};
use firmware_spec::cassini::csr::{self, CASSINI1, fields as f};
use firmware_spec::cassini::pci::{BAR0_SIZE_PF, MbStsRev, Platform};
use platform::{Cluster, EngineKind};

use crate::common::*;

fn unbound(nics: usize) -> Cluster {
    Cluster::builder()
        .nics(nics)
        .engine(EngineKind::Deterministic { seed: 3 })
        .memory_per_node(16 << 20)
        .bind_drivers(false)
        .build()
        .unwrap()
}

/// Registers whose value out of reset is set from the device's configuration rather than the
/// spec's reset value (docs/cassini-programming.md, "Identity").
const IDENTITY: &[&str] = &["c_mb_sts_rev", "nicsim_nic_id", "c_oxe_cfg_fab_sfa"];

#[test]
fn devices_come_up_with_the_spec_reset_values() {
    let cl = unbound(1);
    let node = cl.node(0).unwrap();
    assert!(node.cxi(0).is_none(), "no driver loaded yet");
    let bar = node.with_bus(|bus| {
        let f = bus.functions().next().unwrap();
        assert_eq!(f.id(), ids::CASSINI_1);
        assert_eq!(f.nic_kind(), Some(NicKind::Cassini1));
        assert_eq!(f.class_code() >> 16, 0x02, "network controller");
        assert!(f.msix_vectors() >= 1);
        assert!(matches!(bus.binding(f.address()), Some(BindState::Unbound)));
        f.bar(0).unwrap()
    });
    assert_eq!(bar.size(), BAR0_SIZE_PF);
    let hw =
        driver::cassini::hw::CassHw::new(bar, firmware_spec::cassini::pci::Generation::Cassini1);

    let mut checked = 0;
    for c in CASSINI1.registers() {
        if IDENTITY.contains(&c.name) || !c.size.is_multiple_of(8) {
            continue;
        }
        for idx in [0, c.entries - 1] {
            let got = hw.read_entry(c, idx).unwrap();
            let want = c.reset_bytes();
            for fld in c
                .fields
                .iter()
                .filter(|f| f.is_register_field() && f.width <= 64)
            {
                assert_eq!(
                    fld.get(&got),
                    fld.get(&want),
                    "{}[{idx}].{} out of reset",
                    c.name,
                    fld.name
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 1500, "checked {checked} entries");

    // Identity: Cassini 1.1 on NETSIM, the NID from the configuration.
    let rev = MbStsRev::from_u64(hw.read_qword(csr::C_MB_STS_REV, 0, 0).unwrap());
    assert_eq!((rev.vendor_id, rev.device_id, rev.rev), (0x17db, 0x0501, 2));
    assert_eq!(rev.platform(), Some(Platform::Netsim));
}

#[test]
fn probe_binds_by_id_and_programs_the_device() {
    let cl = unbound(2);
    for (i, node) in cl.nodes().iter().enumerate() {
        let devs = node.probe().unwrap();
        assert_eq!(devs.len(), 1);
        let d = &devs[0];
        node.with_bus(|bus| {
            let a = bus.functions().next().unwrap().address();
            assert_eq!(
                bus.binding(a).and_then(|b| b.driver()),
                Some(CassiniDriver::NAME)
            );
        });
        assert_eq!(d.info().nid, i as u32);
        assert_eq!(d.info().pid_bits.get(), 9);
        assert_eq!(d.info().pid_count, 511);
        assert_eq!(d.info().pid_granule, 256);
        assert_eq!(d.info().rdzv_get_idx, 255);
        assert!(!d.info().is_vf);
        assert_eq!(d.info().msix_vectors, 128);
        let hw = d.hw();
        // pid_bits 9 (reset value 8), the NID as source address, the physical AC.
        assert_eq!(
            hw.read_field(
                csr::C_LPE_CFG_INITIATOR_CTRL,
                0,
                f::c_lpe_cfg_initiator_ctrl::PID_BITS
            )
            .unwrap(),
            9
        );
        assert_eq!(
            hw.read_field(csr::C_OXE_CFG_FAB_SFA, 0, f::c_oxe_cfg_fab_sfa::NID)
                .unwrap(),
            i as u64
        );
        let ac1 = hw.read_entry(csr::C_ATU_CFG_AC_TABLE, 1).unwrap();
        assert_eq!(f::c_atu_cfg_ac_table::CONTEXT_EN.get(&ac1), 1);
        assert_eq!(f::c_atu_cfg_ac_table::TA_MODE.get(&ac1), 3, "PASSTHROUGH");
        // MSI-X vectors unmasked for the enabled vectors only.
        let m0 = hw.read_entry(csr::C_PI_IPD_CFG_MSIX_TABLE, 0).unwrap();
        assert_eq!(f::c_pi_ipd_cfg_msix_table::VECTOR_CTL_MASK.get(&m0), 0);
        let m200 = hw.read_entry(csr::C_PI_IPD_CFG_MSIX_TABLE, 200).unwrap();
        assert_eq!(f::c_pi_ipd_cfg_msix_table::VECTOR_CTL_MASK.get(&m200), 1);
        // Probing again binds nothing new.
        assert_eq!(node.probe().unwrap().len(), 1);
    }
    let listing = platform::list_devices(Some(&cl), std::path::Path::new("/nonexistent-sysfs"));
    assert_eq!(listing.emulated.len(), 2);
    assert_eq!(listing.emulated[1].nid, Some(1));
    assert_eq!(listing.emulated[0].driver.as_deref(), Some("cxi_ss1"));
    assert!(listing.real.is_err());
    let text = listing.to_string();
    assert!(
        text.contains("17db:0501") && text.contains("cxi_ss1"),
        "{text}"
    );
    // This machine's sysfs (no Cassini here, or real ones): never an error if /sys exists.
    if std::path::Path::new("/sys/bus/pci/devices").exists() {
        assert!(
            platform::list_devices(None, std::path::Path::new("/sys"))
                .real
                .is_ok()
        );
    }
}

#[test]
fn default_service_exists_with_the_default_vnis() {
    let cl = cluster(1);
    let c = dev(&cl, 0).open();
    let d = c
        .call(&driver::cassini::uapi::As::<
            { driver::cassini::Opcode::SvcGet as u32 },
            _,
        >(driver::cassini::uapi::SvcIdCmd {
            svc_id: 1,
            ..Default::default()
        }))
        .unwrap();
    assert_eq!(d.svc_id, 1);
    assert_eq!(d.num_vld_vnis, 2);
    assert_eq!(&d.vnis[..2], &[1, 10]);
    // A VNI no service has is refused (cass_rmu.c: EINVAL).
    let l = lni(&c).unwrap();
    let r = c.call(&driver::cassini::uapi::DomainAllocCmd {
        lni: l,
        vni: 7,
        pid: 0,
        ..Default::default()
    });
    assert_eq!(r.unwrap_err(), driver::cassini::Errno::Einval);
    let props = c
        .call(&driver::cassini::uapi::As::<
            { driver::cassini::Opcode::GetDevProperties as u32 },
            _,
        >(driver::cassini::uapi::NoArgCmd::default()))
        .unwrap();
    assert_eq!(props.pid_bits, 9);
    assert_eq!(props.cassini_version, 0x12);
    assert_eq!(props.device_platform, 1);
    assert_eq!(props.rsrcs[1].max, 1024);
    let info = c
        .call(&driver::cassini::uapi::As::<
            { driver::cassini::Opcode::DevInfoGet as u32 },
            _,
        >(driver::cassini::uapi::NoArgCmd::default()))
        .unwrap();
    assert_eq!((info.vendor_id, info.device_id), (0x17db, 0x0501));
    assert_eq!(info.num_eqs, 2047);
}
