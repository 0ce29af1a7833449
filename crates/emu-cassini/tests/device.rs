//! The Cassini PCI function as a driver probes it: configuration space, BAR0 sizing, MSI-X
//! capability, identity CSRs, access classes of the CSR file, counters.

mod common;
use common::*;
use emu_core::engine::DeviceModel;
use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::pci::{CSR_BASE, MbStsRev, Platform};

#[test]
fn config_space_identity_bar0_and_msix() {
    let mut d = emu_cassini::Cassini::new(emu_cassini::CassiniConfig {
        nid: 0x12345,
        ..Default::default()
    });
    let id = d.config_read(0);
    assert_eq!(id & 0xFFFF, 0x17DB);
    assert_eq!(id >> 16, 0x0501);
    // BAR0 sizing: 64-bit memory BAR of 2 GiB.
    d.config_write(4, 0xFFFF_FFFF);
    d.config_write(5, 0xFFFF_FFFF);
    let lo = d.config_read(4);
    let hi = d.config_read(5);
    let size = !((u64::from(hi) << 32) | u64::from(lo & !0xF)) + 1;
    assert_eq!(size, 2 << 30);
    assert_eq!(lo & 0x6, 0x4, "64-bit BAR");
    assert_eq!(d.bar_size(0), 2 << 30);
    assert_eq!(d.bar_size(1), 0);
    // The MSI-X capability points into CSR space.
    let cap = (d.config_read(0x34 / 4) & 0xFF) as u16;
    let hdr = d.config_read(cap / 4);
    assert_eq!(hdr & 0xFF, 0x11);
    assert_eq!((hdr >> 16) & 0x7FF, 2047, "2048 vectors");
    let table = d.config_read(cap / 4 + 1);
    assert_eq!(
        u64::from(table & !7),
        CSR_BASE + csr::C_PI_IPD_CFG_MSIX_TABLE.offset
    );
    assert_eq!(table & 7, 0);
    let pba = d.config_read(cap / 4 + 2);
    assert_eq!(
        u64::from(pba & !7),
        CSR_BASE + csr::C_PI_IPD_CFG_MSIX_PBA.offset
    );
}

#[test]
fn identity_csrs_and_access_classes() {
    let c = Cluster::deterministic(2, 1).unwrap();
    let n = &c.nodes[1];
    let rev = u64::from_le_bytes(
        n.csr_read(csr::C_MB_STS_REV, 0).unwrap()[..8]
            .try_into()
            .unwrap(),
    );
    let r = MbStsRev::from_u64(rev);
    assert_eq!(r.platform(), Some(Platform::Netsim));
    assert_eq!((r.vendor_id, r.device_id, r.rev), (0x17DB, 0x0501, 2));
    // SRO fields ignore writes.
    n.csr_write_image(csr::C_MB_STS_REV, 0, &u64::MAX.to_le_bytes())
        .unwrap();
    let again = u64::from_le_bytes(
        n.csr_read(csr::C_MB_STS_REV, 0).unwrap()[..8]
            .try_into()
            .unwrap(),
    );
    assert_eq!(again, rev);
    // The NID, as the driver reads it under NETSIM, and the source fabric address.
    assert_eq!(
        n.csr_field(csr::NICSIM_NIC_ID, 0, f::nicsim_nic_id::ID)
            .unwrap(),
        1
    );
    assert_eq!(
        n.csr_field(csr::C_OXE_CFG_FAB_SFA, 0, f::c_oxe_cfg_fab_sfa::NID)
            .unwrap(),
        1
    );
    // Reset values come from the map; SRW fields store.
    assert_eq!(
        n.csr_field(
            csr::C_CQ_TXQ_WRPTR_TABLE,
            3,
            f::c_cq_txq_wrptr_table::MEM_Q_WR_PTR
        )
        .unwrap(),
        4
    );
    n.csr_write(
        csr::C_CQ_CFG_CP_TABLE,
        7,
        &[(f::c_cq_cfg_cp_table::VNI, 1234)],
    )
    .unwrap();
    assert_eq!(
        n.csr_field(csr::C_CQ_CFG_CP_TABLE, 7, f::c_cq_cfg_cp_table::VNI)
            .unwrap(),
        1234
    );
    // HW-owned valid bits of the RMU TCAM: set by writing _y, cleared by the invalidate strobe.
    n.csr_write(
        csr::C_RMU_CFG_VNI_LIST_Y,
        9,
        &[(f::c_rmu_cfg_vni_list_y::VNI, 0xFFF0)],
    )
    .unwrap();
    assert_eq!(
        n.csr_field(csr::C_RMU_CFG_VNI_LIST_X, 9, f::c_rmu_cfg_vni_list_x::VALID)
            .unwrap(),
        1
    );
    n.csr_write(
        csr::C_RMU_CFG_VNI_LIST_INVALIDATE,
        9,
        &[(f::c_rmu_cfg_vni_list_invalidate::INVALIDATE, 1)],
    )
    .unwrap();
    assert_eq!(
        n.csr_field(csr::C_RMU_CFG_VNI_LIST_X, 9, f::c_rmu_cfg_vni_list_x::VALID)
            .unwrap(),
        0
    );
    // Unmapped CSR space reads zero and ignores writes.
    n.bar.write_u64(CSR_BASE + 0x7ff_fff0, 5).unwrap();
    assert_eq!(n.bar.read_u64(CSR_BASE + 0x7ff_fff0).unwrap(), 0);
    // Bad MMIO: misaligned.
    assert!(n.bar.read_u64(CSR_BASE + 4).is_err());
}

