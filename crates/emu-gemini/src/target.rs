//! What a NIC does with frames from the network: requests are checked against the local
//! memory domains and executed (PUT, GET, AMO, CQ write, remote event, BTE SEND), answers are
//! matched to the requests that wait for them.
//!
//! Requests of an in-order stream (`flag::ORDERED`) are applied in stream order; a gap that
//! does not fill within half the request timeout is skipped (docs/gemini-programming.md,
//! "Ordering").
//!
//! The `Responder` holds only the in-order state; everything else (memory domains, the wire,
//! CQs, the BTE RX channels, the request table) it reaches through the `TargetPort` trait.
//! An answer it matches is returned to the device, which hands it to the FMA sequence or
//! BTE transfer that waits.

use crate::amo;
use crate::cq::Posted;
use crate::fault::Fault;
use crate::mdd::{Access, Domains};
use crate::packet::{BTE_STREAM_BASE, HEADER_LEN, Header, Kind, TC_BTE, TC_FMA, flag};
use crate::regs::counter;
use crate::request::{Answer, Landing, Req};
use emu_core::dma::{DmaPort, Segment};
use emu_core::fabric::{Packet, Train};
use emu_core::hash::IntMap;
use emu_core::nic_faults::NicSite;
use emu_core::time::{SimDuration, SimTime};
use firmware_spec::gemini::cqe::{Cqe, CqeSource, HwStatus};
use std::collections::{BTreeMap, VecDeque};

/// Largest GET one request may ask for.
pub const MAX_GET_BYTES: u32 = 1 << 20;

/// What the target side needs from the rest of the NIC: the memory domains requests act on,
/// the wire for answers, the CQs events go to, the BTE RX channels SENDs land in, and the
/// request table answers are matched against. The device implements it.
pub(crate) trait TargetPort {
    /// Physical PE of this NIC (for traces).
    fn nic(&self) -> u32;
    /// Current virtual time.
    fn now(&self) -> SimTime;
    /// Add `n` to model counter `c` ([`crate::regs::counter`]).
    fn count(&mut self, c: u32, n: u64);
    /// The memory domains.
    fn domains(&self) -> &Domains;
    /// The host DMA port the domains map to.
    fn dma(&self) -> &DmaPort;
    /// An empty buffer of at least `cap` bytes for a frame (the engine's pool).
    fn frame_buffer(&mut self, cap: usize) -> Vec<u8>;
    /// Put a frame on the wire to physical PE `pe` that stands for itself and `more` copies
    /// of its header (the answers to a train's frames, one packet), their payload left in
    /// this NIC's host memory at `segments` (GET answers; empty for acknowledgements);
    /// `more == 0` and no segments for one frame.
    fn send_frames(&mut self, pe: u32, tc: u8, frame: Vec<u8>, more: u32, segments: Vec<Segment>);
    /// Give back the buffer of a frame that was applied (for the engine to reuse).
    fn recycle(&mut self, frame: Vec<u8>);
    /// Make sure the watchdog runs (it skips in-order gaps that never fill).
    fn ensure_watchdog(&mut self);
    /// Deliver a completion event to CQ `cqh`.
    fn post_cqe(&mut self, cqh: u64, cqe: Cqe) -> Posted;
    /// Deliver a BTE SEND into the RX channel it names.
    fn deliver_send(&mut self, hdr: &Header, payload: &[u8]) -> Result<(), Fault>;
    /// The outstanding request tagged `tag`, which stops being outstanding.
    fn take_request(&mut self, tag: u32) -> Option<Req>;
    /// Whether NIC fault site `site` fires here (`emu_core::engine::DeviceIo::fault`).
    fn fault(&mut self, site: NicSite) -> bool;
    /// Lose an event bound for CQ `cqh` as if the CQ were full (fault site `cq_overrun`).
    fn overrun_cq(&mut self, cqh: u64) -> Posted;
    /// Fault site `smsg_starve`: whether this SMSG credit return (an 8-byte PUT_MSG into a
    /// mailbox's control block) is held, to be applied later with
    /// [`Responder::put_message`]. A held frame is kept by the port.
    fn hold_credit_return(&mut self, src: u32, hdr: &Header, payload: &[u8]) -> bool;
}

/// In-order receive state of one (source PE, stream).
#[derive(Clone, Debug, Default)]
struct OrderRx {
    next: u32,
    held: BTreeMap<u32, Packet>,
    since: SimTime,
}

