//! Datagrams (`GNI_EpPostData*`): kgni matches them, the NIC only carries them.
//!
//! Semantics (gemini.md §1.5, from uGNI's documentation and the libfabric GNI provider):
//! a datagram posted on a **bound** endpoint goes to the peer `(PE, inst_id)`; one posted on an
//! **unbound** endpoint is a **wildcard** that matches any bound datagram addressed to its
//! instance; an exchange swaps the two payloads (each side's `in` becomes the other's `out`);
//! at most one datagram is outstanding per endpoint; payloads are at most 128 bytes
//! (`GNI_DATAGRAM_MAXSIZE`).
//!
//! Protocol between two kgni instances (ours; the kgni wire format is not public). A message
//! is a [`Wire`] carried by a BTE `SEND` into the peer's RX channel:
//! - posting a bound datagram first looks for a request from that peer that arrived
//!   earlier (the *unexpected* list); if there is one the exchange completes at once and a
//!   `Response` carrying our payload goes back; otherwise a `Request` goes to the peer;
//! - an arriving `Request` matches a pending bound post for its sender, else the oldest
//!   pending wildcard post of the addressed instance, else it waits in the unexpected list
//!   (bounded: when full the sender gets a `Reject` and its post fails with
//!   `GNI_POST_ERROR`); a match completes the local post and answers with a `Response`;
//! - a `Response` completes the post it names; a late one (the post already completed because
//!   both sides' requests crossed) is dropped;
//! - a `Response` that consumed the responder's own crossing request names it (`consumed`) so
//!   that, should that request arrive after the response, it is dropped (a tombstone) instead
//!   of matching a later post;
//! - cancelling a bound post sends `Cancel`, which removes its request from the peer's
//!   unexpected list.
//!
//! Domains are `(ptag, cookie)`: a datagram only ever matches posts of the same domain.
//! Datagrams between two instances on the same NIC never touch the hardware: the matcher
//! loops them back itself.

use std::collections::{BTreeMap, VecDeque};

use firmware_spec::gemini::gni::PostState;
use firmware_spec::gemini::limits::DATAGRAM_MAX_SIZE;
use thiserror::Error;

/// Largest datagram payload (`GNI_DATAGRAM_MAXSIZE`).
pub const MAX_PAYLOAD: usize = DATAGRAM_MAX_SIZE as usize;
/// Bytes of the [`Wire`] header.
pub const WIRE_HEADER: usize = 48;
/// Largest encoded [`Wire`].
pub const WIRE_MAX: usize = WIRE_HEADER + MAX_PAYLOAD;
/// First two bytes of every message (`"gD"`).
const MAGIC: u16 = 0x4467;
/// Protocol version.
const VERSION: u8 = 1;

/// A communication domain: datagrams match only within one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Domain {
    /// Protection tag.
    pub ptag: u8,
    /// Cookie.
    pub cookie: u32,
}

/// Kinds of kgni-to-kgni datagram messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WireKind {
    /// A bound datagram looking for its match.
    Request = 1,
    /// The matching side's payload, completing the requester's post.
    Response = 2,
    /// The requester cancelled its post.
    Cancel = 3,
    /// The target could not hold the request.
    Reject = 4,
}

impl WireKind {
    fn from_u8(v: u8) -> Option<WireKind> {
        Some(match v {
            1 => WireKind::Request,
            2 => WireKind::Response,
            3 => WireKind::Cancel,
            4 => WireKind::Reject,
            _ => return None,
        })
    }
}

/// One kgni datagram message (our layout, little endian):
///
/// | bytes | field |
/// |---|---|
/// | 0..2 | magic `0x4467` |
/// | 2 | version 1 |
/// | 3 | kind |
/// | 4 | ptag |
/// | 5 | reserved 0 |
/// | 6..8 | payload length (≤ 128) |
/// | 8..12 | cookie |
/// | 12..16 | source PE |
/// | 16..20 | source inst_id |
/// | 20..24 | destination inst_id |
/// | 24..32 | sequence (`Request`/`Cancel`: the sender's post; `Response`/`Reject`: the requester's) |
/// | 32..40 | consumed (`Response`: the responder's crossing request, 0 = none) |
/// | 40..48 | reserved 0 |
/// | 48.. | payload |
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wire {
    /// Message kind.
    pub kind: WireKind,
    /// Domain of the posts involved.
    pub domain: Domain,
    /// Sender's physical PE.
    pub src_pe: u32,
    /// Sender's instance.
    pub src_inst: u32,
    /// Addressed instance.
    pub dst_inst: u32,
    /// Sequence number, see the table.
    pub seq: u64,
    /// The responder's own request consumed by this exchange (0 = none).
    pub consumed: u64,
    /// Payload (≤ 128 bytes).
    pub data: Vec<u8>,
}

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// Shorter than its header or its payload length.
    #[error("datagram message of {0} bytes is truncated")]
    Short(usize),
    /// Not a kgni datagram message (magic or version).
    #[error("not a datagram message (magic {magic:#x}, version {version})")]
    Foreign {
        /// Magic found.
        magic: u16,
        /// Version found.
        version: u8,
    },
    /// Unknown kind.
    #[error("unknown datagram message kind {0}")]
    Kind(u8),
    /// Payload length above 128.
    #[error("datagram payload of {0} bytes exceeds 128")]
    TooLong(usize),
}

fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn le64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

impl Wire {
    /// The message bytes (header + payload; a payload over 128 bytes is cut to 128).
    pub fn encode(&self) -> Vec<u8> {
        let n = self.data.len().min(MAX_PAYLOAD);
        let mut b = vec![0u8; WIRE_HEADER + n];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = self.kind as u8;
        b[4] = self.domain.ptag;
        b[6..8].copy_from_slice(&(n as u16).to_le_bytes());
        b[8..12].copy_from_slice(&self.domain.cookie.to_le_bytes());
        b[12..16].copy_from_slice(&self.src_pe.to_le_bytes());
        b[16..20].copy_from_slice(&self.src_inst.to_le_bytes());
        b[20..24].copy_from_slice(&self.dst_inst.to_le_bytes());
        b[24..32].copy_from_slice(&self.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.consumed.to_le_bytes());
        b[WIRE_HEADER..].copy_from_slice(&self.data[..n]);
        b
    }

    /// Decode a message; bytes past the payload are ignored (an RX buffer is larger).
    pub fn decode(b: &[u8]) -> Result<Wire, WireError> {
        if b.len() < WIRE_HEADER {
            return Err(WireError::Short(b.len()));
        }
        let magic = u16::from_le_bytes([b[0], b[1]]);
        if magic != MAGIC || b[2] != VERSION {
            return Err(WireError::Foreign {
                magic,
                version: b[2],
            });
        }
        let kind = WireKind::from_u8(b[3]).ok_or(WireError::Kind(b[3]))?;
        let n = usize::from(u16::from_le_bytes([b[6], b[7]]));
        if n > MAX_PAYLOAD {
            return Err(WireError::TooLong(n));
        }
        let data = b
            .get(WIRE_HEADER..WIRE_HEADER + n)
            .ok_or(WireError::Short(b.len()))?
            .to_vec();
        Ok(Wire {
            kind,
            domain: Domain {
                ptag: b[4],
                cookie: le32(b, 8),
            },
            src_pe: le32(b, 12),
            src_inst: le32(b, 16),
            dst_inst: le32(b, 20),
            seq: le64(b, 24),
            consumed: le64(b, 32),
            data,
        })
    }
}

/// A message the matcher wants sent to another NIC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// Physical PE of the destination NIC.
    pub dest_pe: u32,
    /// The message.
    pub wire: Wire,
}

/// What a post is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostSpec {
    /// The endpoint (a key unique on this NIC).
    pub ep: u64,
    /// The endpoint's CDM (for probes).
    pub cdm: u64,
    /// Domain.
    pub domain: Domain,
    /// This side's instance.
    pub local_inst: u32,
    /// Bound peer `(physical PE, inst_id)`, or `None` for a wildcard.
    pub target: Option<(u32, u32)>,
    /// `GNI_EpPostDataWId` id.
    pub user_id: Option<u64>,
    /// Our payload (≤ 128 bytes).
    pub data: Vec<u8>,
    /// Most bytes we accept from the peer.
    pub out_len: usize,
}

/// Where a post stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DgramState {
    /// Waiting for the peer.
    Pending,
    /// Exchanged.
    Completed {
        /// Peer's physical PE.
        remote_pe: u32,
        /// Peer's instance.
        remote_inst: u32,
        /// Peer's payload (cut to `out_len`).
        data: Vec<u8>,
    },
    /// Failed; the state to report (`GNI_POST_ERROR`, ...).
    Failed(PostState),
}

impl DgramState {
    /// The `gni_post_state_t` of this state.
    pub fn post_state(&self) -> PostState {
        match self {
            DgramState::Pending => PostState::Pending,
            DgramState::Completed { .. } => PostState::Completed,
            DgramState::Failed(s) => *s,
        }
    }
}

/// One datagram post.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Post {
    /// Sequence number (unique on this NIC, from 1).
    pub seq: u64,
    /// What was posted.
    pub spec: PostSpec,
    /// Where it stands.
    pub state: DgramState,
    /// Whether a `Request` for it went out.
    pub sent_request: bool,
    /// Times its `Request` was sent again after a network error.
    pub resends: u32,
}

