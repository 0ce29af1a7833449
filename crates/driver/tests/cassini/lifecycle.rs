//! Probe, one of everything, close.

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
