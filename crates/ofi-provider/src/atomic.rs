//! Which libfabric atomics the NIC does, and as which Cassini AMO.
//!
//! The mapping is the CXI provider's (`cxip_atomic.c` as summarised in cassini.md §2.1):
//! `FI_MIN`..`FI_BXOR` are the AMOs of the same name, `FI_ATOMIC_READ` a fetching `SUM` of
//! 0, `FI_ATOMIC_WRITE` a `SWAP`, `FI_CSWAP*` a `CSWAP` with the matching comparison (the
//! compare value in `op2`), `FI_MSWAP` an `AXOR` with `op1 = value & mask`, `op2 = mask`.
//! Types: `FI_INT8`..`FI_UINT64`, `FI_FLOAT`, `FI_DOUBLE`; bitwise and logical operations
//! and `FI_MSWAP` on integers only (Cassini defines them on no other type). `FI_PROD`, the
//! complex and long double types are not NIC operations: `-FI_EOPNOTSUPP`. One element per
//! operation (`count` 1), as the CXI provider reports.

#![forbid(unsafe_code)]

use firmware_spec::cassini::amo::{AmoOp as CxiOp, AmoType as CxiType, CswapOp};
use transport::cxi::KeyedAmo;

use crate::ffi::rma_types::*;

/// Which call family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `fi_atomic` (no result).
    Write,
    /// `fi_fetch_atomic`.
    Fetch,
    /// `fi_compare_atomic`.
    Compare,
}

/// The Cassini type and element size of a libfabric datatype.
pub fn datatype(dt: i32) -> Option<(CxiType, usize)> {
    Some(match dt {
        FI_INT8 => (CxiType::Int8, 1),
        FI_UINT8 => (CxiType::Uint8, 1),
        FI_INT16 => (CxiType::Int16, 2),
        FI_UINT16 => (CxiType::Uint16, 2),
        FI_INT32 => (CxiType::Int32, 4),
        FI_UINT32 => (CxiType::Uint32, 4),
        FI_INT64 => (CxiType::Int64, 8),
        FI_UINT64 => (CxiType::Uint64, 8),
        FI_FLOAT => (CxiType::Float, 4),
        FI_DOUBLE => (CxiType::Double, 8),
        _ => return None,
    })
}

fn integer(ty: CxiType) -> bool {
    !matches!(ty, CxiType::Float | CxiType::Double)
}

/// The Cassini operation and comparison for `op` on `ty` in call family `kind`, or `None`
/// when the NIC cannot do it (`-FI_EOPNOTSUPP`).
pub fn operation(op: i32, ty: CxiType, kind: Kind) -> Option<(CxiOp, CswapOp)> {
    let int = integer(ty);
    let eq = CswapOp::Eq;
    let r = match (kind, op) {
        (Kind::Write | Kind::Fetch, FI_MIN) => (CxiOp::Min, eq),
        (Kind::Write | Kind::Fetch, FI_MAX) => (CxiOp::Max, eq),
        (Kind::Write | Kind::Fetch, FI_SUM) => (CxiOp::Sum, eq),
        (Kind::Write | Kind::Fetch, FI_LOR) if int => (CxiOp::Lor, eq),
        (Kind::Write | Kind::Fetch, FI_LAND) if int => (CxiOp::Land, eq),
        (Kind::Write | Kind::Fetch, FI_BOR) if int => (CxiOp::Bor, eq),
        (Kind::Write | Kind::Fetch, FI_BAND) if int => (CxiOp::Band, eq),
        (Kind::Write | Kind::Fetch, FI_LXOR) if int => (CxiOp::Lxor, eq),
        (Kind::Write | Kind::Fetch, FI_BXOR) if int => (CxiOp::Bxor, eq),
        (Kind::Write | Kind::Fetch, FI_ATOMIC_WRITE) => (CxiOp::Swap, eq),
        (Kind::Fetch, FI_ATOMIC_READ) => (CxiOp::Sum, eq),
        (Kind::Compare, FI_CSWAP) => (CxiOp::Cswap, CswapOp::Eq),
        (Kind::Compare, FI_CSWAP_NE) => (CxiOp::Cswap, CswapOp::Ne),
        (Kind::Compare, FI_CSWAP_LE) => (CxiOp::Cswap, CswapOp::Le),
        (Kind::Compare, FI_CSWAP_LT) => (CxiOp::Cswap, CswapOp::Lt),
        (Kind::Compare, FI_CSWAP_GE) => (CxiOp::Cswap, CswapOp::Ge),
        (Kind::Compare, FI_CSWAP_GT) => (CxiOp::Cswap, CswapOp::Gt),
        (Kind::Compare, FI_MSWAP) if int => (CxiOp::Axor, eq),
        _ => return None,
    };
    Some(r)
}

