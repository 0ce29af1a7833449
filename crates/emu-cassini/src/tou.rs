//! The trigger operation unit's glue: TOU doorbells, CT commands from transmit CQs, counting
//! events from initiator and target completions, and the CT configuration CSRs go to the CT
//! block ([`crate::ct::CtBlock`], a pure state machine); its effects are carried out here:
//! write-backs by DMA through the ATU, TRIGGERED_OP events, and fired CT_TRIG_DMA commands
//! launched as commands of their trigger CQ.
//!
//! A CT command the block cannot accept yet (no free triggered-list entry) stalls its CQ at
//! that command; the CQ is run again after the next CT operation that freed an entry (a
//! firing or a cancel). That is our reading of the sources: libfabric documents that, without
//! `FI_CXI_ENABLE_TRIG_OP_LIMIT`, exceeding the triggered-operation limit can *deadlock*
//! `fi_control(FI_QUEUE_WORK)` ("applications must prevent deadlock by ensuring triggered op
//! limit is not exceeded"), i.e. the trigger CQ stops consuming commands rather than failing
//! them. Software sees the refusal as a ring that no longer drains (`cxi_cq_emit_*` returns
//! -ENOSPC once it is full); the device also sets `c_cq_err_flg.tle_oversubscribed`
//! (cleared through `c_cq_err_clr`).
//!
//! The TLE pools follow the driver's CSRs: `c_cq_cfg_tle_pool[4]` {`num_reserved`,
//! `max_alloc`}, `c_cq_cfg_sts_tle_shared.num_shared`; the status fields (`in_use`,
//! `num_shared_allocated`, `num_total_allocated`, `c_cq_sts_tle_in_use`,
//! `c_cq_sts_max_tle_in_use` — written to reset the high-water mark) and the ack counters
//! (`c_cq_txq_ack_ctr`, `c_cq_tgq_ack_ctr`: triggered operations of that CQ still pending)
//! read back the block's state.
//!
//! The glue reaches the rest of the NIC only through [`TouCtx`] (implemented by `hw`).

use emu_core::engine::DeviceIo;
use firmware_spec::cassini::cmd::{DmaAmo, FullDma, NomatchDma};
use firmware_spec::cassini::csr;
use firmware_spec::cassini::ct::EmbeddedDma;
use firmware_spec::cassini::rc::ReturnCode;

use crate::atu::Atu;
use crate::block::{EventClass, Exec, Fail};
use crate::csr::{CsrFile, Piece};
use crate::ct::{CmdSource, CtAction, CtBlock, CtCommand, Effects, TlePoolConfig, WbAddr};

/// Bit of `tle_oversubscribed` in `c_cq_err_flg` / `c_cq_err_clr`.
const TLE_OVERSUBSCRIBED_BIT: u32 = 33;