/// The target side of one NIC: executes requests from the network and matches answers;
/// holds early requests of in-order streams.
#[derive(Clone, Debug, Default)]
pub(crate) struct Responder {
    order_rx: IntMap<(u32, u16), OrderRx>,
    /// Requests that must not be applied twice (AMOs, and outside in-order streams the
    /// requests that raise an event: see [`once_only`]) executed lately, by (source port,
    /// request tag): the hash of their frame and when they arrived. An identical frame (same
    /// source, tag and bytes) within [`AMO_DUP_WINDOW`] is a copy the fabric delivered twice
    /// and is not executed again. Initiators number their requests consecutively, so a tag
    /// names one request.
    amo_seen: IntMap<(u32, u32), (u32, SimTime)>,
    /// The keys of `amo_seen`, oldest first (at most [`AMO_SEEN`]).
    amo_order: VecDeque<(u32, u32)>,
}

/// A hash of a frame's bytes (FNV-1a, folded to 32 bits), to tell a duplicate from a new
/// request that reuses a tag (after the initiator's NIC was reset).
fn frame_hash(data: &[u8]) -> u32 {
    let h = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h ^ (h >> 32)) as u32
}

/// Whether a copy of request `hdr` must be recognised and dropped before it is applied: an
/// AMO (not idempotent), and a request that raises an event at the target (remote event,
/// CQ write, an SMSG message carrying its remote event) unless it travels in an in-order
/// stream, where a copy falls behind the stream's position and is dropped as stale
/// ([`Responder::on_packet`]). A second event would tell the owner of the CQ about one
/// request twice, and could overrun its CQ.
fn once_only(hdr: &Header) -> bool {
    match hdr.kind {
        Kind::AmoReq => true,
        Kind::RemoteEvent | Kind::CqWrite => hdr.flags & flag::ORDERED == 0,
        Kind::Put => hdr.flags & (flag::REMOTE_EVENT | flag::ORDERED) == flag::REMOTE_EVENT,
        _ => false,
    }
}

/// AMO requests remembered for duplicate suppression.
const AMO_SEEN: usize = 1 << 16;
/// How long after an AMO request an identical frame counts as its duplicate.
const AMO_DUP_WINDOW: SimDuration = SimDuration::from_us(1000);

impl Responder {
    /// Streams holding requests whose gap has not filled for `after`, ascending.
    pub(crate) fn stalled(&self, now: SimTime, after: SimDuration) -> Vec<(u32, u16)> {
        let mut v: Vec<(u32, u16)> = self
            .order_rx
            .iter()
            .filter(|(_, st)| !st.held.is_empty() && now.since(st.since) >= after)
            .map(|(&k, _)| k)
            .collect();
        v.sort_unstable();
        v
    }

    /// Whether any in-order stream holds requests.
    pub(crate) fn holding(&self) -> bool {
        self.order_rx.values().any(|s| !s.held.is_empty())
    }

    /// A frame arrived. Returns the answer it brings, for the device to hand to the
    /// sequence or transfer that waits for it.
    pub(crate) fn on_packet(&mut self, p: &mut impl TargetPort, pkt: Packet) -> Option<Answer> {
        // A train counts as the frames it stands for.
        p.count(counter::PACKETS_RX, pkt.frames());
        p.count(counter::BYTES_RX, pkt.wire_bytes());
        if !pkt.crc_ok() {
            p.count(counter::CRC_DROPS, 1);
            return None;
        }
        let hdr = match Header::decode(&pkt.data) {
            Ok((h, _)) => h,
            Err(_) => {
                p.count(counter::BAD_FRAMES, 1);
                return None;
            }
        };
        let src = pkt.src.0;
        let payload = pkt.data.get(HEADER_LEN..).unwrap_or(&[]);
        if hdr.kind.is_answer() {
            let answer = Self::on_answer(p, &hdr, payload, pkt.train.as_deref());
            p.recycle(pkt.data);
            return answer;
        }
        if once_only(&hdr) && !self.first_amo(src, hdr.tag, frame_hash(&pkt.data), p.now()) {
            // A duplicate: executing it again would apply a non-idempotent update twice, or
            // raise a second event for one request.
            p.count(counter::DUPLICATES, 1);
            return None;
        }
        if hdr.flags & flag::ORDERED != 0 {
            self.on_ordered(p, src, hdr, pkt);
        } else {
            Self::on_request(p, src, &hdr, payload, pkt.train.as_deref());
            p.recycle(pkt.data);
        }
        None
    }

