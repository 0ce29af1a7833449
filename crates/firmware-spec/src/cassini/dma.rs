//! DMA commands: full DMA, non-matching DMA, DMA AMO and DMA Ethernet
//! (`cassini_user_defs.h` `c_full_dma_cmd`, `c_nomatch_dma_cmd`, `c_dma_amo_cmd`,
//! `c_dma_eth_cmd`; `cxi_prov_hw.h` `cxi_cq_emit_dma/nomatch_dma/dma_amo/dma_eth`;
//! cassini.md §2.1).

use super::amo::{AmoOp, AmoType, CswapOp};
use super::cmd_header::{CmdSize, CmdType, DmaFlags, DmaOp};
use super::idc::ChecksumCtrl;
use super::layout::{Field, FieldDesc, FieldKind, FormatError, Layout, layout, need};
use crate::bits::{get_bits, set_bits};

layout! {
    /// `struct c_full_dma_cmd` (64 B): the main RDMA / message command (DMA/PUT, GET,
    /// RENDEZVOUS_PUT).
    pub struct FullDma("c_full_dma_cmd", 64) {
        /// `opcode`: `Put`, `Get` or `RendezvousPut`.
        opcode[4:4]: DmaOp,
        /// `index_ext`: PtlTE index extension (`cxi_build_dfa`).
        index_ext[8:5]: u8,
        /// `lac`: local address context of `local_addr`.
        lac[16:3]: u8,
        /// Event/option bits.
        flags[19:11]: DmaFlags,
        /// `dfa`: destination fabric address.
        dfa[32:32]: u32,
        /// `remote_offset`.
        remote_offset[64:56]: u64,
        /// `local_addr`: 57-bit IOVA.
        local_addr[128:57]: u64,
        /// `request_len`.
        request_len[192:32]: u32,
        /// `ct`: counting event (0 = none).
        ct[224:11]: u16,
        /// `eq`: initiator event queue (0 = none).
        eq[240:11]: u16,
        /// `eager_length`: bytes sent eagerly by a rendezvous Put.
        eager_length[256:20]: u32,
        /// `rendezvous_id`.
        rendezvous_id[280:8]: u8,
        /// `initiator`: source match id.
        initiator[288:32]: u32,
        /// `match_bits`.
        match_bits[320:64]: u64,
        /// `header_data`.
        header_data[384:64]: u64,
        /// `user_ptr`: echoed in initiator events.
        user_ptr[448:64]: u64,
    }
    consts { cmd_type[0:2] = CmdType::Dma as u8, cmd_size[2:2] = CmdSize::B64 as u8 }
    derived {}
}

impl FullDma {
    /// Whether `opcode` is one this format carries (PUT, GET, RENDEZVOUS_PUT).
    pub fn is_valid_opcode(&self) -> bool {
        matches!(self.opcode, DmaOp::Put | DmaOp::Get | DmaOp::RendezvousPut)
    }
}

layout! {
    /// `struct c_nomatch_dma_cmd` (32 B): DMA/NOMATCH_PUT or NOMATCH_GET to a non-matching
    /// PtlTE; identical to the first 32 B of a full DMA. `cxi_cq_emit_nomatch_dma` always
    /// sets `restricted`; only error events are generated.
    pub struct NomatchDma("c_nomatch_dma_cmd", 32) {
        /// `opcode`: `NomatchPut` or `NomatchGet`.
        opcode[4:4]: DmaOp,
        /// `index_ext`.
        index_ext[8:5]: u8,
        /// `lac`.
        lac[16:3]: u8,
        /// Event/option bits.
        flags[19:11]: DmaFlags,
        /// `dfa`.
        dfa[32:32]: u32,
        /// `remote_offset`.
        remote_offset[64:56]: u64,
        /// `local_addr`.
        local_addr[128:57]: u64,
        /// `request_len`.
        request_len[192:32]: u32,
        /// `ct`.
        ct[224:11]: u16,
        /// `eq`.
        eq[240:11]: u16,
    }
    consts { cmd_type[0:2] = CmdType::Dma as u8, cmd_size[2:2] = CmdSize::B32 as u8 }
    derived {}
}

impl NomatchDma {
    /// Whether `opcode` is NOMATCH_PUT or NOMATCH_GET.
    pub fn is_valid_opcode(&self) -> bool {
        matches!(self.opcode, DmaOp::NomatchPut | DmaOp::NomatchGet)
    }
}

