//! The vocabulary every Cassini command format shares: the `struct c_cmd` header byte
//! ([`CmdHeader`]: type, size, opcode), the opcode spaces ([`DmaOp`], [`CtOp`], [`CqOp`],
//! [`TgtOp`]), the DMA option bits ([`DmaFlags`]) and an IDC's inline payload ([`Payload`]).
//!
//! Sources: `cassini_user_defs.h` (`c_cmd`, `c_cmd_type`, `c_cmd_size`, `c_dma_op`,
//! `c_ct_op`, `c_cq_op`, `c_tgt_op`), `cxi_prov_hw.h` (`__cxi_cmd_size`).

use super::layout::{Field, FormatError, UnknownValue, c_enum};

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