    /// Whether the AMO request frame `(src, tag, hash)` arriving at `now` is not a recent
    /// duplicate (and remember it).
    fn first_amo(&mut self, src: u32, tag: u32, crc: u32, now: SimTime) -> bool {
        let key = (src, tag);
        if let Some(&(c, t)) = self.amo_seen.get(&key)
            && c == crc
            && now.since(t) <= AMO_DUP_WINDOW
        {
            return false;
        }
        if self.amo_seen.insert(key, (crc, now)).is_none() {
            self.amo_order.push_back(key);
            if self.amo_order.len() > AMO_SEEN
                && let Some(old) = self.amo_order.pop_front()
            {
                self.amo_seen.remove(&old);
            }
        }
        true
    }

    fn on_ordered(&mut self, p: &mut impl TargetPort, src: u32, hdr: Header, pkt: Packet) {
        let key = (src, hdr.stream);
        let now = p.now();
        let st = self.order_rx.entry(key).or_default();
        let ahead = hdr.seq.wrapping_sub(st.next) as i32;
        if ahead > 0 {
            if st.held.is_empty() {
                st.since = now;
            }
            st.held.insert(hdr.seq, pkt);
            p.ensure_watchdog();
            return;
        }
        if ahead < 0 {
            // Behind the stream's position: a copy of a request already applied (the fabric
            // delivered it twice), or one whose gap was given up on. Applying it now would
            // put an old write after newer ones of the stream (an old SMSG control word
            // would take back credits the receiver already returned), so it is dropped, as
            // an in-order stream drops a sequence number it has passed. The initiator
            // already has its answer, or times out.
            p.count(counter::ORDER_STALE, 1);
            tracing::debug!(
                target: "gemini::target",
                nic = p.nic(),
                from = src,
                stream = hdr.stream,
                seq = hdr.seq,
                next = st.next,
                kind = ?hdr.kind,
                "stale in-order request dropped"
            );
            return;
        }
        // A train takes the stream positions of all its frames.
        st.next = st.next.wrapping_add(pkt.frames() as u32);
        let payload = pkt.data.get(HEADER_LEN..).unwrap_or(&[]);
        Self::on_request(p, src, &hdr, payload, pkt.train.as_deref());
        p.recycle(pkt.data);
        self.drain_order(p, key);
    }

    /// Apply held requests of a stream while the next one in order is there.
    fn drain_order(&mut self, p: &mut impl TargetPort, key: (u32, u16)) {
        let now = p.now();
        loop {
            let Some(st) = self.order_rx.get_mut(&key) else {
                return;
            };
            let Some(pkt) = st.held.remove(&st.next) else {
                return;
            };
            st.next = st.next.wrapping_add(pkt.frames() as u32);
            st.since = now;
            if let Ok((hdr, payload)) = Header::decode(&pkt.data) {
                Self::on_request(p, key.0, &hdr, payload, pkt.train.as_deref());
            }
        }
    }

    /// Give up on the missing requests before the first held one of a stream.
    pub(crate) fn skip_order_gap(&mut self, p: &mut impl TargetPort, key: (u32, u16)) {
        if let Some(st) = self.order_rx.get_mut(&key)
            && let Some(&first) = st.held.keys().next()
        {
            st.next = first;
        }
        self.drain_order(p, key);
    }

    #[allow(clippy::too_many_arguments)]
    fn reply(
        p: &mut impl TargetPort,
        to: u32,
        req: &Header,
        kind: Kind,
        result: Result<(), Fault>,
        flags: u8,
        op1: u64,
        payload: &[u8],
    ) {
        Self::reply_frames(p, to, req, kind, result, flags, op1, payload, 1);
    }

