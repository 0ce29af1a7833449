//! Gemini AMO commands (`gni_fma_cmd_type_t`, first-generation 64-bit set only).
//!
//! Codes: `gni_pub.h`. Code structure: `gni_priv.h` — bit 0x100 (`GNI_FMA_ATOMIC_NO_FETCH`)
//! marks PUT (non-fetching) semantics, 0x10 (`GNI_FMA_ATOMIC_CACHED`) the cached variant,
//! `& 0xF` (`GNI_FMA_ATOMIC_CMD_MASK`) the operation, and 0x40 (`GNI_FMA_ATOMIC2_GEN_MASK`)
//! the Aries second-generation set, which Gemini rejects. The FMA descriptor's 5-bit
//! `command` field takes the code `& 0x1F` (`GHAL_FMA_SET_CMD`, `ghal_pub.h`).

use super::codes::{UnknownCode, code_enum};
use thiserror::Error;

code_enum! {
    /// The Gemini AMO commands.
    pub enum AmoCmd: u32 {
        /// `GNI_FMA_ATOMIC_FADD`: fetch and add.
        Fadd = 0x008,
        /// `GNI_FMA_ATOMIC_FADD_C`
        FaddC = 0x018,
        /// `GNI_FMA_ATOMIC_FAND`: fetch and AND.
        Fand = 0x009,
        /// `GNI_FMA_ATOMIC_FAND_C`
        FandC = 0x019,
        /// `GNI_FMA_ATOMIC_FOR`: fetch and OR.
        For = 0x00A,
        /// `GNI_FMA_ATOMIC_FOR_C`
        ForC = 0x01A,
        /// `GNI_FMA_ATOMIC_FXOR`: fetch and XOR.
        Fxor = 0x00B,
        /// `GNI_FMA_ATOMIC_FXOR_C`
        FxorC = 0x01B,
        /// `GNI_FMA_ATOMIC_FAX`: fetch, then new = (old & op1) ^ op2.
        Fax = 0x00C,
        /// `GNI_FMA_ATOMIC_FAX_C`
        FaxC = 0x01C,
        /// `GNI_FMA_ATOMIC_CSWAP`: compare (op1) and swap (op2), fetching.
        Cswap = 0x00D,
        /// `GNI_FMA_ATOMIC_CSWAP_C`
        CswapC = 0x01D,
        /// `GNI_FMA_ATOMIC_ADD`
        Add = 0x108,
        /// `GNI_FMA_ATOMIC_ADD_C`
        AddC = 0x118,
        /// `GNI_FMA_ATOMIC_AND`
        And = 0x109,
        /// `GNI_FMA_ATOMIC_AND_C`
        AndC = 0x119,
        /// `GNI_FMA_ATOMIC_OR`
        Or = 0x10A,
        /// `GNI_FMA_ATOMIC_OR_C`
        OrC = 0x11A,
        /// `GNI_FMA_ATOMIC_XOR`
        Xor = 0x10B,
        /// `GNI_FMA_ATOMIC_XOR_C`
        XorC = 0x11B,
        /// `GNI_FMA_ATOMIC_AX`: new = (old & op1) ^ op2, no fetch.
        Ax = 0x10C,
        /// `GNI_FMA_ATOMIC_AX_C`
        AxC = 0x11C,
    }
}

/// `GNI_FMA_ATOMIC_NO_FETCH`: PUT semantics.
pub const NO_FETCH_BIT: u32 = 0x100;
/// `GNI_FMA_ATOMIC_CACHED`: first-generation cached flag.
pub const CACHED_BIT: u32 = 0x10;
/// `GNI_FMA_ATOMIC_CMD_MASK`: first-generation operation.
pub const CMD_MASK: u32 = 0xF;
/// `GNI_FMA_ATOMIC2_GEN_MASK`: Aries second-generation commands.
pub const ATOMIC2_GEN_MASK: u32 = 0x40;
/// `GNI_FMA_ATOMIC_32_MASK`: Aries 32-bit operands.
pub const ATOMIC_32_MASK: u32 = 0x200;
/// Operand size of every Gemini AMO, and the target alignment (`GHAL_AMO_ALIGNMENT`).
pub const OPERAND_SIZE: u64 = 8;

/// The operation of an AMO, without fetch or cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AmoOp {
    /// Two's complement add of op1.
    Add,
    /// AND with op1.
    And,
    /// OR with op1.
    Or,
    /// XOR with op1.
    Xor,
    /// (old & op1) ^ op2.
    AndXor,
    /// If old == op1 then op2.
    CompareSwap,
}

