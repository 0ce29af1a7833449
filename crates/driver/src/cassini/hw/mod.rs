//! `cass_*`: hardware access. Every function here programs the NIC through BAR0 CSR stores,
//! exactly as `docs/cassini-programming.md` (the driver/device contract) fixes, using the
//! generated CSR map (`firmware_spec::cassini::csr`) for every offset and field.
//!
//! CSR entries are read and written as naturally aligned 64-bit accesses, lowest qword first.
//! Where a field enables an entry, the entry is written disabled first and the enable qword
//! last, so the device never sees a half-programmed enabled entry.
//!
//! Modules, after the driver's files: `access` (CSR access), `identity` (cass_core.c),
//! `atu`, `cq` (profiles, CQs, TLE pools), `eq`, `pt` (portal table), `rmu`, `ct`, `irq`,
//! `pages` (BAR0 offsets of the pages software maps).

mod access;
mod atu;
mod cq;
mod ct;
mod eq;
mod identity;
mod irq;
mod pages;
mod pt;
mod rmu;

pub use access::{CassHw, HwError};
pub use atu::TaMode;
pub use cq::CqConfig;
pub use eq::EqConfig;
pub use identity::{Identity, InitError};
pub use pages::{
    csr_region_offset, ct_doorbell_offset, eq_sw_state_offset, tgq_launch_offset, txq_launch_offset,
};
pub use pt::PtlteConfig;
pub use rmu::PortalKey;
