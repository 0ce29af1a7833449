//! Reference model of one matching Portals table entry (PtlTE) as Cassini presents it: a
//! PRIORITY and an OVERFLOW list of list entries (LEs), the UNEXPECTED list of headers left by
//! overflow matches, and the memory the entries describe.
//!
//! The model is a plain list walk written from the published semantics, never from the
//! emulator: the Portals 4 matching rules (Portals 4 reference implementation `ptl_tgt.c`
//! `check_match`, `check_perm`, `tgt_get_length`; `ptl_le.c` for appends that find
//! unexpected headers) and the Cassini ABI (cassini.md §2.2 target commands, §3.2 events,
//! §4.2 lists and LE flags; libcxi `tests/msg.c` for an unexpected send). Where those sources
//! leave a detail open, the reading the model takes is listed in `docs/testing.md`.
//!
//! Every operation returns [`Effects`]: the target events it must produce in order, the
//! initiator event (ACK or REPLY), and the bytes a Get returns. Fields the sources do not fix
//! are `None` in an expectation and are not compared.
//!
//! Offsets (`start` of an LE, `start` of an event) are byte offsets into the target memory
//! ([`PtlTe::memory`]); a test maps them to IOVAs.

use std::fmt;

use firmware_spec::cassini::dfa::{C_NID_ANY, CXI_MATCH_ID_ANY, PidBits};
use firmware_spec::cassini::event::EventType;
use firmware_spec::cassini::le::{LeFlags, PtlList};
use firmware_spec::cassini::rc::ReturnCode;
use thiserror::Error;

/// What an incoming request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A Put: data flows to the target.
    Put,
    /// A Get: data flows back to the initiator.
    Get,
}

impl Op {
    /// The target communication event of a matched request.
    pub fn comm_event(self) -> EventType {
        match self {
            Op::Put => EventType::Put,
            Op::Get => EventType::Get,
        }
    }

    /// The event a consumed unexpected header of this operation produces.
    pub fn overflow_event(self) -> EventType {
        match self {
            Op::Put => EventType::PutOverflow,
            Op::Get => EventType::GetOverflow,
        }
    }

    /// The initiator's completion event: ACK for a Put, REPLY for a Get.
    pub fn initiator_event(self) -> EventType {
        match self {
            Op::Put => EventType::Ack,
            Op::Get => EventType::Reply,
        }
    }

    /// Whether an entry with `flags` lets this operation through (`OP_PUT` / `OP_GET`;
    /// `ptl_tgt.c: check_perm`).
    pub fn permitted_by(self, flags: LeFlags) -> bool {
        match self {
            Op::Put => flags.contains(LeFlags::OP_PUT),
            Op::Get => flags.contains(LeFlags::OP_GET),
        }
    }
}

/// A list entry as software appends it, plus the offset the NIC manages for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Le {
    /// Software tag echoed in events.
    pub buffer_id: u16,
    /// PRIORITY or OVERFLOW.
    pub list: PtlList,
    /// Offset of the buffer in the target memory.
    pub start: u64,
    /// Buffer length in bytes.
    pub length: u64,
    /// Match bits.
    pub match_bits: u64,
    /// Bits ignored when matching.
    pub ignore_bits: u64,
    /// Initiator to accept (`CXI_MATCH_ID_ANY`, or a match id with per-field wildcards).
    pub match_id: u32,
    /// `C_LE_*` options.
    pub flags: LeFlags,
    /// `min_free` (bytes; `min_free_shift` 0) of a locally managed entry.
    pub min_free: u64,
    /// Bytes consumed so far by a locally managed entry.
    pub local_offset: u64,
}

impl Le {
    /// The offset into the buffer a request with `remote_offset` uses: the entry's own
    /// offset when it is locally managed, else the request's (`ptl_tgt.c: tgt_get_length`).
    fn offset_for(&self, remote_offset: u64) -> u64 {
        if self.flags.contains(LeFlags::MANAGE_LOCAL) {
            self.local_offset
        } else {
            remote_offset
        }
    }

