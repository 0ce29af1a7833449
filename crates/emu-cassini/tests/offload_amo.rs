//! Atomics through rings and doorbells (cassini.md §2.1): every operation on every type it is
//! defined for, fetching and non-fetching, in IDC and DMA form (and the small IDC form);
//! alignment, length and invalid-operation errors; floating-point exception return codes;
//! a DMA AMO fired by a triggered operation; and K initiators doing fetching SUMs on one
//! word at once.

mod offload_support;

use emu_cassini::amo::{self, AmoRequest};
use firmware_spec::cassini::cmd::CState;
use offload_support::*;

const A: usize = 0;
const B: usize = 1;

/// A C_STATE for IDC commands to PtlTE index `idx` of node `dst` (fetched values written
/// through LAC 0).
fn cstate(net: &Net, src: usize, dst: usize, idx: u32, user_ptr: u64) -> [u8; 32] {
    let (_, ext) = dfa(dst as u32, PID, idx);
    CState {
        write_lac: 0,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        initiator: net.initiator(src),
        index_ext: ext,
        user_ptr,
        ct: 0,
        eq: EQ_TX,
    }
    .encode()
}

fn words(v: u128) -> (u64, u64) {
    (v as u64, (v >> 64) as u64)
}

fn le_bytes(v: u128, size: usize) -> Vec<u8> {
    v.to_le_bytes()[..size].to_vec()
}

fn from_le(b: &[u8]) -> u128 {
    let mut x = [0u8; 16];
    x[..b.len()].copy_from_slice(b);
    u128::from_le_bytes(x)
}

/// Operand values for one (op, type, cswap) case: (old, op1, op2), finite and exception-free
/// for floating-point types; CSWAP compares equal in half the cases.
fn operands(i: usize, req: &AmoRequest) -> (u128, u128, u128) {
    let size = req.ty.size();
    let mask = if size == 16 {
        u128::MAX
    } else {
        (1u128 << (8 * size)) - 1
    };
    let (old, op1) = match req.ty {
        AmoType::Float => (
            u128::from((1.5f32 + i as f32).to_bits()),
            u128::from(2.25f32.to_bits()),
        ),
        AmoType::Double => (
            u128::from((3.5f64 + i as f64).to_bits()),
            u128::from((-0.75f64).to_bits()),
        ),
        AmoType::FloatComplex => (
            u128::from(1.5f32.to_bits()) | (u128::from((i as f32).to_bits()) << 32),
            u128::from(0.5f32.to_bits()) | (u128::from(4.0f32.to_bits()) << 32),
        ),
        AmoType::DoubleComplex => (
            u128::from(2.0f64.to_bits()) | (u128::from((i as f64).to_bits()) << 64),
            u128::from(0.25f64.to_bits()) | (u128::from(8.0f64.to_bits()) << 64),
        ),
        _ => (
            0x8123_4567_89AB_CDEF_0F1E_2D3C_4B5A_6978u128.rotate_left(i as u32) & mask,
            0x7F00_FF00_1234_5678_9ABC_DEF0_0000_0003u128.rotate_right(i as u32) & mask,
        ),
    };
    let op2 = match req.op {
        AmoOp::Cswap if i.is_multiple_of(2) => old,
        AmoOp::Cswap => op1,
        AmoOp::Axor => 0x00FF_F0F0_0F0F_FF00_1234_5678_9ABC_DEF0 & mask,
        _ => 0,
    };
    (old, op1, op2)
}

/// Every defined (op, type, cswap) combination, CSWAP expanded over its six comparisons.
fn cases() -> Vec<AmoRequest> {
    let mut v = Vec::new();
    for op in AmoOp::ALL {
        for ty in AmoType::ALL {
            let cmps: &[CswapOp] = if *op == AmoOp::Cswap {
                CswapOp::ALL
            } else {
                &[CswapOp::Eq]
            };
            for c in cmps {
                let r = AmoRequest {
                    op: *op,
                    ty: *ty,
                    cswap: *c,
                    op1: 0,
                    op2: 0,
                };
                if r.is_defined() {
                    v.push(r);
                }
            }
        }
    }
    v
}

/// Two nodes; node B exposes a window on its non-matching PtlTE (index 1) for atomics.
fn amo_net() -> (Net, Md) {
    let mut net = Net::new(2);
    let win = net.c.nodes[B].map(64 * 1024, true, true).unwrap();
    net.tgt_cmd(
        B,
        &le(
            PT_NOMATCH,
            1,
            &win,
            LeFlags::OP_PUT | LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE,
            0,
        ),
    );
    net.settle();
    assert!(net.tgt_events(B).is_empty());
    (net, win)
}

