//! Cassini commands: the top-level [`Command`] (transmit CQs) and [`TargetCommand`] (target
//! CQs) with their ring sizes. The `struct c_cmd` header byte and the opcode spaces are in
//! [`super::cmd_header`].
//!
//! Sources: `cassini_user_defs.h` (`c_cmd`, `c_cmd_type`, `c_cmd_size`, `c_dma_op`,
//! `c_ct_op`, `c_cq_op`, `c_tgt_op`, every `c_*_cmd` struct), `cxi_prov_hw.h`
//! (`cxi_cq_emit_*`: sizes, fixed fields, padding); cassini.md §1.4, §2, §5.
//!
//! The formats themselves are in [`super::idc`], [`super::dma`], [`super::ct`] and
//! [`super::tgt`], over the shared vocabulary of [`super::cmd_header`]; all are re-exported
//! here, so `cassini::cmd::FullDma`, `cassini::cmd::DmaOp` etc. work.
//!
//! Decoding is strict where the public emitters are exact: a command's `cmd_size` must be
//! the size `cxi_cq_emit_*` gives that format, fixed `length` fields must hold their fixed
//! value, enumerated fields must hold a named value. Anything else is a [`FormatError`] (the
//! emulator turns it into `C_EVENT_COMMAND_FAILURE`), never a panic.

pub use super::cmd_header::{
    CmdHeader, CmdSize, CmdType, CqOp, CtOp, DmaFlags, DmaOp, Payload, TgtOp,
};
pub use super::ct::{CtCmd, EmbeddedDma, TrigDma};
pub use super::dma::{DmaAmo, DmaEth, FullDma, NomatchDma};
pub use super::idc::{
    CState, ChecksumCtrl, IdcAmo, IdcEth, IdcEthHdr, IdcHdr, IdcMsg, IdcMsgHdr, IdcPut, IdcSmallAmo,
};
pub use super::layout::FormatError;
pub use super::tgt::{SetStateCmd, TargetCmd};

use super::layout::{Layout, need};

/// A command of a transmit CQ (ordinary or trigger queue), decoded by (`cmd_type`,
/// `opcode`, `cmd_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// IDC/NOOP: padding; first 8 bytes zero for the 32 B form `cxi_cq_*` emits.
    IdcNoop(CmdSize),
    /// IDC/CSTATE (32 B): per-CQ state for later IDC commands.
    CState(CState),
    /// IDC/PUT: 16 B header + inline data.
    IdcPut(IdcPut),
    /// IDC/SMALL_MESSAGE: 32 B header + inline data, at least 64 B.
    IdcMsg(IdcMsg),
    /// IDC/ATOMIC or FETCHING_ATOMIC, 64 B.
    IdcAmo(IdcAmo),
    /// IDC/ATOMIC, 32 B (IDC Put of a `c_small_amo_payload`).
    IdcSmallAmo(IdcSmallAmo),
    /// IDC/ETHERNET_TX: 16 B header + frame.
    IdcEth(IdcEth),
    /// DMA/PUT, GET or RENDEZVOUS_PUT (64 B).
    Dma(FullDma),
    /// DMA/NOMATCH_PUT or NOMATCH_GET (32 B).
    NomatchDma(NomatchDma),
    /// DMA/ATOMIC or FETCHING_ATOMIC (96 B in a 128 B command).
    DmaAmo(DmaAmo),
    /// DMA/ETHERNET_TX (96 B in a 128 B command).
    DmaEth(DmaEth),
    /// CT/* except CT_TRIG_DMA (64 B).
    Ct(CtCmd),
    /// CT/CT_TRIG_DMA (128 B): CT header + embedded DMA at byte 24.
    TrigDma(TrigDma),
    /// CQ/NOOP, FENCE or LCID (64 B).
    Cq(CqCmd),
}

super::layout::layout! {
    /// `struct c_cq_cmd` (64 B): CQ NOOP / FENCE / LCID on a transmit CQ. An LCID command
    /// must be 128 B aligned and followed by a 64 B CQ NOOP (`cxi_cq_emit_cq_lcid`).
    pub struct CqCmd("c_cq_cmd", 64) {
        /// `opcode`.
        opcode[4:4]: CqOp,
        /// `lcid`: the communication profile to switch to (LCID only).
        lcid[32:4]: u8,
    }
    consts { cmd_type[0:2] = CmdType::Cq as u8, cmd_size[2:2] = CmdSize::B64 as u8 }
    derived {}
}

