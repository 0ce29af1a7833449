//! Processing of an incoming Portals request, one function per step:
//! [`Lpe::incoming`] (state check) -> `enabled` / `software_managed` (list walk) ->
//! `overflow` (unexpected header) -> `plan` (permission, placement, length) ->
//! EQ room check -> `commit` (consume the entry, build events); failures end in `exhausted`
//! (flow control or ENTRY_NOT_FOUND) or `refused` (an error event for the matched entry).

use super::counters::{LpeCounters, bump, count_events};
use super::event::{CtUpdate, RendezvousGet, StateChange, TargetEvent, rendezvous_dfa};
use super::hw::{
    CT_NONE, DROP_COUNT_MASK, EventType, LeFlags, PtAllocOpts, PtlList, PtlteState, ReturnCode,
    ScReason, match_id_pid,
};
use super::le::{
    AtomicInfo, Le, LinkedLe, NetOp, RendezvousInfo, UnexpectedHeader, initiator_matches,
};
use super::pool::LePools;
use super::table::Ptlte;
use super::{Lpe, LpeConfig};

/// An incoming request as the IXE hands it to the LPE after addressing resolved the PtlTE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IncomingRequest {
    /// Operation.
    pub op: NetOp,
    /// Initiator match id from the packet (`initiator` of the command).
    pub initiator: u32,
    /// Source NID (fabric source address), used for rendezvous Gets.
    pub source_nid: u32,
    /// Match bits.
    pub match_bits: u64,
    /// Header data.
    pub header_data: u64,
    /// Requested length (`request_len`).
    pub rlength: u64,
    /// Remote offset (ignored by locally managed entries).
    pub remote_offset: u64,
    /// RENDEZVOUS_PUT: bytes carried by the put (`eager_length`).
    pub eager_length: u64,
    /// RENDEZVOUS_PUT: `rendezvous_id`.
    pub rendezvous_id: u8,
    /// RENDEZVOUS_PUT: `use_offset_for_get`.
    pub use_offset_for_get: bool,
    /// VNI of the packet.
    pub vni: u16,
    /// Restricted (non-ordered, low-overhead) packet.
    pub restricted: bool,
    /// Atomic descriptor (echoed in events).
    pub atomic: AtomicInfo,
    /// Bytes of wire headers that land in front of the payload when the request is delivered
    /// to a REQUEST-list buffer (software-managed mode); counted in mlength.
    pub wire_header_len: u64,
    /// The PtlTE's event queue has no room for a network event (beyond its reserved
    /// flow-control slots). The caller knows the EQ; the LPE decides what that means.
    pub eq_full: bool,
    /// No list entry can be allocated for this request's unexpected header (the NIC's
    /// `le_exhaust` fault site, as if the PtlTE's LE pool were empty).
    pub le_exhausted: bool,
}

/// Where and how much data moves for an accepted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// List of the entry.
    pub list: PtlList,
    /// Buffer id of the entry.
    pub buffer_id: u16,
    /// LAC of `start`.
    pub lac: u8,
    /// IOVA where the transfer starts (entry start + `offset`).
    pub start: u64,
    /// Offset within the entry (local offset for locally managed entries).
    pub offset: u64,
    /// Bytes to move now: written for puts (for a rendezvous put, the eager part), read for
    /// Gets, operated on for atomics. Includes `header_bytes`.
    pub length: u64,
    /// Leading bytes of `length` that are the request's wire headers (REQUEST list only).
    pub header_bytes: u64,
    /// `UNRESTRICTED_BODY_RO` of the entry.
    pub relaxed_body: bool,
    /// `UNRESTRICTED_END_RO` of the entry.
    pub relaxed_end: bool,
}