#[test]
fn ptlte_table_reflects_model_state_and_counters_count() {
    let mut p = Pair::deterministic();
    let img = p
        .tgt()
        .csr_read(csr::C_LPE_CFG_PTL_TABLE, u32::from(PT_MATCH))
        .unwrap();
    assert_eq!(
        f::c_lpe_cfg_ptl_table::PTL_STATE.get(&img),
        u64::from(u8::from(PtlteState::Enabled))
    );
    assert_eq!(f::c_lpe_cfg_ptl_table::PRIO_LIST_VLD.get(&img), 0);
    let md = p.c.nodes[TGT].map(64, true, true).unwrap();
    p.target_cmd(&le_cmd(
        TgtOp::Append,
        PT_MATCH,
        PtlList::Priority,
        1,
        &md,
        LeFlags::OP_PUT,
        1,
        0,
    ));
    p.c.settle();
    let img = p
        .tgt()
        .csr_read(csr::C_LPE_CFG_PTL_TABLE, u32::from(PT_MATCH))
        .unwrap();
    assert_eq!(f::c_lpe_cfg_ptl_table::PRIO_LIST_VLD.get(&img), 1);
    // The driver disables the PtlTE by writing the table: incoming requests are dropped and
    // counted.
    let mut img = img;
    f::c_lpe_cfg_ptl_table::PTL_STATE.set(&mut img, u64::from(u8::from(PtlteState::Disabled)));
    p.tgt()
        .csr_write_image(csr::C_LPE_CFG_PTL_TABLE, u32::from(PT_MATCH), &img)
        .unwrap();
    let cs = p.cstate(
        0,
        DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
    );
    let m = IdcMsg {
        dfa: p.dfa(0).0,
        match_bits: 1,
        payload: Payload::new(&[1; 8]).unwrap(),
        ..IdcMsg::default()
    }
    .encode()
    .unwrap();
    p.tx(&[&cs, &m]);
    p.c.settle();
    assert_eq!(init_fields(&p.wait_tx()).1, ReturnCode::PtDisabled);
    let img = p
        .tgt()
        .csr_read(csr::C_LPE_CFG_PTL_TABLE, u32::from(PT_MATCH))
        .unwrap();
    assert_eq!(f::c_lpe_cfg_ptl_table::DROP_COUNT.get(&img), 1);
    // Counters under their public names, in the event-counter arrays.
    let cq = csr::lookup("c_cq_cntrs").unwrap();
    let fld = cq.field("success_tx_cntr").unwrap();
    let off = CSR_BASE + cq.offset + u64::from(fld.bit / 8);
    assert!(p.init().bar.read_u64(off).unwrap() >= 2);
    let lpe = csr::lookup("c_lpe_cntrs").unwrap();
    let fld = lpe.field("put_cmds").unwrap();
    let off = CSR_BASE + lpe.offset + u64::from(fld.bit / 8);
    assert_eq!(p.tgt().bar.read_u64(off).unwrap(), 1);
}
