//! Command queues (`cxil_alloc_cmdq` and the inline `cxi_cq_*` of `cxi_prov_hw.h`): an
//! emitter for every command type over the ring writer of [`super::ring`], and the doorbell.
//!
//! Ring rules (cassini.md §1.4): 64 B slots tracked in 32 B half-slots (`wp32`); slots 0..3
//! hold the status write-back, commands start at slot 4 and the pointer wraps back to slot 4;
//! one 64 B slot is always left free (`wr_ptr == rd_ptr` means empty). Every command is
//! naturally aligned, the gap filled with 32 B NOOPs (first 8 bytes zero) — on trigger queues
//! with 64 B CT NOOPs; padding that reaches the end of the ring wraps the pointer to slot 4.
//! Free space is cached and the written-back `rd_ptr` re-read only when the cache runs low.
//!
//! The fast path never calls the driver: commands are plain stores into the mapped ring and
//! [`CmdQueue::ring`] is one 64-bit store of the write pointer to the launch page
//! ([`CmdQueue::ll_ring`] copies the commands into a low-latency window instead).

use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::Duration;

use driver::cassini::Mapping;
use driver::cassini::uapi::{CqAckCounterCmd, CqAllocCmd, CqAllocOpts, CqFreeCmd};
use driver::mem::MemWindow;
use driver::pci::Mmio;
use firmware_spec::cassini::amo::{AmoOp, AmoType};
use firmware_spec::cassini::cmd::TargetCommand;
use firmware_spec::cassini::cmd::{
    CState, Command, CqCmd, CqOp, CtCmd, DmaAmo, DmaEth, EmbeddedDma, FullDma, IdcAmo, IdcEth,
    IdcMsg, IdcPut, IdcSmallAmo, NomatchDma, SetStateCmd, TargetCmd, TrigDma,
};
use firmware_spec::cassini::le::{CqAllocFlags, CqUpdatePolicy};
use firmware_spec::cassini::status::{
    CQ_LAUNCH_LL_64, CQ_LAUNCH_LL_128A, CQ_LAUNCH_LL_128U, CQ_LAUNCH_WR_PTR, CqStatus, ll_offset,
};

use super::cp::Cp;
use super::error::{CxiError, Result};
use super::evtq::{EqShared, EventQueue};
use super::lni::{Lni, LniInner};
use super::wait::poll_until;

use super::ring::RingWriter;

/// Options of [`Lni::alloc_cmdq`] (`struct cxi_cq_alloc_opts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqOptions {
    /// Requested 64 B slots (the driver rounds up to a power-of-two number of pages).
    pub count: u32,
    /// Status write-back policy.
    pub policy: CqUpdatePolicy,
    /// `CXI_CQ_*` (`IS_TX`, `TX_WITH_TRIG_CMDS`, ...).
    pub flags: CqAllocFlags,
    /// Initial communication profile (transmit queues).
    pub lcid: u32,
    /// Statistics counter pool.
    pub stat_cnt_pool: u32,
    /// LPE append-credit threshold id (target queues).
    pub lpe_cdt_thresh_id: u32,
}

impl CqOptions {
    /// A transmit queue of `count` slots sending with `cp`.
    pub fn transmit(count: u32, cp: &Cp) -> Self {
        CqOptions {
            count,
            policy: CqUpdatePolicy::LowFreqEmpty,
            flags: CqAllocFlags::IS_TX,
            lcid: cp.lcid(),
            stat_cnt_pool: 0,
            lpe_cdt_thresh_id: 0,
        }
    }

    /// A trigger queue (CT commands only) of `count` slots, with a profile from
    /// [`Lni::alloc_trig_cp`].
    pub fn trigger(count: u32, cp: &Cp) -> Self {
        CqOptions {
            flags: CqAllocFlags::IS_TX | CqAllocFlags::TX_WITH_TRIG_CMDS,
            ..CqOptions::transmit(count, cp)
        }
    }

