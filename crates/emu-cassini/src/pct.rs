//! Packet connection tracking (PCT): the reliability layer between the blocks that build
//! packets (IXE/OXE, TGT) and the fabric. Every packet the NIC sends goes through
//! [`PctOps::pct_send`]; every packet it receives goes through [`PctOps::pct_receive`] before the
//! target and response paths see it. The protocol is ours (cassini.md §11: the PCT/retry
//! protocol is not public); it borrows Cassini's names and counters
//! (`c_pct_cntrs`, `c_pct_cfg_timing`, the SCT/TCT/SRB tables of `csr_defs.json`).
//! docs/cassini-reliability.md describes it; in short:
//!
//! * A **connection** joins this NIC to a peer fabric port on one (VNI, traffic class). Its
//!   sending half is the **SCT** (source connection: epoch, next sequence number, the
//!   **SRB** source retry buffer of unacknowledged packets, a backlog waiting for window);
//!   its receiving half the **TCT** (target connection: the peer's epoch, the expected
//!   sequence number, out-of-order packets held for in-order delivery).
//! * Unrestricted requests (first packets, small messages, continuations) and all responses
//!   carry a sequence number in the **PCT tag** appended to the frame; the receiver
//!   delivers them in order and exactly once, drops duplicates, holds packets that arrive
//!   early (NACKing the gap once) and acknowledges cumulatively, piggybacked on its own
//!   traffic to that peer or in a standalone acknowledgement at the next scan.
//! * The sender retransmits the oldest unacknowledged packet when it times out
//!   (`c_pct_cfg_timing.spt_timeout_epoch_sel`) and the NACKed packet at once; after
//!   [`MAX_TRIES`] transmissions of one packet the connection is declared dead
//!   (`sct_timeouts`), its packets are discarded and their requests complete with
//!   UNDELIVERABLE.
//! * Restricted requests are sent once, unsequenced (cassini.md §2: no ordering, no
//!   connection): they may be lost, duplicated or reordered; a lost one completes through
//!   the initiator's request timeout.
//! * A frame that fails its CRC is dropped at the port and counted (`c_hni_cntrs.rx_bad_opt`).
//!
//! The PCT reaches the rest of the NIC only through [`PctCtx`] (implemented by `hw`).

use std::collections::{BTreeMap, VecDeque};

use emu_core::engine::DeviceIo;
use emu_core::fabric::{Packet, PortId, TrafficClass};
use emu_core::time::SimDuration;
use firmware_spec::cassini::cmd::DmaOp;
use firmware_spec::cassini::csr;
use firmware_spec::cassini::rc::ReturnCode;

use crate::block::Counters;
use crate::csr::CsrFile;
use crate::ixe::OutStream;
use crate::tgt::ReplyStream;
use crate::wire::{self, Parsed};
use emu_core::hash::IntMap;

/// Timer token of the PCT scan (delayed acknowledgements, retransmissions).
pub(crate) const TOKEN_SCAN: u64 = 0x5043_5400_0000_0001;

/// Whether `token` is one of the PCT's timers.
pub(crate) fn is_token(token: u64) -> bool {
    token == TOKEN_SCAN
}

/// Unacknowledged packets a connection may have in flight (`req_pend_cnt` of
/// `c_pct_cfg_sct_ram0` is 11 bits wide, so Cassini allows up to 2047). Later packets wait
/// in the connection's backlog. Also the receiver's reorder window.
pub(crate) const WINDOW: u32 = 1024;
/// Transmissions of one packet before its connection is declared dead.
pub(crate) const MAX_TRIES: u8 = 8;
/// A receiver acknowledges at once after this many unacknowledged deliveries; otherwise
/// traffic back to the sender carries the acknowledgement, or the next scan (at most a
/// quarter of the timeout later) sends it on its own. One timer serves both duties, so a
/// busy connection arms none per packet.
pub(crate) const ACK_EVERY: u32 = 32;

/// Reset value of `c_pct_cfg_timing.spt_timeout_epoch_sel`.
const EPOCH_SEL_RESET: u8 = 16;
/// Accepted range of `spt_timeout_epoch_sel` (values outside are clamped): 2^10..2^22 ns
/// timeouts, so that [`MAX_TRIES`] of the longest stay below the initiator's 1 s
/// request timeout.
const EPOCH_SEL_MIN: u8 = 6;
const EPOCH_SEL_MAX: u8 = 18;

