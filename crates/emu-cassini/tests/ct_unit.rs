//! The CT block: doorbells, CT commands, counting events, write-back images, triggered
//! operations (immediate, ordered, cascading), TLE exhaustion and recovery, cancel, ack
//! counters, 48/7-bit wrap, and a property that every triggered operation fires exactly once,
//! exactly when its threshold is reached.

use emu_cassini::ct::{
    CmdSource, CtAction, CtBlock, CtCommand, CtConfig, CtError, Effects, FiredEvent, ThresholdMode,
    TlePoolConfig, WbAddr,
};
use firmware_spec::cassini::cmd::{Command, CtCmd, CtOp, DmaOp, EmbeddedDma, FullDma, TrigDma};
use firmware_spec::cassini::rc::ReturnCode;
use firmware_spec::cassini::status::CtWriteback;
use proptest::prelude::*;

const SRC: CmdSource = CmdSource { cq: 3, tle_pool: 0 };

fn wb(ct: u16) -> WbAddr {
    WbAddr {
        context: 1,
        addr: 0x10_0000 + ct as u64 * 8,
    }
}

fn block(cts: &[u16]) -> CtBlock {
    block_with(CtConfig::default(), cts)
}

fn block_with(cfg: CtConfig, cts: &[u16]) -> CtBlock {
    let mut b = CtBlock::with_config(cfg);
    for &c in cts {
        b.init(c).unwrap();
        b.enable(c, Some(wb(c))).unwrap();
    }
    b
}

fn ct_cmd(opcode: CtOp) -> CtCmd {
    CtCmd {
        opcode,
        ..CtCmd::default()
    }
}

/// A CT_TRIG_DMA whose embedded Put carries `id` in `user_ptr`.
fn trig_dma(trig_ct: u16, threshold: u64, id: u64) -> CtCommand {
    let dma = FullDma {
        opcode: DmaOp::Put,
        user_ptr: id,
        request_len: 8,
        ..FullDma::default()
    };
    CtCommand::from_trig_dma(&TrigDma::new(trig_ct, threshold, EmbeddedDma::Full(dma))).unwrap()
}

fn trig_inc(trig_ct: u16, threshold: u64, ct: u16, by: u64) -> CtCommand {
    CtCommand::Ct(CtCmd {
        opcode: CtOp::CtTrigInc,
        trig_ct,
        threshold,
        ct,
        ct_success: by,
        ..CtCmd::default()
    })
}

fn trig_set(trig_ct: u16, threshold: u64, ct: u16, success: u64) -> CtCommand {
    CtCommand::Ct(CtCmd {
        opcode: CtOp::CtTrigSet,
        trig_ct,
        threshold,
        ct,
        ct_success: success,
        set_ct_success: true,
        ..CtCmd::default()
    })
}

fn trig_event(trig_ct: u16, threshold: u64, eq: u16) -> CtCommand {
    CtCommand::Ct(CtCmd {
        opcode: CtOp::CtTrigEvent,
        trig_ct,
        threshold,
        eq,
        ..CtCmd::default()
    })
}

fn fired_ids(fx: &Effects) -> Vec<u64> {
    fx.fired_dma()
        .map(|d| match d.command().unwrap() {
            EmbeddedDma::Full(f) => f.user_ptr,
            other => panic!("unexpected embedded command {other:?}"),
        })
        .collect()
}

fn wbs(fx: &Effects) -> Vec<(u16, u64, u8)> {
    fx.writebacks()
        .map(|w| (w.ct, w.image.ct_success, w.image.ct_failure))
        .collect()
}

fn counts(b: &CtBlock, ct: u16) -> (u64, u8) {
    let s = b.state(ct).unwrap();
    (s.success, s.failure)
}

// ------------------------------------------------------------------------------------------
// Counters, doorbells, write-backs
// ------------------------------------------------------------------------------------------

