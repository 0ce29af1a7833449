//! Command-queue requests (`cxi_cq_*`).

use super::*;

uapi_struct! {

    /// `struct cxi_cq_alloc_opts`.
    pub struct CqAllocOpts("cxi_cq_alloc_opts", 24) {
        /// Requested 64 B slots (up to `CXI_MAX_CQ_COUNT`).
        pub count: u32,
        /// `enum cxi_cq_update_policy`.
        pub policy: u32,
        /// Statistics counter pool.
        pub stat_cnt_pool: u32,
        /// `CXI_CQ_*`.
        pub flags: u32,
        /// Initial LCID (transmit only).
        pub lcid: u32,
        /// LPE credit threshold id (0..3).
        pub lpe_cdt_thresh_id: u32,
    }
    /// `struct cxi_cq_alloc_opts_buf`: the options and an optional ring the caller provides.
    pub struct CqAllocOptsBuf("cxi_cq_alloc_opts_buf", 48) {
        /// The options.
        pub opts: CqAllocOpts,
        /// The caller's ring (page aligned), or 0 for a ring of driver pages.
        pub buf: u64,
        /// `buf` is host memory (else device memory, through dmabuf).
        pub is_host_mem: u8,
        /// Padding.
        pub pad0: [u8; 3],
        /// dmabuf file descriptor of device memory.
        pub dmabuf_fd: i32,
        /// Offset in the dmabuf.
        pub dmabuf_offset: u64,
    }
    /// CQ_ALLOC_BUF: what libcxi's `cxil_alloc_cmdq` sends.
    pub struct CqAllocBufCmd("cxi_cq_alloc_buf_cmd", 72) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// EQ for errors (`C_EQ_NONE` = 0).
        pub eq: u32,
        /// Options and buffer.
        pub opts: CqAllocOptsBuf,
    }
    /// CQ_ALLOC.
    pub struct CqAllocCmd("cxi_cq_alloc_cmd", 48) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// EQ for errors (`C_EQ_NONE` = 0).
        pub eq: u32,
        /// Options.
        pub opts: CqAllocOpts,
    }
    /// CQ_ALLOC response.
    pub struct CqAllocResp("cxi_cq_alloc_resp", 40) {
        /// CQ handle: transmit 0..1023, target 1024 + n.
        pub cq: u32,
        /// Slots in the ring.
        pub count: u32,
        /// The command ring.
        pub cmds: MmInfo,
        /// The launch page.
        pub wp_addr: MmInfo,
    }
    /// CQ_FREE.
    pub struct CqFreeCmd("cxi_cq_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// CQ handle.
        pub cq: u32,
    }
    /// CQ_ACK_COUNTER.
    pub struct CqAckCounterCmd("cxi_cq_ack_counter_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// CQ handle.
        pub cq: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// CQ_ACK_COUNTER response.
    pub struct CqAckCounterResp("cxi_cq_ack_counter_resp", 4) {
        /// The counter.
        pub ack_counter: u32,
    }
}
