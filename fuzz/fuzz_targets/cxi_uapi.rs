//! Arbitrary requests to the Cassini driver's uAPI (what libcxi writes to `/dev/cxi0`),
//! from an unprivileged client that also owns some user memory.
//!
//! Input: a sequence of requests. Each starts with a selector byte: 255 is a raw request
//! (a 2-byte length, then that many bytes, no opcode fixed up); otherwise the opcode is
//! `Opcode::ALL[sel % len]` and the body is the next `req_size - 4` bytes. A flag byte
//! follows: bit 0 gives a response buffer one byte short.
//!
//! The driver must answer every request with a result or an errno, never panic, and when the
//! client closes every allocator must be back to its initial count (nothing leaked,
//! whatever the sequence was).
//!
//! The machine is built once per process and restored before every input
//! ([`nicemu_fuzz::uapi::CxiRig`]); one input in `FRESH_EVERY` also runs on a machine built
//! from scratch, and the requests' results and the machine's digest must be the same.
#![no_main]

use driver::cassini::Opcode;
use libfuzzer_sys::fuzz_target;
use nicemu_fuzz::uapi::CxiRig;
use nicemu_fuzz::{Bytes, Reused, digest, run_reused};

thread_local! {
    static RIG: Reused<CxiRig> = Reused::default();
}

/// Run `data` on the rig; returns a digest of every request's result and response bytes
/// (compared with a fresh rig's now and then, see `run_reused`).
fn run(rig: &mut CxiRig, data: &[u8]) -> Vec<u64> {
    let mut b = Bytes(data);
    let d = &rig.dev;
    let initial = d.initial_free_counts();
    assert_eq!(
        d.free_counts(),
        initial,
        "the input starts with every allocator at its initial count"
    );
    let c = d.open();
    let mem = c.alloc_user_memory(64 << 10).expect("user memory");
    let mut resp = vec![0u8; 4096];
    let mut out = Vec::new();
    let mut n = 0;
    while !b.is_empty() && n < 64 {
        n += 1;
        let sel = b.u8();
        let req = if sel == 255 {
            let len = usize::from(b.u16()) % 1024;
            b.take(len).to_vec()
        } else {
            let op = Opcode::ALL[usize::from(sel) % Opcode::ALL.len()];
            let Some(info) = op.info() else {
                let r = c.write(&(op as u32).to_le_bytes(), &mut resp);
                out.push(digest(r));
                continue;
            };
            let mut r = (op as u32).to_le_bytes().to_vec();
            r.extend_from_slice(b.take(info.req_size.saturating_sub(4)));
            r.resize(info.req_size.max(4), 0);
            r
        };
        let short = b.u8() & 1 != 0;
        let want = Opcode::from_u32(u32::from_le_bytes(
            req.get(..4)
                .and_then(|x| x.try_into().ok())
                .unwrap_or([0; 4]),
        ))
        .and_then(Opcode::info)
        .map_or(0, |i| i.resp_size);
        let len = if short {
            want.saturating_sub(1)
        } else {
            want.max(1)
        };
        let len = len.min(4096);
        let r = c.write(&req, &mut resp[..len]);
        out.push(digest((r, &resp[..len])));
        rig.cl.run(10_000);
    }
    drop(mem);
    c.close();
    assert_eq!(
        d.free_counts(),
        initial,
        "every allocator is back to its initial count"
    );
    out
}

fuzz_target!(|data: &[u8]| {
    run_reused(&RIG, data, run);
});
