//! Counting events (cass_ct.c).

use firmware_spec::cassini::csr::{self, fields as f};

use super::access::{CassHw, HwError};

impl CassHw {
    /// Program and enable CT `n`: write-back address (translated through `acid`) and RGID.
    pub fn ct_enable(&self, n: u32, acid: u32, wb: u64, rgid: u32) -> Result<(), HwError> {
        self.ct_set_wb(n, acid, wb)?;
        self.write_fields(
            csr::C_CQ_CFG_CT_RGID_TABLE,
            n,
            &[(f::c_cq_cfg_ct_rgid_table::RGID, u64::from(rgid))],
        )?;
        self.write_fields(
            csr::C_CQ_CFG_CT_ENABLE,
            n,
            &[(f::c_cq_cfg_ct_enable::CT_ENABLE, 1)],
        )
    }

    /// Move CT `n`'s write-back buffer.
    pub fn ct_set_wb(&self, n: u32, acid: u32, wb: u64) -> Result<(), HwError> {
        self.write_fields(
            csr::C_CQ_CFG_CT_WB_MEM_ADDR,
            n,
            &[
                (f::c_cq_cfg_ct_wb_mem_addr::WB_MEM_CONTEXT, u64::from(acid)),
                (f::c_cq_cfg_ct_wb_mem_addr::WB_MEM_ADDR, wb >> 3),
            ],
        )
    }

    /// Disable CT `n` and clear it.
    pub fn ct_disable(&self, n: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_CQ_CFG_CT_ENABLE,
            n,
            &[(f::c_cq_cfg_ct_enable::CT_ENABLE, 0)],
        )?;
        self.reset_entry(csr::C_CQ_CFG_CT_WB_MEM_ADDR, n)?;
        self.reset_entry(csr::C_CQ_CFG_CT_RGID_TABLE, n)
    }
}