    /// [`Responder::reply`] to a request of `frames` frames (a train): one answer per
    /// frame, sent as one packet.
    #[allow(clippy::too_many_arguments)]
    fn reply_frames(
        p: &mut impl TargetPort,
        to: u32,
        req: &Header,
        kind: Kind,
        result: Result<(), Fault>,
        flags: u8,
        op1: u64,
        payload: &[u8],
        frames: u32,
    ) {
        let status = match result {
            Ok(()) => HwStatus::Ok,
            Err(f) => {
                tracing::debug!(
                    target: "gemini::target",
                    nic = p.nic(),
                    from = to,
                    kind = ?req.kind,
                    fault = %f,
                    "remote request rejected"
                );
                p.count(counter::REMOTE_REJECTS, u64::from(frames.max(1)));
                f.status()
            }
        };
        let mut h = req.answer(kind, status.code());
        h.flags = flags;
        h.op1 = op1;
        let tc = if req.stream >= BTE_STREAM_BASE {
            TC_BTE
        } else {
            TC_FMA
        };
        let mut frame = p.frame_buffer(HEADER_LEN + payload.len());
        h.encode_into(&mut frame);
        frame.extend_from_slice(payload);
        p.send_frames(to, tc, frame, frames.saturating_sub(1), Vec::new());
    }

    /// Raise an event in the CQ of the domain `acc` names. `Ok(true)` if it was lost to a
    /// full CQ. Without a CQ: `NoCq` if `require_cq`, else nothing happens.
    fn raise_remote(
        p: &mut impl TargetPort,
        acc: Access,
        source: CqeSource,
        data56: u64,
        require_cq: bool,
    ) -> Result<bool, Fault> {
        let cqh = p.domains().resolve(acc)?.cqh;
        if cqh == 0 {
            return if require_cq {
                Err(Fault::NoCq)
            } else {
                Ok(false)
            };
        }
        // Fault site `cq_overrun` (remote events only; a CQ write goes to a kernel CQ): the
        // event finds its CQ full, is lost, and the CQ's sticky overrun flag is set, so the
        // owner's GNI_CqGetEvent reports GNI_RC_ERROR_RESOURCE (gemini.md §1.3).
        if !require_cq && p.fault(NicSite::CqOverrun) {
            return Ok(p.overrun_cq(cqh) == Posted::Lost);
        }
        let cqe = Cqe::from_hw(source, HwStatus::Ok, data56);
        Ok(p.post_cqe(cqh, cqe) == Posted::Lost)
    }

    /// Apply a PUT_MSG request (an SMSG slot or control word) and acknowledge it.
    pub(crate) fn put_message(p: &mut impl TargetPort, src: u32, hdr: &Header, payload: &[u8]) {
        let acc = Access {
            mdh: hdr.mdh,
            vmdh: hdr.flags & flag::VMDH != 0,
            ptag: hdr.ptag,
        };
        let r = write_message(p.domains(), p.dma(), acc, hdr.offset, payload);
        Self::reply(p, src, hdr, Kind::Ack, r, 0, 0, &[]);
    }

    /// Apply an SMSG message that carries its sequence's remote event
    /// ([`flag::REMOTE_EVENT`]): the message, then (if it was written) the event, then one
    /// acknowledgement for both, flagged as a separate remote-event request's would be.
    fn put_message_with_event(p: &mut impl TargetPort, src: u32, hdr: &Header, payload: &[u8]) {
        let acc = Access {
            mdh: hdr.mdh,
            vmdh: hdr.flags & flag::VMDH != 0,
            ptag: hdr.ptag,
        };
        let r = write_message(p.domains(), p.dma(), acc, hdr.offset, payload).and_then(|()| {
            let source = CqeSource::try_from(hdr.cmd as u8)
                .ok()
                .filter(|s| s.is_remote())
                .unwrap_or(CqeSource::RmtDreq);
            let data =
                hdr.op1 & firmware_spec::bits::mask(firmware_spec::gemini::cqe::HW_DATA_BITS);
            Self::raise_remote(p, acc, source, data, false)
        });
        let flags = if matches!(r, Ok(true)) {
            flag::REM_OVERRUN
        } else {
            0
        };
        Self::reply(p, src, hdr, Kind::Ack, r.map(|_| ()), flags, 0, &[]);
    }

