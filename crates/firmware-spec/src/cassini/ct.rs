//! Counting-event (CT) commands and triggered DMA (`cassini_user_defs.h` `c_ct_cmd`;
//! `cxi_prov_hw.h` `cxi_cq_emit_ct`, `cxi_cq_emit_trig_full_dma/nomatch_dma/dma_amo`;
//! cassini.md §5). CT commands go to trigger CQs (`CXI_CQ_TX_WITH_TRIG_CMDS`), which accept
//! only 64 B and 128 B CT-type commands.

use super::cmd_header::{CmdHeader, CmdSize, CmdType, CtOp, DmaOp};
use super::dma::{DmaAmo, FullDma, NomatchDma};
use super::layout::{FormatError, Layout, layout, need};

layout! {
    /// `struct c_ct_cmd` (24 B packed header). Emitted as a 64 B command, or as 128 B for
    /// CT_TRIG_DMA with the DMA command embedded at byte 24 ([`TrigDma`]); `cmd_size` is
    /// derived from the opcode. Bytes 24..63 of a 64 B CT command are not part of it.
    pub struct CtCmd("c_ct_cmd", 24) {
        /// `opcode`.
        opcode[4:4]: CtOp,
        /// `ct`: the counter set/incremented/read/cancelled (11 bits).
        ct[16:11]: u16,
        /// `trig_ct`: the counter whose threshold triggers the operation.
        trig_ct[32:11]: u16,
        /// `eq`: EQ of the TRIGGERED_OP event of CT_TRIG_EVENT (0 = none).
        eq[48:11]: u16,
        /// `ct_success` (48 bits): value to set / add.
        ct_success[64:48]: u64,
        /// `ct_failure` (7 bits): value to set / add.
        ct_failure[112:7]: u8,
        /// `set_ct_success`: CT_SET / CT_TRIG_SET set the success count.
        set_ct_success[126:1]: bool,
        /// `set_ct_failure`: CT_SET / CT_TRIG_SET set the failure count.
        set_ct_failure[127:1]: bool,
        /// `threshold` (48 bits): compared with `trig_ct`'s success count.
        threshold[128:48]: u64,
    }
    consts { cmd_type[0:2] = CmdType::Ct as u8 }
    derived {
        cmd_size[2:2] = |s: &Self| {
            if s.opcode == CtOp::CtTrigDma { CmdSize::B128 as u64 } else { CmdSize::B64 as u64 }
        },
    }
}

impl CtCmd {
    /// A CT_NOOP: the 64 B padding of trigger CQs (`cxi_cq_align_for_ct128_cmd`).
    pub fn noop() -> Self {
        CtCmd::default()
    }

    /// Bytes in the ring: 128 for CT_TRIG_DMA, else 64.
    pub fn ring_len(&self) -> usize {
        if self.opcode == CtOp::CtTrigDma {
            128
        } else {
            64
        }
    }
}

/// The command embedded at byte 24 of a CT_TRIG_DMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddedDma {
    /// A 64 B `c_full_dma_cmd` (`cxi_cq_emit_trig_full_dma`).
    Full(FullDma),
    /// A 32 B `c_nomatch_dma_cmd` (`cxi_cq_emit_trig_nomatch_dma`).
    Nomatch(NomatchDma),
    /// A 96 B `c_dma_amo_cmd` (`cxi_cq_emit_trig_dma_amo`).
    Amo(DmaAmo),
}