    /// Bytes a request of `rlength` at `offset` gets: all of it if it fits, else what is left
    /// (zero when it starts past the end).
    fn mlength(&self, offset: u64, rlength: u64) -> u64 {
        self.length.saturating_sub(offset).min(rlength)
    }

    /// Whether an entry that has just consumed something must unlink: USE_ONCE, or a locally
    /// managed entry whose free space dropped below a non-zero `min_free`.
    fn must_unlink(&self) -> bool {
        self.flags.contains(LeFlags::USE_ONCE)
            || (self.flags.contains(LeFlags::MANAGE_LOCAL)
                && self.min_free > 0
                && self.length.saturating_sub(self.local_offset) < self.min_free)
    }

    /// Whether successful communication and overflow events of this entry are suppressed.
    fn comm_events_disabled(&self) -> bool {
        self.flags.contains(LeFlags::EVENT_COMM_DISABLE)
            || self.flags.contains(LeFlags::EVENT_SUCCESS_DISABLE)
    }
}

/// A header left on the UNEXPECTED list by a request that matched an OVERFLOW entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ule {
    /// The operation.
    pub op: Op,
    /// The initiator's match id.
    pub initiator: u32,
    /// The request's match bits.
    pub match_bits: u64,
    /// The request's header data.
    pub header_data: u64,
    /// The request's remote offset.
    pub remote_offset: u64,
    /// Bytes requested.
    pub rlength: u64,
    /// Bytes stored in the overflow buffer.
    pub mlength: u64,
    /// Where they were stored (offset in the target memory).
    pub start: u64,
}

/// A request arriving at the PtlTE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Put or Get.
    pub op: Op,
    /// The initiator's match id (the command's `initiator` field).
    pub initiator: u32,
    /// Match bits.
    pub match_bits: u64,
    /// Header data (Puts).
    pub header_data: u64,
    /// Remote offset.
    pub remote_offset: u64,
    /// Requested length.
    pub rlength: u64,
    /// The data of a Put (`rlength` bytes); empty for a Get.
    pub payload: Vec<u8>,
}

/// A SEARCH or SEARCH_AND_DELETE of the UNEXPECTED list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Search {
    /// Buffer id of the command (echoed in its events).
    pub buffer_id: u16,
    /// Match bits.
    pub match_bits: u64,
    /// Ignored bits.
    pub ignore_bits: u64,
    /// Initiator to accept.
    pub match_id: u32,
    /// SEARCH_AND_DELETE: remove every matching header.
    pub delete: bool,
}

/// An expected target event. `None` fields are not fixed by the sources and not compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetEvent {
    /// Event type.
    pub event_type: EventType,
    /// Return code.
    pub return_code: ReturnCode,
    /// Buffer id.
    pub buffer_id: u16,
    /// List the entry is (or the header was) on.
    pub ptl_list: Option<PtlList>,
    /// Initiator match id.
    pub initiator: Option<u32>,
    /// Match bits of the request.
    pub match_bits: Option<u64>,
    /// Header data of the request.
    pub header_data: Option<u64>,
    /// Bytes delivered.
    pub mlength: Option<u64>,
    /// Bytes requested.
    pub rlength: Option<u64>,
    /// Where the data is, as an offset in the target memory.
    pub start: Option<u64>,
    /// Remote offset of the request.
    pub remote_offset: Option<u64>,
    /// Whether this event's match unlinked the entry.
    pub auto_unlinked: Option<bool>,
}

impl TargetEvent {
    /// An event with only type, return code and buffer id fixed.
    pub fn bare(event_type: EventType, return_code: ReturnCode, buffer_id: u16) -> Self {
        TargetEvent {
            event_type,
            return_code,
            buffer_id,
            ptl_list: None,
            initiator: None,
            match_bits: None,
            header_data: None,
            mlength: None,
            rlength: None,
            start: None,
            remote_offset: None,
            auto_unlinked: None,
        }
    }
}

