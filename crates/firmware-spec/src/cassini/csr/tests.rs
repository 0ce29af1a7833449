//! Tests of the generated CSR table against facts from the public sources
//! (`csr_defs.json`, `cassini.md` §1.2, anchors §5.1).

use super::*;
use crate::cassini::pci;

const GENS: [Generation; 2] = [Generation::Cassini1, Generation::Cassini2];

#[test]
fn table_size_and_order() {
    // csr_defs.json holds 1,164 CSRs.
    assert_eq!(CSRS.len(), 1164);
    assert_eq!(all().len(), 1164);
    for w in CSRS.windows(2) {
        assert!((w[0].offset, w[0].name) < (w[1].offset, w[1].name));
    }
    let fields: usize = CSRS.iter().map(|c| c.fields.len()).sum();
    assert_eq!(fields, 6197 + 988 + 233);
}

#[test]
fn lpe_cfg_ptl_table() {
    let c = lookup("c_lpe_cfg_ptl_table").unwrap();
    assert!(core::ptr::eq(c, C_LPE_CFG_PTL_TABLE));
    assert_eq!(c.offset, 0x981_0000);
    assert_eq!((c.size, c.entries), (32, 2048));
    assert_eq!(c.block(), Block::Lpe);
    assert_eq!(c.revision(), None);
    assert_eq!(c.bar0_offset(0), Some(0x4981_0000));
    let eq = c.field("eq_handle").unwrap();
    assert_eq!(
        (eq.bit, eq.width, eq.sw, eq.hw, eq.reset),
        (16, 11, SwAccess::Srw, HwAccess::Hro, 0)
    );
    let st = c.field("PTL_STATE").unwrap();
    assert_eq!((st.bit, st.width, st.hw), (192, 3, HwAccess::Hrw));
    let en = c.field("en_sw_hw_st_chng").unwrap();
    assert_eq!((en.bit, en.width, en.reset), (63, 1, 1));
    let dc = fields::c_lpe_cfg_ptl_table::DROP_COUNT;
    assert_eq!((dc.name, dc.bit, dc.width), ("drop_count", 224, 24));
    for f in [
        "en_flowctrl",
        "is_matching",
        "use_logical",
        "prio_head",
        "ovf_tail",
        "unexp_head",
    ] {
        assert!(c.field(f).is_some(), "{f}");
    }
    assert!(c.field("no_such_field").is_none());
}

#[test]
fn other_spot_checks() {
    let c = lookup("C_EE_CFG_EQ_SW_STATE").unwrap();
    assert_eq!((c.offset, c.size, c.entries), (0x880_4000, 8, 2048));
    assert_eq!(c.block(), Block::Ee);
    assert_eq!(c.field("rd_ptr").map(|f| (f.bit, f.width)), Some((0, 26)));

    let c = C_CQ_TXQ_WRPTR_TABLE;
    assert_eq!((c.offset, c.size, c.entries), (0x1_8000, 8, 1024));
    assert_eq!(c.block(), Block::Cq);
    // The write pointer resets to C_CQ_FIRST_WR_PTR = 4.
    assert_eq!(c.field("mem_q_wr_ptr").map(|f| f.reset), Some(4));

    let c = lookup("c_mb_sts_rev").unwrap();
    assert_eq!(c.offset, pci::MB_STS_REV_OFFSET);
    assert_eq!(c.offset, 0x1000_4008);
    assert_eq!(c.block(), Block::Mb);
    let f = |n: &str| c.field(n).map(|f| (f.bit, f.width, f.reset));
    assert_eq!(f("rev"), Some((0, 16, 2)));
    assert_eq!(f("device_id"), Some((16, 16, 0x0501)));
    assert_eq!(f("vendor_id"), Some((32, 16, 0x17db)));
    assert_eq!(f("proto"), Some((48, 12, 0)));
    assert_eq!(f("platform"), Some((60, 4, 0)));
    let reset = u64::from_le_bytes(c.reset_bytes().try_into().unwrap());
    assert_eq!(
        pci::MbStsRev::from_u64(reset).version(),
        Some(pci::CassiniVersion::Cassini1_1)
    );
    for (name, (bit, width)) in [
        ("rev", pci::MbStsRev::REV),
        ("device_id", pci::MbStsRev::DEVICE_ID),
        ("vendor_id", pci::MbStsRev::VENDOR_ID),
        ("proto", pci::MbStsRev::PROTO),
        ("platform", pci::MbStsRev::PLATFORM),
    ] {
        assert_eq!(f(name).map(|x| (x.0, x.1)), Some((bit, width)), "{name}");
    }

    let n = NICSIM_NIC_ID;
    assert_eq!(n.offset, pci::NICSIM_NIC_ID_OFFSET);
    assert!(n.netsim_only());
    assert_eq!(n.block(), Block::Netsim);
    // "srw hro" is spelled in lower case in the JSON.
    assert_eq!(n.fields[0].sw, SwAccess::Srw);
    assert_eq!(
        lookup("nicsim_config_state").map(|c| c.offset),
        Some(0x27ff_f018)
    );
    assert_eq!(lookup("nicsim_cable").map(|c| c.offset), Some(0x27ff_f110));

    assert_eq!(lookup("c_cq_cfg_cp_table").map(|c| c.entries), Some(256));
    assert_eq!(lookup("c_cq_cfg_cid_array").map(|c| c.entries), Some(4096));
    assert_eq!(
        lookup("c_lpe_sts_list_entries").map(|c| c.entries),
        Some(65536)
    );
    assert!(lookup("c_no_such_csr").is_none());
    assert!(lookup("").is_none());
}