layout! {
    /// `struct c_dma_amo_cmd` (96 B in a 128 B command): DMA/ATOMIC or FETCHING_ATOMIC.
    /// Operand 1 is read from `local_read_addr`; a fetched value is written to
    /// `local_write_addr` (LAC `write_lac`). `cxi_cq_emit_dma_amo` sets `request_len` to
    /// `amo_size[atomic_type]`.
    pub struct DmaAmo("c_dma_amo_cmd", 96) {
        /// `opcode`: `Atomic` or `FetchingAtomic`.
        opcode[4:4]: DmaOp,
        /// `index_ext`.
        index_ext[8:5]: u8,
        /// `lac`: LAC of `local_read_addr`.
        lac[16:3]: u8,
        /// Event/option bits.
        flags[19:11]: DmaFlags,
        /// `dfa`.
        dfa[32:32]: u32,
        /// `remote_offset`.
        remote_offset[64:56]: u64,
        /// `local_read_addr`: operand 1.
        local_read_addr[128:57]: u64,
        /// `request_len`.
        request_len[192:32]: u32,
        /// `ct`.
        ct[224:11]: u16,
        /// `eq`.
        eq[240:11]: u16,
        /// `initiator`.
        initiator[288:32]: u32,
        /// `match_bits`.
        match_bits[320:64]: u64,
        /// `header_data`.
        header_data[384:64]: u64,
        /// `user_ptr`.
        user_ptr[448:64]: u64,
        /// `local_write_addr`: fetch result.
        local_write_addr[512:57]: u64,
        /// `atomic_op`.
        atomic_op[576:4]: AmoOp,
        /// `atomic_type`.
        atomic_type[584:4]: AmoType,
        /// `cswap_op`.
        cswap_op[592:3]: CswapOp,
        /// `write_lac`.
        write_lac[608:3]: u8,
        /// `op2_word1`.
        op2_word1[640:64]: u64,
        /// `op2_word2`.
        op2_word2[704:64]: u64,
    }
    consts { cmd_type[0:2] = CmdType::Dma as u8, cmd_size[2:2] = CmdSize::B128 as u8 }
    derived {}
}

impl DmaAmo {
    /// Whether `opcode` is ATOMIC or FETCHING_ATOMIC.
    pub fn is_valid_opcode(&self) -> bool {
        matches!(self.opcode, DmaOp::Atomic | DmaOp::FetchingAtomic)
    }
}

/// `struct c_dma_eth_cmd` (96 B packed, in a 128 B command; DMA/ETHERNET_TX, privileged):
/// an Ethernet frame gathered from up to 7 segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DmaEth {
    /// `read_lac`.
    pub read_lac: u8,
    /// `fmt` (1 bit).
    pub fmt: u8,
    /// `flow_hash`.
    pub flow_hash: u8,
    /// `checksum_ctrl`.
    pub checksum_ctrl: ChecksumCtrl,
    /// `num_segments` (3 bits, at most 7).
    pub num_segments: u8,
    /// `checksum_start` (10 bits).
    pub checksum_start: u16,
    /// `checksum_offset` (6 bits).
    pub checksum_offset: u8,
    /// `user_ptr`.
    pub user_ptr: u64,
    /// `len[7]`: segment lengths.
    pub len: [u16; 7],
    /// `addr[7]`: segment IOVAs.
    pub addr: [u64; 7],
    /// `total_len` (`cxi_cq_emit_dma_eth` sets the sum of the used `len`).
    pub total_len: u16,
    /// Event/option bits (at bit 720).
    pub flags: DmaFlags,
    /// `ct` (11 bits).
    pub ct: u16,
    /// `eq` (11 bits).
    pub eq: u16,
}

macro_rules! fd {
    ($name:literal, $off:expr, $w:expr, $kind:expr) => {
        FieldDesc {
            name: $name,
            offset: $off,
            width: $w,
            kind: $kind,
        }
    };
}

const ANY: FieldKind = FieldKind::Value(None);

impl DmaEth {
    /// Size of the struct; the command occupies 128 B.
    pub const SIZE: usize = 96;
    const LEN_OFF: usize = 128;
    const ADDR_OFF: usize = 256;

    /// Encode (96 B; the ring command is 128 B).
    pub fn encode(&self) -> [u8; 96] {
        let mut b = [0u8; 96];
        self.write_to(&mut b);
        b
    }

    /// Decode from the first 96 bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        Self::read_from(bytes)
    }
}