    fn on_request(
        p: &mut impl TargetPort,
        src: u32,
        hdr: &Header,
        payload: &[u8],
        train: Option<&Train>,
    ) {
        let acc = Access {
            mdh: hdr.mdh,
            vmdh: hdr.flags & flag::VMDH != 0,
            ptag: hdr.ptag,
        };
        match hdr.kind {
            Kind::Put if hdr.flags & flag::MSG != 0 => {
                // The library's credit return is its one 8-byte control-word store
                // (userlib smsg.rs); a message is at least its 16-byte slot header.
                if payload.len() == 8 && p.hold_credit_return(src, hdr, payload) {
                    return;
                }
                if hdr.flags & flag::REMOTE_EVENT != 0 {
                    return Self::put_message_with_event(p, src, hdr, payload);
                }
                Self::put_message(p, src, hdr, payload);
            }
            Kind::Put if train.is_some() => {
                let Some(t) = train else { return };
                let r = place_train(p.domains(), p.dma(), acc, hdr.offset, payload, t);
                let frames = t.frames.saturating_add(1);
                Self::reply_frames(p, src, hdr, Kind::Ack, r, 0, 0, &[], frames);
            }
            Kind::Put => {
                let r = p.domains().write(p.dma(), acc, hdr.offset, payload);
                Self::reply(p, src, hdr, Kind::Ack, r, 0, 0, &[]);
            }
            Kind::GetReq if train.is_some() => {
                let Some(t) = train else { return };
                let frames = t.frames.saturating_add(1);
                // Each frame of the train asks for at most MAX_GET_BYTES.
                let r = if u64::from(hdr.len) > u64::from(MAX_GET_BYTES) * u64::from(frames) {
                    Err(Fault::BadLength)
                } else {
                    p.domains()
                        .segments(p.dma(), acc, hdr.offset, u64::from(hdr.len), false)
                };
                match r {
                    Ok(segs) => {
                        let mut h = hdr.answer(Kind::GetResp, HwStatus::Ok.code());
                        h.flags = 0;
                        h.op1 = 0;
                        let frame = h.encode(&[]);
                        p.send_frames(src, TC_BTE, frame, frames - 1, segs);
                    }
                    Err(f) => {
                        Self::reply_frames(p, src, hdr, Kind::GetResp, Err(f), 0, 0, &[], frames)
                    }
                }
            }
            Kind::GetReq => {
                if hdr.len > MAX_GET_BYTES {
                    return Self::reply(
                        p,
                        src,
                        hdr,
                        Kind::GetResp,
                        Err(Fault::BadLength),
                        0,
                        0,
                        &[],
                    );
                }
                let mut buf = vec![0u8; hdr.len as usize];
                match p.domains().read(p.dma(), acc, hdr.offset, &mut buf) {
                    Ok(()) => Self::reply(p, src, hdr, Kind::GetResp, Ok(()), 0, 0, &buf),
                    Err(f) => Self::reply(p, src, hdr, Kind::GetResp, Err(f), 0, 0, &[]),
                }
            }
            Kind::AmoReq => {
                let r = amo::execute(
                    p.domains(),
                    p.dma(),
                    acc,
                    hdr.offset,
                    hdr.cmd,
                    hdr.op1,
                    hdr.op2,
                );
                let old = *r.as_ref().unwrap_or(&0);
                Self::reply(p, src, hdr, Kind::AmoResp, r.map(|_| ()), 0, old, &[]);
            }
            Kind::CqWrite | Kind::RemoteEvent => {
                let cq_write = hdr.kind == Kind::CqWrite;
                let source = if cq_write {
                    CqeSource::RmtSreq
                } else {
                    CqeSource::try_from(hdr.cmd as u8)
                        .ok()
                        .filter(|s| s.is_remote())
                        .unwrap_or(CqeSource::RmtDreq)
                };
                let data = if cq_write {
                    hdr.op1 & firmware_spec::bits::mask(firmware_spec::gemini::cqe::DATA_BITS)
                } else {
                    hdr.op1 & firmware_spec::bits::mask(firmware_spec::gemini::cqe::HW_DATA_BITS)
                };
                let r = Self::raise_remote(p, acc, source, data, cq_write);
                let flags = if matches!(r, Ok(true)) {
                    flag::REM_OVERRUN
                } else {
                    0
                };
                Self::reply(p, src, hdr, Kind::Ack, r.map(|_| ()), flags, 0, &[]);
            }
            Kind::Send => {
                let r = p.deliver_send(hdr, payload);
                Self::reply(p, src, hdr, Kind::Ack, r, 0, 0, &[]);
            }
            Kind::GetResp | Kind::AmoResp | Kind::Ack => {}
        }
    }

