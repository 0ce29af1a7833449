//! Interrupts (cass_irq.c): the MSI-X table.

use firmware_spec::cassini::csr::{self, fields as f};

use super::access::{CassHw, HwError};

impl CassHw {
    /// Program MSI-X table entries `0..count`: message address/data and unmasked.
    pub fn msix_program(&self, count: u32) -> Result<(), HwError> {
        use f::c_pi_ipd_cfg_msix_table as m;
        // The x86 interrupt address window; the emulated platform delivers by vector.
        const MSI_ADDR: u64 = 0xFEE0_0000;
        for v in 0..count {
            self.write_fields(
                csr::C_PI_IPD_CFG_MSIX_TABLE,
                v,
                &[
                    (m::MSG_ADDR, MSI_ADDR),
                    (m::MSG_DATA, u64::from(v)),
                    (m::VECTOR_CTL_MASK, 0),
                ],
            )?;
        }
        Ok(())
    }

    /// Mask every MSI-X table entry `0..count`.
    pub fn msix_mask(&self, count: u32) -> Result<(), HwError> {
        for v in 0..count {
            self.reset_entry(csr::C_PI_IPD_CFG_MSIX_TABLE, v)?;
        }
        Ok(())
    }
}