/// Drain node A's initiator events and the target's; every one must be OK.
fn expect_ok(net: &mut Net, n: usize) {
    let ev = net.tx_events(A);
    assert_eq!(ev.len(), n);
    for e in &ev {
        assert_eq!(e.return_code(), ReturnCode::Ok, "{e:?}");
    }
    net.tgt_events(B);
}

#[test]
fn every_operation_on_every_type_idc_and_dma_fetching_and_not() {
    let (mut net, win) = amo_net();
    let res = net.c.nodes[A].map(64 * 1024, true, true).unwrap();
    let ops = net.c.nodes[A].map(64 * 1024, true, true).unwrap();
    let cases = cases();
    // MIN/MAX on 11 types, SUM and SWAP on 13, six logical/bitwise ops on 9, AXOR on 8,
    // CSWAP EQ/NE on 13 and LE/LT/GE/GT on 11.
    assert_eq!(cases.len(), 2 * 11 + 2 * 13 + 6 * 9 + 8 + 2 * 13 + 4 * 11);
    let (d1, ext1) = dfa(B as u32, PID, 1);
    // Forms: 0 IDC non-fetching, 1 IDC fetching, 2 DMA non-fetching, 3 DMA fetching,
    // 4 small IDC (one 8-byte operand, non-fetching).
    let mut expected = Vec::new();
    for form in 0..5usize {
        let mut batch: Vec<Vec<u8>> = vec![cstate(&net, A, B, 1, 0xA0 + form as u64).to_vec()];
        let mut count = 0;
        let mut in_batch = 0;
        for (i, case) in cases.iter().enumerate() {
            let size = case.ty.size();
            if form == 4 && (size > 8 || matches!(case.op, AmoOp::Cswap | AmoOp::Axor)) {
                continue;
            }
            let (old, op1, op2) = operands(i, case);
            let slot = ((form * cases.len() + i) * 16) as u64;
            net.node(B)
                .write_host(win.host + slot, &le_bytes(old, size))
                .unwrap();
            let req = AmoRequest { op1, op2, ..*case };
            let (new, _) = amo::compute(&req, old).unwrap();
            expected.push((slot, size, old, new, form % 2 == 1 && form < 4));
            let fetching = form % 2 == 1 && form < 4;
            let opcode = if fetching {
                DmaOp::FetchingAtomic
            } else {
                DmaOp::Atomic
            };
            let (w1, w2) = words(op1);
            let (v1, v2) = words(op2);
            let cmd: Vec<u8> = match form {
                0 | 1 => IdcAmo {
                    opcode,
                    dfa: d1,
                    remote_offset: slot,
                    local_addr: res.iova + slot,
                    atomic_op: case.op,
                    atomic_type: case.ty,
                    cswap_op: case.cswap,
                    op1_word1: w1,
                    op1_word2: w2,
                    op2_word1: v1,
                    op2_word2: v2,
                }
                .encode()
                .to_vec(),
                2 | 3 => {
                    net.node(A)
                        .write_host(ops.host + slot, &le_bytes(op1, size))
                        .unwrap();
                    let mut c = [0u8; 128];
                    c[..96].copy_from_slice(
                        &DmaAmo {
                            opcode,
                            index_ext: ext1,
                            dfa: d1,
                            remote_offset: slot,
                            local_read_addr: ops.iova + slot,
                            request_len: size as u32,
                            flags: DmaFlags {
                                event_send_disable: true,
                                ..DmaFlags::default()
                            },
                            eq: EQ_TX,
                            initiator: net.initiator(A),
                            user_ptr: slot,
                            local_write_addr: res.iova + slot,
                            atomic_op: case.op,
                            atomic_type: case.ty,
                            cswap_op: case.cswap,
                            op2_word1: v1,
                            op2_word2: v2,
                            ..DmaAmo::default()
                        }
                        .encode(),
                    );
                    c.to_vec()
                }
                _ => IdcSmallAmo {
                    dfa: d1,
                    remote_offset: slot,
                    atomic_op: case.op,
                    atomic_type: case.ty,
                    op1_word1: w1,
                }
                .encode()
                .to_vec(),
            };
            batch.push(cmd);
            count += 1;
            in_batch += 1;
            if batch.len() >= 60 {
                let refs: Vec<&[u8]> = batch.iter().map(|c| &c[..]).collect();
                net.tx(A, &refs);
                net.settle();
                // Small IDC AMOs cannot fetch; their ACKs still report.
                expect_ok(&mut net, in_batch);
                batch.clear();
                in_batch = 0;
            }
        }
        if !batch.is_empty() {
            let refs: Vec<&[u8]> = batch.iter().map(|c| &c[..]).collect();
            net.tx(A, &refs);
            net.settle();
            expect_ok(&mut net, in_batch);
        }
        assert!(count >= 90, "form {form}: {count} atomics");
    }
    for (slot, size, old, new, fetching) in expected {
        let got = from_le(&net.node(B).read_host(win.host + slot, size).unwrap());
        assert_eq!(got, new, "target value at slot {slot:#x}");
        if fetching {
            let f = from_le(&net.node(A).read_host(res.host + slot, size).unwrap());
            assert_eq!(f, old, "fetched value at slot {slot:#x}");
        }
    }
    // A few results computed by hand, independent of the AMO unit.
    let i = cases
        .iter()
        .position(|c| c.op == AmoOp::Sum && c.ty == AmoType::Uint8)
        .unwrap();
    let (old, op1, _) = operands(i, &cases[i]);
    let got = net
        .node(B)
        .read_host(win.host + (i * 16) as u64, 1)
        .unwrap()[0];
    assert_eq!(got, (old as u8).wrapping_add(op1 as u8), "UINT8 SUM wraps");
    let i = cases
        .iter()
        .position(|c| c.op == AmoOp::Sum && c.ty == AmoType::Double)
        .unwrap();
    let got = f64::from_bits(from_le(
        &net.node(B)
            .read_host(win.host + (i * 16) as u64, 8)
            .unwrap(),
    ) as u64);
    assert_eq!(got, 3.5 + i as f64 - 0.75);
}