    /// Match an answer to its request and land its data; `None` for a stray answer.
    fn on_answer(
        p: &mut impl TargetPort,
        hdr: &Header,
        payload: &[u8],
        train: Option<&Train>,
    ) -> Option<Answer> {
        let more = train.map_or(0, |t| t.frames);
        let Some(req) = p.take_request(hdr.tag) else {
            p.count(counter::STRAY_ANSWERS, 1);
            return None;
        };
        let mut fault = Fault::from_wire(hdr.status);
        if fault.is_none() {
            let r = match (hdr.kind, train) {
                (Kind::GetResp, Some(t)) => land_train(p.domains(), p.dma(), req.landing, t),
                (Kind::GetResp, None) => land(p.domains(), p.dma(), req.landing, payload),
                (Kind::AmoResp, _) => {
                    land(p.domains(), p.dma(), req.landing, &hdr.op1.to_le_bytes())
                }
                _ => Ok(()),
            };
            fault = r.err();
        }
        Some(Answer {
            req,
            fault,
            rem_overrun: hdr.flags & flag::REM_OVERRUN != 0,
            more,
            tag: hdr.tag,
        })
    }
}

/// Write an SMSG message so that its first 8 bytes (the slot header's seqno, tag and
/// kind) become visible last, with a release store when they are 8-byte aligned: a
/// receiver polling the mailbox never sees a header before its payload.
fn write_message(
    domains: &Domains,
    dma: &DmaPort,
    acc: Access,
    offset: u64,
    msg: &[u8],
) -> Result<(), Fault> {
    if msg.len() < 8 || !offset.is_multiple_of(8) {
        return domains.write(dma, acc, offset, msg);
    }
    domains.check(dma, acc, offset, msg.len() as u64, true)?;
    domains.write(dma, acc, offset + 8, &msg[8..])?;
    let mut first = [0u8; 8];
    first.copy_from_slice(&msg[..8]);
    let v = u64::from_le_bytes(first);
    domains.atomic(dma, acc, offset, |w| {
        w.store(v, std::sync::atomic::Ordering::Release)
    })
}

/// Place a train's PUT: the packet's own payload at `offset`, then the train's payload behind
/// it, copied once from the initiator's host memory (`train.source`) into the domain's
/// memory. The whole range is checked before a byte moves (all or nothing, as a frame's
/// write is).
fn place_train(
    domains: &Domains,
    dma: &DmaPort,
    acc: Access,
    offset: u64,
    head: &[u8],
    train: &Train,
) -> Result<(), Fault> {
    let len = train.payload_len();
    let at = offset.checked_add(head.len() as u64).ok_or(Fault::Bounds)?;
    let to = domains.segments(dma, acc, at, len, true)?;
    domains.check(dma, acc, offset, head.len() as u64, true)?;
    domains.write(dma, acc, offset, head)?;
    train
        .source
        .copy_segments_to(&train.segments, dma, &to)
        .map_err(|_| Fault::Dma)
}

/// Land the answer to a GET sent as a train: its payload, copied once from the target's host
/// memory (`train.source`) to where the request asked (the landing of its first frame
/// covers the whole train).
fn land_train(
    domains: &Domains,
    dma: &DmaPort,
    landing: Landing,
    train: &Train,
) -> Result<(), Fault> {
    let len = train.payload_len();
    let to = match landing {
        Landing::None => return Ok(()),
        Landing::Mdd {
            acc,
            offset,
            len: l,
            ..
        } => {
            if u64::from(l) != len {
                return Err(Fault::BadLength);
            }
            domains.segments(dma, acc, offset, len, true)?
        }
        Landing::Phys { addr } => vec![Segment { addr, len }],
    };
    train
        .source
        .copy_segments_to(&train.segments, dma, &to)
        .map_err(|_| Fault::Dma)
}

/// Put the data of an answer where the request asked.
fn land(domains: &Domains, dma: &DmaPort, landing: Landing, bytes: &[u8]) -> Result<(), Fault> {
    match landing {
        Landing::None => Ok(()),
        Landing::Mdd {
            acc,
            offset,
            len,
            flag,
        } => {
            if bytes.len() != len as usize {
                return Err(Fault::BadLength);
            }
            domains.write(dma, acc, offset, bytes)?;
            if flag {
                domains.write(dma, acc, offset + u64::from(len), &1u32.to_le_bytes())?;
            }
            Ok(())
        }
        Landing::Phys { addr } => dma.write(addr, bytes).map_err(|_| Fault::Dma),
    }
}
