//! The matcher of one kgni instance ([`Matcher`]): posts of its endpoints, requests that
//! arrived before their post (the unexpected list), tombstones of crossing requests, and the
//! messages each step sends.

use std::collections::{BTreeMap, VecDeque};

use firmware_spec::gemini::gni::PostState;
use thiserror::Error;

use super::wire::{Domain, MAX_PAYLOAD, Wire, WireKind};

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
