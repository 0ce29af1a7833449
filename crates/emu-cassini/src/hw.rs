//! The NIC's hardware blocks wired together: [`Hw`] owns the state of every block, routes CSR
//! writes, launch-page and EE-page stores, packets and timers to the block that owns them,
//! and caches decoded configuration ([`Tables`]) so the data path never reads the CSR file.
//!
//! Each block lives in its own module, named after the hardware, and never sees `Hw` or the
//! device: it states what it needs from the rest of the NIC as a context trait (`CqCtx`,
//! `IxeCtx`, `PctCtx`, `TgtCtx`, `TouCtx`) and provides its behaviour as an extension trait
//! on anything that implements it (`CqOps`, `IxeOps`, `PctOps`, `TgtOps`, `TouOps`). This
//! module implements the context traits on `Hw`, so every hand-over from one block to the
//! next is a named method below. Block modules import only leaves (`block`, `tables`, `csr`,
//! `atu`, `wire`, the pure state machines `lpe`, `ct`, `amo`, and the tables
//! `rmu` and `ee`); only this module and `device` (the PCI function) know all blocks.
//!
//! A packet's journey, and the block that owns each step:
//!
//! ```text
//!  host store: CQ write pointer or launch page          device (BAR0 decode) -> Hw
//!     |
//!     v
//!  cq    CqOps::doorbell / ll_store -> run_ring: fetch commands from the ring by DMA
//!        (atu), check size and alignment, execute, write back c_cq_status
//!     |  CqCtx::exec_tx                    (target commands: CqCtx::exec_target -> tgt)
//!     v
//!  ixe   IxeOps::exec_tx -> launch: C_STATE, the CP (tables), the local buffer checked
//!        (atu), a request handle, MTU segments, the SEND event
//!     |  IxeCtx::pct_send                  (CT commands: IxeCtx::ct_command -> tou)
//!     v
//!  pct   PctOps::pct_send: connection, sequence number, retry buffer --> fabric
//!  ------------------------------- at the target NIC -------------------------------
//!  pct   PctOps::pct_receive: CRC, in-order exactly-once delivery, acknowledgements
//!     |  PctCtx::receive
//!     v
//!  rmu   TgtOps::receive -> request: DFA check, VNI and portal TCAMs -> PtlTE (rmu)
//!  lpe   the matching decision (lpe)
//!  tgt   data placed through the atu (place_put / serve_get / serve_amo); the ACK or
//!        REPLY goes back through TgtCtx::pct_send; counting events to tou
//!     |  TgtCtx::post_event
//!     v
//!  ee    target events written to the PtlTE's event queue, MSI-X ([`Hw::post`])
//!  ------------------------------ back at the initiator ------------------------------
//!  pct -> tgt::receive -> TgtCtx::response -> ixe: ACK / REPLY data and event (ee),
//!        counting event (tou), the handle freed, a FENCE released (IxeCtx::run_ring -> cq)
//! ```
//!
//! Off the main path: `tou` (TOU doorbells, CT commands and counting events into the pure
//! [`CtBlock`]; fired CT_TRIG_DMAs go back to `ixe` through `TouCtx`), `counters` (counters
//! by public name, read through a [`CounterView`]), and the timers (`pct` retransmission
//! scan; the `ixe` request timeout scan, which also expires partial target messages).

use emu_core::engine::DeviceIo;
use emu_core::fabric::{Packet, TrafficClass, Train};
use emu_core::pci::MsixTable;
use emu_core::sparse::SparseTable;
use firmware_spec::cassini::cmd::{DmaAmo, FullDma, NomatchDma};
use firmware_spec::cassini::csr::{self, Csr};
use firmware_spec::cassini::dfa::PidBits;
use firmware_spec::cassini::rc::ReturnCode;

