//! IEEE 754 helpers of the AMO unit: addition with exception flags, NaN handling, ordered
//! comparison. Round to nearest even, no flush to zero (the readings are in the module docs of
//! [`super`]).

use super::FpFlags;

/// Operations of one binary floating-point format, on its bit pattern.
pub(crate) trait Real: Copy + PartialOrd + core::ops::Add<Output = Self> {
    /// The bits as the low bits of a `u128`.
    fn to_bits128(self) -> u128;
    /// From the low bits of a `u128`.
    fn from_bits128(bits: u128) -> Self;
    /// Quiet bit (most significant fraction bit).
    const QUIET: u128;
    /// x86 default NaN ("real indefinite": sign, exponent all ones, quiet bit).
    const DEFAULT_NAN: u128;
    /// Smallest positive normal number.
    const MIN_NORMAL: Self;
    fn is_nan(self) -> bool;
    fn is_finite(self) -> bool;
    fn is_infinite(self) -> bool;
    fn abs(self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn is_zero(self) -> bool;
}

macro_rules! real {
    ($t:ty, $bits:ty, $quiet:expr, $dnan:expr) => {
        impl Real for $t {
            fn to_bits128(self) -> u128 {
                self.to_bits() as u128
            }
            fn from_bits128(bits: u128) -> Self {
                <$t>::from_bits(bits as $bits)
            }
            const QUIET: u128 = $quiet;
            const DEFAULT_NAN: u128 = $dnan;
            const MIN_NORMAL: Self = <$t>::MIN_POSITIVE;
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            fn is_infinite(self) -> bool {
                <$t>::is_infinite(self)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn is_zero(self) -> bool {
                self == 0.0
            }
        }
    };
}

real!(f32, u32, 1 << 22, 0xFFC0_0000);
real!(f64, u64, 1 << 51, 0xFFF8_0000_0000_0000);

/// Whether `x` is a signalling NaN (quiet bit clear).
pub(crate) fn is_snan<T: Real>(x: T) -> bool {
    x.is_nan() && x.to_bits128() & T::QUIET == 0
}

/// `a + b` as bits, with the exceptions it raises.
pub(crate) fn add<T: Real>(a: T, b: T) -> (u128, FpFlags) {
    let mut f = FpFlags::default();
    if a.is_nan() || b.is_nan() {
        // NaN propagation: the first NaN operand, made quiet; sNaN raises invalid.
        f.invalid = is_snan(a) || is_snan(b);
        let first = if a.is_nan() { a } else { b };
        return (first.to_bits128() | T::QUIET, f);
    }
    let s = a + b;
    if s.is_nan() {
        // inf + -inf.
        f.invalid = true;
        return (T::DEFAULT_NAN, f);
    }
    if s.is_infinite() {
        if a.is_finite() && b.is_finite() {
            f.overflow = true;
            f.inexact = true;
        }
        return (s.to_bits128(), f);
    }
    // Finite operands and result: TwoSum gives the exact rounding error.
    let bb = s.sub(a);
    let err = a.sub(s.sub(bb)) + b.sub(bb);
    f.inexact = !err.is_zero();
    f.underflow = !s.is_zero() && s.abs() < T::MIN_NORMAL;
    (s.to_bits128(), f)
}

/// Ordered comparison operands: invalid if either is any NaN.
pub(crate) fn ordered_flags<T: Real>(a: T, b: T) -> FpFlags {
    FpFlags {
        invalid: a.is_nan() || b.is_nan(),
        ..FpFlags::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_flags() {
        let (r, f) = add(1.0f64, 2.0);
        assert_eq!(f64::from_bits(r as u64), 3.0);
        assert!(f.is_empty());
        let (_, f) = add(1.0f64, 1e-30);
        assert!(f.inexact && !f.overflow && !f.underflow && !f.invalid);
        let (r, f) = add(f64::MAX, f64::MAX);
        assert_eq!(f64::from_bits(r as u64), f64::INFINITY);
        assert!(f.overflow && f.inexact);
        let (r, f) = add(f64::INFINITY, f64::NEG_INFINITY);
        assert_eq!(r, 0xFFF8_0000_0000_0000);
        assert!(f.invalid);
        let (r, f) = add(f64::INFINITY, 1.0);
        assert_eq!(f64::from_bits(r as u64), f64::INFINITY);
        assert!(f.is_empty());
        let tiny = f32::from_bits(3);
        let (r, f) = add(tiny, tiny);
        assert_eq!(r, 6);
        assert!(f.underflow && !f.inexact);
        let snan = f32::from_bits(0x7F80_0001);
        let (r, f) = add(1.0f32, snan);
        assert_eq!(r, 0x7FC0_0001);
        assert!(f.invalid);
        let qnan = f32::from_bits(0x7FC0_0005);
        let (r, f) = add(qnan, snan);
        assert_eq!(r, 0x7FC0_0005);
        assert!(f.invalid);
        let (_, f) = add(qnan, 1.0);
        assert!(f.is_empty());
    }

    #[test]
    fn exactness_near_limits() {
        // 2^127 + 2^-149: far apart, rounding loses the small one.
        let big = f32::from_bits(0x7F00_0000);
        let small = f32::from_bits(1);
        let (r, f) = add(big, small);
        assert_eq!(r, 0x7F00_0000);
        assert!(f.inexact);
        // Exact cancellation.
        let (r, f) = add(1.5f32, -1.5);
        assert_eq!(r, 0);
        assert!(f.is_empty());
    }
}
