//! The NIC fault sites (`emu_core::nic_faults`, the fabric's switch-port-down site) under the
//! MPI semantics suite on both NICs: the sites fire, the stack recovers or ends with the
//! error the real stack reports, never with a hang or wrong data, and a seed replays
//! (docs/RELIABILITY.md, "Fault sites inside the NICs").

use runtime::Nic;
use sim::{Campaign, FaultSpec, SimConfig, Workload};

fn cfg(nic: Nic, faults: &str) -> SimConfig {
    SimConfig {
        seed: 0,
        nodes: 4,
        nic,
        faults: FaultSpec::parse(faults).unwrap(),
        workload: Workload::Semantics,
        inject_bug: false,
    }
}

fn passing_campaign(base: SimConfig, seed_base: u64, count: u64) -> sim::CampaignReport {
    let rep = Campaign {
        base,
        seed_base,
        count,
    }
    .run(|_, _, _| {});
    let fails: Vec<String> = rep
        .failures
        .iter()
        .map(|(c, why)| format!("{why}\n  replay: {}", c.replay_command()))
        .collect();
    assert!(fails.is_empty(), "failures:\n{}", fails.join("\n"));
    assert_eq!(rep.passed, count);
    rep
}

#[test]
fn cassini_rides_out_slow_targets_and_switch_ports_down() {
    let rep = passing_campaign(
        cfg(
            Nic::Cassini,
            "slow_target=0.001,port-down=0.0005,ct_delay=0.05",
        ),
        1,
        3,
    );
    assert!(rep.nic.slow_target > 0, "no slow-target stall");
    assert!(rep.port_downs > 0, "no switch port went down");
}

#[test]
fn gemini_recovers_from_cq_overruns_and_smsg_credit_starvation() {
    let rep = passing_campaign(
        cfg(
            Nic::Gemini,
            "slow_target=0.001,gni_cq_overrun=0.01,smsg_starve=0.01,port-down=0.0005",
        ),
        1,
        3,
    );
    assert!(rep.nic.cq_overrun > 0, "no CQ overrun");
    assert!(rep.nic.smsg_starve > 0, "no credit starvation");
    assert!(rep.nic.slow_target > 0, "no slow-target stall");
    assert!(rep.port_downs > 0, "no switch port went down");
}

/// EQ full, LE exhaustion and ATU misses: a seed passes (flow-control recovery) or ends
/// with the error the real stack reports; never a deadlock or a wrong value.
#[test]
fn cassini_exhaustion_and_atu_misses_end_in_recovery_or_a_clear_error() {
    let rep = Campaign {
        base: cfg(Nic::Cassini, "eq_full=0.01,le_exhaust=0.01,atu_miss=0.001"),
        seed_base: 1,
        count: 4,
    }
    .run(|_, _, _| {});
    // A failed job reports no counters: the sites fired in a passing run or ended one.
    assert!(
        rep.nic.eq_full + rep.nic.le_exhaust + rep.nic.atu_miss > 0 || !rep.failures.is_empty(),
        "no site fired"
    );
    let clear = [
        "LE resources not recovered during flow control",
        "NoTranslation",
        "EntryNotFound",
    ];
    for (c, why) in &rep.failures {
        assert!(
            clear.iter().any(|m| why.contains(m)),
            "seed {} failed without a clear error: {why}\n  replay: {}",
            c.seed,
            c.replay_command()
        );
    }
}

#[test]
fn registrations_the_drivers_fail_to_pin_are_tried_again_on_both_nics() {
    // The driver site `pin_fail`: cxi ATU_MAP answers -ENOMEM, kgni MEM_REGISTER
    // GNI_RC_ERROR_NOMEM. The transports free their cached registrations and try again, as
    // the real registration caches do; the suite passes.
    for nic in [Nic::Cassini, Nic::Gemini] {
        let rep = passing_campaign(cfg(nic, "pin_fail=0.2"), 1, 3);
        assert!(rep.pin_failures > 0, "{nic:?}: no pinning failed");
    }
    // When pinning always fails, the job ends at MPI_Init with the driver's error.
    for (nic, why) in [(Nic::Cassini, "ENOMEM"), (Nic::Gemini, "out of memory")] {
        let mut c = cfg(nic, "pin_fail=1");
        c.seed = 1;
        let o = sim::run(&c);
        let failure = o.failure.expect("nothing can be registered");
        assert!(
            failure.contains("MPI init failed") && failure.contains(why),
            "{nic:?}: {failure}"
        );
        assert!(o.pin_failures > 0);
    }
}

#[test]
fn a_seed_with_nic_faults_replays_bit_for_bit() {
    let mut c = cfg(
        Nic::Gemini,
        "slow_target=0.001,gni_cq_overrun=0.01,smsg_starve=0.01",
    );
    c.seed = 2;
    let (a, b) = (sim::run(&c), sim::run(&c));
    assert!(a.passed(), "{:?}", a.failure);
    assert!(a.digest.is_some());
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.nic_faults, b.nic_faults);
    assert!(a.nic_faults.is_some_and(|n| n.total() > 0));
}