use crate::atu::Atu;
use crate::block::{Counters, EventClass, Exec, Fail, GetCtrl};
use crate::config::CassiniConfig;
use crate::counters::CounterView;
use crate::cq::{CqCtx, CqOps, Cqs, TxCq};
use crate::csr::{CsrFile, Piece};
use crate::ct::CtBlock;
use crate::ee::Ee;
use crate::ixe::{Ixe, IxeCtx, IxeOps, OutStream};
use crate::lpe::{CtUpdate, Lpe, RendezvousGet};
use crate::pct::{Pct, PctCtx, PctOps};
use crate::rmu::Rmu;
use crate::tables::Tables;
use crate::tgt::{ReplyStream, Tgt, TgtCtx, TgtOps};
use crate::tou::{TouCtx, TouOps};
use crate::wire::{Fab, Response};

/// Every block of the NIC.
#[derive(Clone, Debug)]
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
    pub(crate) pct: Pct,
    /// Work held by the timed fault sites (faults.rs).
    pub(crate) faults: crate::faults::FaultState,
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
            pct: Pct::new(),
            faults: crate::faults::FaultState::default(),
        }
    }

    /// Entries of the device's sparse tables backed by storage: portal table, CT block,
    /// event queues, command queues, RMU, address contexts. 0 for a NIC out of reset; it grows
    /// with what software configures, a page (`emu_core::sparse::PAGE` entries) at a time.
    pub(crate) fn allocated_table_entries(&self) -> usize {
        self.lpe.allocated_slots()
            + self.ct.allocated_entries()
            + self.ee.allocated_entries()
            + self.cqs.allocated_entries()
            + self.rmu.allocated_entries()
            + self.atu.allocated_entries()
            + self.tables.allocated_entries()
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
        } else if !(crate::tou::tou_reflect(&self.ct, c, entry, image)
            || crate::tgt::lpe_reflect(&self.lpe, c, entry, image))
        {
            crate::counters::reflect(&self.counter_view(), c, entry, image);
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
            if let Ok(s) = self.tables.ac_array.get_mut(n as usize) {
                *s = csrs.field(c, n, f::c_cq_cfg_ac_array::AC) as u16;
            }
        } else if is(c, csr::C_CQ_CFG_CID_ARRAY) {
            if let Ok(s) = self.tables.cid_array.get_mut(n as usize) {
                *s = csrs.field(c, n, f::c_cq_cfg_cid_array::CID) as u8;
            }
            self.tables.cp_gen += 1;
        } else if is(c, csr::C_CQ_CFG_CP_TABLE) {
            if let Ok(s) = self.tables.cp.get_mut(n as usize) {
                s.vni = csrs.field(c, n, f::c_cq_cfg_cp_table::VNI) as u16;
                s.valid = csrs.field(c, n, f::c_cq_cfg_cp_table::VALID) != 0;
            }
            self.tables.cp_gen += 1;
        } else if is(c, csr::C_CQ_CFG_CP_FL_TABLE) {
            if let Ok(s) = self.tables.cp.get_mut(n as usize) {
                s.tc = csrs.field(c, n, f::c_cq_cfg_cp_fl_table::TC) as u8;
            }
            self.tables.cp_gen += 1;
        } else if is(c, csr::C_CQ_CFG_PTLTE_RGID_TABLE) {
            if let Ok(s) = self.tables.ptlte_rgid.get_mut(n as usize) {
                *s = csrs.field(c, n, f::c_cq_cfg_ptlte_rgid_table::RGID) as u8;
            }
        } else if is(c, csr::C_CQ_CFG_EQ_RGID_TABLE) {
            if let Ok(s) = self.tables.eq_rgid.get_mut(n as usize) {
                *s = csrs.field(c, n, f::c_cq_cfg_eq_rgid_table::RGID) as u8;
            }
        } else if is(c, csr::C_CQ_CFG_CT_RGID_TABLE) {
            if let Ok(s) = self.tables.ct_rgid.get_mut(n as usize) {
                *s = csrs.field(c, n, f::c_cq_cfg_ct_rgid_table::RGID) as u8;
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
            let _ = crate::tou::tou_csr_written(&mut self.ct, csrs, p, data)
                || crate::tgt::lpe_csr_written(&mut self.tgt, &mut self.lpe, csrs, c, n);
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
        // Fault site `slow_target`: the NIC stalls, and this packet and every packet arriving
        // during the stall are processed in order when it ends.
        let fires = io.fault(emu_core::nic_faults::NicSite::SlowTarget);
        if let Some(pkt) = self.faults.hold_packet(io, pkt, fires) {
            // The PCT checks the CRC and sequence, then hands it to `receive` (tgt.rs).
            self.pct_receive(io, pkt);
        }
    }

    /// The fault sites' timer: write the delayed CT write-backs that are due (if the CT
    /// still writes back there), then process the packets a stall held, in order.
    fn fault_timer(&mut self, io: &mut DeviceIo<'_>) {
        let (wbs, pkts) = self.faults.release(io.now());
        for w in wbs {
            let live = self
                .ct
                .state(w.ct)
                .is_some_and(|s| s.enabled && s.writeback == Some(w.target));
            if live {
                let _ = self
                    .atu
                    .write(io.dma(), w.target.context, w.target.addr, &w.bytes());
            }
        }
        for p in pkts {
            self.pct_receive(io, p);
        }
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
        if token == crate::faults::TOKEN_FAULTS {
            self.fault_timer(io);
        }
    }

    /// A store to CT `ct`'s TOU doorbell page.
    pub(crate) fn ct_doorbell(&mut self, io: &mut DeviceIo<'_>, ct: u32, off: u32, data: &[u8]) {
        TouOps::ct_doorbell(self, io, ct, off, data);
    }

    /// Post an encoded event to EQ `eq` (EE, writing through the ATU, raising MSI-X); false
    /// if it was dropped.
    fn post(&mut self, io: &mut DeviceIo<'_>, eq: u16, event: &[u8], class: EventClass) -> bool {
        let _span = tracing::trace_span!("ee", eq).entered();
        self.ee
            .post(&mut self.atu, &mut self.msix, io, eq, event, class)
    }

    /// Every block that keeps counters, for a counter read.
    fn counter_view(&self) -> CounterView<'_> {
        CounterView {
            counters: &self.counters,
            ct: &self.ct,
            ee: &self.ee,
            lpe: &self.lpe,
            rmu: &self.rmu,
            atu: &self.atu,
            pct: &self.pct,
        }
    }
}

