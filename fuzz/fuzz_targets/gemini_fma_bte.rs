//! Arbitrary FMA descriptor contents, FMA window stores and BTE TX descriptors on an
//! emulated Gemini (descriptor 0 and channel 0 of PE 0, set up for a job as the tests do).
//!
//! Input: a sequence of operations, one selector byte each:
//! - 0: store a qword to a user FMA register (offset from the next byte, value from 8);
//! - 1: store to an FMA window (PUT write-combining, GET, PUT uncached), 1/2/4/8 bytes;
//! - 2: store a qword to a privileged FMA register (what the OS does on a job's behalf);
//! - 3: a raw 48-byte BTE TX descriptor, NAT forced on (as for every user RDMA), then the
//!   channel's doorbell;
//! - 4: run the engine a few events.
//!
//! The NICs must not panic, must keep answering MMIO, and no region registered read-only may
//! change (a PUT, GET result or AMO into it is refused by the MDD check).
#![no_main]

use firmware_spec::gemini::bte::TxdMode4;
use firmware_spec::gemini::fma::{self, WindowKind};
use firmware_spec::gemini::map;
use libfuzzer_sys::fuzz_target;
use nicemu_fuzz::gemini::{Rig, fma_priv, fma_user};
use nicemu_fuzz::{Bytes, Reused, run_reused};

thread_local! {
    static RIG: Reused<Rig> = Reused::default();
}

fuzz_target!(|data: &[u8]| {
    run_reused(&RIG, data, one);
});

fn one(rig: &mut Rig, data: &[u8]) -> usize {
    let mut b = Bytes(data);
    let bar = rig.sides[0].nic.bar0.clone();
    let mut ops = 0;
    while !b.is_empty() && ops < 200 {
        ops += 1;
        match b.u8() % 5 {
            0 => {
                let reg = u64::from(b.u8() % 0x12) * 8;
                let v = b.u64();
                let _ = bar.write_u64(fma_user(0, reg), v);
            }
            1 => {
                let kind = match b.u8() % 3 {
                    0 => WindowKind::PutWc,
                    1 => WindowKind::Get,
                    _ => WindowKind::PutUc,
                };
                let w = 1usize << (b.u8() % 4);
                let off = u64::from(b.u32() % (1 << 20)) / w as u64 * w as u64;
                let v = b.u64().to_le_bytes();
                if let Some(at) = fma::window_addr(kind, 0, off) {
                    let _ = bar.write(at, &v[..w]);
                }
            }
            2 => {
                let reg = u64::from(b.u8() % 0x12) * 8;
                let v = b.u64();
                let _ = bar.write_u64(fma_priv(0, reg), v);
            }
            3 => {
                let mut txd = [0u8; 48];
                txd.copy_from_slice(&{
                    let mut t = b.take(48).to_vec();
                    t.resize(48, 0);
                    t
                });
                txd[31] |= TxdMode4::NAT_ENABLE.0 << 5;
                let ch = &mut rig.bte;
                let slot = ch.base + (ops as u64 % ch.count);
                let at = map::BTE_TX_BASE + map::BTE_TX_PITCH * slot;
                for (i, q) in txd.chunks_exact(8).enumerate() {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(q);
                    let _ = bar.write_u64(at + 8 * i as u64, u64::from_le_bytes(w));
                }
                let ch_at = map::BTE_TX_CHANNEL_BASE + 64 * u64::from(ch.ch);
                let _ = bar.write_u64(ch_at + 0x18, (slot + 1 - ch.base) % ch.count);
            }
            _ => {
                rig.engine.run_events(u64::from(b.u8()));
            }
        }
    }
    rig.settle();
    let events = rig.drain().expect("CQs and registers readable");
    assert!(
        rig.read_only_intact().expect("read"),
        "a read-only region changed"
    );
    events
}