#[test]
fn access_classes() {
    let sw = |c: &Csr, f: &str| c.field(f).map(|f| (f.sw, f.hw));
    assert_eq!(
        sw(C_ATU_ERR_FLG, "sw_diag"),
        Some((SwAccess::Srw1, HwAccess::Hrw))
    );
    assert!(SwAccess::Srw1.write_one_to_clear());
    assert_eq!(
        sw(C_MB_STS_CRMC, "ring_sync_error"),
        Some((SwAccess::Srw1c, HwAccess::Hwo))
    );
    assert_eq!(
        sw(C_MB_DBG_SCRATCH, "scratch"),
        Some((SwAccess::Srw, HwAccess::Hna))
    );
    assert_eq!(
        sw(C_MB_MSC_FLASH_WINDOW0, "data"),
        Some((SwAccess::Sro, HwAccess::Unspecified))
    );
    assert!(!SwAccess::Sro.sw_writable());
    // A view: counter names with no access class.
    assert!(!C_CQ_CNTRS.is_register());
    assert!(
        C_CQ_CNTRS
            .fields
            .iter()
            .all(|f| f.sw == SwAccess::Unspecified && f.reset == 0)
    );
    assert!(C_CQ_STS_EVENT_CNTS.is_register());
}

#[test]
fn every_field_fits_its_entry() {
    for c in &CSRS {
        assert!(c.size > 0 && c.entries > 0, "{}", c.name);
        assert!(c.struct_size <= c.size, "{}", c.name);
        for f in c.fields {
            assert!(f.width >= 1, "{}.{}", c.name, f.name);
            assert!(f.end_bit() <= c.size * 8, "{}.{}", c.name, f.name);
            if f.is_register_field() {
                assert!(f.width <= 64, "{}.{}", c.name, f.name);
                assert_eq!(f.reset & !f.value_mask(), 0, "{}.{}", c.name, f.name);
            }
        }
        // Register fields of one entry never overlap each other.
        let regf: Vec<_> = c.fields.iter().filter(|f| f.is_register_field()).collect();
        for (i, a) in regf.iter().enumerate() {
            for b in &regf[i + 1..] {
                assert!(
                    a.end_bit() <= b.bit || b.end_bit() <= a.bit,
                    "{}: {} / {}",
                    c.name,
                    a.name,
                    b.name
                );
            }
        }
    }
}

#[test]
fn every_csr_in_the_region_and_a_block() {
    for c in &CSRS {
        assert!(c.end() <= CSR_SIZE, "{}", c.name);
        let b = Block::of(c.offset).unwrap_or_else(|| panic!("{} outside every block", c.name));
        assert_eq!(c.block(), b);
        // The whole CSR stays inside its block's window.
        assert!(c.end() <= b.base() + b.window(), "{}", c.name);
        assert_eq!(c.netsim_only(), b == Block::Netsim, "{}", c.name);
    }
    for w in Block::ALL.windows(2) {
        assert!(w[0].base() + w[0].window() <= w[1].base());
    }
}

