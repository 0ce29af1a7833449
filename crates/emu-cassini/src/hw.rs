//! The NIC's hardware blocks together, the configuration tables they share, and the dispatch
//! of CSR writes, launch-page and EE-page stores, packets and timers to them. Each block lives
//! in its own module; this one only routes and caches decoded configuration, so the data path
//! never reads the CSR file.

use emu_core::engine::DeviceIo;
use emu_core::fabric::Packet;
use emu_core::pci::MsixTable;
use firmware_spec::cassini::csr::{self, Csr};

use crate::atu::Atu;
use crate::counters::Counters;
use crate::cq::Cqs;
use crate::csr::{CsrFile, Piece};
use crate::ct::CtBlock;
use crate::device::CassiniConfig;
use crate::ee::Ee;
use crate::ixe::Ixe;
use crate::lpe::Lpe;
use crate::rmu::Rmu;
use crate::tgt::Tgt;

/// A communication profile (`c_cq_cfg_cp_table` + `c_cq_cfg_cp_fl_table`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cp {
    pub(crate) vni: u16,
    pub(crate) valid: bool,
    pub(crate) tc: u8,
}

/// Decoded copies of the small configuration tables used on the data path.
#[derive(Debug)]
pub(crate) struct Tables {
    /// `c_cq_cfg_ac_array`: (rgid * 8 + lac) -> AC.
    ac_array: Vec<u16>,
    /// `c_cq_cfg_cid_array`: (rgid * 16 + lcid) -> CP.
    cid_array: Vec<u8>,
    cp: Vec<Cp>,
    /// `c_cq_cfg_ptlte_rgid_table`.
    ptlte_rgid: Vec<u8>,
    /// `c_cq_cfg_cq_policy`: (shift, write back on empty) per policy.
    pub(crate) policy: [(u8, bool); 4],
    /// Bumped on every change of the CP tables (CQs cache their resolved CP).
    pub(crate) cp_gen: u64,
}

impl Tables {
    fn new() -> Self {
        Tables {
            ac_array: vec![0; csr::C_CQ_CFG_AC_ARRAY.entries as usize],
            cid_array: vec![0; csr::C_CQ_CFG_CID_ARRAY.entries as usize],
            cp: vec![Cp::default(); csr::C_CQ_CFG_CP_TABLE.entries as usize],
            ptlte_rgid: vec![0; csr::C_CQ_CFG_PTLTE_RGID_TABLE.entries as usize],
            policy: [(4, false); 4],
            cp_gen: 1,
        }
    }

    /// AC of `lac` in resource group `rgid` (0 = none, which the ATU rejects).
    pub(crate) fn lac_ac(&self, rgid: u8, lac: u8) -> u16 {
        let i = usize::from(rgid) * 8 + usize::from(lac & 7);
        self.ac_array.get(i).copied().unwrap_or(0)
    }

    /// Communication profile of `lcid` in resource group `rgid`.
    pub(crate) fn cp(&self, rgid: u8, lcid: u8) -> Cp {
        let i = usize::from(rgid) * 16 + usize::from(lcid & 15);
        let cp = self.cid_array.get(i).copied().unwrap_or(0);
        self.cp.get(usize::from(cp)).copied().unwrap_or_default()
    }

    /// Resource group of PtlTE `pt`.
    pub(crate) fn ptlte_rgid(&self, pt: u16) -> u8 {
        self.ptlte_rgid.get(usize::from(pt)).copied().unwrap_or(0)
    }
}

/// Every block of the NIC.
#[derive(Debug)]
pub(crate) struct Hw {
    pub(crate) nid: u32,
    pub(crate) nid_base: u32,
    pub(crate) msix: MsixTable,
    pub(crate) tables: Tables,
    pub(crate) atu: Atu,
    pub(crate) ee: Ee,
    pub(crate) cqs: Cqs,
    pub(crate) rmu: Rmu,
    pub(crate) lpe: Lpe,
    pub(crate) ixe: Ixe,
    pub(crate) tgt: Tgt,
    pub(crate) ct: CtBlock,
    pub(crate) counters: Counters,
    /// Reliability layer between the blocks above and the fabric (pct.rs).
    pub(crate) pct: crate::pct::Pct,
}

