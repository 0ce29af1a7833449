//! Atomic memory operations (`enum c_atomic_op`, `c_atomic_type`, `c_cswap_op`,
//! `struct c_small_amo_payload` in `cassini_user_defs.h`; `amo_size[]` in `cxi_prov_hw.h`;
//! cassini.md §2.1).

use super::layout::{c_enum, layout};

c_enum! {
    /// `enum c_atomic_op` (4 bits; 3, 13..15 unused).
    pub enum AmoOp("c_atomic_op") {
        /// `C_AMO_OP_MIN`.
        Min = 0 => "MIN",
        /// `C_AMO_OP_MAX`.
        Max = 1 => "MAX",
        /// `C_AMO_OP_SUM`.
        Sum = 2 => "SUM",
        /// `C_AMO_OP_LOR`: logical or.
        Lor = 4 => "LOR",
        /// `C_AMO_OP_LAND`: logical and.
        Land = 5 => "LAND",
        /// `C_AMO_OP_BOR`: bitwise or.
        Bor = 6 => "BOR",
        /// `C_AMO_OP_BAND`: bitwise and.
        Band = 7 => "BAND",
        /// `C_AMO_OP_LXOR`: logical xor.
        Lxor = 8 => "LXOR",
        /// `C_AMO_OP_BXOR`: bitwise xor.
        Bxor = 9 => "BXOR",
        /// `C_AMO_OP_SWAP`.
        Swap = 10 => "SWAP",
        /// `C_AMO_OP_CSWAP`: compare (with `cswap_op`) and swap.
        Cswap = 11 => "CSWAP",
        /// `C_AMO_OP_AXOR`: masked swap, `(old & ~op2) | op1` (libfabric FI_MSWAP mapping).
        Axor = 12 => "AXOR",
    }
}

c_enum! {
    /// `enum c_cswap_op`: the comparison of a CSWAP (3 bits; 6, 7 unused).
    pub enum CswapOp("c_cswap_op") {
        /// `C_AMO_OP_CSWAP_EQ`.
        Eq = 0 => "EQ",
        /// `C_AMO_OP_CSWAP_NE`.
        Ne = 1 => "NE",
        /// `C_AMO_OP_CSWAP_LE`.
        Le = 2 => "LE",
        /// `C_AMO_OP_CSWAP_LT`.
        Lt = 3 => "LT",
        /// `C_AMO_OP_CSWAP_GE`.
        Ge = 4 => "GE",
        /// `C_AMO_OP_CSWAP_GT`.
        Gt = 5 => "GT",
    }
}

c_enum! {
    /// `enum c_atomic_type`: operand type (4 bits; 13..15 unused).
    pub enum AmoType("c_atomic_type") {
        /// `C_AMO_TYPE_INT8_T`.
        Int8 = 0 => "INT8_T",
        /// `C_AMO_TYPE_UINT8_T`.
        Uint8 = 1 => "UINT8_T",
        /// `C_AMO_TYPE_INT16_T`.
        Int16 = 2 => "INT16_T",
        /// `C_AMO_TYPE_UINT16_T`.
        Uint16 = 3 => "UINT16_T",
        /// `C_AMO_TYPE_INT32_T`.
        Int32 = 4 => "INT32_T",
        /// `C_AMO_TYPE_UINT32_T`.
        Uint32 = 5 => "UINT32_T",
        /// `C_AMO_TYPE_INT64_T`.
        Int64 = 6 => "INT64_T",
        /// `C_AMO_TYPE_UINT64_T`.
        Uint64 = 7 => "UINT64_T",
        /// `C_AMO_TYPE_FLOAT_T`.
        Float = 8 => "FLOAT_T",
        /// `C_AMO_TYPE_FLOAT_COMPLEX_T`.
        FloatComplex = 9 => "FLOAT_COMPLEX_T",
        /// `C_AMO_TYPE_DOUBLE_T`.
        Double = 10 => "DOUBLE_T",
        /// `C_AMO_TYPE_DOUBLE_COMPLEX_T`.
        DoubleComplex = 11 => "DOUBLE_COMPLEX_T",
        /// `C_AMO_TYPE_UINT128_T`.
        Uint128 = 12 => "UINT128_T",
    }
}

/// `amo_size[]` (`cxi_prov_hw.h`): operand size in bytes per [`AmoType`], indexed by its raw
/// value. 16-byte operands spill from `op*_word1` into `op*_word2`.
pub const AMO_SIZE: [u8; 13] = [1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16, 16];

impl AmoType {
    /// Operand size in bytes (`amo_size[type]`); the DMA AMO `request_len`.
    pub const fn size(self) -> usize {
        AMO_SIZE[self as usize] as usize
    }
}

/// Operand size in bytes of an AMO type (`amo_size[type]`).
pub const fn amo_size(t: AmoType) -> usize {
    t.size()
}

layout! {
    /// `struct c_small_amo_payload` (16 B): the inline payload of a small (32 B) IDC AMO,
    /// which is an IDC Put of this payload with opcode `C_CMD_ATOMIC`.
    pub struct SmallAmoPayload("c_small_amo_payload", 16) {
        /// `amo_op`.
        amo_op[0:4]: AmoOp,
        /// `amo_type`.
        amo_type[8:4]: AmoType,
        /// `op1_word1`: the operand.
        op1_word1[64:64]: u64,
    }
    consts {}
    derived {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_exact() {
        assert_eq!(AmoOp::Sum as u8, 2);
        assert!(AmoOp::try_from(3).is_err());
        assert_eq!(AmoOp::Axor as u8, 12);
        assert!(AmoOp::try_from(13).is_err());
        assert_eq!(CswapOp::Gt as u8, 5);
        assert!(CswapOp::try_from(6).is_err());
        assert_eq!(AmoType::Uint128 as u8, 12);
        assert!(AmoType::try_from(13).is_err());
        let sizes: Vec<usize> = AmoType::ALL.iter().map(|t| t.size()).collect();
        assert_eq!(sizes, [1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16, 16]);
        assert_eq!(amo_size(AmoType::FloatComplex), 8);
    }
}
