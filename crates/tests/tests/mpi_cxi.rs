//! MPI over the cxi transport on emulated Cassini nodes: the semantics suite in hardware,
//! software and hybrid matching modes.

use mpi::Universe;
use runtime::{Job, Nic};

fn suite(mode: &str, sizes: &[u32]) {
    for &ranks in sizes {
        Job::new(Nic::Cassini, ranks)
            .env("FI_CXI_RX_MATCH_MODE", mode)
            .run(|u: Universe| tests::mpi_semantics::run(&u.world()))
            .unwrap_or_else(|e| panic!("{mode}, {ranks} ranks: {e}"));
    }
}

#[test]
fn the_semantics_suite_passes_with_hardware_matching() {
    suite("hardware", &[1, 2, 3, 5, 8]);
}

#[test]
fn the_semantics_suite_passes_with_software_matching() {
    suite("software", &[1, 2, 3, 5, 8]);
}

#[test]
fn the_semantics_suite_passes_with_hybrid_matching() {
    suite("hybrid", &[1, 2, 3, 5, 8]);
}

/// The suite in hybrid mode with one small overflow buffer: collectives flood it, the
/// receive PtlTEs go into flow control and the endpoints switch to software matching
/// while the suite runs.
#[test]
fn the_semantics_suite_passes_in_hybrid_mode_through_flow_control() {
    let mut episodes = 0;
    for ranks in [5u32, 8] {
        let stats = Job::new(Nic::Cassini, ranks)
            .env("FI_CXI_RX_MATCH_MODE", "hybrid")
            .env("FI_CXI_OFLOW_BUF_COUNT", "1")
            .env("FI_CXI_OFLOW_BUF_SIZE", "36K")
            .run(|u: Universe| {
                tests::mpi_semantics::run(&u.world());
                u.with_transport(|t| t.stats())
            })
            .unwrap_or_else(|e| panic!("hybrid, {ranks} ranks: {e}"));
        episodes += stats
            .iter()
            .map(|s| s.get("flow_control").copied().unwrap_or(0))
            .sum::<u64>();
        eprintln!("{ranks} ranks: {stats:?}");
    }
    assert!(episodes > 0, "no rank went through flow control");
}