#[test]
fn writeback_image_golden() {
    let mut b = block(&[9]);
    b.command(
        &CtCommand::Ct(CtCmd {
            opcode: CtOp::CtSet,
            ct: 9,
            ct_success: 0x1234_5678_9ABC,
            ct_failure: 0x55,
            set_ct_success: true,
            set_ct_failure: true,
            ..CtCmd::default()
        }),
        SRC,
    )
    .unwrap();
    let fx = b
        .command(
            &CtCommand::Ct(CtCmd {
                ct: 9,
                ..ct_cmd(CtOp::CtGet)
            }),
            SRC,
        )
        .unwrap();
    let w = fx.writebacks().next().copied().unwrap();
    assert_eq!(w.ct, 9);
    assert_eq!(w.target, wb(9));
    // success@0:48, failure@48:7, ct_writeback@63: 0x8055_1234_5678_9ABC little-endian.
    assert_eq!(w.bytes(), [0xBC, 0x9A, 0x78, 0x56, 0x34, 0x12, 0x55, 0x80]);
    assert_eq!(
        CtWriteback::decode(&w.bytes()).unwrap(),
        CtWriteback {
            ct_success: 0x1234_5678_9ABC,
            ct_failure: 0x55,
            ct_writeback: true
        }
    );
}

#[test]
fn doorbells() {
    let mut b = block(&[5]);
    let fx = b.doorbell(5, 0, 0xFFF).unwrap();
    assert_eq!(wbs(&fx), [(5, 0xFFF, 0)]);
    let fx = b.doorbell(5, 64, 0x3F).unwrap();
    assert_eq!(wbs(&fx), [(5, 0xFFF, 0x3F)]);
    // Values are cut to the field widths.
    let fx = b.doorbell(5, 0, 1 << 48 | 1).unwrap();
    assert_eq!(wbs(&fx), [(5, 0x1000, 0x3F)]);
    let fx = b.doorbell(5, 64, 0x81).unwrap();
    assert_eq!(wbs(&fx), [(5, 0x1000, 0x40)]);
    let fx = b.doorbell(5, 128, 0xDEAD).unwrap();
    assert_eq!(wbs(&fx), [(5, 0, 0x40)]);
    let fx = b.doorbell(5, 192, 0).unwrap();
    assert_eq!(wbs(&fx), [(5, 0, 0)]);
    assert_eq!(b.doorbell(5, 8, 1), Err(CtError::BadDoorbellOffset(8)));
    // A disabled CT drops doorbells.
    let fx = b.doorbell(6, 0, 1).unwrap();
    assert!(fx.is_empty());
    assert_eq!(counts(&b, 6), (0, 0));
    assert_eq!(b.counters().dropped_updates, 1);
    assert_eq!(b.counters().doorbells, 6);
}

#[test]
fn counts_wrap_at_48_and_7_bits() {
    let mut b = block(&[1]);
    let max = (1u64 << 48) - 1;
    b.event_increment(1, max, 127).unwrap();
    assert_eq!(counts(&b, 1), (max, 127));
    let fx = b.event_increment(1, 2, 1).unwrap();
    assert_eq!(wbs(&fx), [(1, 1, 0)]);
    // Increments wider than the field are cut first.
    b.event_increment(1, 1 << 48, 0x80).unwrap();
    assert_eq!(counts(&b, 1), (1, 0));
}

#[test]
fn ct_set_get_inc_noop() {
    let mut b = block(&[2]);
    let set = |s: Option<u64>, f: Option<u8>| {
        CtCommand::Ct(CtCmd {
            opcode: CtOp::CtSet,
            ct: 2,
            ct_success: s.unwrap_or(0x77),
            ct_failure: f.unwrap_or(0x11),
            set_ct_success: s.is_some(),
            set_ct_failure: f.is_some(),
            ..CtCmd::default()
        })
    };
    let fx = b.command(&set(Some(10), None), SRC).unwrap();
    assert_eq!(wbs(&fx), [(2, 10, 0)]);
    let fx = b.command(&set(None, Some(3)), SRC).unwrap();
    assert_eq!(wbs(&fx), [(2, 10, 3)]);
    let fx = b.command(&set(Some(1), Some(1)), SRC).unwrap();
    assert_eq!(wbs(&fx), [(2, 1, 1)]);
    // Neither flag: no change, still a write-back.
    let fx = b.command(&set(None, None), SRC).unwrap();
    assert_eq!(wbs(&fx), [(2, 1, 1)]);
    let inc = CtCommand::Ct(CtCmd {
        opcode: CtOp::CtInc,
        ct: 2,
        ct_success: 4,
        ct_failure: 2,
        ..CtCmd::default()
    });
    let fx = b.command(&inc, SRC).unwrap();
    assert_eq!(wbs(&fx), [(2, 5, 3)]);
    let fx = b
        .command(
            &CtCommand::Ct(CtCmd {
                ct: 2,
                ..ct_cmd(CtOp::CtGet)
            }),
            SRC,
        )
        .unwrap();
    assert_eq!(wbs(&fx), [(2, 5, 3)]);
    let fx = b
        .command(&CtCommand::Ct(ct_cmd(CtOp::CtNoop)), SRC)
        .unwrap();
    assert!(fx.is_empty());
    let c = b.counters();
    assert_eq!(c.cmd_counts[CtOp::CtSet as usize], 4);
    assert_eq!(c.cmd_counts[CtOp::CtInc as usize], 1);
    assert_eq!(c.cmd_counts[CtOp::CtGet as usize], 1);
    assert_eq!(c.cmd_counts[CtOp::CtNoop as usize], 1);
}