/// The retransmission timeout selected by `spt_timeout_epoch_sel` (our reading: an epoch of
/// 2^(sel + 4) ns; the reset value 16 gives about 1 ms).
pub(crate) fn rto_of(sel: u8) -> SimDuration {
    SimDuration::from_ns(1u64 << (u32::from(sel.clamp(EPOCH_SEL_MIN, EPOCH_SEL_MAX)) + 4))
}

/// Bytes of the PCT tag at the end of every frame.
pub(crate) const TAG: usize = 20;
const _: () = assert!(TAG == wire::TAG_ROOM);
/// Tag flag: the frame carries a sequence number (`epoch`, `seq`).
const F_SEQ: u8 = 1;
/// Tag flag: `ack_epoch`/`ack` acknowledge every sequence number below `ack`.
const F_ACK: u8 = 2;
/// Tag flag: the receiver misses sequence number `ack` (implies [`F_ACK`]).
const F_NACK: u8 = 4;
/// Tag flag: connection management only, nothing for the blocks above.
const F_CONN: u8 = 8;

/// The PCT tag (our layout, big-endian): flags, try, 2 reserved bytes, epoch, seq,
/// ack_epoch, ack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tag {
    pub(crate) flags: u8,
    /// Transmission count of this copy (1 = first).
    pub(crate) tries: u8,
    pub(crate) epoch: u32,
    pub(crate) seq: u32,
    pub(crate) ack_epoch: u32,
    pub(crate) ack: u32,
}