// ---- the wiring: what each block may reach, and which block answers ----------------------

impl CqCtx for Hw {
    fn cqs(&mut self) -> &mut Cqs {
        &mut self.cqs
    }
    fn counters(&mut self) -> &mut Counters {
        &mut self.counters
    }
    fn atu(&mut self) -> &mut Atu {
        &mut self.atu
    }
    fn cq_policy(&self, policy: u8) -> (u8, bool) {
        self.tables.policy[usize::from(policy & 3)]
    }
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool {
        self.post(io, eq, event, class)
    }
    fn exec_tx(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        bytes: &[u8],
        cur32: u64,
        next: Option<u8>,
    ) -> Result<Exec, Fail> {
        let _span = tracing::trace_span!("oxe", cq = n, len = bytes.len()).entered();
        IxeOps::exec_tx(self, io, n, bytes, cur32, next)
    }
    fn exec_target(&mut self, io: &mut DeviceIo<'_>, n: u32, bytes: &[u8]) -> Result<Exec, Fail> {
        let _span = tracing::trace_span!("tgt_cq", cq = n, len = bytes.len()).entered();
        TgtOps::exec_target(self, io, n, bytes)
    }
}

impl IxeCtx for Hw {
    fn ixe(&mut self) -> &mut Ixe {
        &mut self.ixe
    }
    fn tx_cqs(&mut self) -> &mut SparseTable<TxCq> {
        &mut self.cqs.tx
    }
    fn counters(&mut self) -> &mut Counters {
        &mut self.counters
    }
    fn tables(&self) -> &Tables {
        &self.tables
    }
    fn atu(&mut self) -> &mut Atu {
        &mut self.atu
    }
    fn nid(&self) -> u32 {
        self.nid
    }
    fn nid_base(&self) -> u32 {
        self.nid_base
    }
    fn ptlte_eq(&self, pt: u16) -> u16 {
        self.lpe.ptlte_config(pt).map_or(0, |c| c.eq)
    }
    fn pid_bits(&self) -> PidBits {
        self.lpe.config().pid_bits
    }
    fn rdzv_get(&self) -> GetCtrl {
        self.tgt.rdzv_get
    }
    fn initiator_long(&self, eq: u16) -> bool {
        self.ee.eq(eq).is_some_and(|e| e.init_long)
    }
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool {
        self.post(io, eq, event, class)
    }
    fn pct_send(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        let _span = tracing::trace_span!("pct", dst = pkt.dst.0, len = pkt.data.len()).entered();
        PctOps::pct_send(self, io, pkt);
    }
    fn pct_stream(&mut self, io: &mut DeviceIo<'_>, stream: OutStream) {
        PctOps::pct_stream(self, io, stream);
    }
    fn ct_event(&mut self, io: &mut DeviceIo<'_>, ct: u16, success: u64, failure: u64) {
        TouOps::ct_event(self, io, ct, success, failure);
    }
    fn ct_command(&mut self, io: &mut DeviceIo<'_>, n: u32, bytes: &[u8]) -> Result<Exec, Fail> {
        TouOps::ct_command(self, io, n, bytes)
    }
    fn run_ring(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32) {
        CqOps::run_ring(self, io, tgt, n);
    }
    fn expire_target_messages(&mut self, now: u64, limit: u64) {
        TgtOps::expire_target_messages(self, now, limit);
    }
    fn target_busy(&mut self) -> bool {
        TgtOps::target_busy(self)
    }
}