#[test]
fn alignment_length_and_invalid_operation_errors() {
    let (mut net, win) = amo_net();
    net.node(B).write_host(win.host, &[0x11; 64]).unwrap();
    let res = net.c.nodes[A].map(4096, true, true).unwrap();
    let ops = net.c.nodes[A].map(4096, true, true).unwrap();
    let (d1, ext1) = dfa(B as u32, PID, 1);
    let idc = |op, ty, off: u64| {
        IdcAmo {
            opcode: DmaOp::FetchingAtomic,
            dfa: d1,
            remote_offset: off,
            local_addr: res.iova,
            atomic_op: op,
            atomic_type: ty,
            op1_word1: 1,
            ..IdcAmo::default()
        }
        .encode()
    };
    let misaligned = idc(AmoOp::Sum, AmoType::Uint32, 2);
    let misaligned128 = idc(AmoOp::Swap, AmoType::Uint128, 8);
    let invalid = idc(AmoOp::Lor, AmoType::Float, 0);
    let invalid_axor = idc(AmoOp::Axor, AmoType::Double, 0);
    let small128 = IdcSmallAmo {
        dfa: d1,
        remote_offset: 16,
        atomic_op: AmoOp::Sum,
        atomic_type: AmoType::Uint128,
        op1_word1: 1,
    }
    .encode();
    let mut dma_len = [0u8; 128];
    dma_len[..96].copy_from_slice(
        &DmaAmo {
            opcode: DmaOp::Atomic,
            index_ext: ext1,
            dfa: d1,
            remote_offset: 32,
            local_read_addr: ops.iova,
            request_len: 4,
            flags: DmaFlags {
                event_send_disable: true,
                ..DmaFlags::default()
            },
            eq: EQ_TX,
            atomic_op: AmoOp::Sum,
            atomic_type: AmoType::Uint64,
            ..DmaAmo::default()
        }
        .encode(),
    );
    let cs = cstate(&net, A, B, 1, 0xE);
    net.tx(
        A,
        &[
            &cs,
            &misaligned,
            &misaligned128,
            &invalid,
            &invalid_axor,
            &small128,
            &dma_len,
        ],
    );
    net.settle();
    let rcs: Vec<(EventType, ReturnCode)> = net
        .tx_events(A)
        .iter()
        .map(|e| (e.event_type(), e.return_code()))
        .collect();
    assert_eq!(
        rcs,
        vec![
            (EventType::Reply, ReturnCode::AmoAlignError),
            (EventType::Reply, ReturnCode::AmoAlignError),
            (EventType::Reply, ReturnCode::AmoInvalOpError),
            (EventType::Reply, ReturnCode::AmoInvalOpError),
            (EventType::Ack, ReturnCode::AmoLengthError),
            (EventType::Ack, ReturnCode::AmoLengthError),
        ]
    );
    assert_eq!(
        net.node(B).read_host(win.host, 64).unwrap(),
        vec![0x11; 64],
        "refused atomics change nothing"
    );
    assert_eq!(
        net.node(A).read_host(res.host, 16).unwrap(),
        vec![0; 16],
        "and fetch nothing"
    );
}