/// Why an AMO command is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum AmoError {
    /// An Aries command (second generation, 32-bit or floating point).
    #[error("AMO command {0:#x} exists only on Aries")]
    AriesOnly(u32),
    /// No such command.
    #[error(transparent)]
    Unknown(#[from] UnknownCode),
}

impl AmoCmd {
    /// Decode a post descriptor's `amo_cmd`, telling Aries-only commands apart.
    pub fn decode(code: u32) -> Result<AmoCmd, AmoError> {
        if code & (ATOMIC2_GEN_MASK | ATOMIC_32_MASK) != 0 {
            return Err(AmoError::AriesOnly(code));
        }
        Ok(AmoCmd::try_from(code)?)
    }

    /// Whether the old value is returned (GET semantics).
    pub const fn is_fetching(self) -> bool {
        self.code() & NO_FETCH_BIT == 0
    }

    /// Whether this is a `_C` (NIC AMO cache) variant; needs `CDM_MODE_CACHED_AMO_ENABLED`.
    pub const fn is_cached(self) -> bool {
        self.code() & CACHED_BIT != 0
    }

    /// The operation.
    pub const fn op(self) -> AmoOp {
        match self.code() & CMD_MASK {
            0x8 => AmoOp::Add,
            0x9 => AmoOp::And,
            0xA => AmoOp::Or,
            0xB => AmoOp::Xor,
            0xC => AmoOp::AndXor,
            _ => AmoOp::CompareSwap,
        }
    }

    /// How many operands the command reads (`first_operand`, `second_operand`).
    pub const fn operand_count(self) -> u32 {
        match self.op() {
            AmoOp::AndXor | AmoOp::CompareSwap => 2,
            _ => 1,
        }
    }

    /// The value of the FMA descriptor's 5-bit `command` field (`code & 0x1F`).
    pub const fn fma_command(self) -> u64 {
        (self.code() & 0x1F) as u64
    }

    /// The new memory value for `old` and the operands (64-bit two's complement).
    pub const fn apply(self, old: u64, op1: u64, op2: u64) -> u64 {
        match self.op() {
            AmoOp::Add => old.wrapping_add(op1),
            AmoOp::And => old & op1,
            AmoOp::Or => old | op1,
            AmoOp::Xor => old ^ op1,
            AmoOp::AndXor => (old & op1) ^ op2,
            AmoOp::CompareSwap => {
                if old == op1 {
                    op2
                } else {
                    old
                }
            }
        }
    }

    /// The same command with the other fetch semantics, if it exists (CSWAP has no
    /// non-fetching form).
    pub fn with_fetch(self, fetch: bool) -> Option<AmoCmd> {
        let code = if fetch {
            self.code() & !NO_FETCH_BIT
        } else {
            self.code() | NO_FETCH_BIT
        };
        AmoCmd::try_from(code).ok()
    }
}

/// Whether an AMO target is correctly aligned (8 B; `GHAL_AMO_ALIGNMENT`).
pub const fn target_aligned(remote_addr: u64) -> bool {
    remote_addr & (OPERAND_SIZE - 1) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structure_of_codes() {
        assert_eq!(AmoCmd::ALL.len(), 22);
        for c in AmoCmd::ALL {
            assert_eq!(c.with_fetch(c.is_fetching()), Some(*c));
            assert!(c.fma_command() < 32);
        }
        assert!(AmoCmd::Fadd.is_fetching() && !AmoCmd::Fadd.is_cached());
        assert!(!AmoCmd::AxC.is_fetching() && AmoCmd::AxC.is_cached());
        assert_eq!(AmoCmd::Cswap.with_fetch(false), None);
        assert_eq!(AmoCmd::decode(0x041), Err(AmoError::AriesOnly(0x041)));
        assert_eq!(AmoCmd::decode(0x240), Err(AmoError::AriesOnly(0x240)));
        assert!(matches!(AmoCmd::decode(0x00E), Err(AmoError::Unknown(_))));
        assert_eq!(AmoCmd::decode(0x11C), Ok(AmoCmd::AxC));
    }

    #[test]
    fn semantics() {
        assert_eq!(AmoCmd::Fadd.apply(u64::MAX, 2, 0), 1);
        assert_eq!(AmoCmd::Fax.apply(0xF0F0, 0xFF00, 0x000F), 0xF00F);
        assert_eq!(AmoCmd::Cswap.apply(5, 5, 9), 9);
        assert_eq!(AmoCmd::Cswap.apply(6, 5, 9), 6);
        assert_eq!(AmoCmd::Cswap.operand_count(), 2);
        assert_eq!(AmoCmd::Or.operand_count(), 1);
        assert!(target_aligned(0x1000) && !target_aligned(0x1004));
    }
}
