//! Operands of the three AMO command formats (cassini.md §2.1): the 64 B IDC AMO
//! (`c_idc_amo_cmd`: both operands inline), the 32 B small IDC AMO (an IDC Put whose payload
//! is a `c_small_amo_payload`: one 8-byte operand, never fetching), and the DMA AMO
//! (`c_dma_amo_cmd`: operand 1 read by the initiator from `local_read_addr`, operand 2 inline).

use firmware_spec::cassini::amo::SmallAmoPayload;
use firmware_spec::cassini::cmd::{DmaAmo, DmaOp, IdcAmo, IdcSmallAmo};

use super::{AmoError, AmoOp, AmoRequest, AmoType, CswapOp};

/// An AMO as carried to the target: the request, whether the old value goes back, and the
/// offset into the matched buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmoCommand {
    /// Operation and operands.
    pub request: AmoRequest,
    /// FETCHING_ATOMIC: the fetched value is returned to the initiator.
    pub fetching: bool,
    /// `remote_offset` of the command.
    pub remote_offset: u64,
}

fn words(w1: u64, w2: u64) -> u128 {
    w1 as u128 | (w2 as u128) << 64
}

impl AmoCommand {
    /// From a full IDC AMO (`op1_word1/2`, `op2_word1/2`).
    pub fn from_idc(cmd: &IdcAmo) -> Self {
        AmoCommand {
            request: AmoRequest {
                op: cmd.atomic_op,
                ty: cmd.atomic_type,
                cswap: cmd.cswap_op,
                op1: words(cmd.op1_word1, cmd.op1_word2),
                op2: words(cmd.op2_word1, cmd.op2_word2),
            },
            fetching: cmd.opcode == DmaOp::FetchingAtomic,
            remote_offset: cmd.remote_offset,
        }
    }

    /// From a small IDC AMO: non-fetching, `op2 = 0`, `cswap = EQ`; a 16-byte type cannot
    /// travel in its single 8-byte operand (`AMO_LENGTH_ERROR`).
    pub fn from_small(cmd: &IdcSmallAmo) -> Result<Self, AmoError> {
        Self::small(
            cmd.atomic_op,
            cmd.atomic_type,
            cmd.op1_word1,
            cmd.remote_offset,
        )
    }

    /// From the 16-byte `c_small_amo_payload` of a small IDC AMO, with the Put's
    /// `remote_offset`.
    pub fn from_small_payload(p: &SmallAmoPayload, remote_offset: u64) -> Result<Self, AmoError> {
        Self::small(p.amo_op, p.amo_type, p.op1_word1, remote_offset)
    }

    fn small(op: AmoOp, ty: AmoType, op1: u64, remote_offset: u64) -> Result<Self, AmoError> {
        if ty.size() > 8 {
            return Err(AmoError::Length {
                ty,
                need: ty.size(),
                got: 8,
            });
        }
        Ok(AmoCommand {
            request: AmoRequest {
                op,
                ty,
                cswap: CswapOp::Eq,
                op1: op1 as u128,
                op2: 0,
            },
            fetching: false,
            remote_offset,
        })
    }

    /// From a DMA AMO and the operand the initiator read at `local_read_addr`
    /// (`request_len` bytes, which must be `amo_size[atomic_type]`; `cxi_cq_emit_dma_amo`
    /// forces it).
    pub fn from_dma(cmd: &DmaAmo, op1: &[u8]) -> Result<Self, AmoError> {
        let ty = cmd.atomic_type;
        let need = ty.size();
        let got = cmd.request_len as usize;
        if got != need || op1.len() != need {
            return Err(AmoError::Length {
                ty,
                need,
                got: if got != need { got } else { op1.len() },
            });
        }
        let mut b = [0u8; 16];
        b[..need].copy_from_slice(op1);
        Ok(AmoCommand {
            request: AmoRequest {
                op: cmd.atomic_op,
                ty,
                cswap: cmd.cswap_op,
                op1: u128::from_le_bytes(b),
                op2: words(cmd.op2_word1, cmd.op2_word2),
            },
            fetching: cmd.opcode == DmaOp::FetchingAtomic,
            remote_offset: cmd.remote_offset,
        })
    }
}