fn unsupported(queue: &'static str, h: CmdHeader) -> FormatError {
    FormatError::UnsupportedCommand {
        queue,
        cmd_type: h.cmd_type as u8,
        opcode: h.opcode,
    }
}

impl Command {
    /// Decode the command that starts at `bytes[0]` of a transmit CQ ring. `bytes` must hold
    /// at least the command's `cmd_size` bytes; later bytes are ignored. Advance the ring by
    /// [`Command::encoded_len`].
    pub fn decode(bytes: &[u8]) -> Result<Command, FormatError> {
        let h = CmdHeader::peek(bytes)?;
        need("c_cmd", bytes, h.cmd_size.bytes())?;
        let bytes = &bytes[..h.cmd_size.bytes()];
        match h.cmd_type {
            CmdType::Idc => {
                let op = DmaOp::try_from(h.opcode).map_err(|_| unsupported("transmit", h))?;
                Ok(match op {
                    DmaOp::Noop => Command::IdcNoop(h.cmd_size),
                    DmaOp::Cstate => Command::CState(CState::decode(bytes)?),
                    DmaOp::Put => Command::IdcPut(IdcPut::decode(bytes)?),
                    DmaOp::SmallMessage => Command::IdcMsg(IdcMsg::decode(bytes)?),
                    DmaOp::Atomic if h.cmd_size == CmdSize::B32 => {
                        Command::IdcSmallAmo(IdcSmallAmo::decode(bytes)?)
                    }
                    DmaOp::Atomic | DmaOp::FetchingAtomic => {
                        Command::IdcAmo(IdcAmo::decode(bytes)?)
                    }
                    DmaOp::EthernetTx => Command::IdcEth(IdcEth::decode(bytes)?),
                    _ => return Err(unsupported("transmit", h)),
                })
            }
            CmdType::Dma => {
                let op = DmaOp::try_from(h.opcode).map_err(|_| unsupported("transmit", h))?;
                Ok(match op {
                    DmaOp::Put | DmaOp::Get | DmaOp::RendezvousPut => {
                        Command::Dma(FullDma::decode(bytes)?)
                    }
                    DmaOp::NomatchPut | DmaOp::NomatchGet => {
                        Command::NomatchDma(NomatchDma::decode(bytes)?)
                    }
                    DmaOp::Atomic | DmaOp::FetchingAtomic => {
                        Command::DmaAmo(DmaAmo::decode(bytes)?)
                    }
                    DmaOp::EthernetTx => Command::DmaEth(DmaEth::decode(bytes)?),
                    _ => return Err(unsupported("transmit", h)),
                })
            }
            CmdType::Ct => {
                let op = CtOp::try_from(h.opcode).map_err(|_| unsupported("transmit", h))?;
                if op == CtOp::CtTrigDma {
                    Ok(Command::TrigDma(TrigDma::decode(bytes)?))
                } else {
                    Ok(Command::Ct(CtCmd::decode(bytes)?))
                }
            }
            CmdType::Cq => {
                CqOp::try_from(h.opcode).map_err(|_| unsupported("transmit", h))?;
                Ok(Command::Cq(CqCmd::decode(bytes)?))
            }
        }
    }

    /// The header byte this command encodes with.
    pub fn header(&self) -> CmdHeader {
        let (t, op) = match self {
            Command::IdcNoop(_) => (CmdType::Idc, DmaOp::Noop as u8),
            Command::CState(_) => (CmdType::Idc, DmaOp::Cstate as u8),
            Command::IdcPut(_) => (CmdType::Idc, DmaOp::Put as u8),
            Command::IdcMsg(_) => (CmdType::Idc, DmaOp::SmallMessage as u8),
            Command::IdcAmo(c) => (CmdType::Idc, c.opcode as u8),
            Command::IdcSmallAmo(_) => (CmdType::Idc, DmaOp::Atomic as u8),
            Command::IdcEth(_) => (CmdType::Idc, DmaOp::EthernetTx as u8),
            Command::Dma(c) => (CmdType::Dma, c.opcode as u8),
            Command::NomatchDma(c) => (CmdType::Dma, c.opcode as u8),
            Command::DmaAmo(c) => (CmdType::Dma, c.opcode as u8),
            Command::DmaEth(_) => (CmdType::Dma, DmaOp::EthernetTx as u8),
            Command::Ct(c) => (CmdType::Ct, c.opcode as u8),
            Command::TrigDma(_) => (CmdType::Ct, CtOp::CtTrigDma as u8),
            Command::Cq(c) => (CmdType::Cq, c.opcode as u8),
        };
        CmdHeader::new(t, self.cmd_size(), op)
    }