impl Tag {
    fn encode(&self) -> [u8; TAG] {
        let mut b = [0u8; TAG];
        b[0] = self.flags;
        b[1] = self.tries;
        b[4..8].copy_from_slice(&self.epoch.to_be_bytes());
        b[8..12].copy_from_slice(&self.seq.to_be_bytes());
        b[12..16].copy_from_slice(&self.ack_epoch.to_be_bytes());
        b[16..20].copy_from_slice(&self.ack.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Tag> {
        let b = b.get(..TAG)?;
        let w = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(Tag {
            flags: b[0],
            tries: b[1],
            epoch: w(4),
            seq: w(8),
            ack_epoch: w(12),
            ack: w(16),
        })
    }
}

/// Bytes 2..4 of the fabric header: the frame's total length.
fn set_total_len(data: &mut [u8], len: usize) {
    if let Some(b) = data.get_mut(2..4) {
        b.copy_from_slice(&(len.min(usize::from(u16::MAX)) as u16).to_be_bytes());
    }
}

/// Append `tag` to a frame (the fabric header's length grows with it).
fn push_tag(data: &mut Vec<u8>, tag: &Tag) {
    data.extend_from_slice(&tag.encode());
    let n = data.len();
    set_total_len(data, n);
}

/// Rewrite the tag at the end of a frame.
fn rewrite_tag(data: &mut [u8], tag: &Tag) {
    let n = data.len();
    if let Some(b) = n.checked_sub(TAG).and_then(|at| data.get_mut(at..)) {
        b.copy_from_slice(&tag.encode());
    }
}

/// Remove the tag from a frame; `None` if the frame is too short to carry one.
fn pop_tag(data: &mut Vec<u8>) -> Option<Tag> {
    let at = data.len().checked_sub(TAG)?;
    if at < wire::FAB_HDR {
        return None;
    }
    let tag = Tag::decode(&data[at..])?;
    data.truncate(at);
    set_total_len(data, at);
    Some(tag)
}

/// VNI of a frame (fabric header bytes 4..6).
fn vni_of(data: &[u8]) -> Option<u16> {
    data.get(4..6).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

/// Whether a frame is a request (`req_not_rsp`, the top bit of the first byte after the
/// fabric header).
fn is_request(data: &[u8]) -> bool {
    data.get(wire::FAB_HDR).is_some_and(|b| b & 0x80 != 0)
}

/// `a < b` in sequence space.
fn before(a: u32, b: u32) -> bool {
    let d = b.wrapping_sub(a);
    d != 0 && d < 1 << 31
}

/// PCT counters under their `c_pct_cntrs` names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PctCounters {
    /// Sequenced (ordered) request packets sent, first transmissions.
    pub(crate) req_ordered: u64,
    /// Restricted (unordered) request packets sent.
    pub(crate) req_unordered: u64,
    /// Response packets sent, first transmissions.
    pub(crate) ptls_response: u64,
    /// Response packets received and passed on.
    pub(crate) responses_received: u64,
    /// Source connections opened (first use, or after one was declared dead).
    pub(crate) conn_sct_open: u64,
    /// Target connections opened (first packet of a new peer epoch).
    pub(crate) conn_tct_open: u64,
    /// NACKs generated for a sequence gap.
    pub(crate) bad_seq_nacks: u64,
    /// Packets that timed out waiting for their acknowledgement.
    pub(crate) spt_timeouts: u64,
    /// Connections declared dead after [`MAX_TRIES`].
    pub(crate) sct_timeouts: u64,
    /// Retransmissions from the SRB (timeouts and NACKs).
    pub(crate) retry_srb_requests: u64,
    /// Acknowledgements that name no open connection or an old epoch.
    pub(crate) rsp_dropped_inactive: u64,
}

/// What the PCT needs from the rest of the NIC: its own connection state, the counters,
/// the NIC's address, and the two blocks above it: the receive path that takes delivered
/// frames (`tgt`) and the initiator whose requests fail with a dead connection (`ixe`).
/// `hw` implements it.
pub(crate) trait PctCtx {
    /// The PCT's connection state.
    fn pct(&mut self) -> &mut Pct;
    /// The NIC-wide counters.
    fn counters(&mut self) -> &mut Counters;
    /// This NIC's NID.
    fn nid(&self) -> u32;
    /// NID of fabric port 0.
    fn nid_base(&self) -> u32;
    /// Hand a frame that arrived in order to the target and response paths.
    fn receive(&mut self, io: &mut DeviceIo<'_>, pkt: Packet);
    /// Complete request `handle` with `rc` now (its connection was declared dead).
    fn request_lost(&mut self, io: &mut DeviceIo<'_>, handle: u32, rc: ReturnCode);
    /// The next frame of a streaming message, or a frame carrying a train of at most `room`
    /// frames in all (`None`: drop the rest of it).
    fn stream_next(
        &mut self,
        io: &mut DeviceIo<'_>,
        stream: &mut OutStream,
        room: u32,
    ) -> Option<Packet>;
    /// Packets were acknowledged: the initiator's requests are making progress.
    fn note_progress(&mut self, io: &mut DeviceIo<'_>);
    /// The next REPLY frame of a Get answered as trains, or a frame carrying a train of at
    /// most `room` frames in all.
    fn reply_next(&mut self, io: &mut DeviceIo<'_>, stream: &mut ReplyStream, room: u32) -> Packet;
    /// The last packet of the reply stream owing `token` was acknowledged (its data has
    /// been copied at the initiator), or its connection died: the target's events of that
    /// Get are posted now.
    fn reply_read(&mut self, io: &mut DeviceIo<'_>, token: u64);
}

impl<T: PctCtx + ?Sized> PctOps for T {}

/// A packet in the source retry buffer (a train takes the sequence numbers of all its
/// frames, from `seq` on).
#[derive(Clone, Debug)]
struct SrbEntry {
    seq: u32,
    /// The frame as sent (with its tag).
    pkt: Packet,
    /// Last transmission (ps).
    sent_at: u64,
    tries: u8,
    /// The last packet of a reply stream: the token of the target events its
    /// acknowledgement releases ([`PctCtx::reply_read`]).
    owed: Option<u64>,
}

/// Sending half of a connection.
#[derive(Clone, Debug, Default)]
struct Sct {
    open: bool,
    epoch: u32,
    next_seq: u32,
    srb: VecDeque<SrbEntry>,
    /// Frames in the SRB (a train counts as its frames): what the window limits.
    in_flight: u32,
    /// Frames (without tag) and streaming messages waiting for room in the window.
    backlog: VecDeque<Pending>,
}

/// What waits in a connection's backlog.
#[derive(Clone, Debug)]
enum Pending {
    /// A frame made already.
    Frame(Packet),
    /// The rest of a message, read from host memory a frame at a time.
    Stream(OutStream),
    /// The REPLY frames of a Get, as trains while nothing needs their bytes.
    Reply(ReplyStream),
}

/// Receiving half of a connection.
#[derive(Clone, Debug, Default)]
struct Tct {
    open: bool,
    /// The peer SCT's epoch.
    epoch: u32,
    /// Next sequence number to deliver.
    exp: u32,
    /// Frames that arrived early, by sequence number (tag removed, CRC resealed).
    held: BTreeMap<u32, Packet>,
    /// The gap last NACKed.
    nacked: Option<u32>,
    /// Deliveries since the last acknowledgement.
    unacked: u32,
    /// An acknowledgement is owed.
    ack_due: bool,
}

/// A connection to (peer port, VNI, traffic class).
#[derive(Clone, Debug)]
struct Conn {
    port: u32,
    vni: u16,
    tc: u8,
    sct: Sct,
    tct: Tct,
    /// Listed in [`Pct::ack_list`].
    ack_listed: bool,
}

/// The PCT block.
#[derive(Clone, Debug)]
pub(crate) struct Pct {
    conns: Vec<Conn>,
    index: IntMap<(u32, u16, u8), usize>,
    /// Epoch of the next SCT opened (never reused, so a peer can tell a new connection
    /// from late packets of an old one).
    next_epoch: u32,
    rto: SimDuration,
    scan_armed: bool,
    /// Connections owing a standalone acknowledgement at the next scan.
    ack_list: Vec<usize>,
    /// Handles of restricted put messages whose continuations are still to be sent.
    restricted_msgs: IntMap<u32, ()>,
    pub(crate) counters: PctCounters,
}

impl Default for Pct {
    fn default() -> Self {
        Pct::new()
    }
}

impl Pct {
    pub(crate) fn new() -> Self {
        Pct {
            conns: Vec::new(),
            index: IntMap::default(),
            next_epoch: 1,
            rto: rto_of(EPOCH_SEL_RESET),
            scan_armed: false,
            ack_list: Vec::new(),
            restricted_msgs: IntMap::default(),
            counters: PctCounters::default(),
        }
    }

    /// `c_pct_cfg_timing` was written.
    pub(crate) fn timing_written(&mut self, csrs: &CsrFile) {
        let sel = csrs.field(
            csr::C_PCT_CFG_TIMING,
            0,
            csr::fields::c_pct_cfg_timing::SPT_TIMEOUT_EPOCH_SEL,
        );
        self.rto = rto_of(sel.min(63) as u8);
    }

    /// Open source connections.
    pub(crate) fn sct_in_use(&self) -> u64 {
        self.conns.iter().filter(|c| c.sct.open).count() as u64
    }

    /// Open target connections.
    pub(crate) fn tct_in_use(&self) -> u64 {
        self.conns.iter().filter(|c| c.tct.open).count() as u64
    }

    fn conn(&mut self, key: (u32, u16, u8)) -> usize {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.conns.len();
        self.conns.push(Conn {
            port: key.0,
            vni: key.1,
            tc: key.2,
            sct: Sct::default(),
            tct: Tct::default(),
            ack_listed: false,
        });
        self.index.insert(key, i);
        i
    }

    /// Put the acknowledgement owed on connection `ci` into `tag`.
    fn piggyback(&mut self, ci: usize, tag: &mut Tag) {
        let t = &mut self.conns[ci].tct;
        if t.open {
            tag.flags |= F_ACK;
            tag.ack_epoch = t.epoch;
            tag.ack = t.exp;
            t.ack_due = false;
            t.unacked = 0;
        }
    }

    /// Whether a frame (without tag) travels unsequenced: a restricted request, or a
    /// continuation of a restricted put. `train`: the frame's continuations travel with it
    /// as a train (none follow it).
    fn unordered(&mut self, data: &[u8], train: bool) -> bool {
        match wire::parse(data) {
            Some(Parsed::Request(_, r, payload)) if r.restricted => {
                let put = matches!(
                    DmaOp::try_from(r.opcode),
                    Ok(DmaOp::Put | DmaOp::NomatchPut)
                );
                if put && !r.small && !train && r.request_len as usize > payload.len() {
                    self.restricted_msgs.insert(r.handle, ());
                }
                true
            }
            Some(Parsed::Continuation(_, c, _)) => {
                let restricted = self.restricted_msgs.contains_key(&c.handle);
                if restricted && c.eom {
                    self.restricted_msgs.remove(&c.handle);
                }
                restricted
            }
            _ => false,
        }
    }
}

/// The PCT's behaviour, on anything that provides a [`PctCtx`].
pub(crate) trait PctOps: PctCtx {
    /// Count a frame (or the frames of a train) handed to the port.
    fn pct_count_tx(&mut self, pkt: &Packet) {
        let frames = pkt.frames();
        self.counters().tx_ok_opt += frames;
        self.counters().pkts_sent_by_tc[usize::from(pkt.tc.0 & 7)] += frames;
    }

    /// Send a frame built by the blocks above (no tag yet): sequenced on its connection, or
    /// once and unsequenced for restricted requests.
    fn pct_send(&mut self, io: &mut DeviceIo<'_>, mut pkt: Packet) {
        let request = is_request(&pkt.data);
        let vni = vni_of(&pkt.data).unwrap_or(0);
        let key = (pkt.dst.0, vni, pkt.tc.0);
        if request && self.pct().unordered(&pkt.data, pkt.train.is_some()) {
            self.pct().counters.req_unordered += pkt.frames();
            let mut tag = Tag {
                tries: 1,
                ..Tag::default()
            };
            if let Some(&ci) = self.pct().index.get(&key) {
                self.pct().piggyback(ci, &mut tag);
            }
            push_tag(&mut pkt.data, &tag);
            self.pct_count_tx(&pkt);
            io.send(pkt);
            return;
        }
        if request {
            self.pct().counters.req_ordered += 1;
        } else {
            self.pct().counters.ptls_response += 1;
        }
        let ci = self.pct_open_sct(key);
        let s = &mut self.pct().conns[ci].sct;
        if s.in_flight >= WINDOW || !s.backlog.is_empty() {
            s.backlog.push_back(Pending::Frame(pkt));
            return;
        }
        self.pct_transmit(io, ci, pkt, None);
    }

    /// Send the REPLY frames of a Get (sequenced responses) as the window to its initiator
    /// opens, as trains of the window's room ([`PctCtx::reply_next`]).
    fn pct_reply(&mut self, io: &mut DeviceIo<'_>, stream: ReplyStream) {
        let ci = self.pct_open_sct(stream.conn_key());
        self.pct().conns[ci]
            .sct
            .backlog
            .push_back(Pending::Reply(stream));
        self.pct_pump(io, ci);
    }

    /// Send the rest of a message (sequenced continuation frames) as the window to its
    /// target opens, each frame read from host memory when it goes.
    fn pct_stream(&mut self, io: &mut DeviceIo<'_>, stream: OutStream) {
        let ci = self.pct_open_sct(stream.conn_key());
        self.pct().conns[ci]
            .sct
            .backlog
            .push_back(Pending::Stream(stream));
        self.pct_pump(io, ci);
    }

    /// The connection for `key`, its sending half opened if it was not.
    fn pct_open_sct(&mut self, key: (u32, u16, u8)) -> usize {
        let pct = self.pct();
        let ci = pct.conn(key);
        let s = &mut pct.conns[ci].sct;
        if !s.open {
            s.open = true;
            s.epoch = pct.next_epoch;
            s.next_seq = 0;
            pct.next_epoch = pct.next_epoch.wrapping_add(1).max(1);
            pct.counters.conn_sct_open += 1;
        }
        ci
    }

    /// Transmit from the backlog of connection `ci` while its window has room.
    fn pct_pump(&mut self, io: &mut DeviceIo<'_>, ci: usize) {
        loop {
            let in_flight = self.pct().conns[ci].sct.in_flight;
            if in_flight >= WINDOW {
                break;
            }
            let Some(next) = self.pct().conns[ci].sct.backlog.pop_front() else {
                break;
            };
            let mut owed = None;
            let pkt = match next {
                Pending::Frame(p) => p,
                Pending::Reply(mut stream) => {
                    let p = self.reply_next(io, &mut stream, WINDOW - in_flight);
                    if stream.done() {
                        owed = Some(stream.token());
                    } else {
                        let s = &mut self.pct().conns[ci].sct;
                        s.backlog.push_front(Pending::Reply(stream));
                    }
                    self.pct().counters.ptls_response += p.frames();
                    p
                }
                Pending::Stream(mut stream) => {
                    let Some(p) = self.stream_next(io, &mut stream, WINDOW - in_flight) else {
                        continue;
                    };
                    if !stream.done() {
                        let s = &mut self.pct().conns[ci].sct;
                        s.backlog.push_front(Pending::Stream(stream));
                    }
                    self.pct().counters.req_ordered += p.frames();
                    p
                }
            };
            self.pct_transmit(io, ci, pkt, owed);
        }
    }

    /// First transmission of a sequenced frame on connection `ci` (`owed`: see
    /// [`SrbEntry::owed`]).
    fn pct_transmit(
        &mut self,
        io: &mut DeviceIo<'_>,
        ci: usize,
        mut pkt: Packet,
        owed: Option<u64>,
    ) {
        let frames = pkt.frames() as u32;
        let s = &mut self.pct().conns[ci].sct;
        let seq = s.next_seq;
        s.next_seq = seq.wrapping_add(frames);
        s.in_flight += frames;
        let mut tag = Tag {
            flags: F_SEQ,
            tries: 1,
            epoch: s.epoch,
            seq,
            ..Tag::default()
        };
        self.pct().piggyback(ci, &mut tag);
        push_tag(&mut pkt.data, &tag);
        // The retry copy goes into a recycled frame buffer (no allocation in steady state);
        // it returns to the pool when the acknowledgement arrives.
        let mut copy = io.packet_buffer(pkt.data.len());
        copy.extend_from_slice(&pkt.data);
        let retained = Packet {
            data: copy,
            train: pkt.train.clone(),
            ..pkt
        };
        self.pct().conns[ci].sct.srb.push_back(SrbEntry {
            seq,
            pkt: retained,
            sent_at: io.now().as_ps(),
            tries: 1,
            owed,
        });
        self.pct_count_tx(&pkt);
        io.send(pkt);
        self.pct_arm_scan(io);
    }

    /// Retransmit SRB entry `i` of connection `ci` (with a fresh acknowledgement).
    fn pct_retransmit(&mut self, io: &mut DeviceIo<'_>, ci: usize, i: usize) {
        let mut tag = Tag::default();
        self.pct().piggyback(ci, &mut tag);
        let now = io.now().as_ps();
        let Some(e) = self.pct().conns[ci].sct.srb.get_mut(i) else {
            return;
        };
        e.tries = e.tries.saturating_add(1);
        e.sent_at = now;
        let n = e.pkt.data.len();
        let mut full = e
            .pkt
            .data
            .get(n.saturating_sub(TAG)..)
            .and_then(Tag::decode)
            .unwrap_or_default();
        full.flags = (full.flags & F_SEQ) | (tag.flags & F_ACK);
        full.tries = e.tries;
        full.ack_epoch = tag.ack_epoch;
        full.ack = tag.ack;
        rewrite_tag(&mut e.pkt.data, &full);
        let pkt = e.pkt.clone();
        self.pct().counters.retry_srb_requests += 1;
        self.pct_count_tx(&pkt);
        io.send(pkt);
    }

    fn pct_arm_scan(&mut self, io: &mut DeviceIo<'_>) {
        if !self.pct().scan_armed {
            self.pct().scan_armed = true;
            let period = SimDuration::from_ps((self.pct().rto.as_ps() / 4).max(1));
            io.timer(period, TOKEN_SCAN);
        }
    }

    /// A standalone acknowledgement (or NACK of `exp`) on connection `ci`.
    fn pct_send_ack(&mut self, io: &mut DeviceIo<'_>, ci: usize, nack: bool) {
        let mut tag = Tag {
            flags: F_CONN,
            tries: 1,
            ..Tag::default()
        };
        self.pct().piggyback(ci, &mut tag);
        if tag.flags & F_ACK == 0 {
            return;
        }
        if nack {
            tag.flags |= F_NACK;
        }
        let (nid, nid_base) = (self.nid(), self.nid_base());
        let c = &self.pct().conns[ci];
        let fab = wire::Fab {
            vni: c.vni,
            sfa: nid << 12,
            dfa: c.port.wrapping_add(nid_base) << 12,
        };
        let mut data = Vec::with_capacity(wire::FAB_HDR + TAG);
        data.extend_from_slice(&wire::fab_header(&fab, wire::FAB_HDR));
        push_tag(&mut data, &tag);
        let src = io.port().unwrap_or_default();
        let pkt = wire::packet(src, PortId(c.port), TrafficClass(c.tc), data);
        self.pct_count_tx(&pkt);
        io.send(pkt);
    }

    /// A frame arrived from the fabric.
    fn pct_receive(&mut self, io: &mut DeviceIo<'_>, mut pkt: Packet) {
        if !pkt.crc_ok() {
            self.counters().rx_bad_opt += 1;
            return;
        }
        let frames = pkt.frames();
        self.counters().rx_ok_opt += frames;
        self.counters().pkts_recv_by_tc[usize::from(pkt.tc.0 & 7)] += frames;
        let (Some(tag), Some(vni)) = (pop_tag(&mut pkt.data), vni_of(&pkt.data)) else {
            self.counters().rx_unrecognized_pkt += 1;
            return;
        };
        let key = (pkt.src.0, vni, pkt.tc.0);
        if tag.flags & (F_ACK | F_NACK) != 0 {
            self.pct_acked(io, key, &tag);
        }
        if tag.flags & F_CONN != 0 {
            self.counters().rx_ptl_connmgmt_pkt += 1;
            io.recycle(pkt.data);
            return;
        }
        // The CRC was checked above; the frame now only moves inside this device, so it is
        // not hashed again (neither resealed after the tag came off nor rechecked on delivery).
        pkt.crc = Packet::CRC_TRUSTED;
        if tag.flags & F_SEQ == 0 {
            if is_request(&pkt.data) {
                self.counters().rx_ptl_restricted_pkt += frames;
            }
            self.pct_deliver(io, pkt);
            return;
        }
        let ci = self.pct().conn(key);
        let t = &mut self.pct().conns[ci].tct;
        if !t.open || before(t.epoch, tag.epoch) {
            *t = Tct {
                open: true,
                epoch: tag.epoch,
                ..Tct::default()
            };
            self.pct().counters.conn_tct_open += 1;
        } else if t.epoch != tag.epoch {
            // A late packet of a connection the peer has abandoned.
            self.counters().rx_pkt_drop_pct += 1;
            return;
        }
        let t = &mut self.pct().conns[ci].tct;
        if before(tag.seq, t.exp) {
            // Seen before: our acknowledgement was lost or is late. Say it again now.
            t.ack_due = true;
            self.counters().rx_pkt_drop_pct += 1;
            self.pct_send_ack(io, ci, false);
            return;
        }
        if tag.seq != t.exp {
            if tag.seq.wrapping_sub(t.exp) >= WINDOW || t.held.contains_key(&tag.seq) {
                self.counters().rx_pkt_drop_pct += 1;
                return;
            }
            t.held.insert(tag.seq, pkt);
            if t.nacked != Some(t.exp) {
                t.nacked = Some(t.exp);
                t.ack_due = true;
                self.pct().counters.bad_seq_nacks += 1;
                self.pct_send_ack(io, ci, true);
            }
            return;
        }
        let mut next = Some(pkt);
        while let Some(p) = next {
            // A train takes the sequence numbers of all its frames.
            let frames = p.frames() as u32;
            let t = &mut self.pct().conns[ci].tct;
            t.exp = t.exp.wrapping_add(frames);
            t.unacked += frames;
            t.ack_due = true;
            next = t.held.remove(&t.exp);
            self.pct_deliver(io, p);
        }
        self.pct_ack_later(io, ci);
    }

    /// Hand a frame to the target and response paths.
    fn pct_deliver(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        if !is_request(&pkt.data) {
            self.pct().counters.responses_received += pkt.frames();
        }
        self.receive(io, pkt);
    }

    /// Acknowledge connection `ci` now if enough is owed, else at the next scan.
    fn pct_ack_later(&mut self, io: &mut DeviceIo<'_>, ci: usize) {
        let c = &mut self.pct().conns[ci];
        if !c.tct.ack_due {
            return;
        }
        if c.tct.unacked >= ACK_EVERY {
            self.pct_send_ack(io, ci, false);
            return;
        }
        if !c.ack_listed {
            c.ack_listed = true;
            self.pct().ack_list.push(ci);
        }
        self.pct_arm_scan(io);
    }

    /// An acknowledgement (or NACK) for our SCT towards `key`.
    fn pct_acked(&mut self, io: &mut DeviceIo<'_>, key: (u32, u16, u8), tag: &Tag) {
        let Some(&ci) = self.pct().index.get(&key) else {
            self.pct().counters.rsp_dropped_inactive += 1;
            return;
        };
        let s = &mut self.pct().conns[ci].sct;
        if !s.open || s.epoch != tag.ack_epoch {
            self.pct().counters.rsp_dropped_inactive += 1;
            return;
        }
        let mut acked = false;
        let mut read = Vec::new();
        // An entry is acknowledged once its last sequence number is.
        let last = |e: &SrbEntry| e.seq.wrapping_add(e.pkt.frames() as u32 - 1);
        while s.srb.front().is_some_and(|e| before(last(e), tag.ack)) {
            if let Some(e) = s.srb.pop_front() {
                s.in_flight -= e.pkt.frames() as u32;
                read.extend(e.owed);
                io.recycle(e.pkt.data);
                acked = true;
            }
        }
        let nacked = tag.flags & F_NACK != 0 && s.srb.front().is_some_and(|e| e.seq == tag.ack);
        let exhausted = s.srb.front().is_some_and(|e| e.tries >= MAX_TRIES);
        for token in read {
            self.reply_read(io, token);
        }
        if acked {
            self.note_progress(io);
        }
        if nacked {
            if exhausted {
                self.pct_fail(io, ci);
                return;
            }
            self.pct_retransmit(io, ci, 0);
        }
        self.pct_pump(io, ci);
    }

    /// Connection `ci` is dead: discard its packets and complete their requests with
    /// UNDELIVERABLE.
    fn pct_fail(&mut self, io: &mut DeviceIo<'_>, ci: usize) {
        self.pct().counters.sct_timeouts += 1;
        let s = std::mem::take(&mut self.pct().conns[ci].sct);
        let mut handles: Vec<u32> = Vec::new();
        // Get replies whose target events wait for their acknowledgement: the frames would
        // have been read (and the events posted) when the Get was served.
        let mut read: Vec<u64> = s.srb.iter().filter_map(|e| e.owed).collect();
        let frames = s
            .srb
            .into_iter()
            .map(|e| Pending::Frame(e.pkt))
            .chain(s.backlog);
        for p in frames {
            let h = match p {
                Pending::Reply(stream) => {
                    read.push(stream.token());
                    continue;
                }
                Pending::Stream(stream) => stream.handle(),
                Pending::Frame(p) => match wire::parse(&p.data) {
                    Some(Parsed::Request(_, r, _)) => r.handle,
                    Some(Parsed::Continuation(_, c, _)) => c.handle,
                    _ => continue,
                },
            };
            if !handles.contains(&h) {
                handles.push(h);
            }
        }
        tracing::debug!(
            target: "emu_cassini::pct",
            port = self.pct().conns[ci].port,
            requests = handles.len(),
            "connection declared dead"
        );
        for h in handles {
            self.request_lost(io, h, ReturnCode::Undeliverable);
        }
        for token in read {
            self.reply_read(io, token);
        }
    }

    /// A PCT timer fired.
    fn pct_timer(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        if token == TOKEN_SCAN {
            self.pct_scan(io);
        }
    }

    /// The scan, every quarter timeout while anything is owed or unacknowledged: owed
    /// acknowledgements go out; the oldest unacknowledged packet of each connection that
    /// has waited a full timeout is sent again (or its connection declared dead).
    fn pct_scan(&mut self, io: &mut DeviceIo<'_>) {
        self.pct().scan_armed = false;
        let list = std::mem::take(&mut self.pct().ack_list);
        for ci in list {
            self.pct().conns[ci].ack_listed = false;
            if self.pct().conns[ci].tct.ack_due {
                self.pct_send_ack(io, ci, false);
            }
        }
        let now = io.now().as_ps();
        let rto = self.pct().rto.as_ps();
        for ci in 0..self.pct().conns.len() {
            let Some(e) = self.pct().conns[ci].sct.srb.front() else {
                continue;
            };
            let (sent_at, tries) = (e.sent_at, e.tries);
            if now.saturating_sub(sent_at) < rto {
                continue;
            }
            self.pct().counters.spt_timeouts += 1;
            if tries >= MAX_TRIES {
                self.pct_fail(io, ci);
                continue;
            }
            self.pct_retransmit(io, ci, 0);
        }
        if self.pct().conns.iter().any(|c| !c.sct.srb.is_empty()) {
            self.pct_arm_scan(io);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trip_and_frame_length() {
        let t = Tag {
            flags: F_SEQ | F_ACK,
            tries: 3,
            epoch: 7,
            seq: 0xDEAD_BEEF,
            ack_epoch: 9,
            ack: 42,
        };
        let fab = wire::Fab {
            vni: 10,
            sfa: 1 << 12,
            dfa: 2 << 12,
        };
        let mut data = wire::fab_header(&fab, wire::FAB_HDR).to_vec();
        data.extend_from_slice(&[1, 2, 3]);
        push_tag(&mut data, &t);
        assert_eq!(data.len(), wire::FAB_HDR + 3 + TAG);
        assert_eq!(
            u16::from_be_bytes([data[2], data[3]]) as usize,
            data.len(),
            "the fabric header's length covers the tag"
        );
        let mut again = t;
        again.tries = 4;
        rewrite_tag(&mut data, &again);
        assert_eq!(pop_tag(&mut data), Some(again));
        assert_eq!(data.len(), wire::FAB_HDR + 3);
        assert_eq!(u16::from_be_bytes([data[2], data[3]]) as usize, data.len());
        assert_eq!(vni_of(&data), Some(10));
        let mut short = vec![0u8; TAG + 3];
        assert_eq!(pop_tag(&mut short), None);
    }

    #[test]
    fn sequence_space_wraps() {
        assert!(before(1, 2));
        assert!(!before(2, 2));
        assert!(!before(3, 2));
        assert!(before(u32::MAX, 0));
        assert!(!before(0, u32::MAX));
    }

    #[test]
    fn timeout_follows_the_epoch_select_and_is_clamped() {
        assert_eq!(rto_of(16).as_ns(), 1 << 20);
        assert_eq!(rto_of(10).as_ns(), 1 << 14);
        assert_eq!(rto_of(0), rto_of(EPOCH_SEL_MIN));
        assert_eq!(rto_of(63), rto_of(EPOCH_SEL_MAX));
        assert!(
            rto_of(63).as_ns() * u64::from(MAX_TRIES) < crate::ixe::REQUEST_TIMEOUT.as_ns(),
            "the PCT gives up before the initiator's request timeout"
        );
    }
}
