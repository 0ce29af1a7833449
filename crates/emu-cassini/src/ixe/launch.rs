//! Sending a request: `launch` takes a decoded command ([`Launch`]) through the steps a
//! request makes before it leaves, each a method below: `profile` (the queue's resource
//! group and communication profile), `check_buffers` (the local buffers checked through the
//! ATU), a request handle (or the queue stalls), `request_frame` (header and first payload),
//! the first frame to the PCT, then `put_rest` (the continuation frames of a put: streamed
//! as the window opens, carried as a train, or all sent now). `stream_next` makes the next
//! frame of a streamed put when the PCT asks for it.

use emu_core::dma::Perm;
use emu_core::engine::DeviceIo;
use emu_core::fabric::{Packet, PortId, TrafficClass, Train};
use emu_core::nic_faults::NicSite;
use firmware_spec::cassini::amo::AmoType;
use firmware_spec::cassini::cmd::{DmaFlags, DmaOp};
use firmware_spec::cassini::rc::ReturnCode;

use crate::atu::Mapped;
use crate::block::{Exec, Fail};
use crate::cq::TxCq;
use crate::tables::Cp;
use crate::wire::{self, AmoPayload, Fab, MTU, Request};

use super::complete::IxeComplete;
use super::ctx::IxeCtx;
use super::requests::{OutStream, Req, ReqKind, restricted_grace};
use super::source::{IxeSource, Source};
use super::timeout::IxeTimeout;

/// Everything a launch needs, from whichever command format.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Launch<'a> {
    pub(super) opcode: DmaOp,
    pub(super) dfa: u32,
    pub(super) index_ext: u8,
    pub(super) remote_offset: u64,
    pub(super) initiator: u32,
    pub(super) match_bits: u64,
    pub(super) header_data: u64,
    pub(super) user_ptr: u64,
    pub(super) flags: DmaFlags,
    pub(super) eq: u16,
    pub(super) ct: u16,
    pub(super) len: u32,
    pub(super) src: Source<'a>,
    pub(super) small: bool,
    pub(super) nomatch: bool,
    /// Atomics: the 40 B AMO descriptor is the whole payload of the one request packet, and
    /// a fetching AMO's old value goes to (LAC, address).
    pub(super) amo: Option<(AmoPayload, Option<(u8, u64)>)>,
    /// RENDEZVOUS_PUT: bytes sent with the put (the rest is pulled by the target).
    pub(super) eager_length: u32,
    /// RENDEZVOUS_PUT: `rendezvous_id`.
    pub(super) rendezvous_id: u8,
}

impl<'a> Launch<'a> {
    /// A launch of `len` bytes from `src` with opcode `opcode` to `dfa`; every other field
    /// zero (no event, no counting event, no match bits).
    pub(super) fn new(opcode: DmaOp, dfa: u32, len: u32, src: Source<'a>) -> Self {
        Launch {
            opcode,
            dfa,
            index_ext: 0,
            remote_offset: 0,
            initiator: 0,
            match_bits: 0,
            header_data: 0,
            user_ptr: 0,
            flags: DmaFlags::default(),
            eq: 0,
            ct: 0,
            len,
            src,
            small: false,
            nomatch: false,
            amo: None,
            eager_length: 0,
            rendezvous_id: 0,
        }
    }

    /// Whether it is a Get (its data comes back in the REPLY).
    fn is_get(&self) -> bool {
        matches!(self.opcode, DmaOp::Get | DmaOp::NomatchGet)
    }

    /// The bytes that travel with the request: a rendezvous put carries only its eager bytes
    /// and the target pulls the rest (cassini.md §6).
    fn wire_len(&self) -> u32 {
        if self.opcode == DmaOp::RendezvousPut {
            self.eager_length.min(self.len)
        } else {
            self.len
        }
    }

    /// Its entry in the request table, launched from CQ `cq` at `at` (ps).
    fn request(&self, cq: u32, at: u64) -> Req {
        let get = self.is_get();
        Req {
            active: true,
            kind: match self.opcode {
                DmaOp::Get | DmaOp::NomatchGet => ReqKind::Get,
                DmaOp::Atomic => ReqKind::Amo,
                DmaOp::FetchingAtomic => ReqKind::FetchAmo,
                _ => ReqKind::Put,
            },
            cq,
            eq: self.eq,
            ct: self.ct,
            user_ptr: self.user_ptr,
            flags: self.flags,
            nomatch: self.nomatch,
            // A fetching AMO's reply carries the operand (whatever `request_len` said).
            rlength: self.amo.map_or(self.len, |(a, _)| amo_size(a.ty)),
            local_ac: 0,
            local_addr: 0,
            data_rc: None,
            at,
            grace: if !get && self.flags.restricted && self.amo.is_none() {
                restricted_grace(self.len).as_ps()
            } else {
                0
            },
            generation: 0,
            rendezvous: false,
            rdzv_ct: None,
            send_owed: false,
        }
    }
}

