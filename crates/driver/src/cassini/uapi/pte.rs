//! Portal-table-entry requests (`cxi_pte_*`).

use super::*;

uapi_struct! {

    /// PTE_ALLOC.
    pub struct PteAllocCmd("cxi_pte_alloc_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// LNI.
        pub lni_hndl: u32,
        /// EQ for its events (0 = none).
        pub evtq_hndl: u32,
        /// `struct cxi_pt_alloc_opts` (`firmware_spec::cassini::le::PtAllocOpts`).
        pub opts: u64,
    }
    /// PTE_ALLOC response.
    pub struct PteAllocResp("cxi_pte_alloc_resp", 4) {
        /// PtlTE number.
        pub pte_number: u32,
    }
    /// PTE_FREE.
    pub struct PteFreeCmd("cxi_pte_free_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// PtlTE number.
        pub pte_number: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// PTE_MAP.
    pub struct PteMapCmd("cxi_pte_map_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// PtlTE number.
        pub pte_number: u32,
        /// Domain handle.
        pub domain_hndl: u32,
        /// Index in the PID granule, or a `union cxi_pte_map_offset` for multicast.
        pub pid_offset: u32,
        /// Multicast mapping (C `bool`).
        pub is_multicast: u8,
        /// Padding.
        pub pad1: [u8; 3],
    }
    /// PTE_MAP response.
    pub struct PteMapResp("cxi_pte_map_resp", 4) {
        /// The mapping's handle (its RMU entry).
        pub pte_index: u32,
    }
    /// PTE_UNMAP.
    pub struct PteUnmapCmd("cxi_pte_unmap_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// Mapping handle.
        pub pte_index: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// PTE_LE_INVALIDATE.
    pub struct PteLeInvalidateCmd("cxi_pte_le_invalidate_cmd", 16) {
        /// Opcode.
        pub op: u32,
        /// PtlTE number.
        pub pte_index: u32,
        /// Buffer id of the LE.
        pub buffer_id: u32,
        /// `enum c_ptl_list`.
        pub list: u32,
    }
    /// `struct cxi_pte_status`; also the PTE_STATUS response. `ule_offsets`/`ule_count` are
    /// read from the caller's response buffer first (an array in user memory to fill).
    pub struct PteStatus("cxi_pte_status", 32) {
        /// Drop count.
        pub drop_count: u32,
        /// `enum c_ptlte_state`.
        pub state: u8,
        /// Padding.
        pub pad0: u8,
        /// LEs reserved in its pool.
        pub les_reserved: u16,
        /// LEs allocated in its pool.
        pub les_allocated: u16,
        /// Pool limit.
        pub les_max: u16,
        /// Padding.
        pub pad1: u32,
        /// User address of a `u64` array for the unexpected headers' offsets (0 = none).
        pub ule_offsets: u64,
        /// In: the array's length. Out: offsets written.
        pub ule_count: u16,
        /// Padding.
        pub pad2: [u8; 6],
    }
    /// PTE_STATUS.
    pub struct PteStatusCmd("cxi_pte_status_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// PtlTE number.
        pub pte_index: u32,
        /// Padding.
        pub pad1: u32,
    }
    /// PTE_TRANSITION_SM.
    pub struct PteTransitionSmCmd("cxi_pte_transition_sm_cmd", 24) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
        /// PtlTE number.
        pub pte_index: u32,
        /// Expected drop count.
        pub drop_count: u32,
    }
}
