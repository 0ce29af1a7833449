//! CT commands as the block receives them from a trigger CQ (cassini.md §5): the 24-byte
//! `c_ct_cmd` header, plus for CT_TRIG_DMA the raw embedded command.

use firmware_spec::cassini::cmd::{CtCmd, CtOp, TrigDma};
use firmware_spec::cassini::layout::FormatError;

use super::effects::EMBEDDED_LEN;

/// A CT command: every opcode but CT_TRIG_DMA is a bare [`CtCmd`] (64 B in the ring);
/// CT_TRIG_DMA (128 B) keeps the embedded command's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtCommand {
    /// CT_NOOP, CT_SET, CT_GET, CT_INC, CT_CANCEL, CT_TRIG_SET, CT_TRIG_INC, CT_TRIG_EVENT.
    Ct(CtCmd),
    /// CT_TRIG_DMA: header and the bytes at 24..128.
    TrigDma {
        /// The header (`trig_ct`, `threshold`).
        ct: CtCmd,
        /// The embedded DMA command as found in the ring.
        embedded: [u8; EMBEDDED_LEN],
    },
}

impl CtCommand {
    /// Decode a CT command from the ring (64 bytes, or 128 for CT_TRIG_DMA). The embedded
    /// command is checked when the command is executed, not here.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let ct = CtCmd::decode(bytes)?;
        if ct.opcode != CtOp::CtTrigDma {
            return Ok(CtCommand::Ct(ct));
        }
        let Some(src) = bytes.get(TrigDma::DMA_OFFSET..TrigDma::LEN) else {
            return Err(FormatError::Truncated {
                format: "c_ct_cmd+embedded_dma",
                need: TrigDma::LEN,
                got: bytes.len(),
            });
        };
        let mut embedded = [0u8; EMBEDDED_LEN];
        embedded.copy_from_slice(src);
        Ok(CtCommand::TrigDma { ct, embedded })
    }

    /// From a decoded CT_TRIG_DMA (re-encoding its embedded command).
    pub fn from_trig_dma(t: &TrigDma) -> Result<Self, FormatError> {
        let bytes = t.encode()?;
        Self::decode(&bytes)
    }

    /// The header.
    pub fn header(&self) -> &CtCmd {
        match self {
            CtCommand::Ct(c) | CtCommand::TrigDma { ct: c, .. } => c,
        }
    }

    /// The opcode.
    pub fn opcode(&self) -> CtOp {
        self.header().opcode
    }
}

impl From<CtCmd> for CtCommand {
    fn from(c: CtCmd) -> Self {
        CtCommand::Ct(c)
    }
}

/// The trigger CQ a command came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CmdSource {
    /// CQ index (0..1023 transmit, 1024.. target), for the ack counter.
    pub cq: u16,
    /// The CQ's TLE pool (`mem_q_pfq` of its `c_cq_txq_base_table`, 0..3).
    pub tle_pool: u8,
}
