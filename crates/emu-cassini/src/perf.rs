//! Measurements of the emulated Cassini, as plain functions for the CLI and
//! `examples/cassini_perf.rs` (figures go to docs/PERFORMANCE.md, never into assertions).
//!
//! * [`cq_eq_commands_per_sec`]: commands through one transmit CQ to one EQ on the
//!   deterministic engine — 8 B IDC puts to a non-matching PtlTE of the other NIC, 32 per
//!   doorbell, each completing with an ACK event that software reads back.
//! * [`threaded_rtt_8b`]: 8 B ping-pong between two NICs on the threaded engine, wall clock:
//!   node 0 sends an IDC small message, node 1 sees the PUT event and answers, node 0 sees
//!   its PUT event. Initiator events are disabled, as latency benchmarks do.

use std::time::{Duration, Instant};

use firmware_spec::cassini::cmd::{
    CState, DmaFlags, IdcMsg, IdcPut, Payload, SetStateCmd, TargetCmd, TgtOp,
};
use firmware_spec::cassini::event::EventType;
use firmware_spec::cassini::le::{LeFlags, PtAllocOpts, PtlList, PtlteState};

use crate::harness::{Cluster, CmdQueue, EqOpts, EqRing, HarnessError, PAGE, dfa};

/// A measurement: `count` operations in `elapsed` wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Operations completed.
    pub count: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl Measurement {
    /// Operations per second.
    pub fn per_sec(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64().max(1e-12)
    }
    /// Microseconds per operation.
    pub fn us_per_op(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e6 / (self.count.max(1) as f64)
    }
}

fn fail(e: impl std::fmt::Display) -> HarnessError {
    HarnessError::Invalid(e.to_string())
}

/// A node with a target CQ, a target EQ and PtlTE 5 (matching) / 6 (non-matching) enabled at
/// PID 3, and a transmit CQ with EQ 1.
struct Side {
    txq: CmdQueue,
    tx_eq: EqRing,
    _tgq: CmdQueue,
    tgt_eq: EqRing,
}

fn side(c: &mut Cluster, i: usize) -> Result<Side, HarnessError> {
    let n = &mut c.nodes[i];
    n.set_cp(0, 0, 10, 1)?;
    let tx_eq = n.alloc_eq(1, 64 * PAGE, EqOpts::default())?;
    let txq = n.alloc_txq(0, 1024, 1, 0)?;
    let tgt_eq = n.alloc_eq(2, 64 * PAGE, EqOpts::default())?;
    let mut tgq = n.alloc_tgq(0, 256, 2)?;
    n.alloc_pte(5, 2, PtAllocOpts::IS_MATCHING, 10, 3, 0, 0, 0)?;
    n.alloc_pte(6, 2, PtAllocOpts::empty(), 10, 3, 1, 0, 1)?;
    let buf = n.map(PAGE, true, true)?;
    for pt in [5u16, 6] {
        let s = SetStateCmd {
            ptlte_state: PtlteState::Enabled,
            ptlte_index: pt,
            current_addr: 0,
            drop_count: 0,
        };
        tgq.emit(n, &s.encode())?;
        let mut t = TargetCmd {
            opcode: TgtOp::Append,
            ptl_list: PtlList::Priority,
            ptlte_index: pt,
            buffer_id: 1,
            start: buf.iova,
            length: buf.len,
            match_id: u32::MAX,
            match_bits: 0,
            ignore_bits: u64::MAX,
            ..TargetCmd::default()
        };
        t.set_opts(LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE);
        tgq.emit(n, &t.encode())?;
    }
    tgq.ring(n)?;
    Ok(Side {
        txq,
        tx_eq,
        _tgq: tgq,
        tgt_eq,
    })
}

