//! The MPI semantics suite on the loopback reference transport, communicator sizes 1 to 17.

use std::sync::Arc;

use mpi::Universe;
use tests::mpi_loopback::{Fabric, Loopback};

fn job(size: u32) {
    let fabric = Fabric::new(size);
    std::thread::scope(|s| {
        for rank in 0..size {
            let fabric = Arc::clone(&fabric);
            s.spawn(move || {
                let u = Universe::new(Box::new(Loopback::new(fabric, rank)));
                tests::mpi_semantics::run(&u.world());
            });
        }
    });
}

#[test]
fn semantics_on_every_size_from_1_to_17() {
    for size in 1..=17 {
        job(size);
    }
}