#[test]
fn revisions() {
    assert_eq!(
        lookup("c1_oxe_cntrs").and_then(|c| c.revision()),
        Some(Generation::Cassini1)
    );
    assert_eq!(
        lookup("c2_oxe_cntrs").and_then(|c| c.revision()),
        Some(Generation::Cassini2)
    );
    assert_eq!(
        lookup("ss2_port_pml_cfg_crnc").and_then(|c| c.revision()),
        Some(Generation::Cassini2)
    );
    assert!(!C1_PCT_CFG_TRS_RAM0.applies_to(Generation::Cassini2));
    // Same offset, different depth on the two revisions.
    assert_eq!(C1_PCT_CFG_TRS_RAM0.offset, C2_PCT_CFG_TRS_RAM0.offset);
    assert_eq!(
        (C1_PCT_CFG_TRS_RAM0.entries, C2_PCT_CFG_TRS_RAM0.entries),
        (2048, 8192)
    );
    let off = C2_PCT_CFG_TRS_RAM0.entry_offset(4000).unwrap();
    assert_eq!(
        at_offset(Generation::Cassini2, off).map(|h| (h.csr.name, h.entry)),
        Some(("c2_pct_cfg_trs_ram0", 4000))
    );
    assert!(
        at_offset(Generation::Cassini1, off).is_none_or(|h| h.csr.name != "c1_pct_cfg_trs_ram0")
    );
    let counts = |g| CSRS.iter().filter(|c| c.revision() == g).count();
    assert_eq!(counts(None), 866 + 5);
    assert_eq!(counts(Some(Generation::Cassini1)), 115);
    assert_eq!(counts(Some(Generation::Cassini2)), 91 + 87);
}

/// Registers of one generation never overlap, except where a revision-specific register is an
/// exact duplicate of a common one; every overlap otherwise involves a view.
#[test]
fn no_unexpected_overlap() {
    for g in GENS {
        let cs: Vec<&Csr> = CSRS.iter().filter(|c| c.applies_to(g)).collect();
        for (i, a) in cs.iter().enumerate() {
            for b in &cs[i + 1..] {
                if a.offset < b.end() && b.offset < a.end() {
                    let dup = a.offset == b.offset
                        && a.size == b.size
                        && a.entries == b.entries
                        && a.fields == b.fields;
                    assert!(
                        !a.is_register() || !b.is_register() || dup,
                        "{:?}: {} overlaps {}",
                        g,
                        a.name,
                        b.name
                    );
                }
            }
        }
        // The decode table is sorted and disjoint.
        let regs: Vec<&Csr> = map(g).registers().collect();
        assert!(regs.iter().all(|c| c.is_register() && c.applies_to(g)));
        for w in regs.windows(2) {
            assert!(w[0].end() <= w[1].offset, "{} / {}", w[0].name, w[1].name);
        }
    }
}

/// Every view lies inside storage that registers of its generation cover, and decodes to one.
#[test]
fn views_are_covered_by_registers() {
    for g in GENS {
        for v in CSRS.iter().filter(|c| !c.is_register() && c.applies_to(g)) {
            for off in [v.offset, v.end() - 1, v.offset + v.span() / 2] {
                let hit =
                    at_offset(g, off).unwrap_or_else(|| panic!("{:?}: {} at {off:#x}", g, v.name));
                assert!(hit.csr.is_register());
                assert!(map(g).covering(off).any(|h| core::ptr::eq(h.csr, v)));
            }
        }
    }
    // The counter names over the CQ event-counter array.
    let hit = at_offset(Generation::Cassini1, C_TOU_CNTRS.offset + 16).unwrap();
    assert_eq!(
        (hit.csr.name, hit.entry, hit.byte),
        ("c_cq_sts_event_cnts", 0x410 / 8, 0)
    );
}

#[test]
fn at_offset_round_trips_entry_offset() {
    for g in GENS {
        let m = map(g);
        assert_eq!(m.generation(), g);
        for c in m.registers() {
            let last = c.entries - 1;
            for i in [0, last / 2, last] {
                let off = c.entry_offset(i).unwrap();
                for byte in [0, c.size - 1] {
                    let hit = m.at_offset(off + u64::from(byte)).unwrap();
                    assert!(core::ptr::eq(hit.csr, c), "{} vs {}", hit.csr.name, c.name);
                    assert_eq!((hit.entry, hit.byte), (i, byte));
                }
            }
            assert_eq!(c.entry_offset(c.entries), None);
            assert_eq!(c.bar0_offset(c.entries), None);
        }
    }
}

#[test]
fn at_offset_holes() {
    let m = map(Generation::Cassini1);
    // Gaps between consecutive registers decode to nothing.
    let regs: Vec<&Csr> = m.registers().collect();
    let mut gaps = 0;
    for w in regs.windows(2) {
        if w[0].end() < w[1].offset {
            gaps += 1;
            assert!(m.at_offset(w[0].end()).is_none());
            assert!(m.at_offset(w[1].offset - 1).is_none());
        }
    }
    assert!(gaps > 10);
    assert!(m.at_offset(CSR_SIZE).is_none());
    assert!(m.at_offset(u64::MAX).is_none());
    assert!(m.at_offset(0x2000_0000).is_none());
}