#[test]
fn writeback_disabled_keeps_pending_indicator() {
    let mut b = CtBlock::new();
    b.enable(4, None).unwrap();
    let fx = b.event_increment(4, 3, 0).unwrap();
    assert!(fx.is_empty());
    assert!(b.state(4).unwrap().writeback_pending);
    b.set_writeback(4, Some(wb(4))).unwrap();
    assert!(b.state(4).unwrap().writeback_pending);
    let fx = b
        .command(
            &CtCommand::Ct(CtCmd {
                ct: 4,
                ..ct_cmd(CtOp::CtGet)
            }),
            SRC,
        )
        .unwrap();
    assert_eq!(wbs(&fx), [(4, 3, 0)]);
    assert!(!b.state(4).unwrap().writeback_pending);
    // The CSR form: context 0 = disabled.
    assert_eq!(WbAddr::from_csr(0), None);
    assert_eq!(WbAddr::from_csr(wb(4).to_csr()), Some(wb(4)));
}

#[test]
fn counting_events_on_ct_none_or_disabled_are_dropped() {
    let mut b = block(&[1]);
    assert!(b.event_increment(0, 1, 0).unwrap().is_empty());
    assert!(b.event_increment(7, 1, 0).unwrap().is_empty());
    assert_eq!(b.counters().dropped_updates, 2);
    assert_eq!(b.event_increment(2048, 1, 0), Err(CtError::InvalidCt(2048)));
    b.disable(1).unwrap();
    assert!(b.event_increment(1, 1, 0).unwrap().is_empty());
    assert_eq!(counts(&b, 1), (0, 0));
}

// ------------------------------------------------------------------------------------------
// Triggered operations
// ------------------------------------------------------------------------------------------

#[test]
fn fires_when_threshold_reached_not_before() {
    let mut b = block(&[1]);
    assert!(b.command(&trig_dma(1, 5, 77), SRC).unwrap().is_empty());
    assert_eq!(b.pending_on(1), 1);
    assert_eq!(b.pending(SRC.cq), 1);
    assert_eq!(b.tles_in_use(), 1);
    let fx = b.event_increment(1, 4, 0).unwrap();
    assert!(fired_ids(&fx).is_empty());
    let fx = b.event_increment(1, 1, 0).unwrap();
    assert_eq!(fired_ids(&fx), [77]);
    // The write-back of the change comes first.
    assert!(matches!(fx.actions[0], CtAction::Writeback(_)));
    assert!(matches!(fx.actions[1], CtAction::FireDma(_)));
    let d = fx.fired_dma().next().unwrap();
    assert_eq!((d.trig_ct, d.threshold, d.from_cq), (1, 5, SRC.cq));
    assert_eq!(b.pending_on(1), 0);
    assert_eq!(b.pending(SRC.cq), 0);
    assert_eq!(b.tles_in_use(), 0);
    // Never again.
    assert!(fired_ids(&b.event_increment(1, 10, 0).unwrap()).is_empty());
    assert_eq!(b.counters().fired, 1);
}