/// `n` 8 B IDC puts through one CQ, each completed by an ACK event read from one EQ, on the
/// deterministic engine.
pub fn cq_eq_commands_per_sec(n: u64) -> Result<Measurement, HarnessError> {
    let mut c = Cluster::deterministic(2, 1)?;
    let mut a = side(&mut c, 0)?;
    let mut b = side(&mut c, 1)?;
    c.settle();
    while b.tgt_eq.next(&c.nodes[1])?.is_some() {}
    let (d, ext) = dfa(1, 3, 1);
    let cs = CState {
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        index_ext: ext,
        eq: 1,
        ..CState::default()
    };
    a.txq.submit(&c.nodes[0], &cs.encode())?;
    let put = IdcPut {
        dfa: d,
        remote_offset: 0,
        payload: Payload::new(&[0x5A; 8]).map_err(fail)?,
    }
    .encode()
    .map_err(fail)?;
    const BATCH: u64 = 32;
    let mut done = 0u64;
    let t = Instant::now();
    while done < n {
        let k = BATCH.min(n - done);
        for _ in 0..k {
            a.txq.emit(&c.nodes[0], &put)?;
        }
        a.txq.ring(&c.nodes[0])?;
        c.settle();
        let mut got = 0;
        while let Some(e) = a.tx_eq.next(&c.nodes[0])? {
            if e.event_type() == EventType::Ack {
                got += 1;
            }
        }
        // The target's PUT events are consumed too, so its EQ never fills.
        while b.tgt_eq.next(&c.nodes[1])?.is_some() {}
        if got != k {
            return Err(HarnessError::Invalid(format!(
                "{got} ACKs for {k} commands"
            )));
        }
        done += k;
    }
    let elapsed = t.elapsed();
    Ok(Measurement {
        count: done,
        elapsed,
    })
}

fn wait_put(c: &Cluster, node: usize, eq: &mut EqRing) -> Result<(), HarnessError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(e) = eq.next(&c.nodes[node])? {
            if e.event_type() == EventType::Put {
                return Ok(());
            }
            continue;
        }
        if Instant::now() > deadline {
            return Err(HarnessError::Timeout("a PUT event"));
        }
        std::hint::spin_loop();
    }
}

/// `iters` 8 B round trips between two NICs on the threaded engine (wall clock).
pub fn threaded_rtt_8b(iters: u64) -> Result<Measurement, HarnessError> {
    let mut c = Cluster::threaded(2)?;
    let mut a = side(&mut c, 0)?;
    let mut b = side(&mut c, 1)?;
    c.settle();
    while a.tgt_eq.next(&c.nodes[0])?.is_some() {}
    while b.tgt_eq.next(&c.nodes[1])?.is_some() {}
    let quiet = DmaFlags {
        event_send_disable: true,
        event_success_disable: true,
        ..DmaFlags::default()
    };
    let mk = |to: u32| -> Result<(Vec<u8>, Vec<u8>), HarnessError> {
        let (d, ext) = dfa(to, 3, 0);
        let cs = CState {
            flags: quiet,
            index_ext: ext,
            eq: 1,
            ..CState::default()
        };
        let m = IdcMsg {
            dfa: d,
            match_bits: 1,
            header_data: 0,
            user_ptr: 0,
            payload: Payload::new(&[0xA5; 8]).map_err(fail)?,
        };
        Ok((cs.encode().to_vec(), m.encode().map_err(fail)?))
    };
    let (cs_a, ping) = mk(1)?;
    let (cs_b, pong) = mk(0)?;
    a.txq.submit(&c.nodes[0], &cs_a)?;
    b.txq.submit(&c.nodes[1], &cs_b)?;
    // Warm up.
    for _ in 0..100 {
        a.txq.submit(&c.nodes[0], &ping)?;
        wait_put(&c, 1, &mut b.tgt_eq)?;
        b.txq.submit(&c.nodes[1], &pong)?;
        wait_put(&c, 0, &mut a.tgt_eq)?;
    }
    let t = Instant::now();
    for _ in 0..iters {
        a.txq.submit(&c.nodes[0], &ping)?;
        wait_put(&c, 1, &mut b.tgt_eq)?;
        b.txq.submit(&c.nodes[1], &pong)?;
        wait_put(&c, 0, &mut a.tgt_eq)?;
    }
    let elapsed = t.elapsed();
    Ok(Measurement {
        count: iters,
        elapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measurements_complete() {
        let m = cq_eq_commands_per_sec(100).unwrap();
        assert_eq!(m.count, 100);
        let r = threaded_rtt_8b(20).unwrap();
        assert_eq!(r.count, 20);
        assert!(r.us_per_op() > 0.0);
    }
}
