//! The uAPI's checks (length, opcode, admin-only, response buffer), mmap tokens, services,
//! reset.

use driver::cassini::uapi::*;
use driver::cassini::{Errno, Opcode};
use zerocopy::IntoBytes;

use crate::common::*;

#[test]
fn requests_are_checked_like_the_driver_dispatch() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let mut resp = [0u8; 256];
    let req = LniAllocCmd {
        op: Opcode::LniAlloc as u32,
        svc_id: 1,
        ..Default::default()
    };
    let b = req.as_bytes();
    // Exact length only.
    assert_eq!(c.write(&b[..20], &mut resp), Err(Errno::Einval));
    let mut long = b.to_vec();
    long.push(0);
    assert_eq!(c.write(&long, &mut resp), Err(Errno::Einval));
    assert_eq!(c.write(&[], &mut resp), Err(Errno::Einval));
    // Opcode range: INVALID and >= CXI_OP_MAX are EINVAL; obsolete and unimplemented slots
    // have no handler.
    assert_eq!(c.write(&0u32.to_le_bytes(), &mut resp), Err(Errno::Einval));
    assert_eq!(
        c.write(&CXI_OP_MAX.to_le_bytes(), &mut resp),
        Err(Errno::Einval)
    );
    assert_eq!(
        c.write(&u32::MAX.to_le_bytes(), &mut resp),
        Err(Errno::Einval)
    );
    let obsolete = (Opcode::ObsoleteMapTelemetry as u32).to_le_bytes();
    assert_eq!(c.write(&obsolete, &mut resp), Err(Errno::Eopnotsupp));
    let sbus = (Opcode::SbusOp as u32).to_le_bytes();
    assert_eq!(c.write(&sbus, &mut resp), Err(Errno::Eopnotsupp));
    // A response buffer too small for the response is a fault.
    assert_eq!(c.write(b, &mut resp[..3]), Err(Errno::Efault));
    // The right length works, and returns the length written.
    assert_eq!(c.write(b, &mut resp), Ok(24));
    let lni = u32::from_le_bytes(resp[..4].try_into().unwrap());
    assert!(lni >= 1);
    // Admin-only operations.
    let svc = SvcAllocCmd::default();
    assert_eq!(c.call(&svc).unwrap_err(), Errno::Eperm);
    let csrs = As::<{ Opcode::MapCsrs as u32 }, _>(NoArgCmd::default());
    assert_eq!(c.call(&csrs).unwrap_err(), Errno::Eperm);
    let admin = d.open_admin();
    let tok = admin.call(&csrs).unwrap().csr;
    let win = admin.mmap_token(&tok).unwrap().mmio().unwrap();
    // The CSR window reads c_mb_sts_rev.
    let rev = win
        .read_u64(firmware_spec::cassini::pci::MB_STS_REV_OFFSET)
        .unwrap();
    assert_eq!(rev >> 32 & 0xffff, 0x17db);
}

#[test]
fn mmap_needs_the_exact_token() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let q = cq(&c, l, 0, true, 1000).unwrap();
    assert_eq!(
        q.count, 1024,
        "rounded up to a power-of-two number of pages"
    );
    assert_eq!(q.cmds.size, 64 << 10);
    assert_eq!(q.wp_addr.size, 4096);
    assert_eq!(q.cmds.offset % 4096, 0);
    assert_eq!(q.cmds.offset, 4096, "tokens start one page in");
    assert_ne!(q.cmds.offset, q.wp_addr.offset);
    assert_eq!(
        c.mmap(q.cmds.offset, 4096).unwrap_err(),
        Errno::Einval,
        "wrong size"
    );
    assert_eq!(
        c.mmap(q.cmds.offset + 4096, q.cmds.size).unwrap_err(),
        Errno::Einval
    );
    assert_eq!(c.mmap(0, 4096).unwrap_err(), Errno::Einval);
    let ring = c.mmap_token(&q.cmds).unwrap();
    let launch = c.mmap_token(&q.wp_addr).unwrap();
    assert!(ring.memory().is_some() && launch.mmio().is_some());
    // The launch window is one page of BAR0: nothing beyond it.
    let m = launch.mmio().unwrap();
    assert!(m.write_u64(4096, 0).is_err());
    // Closing the client revokes its mappings.
    drop(c);
    assert!(ring.memory().unwrap().read_u64(0).is_err());
    assert!(m.read_u64(0).is_err());
}

