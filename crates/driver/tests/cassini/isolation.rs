//! A client can never use or free another client's objects: every attempt is an error
//! (EINVAL, as the driver's per-client handle lookups give), never a panic, and the owner's
//! objects keep working.

use driver::cassini::uapi::*;
use driver::cassini::{Client, Errno};
use firmware_spec::cassini::le::{EqFlags, MapFlags, PtAllocOpts};

use crate::common::*;

fn refused<T: std::fmt::Debug>(what: &str, r: Result<T, Errno>) {
    assert_eq!(r.unwrap_err(), Errno::Einval, "{what}");
}

#[test]
fn foreign_handles_are_refused() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let a = d.open();
    let b = d.open();
    let ea = everything(&a);
    let eb = everything(&b);
    let before = d.free_counts();

    // CQ.
    refused(
        "CQ_FREE",
        b.call(&CqFreeCmd {
            cq: ea.txq.cq,
            ..Default::default()
        }),
    );
    refused(
        "CQ_FREE target",
        b.call(&CqFreeCmd {
            cq: ea.tgq.cq,
            ..Default::default()
        }),
    );
    refused(
        "CQ_ACK_COUNTER",
        b.call(&CqAckCounterCmd {
            cq: ea.txq.cq,
            ..Default::default()
        }),
    );
    // EQ: free, adjust, use as a CQ's or PtlTE's EQ.
    refused(
        "EQ_FREE",
        b.call(&EqFreeCmd {
            eq: ea.eq.eq,
            ..Default::default()
        }),
    );
    refused(
        "EQ_ADJUST_RESERVED_FC",
        b.call(&EqAdjustReservedFcCmd {
            eq_hndl: ea.eq.eq,
            value: 1,
            ..Default::default()
        }),
    );
    refused(
        "CQ_ALLOC with a foreign EQ",
        cq(&b, eb.lni, ea.eq.eq, true, 64),
    );
    refused("PTE_ALLOC with a foreign EQ", pte(&b, eb.lni, ea.eq.eq));
    // PtlTE.
    refused(
        "PTE_FREE",
        b.call(&PteFreeCmd {
            pte_number: ea.pte,
            ..Default::default()
        }),
    );
    refused(
        "PTE_MAP of a foreign PtlTE",
        pte_map(&b, ea.pte, eb.domain, 5),
    );
    refused(
        "PTE_MAP to a foreign domain",
        pte_map(&b, eb.pte, ea.domain, 5),
    );
    refused(
        "PTE_UNMAP",
        b.call(&PteUnmapCmd {
            pte_index: ea.map,
            ..Default::default()
        }),
    );
    refused(
        "PTE_STATUS",
        b.call(&PteStatusCmd {
            pte_index: ea.pte,
            ..Default::default()
        }),
    );
    refused(
        "PTE_TRANSITION_SM",
        b.call(&PteTransitionSmCmd {
            pte_index: ea.pte,
            drop_count: 0,
            ..Default::default()
        }),
    );
    refused(
        "PTE_LE_INVALIDATE",
        b.call(&PteLeInvalidateCmd {
            pte_index: ea.pte,
            buffer_id: 1,
            list: 0,
            ..Default::default()
        }),
    );
    // CT.
    refused(
        "CT_FREE",
        b.call(&CtFreeCmd {
            ctn: ea.ct.ctn,
            ..Default::default()
        }),
    );
    refused(
        "CT_WB_UPDATE",
        b.call(&CtWbUpdateCmd {
            ctn: ea.ct.ctn,
            wb: eb.ct_wb.va(),
            ..Default::default()
        }),
    );
    // MD: unmap, update, use as an EQ buffer.
    refused(
        "ATU_UNMAP",
        b.call(&AtuUnmapCmd {
            id: ea.data_md.id,
            ..Default::default()
        }),
    );
    refused(
        "ATU_UPDATE_MD",
        b.call(&AtuUpdateMdCmd {
            id: ea.data_md.id,
            va: ea.data.va(),
            len: 4096,
            flags: (MapFlags::READ | MapFlags::WRITE).bits(),
            ..Default::default()
        }),
    );
    refused(
        "EQ_ALLOC on a foreign MD",
        eq_md(&b, eb.lni, &ea.eq_buf, ea.md.id, 0),
    );
    // Everything else a client names by handle.
    refused(
        "LNI_FREE",
        b.call(&LniFreeCmd {
            lni: ea.lni,
            ..Default::default()
        }),
    );
    refused("CQ_ALLOC on a foreign LNI", cq(&b, ea.lni, 0, true, 64));
    refused(
        "ATU_MAP on a foreign LNI",
        map(&b, ea.lni, eb.data.va(), 4096),
    );
    refused(
        "DOMAIN_FREE",
        b.call(&DomainFreeCmd {
            domain: ea.domain,
            ..Default::default()
        }),
    );
    refused(
        "CP_FREE",
        b.call(&CpFreeCmd {
            cp_hndl: ea.cp,
            ..Default::default()
        }),
    );
    refused(
        "WAIT_FREE",
        b.call(&WaitFreeCmd {
            wait: ea.wait,
            ..Default::default()
        }),
    );
    refused(
        "EQ_ALLOC with a foreign wait object",
        eq_md(&b, eb.lni, &eb.eq_buf, eb.md.id, ea.wait),
    );
    assert_eq!(b.wait_object(ea.wait).unwrap_err(), Errno::Einval);
    // A client's own reserved PIDs are not another's.
    assert_eq!(
        domain(&b, eb.lni, ea.reserved_pid).unwrap_err(),
        Errno::Eexist
    );

    // Memory of another process is not mapped in this one.
    assert_eq!(
        map(&b, eb.lni, ea.data.va(), 4096).unwrap_err(),
        Errno::Efault
    );
    assert_eq!(ct(&b, eb.lni, ea.ct_wb.va()).unwrap_err(), Errno::Efault);
    let pt = b.call(&EqAllocCmd {
        lni: eb.lni,
        attr: EqAttr {
            queue: ea.pt_eq_buf.va(),
            queue_len: 4096,
            flags: EqFlags::PASSTHROUGH.bits(),
            ..Default::default()
        },
        ..Default::default()
    });
    assert_eq!(pt.unwrap_err(), Errno::Efault);

    // mmap tokens are per client: A's are not B's.
    let fresh = d.open();
    assert_eq!(fresh.mmap_token(&ea.txq.cmds).unwrap_err(), Errno::Einval);
    assert_eq!(fresh.mmap_token(&ea.eq.csr).unwrap_err(), Errno::Einval);

    // Nothing changed, and A's objects still work.
    assert_eq!(d.free_counts(), before);
    a.call(&CqAckCounterCmd {
        cq: ea.txq.cq,
        ..Default::default()
    })
    .unwrap();
    let st = a
        .call(&PteStatusCmd {
            pte_index: ea.pte,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(st.state, 1, "DISABLED");
    a.call(&AtuUnmapCmd {
        id: ea.data_md.id,
        ..Default::default()
    })
    .unwrap();
    a.call(&PteUnmapCmd {
        pte_index: ea.map,
        ..Default::default()
    })
    .unwrap();
    a.call(&PteFreeCmd {
        pte_number: ea.pte,
        ..Default::default()
    })
    .unwrap();
    drop((ea, eb));
    let initial = d.initial_free_counts();
    a.close();
    b.close();
    drop(fresh);
    assert_eq!(d.free_counts(), initial);
}

#[test]
fn busy_objects_are_not_freed() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c: Client = d.open();
    let e = everything(&c);
    // An LNI with objects, an EQ used by CQs, an MD under an EQ, a mapped PtlTE, a domain
    // with a mapping, a wait object under an EQ.
    let busy =
        |r: Result<(), Errno>, what: &str| assert_eq!(r.unwrap_err(), Errno::Ebusy, "{what}");
    busy(
        c.call(&LniFreeCmd {
            lni: e.lni,
            ..Default::default()
        }),
        "LNI",
    );
    busy(
        c.call(&EqFreeCmd {
            eq: e.eq.eq,
            ..Default::default()
        }),
        "EQ",
    );
    busy(
        c.call(&AtuUnmapCmd {
            id: e.md.id,
            ..Default::default()
        }),
        "MD",
    );
    busy(
        c.call(&PteFreeCmd {
            pte_number: e.pte,
            ..Default::default()
        }),
        "PtlTE",
    );
    busy(
        c.call(&DomainFreeCmd {
            domain: e.domain,
            ..Default::default()
        }),
        "domain",
    );
    busy(
        c.call(&WaitFreeCmd {
            wait: e.wait,
            ..Default::default()
        }),
        "wait",
    );
    // A mapped CQ ring is busy until the mapping goes.
    let ring = c.mmap_token(&e.txq.cmds).unwrap();
    busy(
        c.call(&CqFreeCmd {
            cq: e.txq.cq,
            ..Default::default()
        }),
        "mapped CQ",
    );
    drop(ring);
    c.call(&CqFreeCmd {
        cq: e.txq.cq,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        c.call(&CqFreeCmd {
            cq: e.txq.cq,
            ..Default::default()
        })
        .unwrap_err(),
        Errno::Einval,
        "double free"
    );
    // Options a plain client may not use.
    let eth = c.call(&PteAllocCmd {
        lni_hndl: e.lni,
        opts: PtAllocOpts::ETHERNET.bits(),
        ..Default::default()
    });
    assert_eq!(eth.unwrap_err(), Errno::Eperm);
}

/// An LCID a resource group was not given reads CP 0 (the reset value of
/// `c_cq_cfg_cid_array`), so CP 0 must never be a live profile: otherwise a process could
/// switch its queue to such an LCID and send with another process's profile (its VNI).
#[test]
fn cp_0_is_never_handed_out() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let admin = d.open_admin();
    let csrs = As::<{ Opcode::MapCsrs as u32 }, _>(NoArgCmd::default());
    let tok = admin.call(&csrs).unwrap().csr;
    let win = admin.mmap_token(&tok).unwrap().mmio().unwrap();
    let table = firmware_spec::cassini::csr::C_CQ_CFG_CP_TABLE;
    let valid = firmware_spec::cassini::csr::fields::c_cq_cfg_cp_table::VALID;
    let cp_valid = |n: u32| {
        let at = table.offset + u64::from(n) * u64::from(table.size);
        valid.get(&win.read_u64(at).unwrap().to_le_bytes()) != 0
    };
    let clients: Vec<Client> = (0..3).map(|_| d.open()).collect();
    for c in &clients {
        let l = lni(c).unwrap();
        cp(c, l).unwrap();
    }
    // The three clients share one profile (same VNI and traffic class): the first free
    // number, which is 1, not 0.
    let live: Vec<u32> = (0..8).filter(|&n| cp_valid(n)).collect();
    assert_eq!(live, vec![1], "one CP went out, and it is not CP 0");
}