    /// `cmd_size` of the encoding. Inline-data commands round up (`__cxi_cmd_size`): IDC
    /// Put and Ethernet to 16 + payload, IDC small message to 32 + payload but at least
    /// 64 B. An over-long payload is reported by [`Command::encode_into`]; here it saturates
    /// at 256 B.
    pub fn cmd_size(&self) -> CmdSize {
        let sized = |n: usize| CmdSize::for_len(n).unwrap_or(CmdSize::B256);
        match self {
            Command::IdcNoop(s) => *s,
            Command::CState(_) | Command::IdcSmallAmo(_) | Command::NomatchDma(_) => CmdSize::B32,
            Command::IdcPut(c) => sized(IdcHdr::SIZE + c.payload.len()),
            Command::IdcEth(c) => sized(IdcEthHdr::SIZE + c.payload.len()),
            Command::IdcMsg(c) => match sized(IdcMsgHdr::SIZE + c.payload.len()) {
                CmdSize::B32 => CmdSize::B64,
                s => s,
            },
            Command::IdcAmo(_) | Command::Dma(_) | Command::Ct(_) | Command::Cq(_) => CmdSize::B64,
            Command::DmaAmo(_) | Command::DmaEth(_) | Command::TrigDma(_) => CmdSize::B128,
        }
    }

    /// Bytes the command occupies in the ring (its `cmd_size`), not counting alignment
    /// padding before it (see [`super::status::pad_slots32`]).
    pub fn encoded_len(&self) -> usize {
        self.cmd_size().bytes()
    }

    /// Check that the opcode fits the variant (e.g. a [`FullDma`] must be PUT, GET or
    /// RENDEZVOUS_PUT) and inline data fits its limit.
    pub fn validate(&self) -> Result<(), FormatError> {
        let h = self.header();
        let bad = || Err(unsupported("transmit", h));
        match self {
            Command::IdcAmo(c) if !matches!(c.opcode, DmaOp::Atomic | DmaOp::FetchingAtomic) => {
                bad()
            }
            Command::Dma(c) if !c.is_valid_opcode() => bad(),
            Command::NomatchDma(c) if !c.is_valid_opcode() => bad(),
            Command::DmaAmo(c) if !c.is_valid_opcode() => bad(),
            Command::Ct(c) if c.opcode == CtOp::CtTrigDma => bad(),
            Command::TrigDma(t) => t.validate(),
            Command::IdcPut(c) => c.validate(),
            Command::IdcMsg(c) => c.validate(),
            Command::IdcEth(c) => c.validate(),
            _ => Ok(()),
        }
    }

    /// Validate, then write the command into the first [`Command::encoded_len`] bytes of
    /// `out` (unused bytes zeroed). Returns the number of bytes written.
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, FormatError> {
        self.validate()?;
        let n = self.encoded_len();
        let Some(dst) = out.get_mut(..n) else {
            return Err(FormatError::BufferTooSmall {
                format: "command",
                need: n,
                got: out.len(),
            });
        };
        dst.fill(0);
        match self {
            Command::IdcNoop(_) => dst[0] = self.header().to_byte(),
            Command::CState(c) => c.write_to(dst),
            Command::IdcPut(c) => c.write_to(dst),
            Command::IdcMsg(c) => c.write_to(dst),
            Command::IdcAmo(c) => c.write_to(dst),
            Command::IdcSmallAmo(c) => c.write_to(dst),
            Command::IdcEth(c) => c.write_to(dst),
            Command::Dma(c) => c.write_to(dst),
            Command::NomatchDma(c) => c.write_to(dst),
            Command::DmaAmo(c) => c.write_to(dst),
            Command::DmaEth(c) => c.write_to(dst),
            Command::Ct(c) => c.write_to(dst),
            Command::TrigDma(c) => c.write_to(dst),
            Command::Cq(c) => c.write_to(dst),
        }
        Ok(n)
    }

    /// Validate and encode into a new vector of [`Command::encoded_len`] bytes.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut v = vec![0u8; self.encoded_len()];
        self.encode_into(&mut v)?;
        Ok(v)
    }
}

