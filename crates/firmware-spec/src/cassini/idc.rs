//! IDC (immediate data) commands: C_STATE, IDC Put, IDC small message, IDC AMO (full and
//! small) and IDC Ethernet (`cassini_user_defs.h` `c_cstate_cmd`, `c_idc_hdr`,
//! `c_idc_put_cmd`, `c_idc_msg_hdr`, `c_idc_amo_cmd`, `c_small_amo_payload`,
//! `c_idc_eth_cmd`; `cxi_prov_hw.h` `cxi_cq_emit_c_state/idc_put/idc_msg/idc_amo/idc_eth`;
//! cassini.md §2.1).
//!
//! IDC Put/AMO/message commands take their source match id, user pointer, event controls,
//! CT and EQ from the CQ's C_STATE, set by the last [`CState`] command.

use super::amo::{AmoOp, AmoType, CswapOp};
use super::cmd_header::{CmdHeader, CmdSize, CmdType, DmaFlags, DmaOp, Payload};
use super::layout::{FormatError, Layout, c_enum, layout, need};
use super::limits::{C_MAX_IDC_PAYLOAD_RES, C_MAX_IDC_PAYLOAD_UNR};

layout! {
    /// `struct c_cstate_cmd` (32 B, IDC/CSTATE, `length` = 32): the C_STATE of a CQ.
    pub struct CState("c_cstate_cmd", 32) {
        /// `write_lac`: LAC of `local_addr` of fetching IDC AMOs.
        write_lac[16:3]: u8,
        /// Event/option bits (`event_send_disable` .. `use_offset_for_get`).
        flags[19:11]: DmaFlags,
        /// `initiator`: source match id (`CXI_MATCH_ID`).
        initiator[32:32]: u32,
        /// `index_ext`: PtlTE index extension (low 5 bits of the index).
        index_ext[64:5]: u8,
        /// `user_ptr`: echoed in initiator events.
        user_ptr[128:64]: u64,
        /// `ct`: counting event (0 = none).
        ct[224:11]: u16,
        /// `eq`: initiator event queue (0 = none).
        eq[240:11]: u16,
    }
    consts {
        cmd_type[0:2] = CmdType::Idc as u8,
        cmd_size[2:2] = CmdSize::B32 as u8,
        opcode[4:4] = DmaOp::Cstate as u8,
        length[8:8] = 32,
    }
    derived {}
}

layout! {
    /// `struct c_idc_hdr` (16 B): header of IDC Put, small AMO and (with other fields)
    /// full AMO commands. `length` counts the header.
    pub struct IdcHdr("c_idc_hdr", 16) {
        /// `command`.
        command[0:8]: CmdHeader,
        /// `length`: header + inline data, in bytes.
        length[8:8]: u8,
        /// `dfa`: destination fabric address (`union c_fab_addr`).
        dfa[32:32]: u32,
        /// `remote_offset`.
        remote_offset[64:56]: u64,
    }
    consts {}
    derived {}
}

layout! {
    /// `struct c_idc_msg_hdr` (32 B): header of an IDC small message; data at byte 32.
    pub struct IdcMsgHdr("c_idc_msg_hdr", 32) {
        /// `command`.
        command[0:8]: CmdHeader,
        /// `length`: header + inline data, in bytes.
        length[8:8]: u8,
        /// `dfa`.
        dfa[32:32]: u32,
        /// `match_bits`.
        match_bits[64:64]: u64,
        /// `header_data`.
        header_data[128:64]: u64,
        /// `user_ptr`.
        user_ptr[192:64]: u64,
    }
    consts {}
    derived {}
}

layout! {
    /// `struct c_idc_amo_cmd` (64 B, IDC/ATOMIC or FETCHING_ATOMIC, `length` = 64): used
    /// when fetching, for CSWAP, AXOR and double complex.
    pub struct IdcAmo("c_idc_amo_cmd", 64) {
        /// `opcode`: `Atomic` or `FetchingAtomic`.
        opcode[4:4]: DmaOp,
        /// `dfa`.
        dfa[32:32]: u32,
        /// `remote_offset`.
        remote_offset[64:56]: u64,
        /// `local_addr`: fetch result IOVA (LAC from C_STATE `write_lac`).
        local_addr[128:57]: u64,
        /// `atomic_op`.
        atomic_op[192:4]: AmoOp,
        /// `atomic_type`.
        atomic_type[200:4]: AmoType,
        /// `cswap_op`.
        cswap_op[208:3]: CswapOp,
        /// `op1_word1`.
        op1_word1[256:64]: u64,
        /// `op1_word2`: high half of 16-byte operands.
        op1_word2[320:64]: u64,
        /// `op2_word1`: CSWAP compare value / AXOR mask.
        op2_word1[384:64]: u64,
        /// `op2_word2`.
        op2_word2[448:64]: u64,
    }
    consts {
        cmd_type[0:2] = CmdType::Idc as u8,
        cmd_size[2:2] = CmdSize::B64 as u8,
        length[8:8] = 64,
    }
    derived {}
}

