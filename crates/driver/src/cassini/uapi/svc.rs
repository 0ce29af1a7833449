//! Service requests (`cxi_svc_*`) and resource limits.

use super::*;

uapi_struct! {

    /// `struct cxi_limits`.
    pub struct Limits("cxi_limits", 4) {
        /// Most a service may use.
        pub max: u16,
        /// Reserved for the service.
        pub res: u16,
    }
    /// One member of a restricted service.
    pub struct SvcMember("cxi_svc_desc.members[]", 8) {
        /// uid or gid.
        pub value: u32,
        /// `enum cxi_svc_member_type`: IGNORE 0, UID 1, GID 2, NET_NS 3.
        pub kind: u32,
    }
    /// `struct cxi_svc_desc`.
    pub struct SvcDesc("cxi_svc_desc", 68) {
        /// Bit-field: restricted_members 0, restricted_vnis 1, restricted_tcs 2,
        /// resource_limits 3, enable 4, is_system_svc 5, cntr_pool_id 6..8.
        pub bits: u8,
        /// VNIs valid in `vnis`.
        pub num_vld_vnis: u8,
        /// Allowed VNIs.
        pub vnis: [u16; 4],
        /// Allowed traffic classes (C `bool`s).
        pub tcs: [u8; 5],
        /// Padding.
        pub pad0: u8,
        /// Members.
        pub members: [SvcMember; 2],
        /// Limits by `enum cxi_rsrc_type`: PTE, TXQ, TGQ, EQ, CT, LE, TLE, AC.
        pub limits: [Limits; 8],
        /// Service id.
        pub svc_id: u32,
    }
    /// `struct cxi_svc_fail_info`.
    pub struct SvcFailInfo("cxi_svc_fail_info", 20) {
        /// Available count of each resource whose reservation failed.
        pub rsrc_avail: [u16; 8],
        /// No LE pool was available.
        pub no_le_pools: u8,
        /// No TLE pool was available.
        pub no_tle_pools: u8,
        /// No counter pool was available.
        pub no_cntr_pools: u8,
        /// Padding.
        pub pad0: u8,
    }
    /// SVC_ALLOC / SVC_UPDATE.
    pub struct SvcAllocCmd("cxi_svc_alloc_cmd", 88) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// The description.
        pub svc_desc: SvcDesc,
        /// Padding.
        pub pad1: u32,
    }
    /// SVC_ALLOC response.
    pub struct SvcAllocResp("cxi_svc_alloc_resp", 24) {
        /// New service id.
        pub svc_id: u32,
        /// Why a reservation failed.
        pub fail_info: SvcFailInfo,
    }
    /// SVC_UPDATE (same layout as SVC_ALLOC).
    pub struct SvcUpdateCmd("cxi_svc_update_cmd", 88) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// The description (`svc_id` names the service).
        pub svc_desc: SvcDesc,
        /// Padding.
        pub pad1: u32,
    }
    /// SVC_UPDATE response.
    pub struct SvcUpdateResp("cxi_svc_update_resp", 20) {
        /// Why a reservation failed.
        pub fail_info: SvcFailInfo,
    }
    /// SVC_DESTROY.
    pub struct SvcDestroyCmd("cxi_svc_destroy_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// Service id.
        pub svc_id: u32,
    }
    /// SVC_GET, SVC_RSRC_GET, SVC_GET_EXCLUSIVE_CP: a service id.
    pub struct SvcIdCmd("cxi_svc_get_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Service id.
        pub svc_id: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// SVC_LIST_GET / SVC_RSRC_LIST_GET: fill a user array.
    pub struct SvcListGetCmd("cxi_svc_list_get_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Entries the array holds.
        pub count: u32,
        /// Padding.
        pub pad1: u32,
        /// User address of the array (`cxi_svc_desc` or `cxi_rsrc_use` entries).
        pub list: u64,
    }
    /// SVC_LIST_GET / SVC_RSRC_LIST_GET response.
    pub struct SvcListGetResp("cxi_svc_list_get_resp", 4) {
        /// Number of services.
        pub count: u32,
    }
    /// `struct cxi_rsrc_use`: a service's use of each resource.
    pub struct RsrcUse("cxi_rsrc_use", 24) {
        /// Service id.
        pub svc_id: u32,
        /// TLE pool.
        pub tle_pool_id: u32,
        /// In use, by `enum cxi_rsrc_type`.
        pub in_use: [u16; 8],
    }
    /// SVC_ENABLE.
    pub struct SvcEnableCmd("cxi_svc_enable_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Service id.
        pub svc_id: u32,
        /// Enable (C `bool`).
        pub enable: u8,
        /// Padding.
        pub pad1: [u8; 3],
    }
    /// SVC_SET_LPR / SVC_GET_LPR.
    pub struct SvcLprCmd("cxi_svc_lpr_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Service id.
        pub svc_id: u32,
        /// LNIs per RGID.
        pub lnis_per_rgid: u32,
    }
    /// A service value (SVC_GET_LPR).
    pub struct SvcGetValueResp("cxi_svc_get_value_resp", 4) {
        /// The value.
        pub value: u32,
    }
    /// SVC_SET_EXCLUSIVE_CP (admin).
    pub struct SvcSetExclusiveCpCmd("cxi_svc_set_exclusive_cp_cmd", 12) {
        /// Opcode.
        pub op: u32,
        /// Service.
        pub svc_id: u32,
        /// `bool exclusive_cp`.
        pub exclusive_cp: u8,
        /// Padding.
        pub pad0: [u8; 3],
    }
    /// SVC_GET_EXCLUSIVE_CP's response: one `bool` (libcxi reads it into a zeroed 4-byte
    /// `cxi_svc_get_value_resp`).
    pub struct SvcGetExclusiveCpResp("cxi_svc_get_exclusive_cp_resp", 1) {
        /// The flag.
        pub exclusive_cp: u8,
    }
    /// SVC_SET_VNI_RANGE (admin) and SVC_GET_VNI_RANGE.
    pub struct SvcVniRangeCmd("cxi_svc_vni_range_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Service.
        pub svc_id: u32,
        /// First VNI of the range.
        pub vni_min: u32,
        /// Last VNI of the range.
        pub vni_max: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// SVC_GET_VNI_RANGE's response.
    pub struct SvcGetVniRangeResp("cxi_svc_get_vni_range_resp", 8) {
        /// First VNI.
        pub vni_min: u32,
        /// Last VNI.
        pub vni_max: u32,
    }
    /// SVC_SET_NETNS (admin).
    pub struct SvcSetNetnsCmd("cxi_svc_set_netns_cmd", 12) {
        /// Opcode.
        pub op: u32,
        /// Service.
        pub svc_id: u32,
        /// Network namespace id (the inode of `/proc/<pid>/ns/net`).
        pub netns: u32,
    }
}
