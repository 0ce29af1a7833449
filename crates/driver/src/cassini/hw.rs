//! `cass_*`: hardware access. Every function here programs the NIC through BAR0 CSR stores,
//! exactly as `docs/cassini-programming.md` (the driver/device contract) fixes, using the
//! generated CSR map (`firmware_spec::cassini::csr`) for every offset and field.
//!
//! CSR entries are read and written as naturally aligned 64-bit accesses, lowest qword first.
//! Where a field enables an entry, the entry is written disabled first and the enable qword
//! last, so the device never sees a half-programmed enabled entry.

use std::sync::Arc;

use emu_core::mmio::{Mmio, MmioError};
use firmware_spec::cassini::csr::{self, Csr, Field, fields as f};
use firmware_spec::cassini::dfa::{self, PidBits};
use firmware_spec::cassini::limits;
use firmware_spec::cassini::pci::{
    self as cpci, CSR_BASE, CassiniVersion, Generation, MbStsRev, Platform,
};
use thiserror::Error;

use crate::mem::MemError;

/// Why a hardware access failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HwError {
    /// A BAR access failed (the device refused it or is gone).
    #[error("MMIO access to {csr}[{index}] failed: {source}")]
    Mmio {
        /// The register.
        csr: &'static str,
        /// Its entry.
        index: u32,
        /// The MMIO error.
        source: MmioError,
    },
    /// An entry index beyond the register's entries.
    #[error("{csr} has no entry {index}")]
    NoEntry {
        /// The register.
        csr: &'static str,
        /// The entry asked for.
        index: u32,
    },
    /// A field the contract names is missing from the CSR map.
    #[error("{csr} has no field {field}")]
    NoField {
        /// The register.
        csr: &'static str,
        /// The field.
        field: String,
    },
    /// Host memory (page tables, rings) could not be reached.
    #[error(transparent)]
    Memory(#[from] MemError),
}

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

/// Settings of one transmit or target command queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CqConfig {
    /// Bus address of the ring (4 KiB aligned).
    pub ring: u64,
    /// Number of 64 B slots (a power of two).
    pub slots: u32,
    /// EQ for COMMAND_FAILURE events (0 = none).
    pub eq: u32,
    /// Resource group of the owning LNI.
    pub rgid: u32,
    /// Initial LCID (transmit only).
    pub lcid: u32,
    /// Status write-back policy (`enum cxi_cq_update_policy`).
    pub policy: u8,
    /// AC the ring address is translated through.
    pub acid: u32,
    /// Statistics counter pool.
    pub stat_cnt_pool: u8,
    /// Trigger queue (transmit only).
    pub trig: bool,
    /// TLE pool of the owning service (transmit only; `mem_q_pfq`, low 2 bits).
    pub tle_pool: u8,
}

/// Settings of one event queue.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EqConfig {
    /// Resource group of the owning LNI (`c_cq_cfg_eq_rgid_table`): commands of queues of
    /// other groups may not name this EQ.
    pub rgid: u32,
    /// Buffer address (IOVA in `acid`, 4 KiB aligned).
    pub addr: u64,
    /// Buffer size in bytes (whole 4 KiB pages).
    pub len: u64,
    /// AC of the buffer.
    pub acid: u32,
    /// Event slots reserved for flow control.
    pub reserved_fc: u32,
    /// MSI-X vector for events.
    pub event_irq: Option<u32>,
    /// MSI-X vector for status write-backs.
    pub status_irq: Option<u32>,
    /// Write the status block on drops.
    pub drop_status: bool,
    /// Number of fill thresholds (0..=4).
    pub thresh_count: u32,
    /// First threshold, percent.
    pub thresh_base: u32,
    /// Threshold step, percent.
    pub thresh_delta: u32,
    /// Event-combining latency tolerance (driver units).
    pub latency_tolerance: u32,
    /// Long format for initiator events.
    pub init_long: bool,
    /// Long format for target events.
    pub tgt_long: bool,
}

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

/// What a portal TCAM entry matches.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PortalKey {
    /// `index_ext` (5 bits).
    pub index_ext: u32,
    /// `endpoint_defined` (12 bits), or the multicast id (13 bits) when `is_multicast`.
    pub endpoint: u32,
    /// Multicast entry.
    pub is_multicast: bool,
    /// The VNI list entry.
    pub vni_list_idx: u32,
}

