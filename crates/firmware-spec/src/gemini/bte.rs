//! Block Transfer Engine (BTE) descriptors and channel registers.
//!
//! All layouts and codes are public: `gemini_hw.h` (`ghal_tx_desc_t`, `ghal_rx_desc_t`,
//! `ghal_cpurx_desc_t`, `ghal_txvc_desc_t`, `ghal_rxvc_desc_t`, `GHAL_TXD_*`, `GHAL_RXD_*`)
//! and `ghal_pub.h` (which field carries which CQ data). C bit-fields are allocated from
//! bit 0 of each `uint64_t` on x86-64, so field offsets below are `qword * 64 + bit`.
//!
//! A TX descriptor occupies a 64-byte slot (`GHAL_BTE_TX_PITCH`); the hardware reads the
//! first 48 bytes.

use super::codes::{UnknownCode, code_enum, flag_set};
use super::cqe::HwStatus;
use super::layout::bit_format;

flag_set! {
    /// `GHAL_TXD_MODE_*` of the first qword (`mode1`, 12 bits). BTE_SEND and CQ_NONE are 0.
    pub struct TxdMode1: u16 {
        /// `GHAL_TXD_MODE_BTE_CONCATENATE`: concatenate with the next descriptor.
        const CONCAT = 0x0001;
        /// `GHAL_TXD_MODE_BTE_PUT`
        const PUT = 0x0002;
        /// `GHAL_TXD_MODE_BTE_GET`
        const GET = 0x0004;
        /// `GHAL_TXD_MODE_BTE_IMMED`: immediate data.
        const IMMED = 0x0008;
        /// `GHAL_TXD_MODE_BTE_FENCE`
        const FENCE = 0x0010;
        /// `GHAL_TXD_MODE_CQ_LOCAL`: CQE when the TXD was processed.
        const CQ_LOCAL = 0x0020;
        /// `GHAL_TXD_MODE_CQ_GLOBAL`: CQE when data reached the global ordering point.
        const CQ_GLOBAL = 0x0040;
        /// `GHAL_TXD_MODE_DT_ENABLE`
        const DT_ENABLE = 0x0080;
        /// `GHAL_TXD_MODE_RADP_ENABLE`: adaptive routing for responses.
        const RADP_ENABLE = 0x0100;
        /// `GHAL_TXD_MODE_ADP_ENABLE`: adaptive routing for data.
        const ADP_ENABLE = 0x0200;
        /// `GHAL_TXD_MODE_HASH_ENABLE`: hash on address for data.
        const HASH_ENABLE = 0x0400;
        /// `GHAL_TXD_MODE_VMDH_ENABLE`: vMDH translation.
        const VMDH_ENABLE = 0x0800;
    }
}

impl TxdMode1 {
    /// `GHAL_TXD_MODE_BTE_SEND`.
    pub const SEND: TxdMode1 = TxdMode1(0);
    /// `GHAL_TXD_MODE_CQ_NONE`.
    pub const CQ_NONE: TxdMode1 = TxdMode1(0);
    /// `GHAL_TXD_MODE_OPT_DELIVERY` = RADP | ADP.
    pub const OPT_DELIVERY: TxdMode1 = TxdMode1(0x0300);
}

code_enum! {
    /// The BTE operation encoded in `mode1 & 0x6`.
    pub enum BteOp: u16 {
        /// `BTE_SEND` (to a receive channel ring).
        Send = 0x0,
        /// `BTE_PUT`
        Put = 0x2,
        /// `BTE_GET`
        Get = 0x4,
    }
}

flag_set! {
    /// `GHAL_TXD_FLAG_*` of the second qword (`flags`, written by the BTE).
    pub struct TxdFlags: u8 {
        /// `GHAL_TXD_FLAG_COMPLETE`
        const COMPLETE = 0x1;
        /// `GHAL_TXD_FLAG_TIMEOUT_ERR`
        const TIMEOUT_ERR = 0x2;
    }
}

flag_set! {
    /// `GHAL_TXD_MODE_*` of the second qword (`mode2`).
    pub struct TxdMode2: u8 {
        /// `GHAL_TXD_MODE_IRQ_ENABLE`
        const IRQ_ENABLE = 0x1;
        /// `GHAL_TXD_MODE_IRQ_DELAY_ENABLE`
        const IRQ_DELAY_ENABLE = 0x2;
    }
}

