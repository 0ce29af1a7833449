//! Address contexts, LAC -> AC and invalidation (cass_atu.c).

use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::limits;

use super::access::{CassHw, HwError};

/// `ta_mode` of an address context (`enum c_ta_mode`, cassini.md §7).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TaMode {
    /// ATS (PCIe address translation services).
    Ats = 0,
    /// On-NIC page tables in host memory.
    Nta = 1,
    /// ATS, dynamic.
    AtsDynamic = 2,
    /// IOVA is a bus address.
    Passthrough = 3,
}

impl CassHw {
    /// Program AC `acid`: `ta_mode`, IOVA bounds in 4 KiB pages, NTA root table address.
    pub fn ac_enable(
        &self,
        acid: u32,
        mode: TaMode,
        root: u64,
        mem_base_pages: u64,
        mem_size_pages: u64,
    ) -> Result<(), HwError> {
        use f::c_atu_cfg_ac_table as a;
        let t = csr::C_ATU_CFG_AC_TABLE;
        let mut bytes = t.reset_bytes();
        a::TA_MODE.set(&mut bytes, mode as u64);
        a::BASE_PG_SIZE.set(&mut bytes, 0);
        a::MEM_BASE.set(&mut bytes, mem_base_pages);
        a::MEM_SIZE.set(&mut bytes, mem_size_pages);
        // `nta_root_ptr` holds address bits 12..57 at bits 12..57.
        a::NTA_ROOT_PTR.set(&mut bytes, root >> 12);
        a::CONTEXT_EN.set(&mut bytes, 0);
        self.write_entry(t, acid, &bytes)?;
        self.update_fields(t, acid, &[(a::CONTEXT_EN, 1)])
    }

    /// Disable AC `acid` and clear it.
    pub fn ac_disable(&self, acid: u32) -> Result<(), HwError> {
        self.reset_entry(csr::C_ATU_CFG_AC_TABLE, acid)
    }

    /// Point LAC `lac` of resource group `rgid` at AC `acid` (0 = none).
    pub fn lac_set(&self, rgid: u32, lac: u32, acid: u32) -> Result<(), HwError> {
        let idx = rgid * limits::C_NUM_LACS as u32 + lac;
        self.write_fields(
            csr::C_CQ_CFG_AC_ARRAY,
            idx,
            &[(f::c_cq_cfg_ac_array::AC, u64::from(acid))],
        )
    }

    /// Drop the device's cached translations of AC `acid` (the whole context: `inval_size` = 1
    /// in our reading of `c_atu_cfg_cq_table`), around `iova`.
    pub fn atu_invalidate(&self, acid: u32, iova: u64) -> Result<(), HwError> {
        use f::c_atu_cfg_cq_table as c;
        let t = csr::C_ATU_CFG_CQ_TABLE;
        let mut bytes = t.reset_bytes();
        c::INVAL_ACID.set(&mut bytes, u64::from(acid));
        c::INVAL_ADDR.set(&mut bytes, iova >> 12);
        c::INVAL_SIZE.set(&mut bytes, 1);
        c::CMD.set(&mut bytes, 1);
        self.write_entry(t, 0, &bytes)
    }
}