/// The LPE's decision for an incoming request. The caller moves the data described by
/// `delivery`, then posts `events` in order (it may replace the return code of the
/// communication event by a data-movement error), applies `ct`, issues `rendezvous`, and
/// answers the initiator with `return_code` (ACK/REPLY `ptl_list` = `list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingOutcome {
    /// Return code for the initiator.
    pub return_code: ReturnCode,
    /// List the request matched on.
    pub list: Option<PtlList>,
    /// Data movement, when the request was accepted.
    pub delivery: Option<Delivery>,
    /// Id of the unexpected header recorded for this request.
    pub unexpected: Option<u64>,
    /// Target events, in posting order.
    pub events: Vec<TargetEvent>,
    /// Counting event update.
    pub ct: Option<CtUpdate>,
    /// Rendezvous Get to issue for the rest of a rendezvous put.
    pub rendezvous: Option<RendezvousGet>,
}

impl IncomingOutcome {
    fn dropped(rc: ReturnCode) -> Self {
        Self {
            return_code: rc,
            list: None,
            delivery: None,
            unexpected: None,
            events: Vec::new(),
            ct: None,
            rendezvous: None,
        }
    }
}

/// Kinds of resource exhaustion (the LPE counter names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exhaustion {
    EqFull,
    NoMatchInOverflow,
    CantAllocUnexpected,
    RequestEmpty,
}

/// Mutable parts of the engine besides the PtlTE being worked on.
pub(crate) struct Cx<'a> {
    pub(crate) pt: u16,
    pub(crate) pools: &'a mut LePools,
    pub(crate) counters: &'a mut LpeCounters,
    pub(crate) config: &'a LpeConfig,
    pub(crate) next_ule_id: &'a mut u64,
}

/// Everything decided about delivering `req` into one entry, before anything changes.
#[derive(Debug, Clone, Copy)]
struct Plan {
    list: PtlList,
    seq: u64,
    le: Le,
    offset: u64,
    start: u64,
    /// Bytes moved now.
    placed: u64,
    /// Matched length reported in events and consumed from a locally managed entry.
    matched: u64,
    header_bytes: u64,
    truncated: bool,
    unlink: bool,
}

impl Lpe {
    /// Processes one incoming request addressed to PtlTE `pt` (cassini.md §4).
    pub fn incoming(&mut self, pt: u16, req: IncomingRequest) -> IncomingOutcome {
        let Lpe {
            table,
            pools,
            counters,
            config,
            next_ule_id,
        } = self;
        match req.op {
            NetOp::Put => counters.put_cmds += 1,
            NetOp::RendezvousPut => counters.rendezvous_put_cmds += 1,
            NetOp::Get => counters.get_cmds += 1,
            NetOp::Atomic => counters.amo_cmds += 1,
            NetOp::FetchAtomic => counters.famo_cmds += 1,
        }
        let Some(pte) = table.get_mut(pt) else {
            counters.fail_cntr += 1;
            return IncomingOutcome::dropped(ReturnCode::PtlteNotFound);
        };
        let pool = pte.config.cntr_pool;
        bump(&mut counters.net_match_requests, pool);
        if req.op == NetOp::RendezvousPut {
            bump(&mut counters.rndzv_puts, pool);
        }
        let mut cx = Cx {
            pt,
            pools,
            counters,
            config,
            next_ule_id,
        };
        let out = match pte.state {
            PtlteState::Disabled => {
                pte.drop_count = (pte.drop_count + 1) & DROP_COUNT_MASK;
                IncomingOutcome::dropped(ReturnCode::PtDisabled)
            }
            PtlteState::Enabled => enabled(pte, &mut cx, &req),
            PtlteState::SoftwareManaged => software_managed(pte, &mut cx, &req),
            PtlteState::Reset | PtlteState::Ethernet => {
                IncomingOutcome::dropped(ReturnCode::PtlteNotFound)
            }
        };
        count_events(cx.counters, &out.events);
        if matches!(out.return_code, ReturnCode::Ok | ReturnCode::Delayed) {
            cx.counters.success_cntr += 1;
            bump(&mut cx.counters.net_match_success, pool);
        } else {
            cx.counters.fail_cntr += 1;
        }
        tracing::trace!(pt, op = ?req.op, rc = ?out.return_code, list = ?out.list, "lpe incoming");
        out
    }
}

