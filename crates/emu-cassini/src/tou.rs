//! The trigger operation unit's glue: TOU doorbells, CT commands from transmit CQs, counting
//! events from initiator and target completions, and the CT configuration CSRs go to the CT
//! block ([`crate::ct::CtBlock`], a pure state machine); its effects are carried out here:
//! write-backs by DMA through the ATU, TRIGGERED_OP events, and fired CT_TRIG_DMA commands
//! launched as commands of their trigger CQ.
//!
//! A CT command the block cannot accept yet (no free triggered-list entry) stalls its CQ at
//! that command; the CQ is run again after the next CT operation that fired something.

use emu_core::engine::DeviceIo;
use firmware_spec::cassini::csr;
use firmware_spec::cassini::ct::EmbeddedDma;

use crate::cq::{Exec, Fail};
use crate::csr::CsrFile;
use crate::ct::{CmdSource, CtAction, CtCommand, Effects, WbAddr};
use crate::ee::EventClass;
use crate::hw::Hw;

impl Hw {
    /// Carry out the CT block's effects in order.
    fn ct_effects(&mut self, io: &mut DeviceIo<'_>, fx: Effects) {
        let mut fired = false;
        for a in fx.actions {
            match a {
                CtAction::Writeback(w) => {
                    // A write-back address outside its context has nowhere to report to.
                    let _ = self
                        .atu
                        .write(io.dma(), w.target.context, w.target.addr, &w.bytes());
                }
                CtAction::FireEvent(e) => {
                    fired = true;
                    let ev = e.event().encode();
                    self.ee.post(
                        &mut self.atu,
                        &mut self.msix,
                        io,
                        e.eq,
                        &ev,
                        EventClass::Other,
                    );
                }
                CtAction::FireDma(d) => {
                    fired = true;
                    let cq = u32::from(d.from_cq);
                    // A triggered command that fails is reported like a failed command of its
                    // trigger CQ.
                    let r = match d.command() {
                        Ok(EmbeddedDma::Full(c)) => self.launch_full(io, cq, &c),
                        Ok(EmbeddedDma::Nomatch(c)) => self.launch_nomatch(io, cq, &c),
                        Ok(EmbeddedDma::Amo(_)) | Err(_) => {
                            Err(firmware_spec::cassini::rc::ReturnCode::IllegalOp)
                        }
                    };
                    if let Err(rc) = r {
                        let cur = self.cqs.tx.get(cq as usize).map_or(0, |q| q.ring.rd32);
                        self.fail_cq(io, false, cq, rc, d.raw[0], cur, false);
                    }
                }
            }
        }
        if fired {
            let stalled = std::mem::take(&mut self.cqs.stalled);
            for cq in stalled {
                self.run_ring(io, false, cq);
            }
        }
    }

    /// A counting event: add to CT `ct` (0 = none).
    pub(crate) fn ct_event(&mut self, io: &mut DeviceIo<'_>, ct: u16, success: u64, failure: u64) {
        if ct == 0 {
            return;
        }
        if let Ok(fx) = self.ct.event_increment(ct, success, failure) {
            self.ct_effects(io, fx);
        }
    }

    /// A store to CT `ct`'s TOU doorbell page.
    pub(crate) fn ct_doorbell(&mut self, io: &mut DeviceIo<'_>, ct: u32, off: u32, data: &[u8]) {
        let (Ok(ct), 8) = (u16::try_from(ct), data.len()) else {
            return;
        };
        let mut q = [0u8; 8];
        q.copy_from_slice(data);
        if let Ok(fx) = self.ct.doorbell(ct, off as usize, u64::from_le_bytes(q)) {
            self.ct_effects(io, fx);
        }
    }

    /// A CT command on transmit CQ `n`.
    pub(crate) fn ct_command(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        bytes: &[u8],
    ) -> Result<Exec, Fail> {
        let cmd = CtCommand::decode(bytes)
            .map_err(|_| firmware_spec::cassini::rc::ReturnCode::CmdInvalidArg)?;
        let pool = self.cqs.tx.get(n as usize).map_or(0, |q| q.tle_pool);
        let src = CmdSource {
            cq: n as u16,
            tle_pool: pool,
        };
        match self.ct.command(&cmd, src) {
            Ok(fx) => {
                self.ct_effects(io, fx);
                Ok(Exec::Next)
            }
            Err(e) if e.is_stall() => {
                if !self.cqs.stalled.contains(&n) {
                    self.cqs.stalled.push(n);
                }
                Ok(Exec::Stall)
            }
            Err(e) => Err(e.return_code()),
        }
    }

    /// A CT configuration CSR was written.
    pub(crate) fn ct_config_written(&mut self, csrs: &CsrFile, c: &'static csr::Csr, n: u32) {
        use csr::fields as f;
        let Ok(ct) = u16::try_from(n) else {
            return;
        };
        let wb = WbAddr::from_csr(csrs.entry_qword(csr::C_CQ_CFG_CT_WB_MEM_ADDR, n, 0));
        if c.offset == csr::C_CQ_CFG_CT_ENABLE.offset {
            let en = csrs.field(c, n, f::c_cq_cfg_ct_enable::CT_ENABLE) != 0;
            let _ = if en {
                self.ct.enable(ct, wb)
            } else {
                self.ct.disable(ct)
            };
        } else if c.offset == csr::C_CQ_CFG_CT_WB_MEM_ADDR.offset {
            let _ = self.ct.set_writeback(ct, wb);
        } else if c.offset == csr::C_CQ_CFG_INIT_CT_HW_STATE.offset {
            let qw = csrs.entry_qword(c, 0, 0);
            let handle = (qw & 0x7FF) as u16;
            if qw & (1 << 11) != 0 {
                let _ = self.ct.init(handle);
            }
            if qw & (1 << 12) != 0 {
                let _ = self.ct.cancel(handle);
            }
        }
    }
}
