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
#![no_main]

use driver::cassini::Opcode;
use libfuzzer_sys::fuzz_target;
use nicemu_fuzz::Bytes;
use platform::{Cluster, EngineKind};

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let cl = Cluster::builder()
        .nics(1)
        .engine(EngineKind::Deterministic { seed: 1 })
        .memory_per_node(32 << 20)
        .build()
        .expect("cluster");
    let d = cl.node(0).and_then(|n| n.cxi(0)).expect("device");
    let initial = d.initial_free_counts();
    let c = d.open();
    let mem = c.alloc_user_memory(64 << 10).expect("user memory");
    let mut resp = vec![0u8; 4096];
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
                let _ = c.write(&(op as u32).to_le_bytes(), &mut resp);
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
        let _ = c.write(&req, &mut resp[..len.min(4096)]);
        cl.run(10_000);
    }
    drop(mem);
    c.close();
    assert_eq!(
        d.free_counts(),
        initial,
        "every allocator is back to its initial count"
    );
});