#[test]
fn services_are_admin_objects_with_limits() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let admin = d.open_admin();
    let mut desc = SvcDesc {
        bits: 0b1_1010, // restricted_vnis | resource_limits | enable
        num_vld_vnis: 1,
        ..Default::default()
    };
    desc.vnis[0] = 77;
    desc.limits[1] = Limits { max: 2, res: 0 }; // TXQs
    desc.limits[3] = Limits { max: 10, res: 0 };
    let svc = admin
        .call(&SvcAllocCmd {
            svc_desc: desc,
            ..Default::default()
        })
        .unwrap()
        .svc_id;
    assert!(svc > 1);
    let user = d.open();
    let l = user
        .call(&LniAllocCmd {
            svc_id: svc,
            ..Default::default()
        })
        .unwrap()
        .lni;
    cq(&user, l, 0, true, 64).unwrap();
    cq(&user, l, 0, true, 64).unwrap();
    assert_eq!(
        cq(&user, l, 0, true, 64).unwrap_err(),
        Errno::Enospc,
        "service limit"
    );
    let dom = user.call(&DomainAllocCmd {
        lni: l,
        vni: 77,
        pid: 3,
        ..Default::default()
    });
    assert_eq!(dom.unwrap().pid, 3);
    // VNIs are authorized by profile, device-wide: VNI 10 is the open default service's,
    // usable from this LNI too; VNI 78 is no enabled service's.
    let other = user.call(&DomainAllocCmd {
        lni: l,
        vni: 10,
        pid: 3,
        ..Default::default()
    });
    assert_eq!(other.unwrap().vni, 10);
    let none = user.call(&DomainAllocCmd {
        lni: l,
        vni: 78,
        pid: 3,
        ..Default::default()
    });
    assert_eq!(none.unwrap_err(), Errno::Einval, "VNI of no service");
    let use_ = user
        .call(&As::<{ Opcode::SvcRsrcGet as u32 }, _>(SvcIdCmd {
            svc_id: svc,
            ..Default::default()
        }))
        .unwrap();
    assert_eq!(use_.in_use[1], 2);
    // Busy while an LNI uses it; destroyable after.
    assert_eq!(
        admin
            .call(&SvcDestroyCmd {
                svc_id: svc,
                ..Default::default()
            })
            .unwrap_err(),
        Errno::Ebusy
    );
    drop(user);
    admin
        .call(&SvcDestroyCmd {
            svc_id: svc,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        admin
            .call(&SvcDestroyCmd {
                svc_id: 1,
                ..Default::default()
            })
            .unwrap_err(),
        Errno::Einval,
        "the default service stays"
    );
    // Bad descriptors.
    let mut bad = SvcDesc {
        bits: 0b1_0010,
        ..Default::default()
    };
    assert_eq!(
        admin
            .call(&SvcAllocCmd {
                svc_desc: bad,
                ..Default::default()
            })
            .unwrap_err(),
        Errno::Einval
    );
    bad.bits = 0b1_1000;
    bad.limits[0] = Limits { max: 5000, res: 0 };
    assert_eq!(
        admin
            .call(&SvcAllocCmd {
                svc_desc: bad,
                ..Default::default()
            })
            .unwrap_err(),
        Errno::Einval
    );
    // Disabled services take no LNIs (cass_lni.c: EKEYREVOKED).
    admin
        .call(&SvcEnableCmd {
            svc_id: 1,
            enable: 0,
            ..Default::default()
        })
        .unwrap();
    let u2 = d.open();
    assert_eq!(lni(&u2).unwrap_err(), Errno::Ekeyrevoked);
    admin
        .call(&SvcEnableCmd {
            svc_id: 1,
            enable: 1,
            ..Default::default()
        })
        .unwrap();
    assert!(lni(&u2).is_ok());
    // The service list, copied into user memory.
    let list = u2.alloc_user_memory(4096).unwrap();
    let n = u2
        .call(&As::<{ Opcode::SvcListGet as u32 }, _>(SvcListGetCmd {
            count: 8,
            list: list.va(),
            ..Default::default()
        }))
        .unwrap()
        .count;
    assert_eq!(n, 1);
    let mut b = [0u8; 68];
    list.read(0, &mut b).unwrap();
    assert_eq!(
        u32::from_le_bytes(b[64..68].try_into().unwrap()),
        1,
        "svc_id of the default service"
    );
}

