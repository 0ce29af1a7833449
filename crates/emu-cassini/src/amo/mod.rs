//! The AMO unit: atomic memory operations executed at the **target** NIC on target memory, as
//! a pure function of (operation, operands, old value). It never touches memory by itself: the
//! caller (the target DMA path) reads the `amo_size` bytes at the matched address, calls
//! [`execute`], writes the bytes back and, for a fetching AMO, returns
//! [`AmoOutcome::fetched`] to the initiator. Errors are the return codes the target reports
//! ([`AmoError::return_code`]).
//!
//! # Operations
//!
//! Formats and codes come from `firmware_spec::cassini::amo` (`enum c_atomic_op`,
//! `c_atomic_type`, `c_cswap_op`, `amo_size[]`; cassini.md §2.1). Operands are little-endian,
//! as on x86: a value of `n = amo_size[type]` bytes is the low `n` bytes of `op*_word1`, and a
//! 16-byte value spills into `op*_word2` ([`AmoRequest::op1`] / [`AmoRequest::op2`] hold
//! `word1 | word2 << 64`). A complex value is `{real, imag}` in that order (C `_Complex`).
//!
//! With `old` the target value, `op1` the operand and `op2` the second operand:
//!
//! | op | new value | defined on |
//! |---|---|---|
//! | MIN / MAX | `op1` if `op1 < old` (MIN) / `op1 > old` (MAX), else `old` | integers (signed or unsigned per type), UINT128, FLOAT, DOUBLE |
//! | SUM | `old + op1` (integers wrap at the type width; IEEE addition, per component for complex) | every type |
//! | LOR / LAND / LXOR | `1` or `0`: `old != 0` or/and/xor `op1 != 0` | integers, UINT128 |
//! | BOR / BAND / BXOR | bitwise | integers, UINT128 |
//! | SWAP | `op1` | every type |
//! | CSWAP | `op1` if `op2 <cmp> old`, else `old` | EQ, NE: every type; LE, LT, GE, GT: integers, UINT128, FLOAT, DOUBLE |
//! | AXOR | `(old & !op2) ^ op1` | the eight integer types of 1..8 bytes |
//!
//! Every operation returns the old value ("fetched"); the initiator decides whether it goes
//! back (FETCHING_ATOMIC). Any other (op, type) pair is refused with `AMO_INVAL_OP_ERROR`
//! before memory is changed.
//!
//! # Readings where the public sources are silent
//!
//! * **Valid (op, type) pairs** follow Portals 4 (`portals4.h`: logical and bitwise operations
//!   on integer types only, no MIN/MAX and no ordered comparisons on complex types) and the
//!   validity table libfabric keeps for Cassini (`cxip_atomic.c` `_cxip_amo_valid`: MIN/MAX on
//!   integers + float + double, SUM on all 12 libfabric types, logical/bitwise on integers,
//!   CSWAP EQ/NE on all, ordered CSWAP not on complex, MSWAP (= AXOR) on integers only, with the
//!   comment that AXOR "for float, double, and float complex are not supported by Cassini").
//!   UINT128 is not used by libfabric; we treat it as an unsigned integer for every operation
//!   except AXOR, because the older libfabric code that wrote values with AXOR switched to SWAP
//!   for exactly DOUBLE_COMPLEX and UINT128 ("128-bit quantities must be SWAPPED").
//! * **CSWAP operand order**: `op1` is the swap value and `op2` the comparison value, and
//!   CSWAP_xx swaps when `op2 xx old`. libfabric copies the user buffer into `op1_word1` and the
//!   `compare` argument into `op2_word1`, maps FI_CSWAP_xx to the same-named `c_cswap_op`, and
//!   libfabric defines FI_CSWAP_LT as "swap if `*compare < *addr`" (as its software atomics
//!   do). FI_ATOMIC_WRITE is CSWAP_NE with `op2 = op1`, a write whatever the order.
//! * **CSWAP EQ / NE compare bit patterns**, also for FLOAT/DOUBLE and complex types. With IEEE
//!   equality, the FI_ATOMIC_WRITE mapping above would fail to replace `-0.0` by `+0.0`;
//!   comparing bits makes it an exact write. Ordered comparisons use the type's numeric order
//!   (false when either side is NaN).
//! * **AXOR** is `(old & !op2) ^ op1`, the formula in libfabric's `cxip_atomic.c` comment
//!   (FI_MSWAP sends `op1 = value & mask`, `op2 = mask`, so the result equals
//!   `(old & !mask) | (value & mask)`). The firmware-spec doc writes `| op1`, which agrees
//!   whenever `op1` has no bit outside `op2`, as every libfabric use does.
//! * **MIN / MAX / SWAP / CSWAP on floats** write the chosen operand's bits unchanged. With a
//!   NaN on either side MIN and MAX keep `old` (the comparison is false).
//! * **Floating-point exceptions** (IEEE 754, round to nearest even, no flush to zero):
//!   *invalid* when an operand is a signalling NaN, when an ordered comparison (MIN, MAX,
//!   CSWAP LE/LT/GE/GT) sees any NaN (as x86 MINSD/CMPLTSD do), or when SUM produces a NaN
//!   from non-NaN operands (`inf + -inf`); *overflow* when SUM of finite values rounds to
//!   infinity; *underflow* when a non-zero SUM result is subnormal (tininess alone: the sum of
//!   two floats that is subnormal is always exact, so under the default "tiny and inexact"
//!   rule the code could never occur, yet Cassini lists it); *inexact* when the rounded sum
//!   differs from the exact sum (and with overflow). Complex SUM ORs the flags of both parts.
//!   SWAP and CSWAP EQ/NE never raise. A NaN result is the first NaN operand (`old`, then
//!   `op1`) made quiet, or the x86 default NaN (sign set, quiet bit set) for `inf + -inf`.
//! * **Which exception is reported**: only those whose PtlTE option (`signal_invalid`,
//!   `signal_underflow`, `signal_overflow`, `signal_inexact` of `cxi_pt_alloc_opts`) is set, as
//!   passed in [`FpSignals`]; if several, the first of invalid, overflow, underflow, inexact.
//!   The result is **written in every case** (the exception is a report, not a rollback, as in
//!   IEEE default handling); [`AmoOutcome::return_code`] is the code to send back.
//! * **Order of checks**: operation/type validity (`AMO_INVAL_OP_ERROR`), then length
//!   (`AMO_LENGTH_ERROR`: the target bytes, a DMA AMO's `request_len`, or a small IDC AMO
//!   with a 16-byte type, which its single 8-byte operand cannot carry), then alignment
//!   (`AMO_ALIGN_ERROR`: the target address must be a multiple of `amo_size`, 16 for
//!   DOUBLE_COMPLEX and UINT128, 8 for FLOAT_COMPLEX).

