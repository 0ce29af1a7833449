//! Arbitrary frames on the link of an emulated Cassini (the fabric packet parser on
//! receive, both the target side and the initiator side of the pair).
//!
//! Input: a sequence of frames, each `[port & 1 | tc << 1, len_lo, len_hi, bytes...]`
//! (length capped at 4 KiB). Every frame goes through the fabric as it is, from the spare
//! port 2. The NICs must not panic, every event they write must decode, and nothing may
//! land in the initiator's send buffer (no frame may write memory an LE does not describe).
#![no_main]

use firmware_spec::cassini::event::Event;
use libfuzzer_sys::fuzz_target;
use nicemu_fuzz::cassini::Pair;
use nicemu_fuzz::{Bytes, Reused, run_reused};

thread_local! {
    static PAIR: Reused<Pair> = Reused::default();
}

fuzz_target!(|data: &[u8]| {
    run_reused(&PAIR, data, one);
});

fn one(p: &mut Pair, data: &[u8]) -> Vec<Event> {
    let mut b = Bytes(data);
    let src_before = p
        .init()
        .read_host(p.src.host, p.src.len as usize)
        .expect("read");
    let mut frames = 0;
    while !b.is_empty() && frames < 64 {
        let h = b.u8();
        let len = usize::from(b.u16()) % 4097;
        let frame = b.take(len).to_vec();
        p.inject(u32::from(h & 1), (h >> 1) & 7, frame)
            .expect("inject");
        frames += 1;
    }
    p.c.settle();
    let events = p
        .drain()
        .expect("the NIC wrote an event that does not decode");
    let src_after = p
        .init()
        .read_host(p.src.host, p.src.len as usize)
        .expect("read");
    assert!(
        src_before == src_after,
        "a frame changed memory no LE describes"
    );
    events
}