#[test]
fn already_reached_at_append_fires_at_once() {
    let mut b = block(&[1]);
    b.event_increment(1, 5, 0).unwrap();
    let fx = b.command(&trig_dma(1, 5, 1), SRC).unwrap();
    assert_eq!(fired_ids(&fx), [1]);
    let fx = b.command(&trig_dma(1, 0, 2), SRC).unwrap();
    assert_eq!(fired_ids(&fx), [2]);
    // Threshold is 48 bits: (1 << 48) | 3 is 3.
    let fx = b.command(&trig_dma(1, 1 << 48 | 3, 3), SRC).unwrap();
    assert_eq!(fired_ids(&fx), [3]);
    assert_eq!(b.pending(SRC.cq), 0);
    assert_eq!(b.tles_in_use(), 0);
    // The embedded bytes are passed through unchanged.
    let cmd = trig_dma(1, 0, 0xABCD);
    let CtCommand::TrigDma { embedded, .. } = cmd else {
        panic!("not a CT_TRIG_DMA");
    };
    let fx = b.command(&cmd, SRC).unwrap();
    assert_eq!(fx.fired_dma().next().unwrap().raw, embedded);
}

#[test]
fn firing_order_is_threshold_then_arrival() {
    let mut b = block(&[1]);
    for (thr, id) in [(5, 1), (3, 2), (5, 3), (1, 4), (4, 5), (3, 6)] {
        b.command(&trig_dma(1, thr, id), SRC).unwrap();
    }
    assert_eq!(b.pending_thresholds(1), [1, 3, 3, 4, 5, 5]);
    let fx = b.event_increment(1, 3, 0).unwrap();
    assert_eq!(fired_ids(&fx), [4, 2, 6]);
    let fx = b.event_increment(1, 7, 0).unwrap();
    assert_eq!(fired_ids(&fx), [5, 1, 3]);
}

#[test]
fn chain_fires_without_outside_action() {
    // CT1 reaches 3 -> TRIG_INC CT2 by 2 -> CT2 reaches 4 -> TRIG_DMA fires.
    let mut b = block(&[1, 2]);
    b.command(&trig_inc(1, 3, 2, 2), SRC).unwrap();
    b.command(&trig_dma(2, 4, 99), SRC).unwrap();
    b.event_increment(2, 2, 0).unwrap();
    assert_eq!(b.pending(SRC.cq), 2);
    let fx = b.event_increment(1, 3, 0).unwrap();
    assert_eq!(wbs(&fx), [(1, 3, 0), (2, 4, 0)]);
    assert_eq!(fired_ids(&fx), [99]);
    assert!(matches!(fx.actions.last(), Some(CtAction::FireDma(_))));
    assert_eq!(b.pending(SRC.cq), 0);

    // Three levels with a TRIGGERED_OP event at the end, from one doorbell.
    let mut b = block(&[1, 2, 3]);
    b.command(&trig_inc(1, 1, 2, 1), SRC).unwrap();
    b.command(&trig_set(2, 1, 3, 10), SRC).unwrap();
    b.command(&trig_event(3, 10, 42), SRC).unwrap();
    b.command(&trig_dma(3, 10, 5), SRC).unwrap();
    let fx = b.doorbell(1, 0, 1).unwrap();
    assert_eq!(wbs(&fx), [(1, 1, 0), (2, 1, 0), (3, 10, 0), (3, 10, 0)]);
    let ev: Vec<FiredEvent> = fx.fired_events().copied().collect();
    assert_eq!(
        ev,
        [FiredEvent {
            eq: 42,
            ct: 3,
            threshold: 10,
            from_cq: SRC.cq
        }]
    );
    assert_eq!(fired_ids(&fx), [5]);
    // Order: the event's write-back precedes the event, which precedes the later DMA.
    let kinds: Vec<&str> = fx
        .actions
        .iter()
        .map(|a| match a {
            CtAction::Writeback(_) => "wb",
            CtAction::FireDma(_) => "dma",
            CtAction::FireEvent(_) => "ev",
        })
        .collect();
    assert_eq!(kinds, ["wb", "wb", "wb", "wb", "ev", "dma"]);
}

