//! Arbitrary frames on the link of an emulated Gemini (the fabric packet parser on
//! receive): requests, responses, acks and garbage, from a spare port of the switch.
//!
//! Input: a sequence of frames, each `[port & 1 | tc << 1, len_lo, len_hi, bytes...]`
//! (length capped at 4 KiB). The NICs must not panic, must keep answering MMIO, and no
//! region registered read-only may change.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nicemu_fuzz::gemini::Rig;
use nicemu_fuzz::{Bytes, Reused, run_reused};

thread_local! {
    static RIG: Reused<Rig> = Reused::default();
}

fuzz_target!(|data: &[u8]| {
    run_reused(&RIG, data, one);
});

fn one(rig: &mut Rig, data: &[u8]) -> usize {
    let mut b = Bytes(data);
    let mut frames = 0;
    while !b.is_empty() && frames < 64 {
        let h = b.u8();
        let len = usize::from(b.u16()) % 4097;
        let frame = b.take(len).to_vec();
        rig.inject(u32::from(h & 1), (h >> 1) & 7, frame)
            .expect("inject");
        frames += 1;
    }
    rig.settle();
    let events = rig.drain().expect("CQs and registers readable");
    assert!(
        rig.read_only_intact().expect("read"),
        "a read-only region changed"
    );
    events
}
