//! Measurements of the emulated Cassini, as plain functions for the CLI and
//! `examples/cassini_perf.rs` (figures go to docs/PERFORMANCE.md, never into assertions).
//!
//! * [`cq_eq_commands_per_sec`]: commands through one transmit CQ to one EQ on the
//!   deterministic engine — 8 B IDC puts to a non-matching PtlTE of the other NIC, 32 per
//!   doorbell, each completing with an ACK event that software reads back.
//! * [`threaded_rtt_8b`]: 8 B ping-pong between two NICs on the threaded engine, wall clock:
//!   node 0 sends an IDC small message, node 1 sees the PUT event and answers, node 0 sees
//!   its PUT event. Initiator events are disabled, as latency benchmarks do.
//! * [`amo_rate`]: fetching 8-byte SUMs (IDC AMOs) from one NIC to one word of the other, on
//!   the deterministic engine, 64 in flight per doorbell, each completed by a REPLY event.
//! * [`rendezvous_bandwidth`]: one RENDEZVOUS_PUT whose rest the target NIC pulls with a
//!   hardware-issued Get (cassini.md §6), from the doorbell to the REPLY event, on the
//!   deterministic engine; every byte is checked afterwards.

use std::time::{Duration, Instant};

use firmware_spec::cassini::amo::{AmoOp, AmoType};
use firmware_spec::cassini::cmd::{
    CState, DmaFlags, DmaOp, FullDma, IdcAmo, IdcMsg, IdcPut, Payload, SetStateCmd, TargetCmd,
    TgtOp,
};
use firmware_spec::cassini::dfa::{PidBits, match_id};
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::le::{LeFlags, PtAllocOpts, PtlList, PtlteState};
use firmware_spec::cassini::rc::ReturnCode;

use crate::harness::{Cluster, CmdQueue, EqOpts, EqRing, HarnessError, NODE_MEM, PAGE, dfa};

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

/// A run on the deterministic engine: what emulating it cost (wall clock) and what the model
/// says it took (engine time: link bandwidth and latency of the fabric, no cost for device
/// work).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Modelled {
    /// Operations completed.
    pub count: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Wall time.
    pub wall: Duration,
    /// Engine (virtual) time.
    pub engine: Duration,
}

impl Modelled {
    /// Operations per wall-clock second.
    pub fn per_sec(&self) -> f64 {
        self.count as f64 / self.wall.as_secs_f64().max(1e-12)
    }
    /// Operations per second of engine time.
    pub fn modelled_per_sec(&self) -> f64 {
        self.count as f64 / self.engine.as_secs_f64().max(1e-12)
    }
    /// Bytes per wall-clock second, in GB/s (10^9).
    pub fn gb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.wall.as_secs_f64().max(1e-12) / 1e9
    }
    /// Bytes per second of engine time, in GB/s.
    pub fn modelled_gb_per_sec(&self) -> f64 {
        self.bytes as f64 / self.engine.as_secs_f64().max(1e-12) / 1e9
    }
}

fn engine_now(c: &Cluster) -> Duration {
    c.deterministic_engine()
        .map_or(Duration::ZERO, |d| Duration::from_nanos(d.now().as_ns()))
}