mod compute;
mod fp;
mod operands;

pub use firmware_spec::cassini::amo::{AMO_SIZE, AmoOp, AmoType, CswapOp, amo_size};
pub use operands::AmoCommand;

use firmware_spec::cassini::le::PtAllocOpts;
use firmware_spec::cassini::rc::ReturnCode;

/// The PtlTE options that select which floating-point exceptions are reported
/// (`signal_invalid`, `signal_underflow`, `signal_overflow`, `signal_inexact` of
/// `cxi_pt_alloc_opts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FpSignals {
    /// Report AMO_FP_INVALID.
    pub invalid: bool,
    /// Report AMO_FP_UNDERFLOW.
    pub underflow: bool,
    /// Report AMO_FP_OVERFLOW.
    pub overflow: bool,
    /// Report AMO_FP_INEXACT.
    pub inexact: bool,
}

impl FpSignals {
    /// Report nothing (every `signal_*` option clear).
    pub const NONE: FpSignals = FpSignals {
        invalid: false,
        underflow: false,
        overflow: false,
        inexact: false,
    };
    /// Report every exception.
    pub const ALL: FpSignals = FpSignals {
        invalid: true,
        underflow: true,
        overflow: true,
        inexact: true,
    };

    /// The `signal_*` bits of a PtlTE's allocation options.
    pub fn from_pt_opts(opts: PtAllocOpts) -> Self {
        FpSignals {
            invalid: opts.contains(PtAllocOpts::SIGNAL_INVALID),
            underflow: opts.contains(PtAllocOpts::SIGNAL_UNDERFLOW),
            overflow: opts.contains(PtAllocOpts::SIGNAL_OVERFLOW),
            inexact: opts.contains(PtAllocOpts::SIGNAL_INEXACT),
        }
    }
}