/// ENABLED: priority list, then overflow list (Portals 4 order).
fn enabled(pte: &mut Ptlte, cx: &mut Cx<'_>, req: &IncomingRequest) -> IncomingOutcome {
    if let Some(seq) = find_candidate(pte, cx.config, PtlList::Priority, req) {
        return deliver(pte, cx, req, PtlList::Priority, seq);
    }
    if let Some(seq) = find_candidate(pte, cx.config, PtlList::Overflow, req) {
        return overflow(pte, cx, req, seq);
    }
    exhausted(
        pte,
        cx,
        req,
        Exhaustion::NoMatchInOverflow,
        PtlList::Overflow,
    )
}

/// SOFTWARE_MANAGED: entries still on the priority list match first; everything else lands,
/// with its wire headers, in the first REQUEST-list buffer that takes it.
fn software_managed(pte: &mut Ptlte, cx: &mut Cx<'_>, req: &IncomingRequest) -> IncomingOutcome {
    if let Some(seq) = find_candidate(pte, cx.config, PtlList::Priority, req) {
        return deliver(pte, cx, req, PtlList::Priority, seq);
    }
    if let Some(seq) = find_candidate(pte, cx.config, PtlList::Request, req) {
        return deliver(pte, cx, req, PtlList::Request, seq);
    }
    exhausted(pte, cx, req, Exhaustion::RequestEmpty, PtlList::Request)
}

/// Bytes that would land in an entry of `list` for this request (used for the NO_TRUNCATE fit
/// check and for truncation).
fn landing_bytes(req: &IncomingRequest, list: PtlList) -> u64 {
    match list {
        PtlList::Request => {
            let payload = match req.op {
                NetOp::Get => 0,
                NetOp::RendezvousPut => req.eager_length.min(req.rlength),
                NetOp::Put | NetOp::Atomic | NetOp::FetchAtomic => req.rlength,
            };
            req.wire_header_len.saturating_add(payload)
        }
        PtlList::Overflow => match req.op {
            NetOp::Put => req.rlength,
            NetOp::RendezvousPut => req.eager_length.min(req.rlength),
            // Delayed: nothing is stored for a Get/AMO waiting as an unexpected header.
            NetOp::Get | NetOp::Atomic | NetOp::FetchAtomic => 0,
        },
        PtlList::Priority | PtlList::Unexpected => req.rlength,
    }
}

/// Bytes a NO_TRUNCATE entry of `list` must have room for to match the request. NO_TRUNCATE
/// is part of the match for every operation (`ptl_tgt.c: check_match`): a Get or AMO that an
/// OVERFLOW entry could not hold does not match it, even though nothing is stored for it there
/// while it waits.
fn fit_bytes(req: &IncomingRequest, list: PtlList) -> u64 {
    match (list, req.op) {
        (PtlList::Overflow, NetOp::Get | NetOp::Atomic | NetOp::FetchAtomic) => req.rlength,
        _ => landing_bytes(req, list),
    }
}

/// Offset of the request inside the entry. A rendezvous put with `use_offset_for_get`
/// carries the source's offset (for the Get), not a target offset: it lands at offset 0.
fn entry_offset(e: &LinkedLe, req: &IncomingRequest) -> u64 {
    if e.le.has(LeFlags::MANAGE_LOCAL) {
        e.local_offset
    } else if req.op == NetOp::RendezvousPut && req.use_offset_for_get {
        0
    } else {
        req.remote_offset
    }
}

/// Source offset a rendezvous Get starts from, before the eager bytes.
pub(crate) fn get_base(use_offset_for_get: bool, remote_offset: u64) -> u64 {
    if use_offset_for_get { remote_offset } else { 0 }
}

/// Whether `bytes` at the request's offset fit in the entry.
fn fits(e: &LinkedLe, req: &IncomingRequest, bytes: u64) -> bool {
    entry_offset(e, req)
        .checked_add(bytes)
        .is_some_and(|end| end <= e.le.length)
}

