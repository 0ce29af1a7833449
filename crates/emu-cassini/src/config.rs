//! The configuration an emulated Cassini is created with (NID, MSI-X vectors, LPE settings).
//! A leaf: the device reads it when it is built, and `hw` hands the blocks the parts they use.

use crate::lpe::LpeConfig;

/// Configuration of one emulated Cassini.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CassiniConfig {
    /// The NIC's 20-bit fabric address (NID), reported in `nicsim_nic_id` and used as the
    /// source address of outgoing packets (`c_oxe_cfg_fab_sfa`).
    pub nid: u32,
    /// NID of fabric port 0: the NIC with NID `n` sits on port `n - nid_base` (packets to a
    /// NID are sent to that port). Default 0 (NID = port).
    pub nid_base: u32,
    /// MSI-X vectors of the function (1..=2048; default 2048).
    pub msix_vectors: u16,
    /// Device-wide settings of the list processing engine.
    pub lpe: LpeConfig,
}

impl Default for CassiniConfig {
    fn default() -> Self {
        CassiniConfig {
            nid: 0,
            nid_base: 0,
            msix_vectors: 2048,
            lpe: LpeConfig::default(),
        }
    }
}