#[test]
fn reset_releases_everything_and_old_clients_get_eio() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let e = everything(&c);
    let ring = c.mmap_token(&e.txq.cmds).unwrap();
    assert_ne!(d.free_counts(), d.initial_free_counts());
    d.reset().unwrap();
    assert_eq!(d.reset_count(), 1);
    assert_eq!(d.free_counts(), d.initial_free_counts());
    assert_eq!(lni(&c).unwrap_err(), Errno::Eio);
    assert_eq!(c.mmap_token(&e.eq.csr).unwrap_err(), Errno::Eio);
    assert!(
        ring.memory().unwrap().read_u64(0).is_err(),
        "mappings revoked"
    );
    // The device works for new clients.
    let c2 = d.open();
    let e2 = everything(&c2);
    assert_eq!(e2.lni, 1, "allocators start again");
    drop((e, e2, ring));
    drop(c);
    drop(c2);
    assert_eq!(d.free_counts(), d.initial_free_counts());
}

#[test]
fn eq_reserved_fc_and_wait_objects() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let buf = c.alloc_user_memory(4096).unwrap();
    let eq = eq_passthrough(&c, l, &buf).unwrap().eq;
    let adj = |v: i32| {
        c.call(&EqAdjustReservedFcCmd {
            eq_hndl: eq,
            value: v,
            ..Default::default()
        })
    };
    assert_eq!(adj(10).unwrap().reserved_fc, 10);
    assert_eq!(adj(-4).unwrap().reserved_fc, 6);
    assert_eq!(adj(-7).unwrap_err(), Errno::Einval);
    // 64 slots in a page, two reserved by hardware: a value the 14-bit field holds but the
    // queue cannot is ENOSPC; beyond the field, EINVAL (cass_eq.c).
    assert_eq!(adj(100).unwrap_err(), Errno::Enospc);
    assert_eq!(adj(1 << 14).unwrap_err(), Errno::Einval);
    let got = d
        .hw()
        .read_field(
            firmware_spec::cassini::csr::C_EE_CFG_EQ_DESCRIPTOR,
            eq,
            firmware_spec::cassini::csr::fields::c_ee_cfg_eq_descriptor::RESERVED_FC,
        )
        .unwrap();
    assert_eq!(got, 6);
    // Misaligned or odd-sized buffers.
    let bad = c.call(&EqAllocCmd {
        lni: l,
        attr: EqAttr {
            queue: buf.va() + 64,
            queue_len: 4096,
            flags: firmware_spec::cassini::le::EqFlags::PASSTHROUGH.bits(),
            ..Default::default()
        },
        ..Default::default()
    });
    assert_eq!(bad.unwrap_err(), Errno::Einval);
    let w = wait(&c, l).unwrap();
    let obj = c.wait_object(w).unwrap();
    assert_eq!(obj.poll(), 0);
    c.call(&WaitFreeCmd {
        wait: w,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(c.wait_object(w).unwrap_err(), Errno::Einval);
}

#[test]
fn services_with_tle_limits_get_their_own_tle_pool() {
    use firmware_spec::cassini::csr::{self, fields as f};
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let hw = d.hw();
    let pool = |p: u32| {
        let e = hw.read_entry(csr::C_CQ_CFG_TLE_POOL, p).unwrap();
        (
            f::c_cq_cfg_tle_pool::NUM_RESERVED.get(&e),
            f::c_cq_cfg_tle_pool::MAX_ALLOC.get(&e),
        )
    };
    let shared = || {
        hw.read_field(
            csr::C_CQ_CFG_STS_TLE_SHARED,
            0,
            f::c_cq_cfg_sts_tle_shared::NUM_SHARED,
        )
        .unwrap()
    };
    // The default service reserves 512 TLEs in pool 0; the rest is shared.
    assert_eq!(pool(0), (512, 512));
    assert_eq!(pool(1), (0, 0));
    assert_eq!(shared(), 2048 - 512);
    let admin = d.open_admin();
    // A service without restricted VNIs starts disabled until it has a VNI range
    // (cass_svc.c), so these restrict theirs to VNI 77.
    let mut desc = SvcDesc {
        bits: 0b1_1010, // resource_limits | enable | restricted_vnis
        num_vld_vnis: 1,
        ..Default::default()
    };
    desc.vnis[0] = 77;
    desc.limits[1] = Limits { max: 4, res: 0 };
    desc.limits[6] = Limits { max: 100, res: 64 }; // TLEs
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            admin
                .call(&SvcAllocCmd {
                    svc_desc: desc,
                    ..Default::default()
                })
                .unwrap()
                .svc_id,
        );
    }
    assert_eq!(pool(1), (64, 100));
    assert_eq!(shared(), 2048 - 512 - 3 * 64);
    let fourth = admin.call(&SvcAllocCmd {
        svc_desc: desc,
        ..Default::default()
    });
    assert_eq!(fourth.unwrap_err(), Errno::Enospc, "four TLE pools");
    // A TX CQ of such a service draws its triggered ops from the service's pool.
    let user = d.open();
    let l = user
        .call(&LniAllocCmd {
            svc_id: ids[1],
            ..Default::default()
        })
        .unwrap()
        .lni;
    let q = cq(&user, l, 0, true, 64).unwrap();
    let pfq = hw
        .read_field(
            csr::C_CQ_TXQ_BASE_TABLE,
            q.cq,
            f::c_cq_txq_base_table::MEM_Q_PFQ,
        )
        .unwrap();
    let use_ = user
        .call(&As::<{ Opcode::SvcRsrcGet as u32 }, _>(SvcIdCmd {
            svc_id: ids[1],
            ..Default::default()
        }))
        .unwrap();
    assert_eq!(u64::from(use_.tle_pool_id), pfq);
    assert_eq!(pfq, 2);
    drop(user);
    for id in ids {
        admin
            .call(&SvcDestroyCmd {
                svc_id: id,
                ..Default::default()
            })
            .unwrap();
    }
    assert_eq!(pool(1), (0, 0));
    assert_eq!(shared(), 2048 - 512);
    assert_eq!(d.free_counts(), d.initial_free_counts());
}

