//! The AMO unit against straightforward reference arithmetic on native Rust types, for every
//! (op, type) pair; operand order of CSWAP; AXOR as MSWAP; error codes; FP exception reports;
//! operand extraction from the three command formats.

use emu_cassini::amo::{
    AmoCommand, AmoError, AmoOp, AmoRequest, AmoType, CswapOp, FpSignals, amo_size, check, execute,
    is_defined,
};
use firmware_spec::cassini::cmd::{Command, DmaAmo, DmaOp, IdcAmo, IdcSmallAmo};
use firmware_spec::cassini::rc::ReturnCode;
use proptest::prelude::*;

const INTS: [AmoType; 8] = [
    AmoType::Int8,
    AmoType::Uint8,
    AmoType::Int16,
    AmoType::Uint16,
    AmoType::Int32,
    AmoType::Uint32,
    AmoType::Int64,
    AmoType::Uint64,
];

const SAMPLES: [u128; 18] = [
    0,
    1,
    2,
    42,
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x7FFF_FFFF,
    0x8000_0000,
    0xDEAD_BEEF,
    0x7FFF_FFFF_FFFF_FFFF,
    0x8000_0000_0000_0000,
    u64::MAX as u128,
    1 << 127,
    0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210,
];

/// Run `req` on `old` at an aligned address; return (fetched, stored) bytes.
fn run(req: &AmoRequest, old: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut target = old.to_vec();
    let out = execute(req, 0x1000, &mut target, FpSignals::NONE).unwrap();
    assert_eq!(out.return_code, ReturnCode::Ok);
    assert_eq!(out.stored.as_slice(), &target[..]);
    (out.fetched.as_slice().to_vec(), target)
}

fn cswap_ops() -> [CswapOp; 6] {
    [
        CswapOp::Eq,
        CswapOp::Ne,
        CswapOp::Le,
        CswapOp::Lt,
        CswapOp::Ge,
        CswapOp::Gt,
    ]
}

// ------------------------------------------------------------------------------------------
// Validity
// ------------------------------------------------------------------------------------------

/// The defined pairs, written out type by type (module docs / libfabric's table).
fn expected_defined(op: AmoOp, ty: AmoType, c: CswapOp) -> bool {
    let int = INTS.contains(&ty);
    let u128t = ty == AmoType::Uint128;
    let real = matches!(ty, AmoType::Float | AmoType::Double);
    let cplx = matches!(ty, AmoType::FloatComplex | AmoType::DoubleComplex);
    match op {
        AmoOp::Sum | AmoOp::Swap => true,
        AmoOp::Min | AmoOp::Max => int || u128t || real,
        AmoOp::Lor | AmoOp::Land | AmoOp::Lxor | AmoOp::Bor | AmoOp::Band | AmoOp::Bxor => {
            int || u128t
        }
        AmoOp::Cswap => match c {
            CswapOp::Eq | CswapOp::Ne => true,
            _ => !cplx,
        },
        AmoOp::Axor => int,
    }
}

