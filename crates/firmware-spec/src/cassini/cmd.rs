//! Cassini commands: the `struct c_cmd` header byte, opcode spaces, and the top-level
//! [`Command`] (transmit CQs) and [`TargetCommand`] (target CQs) with their ring sizes.
//!
//! Sources: `cassini_user_defs.h` (`c_cmd`, `c_cmd_type`, `c_cmd_size`, `c_dma_op`,
//! `c_ct_op`, `c_cq_op`, `c_tgt_op`, every `c_*_cmd` struct), `cxi_prov_hw.h`
//! (`cxi_cq_emit_*`: sizes, fixed fields, padding); cassini.md §1.4, §2, §5.
//!
//! The formats themselves are in [`super::idc`], [`super::dma`], [`super::ct`] and
//! [`super::tgt`] and re-exported here, so `cassini::cmd::FullDma` etc. work.
//!
//! Decoding is strict where the public emitters are exact: a command's `cmd_size` must be
//! the size `cxi_cq_emit_*` gives that format, fixed `length` fields must hold their fixed
//! value, enumerated fields must hold a named value. Anything else is a [`FormatError`] (the
//! emulator turns it into `C_EVENT_COMMAND_FAILURE`), never a panic.

pub use super::ct::{CtCmd, EmbeddedDma, TrigDma};
pub use super::dma::{DmaAmo, DmaEth, FullDma, NomatchDma};
pub use super::idc::{
    CState, ChecksumCtrl, IdcAmo, IdcEth, IdcEthHdr, IdcHdr, IdcMsg, IdcMsgHdr, IdcPut, IdcSmallAmo,
};
pub use super::layout::FormatError;
pub use super::tgt::{SetStateCmd, TargetCmd};

use super::layout::{Field, Layout, UnknownValue, c_enum, need};

c_enum! {
    /// `enum c_cmd_type`: `c_cmd.cmd_type` (2 bits).
    pub enum CmdType("c_cmd_type") {
        /// `C_CMD_TYPE_IDC`: immediate data command (payload inline).
        Idc = 0 => "IDC",
        /// `C_CMD_TYPE_DMA`.
        Dma = 1 => "DMA",
        /// `C_CMD_TYPE_CT`: counting event / triggered operation.
        Ct = 2 => "CT",
        /// `C_CMD_TYPE_CQ`: CQ control (transmit) or target command.
        Cq = 3 => "CQ",
    }
}

c_enum! {
    /// `enum c_cmd_size`: `c_cmd.cmd_size` (2 bits), the bytes a command occupies in the ring.
    pub enum CmdSize("c_cmd_size") {
        /// `C_CMD_SIZE_32B`.
        B32 = 0 => "32B",
        /// `C_CMD_SIZE_64B`.
        B64 = 1 => "64B",
        /// `C_CMD_SIZE_128B`.
        B128 = 2 => "128B",
        /// `C_CMD_SIZE_256B`.
        B256 = 3 => "256B",
    }
}

impl CmdSize {
    /// Size in bytes: 32 << size.
    pub const fn bytes(self) -> usize {
        32 << (self as usize)
    }

    /// Size in 32-byte ring half-slots (`__cxi_cmd_slots[]`): 1, 2, 4, 8.
    pub const fn slots32(self) -> usize {
        1 << (self as usize)
    }

    /// The smallest size holding `len` bytes (`__cxi_cmd_size()`), or `None` above 256.
    pub const fn for_len(len: usize) -> Option<CmdSize> {
        match len {
            0..=32 => Some(CmdSize::B32),
            33..=64 => Some(CmdSize::B64),
            65..=128 => Some(CmdSize::B128),
            129..=256 => Some(CmdSize::B256),
            _ => None,
        }
    }

    const fn from_bits(b: u8) -> CmdSize {
        match b & 3 {
            0 => CmdSize::B32,
            1 => CmdSize::B64,
            2 => CmdSize::B128,
            _ => CmdSize::B256,
        }
    }
}

c_enum! {
    /// `enum c_dma_op`: opcodes of IDC and DMA commands (4 bits; 14, 15 unused).
    pub enum DmaOp("c_dma_op") {
        /// `C_CMD_NOOP`.
        Noop = 0 => "NOOP",
        /// `C_CMD_PUT`.
        Put = 1 => "PUT",
        /// `C_CMD_GET`.
        Get = 2 => "GET",
        /// `C_CMD_RENDEZVOUS_PUT`.
        RendezvousPut = 3 => "RENDEZVOUS_PUT",
        /// `C_CMD_ATOMIC`.
        Atomic = 4 => "ATOMIC",
        /// `C_CMD_FETCHING_ATOMIC`.
        FetchingAtomic = 5 => "FETCHING_ATOMIC",
        /// `C_CMD_ETHERNET_TX`.
        EthernetTx = 6 => "ETHERNET_TX",
        /// `C_CMD_SMALL_MESSAGE`.
        SmallMessage = 7 => "SMALL_MESSAGE",
        /// `C_CMD_NOMATCH_PUT`.
        NomatchPut = 8 => "NOMATCH_PUT",
        /// `C_CMD_NOMATCH_GET`.
        NomatchGet = 9 => "NOMATCH_GET",
        /// `C_CMD_CSTATE`.
        Cstate = 10 => "CSTATE",
        /// `C_CMD_CLOSE`.
        Close = 11 => "CLOSE",
        /// `C_CMD_CLEAR`.
        Clear = 12 => "CLEAR",
        /// `C_CMD_REDUCTION`.
        Reduction = 13 => "REDUCTION",
    }
}