flag_set! {
    /// `GHAL_TXD_MODE_*` of the fourth qword (`mode4`).
    pub struct TxdMode4: u8 {
        /// `GHAL_TXD_MODE_COHERENT`
        const COHERENT = 0x1;
        /// `GHAL_TXD_MODE_NP_PASSPW`: relaxed HT ordering.
        const NP_PASSPW = 0x2;
        /// `GHAL_TXD_MODE_NAT_ENABLE`: translate the source through an MDD.
        const NAT_ENABLE = 0x4;
    }
}

/// `GHAL_BTE_TX_TIMEOUT_DISABLE`.
pub const TX_TIMEOUT_DISABLE: u64 = 0;
/// Bytes of a TX descriptor slot (`GHAL_BTE_TX_PITCH`).
pub const TX_SLOT_SIZE: usize = 64;

bit_format! {
    /// `ghal_tx_desc_t` with the NAT-enabled view of the fourth qword (`nat_enb`), the form
    /// user RDMA uses. With NAT off, qword 3 bits 0–47 are a physical source address:
    /// see [`TxDescriptor::src_phys_addr`].
    pub struct TxDescriptor, 48, {
        /// Destination PE (18 bits).
        dest_pe: 0, 18;
        /// `TxdMode1` bits.
        mode1: 52, 12;
        /// Offset into the destination MDD.
        dest_mem_off: 64, 40;
        /// Destination memory domain handle.
        dest_mem_dh: 112, 12;
        /// `TxdFlags` (written by the BTE).
        flags: 124, 2;
        /// `TxdMode2` bits.
        mode2: 126, 2;
        /// Source CQ handle.
        src_cq_hndl: 128, 10;
        /// Destination protection tag.
        dest_ptag: 144, 8;
        /// Source protection tag.
        src_ptag: 152, 8;
        /// Bytes to move.
        data_len: 160, 32;
        /// Offset into the source MDD (NAT on).
        src_mem_off: 192, 40;
        /// Source memory domain handle (NAT on).
        src_mem_dh: 232, 12;
        /// `TxdMode4` bits.
        mode4: 253, 3;
        /// CQ data of the local event (`GHAL_TXD_SET_CQE_LOCAL`).
        src_cq_data: 256, 56;
        /// `HwStatus` written by the BTE on completion.
        bte_tx_status: 315, 4;
        /// Remote (and, on Gemini, global) CQ data, or the immediate data
        /// (`GHAL_TXD_SET_CQE_REMOTE`, `GHAL_TXD_SET_USRDATA`).
        user_data: 320, 64;
    }
}

impl TxDescriptor {
    /// Mode bits, checked.
    pub fn mode1(&self) -> Result<TxdMode1, UnknownCode> {
        TxdMode1::from_bits(self.mode1 as u16)
    }

    /// The operation (`mode1 & 0x6`); 0x6 is not an operation.
    pub fn op(&self) -> Result<BteOp, UnknownCode> {
        BteOp::try_from((self.mode1 & 0x6) as u16)
    }

    /// Mode-4 bits, checked.
    pub fn mode4(&self) -> Result<TxdMode4, UnknownCode> {
        TxdMode4::from_bits(self.mode4 as u8)
    }

    /// Whether the source is translated through an MDD.
    pub fn nat_enabled(&self) -> bool {
        self.mode4 & TxdMode4::NAT_ENABLE.0 as u64 != 0
    }

    /// The NAT-disabled reading of qword 3: a 48-bit physical source address.
    pub const fn src_phys_addr(&self) -> u64 {
        self.src_mem_off | ((self.src_mem_dh & 0xFF) << 40)
    }

    /// Set qword 3 for NAT-disabled use (`nat_dsb.src_ph_addr`).
    pub fn set_src_phys_addr(&mut self, addr: u64) {
        self.src_mem_off = addr & crate::bits::mask(40);
        self.src_mem_dh = (addr >> 40) & 0xFF;
    }

    /// Completion status, typed.
    pub fn status(&self) -> Result<HwStatus, UnknownCode> {
        HwStatus::try_from(self.bte_tx_status as u8)
    }

    /// Encode into a full 64-byte ring slot (the last 16 bytes are 0).
    pub fn encode_slot(&self) -> Result<[u8; TX_SLOT_SIZE], super::layout::FormatError> {
        let mut slot = [0u8; TX_SLOT_SIZE];
        slot[..Self::SIZE].copy_from_slice(&self.encode()?);
        Ok(slot)
    }
}

