//! The device side of SMSG: mailbox writes with PUT_MSG raise a remote event in the
//! mailbox's CQ, and a receiver that sees the event always finds the whole message, even
//! with adaptive routing reordering the packets.

mod common;

use common::*;
use emu_core::fabric::FaultConfig;
use emu_core::time::SimDuration;
use emu_gemini::cluster::{Cluster, ClusterConfig};
use emu_gemini::host::{PostOpts, Remote};
use firmware_spec::gemini::cqe::{Cqe, CqeSource};
use firmware_spec::gemini::fma::SyncType;
use firmware_spec::gemini::gni::CqEventType;
use firmware_spec::gemini::smsg::{self, SmsgHeader, slot_kind};

const CREDITS: u16 = 8;
const MAXSIZE: u32 = 200;

#[test]
fn mailbox_messages_raise_remote_events_after_their_data() {
    let mut cfg = ClusterConfig::deterministic([2, 1, 1], 51);
    cfg.faults = FaultConfig {
        reorder: 0.3,
        reorder_max_delay: SimDuration::from_us(2),
        ..FaultConfig::none()
    };
    let mut j = job(Cluster::new(cfg).unwrap());
    let (tx, rx) = (0usize, 2usize);
    let (ntx, nrx) = (j.nic(tx).clone(), j.nic(rx).clone());
    // The receiver's mailbox for this sender sits at the start of its buffer (registered
    // with the remote CQ as destination CQ).
    let mbox = j.nodes[rx].buf;
    for seq in 0..20u32 {
        let body: Vec<u8> = (0..(40 + seq * 7))
            .map(|b| (b as u8) ^ (seq as u8))
            .collect();
        let hdr = SmsgHeader {
            seqno: u64::from(seq),
            tag: 5,
            kind: slot_kind::MESSAGE,
            hdr_len: 0,
            data_len: body.len() as u64,
            back_credits: 0,
        };
        let mut msg = hdr.encode().unwrap().to_vec();
        msg.extend_from_slice(&body);
        let slot = smsg::slot_offset(seq, CREDITS, MAXSIZE);
        let inst_id = 0xC0DE_0000 + seq;
        let data = Cqe::sw(CqEventType::Smsg, u64::from(inst_id))
            .sw_data56()
            .unwrap();
        let o = PostOpts {
            sync: SyncType::LOCAL_EVENT | SyncType::REMOTE_EVENT,
            data,
            msg: true,
            ..PostOpts::default()
        };
        let to = Remote {
            pe: rx as u32,
            mdh: mbox.mdh,
            offset: mbox.off(slot),
        };
        ntx.fma_put(j.nodes[tx].fma, to, &msg, o).unwrap();
        // Receiver: the first thing it sees is the event; the message must be complete.
        let e = nrx.cq_wait(&mut j.nodes[rx].remote_cq).unwrap();
        assert_eq!(e.source(), Ok(CqeSource::RmtDreq));
        assert_eq!(e.event_type(), Ok(CqEventType::Smsg));
        assert_eq!(e.inst_id(), inst_id);
        let mut got = vec![0u8; msg.len()];
        nrx.read_mem(mbox.addr + slot, &mut got).unwrap();
        assert_eq!(got, msg, "message {seq} incomplete at its event");
        let h = SmsgHeader::decode(&got).unwrap();
        assert_eq!((h.seqno, h.data_len), (u64::from(seq), body.len() as u64));
        let local = ntx.cq_wait(&mut j.nodes[tx].local_cq).unwrap();
        assert_eq!(local.inst_id(), inst_id);
        // Release the slot (what GNI_SmsgRelease does to the mailbox).
        nrx.write_mem(mbox.addr + slot, &[0u8; 16]).unwrap();
    }
}

/// A receiver thread polls mailbox slots directly (as `GNI_SmsgGetNext` does, without
/// waiting for events) while the sender writes messages on the threaded engine: a header it
/// sees always comes with its whole payload.
#[test]
fn polled_mailbox_never_shows_a_header_before_its_payload() {
    use emu_core::engine::threaded::ThreadedConfig;
    use std::sync::atomic::{AtomicU32, Ordering};
    const SLOTS: u32 = 4;
    const SIZE: u32 = 32 * 1024;
    const MESSAGES: u32 = 200;
    let cfg = ClusterConfig::threaded(
        [1, 1, 1],
        ThreadedConfig {
            workers: 1,
            seed: 9,
            ..ThreadedConfig::default()
        },
    );
    let j = job(Cluster::new(cfg).unwrap());
    let (ntx, nrx) = (j.nic(0).clone(), j.nic(1).clone());
    let mbox = j.nodes[1].buf;
    let f = j.nodes[0].fma;
    let mut tx_cq = j.nodes[0].local_cq.clone();
    let released = AtomicU32::new(0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let alive = || assert!(std::time::Instant::now() < deadline, "stuck");
    let body = |seq: u32| -> Vec<u8> {
        (0..SIZE)
            .map(|b| (b.wrapping_mul(31) ^ seq.wrapping_mul(7)) as u8)
            .collect()
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            for seq in 0..MESSAGES {
                let slot = smsg::slot_offset(seq, SLOTS as u16, SIZE);
                loop {
                    let w = nrx.read_u64(mbox.addr + slot).unwrap();
                    let h = SmsgHeader::decode(&w.to_le_bytes().repeat(2)).unwrap();
                    if h.kind == slot_kind::MESSAGE && h.seqno == u64::from(seq) {
                        break;
                    }
                    alive();
                    std::hint::spin_loop();
                }
                let mut got = vec![0u8; SIZE as usize];
                nrx.read_mem(mbox.addr + slot + 16, &mut got).unwrap();
                assert!(
                    got == body(seq),
                    "message {seq}: header visible before payload"
                );
                nrx.write_mem(mbox.addr + slot, &[0u8; 16]).unwrap();
                released.store(seq + 1, Ordering::Release);
            }
        });
        for seq in 0..MESSAGES {
            while seq - released.load(Ordering::Acquire) >= SLOTS {
                alive();
                std::hint::spin_loop();
            }
            let hdr = SmsgHeader {
                seqno: u64::from(seq),
                tag: 1,
                kind: slot_kind::MESSAGE,
                hdr_len: 0,
                data_len: u64::from(SIZE),
                back_credits: 0,
            };
            let mut msg = hdr.encode().unwrap().to_vec();
            msg.extend_from_slice(&body(seq));
            let to = Remote {
                pe: 1,
                mdh: mbox.mdh,
                offset: mbox.off(smsg::slot_offset(seq, SLOTS as u16, SIZE)),
            };
            let o = PostOpts {
                msg: true,
                ..PostOpts::default()
            };
            ntx.fma_put(f, to, &msg, o).unwrap();
            ntx.cq_wait(&mut tx_cq).unwrap();
        }
    });
    assert_eq!(released.into_inner(), MESSAGES);
}
