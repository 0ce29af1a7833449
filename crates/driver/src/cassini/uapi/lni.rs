//! LNI and domain requests (`cxi_lni_*`, `cxi_domain_*`).

use super::*;

uapi_struct! {

    /// LNI_ALLOC.
    pub struct LniAllocCmd("cxi_lni_alloc_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Service.
        pub svc_id: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// LNI_ALLOC response.
    pub struct LniAllocResp("cxi_lni_alloc_resp", 4) {
        /// The LNI.
        pub lni: u32,
    }
    /// LNI_FREE.
    pub struct LniFreeCmd("cxi_lni_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// The LNI.
        pub lni: u32,
    }

    /// DOMAIN_RESERVE: reserve `count` contiguous PIDs for the LNI.
    pub struct DomainReserveCmd("cxi_domain_reserve_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// VNI.
        pub vni: u32,
        /// First PID, or `C_PID_ANY`.
        pub pid: u32,
        /// How many.
        pub count: u32,
    }
    /// DOMAIN_RESERVE response.
    pub struct DomainReserveResp("cxi_domain_reserve_resp", 4) {
        /// First PID reserved.
        pub pid: u32,
    }
    /// DOMAIN_ALLOC.
    pub struct DomainAllocCmd("cxi_domain_alloc_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni: u32,
        /// VNI.
        pub vni: u32,
        /// PID, or `C_PID_ANY`.
        pub pid: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// DOMAIN_ALLOC response.
    pub struct DomainAllocResp("cxi_domain_alloc_resp", 12) {
        /// Domain handle.
        pub domain: u32,
        /// VNI.
        pub vni: u32,
        /// PID given.
        pub pid: u32,
    }
    /// DOMAIN_FREE.
    pub struct DomainFreeCmd("cxi_domain_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// Domain handle.
        pub domain: u32,
    }
}