/// An expected initiator event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitiatorEvent {
    /// ACK or REPLY.
    pub event_type: EventType,
    /// Return code.
    pub return_code: ReturnCode,
    /// Bytes delivered (success only).
    pub mlength: Option<u64>,
    /// List the request matched (ACK of a successful Put).
    pub ptl_list: Option<PtlList>,
}

/// What one operation does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Target events, in order.
    pub target: Vec<TargetEvent>,
    /// The initiator's event, for requests.
    pub initiator: Option<InitiatorEvent>,
    /// Bytes a successful Get returns.
    pub reply: Option<Vec<u8>>,
    /// Regions of the target memory (offset, length) the operation may have written: the
    /// buffer of the matched entry.
    pub touched: Vec<(u64, u64)>,
}

/// Why the model refuses an operation (a test generating impossible input).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ModelError {
    /// Appends go to PRIORITY or OVERFLOW.
    #[error("cannot append to the {0:?} list")]
    BadList(PtlList),
    /// An entry lies outside the target memory.
    #[error("entry [{start}, +{length}) outside the {size}-byte memory")]
    OutOfMemory {
        /// Start.
        start: u64,
        /// Length.
        length: u64,
        /// Memory size.
        size: u64,
    },
    /// A Put's payload is not `rlength` bytes.
    #[error("payload of {got} bytes for rlength {rlength}")]
    Payload {
        /// Payload length.
        got: usize,
        /// Requested length.
        rlength: u64,
    },
}

/// The target memory the entries describe. Its `Debug` shows a digest, not the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Memory(Vec<u8>);

impl Memory {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        Memory(vec![0; len])
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.0.len() as u64
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `len` bytes at `offset` (clipped to the memory).
    pub fn slice(&self, offset: u64, len: u64) -> &[u8] {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let end = usize::try_from(offset.saturating_add(len))
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        &self.0[start..end]
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let end = start.saturating_add(data.len()).min(self.0.len());
        let n = end - start;
        self.0[start..end].copy_from_slice(&data[..n]);
    }
}

impl fmt::Debug for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // FNV-1a, enough to tell two memories apart in a failure report.
        let digest = self.0.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
        write!(f, "Memory({} bytes, fnv {digest:#018x})", self.0.len())
    }
}

/// Whether initiator `initiator` passes an entry's `match_id` on a physically addressed
/// PtlTE: `CXI_MATCH_ID_ANY` passes everyone; otherwise the PID field must be the PID
/// wildcard (all ones) or equal, and the endpoint field `C_NID_ANY` or equal (cassini.md
/// §4.2; `ptl_tgt.c: check_match` for the per-field wildcards).
pub fn initiator_matches(pid_bits: PidBits, le_match_id: u32, initiator: u32) -> bool {
    if le_match_id == CXI_MATCH_ID_ANY {
        return true;
    }
    let ep_bits = 32 - pid_bits.get();
    let ep_mask = (1u32 << ep_bits) - 1;
    let (le_pid, le_ep) = (le_match_id >> ep_bits, le_match_id & ep_mask);
    let (pid, ep) = (initiator >> ep_bits, initiator & ep_mask);
    let pid_ok = le_pid == pid_bits.pid_mask() || le_pid == pid;
    let ep_ok = le_ep == C_NID_ANY || le_ep == ep;
    pid_ok && ep_ok
}

/// The match-bit rule: equal in every bit not ignored (cassini.md §4.2, libfabric
/// `tag_match`; the same as Portals' `(a | ignore) == (b | ignore)`).
pub fn bits_match(incoming: u64, le_bits: u64, ignore: u64) -> bool {
    (incoming ^ le_bits) & !ignore == 0
}

/// One matching PtlTE without flow control.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtlTe {
    pid_bits: PidBits,
    priority: Vec<Le>,
    overflow: Vec<Le>,
    unexpected: Vec<Ule>,
    memory: Memory,
}

impl PtlTe {
    /// An enabled PtlTE with empty lists over `memory_len` zero bytes.
    pub fn new(pid_bits: PidBits, memory_len: usize) -> Self {
        PtlTe {
            pid_bits,
            priority: Vec::new(),
            overflow: Vec::new(),
            unexpected: Vec::new(),
            memory: Memory::zeroed(memory_len),
        }
    }