    /// A target queue (LE appends, searches, unlinks, PtlTE state changes).
    pub fn target(count: u32) -> Self {
        CqOptions {
            count,
            policy: CqUpdatePolicy::LowFreqEmpty,
            flags: CqAllocFlags::empty(),
            lcid: 0,
            stat_cnt_pool: 0,
            lpe_cdt_thresh_id: 0,
        }
    }
}

/// Frees the queue after the mappings of [`CmdQueue`] are gone (it is the last field).
struct CqGuard {
    lni: Arc<LniInner>,
    handle: u32,
    _eq: Option<Arc<EqShared>>,
}

impl Drop for CqGuard {
    fn drop(&mut self) {
        if let Err(e) = self.lni.dev.client.call(&CqFreeCmd {
            cq: self.handle,
            ..CqFreeCmd::default()
        }) {
            tracing::warn!(cq = self.handle, error = %e, "CQ_FREE failed");
        }
    }
}

/// A command queue (`struct cxi_cq`): transmit, trigger or target.
pub struct CmdQueue {
    ring: RingWriter<MemWindow>,
    launch: Arc<dyn Mmio>,
    /// The last C_STATE emitted (IDC commands re-emit it only when it changes).
    cstate: Option<CState>,
    tx: bool,
    trig: bool,
    count: u32,
    staging: [u8; 256],
    guard: CqGuard,
}

impl std::fmt::Debug for CmdQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmdQueue")
            .field("handle", &self.guard.handle)
            .field("tx", &self.tx)
            .field("trig", &self.trig)
            .field("count", &self.count)
            .field("wp32", &self.ring.wp32())
            .finish()
    }
}

impl Lni {
    /// `cxil_alloc_cmdq(lni, evtq, opts)`: a command queue whose failures are reported on
    /// `eq` (none if `None`).
    pub fn alloc_cmdq(&self, eq: Option<&EventQueue>, opts: &CqOptions) -> Result<CmdQueue> {
        let dev = self.dev();
        let r = dev.client.call(&CqAllocCmd {
            lni: self.id(),
            eq: eq.map_or(0, EventQueue::eqn),
            opts: CqAllocOpts {
                count: opts.count,
                policy: opts.policy as u32,
                stat_cnt_pool: opts.stat_cnt_pool,
                flags: opts.flags.bits(),
                lcid: opts.lcid,
                lpe_cdt_thresh_id: opts.lpe_cdt_thresh_id,
            },
            ..CqAllocCmd::default()
        })?;
        let guard = CqGuard {
            lni: Arc::clone(&self.inner),
            handle: r.cq,
            _eq: eq.map(|q| Arc::clone(&q.shared)),
        };
        let ring = match dev.client.mmap_token(&r.cmds)? {
            Mapping::Memory(m) => m,
            Mapping::Mmio(_) => return Err(CxiError::Mapping("command ring")),
        };
        let launch = dev
            .client
            .mmap_token(&r.wp_addr)?
            .mmio()
            .ok_or(CxiError::Mapping("launch page"))?;
        let trig = opts.flags.contains(CqAllocFlags::TX_WITH_TRIG_CMDS);
        Ok(CmdQueue {
            ring: RingWriter::new(ring, r.count, trig)?,
            launch,
            cstate: None,
            tx: opts.flags.contains(CqAllocFlags::IS_TX),
            trig,
            count: r.count,
            staging: [0u8; 256],
            guard,
        })
    }
}

/// Whether an IDC AMO needs the full 64 B form (cassini.md §2.1: fetching, CSWAP, AXOR and
/// 16-byte operands); otherwise the 32 B form carries it.
fn needs_full_amo(a: &IdcAmo) -> bool {
    a.opcode != firmware_spec::cassini::cmd::DmaOp::Atomic
        || matches!(a.atomic_op, AmoOp::Cswap | AmoOp::Axor)
        || matches!(a.atomic_type, AmoType::DoubleComplex | AmoType::Uint128)
}

impl CmdQueue {
    /// The queue handle (transmit 0..1023, target 1024 + n).
    pub fn handle(&self) -> u32 {
        self.guard.handle
    }

