//! `DeviceIo::lazy`: the clock is read on the first `now()` only, never below the floor.

use super::*;
use crate::dma::DmaPort;
use crate::memory::HostMemory;
use std::cell::Cell;

fn port() -> DmaPort {
    DmaPort::passthrough(HostMemory::new(1 << 16).expect("host memory"))
}

#[test]
fn a_handler_that_never_asks_reads_no_clock() {
    let reads = Cell::new(0u32);
    let clock = || {
        reads.set(reads.get() + 1);
        SimTime(500)
    };
    let dma = port();
    let mut rng = SimRng::new(1);
    let mut actions = Vec::new();
    let io = DeviceIo::lazy(SimTime(100), &clock, None, &dma, &mut rng, &mut actions);
    assert_eq!(io.time_taken(), None);
    assert_eq!(reads.get(), 0);
    assert_eq!(io.now(), SimTime(500));
    assert_eq!(io.now(), SimTime(500));
    assert_eq!(reads.get(), 1, "the clock is read once");
    assert_eq!(io.time_taken(), Some(SimTime(500)));
}

#[test]
fn the_time_never_goes_below_the_floor() {
    let clock = || SimTime(7);
    let dma = port();
    let mut rng = SimRng::new(1);
    let mut actions = Vec::new();
    let io = DeviceIo::lazy(SimTime(900), &clock, None, &dma, &mut rng, &mut actions);
    assert_eq!(io.now(), SimTime(900));
    let eager = DeviceIo::new(SimTime(42), None, &dma, &mut rng, &mut actions);
    assert_eq!(eager.time_taken(), Some(SimTime(42)));
}