/// The first entry of `list` that accepts the request: match bits, initiator and (for
/// NO_TRUNCATE entries) fit. A non-matching PtlTE takes the head entry as it is.
fn find_candidate(
    pte: &Ptlte,
    config: &LpeConfig,
    list: PtlList,
    req: &IncomingRequest,
) -> Option<u64> {
    let l = pte.list(list)?;
    if !pte.is_matching() {
        return l.first();
    }
    let logical = pte.opt(PtAllocOpts::USE_LOGICAL);
    let bytes = fit_bytes(req, list);
    l.find_match(req.match_bits, |e| {
        initiator_matches(e.le.match_id, req.initiator, config.pid_bits, logical)
            && (!e.le.has(LeFlags::NO_TRUNCATE) || fits(e, req, bytes))
    })
}

/// OVERFLOW match: the data (or, for a Get/AMO, only the header) is kept as unexpected.
fn overflow(pte: &mut Ptlte, cx: &mut Cx<'_>, req: &IncomingRequest, seq: u64) -> IncomingOutcome {
    let Some(linked) = pte.overflow.get(seq).copied() else {
        return exhausted(
            pte,
            cx,
            req,
            Exhaustion::NoMatchInOverflow,
            PtlList::Overflow,
        );
    };
    if !req.op.permitted_by(linked.le.flags) {
        return refused(
            pte,
            cx,
            req,
            PtlList::Overflow,
            &linked.le,
            ReturnCode::OpViolation,
        );
    }
    let keep_header = !linked.le.has(LeFlags::UNEXPECTED_HDR_DISABLE);
    if req.op.is_get_or_amo() {
        // A Get/AMO waits as an unexpected header until an append matches it (RC_DELAYED,
        // counter unexpected_get_amo); without a header it cannot wait.
        if !keep_header
            || req.le_exhausted
            || !cx.pools.try_alloc(pte.config.pe, pte.config.le_pool)
        {
            return cant_alloc_unexpected(pte, cx, req);
        }
        let id = new_ule(pte, cx, req, &linked.le, 0, 0);
        bump(&mut cx.counters.unexpected_get_amo, pte.config.cntr_pool);
        bump(&mut cx.counters.net_match_overflow, pte.config.cntr_pool);
        let mut out = IncomingOutcome::dropped(ReturnCode::Delayed);
        out.list = Some(PtlList::Overflow);
        out.unexpected = Some(id);
        return out;
    }
    let plan = match plan(pte, cx, req, PtlList::Overflow, seq) {
        Ok(p) => p,
        Err(out) => return *out,
    };
    if req.eq_full && plan_emits_events(pte, &plan) {
        return exhausted(pte, cx, req, Exhaustion::EqFull, PtlList::Overflow);
    }
    if keep_header && (req.le_exhausted || !cx.pools.try_alloc(pte.config.pe, pte.config.le_pool)) {
        return cant_alloc_unexpected(pte, cx, req);
    }
    let ule = keep_header.then(|| new_ule(pte, cx, req, &plan.le, plan.placed, plan.start));
    let mut out = commit(pte, cx, req, &plan);
    out.unexpected = ule;
    out
}

/// Records an unexpected header (its pool entry is already taken).
fn new_ule(
    pte: &mut Ptlte,
    cx: &mut Cx<'_>,
    req: &IncomingRequest,
    ovf: &Le,
    stored: u64,
    start: u64,
) -> u64 {
    let id = *cx.next_ule_id;
    *cx.next_ule_id += 1;
    let rendezvous = (req.op == NetOp::RendezvousPut).then_some(RendezvousInfo {
        rendezvous_id: req.rendezvous_id,
        source_nid: req.source_nid,
        eager_length: stored,
        use_offset_for_get: req.use_offset_for_get,
    });
    pte.unexpected.push(UnexpectedHeader {
        id,
        op: req.op,
        initiator: req.initiator,
        match_bits: req.match_bits,
        header_data: req.header_data,
        rlength: req.rlength,
        mlength: stored,
        start,
        lac: ovf.lac,
        remote_offset: req.remote_offset,
        vni: req.vni,
        atomic: req.atomic,
        rendezvous,
        overflow_buffer_id: ovf.buffer_id,
    });
    id
}