    /// `cxi_cq_get_cqn`: the queue number within its kind.
    pub fn cqn(&self) -> u32 {
        if self.tx {
            self.guard.handle
        } else {
            self.guard.handle.saturating_sub(1024)
        }
    }

    /// Slots in the ring.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// A transmit (or trigger) queue.
    pub fn is_tx(&self) -> bool {
        self.tx
    }

    /// A trigger queue.
    pub fn is_trigger(&self) -> bool {
        self.trig
    }

    /// The ring writer (pointers and cached free space).
    pub fn ring_state(&self) -> &RingWriter<MemWindow> {
        &self.ring
    }

    fn need_tx(&self) -> Result<()> {
        if self.tx {
            Ok(())
        } else {
            Err(CxiError::Invalid("a transmit command on a target queue"))
        }
    }

    /// `cxi_cq_emit_cmd`: any transmit command.
    pub fn emit(&mut self, cmd: &Command) -> Result<()> {
        self.need_tx()?;
        let n = cmd.encode_into(&mut self.staging)?;
        let bytes = self
            .staging
            .get(..n)
            .ok_or(CxiError::Invalid("command longer than 256 bytes"))?;
        self.ring.emit_raw(bytes)
    }

    /// `cxi_cq_emit_dma`: a full DMA command (PUT, GET, RENDEZVOUS_PUT).
    pub fn emit_dma(&mut self, cmd: &FullDma) -> Result<()> {
        self.emit(&Command::Dma(*cmd))
    }

    /// `cxi_cq_emit_nomatch_dma`: NOMATCH_PUT / NOMATCH_GET (always restricted).
    pub fn emit_nomatch_dma(&mut self, cmd: &NomatchDma) -> Result<()> {
        let mut c = *cmd;
        c.flags.restricted = true;
        self.emit(&Command::NomatchDma(c))
    }

    /// `cxi_cq_emit_dma_amo`: a DMA AMO; `request_len` is set to the operand size of the
    /// atomic type.
    pub fn emit_dma_amo(&mut self, cmd: &DmaAmo) -> Result<()> {
        let mut c = *cmd;
        c.request_len = c.atomic_type.size() as u32;
        self.emit(&Command::DmaAmo(c))
    }

    /// `cxi_cq_emit_dma_eth`: an Ethernet frame from up to 7 segments (privileged queues).
    pub fn emit_dma_eth(&mut self, cmd: &DmaEth) -> Result<()> {
        self.emit(&Command::DmaEth(*cmd))
    }

    /// `cxi_cq_emit_c_state`: set the C_STATE of later IDC commands; emitted only when it
    /// differs from the last one.
    pub fn emit_c_state(&mut self, cstate: &CState) -> Result<()> {
        if self.cstate.as_ref() == Some(cstate) {
            return Ok(());
        }
        self.emit(&Command::CState(*cstate))?;
        self.cstate = Some(*cstate);
        Ok(())
    }

    /// `cxi_cq_emit_idc_put`: C_STATE (if changed), then an IDC Put of `put.payload`.
    pub fn emit_idc_put(&mut self, cstate: &CState, put: &IdcPut) -> Result<()> {
        self.emit_c_state(cstate)?;
        self.emit(&Command::IdcPut(*put))
    }

    /// `cxi_cq_emit_idc_msg`: C_STATE (if changed), then an IDC small message (payload at
    /// most 192 bytes).
    pub fn emit_idc_msg(&mut self, cstate: &CState, msg: &IdcMsg) -> Result<()> {
        self.emit_c_state(cstate)?;
        self.emit(&Command::IdcMsg(*msg))
    }

    /// `cxi_cq_emit_idc_amo`: C_STATE (if changed), then an IDC AMO — the 32 B form when it
    /// can carry the operation, else the 64 B form.
    pub fn emit_idc_amo(&mut self, cstate: &CState, amo: &IdcAmo) -> Result<()> {
        self.emit_c_state(cstate)?;
        if needs_full_amo(amo) {
            self.emit(&Command::IdcAmo(*amo))
        } else {
            self.emit(&Command::IdcSmallAmo(IdcSmallAmo {
                dfa: amo.dfa,
                remote_offset: amo.remote_offset,
                atomic_op: amo.atomic_op,
                atomic_type: amo.atomic_type,
                op1_word1: amo.op1_word1,
            }))
        }
    }