fn is(c: &'static Csr, which: &'static Csr) -> bool {
    c.offset == which.offset && c.name == which.name
}

impl Hw {
    pub(crate) fn new(cfg: &CassiniConfig, msix: MsixTable) -> Self {
        let lpe = Lpe::new(cfg.lpe).unwrap_or_default();
        Hw {
            nid: cfg.nid & 0xF_FFFF,
            nid_base: cfg.nid_base,
            msix,
            tables: Tables::new(),
            atu: Atu::new(),
            ee: Ee::new(),
            cqs: Cqs::new(),
            rmu: Rmu::new(),
            lpe,
            ixe: Ixe::new(),
            tgt: Tgt::default(),
            ct: CtBlock::new(),
            counters: Counters::default(),
            pct: crate::pct::Pct::new(),
        }
    }

    /// Patch hardware-owned fields of a CSR entry image before software reads it.
    pub(crate) fn reflect(&self, c: &'static Csr, entry: u32, image: &mut [u8]) {
        use csr::fields as f;
        if is(c, csr::C_CQ_TXQ_ENABLE) {
            let (en, fence) = self.cqs.tx_state(entry);
            f::c_cq_txq_enable::TXQ_ENABLE.set(image, u64::from(en));
            f::c_cq_txq_enable::FENCE.set(image, u64::from(fence));
        } else if is(c, csr::C_CQ_TGQ_ENABLE) {
            let en = self.cqs.tgt_enabled(entry);
            f::c_cq_tgq_enable::TGQ_ENABLE.set(image, u64::from(en));
        } else if is(c, csr::C_CQ_TXQ_RDPTR_TABLE) {
            let (rd, _) = self.cqs.pointers(false, entry);
            f::c_cq_txq_rdptr_table::MEM_Q_RD_PTR.set(image, rd);
        } else if is(c, csr::C_CQ_TGQ_RDPTR_TABLE) {
            let (rd, _) = self.cqs.pointers(true, entry);
            f::c_cq_tgq_rdptr_table::MEM_Q_RD_PTR.set(image, rd);
        } else if is(c, csr::C_CQ_TXQ_WRPTR_TABLE) {
            let (_, wr) = self.cqs.pointers(false, entry);
            f::c_cq_txq_wrptr_table::MEM_Q_WR_PTR.set(image, wr);
        } else if is(c, csr::C_CQ_TGQ_WRPTR_TABLE) {
            let (_, wr) = self.cqs.pointers(true, entry);
            f::c_cq_tgq_wrptr_table::MEM_Q_WR_PTR.set(image, wr);
        } else if is(c, csr::C_CQ_TXQ_ACK_CTR) {
            f::c_cq_txq_ack_ctr::MEM_Q_ACK_CTR.set(image, u64::from(self.ct.pending(entry as u16)));
        } else if is(c, csr::C_EE_CFG_EQ_SW_STATE) {
            let sw = self.ee.sw_state(entry);
            image[..8].copy_from_slice(&sw.to_le_bytes());
        } else if is(c, csr::C_LPE_CFG_PTL_TABLE) {
            crate::tgt::reflect_ptl_table(&self.lpe, entry, image);
        } else if is(c, csr::C_CQ_CFG_CT_ENABLE) {
            let en = self.ct.state(entry as u16).is_some_and(|s| s.enabled);
            f::c_cq_cfg_ct_enable::CT_ENABLE.set(image, u64::from(en));
        } else if !(self.tou_reflect(c, entry, image) || self.lpe_reflect(c, entry, image)) {
            self.counters.reflect(self, c, entry, image);
        }
    }

