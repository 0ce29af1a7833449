//! How a request ends: the initiator events (SEND once the source was read, ACK or REPLY
//! at completion) with their suppression flags and counting events, the local errors
//! counted, the handle released and a waiting FENCE or stalled queue let go.

use emu_core::engine::DeviceIo;
use firmware_spec::cassini::event::{EventType, InitiatorLong, InitiatorShort};
use firmware_spec::cassini::le::PtlList;
use firmware_spec::cassini::rc::ReturnCode;

use crate::block::EventClass;

use super::ctx::IxeCtx;
use super::requests::{Req, ReqKind};

/// Ending requests, on anything that provides an [`IxeCtx`].
pub(crate) trait IxeComplete: IxeCtx {
    /// The SEND event (and CT count) of a request of `len` bytes whose source buffer has
    /// been read.
    fn source_read(&mut self, io: &mut DeviceIo<'_>, req: &Req, len: u32) {
        if !req.flags.event_send_disable {
            self.initiator_event(
                io,
                req,
                EventType::Send,
                ReturnCode::Ok,
                len,
                PtlList::Priority,
                false,
            );
        }
        if req.flags.event_ct_send {
            let inc = if req.flags.event_ct_bytes {
                u64::from(len)
            } else {
                1
            };
            self.ct_event(io, req.ct, inc, 0);
        }
    }

    fn count_local_error(&mut self, rc: ReturnCode) {
        match rc {
            ReturnCode::NoTranslation => self.counters().err_no_translation += 1,
            ReturnCode::InvalidAc | ReturnCode::AddrOutOfRange => {
                self.counters().err_invalid_ac += 1
            }
            ReturnCode::PagePermError => self.counters().err_page_perm += 1,
            _ => {}
        }
    }

    /// Post an initiator event of `req` (short, or long if its EQ asks for it), honouring
    /// `event_success_disable` for successful events and the non-matching rule.
    #[allow(clippy::too_many_arguments)]
    fn initiator_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        req: &Req,
        ty: EventType,
        rc: ReturnCode,
        mlength: u32,
        list: PtlList,
        tgt_error: bool,
    ) {
        if req.eq == 0 {
            return;
        }
        if rc == ReturnCode::Ok && (req.flags.event_success_disable || req.nomatch) {
            return;
        }
        let long = self.initiator_long(req.eq);
        if long {
            let ns = io.now().as_ns();
            let ev = InitiatorLong {
                user_ptr: req.user_ptr,
                mlength,
                ptl_list: list,
                rendezvous: req.rendezvous,
                retry: false,
                tgt_error,
                event_type: ty,
                timestamp_ns: (ns % 1_000_000_000) as u32,
                timestamp_sec: ns / 1_000_000_000,
                return_code: rc,
            };
            self.post_event(io, req.eq, &ev.encode(), EventClass::Other);
        } else {
            let ev = InitiatorShort {
                user_ptr: req.user_ptr,
                mlength,
                ptl_list: list,
                rendezvous: req.rendezvous,
                retry: false,
                tgt_error,
                event_type: ty,
                return_code: rc,
            };
            self.post_event(io, req.eq, &ev.encode(), EventClass::Other);
        }
    }

    /// Complete `req`: its ACK (Put) or REPLY (Get) event and CT update.
    fn complete(
        &mut self,
        io: &mut DeviceIo<'_>,
        req: &Req,
        rc: ReturnCode,
        mlength: u32,
        list: PtlList,
        tgt_error: bool,
    ) {
        if req.send_owed {
            // A train's source was read by the target before it answered.
            self.source_read(io, req, req.rlength);
        }
        let (ty, ct_flag) = match req.kind {
            ReqKind::Put | ReqKind::Amo => (EventType::Ack, req.flags.event_ct_ack),
            ReqKind::Get | ReqKind::FetchAmo => (EventType::Reply, req.flags.event_ct_reply),
        };
        self.initiator_event(io, req, ty, rc, mlength, list, tgt_error);
        if let Some(u) = req.rdzv_ct {
            // The receiving entry's counting event: the transfer is complete now.
            if rc == ReturnCode::Ok {
                self.ct_event(io, u.ct, u.success_increment, 0);
            } else {
                self.ct_event(io, u.ct, 0, 1);
            }
        }
        if req.ct != 0 && (ct_flag || rc != ReturnCode::Ok) {
            if rc == ReturnCode::Ok {
                let inc = if req.flags.event_ct_bytes {
                    u64::from(mlength)
                } else {
                    1
                };
                self.ct_event(io, req.ct, inc, 0);
            } else {
                self.ct_event(io, req.ct, 0, 1);
            }
        }
    }

    /// End `req` with `rc` without a response (a local error, no route, a timeout): its
    /// event and counting event.
    fn fail_request(&mut self, io: &mut DeviceIo<'_>, req: &Req, rc: ReturnCode) {
        self.complete(io, req, rc, 0, PtlList::Priority, false);
    }

    /// The PCT gave up on a packet of request `handle` (its connection was declared dead,
    /// pct.rs): the request completes with `rc` now instead of at its timeout.
    fn request_lost(&mut self, io: &mut DeviceIo<'_>, handle: u32, rc: ReturnCode) {
        let Some(req) = self.ixe().get(handle).copied() else {
            return;
        };
        self.fail_request(io, &req, rc);
        self.finish(io, handle, req.cq);
    }

    /// Release `handle`; let a FENCE on CQ `cq` go if it was the last one.
    fn finish(&mut self, io: &mut DeviceIo<'_>, handle: u32, cq: u32) {
        self.ixe().release(handle);
        if !self.ixe().stalled.is_empty() {
            for stalled in std::mem::take(&mut self.ixe().stalled) {
                self.run_ring(io, false, stalled);
            }
        }
        let Ok(Some(q)) = self.tx_cqs().get_mut_if_touched(cq as usize) else {
            return;
        };
        q.outstanding = q.outstanding.saturating_sub(1);
        if q.fence && q.outstanding == 0 {
            q.fence = false;
            self.run_ring(io, false, cq);
        }
    }
}

impl<T: IxeCtx + ?Sized> IxeComplete for T {}