/// The IEEE exceptions an operation raised (whether or not they are reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FpFlags {
    /// Invalid operation.
    pub invalid: bool,
    /// Result tiny (subnormal, non-zero).
    pub underflow: bool,
    /// Finite operands, infinite result.
    pub overflow: bool,
    /// Rounded result differs from the exact one.
    pub inexact: bool,
}

impl FpFlags {
    /// Whether no exception was raised.
    pub fn is_empty(&self) -> bool {
        *self == FpFlags::default()
    }

    /// Both sets of flags.
    pub fn union(self, other: FpFlags) -> FpFlags {
        FpFlags {
            invalid: self.invalid | other.invalid,
            underflow: self.underflow | other.underflow,
            overflow: self.overflow | other.overflow,
            inexact: self.inexact | other.inexact,
        }
    }

    /// The return code to report under `signals`: the first raised and enabled of invalid,
    /// overflow, underflow, inexact; `C_RC_OK` if none.
    pub fn report(&self, signals: FpSignals) -> ReturnCode {
        if self.invalid && signals.invalid {
            ReturnCode::AmoFpInvalid
        } else if self.overflow && signals.overflow {
            ReturnCode::AmoFpOverflow
        } else if self.underflow && signals.underflow {
            ReturnCode::AmoFpUnderflow
        } else if self.inexact && signals.inexact {
            ReturnCode::AmoFpInexact
        } else {
            ReturnCode::Ok
        }
    }
}

/// One atomic operation as the target sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmoRequest {
    /// `atomic_op`.
    pub op: AmoOp,
    /// `atomic_type`.
    pub ty: AmoType,
    /// `cswap_op` (used by CSWAP only).
    pub cswap: CswapOp,
    /// Operand 1, `op1_word1 | op1_word2 << 64`: the value (SUM, MIN, ..., SWAP), the swap
    /// value (CSWAP), the bits to flip (AXOR).
    pub op1: u128,
    /// Operand 2, `op2_word1 | op2_word2 << 64`: the comparison value (CSWAP), the mask
    /// (AXOR); ignored otherwise.
    pub op2: u128,
}

impl AmoRequest {
    /// A request with `op2 = 0` and `cswap = EQ`.
    pub fn new(op: AmoOp, ty: AmoType, op1: u128) -> Self {
        AmoRequest {
            op,
            ty,
            cswap: CswapOp::Eq,
            op1,
            op2: 0,
        }
    }

    /// A CSWAP: store `swap` if `compare <cmp> old`.
    pub fn cswap(ty: AmoType, cmp: CswapOp, compare: u128, swap: u128) -> Self {
        AmoRequest {
            op: AmoOp::Cswap,
            ty,
            cswap: cmp,
            op1: swap,
            op2: compare,
        }
    }

    /// An AXOR: `(old & !mask) ^ bits`.
    pub fn axor(ty: AmoType, bits: u128, mask: u128) -> Self {
        AmoRequest {
            op: AmoOp::Axor,
            ty,
            cswap: CswapOp::Eq,
            op1: bits,
            op2: mask,
        }
    }

    /// Operand size in bytes (`amo_size[ty]`).
    pub fn size(&self) -> usize {
        self.ty.size()
    }

    /// Whether the (op, type, cswap) combination is defined (see the module table).
    pub fn is_defined(&self) -> bool {
        is_defined(self.op, self.ty, self.cswap)
    }
}

