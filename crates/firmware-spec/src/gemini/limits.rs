//! Gemini resource counts, alignment rules and size limits.
//!
//! Counts and alignment masks: `gemini_hw.h` ("Available HW Resources", alignment defines).
//! API limits: `gni_pub.h` (LUSTRE-HDR, GNI_MINOR_REV 0x5c) and the uGNI users named per item.

/// CQ descriptors per NIC (`GHAL_CQ_MAX_NUMBER`).
pub const CQ_DESCRIPTORS: u64 = 1024;
/// General (user) FMA descriptors (`GHAL_FMA_MAX_NUMBER`).
pub const FMA_DESCRIPTORS: u64 = 64;
/// FMA descriptors dedicated to the OS (`GHAL_FMAOS_MAX_NUMER`).
pub const FMA_OS_DESCRIPTORS: u64 = 4;
/// All FMA descriptors (`GHAL_FMA_TOTAL_NUMBER` = 64 + 4).
pub const FMA_TOTAL_DESCRIPTORS: u64 = FMA_DESCRIPTORS + FMA_OS_DESCRIPTORS;
/// Usable BTE TX descriptors (`GHAL_BTE_TX_MAX_NUMBER`; the last of the 1024 slots is
/// reserved for HSS).
pub const BTE_TX_DESCRIPTORS: u64 = 1023;
/// BTE TX descriptor slots in the address map (1023 usable + 1 reserved).
pub const BTE_TX_SLOTS: u64 = 1024;
/// BTE RX descriptors (`GHAL_BTE_RX_MAX_NUMBER`).
pub const BTE_RX_DESCRIPTORS: u64 = 1024;
/// BTE channels (`GHAL_BTE_CHNL_MAX_NUMBER`). uGNI spreads RDMA over the 3 user channels.
pub const BTE_CHANNELS: u64 = 4;
/// BTE channels uGNI uses for user RDMA by default (`gni_pub.h` BTE_SINGLE_CHANNEL text:
/// "instead of ... all three channels").
pub const BTE_USER_CHANNELS: u64 = 3;
/// Longest BTE transfer in bytes (`GHAL_BTE_MAX_LENGTH` = 2^32 - 1).
pub const BTE_MAX_LENGTH: u64 = (1 << 32) - 1;
/// Memory domain descriptors (`GHAL_MDD_MAX_NUMBER`).
pub const MDD_ENTRIES: u64 = 4 * 1024;
/// MRT entries (`GHAL_MRT_MAX_NUMBER`; Chapel: "nic_max_pages = 1<<14").
pub const MRT_ENTRIES: u64 = 16 * 1024;
/// NTT entries (`GHAL_NTT_MAX_NUMBER`).
pub const NTT_ENTRIES: u64 = 8 * 1024;
/// Virtual MDH entries (`GHAL_VMDH_MAX_NUMBER`).
pub const VMDH_ENTRIES: u64 = 256;
/// Protection tags; 0 is invalid (`GHAL_PTAG_MAX_NUMBER`).
pub const PTAGS: u64 = 256;
/// ORB entries (`GHAL_ORB_MAX_NUMBER`).
pub const ORB_ENTRIES: u64 = 1024;
/// SSID entries (`GHAL_SSID_MAX_NUMBER`).
pub const SSID_ENTRIES: u64 = 255;
/// Width of a PE (node) address in bits (`GHAL_PE_MASK` = 0x3FFFF).
pub const PE_BITS: u32 = 18;
/// Mask of a PE address.
pub const PE_MASK: u32 = 0x3FFFF;
/// vMDH base mask (`GHAL_VMDH_BASE_MASK`).
pub const VMDH_BASE_MASK: u32 = 0xFFF;
/// vMDH enable bit (`GHAL_VMDH_ENABLE_BIT`).
pub const VMDH_ENABLE_BIT: u32 = 0x8000;