/// A command of a target CQ (always 64 B, `cmd_type = CQ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetCommand {
    /// APPEND, SEARCH, SEARCH_AND_DELETE or UNLINK (`c_target_cmd`).
    List(TargetCmd),
    /// SETSTATE (`c_set_state_cmd`).
    SetState(SetStateCmd),
}

impl TargetCommand {
    /// Every target command is 64 B (`cxi_cq_emit_target`).
    pub const LEN: usize = 64;

    /// Decode the command that starts at `bytes[0]` of a target CQ ring (64 bytes needed).
    pub fn decode(bytes: &[u8]) -> Result<TargetCommand, FormatError> {
        let h = CmdHeader::peek(bytes)?;
        if h.cmd_type != CmdType::Cq {
            return Err(unsupported("target", h));
        }
        match TgtOp::try_from(h.opcode) {
            Ok(TgtOp::Setstate) => Ok(TargetCommand::SetState(SetStateCmd::decode(bytes)?)),
            Ok(_) => Ok(TargetCommand::List(TargetCmd::decode(bytes)?)),
            Err(_) => Err(unsupported("target", h)),
        }
    }

    /// The opcode.
    pub fn opcode(&self) -> TgtOp {
        match self {
            TargetCommand::List(c) => c.opcode,
            TargetCommand::SetState(_) => TgtOp::Setstate,
        }
    }

    /// Bytes in the ring: always 64.
    pub fn encoded_len(&self) -> usize {
        Self::LEN
    }

    /// Check that a [`TargetCmd`] does not carry the SETSTATE opcode.
    pub fn validate(&self) -> Result<(), FormatError> {
        match self {
            TargetCommand::List(c) if c.opcode == TgtOp::Setstate => Err(unsupported(
                "target",
                CmdHeader::new(CmdType::Cq, CmdSize::B64, TgtOp::Setstate as u8),
            )),
            _ => Ok(()),
        }
    }

    /// Validate and encode into the first 64 bytes of `out`.
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, FormatError> {
        self.validate()?;
        match self {
            TargetCommand::List(c) => c.encode_into(out)?,
            TargetCommand::SetState(c) => c.encode_into(out)?,
        }
        Ok(Self::LEN)
    }

    /// Validate and encode.
    pub fn encode(&self) -> Result<[u8; 64], FormatError> {
        let mut b = [0u8; 64];
        self.encode_into(&mut b)?;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_byte() {
        for b in 0..=255u8 {
            assert_eq!(CmdHeader::from_byte(b).to_byte(), b);
        }
        let h = CmdHeader::new(CmdType::Dma, CmdSize::B64, DmaOp::Put as u8);
        assert_eq!(h.to_byte(), 0b0001_0101);
        assert!(CmdHeader::peek(&[]).is_err());
    }

    #[test]
    fn enum_values() {
        assert_eq!(DmaOp::Reduction as u8, 13);
        assert!(DmaOp::try_from(14).is_err());
        assert_eq!(CtOp::CtTrigEvent as u8, 8);
        assert!(CtOp::try_from(9).is_err());
        assert_eq!(CqOp::CqLcid as u8, 2);
        assert!(CqOp::try_from(3).is_err());
        assert_eq!(TgtOp::Append as u8, 8);
        assert_eq!(TgtOp::Setstate as u8, 12);
        assert!(TgtOp::try_from(7).is_err());
        assert!(TgtOp::try_from(13).is_err());
    }

    #[test]
    fn cmd_sizes() {
        assert_eq!(CmdSize::for_len(0), Some(CmdSize::B32));
        assert_eq!(CmdSize::for_len(32), Some(CmdSize::B32));
        assert_eq!(CmdSize::for_len(33), Some(CmdSize::B64));
        assert_eq!(CmdSize::for_len(129), Some(CmdSize::B256));
        assert_eq!(CmdSize::for_len(257), None);
        assert_eq!(CmdSize::B256.bytes(), 256);
        assert_eq!(CmdSize::B128.slots32(), 4);
    }

    #[test]
    fn dma_flags_bits() {
        for b in 0..(1u16 << 11) {
            assert_eq!(DmaFlags::from_bits(b).to_bits(), b);
        }
        let f = DmaFlags {
            restricted: true,
            ..Default::default()
        };
        assert_eq!(f.to_bits(), 1 << 7);
    }
}
