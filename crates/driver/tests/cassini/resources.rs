//! Exhaustion gives a clean error and freeing makes room again; the ATU maps what it is given
//! into NTA page tables the device walks, and refuses bad ranges.

use driver::cassini::uapi::*;
use driver::cassini::{DriverConfig, Errno};
use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::dfa::C_PID_ANY;
use firmware_spec::cassini::le::MapFlags;

use crate::common::*;

/// Allocate with `alloc` until it fails; the failure must be `ENOSPC` after exactly `want`
/// successes. Returns the handles.
fn exhaust(what: &str, want: usize, mut alloc: impl FnMut() -> Result<u32, Errno>) -> Vec<u32> {
    let mut got = Vec::new();
    loop {
        match alloc() {
            Ok(h) => got.push(h),
            Err(e) => {
                assert_eq!(e, Errno::Enospc, "{what}: after {} allocations", got.len());
                break;
            }
        }
        assert!(got.len() <= want, "{what}: more than {want}");
    }
    assert_eq!(got.len(), want, "{what}");
    got
}

#[test]
fn queues_and_table_entries_run_out_cleanly() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let buf = c.alloc_user_memory(4096).unwrap();

    let tx = exhaust("TX CQs", 1024, || cq(&c, l, 0, true, 64).map(|r| r.cq));
    let tg = exhaust("target CQs", 512, || cq(&c, l, 0, false, 64).map(|r| r.cq));
    assert!(
        tg.iter().all(|&h| h >= 1024),
        "target CQ handles are 1024 + n"
    );
    // Freeing one makes room for exactly one.
    c.call(&CqFreeCmd {
        cq: tx[17],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(cq(&c, l, 0, true, 64).unwrap().cq, tx[17]);
    assert_eq!(cq(&c, l, 0, true, 64).unwrap_err(), Errno::Enospc);

    let eqs = exhaust("EQs", 2047, || eq_passthrough(&c, l, &buf).map(|r| r.eq));
    assert!(!eqs.contains(&0), "EQ 0 is never handed out");
    let ptes = exhaust("PtlTEs", 2047, || pte(&c, l, 0));
    assert!(!ptes.contains(&0), "PtlTE 0 is never handed out");
    let cts = exhaust("CTs", 2047, || ct(&c, l, buf.va()).map(|r| r.ctn));
    assert!(!cts.contains(&0), "CT 0 is never handed out");
    exhaust("wait objects", 128, || wait(&c, l));
    exhaust("LCIDs of one LNI", 15, || cp(&c, l).map(|r| r.lcid));
    // PIDs of one VNI: 511, the top value being the wildcard.
    let doms = exhaust("PIDs", 511, || any_domain(&c, l).map(|r| r.pid));
    assert_eq!(doms.iter().max(), Some(&510));
    assert_eq!(
        domain(&c, l, 511).unwrap_err(),
        Errno::Enospc,
        "511 is C_PID_ANY"
    );
    assert_eq!(domain(&c, l, 512).unwrap_err(), Errno::Einval);
    let resv = c.call(&DomainReserveCmd {
        lni: l,
        vni: 1,
        pid: C_PID_ANY,
        count: 600,
        ..Default::default()
    });
    assert_eq!(resv.unwrap_err(), Errno::Einval, "more PIDs than exist");
    // LNIs: 255 resource groups (RGID 0 reserved); this client already has one.
    exhaust("LNIs", 254, || lni(&c));

    let initial = d.initial_free_counts();
    drop(buf);
    c.close();
    assert_eq!(d.free_counts(), initial);
}

#[test]
fn iova_space_runs_out_and_comes_back() {
    let pages = 64u64;
    let cl = cluster_with(DriverConfig {
        iova_size: pages * 4096,
        ..DriverConfig::default()
    });
    let d = dev(&cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let big = c.alloc_user_memory((pages + 1) * 4096).unwrap();
    assert_eq!(
        map(&c, l, big.va(), (pages + 1) * 4096).unwrap_err(),
        Errno::Enospc
    );
    let a = map(&c, l, big.va(), 40 * 4096).unwrap();
    let b = map(&c, l, big.va() + 40 * 4096, 24 * 4096).unwrap();
    assert_eq!(map(&c, l, big.va(), 4096).unwrap_err(), Errno::Enospc);
    c.call(&AtuUnmapCmd {
        id: b.id,
        ..Default::default()
    })
    .unwrap();
    let again = map(&c, l, big.va(), 24 * 4096).unwrap();
    assert_eq!(again.md.iova, b.md.iova, "first fit reuses the freed range");
    c.call(&AtuUnmapCmd {
        id: a.id,
        ..Default::default()
    })
    .unwrap();
    c.call(&AtuUnmapCmd {
        id: again.id,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        d.free_counts().acs,
        d.initial_free_counts().acs,
        "the AC goes with its last MD"
    );
}

/// Walk the NTA tables of `acid` the way the device does (docs/cassini-programming.md):
/// root from `c_atu_cfg_ac_table`, 5 levels of 9 bits over IOVA bits 12..57.
fn walk(d: &driver::cassini::CxiDevice, acid: u32, iova: u64) -> Option<(u64, bool, bool)> {
    let ac = d.hw().read_entry(csr::C_ATU_CFG_AC_TABLE, acid).unwrap();
    if f::c_atu_cfg_ac_table::CONTEXT_EN.get(&ac) == 0
        || f::c_atu_cfg_ac_table::TA_MODE.get(&ac) != 1
    {
        return None;
    }
    let mut table = f::c_atu_cfg_ac_table::NTA_ROOT_PTR.get(&ac) << 12;
    let mut b = [0u8; 8];
    for level in 0..5u32 {
        let idx = (iova >> (12 + 9 * (4 - level))) & 511;
        d.memory().read(table + idx * 8, &mut b).unwrap();
        let pte = u64::from_le_bytes(b);
        if pte >> 60 & 1 == 0 {
            return None;
        }
        let addr = pte & ((1 << 57) - 1) & !0x3f;
        if level == 4 {
            assert_eq!(pte >> 59 & 1, 1, "leaf bit");
            return Some((addr, pte >> 57 & 1 == 1, pte >> 58 & 1 == 1));
        }
        table = addr;
    }
    None
}

#[test]
fn atu_maps_through_nta_tables_and_refuses_bad_ranges() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let buf = c.alloc_user_memory(5 * 4096).unwrap();
    let md = map(&c, l, buf.va() + 4096 + 10, 2 * 4096).unwrap().md;
    assert_eq!(md.va, buf.va() + 4096, "page aligned down");
    assert_eq!(md.len, 3 * 4096, "whole pages covering the range");
    assert_eq!(md.iova % 4096, 0);
    assert_eq!(md.lac, 0);
    // The LNI's LAC 0 points at an NTA AC whose tables translate each page.
    let rgid = l;
    let acid = d
        .hw()
        .read_field(csr::C_CQ_CFG_AC_ARRAY, rgid * 8, f::c_cq_cfg_ac_array::AC)
        .unwrap() as u32;
    assert!(acid >= 2, "a user AC (0 invalid, 1 physical)");
    for p in 0..3 {
        let (addr, r, w) = walk(&d, acid, md.iova + p * 4096).unwrap();
        assert_eq!(addr, buf.va() + 4096 + p * 4096);
        assert!(r && w);
    }
    assert_eq!(walk(&d, acid, md.iova + 3 * 4096), None);
    // Read-only mappings have w clear.
    let ro = c
        .call(&AtuMapCmd {
            lni: l,
            va: buf.va(),
            len: 4096,
            flags: (MapFlags::PIN | MapFlags::READ).bits(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(walk(&d, acid, ro.md.iova), Some((buf.va(), true, false)));

    // Bad ranges and flags.
    assert_eq!(
        map(&c, l, u64::MAX - 100, 200).unwrap_err(),
        Errno::Einval,
        "wraps"
    );
    assert_eq!(
        map(&c, l, u64::MAX - 4095, 4095).unwrap_err(),
        Errno::Einval,
        "rounds past the end"
    );
    assert_eq!(map(&c, l, buf.va(), 0).unwrap_err(), Errno::Einval, "empty");
    assert_eq!(
        map(&c, l, buf.va(), 6 * 4096).unwrap_err(),
        Errno::Efault,
        "past the buffer"
    );
    assert_eq!(
        map(&c, l, 0x10, 4096).unwrap_err(),
        Errno::Efault,
        "not mapped"
    );
    // Neither READ nor WRITE: registered, with no access granted (cass_nta.c; libcxi's
    // map/basic_map_test maps with CXI_MAP_PIN alone).
    let no_perm = c
        .call(&AtuMapCmd {
            lni: l,
            va: buf.va(),
            len: 4096,
            flags: MapFlags::PIN.bits(),
            ..Default::default()
        })
        .unwrap();
    c.call(&AtuUnmapCmd {
        id: no_perm.id,
        ..Default::default()
    })
    .unwrap();
    let unknown = c.call(&AtuMapCmd {
        lni: l,
        va: buf.va(),
        len: 4096,
        flags: 1 << 20,
        ..Default::default()
    });
    assert_eq!(unknown.unwrap_err(), Errno::Einval);

    // Unmap clears the translation; a second unmap is an error.
    let id = md.id;
    c.call(&AtuUnmapCmd {
        id,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(walk(&d, acid, md.iova), None);
    assert_eq!(
        c.call(&AtuUnmapCmd {
            id,
            ..Default::default()
        })
        .unwrap_err(),
        Errno::Einval
    );
    assert_eq!(
        c.call(&AtuUnmapCmd {
            id: 4242,
            ..Default::default()
        })
        .unwrap_err(),
        Errno::Einval
    );

    // ALLOC_MD reserves IOVA only; ATU_UPDATE_MD fills it, inside the MD's range only.
    let res = c
        .call(&AtuMapCmd {
            lni: l,
            va: buf.va(),
            len: 2 * 4096,
            flags: (MapFlags::ALLOC_MD | MapFlags::READ | MapFlags::WRITE).bits(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(walk(&d, acid, res.md.iova), None);
    let upd = |va: u64, len: u64| {
        c.call(&AtuUpdateMdCmd {
            id: res.id,
            va,
            len,
            flags: (MapFlags::READ | MapFlags::WRITE).bits(),
            ..Default::default()
        })
    };
    upd(buf.va() + 4096, 4096).unwrap();
    assert_eq!(
        walk(&d, acid, res.md.iova + 4096).map(|t| t.0),
        Some(buf.va() + 4096)
    );
    assert_eq!(walk(&d, acid, res.md.iova), None);
    assert_eq!(
        upd(buf.va() + 2 * 4096, 4096).unwrap_err(),
        Errno::Einval,
        "outside the MD"
    );
    assert_eq!(upd(u64::MAX - 10, 20).unwrap_err(), Errno::Einval, "wraps");

    // The pages stay pinned by the MD after the process drops the buffer.
    let host_free = d.memory().free_bytes();
    drop(buf);
    assert_eq!(d.memory().free_bytes(), host_free, "pinned");
    let initial = d.initial_free_counts();
    c.close();
    assert_eq!(d.free_counts(), initial);
    assert!(d.memory().free_bytes() > host_free, "unpinned at close");
}