impl PctCtx for Hw {
    fn pct(&mut self) -> &mut Pct {
        &mut self.pct
    }
    fn counters(&mut self) -> &mut Counters {
        &mut self.counters
    }
    fn nid(&self) -> u32 {
        self.nid
    }
    fn nid_base(&self) -> u32 {
        self.nid_base
    }
    fn receive(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        let _span = tracing::trace_span!("tgt", len = pkt.data.len()).entered();
        TgtOps::receive(self, io, pkt);
    }
    fn request_lost(&mut self, io: &mut DeviceIo<'_>, handle: u32, rc: ReturnCode) {
        IxeOps::request_lost(self, io, handle, rc);
    }
    fn stream_next(
        &mut self,
        io: &mut DeviceIo<'_>,
        stream: &mut OutStream,
        room: u32,
    ) -> Option<Packet> {
        IxeOps::stream_next(self, io, stream, room)
    }
    fn note_progress(&mut self, io: &mut DeviceIo<'_>) {
        IxeOps::note_progress(self, io);
    }
    fn reply_next(&mut self, io: &mut DeviceIo<'_>, stream: &mut ReplyStream, room: u32) -> Packet {
        TgtOps::reply_next(self, io, stream, room)
    }
    fn reply_read(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        TgtOps::reply_read(self, io, token);
    }
}