    /// `cxi_cq_emit_idc_eth`: an inline Ethernet frame (privileged queues).
    pub fn emit_idc_eth(&mut self, cmd: &IdcEth) -> Result<()> {
        self.emit(&Command::IdcEth(*cmd))
    }

    /// `cxi_cq_emit_cq_cmd`: CQ NOOP or CQ FENCE.
    pub fn emit_cq_cmd(&mut self, op: CqOp) -> Result<()> {
        if op == CqOp::CqLcid {
            return Err(CxiError::Invalid("use emit_cq_lcid"));
        }
        self.emit(&Command::Cq(CqCmd {
            opcode: op,
            lcid: 0,
        }))
    }

    /// `cxi_cq_emit_cq_lcid`: switch the queue's communication profile. The command is
    /// placed 128 B aligned and followed by a 64 B CQ NOOP.
    pub fn emit_cq_lcid(&mut self, lcid: u8) -> Result<()> {
        self.need_tx()?;
        if lcid > 15 {
            return Err(CxiError::Invalid("lcid is 4 bits"));
        }
        let mut pair = [0u8; 128];
        Command::Cq(CqCmd {
            opcode: CqOp::CqLcid,
            lcid,
        })
        .encode_into(&mut pair[..64])?;
        Command::Cq(CqCmd {
            opcode: CqOp::CqNoop,
            lcid: 0,
        })
        .encode_into(&mut pair[64..])?;
        // A 128 B unit gets 128 B alignment; the device sees a 64 B command then a NOOP.
        self.ring.emit_raw(&pair)
    }

    /// `cxi_cq_emit_ct`: a CT command (64 B; CT_TRIG_DMA goes through
    /// [`CmdQueue::emit_trig_dma`]).
    pub fn emit_ct(&mut self, cmd: &CtCmd) -> Result<()> {
        self.emit(&Command::Ct(*cmd))
    }

    /// `cxi_cq_emit_trig_*`: a CT_TRIG_DMA (128 B): launch `trig.dma` when CT `trig.ct.trig_ct`
    /// reaches `trig.ct.threshold`.
    pub fn emit_trig_dma(&mut self, trig: &TrigDma) -> Result<()> {
        self.emit(&Command::TrigDma(*trig))
    }

    /// `cxi_cq_emit_trig_full_dma`: launch `dma` when CT `trig_ct` reaches `threshold`.
    pub fn emit_trig_full_dma(
        &mut self,
        trig_ct: u16,
        threshold: u64,
        dma: &FullDma,
    ) -> Result<()> {
        self.emit_trig_dma(&TrigDma::new(trig_ct, threshold, EmbeddedDma::Full(*dma)))
    }

    /// `cxi_cq_emit_trig_nomatch_dma`.
    pub fn emit_trig_nomatch_dma(
        &mut self,
        trig_ct: u16,
        threshold: u64,
        dma: &NomatchDma,
    ) -> Result<()> {
        let mut d = *dma;
        d.flags.restricted = true;
        self.emit_trig_dma(&TrigDma::new(trig_ct, threshold, EmbeddedDma::Nomatch(d)))
    }

    /// `cxi_cq_emit_trig_dma_amo`.
    pub fn emit_trig_dma_amo(&mut self, trig_ct: u16, threshold: u64, amo: &DmaAmo) -> Result<()> {
        let mut a = *amo;
        a.request_len = a.atomic_type.size() as u32;
        self.emit_trig_dma(&TrigDma::new(trig_ct, threshold, EmbeddedDma::Amo(a)))
    }

    /// `cxi_cq_emit_target`: APPEND, SEARCH, SEARCH_AND_DELETE or UNLINK (target queues).
    pub fn emit_target(&mut self, cmd: &TargetCmd) -> Result<()> {
        self.emit_target_command(&TargetCommand::List(*cmd))
    }

