//! The portal table (cass_pt.c): PtlTEs, their state, LE pools, the list-entry RAM and
//! match-state cancels.

use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::limits;

use super::access::{CassHw, HwError, field_of_qword};

/// Settings of one PtlTE.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PtlteConfig {
    /// `struct cxi_pt_alloc_opts` as a word.
    pub opts: u64,
    /// EQ for its events (0 = none).
    pub eq: u32,
    /// Resource group of the owning LNI.
    pub rgid: u32,
    /// List-processing engine.
    pub pe: u32,
    /// LE pool within the PE.
    pub le_pool: u32,
}

impl CassHw {
    /// Program PtlTE `n` in the DISABLED state.
    pub fn ptlte_enable(&self, n: u32, c: &PtlteConfig) -> Result<(), HwError> {
        use f::c_lpe_cfg_ptl_table as p;
        use firmware_spec::cassini::le::PtAllocOpts as o;
        let has = |flag: o| u64::from(c.opts & flag.bits() != 0);
        self.write_fields(
            csr::C_CQ_CFG_PTLTE_RGID_TABLE,
            n,
            &[(f::c_cq_cfg_ptlte_rgid_table::RGID, u64::from(c.rgid))],
        )?;
        self.write_fields(
            csr::C_LPE_CFG_PTL_TABLE,
            n,
            &[
                (p::CLR_REMOTE_OFFSET, has(o::CLR_REMOTE_OFFSET)),
                (p::EN_FLOWCTRL, has(o::EN_FLOWCTRL)),
                (p::USE_LONG_EVENT, has(o::USE_LONG_EVENT)),
                (p::LOSSLESS, has(o::LOSSLESS)),
                (p::EN_EVENT_MATCH, has(o::EN_EVENT_MATCH)),
                (p::EQ_HANDLE, u64::from(c.eq)),
                (p::EQ_HANDLE_NO_RGET, u64::from(c.eq)),
                (p::LE_POOL, u64::from(c.le_pool)),
                (
                    p::EN_RESTRICTED_UNICAST_LM,
                    has(o::EN_RESTRICTED_UNICAST_LM),
                ),
                (p::USE_LOGICAL, has(o::USE_LOGICAL)),
                (p::IS_MATCHING, has(o::IS_MATCHING)),
                (p::DO_SPACE_CHECK, has(o::DO_SPACE_CHECK)),
                (p::PE_NUM, u64::from(c.pe)),
                (p::EN_ALIGN_LM, has(o::EN_ALIGN_LM)),
                (p::EN_MATCH_ON_VNI, has(o::EN_MATCH_ON_VNI)),
                (p::EN_SW_HW_ST_CHNG, has(o::EN_SW_HW_ST_CHNG)),
                (p::SIGNAL_INVALID, has(o::SIGNAL_INVALID)),
                (p::SIGNAL_UNDERFLOW, has(o::SIGNAL_UNDERFLOW)),
                (p::SIGNAL_OVERFLOW, has(o::SIGNAL_OVERFLOW)),
                (p::SIGNAL_INEXACT, has(o::SIGNAL_INEXACT)),
                (
                    p::PTL_STATE,
                    u64::from(u8::from(firmware_spec::cassini::le::PtlteState::Disabled)),
                ),
            ],
        )
    }

    /// Return PtlTE `n` to its reset state (RESET, no EQ, no lists).
    pub fn ptlte_disable(&self, n: u32) -> Result<(), HwError> {
        self.reset_entry(csr::C_LPE_CFG_PTL_TABLE, n)?;
        self.reset_entry(csr::C_CQ_CFG_PTLTE_RGID_TABLE, n)
    }

    /// The state and drop count of PtlTE `n` (`ptl_state`, `drop_count`).
    pub fn ptlte_state(&self, n: u32) -> Result<(u8, u32), HwError> {
        use f::c_lpe_cfg_ptl_table as p;
        let qw = self.read_qword(csr::C_LPE_CFG_PTL_TABLE, n, 3)?;
        Ok((
            field_of_qword(p::PTL_STATE, 3, qw) as u8,
            field_of_qword(p::DROP_COUNT, 3, qw) as u32,
        ))
    }

    /// Set the state of PtlTE `n` (qword 3 only, keeping its drop count).
    pub fn ptlte_set_state(&self, n: u32, state: u8) -> Result<(), HwError> {
        self.update_fields(
            csr::C_LPE_CFG_PTL_TABLE,
            n,
            &[(f::c_lpe_cfg_ptl_table::PTL_STATE, u64::from(state))],
        )
    }

