//! Communication-profile requests (`cxi_cp_*`).

use super::*;

uapi_struct! {

    /// CP_ALLOC.
    pub struct CpAllocCmd("cxi_cp_alloc_cmd", 32) {
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
        /// `enum cxi_traffic_class`.
        pub tc: u32,
        /// `enum cxi_traffic_class_type`.
        pub tc_type: u32,
    }
    /// CP_ALLOC / TRIG_CP_ALLOC response.
    pub struct CpAllocResp("cxi_cp_alloc_resp", 8) {
        /// CP handle.
        pub cp_hndl: u32,
        /// The LCID commands and CQs name.
        pub lcid: u32,
    }
    /// CP_FREE.
    pub struct CpFreeCmd("cxi_cp_free_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// CP handle.
        pub cp_hndl: u32,
    }
    /// CP_MODIFY.
    pub struct CpModifyCmd("cxi_cp_modify_cmd", 12) {
        /// Opcode.
        pub op: u32,
        /// CP handle.
        pub cp_hndl: u32,
        /// New VNI.
        pub vni: u32,
    }
    /// TRIG_CP_ALLOC.
    pub struct TrigCpAllocCmd("cxi_trig_cp_alloc_cmd", 40) {
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
        /// `enum cxi_traffic_class`.
        pub tc: u32,
        /// `enum cxi_traffic_class_type`.
        pub tc_type: u32,
        /// `enum cxi_trig_cp`: TRIG_LCID 0, NON_TRIG_LCID 1, ANY_LCID 2.
        pub cp_type: u32,
        /// Padding.
        pub pad1: u32,
    }
}
