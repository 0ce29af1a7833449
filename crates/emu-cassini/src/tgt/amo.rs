//! Atomics at the target: the LPE's decision, then the AMO unit on target memory (read,
//! compute, write back through the ATU), answered with an ACK or, for a fetching atomic, a
//! REPLY carrying the old value.

use emu_core::dma::Perm;
use emu_core::engine::DeviceIo;
use emu_core::fabric::TrafficClass;
use firmware_spec::cassini::amo::{AmoOp, AmoType, CswapOp};
use firmware_spec::cassini::cmd::DmaOp;
use firmware_spec::cassini::le::PtAllocOpts;
use firmware_spec::cassini::rc::ReturnCode;

use crate::amo::{self, AmoRequest, FpSignals};
use crate::lpe::IncomingOutcome;
use crate::wire::{AmoPayload, Fab, Request, Response, RspKind};

use super::answer::TgtAnswer;
use super::ctx::TgtCtx;
use super::event::TgtEvents;
use super::state::PendingGet;

/// Atomics served at the target, on anything that provides a [`TgtCtx`].
pub(crate) trait TgtAmo: TgtCtx {
    /// The floating-point exceptions PtlTE `pt` reports (`signal_*` options).
    fn fp_signals(&mut self, pt: u16) -> FpSignals {
        let opts = self
            .lpe()
            .ptlte_config(pt)
            .map_or(PtAllocOpts::empty(), |c| c.options);
        FpSignals::from_pt_opts(opts)
    }

    /// Perform atomic `a` on the `len` bytes at `start` (AC `ac`): read, compute with the AMO
    /// unit, write back. Returns the return code and the old value (empty on error).
    fn do_amo(
        &mut self,
        io: &mut DeviceIo<'_>,
        ac: u16,
        start: u64,
        len: u64,
        a: &AmoPayload,
        signals: FpSignals,
    ) -> (ReturnCode, Vec<u8>) {
        let (Ok(op), Ok(ty), Ok(cswap)) = (
            AmoOp::try_from(a.op),
            AmoType::try_from(a.ty),
            CswapOp::try_from(a.cswap),
        ) else {
            return (ReturnCode::AmoInvalOpError, Vec::new());
        };
        let req = AmoRequest {
            op,
            ty,
            cswap,
            op1: a.op1,
            op2: a.op2,
        };
        if len > 16 {
            return (ReturnCode::AmoLengthError, Vec::new());
        }
        if let Err(rc) = self.atu().check(io.dma(), ac, start, len, Perm::RW) {
            return (rc, Vec::new());
        }
        let mut buf = [0u8; 16];
        let n = len as usize;
        if let Err(rc) = self.atu().read(io.dma(), ac, start, &mut buf[..n]) {
            return (rc, Vec::new());
        }
        match amo::execute(&req, start, &mut buf[..n], signals) {
            Ok(out) => {
                if let Err(rc) = self.atu().write(io.dma(), ac, start, &buf[..n]) {
                    return (rc, Vec::new());
                }
                (out.return_code, out.fetched.as_slice().to_vec())
            }
            Err(e) => (e.return_code(), Vec::new()),
        }
    }

    /// Answer an atomic: ACK, or REPLY with the old value for a fetching one.
    #[allow(clippy::too_many_arguments)]
    fn amo_response(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        handle: u32,
        fetching: bool,
        rc: ReturnCode,
        mlength: u64,
        list: u8,
        old: &[u8],
    ) {
        let r = Response {
            kind: if fetching {
                RspKind::Reply
            } else {
                RspKind::Ack
            },
            rc: rc.into(),
            ptl_list: list,
            offset: 0,
            eom: true,
            handle,
            mlength: if old.is_empty() { 0 } else { mlength as u32 },
        };
        self.respond(io, fab, tc, &r, if fetching { old } else { &[] });
    }

    /// An atomic: the LPE's decision, then the AMO unit on target memory.
    #[allow(clippy::too_many_arguments)]
    fn serve_amo(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        req: &Request,
        tc: TrafficClass,
        pt: u16,
        outcome: IncomingOutcome,
        a: AmoPayload,
    ) {
        let fetching = req.opcode == DmaOp::FetchingAtomic as u8;
        if outcome.return_code == ReturnCode::Delayed {
            if let Some(id) = outcome.unexpected {
                self.tgt().pending_gets.insert(
                    id,
                    PendingGet {
                        fab: *fab,
                        handle: req.handle,
                        tc,
                        amo: Some((a, fetching)),
                    },
                );
            }
            self.post_target_events(io, &outcome.events, None);
            self.apply_ct(io, outcome.ct, false);
            return;
        }
        let Some(d) = outcome.delivery else {
            self.post_target_events(io, &outcome.events, None);
            self.apply_ct(io, outcome.ct, outcome.return_code != ReturnCode::Ok);
            self.nack(io, fab, tc, req, outcome.return_code);
            return;
        };
        let ac = self.tables().lac_ac(self.tables().ptlte_rgid(pt), d.lac);
        let sig = self.fp_signals(pt);
        let (rc, old) = self.do_amo(io, ac, d.start, d.length, &a, sig);
        let failed = rc != ReturnCode::Ok;
        self.post_target_events(io, &outcome.events, failed.then_some(rc));
        self.apply_ct(io, outcome.ct, failed);
        let list = outcome.list.map_or(0, u8::from);
        self.amo_response(io, fab, tc, req.handle, fetching, rc, d.length, list, &old);
    }
}

impl<T: TgtCtx + ?Sized> TgtAmo for T {}