/// No unexpected header could be kept. With `en_sw_hw_st_chng` the NIC moves to
/// SOFTWARE_MANAGED and lands the request in a REQUEST buffer if one takes it; otherwise
/// flow control / ENTRY_NOT_FOUND.
fn cant_alloc_unexpected(
    pte: &mut Ptlte,
    cx: &mut Cx<'_>,
    req: &IncomingRequest,
) -> IncomingOutcome {
    if pte.opt(PtAllocOpts::EN_SW_HW_ST_CHNG)
        && let Some(seq) = find_candidate(pte, cx.config, PtlList::Request, req)
    {
        pte.state = PtlteState::SoftwareManaged;
        let sc = state_change_event(
            pte,
            cx,
            PtlteState::SoftwareManaged,
            Some(ScReason::SmUnexpectedFail),
        );
        let mut out = deliver(pte, cx, req, PtlList::Request, seq);
        if let Some(sc) = sc {
            out.events.insert(0, sc);
        }
        return out;
    }
    exhausted(
        pte,
        cx,
        req,
        Exhaustion::CantAllocUnexpected,
        PtlList::Overflow,
    )
}

/// Delivers into entry `seq` of `list` (priority or request), or refuses.
fn deliver(
    pte: &mut Ptlte,
    cx: &mut Cx<'_>,
    req: &IncomingRequest,
    list: PtlList,
    seq: u64,
) -> IncomingOutcome {
    let plan = match plan(pte, cx, req, list, seq) {
        Ok(p) => p,
        Err(out) => return *out,
    };
    if req.eq_full && plan_emits_events(pte, &plan) {
        return exhausted(pte, cx, req, Exhaustion::EqFull, list);
    }
    let mut out = commit(pte, cx, req, &plan);
    if list == PtlList::Request && req.op.is_get_or_amo() {
        // The header is in a request buffer; software performs the operation.
        bump(&mut cx.counters.unexpected_get_amo, pte.config.cntr_pool);
        out.return_code = ReturnCode::Delayed;
    }
    out
}

/// Decides placement for entry `seq`: permission, restricted-unicast rule, space, length,
/// unlink. Nothing changes here.
fn plan(
    pte: &mut Ptlte,
    cx: &mut Cx<'_>,
    req: &IncomingRequest,
    list: PtlList,
    seq: u64,
) -> Result<Plan, Box<IncomingOutcome>> {
    let Some(linked) = pte.list(list).and_then(|l| l.get(seq)).copied() else {
        return Err(Box::new(exhausted(
            pte,
            cx,
            req,
            Exhaustion::NoMatchInOverflow,
            list,
        )));
    };
    let le = linked.le;
    // Permission is checked after the match; a refused request is dropped, not re-matched.
    if !req.op.permitted_by(le.flags) {
        return Err(Box::new(refused(
            pte,
            cx,
            req,
            list,
            &le,
            ReturnCode::OpViolation,
        )));
    }
    let manage_local = le.has(LeFlags::MANAGE_LOCAL);
    if req.restricted && manage_local && !pte.opt(PtAllocOpts::EN_RESTRICTED_UNICAST_LM) {
        cx.counters.err_restricted_unicast += 1;
        return Err(Box::new(refused(
            pte,
            cx,
            req,
            list,
            &le,
            ReturnCode::RestrictedUnicast,
        )));
    }
    let bytes = landing_bytes(req, list);
    let offset = entry_offset(&linked, req);
    let room = le.length.saturating_sub(offset);
    if !pte.is_matching()
        && bytes > room
        && (!pte.opt(PtAllocOpts::DO_SPACE_CHECK) || le.has(LeFlags::NO_TRUNCATE))
    {
        cx.counters.err_no_space_net += 1;
        return Err(Box::new(refused(
            pte,
            cx,
            req,
            list,
            &le,
            ReturnCode::NoSpace,
        )));
    }
    let matched = bytes.min(room);
    let placed = if req.op == NetOp::RendezvousPut && list == PtlList::Priority {
        req.eager_length.min(matched)
    } else {
        matched
    };
    let header_bytes = if list == PtlList::Request {
        req.wire_header_len.min(matched)
    } else {
        0
    };
    let min_free = u64::from(le.min_free) << cx.config.min_free_shift;
    let room_after = room - matched;
    let unlink =
        le.has(LeFlags::USE_ONCE) || (manage_local && min_free > 0 && room_after < min_free);
    Ok(Plan {
        list,
        seq,
        le,
        offset,
        start: le.start.wrapping_add(offset),
        placed,
        matched,
        header_bytes,
        truncated: matched < bytes,
        unlink,
    })
}

