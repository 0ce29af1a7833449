//! Cassini sizes and limits (cassini.md §9 and the sections cited per item). Each constant
//! names the public constant or source it comes from.

/// `C_NUM_TRANSMIT_CQS` (`cassini_user_defs.h`): transmit CQs, index 0..1023.
pub const C_NUM_TRANSMIT_CQS: usize = 1024;
/// `C_NUM_TARGET_CQS` (`cassini_user_defs.h`): target CQs (ring index 1024 + n).
pub const C_NUM_TARGET_CQS: usize = 512;
/// `CXI_MAX_CQ_COUNT` (`cxi-abi.h`): most 64 B slots in a CQ ring (4 MiB).
pub const CXI_MAX_CQ_COUNT: usize = 1 << 16;
/// `C_COMM_PROF_PER_CQ` (`cassini_user_defs.h`): communication profiles one CQ may use.
pub const C_COMM_PROF_PER_CQ: usize = 16;
/// `C_CQ_CFG_CP_TABLE_ENTRIES` (csr_defs.json): device communication-profile table.
pub const C_CQ_CFG_CP_TABLE_ENTRIES: usize = 256;

/// `C_NUM_EQS` (`cassini_user_defs.h`): event queues; 0 is `C_EQ_NONE`.
pub const C_NUM_EQS: usize = 2048;
/// `C_EQ_NONE` (`cassini_user_defs.h`): "no EQ" in commands.
pub const C_EQ_NONE: u16 = 0;
/// `MAX_EQ_LEN` (`cass_eq.c`): largest EQ buffer, 4 GiB.
pub const MAX_EQ_LEN: u64 = 1 << 32;
/// `C_NUM_CTS` (`cassini_user_defs.h`): counting events; 0 is `C_CT_NONE`.
pub const C_NUM_CTS: usize = 2048;
/// `C_CT_NONE` (`cassini_user_defs.h`): "no CT" in commands.
pub const C_CT_NONE: u16 = 0;
/// `C_CT_SUCCESS_BITS` (`cassini_user_defs.h`): width of a CT success count and threshold.
pub const C_CT_SUCCESS_BITS: u32 = 48;
/// `C_CT_FAILURE_BITS` (`cassini_user_defs.h`): width of a CT failure count.
pub const C_CT_FAILURE_BITS: u32 = 7;
/// `C_NUM_TLES` (`cassini_user_defs.h`): triggered-list entries (pending triggered ops).
pub const C_NUM_TLES: usize = 2048;
/// `default_svc_num_tles` (`cass_svc.c`): TLEs the default service reserves.
pub const DEFAULT_SVC_NUM_TLES: usize = 512;

/// `C_NUM_PTLTES` (`cassini_user_defs.h`): portal table entries; index 0 never allocated.
pub const C_NUM_PTLTES: usize = 2048;
/// `C_LPE_STS_LIST_ENTRIES_ENTRIES` (csr_defs.json): list entries (LEs and unexpected
/// headers share them) = [`C_PE_COUNT`] x [`LES_PER_PE`].
pub const C_NUM_LES: usize = 65536;
/// `C_PE_COUNT` (`cassini_user_defs.h`): list-processing engines.
pub const C_PE_COUNT: usize = 4;
/// `pe_total_les` (`cass_pt.c`): LEs per processing engine.
pub const LES_PER_PE: usize = 16384;
/// LE pools per processing engine (`cass_pt.c`).
pub const LE_POOLS_PER_PE: usize = 16;
/// `PLEC_SIZE` (`cass_pt.c`): non-matching PtlTE cache entries.
pub const PLEC_SIZE: usize = 256;
/// `C_MST_DBG_MST_TABLE_ENTRIES` (csr_defs.json): outstanding target DMA state entries.
pub const C_MST_TABLE_ENTRIES: usize = 2048;
/// `C_LPE_DBG_RGET_RAM_ENTRIES` (csr_defs.json): hardware rendezvous Get state entries.
pub const C_LPE_RGET_RAM_ENTRIES: usize = 256;