#[test]
fn self_cascade_is_bounded() {
    let mut b = block(&[1]);
    for t in 1..=5 {
        b.command(&trig_inc(1, t, 1, 1), SRC).unwrap();
    }
    let fx = b.event_increment(1, 1, 0).unwrap();
    assert_eq!(counts(&b, 1), (6, 0));
    assert_eq!(wbs(&fx).len(), 6);
    assert_eq!(b.pending_on(1), 0);
    assert_eq!(b.counters().fired, 5);
}

#[test]
fn trig_set_lowering_its_own_ct_stops_the_rest() {
    let mut b = block(&[1]);
    b.command(&trig_set(1, 2, 1, 0), SRC).unwrap();
    b.command(&trig_dma(1, 2, 1), SRC).unwrap();
    b.command(&trig_dma(1, 3, 2), SRC).unwrap();
    let fx = b.event_increment(1, 5, 0).unwrap();
    assert!(fired_ids(&fx).is_empty());
    assert_eq!(counts(&b, 1), (0, 0));
    assert_eq!(b.pending_on(1), 2);
    let fx = b.event_increment(1, 3, 0).unwrap();
    assert_eq!(fired_ids(&fx), [1, 2]);
}

#[test]
fn trig_event_with_and_without_eq() {
    let mut b = block(&[6]);
    b.command(&trig_event(6, 2, 0), SRC).unwrap();
    b.command(&trig_event(6, 2, 17), SRC).unwrap();
    let fx = b.event_increment(6, 2, 0).unwrap();
    // Change write-back, eq=0 write-back, eq=17 write-back + event.
    assert_eq!(wbs(&fx), [(6, 2, 0), (6, 2, 0), (6, 2, 0)]);
    let e = fx.fired_events().next().copied().unwrap();
    assert_eq!(fx.fired_events().count(), 1);
    let ev = e.event();
    assert_eq!(
        (ev.threshold, ev.ct_handle, ev.return_code),
        (2, 6, ReturnCode::Ok)
    );
}

#[test]
fn threshold_modes() {
    let mut s = block_with(
        CtConfig {
            threshold_mode: ThresholdMode::Success,
        },
        &[1],
    );
    let mut p = block(&[1]);
    assert_eq!(
        CtConfig::default().threshold_mode,
        ThresholdMode::SuccessPlusFailure
    );
    for b in [&mut s, &mut p] {
        b.command(&trig_dma(1, 3, 1), SRC).unwrap();
        b.event_increment(1, 1, 2).unwrap();
    }
    assert_eq!(s.pending_on(1), 1, "failures do not count in Success mode");
    assert_eq!(p.pending_on(1), 0, "Portals rule: success + failure");
    assert_eq!(fired_ids(&s.event_increment(1, 2, 0).unwrap()), [1]);
}

// ------------------------------------------------------------------------------------------
// TLEs, ack counters, cancel
// ------------------------------------------------------------------------------------------