/// Operand size of an AMO type code (16 for a code that names no type: the target refuses it).
fn amo_size(ty: u8) -> u32 {
    AmoType::try_from(ty).map_or(16, |t| t.size() as u32)
}

/// Where the frames of request `handle` go: their fabric header, the ports and the traffic
/// class.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    handle: u32,
    fab: Fab,
    src: PortId,
    dst: PortId,
    tc: TrafficClass,
}

/// `src` read through `mapped` when the launch translated it once (a put of several frames).
fn through<'a>(src: Source<'a>, mapped: Option<&'a Mapped>) -> Source<'a> {
    match (mapped, src) {
        (Some(m), Source::Ac { addr, .. }) => Source::Mapped { m, addr },
        (_, s) => s,
    }
}

/// Sending requests, on anything that provides an [`IxeCtx`].
pub(crate) trait IxeLaunch: IxeCtx {
    /// Send the request described by `l` from CQ `n`.
    fn launch(&mut self, io: &mut DeviceIo<'_>, n: u32, l: &Launch<'_>) -> Result<Exec, Fail> {
        let q = *self.tx_cq(n)?;
        let cp = self.profile(n, &q, l)?;
        let get = l.is_get();
        let mut req = l.request(n, io.now().as_ps());
        let (source, mapped) = match self.check_buffers(io, q.ring.rgid, l, &mut req) {
            Ok(checked) => checked,
            Err(rc) => {
                self.count_local_error(rc);
                self.fail_request(io, &req, rc);
                return Ok(Exec::Next);
            }
        };
        let Some(port) = (l.dfa >> 12).checked_sub(self.nid_base()) else {
            self.fail_request(io, &req, ReturnCode::Undeliverable);
            return Ok(Exec::Next);
        };
        self.ensure_scan(io);
        let Some(handle) = self.ixe().alloc(req) else {
            // Every request entry is in flight: the command waits in its queue (nothing of
            // it has taken effect yet) until a response frees one.
            let stalled = &mut self.ixe().stalled;
            if !stalled.contains(&n) {
                stalled.push(n);
            }
            return Ok(Exec::Stall);
        };
        let fab = Fab {
            vni: cp.vni,
            sfa: self.nid() << 12,
            dfa: l.dfa,
        };
        let wire_len = l.wire_len();
        let first = if get { 0 } else { (wire_len as usize).min(MTU) };
        let data = match self.request_frame(
            io,
            l,
            &fab,
            handle,
            through(source, mapped.as_ref()),
            first,
        ) {
            Ok(data) => data,
            Err(rc) => {
                self.ixe().release(handle);
                self.fail_request(io, &req, rc);
                return Ok(Exec::Next);
            }
        };
        let to = Route {
            handle,
            fab,
            src: io.port().unwrap_or_default(),
            dst: PortId(port),
            tc: TrafficClass(cp.tc),
        };
        // A restricted put of several frames to a port of this process, with nothing on the
        // way that needs the frames' bytes, goes as one train: its continuation frames are
        // counted as sent, and the target copies their payload from this host memory.
        let total = if get || l.amo.is_some() {
            0
        } else {
            wire_len as usize
        };
        let train = match &mapped {
            Some(m) if l.flags.restricted && first < total && io.train_ok(to.dst) => {
                self.train_of(io, m, req.local_ac, req.local_addr, first, total)
            }
            _ => None,
        };
        if train.is_some()
            && let Some(x) = self.ixe().get_mut(handle)
        {
            x.send_owed = true;
        }
        let mut pkt = wire::packet(to.src, to.dst, to.tc, data);
        pkt.train.clone_from(&train);
        self.pct_send(io, pkt);
        if get {
            self.counters().ptl_tx_get_msgs += 1;
            self.tx_cq(n)?.outstanding += 1;
            return Ok(Exec::Next);
        }
        self.put_rest(
            io,
            n,
            l,
            &req,
            &to,
            source,
            mapped,
            first,
            total,
            train.as_deref(),
        )?;
        Ok(Exec::Next)
    }