/// Whether `(op, dt)` is supported in `kind`, with its element size.
pub fn valid(op: i32, dt: i32, kind: Kind) -> Option<usize> {
    let (ty, size) = datatype(dt)?;
    operation(op, ty, kind).map(|_| size)
}

fn word(v: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = v.len().min(8);
    b[..n].copy_from_slice(&v[..n]);
    u64::from_le_bytes(b)
}

/// The AMO for `op` on `dt` with operand `operand` and, for compare atomics, `compare`
/// (one element each, native byte order = little-endian here).
pub fn amo(op: i32, dt: i32, kind: Kind, operand: &[u8], compare: &[u8]) -> Option<KeyedAmo> {
    let (ty, _) = datatype(dt)?;
    let (cop, cswap) = operation(op, ty, kind)?;
    let value = word(operand);
    let (op1, op2) = match (cop, op) {
        (CxiOp::Sum, FI_ATOMIC_READ) => (0, 0),
        (CxiOp::Cswap, _) => (value, word(compare)),
        (CxiOp::Axor, _) => {
            let mask = word(compare);
            (value & mask, mask)
        }
        _ => (value, 0),
    };
    Some(KeyedAmo {
        op: cop,
        ty,
        cswap,
        op1,
        op2,
        fetch: kind != Kind::Write,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_pairs_follow_the_nic() {
        assert_eq!(valid(FI_SUM, FI_UINT64, Kind::Write), Some(8));
        assert_eq!(valid(FI_SUM, FI_DOUBLE, Kind::Fetch), Some(8));
        assert_eq!(valid(FI_BOR, FI_INT8, Kind::Write), Some(1));
        assert_eq!(valid(FI_BOR, FI_FLOAT, Kind::Write), None);
        assert_eq!(valid(FI_PROD, FI_INT32, Kind::Write), None);
        assert_eq!(valid(FI_ATOMIC_READ, FI_INT32, Kind::Write), None);
        assert_eq!(valid(FI_ATOMIC_READ, FI_INT32, Kind::Fetch), Some(4));
        assert_eq!(valid(FI_CSWAP, FI_INT32, Kind::Write), None);
        assert_eq!(valid(FI_CSWAP_GT, FI_DOUBLE, Kind::Compare), Some(8));
        assert_eq!(valid(FI_MSWAP, FI_DOUBLE, Kind::Compare), None);
        assert_eq!(valid(FI_SUM, 10, Kind::Write), None, "FI_FLOAT_COMPLEX");
    }

    #[test]
    fn operands_are_encoded_as_the_cxi_provider_does() {
        let a = amo(
            FI_MSWAP,
            FI_UINT32,
            Kind::Compare,
            &0xF0F0u32.to_le_bytes(),
            &0xFF00u32.to_le_bytes(),
        )
        .unwrap();
        assert_eq!(
            (a.op, a.op1, a.op2, a.fetch),
            (CxiOp::Axor, 0xF000, 0xFF00, true)
        );
        let a = amo(
            FI_ATOMIC_READ,
            FI_INT64,
            Kind::Fetch,
            &7i64.to_le_bytes(),
            &[],
        )
        .unwrap();
        assert_eq!((a.op, a.op1), (CxiOp::Sum, 0));
        let a = amo(
            FI_CSWAP_LE,
            FI_INT16,
            Kind::Compare,
            &5i16.to_le_bytes(),
            &3i16.to_le_bytes(),
        )
        .unwrap();
        assert_eq!(
            (a.op, a.cswap, a.op1, a.op2),
            (CxiOp::Cswap, CswapOp::Le, 5, 3)
        );
        let a = amo(FI_SUM, FI_UINT8, Kind::Write, &[9], &[]).unwrap();
        assert!(!a.fetch);
    }
}