#[test]
fn validity_matrix_and_inval_op_error() {
    for op in AmoOp::ALL {
        for ty in AmoType::ALL {
            for c in CswapOp::ALL {
                let want = expected_defined(*op, *ty, *c);
                assert_eq!(is_defined(*op, *ty, *c), want, "{op:?} {ty:?} {c:?}");
                let req = AmoRequest {
                    op: *op,
                    ty: *ty,
                    cswap: *c,
                    op1: 5,
                    op2: 5,
                };
                let mut target = vec![0xA5u8; amo_size(*ty)];
                let r = execute(&req, 0, &mut target, FpSignals::ALL);
                if want {
                    assert!(r.is_ok(), "{op:?} {ty:?} {c:?}");
                } else {
                    let e = r.unwrap_err();
                    assert_eq!(e.return_code(), ReturnCode::AmoInvalOpError);
                    assert_eq!(u8::from(e.return_code()), 40);
                    assert!(target.iter().all(|b| *b == 0xA5), "memory changed");
                }
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// Integers
// ------------------------------------------------------------------------------------------

macro_rules! int_ref {
    ($name:ident, $t:ty) => {
        /// Reference semantics on the native type.
        fn $name(op: AmoOp, c: CswapOp, old: $t, a: $t, b: $t) -> $t {
            match op {
                AmoOp::Min => old.min(a),
                AmoOp::Max => old.max(a),
                AmoOp::Sum => old.wrapping_add(a),
                AmoOp::Lor => ((old != 0) || (a != 0)) as $t,
                AmoOp::Land => ((old != 0) && (a != 0)) as $t,
                AmoOp::Lxor => ((old != 0) ^ (a != 0)) as $t,
                AmoOp::Bor => old | a,
                AmoOp::Band => old & a,
                AmoOp::Bxor => old ^ a,
                AmoOp::Swap => a,
                AmoOp::Cswap => {
                    let hit = match c {
                        CswapOp::Eq => b == old,
                        CswapOp::Ne => b != old,
                        CswapOp::Le => b <= old,
                        CswapOp::Lt => b < old,
                        CswapOp::Ge => b >= old,
                        CswapOp::Gt => b > old,
                    };
                    if hit { a } else { old }
                }
                AmoOp::Axor => (old & !b) ^ a,
            }
        }
    };
}

int_ref!(ref_i8, i8);
int_ref!(ref_u8, u8);
int_ref!(ref_i16, i16);
int_ref!(ref_u16, u16);
int_ref!(ref_i32, i32);
int_ref!(ref_u32, u32);
int_ref!(ref_i64, i64);
int_ref!(ref_u64, u64);
int_ref!(ref_u128, u128);

/// Expected stored bytes of an integer AMO, via the native type of `ty`.
fn int_expected(ty: AmoType, op: AmoOp, c: CswapOp, old: u128, a: u128, b: u128) -> Vec<u8> {
    match ty {
        AmoType::Int8 => ref_i8(op, c, old as i8, a as i8, b as i8)
            .to_le_bytes()
            .to_vec(),
        AmoType::Uint8 => ref_u8(op, c, old as u8, a as u8, b as u8)
            .to_le_bytes()
            .to_vec(),
        AmoType::Int16 => ref_i16(op, c, old as i16, a as i16, b as i16)
            .to_le_bytes()
            .to_vec(),
        AmoType::Uint16 => ref_u16(op, c, old as u16, a as u16, b as u16)
            .to_le_bytes()
            .to_vec(),
        AmoType::Int32 => ref_i32(op, c, old as i32, a as i32, b as i32)
            .to_le_bytes()
            .to_vec(),
        AmoType::Uint32 => ref_u32(op, c, old as u32, a as u32, b as u32)
            .to_le_bytes()
            .to_vec(),
        AmoType::Int64 => ref_i64(op, c, old as i64, a as i64, b as i64)
            .to_le_bytes()
            .to_vec(),
        AmoType::Uint64 => ref_u64(op, c, old as u64, a as u64, b as u64)
            .to_le_bytes()
            .to_vec(),
        AmoType::Uint128 => ref_u128(op, c, old, a, b).to_le_bytes().to_vec(),
        _ => unreachable!("not an integer type"),
    }
}

fn check_int(ty: AmoType, op: AmoOp, c: CswapOp, old: u128, a: u128, b: u128) {
    let n = amo_size(ty);
    let old_bytes = old.to_le_bytes()[..n].to_vec();
    let req = AmoRequest {
        op,
        ty,
        cswap: c,
        op1: a,
        op2: b,
    };
    let (fetched, stored) = run(&req, &old_bytes);
    assert_eq!(fetched, old_bytes, "fetched {ty:?} {op:?}");
    assert_eq!(
        stored,
        int_expected(ty, op, c, old, a, b),
        "{ty:?} {op:?} {c:?} old={old:#x} op1={a:#x} op2={b:#x}"
    );
}

#[test]
fn integer_ops_table() {
    let mut types = INTS.to_vec();
    types.push(AmoType::Uint128);
    for ty in types {
        for op in AmoOp::ALL {
            if !is_defined(*op, ty, CswapOp::Eq) && *op != AmoOp::Cswap {
                continue;
            }
            let uses_b = matches!(op, AmoOp::Cswap | AmoOp::Axor);
            let cmps: Vec<CswapOp> = if *op == AmoOp::Cswap {
                cswap_ops().to_vec()
            } else {
                vec![CswapOp::Eq]
            };
            for c in cmps {
                for old in SAMPLES {
                    for a in SAMPLES {
                        if uses_b {
                            for b in SAMPLES {
                                check_int(ty, *op, c, old, a, b);
                            }
                            // op2 equal to the old value, the interesting CSWAP case.
                            check_int(ty, *op, c, old, a, old);
                        } else {
                            check_int(ty, *op, c, old, a, 0);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn signed_and_unsigned_min_max_differ() {
    // -1 (0xFF) vs 1.
    let (_, s) = run(&AmoRequest::new(AmoOp::Min, AmoType::Int8, 0xFF), &[1]);
    assert_eq!(s, [0xFF]);
    let (_, s) = run(&AmoRequest::new(AmoOp::Min, AmoType::Uint8, 0xFF), &[1]);
    assert_eq!(s, [1]);
    let (_, s) = run(
        &AmoRequest::new(AmoOp::Max, AmoType::Int64, u64::MAX as u128),
        &5u64.to_le_bytes(),
    );
    assert_eq!(s, 5u64.to_le_bytes());
    let (_, s) = run(
        &AmoRequest::new(AmoOp::Max, AmoType::Uint64, u64::MAX as u128),
        &5u64.to_le_bytes(),
    );
    assert_eq!(s, u64::MAX.to_le_bytes());
}

#[test]
fn uint128_sum_wraps_and_carries() {
    let req = AmoRequest::new(AmoOp::Sum, AmoType::Uint128, 1);
    let (f, s) = run(&req, &u128::MAX.to_le_bytes());
    assert_eq!(f, u128::MAX.to_le_bytes());
    assert_eq!(s, 0u128.to_le_bytes());
    // Carry from word1 into word2.
    let (_, s) = run(&req, &(u64::MAX as u128).to_le_bytes());
    assert_eq!(s, (1u128 << 64).to_le_bytes());
    // op1 spills into op1_word2.
    let req = AmoRequest::new(AmoOp::Sum, AmoType::Uint128, 3 << 64 | 4);
    let (_, s) = run(&req, &(1u128 << 64 | 1).to_le_bytes());
    assert_eq!(s, (4u128 << 64 | 5).to_le_bytes());
}

#[test]
fn operand_bits_above_the_type_are_ignored() {
    let req = AmoRequest::new(AmoOp::Sum, AmoType::Uint16, 0xFFFF_0001);
    let (_, s) = run(&req, &[0xFF, 0xFF]);
    assert_eq!(s, [0, 0]);
}

// ------------------------------------------------------------------------------------------
// CSWAP operand order and the libfabric mappings
// ------------------------------------------------------------------------------------------

#[test]
fn cswap_compares_op2_against_old_and_stores_op1() {
    let ty = AmoType::Int32;
    let old = 7i32.to_le_bytes();
    let cases = [
        // (cmp, op2, swaps) with old = 7: swap iff op2 <cmp> 7.
        (CswapOp::Lt, 5, true),
        (CswapOp::Lt, 7, false),
        (CswapOp::Lt, 9, false),
        (CswapOp::Le, 7, true),
        (CswapOp::Le, 8, false),
        (CswapOp::Gt, 9, true),
        (CswapOp::Gt, 5, false),
        (CswapOp::Ge, 7, true),
        (CswapOp::Ge, 6, false),
        (CswapOp::Eq, 7, true),
        (CswapOp::Eq, 6, false),
        (CswapOp::Ne, 6, true),
        (CswapOp::Ne, 7, false),
        (CswapOp::Lt, -100, true),
    ];
    for (cmp, op2, swaps) in cases {
        let req = AmoRequest::cswap(ty, cmp, op2 as u32 as u128, 1000);
        let (f, s) = run(&req, &old);
        assert_eq!(f, old);
        let want = if swaps { 1000i32 } else { 7 };
        assert_eq!(s, want.to_le_bytes(), "{cmp:?} op2={op2}");
    }
}

#[test]
fn atomic_write_as_cswap_ne_writes_every_type_exactly() {
    // FI_ATOMIC_WRITE = CSWAP_NE with op2 = op1.
    let olds: [u128; 4] = [0, 0x8000_0000, 0x8000_0000_0000_0000, u128::MAX];
    let vals: [u128; 4] = [0, 0x8000_0000_0000_0000, 0x7FC0_0000, 0x1234_5678_9ABC_DEF0];
    for ty in AmoType::ALL {
        let n = amo_size(*ty);
        for old in olds {
            for v in vals {
                let req = AmoRequest::cswap(*ty, CswapOp::Ne, v, v);
                let (_, s) = run(&req, &old.to_le_bytes()[..n]);
                assert_eq!(s, v.to_le_bytes()[..n], "{ty:?} old={old:#x} v={v:#x}");
            }
        }
    }
    // -0.0 replaced by +0.0 (IEEE equality would keep -0.0).
    let req = AmoRequest::cswap(AmoType::Double, CswapOp::Ne, 0, 0);
    let (_, s) = run(&req, &(-0.0f64).to_le_bytes());
    assert_eq!(s, 0.0f64.to_le_bytes());
}

#[test]
fn axor_implements_mswap() {
    // FI_MSWAP: op1 = value & mask, op2 = mask -> (old & !mask) | (value & mask).
    for ty in INTS {
        let n = amo_size(ty);
        for old in SAMPLES {
            for value in SAMPLES {
                let mask: u128 = 0x0F0F_F0F0_00FF_FF00_0F0F_F0F0_00FF_FF00;
                let req = AmoRequest::axor(ty, value & mask, mask);
                let (_, s) = run(&req, &old.to_le_bytes()[..n]);
                let want = (old & !mask) | (value & mask);
                assert_eq!(s, want.to_le_bytes()[..n], "{ty:?}");
            }
        }
    }
    // Bits of op1 outside the mask flip (xor, not or).
    let (_, s) = run(&AmoRequest::axor(AmoType::Uint8, 0x0F, 0x03), &[0xF5]);
    assert_eq!(s, [(0xF5 & !0x03) ^ 0x0F]);
}

// ------------------------------------------------------------------------------------------
// Floating point
// ------------------------------------------------------------------------------------------

const F64S: [f64; 14] = [
    0.0,
    -0.0,
    1.0,
    -1.5,
    3.25,
    1e300,
    -1e300,
    f64::MAX,
    f64::MIN_POSITIVE,
    5e-324,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    0.1,
];

fn real_expected_f64(op: AmoOp, c: CswapOp, old: f64, a: f64, b: f64) -> Option<u64> {
    Some(match op {
        AmoOp::Min => (if a < old { a } else { old }).to_bits(),
        AmoOp::Max => (if a > old { a } else { old }).to_bits(),
        AmoOp::Sum => {
            let s = old + a;
            if s.is_nan() {
                return None; // NaN: payload checked separately.
            }
            s.to_bits()
        }
        AmoOp::Swap => a.to_bits(),
        AmoOp::Cswap => {
            let hit = match c {
                CswapOp::Eq => b.to_bits() == old.to_bits(),
                CswapOp::Ne => b.to_bits() != old.to_bits(),
                CswapOp::Le => b <= old,
                CswapOp::Lt => b < old,
                CswapOp::Ge => b >= old,
                CswapOp::Gt => b > old,
            };
            (if hit { a } else { old }).to_bits()
        }
        _ => unreachable!(),
    })
}

#[test]
fn double_and_float_ops_table() {
    let ops = [
        AmoOp::Min,
        AmoOp::Max,
        AmoOp::Sum,
        AmoOp::Swap,
        AmoOp::Cswap,
    ];
    for op in ops {
        let cmps: Vec<CswapOp> = if op == AmoOp::Cswap {
            cswap_ops().to_vec()
        } else {
            vec![CswapOp::Eq]
        };
        for c in cmps {
            for old in F64S {
                for a in F64S {
                    for b in F64S {
                        // DOUBLE.
                        let req = AmoRequest {
                            op,
                            ty: AmoType::Double,
                            cswap: c,
                            op1: a.to_bits() as u128,
                            op2: b.to_bits() as u128,
                        };
                        let (_, s) = run(&req, &old.to_le_bytes());
                        let got = u64::from_le_bytes(s.try_into().unwrap());
                        match real_expected_f64(op, c, old, a, b) {
                            Some(w) => assert_eq!(got, w, "{op:?} {c:?} {old} {a} {b}"),
                            None => assert!(f64::from_bits(got).is_nan()),
                        }
                        // FLOAT, the same values rounded.
                        let (o32, a32, b32) = (old as f32, a as f32, b as f32);
                        let req = AmoRequest {
                            op,
                            ty: AmoType::Float,
                            cswap: c,
                            op1: a32.to_bits() as u128,
                            op2: b32.to_bits() as u128,
                        };
                        let (_, s) = run(&req, &o32.to_le_bytes());
                        let got = f32::from_bits(u32::from_le_bytes(s.try_into().unwrap()));
                        let want = match op {
                            AmoOp::Min => Some(if a32 < o32 { a32 } else { o32 }),
                            AmoOp::Max => Some(if a32 > o32 { a32 } else { o32 }),
                            AmoOp::Sum => Some(o32 + a32),
                            AmoOp::Swap => Some(a32),
                            _ => real_expected_f64(op, c, o32 as f64, a32 as f64, b32 as f64)
                                .map(|bits| f64::from_bits(bits) as f32),
                        };
                        match want {
                            Some(w) if w.is_nan() => assert!(got.is_nan()),
                            Some(w) => assert_eq!(got.to_bits(), w.to_bits(), "{op:?} {c:?}"),
                            None => assert!(got.is_nan()),
                        }
                        if op != AmoOp::Cswap {
                            break; // b unused
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn complex_sum_swap_cswap() {
    // FLOAT_COMPLEX: {re, im} as two f32.
    let fc = |re: f32, im: f32| (re.to_bits() as u128) | (im.to_bits() as u128) << 32;
    let req = AmoRequest::new(AmoOp::Sum, AmoType::FloatComplex, fc(1.5, -2.0));
    let (_, s) = run(&req, &fc(0.25, 10.0).to_le_bytes()[..8]);
    assert_eq!(s, fc(1.75, 8.0).to_le_bytes()[..8]);
    // DOUBLE_COMPLEX: re in word1, im in word2.
    let dc = |re: f64, im: f64| (re.to_bits() as u128) | (im.to_bits() as u128) << 64;
    let req = AmoRequest::new(AmoOp::Sum, AmoType::DoubleComplex, dc(1e10, 0.5));
    let (_, s) = run(&req, &dc(-3.0, 0.25).to_le_bytes());
    assert_eq!(s, dc(1e10 - 3.0, 0.75).to_le_bytes());
    // Component-wise, against native arithmetic on samples.
    for re in F64S {
        for im in F64S {
            let a = dc(im, re);
            let req = AmoRequest::new(AmoOp::Sum, AmoType::DoubleComplex, a);
            let (_, s) = run(&req, &dc(re, im).to_le_bytes());
            let got = u128::from_le_bytes(s.try_into().unwrap());
            let (gr, gi) = (
                f64::from_bits(got as u64),
                f64::from_bits((got >> 64) as u64),
            );
            let (wr, wi) = (re + im, im + re);
            assert!(gr.to_bits() == wr.to_bits() || (gr.is_nan() && wr.is_nan()));
            assert!(gi.to_bits() == wi.to_bits() || (gi.is_nan() && wi.is_nan()));
        }
    }
    let req = AmoRequest::new(AmoOp::Swap, AmoType::DoubleComplex, dc(9.0, 8.0));
    let (f, s) = run(&req, &dc(1.0, 2.0).to_le_bytes());
    assert_eq!(f, dc(1.0, 2.0).to_le_bytes());
    assert_eq!(s, dc(9.0, 8.0).to_le_bytes());
    let req = AmoRequest::cswap(
        AmoType::DoubleComplex,
        CswapOp::Eq,
        dc(1.0, 2.0),
        dc(5.0, 5.0),
    );
    let (_, s) = run(&req, &dc(1.0, 2.0).to_le_bytes());
    assert_eq!(s, dc(5.0, 5.0).to_le_bytes());
    let req = AmoRequest::cswap(
        AmoType::DoubleComplex,
        CswapOp::Eq,
        dc(1.0, 3.0),
        dc(5.0, 5.0),
    );
    let (_, s) = run(&req, &dc(1.0, 2.0).to_le_bytes());
    assert_eq!(s, dc(1.0, 2.0).to_le_bytes());
}

fn fp_run(req: &AmoRequest, old: &[u8], signals: FpSignals) -> (ReturnCode, Vec<u8>) {
    let mut t = old.to_vec();
    let out = execute(req, 0x40, &mut t, signals).unwrap();
    assert_eq!(out.stored.as_slice(), &t[..]);
    (out.return_code, t)
}

#[test]
fn fp_exceptions_reported_only_when_signalled_and_result_written() {
    let only = |f: fn(&mut FpSignals)| {
        let mut s = FpSignals::NONE;
        f(&mut s);
        s
    };
    let d = |x: f64| x.to_bits() as u128;
    let sum = |x: f64| AmoRequest::new(AmoOp::Sum, AmoType::Double, d(x));

    // Overflow: MAX + MAX = inf (also inexact; overflow wins).
    let old = f64::MAX.to_le_bytes();
    let (rc, t) = fp_run(&sum(f64::MAX), &old, FpSignals::ALL);
    assert_eq!(rc, ReturnCode::AmoFpOverflow);
    assert_eq!(u8::from(rc), 44);
    assert_eq!(t, f64::INFINITY.to_le_bytes());
    let (rc, t) = fp_run(&sum(f64::MAX), &old, FpSignals::NONE);
    assert_eq!(rc, ReturnCode::Ok);
    assert_eq!(t, f64::INFINITY.to_le_bytes());
    let (rc, _) = fp_run(&sum(f64::MAX), &old, only(|s| s.inexact = true));
    assert_eq!(rc, ReturnCode::AmoFpInexact);

    // Inexact: 1 + 1e-30.
    let (rc, t) = fp_run(
        &sum(1e-30),
        &1.0f64.to_le_bytes(),
        only(|s| s.inexact = true),
    );
    assert_eq!(rc, ReturnCode::AmoFpInexact);
    assert_eq!(u8::from(rc), 45);
    assert_eq!(t, 1.0f64.to_le_bytes());
    let (rc, _) = fp_run(&sum(0.5), &1.0f64.to_le_bytes(), FpSignals::ALL);
    assert_eq!(rc, ReturnCode::Ok);

    // Underflow: a subnormal sum.
    let tiny = f64::from_bits(1);
    let (rc, t) = fp_run(
        &sum(tiny),
        &tiny.to_le_bytes(),
        only(|s| s.underflow = true),
    );
    assert_eq!(rc, ReturnCode::AmoFpUnderflow);
    assert_eq!(u8::from(rc), 43);
    assert_eq!(t, 2u64.to_le_bytes());
    // A normal result is not tiny.
    let (rc, _) = fp_run(&sum(0.0), &f64::MIN_POSITIVE.to_le_bytes(), FpSignals::ALL);
    assert_eq!(rc, ReturnCode::Ok);

    // Invalid: inf + -inf gives the default NaN.
    let (rc, t) = fp_run(
        &sum(f64::NEG_INFINITY),
        &f64::INFINITY.to_le_bytes(),
        only(|s| s.invalid = true),
    );
    assert_eq!(rc, ReturnCode::AmoFpInvalid);
    assert_eq!(u8::from(rc), 42);
    assert_eq!(t, 0xFFF8_0000_0000_0000u64.to_le_bytes());
    // Quiet NaN operand: no exception, NaN propagates (old first).
    let qnan = f64::from_bits(0x7FF8_0000_0000_0123);
    let (rc, t) = fp_run(&sum(1.0), &qnan.to_le_bytes(), FpSignals::ALL);
    assert_eq!(rc, ReturnCode::Ok);
    assert_eq!(t, qnan.to_le_bytes());
    // Signalling NaN operand: invalid, quieted.
    let snan = f64::from_bits(0x7FF0_0000_0000_0042);
    let (rc, t) = fp_run(&sum(snan), &2.0f64.to_le_bytes(), FpSignals::ALL);
    assert_eq!(rc, ReturnCode::AmoFpInvalid);
    assert_eq!(t, 0x7FF8_0000_0000_0042u64.to_le_bytes());

    // Ordered comparisons with a NaN: invalid, old kept.
    let min = AmoRequest::new(AmoOp::Min, AmoType::Double, d(f64::NAN));
    let (rc, t) = fp_run(&min, &3.0f64.to_le_bytes(), FpSignals::ALL);
    assert_eq!(rc, ReturnCode::AmoFpInvalid);
    assert_eq!(t, 3.0f64.to_le_bytes());
    let lt = AmoRequest::cswap(AmoType::Double, CswapOp::Lt, d(f64::NAN), d(1.0));
    let (rc, t) = fp_run(&lt, &3.0f64.to_le_bytes(), FpSignals::ALL);
    assert_eq!(rc, ReturnCode::AmoFpInvalid);
    assert_eq!(t, 3.0f64.to_le_bytes());
    // SWAP and CSWAP EQ never raise.
    let swap = AmoRequest::new(AmoOp::Swap, AmoType::Double, d(f64::NAN));
    let (rc, _) = fp_run(&swap, &3.0f64.to_le_bytes(), FpSignals::ALL);
    assert_eq!(rc, ReturnCode::Ok);

    // FLOAT overflow and complex: flags of both parts.
    let f = |x: f32| x.to_bits() as u128;
    let req = AmoRequest::new(AmoOp::Sum, AmoType::Float, f(f32::MAX));
    let (rc, t) = fp_run(&req, &f32::MAX.to_le_bytes(), FpSignals::ALL);
    assert_eq!(rc, ReturnCode::AmoFpOverflow);
    assert_eq!(t, f32::INFINITY.to_le_bytes());
    let fc = |re: f32, im: f32| f(re) | f(im) << 32;
    let req = AmoRequest::new(AmoOp::Sum, AmoType::FloatComplex, fc(1.0, f32::MAX));
    let (rc, t) = fp_run(
        &req,
        &fc(2.0, f32::MAX).to_le_bytes()[..8],
        only(|s| s.overflow = true),
    );
    assert_eq!(rc, ReturnCode::AmoFpOverflow);
    assert_eq!(t, fc(3.0, f32::INFINITY).to_le_bytes()[..8]);

    // Integers never raise.
    let req = AmoRequest::new(AmoOp::Sum, AmoType::Uint8, 255);
    let (rc, _) = fp_run(&req, &[1], FpSignals::ALL);
    assert_eq!(rc, ReturnCode::Ok);
}

// ------------------------------------------------------------------------------------------
// Length and alignment
// ------------------------------------------------------------------------------------------

#[test]
fn alignment_and_length_errors() {
    for ty in AmoType::ALL {
        let n = amo_size(*ty);
        let req = AmoRequest::new(AmoOp::Swap, *ty, 7);
        // Aligned: fine.
        assert!(check(&req, (n * 3) as u64, n).is_ok());
        // Every misaligned offset inside one operand.
        for off in 1..n {
            let mut t = vec![0x11u8; n];
            let e = execute(&req, (0x1000 + off) as u64, &mut t, FpSignals::NONE).unwrap_err();
            assert_eq!(
                e,
                AmoError::Align {
                    ty: *ty,
                    addr: (0x1000 + off) as u64,
                    size: n
                }
            );
            assert_eq!(u8::from(e.return_code()), 41);
            assert!(t.iter().all(|b| *b == 0x11));
        }
        // Wrong lengths.
        for len in [0, n - 1, n + 1, 2 * n] {
            if len == n {
                continue;
            }
            let mut t = vec![0x22u8; len];
            let e = execute(&req, 0, &mut t, FpSignals::NONE).unwrap_err();
            assert_eq!(e.return_code(), ReturnCode::AmoLengthError);
            assert_eq!(u8::from(e.return_code()), 58);
            assert!(t.iter().all(|b| *b == 0x22));
        }
    }
    // Invalid op is reported before length and alignment.
    let req = AmoRequest::new(AmoOp::Bor, AmoType::Double, 1);
    let mut t = [0u8; 3];
    let e = execute(&req, 1, &mut t, FpSignals::NONE).unwrap_err();
    assert_eq!(e.return_code(), ReturnCode::AmoInvalOpError);
    // Length before alignment.
    let req = AmoRequest::new(AmoOp::Sum, AmoType::Uint32, 1);
    let e = execute(&req, 1, &mut t, FpSignals::NONE).unwrap_err();
    assert_eq!(e.return_code(), ReturnCode::AmoLengthError);
}

// ------------------------------------------------------------------------------------------
// Operand extraction
// ------------------------------------------------------------------------------------------

#[test]
fn operands_from_idc_amo_through_the_ring_encoding() {
    let cmd = IdcAmo {
        opcode: DmaOp::FetchingAtomic,
        dfa: 0x1234,
        remote_offset: 0x40,
        local_addr: 0x9000,
        atomic_op: AmoOp::Cswap,
        atomic_type: AmoType::Uint128,
        cswap_op: CswapOp::Ge,
        op1_word1: 0x1111,
        op1_word2: 0x2222,
        op2_word1: 0x3333,
        op2_word2: 0x4444,
    };
    let bytes = Command::IdcAmo(cmd).encode().unwrap();
    let Command::IdcAmo(decoded) = Command::decode(&bytes).unwrap() else {
        panic!("not an IDC AMO");
    };
    let a = AmoCommand::from_idc(&decoded);
    assert!(a.fetching);
    assert_eq!(a.remote_offset, 0x40);
    assert_eq!(
        a.request,
        AmoRequest {
            op: AmoOp::Cswap,
            ty: AmoType::Uint128,
            cswap: CswapOp::Ge,
            op1: 0x2222 << 64 | 0x1111,
            op2: 0x4444 << 64 | 0x3333,
        }
    );
    let plain = AmoCommand::from_idc(&IdcAmo {
        opcode: DmaOp::Atomic,
        ..cmd
    });
    assert!(!plain.fetching);
}

#[test]
fn operands_from_small_idc_amo() {
    let cmd = IdcSmallAmo {
        dfa: 1,
        remote_offset: 8,
        atomic_op: AmoOp::Sum,
        atomic_type: AmoType::Int64,
        op1_word1: u64::MAX,
    };
    let bytes = Command::IdcSmallAmo(cmd).encode().unwrap();
    let Command::IdcSmallAmo(decoded) = Command::decode(&bytes).unwrap() else {
        panic!("not a small AMO");
    };
    let a = AmoCommand::from_small(&decoded).unwrap();
    assert!(!a.fetching);
    assert_eq!(
        a.request,
        AmoRequest::new(AmoOp::Sum, AmoType::Int64, u64::MAX as u128)
    );
    // -1 + 5 = 4.
    let (_, s) = run(&a.request, &5i64.to_le_bytes());
    assert_eq!(s, 4i64.to_le_bytes());
    for ty in [AmoType::Uint128, AmoType::DoubleComplex] {
        let e = AmoCommand::from_small(&IdcSmallAmo {
            atomic_type: ty,
            ..cmd
        })
        .unwrap_err();
        assert_eq!(e.return_code(), ReturnCode::AmoLengthError);
    }
}

#[test]
fn operands_from_dma_amo() {
    let cmd = DmaAmo {
        opcode: DmaOp::FetchingAtomic,
        request_len: 8,
        atomic_op: AmoOp::Axor,
        atomic_type: AmoType::Uint64,
        op2_word1: 0xFF00,
        remote_offset: 0x18,
        ..DmaAmo::default()
    };
    let op1 = 0x0F00u64.to_le_bytes();
    let a = AmoCommand::from_dma(&cmd, &op1).unwrap();
    assert!(a.fetching);
    assert_eq!(a.remote_offset, 0x18);
    assert_eq!(a.request, AmoRequest::axor(AmoType::Uint64, 0x0F00, 0xFF00));
    let (_, s) = run(&a.request, &0xABCDu64.to_le_bytes());
    assert_eq!(s, ((0xABCDu64 & !0xFF00) ^ 0x0F00).to_le_bytes());
    // request_len must be amo_size.
    let e = AmoCommand::from_dma(
        &DmaAmo {
            request_len: 4,
            ..cmd
        },
        &op1[..4],
    )
    .unwrap_err();
    assert_eq!(e.return_code(), ReturnCode::AmoLengthError);
    // The operand read must have that length too.
    let e = AmoCommand::from_dma(&cmd, &op1[..7]).unwrap_err();
    assert_eq!(e.return_code(), ReturnCode::AmoLengthError);
    // 16-byte operand.
    let cmd16 = DmaAmo {
        request_len: 16,
        atomic_op: AmoOp::Swap,
        atomic_type: AmoType::DoubleComplex,
        op2_word2: 9,
        ..cmd
    };
    let mut op1 = [0u8; 16];
    op1[15] = 0x80;
    let a = AmoCommand::from_dma(&cmd16, &op1).unwrap();
    assert_eq!(a.request.op1, 0x80 << 120);
    assert_eq!(a.request.op2, 9 << 64 | 0xFF00);
}

// ------------------------------------------------------------------------------------------
// Properties
// ------------------------------------------------------------------------------------------

fn int_type() -> impl Strategy<Value = AmoType> {
    prop::sample::select(vec![
        AmoType::Int8,
        AmoType::Uint8,
        AmoType::Int16,
        AmoType::Uint16,
        AmoType::Int32,
        AmoType::Uint32,
        AmoType::Int64,
        AmoType::Uint64,
        AmoType::Uint128,
    ])
}

proptest! {
    #[test]
    fn integer_ops_match_reference(
        ty in int_type(),
        op in prop::sample::select(AmoOp::ALL.to_vec()),
        c in prop::sample::select(CswapOp::ALL.to_vec()),
        old in any::<u128>(),
        a in any::<u128>(),
        b in any::<u128>(),
        slot in 0u64..64,
    ) {
        let req = AmoRequest { op, ty, cswap: c, op1: a, op2: b };
        let n = amo_size(ty);
        let mut t = old.to_le_bytes()[..n].to_vec();
        let r = execute(&req, slot * n as u64, &mut t, FpSignals::ALL);
        if is_defined(op, ty, c) {
            let out = r.unwrap();
            prop_assert_eq!(out.return_code, ReturnCode::Ok);
            prop_assert_eq!(out.fetched.as_slice(), &old.to_le_bytes()[..n]);
            prop_assert_eq!(t, int_expected(ty, op, c, old, a, b));
        } else {
            prop_assert_eq!(op, AmoOp::Axor);
            prop_assert_eq!(r.unwrap_err().return_code(), ReturnCode::AmoInvalOpError);
        }
    }

    #[test]
    fn float_sum_matches_native_and_flags_are_consistent(x in any::<f32>(), y in any::<f32>()) {
        let req = AmoRequest::new(AmoOp::Sum, AmoType::Float, y.to_bits() as u128);
        let mut t = x.to_le_bytes().to_vec();
        let out = execute(&req, 0, &mut t, FpSignals::ALL).unwrap();
        let got = f32::from_le_bytes(t.clone().try_into().unwrap());
        let want = x + y;
        if want.is_nan() {
            prop_assert!(got.is_nan());
        } else {
            prop_assert_eq!(got.to_bits(), want.to_bits());
            // Inexact iff the f64 sum (exact for these operands unless far apart) differs.
            let exact = x as f64 + y as f64;
            if out.flags.overflow {
                prop_assert!(want.is_infinite() && x.is_finite() && y.is_finite());
            } else if x.is_finite() && y.is_finite() {
                let spread = (x.abs().max(y.abs()) as f64).log2() - (x.abs().min(y.abs()) as f64).log2();
                if spread < 20.0 {
                    prop_assert_eq!(out.flags.inexact, want as f64 != exact);
                }
            }
        }
    }
}