/// Alignment mask for local addresses of FMA/RDMA transfers (`GHAL_LOCAL_ADDR_ALIGNMENT`, 4 B).
pub const LOCAL_ADDR_ALIGN_MASK: u64 = 3;
/// Alignment mask for remote addresses of FMA/RDMA transfers (`GHAL_ADDR_ALIGNMENT`, 4 B).
pub const ADDR_ALIGN_MASK: u64 = 3;
/// Alignment mask for AMO targets (`GHAL_AMO_ALIGNMENT`, 8 B).
pub const AMO_ALIGN_MASK: u64 = 7;
/// Alignment mask for AAX (16-byte AND-XOR) targets (`GHAL_AAX_ALIGNMENT`, 16 B).
pub const AAX_ALIGN_MASK: u64 = 15;
/// GET alignment on Gemini: local address, remote address and length must all be multiples
/// of 4 (Chapel PR #15196, OMPI `btl_get_alignment=4`, OFI `GNI_READ_ALIGN`).
pub const GET_ALIGN: u64 = 4;
/// AMO operand size on Gemini (only the 64-bit set exists).
pub const AMO_OPERAND_SIZE: u64 = 8;

/// Whether a GET of `length` bytes from `remote` into `local` meets the Gemini rule.
pub const fn get_is_aligned(local: u64, remote: u64, length: u64) -> bool {
    (local | remote | length) & (GET_ALIGN - 1) == 0
}

/// Whether an AMO target address is 8-byte aligned.
pub const fn amo_is_aligned(remote: u64) -> bool {
    remote & AMO_ALIGN_MASK == 0
}

/// Largest chained (CT) FMA transaction total, 1 GiB (`gni_pub.h` Ct* doc).
pub const FMA_CHAIN_MAX: u64 = 1 << 30;
/// Largest chained FMA transaction total with FMA sharing, 1 MiB (`gni_pub.h`).
pub const FMA_CHAIN_MAX_SHARED: u64 = 1 << 20;
/// Default small FMA window size, 32 KiB (`/sys/class/gni/kgni0/fma_sm_win_sz` default).
pub const FMA_SMALL_WINDOW: u64 = 32 * 1024;
/// Flag size of GET_W_FLAG / AMO_W_FLAG responses (`GNI_FMA_FLAGGED_RESPONSE_SIZE`).
pub const FMA_FLAGGED_RESPONSE_SIZE: u64 = 4;
/// Bits of a CQ-write payload that reach software (low 6 bytes of `cqwrite_value`).
pub const CQ_WRITE_DATA_BITS: u32 = 48;
/// Largest datagram payload (`GNI_DATAGRAM_MAXSIZE`).
pub const DATAGRAM_MAX_SIZE: u64 = 128;
/// Largest SMSG message, header + data (`GNI_SMSG_MAX_SIZE`).
pub const SMSG_MAX_SIZE: u32 = 65535;
/// Tag meaning "any tag" for `GNI_SmsgGetNextWTag` (`GNI_SMSG_ANY_TAG`).
pub const SMSG_ANY_TAG: u8 = 0xFF;
/// Default SMSG retransmit count (`FMA_SMSG_MAX_RETRANS_DEFAULT`).
pub const SMSG_MAX_RETRANS_DEFAULT: u32 = 10;
/// Largest MSGQ message (`GNI_MSGQ_MSG_SZ_MAX`).
pub const MSGQ_MSG_MAX_SIZE: u32 = 128;
/// Most local instances per node for MSGQ (`GNI_MSGQ_NODE_INSTS_MAX`, 0x5c header).
pub const MSGQ_NODE_INSTS_MAX: u32 = 48;
/// Default error event queue size for `GNI_SubscribeErrors`.
pub const ERROR_EVENT_QUEUE_DEFAULT: u32 = 64;
/// Mailbox alignment that uGNI users round SMSG buffers to (64 B cache line; OMPI, Charm).
pub const SMSG_MBOX_ALIGN: u64 = 64;
/// Default MRT page size, 2 MiB (`/sys/class/gemini/ghal0/mrt`, as used by OMPI41).
pub const MRT_PAGE_SIZE_DEFAULT: u64 = 2 * 1024 * 1024;