c_enum! {
    /// `enum c_ct_op`: opcodes of CT commands (4 bits; 9..15 unused).
    pub enum CtOp("c_ct_op") {
        /// `C_CMD_CT_NOOP`: also the padding of trigger CQs.
        CtNoop = 0 => "CT_NOOP",
        /// `C_CMD_CT_SET`.
        CtSet = 1 => "CT_SET",
        /// `C_CMD_CT_GET`: force a write-back.
        CtGet = 2 => "CT_GET",
        /// `C_CMD_CT_INC`.
        CtInc = 3 => "CT_INC",
        /// `C_CMD_CT_CANCEL`: cancel pending triggered operations.
        CtCancel = 4 => "CT_CANCEL",
        /// `C_CMD_CT_TRIG_DMA`: 128 B, embedded DMA launched at threshold.
        CtTrigDma = 5 => "CT_TRIG_DMA",
        /// `C_CMD_CT_TRIG_SET`.
        CtTrigSet = 6 => "CT_TRIG_SET",
        /// `C_CMD_CT_TRIG_INC`.
        CtTrigInc = 7 => "CT_TRIG_INC",
        /// `C_CMD_CT_TRIG_EVENT`.
        CtTrigEvent = 8 => "CT_TRIG_EVENT",
    }
}

c_enum! {
    /// `enum c_cq_op`: CQ-control opcodes on transmit CQs (4 bits).
    pub enum CqOp("c_cq_op") {
        /// `C_CMD_CQ_NOOP`.
        CqNoop = 0 => "CQ_NOOP",
        /// `C_CMD_CQ_FENCE`.
        CqFence = 1 => "CQ_FENCE",
        /// `C_CMD_CQ_LCID`: switch communication profile.
        CqLcid = 2 => "CQ_LCID",
    }
}

c_enum! {
    /// `enum c_tgt_op`: target CQ opcodes (`cmd_type = CQ`).
    pub enum TgtOp("c_tgt_op") {
        /// `C_CMD_TGT_APPEND`.
        Append = 8 => "APPEND",
        /// `C_CMD_TGT_SEARCH`.
        Search = 9 => "SEARCH",
        /// `C_CMD_TGT_SEARCH_AND_DELETE`.
        SearchAndDelete = 10 => "SEARCH_AND_DELETE",
        /// `C_CMD_TGT_UNLINK`.
        Unlink = 11 => "UNLINK",
        /// `C_CMD_TGT_SETSTATE`.
        Setstate = 12 => "SETSTATE",
    }
}

/// `struct c_cmd` (1 B): `cmd_type@0:2`, `cmd_size@2:2`, `opcode@4:4`. Every byte value is a
/// valid header; the opcode is kept raw because its meaning depends on `cmd_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CmdHeader {
    /// `cmd_type`.
    pub cmd_type: CmdType,
    /// `cmd_size`.
    pub cmd_size: CmdSize,
    /// `opcode` (4 bits): a `c_dma_op`, `c_ct_op`, `c_cq_op` or `c_tgt_op`.
    pub opcode: u8,
}

impl CmdHeader {
    /// A header from its parts.
    pub const fn new(cmd_type: CmdType, cmd_size: CmdSize, opcode: u8) -> Self {
        CmdHeader {
            cmd_type,
            cmd_size,
            opcode: opcode & 0xF,
        }
    }

    /// Decode the byte.
    pub const fn from_byte(b: u8) -> Self {
        let cmd_type = match b & 3 {
            0 => CmdType::Idc,
            1 => CmdType::Dma,
            2 => CmdType::Ct,
            _ => CmdType::Cq,
        };
        CmdHeader {
            cmd_type,
            cmd_size: CmdSize::from_bits(b >> 2),
            opcode: b >> 4,
        }
    }

    /// Encode the byte.
    pub const fn to_byte(self) -> u8 {
        (self.cmd_type as u8) | ((self.cmd_size as u8) << 2) | ((self.opcode & 0xF) << 4)
    }

    /// The header of the command starting at `bytes[0]`.
    pub fn peek(bytes: &[u8]) -> Result<Self, FormatError> {
        match bytes.first() {
            Some(b) => Ok(Self::from_byte(*b)),
            None => Err(FormatError::Truncated {
                format: "c_cmd",
                need: 1,
                got: 0,
            }),
        }
    }
}