fn comm_events_on(le: &Le) -> bool {
    !le.has(LeFlags::EVENT_COMM_DISABLE) && !le.has(LeFlags::EVENT_SUCCESS_DISABLE)
}

fn unlink_event_on(le: &Le) -> bool {
    // Only EVENT_UNLINK_DISABLE covers the auto-UNLINK event: SUCCESS_DISABLE suppresses
    // successful communication events (Portals `ptl_le.c: le_unlink`; libfabric and libcxi's
    // utilities rely on it).
    !le.has(LeFlags::EVENT_UNLINK_DISABLE)
}

/// Whether committing `plan` writes at least one event to the PtlTE's EQ.
fn plan_emits_events(pte: &Ptlte, plan: &Plan) -> bool {
    pte.has_eq()
        && (pte.opt(PtAllocOpts::EN_EVENT_MATCH)
            || comm_events_on(&plan.le)
            || (plan.unlink && unlink_event_on(&plan.le)))
}

/// Applies `plan`: consumes the entry, builds the events and the data movement.
fn commit(pte: &mut Ptlte, cx: &mut Cx<'_>, req: &IncomingRequest, plan: &Plan) -> IncomingOutcome {
    let le = plan.le;
    let pool = pte.config.cntr_pool;
    let manage_local = le.has(LeFlags::MANAGE_LOCAL);
    if let Some(l) = pte.list_mut(plan.list) {
        if manage_local && let Some(e) = l.get_mut(plan.seq) {
            e.local_offset = e.local_offset.saturating_add(plan.matched);
        }
        if plan.unlink && l.remove(plan.seq).is_some() {
            cx.pools.free(pte.config.pe, pte.config.le_pool, 1);
        }
    }
    match plan.list {
        PtlList::Priority => bump(&mut cx.counters.net_match_priority, pool),
        PtlList::Overflow => bump(&mut cx.counters.net_match_overflow, pool),
        PtlList::Request => bump(&mut cx.counters.net_match_request, pool),
        PtlList::Unexpected => {}
    }
    if le.has(LeFlags::USE_ONCE) {
        bump(&mut cx.counters.net_match_useonce, pool);
    }
    if manage_local {
        bump(&mut cx.counters.net_match_local, pool);
    }
    if plan.truncated {
        bump(&mut cx.counters.num_truncated, pool);
    }

    let rdzv_offload = req.op == NetOp::RendezvousPut && plan.list == PtlList::Priority;
    // Nothing left to pull (the LE is no longer than the eager part): the NIC issues no Get
    // and says so in the RENDEZVOUS event, and software pulls what lets the source complete.
    let get_issued = cx.config.rdzv_get_en && plan.matched > plan.placed;
    let mut events = Vec::new();
    if pte.has_eq() {
        let base = request_event(pte, cx.pt, req, plan);
        // The entry goes at match time, before the data has landed: its UNLINK event comes
        // before the operation's events (the order HPE's libcxi tests expect, msg.c).
        if plan.unlink && unlink_event_on(&le) {
            events.push(unlink_event(pte, cx.pt, plan.list, &le, true));
        }
        if pte.opt(PtAllocOpts::EN_EVENT_MATCH) {
            events.push(TargetEvent {
                event_type: EventType::Match,
                ..base
            });
        }
        if comm_events_on(&le) {
            events.push(base);
            if rdzv_offload {
                events.push(TargetEvent {
                    event_type: EventType::Rendezvous,
                    get_issued,
                    initiator: rendezvous_dfa(
                        req.source_nid,
                        match_id_pid(cx.config.pid_bits, req.initiator),
                        cx.config.pid_bits,
                    ),
                    ..base
                });
            }
        }
    }
    let ct = (le.ct != CT_NONE && le.has(LeFlags::EVENT_CT_COMM)).then(|| CtUpdate {
        ct: le.ct,
        success_increment: if le.has(LeFlags::EVENT_CT_BYTES) {
            plan.matched
        } else {
            1
        },
    });
    let rendezvous = rdzv_offload.then(|| {
        if get_issued {
            bump(&mut cx.counters.rndzv_puts_offloaded, pool);
        }
        RendezvousGet {
            ptlte_index: cx.pt,
            buffer_id: le.buffer_id,
            ule_id: None,
            source_nid: req.source_nid,
            source_pid: match_id_pid(cx.config.pid_bits, req.initiator),
            initiator: req.initiator,
            rendezvous_id: req.rendezvous_id,
            put_match_bits: req.match_bits,
            remote_offset: req.remote_offset,
            use_offset_for_get: req.use_offset_for_get,
            length: plan.matched - plan.placed,
            source_offset: get_base(req.use_offset_for_get, req.remote_offset)
                .wrapping_add(plan.placed),
            dest_start: plan.start.wrapping_add(plan.placed),
            dest_lac: le.lac,
            get_issued,
        }
    });
    IncomingOutcome {
        return_code: ReturnCode::Ok,
        list: Some(plan.list),
        delivery: Some(Delivery {
            list: plan.list,
            buffer_id: le.buffer_id,
            lac: le.lac,
            start: plan.start,
            offset: plan.offset,
            length: plan.placed,
            header_bytes: plan.header_bytes,
            relaxed_body: le.has(LeFlags::UNRESTRICTED_BODY_RO),
            relaxed_end: le.has(LeFlags::UNRESTRICTED_END_RO),
        }),
        unexpected: None,
        events,
        ct,
        rendezvous,
    }
}