/// Why a post was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PostError {
    /// The endpoint already has an outstanding datagram.
    #[error("the endpoint already has an outstanding datagram")]
    Busy,
    /// Payload or accepted length above 128 bytes.
    #[error("datagram payload {0} bytes exceeds 128")]
    TooLong(usize),
}

/// Counters of the matcher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DgramCounters {
    /// Exchanges completed on this side.
    pub completed: u64,
    /// Responses for posts that were already complete or gone.
    pub stray: u64,
    /// Requests refused because the unexpected list was full.
    pub rejected: u64,
    /// Messages dropped by a tombstone.
    pub tombstoned: u64,
    /// Copies of a request seen before (sent again after a network error whose first copy
    /// had arrived): dropped while the first waits, or answered with the first's response.
    pub duplicates: u64,
    /// Requests sent again after a network error.
    pub resent: u64,
}

/// The datagram matching state of one NIC.
#[derive(Clone, Debug)]
pub struct Matcher {
    local_pe: u32,
    next_seq: u64,
    posts: BTreeMap<u64, Post>,
    by_ep: BTreeMap<u64, u64>,
    unexpected: VecDeque<Wire>,
    unexpected_limit: usize,
    tombstones: VecDeque<(u32, u64)>,
    tombstone_limit: usize,
    /// Requests answered lately, by `(sender PE, sequence)`, with the response they got: a
    /// copy of one of them (sent again because the network lost the first copy's
    /// acknowledgement) gets the same response, never a second match.
    answered: VecDeque<((u32, u64), Outgoing)>,
    counters: DgramCounters,
}

/// Times one request is sent again after a network error before its post fails with
/// `GNI_POST_ERROR` (as many as kgni sends a response again).
pub const REQUEST_RESENDS: u32 = 16;

impl Matcher {
    /// A matcher for the NIC with physical PE `local_pe` that holds at most
    /// `unexpected_limit` early requests.
    pub fn new(local_pe: u32, unexpected_limit: usize) -> Self {
        Matcher {
            local_pe,
            next_seq: 1,
            posts: BTreeMap::new(),
            by_ep: BTreeMap::new(),
            unexpected: VecDeque::new(),
            unexpected_limit,
            tombstones: VecDeque::new(),
            tombstone_limit: 1024,
            answered: VecDeque::new(),
            counters: DgramCounters::default(),
        }
    }

    /// This NIC's PE.
    pub fn local_pe(&self) -> u32 {
        self.local_pe
    }

    /// Posts held (pending, completed or failed but not yet collected).
    pub fn posts(&self) -> usize {
        self.posts.len()
    }

    /// Early requests waiting for a post.
    pub fn unexpected(&self) -> usize {
        self.unexpected.len()
    }

    /// Counters.
    pub fn counters(&self) -> DgramCounters {
        self.counters
    }

    /// The post of endpoint `ep`, if it has one.
    pub fn post_of(&self, ep: u64) -> Option<&Post> {
        self.posts.get(self.by_ep.get(&ep)?)
    }