layout! {
    /// Small IDC AMO (32 B, IDC/ATOMIC, `length` = 32): a `c_idc_hdr` followed by a
    /// `c_small_amo_payload` (non-fetching, one 8-byte operand; `cxi_cq_emit_idc_amo`).
    pub struct IdcSmallAmo("c_idc_put_cmd+c_small_amo_payload", 32) {
        /// `dfa`.
        dfa[32:32]: u32,
        /// `remote_offset`.
        remote_offset[64:56]: u64,
        /// Payload `amo_op`.
        atomic_op[128:4]: AmoOp,
        /// Payload `amo_type`.
        atomic_type[136:4]: AmoType,
        /// Payload `op1_word1`.
        op1_word1[192:64]: u64,
    }
    consts {
        cmd_type[0:2] = CmdType::Idc as u8,
        cmd_size[2:2] = CmdSize::B32 as u8,
        opcode[4:4] = DmaOp::Atomic as u8,
        length[8:8] = 32,
    }
    derived {}
}

c_enum! {
    /// `enum c_checksum_ctrl`: Ethernet checksum offload.
    pub enum ChecksumCtrl("c_checksum_ctrl") {
        /// `C_CHECKSUM_CTRL_NONE`.
        None = 0 => "NONE",
        /// `C_CHECKSUM_CTRL_ROCE`.
        Roce = 1 => "ROCE",
        /// `C_CHECKSUM_CTRL_UDP`.
        Udp = 2 => "UDP",
        /// `C_CHECKSUM_CTRL_TCP`.
        Tcp = 3 => "TCP",
    }
}

layout! {
    /// `struct c_idc_eth_cmd` header (16 B, packed); the frame follows at byte 16.
    pub struct IdcEthHdr("c_idc_eth_cmd", 16) {
        /// `command`.
        command[0:8]: CmdHeader,
        /// `length`: header + frame, in bytes.
        length[8:8]: u8,
        /// `flow_hash`.
        flow_hash[16:8]: u8,
        /// `checksum_ctrl`.
        checksum_ctrl[24:2]: ChecksumCtrl,
        /// `fmt`.
        fmt[28:1]: u8,
        /// `checksum_start`.
        checksum_start[32:10]: u16,
        /// `checksum_offset`.
        checksum_offset[44:6]: u8,
    }
    consts {}
    derived {}
}

fn check_header(
    format: &'static str,
    h: CmdHeader,
    op: DmaOp,
    size: CmdSize,
) -> Result<(), FormatError> {
    let mismatch = |field, expected: u64, found: u64| FormatError::Mismatch {
        format,
        field,
        expected,
        found,
    };
    if h.cmd_type != CmdType::Idc {
        return Err(mismatch("cmd_type", 0, h.cmd_type as u64));
    }
    if h.opcode != op as u8 {
        return Err(mismatch("opcode", op as u64, h.opcode as u64));
    }
    if h.cmd_size != size {
        return Err(mismatch("cmd_size", size as u64, h.cmd_size as u64));
    }
    Ok(())
}

fn check_payload(format: &'static str, len: usize, max: usize) -> Result<(), FormatError> {
    if len > max {
        Err(FormatError::BadLength {
            format,
            length: len,
            min: 0,
            max,
        })
    } else {
        Ok(())
    }
}

/// Decode the `length` byte of an inline-data command: header + data, data at most `max`.
fn data_len(
    format: &'static str,
    length: u8,
    hdr: usize,
    max: usize,
) -> Result<usize, FormatError> {
    let length = length as usize;
    if length < hdr || length > hdr + max {
        return Err(FormatError::BadLength {
            format,
            length,
            min: hdr,
            max: hdr + max,
        });
    }
    Ok(length - hdr)
}

fn size_for(len: usize) -> CmdSize {
    CmdSize::for_len(len).unwrap_or(CmdSize::B256)
}

