//! Responses at the initiator: an ACK completes a put or an atomic, a REPLY lands a Get's
//! data (or a fetching atomic's old value) in the local buffer and completes it on its last
//! frame; a train of REPLY frames is copied straight from the target's host memory.

use emu_core::dma::Perm;
use emu_core::engine::DeviceIo;
use emu_core::fabric::Train;
use firmware_spec::cassini::le::PtlList;
use firmware_spec::cassini::rc::ReturnCode;

use crate::atu::cut_segments;
use crate::wire::{MTU, Response, RspKind};

use super::complete::IxeComplete;
use super::ctx::IxeCtx;
use super::requests::{Req, ReqKind};

/// Responses arriving at the initiator, on anything that provides an [`IxeCtx`].
pub(crate) trait IxeResponse: IxeCtx {
    /// A response arrived for handle `rsp.handle` (with `train`, the REPLY frames after it).
    fn response(
        &mut self,
        io: &mut DeviceIo<'_>,
        rsp: &Response,
        payload: &[u8],
        train: Option<&Train>,
    ) {
        self.counters().rx_ptl_response_pkt += 1 + train.map_or(0, |t| u64::from(t.frames));
        let Some(req) = self.ixe().get(rsp.handle).copied() else {
            return;
        };
        self.ixe().last_progress = io.now().as_ps();
        let rc = ReturnCode::try_from(rsp.rc).unwrap_or(ReturnCode::Undeliverable);
        let list = PtlList::try_from(rsp.ptl_list).unwrap_or_default();
        match (rsp.kind, req.kind) {
            (RspKind::Ack, ReqKind::Put | ReqKind::Amo) => {
                self.complete(io, &req, rc, rsp.mlength, list, rc != ReturnCode::Ok);
                self.finish(io, rsp.handle, req.cq);
            }
            (RspKind::Reply, ReqKind::FetchAmo) => {
                // The old value comes back even when an FP exception is reported.
                let mut rc = rc;
                if !payload.is_empty() {
                    let n = payload.len().min(req.rlength as usize);
                    if let Err(e) =
                        self.atu()
                            .write(io.dma(), req.local_ac, req.local_addr, &payload[..n])
                    {
                        rc = e;
                    }
                }
                self.complete(io, &req, rc, rsp.mlength, list, rc != ReturnCode::Ok);
                self.finish(io, rsp.handle, req.cq);
            }
            (RspKind::Reply, ReqKind::Get) => {
                if rc != ReturnCode::Ok {
                    self.complete(io, &req, rc, 0, list, true);
                    self.finish(io, rsp.handle, req.cq);
                    return;
                }
                let end = u64::from(rsp.offset) + payload.len() as u64;
                if req.data_rc.is_none() && !payload.is_empty() {
                    let r = if end > u64::from(req.rlength) {
                        Err(ReturnCode::AddrOutOfRange)
                    } else {
                        self.atu().write(
                            io.dma(),
                            req.local_ac,
                            req.local_addr + u64::from(rsp.offset),
                            payload,
                        )
                    };
                    if let Err(e) = r
                        && let Some(x) = self.ixe().get_mut(rsp.handle)
                    {
                        x.data_rc = Some(e);
                    }
                }
                if let Some(t) = train {
                    self.land_reply_train(io, rsp.handle, &req, end, t);
                }
                if rsp.eom {
                    let data_rc = self.ixe().get(rsp.handle).and_then(|r| r.data_rc);
                    let rc = data_rc.unwrap_or(ReturnCode::Ok);
                    self.complete(io, &req, rc, rsp.mlength, list, false);
                    self.finish(io, rsp.handle, req.cq);
                }
            }
            _ => {}
        }
    }

    /// Land the train `t` of REPLY frames of Get `handle` (`req`), whose payload starts at
    /// offset `at` of the reply (a frame boundary): copied from the target's host memory
    /// straight into the landing range, each frame translated (and counted) as its write
    /// would have been. As frame by frame, the frames before the first that fails land and
    /// that frame's error becomes the Get's (`ADDR_OUT_OF_RANGE` past the request's length,
    /// the ATU's error, `PCIE_UNSUCCESS_CMPL` if the copy fails); nothing lands after an
    /// earlier error.
    fn land_reply_train(
        &mut self,
        io: &mut DeviceIo<'_>,
        handle: u32,
        req: &Req,
        at: u64,
        t: &Train,
    ) {
        if self.ixe().get(handle).is_none_or(|r| r.data_rc.is_some()) {
            return;
        }
        let total = t.payload_len();
        let room = u64::from(req.rlength).saturating_sub(at);
        let (mut n, mut err) = if total <= room {
            (total, None)
        } else {
            // Whole frames that fit: the one that runs past the end fails.
            (room - room % MTU as u64, Some(ReturnCode::AddrOutOfRange))
        };
        let mut to = Vec::new();
        let w = Perm::WRITE;
        let addr = req.local_addr + at;
        if let Err((done, rc)) =
            self.atu()
                .frames_segments(io.dma(), req.local_ac, addr, n, w, MTU as u64, &mut to)
        {
            n = done;
            err = Some(rc);
        }
        if n > 0 {
            let from = cut_segments(&t.segments, n);
            if t.source.copy_segments_to(&from, io.dma(), &to).is_err() {
                err = Some(ReturnCode::PcieUnsuccessCmpl);
            }
        }
        if let Some(e) = err
            && let Some(x) = self.ixe().get_mut(handle)
        {
            x.data_rc = Some(e);
        }
    }
}

impl<T: IxeCtx + ?Sized> IxeResponse for T {}
