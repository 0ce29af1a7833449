//! Probe, one of everything, close.

use driver::cassini::Errno;
use firmware_spec::cassini::pci::{CassiniVersion, Platform};

use crate::common::*;

#[test]
fn one_of_everything_then_close_frees_everything() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    assert_eq!(d.info().version, CassiniVersion::Cassini1_1);
    assert_eq!(d.info().platform, Platform::Netsim);
    let host_before = d.memory().free_bytes();
    let initial = d.initial_free_counts();
    assert_eq!(d.free_counts(), initial);
    let c = d.open();
    let e = everything(&c);
    let used = d.free_counts();
    assert_eq!(used.txqs, initial.txqs - 2);
    assert_eq!(used.tgqs, initial.tgqs - 1);
    assert_eq!(used.eqs, initial.eqs - 2);
    assert_eq!(used.ptes, initial.ptes - 1);
    assert_eq!(used.cts, initial.cts - 1);
    assert_eq!(used.rgids, initial.rgids - 1);
    assert_eq!(used.acs, initial.acs - 1);
    assert_eq!(used.portal_entries, initial.portal_entries - 1);
    assert_eq!(used.vni_entries, initial.vni_entries - 1);
    assert_eq!(used.wait_vectors, initial.wait_vectors - 1);
    assert_eq!(used.pids_in_use, 5);
    assert!(used.driver_pages > 0);
    drop(e);
    c.close();
    assert_eq!(d.free_counts(), initial);
    assert_eq!(d.memory().free_bytes(), host_before);
}

#[test]
fn an_idle_state_restored_with_the_machine_replays_a_client_exactly() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let node = cl.node(0).unwrap();
    let det = cl.deterministic().unwrap();
    let saved = d
        .save_idle_state()
        .expect("a device without clients is idle");
    let engine = det.snapshot().unwrap();
    let ram = node.ram().snapshot();
    let session = || {
        let c = d.open();
        let e = everything(&c);
        let ids = format!(
            "{:?}",
            (
                e.lni,
                e.domain,
                e.reserved_pid,
                e.cp,
                e.trig_cp,
                e.wait,
                &e.md,
                &e.eq,
                &e.pt_eq,
                &e.txq
            )
        );
        (c, e, ids)
    };
    let (c, e, ids) = session();
    assert!(d.save_idle_state().is_none(), "a client's objects exist");
    assert_eq!(d.restore_idle_state(&saved), Err(Errno::Ebusy));
    drop(e);
    c.close();
    cl.run(u64::MAX);
    let first = (det.trace_digest(), det.now(), d.refused_requests());

    d.restore_idle_state(&saved).unwrap();
    node.ram().restore(&ram).unwrap();
    det.restore(&engine).unwrap();
    assert_eq!(d.free_counts(), d.initial_free_counts());
    let (c, e, again) = session();
    assert_eq!(
        again, ids,
        "the same objects, with the same numbers and addresses"
    );
    drop(e);
    c.close();
    cl.run(u64::MAX);
    assert_eq!((det.trace_digest(), det.now(), d.refused_requests()), first);

    let other = cluster(1);
    assert_eq!(
        dev(&other, 0).restore_idle_state(&saved),
        Err(Errno::Einval),
        "a state of another device"
    );
}