    /// The PRIORITY list, in order.
    pub fn priority(&self) -> &[Le] {
        &self.priority
    }

    /// The OVERFLOW list, in order.
    pub fn overflow(&self) -> &[Le] {
        &self.overflow
    }

    /// The UNEXPECTED list, oldest first.
    pub fn unexpected(&self) -> &[Ule] {
        &self.unexpected
    }

    /// The target memory.
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    fn list_mut(&mut self, list: PtlList) -> Option<&mut Vec<Le>> {
        match list {
            PtlList::Priority => Some(&mut self.priority),
            PtlList::Overflow => Some(&mut self.overflow),
            _ => None,
        }
    }

    /// Whether `le` matches a request (bits, initiator, NO_TRUNCATE; `ptl_tgt.c:
    /// check_match`). Permission is checked after the match.
    fn le_matches(
        &self,
        le: &Le,
        initiator: u32,
        match_bits: u64,
        remote_offset: u64,
        rlength: u64,
    ) -> bool {
        if !bits_match(match_bits, le.match_bits, le.ignore_bits) {
            return false;
        }
        if !initiator_matches(self.pid_bits, le.match_id, initiator) {
            return false;
        }
        if le.flags.contains(LeFlags::NO_TRUNCATE) {
            let offset = le.offset_for(remote_offset);
            if offset.saturating_add(rlength) > le.length {
                return false;
            }
        }
        true
    }

    /// The entry a request would match: PRIORITY first, then OVERFLOW, first match wins.
    pub fn find_match(&self, req: &Request) -> Option<(PtlList, usize)> {
        let hit = |le: &Le| {
            self.le_matches(
                le,
                req.initiator,
                req.match_bits,
                req.remote_offset,
                req.rlength,
            )
        };
        if let Some(i) = self.priority.iter().position(hit) {
            return Some((PtlList::Priority, i));
        }
        self.overflow
            .iter()
            .position(hit)
            .map(|i| (PtlList::Overflow, i))
    }

    /// Whether some OVERFLOW entry accepts the request's match bits and initiator, whether
    /// or not the request fits it.
    pub fn overflow_accepts(&self, req: &Request) -> bool {
        self.overflow.iter().any(|le| {
            bits_match(req.match_bits, le.match_bits, le.ignore_bits)
                && initiator_matches(self.pid_bits, le.match_id, req.initiator)
        })
    }