/// A field that lies inside qword `index` of an entry, taken from that qword's value.
fn field_of_qword(field: &Field, index: u32, qw: u64) -> u64 {
    let shift = field.bit.saturating_sub(index * 64);
    (qw >> shift) & mask(field.width)
}

/// Bytes of a CSR qword.
const QW: u64 = 8;

fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// BAR0 access plus the chip generation: the `cass_dev` of this driver.
#[derive(Clone)]
pub struct CassHw {
    bar: Arc<dyn Mmio>,
    generation: Generation,
}

impl std::fmt::Debug for CassHw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CassHw")
            .field("bar_size", &self.bar.size())
            .field("generation", &self.generation)
            .finish()
    }
}

impl CassHw {
    /// Hardware access over BAR0 of a device of `generation`.
    pub fn new(bar: Arc<dyn Mmio>, generation: Generation) -> Self {
        CassHw { bar, generation }
    }

    /// The BAR0 handle.
    pub fn bar(&self) -> &Arc<dyn Mmio> {
        &self.bar
    }

    /// The chip generation.
    pub fn generation(&self) -> Generation {
        self.generation
    }

    fn qword_offset(csr: &Csr, index: u32, qw: u32) -> Result<u64, HwError> {
        let base = csr.bar0_offset(index).ok_or(HwError::NoEntry {
            csr: csr.name,
            index,
        })?;
        Ok(base + u64::from(qw) * QW)
    }

    /// Read qword `qw` of entry `index`.
    pub fn read_qword(&self, csr: &Csr, index: u32, qw: u32) -> Result<u64, HwError> {
        let off = Self::qword_offset(csr, index, qw)?;
        self.bar.read_u64(off).map_err(|source| HwError::Mmio {
            csr: csr.name,
            index,
            source,
        })
    }

    /// Write qword `qw` of entry `index`.
    pub fn write_qword(&self, csr: &Csr, index: u32, qw: u32, value: u64) -> Result<(), HwError> {
        let off = Self::qword_offset(csr, index, qw)?;
        self.bar
            .write_u64(off, value)
            .map_err(|source| HwError::Mmio {
                csr: csr.name,
                index,
                source,
            })
    }

    fn qwords(csr: &Csr) -> u32 {
        csr.size.div_ceil(8)
    }

    /// Read entry `index` (all its bytes).
    pub fn read_entry(&self, csr: &Csr, index: u32) -> Result<Vec<u8>, HwError> {
        let mut out = Vec::with_capacity(csr.size as usize);
        for qw in 0..Self::qwords(csr) {
            out.extend_from_slice(&self.read_qword(csr, index, qw)?.to_le_bytes());
        }
        out.truncate(csr.size as usize);
        Ok(out)
    }