    /// The queue's rights and its communication profile: the EQ and CT the command names
    /// must be the queue's resource group's (`c_cq_cfg_{eq,ct}_rgid_table`: no events or
    /// counts into another process's objects), and the CP its LCID selects (cached on the
    /// queue until the CP tables change) must be valid.
    fn profile(&mut self, n: u32, q: &TxCq, l: &Launch<'_>) -> Result<Cp, Fail> {
        if !self.tables().handles_in_rgid(q.ring.rgid, l.eq, l.ct) {
            return Err(ReturnCode::PermViolation);
        }
        let cp = match q.cp_cache {
            Some((g, cp)) if g == self.tables().cp_gen => cp,
            _ => {
                let cp = self.tables().cp(q.ring.rgid, q.lcid);
                let cp_gen = self.tables().cp_gen;
                self.tx_cq(n)?.cp_cache = Some((cp_gen, cp));
                cp
            }
        };
        if !cp.valid {
            return Err(ReturnCode::CmdInvalidArg);
        }
        Ok(cp)
    }

    /// Check the local buffers before anything leaves (cassini.md §2.1: IOVAs are checked by
    /// the ATU; a bad one is an error event, never a touch outside the MD): a DMA source (or
    /// a Get's landing buffer), translated once for a put of several frames, and a fetching
    /// AMO's result buffer. Records them in `req`; returns the source as checked (in its AC)
    /// and its translation, if made.
    fn check_buffers<'a>(
        &mut self,
        io: &mut DeviceIo<'_>,
        rgid: u8,
        l: &Launch<'a>,
        req: &mut Req,
    ) -> Result<(Source<'a>, Option<Mapped>), ReturnCode> {
        let mut source = l.src;
        let mut mapped: Option<Mapped> = None;
        if let Source::Dma { lac, addr } = l.src {
            let get = l.is_get();
            let ac = self.tables().lac_ac(rgid, lac);
            let need = if get { Perm::WRITE } else { Perm::READ };
            // Fault site (issue 15): the ATU finds no translation for the local buffer. The
            // command then ends as a real miss does (cassini.md §3.3: an initiator event with
            // C_RC_NO_TRANSLATION, counter c1_oxe_cntrs.err_no_translation); this model has
            // no page-request (ODP) path.
            if io.fault(NicSite::AtuMiss) {
                return Err(ReturnCode::NoTranslation);
            } else if !get && l.len as usize > MTU {
                // A put of several frames: the translation made by the check serves them all.
                let len = u64::from(l.len);
                mapped = Some(self.atu().map_range(io.dma(), ac, addr, len, need)?);
            } else {
                self.atu()
                    .check(io.dma(), ac, addr, u64::from(l.len), need)?;
            }
            req.local_ac = ac;
            req.local_addr = addr;
            source = Source::Ac { ac, addr };
        }
        // A fetching AMO's result buffer is checked the same way.
        if let Some((a, Some((lac, addr)))) = l.amo {
            let ac = self.tables().lac_ac(rgid, lac);
            let size = u64::from(amo_size(a.ty));
            self.atu().check(io.dma(), ac, addr, size, Perm::WRITE)?;
            req.local_ac = ac;
            req.local_addr = addr;
        }
        Ok((source, mapped))
    }

    /// The request's first frame: its header, then the AMO descriptor or the first `first`
    /// bytes of the payload read from `source`.
    fn request_frame(
        &mut self,
        io: &mut DeviceIo<'_>,
        l: &Launch<'_>,
        fab: &Fab,
        handle: u32,
        source: Source<'_>,
        first: usize,
    ) -> Result<Vec<u8>, ReturnCode> {
        let rdzv = l.opcode == DmaOp::RendezvousPut;
        let r = Request {
            opcode: l.opcode as u8,
            index_ext: l.index_ext,
            remote_offset: l.remote_offset,
            request_len: l.len,
            initiator: l.initiator,
            match_bits: l.match_bits,
            header_data: l.header_data,
            handle,
            small: l.small,
            restricted: l.flags.restricted,
            eager_length: if rdzv { l.wire_len() } else { 0 },
            rendezvous_id: if rdzv { l.rendezvous_id } else { 0 },
            use_offset_for_get: rdzv && l.flags.use_offset_for_get,
        };
        if let Some((amo, _)) = l.amo {
            let buf = io.packet_buffer(wire::FRAME_ROOM);
            let mut d = wire::request_in(buf, fab, &r, wire::AMO_PAYLOAD);
            d.extend_from_slice(&amo.encode());
            return Ok(d);
        }
        let buf = io.packet_buffer(wire::FRAME_ROOM + first);
        let mut data = wire::request_in(buf, fab, &r, first);
        self.append_source(io, &mut data, source, 0, first)?;
        Ok(data)
    }

    /// The rest of a put of `total` bytes whose request frame (`first` bytes) has left, then
    /// the put counted as outstanding on CQ `n`. A sequenced message streams: its frames are
    /// read as the window opens and its SEND event follows the last ([`Self::stream_next`]).
    /// A train's SEND event comes with its completion (the source is read at the target,
    /// `Req::send_owed`). Restricted messages are not sequenced (nothing to wait for): every
    /// frame leaves now.
    #[allow(clippy::too_many_arguments)]
    fn put_rest(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        l: &Launch<'_>,
        req: &Req,
        to: &Route,
        source: Source<'_>,
        mapped: Option<Mapped>,
        first: usize,
        total: usize,
        train: Option<&Train>,
    ) -> Result<(), Fail> {
        self.counters().ptl_tx_put_msgs += 1;
        self.counters().ptl_tx_put_pkts += 1;
        if matches!(source, Source::Ac { .. }) && first < total && !l.flags.restricted {
            self.tx_cq(n)?.outstanding += 1;
            let stream = OutStream {
                handle: to.handle,
                fab: to.fab,
                src: to.src,
                dst: to.dst,
                tc: to.tc,
                ac: req.local_ac,
                addr: req.local_addr,
                off: first,
                total,
                mapped: mapped.map(Box::new),
            };
            self.pct_stream(io, stream);
            return Ok(());
        }
        if let Some(t) = train {
            self.counters().ptl_tx_put_pkts += u64::from(t.frames);
        } else {
            let source = through(source, mapped.as_ref());
            let mut off = first;
            while off < total {
                let len = (total - off).min(MTU);
                let c = wire::Continuation {
                    offset: off as u32,
                    eom: off + len == total,
                    handle: to.handle,
                };
                let buf = io.packet_buffer(wire::FRAME_ROOM + len);
                let mut data = wire::continuation_in(buf, &to.fab, &c, len);
                if self.append_source(io, &mut data, source, off, len).is_err() {
                    // The buffer was checked; it can only fail if host memory vanished.
                    break;
                }
                self.pct_send(io, wire::packet(to.src, to.dst, to.tc, data));
                self.counters().ptl_tx_put_pkts += 1;
                off += len;
            }
            self.source_read(io, req, l.len);
        }
        self.tx_cq(n)?.outstanding += 1;
        Ok(())
    }

    /// The next frame of `stream`, read from host memory now; after the last, the SEND
    /// event. `None` when the request is no longer outstanding (it timed out, or its
    /// connection died) or its buffer can no longer be read (then it completes with the
    /// error): the rest of the stream is dropped.
    ///
    /// With `room` for more than one frame in the window, and nothing on the way to a port
    /// of this process that needs the frames' bytes ([`DeviceIo::train_ok`]), the frame
    /// carries a train of the ones after it, as many as the room allows: the target copies
    /// their payload from host memory, so the SEND event is then owed to the completion
    /// ([`Req::send_owed`]).
    fn stream_next(
        &mut self,
        io: &mut DeviceIo<'_>,
        stream: &mut OutStream,
        room: u32,
    ) -> Option<Packet> {
        let req = *self.ixe().get(stream.handle)?;
        let len = (stream.total - stream.off).min(MTU);
        let c = wire::Continuation {
            offset: stream.off as u32,
            eom: stream.off + len == stream.total,
            handle: stream.handle,
        };
        let buf = io.packet_buffer(wire::FRAME_ROOM + len);
        let mut data = wire::continuation_in(buf, &stream.fab, &c, len);
        let source = match &stream.mapped {
            Some(m) => Source::Mapped {
                m,
                addr: stream.addr,
            },
            None => Source::Ac {
                ac: stream.ac,
                addr: stream.addr,
            },
        };
        if let Err(rc) = self.append_source(io, &mut data, source, stream.off, len) {
            io.recycle(data);
            self.count_local_error(rc);
            self.request_lost(io, stream.handle, rc);
            stream.off = stream.total;
            return None;
        }
        self.counters().ptl_tx_put_pkts += 1;
        stream.off += len;
        let mut pkt = wire::packet(stream.src, stream.dst, stream.tc, data);
        let mut owed = req.send_owed;
        if room > 1
            && !stream.done()
            && let Some(m) = &stream.mapped
            && io.train_ok(stream.dst)
        {
            let end = stream.total.min(stream.off + (room as usize - 1) * MTU);
            if let Some(t) = self.train_of(io, m, stream.ac, stream.addr, stream.off, end) {
                self.counters().ptl_tx_put_pkts += u64::from(t.frames);
                stream.off = end;
                pkt.train = Some(t);
                if let Some(x) = self.ixe().get_mut(stream.handle) {
                    x.send_owed = true;
                }
                owed = true;
            }
        }
        if stream.done() && !owed {
            // A streamed request is a put: its length is the request's.
            self.source_read(io, &req, req.rlength);
        }
        Some(pkt)
    }
}

impl<T: IxeCtx + ?Sized> IxeLaunch for T {}
