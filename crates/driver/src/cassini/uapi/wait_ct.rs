//! Wait-object and counting-event requests (`cxi_wait_*`, `cxi_ct_*`).

use super::*;

uapi_struct! {

    /// WAIT_ALLOC.
    pub struct WaitAllocCmd("cxi_wait_alloc_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// WAIT_ALLOC response.
    pub struct WaitAllocResp("cxi_wait_alloc_resp", 8) {
        /// The client.
        pub client_id: u32,
        /// Wait object handle.
        pub wait: u32,
    }
    /// WAIT_FREE.
    pub struct WaitFreeCmd("cxi_wait_free_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Wait object handle.
        pub wait: u32,
        /// Padding.
        pub pad1: u32,
    }

    /// CT_ALLOC.
    pub struct CtAllocCmd("cxi_ct_alloc_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// Padding.
        pub pad1: u32,
        /// User address of the 8 B write-back buffer (8-aligned).
        pub wb: u64,
    }
    /// CT_ALLOC response.
    pub struct CtAllocResp("cxi_ct_alloc_resp", 24) {
        /// CT number.
        pub ctn: u32,
        /// Padding.
        pub pad0: u32,
        /// The doorbell page.
        pub doorbell: MmInfo,
    }
    /// CT_WB_UPDATE.
    pub struct CtWbUpdateCmd("cxi_ct_wb_update_cmd", 16) {
        /// Opcode.
        pub op: u32,
        /// CT number.
        pub ctn: u32,
        /// New write-back buffer.
        pub wb: u64,
    }
    /// CT_FREE.
    pub struct CtFreeCmd("cxi_ct_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// CT number.
        pub ctn: u32,
    }
}
