//! The NIC's hardware blocks wired together: [`Hw`] owns the state of every block, routes
//! launch-page and EE-page stores, packets and timers to the block that owns them, and
//! caches decoded configuration ([`Tables`]) so the data path never reads the CSR file. CSR
//! accesses reach the blocks through the table of hooks in `csr_hooks`.
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
use emu_core::pci_shell::PciShell;
use emu_core::sparse::SparseTable;
use firmware_spec::cassini::cmd::{DmaAmo, FullDma, NomatchDma};
use firmware_spec::cassini::dfa::PidBits;
use firmware_spec::cassini::rc::ReturnCode;

use crate::atu::Atu;
use crate::block::{Counters, EventClass, Exec, Fail, GetCtrl};
use crate::config::CassiniConfig;
use crate::counters::CounterView;
use crate::cq::{CqCtx, CqOps, Cqs, TxCq};
use crate::ct::CtBlock;
use crate::ee::Ee;
use crate::ixe::{
    Ixe, IxeComplete, IxeCtx, IxeLaunch, IxeOps, IxeRendezvous, IxeResponse, IxeTimeout, OutStream,
};
use crate::lpe::{CtUpdate, Lpe, RendezvousGet};
use crate::pct::{Pct, PctCtx, PctOps};
use crate::rmu::Rmu;
use crate::tables::Tables;
use crate::tgt::{ReplyStream, Tgt, TgtCommand, TgtCtx, TgtGet, TgtOps, TgtPut};
use crate::tou::{TouCtx, TouOps};
use crate::wire::{Fab, Response};

/// Every block of the NIC.
#[derive(Clone, Debug)]
pub(crate) struct Hw {
    pub(crate) nid: u32,
    pub(crate) nid_base: u32,
    /// The PCI function: configuration space and MSI-X (the PCIe interface, PI).
    pub(crate) pi: PciShell,
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

impl Hw {
    pub(crate) fn new(cfg: &CassiniConfig, pi: PciShell) -> Self {
        let lpe = Lpe::new(cfg.lpe).unwrap_or_default();
        Hw {
            nid: cfg.nid & 0xF_FFFF,
            nid_base: cfg.nid_base,
            pi,
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
            .post(&mut self.atu, &mut self.pi, io, eq, event, class)
    }

    /// Every block that keeps counters, for a counter read.
    pub(crate) fn counter_view(&self) -> CounterView<'_> {
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
        TgtCommand::exec_target(self, io, n, bytes)
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
        TgtPut::expire_target_messages(self, now, limit);
    }
    fn target_busy(&mut self) -> bool {
        TgtPut::target_busy(self)
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
        IxeComplete::request_lost(self, io, handle, rc);
    }
    fn stream_next(
        &mut self,
        io: &mut DeviceIo<'_>,
        stream: &mut OutStream,
        room: u32,
    ) -> Option<Packet> {
        IxeLaunch::stream_next(self, io, stream, room)
    }
    fn note_progress(&mut self, io: &mut DeviceIo<'_>) {
        IxeTimeout::note_progress(self, io);
    }
    fn reply_next(&mut self, io: &mut DeviceIo<'_>, stream: &mut ReplyStream, room: u32) -> Packet {
        TgtGet::reply_next(self, io, stream, room)
    }
    fn reply_read(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        TgtGet::reply_read(self, io, token);
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
        IxeResponse::response(self, io, rsp, payload, train);
    }
    fn launch_rendezvous_get(
        &mut self,
        io: &mut DeviceIo<'_>,
        g: &RendezvousGet,
        put: &Fab,
        tc: TrafficClass,
        ct: Option<CtUpdate>,
    ) {
        IxeRendezvous::launch_rendezvous_get(self, io, g, put, tc, ct);
    }
    fn ixe_scan_armed(&mut self) -> bool {
        IxeTimeout::ixe_scan_armed(self)
    }
    fn arm_scan(&mut self, io: &mut DeviceIo<'_>) {
        IxeTimeout::arm_scan(self, io);
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