/// The communication event of a delivery (type per op).
fn request_event(pte: &Ptlte, pt: u16, req: &IncomingRequest, plan: &Plan) -> TargetEvent {
    TargetEvent {
        header_data: req.header_data,
        initiator: req.initiator,
        ptl_list: plan.list,
        rendezvous: req.op == NetOp::RendezvousPut && plan.list != PtlList::Request,
        auto_unlinked: plan.unlink,
        match_bits: req.match_bits,
        buffer_id: plan.le.buffer_id,
        vni: req.vni,
        mlength: plan.matched,
        rlength: req.rlength,
        remote_offset: req.remote_offset,
        start: plan.start,
        atomic: req.atomic,
        rendezvous_id: req.rendezvous_id,
        ..TargetEvent::new(
            req.op.event_type(),
            ReturnCode::Ok,
            pte.config.eq,
            pt,
            pte.long_events(),
        )
    }
}

/// UNLINK event for an entry (manual: `auto` false).
pub(crate) fn unlink_event(
    pte: &Ptlte,
    pt: u16,
    list: PtlList,
    le: &Le,
    auto: bool,
) -> TargetEvent {
    TargetEvent {
        ptl_list: list,
        auto_unlinked: auto,
        match_bits: le.match_bits,
        buffer_id: le.buffer_id,
        start: le.start,
        ..TargetEvent::new(
            EventType::Unlink,
            ReturnCode::Ok,
            pte.config.eq,
            pt,
            pte.long_events(),
        )
    }
}

/// A STATE_CHANGE event for the PtlTE (None without an EQ).
pub(crate) fn state_change_event(
    pte: &Ptlte,
    cx: &mut Cx<'_>,
    state: PtlteState,
    nic_reason: Option<ScReason>,
) -> Option<TargetEvent> {
    if !pte.has_eq() {
        return None;
    }
    Some(TargetEvent {
        state_change: Some(StateChange {
            ptlte_state: state,
            sc_reason: nic_reason,
            sc_nic_auto: nic_reason.is_some(),
        }),
        ..TargetEvent::new(
            EventType::StateChange,
            ReturnCode::Ok,
            pte.config.eq,
            cx.pt,
            pte.long_events(),
        )
    })
}