    /// SETSTATE of a PtlTE (target queues).
    pub fn emit_set_state(&mut self, cmd: &SetStateCmd) -> Result<()> {
        self.emit_target_command(&TargetCommand::SetState(*cmd))
    }

    fn emit_target_command(&mut self, cmd: &TargetCommand) -> Result<()> {
        if self.tx {
            return Err(CxiError::Invalid("a target command on a transmit queue"));
        }
        let n = cmd.encode_into(&mut self.staging)?;
        let bytes = self
            .staging
            .get(..n)
            .ok_or(CxiError::Invalid("target command length"))?;
        self.ring.emit_raw(bytes)
    }

    /// `cxi_cq_ring`: make the commands written so far visible, then store the write
    /// pointer to the launch page (padding a half-used slot with a 32 B NOOP first).
    pub fn ring(&mut self) -> Result<()> {
        self.ring.align_for_doorbell()?;
        // wp_fence: the commands must be visible before the doorbell.
        fence(Ordering::Release);
        let wp = self.ring.doorbell_value();
        self.launch
            .write(CQ_LAUNCH_WR_PTR as u64, &wp.to_le_bytes())?;
        self.ring.rung();
        Ok(())
    }

    /// `cxi_cq_ll_ring`: low-latency launch. When the commands since the last doorbell are
    /// one 64 B slot, or two slots not crossing the end of a window, they are copied with
    /// 64-bit stores into the `ll_64` / `ll_128a` / `ll_128u` window at `LL_OFFSET`, as one
    /// write-combined burst ([`Mmio::write_burst`]); the device takes that as the doorbell.
    /// Anything else falls back to [`CmdQueue::ring`].
    pub fn ll_ring(&mut self) -> Result<()> {
        self.ring.align_for_doorbell()?;
        let hw_slot = self.ring.hw_wp32() / 2;
        let window = match (self.ring.pending_slots(), self.ring.pending_bytes()) {
            (1, Some(b)) if b.len() == 64 => CQ_LAUNCH_LL_64,
            (2, Some(b)) if b.len() == 128 && hw_slot & 0xF != 0xF => {
                if hw_slot.is_multiple_of(2) {
                    CQ_LAUNCH_LL_128A
                } else {
                    CQ_LAUNCH_LL_128U
                }
            }
            _ => return self.ring(),
        };
        fence(Ordering::Release);
        let base = (window + ll_offset(self.ring.hw_wp32())) as u64;
        if let Some(bytes) = self.ring.pending_bytes() {
            // One write-combined burst: 64-bit stores on a real mapping, one access on an
            // emulated one.
            self.launch.write_burst(base, bytes)?;
        }
        self.ring.rung();
        Ok(())
    }

    /// The `c_cq_status` block the device writes back.
    pub fn status(&self) -> Result<CqStatus> {
        self.ring.status()
    }

    /// `cxi_cq_empty`: whether the device has read every command rung so far.
    pub fn is_empty(&mut self) -> Result<bool> {
        self.ring.is_empty()
    }

    /// Free 64 B slots (cached; re-read from the device when low).
    pub fn free_slots(&self) -> u64 {
        self.ring.free32() / 2
    }

    /// Wait until the device has read every command rung so far. A failed queue (status
    /// return code other than OK) ends the wait with [`CxiError::Device`].
    pub fn wait_empty(&mut self, timeout: Option<Duration>) -> Result<()> {
        let dev = Arc::clone(&self.guard.lni.dev);
        poll_until(dev.device(), timeout, || {
            let st = self.ring.status()?;
            use firmware_spec::cassini::rc::ReturnCode as Rc;
            if !matches!(st.return_code, Rc::Ok | Rc::NoEvent) {
                return Err(CxiError::Device(st.return_code));
            }
            Ok(self.ring.is_empty()?.then_some(()))
        })
    }

    /// `cxil_cmdq_ack_counter`: triggered operations from this queue still pending.
    pub fn ack_counter(&self) -> Result<u32> {
        let r = self.guard.lni.dev.client.call(&CqAckCounterCmd {
            cq: self.guard.handle,
            ..CqAckCounterCmd::default()
        })?;
        Ok(r.ack_counter)
    }
}
