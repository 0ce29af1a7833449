//! Target CQ commands (APPEND, SEARCH, SEARCH_AND_DELETE, UNLINK, SETSTATE) executed by the
//! LPE, and what they complete: rendezvous puts whose Get an append starts, delayed Gets and
//! atomics answered now, unexpected headers software took over.

use emu_core::engine::DeviceIo;
use firmware_spec::cassini::cmd::{TargetCommand, TgtOp};
use firmware_spec::cassini::le::PtlList;
use firmware_spec::cassini::rc::ReturnCode;

use crate::block::{Exec, Fail, format_rc};
use crate::lpe::{CommandOutcome, Le};

use super::amo::TgtAmo;
use super::ctx::TgtCtx;
use super::event::TgtEvents;
use super::get::TgtGet;

/// Target commands, on anything that provides a [`TgtCtx`].
pub(crate) trait TgtCommand: TgtCtx {
    /// Execute one target command of target CQ `n`.
    fn exec_target(&mut self, io: &mut DeviceIo<'_>, n: u32, bytes: &[u8]) -> Result<Exec, Fail> {
        self.counters().num_tgt_cmds += 1;
        let cmd = TargetCommand::decode(bytes).map_err(|e| format_rc(&e))?;
        cmd.validate().map_err(|e| format_rc(&e))?;
        // The PtlTE (and an LE's counting event) must be in the queue's resource group
        // (`c_cq_cfg_ptlte_rgid_table`, `c_cq_cfg_ct_rgid_table`): a process cannot list,
        // unlink or change the state of another's portal.
        let (pt, ct) = match &cmd {
            TargetCommand::List(t) => (t.ptlte_index, t.ct),
            TargetCommand::SetState(s) => (s.ptlte_index, 0),
        };
        let rgid = self.tgq_rgid(n);
        if !self.tables().ptlte_in_rgid(rgid, pt) || !self.tables().handles_in_rgid(rgid, 0, ct) {
            return Err(ReturnCode::PermViolation);
        }
        let out = match cmd {
            TargetCommand::List(t) => {
                let le = Le {
                    buffer_id: t.buffer_id,
                    start: t.start,
                    length: t.length,
                    lac: t.lac,
                    ct: t.ct,
                    match_bits: t.match_bits,
                    ignore_bits: t.ignore_bits,
                    match_id: t.match_id,
                    min_free: t.min_free,
                    flags: t.opts(),
                };
                let pt = t.ptlte_index;
                match t.opcode {
                    TgtOp::Append => self.lpe().append(pt, t.ptl_list, le),
                    TgtOp::Search => self.lpe().search(pt, t.ptl_list, &le),
                    TgtOp::SearchAndDelete => self.lpe().search_and_delete(pt, t.ptl_list, &le),
                    TgtOp::Unlink => self.lpe().unlink(pt, t.ptl_list, t.buffer_id),
                    TgtOp::Setstate => return Err(ReturnCode::IllegalOp),
                }
            }
            TargetCommand::SetState(s) => {
                self.lpe()
                    .set_state(s.ptlte_index, s.ptlte_state, s.drop_count)
            }
        };
        let out = out.map_err(|e| e.return_code())?;
        self.command_outcome(io, out);
        Ok(Exec::Next)
    }

    /// Carry out what a target command produced.
    fn command_outcome(&mut self, io: &mut DeviceIo<'_>, out: CommandOutcome) {
        self.post_target_events(io, &out.events, None);
        for u in &out.ct {
            self.ct_event(io, u.ct, u.success_increment, 0);
        }
        // Rendezvous puts completed by an append: the NIC pulls the rest.
        for g in &out.rendezvous {
            let Some((fab, tc)) = g.ule_id.and_then(|id| self.tgt().pending_rdzv.remove(&id))
            else {
                continue;
            };
            if g.get_issued && g.length > 0 {
                self.launch_rendezvous_get(io, g, &fab, tc, None);
            }
        }
        for d in &out.delayed {
            let Some(g) = self.tgt().pending_gets.remove(&d.ule_id) else {
                continue;
            };
            let ac = self
                .tables()
                .lac_ac(self.tables().ptlte_rgid(d.ptlte_index), d.lac);
            let list = u8::from(PtlList::Priority);
            match g.amo {
                Some((a, fetching)) => {
                    let sig = self.fp_signals(d.ptlte_index);
                    let (rc, old) = self.do_amo(io, ac, d.start, d.mlength, &a, sig);
                    self.amo_response(
                        io, &g.fab, g.tc, g.handle, fetching, rc, d.mlength, list, &old,
                    );
                }
                None => {
                    // The append's events are out already: the reply goes frame by frame.
                    let f = &g.fab;
                    self.send_reply(io, f, g.tc, g.handle, ac, d.start, d.mlength, list, None);
                }
            }
        }
        // Headers deleted without being matched (search-and-delete): software takes over.
        for id in &out.released_ules {
            self.tgt().pending_gets.remove(id);
            self.tgt().pending_rdzv.remove(id);
        }
    }
}

impl<T: TgtCtx + ?Sized> TgtCommand for T {}
