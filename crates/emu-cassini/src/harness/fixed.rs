//! The fixed choices of the harness: every node has its own host memory, seen by its NIC
//! through a passthrough platform IOMMU; AC 1 is a PASSTHROUGH context for "kernel" memory
//! (command rings), AC 2 an NTA context for "user" memory (buffers, event rings) reached
//! through LAC 0 of RGID 1.

/// Page size of the harness's tables and buffers.
pub const PAGE: u64 = 4096;
/// AC of kernel memory (PASSTHROUGH).
pub const AC_KERNEL: u16 = 1;
/// AC of user memory (NTA).
pub const AC_USER: u16 = 2;
/// The resource group every harness object belongs to.
pub const RGID: u8 = 1;
/// First IOVA of the user context.
pub const USER_IOVA_BASE: u64 = 0x10_0000_0000;
/// Pages of the user context (`mem_size`).
pub const USER_IOVA_PAGES: u64 = 1 << 20;

/// Bytes of host memory per node (unless a constructor says otherwise).
pub const NODE_MEM: u64 = 64 << 20;