/// IDC Put (IDC/PUT): 16 B `c_idc_hdr` + inline data (`cxi_cq_emit_idc_put`). The ring size
/// is 16 + data rounded up to 32/64/128/256 B; `length` = 16 + data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdcPut {
    /// `dfa`.
    pub dfa: u32,
    /// `remote_offset` (56 bits).
    pub remote_offset: u64,
    /// Inline data: at most `C_MAX_IDC_PAYLOAD_RES` (224) bytes, 192 unless restricted.
    pub payload: Payload,
}

impl IdcPut {
    const NAME: &'static str = "c_idc_put_cmd";

    /// Ring size of the encoding.
    pub fn cmd_size(&self) -> CmdSize {
        size_for(IdcHdr::SIZE + self.payload.len())
    }

    /// Data at most `C_MAX_IDC_PAYLOAD_RES` bytes.
    pub fn validate(&self) -> Result<(), FormatError> {
        check_payload(Self::NAME, self.payload.len(), C_MAX_IDC_PAYLOAD_RES)
    }

    /// Write into `dst` (at least `cmd_size` bytes, zeroed by the caller).
    pub(crate) fn write_to(&self, dst: &mut [u8]) {
        let n = self.payload.len();
        let hdr = IdcHdr {
            command: CmdHeader::new(CmdType::Idc, self.cmd_size(), DmaOp::Put as u8),
            length: (IdcHdr::SIZE + n) as u8,
            dfa: self.dfa,
            remote_offset: self.remote_offset,
        };
        hdr.write_to(dst);
        if let Some(d) = dst.get_mut(IdcHdr::SIZE..IdcHdr::SIZE + n) {
            d.copy_from_slice(self.payload.as_slice());
        }
    }

    /// Validate and encode (`cmd_size` bytes).
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.validate()?;
        let mut v = vec![0u8; self.cmd_size().bytes()];
        self.write_to(&mut v);
        Ok(v)
    }

    /// Decode from a ring (at least `cmd_size` bytes).
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let hdr = IdcHdr::decode(bytes)?;
        let n = data_len(Self::NAME, hdr.length, IdcHdr::SIZE, C_MAX_IDC_PAYLOAD_RES)?;
        let size = size_for(IdcHdr::SIZE + n);
        check_header(Self::NAME, hdr.command, DmaOp::Put, size)?;
        need(Self::NAME, bytes, size.bytes())?;
        Ok(IdcPut {
            dfa: hdr.dfa,
            remote_offset: hdr.remote_offset,
            payload: Payload::new(&bytes[IdcHdr::SIZE..IdcHdr::SIZE + n])?,
        })
    }
}

/// IDC small message (IDC/SMALL_MESSAGE): 32 B `c_idc_msg_hdr` + inline data
/// (`cxi_cq_emit_idc_msg`). Ring size 32 + data rounded up, at least 64 B; data at most
/// `C_MAX_IDC_PAYLOAD_UNR` (192) bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdcMsg {
    /// `dfa`.
    pub dfa: u32,
    /// `match_bits`.
    pub match_bits: u64,
    /// `header_data`.
    pub header_data: u64,
    /// `user_ptr`.
    pub user_ptr: u64,
    /// Inline data (at most 192 bytes).
    pub payload: Payload,
}

impl IdcMsg {
    const NAME: &'static str = "c_idc_msg_hdr";

    /// Ring size of the encoding (minimum 64 B).
    pub fn cmd_size(&self) -> CmdSize {
        match size_for(IdcMsgHdr::SIZE + self.payload.len()) {
            CmdSize::B32 => CmdSize::B64,
            s => s,
        }
    }

    /// Data at most `C_MAX_IDC_PAYLOAD_UNR` bytes (else -EINVAL in libcxi).
    pub fn validate(&self) -> Result<(), FormatError> {
        check_payload(Self::NAME, self.payload.len(), C_MAX_IDC_PAYLOAD_UNR)
    }

    /// Write into `dst` (at least `cmd_size` bytes, zeroed by the caller).
    pub(crate) fn write_to(&self, dst: &mut [u8]) {
        let n = self.payload.len();
        let hdr = IdcMsgHdr {
            command: CmdHeader::new(CmdType::Idc, self.cmd_size(), DmaOp::SmallMessage as u8),
            length: (IdcMsgHdr::SIZE + n) as u8,
            dfa: self.dfa,
            match_bits: self.match_bits,
            header_data: self.header_data,
            user_ptr: self.user_ptr,
        };
        hdr.write_to(dst);
        if let Some(d) = dst.get_mut(IdcMsgHdr::SIZE..IdcMsgHdr::SIZE + n) {
            d.copy_from_slice(self.payload.as_slice());
        }
    }

