//! Where the pages software maps lie in BAR0: CQ launch pages, EQ software-state pages, CT
//! doorbells, the CSR region.

use firmware_spec::cassini::pci::{self as cpci, CSR_BASE};

/// BAR0 offset of transmit CQ `n`'s launch page (`C_CQ_LAUNCH_TXQ_BASE + n * 64 KiB`).
pub fn txq_launch_offset(n: u32) -> u64 {
    cpci::CQ_LAUNCH_TXQ_BASE + u64::from(n) * cpci::CQ_LAUNCH_PAGE_SIZE
}

/// BAR0 offset of target CQ `n`'s launch page.
pub fn tgq_launch_offset(n: u32) -> u64 {
    cpci::CQ_LAUNCH_TGT_BASE + u64::from(n) * cpci::CQ_LAUNCH_PAGE_SIZE
}

/// BAR0 offset of EQ `n`'s software-state page.
pub fn eq_sw_state_offset(n: u32) -> u64 {
    cpci::EE_SW_STATE_BASE + u64::from(n) * cpci::EE_SW_STATE_PAGE_SIZE
}

/// BAR0 offset of CT `n`'s doorbell page.
pub fn ct_doorbell_offset(n: u32) -> u64 {
    cpci::TOU_BASE + u64::from(n) * cpci::TOU_LAUNCH_PAGE_SIZE
}

/// BAR0 offset of the CSR region.
pub const fn csr_region_offset() -> u64 {
    CSR_BASE
}