impl Layout for DmaEth {
    const NAME: &'static str = "c_dma_eth_cmd";
    const SIZE: usize = 96;
    const FIELDS: &'static [FieldDesc] = &[
        fd!("cmd_type", 0, 2, FieldKind::Const(CmdType::Dma as u64)),
        fd!("cmd_size", 2, 2, FieldKind::Const(CmdSize::B128 as u64)),
        fd!("opcode", 4, 4, FieldKind::Const(DmaOp::EthernetTx as u64)),
        fd!("read_lac", 8, 3, ANY),
        fd!("fmt", 15, 1, ANY),
        fd!("flow_hash", 16, 8, ANY),
        fd!(
            "checksum_ctrl",
            24,
            2,
            FieldKind::Value(ChecksumCtrl::RAW_VALUES)
        ),
        fd!("num_segments", 29, 3, ANY),
        fd!("checksum_start", 32, 10, ANY),
        fd!("checksum_offset", 44, 6, ANY),
        fd!("user_ptr", 64, 64, ANY),
        fd!("len[0]", 128, 16, ANY),
        fd!("len[1]", 144, 16, ANY),
        fd!("len[2]", 160, 16, ANY),
        fd!("len[3]", 176, 16, ANY),
        fd!("len[4]", 192, 16, ANY),
        fd!("len[5]", 208, 16, ANY),
        fd!("len[6]", 224, 16, ANY),
        fd!("addr[0]", 256, 64, ANY),
        fd!("addr[1]", 320, 64, ANY),
        fd!("addr[2]", 384, 64, ANY),
        fd!("addr[3]", 448, 64, ANY),
        fd!("addr[4]", 512, 64, ANY),
        fd!("addr[5]", 576, 64, ANY),
        fd!("addr[6]", 640, 64, ANY),
        fd!("total_len", 704, 16, ANY),
        fd!("flags", 720, 11, ANY),
        fd!("ct", 736, 11, ANY),
        fd!("eq", 752, 11, ANY),
    ];

    fn write_to(&self, buf: &mut [u8]) {
        set_bits(buf, 0, 2, CmdType::Dma as u64);
        set_bits(buf, 2, 2, CmdSize::B128 as u64);
        set_bits(buf, 4, 4, DmaOp::EthernetTx as u64);
        set_bits(buf, 8, 3, self.read_lac as u64);
        set_bits(buf, 15, 1, self.fmt as u64);
        set_bits(buf, 16, 8, self.flow_hash as u64);
        set_bits(buf, 24, 2, self.checksum_ctrl as u64);
        set_bits(buf, 29, 3, self.num_segments as u64);
        set_bits(buf, 32, 10, self.checksum_start as u64);
        set_bits(buf, 44, 6, self.checksum_offset as u64);
        set_bits(buf, 64, 64, self.user_ptr);
        for i in 0..7 {
            set_bits(buf, Self::LEN_OFF + 16 * i, 16, self.len[i] as u64);
            set_bits(buf, Self::ADDR_OFF + 64 * i, 64, self.addr[i]);
        }
        set_bits(buf, 704, 16, self.total_len as u64);
        set_bits(buf, 720, 11, self.flags.to_raw());
        set_bits(buf, 736, 11, self.ct as u64);
        set_bits(buf, 752, 11, self.eq as u64);
    }

    fn read_from(bytes: &[u8]) -> Result<Self, FormatError> {
        need(Self::NAME, bytes, Self::SIZE)?;
        for (field, off, w, v) in [
            ("cmd_type", 0, 2, CmdType::Dma as u64),
            ("cmd_size", 2, 2, CmdSize::B128 as u64),
            ("opcode", 4, 4, DmaOp::EthernetTx as u64),
        ] {
            let found = get_bits(bytes, off, w);
            if found != v {
                return Err(FormatError::Mismatch {
                    format: Self::NAME,
                    field,
                    expected: v,
                    found,
                });
            }
        }
        let mut len = [0u16; 7];
        let mut addr = [0u64; 7];
        for i in 0..7 {
            len[i] = get_bits(bytes, Self::LEN_OFF + 16 * i, 16) as u16;
            addr[i] = get_bits(bytes, Self::ADDR_OFF + 64 * i, 64);
        }
        Ok(DmaEth {
            read_lac: get_bits(bytes, 8, 3) as u8,
            fmt: get_bits(bytes, 15, 1) as u8,
            flow_hash: get_bits(bytes, 16, 8) as u8,
            checksum_ctrl: ChecksumCtrl::from_raw(get_bits(bytes, 24, 2))?,
            num_segments: get_bits(bytes, 29, 3) as u8,
            checksum_start: get_bits(bytes, 32, 10) as u16,
            checksum_offset: get_bits(bytes, 44, 6) as u8,
            user_ptr: get_bits(bytes, 64, 64),
            len,
            addr,
            total_len: get_bits(bytes, 704, 16) as u16,
            flags: DmaFlags::from_raw(get_bits(bytes, 720, 11))?,
            ct: get_bits(bytes, 736, 11) as u16,
            eq: get_bits(bytes, 752, 11) as u16,
        })
    }
}
