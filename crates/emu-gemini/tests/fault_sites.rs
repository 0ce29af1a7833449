//! The Gemini fault sites of `emu_core::nic_faults`, each on its own, through FMA windows and
//! CQ rings on the deterministic engine: `cq_overrun` loses a remote event as a full CQ would
//! (sticky overrun flag, `CQ_LOST`, the sender's `REM_OVERRUN`) while the data lands;
//! `smsg_starve` holds an SMSG credit return (an 8-byte PUT_MSG) for `smsg_starve_time`, and
//! nothing else; `slow_target` holds every arriving packet for `slow_target_time` and then
//! processes them in order. A site at probability 1 fires on every chance; off, nothing
//! changes.

mod common;

use common::*;
use emu_core::nic_faults::NicFaults;
use emu_core::time::SimDuration;
use emu_gemini::host::{PostOpts, Remote};
use emu_gemini::regs::counter;
use firmware_spec::gemini::cqe::HwStatus;
use firmware_spec::gemini::fma::SyncType;
use firmware_spec::gemini::gni::ReturnCode;

/// Node 0 puts `data` at `offset` of node 1's buffer with a local and a remote event.
fn put(j: &Job, offset: u64, data: &[u8], msg: bool, tag: u64) {
    let o = PostOpts {
        sync: SyncType::LOCAL_EVENT | SyncType::REMOTE_EVENT,
        data: tag,
        msg,
        ..PostOpts::default()
    };
    let to = Remote {
        pe: 1,
        mdh: BUF_MDH,
        offset: j.nodes[1].buf.off(offset),
    };
    j.nic(0).fma_put(j.nodes[0].fma, to, data, o).unwrap();
}

fn word(j: &Job, offset: u64) -> u64 {
    j.nic(1).read_u64(j.nodes[1].buf.addr + offset).unwrap()
}

#[test]
fn cq_overrun_loses_the_remote_event_and_tells_both_sides() {
    let mut j = job(det([1, 1, 1], 31));
    let (n0, n1) = (j.nic(0).clone(), j.nic(1).clone());
    j.c.engine.set_nic_faults(NicFaults {
        cq_overrun: 1.0,
        ..NicFaults::none()
    });
    put(&j, 0, &7u64.to_le_bytes(), false, 70);
    let local = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(local.status(), Ok(HwStatus::Ok));
    assert_eq!(local.rem_overrun, 1, "the sender learns its event was lost");
    assert_eq!(word(&j, 0), 7, "the data landed");
    let rcq = &mut j.nodes[1].remote_cq;
    assert_eq!(n1.cq_poll(rcq).unwrap(), None, "the event is lost");
    assert_eq!(n1.cq_status(rcq).unwrap(), (true, 1), "sticky overrun flag");
    assert_eq!(n1.counter(counter::CQ_LOST).unwrap(), 1);
    assert!(j.c.engine.nic_fault_counters().cq_overrun >= 1);

    // Off again: the next event arrives and reports the earlier loss (GNI_CQ_OVERRUN).
    j.c.engine.set_nic_faults(NicFaults::none());
    put(&j, 8, &8u64.to_le_bytes(), false, 80);
    assert_eq!(n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().rem_overrun, 0);
    let e = n1.cq_wait(&mut j.nodes[1].remote_cq).unwrap();
    assert_eq!((e.data(), e.overrun), (80, 1));
    assert_eq!(e.get_event_rc(), ReturnCode::ErrorResource);
}

#[test]
fn smsg_starve_holds_credit_returns_and_nothing_else() {
    let mut j = job(det([1, 1, 1], 32));
    let (n0, n1) = (j.nic(0).clone(), j.nic(1).clone());
    let held = SimDuration::from_us(30);
    j.c.engine.set_nic_faults(NicFaults {
        smsg_starve: 1.0,
        smsg_starve_time: held,
        ..NicFaults::none()
    });
    let det = j.c.deterministic().unwrap().clone();

    // A message (header and body, more than 8 bytes) is not a credit return.
    let start = det.now();
    put(&j, 64, &[0x11; 24], true, 1);
    det.run_until(start + SimDuration::from_us(5));
    assert_eq!(word(&j, 64), 0x1111_1111_1111_1111, "a message is not held");
    n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    n1.cq_wait(&mut j.nodes[1].remote_cq).unwrap();
    assert_eq!(j.c.engine.nic_fault_counters().smsg_starve, 0);

    // The credit return: one 8-byte PUT_MSG into the control block.
    let start = det.now();
    put(&j, 0, &3u64.to_le_bytes(), true, 2);
    det.run_until(start + SimDuration::from_us(25));
    assert_eq!(word(&j, 0), 0, "held");
    assert_eq!(n0.cq_poll(&mut j.nodes[0].local_cq).unwrap(), None);
    det.run_until(start + SimDuration::from_us(35));
    assert_eq!(word(&j, 0), 3, "applied when the hold ends");
    let local = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(local.status(), Ok(HwStatus::Ok));
    assert!(j.c.engine.nic_fault_counters().smsg_starve >= 1);

    // Off again: a credit return lands with its packet.
    j.c.engine.set_nic_faults(NicFaults::none());
    let start = det.now();
    put(&j, 8, &4u64.to_le_bytes(), true, 3);
    det.run_until(start + SimDuration::from_us(5));
    assert_eq!(word(&j, 8), 4);
}

#[test]
fn slow_target_holds_arriving_packets_and_processes_them_in_order() {
    let mut j = job(det([1, 1, 1], 33));
    let (n0, n1) = (j.nic(0).clone(), j.nic(1).clone());
    let stall = SimDuration::from_us(20);
    j.c.engine.set_nic_faults(NicFaults {
        slow_target: 1.0,
        slow_target_time: stall,
        ..NicFaults::none()
    });
    let det = j.c.deterministic().unwrap().clone();
    let start = det.now();
    // Two in-order puts to the same word: the later value must win.
    for v in [5u64, 6] {
        let o = PostOpts {
            sync: SyncType::LOCAL_EVENT,
            in_order: true,
            ..PostOpts::default()
        };
        let to = Remote {
            pe: 1,
            mdh: BUF_MDH,
            offset: j.nodes[1].buf.off(0),
        };
        j.nic(0)
            .fma_put(j.nodes[0].fma, to, &v.to_le_bytes(), o)
            .unwrap();
    }
    det.run_until(start + SimDuration::from_us(18));
    assert_eq!(word(&j, 0), 0, "held by the stall");
    det.run_until(start + SimDuration::from_us(25));
    assert_eq!(
        word(&j, 0),
        6,
        "both applied, in order, when the stall ended"
    );
    for _ in 0..2 {
        let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
        assert_eq!(e.status(), Ok(HwStatus::Ok));
    }
    assert!(j.c.engine.nic_fault_counters().slow_target >= 1);
    assert_eq!(n1.counter(counter::CQ_LOST).unwrap(), 0);
}