    /// Software wrote (part of) a CSR entry: let the owning block pick up the change.
    pub(crate) fn csr_written(
        &mut self,
        csrs: &mut CsrFile,
        io: &mut DeviceIo<'_>,
        p: &Piece,
        data: &[u8],
    ) {
        use csr::fields as f;
        let (c, n) = (p.csr, p.entry);
        if is(c, csr::C_CQ_TXQ_ENABLE) {
            let en = csrs.field(c, n, f::c_cq_txq_enable::TXQ_ENABLE) != 0;
            self.cq_enable(csrs, io, false, n, en);
        } else if is(c, csr::C_CQ_TGQ_ENABLE) {
            let en = csrs.field(c, n, f::c_cq_tgq_enable::TGQ_ENABLE) != 0;
            self.cq_enable(csrs, io, true, n, en);
        } else if is(c, csr::C_CQ_TXQ_BASE_TABLE) || is(c, csr::C_CQ_TXQ_TC_TABLE) {
            self.cqs.config_written(csrs, false, n);
        } else if is(c, csr::C_CQ_TGQ_TABLE) {
            self.cqs.config_written(csrs, true, n);
        } else if is(c, csr::C_CQ_TXQ_WRPTR_TABLE) {
            let wr = csrs.field(c, n, f::c_cq_txq_wrptr_table::MEM_Q_WR_PTR);
            self.doorbell(io, false, n, wr);
        } else if is(c, csr::C_CQ_TGQ_WRPTR_TABLE) {
            let wr = csrs.field(c, n, f::c_cq_tgq_wrptr_table::MEM_Q_WR_PTR);
            self.doorbell(io, true, n, wr);
        } else if is(c, csr::C_CQ_CFG_AC_ARRAY) {
            if let Some(s) = self.tables.ac_array.get_mut(n as usize) {
                *s = csrs.field(c, n, f::c_cq_cfg_ac_array::AC) as u16;
            }
        } else if is(c, csr::C_CQ_CFG_CID_ARRAY) {
            if let Some(s) = self.tables.cid_array.get_mut(n as usize) {
                *s = csrs.field(c, n, f::c_cq_cfg_cid_array::CID) as u8;
            }
            self.tables.cp_gen += 1;
        } else if is(c, csr::C_CQ_CFG_CP_TABLE) {
            if let Some(s) = self.tables.cp.get_mut(n as usize) {
                s.vni = csrs.field(c, n, f::c_cq_cfg_cp_table::VNI) as u16;
                s.valid = csrs.field(c, n, f::c_cq_cfg_cp_table::VALID) != 0;
            }
            self.tables.cp_gen += 1;
        } else if is(c, csr::C_CQ_CFG_CP_FL_TABLE) {
            if let Some(s) = self.tables.cp.get_mut(n as usize) {
                s.tc = csrs.field(c, n, f::c_cq_cfg_cp_fl_table::TC) as u8;
            }
            self.tables.cp_gen += 1;
        } else if is(c, csr::C_CQ_CFG_PTLTE_RGID_TABLE) {
            if let Some(s) = self.tables.ptlte_rgid.get_mut(n as usize) {
                *s = csrs.field(c, n, f::c_cq_cfg_ptlte_rgid_table::RGID) as u8;
            }
        } else if is(c, csr::C_CQ_CFG_CQ_POLICY) {
            let qw = csrs.entry_qword(c, 0, 0);
            for (i, p) in self.tables.policy.iter_mut().enumerate() {
                let b = qw >> (8 * i);
                *p = ((b & 0xF) as u8, b & 0x10 != 0);
            }
        } else if is(c, csr::C_ATU_CFG_AC_TABLE) {
            self.atu.ac_written(csrs, n);
        } else if is(c, csr::C_ATU_CFG_CQ_TABLE) {
            self.atu.cq_cmd_written(csrs, n);
        } else if is(c, csr::C_EE_CFG_EQ_DESCRIPTOR) {
            self.ee.descriptor_written(csrs, n);
        } else if is(c, csr::C_EE_CFG_LONG_EVNT_OVR_TABLE) {
            self.ee.long_ovr_written(csrs, n);
        } else if is(c, csr::C_EE_CFG_EQ_SW_STATE) {
            let qw = csrs.entry_qword(c, n, 0);
            self.ee.sw_state_written(&mut self.atu, io, n, qw);
        } else if is(c, csr::C_LPE_CFG_PTL_TABLE) {
            // ptl_state is in byte 24 of the entry.
            let state_written = p.byte <= 24 && p.byte + p.len > 24;
            crate::tgt::ptl_table_written(&mut self.lpe, csrs, n, state_written);
        } else if is(c, csr::C_RMU_CFG_VNI_LIST_X)
            || is(c, csr::C_RMU_CFG_VNI_LIST_Y)
            || is(c, csr::C_RMU_CFG_VNI_LIST_INVALIDATE)
            || is(c, csr::C_RMU_CFG_PORTAL_LIST_X)
            || is(c, csr::C_RMU_CFG_PORTAL_LIST_Y)
            || is(c, csr::C_RMU_CFG_PORTAL_LIST_INVALIDATE)
            || is(c, csr::C_RMU_CFG_PORTAL_INDEX_TABLE)
        {
            self.rmu.written(csrs, c, n, data);
        } else if is(c, csr::C_PCT_CFG_TIMING) {
            self.pct.timing_written(csrs);
        } else if is(c, csr::C_CQ_CFG_CT_WB_MEM_ADDR)
            || is(c, csr::C_CQ_CFG_CT_ENABLE)
            || is(c, csr::C_CQ_CFG_INIT_CT_HW_STATE)
        {
            self.ct_config_written(csrs, io, c, n);
        } else {
            // TLE pools, CQ error flags, LE pools, rendezvous Gets.
            let _ = self.tou_csr_written(csrs, p, data) || self.lpe_csr_written(csrs, c, n);
        }
    }