/// Engine time stamped in a long initiator event (`timestamp_sec`, `timestamp_ns`). Runs
/// are timed up to their last event, not to when the engine went idle: timers (the request
/// timeout scan) keep virtual time going after the work is done.
fn stamp(e: &Event) -> Option<Duration> {
    match e {
        Event::InitiatorLong(l) => Some(
            Duration::from_secs(l.timestamp_sec) + Duration::from_nanos(u64::from(l.timestamp_ns)),
        ),
        _ => None,
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

/// Enable PtlTE `pt` through target CQ `q` and append `le` to it.
fn enable_with(
    c: &Cluster,
    node: usize,
    q: &mut CmdQueue,
    pt: u16,
    le: &TargetCmd,
) -> Result<(), HarnessError> {
    let n = &c.nodes[node];
    let s = SetStateCmd {
        ptlte_state: PtlteState::Enabled,
        ptlte_index: pt,
        current_addr: 0,
        drop_count: 0,
    };
    q.emit(n, &s.encode())?;
    q.emit(n, &le.encode())?;
    q.ring(n)
}

/// `n` fetching 8-byte SUMs from node 0 to one word of node 1 (deterministic engine), 64 per
/// doorbell; every one completes with a REPLY event. The word must end at `n`.
pub fn amo_rate(n: u64) -> Result<Modelled, HarnessError> {
    let mut c = Cluster::deterministic(2, 1)?;
    let n0 = &mut c.nodes[0];
    n0.set_cp(0, 0, 10, 1)?;
    let long = EqOpts {
        long_initiator: true,
        ..EqOpts::default()
    };
    let mut eq = n0.alloc_eq(1, 64 * PAGE, long)?;
    let mut txq = n0.alloc_txq(0, 1024, 1, 0)?;
    let res = n0.map(8 * 64, true, true)?;
    let n1 = &mut c.nodes[1];
    let _tgt_eq = n1.alloc_eq(2, 16 * PAGE, EqOpts::default())?;
    let mut tgq = n1.alloc_tgq(0, 64, 2)?;
    n1.alloc_pte(7, 2, PtAllocOpts::empty(), 10, 3, 2, 0, 0)?;
    let word = n1.map(PAGE, true, true)?;
    let mut le = TargetCmd {
        opcode: TgtOp::Append,
        ptl_list: PtlList::Priority,
        ptlte_index: 7,
        buffer_id: 1,
        start: word.iova,
        length: word.len,
        match_id: u32::MAX,
        ..TargetCmd::default()
    };
    le.set_opts(
        LeFlags::OP_PUT
            | LeFlags::OP_GET
            | LeFlags::EVENT_LINK_DISABLE
            | LeFlags::EVENT_COMM_DISABLE,
    );
    enable_with(&c, 1, &mut tgq, 7, &le)?;
    c.settle();
    let (d, ext) = dfa(1, 3, 2);
    let cs = CState {
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        index_ext: ext,
        eq: 1,
        ..CState::default()
    };
    txq.submit(&c.nodes[0], &cs.encode())?;
    let cmds: Vec<[u8; 64]> = (0..64u64)
        .map(|k| {
            IdcAmo {
                opcode: DmaOp::FetchingAtomic,
                dfa: d,
                remote_offset: 0,
                local_addr: res.iova + 8 * k,
                atomic_op: AmoOp::Sum,
                atomic_type: AmoType::Uint64,
                op1_word1: 1,
                ..IdcAmo::default()
            }
            .encode()
        })
        .collect();
    let t0 = Instant::now();
    let mut done = 0u64;
    let mut engine = Duration::ZERO;
    while done < n {
        let k = 64.min(n - done);
        for cmd in &cmds[..k as usize] {
            txq.emit(&c.nodes[0], cmd)?;
        }
        // Engine time of a batch: from its doorbell to its last REPLY.
        let b0 = engine_now(&c);
        txq.ring(&c.nodes[0])?;
        c.settle();
        let mut got = 0;
        let mut last = b0;
        while let Some(e) = eq.next(&c.nodes[0])? {
            if e.event_type() == EventType::Reply && e.return_code() == ReturnCode::Ok {
                got += 1;
                last = last.max(stamp(&e).unwrap_or(b0));
            }
        }
        if got != k {
            return Err(HarnessError::Invalid(format!("{got} REPLYs for {k} AMOs")));
        }
        engine += last - b0;
        done += k;
    }
    let wall = t0.elapsed();
    let total = u64::from_le_bytes(
        c.nodes[1]
            .read_host(word.host, 8)?
            .try_into()
            .map_err(|_| fail("short read"))?,
    );
    if total != n {
        return Err(HarnessError::Invalid(format!("word is {total}, not {n}")));
    }
    Ok(Modelled {
        count: n,
        bytes: 8 * n,
        wall,
        engine,
    })
}

/// One rendezvous transfer of `bytes` (at most 4 GiB - 1) from node 0 to node 1 on the
/// deterministic engine: node 0 exposes its memory on its rendezvous PtlTE (index 255 of
/// PID 7), node 1 has a receive LE; the RENDEZVOUS_PUT carries 2 KiB eagerly
/// (`FI_CXI_RDZV_EAGER_SIZE`'s default), node 1's NIC pulls the rest. Timed from the
/// doorbell to the REPLY event; every byte is compared afterwards.
pub fn rendezvous_bandwidth(bytes: u64) -> Result<Modelled, HarnessError> {
    let len = u32::try_from(bytes).map_err(fail)?;
    let mem = (bytes + (1 << 20)).div_ceil(PAGE) * PAGE + NODE_MEM / 4;
    let mut c = Cluster::deterministic_with_memory(2, 1, mem)?;
    for i in 0..2 {
        let n = &mut c.nodes[i];
        n.set_cp(0, 0, 10, 1)?;
        n.set_rendezvous_gets(true)?;
    }
    // Source: the rendezvous PtlTE with one LE over the whole user IOVA space.
    let n0 = &mut c.nodes[0];
    let mut eq0 = n0.alloc_eq(1, 16 * PAGE, EqOpts::default())?;
    let _eq0t = n0.alloc_eq(2, 16 * PAGE, EqOpts::default())?;
    let mut txq = n0.alloc_txq(0, 64, 1, 0)?;
    let mut tgq0 = n0.alloc_tgq(0, 64, 2)?;
    n0.alloc_pte(20, 2, PtAllocOpts::IS_MATCHING, 10, 7, 255, 0, 0)?;
    let src = n0.map(bytes, true, true)?;
    let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    n0.write_host(src.host, &data)?;
    let mut src_le = TargetCmd {
        opcode: TgtOp::Append,
        ptl_list: PtlList::Priority,
        ptlte_index: 20,
        buffer_id: 255,
        start: 0,
        length: (1 << 56) - 1,
        match_id: u32::MAX,
        ignore_bits: u64::MAX,
        ..TargetCmd::default()
    };
    src_le.set_opts(LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE);
    enable_with(&c, 0, &mut tgq0, 20, &src_le)?;
    // Target: a receive LE at index 0 of PID 3.
    let n1 = &mut c.nodes[1];
    let mut eq1 = n1.alloc_eq(
        2,
        16 * PAGE,
        EqOpts {
            long_initiator: true,
            ..EqOpts::default()
        },
    )?;
    let mut tgq1 = n1.alloc_tgq(0, 64, 2)?;
    n1.alloc_pte(5, 2, PtAllocOpts::IS_MATCHING, 10, 3, 0, 0, 0)?;
    let dst = n1.map(bytes, true, true)?;
    let mut recv = TargetCmd {
        opcode: TgtOp::Append,
        ptl_list: PtlList::Priority,
        ptlte_index: 5,
        buffer_id: 1,
        start: dst.iova,
        length: dst.len,
        match_id: u32::MAX,
        match_bits: 0x77,
        ..TargetCmd::default()
    };
    recv.set_opts(
        LeFlags::OP_PUT
            | LeFlags::USE_ONCE
            | LeFlags::EVENT_LINK_DISABLE
            | LeFlags::EVENT_UNLINK_DISABLE,
    );
    enable_with(&c, 1, &mut tgq1, 5, &recv)?;
    c.settle();
    while eq1.next(&c.nodes[1])?.is_some() {}
    let (d, ext) = dfa(1, 3, 0);
    let put = FullDma {
        opcode: DmaOp::RendezvousPut,
        index_ext: ext,
        lac: 0,
        flags: DmaFlags {
            event_send_disable: true,
            use_offset_for_get: true,
            ..DmaFlags::default()
        },
        dfa: d,
        remote_offset: src.iova,
        local_addr: src.iova,
        request_len: len,
        ct: 0,
        eq: 1,
        eager_length: 2048,
        rendezvous_id: 1,
        initiator: match_id(PidBits::DEFAULT, 7, 0),
        match_bits: 0x77,
        header_data: 0,
        user_ptr: 0,
    };
    let (t0, v0) = (Instant::now(), engine_now(&c));
    txq.submit(&c.nodes[0], &put.encode())?;
    c.settle();
    let wall = t0.elapsed();
    let mut reply = None;
    while let Some(e) = eq1.next(&c.nodes[1])? {
        if let Event::InitiatorLong(r) = e
            && r.event_type == EventType::Reply
        {
            reply = Some((r, stamp(&e).unwrap_or(v0)));
        }
    }
    let ok = reply.is_some_and(|(r, _)| r.rendezvous && r.return_code == ReturnCode::Ok);
    let engine = reply.map_or(Duration::ZERO, |(_, t)| t.saturating_sub(v0));
    let acked = eq0
        .next(&c.nodes[0])?
        .is_some_and(|e| e.event_type() == EventType::Ack);
    if !ok || !acked || c.nodes[1].read_host(dst.host, data.len())? != data {
        return Err(HarnessError::Invalid("rendezvous did not complete".into()));
    }
    Ok(Modelled {
        count: 1,
        bytes,
        wall,
        engine,
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
        let a = amo_rate(200).unwrap();
        assert_eq!(a.count, 200);
        assert!(a.modelled_per_sec() > 0.0);
        let b = rendezvous_bandwidth(300_000).unwrap();
        assert_eq!(b.bytes, 300_000);
        assert!(b.modelled_gb_per_sec() > 0.0);
    }
}