    /// Validate and encode (`cmd_size` bytes).
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.validate()?;
        let mut v = vec![0u8; self.cmd_size().bytes()];
        self.write_to(&mut v);
        Ok(v)
    }

    /// Decode from a ring (at least `cmd_size` bytes).
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let hdr = IdcMsgHdr::decode(bytes)?;
        let n = data_len(
            Self::NAME,
            hdr.length,
            IdcMsgHdr::SIZE,
            C_MAX_IDC_PAYLOAD_UNR,
        )?;
        let size = match size_for(IdcMsgHdr::SIZE + n) {
            CmdSize::B32 => CmdSize::B64,
            s => s,
        };
        check_header(Self::NAME, hdr.command, DmaOp::SmallMessage, size)?;
        need(Self::NAME, bytes, size.bytes())?;
        Ok(IdcMsg {
            dfa: hdr.dfa,
            match_bits: hdr.match_bits,
            header_data: hdr.header_data,
            user_ptr: hdr.user_ptr,
            payload: Payload::new(&bytes[IdcMsgHdr::SIZE..IdcMsgHdr::SIZE + n])?,
        })
    }
}

/// IDC Ethernet (IDC/ETHERNET_TX, privileged Ethernet CQs): 16 B `c_idc_eth_cmd` + frame.
/// Ring size 16 + frame rounded up; `length` (8 bits) = 16 + frame, so the frame is at most
/// 239 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdcEth {
    /// `flow_hash`.
    pub flow_hash: u8,
    /// `checksum_ctrl`.
    pub checksum_ctrl: ChecksumCtrl,
    /// `fmt` (1 bit).
    pub fmt: u8,
    /// `checksum_start` (10 bits).
    pub checksum_start: u16,
    /// `checksum_offset` (6 bits).
    pub checksum_offset: u8,
    /// The frame.
    pub payload: Payload,
}

impl IdcEth {
    const NAME: &'static str = "c_idc_eth_cmd";
    /// Largest frame: `length` is 8 bits.
    pub const MAX_FRAME: usize = 255 - IdcEthHdr::SIZE;

    /// Ring size of the encoding.
    pub fn cmd_size(&self) -> CmdSize {
        size_for(IdcEthHdr::SIZE + self.payload.len())
    }

    /// Frame at most [`IdcEth::MAX_FRAME`] bytes.
    pub fn validate(&self) -> Result<(), FormatError> {
        check_payload(Self::NAME, self.payload.len(), Self::MAX_FRAME)
    }

    /// Write into `dst` (at least `cmd_size` bytes, zeroed by the caller).
    pub(crate) fn write_to(&self, dst: &mut [u8]) {
        let n = self.payload.len();
        let hdr = IdcEthHdr {
            command: CmdHeader::new(CmdType::Idc, self.cmd_size(), DmaOp::EthernetTx as u8),
            length: (IdcEthHdr::SIZE + n) as u8,
            flow_hash: self.flow_hash,
            checksum_ctrl: self.checksum_ctrl,
            fmt: self.fmt,
            checksum_start: self.checksum_start,
            checksum_offset: self.checksum_offset,
        };
        hdr.write_to(dst);
        if let Some(d) = dst.get_mut(IdcEthHdr::SIZE..IdcEthHdr::SIZE + n) {
            d.copy_from_slice(self.payload.as_slice());
        }
    }

    /// Validate and encode (`cmd_size` bytes).
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.validate()?;
        let mut v = vec![0u8; self.cmd_size().bytes()];
        self.write_to(&mut v);
        Ok(v)
    }

    /// Decode from a ring (at least `cmd_size` bytes).
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let hdr = IdcEthHdr::decode(bytes)?;
        let n = data_len(Self::NAME, hdr.length, IdcEthHdr::SIZE, Self::MAX_FRAME)?;
        let size = size_for(IdcEthHdr::SIZE + n);
        check_header(Self::NAME, hdr.command, DmaOp::EthernetTx, size)?;
        need(Self::NAME, bytes, size.bytes())?;
        Ok(IdcEth {
            flow_hash: hdr.flow_hash,
            checksum_ctrl: hdr.checksum_ctrl,
            fmt: hdr.fmt,
            checksum_start: hdr.checksum_start,
            checksum_offset: hdr.checksum_offset,
            payload: Payload::new(&bytes[IdcEthHdr::SIZE..IdcEthHdr::SIZE + n])?,
        })
    }
}
