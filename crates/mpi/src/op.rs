//! Predefined reduction operations (`MPI_SUM` ...), applied element by element to buffers of
//! a [`Kind`].

use crate::datatype::Kind;
use transport::error::{Error, Result};

/// The predefined operations of MPI reductions (rsmpi's `SystemOperation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SystemOperation {
    /// `MPI_SUM`.
    Sum,
    /// `MPI_PROD`.
    Product,
    /// `MPI_MAX`.
    Max,
    /// `MPI_MIN`.
    Min,
    /// `MPI_LAND`.
    LogicalAnd,
    /// `MPI_LOR`.
    LogicalOr,
    /// `MPI_LXOR`.
    LogicalXor,
    /// `MPI_BAND`.
    BitwiseAnd,
    /// `MPI_BOR`.
    BitwiseOr,
    /// `MPI_BXOR`.
    BitwiseXor,
}

impl SystemOperation {
    /// `MPI_SUM`.
    pub fn sum() -> Self {
        SystemOperation::Sum
    }
    /// `MPI_PROD`.
    pub fn product() -> Self {
        SystemOperation::Product
    }
    /// `MPI_MAX`.
    pub fn max() -> Self {
        SystemOperation::Max
    }
    /// `MPI_MIN`.
    pub fn min() -> Self {
        SystemOperation::Min
    }
    /// `MPI_LAND`.
    pub fn logical_and() -> Self {
        SystemOperation::LogicalAnd
    }
    /// `MPI_LOR`.
    pub fn logical_or() -> Self {
        SystemOperation::LogicalOr
    }
    /// `MPI_LXOR`.
    pub fn logical_xor() -> Self {
        SystemOperation::LogicalXor
    }
    /// `MPI_BAND`.
    pub fn bitwise_and() -> Self {
        SystemOperation::BitwiseAnd
    }
    /// `MPI_BOR`.
    pub fn bitwise_or() -> Self {
        SystemOperation::BitwiseOr
    }
    /// `MPI_BXOR`.
    pub fn bitwise_xor() -> Self {
        SystemOperation::BitwiseXor
    }
}

macro_rules! int_op {
    ($t:ty, $op:expr, $a:expr, $b:expr) => {{
        let (a, b): ($t, $t) = ($a, $b);
        match $op {
            SystemOperation::Sum => Some(a.wrapping_add(b)),
            SystemOperation::Product => Some(a.wrapping_mul(b)),
            SystemOperation::Max => Some(a.max(b)),
            SystemOperation::Min => Some(a.min(b)),
            SystemOperation::LogicalAnd => Some(((a != 0) && (b != 0)) as $t),
            SystemOperation::LogicalOr => Some(((a != 0) || (b != 0)) as $t),
            SystemOperation::LogicalXor => Some(((a != 0) != (b != 0)) as $t),
            SystemOperation::BitwiseAnd => Some(a & b),
            SystemOperation::BitwiseOr => Some(a | b),
            SystemOperation::BitwiseXor => Some(a ^ b),
        }
    }};
}

macro_rules! float_op {
    ($t:ty, $op:expr, $a:expr, $b:expr) => {{
        let (a, b): ($t, $t) = ($a, $b);
        match $op {
            SystemOperation::Sum => Some(a + b),
            SystemOperation::Product => Some(a * b),
            SystemOperation::Max => Some(a.max(b)),
            SystemOperation::Min => Some(a.min(b)),
            SystemOperation::LogicalAnd => Some(((a != 0.0) && (b != 0.0)) as u8 as $t),
            SystemOperation::LogicalOr => Some(((a != 0.0) || (b != 0.0)) as u8 as $t),
            SystemOperation::LogicalXor => Some(((a != 0.0) != (b != 0.0)) as u8 as $t),
            _ => None,
        }
    }};
}

macro_rules! apply_as {
    ($t:ty, $mac:ident, $op:expr, $acc:expr, $x:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (a, b) in $acc.chunks_exact_mut(N).zip($x.chunks_exact(N)) {
            let va = <$t>::from_le_bytes(a.try_into().unwrap_or([0; N]));
            let vb = <$t>::from_le_bytes(b.try_into().unwrap_or([0; N]));
            match $mac!($t, $op, va, vb) {
                Some(r) => a.copy_from_slice(&r.to_le_bytes()),
                None => return Err(unsupported($op, stringify!($t))),
            }
        }
        Ok(())
    }};
}

fn unsupported(op: SystemOperation, ty: &str) -> Error {
    Error::Op(format!("{op:?} does not apply to {ty}"))
}

/// `acc[i] = acc[i] op x[i]` over elements of `kind` (little-endian bytes, equal lengths).
pub fn apply(op: SystemOperation, kind: Kind, acc: &mut [u8], x: &[u8]) -> Result<()> {
    if acc.len() != x.len() {
        return Err(Error::Count(format!(
            "reduction of {} bytes with {} bytes",
            acc.len(),
            x.len()
        )));
    }
    match kind {
        Kind::I8 => apply_as!(i8, int_op, op, acc, x),
        Kind::U8 => apply_as!(u8, int_op, op, acc, x),
        Kind::I16 => apply_as!(i16, int_op, op, acc, x),
        Kind::U16 => apply_as!(u16, int_op, op, acc, x),
        Kind::I32 => apply_as!(i32, int_op, op, acc, x),
        Kind::U32 => apply_as!(u32, int_op, op, acc, x),
        Kind::I64 => apply_as!(i64, int_op, op, acc, x),
        Kind::U64 => apply_as!(u64, int_op, op, acc, x),
        Kind::F32 => apply_as!(f32, float_op, op, acc, x),
        Kind::F64 => apply_as!(f64, float_op, op, acc, x),
        Kind::Bytes(_) => Err(Error::Op(format!(
            "{op:?} does not apply to a user datatype"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn integer_and_float_reductions() {
        let mut a = vec![1i32, -5, 7];
        apply(
            SystemOperation::Sum,
            Kind::I32,
            a.as_mut_bytes(),
            [2i32, 5, -1].as_bytes(),
        )
        .unwrap();
        assert_eq!(a, vec![3, 0, 6]);
        apply(
            SystemOperation::Max,
            Kind::I32,
            a.as_mut_bytes(),
            [4i32, -1, 0].as_bytes(),
        )
        .unwrap();
        assert_eq!(a, vec![4, 0, 6]);
        let mut f = vec![1.5f64, 2.0];
        apply(
            SystemOperation::Product,
            Kind::F64,
            f.as_mut_bytes(),
            [2.0f64, 0.5].as_bytes(),
        )
        .unwrap();
        assert_eq!(f, vec![3.0, 1.0]);
        assert!(
            apply(
                SystemOperation::BitwiseXor,
                Kind::F64,
                f.as_mut_bytes(),
                [0.0f64; 2].as_bytes()
            )
            .is_err()
        );
        assert!(apply(SystemOperation::Sum, Kind::Bytes(4), &mut [0; 4], &[0; 4]).is_err());
        assert!(apply(SystemOperation::Sum, Kind::U8, &mut [0; 4], &[0; 3]).is_err());
    }
}