#[test]
fn tle_exhaustion_stalls_and_recovers() {
    let mut b = block(&[1, 2]);
    // Default pools: 512 each (8 reserved + 504 shared), 2016 shared: 2048 in all.
    for t in 1..=512u64 {
        b.command(&trig_dma(1, t, t), SRC).unwrap();
    }
    let before = (b.pending(SRC.cq), b.pending_on(1), b.tles_in_use());
    let e = b.command(&trig_dma(1, 1000, 0), SRC).unwrap_err();
    assert_eq!(e, CtError::TleExhausted { pool: 0 });
    assert!(e.is_stall());
    assert_eq!(e.return_code(), ReturnCode::NoSpace);
    assert!(b.tle_oversubscribed());
    assert_eq!(
        (b.pending(SRC.cq), b.pending_on(1), b.tles_in_use()),
        before
    );
    // The other pools fill the device.
    for pool in 1..4u8 {
        let src = CmdSource {
            cq: 10 + pool as u16,
            tle_pool: pool,
        };
        for t in 0..512u64 {
            b.command(&trig_dma(2, 100 + t, t), src).unwrap();
        }
        assert_eq!(b.pending(src.cq), 512);
    }
    assert_eq!(b.tles_in_use(), 2048);
    assert_eq!(b.tle_shared_allocated(), 2016);
    let s1 = CmdSource {
        cq: 11,
        tle_pool: 1,
    };
    assert!(b.command(&trig_dma(2, 5000, 0), s1).unwrap_err().is_stall());
    // An operation already reached needs no entry.
    b.event_increment(2, 1, 0).unwrap();
    assert_eq!(fired_ids(&b.command(&trig_dma(2, 1, 7), s1).unwrap()), [7]);
    // Firings free entries: ten on pool 0.
    let fx = b.event_increment(1, 10, 0).unwrap();
    assert_eq!(fired_ids(&fx), (1..=10).collect::<Vec<u64>>());
    assert_eq!(b.tles_in_use(), 2038);
    b.clear_tle_oversubscribed();
    for i in 0..10 {
        b.command(&trig_dma(1, 2000 + i, i), SRC).unwrap();
    }
    assert!(
        b.command(&trig_dma(1, 3000, 0), SRC)
            .unwrap_err()
            .is_stall()
    );
    let st = b.tle_pool_status(0).unwrap();
    assert_eq!((st.in_use, st.max_in_use), (512, 512));
    // Everything fires in the end.
    let fx = b.event_increment(1, 5000, 0).unwrap();
    assert_eq!(fx.fired_dma().count(), 512);
    let fx = b.event_increment(2, 5000, 0).unwrap();
    assert_eq!(fx.fired_dma().count(), 1536);
    assert_eq!(b.tles_in_use(), 0);
    assert_eq!(b.tle_shared_allocated(), 0);
    for cq in [3, 11, 12, 13] {
        assert_eq!(b.pending(cq), 0);
    }
}

#[test]
fn device_holds_at_most_2048_pending() {
    let mut b = block(&[1]);
    b.set_tle_shared(4095);
    b.set_tle_pool(
        0,
        TlePoolConfig {
            num_reserved: 0,
            max_alloc: 4095,
        },
    )
    .unwrap();
    for t in 0..2048u64 {
        b.command(&trig_dma(1, 10 + t, t), SRC).unwrap();
    }
    assert!(
        b.command(&trig_dma(1, 9999, 0), SRC)
            .unwrap_err()
            .is_stall()
    );
    assert_eq!(b.pending(SRC.cq), 2048);
    // One firing makes room for one.
    b.event_increment(1, 10, 0).unwrap();
    b.command(&trig_dma(1, 9999, 0), SRC).unwrap();
    assert!(
        b.command(&trig_dma(1, 9999, 1), SRC)
            .unwrap_err()
            .is_stall()
    );
    assert_eq!(
        b.set_tle_pool(4, TlePoolConfig::default()),
        Err(CtError::InvalidPool(4))
    );
}

#[test]
fn driver_style_pool_limits() {
    // The driver: no shared reserve, num_reserved = max_alloc per service pool.
    let mut b = block(&[1]);
    b.set_tle_shared(0);
    b.set_tle_pool(
        2,
        TlePoolConfig {
            num_reserved: 8,
            max_alloc: 8,
        },
    )
    .unwrap();
    let src = CmdSource { cq: 0, tle_pool: 2 };
    for t in 0..8 {
        b.command(&trig_dma(1, 100 + t, t), src).unwrap();
    }
    assert_eq!(
        b.command(&trig_dma(1, 200, 0), src),
        Err(CtError::TleExhausted { pool: 2 })
    );
}

#[test]
fn ack_counters_per_cq() {
    let mut b = block(&[1, 2]);
    let a = CmdSource { cq: 1, tle_pool: 0 };
    let c = CmdSource {
        cq: 1030,
        tle_pool: 1,
    };
    b.command(&trig_dma(1, 2, 1), a).unwrap();
    b.command(&trig_dma(1, 4, 2), a).unwrap();
    b.command(&trig_inc(2, 1, 1, 1), c).unwrap();
    assert_eq!((b.pending(1), b.pending(1030), b.pending(2)), (2, 1, 0));
    b.event_increment(1, 2, 0).unwrap();
    assert_eq!((b.pending(1), b.pending(1030)), (1, 1));
    // CT2 fires the TRIG_INC onto CT1 (3 -> not yet 4).
    b.event_increment(2, 1, 0).unwrap();
    assert_eq!((b.pending(1), b.pending(1030)), (1, 0));
    assert_eq!(counts(&b, 1), (3, 0));
    assert_eq!(b.pending(60000), 0);
    assert_eq!(
        b.command(
            &trig_dma(1, 9, 0),
            CmdSource {
                cq: 1536,
                tle_pool: 0
            }
        ),
        Err(CtError::InvalidCq(1536))
    );
}

