//! Memory-descriptor requests (`cxi_atu_*`, `cxi_md`).

use super::*;

uapi_struct! {

    /// `struct cxi_md_hints`.
    pub struct MdHints("cxi_md_hints", 40) {
        /// Base page shift (0 = default).
        pub page_shift: i32,
        /// Huge page shift.
        pub huge_shift: i32,
        /// `enum c_ptg_mode`.
        pub ptg_mode: i32,
        /// `ptg_mode` is valid.
        pub ptg_mode_valid: u8,
        /// Padding.
        pub pad0: [u8; 3],
        /// dmabuf fd.
        pub dmabuf_fd: i32,
        /// Padding.
        pub pad1: u32,
        /// dmabuf offset.
        pub dmabuf_offset: u64,
        /// dmabuf is valid.
        pub dmabuf_valid: u8,
        /// Padding.
        pub pad2: [u8; 7],
    }
    /// ATU_MAP.
    pub struct AtuMapCmd("cxi_atu_map_cmd", 88) {
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
        /// User virtual address.
        pub va: u64,
        /// Length.
        pub len: u64,
        /// `CXI_MAP_*`.
        pub flags: u32,
        /// Padding.
        pub pad2: u32,
        /// Hints.
        pub hints: MdHints,
    }
    /// `struct cxi_md`: a memory descriptor.
    pub struct Md("cxi_md", 40) {
        /// IOVA of `va` (page aligned).
        pub iova: u64,
        /// Page-aligned virtual address.
        pub va: u64,
        /// Page-aligned length.
        pub len: u64,
        /// The LAC commands and LEs name.
        pub lac: u8,
        /// Padding.
        pub pad0: [u8; 3],
        /// Base page shift.
        pub page_shift: i32,
        /// Huge page shift.
        pub huge_shift: i32,
        /// MD id.
        pub id: u32,
    }
    /// ATU_MAP response.
    pub struct AtuMapResp("cxi_atu_map_resp", 48) {
        /// MD id.
        pub id: u32,
        /// Padding.
        pub pad0: u32,
        /// The descriptor.
        pub md: Md,
    }
    /// ATU_UNMAP.
    pub struct AtuUnmapCmd("cxi_atu_unmap_cmd", 8) {
        /// Opcode.
        pub op: u32,
        /// MD id.
        pub id: u32,
    }
    /// ATU_UPDATE_MD.
    pub struct AtuUpdateMdCmd("cxi_atu_update_md_cmd", 32) {
        /// Opcode.
        pub op: u32,
        /// MD id.
        pub id: u32,
        /// User virtual address (inside the MD).
        pub va: u64,
        /// Length.
        pub len: u64,
        /// `CXI_MAP_*`.
        pub flags: u32,
        /// Padding.
        pub pad0: u32,
    }
}