#[test]
fn reset_bytes_hold_each_reset() {
    let mut nonzero = 0;
    for c in &CSRS {
        let b = c.reset_bytes();
        assert_eq!(b.len(), c.size as usize);
        for f in c.fields.iter().filter(|f| f.is_register_field()) {
            assert_eq!(f.get(&b), f.reset, "{}.{}", c.name, f.name);
        }
        // Bits outside every register field are 0.
        let mut covered = vec![0u8; b.len()];
        for f in c.fields.iter().filter(|f| f.is_register_field()) {
            f.set(&mut covered, u64::MAX);
        }
        assert!(
            b.iter().zip(&covered).all(|(v, m)| v & !m == 0),
            "{}",
            c.name
        );
        nonzero += usize::from(b.iter().any(|&x| x != 0));
    }
    assert!(nonzero > 50);
    // A golden image: c_cq_txq_wrptr_table resets mem_q_wr_ptr[0:16] to 4.
    assert_eq!(
        C_CQ_TXQ_WRPTR_TABLE.reset_bytes(),
        vec![4, 0, 0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn field_get_set() {
    let c = C_LPE_CFG_PTL_TABLE;
    let mut e = c.reset_bytes();
    let f = fields::c_lpe_cfg_ptl_table::EQ_HANDLE;
    f.set(&mut e, 0x7ff);
    assert_eq!(f.get(&e), 0x7ff);
    // eq_handle is bits 16..27: bytes 2 and 3.
    assert_eq!((e[2], e[3] & 0x7), (0xff, 0x7));
    f.set(&mut e, 0xffff_ffff);
    assert_eq!(f.get(&e), 0x7ff, "truncated to 11 bits");
    assert_eq!(e[3] & 0xf8, 0, "neighbouring bits unchanged");
    assert_eq!(c.field("en_sw_hw_st_chng").map(|f| f.get(&e)), Some(1));
    // A view field wider than 64 bits: low 64 bits read back, the rest zeroed.
    let w = fields::c_cq_cntrs::NUM_TXQ_CMD_READS;
    assert_eq!(w.width, 256);
    let mut b = vec![0xffu8; C_CQ_CNTRS.size as usize];
    w.set(&mut b, 5);
    assert_eq!(w.get(&b), 5);
    let lo = w.bit as usize / 8;
    assert_eq!(&b[lo..lo + 8], &5u64.to_le_bytes());
    assert!(b[lo + 8..lo + 32].iter().all(|&x| x == 0));
    assert_eq!(b[lo - 1], 0xff);
    assert_eq!(b[lo + 32], 0xff);
}

#[test]
fn lookup_every_name_any_case() {
    for c in &CSRS {
        assert!(core::ptr::eq(lookup(c.name).unwrap(), c));
        assert!(core::ptr::eq(
            lookup(&c.name.to_ascii_uppercase()).unwrap(),
            c
        ));
        for f in c.fields {
            assert!(core::ptr::eq(
                c.field(&f.name.to_ascii_uppercase()).unwrap(),
                f
            ));
        }
    }
}

#[test]
fn block_bases() {
    let want = [
        ("CQ", 0x0),
        ("PCT", 0x80_0000),
        ("HNI", 0x100_0000),
        ("HNI_PML", 0x180_0000),
        ("RMU", 0x200_0000),
        ("IXE", 0x280_0000),
        ("ATU", 0x800_0000),
        ("EE", 0x880_0000),
        ("PARBS", 0x900_0000),
        ("LPE", 0x980_0000),
        ("MST", 0xa00_0000),
        ("OXE", 0xa80_0000),
        ("MB", 0x1000_0000),
        ("PI", 0x1080_0000),
        ("PI_IPD", 0x1100_0000),
    ];
    for (b, (name, base)) in Block::ALL.iter().zip(want) {
        assert_eq!((b.name(), b.base()), (name, base));
        assert_eq!(Block::of(base), Some(*b));
    }
    assert_eq!(Block::of(0x300_0000), None);
    assert_eq!(Block::of(0x27ff_f060), Some(Block::Netsim));
    assert_eq!(Block::of(CSR_SIZE), None);
    assert_eq!(CSR_BASE, 0x4000_0000);
    assert_eq!(CSR_SIZE, 0x2800_0000);
}