impl TgtCtx for Hw {
    fn tgt(&mut self) -> &mut Tgt {
        &mut self.tgt
    }
    fn tgq_rgid(&self, n: u32) -> u8 {
        self.cqs.tgt.get(n as usize).map_or(0, |q| q.rgid)
    }
    fn counters(&mut self) -> &mut Counters {
        &mut self.counters
    }
    fn nid(&self) -> u32 {
        self.nid
    }
    fn nid_base(&self) -> u32 {
        self.nid_base
    }
    fn rmu(&mut self) -> &mut Rmu {
        &mut self.rmu
    }
    fn lpe(&mut self) -> &mut Lpe {
        &mut self.lpe
    }
    fn tables(&self) -> &Tables {
        &self.tables
    }
    fn atu(&mut self) -> &mut Atu {
        &mut self.atu
    }
    fn tgt_and_atu(&mut self) -> (&mut Tgt, &mut Atu) {
        (&mut self.tgt, &mut self.atu)
    }
    fn eq_has_room(&self, eq: u16, bytes: usize, class: EventClass) -> bool {
        self.ee.has_room(eq, bytes, class)
    }
    fn target_long(&self, eq: u16) -> bool {
        self.ee.eq(eq).is_some_and(|e| e.tgt_long)
    }
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool {
        self.post(io, eq, event, class)
    }
    fn response(
        &mut self,
        io: &mut DeviceIo<'_>,
        rsp: &Response,
        payload: &[u8],
        train: Option<&Train>,
    ) {
        IxeOps::response(self, io, rsp, payload, train);
    }
    fn launch_rendezvous_get(
        &mut self,
        io: &mut DeviceIo<'_>,
        g: &RendezvousGet,
        put: &Fab,
        tc: TrafficClass,
        ct: Option<CtUpdate>,
    ) {
        IxeOps::launch_rendezvous_get(self, io, g, put, tc, ct);
    }
    fn ixe_scan_armed(&mut self) -> bool {
        IxeOps::ixe_scan_armed(self)
    }
    fn arm_scan(&mut self, io: &mut DeviceIo<'_>) {
        IxeOps::arm_scan(self, io);
    }
    fn pct_send(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        let _span = tracing::trace_span!("pct", dst = pkt.dst.0, len = pkt.data.len()).entered();
        PctOps::pct_send(self, io, pkt);
    }
    fn pct_reply(&mut self, io: &mut DeviceIo<'_>, stream: ReplyStream) {
        PctOps::pct_reply(self, io, stream);
    }
    fn ct_event(&mut self, io: &mut DeviceIo<'_>, ct: u16, success: u64, failure: u64) {
        TouOps::ct_event(self, io, ct, success, failure);
    }
}

impl TouCtx for Hw {
    fn ct(&mut self) -> &mut CtBlock {
        &mut self.ct
    }
    fn fault_state(&mut self) -> &mut crate::faults::FaultState {
        &mut self.faults
    }
    fn atu(&mut self) -> &mut Atu {
        &mut self.atu
    }
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool {
        self.post(io, eq, event, class)
    }
    fn cq_tle_pool(&mut self, n: u32) -> u8 {
        self.cqs.tx.get(n as usize).map_or(0, |q| q.tle_pool)
    }
    fn cq_may_use(&mut self, n: u32, eq: u16, ct: u16) -> bool {
        let rgid = self.cqs.tx.get(n as usize).map_or(0, |q| q.ring.rgid);
        self.tables.handles_in_rgid(rgid, eq, ct)
    }
    fn cq_read_ptr(&mut self, n: u32) -> u64 {
        self.cqs.tx.get(n as usize).map_or(0, |q| q.ring.rd32)
    }
    fn stalled_cqs(&mut self) -> &mut Vec<u32> {
        &mut self.cqs.stalled
    }
    fn run_ring(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32) {
        CqOps::run_ring(self, io, tgt, n);
    }
    fn fail_cq(
        &mut self,
        io: &mut DeviceIo<'_>,
        tgt: bool,
        n: u32,
        rc: ReturnCode,
        header: u8,
        cur32: u64,
        ll: bool,
    ) {
        CqOps::fail_cq(self, io, tgt, n, rc, header, cur32, ll);
    }
    fn launch_full(&mut self, io: &mut DeviceIo<'_>, n: u32, d: &FullDma) -> Result<Exec, Fail> {
        IxeOps::launch_full(self, io, n, d)
    }
    fn launch_nomatch(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        d: &NomatchDma,
    ) -> Result<Exec, Fail> {
        IxeOps::launch_nomatch(self, io, n, d)
    }
    fn launch_dma_amo(&mut self, io: &mut DeviceIo<'_>, n: u32, c: &DmaAmo) -> Result<Exec, Fail> {
        IxeOps::launch_dma_amo(self, io, n, c)
    }
}