#[test]
fn cancel_drops_pending_and_ct_stays_usable() {
    let mut b = block(&[1, 2]);
    for (t, id) in [(5, 1), (6, 2), (7, 3)] {
        b.command(&trig_dma(1, t, id), SRC).unwrap();
    }
    b.command(&trig_dma(2, 5, 4), SRC).unwrap();
    assert_eq!(b.pending(SRC.cq), 4);
    let cancel = CtCommand::Ct(CtCmd {
        ct: 1,
        ..ct_cmd(CtOp::CtCancel)
    });
    let fx = b.command(&cancel, SRC).unwrap();
    assert!(fx.is_empty());
    assert_eq!(b.pending(SRC.cq), 1);
    assert_eq!(b.pending_on(1), 0);
    assert_eq!(b.tles_in_use(), 1);
    assert_eq!(b.counters().cancelled, 3);
    // Cancelled operations never fire; the CT keeps counting and accepts new ones.
    let fx = b.event_increment(1, 10, 0).unwrap();
    assert!(fired_ids(&fx).is_empty());
    assert_eq!(wbs(&fx), [(1, 10, 0)]);
    b.command(&trig_dma(1, 11, 5), SRC).unwrap();
    assert_eq!(fired_ids(&b.event_increment(1, 1, 0).unwrap()), [5]);
    // The other CT's operation is untouched.
    assert_eq!(fired_ids(&b.event_increment(2, 5, 0).unwrap()), [4]);
    // The driver's cancel (C_CQ_CFG_INIT_CT_HW_STATE.cancel) and init.
    b.command(&trig_dma(2, 50, 6), SRC).unwrap();
    b.disable(2).unwrap();
    assert_eq!(b.pending_on(2), 1, "disable keeps pending operations");
    assert_eq!(b.cancel(2), Ok(1));
    assert_eq!(b.pending(SRC.cq), 0);
    b.command(&trig_dma(1, 50, 7), SRC).unwrap();
    b.init(1).unwrap();
    assert_eq!(
        (counts(&b, 1), b.pending_on(1), b.pending(SRC.cq)),
        ((0, 0), 0, 0)
    );
}

// ------------------------------------------------------------------------------------------
// Errors and decoding
// ------------------------------------------------------------------------------------------

#[test]
fn command_errors() {
    let mut b = block(&[1]);
    let get = |ct| {
        CtCommand::Ct(CtCmd {
            ct,
            ..ct_cmd(CtOp::CtGet)
        })
    };
    let e = b.command(&get(2), SRC).unwrap_err();
    assert_eq!(e, CtError::CtDisabled(2));
    assert_eq!(u8::from(e.return_code()), 50);
    assert_eq!(b.command(&get(0), SRC), Err(CtError::InvalidCt(0)));
    assert_eq!(
        b.command(&trig_dma(2, 1, 0), SRC),
        Err(CtError::CtDisabled(2))
    );
    assert_eq!(
        b.command(&trig_inc(1, 1, 3, 1), SRC),
        Err(CtError::CtDisabled(3))
    );
    assert_eq!(
        b.command(
            &CtCommand::Ct(CtCmd {
                trig_ct: 1,
                ..ct_cmd(CtOp::CtTrigDma)
            }),
            SRC
        ),
        Err(CtError::MissingEmbedded)
    );
    let bad = CtCommand::TrigDma {
        ct: CtCmd {
            trig_ct: 1,
            threshold: 9,
            ..ct_cmd(CtOp::CtTrigDma)
        },
        embedded: [0u8; 104],
    };
    let e = b.command(&bad, SRC).unwrap_err();
    assert!(matches!(e, CtError::BadEmbedded(_)));
    assert_eq!(e.return_code(), ReturnCode::CmdInvalidArg);
    assert_eq!(
        b.command(&get(1), CmdSource { cq: 0, tle_pool: 4 }),
        Err(CtError::InvalidPool(4))
    );
    assert_eq!(b.pending_on(1), 0);
    assert_eq!(b.counters().cmd_failures, 7);
    assert_eq!(b.init(0), Err(CtError::InvalidCt(0)));
    assert_eq!(b.enable(2048, None), Err(CtError::InvalidCt(2048)));
}

