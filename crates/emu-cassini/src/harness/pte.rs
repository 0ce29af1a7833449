//! Portal table entries and the LPE's configuration, programmed with CSR stores as the
//! driver does: the PtlTE, its VNI and portal TCAM entries, rendezvous Gets, LE pools.

use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::dfa::{PidBits, build_dfa};
use firmware_spec::cassini::le::{PtAllocOpts, PtlteState};

use super::error::HarnessError;
use super::fixed::RGID;
use super::node::Node;

impl Node {
    /// Rendezvous Gets as the driver programs them (`c_lpe_cfg_get_ctrl`): to index
    /// `rdzv_get_idx` 255 of the initiator's PID granule, transaction type 0xF, issued by
    /// the NIC if `enable` (`rdzv_get_en`).
    pub fn set_rendezvous_gets(&self, enable: bool) -> Result<(), HarnessError> {
        use f::c_lpe_cfg_get_ctrl as g;
        let (d, ext) = build_dfa(0, 0, PidBits::DEFAULT, 255);
        self.csr_write(
            csr::C_LPE_CFG_GET_CTRL,
            0,
            &[
                (g::GET_INDEX, u64::from(d & 0xFFF)),
                (g::GET_INDEX_EXT, u64::from(ext)),
                (g::TRANSACTION_TYPE, 0xF),
                (g::GET_EN, u64::from(enable)),
            ],
        )
    }

    /// Limits of LE pool `pool` of processing engine `pe` (`c_lpe_cfg_pe_le_pools`); the
    /// harness's PtlTEs use PE 0, pool 0.
    pub fn set_le_pool(
        &self,
        pe: u8,
        pool: u8,
        num_reserved: u32,
        max_alloc: u32,
    ) -> Result<(), HarnessError> {
        use f::c_lpe_cfg_pe_le_pools as l;
        self.csr_write(
            csr::C_LPE_CFG_PE_LE_POOLS,
            u32::from(pe) * 16 + u32::from(pool),
            &[
                (l::NUM_RESERVED, u64::from(num_reserved)),
                (l::MAX_ALLOC, u64::from(max_alloc)),
            ],
        )
    }

    /// PtlTE `pt` (DISABLED, options `opts`, events to `eq`), reachable at (`vni`, `pid`,
    /// index `idx`) through VNI TCAM entry `vni_slot` and portal TCAM entry `portal_slot`.
    #[allow(clippy::too_many_arguments)]
    pub fn alloc_pte(
        &self,
        pt: u16,
        eq: u16,
        opts: PtAllocOpts,
        vni: u16,
        pid: u32,
        idx: u32,
        vni_slot: u32,
        portal_slot: u32,
    ) -> Result<(), HarnessError> {
        use f::c_lpe_cfg_ptl_table as p;
        let o = |x: PtAllocOpts| u64::from(opts.contains(x));
        self.csr_write(
            csr::C_CQ_CFG_PTLTE_RGID_TABLE,
            u32::from(pt),
            &[(f::c_cq_cfg_ptlte_rgid_table::RGID, u64::from(RGID))],
        )?;
        self.csr_write(
            csr::C_LPE_CFG_PTL_TABLE,
            u32::from(pt),
            &[
                (p::EQ_HANDLE, u64::from(eq)),
                (p::EQ_HANDLE_NO_RGET, u64::from(eq)),
                (p::EN_FLOWCTRL, o(PtAllocOpts::EN_FLOWCTRL)),
                (p::USE_LONG_EVENT, o(PtAllocOpts::USE_LONG_EVENT)),
                (p::EN_EVENT_MATCH, o(PtAllocOpts::EN_EVENT_MATCH)),
                (p::USE_LOGICAL, o(PtAllocOpts::USE_LOGICAL)),
                (p::IS_MATCHING, o(PtAllocOpts::IS_MATCHING)),
                (p::DO_SPACE_CHECK, o(PtAllocOpts::DO_SPACE_CHECK)),
                (p::EN_SW_HW_ST_CHNG, o(PtAllocOpts::EN_SW_HW_ST_CHNG)),
                (
                    p::EN_RESTRICTED_UNICAST_LM,
                    o(PtAllocOpts::EN_RESTRICTED_UNICAST_LM),
                ),
                (p::SIGNAL_INVALID, o(PtAllocOpts::SIGNAL_INVALID)),
                (p::SIGNAL_UNDERFLOW, o(PtAllocOpts::SIGNAL_UNDERFLOW)),
                (p::SIGNAL_OVERFLOW, o(PtAllocOpts::SIGNAL_OVERFLOW)),
                (p::SIGNAL_INEXACT, o(PtAllocOpts::SIGNAL_INEXACT)),
                (p::PTL_STATE, u64::from(u8::from(PtlteState::Disabled))),
            ],
        )?;
        // RMU: exact VNI, exact (index_ext, endpoint, vni_list_idx).
        let mask16 = 0xFFFF;
        self.csr_write(
            csr::C_RMU_CFG_VNI_LIST_X,
            vni_slot,
            &[(f::c_rmu_cfg_vni_list_x::VNI, u64::from(vni))],
        )?;
        self.csr_write(
            csr::C_RMU_CFG_VNI_LIST_Y,
            vni_slot,
            &[(f::c_rmu_cfg_vni_list_y::VNI, !u64::from(vni) & mask16)],
        )?;
        let (dfa, ext) = build_dfa(0, pid, PidBits::DEFAULT, idx);
        let key = u64::from(ext) | (u64::from(dfa & 0xFFF) << 5) | (u64::from(vni_slot) << 24);
        let mask = 0x1F | (0xFFF << 5) | (1 << 20) | (0xFF << 24);
        self.csr_write_image(
            csr::C_RMU_CFG_PORTAL_LIST_X,
            portal_slot,
            &key.to_le_bytes(),
        )?;
        self.csr_write_image(
            csr::C_RMU_CFG_PORTAL_LIST_Y,
            portal_slot,
            &(!key & mask).to_le_bytes(),
        )?;
        let entry = portal_slot / 4;
        let mut img = self.csr_read(csr::C_RMU_CFG_PORTAL_INDEX_TABLE, entry)?;
        let fld = match portal_slot % 4 {
            0 => f::c_rmu_cfg_portal_index_table::N0_PHYS_PORTAL_TABLE_IDX,
            1 => f::c_rmu_cfg_portal_index_table::N1_PHYS_PORTAL_TABLE_IDX,
            2 => f::c_rmu_cfg_portal_index_table::N2_PHYS_PORTAL_TABLE_IDX,
            _ => f::c_rmu_cfg_portal_index_table::N3_PHYS_PORTAL_TABLE_IDX,
        };
        fld.set(&mut img, u64::from(pt));
        self.csr_write_image(csr::C_RMU_CFG_PORTAL_INDEX_TABLE, entry, &img)
    }
}