flag_set! {
    /// `GHAL_RXD_MODE_*` (`mode1` of RX descriptors).
    pub struct RxdMode: u16 {
        /// `GHAL_RXD_MODE_PASSPW`
        const PASSPW = 0x0001;
        /// `GHAL_RXD_MODE_COHERENT`
        const COHERENT = 0x0002;
        /// `GHAL_RXD_MODE_IRQ_DELAY_ENABLE`
        const IRQ_DELAY_ENABLE = 0x4000;
        /// `GHAL_RXD_MODE_IRQ_ENABLE`
        const IRQ_ENABLE = 0x8000;
    }
}

/// `GHAL_RXD_FLAG_BTE_COMPLETE`.
pub const RXD_FLAG_BTE_COMPLETE: u64 = 0x0001;
/// `GHAL_RXD_FLAG_IMM_AVAILABLE`.
pub const RXD_FLAG_IMM_AVAILABLE: u64 = 0x0002;
/// `GHAL_RXD_FLAG_ERR_LOC_MASK` / `_SHIFT`.
pub const RXD_FLAG_ERR_LOC_MASK: u64 = 0x001C;
/// Shift of the error location.
pub const RXD_FLAG_ERR_LOC_SHIFT: u32 = 2;
/// `GHAL_RXD_FLAG_ERR_STATUS_MASK` / `_SHIFT`.
pub const RXD_FLAG_ERR_STATUS_MASK: u64 = 0x01E0;
/// Shift of the error status.
pub const RXD_FLAG_ERR_STATUS_SHIFT: u32 = 5;

bit_format! {
    /// `ghal_rx_desc_t`: one receive buffer of a BTE receive channel ring (8 bytes).
    pub struct RxDescriptor, 8, {
        /// Buffer address (48 bits).
        base_addr: 0, 48;
        /// `RxdMode` bits.
        mode1: 48, 16;
    }
}

bit_format! {
    /// `ghal_cpurx_desc_t`: the host-memory copy of an RX descriptor the BTE completes
    /// (32 bytes, `GHAL_BTE_CPURX_PITCH`).
    pub struct CpuRxDescriptor, 32, {
        /// Buffer address (48 bits).
        buff_addr: 0, 48;
        /// `RxdMode` bits.
        mode1: 48, 16;
        /// `GHAL_RXD_FLAG_*` status flags.
        flags: 64, 9;
        /// Received bytes.
        data_len: 96, 32;
        /// Immediate data received.
        imm_data: 128, 64;
    }
}

impl CpuRxDescriptor {
    /// `GHAL_VC_RX_ERR_STATUS`.
    pub const fn err_status(&self) -> u64 {
        (self.flags & RXD_FLAG_ERR_STATUS_MASK) >> RXD_FLAG_ERR_STATUS_SHIFT
    }

    /// `GHAL_VC_RX_ERR_LOCATION`.
    pub const fn err_location(&self) -> u64 {
        (self.flags & RXD_FLAG_ERR_LOC_MASK) >> RXD_FLAG_ERR_LOC_SHIFT
    }
}

/// `GHAL_TXVC_FLAG_*`.
pub mod txvc_flag {
    /// `GHAL_TXVC_FLAG_DISABLE`
    pub const DISABLE: u64 = 0;
    /// `GHAL_TXVC_FLAG_RESET`
    pub const RESET: u64 = 0x1;
    /// `GHAL_TXVC_FLAG_ENABLE`
    pub const ENABLE: u64 = 0x2;
    /// `GHAL_TXVC_FLAG_IRQ_ENABLE`
    pub const IRQ_ENABLE: u64 = 0x4;
}

/// `GHAL_RXVC_FLAG_*`.
pub mod rxvc_flag {
    /// `GHAL_RXVC_FLAG_DISABLE`
    pub const DISABLE: u64 = 0;
    /// `GHAL_RXVC_FLAG_OVRPROTECT`
    pub const OVRPROTECT: u64 = 0x1;
    /// `GHAL_RXVC_FLAG_RESET`
    pub const RESET: u64 = 0x2;
    /// `GHAL_RXVC_FLAG_ENABLE`
    pub const ENABLE: u64 = 0x4;
    /// `GHAL_RXVC_FLAG_IRQ_ENABLE`
    pub const IRQ_ENABLE: u64 = 0x8;
}