    /// A request arrives (Put or Get).
    pub fn incoming(&mut self, req: &Request) -> Result<Effects, ModelError> {
        if req.op == Op::Put && req.payload.len() as u64 != req.rlength {
            return Err(ModelError::Payload {
                got: req.payload.len(),
                rlength: req.rlength,
            });
        }
        let mut fx = Effects::default();
        let Some((list, index)) = self.find_match(req) else {
            // No entry on either list, no flow control: dropped, an error event of the
            // request's type without a buffer (reading, docs/testing.md).
            fx.target.push(TargetEvent {
                initiator: Some(req.initiator),
                match_bits: Some(req.match_bits),
                ..TargetEvent::bare(req.op.comm_event(), ReturnCode::EntryNotFound, 0)
            });
            fx.initiator = Some(InitiatorEvent {
                event_type: req.op.initiator_event(),
                return_code: ReturnCode::EntryNotFound,
                mlength: None,
                ptl_list: None,
            });
            return Ok(fx);
        };
        let entries = self.list_mut(list).ok_or(ModelError::BadList(list))?;
        let le = &mut entries[index];
        if !req.op.permitted_by(le.flags) {
            // Matched but not permitted: dropped, not re-matched; the entry is untouched.
            let buffer_id = le.buffer_id;
            fx.target.push(TargetEvent {
                initiator: Some(req.initiator),
                match_bits: Some(req.match_bits),
                ..TargetEvent::bare(req.op.comm_event(), ReturnCode::OpViolation, buffer_id)
            });
            fx.initiator = Some(InitiatorEvent {
                event_type: req.op.initiator_event(),
                return_code: ReturnCode::OpViolation,
                mlength: None,
                ptl_list: None,
            });
            return Ok(fx);
        }
        let offset = le.offset_for(req.remote_offset);
        let mlength = le.mlength(offset, req.rlength);
        let start = le.start + offset;
        let manage_local = le.flags.contains(LeFlags::MANAGE_LOCAL);
        if manage_local {
            le.local_offset += mlength;
        }
        let unlink = le.must_unlink();
        let le = if unlink {
            entries.remove(index)
        } else {
            entries[index].clone()
        };
        fx.touched.push((le.start, le.length));
        match req.op {
            Op::Put => {
                let data = req.payload.get(..mlength as usize).unwrap_or(&[]);
                self.memory.write(start, data);
                if list == PtlList::Overflow && !le.flags.contains(LeFlags::UNEXPECTED_HDR_DISABLE)
                {
                    self.unexpected.push(Ule {
                        op: req.op,
                        initiator: req.initiator,
                        match_bits: req.match_bits,
                        header_data: req.header_data,
                        remote_offset: req.remote_offset,
                        rlength: req.rlength,
                        mlength,
                        start,
                    });
                }
            }
            Op::Get => {
                fx.reply = Some(self.memory.slice(start, mlength).to_vec());
            }
        }
        // The entry is unlinked at match time, before its data lands: the UNLINK event comes
        // before the operation's (the order HPE's libcxi tests expect, msg.c).
        if unlink && !le.flags.contains(LeFlags::EVENT_UNLINK_DISABLE) {
            fx.target.push(TargetEvent {
                ptl_list: Some(list),
                ..TargetEvent::bare(EventType::Unlink, ReturnCode::Ok, le.buffer_id)
            });
        }
        if !le.comm_events_disabled() {
            fx.target.push(TargetEvent {
                event_type: req.op.comm_event(),
                return_code: ReturnCode::Ok,
                buffer_id: le.buffer_id,
                ptl_list: Some(list),
                initiator: Some(req.initiator),
                match_bits: Some(req.match_bits),
                header_data: (req.op == Op::Put).then_some(req.header_data),
                mlength: Some(mlength),
                rlength: Some(req.rlength),
                start: Some(start),
                remote_offset: (!manage_local).then_some(req.remote_offset),
                auto_unlinked: Some(unlink),
            });
        }
        fx.initiator = Some(InitiatorEvent {
            event_type: req.op.initiator_event(),
            return_code: ReturnCode::Ok,
            mlength: Some(mlength),
            ptl_list: (req.op == Op::Put).then_some(list),
        });
        Ok(fx)
    }

