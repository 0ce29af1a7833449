//! Identity and defaults at probe time (cass_core.c: is_supported, the NID under NETSIM,
//! the defaults the driver programs).

use firmware_spec::cassini::csr::{self, fields as f};
use firmware_spec::cassini::dfa::{self, PidBits};
use firmware_spec::cassini::limits;
use firmware_spec::cassini::pci::{CassiniVersion, MbStsRev, Platform};
use thiserror::Error;

use super::access::{CassHw, HwError, mask};
use super::atu::TaMode;

/// The identity a device reports at probe time.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The raw `c_mb_sts_rev`.
    pub sts_rev: MbStsRev,
    /// Chip version.
    pub version: CassiniVersion,
    /// Platform.
    pub platform: Platform,
    /// The NIC's 20-bit NID.
    pub nid: u32,
}

/// Why `cass_init` refused a device.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InitError {
    /// The CSR reads failed.
    #[error(transparent)]
    Hw(#[from] HwError),
    /// `c_mb_sts_rev` names another device than the PCI ids.
    #[error("c_mb_sts_rev reports {vendor:04x}:{device:04x}, PCI config says {pci}")]
    IdMismatch {
        /// Vendor id in the CSR.
        vendor: u16,
        /// Device id in the CSR.
        device: u16,
        /// The PCI id.
        pci: String,
    },
    /// Unknown revision.
    #[error("unknown Cassini revision {rev} of device {device:04x}")]
    UnknownRevision {
        /// The `rev` field.
        rev: u16,
        /// The device id.
        device: u16,
    },
    /// The platform is one the driver does not drive (FPGA, or unknown).
    #[error("unsupported platform {0}")]
    Platform(u8),
}

impl CassHw {
    /// Read `c_mb_sts_rev`, check it against the PCI ids and the supported platforms, read the
    /// NID (`nicsim_nic_id` on NETSIM, else the source fabric address `c_oxe_cfg_fab_sfa`).
    pub fn identify(&self, pci_vendor: u16, pci_device: u16) -> Result<Identity, InitError> {
        let sts_rev = MbStsRev::from_u64(self.read_qword(csr::C_MB_STS_REV, 0, 0)?);
        if sts_rev.vendor_id != pci_vendor || sts_rev.device_id != pci_device {
            return Err(InitError::IdMismatch {
                vendor: sts_rev.vendor_id,
                device: sts_rev.device_id,
                pci: format!("{pci_vendor:04x}:{pci_device:04x}"),
            });
        }
        let version = sts_rev.version().ok_or(InitError::UnknownRevision {
            rev: sts_rev.rev,
            device: sts_rev.device_id,
        })?;
        let platform = sts_rev
            .platform()
            .filter(|p| p.driver_supported())
            .ok_or(InitError::Platform(sts_rev.platform))?;
        let nid = if platform == Platform::Netsim {
            self.read_field(csr::NICSIM_NIC_ID, 0, f::nicsim_nic_id::ID)?
                & mask(limits::C_DFA_NIC_BITS)
        } else {
            self.read_field(csr::C_OXE_CFG_FAB_SFA, 0, f::c_oxe_cfg_fab_sfa::NID)?
        };
        Ok(Identity {
            sts_rev,
            version,
            platform,
            nid: nid as u32,
        })
    }

    /// Device-wide settings made once at probe (and after a reset): the source fabric
    /// address, `pid_bits`, the rendezvous Get target, CQ status policies, the LE pools and the
    /// physical (passthrough) address context.
    pub fn init_defaults(
        &self,
        nid: u32,
        pid_bits: PidBits,
        rdzv_get_idx: u32,
        phys_acid: u32,
        phys_mem_pages: u64,
    ) -> Result<(), HwError> {
        self.update_fields(
            csr::C_OXE_CFG_FAB_SFA,
            0,
            &[(f::c_oxe_cfg_fab_sfa::NID, u64::from(nid))],
        )?;
        self.update_fields(
            csr::C_LPE_CFG_INITIATOR_CTRL,
            0,
            &[(
                f::c_lpe_cfg_initiator_ctrl::PID_BITS,
                u64::from(pid_bits.get()),
            )],
        )?;
        // Rendezvous Gets go to index `rdzv_get_idx` of the initiator's PID (cassini.md §6):
        // the endpoint bits of (PID 0, rdzv_get_idx); the transaction type the driver uses is 0xF.
        let (dfa, index_ext) = dfa::build_dfa(0, 0, pid_bits, rdzv_get_idx);
        self.update_fields(
            csr::C_LPE_CFG_GET_CTRL,
            0,
            &[
                (
                    f::c_lpe_cfg_get_ctrl::GET_INDEX,
                    u64::from(dfa::dfa_ep(dfa)),
                ),
                (f::c_lpe_cfg_get_ctrl::GET_INDEX_EXT, u64::from(index_ext)),
                (f::c_lpe_cfg_get_ctrl::TRANSACTION_TYPE, 0xF),
                (f::c_lpe_cfg_get_ctrl::GET_EN, 1),
            ],
        )?;
        // Status write-back policies (cass_cq.c): ALWAYS shift 0, HIGH_FREQ_EMPTY shift 4 +
        // empty, LOW_FREQ_EMPTY shift 8 + empty, LOW_FREQ shift 8.
        use f::c_cq_cfg_cq_policy as p;
        self.write_fields(
            csr::C_CQ_CFG_CQ_POLICY,
            0,
            &[
                (p::POLICY_0_SHIFT, 0),
                (p::POLICY_0_EMPTY, 0),
                (p::POLICY_1_SHIFT, 4),
                (p::POLICY_1_EMPTY, 1),
                (p::POLICY_2_SHIFT, 8),
                (p::POLICY_2_EMPTY, 1),
                (p::POLICY_3_SHIFT, 8),
                (p::POLICY_3_EMPTY, 0),
            ],
        )?;
        // LE pool 0 of every PE may use the whole PE (cass_pt.c pe_total_les).
        for pe in 0..limits::C_PE_COUNT as u32 {
            let idx = pe * limits::LE_POOLS_PER_PE as u32;
            self.write_fields(
                csr::C_LPE_CFG_PE_LE_POOLS,
                idx,
                &[
                    (f::c_lpe_cfg_pe_le_pools::NUM_RESERVED, 0),
                    (
                        f::c_lpe_cfg_pe_le_pools::MAX_ALLOC,
                        limits::LES_PER_PE as u64,
                    ),
                ],
            )?;
        }
        self.ac_enable(phys_acid, TaMode::Passthrough, 0, 0, phys_mem_pages)?;
        Ok(())
    }
}
