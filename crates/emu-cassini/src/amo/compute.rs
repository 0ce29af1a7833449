//! The arithmetic of the AMO unit, one function per type class: integers (1..8 bytes and
//! UINT128), real floats, complex floats. Values travel as `u128` holding the little-endian
//! operand in their low `amo_size` bytes.

use core::cmp::Ordering;

use super::fp::{Real, add, ordered_flags};
use super::{AmoError, AmoOp, AmoRequest, AmoType, CswapOp, FpFlags, TypeClass};

/// Mask of the low `size` bytes.
pub(crate) fn mask(size: usize) -> u128 {
    if size >= 16 {
        u128::MAX
    } else {
        (1u128 << (8 * size)) - 1
    }
}

/// The new value and exceptions of `req` applied to `old`.
pub(crate) fn apply(req: &AmoRequest, old: u128) -> Result<(u128, FpFlags), AmoError> {
    let invalid = AmoError::InvalidOp {
        op: req.op,
        ty: req.ty,
        cswap: req.cswap,
    };
    if !req.is_defined() {
        return Err(invalid);
    }
    let size = req.size();
    let m = mask(size);
    let (old, a, b) = (old & m, req.op1 & m, req.op2 & m);
    let result = match (TypeClass::of(req.ty), req.ty) {
        (TypeClass::Int | TypeClass::Uint128, ty) => {
            integer(req.op, req.cswap, old, a, b, 8 * size as u32, is_signed(ty))
                .map(|v| (v, FpFlags::default()))
        }
        (TypeClass::Real, AmoType::Float) => real::<f32>(req.op, req.cswap, old, a, b),
        (TypeClass::Real, _) => real::<f64>(req.op, req.cswap, old, a, b),
        (TypeClass::Complex, AmoType::FloatComplex) => {
            complex::<f32>(req.op, req.cswap, old, a, b, 32)
        }
        (TypeClass::Complex, _) => complex::<f64>(req.op, req.cswap, old, a, b, 64),
    };
    result.map(|(v, f)| (v & m, f)).ok_or(invalid)
}

fn is_signed(ty: AmoType) -> bool {
    matches!(
        ty,
        AmoType::Int8 | AmoType::Int16 | AmoType::Int32 | AmoType::Int64
    )
}

/// Sign-extend the low `bits` bits of `v`.
fn sext(v: u128, bits: u32) -> i128 {
    let shift = 128 - bits;
    ((v << shift) as i128) >> shift
}

/// Whether `ord` (the comparison value against the old value) satisfies `c`.
fn holds(c: CswapOp, ord: Ordering) -> bool {
    match c {
        CswapOp::Eq => ord == Ordering::Equal,
        CswapOp::Ne => ord != Ordering::Equal,
        CswapOp::Le => ord != Ordering::Greater,
        CswapOp::Lt => ord == Ordering::Less,
        CswapOp::Ge => ord != Ordering::Less,
        CswapOp::Gt => ord == Ordering::Greater,
    }
}

fn truth(v: bool) -> u128 {
    v as u128
}

/// Integer operations on `bits`-bit values (8..=128).
fn integer(
    op: AmoOp,
    cswap: CswapOp,
    old: u128,
    a: u128,
    b: u128,
    bits: u32,
    signed: bool,
) -> Option<u128> {
    let cmp = |x: u128, y: u128| {
        if signed {
            sext(x, bits).cmp(&sext(y, bits))
        } else {
            x.cmp(&y)
        }
    };
    Some(match op {
        AmoOp::Min => {
            if cmp(a, old) == Ordering::Less {
                a
            } else {
                old
            }
        }
        AmoOp::Max => {
            if cmp(a, old) == Ordering::Greater {
                a
            } else {
                old
            }
        }
        AmoOp::Sum => old.wrapping_add(a),
        AmoOp::Lor => truth(old != 0 || a != 0),
        AmoOp::Land => truth(old != 0 && a != 0),
        AmoOp::Lxor => truth((old != 0) != (a != 0)),
        AmoOp::Bor => old | a,
        AmoOp::Band => old & a,
        AmoOp::Bxor => old ^ a,
        AmoOp::Swap => a,
        AmoOp::Cswap => {
            if holds(cswap, cmp(b, old)) {
                a
            } else {
                old
            }
        }
        AmoOp::Axor => (old & !b) ^ a,
    })
}

/// FLOAT / DOUBLE.
fn real<T: Real>(
    op: AmoOp,
    cswap: CswapOp,
    old: u128,
    a: u128,
    b: u128,
) -> Option<(u128, FpFlags)> {
    let (x, y) = (T::from_bits128(old), T::from_bits128(a));
    let none = FpFlags::default();
    Some(match op {
        AmoOp::Min => (if y < x { a } else { old }, ordered_flags(y, x)),
        AmoOp::Max => (if y > x { a } else { old }, ordered_flags(y, x)),
        AmoOp::Sum => add(x, y),
        AmoOp::Swap => (a, none),
        AmoOp::Cswap => match cswap {
            // Bit-pattern comparison (module docs).
            CswapOp::Eq => (if b == old { a } else { old }, none),
            CswapOp::Ne => (if b != old { a } else { old }, none),
            CswapOp::Le | CswapOp::Lt | CswapOp::Ge | CswapOp::Gt => {
                let z = T::from_bits128(b);
                let swap = match cswap {
                    CswapOp::Le => z <= x,
                    CswapOp::Lt => z < x,
                    CswapOp::Ge => z >= x,
                    _ => z > x,
                };
                (if swap { a } else { old }, ordered_flags(z, x))
            }
        },
        _ => return None,
    })
}

/// FLOAT_COMPLEX / DOUBLE_COMPLEX: `{real, imag}`, each `half` bits.
fn complex<T: Real>(
    op: AmoOp,
    cswap: CswapOp,
    old: u128,
    a: u128,
    b: u128,
    half: u32,
) -> Option<(u128, FpFlags)> {
    let hm = mask(half as usize / 8);
    let none = FpFlags::default();
    Some(match op {
        AmoOp::Sum => {
            let (re, f1) = add(T::from_bits128(old & hm), T::from_bits128(a & hm));
            let (im, f2) = add(
                T::from_bits128((old >> half) & hm),
                T::from_bits128((a >> half) & hm),
            );
            ((re & hm) | ((im & hm) << half), f1.union(f2))
        }
        AmoOp::Swap => (a, none),
        AmoOp::Cswap => match cswap {
            CswapOp::Eq => (if b == old { a } else { old }, none),
            CswapOp::Ne => (if b != old { a } else { old }, none),
            _ => return None,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_extension() {
        assert_eq!(sext(0xFF, 8), -1);
        assert_eq!(sext(0x7F, 8), 127);
        assert_eq!(sext(u128::MAX, 128), -1);
        assert_eq!(mask(1), 0xFF);
        assert_eq!(mask(16), u128::MAX);
    }

    #[test]
    fn signed_vs_unsigned_min() {
        let r = AmoRequest::new(AmoOp::Min, AmoType::Int8, 0x80);
        assert_eq!(apply(&r, 0x01).map(|x| x.0), Ok(0x80));
        let r = AmoRequest::new(AmoOp::Min, AmoType::Uint8, 0x80);
        assert_eq!(apply(&r, 0x01).map(|x| x.0), Ok(0x01));
    }
}