#[test]
fn floating_point_exceptions_are_reported_when_the_ptlte_signals_them() {
    let (mut net, win) = amo_net();
    // PtlTE 9 at index 3: non-matching, every signal_* option set.
    const PT_SIG: u16 = 9;
    let sig = PtAllocOpts::SIGNAL_INVALID
        | PtAllocOpts::SIGNAL_UNDERFLOW
        | PtAllocOpts::SIGNAL_OVERFLOW
        | PtAllocOpts::SIGNAL_INEXACT;
    net.node(B)
        .alloc_pte(PT_SIG, EQ_TGT, sig, VNI, PID, 3, 0, 3)
        .unwrap();
    net.enable(B, PT_SIG);
    let win2 = net.c.nodes[B].map(4096, true, true).unwrap();
    net.tgt_cmd(
        B,
        &le(
            PT_SIG,
            2,
            &win2,
            LeFlags::OP_PUT | LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE,
            0,
        ),
    );
    net.settle();
    let res = net.c.nodes[A].map(4096, true, true).unwrap();
    // (old, op1) doubles and the code each SUM raises.
    let tiny = f64::from_bits(1); // smallest subnormal
    let cases: [(f64, f64, ReturnCode); 4] = [
        (f64::MAX, f64::MAX, ReturnCode::AmoFpOverflow),
        (1.0, 1e-30, ReturnCode::AmoFpInexact),
        (f64::INFINITY, f64::NEG_INFINITY, ReturnCode::AmoFpInvalid),
        (tiny, tiny, ReturnCode::AmoFpUnderflow),
    ];
    for (k, (idx, w, expect_signal)) in [(3u32, &win2, true), (1u32, &win, false)]
        .into_iter()
        .enumerate()
    {
        let (d, _) = dfa(B as u32, PID, idx);
        let mut cmds: Vec<Vec<u8>> = vec![cstate(&net, A, B, idx, 0xF0).to_vec()];
        for (i, (old, op1, _)) in cases.iter().enumerate() {
            let off = (i * 8) as u64;
            net.node(B)
                .write_host(w.host + off, &old.to_le_bytes())
                .unwrap();
            cmds.push(
                IdcAmo {
                    opcode: DmaOp::FetchingAtomic,
                    dfa: d,
                    remote_offset: off,
                    local_addr: res.iova + (k * 64) as u64 + off,
                    atomic_op: AmoOp::Sum,
                    atomic_type: AmoType::Double,
                    op1_word1: op1.to_bits(),
                    ..IdcAmo::default()
                }
                .encode()
                .to_vec(),
            );
        }
        let refs: Vec<&[u8]> = cmds.iter().map(|c| &c[..]).collect();
        net.tx(A, &refs);
        net.settle();
        let ev = net.tx_events(A);
        assert_eq!(ev.len(), 4);
        for (i, (old, op1, rc)) in cases.iter().enumerate() {
            let want = if expect_signal { *rc } else { ReturnCode::Ok };
            assert_eq!(
                ev[i].return_code(),
                want,
                "case {i}, signalling {expect_signal}"
            );
            // The result is written and the old value fetched in every case.
            let off = (i * 8) as u64;
            let now = f64::from_bits(read_u64(net.node(B), w.host + off));
            let sum = old + op1;
            assert!(
                now == sum || (now.is_nan() && sum.is_nan()),
                "case {i}: {now}"
            );
            let fetched = read_u64(net.node(A), res.host + (k * 64) as u64 + off);
            assert_eq!(fetched, old.to_bits());
        }
        net.tgt_events(B);
    }
}