impl EmbeddedDma {
    /// Decode the DMA command at `bytes[0]`.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let h = CmdHeader::peek(bytes)?;
        let unsupported = FormatError::UnsupportedCommand {
            queue: "embedded",
            cmd_type: h.cmd_type as u8,
            opcode: h.opcode,
        };
        if h.cmd_type != CmdType::Dma {
            return Err(unsupported);
        }
        match DmaOp::try_from(h.opcode) {
            Ok(DmaOp::Put | DmaOp::Get | DmaOp::RendezvousPut) => {
                Ok(EmbeddedDma::Full(FullDma::decode(bytes)?))
            }
            Ok(DmaOp::NomatchPut | DmaOp::NomatchGet) => {
                Ok(EmbeddedDma::Nomatch(NomatchDma::decode(bytes)?))
            }
            Ok(DmaOp::Atomic | DmaOp::FetchingAtomic) => {
                Ok(EmbeddedDma::Amo(DmaAmo::decode(bytes)?))
            }
            _ => Err(unsupported),
        }
    }

    /// Whether the opcode fits the variant.
    pub fn is_valid_opcode(&self) -> bool {
        match self {
            EmbeddedDma::Full(d) => d.is_valid_opcode(),
            EmbeddedDma::Nomatch(d) => d.is_valid_opcode(),
            EmbeddedDma::Amo(d) => d.is_valid_opcode(),
        }
    }

    fn write_to(&self, dst: &mut [u8]) {
        match self {
            EmbeddedDma::Full(d) => d.write_to(dst),
            EmbeddedDma::Nomatch(d) => d.write_to(dst),
            EmbeddedDma::Amo(d) => d.write_to(dst),
        }
    }

    /// The embedded command's `c_cmd` header byte.
    pub fn header(&self) -> CmdHeader {
        match self {
            EmbeddedDma::Full(d) => CmdHeader::new(CmdType::Dma, CmdSize::B64, d.opcode as u8),
            EmbeddedDma::Nomatch(d) => CmdHeader::new(CmdType::Dma, CmdSize::B32, d.opcode as u8),
            EmbeddedDma::Amo(d) => CmdHeader::new(CmdType::Dma, CmdSize::B128, d.opcode as u8),
        }
    }
}

/// CT_TRIG_DMA (128 B): when counter `ct.trig_ct` reaches `ct.threshold`, launch `dma`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrigDma {
    /// The CT header; `opcode` must be `CtTrigDma`.
    pub ct: CtCmd,
    /// The embedded command (carrying its own completion `ct`).
    pub dma: EmbeddedDma,
}

impl TrigDma {
    /// Bytes in the ring.
    pub const LEN: usize = 128;
    /// Offset of the embedded command (`c_ct_cmd.embedded_dma`).
    pub const DMA_OFFSET: usize = 24;
    const NAME: &'static str = "c_ct_cmd+embedded_dma";

    /// Launch `dma` when `trig_ct` reaches `threshold`.
    pub fn new(trig_ct: u16, threshold: u64, dma: EmbeddedDma) -> Self {
        TrigDma {
            ct: CtCmd {
                opcode: CtOp::CtTrigDma,
                trig_ct,
                threshold,
                ..CtCmd::default()
            },
            dma,
        }
    }

    /// The CT opcode is CT_TRIG_DMA and the embedded opcode fits its format.
    pub fn validate(&self) -> Result<(), FormatError> {
        if self.ct.opcode != CtOp::CtTrigDma {
            return Err(FormatError::Mismatch {
                format: Self::NAME,
                field: "opcode",
                expected: CtOp::CtTrigDma as u64,
                found: self.ct.opcode as u64,
            });
        }
        if !self.dma.is_valid_opcode() {
            let h = self.dma.header();
            return Err(FormatError::UnsupportedCommand {
                queue: "embedded",
                cmd_type: h.cmd_type as u8,
                opcode: h.opcode,
            });
        }
        Ok(())
    }

    /// Write into `dst` (at least 128 bytes, zeroed by the caller).
    pub(crate) fn write_to(&self, dst: &mut [u8]) {
        self.ct.write_to(dst);
        if let Some(d) = dst.get_mut(Self::DMA_OFFSET..) {
            self.dma.write_to(d);
        }
    }

    /// Validate and encode.
    pub fn encode(&self) -> Result<[u8; 128], FormatError> {
        self.validate()?;
        let mut b = [0u8; 128];
        self.write_to(&mut b);
        Ok(b)
    }

    /// Decode from a ring (128 bytes).
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let ct = CtCmd::decode(bytes)?;
        need(Self::NAME, bytes, Self::LEN)?;
        if ct.opcode != CtOp::CtTrigDma {
            return Err(FormatError::Mismatch {
                format: Self::NAME,
                field: "opcode",
                expected: CtOp::CtTrigDma as u64,
                found: ct.opcode as u64,
            });
        }
        let dma = EmbeddedDma::decode(&bytes[Self::DMA_OFFSET..Self::LEN])?;
        Ok(TrigDma { ct, dma })
    }
}