/// An error event of the request's type on the PtlTE's EQ (buffer id 0 when no entry).
fn error_event(
    pte: &Ptlte,
    pt: u16,
    req: &IncomingRequest,
    list: PtlList,
    le: Option<&Le>,
    rc: ReturnCode,
) -> TargetEvent {
    TargetEvent {
        header_data: req.header_data,
        initiator: req.initiator,
        ptl_list: list,
        match_bits: req.match_bits,
        buffer_id: le.map_or(0, |l| l.buffer_id),
        vni: req.vni,
        rlength: req.rlength,
        remote_offset: req.remote_offset,
        atomic: req.atomic,
        rendezvous_id: req.rendezvous_id,
        ..TargetEvent::new(
            req.op.event_type(),
            rc,
            pte.config.eq,
            pt,
            pte.long_events(),
        )
    }
}

/// The matched entry refuses the request (OP_VIOLATION, RESTRICTED_UNICAST, NO_SPACE): the
/// request is dropped, the entry untouched, an error event reports it.
fn refused(
    pte: &Ptlte,
    cx: &mut Cx<'_>,
    req: &IncomingRequest,
    list: PtlList,
    le: &Le,
    rc: ReturnCode,
) -> IncomingOutcome {
    if rc == ReturnCode::OpViolation {
        cx.counters.err_op_violation += 1;
    }
    let mut out = IncomingOutcome::dropped(rc);
    out.list = Some(list);
    if pte.has_eq() && !req.eq_full {
        out.events
            .push(error_event(pte, cx.pt, req, list, Some(le), rc));
    }
    out
}

/// Resource exhaustion. With `en_flowctrl` the PtlTE goes DISABLED (STATE_CHANGE with
/// sc_nic_auto, written in the EQ's reserved flow-control slot) and the request is dropped with
/// PT_DISABLED; otherwise it is dropped with ENTRY_NOT_FOUND and, if the EQ has room, an
/// ENTRY_NOT_FOUND event with buffer id 0 is posted.
fn exhausted(
    pte: &mut Ptlte,
    cx: &mut Cx<'_>,
    req: &IncomingRequest,
    why: Exhaustion,
    list: PtlList,
) -> IncomingOutcome {
    let c = &mut *cx.counters;
    if pte.opt(PtAllocOpts::EN_FLOWCTRL) {
        let reason = match why {
            Exhaustion::EqFull => {
                c.err_pt_disabled_eq_full += 1;
                ScReason::FcEqFull
            }
            Exhaustion::NoMatchInOverflow => {
                c.err_pt_disabled_no_match_in_overflow += 1;
                ScReason::FcNoMatch
            }
            Exhaustion::CantAllocUnexpected => {
                c.err_pt_disabled_cant_alloc_unexpected += 1;
                ScReason::FcUnexpectedFail
            }
            Exhaustion::RequestEmpty => {
                c.err_pt_disabled_req_empty += 1;
                ScReason::FcRequestFull
            }
        };
        pte.state = PtlteState::Disabled;
        if cx.config.count_triggering_drop {
            pte.drop_count = (pte.drop_count + 1) & DROP_COUNT_MASK;
        }
        tracing::debug!(pt = cx.pt, ?reason, "lpe flow control: PtlTE disabled");
        let mut out = IncomingOutcome::dropped(ReturnCode::PtDisabled);
        out.events.extend(state_change_event(
            pte,
            cx,
            PtlteState::Disabled,
            Some(reason),
        ));
        return out;
    }
    match why {
        Exhaustion::EqFull => c.err_entry_not_found_eq_full += 1,
        Exhaustion::NoMatchInOverflow => c.err_entry_not_found_no_match_in_overflow += 1,
        Exhaustion::CantAllocUnexpected => c.err_entry_not_found_cant_alloc_unexpected += 1,
        Exhaustion::RequestEmpty => c.err_entry_not_found_req_empty += 1,
    }
    let mut out = IncomingOutcome::dropped(ReturnCode::EntryNotFound);
    if pte.has_eq() && !req.eq_full && why != Exhaustion::EqFull {
        out.events.push(error_event(
            pte,
            cx.pt,
            req,
            list,
            None,
            ReturnCode::EntryNotFound,
        ));
    }
    out
}