impl Field for CmdHeader {
    const RAW_VALUES: Option<&'static [u64]> = None;
    fn to_raw(self) -> u64 {
        self.to_byte() as u64
    }
    fn from_raw(raw: u64) -> Result<Self, UnknownValue> {
        Ok(Self::from_byte(raw as u8))
    }
}

/// The event/option bits shared, in this order, by `c_cstate_cmd`, `c_full_dma_cmd`,
/// `c_nomatch_dma_cmd`, `c_dma_amo_cmd` (all at bits 19..29) and `c_dma_eth_cmd` (bits
/// 720..730): `event_send_disable` first, `use_offset_for_get` last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DmaFlags {
    /// `event_send_disable`: no SEND event.
    pub event_send_disable: bool,
    /// `event_success_disable`: only error events.
    pub event_success_disable: bool,
    /// `event_ct_send`: bump `ct` on SEND.
    pub event_ct_send: bool,
    /// `event_ct_reply`: bump `ct` on REPLY.
    pub event_ct_reply: bool,
    /// `event_ct_ack`: bump `ct` on ACK.
    pub event_ct_ack: bool,
    /// `event_ct_bytes`: the CT counts bytes instead of events.
    pub event_ct_bytes: bool,
    /// `get_with_local_flag`.
    pub get_with_local_flag: bool,
    /// `restricted`: restricted (unordered, low-overhead) packets.
    pub restricted: bool,
    /// `reduction`.
    pub reduction: bool,
    /// `flush`: flushing read at the target before the ACK.
    pub flush: bool,
    /// `use_offset_for_get`: the rendezvous Get uses the carried `remote_offset`.
    pub use_offset_for_get: bool,
}

impl DmaFlags {
    /// Width of the group in bits.
    pub const BITS: usize = 11;

    /// Pack into 11 bits, `event_send_disable` in bit 0.
    pub const fn to_bits(self) -> u16 {
        (self.event_send_disable as u16)
            | (self.event_success_disable as u16) << 1
            | (self.event_ct_send as u16) << 2
            | (self.event_ct_reply as u16) << 3
            | (self.event_ct_ack as u16) << 4
            | (self.event_ct_bytes as u16) << 5
            | (self.get_with_local_flag as u16) << 6
            | (self.restricted as u16) << 7
            | (self.reduction as u16) << 8
            | (self.flush as u16) << 9
            | (self.use_offset_for_get as u16) << 10
    }

    /// Unpack from 11 bits (higher bits ignored).
    pub const fn from_bits(b: u16) -> Self {
        DmaFlags {
            event_send_disable: b & 1 != 0,
            event_success_disable: b & (1 << 1) != 0,
            event_ct_send: b & (1 << 2) != 0,
            event_ct_reply: b & (1 << 3) != 0,
            event_ct_ack: b & (1 << 4) != 0,
            event_ct_bytes: b & (1 << 5) != 0,
            get_with_local_flag: b & (1 << 6) != 0,
            restricted: b & (1 << 7) != 0,
            reduction: b & (1 << 8) != 0,
            flush: b & (1 << 9) != 0,
            use_offset_for_get: b & (1 << 10) != 0,
        }
    }
}

impl Field for DmaFlags {
    const RAW_VALUES: Option<&'static [u64]> = None;
    fn to_raw(self) -> u64 {
        self.to_bits() as u64
    }
    fn from_raw(raw: u64) -> Result<Self, UnknownValue> {
        Ok(Self::from_bits(raw as u16))
    }
}

/// Inline data of an IDC command (at most [`Payload::MAX`] bytes, no allocation).
#[derive(Clone, Copy)]
pub struct Payload {
    len: u8,
    buf: [u8; Payload::MAX],
}

impl Payload {
    /// The most inline data any IDC command can carry: a 256 B command minus the 16 B
    /// header.
    pub const MAX: usize = 240;

    /// Copy `data` (at most [`Payload::MAX`] bytes).
    pub fn new(data: &[u8]) -> Result<Self, FormatError> {
        if data.len() > Self::MAX {
            return Err(FormatError::BadLength {
                format: "idc payload",
                length: data.len(),
                min: 0,
                max: Self::MAX,
            });
        }
        let mut buf = [0u8; Self::MAX];
        buf[..data.len()].copy_from_slice(data);
        Ok(Payload {
            len: data.len() as u8,
            buf,
        })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for Payload {
    fn default() -> Self {
        Payload {
            len: 0,
            buf: [0u8; Self::MAX],
        }
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Payload {}

impl core::fmt::Debug for Payload {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Payload({:02x?})", self.as_slice())
    }
}

impl core::ops::Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl TryFrom<&[u8]> for Payload {
    type Error = FormatError;
    fn try_from(data: &[u8]) -> Result<Self, FormatError> {
        Payload::new(data)
    }
}

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