/// `C_NUM_ACS` (`cassini_user_defs.h`): address contexts (0 invalid, one physical).
pub const C_NUM_ACS: usize = 1024;
/// `C_AC_NONE` (`cassini_user_defs.h`).
pub const C_AC_NONE: u16 = 0;
/// `C_NUM_LACS` (`cassini_user_defs.h`): local address contexts per RGID.
pub const C_NUM_LACS: usize = 8;
/// `C_NUM_RGIDS` (`cassini_user_defs.h`): resource group ids (0 reserved).
pub const C_NUM_RGIDS: usize = 256;
/// `C_RESERVED_RGID` (`cassini_user_defs.h`).
pub const C_RESERVED_RGID: usize = 0;
/// `C_NUM_VFS` (`cassini_user_defs.h`): SR-IOV virtual functions.
pub const C_NUM_VFS: usize = 64;
/// `C_RMU_CFG_VNI_LIST_ENTRIES` (csr_defs.json): VNI list entries.
pub const C_RMU_VNI_LIST_ENTRIES: usize = 256;
/// `CXI_SVC_MAX_VNIS` (`cxi-abi.h`): VNIs a service may list.
pub const CXI_SVC_MAX_VNIS: usize = 4;
/// `CXI_SVC_MAX_MEMBERS` (`cxi-abi.h`): members of a restricted service.
pub const CXI_SVC_MAX_MEMBERS: usize = 2;
/// `CXI_DEFAULT_SVC_ID` (`cxi-abi.h`).
pub const CXI_DEFAULT_SVC_ID: u32 = 1;

/// `C_MAX_IDC_PAYLOAD_UNR` (`cassini_user_defs.h`): inline data of an unrestricted IDC Put
/// or small message.
pub const C_MAX_IDC_PAYLOAD_UNR: usize = 192;
/// `C_MAX_IDC_PAYLOAD_RES` (`cassini_user_defs.h`): inline data of a restricted IDC Put.
pub const C_MAX_IDC_PAYLOAD_RES: usize = 224;
/// HPC payload bytes per packet: the 2048 of `C_MAX_HPC_MTU` (`cass_core.h` defines it as
/// `2048 + 64`, the 64 being the header room; see [`HPC_LINK_MTU`]).
pub const C_MAX_HPC_MTU: usize = 2048;
/// `C_MAX_HPC_MTU` as `cass_core.h` defines it (`2048 + 64`): the link MTU the driver
/// reports (`cxi_dev_info_use.link_mtu`, what `cxi_stat` prints as "Link MTU").
pub const HPC_LINK_MTU: usize = C_MAX_HPC_MTU + 64;
/// `PORTALS_MAX_FRAME_SIZE` (`cass_core.h`).
pub const PORTALS_MAX_FRAME_SIZE: usize = 2111;

/// `C_DFA_PID_BITS_MIN` (`cassini_user_defs.h`).
pub const C_DFA_PID_BITS_MIN: u32 = 6;
/// `C_DFA_PID_BITS_MAX` (`cassini_user_defs.h`).
pub const C_DFA_PID_BITS_MAX: u32 = 9;
/// Driver default `pid_bits` (module parameter, `cxi_core.c`).
pub const DEFAULT_PID_BITS: u32 = 9;
/// `C_DFA_NIC_BITS` (`cassini_user_defs.h`): width of a NID.
pub const C_DFA_NIC_BITS: u32 = 20;
/// Bits of an endpoint (PID + PtlTE index): `C_DFA_ENDPOINT_BITS` = 12 + 5.
pub const C_DFA_ENDPOINT_BITS: u32 = 17;

/// Width of `match_bits`, `header_data` and `ignore_bits`.
pub const MATCH_BITS_WIDTH: u32 = 64;
/// Width of `request_len`: messages up to 4 GiB - 1.
pub const REQUEST_LEN_BITS: u32 = 32;
/// Width of `eager_length`.
pub const EAGER_LENGTH_BITS: u32 = 20;
/// Width of `remote_offset`.
pub const REMOTE_OFFSET_BITS: u32 = 56;
/// Width of an IOVA (`local_addr`, `start`).
pub const IOVA_BITS: u32 = 57;
/// Width of a PtlTE `drop_count`.
pub const DROP_COUNT_BITS: u32 = 24;

const _: () = assert!(C_MAX_IDC_PAYLOAD_UNR < C_MAX_IDC_PAYLOAD_RES);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistent() {
        assert_eq!(C_PE_COUNT * LES_PER_PE, C_NUM_LES);
        assert_eq!(C_DFA_ENDPOINT_BITS, 12 + 5);
        assert_eq!(CXI_MAX_CQ_COUNT * 64, 4 << 20);
    }
}