    /// Write entry `index`, lowest qword first.
    pub fn write_entry(&self, csr: &Csr, index: u32, bytes: &[u8]) -> Result<(), HwError> {
        for (qw, chunk) in bytes.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_qword(csr, index, qw as u32, u64::from_le_bytes(b))?;
        }
        Ok(())
    }

    /// Read one field of entry `index`.
    pub fn read_field(&self, csr: &Csr, index: u32, field: &Field) -> Result<u64, HwError> {
        let first = field.bit / 64;
        let last = (field.end_bit() - 1) / 64;
        let mut bytes = vec![0u8; csr.size as usize];
        for qw in first..=last {
            let v = self.read_qword(csr, index, qw)?;
            let at = (qw * 8) as usize;
            if let Some(dst) = bytes.get_mut(at..at + 8) {
                dst.copy_from_slice(&v.to_le_bytes());
            }
        }
        Ok(field.get(&bytes))
    }

    /// Read-modify-write the qwords holding `fields`, setting each to its value.
    pub fn update_fields(
        &self,
        csr: &Csr,
        index: u32,
        fields: &[(&Field, u64)],
    ) -> Result<(), HwError> {
        let mut bytes = self.read_entry(csr, index)?;
        let mut touched = vec![false; Self::qwords(csr) as usize];
        for (fld, v) in fields {
            fld.set(&mut bytes, *v);
            for qw in fld.bit / 64..=(fld.end_bit() - 1) / 64 {
                if let Some(t) = touched.get_mut(qw as usize) {
                    *t = true;
                }
            }
        }
        for (qw, t) in touched.iter().enumerate() {
            if *t {
                let at = qw * 8;
                let mut b = [0u8; 8];
                b.copy_from_slice(&bytes[at..at + 8]);
                self.write_qword(csr, index, qw as u32, u64::from_le_bytes(b))?;
            }
        }
        Ok(())
    }

    /// Write entry `index` as its reset image with `fields` set.
    pub fn write_fields(
        &self,
        csr: &Csr,
        index: u32,
        fields: &[(&Field, u64)],
    ) -> Result<(), HwError> {
        let mut bytes = csr.reset_bytes();
        for (fld, v) in fields {
            fld.set(&mut bytes, *v);
        }
        self.write_entry(csr, index, &bytes)
    }

    /// Put entry `index` back to its reset image.
    pub fn reset_entry(&self, csr: &Csr, index: u32) -> Result<(), HwError> {
        self.write_entry(csr, index, &csr.reset_bytes())
    }

    fn field_named(csr: &'static Csr, name: &str) -> Result<&'static Field, HwError> {
        csr.field(name).ok_or_else(|| HwError::NoField {
            csr: csr.name,
            field: name.to_string(),
        })
    }

    // ---- Identity (cass_core.c: is_supported, NID under NETSIM) ----

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

    // ---- ATU: address contexts, LAC -> AC, invalidation (cass_atu.c) ----

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

    // ---- Communication profiles (cass_cq.c / cxi_cp) ----

    /// Program CP table entry `cp`: VNI and traffic class, valid.
    pub fn cp_set(&self, cp: u32, vni: u32, tc: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_CQ_CFG_CP_FL_TABLE,
            cp,
            &[(f::c_cq_cfg_cp_fl_table::TC, u64::from(tc))],
        )?;
        self.write_fields(
            csr::C_CQ_CFG_CP_TABLE,
            cp,
            &[
                (f::c_cq_cfg_cp_table::VNI, u64::from(vni)),
                (f::c_cq_cfg_cp_table::VALID, 1),
            ],
        )
    }

    /// Invalidate CP table entry `cp`.
    pub fn cp_clear(&self, cp: u32) -> Result<(), HwError> {
        self.reset_entry(csr::C_CQ_CFG_CP_TABLE, cp)?;
        self.reset_entry(csr::C_CQ_CFG_CP_FL_TABLE, cp)
    }

    /// Point LCID `lcid` of resource group `rgid` at CP `cp`.
    pub fn lcid_set(&self, rgid: u32, lcid: u32, cp: u32) -> Result<(), HwError> {
        let idx = rgid * limits::C_COMM_PROF_PER_CQ as u32 + lcid;
        self.write_fields(
            csr::C_CQ_CFG_CID_ARRAY,
            idx,
            &[(f::c_cq_cfg_cid_array::CID, u64::from(cp))],
        )
    }

    /// Clear every LCID and LAC of resource group `rgid`.
    pub fn rgid_clear(&self, rgid: u32) -> Result<(), HwError> {
        for lcid in 0..limits::C_COMM_PROF_PER_CQ as u32 {
            self.reset_entry(
                csr::C_CQ_CFG_CID_ARRAY,
                rgid * limits::C_COMM_PROF_PER_CQ as u32 + lcid,
            )?;
        }
        for lac in 0..limits::C_NUM_LACS as u32 {
            self.lac_set(rgid, lac, 0)?;
        }
        Ok(())
    }

    // ---- Command queues (cass_cq.c) ----

    /// Program and enable transmit CQ `n`.
    pub fn txq_enable(&self, n: u32, c: &CqConfig) -> Result<(), HwError> {
        use f::c_cq_txq_base_table as b;
        self.write_fields(
            csr::C_CQ_TXQ_BASE_TABLE,
            n,
            &[
                (b::MEM_Q_EQ, u64::from(c.eq)),
                (b::MEM_Q_BASE, c.ring >> 12),
                (b::MEM_Q_MAX_PTR, u64::from(c.slots.saturating_sub(1))),
                (b::MEM_Q_RGID, u64::from(c.rgid)),
                (b::MEM_Q_STAT_CNT_POOL, u64::from(c.stat_cnt_pool)),
                (b::MEM_Q_PFQ, u64::from(c.tle_pool)),
                (b::MEM_Q_LCID, u64::from(c.lcid)),
                (b::MEM_Q_ACID, u64::from(c.acid)),
                (b::MEM_Q_POLICY, u64::from(c.policy)),
            ],
        )?;
        self.write_fields(
            csr::C_CQ_TXQ_TC_TABLE,
            n,
            &[(f::c_cq_txq_tc_table::MEM_Q_TRIG, u64::from(c.trig))],
        )?;
        self.write_fields(
            csr::C_CQ_TXQ_ENABLE,
            n,
            &[(f::c_cq_txq_enable::TXQ_ENABLE, 1)],
        )
    }

    /// Disable transmit CQ `n` and clear its configuration.
    pub fn txq_disable(&self, n: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_CQ_TXQ_ENABLE,
            n,
            &[(f::c_cq_txq_enable::TXQ_ENABLE, 0)],
        )?;
        self.reset_entry(csr::C_CQ_TXQ_TC_TABLE, n)?;
        self.reset_entry(csr::C_CQ_TXQ_BASE_TABLE, n)
    }

    /// Program and enable target CQ `n`.
    pub fn tgq_enable(&self, n: u32, c: &CqConfig) -> Result<(), HwError> {
        use f::c_cq_tgq_table as b;
        self.write_fields(
            csr::C_CQ_TGQ_TABLE,
            n,
            &[
                (b::MEM_Q_EQ, u64::from(c.eq)),
                (b::MEM_Q_BASE, c.ring >> 12),
                (b::MEM_Q_MAX_PTR, u64::from(c.slots.saturating_sub(1))),
                (b::MEM_Q_RGID, u64::from(c.rgid)),
                (b::MEM_Q_STAT_CNT_POOL, u64::from(c.stat_cnt_pool)),
                (b::MEM_Q_ACID, u64::from(c.acid)),
                (b::MEM_Q_POLICY, u64::from(c.policy)),
            ],
        )?;
        self.write_fields(
            csr::C_CQ_TGQ_ENABLE,
            n,
            &[(f::c_cq_tgq_enable::TGQ_ENABLE, 1)],
        )
    }

    /// Disable target CQ `n` and clear its configuration.
    pub fn tgq_disable(&self, n: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_CQ_TGQ_ENABLE,
            n,
            &[(f::c_cq_tgq_enable::TGQ_ENABLE, 0)],
        )?;
        self.reset_entry(csr::C_CQ_TGQ_TABLE, n)
    }

    /// The acknowledgement counter of a CQ (`tx`: transmit, else target).
    pub fn cq_ack_counter(&self, tx: bool, n: u32) -> Result<u32, HwError> {
        let v = if tx {
            self.read_field(csr::C_CQ_TXQ_ACK_CTR, n, f::c_cq_txq_ack_ctr::MEM_Q_ACK_CTR)?
        } else {
            self.read_field(csr::C_CQ_TGQ_ACK_CTR, n, f::c_cq_tgq_ack_ctr::MEM_Q_ACK_CTR)?
        };
        Ok(v as u32)
    }

    // ---- Triggered-list entries (cass_tle.c) ----

    /// Configure TLE pool `pool`: `num_reserved` entries of its own, at most `max_alloc`.
    /// LE pool `pool` of every PE: `reserved` LEs kept for it, at most `max` in use
    /// (`c_lpe_cfg_pe_le_pools`, cass_svc.c for a service that reserves LEs).
    pub fn le_pool_set(&self, pool: u32, reserved: u32, max: u32) -> Result<(), HwError> {
        for pe in 0..limits::C_PE_COUNT as u32 {
            let idx = pe * limits::LE_POOLS_PER_PE as u32 + pool;
            self.write_fields(
                csr::C_LPE_CFG_PE_LE_POOLS,
                idx,
                &[
                    (f::c_lpe_cfg_pe_le_pools::NUM_RESERVED, u64::from(reserved)),
                    (f::c_lpe_cfg_pe_le_pools::MAX_ALLOC, u64::from(max)),
                ],
            )?;
        }
        Ok(())
    }

    pub fn tle_pool_set(
        &self,
        pool: u32,
        num_reserved: u32,
        max_alloc: u32,
    ) -> Result<(), HwError> {
        use f::c_cq_cfg_tle_pool as t;
        self.write_fields(
            csr::C_CQ_CFG_TLE_POOL,
            pool,
            &[
                (t::NUM_RESERVED, u64::from(num_reserved)),
                (t::MAX_ALLOC, u64::from(max_alloc)),
            ],
        )
    }

    /// Set the shared TLE reserve (`c_cq_cfg_sts_tle_shared.num_shared`).
    pub fn tle_shared_set(&self, num_shared: u32) -> Result<(), HwError> {
        self.update_fields(
            csr::C_CQ_CFG_STS_TLE_SHARED,
            0,
            &[(
                f::c_cq_cfg_sts_tle_shared::NUM_SHARED,
                u64::from(num_shared),
            )],
        )
    }

    // ---- Event queues (cass_eq.c) ----

    /// Program and enable EQ `n`.
    pub fn eq_enable(&self, n: u32, c: &EqConfig) -> Result<(), HwError> {
        use f::c_ee_cfg_eq_descriptor as d;
        let t = csr::C_EE_CFG_EQ_DESCRIPTOR;
        let mut bytes = t.reset_bytes();
        d::RESERVED_FC.set(&mut bytes, u64::from(c.reserved_fc));
        if let Some(v) = c.event_irq {
            d::EVENT_INT_EN.set(&mut bytes, 1);
            d::EVENT_INT_IDX.set(&mut bytes, u64::from(v));
        }
        if let Some(v) = c.status_irq {
            d::EQ_STS_INT_EN.set(&mut bytes, 1);
            d::EQ_STS_INT_IDX.set(&mut bytes, u64::from(v));
        }
        d::LATENCY_TOLERANCE.set(&mut bytes, u64::from(c.latency_tolerance));
        d::EQ_STS_NUM_THLD.set(&mut bytes, u64::from(c.thresh_count));
        d::EQ_STS_THLD_BASE.set(&mut bytes, u64::from(c.thresh_base));
        d::EQ_STS_THLD_OFFST.set(&mut bytes, u64::from(c.thresh_delta));
        d::EQ_STS_DROPPED_EN.set(&mut bytes, u64::from(c.drop_status));
        d::BUFFER_A_ADDR.set(&mut bytes, c.addr >> 12);
        d::BUFFER_A_SIZE.set(&mut bytes, c.len / 4096);
        d::BUFFER_A_EN.set(&mut bytes, 1);
        d::ACID.set(&mut bytes, u64::from(c.acid));
        d::EQ_ENABLE.set(&mut bytes, 0);
        self.write_fields(
            csr::C_CQ_CFG_EQ_RGID_TABLE,
            n,
            &[(f::c_cq_cfg_eq_rgid_table::RGID, u64::from(c.rgid))],
        )?;
        self.set_long_format(n, c.init_long, c.tgt_long)?;
        // The software read pointer starts at the first event (byte 64, `rd_ptr` in 64 B units).
        self.write_fields(
            csr::C_EE_CFG_EQ_SW_STATE,
            n,
            &[(f::c_ee_cfg_eq_sw_state::RD_PTR, 1)],
        )?;
        // Everything but the enable first, then the qword holding `eq_enable` (qword 0).
        for qw in (1..Self::qwords(t)).rev() {
            let at = (qw * 8) as usize;
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            self.write_qword(t, n, qw, u64::from_le_bytes(b))?;
        }
        d::EQ_ENABLE.set(&mut bytes, 1);
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[..8]);
        self.write_qword(t, n, 0, u64::from_le_bytes(b))
    }

    /// Change the flow-control reservation of EQ `n`.
    pub fn eq_set_reserved_fc(&self, n: u32, reserved_fc: u32) -> Result<(), HwError> {
        self.update_fields(
            csr::C_EE_CFG_EQ_DESCRIPTOR,
            n,
            &[(
                f::c_ee_cfg_eq_descriptor::RESERVED_FC,
                u64::from(reserved_fc),
            )],
        )
    }

    /// Disable EQ `n` and clear its configuration.
    pub fn eq_disable(&self, n: u32) -> Result<(), HwError> {
        self.update_fields(
            csr::C_EE_CFG_EQ_DESCRIPTOR,
            n,
            &[(f::c_ee_cfg_eq_descriptor::EQ_ENABLE, 0)],
        )?;
        self.reset_entry(csr::C_EE_CFG_EQ_DESCRIPTOR, n)?;
        self.reset_entry(csr::C_EE_CFG_EQ_SW_STATE, n)?;
        self.reset_entry(csr::C_CQ_CFG_EQ_RGID_TABLE, n)?;
        self.set_long_format(n, false, false)
    }

    /// `c_ee_cfg_long_evnt_ovr_table`: entry n/32, field `n{n%32}_use_long_fmt` (2 bits; our
    /// reading: bit 0 initiator events, bit 1 target events).
    fn set_long_format(&self, n: u32, init: bool, tgt: bool) -> Result<(), HwError> {
        let t = csr::C_EE_CFG_LONG_EVNT_OVR_TABLE;
        let fld = Self::field_named(t, &format!("n{}_use_long_fmt", n % 32))?;
        self.update_fields(t, n / 32, &[(fld, u64::from(init) | u64::from(tgt) << 1)])
    }

    // ---- Portal table (cass_pt.c) ----

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

    // ---- RMU: VNI and portal TCAMs (cass_rmu.c) ----

    /// Program VNI list entry `i` to match exactly `vni` (writing `_y` validates it).
    pub fn rmu_vni_set(&self, i: u32, vni: u32) -> Result<(), HwError> {
        let w = f::c_rmu_cfg_vni_list_x::VNI.width;
        let v = u64::from(vni) & mask(w);
        self.write_fields(
            csr::C_RMU_CFG_VNI_LIST_X,
            i,
            &[(f::c_rmu_cfg_vni_list_x::VNI, v)],
        )?;
        self.write_fields(
            csr::C_RMU_CFG_VNI_LIST_Y,
            i,
            &[(f::c_rmu_cfg_vni_list_y::VNI, !v & mask(w))],
        )
    }

    /// Invalidate VNI list entry `i`.
    pub fn rmu_vni_clear(&self, i: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_RMU_CFG_VNI_LIST_INVALIDATE,
            i,
            &[(f::c_rmu_cfg_vni_list_invalidate::INVALIDATE, 1)],
        )
    }

    /// Program portal TCAM entry `j` to match `key` exactly and steer it to PtlTE `ptlte`.
    pub fn rmu_portal_set(&self, j: u32, key: &PortalKey, ptlte: u32) -> Result<(), HwError> {
        use f::c_rmu_cfg_portal_list_x as x;
        let t = csr::C_RMU_CFG_PORTAL_INDEX_TABLE;
        let slot = Self::field_named(t, &format!("n{}_phys_portal_table_idx", j % 4))?;
        self.update_fields(t, j / 4, &[(slot, u64::from(ptlte))])?;
        // The key and its complement over the fields the key uses (x = 1 requires a one,
        // y = 1 requires a zero).
        let key_fields: [(&Field, u64); 4] = [
            (x::INDEX_EXT, u64::from(key.index_ext)),
            (
                if key.is_multicast {
                    x::MULTICAST_ID
                } else {
                    x::ENDPOINT_DEFINED
                },
                u64::from(key.endpoint),
            ),
            (x::IS_MULTICAST, u64::from(key.is_multicast)),
            (x::VNI_LIST_IDX, u64::from(key.vni_list_idx)),
        ];
        let mut xb = csr::C_RMU_CFG_PORTAL_LIST_X.reset_bytes();
        let mut yb = csr::C_RMU_CFG_PORTAL_LIST_Y.reset_bytes();
        for (fld, v) in key_fields {
            let v = v & fld.value_mask();
            fld.set(&mut xb, v);
            fld.set(&mut yb, !v & fld.value_mask());
        }
        self.write_entry(csr::C_RMU_CFG_PORTAL_LIST_X, j, &xb)?;
        self.write_entry(csr::C_RMU_CFG_PORTAL_LIST_Y, j, &yb)
    }

    /// Invalidate portal TCAM entry `j`.
    pub fn rmu_portal_clear(&self, j: u32) -> Result<(), HwError> {
        self.write_fields(
            csr::C_RMU_CFG_PORTAL_LIST_INVALIDATE,
            j,
            &[(f::c_rmu_cfg_portal_list_invalidate::INVALIDATE, 1)],
        )
    }

    // ---- Counting events (cass_ct.c) ----

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

    // ---- Interrupts (cass_irq.c) ----

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