/// What the TOU glue needs from the rest of the NIC: the CT block it drives, the transmit
/// CQs (TLE pools, stalls, failures), the ATU and the event queues for its effects, and the
/// initiator that launches fired CT_TRIG_DMA commands. `hw` implements it.
pub(crate) trait TouCtx {
    /// The CT block.
    fn ct(&mut self) -> &mut CtBlock;
    /// Work held by the timed fault sites (delayed write-backs).
    fn fault_state(&mut self) -> &mut crate::faults::FaultState;
    /// Address translation for CT write-backs.
    fn atu(&mut self) -> &mut Atu;
    /// Post an encoded event to EQ `eq`; false if it was dropped.
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool;
    /// TLE pool of transmit CQ `n` (`mem_q_pfq`).
    fn cq_tle_pool(&mut self, n: u32) -> u8;
    /// Whether transmit CQ `n` may name EQ `eq` and counting event `ct` (same resource
    /// group, `c_cq_cfg_{eq,ct}_rgid_table`; 0 names none).
    fn cq_may_use(&mut self, n: u32, eq: u16, ct: u16) -> bool;
    /// Read pointer of transmit CQ `n` in 32 B half-slots.
    fn cq_read_ptr(&mut self, n: u32) -> u64;
    /// Transmit CQs stalled at a CT command (no free triggered-list entry).
    fn stalled_cqs(&mut self) -> &mut Vec<u32>;
    /// Run the ring of CQ `n` (the CQ block).
    fn run_ring(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32);
    /// Fail CQ `n` at half-slot `cur32` (the CQ block).
    #[allow(clippy::too_many_arguments)]
    fn fail_cq(
        &mut self,
        io: &mut DeviceIo<'_>,
        tgt: bool,
        n: u32,
        rc: ReturnCode,
        header: u8,
        cur32: u64,
        ll: bool,
    );
    /// Launch a full DMA command from CQ `n` (the initiator).
    fn launch_full(&mut self, io: &mut DeviceIo<'_>, n: u32, d: &FullDma) -> Result<Exec, Fail>;
    /// Launch a non-matching DMA command from CQ `n` (the initiator).
    fn launch_nomatch(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        d: &NomatchDma,
    ) -> Result<Exec, Fail>;
    /// Launch a DMA AMO from CQ `n` (the initiator).
    fn launch_dma_amo(&mut self, io: &mut DeviceIo<'_>, n: u32, c: &DmaAmo) -> Result<Exec, Fail>;
}

impl<T: TouCtx + ?Sized> TouOps for T {}

/// The TOU glue's behaviour, on anything that provides a [`TouCtx`].
pub(crate) trait TouOps: TouCtx {
    /// Carry out the CT block's effects in order.
    fn ct_effects(&mut self, io: &mut DeviceIo<'_>, fx: Effects, tles_before: usize) {
        for a in fx.actions {
            match a {
                CtAction::Writeback(w) => {
                    // Fault site `ct_delay`: the write-back reaches host memory later (and
                    // so does every later one of this CT until then; the newest image wins).
                    let fires = io.fault(emu_core::nic_faults::NicSite::CtDelay);
                    if self.fault_state().hold_writeback(io, w, fires) {
                        continue;
                    }
                    // A write-back address outside its context has nowhere to report to.
                    let _ = self
                        .atu()
                        .write(io.dma(), w.target.context, w.target.addr, &w.bytes());
                }
                CtAction::FireEvent(e) => {
                    let ev = e.event().encode();
                    self.post_event(io, e.eq, &ev, EventClass::Other);
                }
                CtAction::FireDma(d) => {
                    let cq = u32::from(d.from_cq);
                    // The embedded command runs through the initiator as a command of its
                    // trigger CQ; one that fails is reported like a failed command of that CQ.
                    let r = match d.command() {
                        Ok(EmbeddedDma::Full(c)) => self.launch_full(io, cq, &c),
                        Ok(EmbeddedDma::Nomatch(c)) => self.launch_nomatch(io, cq, &c),
                        Ok(EmbeddedDma::Amo(c)) => self.launch_dma_amo(io, cq, &c),
                        Err(_) => Err(firmware_spec::cassini::rc::ReturnCode::IllegalOp),
                    };
                    if let Err(rc) = r {
                        let cur = self.cq_read_ptr(cq);
                        self.fail_cq(io, false, cq, rc, d.raw[0], cur, false);
                    }
                }
            }
        }
        self.wake_stalled(io, tles_before);
    }

    /// Run the trigger CQs stalled for lack of a TLE again if entries were freed since
    /// `tles_before` were in use.
    fn wake_stalled(&mut self, io: &mut DeviceIo<'_>, tles_before: usize) {
        if self.stalled_cqs().is_empty() || self.ct().tles_in_use() >= tles_before {
            return;
        }
        let stalled = std::mem::take(self.stalled_cqs());
        for cq in stalled {
            self.run_ring(io, false, cq);
        }
    }

    /// A counting event: add to CT `ct` (0 = none).
    fn ct_event(&mut self, io: &mut DeviceIo<'_>, ct: u16, success: u64, failure: u64) {
        if ct == 0 {
            return;
        }
        let before = self.ct().tles_in_use();
        if let Ok(fx) = self.ct().event_increment(ct, success, failure) {
            self.ct_effects(io, fx, before);
        }
    }

    /// A store to CT `ct`'s TOU doorbell page.
    fn ct_doorbell(&mut self, io: &mut DeviceIo<'_>, ct: u32, off: u32, data: &[u8]) {
        let (Ok(ct), 8) = (u16::try_from(ct), data.len()) else {
            return;
        };
        let mut q = [0u8; 8];
        q.copy_from_slice(data);
        let before = self.ct().tles_in_use();
        if let Ok(fx) = self.ct().doorbell(ct, off as usize, u64::from_le_bytes(q)) {
            self.ct_effects(io, fx, before);
        }
    }

    /// A CT command on transmit CQ `n`.
    fn ct_command(&mut self, io: &mut DeviceIo<'_>, n: u32, bytes: &[u8]) -> Result<Exec, Fail> {
        let cmd = CtCommand::decode(bytes)
            .map_err(|_| firmware_spec::cassini::rc::ReturnCode::CmdInvalidArg)?;
        let c = match &cmd {
            CtCommand::Ct(c) | CtCommand::TrigDma { ct: c, .. } => *c,
        };
        if !(self.cq_may_use(n, c.eq, c.ct) && self.cq_may_use(n, 0, c.trig_ct)) {
            return Err(firmware_spec::cassini::rc::ReturnCode::PermViolation);
        }
        // CQ `n` is running, so it is not waiting to be woken: a wake-up from the effects of
        // this very command must not run its ring again from inside.
        self.stalled_cqs().retain(|&c| c != n);
        let pool = self.cq_tle_pool(n);
        let src = CmdSource {
            cq: n as u16,
            tle_pool: pool,
        };
        let before = self.ct().tles_in_use();
        match self.ct().command(&cmd, src) {
            Ok(fx) => {
                self.ct_effects(io, fx, before);
                Ok(Exec::Next)
            }
            Err(e) if e.is_stall() => {
                if !self.stalled_cqs().contains(&n) {
                    self.stalled_cqs().push(n);
                }
                Ok(Exec::Stall)
            }
            Err(e) => Err(e.return_code()),
        }
    }

    /// `c_cq_cfg_ct_enable[n]` was written: CT `n` enabled (writing back to the address in
    /// `c_cq_cfg_ct_wb_mem_addr[n]`) or disabled.
    fn ct_enable_written(&mut self, csrs: &CsrFile, n: u32) {
        use csr::fields::c_cq_cfg_ct_enable as f;
        let Ok(ct) = u16::try_from(n) else {
            return;
        };
        let wb = WbAddr::from_csr(csrs.entry_qword(csr::C_CQ_CFG_CT_WB_MEM_ADDR, n, 0));
        let en = csrs.field(csr::C_CQ_CFG_CT_ENABLE, n, f::CT_ENABLE) != 0;
        let _ = if en {
            self.ct().enable(ct, wb)
        } else {
            self.ct().disable(ct)
        };
    }

    /// `c_cq_cfg_ct_wb_mem_addr[n]` was written: CT `n` writes back there from now on.
    fn ct_writeback_written(&mut self, csrs: &CsrFile, n: u32) {
        let Ok(ct) = u16::try_from(n) else {
            return;
        };
        let wb = WbAddr::from_csr(csrs.entry_qword(csr::C_CQ_CFG_CT_WB_MEM_ADDR, n, 0));
        let _ = self.ct().set_writeback(ct, wb);
    }

    /// `c_cq_cfg_init_ct_hw_state` was written: initialise and/or cancel the CT it names
    /// (bit 11 init, bit 12 cancel); queues stalled for a TLE the cancel freed run again.
    fn ct_init_written(&mut self, csrs: &CsrFile, io: &mut DeviceIo<'_>) {
        let before = self.ct().tles_in_use();
        let qw = csrs.entry_qword(csr::C_CQ_CFG_INIT_CT_HW_STATE, 0, 0);
        let handle = (qw & 0x7FF) as u16;
        if qw & (1 << 11) != 0 {
            let _ = self.ct().init(handle);
        }
        if qw & (1 << 12) != 0 {
            let _ = self.ct().cancel(handle);
        }
        self.wake_stalled(io, before);
    }
}

// ---- the TLE pool, ack-counter and CQ error-flag CSRs (module docs), hooked by `csr_hooks` ----

/// `c_cq_cfg_tle_pool[n]` was written: the pool's reservation and limit.
pub(crate) fn tle_pool_written(ct: &mut CtBlock, csrs: &CsrFile, n: u32) {
    use csr::fields::c_cq_cfg_tle_pool as f;
    let c = csr::C_CQ_CFG_TLE_POOL;
    let cfg = TlePoolConfig {
        num_reserved: csrs.field(c, n, f::NUM_RESERVED) as u16,
        max_alloc: csrs.field(c, n, f::MAX_ALLOC) as u16,
    };
    let _ = ct.set_tle_pool(n as u8, cfg);
}

/// `c_cq_cfg_sts_tle_shared` was written: the TLEs the pools share.
pub(crate) fn tle_shared_written(ct: &mut CtBlock, csrs: &CsrFile) {
    use csr::fields::c_cq_cfg_sts_tle_shared as f;
    let shared = csrs.field(csr::C_CQ_CFG_STS_TLE_SHARED, 0, f::NUM_SHARED);
    ct.set_tle_shared(shared as u16);
}

/// `c_cq_err_clr` (a strobe) or `c_cq_err_flg` (write-1-to-clear) was written: writing 1
/// to the `tle_oversubscribed` bit clears it.
pub(crate) fn err_flag_written(ct: &mut CtBlock, p: &Piece, data: &[u8]) {
    let byte = (TLE_OVERSUBSCRIBED_BIT / 8) as usize;
    let hit = byte
        .checked_sub(p.byte)
        .and_then(|i| data.get(i))
        .is_some_and(|b| b & (1 << (TLE_OVERSUBSCRIBED_BIT % 8)) != 0);
    if hit {
        ct.clear_tle_oversubscribed();
    }
}

/// `c_cq_cfg_tle_pool[entry]` read: TLEs of the pool in use.
pub(crate) fn reflect_tle_pool(ct: &CtBlock, entry: u32, image: &mut [u8]) {
    let in_use = ct.tle_pool_status(entry as u8).unwrap_or_default().in_use;
    csr::fields::c_cq_cfg_tle_pool::IN_USE.set(image, u64::from(in_use));
}

/// `c_cq_sts_tle_in_use[entry]` read: TLEs of the pool in use.
pub(crate) fn reflect_tle_in_use(ct: &CtBlock, entry: u32, image: &mut [u8]) {
    let in_use = ct.tle_pool_status(entry as u8).unwrap_or_default().in_use;
    csr::fields::c_cq_sts_tle_in_use::COUNT.set(image, u64::from(in_use));
}

/// `c_cq_sts_max_tle_in_use[entry]` read: the pool's high-water mark.
pub(crate) fn reflect_tle_max(ct: &CtBlock, entry: u32, image: &mut [u8]) {
    let max = ct
        .tle_pool_status(entry as u8)
        .unwrap_or_default()
        .max_in_use;
    csr::fields::c_cq_sts_max_tle_in_use::MAX.set(image, u64::from(max));
}

/// `c_cq_cfg_sts_tle_shared` read: shared TLEs allocated, and TLEs in use in all.
pub(crate) fn reflect_tle_shared(ct: &CtBlock, image: &mut [u8]) {
    use csr::fields::c_cq_cfg_sts_tle_shared as f;
    f::NUM_SHARED_ALLOCATED.set(image, u64::from(ct.tle_shared_allocated()));
    f::NUM_TOTAL_ALLOCATED.set(image, ct.tles_in_use() as u64);
}

/// `c_cq_txq_ack_ctr[entry]` / `c_cq_tgq_ack_ctr[entry]` read: triggered operations of
/// that CQ still pending (target CQs follow the transmit CQs in the CT block's numbering).
pub(crate) fn reflect_ack_ctr(ct: &CtBlock, tgt: bool, entry: u32, image: &mut [u8]) {
    if tgt {
        let cq = firmware_spec::cassini::limits::C_NUM_TRANSMIT_CQS as u32 + entry;
        let n = ct.pending(cq as u16);
        csr::fields::c_cq_tgq_ack_ctr::MEM_Q_ACK_CTR.set(image, u64::from(n));
    } else {
        let n = ct.pending(entry as u16);
        csr::fields::c_cq_txq_ack_ctr::MEM_Q_ACK_CTR.set(image, u64::from(n));
    }
}

/// `c_cq_err_flg` read: `tle_oversubscribed`.
pub(crate) fn reflect_err_flag(ct: &CtBlock, image: &mut [u8]) {
    let v = u64::from(ct.tle_oversubscribed());
    csr::fields::c_cq_err_flg::TLE_OVERSUBSCRIBED.set(image, v);
}