    /// Post a datagram. Returns the sequence number and the messages to send to other NICs.
    pub fn post(&mut self, spec: PostSpec) -> Result<(u64, Vec<Outgoing>), PostError> {
        if self.by_ep.contains_key(&spec.ep) {
            return Err(PostError::Busy);
        }
        if spec.data.len() > MAX_PAYLOAD {
            return Err(PostError::TooLong(spec.data.len()));
        }
        if spec.out_len > MAX_PAYLOAD {
            return Err(PostError::TooLong(spec.out_len));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut out = Vec::new();
        let early = self.unexpected.iter().position(|w| {
            w.domain == spec.domain
                && w.dst_inst == spec.local_inst
                && spec
                    .target
                    .is_none_or(|(pe, inst)| (w.src_pe, w.src_inst) == (pe, inst))
        });
        let mut post = Post {
            seq,
            spec,
            state: DgramState::Pending,
            sent_request: false,
            resends: 0,
        };
        if let Some(i) = early.and_then(|i| self.unexpected.remove(i)) {
            out.push(self.complete_with_request(&mut post, &i, 0));
        } else if let Some(request) = self.request_of(&post) {
            post.sent_request = true;
            out.push(request);
        }
        self.by_ep.insert(post.spec.ep, seq);
        self.posts.insert(seq, post);
        Ok((seq, self.route(out)))
    }

    /// The `Request` of a bound post (none for a wildcard).
    fn request_of(&self, post: &Post) -> Option<Outgoing> {
        let (pe, inst) = post.spec.target?;
        Some(Outgoing {
            dest_pe: pe,
            wire: Wire {
                kind: WireKind::Request,
                domain: post.spec.domain,
                src_pe: self.local_pe,
                src_inst: post.spec.local_inst,
                dst_inst: inst,
                seq: post.seq,
                consumed: 0,
                data: post.spec.data.clone(),
            },
        })
    }

    /// Complete `post` with request `req`; returns the response to send (and remembers it
    /// as the answer to `req`).
    fn complete_with_request(&mut self, post: &mut Post, req: &Wire, consumed: u64) -> Outgoing {
        let mut data = req.data.clone();
        data.truncate(post.spec.out_len);
        post.state = DgramState::Completed {
            remote_pe: req.src_pe,
            remote_inst: req.src_inst,
            data,
        };
        self.counters.completed += 1;
        let response = Outgoing {
            dest_pe: req.src_pe,
            wire: Wire {
                kind: WireKind::Response,
                domain: post.spec.domain,
                src_pe: self.local_pe,
                src_inst: post.spec.local_inst,
                dst_inst: req.src_inst,
                seq: req.seq,
                consumed,
                data: post.spec.data.clone(),
            },
        };
        if self.answered.len() >= self.tombstone_limit {
            self.answered.pop_front();
        }
        self.answered
            .push_back(((req.src_pe, req.seq), response.clone()));
        response
    }

    /// Deliver messages addressed to this NIC locally; return the rest.
    fn route(&mut self, mut out: Vec<Outgoing>) -> Vec<Outgoing> {
        let mut remote = Vec::new();
        // Each local delivery produces at most one message, and every chain ends (a response
        // or reject produces nothing), so this terminates.
        while let Some(o) = out.pop() {
            if o.dest_pe == self.local_pe {
                out.extend(self.handle(o.wire));
            } else {
                remote.push(o);
            }
        }
        remote
    }

    /// Whether `(pe, seq)` names a request that must match nothing. The tombstone stays
    /// (until the list's bound pushes it out): a copy of the same request may follow.
    fn tombstoned(&mut self, pe: u32, seq: u64) -> bool {
        if self.tombstones.contains(&(pe, seq)) {
            self.counters.tombstoned += 1;
            return true;
        }
        false
    }

    fn add_tombstone(&mut self, pe: u32, seq: u64) {
        if self.tombstones.len() >= self.tombstone_limit {
            self.tombstones.pop_front();
        }
        self.tombstones.push_back((pe, seq));
    }

    /// A message arrived from another NIC. Returns the messages to send in answer.
    pub fn incoming(&mut self, wire: Wire) -> Vec<Outgoing> {
        let out = self.handle(wire);
        self.route(out)
    }

    fn handle(&mut self, w: Wire) -> Vec<Outgoing> {
        match w.kind {
            WireKind::Request => self.on_request(w),
            WireKind::Response => {
                self.on_response(w);
                Vec::new()
            }
            WireKind::Cancel => {
                if let Some(i) = self
                    .unexpected
                    .iter()
                    .position(|u| u.src_pe == w.src_pe && u.seq == w.seq)
                {
                    self.unexpected.remove(i);
                } else {
                    self.add_tombstone(w.src_pe, w.seq);
                }
                Vec::new()
            }
            WireKind::Reject => {
                if let Some(p) = self.posts.get_mut(&w.seq)
                    && p.state == DgramState::Pending
                    && p.spec.target.is_some_and(|(pe, _)| pe == w.src_pe)
                {
                    p.state = DgramState::Failed(PostState::Error);
                }
                Vec::new()
            }
        }
    }

    fn on_request(&mut self, w: Wire) -> Vec<Outgoing> {
        if self.tombstoned(w.src_pe, w.seq) {
            return Vec::new();
        }
        // A copy of a request seen before: the sender's NIC reported the first copy's send
        // as failed (its acknowledgement was lost) and kgni sent it again.
        if let Some((_, response)) = self.answered.iter().find(|(k, _)| *k == (w.src_pe, w.seq)) {
            self.counters.duplicates += 1;
            return vec![response.clone()];
        }
        if self
            .unexpected
            .iter()
            .any(|u| u.src_pe == w.src_pe && u.seq == w.seq)
        {
            self.counters.duplicates += 1;
            return Vec::new();
        }
        let pending = |p: &&Post| {
            p.state == DgramState::Pending
                && p.spec.domain == w.domain
                && p.spec.local_inst == w.dst_inst
        };
        let bound = self
            .posts
            .values()
            .filter(pending)
            .find(|p| p.spec.target == Some((w.src_pe, w.src_inst)))
            .map(|p| p.seq);
        let chosen = bound.or_else(|| {
            self.posts
                .values()
                .filter(pending)
                .find(|p| p.spec.target.is_none())
                .map(|p| p.seq)
        });
        match chosen.and_then(|s| self.posts.remove(&s)) {
            Some(mut p) => {
                let consumed = if p.sent_request { p.seq } else { 0 };
                let o = self.complete_with_request(&mut p, &w, consumed);
                self.posts.insert(p.seq, p);
                vec![o]
            }
            None if self.unexpected.len() >= self.unexpected_limit => {
                self.counters.rejected += 1;
                vec![Outgoing {
                    dest_pe: w.src_pe,
                    wire: Wire {
                        kind: WireKind::Reject,
                        domain: w.domain,
                        src_pe: self.local_pe,
                        src_inst: w.dst_inst,
                        dst_inst: w.src_inst,
                        seq: w.seq,
                        consumed: 0,
                        data: Vec::new(),
                    },
                }]
            }
            None => {
                self.unexpected.push_back(w);
                Vec::new()
            }
        }
    }

    fn on_response(&mut self, w: Wire) {
        let Some(p) = self.posts.get_mut(&w.seq) else {
            self.counters.stray += 1;
            return;
        };
        let from_target = p.spec.target == Some((w.src_pe, w.src_inst));
        if p.state != DgramState::Pending || !from_target || p.spec.domain != w.domain {
            self.counters.stray += 1;
            return;
        }
        let mut data = w.data;
        data.truncate(p.spec.out_len);
        p.state = DgramState::Completed {
            remote_pe: w.src_pe,
            remote_inst: w.src_inst,
            data,
        };
        self.counters.completed += 1;
        if w.consumed != 0 {
            // The responder matched its own crossing request to this exchange; make sure
            // that request, if it is still to come or waiting here, matches nothing else.
            if let Some(i) = self
                .unexpected
                .iter()
                .position(|u| u.src_pe == w.src_pe && u.seq == w.consumed)
            {
                self.unexpected.remove(i);
            } else {
                self.add_tombstone(w.src_pe, w.consumed);
            }
        }
    }

    /// Post `seq` fails with `GNI_POST_ERROR` if it is pending (its request could not be
    /// handed to the NIC).
    pub fn fail(&mut self, seq: u64) {
        if let Some(p) = self.posts.get_mut(&seq)
            && p.state == DgramState::Pending
        {
            p.state = DgramState::Failed(PostState::Error);
        }
    }

    /// The send of post `seq`'s request failed in the network (the request may still have
    /// arrived: only its acknowledgement may be lost). A pending post's request is sent
    /// again, with the same sequence so the peer recognises a copy, up to
    /// [`REQUEST_RESENDS`] times; then the post fails with `GNI_POST_ERROR`. Returns the
    /// messages to send.
    pub fn send_failed(&mut self, seq: u64) -> Vec<Outgoing> {
        let Some(p) = self.posts.get_mut(&seq) else {
            return Vec::new();
        };
        if p.state != DgramState::Pending {
            return Vec::new();
        }
        if p.resends >= REQUEST_RESENDS {
            p.state = DgramState::Failed(PostState::Error);
            return Vec::new();
        }
        p.resends += 1;
        self.counters.resent += 1;
        let p = p.clone();
        self.request_of(&p).into_iter().collect()
    }

    /// Take the post of endpoint `ep` if it is no longer pending (`Test`/`Wait` collect a
    /// finished exchange and free the endpoint for the next one).
    pub fn take_finished(&mut self, ep: u64) -> Option<Post> {
        let seq = *self.by_ep.get(&ep)?;
        if self.posts.get(&seq)?.state == DgramState::Pending {
            return None;
        }
        self.by_ep.remove(&ep);
        self.posts.remove(&seq)
    }

    /// Cancel (and remove) the post of endpoint `ep`, whatever its state. Returns it, and
    /// the messages to send.
    pub fn cancel(&mut self, ep: u64) -> Option<(Post, Vec<Outgoing>)> {
        let seq = self.by_ep.remove(&ep)?;
        let post = self.posts.remove(&seq)?;
        let mut out = Vec::new();
        if post.state == DgramState::Pending
            && post.sent_request
            && let Some((pe, inst)) = post.spec.target
        {
            out.push(Outgoing {
                dest_pe: pe,
                wire: Wire {
                    kind: WireKind::Cancel,
                    domain: post.spec.domain,
                    src_pe: self.local_pe,
                    src_inst: post.spec.local_inst,
                    dst_inst: inst,
                    seq,
                    consumed: 0,
                    data: Vec::new(),
                },
            });
        }
        let out = self.route(out);
        Some((post, out))
    }

    /// The endpoint holding the post with `GNI_EpPostDataWId` id `id` on CDM `cdm`.
    pub fn ep_by_id(&self, cdm: u64, id: u64) -> Option<u64> {
        self.posts
            .values()
            .find(|p| p.spec.cdm == cdm && p.spec.user_id == Some(id))
            .map(|p| p.spec.ep)
    }

    /// `GNI_PostDataProbe`: the peer of the oldest completed post of CDM `cdm`.
    pub fn probe(&self, cdm: u64) -> Option<(u32, u32)> {
        self.posts.values().find_map(|p| match &p.state {
            DgramState::Completed {
                remote_pe,
                remote_inst,
                ..
            } if p.spec.cdm == cdm => Some((*remote_pe, *remote_inst)),
            _ => None,
        })
    }

    /// `GNI_PostDataProbeById`: the id of the oldest finished post of CDM `cdm` that has one.
    pub fn probe_by_id(&self, cdm: u64) -> Option<u64> {
        self.posts
            .values()
            .filter(|p| p.spec.cdm == cdm && p.state != DgramState::Pending)
            .find_map(|p| p.spec.user_id)
    }

    /// Drop every post of CDM `cdm` (the CDM is going away); returns the messages to send.
    pub fn drop_cdm(&mut self, cdm: u64) -> Vec<Outgoing> {
        let eps: Vec<u64> = self
            .posts
            .values()
            .filter(|p| p.spec.cdm == cdm)
            .map(|p| p.spec.ep)
            .collect();
        let mut out = Vec::new();
        for ep in eps {
            if let Some((_, o)) = self.cancel(ep) {
                out.extend(o);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Domain = Domain {
        ptag: 10,
        cookie: 0x1234_0000,
    };

    fn spec(ep: u64, inst: u32, target: Option<(u32, u32)>, data: &[u8]) -> PostSpec {
        PostSpec {
            ep,
            cdm: ep,
            domain: D,
            local_inst: inst,
            target,
            user_id: None,
            data: data.to_vec(),
            out_len: MAX_PAYLOAD,
        }
    }

    /// Deliver messages between matchers until none are left.
    fn run(nodes: &mut [Matcher], mut msgs: Vec<Outgoing>) {
        while let Some(m) = msgs.pop() {
            let n = nodes.iter_mut().find(|n| n.local_pe == m.dest_pe).unwrap();
            msgs.extend(n.incoming(m.wire));
        }
    }

    fn completed(m: &Matcher, ep: u64) -> (u32, u32, Vec<u8>) {
        match &m.post_of(ep).unwrap().state {
            DgramState::Completed {
                remote_pe,
                remote_inst,
                data,
            } => (*remote_pe, *remote_inst, data.clone()),
            s => panic!("not completed: {s:?}"),
        }
    }

    #[test]
    fn wire_round_trip_and_golden_header() {
        let w = Wire {
            kind: WireKind::Response,
            domain: D,
            src_pe: 0x3_0001,
            src_inst: 7,
            dst_inst: 9,
            seq: 0x1122_3344_5566_7788,
            consumed: 5,
            data: vec![1, 2, 3],
        };
        let b = w.encode();
        assert_eq!(b.len(), WIRE_HEADER + 3);
        assert_eq!(&b[..8], &[0x67, 0x44, 1, 2, 10, 0, 3, 0]);
        assert_eq!(&b[8..12], &0x1234_0000u32.to_le_bytes());
        assert_eq!(&b[12..16], &[0x01, 0, 3, 0]);
        assert_eq!(b[24], 0x88);
        assert_eq!(b[32], 5);
        let mut padded = b.clone();
        padded.resize(256, 0xEE);
        assert_eq!(Wire::decode(&padded).unwrap(), w);
        assert_eq!(Wire::decode(&b[..10]), Err(WireError::Short(10)));
        assert!(matches!(
            Wire::decode(&[0u8; 64]),
            Err(WireError::Foreign { .. })
        ));
        let mut bad = b.clone();
        bad[3] = 9;
        assert_eq!(Wire::decode(&bad), Err(WireError::Kind(9)));
        let mut long = b;
        long[6] = 200;
        assert_eq!(Wire::decode(&long), Err(WireError::TooLong(200)));
    }

    #[test]
    fn bound_pair_exchanges_both_orders_and_crossing() {
        for order in 0..3 {
            let mut n = [Matcher::new(1, 8), Matcher::new(2, 8)];
            let a = spec(100, 10, Some((2, 20)), b"from a");
            let b = spec(200, 20, Some((1, 10)), b"from b");
            match order {
                0 => {
                    // a's request arrives before b posts.
                    let (_, o) = n[0].post(a).unwrap();
                    run(&mut n, o);
                    let (_, o) = n[1].post(b).unwrap();
                    assert_eq!(o.len(), 1, "answered from the unexpected list");
                    run(&mut n, o);
                }
                1 => {
                    let (_, o) = n[1].post(b).unwrap();
                    run(&mut n, o);
                    let (_, o) = n[0].post(a).unwrap();
                    run(&mut n, o);
                }
                _ => {
                    // Both post before any message moves: the requests cross.
                    let (_, oa) = n[0].post(a).unwrap();
                    let (_, ob) = n[1].post(b).unwrap();
                    let mut all = oa;
                    all.extend(ob);
                    run(&mut n, all);
                }
            }
            assert_eq!(completed(&n[0], 100), (2, 20, b"from b".to_vec()));
            assert_eq!(completed(&n[1], 200), (1, 10, b"from a".to_vec()));
            assert_eq!(n[0].unexpected() + n[1].unexpected(), 0, "order {order}");
            assert!(n[0].take_finished(100).is_some());
            assert!(n[0].take_finished(100).is_none());
            assert_eq!(n[0].posts(), 0);
        }
    }

    #[test]
    fn wildcard_matches_any_sender_and_reposts() {
        let mut n = [Matcher::new(1, 8), Matcher::new(2, 8), Matcher::new(3, 8)];
        let (_, o) = n[1].post(spec(1, 20, None, b"server")).unwrap();
        assert!(o.is_empty(), "a wildcard sends nothing");
        let (_, o) = n[0].post(spec(2, 10, Some((2, 20)), b"client a")).unwrap();
        run(&mut n, o);
        assert_eq!(completed(&n[1], 1), (1, 10, b"client a".to_vec()));
        assert_eq!(completed(&n[0], 2), (2, 20, b"server".to_vec()));
        // The second client waits until the server reposts its wildcard.
        let (_, o) = n[2].post(spec(3, 30, Some((2, 20)), b"client c")).unwrap();
        run(&mut n, o);
        assert_eq!(n[1].unexpected(), 1);
        assert_eq!(n[1].probe(1), Some((1, 10)));
        assert!(n[1].take_finished(1).is_some());
        let (_, o) = n[1].post(spec(1, 20, None, b"server 2")).unwrap();
        run(&mut n, o);
        assert_eq!(completed(&n[1], 1), (3, 30, b"client c".to_vec()));
        assert_eq!(completed(&n[2], 3), (2, 20, b"server 2".to_vec()));
    }

    #[test]
    fn domains_instances_and_local_loopback() {
        let mut m = Matcher::new(5, 8);
        // Same NIC: two instances exchange without any message leaving.
        let (_, o) = m.post(spec(1, 1, Some((5, 2)), b"one")).unwrap();
        assert!(o.is_empty());
        let other_domain = PostSpec {
            domain: Domain {
                ptag: 11,
                cookie: 1,
            },
            ..spec(9, 2, None, b"x")
        };
        m.post(other_domain).unwrap();
        assert_eq!(m.post_of(1).unwrap().state, DgramState::Pending);
        let (_, o) = m.post(spec(2, 2, Some((5, 1)), b"two")).unwrap();
        assert!(o.is_empty());
        assert_eq!(completed(&m, 1), (5, 2, b"two".to_vec()));
        assert_eq!(completed(&m, 2), (5, 1, b"one".to_vec()));
        assert_eq!(m.post_of(9).unwrap().state, DgramState::Pending);
    }

    #[test]
    fn one_outstanding_per_endpoint_and_sizes() {
        let mut m = Matcher::new(1, 8);
        m.post(spec(1, 1, None, b"a")).unwrap();
        assert_eq!(m.post(spec(1, 1, None, b"b")), Err(PostError::Busy));
        assert_eq!(
            m.post(spec(2, 1, None, &[0u8; 129])),
            Err(PostError::TooLong(129))
        );
        let mut s = spec(3, 1, None, b"");
        s.out_len = 200;
        assert_eq!(m.post(s), Err(PostError::TooLong(200)));
        // Pending posts cannot be collected; cancelling frees the endpoint.
        assert!(m.take_finished(1).is_none());
        assert!(m.cancel(1).is_some());
        assert!(m.cancel(1).is_none());
        m.post(spec(1, 1, None, b"b")).unwrap();
    }

    #[test]
    fn truncation_reject_cancel_and_stray() {
        let mut n = [Matcher::new(1, 1), Matcher::new(2, 1)];
        // out_len cuts the peer's payload.
        let mut s = spec(1, 20, None, b"srv");
        s.out_len = 2;
        n[1].post(s).unwrap();
        let (_, o) = n[0].post(spec(2, 10, Some((2, 20)), b"hello")).unwrap();
        run(&mut n, o);
        assert_eq!(completed(&n[1], 1).2, b"he".to_vec());
        // Fill the unexpected list (limit 1), then a third request is rejected.
        let (_, o) = n[0].post(spec(3, 11, Some((2, 20)), b"q1")).unwrap();
        run(&mut n, o);
        let (_, o) = n[0].post(spec(4, 12, Some((2, 20)), b"q2")).unwrap();
        run(&mut n, o);
        assert_eq!(
            n[0].post_of(4).unwrap().state,
            DgramState::Failed(PostState::Error)
        );
        assert_eq!(n[1].counters().rejected, 1);
        // Cancelling a post whose request waits at the peer removes it there.
        let (_, o) = n[0].cancel(3).unwrap();
        run(&mut n, o);
        assert_eq!(n[1].unexpected(), 0);
        // A response for nothing is counted, not applied.
        let stray = Wire {
            kind: WireKind::Response,
            domain: D,
            src_pe: 2,
            src_inst: 20,
            dst_inst: 10,
            seq: 999,
            consumed: 0,
            data: vec![],
        };
        assert!(n[0].incoming(stray).is_empty());
        assert_eq!(n[0].counters().stray, 1);
        assert!(
            n[0].send_failed(2).is_empty(),
            "a finished post sends nothing"
        );
        assert!(matches!(
            n[0].post_of(2).unwrap().state,
            DgramState::Completed { .. }
        ));
    }

    #[test]
    fn a_request_whose_acknowledgement_was_lost_is_sent_again_and_matched_once() {
        let mut n = [Matcher::new(1, 8), Matcher::new(2, 8)];
        // A dial to a peer whose wildcard is posted later: the request waits there.
        let (seq, o) = n[0].post(spec(1, 10, Some((2, 20)), b"dial")).unwrap();
        let first = o[0].clone();
        run(&mut n, o);
        assert_eq!(n[1].unexpected(), 1);
        // The sender's NIC reports the send failed (only the acknowledgement was lost): the
        // copy is dropped while the first waits.
        let again = n[0].send_failed(seq);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].wire, first.wire, "the same request, same sequence");
        run(&mut n, again);
        assert_eq!(n[1].unexpected(), 1);
        assert_eq!(n[1].counters().duplicates, 1);
        // The listener posts its wildcard and matches the request once.
        n[1].post(spec(7, 20, None, b"listen")).unwrap();
        assert_eq!(n[1].unexpected(), 0);
        assert_eq!(completed(&n[1], 7), (1, 10, b"dial".to_vec()));
        // The response of that match is lost here. A further copy of the request gets the
        // same response again, and the listener's next wildcard is not matched by it.
        n[1].take_finished(7).unwrap();
        n[1].post(spec(7, 20, None, b"listen2")).unwrap();
        let answer = n[1].incoming(first.wire.clone());
        assert_eq!(answer.len(), 1);
        assert_eq!(answer[0].wire.kind, WireKind::Response);
        assert_eq!(answer[0].wire.data, b"listen".to_vec());
        assert_eq!(n[1].post_of(7).unwrap().state, DgramState::Pending);
        run(&mut n, answer);
        assert_eq!(completed(&n[0], 1), (2, 20, b"listen".to_vec()));
        assert_eq!(n[1].counters().duplicates, 2);
        assert_eq!(n[0].counters().resent, 1);
    }

    #[test]
    fn a_request_that_keeps_failing_fails_its_post() {
        let mut m = Matcher::new(1, 8);
        let (seq, _) = m.post(spec(1, 10, Some((2, 20)), b"dial")).unwrap();
        for _ in 0..REQUEST_RESENDS {
            assert_eq!(m.send_failed(seq).len(), 1);
        }
        assert!(m.send_failed(seq).is_empty());
        assert_eq!(
            m.post_of(1).unwrap().state,
            DgramState::Failed(PostState::Error)
        );
        // A post whose request never reached the NIC fails at once.
        let (seq, _) = m.post(spec(2, 11, Some((2, 20)), b"dial")).unwrap();
        m.fail(seq);
        assert_eq!(
            m.post_of(2).unwrap().state,
            DgramState::Failed(PostState::Error)
        );
    }

    #[test]
    fn reordered_crossing_uses_tombstones() {
        // a and b cross; b's response to a overtakes b's own request.
        let mut a = Matcher::new(1, 8);
        let mut b = Matcher::new(2, 8);
        let (_, oa) = a.post(spec(1, 10, Some((2, 20)), b"A")).unwrap();
        let (_, ob) = b.post(spec(2, 20, Some((1, 10)), b"B")).unwrap();
        let req_b = ob.into_iter().next().unwrap();
        let rsp = b.incoming(oa.into_iter().next().unwrap().wire);
        let rsp = rsp.into_iter().next().unwrap();
        assert_eq!(rsp.wire.kind, WireKind::Response);
        assert_eq!(
            rsp.wire.consumed, 1,
            "b's own request (its first post) was consumed"
        );
        assert!(a.incoming(rsp.wire).is_empty());
        assert_eq!(completed(&a, 1).2, b"B".to_vec());
        // a reposts to b before b's stale request arrives: the stale request must not match.
        a.take_finished(1).unwrap();
        a.post(spec(1, 10, Some((2, 20)), b"A2")).unwrap();
        assert!(a.incoming(req_b.wire).is_empty());
        assert_eq!(a.post_of(1).unwrap().state, DgramState::Pending);
        assert_eq!(a.counters().tombstoned, 1);
    }
}