    /// A load from EQ `eq`'s EE page.
    pub(crate) fn ee_page_read(&self, eq: u32, off: u32, data: &mut [u8]) {
        let sw = self.ee.sw_state(eq).to_le_bytes();
        let o = off as usize;
        if o + data.len() <= 8 {
            data.copy_from_slice(&sw[o..o + data.len()]);
        }
    }

    /// A store to EQ `eq`'s EE page: a 64-bit store at offset 0 is the software state.
    pub(crate) fn ee_page_write(&mut self, io: &mut DeviceIo<'_>, eq: u32, off: u32, data: &[u8]) {
        if off != 0 || data.len() != 8 {
            return;
        }
        let mut q = [0u8; 8];
        q.copy_from_slice(data);
        let qw = u64::from_le_bytes(q);
        // `c_ee_cfg_eq_sw_state[eq]` reads back the EE's copy (see `reflect`).
        self.ee.sw_state_written(&mut self.atu, io, eq, qw);
    }

    /// A load from a CQ launch page: the write pointer reads back.
    pub(crate) fn launch_read(&self, tgt: bool, cq: u32, off: u32, data: &mut [u8]) {
        if off == 0 && data.len() <= 8 {
            let (_, wr) = self.cqs.pointers(tgt, cq);
            data.copy_from_slice(&wr.to_le_bytes()[..data.len()]);
        }
    }

    /// A store to a CQ launch page: doorbell (offset 0) or a low-latency window.
    pub(crate) fn launch_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        tgt: bool,
        cq: u32,
        off: u32,
        data: &[u8],
    ) {
        let mut q = [0u8; 8];
        let n = data.len().min(8);
        q[..n].copy_from_slice(&data[..n]);
        let v = u64::from_le_bytes(q);
        if off == 0 {
            // The write pointer is a 16-bit field (`struct c_cmdq.wr_ptr`).
            self.doorbell(io, tgt, cq, v & 0xFFFF);
        } else if (0x400..0x1000).contains(&off) && data.len() == 8 {
            self.ll_store(io, tgt, cq, off, v);
        }
    }

    /// A packet arrived from the fabric.
    pub(crate) fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        // The PCT checks the CRC and sequence, then hands it to `receive` (tgt.rs).
        self.pct_receive(io, pkt);
    }

    /// A timer fired.
    pub(crate) fn timer(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        if crate::pct::is_token(token) {
            self.pct_timer(io, token);
            return;
        }
        if token == crate::ixe::TOKEN_SCAN {
            self.scan_timeouts(io);
        }
    }
}
