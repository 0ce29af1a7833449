//! Counting events (`cxil_alloc_ct`, `cxil_ct_wb_update`, the inline `cxi_ct_*` doorbells).
//!
//! A CT counts successes (48 bits) and failures (7 bits). The device writes
//! `c_ct_writeback {success, failure, ct_writeback = 1}` to an 8-byte user buffer whenever
//! the counts change (cassini.md §5); software clears the `ct_writeback` byte. Increments
//! and resets are 64-bit stores to the CT's doorbell page (no driver call); CT_SET / CT_INC /
//! CT_GET / CT_CANCEL are commands on a (trigger) queue.

use std::sync::Arc;
use std::time::Duration;

use driver::cassini::uapi::{CtAllocCmd, CtFreeCmd, CtWbUpdateCmd};
use driver::mem::UserMemory;
use driver::pci::Mmio;
use firmware_spec::cassini::cmd::{CtCmd, CtOp};
use firmware_spec::cassini::event::Event;
use firmware_spec::cassini::status::{
    CT_FAILURE_MASK, CT_INC_FAILURE_OFFSET, CT_INC_SUCCESS_OFFSET, CT_RESET_FAILURE_OFFSET,
    CT_RESET_SUCCESS_OFFSET, CT_SUCCESS_MASK, CtWriteback,
};

use super::cmdq::CmdQueue;
use super::devinfo::DevShared;
use super::error::{CxiError, Result};
use super::evtq::EventQueue;
use super::lni::{Lni, LniInner};
use super::wait::poll_until;

/// Frees the CT after the doorbell mapping (declared before it) is gone.
struct CtGuard {
    lni: Arc<LniInner>,
    ctn: u32,
}

impl Drop for CtGuard {
    fn drop(&mut self) {
        if let Err(e) = self.lni.dev.client.call(&CtFreeCmd {
            ctn: self.ctn,
            ..CtFreeCmd::default()
        }) {
            tracing::warn!(ct = self.ctn, error = %e, "CT_FREE failed");
        }
    }
}

/// A counting event (`struct cxi_ct`).
pub struct Ct {
    doorbell: Arc<dyn Mmio>,
    wb: UserMemory,
    wb_off: u64,
    dev: Arc<DevShared>,
    guard: CtGuard,
}

impl std::fmt::Debug for Ct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ct")
            .field("ctn", &self.guard.ctn)
            .field("wb_va", &format_args!("{:#x}", self.wb.va() + self.wb_off))
            .finish()
    }
}

impl Lni {
    /// `cxil_alloc_ct(lni, wb)`: a CT writing back to byte `offset` of `wb` (8-aligned).
    pub fn alloc_ct(&self, wb: &UserMemory, offset: u64) -> Result<Ct> {
        if !offset.is_multiple_of(8) || offset.checked_add(8).is_none_or(|e| e > wb.len()) {
            return Err(CxiError::Invalid(
                "write-back must be 8 aligned inside the buffer",
            ));
        }
        let dev = self.dev();
        let r = dev.client.call(&CtAllocCmd {
            lni: self.id(),
            wb: wb.va() + offset,
            ..CtAllocCmd::default()
        })?;
        let guard = CtGuard {
            lni: Arc::clone(&self.inner),
            ctn: r.ctn,
        };
        let doorbell = dev
            .client
            .mmap_token(&r.doorbell)?
            .mmio()
            .ok_or(CxiError::Mapping("CT doorbell page"))?;
        Ok(Ct {
            doorbell,
            wb: wb.clone(),
            wb_off: offset,
            dev: Arc::clone(dev),
            guard,
        })
    }
}

/// A CT command for [`CmdQueue::emit_ct`].
fn ct_cmd(opcode: CtOp, ct: u16) -> CtCmd {
    CtCmd {
        opcode,
        ct,
        ..CtCmd::default()
    }
}

impl Ct {
    /// The CT number (what commands and LEs name).
    pub fn ctn(&self) -> u16 {
        (self.guard.ctn & 0x7FF) as u16
    }

    fn ring_doorbell(&self, offset: usize, value: u64) -> Result<()> {
        self.doorbell.write(offset as u64, &value.to_le_bytes())?;
        Ok(())
    }

    /// `cxi_ct_inc_success`: add `v` (48 bits) to the success count.
    pub fn inc_success(&self, v: u64) -> Result<()> {
        self.ring_doorbell(CT_INC_SUCCESS_OFFSET, v & CT_SUCCESS_MASK)
    }

    /// `cxi_ct_inc_failure`: add `v` (7 bits) to the failure count.
    pub fn inc_failure(&self, v: u64) -> Result<()> {
        self.ring_doorbell(CT_INC_FAILURE_OFFSET, v & CT_FAILURE_MASK)
    }

    /// `cxi_ct_reset_success`: set the success count to 0.
    pub fn reset_success(&self) -> Result<()> {
        self.ring_doorbell(CT_RESET_SUCCESS_OFFSET, 0)
    }

