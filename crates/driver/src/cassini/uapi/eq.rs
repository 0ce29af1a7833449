//! Event-queue requests (`cxi_eq_*`).

use super::*;

uapi_struct! {

    /// `struct cxi_eq_attr`.
    pub struct EqAttr("cxi_eq_attr", 48) {
        /// User virtual address of the event buffer.
        pub queue: u64,
        /// Its length.
        pub queue_len: u64,
        /// `CXI_EQ_*`.
        pub flags: u64,
        /// First status threshold, percent.
        pub status_thresh_base: u32,
        /// Threshold step, percent.
        pub status_thresh_delta: u32,
        /// Number of thresholds (0..4).
        pub status_thresh_count: u32,
        /// Event-combining delay in ns (0 = default).
        pub ec_delay: u32,
        /// CPU affinity hint.
        pub cpu_affinity: u32,
        /// Event slots reserved for flow control.
        pub reserved_slots: u32,
    }
    /// EQ_ALLOC.
    pub struct EqAllocCmd("cxi_eq_alloc_cmd", 80) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// MD covering the buffer (`CXI_MD_NONE` = 0 with `CXI_EQ_PASSTHROUGH`).
        pub queue_md: u32,
        /// Wait object for events (`CXI_WAIT_NONE` = 0).
        pub event_wait: u32,
        /// Wait object for status write-backs.
        pub status_wait: u32,
        /// Attributes.
        pub attr: EqAttr,
    }
    /// EQ_ALLOC response.
    pub struct EqAllocResp("cxi_eq_alloc_resp", 24) {
        /// EQ handle (its hardware number).
        pub eq: u32,
        /// Padding.
        pub pad0: u32,
        /// The EE software-state page.
        pub csr: MmInfo,
    }
    /// EQ_FREE.
    pub struct EqFreeCmd("cxi_eq_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// EQ handle.
        pub eq: u32,
    }
    /// EQ_RESIZE.
    pub struct EqResizeCmd("cxi_eq_resize_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// EQ handle.
        pub eq_hndl: u32,
        /// New buffer.
        pub queue: u64,
        /// New length.
        pub queue_len: u64,
        /// MD of the new buffer.
        pub queue_md: u32,
        /// Padding.
        pub pad0: u32,
    }
    /// EQ_RESIZE_COMPLETE.
    pub struct EqResizeCompleteCmd("cxi_eq_resize_complete_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// EQ handle.
        pub eq_hndl: u32,
    }
    /// EQ_ADJUST_RESERVED_FC.
    pub struct EqAdjustReservedFcCmd("cxi_eq_adjust_reserved_fc_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// EQ handle.
        pub eq_hndl: u32,
        /// Change (may be negative).
        pub value: i32,
    }
    /// EQ_ADJUST_RESERVED_FC response.
    pub struct EqAdjustReservedFcResp("cxi_eq_adjust_reserved_fc_resp", 4) {
        /// The new reservation.
        pub reserved_fc: i32,
    }
}