/// Whether `op` is defined on `ty` (`cswap` matters for CSWAP only). See the module docs.
pub fn is_defined(op: AmoOp, ty: AmoType, cswap: CswapOp) -> bool {
    let class = TypeClass::of(ty);
    match op {
        AmoOp::Sum | AmoOp::Swap => true,
        AmoOp::Min | AmoOp::Max => class != TypeClass::Complex,
        AmoOp::Lor | AmoOp::Land | AmoOp::Lxor | AmoOp::Bor | AmoOp::Band | AmoOp::Bxor => {
            matches!(class, TypeClass::Int | TypeClass::Uint128)
        }
        AmoOp::Cswap => match cswap {
            CswapOp::Eq | CswapOp::Ne => true,
            CswapOp::Le | CswapOp::Lt | CswapOp::Ge | CswapOp::Gt => class != TypeClass::Complex,
        },
        AmoOp::Axor => class == TypeClass::Int,
    }
}

/// Broad classes of operand types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TypeClass {
    /// INT8 .. UINT64.
    Int,
    /// UINT128.
    Uint128,
    /// FLOAT, DOUBLE.
    Real,
    /// FLOAT_COMPLEX, DOUBLE_COMPLEX.
    Complex,
}

impl TypeClass {
    pub(crate) fn of(ty: AmoType) -> Self {
        match ty {
            AmoType::Int8
            | AmoType::Uint8
            | AmoType::Int16
            | AmoType::Uint16
            | AmoType::Int32
            | AmoType::Uint32
            | AmoType::Int64
            | AmoType::Uint64 => TypeClass::Int,
            AmoType::Uint128 => TypeClass::Uint128,
            AmoType::Float | AmoType::Double => TypeClass::Real,
            AmoType::FloatComplex | AmoType::DoubleComplex => TypeClass::Complex,
        }
    }
}

/// An AMO the target refuses; target memory is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AmoError {
    /// The operation is not defined on the type.
    #[error("AMO {op:?} ({cswap:?}) is not defined on {ty:?}")]
    InvalidOp {
        /// `atomic_op`.
        op: AmoOp,
        /// `atomic_type`.
        ty: AmoType,
        /// `cswap_op`.
        cswap: CswapOp,
    },
    /// The data length is not the operand size.
    #[error("AMO on {ty:?} needs {need} bytes, got {got}")]
    Length {
        /// `atomic_type`.
        ty: AmoType,
        /// `amo_size[ty]`.
        need: usize,
        /// The length given.
        got: usize,
    },
    /// The target address is not a multiple of the operand size.
    #[error("AMO on {ty:?} at {addr:#x} is not {size}-byte aligned")]
    Align {
        /// `atomic_type`.
        ty: AmoType,
        /// The target address.
        addr: u64,
        /// `amo_size[ty]`.
        size: usize,
    },
}

impl AmoError {
    /// The return code the target reports (`C_RC_AMO_INVAL_OP_ERROR`,
    /// `C_RC_AMO_LENGTH_ERROR`, `C_RC_AMO_ALIGN_ERROR`).
    pub fn return_code(&self) -> ReturnCode {
        match self {
            AmoError::InvalidOp { .. } => ReturnCode::AmoInvalOpError,
            AmoError::Length { .. } => ReturnCode::AmoLengthError,
            AmoError::Align { .. } => ReturnCode::AmoAlignError,
        }
    }
}

/// An operand-sized value (1 to 16 bytes, little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AmoValue {
    bytes: [u8; 16],
    len: u8,
}

impl AmoValue {
    /// The low `len` bytes of `v` (`len` clamped to 16).
    pub fn from_u128(v: u128, len: usize) -> Self {
        let len = len.min(16);
        let mut bytes = [0u8; 16];
        bytes[..len].copy_from_slice(&v.to_le_bytes()[..len]);
        AmoValue {
            bytes,
            len: len as u8,
        }
    }

    /// The bytes (`amo_size` of them).
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// As an integer (zero-extended).
    pub fn to_u128(&self) -> u128 {
        u128::from_le_bytes(self.bytes)
    }
}