    /// Move PtlTE `n` from DISABLED to SOFTWARE_MANAGED if its drop count is still `drops`:
    /// one write of the state and the expected count, which the device checks against its
    /// own count, then the state read back; `true` if the PtlTE moved.
    pub fn ptlte_transition_sm(&self, n: u32, drops: u32) -> Result<bool, HwError> {
        use f::c_lpe_cfg_ptl_table as p;
        let sm = u8::from(firmware_spec::cassini::le::PtlteState::SoftwareManaged);
        self.update_fields(
            csr::C_LPE_CFG_PTL_TABLE,
            n,
            &[
                (p::PTL_STATE, u64::from(sm)),
                (p::DROP_COUNT, u64::from(drops)),
            ],
        )?;
        Ok(self.ptlte_state(n)?.0 == sm)
    }

    /// The whole PtlTE entry (lists, state, counts).
    pub fn ptlte_entry(&self, n: u32) -> Result<Vec<u8>, HwError> {
        self.read_entry(csr::C_LPE_CFG_PTL_TABLE, n)
    }

    /// `(num_reserved, num_allocated, max_alloc)` of LE pool `pool` of PE `pe`.
    pub fn le_pool_usage(&self, pe: u32, pool: u32) -> Result<(u32, u32, u32), HwError> {
        let idx = pe * limits::LE_POOLS_PER_PE as u32 + pool;
        let reserved = self.read_field(
            csr::C_LPE_CFG_PE_LE_POOLS,
            idx,
            f::c_lpe_cfg_pe_le_pools::NUM_RESERVED,
        )?;
        let max = self.read_field(
            csr::C_LPE_CFG_PE_LE_POOLS,
            idx,
            f::c_lpe_cfg_pe_le_pools::MAX_ALLOC,
        )?;
        let alloc = self.read_field(
            csr::C_LPE_STS_PE_LE_ALLOC,
            idx,
            f::c_lpe_sts_pe_le_alloc::NUM_ALLOCATED,
        )?;
        Ok((reserved as u32, alloc as u32, max as u32))
    }

    /// One unexpected-header entry of PE `pe`'s list RAM: `(start_or_offset, next, valid)`.
    pub fn ule_entry(&self, pe: u32, addr: u32) -> Result<(u64, u32, bool), HwError> {
        use f::c_ule_entry as u;
        let idx = pe * limits::LES_PER_PE as u32 + addr;
        let bytes = self.read_entry(csr::C_LPE_STS_LIST_ENTRIES, idx)?;
        Ok((
            u::START_OR_OFFSET.get(&bytes),
            u::ADDR.get(&bytes) as u32,
            u::VLD.get(&bytes) != 0,
        ))
    }

    /// Cancel outstanding target DMAs of (PtlTE, list, buffer id) with `C_RC_MST_CANCELLED`:
    /// walk `c_mst_dbg_mst_table` and issue `c_mst_cfg_rc_update` for each match
    /// (cass_pt.c `cxi_pte_le_invalidate`). Returns the number of entries cancelled.
    pub fn mst_cancel(
        &self,
        ptlte: u32,
        list: u32,
        buffer_id: u32,
        rc_cancelled: u8,
    ) -> Result<u32, HwError> {
        use f::c_mst_cfg_rc_update as r;
        use f::c_mst_dbg_mst_table as m;
        let t = csr::C_MST_DBG_MST_TABLE;
        let mut n = 0;
        for i in 0..t.entries {
            // portal_index, ptl_list and buffer_id all sit in qword 2 (bits 128..160).
            let qw = self.read_qword(t, i, 2)?;
            if field_of_qword(m::PORTAL_INDEX, 2, qw) == u64::from(ptlte)
                && field_of_qword(m::PTL_LIST, 2, qw) == u64::from(list)
                && field_of_qword(m::BUFFER_ID, 2, qw) == u64::from(buffer_id)
            {
                self.write_fields(
                    csr::C_MST_CFG_RC_UPDATE,
                    0,
                    &[
                        (r::RETURN_CODE, u64::from(rc_cancelled)),
                        (r::MST_IDX, u64::from(i)),
                        (r::BUFFER_IDX, u64::from(buffer_id)),
                        (r::PORTAL_IDX, u64::from(ptlte)),
                        (r::PTL_LIST, u64::from(list)),
                        (r::PTL_VLD, 1),
                        (r::PORTAL_VLD, 1),
                        (r::BUFFER_VLD, 1),
                    ],
                )?;
                n += 1;
            }
        }
        Ok(n)
    }
}