bit_format! {
    /// `ghal_txvc_desc_t`: BTE transmit channel registers (32 bytes at
    /// `GHAL_BTE_TCHNL_OFFSET + 64 * channel`).
    pub struct TxChannel, 32, {
        /// Interrupt delay value.
        idv: 0, 8;
        /// Interrupt request index.
        irq_req_index: 8, 5;
        /// TX timeout value.
        timeout: 32, 19;
        /// `txvc_flag` bits.
        flags: 61, 3;
        /// Host address of the CPU copy of the TX ring (bits 5:0 zero).
        cpu_ring_addr: 64, 64;
        /// Ring read index (hardware).
        read_index: 128, 16;
        /// SSIDs in use by the channel.
        ssid_in_use: 160, 9;
        /// Most SSIDs the channel may use.
        ssid_max_num: 176, 10;
        /// Ring write index (software doorbell; 16 bits used).
        write_index: 192, 64;
    }
}

bit_format! {
    /// `ghal_rxvc_desc_t`: BTE receive channel registers (32 bytes at
    /// `GHAL_BTE_RCHNL_OFFSET + 64 * channel`).
    pub struct RxChannel, 32, {
        /// Receive buffer size.
        buf_size: 0, 32;
        /// Interrupt delay value.
        idv: 32, 8;
        /// Interrupt request index.
        irq_req_index: 55, 5;
        /// `rxvc_flag` bits.
        flags: 60, 4;
        /// Host address of the CPU copy of the RX ring (bits 5:0 zero).
        cpu_ring_addr: 64, 64;
        /// Ring read index.
        read_index: 128, 16;
        /// Active RMT entries.
        rmt_entries: 160, 10;
        /// Ring write index (16 bits used).
        write_index: 192, 64;
    }
}

/// Register of the four TX ring base indices, `uint16_t vc[4]` (`GHAL_BTE_TCHNL_BASE_OFFSET`).
pub const TCHNL_BASE_OFFSET: u64 = 0x404_0050;
/// Register of the four TX ring sizes (`GHAL_BTE_TCHNL_COUNT_OFFSET`).
pub const TCHNL_COUNT_OFFSET: u64 = 0x404_0058;
/// Register of the four RX ring base indices (`GHAL_BTE_RCHNL_BASE_OFFSET`).
pub const RCHNL_BASE_OFFSET: u64 = 0x4c0_4060;
/// Register of the four RX ring sizes (`GHAL_BTE_RCHNL_COUNT_OFFSET`).
pub const RCHNL_COUNT_OFFSET: u64 = 0x4c0_4068;
/// `GHAL_BTE_VC_MAX_GET_REQUEST`: outstanding GETs per channel.
pub const VC_MAX_GET_REQUEST: u32 = 768;
/// `GHAL_BTE_VC_MAX_HT_NP_REQUEST`.
pub const VC_MAX_HT_NP_REQUEST: u32 = 32;

#[cfg(test)]
mod tests {
    use super::super::layout::check_table;
    use super::*;

    #[test]
    fn tables_are_sound() {
        check_table(TxDescriptor::FIELDS, TxDescriptor::SIZE).unwrap();
        check_table(RxDescriptor::FIELDS, RxDescriptor::SIZE).unwrap();
        check_table(CpuRxDescriptor::FIELDS, CpuRxDescriptor::SIZE).unwrap();
        check_table(TxChannel::FIELDS, TxChannel::SIZE).unwrap();
        check_table(RxChannel::FIELDS, RxChannel::SIZE).unwrap();
    }

    #[test]
    fn modes_and_phys_addr() {
        let mut d = TxDescriptor {
            mode1: (TxdMode1::GET | TxdMode1::CQ_LOCAL | TxdMode1::FENCE).bits() as u64,
            mode4: TxdMode4::NAT_ENABLE.bits() as u64,
            ..Default::default()
        };
        assert_eq!(d.op().unwrap(), BteOp::Get);
        assert!(d.mode1().unwrap().contains(TxdMode1::FENCE));
        assert!(d.nat_enabled());
        d.set_src_phys_addr(0xABCD_1234_5678);
        assert_eq!(d.src_phys_addr(), 0xABCD_1234_5678);
        d.mode1 = 0x6;
        assert!(d.op().is_err());
        assert_eq!(d.encode_slot().unwrap()[48..], [0u8; 16]);
    }
}