/// What an executed AMO did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmoOutcome {
    /// The value before the operation (returned by a fetching AMO).
    pub fetched: AmoValue,
    /// The value written.
    pub stored: AmoValue,
    /// The exceptions raised (floating-point types only).
    pub flags: FpFlags,
    /// `C_RC_OK`, or the reported `AMO_FP_*` code ([`FpFlags::report`]).
    pub return_code: ReturnCode,
}

impl AmoOutcome {
    /// Whether the stored bytes differ from the fetched ones.
    pub fn changed(&self) -> bool {
        self.fetched != self.stored
    }
}

/// Check an AMO against its target: definition, length (`target_len`), alignment of `addr`.
pub fn check(req: &AmoRequest, addr: u64, target_len: usize) -> Result<(), AmoError> {
    if !req.is_defined() {
        return Err(AmoError::InvalidOp {
            op: req.op,
            ty: req.ty,
            cswap: req.cswap,
        });
    }
    let size = req.size();
    if target_len != size {
        return Err(AmoError::Length {
            ty: req.ty,
            need: size,
            got: target_len,
        });
    }
    if !addr.is_multiple_of(size as u64) {
        return Err(AmoError::Align {
            ty: req.ty,
            addr,
            size,
        });
    }
    Ok(())
}

/// Execute `req` on `target`, the `amo_size` bytes at address `addr`: check it ([`check`]),
/// compute the new value from the old one, write it into `target` and return the old value
/// with the return code under `signals`. On error `target` is unchanged.
pub fn execute(
    req: &AmoRequest,
    addr: u64,
    target: &mut [u8],
    signals: FpSignals,
) -> Result<AmoOutcome, AmoError> {
    check(req, addr, target.len())?;
    let size = req.size();
    let mut old = [0u8; 16];
    old[..size].copy_from_slice(target);
    let old = u128::from_le_bytes(old);
    let (new, flags) = compute::apply(req, old)?;
    let stored = AmoValue::from_u128(new, size);
    target.copy_from_slice(stored.as_slice());
    Ok(AmoOutcome {
        fetched: AmoValue::from_u128(old, size),
        stored,
        flags,
        return_code: flags.report(signals),
    })
}

/// The value `req` would store over `old` (operands and `old` truncated to the operand size)
/// and the exceptions it raises, without touching memory. Errors only for an undefined
/// (op, type) pair.
pub fn compute(req: &AmoRequest, old: u128) -> Result<(u128, FpFlags), AmoError> {
    compute::apply(req, old)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defined_table_counts() {
        let mut n = 0;
        for op in AmoOp::ALL {
            for ty in AmoType::ALL {
                for c in CswapOp::ALL {
                    if is_defined(*op, *ty, *c) {
                        n += 1;
                    }
                }
            }
        }
        // Per op, times 6 cswap values unless CSWAP: MIN/MAX 11 types, SUM 13, six logic and
        // bitwise ops 9, SWAP 13, AXOR 8; CSWAP EQ/NE 13 each, LE..GT 11 each.
        let non_cswap = (11 * 2 + 13 + 6 * 9 + 13 + 8) * 6;
        assert_eq!(n, non_cswap + 2 * 13 + 4 * 11);
    }

    #[test]
    fn report_priority() {
        let f = FpFlags {
            invalid: false,
            underflow: true,
            overflow: false,
            inexact: true,
        };
        assert_eq!(f.report(FpSignals::ALL), ReturnCode::AmoFpUnderflow);
        assert_eq!(
            f.report(FpSignals {
                inexact: true,
                ..FpSignals::NONE
            }),
            ReturnCode::AmoFpInexact
        );
        assert_eq!(f.report(FpSignals::NONE), ReturnCode::Ok);
        let opts = PtAllocOpts::SIGNAL_OVERFLOW | PtAllocOpts::SIGNAL_INEXACT;
        assert_eq!(
            FpSignals::from_pt_opts(opts),
            FpSignals {
                overflow: true,
                inexact: true,
                ..FpSignals::NONE
            }
        );
    }
}
