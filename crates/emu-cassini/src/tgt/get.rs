//! Gets at the target: the matched data read through the ATU and sent back as REPLY frames
//! (`serve_get`, `send_reply`), or handed to the PCT as a [`ReplyStream`] of trains whose
//! target events wait for the last frame (`reply_next`, `reply_train`, `reply_read`).

use emu_core::dma::Perm;
use emu_core::engine::DeviceIo;
use emu_core::fabric::{Packet, PortId, TrafficClass, Train};
use firmware_spec::cassini::rc::ReturnCode;
use std::sync::Arc;

use crate::lpe::IncomingOutcome;
use crate::wire::{self, Fab, MTU, Request, Response, RspKind};

use super::answer::TgtAnswer;
use super::ctx::TgtCtx;
use super::event::TgtEvents;
use super::state::{OwedGet, PendingGet, ReplyStream};

/// Gets served at the target, on anything that provides a [`TgtCtx`].
pub(crate) trait TgtGet: TgtCtx {
    /// A Get: read the matched data and send it back in MTU segments.
    fn serve_get(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        req: &Request,
        tc: TrafficClass,
        pt: u16,
        outcome: IncomingOutcome,
    ) {
        if outcome.return_code == ReturnCode::Delayed {
            if let Some(id) = outcome.unexpected {
                self.tgt().pending_gets.insert(
                    id,
                    PendingGet {
                        fab: *fab,
                        handle: req.handle,
                        tc,
                        amo: None,
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
        let list = outcome.list.map_or(0, u8::from);
        let owed = OwedGet {
            events: outcome.events,
            ct: outcome.ct,
            rc: ReturnCode::Ok,
        };
        let (rc, owed) = self.send_reply(
            io,
            fab,
            tc,
            req.handle,
            ac,
            d.start,
            d.length,
            list,
            Some(owed),
        );
        // Events a reply sent as trains owes are posted when its frames have been read.
        if let Some(o) = owed {
            let failed = rc != ReturnCode::Ok;
            self.post_target_events(io, &o.events, failed.then_some(rc));
            self.apply_ct(io, o.ct, failed);
        }
    }

    /// Send `length` bytes at `start` (AC `ac`) as REPLY segments; on a read error one
    /// REPLY carrying the return code. Returns the return code, and `owed` (the Get's
    /// target events) unless the reply went to the PCT as a [`ReplyStream`] of trains,
    /// which posts them once its frames have been read.
    #[allow(clippy::too_many_arguments)]
    fn send_reply(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        handle: u32,
        ac: u16,
        start: u64,
        length: u64,
        list: u8,
        owed: Option<OwedGet>,
    ) -> (ReturnCode, Option<OwedGet>) {
        let mut rsp = Response {
            kind: RspKind::Reply,
            rc: ReturnCode::Ok.into(),
            ptl_list: list,
            offset: 0,
            eom: length == 0,
            handle,
            mlength: length.min(u64::from(u32::MAX)) as u32,
        };
        if let Err(rc) = self.atu().check(io.dma(), ac, start, length, Perm::READ) {
            rsp.rc = rc.into();
            rsp.eom = true;
            rsp.mlength = 0;
            self.respond(io, fab, tc, &rsp, &[]);
            return (rc, owed);
        }
        if length == 0 {
            self.respond(io, fab, tc, &rsp, &[]);
            return (ReturnCode::Ok, owed);
        }
        let Some(port) = (fab.sfa >> 12).checked_sub(self.nid_base()) else {
            return (ReturnCode::Undeliverable, owed);
        };
        let back = Fab {
            vni: fab.vni,
            sfa: self.nid() << 12,
            dfa: fab.sfa,
        };
        let src = io.port().unwrap_or_default();
        // Several frames to a port of this process, with nothing on the way that needs
        // their bytes: trains, read by the initiator as they land; the events wait.
        if length > MTU as u64
            && io.train_ok(PortId(port))
            && let Some(o) = owed
        {
            let tgt = self.tgt();
            let token = tgt.next_token;
            tgt.next_token = token.wrapping_add(1);
            tgt.owed.insert(token, o);
            let stream = ReplyStream {
                back,
                src,
                dst: PortId(port),
                tc,
                rsp,
                ac,
                start,
                off: 0,
                length,
                token,
                frames_only: false,
            };
            self.pct_reply(io, stream);
            return (ReturnCode::Ok, None);
        }
        let mut off = 0u64;
        while off < length {
            let n = (length - off).min(MTU as u64) as usize;
            rsp.offset = off as u32;
            rsp.eom = off + n as u64 == length;
            let buf = io.packet_buffer(wire::FRAME_ROOM + n);
            let mut b = wire::response_in(buf, &back, &rsp, n);
            let at = b.len();
            b.resize(at + n, 0);
            if let Err(rc) = self.atu().read(io.dma(), ac, start + off, &mut b[at..]) {
                rsp.rc = rc.into();
                rsp.eom = true;
                self.respond(io, fab, tc, &rsp, &[]);
                return (rc, owed);
            }
            self.pct_send(io, wire::packet(src, PortId(port), tc, b));
            off += n as u64;
        }
        (ReturnCode::Ok, owed)
    }

    /// The next packet of reply stream `s` ([`ReplyStream`]): its next frame, read from host
    /// memory now, carrying a train of as many following frames as `room` (frames the
    /// window lets out) allows, if nothing needs their bytes; a frame that does not read
    /// becomes one REPLY carrying the return code, which ends the stream.
    fn reply_next(&mut self, io: &mut DeviceIo<'_>, s: &mut ReplyStream, room: u32) -> Packet {
        let n = (s.length - s.off).min(MTU as u64) as usize;
        let mut rsp = s.rsp;
        rsp.offset = s.off as u32;
        let buf = io.packet_buffer(wire::FRAME_ROOM + n);
        let mut b = wire::response_in(buf, &s.back, &rsp, n);
        let at = b.len();
        b.resize(at + n, 0);
        if let Err(rc) = self
            .atu()
            .read(io.dma(), s.ac, s.start + s.off, &mut b[at..])
        {
            io.recycle(b);
            s.off = s.length;
            if let Some(o) = self.tgt().owed.get_mut(&s.token) {
                o.rc = rc;
            }
            rsp.rc = rc.into();
            rsp.eom = true;
            let b = wire::response_in(io.packet_buffer(wire::FRAME_ROOM), &s.back, &rsp, 0);
            return wire::packet(s.src, s.dst, s.tc, b);
        }
        s.off += n as u64;
        let mut train = None;
        if room > 1 && !s.done() && !s.frames_only && io.train_ok(s.dst) {
            let end = s.length.min(s.off + u64::from(room - 1) * MTU as u64);
            train = self.reply_train(io, s, end);
        }
        // The last frame the packet stands for ends the Get.
        wire::set_response_eom(&mut b, s.done());
        let mut pkt = wire::packet(s.src, s.dst, s.tc, b);
        pkt.train = train;
        pkt
    }

    /// The train of the frames of `s` from its offset up to `end`: their source segments,
    /// each frame translated as its read would have been, and the frames and wire bytes
    /// they stand for. Stops before a frame that does not translate (it then goes on its
    /// own and ends the reply with the error); `None` (and frame by frame from here) if a
    /// piece of the source would not read.
    fn reply_train(
        &mut self,
        io: &DeviceIo<'_>,
        s: &mut ReplyStream,
        end: u64,
    ) -> Option<Arc<Train>> {
        let mut segments = Vec::new();
        let n = match self.atu().frames_segments(
            io.dma(),
            s.ac,
            s.start + s.off,
            end - s.off,
            Perm::READ,
            MTU as u64,
            &mut segments,
        ) {
            Ok(()) => end - s.off,
            Err((done, _)) => done,
        };
        let readable = segments
            .iter()
            .all(|g| io.dma().check(g.addr, g.len, Perm::READ).is_ok());
        if !readable {
            s.frames_only = true;
            return None;
        }
        if n == 0 {
            return None;
        }
        let frames = n.div_ceil(MTU as u64);
        let per_frame = (wire::FAB_HDR + wire::RESPONSE_HDR + wire::TAG_ROOM) as u64;
        s.off += n;
        Some(Arc::new(Train {
            frames: u32::try_from(frames).ok()?,
            bytes: frames * per_frame + n,
            source: io.dma().clone(),
            segments,
        }))
    }

    /// The REPLY frames of the Get owing `token` have been read at its initiator (their
    /// last packet was acknowledged), or their connection died: its target events and
    /// counting event now.
    fn reply_read(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        let Some(o) = self.tgt().owed.remove(&token) else {
            return;
        };
        let failed = o.rc != ReturnCode::Ok;
        self.post_target_events(io, &o.events, failed.then_some(o.rc));
        self.apply_ct(io, o.ct, failed);
    }
}

impl<T: TgtCtx + ?Sized> TgtGet for T {}