    /// `cxi_ct_reset_failure`: set the failure count to 0.
    pub fn reset_failure(&self) -> Result<()> {
        self.ring_doorbell(CT_RESET_FAILURE_OFFSET, 0)
    }

    /// The last write-back (`ct_writeback` tells whether the device wrote it since it was
    /// last cleared).
    pub fn writeback(&self) -> Result<CtWriteback> {
        let v = self.wb.load_u64_acquire(self.wb_off)?;
        Ok(CtWriteback::decode(&v.to_le_bytes())?)
    }

    /// Clear the `ct_writeback` flag (only its byte is written, as libfabric does).
    pub fn clear_writeback_flag(&self) -> Result<()> {
        self.wb.write(self.wb_off + 7, &[0])?;
        Ok(())
    }

    /// `cxil_ct_wb_update`: write back to byte `offset` of `wb` from now on.
    pub fn wb_update(&mut self, wb: &UserMemory, offset: u64) -> Result<()> {
        if !offset.is_multiple_of(8) || offset.checked_add(8).is_none_or(|e| e > wb.len()) {
            return Err(CxiError::Invalid(
                "write-back must be 8 aligned inside the buffer",
            ));
        }
        self.dev.client.call(&CtWbUpdateCmd {
            ctn: self.guard.ctn,
            wb: wb.va() + offset,
            ..CtWbUpdateCmd::default()
        })?;
        self.wb = wb.clone();
        self.wb_off = offset;
        Ok(())
    }

    /// Poll the write-back until the success count reaches `threshold` or the failure count
    /// is non-zero (the caller checks which); the write-back seen.
    pub fn wait(&self, threshold: u64, timeout: Option<Duration>) -> Result<CtWriteback> {
        poll_until(self.dev.device(), timeout, || {
            let wb = self.writeback()?;
            Ok((wb.ct_success >= threshold || wb.ct_failure != 0).then_some(wb))
        })
    }

    /// Block until the success count reaches `threshold`, sleeping on `eq`'s event wait
    /// object: a CT_TRIG_EVENT on `trig_cq` posts a TRIGGERED_OP event to `eq` at the
    /// threshold (libfabric's `fi_cntr_wait` with a wait object). Other events on `eq` are
    /// consumed.
    pub fn wait_blocking(
        &self,
        threshold: u64,
        trig_cq: &mut CmdQueue,
        eq: &mut EventQueue,
        timeout: Option<Duration>,
    ) -> Result<CtWriteback> {
        let mut cmd = ct_cmd(CtOp::CtTrigEvent, 0);
        cmd.trig_ct = self.ctn();
        cmd.threshold = threshold & CT_SUCCESS_MASK;
        cmd.eq = (eq.eqn() & 0x7FF) as u16;
        trig_cq.emit_ct(&cmd)?;
        trig_cq.ring()?;
        let deadline = timeout.and_then(|t| driver::clock::Instant::now().checked_add(t));
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(driver::clock::Instant::now()));
            let ev = eq.wait(left)?;
            eq.ack()?;
            let (hit, rc) = match ev {
                Event::TrigOpShort(t) => (t.ct_handle == self.ctn(), t.return_code),
                Event::TrigOpLong(t) => (t.ct_handle == self.ctn(), t.return_code),
                _ => (false, firmware_spec::cassini::rc::ReturnCode::Ok),
            };
            if hit {
                if rc != firmware_spec::cassini::rc::ReturnCode::Ok {
                    return Err(CxiError::Device(rc));
                }
                return self.writeback();
            }
        }
    }

    /// CT_SET on `cq`: set the success and/or failure count.
    pub fn set(&self, cq: &mut CmdQueue, success: Option<u64>, failure: Option<u8>) -> Result<()> {
        let mut c = ct_cmd(CtOp::CtSet, self.ctn());
        if let Some(s) = success {
            c.set_ct_success = true;
            c.ct_success = s & CT_SUCCESS_MASK;
        }
        if let Some(f) = failure {
            c.set_ct_failure = true;
            c.ct_failure = f & CT_FAILURE_MASK as u8;
        }
        cq.emit_ct(&c)
    }

    /// CT_INC on `cq`.
    pub fn inc(&self, cq: &mut CmdQueue, success: u64, failure: u8) -> Result<()> {
        let mut c = ct_cmd(CtOp::CtInc, self.ctn());
        c.ct_success = success & CT_SUCCESS_MASK;
        c.ct_failure = failure & CT_FAILURE_MASK as u8;
        cq.emit_ct(&c)
    }

    /// CT_GET on `cq`: force a write-back.
    pub fn get(&self, cq: &mut CmdQueue) -> Result<()> {
        cq.emit_ct(&ct_cmd(CtOp::CtGet, self.ctn()))
    }

    /// CT_CANCEL on `cq`: drop every triggered operation waiting on this CT.
    pub fn cancel(&self, cq: &mut CmdQueue) -> Result<()> {
        cq.emit_ct(&ct_cmd(CtOp::CtCancel, self.ctn()))
    }
}