#[test]
fn a_triggered_dma_amo_fires_at_its_threshold() {
    let (mut net, win) = amo_net();
    net.node(B).write_host(win.host, &[0; 8]).unwrap();
    let ops = net.c.nodes[A].map(64, true, true).unwrap();
    net.node(A)
        .write_host(ops.host, &40u64.to_le_bytes())
        .unwrap();
    let res = net.c.nodes[A].map(64, true, true).unwrap();
    let wb = net.c.nodes[A].map(64, true, true).unwrap();
    let ct = net.node(A).alloc_ct(3, Some(&wb)).unwrap();
    let (d1, ext1) = dfa(B as u32, PID, 1);
    let amo = DmaAmo {
        opcode: DmaOp::FetchingAtomic,
        index_ext: ext1,
        dfa: d1,
        remote_offset: 0,
        local_read_addr: ops.iova,
        request_len: 8,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        eq: EQ_TX,
        user_ptr: 0xDA,
        local_write_addr: res.iova,
        atomic_op: AmoOp::Sum,
        atomic_type: AmoType::Uint64,
        ..DmaAmo::default()
    };
    net.trig(A, &[&trig_dma(3, 2, EmbeddedDma::Amo(amo))]);
    net.settle();
    ct.inc_success(net.node(A), 1).unwrap();
    net.settle();
    assert_eq!(read_u64(net.node(B), win.host), 0, "not yet");
    ct.inc_success(net.node(A), 1).unwrap();
    net.settle();
    assert_eq!(read_u64(net.node(B), win.host), 40);
    let ev = net.tx_events(A);
    let r = init_fields(&ev[0]);
    assert_eq!((r.0, r.1, r.3), (EventType::Reply, ReturnCode::Ok, 0xDA));
}

#[test]
fn concurrent_fetching_sums_from_many_initiators_are_atomic() {
    const K: usize = 8;
    const N: usize = 64;
    let mut net = Net::new(K as u32 + 1);
    let target = K; // the last node
    let word = net.c.nodes[target].map(4096, true, true).unwrap();
    net.node(target)
        .write_host(word.host, &1000u64.to_le_bytes())
        .unwrap();
    net.tgt_cmd(
        target,
        &le(
            PT_NOMATCH,
            1,
            &word,
            LeFlags::OP_PUT | LeFlags::OP_GET | LeFlags::EVENT_LINK_DISABLE,
            0,
        ),
    );
    net.settle();
    let (d, _) = dfa(target as u32, PID, 1);
    // Every initiator has all N requests in flight at once: the doorbells ring in rounds of
    // eight commands per initiator, all before the engine runs, so the requests of different
    // initiators reach the target interleaved.
    const ROUND: usize = 8;
    let mut results = Vec::new();
    for i in 0..K {
        let res = net.c.nodes[i].map((N * 8) as u64, true, true).unwrap();
        let cs = cstate(&net, i, target, 1, i as u64);
        net.s[i].txq.emit(&net.c.nodes[i], &cs).unwrap();
        results.push(res);
    }
    for round in 0..N / ROUND {
        for (i, res) in results.iter().enumerate() {
            let n = &net.c.nodes[i];
            let q = &mut net.s[i].txq;
            for k in round * ROUND..(round + 1) * ROUND {
                let cmd = IdcAmo {
                    opcode: DmaOp::FetchingAtomic,
                    dfa: d,
                    remote_offset: 0,
                    local_addr: res.iova + (k * 8) as u64,
                    atomic_op: AmoOp::Sum,
                    atomic_type: AmoType::Uint64,
                    op1_word1: 1,
                    ..IdcAmo::default()
                }
                .encode();
                q.emit(n, &cmd).unwrap();
            }
            q.ring(n).unwrap();
        }
    }
    net.settle();
    assert_eq!(
        read_u64(net.node(target), word.host),
        1000 + (K * N) as u64,
        "the sequential total"
    );
    let mut fetched = Vec::new();
    for (i, res) in results.iter().enumerate() {
        let ev = net.tx_events(i);
        assert_eq!(ev.len(), N);
        assert!(ev.iter().all(|e| e.return_code() == ReturnCode::Ok));
        let b = net.node(i).read_host(res.host, N * 8).unwrap();
        let mine: Vec<u64> = b
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "one initiator's AMOs execute in order"
        );
        fetched.extend(mine);
    }
    fetched.sort_unstable();
    let want: Vec<u64> = (1000..1000 + (K * N) as u64).collect();
    assert_eq!(
        fetched, want,
        "every fetched value distinct: no lost update"
    );
    // The requests of different initiators interleaved at the target: some initiator's
    // fetched values are not one contiguous block.
    let interleaved = results.iter().enumerate().any(|(i, r)| {
        let first = read_u64(net.node(i), r.host);
        let last = read_u64(net.node(i), r.host + ((N - 1) * 8) as u64);
        last - first > (N - 1) as u64
    });
    assert!(interleaved, "the initiators ran concurrently");
}