#[test]
fn decode_from_ring_bytes() {
    let cmd = CtCmd {
        opcode: CtOp::CtTrigInc,
        ct: 7,
        trig_ct: 8,
        threshold: 0xABC,
        ct_success: 3,
        ..CtCmd::default()
    };
    let bytes = Command::Ct(cmd).encode().unwrap();
    assert_eq!(CtCommand::decode(&bytes).unwrap(), CtCommand::Ct(cmd));
    let dma = FullDma {
        opcode: DmaOp::Get,
        user_ptr: 0x55,
        ..FullDma::default()
    };
    let t = TrigDma::new(8, 4, EmbeddedDma::Full(dma));
    let ring = Command::TrigDma(t).encode().unwrap();
    assert_eq!(ring.len(), 128);
    let CtCommand::TrigDma { ct, embedded } = CtCommand::decode(&ring).unwrap() else {
        panic!("not a CT_TRIG_DMA");
    };
    assert_eq!((ct.trig_ct, ct.threshold), (8, 4));
    assert_eq!(&embedded[..], &ring[24..128]);
    assert!(CtCommand::decode(&ring[..64]).is_err());
}

// ------------------------------------------------------------------------------------------
// Property: exactly once, exactly when reached
// ------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Step {
    Append(u64),
    Inc(u64),
    IncFailure(u64),
    Set(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..40).prop_map(Step::Append),
        4 => (0u64..5).prop_map(Step::Inc),
        1 => (0u64..3).prop_map(Step::IncFailure),
        1 => (0u64..30).prop_map(Step::Set),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn each_triggered_op_fires_once_exactly_when_reached(
        steps in prop::collection::vec(step(), 1..60)
    ) {
        let mut b = block(&[1]);
        let mut count = 0u64;
        // The failure count (7 bits) counts too (Portals rule, the default).
        let mut failures = 0u64;
        // (threshold, arrival id) of pending operations.
        let mut pending: Vec<(u64, u64)> = Vec::new();
        let mut fired_ever = std::collections::HashSet::new();
        let mut next_id = 0u64;
        for s in steps {
            let fx = match s {
                Step::Append(t) => {
                    next_id += 1;
                    let fx = b.command(&trig_dma(1, t, next_id), SRC).unwrap();
                    pending.push((t, next_id));
                    fx
                }
                Step::Inc(n) => {
                    count += n;
                    b.event_increment(1, n, 0).unwrap()
                }
                Step::IncFailure(n) => {
                    failures = (failures + n) % 128;
                    b.event_increment(1, 0, n).unwrap()
                }
                Step::Set(v) => {
                    count = v;
                    b.command(
                        &CtCommand::Ct(CtCmd {
                            opcode: CtOp::CtSet,
                            ct: 1,
                            ct_success: v,
                            set_ct_success: true,
                            ..CtCmd::default()
                        }),
                        SRC,
                    )
                    .unwrap()
                }
            };
            // Expected: every pending op with threshold <= success + failure, in
            // (threshold, arrival) order.
            let total = count + failures;
            let mut due: Vec<(u64, u64)> =
                pending.iter().copied().filter(|(t, _)| *t <= total).collect();
            due.sort();
            let want: Vec<u64> = due.iter().map(|(_, id)| *id).collect();
            let got = fired_ids(&fx);
            prop_assert_eq!(&got, &want);
            for id in &got {
                prop_assert!(fired_ever.insert(*id), "fired twice: {}", id);
            }
            pending.retain(|(t, _)| *t > total);
            prop_assert_eq!(b.pending(SRC.cq) as usize, pending.len());
            prop_assert_eq!(b.pending_on(1), pending.len());
            prop_assert_eq!(b.tles_in_use(), pending.len());
            prop_assert_eq!(counts(&b, 1).0, count);
        }
    }
}
