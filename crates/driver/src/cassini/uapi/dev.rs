//! Device-level requests: CSR mapping, inbound wait, retry handler, properties, device info.

use super::*;

uapi_struct! {

    /// A request with no argument but the response slot (MAP_CSRS, GET_DEV_PROPERTIES,
    /// DEV_INFO_GET, RETRY_HANDLER_RUNNING).
    pub struct NoArgCmd("cxi_map_csrs_cmd", 16) {
        /// Opcode.
        pub op: u32,
        /// Padding.
        pub pad0: u32,
        /// Response pointer slot.
        pub resp: u64,
    }
    /// MAP_CSRS response.
    pub struct MapCsrsResp("cxi_map_csrs_resp", 16) {
        /// The CSR region.
        pub csr: MmInfo,
    }
    /// INBOUND_WAIT.
    pub struct InboundWaitCmd("cxi_inbound_wait_cmd", 4) {
        /// Opcode.
        pub op: u32,
    }
    /// RETRY_HANDLER_RUNNING response.
    pub struct RetryHandlerRunningResp("cxi_retry_handler_running_resp", 1) {
        /// Whether the retry handler runs (C `bool`).
        pub running: u8,
    }

    /// `struct cxi_properties_info` (GET_DEV_PROPERTIES response).
    pub struct PropertiesInfo("cxi_properties_info", 84) {
        /// NID.
        pub nid: u32,
        /// NID configured explicitly (C `bool`).
        pub nid_configured: u8,
        /// Padding.
        pub pad0: [u8; 3],
        /// PID width.
        pub pid_bits: u32,
        /// PIDs per VNI.
        pub pid_count: u32,
        /// PtlTE indices per PID.
        pub pid_granule: u32,
        /// `min_free` shift.
        pub min_free_shift: u32,
        /// PtlTE index of rendezvous Gets.
        pub rdzv_get_idx: u32,
        /// Device resources by `enum cxi_rsrc_type`.
        pub rsrcs: [Limits; 8],
        /// `c_mb_sts_rev.rev`.
        pub device_rev: u32,
        /// `c_mb_sts_rev.proto`.
        pub device_proto: u32,
        /// `c_mb_sts_rev.platform`.
        pub device_platform: u32,
        /// `enum cassini_version`.
        pub cassini_version: u32,
        /// Rendezvous Gets enabled (C `bool`).
        pub rdzv_get_en: u8,
        /// Padding.
        pub pad1: [u8; 3],
        /// AMO opcode remapped to PCIe fetch-add (-1 = none).
        pub amo_remap_to_pcie_fadd: i32,
    }
    /// `struct cxi_dev_info_use` (DEV_INFO_GET response).
    pub struct DevInfoUse("cxi_dev_info_use", 120) {
        /// NID.
        pub nid: u32,
        /// PID width.
        pub pid_bits: u32,
        /// PIDs per VNI.
        pub pid_count: u32,
        /// PtlTE indices per PID.
        pub pid_granule: u32,
        /// `min_free` shift.
        pub min_free_shift: u32,
        /// PtlTE index of rendezvous Gets.
        pub rdzv_get_idx: u32,
        /// PCI vendor id.
        pub vendor_id: u32,
        /// PCI device id.
        pub device_id: u32,
        /// Revision.
        pub device_rev: u32,
        /// Protocol.
        pub device_proto: u32,
        /// Platform.
        pub device_platform: u32,
        /// Retry handler EQ (0 = none running).
        pub pct_eq: u32,
        /// Micro-controller NIC index.
        pub uc_nic: i32,
        /// Padding.
        pub pad0: u32,
        /// Link MTU.
        pub link_mtu: u64,
        /// Link speed.
        pub link_speed: u64,
        /// Link state.
        pub link_state: u8,
        /// Padding.
        pub pad1: u8,
        /// PtlTEs.
        pub num_ptes: u16,
        /// Transmit CQs.
        pub num_txqs: u16,
        /// Target CQs.
        pub num_tgqs: u16,
        /// EQs.
        pub num_eqs: u16,
        /// CTs.
        pub num_cts: u16,
        /// ACs.
        pub num_acs: u16,
        /// TLEs.
        pub num_tles: u16,
        /// LEs.
        pub num_les: u16,
        /// FRU description.
        pub fru_description: [u8; 16],
        /// Padding.
        pub pad2: [u8; 2],
        /// `enum cassini_version`.
        pub cassini_version: u32,
        /// `enum system_type_identifier`.
        pub system_type_identifier: u32,
        /// Padding.
        pub pad3: u32,
    }
}