    /// APPEND `le` (its `local_offset` is reset to 0). A PRIORITY entry first consumes the
    /// unexpected headers it matches, oldest first, each giving an `*_OVERFLOW` event; an
    /// entry that unlinks while doing so is never linked (no LINK event). An OVERFLOW append
    /// never searches.
    pub fn append(&mut self, le: Le) -> Result<Effects, ModelError> {
        if !matches!(le.list, PtlList::Priority | PtlList::Overflow) {
            return Err(ModelError::BadList(le.list));
        }
        if le.start.saturating_add(le.length) > self.memory.len() {
            return Err(ModelError::OutOfMemory {
                start: le.start,
                length: le.length,
                size: self.memory.len(),
            });
        }
        let mut le = Le {
            local_offset: 0,
            ..le
        };
        let mut fx = Effects::default();
        if le.list == PtlList::Priority {
            let mut i = 0;
            while i < self.unexpected.len() {
                let u = &self.unexpected[i];
                let hit =
                    self.le_matches(&le, u.initiator, u.match_bits, u.remote_offset, u.rlength)
                        && u.op.permitted_by(le.flags);
                if !hit {
                    i += 1;
                    continue;
                }
                let u = self.unexpected.remove(i);
                if le.flags.contains(LeFlags::MANAGE_LOCAL) {
                    le.local_offset += le.mlength(le.local_offset, u.rlength);
                }
                let unlink = le.must_unlink();
                if !le.comm_events_disabled() {
                    fx.target.push(TargetEvent {
                        event_type: u.op.overflow_event(),
                        return_code: ReturnCode::Ok,
                        buffer_id: le.buffer_id,
                        ptl_list: None,
                        initiator: Some(u.initiator),
                        match_bits: Some(u.match_bits),
                        header_data: Some(u.header_data),
                        mlength: Some(u.mlength),
                        rlength: Some(u.rlength),
                        start: Some(u.start),
                        remote_offset: None,
                        auto_unlinked: Some(unlink),
                    });
                }
                if unlink {
                    if !le.flags.contains(LeFlags::EVENT_UNLINK_DISABLE) {
                        fx.target.push(TargetEvent {
                            ptl_list: Some(PtlList::Priority),
                            ..TargetEvent::bare(EventType::Unlink, ReturnCode::Ok, le.buffer_id)
                        });
                    }
                    return Ok(fx);
                }
            }
        }
        if !le.flags.contains(LeFlags::EVENT_LINK_DISABLE) {
            fx.target.push(TargetEvent {
                ptl_list: Some(le.list),
                ..TargetEvent::bare(EventType::Link, ReturnCode::Ok, le.buffer_id)
            });
        }
        let list = le.list;
        self.list_mut(list)
            .ok_or(ModelError::BadList(list))?
            .push(le);
        Ok(fx)
    }

    /// UNLINK the entry `buffer_id` of `list`: UNLINK OK, or ENTRY_NOT_FOUND when that list
    /// holds no such entry (already consumed or never there). Always reported.
    pub fn unlink(&mut self, list: PtlList, buffer_id: u16) -> Effects {
        let mut fx = Effects::default();
        let found = self.list_mut(list).and_then(|entries| {
            let i = entries.iter().position(|le| le.buffer_id == buffer_id)?;
            Some(entries.remove(i))
        });
        fx.target.push(match found {
            Some(_) => TargetEvent {
                ptl_list: Some(list),
                ..TargetEvent::bare(EventType::Unlink, ReturnCode::Ok, buffer_id)
            },
            None => TargetEvent::bare(EventType::Unlink, ReturnCode::EntryNotFound, buffer_id),
        });
        fx
    }

    /// SEARCH / SEARCH_AND_DELETE on the UNEXPECTED list. A delete removes every matching
    /// header, oldest first, each reported by an `*_OVERFLOW` event carrying the command's
    /// buffer id; both end with one SEARCH event, OK if anything matched, else NO_MATCH.
    pub fn search(&mut self, s: &Search) -> Effects {
        let mut fx = Effects::default();
        let pid_bits = self.pid_bits;
        let hit = |u: &Ule| {
            bits_match(u.match_bits, s.match_bits, s.ignore_bits)
                && initiator_matches(pid_bits, s.match_id, u.initiator)
        };
        let mut found = false;
        if s.delete {
            let mut kept = Vec::with_capacity(self.unexpected.len());
            for u in std::mem::take(&mut self.unexpected) {
                if hit(&u) {
                    found = true;
                    fx.target.push(TargetEvent {
                        event_type: u.op.overflow_event(),
                        return_code: ReturnCode::Ok,
                        buffer_id: s.buffer_id,
                        ptl_list: None,
                        initiator: Some(u.initiator),
                        match_bits: Some(u.match_bits),
                        header_data: Some(u.header_data),
                        mlength: Some(u.mlength),
                        rlength: Some(u.rlength),
                        start: Some(u.start),
                        remote_offset: None,
                        auto_unlinked: None,
                    });
                } else {
                    kept.push(u);
                }
            }
            self.unexpected = kept;
        } else {
            found = self.unexpected.iter().any(hit);
        }
        let rc = if found {
            ReturnCode::Ok
        } else {
            ReturnCode::NoMatch
        };
        fx.target
            .push(TargetEvent::bare(EventType::Search, rc, s.buffer_id));
        fx
    }
}
