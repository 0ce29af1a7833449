//! MPI over the cxi transport on emulated Cassini nodes: the semantics suite in hardware and
//! software matching modes.

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