/// `cass_eq.c`: status thresholds are checked only when status updates are asked for
/// (`status_thresh_count` > 0): at most 4 of them, base and delta percentages within 100, and
/// the last threshold (`base - (count - 1) * delta`) not below 0 %.
#[test]
fn eq_status_thresholds_are_checked_as_cass_eq_c_does() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let alloc = |count: u32, base: u32, delta: u32| {
        let buf = c.alloc_user_memory(4096).unwrap();
        let r = c.call(&EqAllocCmd {
            lni: l,
            attr: EqAttr {
                queue: buf.va(),
                queue_len: buf.len(),
                flags: firmware_spec::cassini::le::EqFlags::PASSTHROUGH.bits(),
                status_thresh_count: count,
                status_thresh_base: base,
                status_thresh_delta: delta,
                ..Default::default()
            },
            ..Default::default()
        });
        if let Ok(e) = &r {
            c.call(&EqFreeCmd {
                eq: e.eq,
                ..Default::default()
            })
            .unwrap();
        }
        r.map(|_| ())
    };
    assert_eq!(alloc(0, 250, 250), Ok(()), "no status updates: not checked");
    assert_eq!(alloc(4, 90, 30), Ok(()), "last threshold at exactly 0 %");
    assert_eq!(
        alloc(2, 50, 60),
        Err(Errno::Einval),
        "last threshold below 0 %"
    );
    assert_eq!(alloc(5, 100, 10), Err(Errno::Einval), "more than 4");
    assert_eq!(alloc(1, 101, 0), Err(Errno::Einval), "base over 100 %");
}

/// `cass_pt.c: cxi_pte_le_invalidate`: a buffer id or list no MST entry can hold matches
/// nothing and is not an error (libfabric passes its MR key as the buffer id); an unknown
/// PtlTE is `EINVAL`.
#[test]
fn le_invalidate_of_a_buffer_id_no_entry_holds_is_not_an_error() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let buf = c.alloc_user_memory(4096).unwrap();
    let eq = eq_passthrough(&c, l, &buf).unwrap().eq;
    let pt = pte(&c, l, eq).unwrap();
    let inval = |pte_index: u32, buffer_id: u32, list: u32| {
        c.call(&PteLeInvalidateCmd {
            pte_index,
            buffer_id,
            list,
            ..Default::default()
        })
    };
    assert_eq!(inval(pt, 7, 0), Ok(()));
    assert_eq!(inval(pt, 0x9819_0000, 0), Ok(()), "a 32-bit MR key");
    assert_eq!(inval(pt, 7, 9), Ok(()), "no such list");
    assert_eq!(inval(pt + 100, 7, 0), Err(Errno::Einval), "unknown PtlTE");
}
