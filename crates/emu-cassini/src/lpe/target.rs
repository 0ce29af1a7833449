//! Target commands (cassini.md §2.2): APPEND, SEARCH, SEARCH_AND_DELETE, UNLINK, SETSTATE.

use super::counters::{bump, count_events};
use super::event::{CtUpdate, DelayedOp, RendezvousGet, StateChange, TargetEvent, rendezvous_dfa};
use super::hw::{
    CT_NONE, DROP_COUNT_IGNORE, DROP_COUNT_MASK, EventType, LeFlags, NID_ANY, PtAllocOpts, PtlList,
    PtlteState, RANK_ANY, ReturnCode, ScReason, match_id_ep, match_id_pid,
};
use super::incoming::{Cx, state_change_event, unlink_event};
use super::le::{Le, LinkedLe, UnexpectedHeader, initiator_matches};
use super::table::Ptlte;
use super::{Lpe, LpeConfig};

/// A target command the LPE refuses outright; the command queue reports it as a
/// COMMAND_FAILURE with [`CommandError::return_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The PtlTE index is 0, out of range, or not configured.
    #[error("PtlTE {0} is not allocated")]
    NoSuchPtlte(u16),
    /// The list is not valid for this command (e.g. APPEND to UNEXPECTED).
    #[error("list {0:?} not valid for this command")]
    InvalidList(PtlList),
    /// SETSTATE to a state software may not request (RESET, ETHERNET).
    #[error("state {0:?} cannot be set by a target command")]
    InvalidState(PtlteState),
}

impl CommandError {
    /// Return code of the COMMAND_FAILURE event (`C_RC_CMD_INVALID_ARG`).
    pub fn return_code(&self) -> ReturnCode {
        ReturnCode::CmdInvalidArg
    }
}

/// What a target command produced. Events go to the PtlTE's EQ in order; `ct` updates,
/// `rendezvous` Gets and `delayed` operations are for the caller to carry out;
/// `released_ules` lists unexpected headers that no longer exist (so data the caller attached
/// to them can be dropped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandOutcome {
    /// Target events, in posting order.
    pub events: Vec<TargetEvent>,
    /// Counting-event updates.
    pub ct: Vec<CtUpdate>,
    /// Rendezvous Gets to issue (an append completed a rendezvous put).
    pub rendezvous: Vec<RendezvousGet>,
    /// Delayed Gets/AMOs to perform now (an append matched their header).
    pub delayed: Vec<DelayedOp>,
    /// Unexpected headers removed by this command.
    pub released_ules: Vec<u64>,
}

impl CommandOutcome {
    fn push_event(&mut self, pte: &Ptlte, ev: TargetEvent) {
        if pte.has_eq() {
            self.events.push(ev);
        }
    }
}

fn base_event(pte: &Ptlte, pt: u16, ty: EventType, rc: ReturnCode) -> TargetEvent {
    TargetEvent::new(ty, rc, pte.config.eq, pt, pte.long_events())
}

/// Event for an unexpected header consumed by an append or a search-and-delete.
fn overflow_event(
    pte: &Ptlte,
    pt: u16,
    ule: &UnexpectedHeader,
    buffer_id: u16,
    auto_unlinked: bool,
) -> TargetEvent {
    TargetEvent {
        header_data: ule.header_data,
        initiator: ule.initiator,
        ptl_list: PtlList::Overflow,
        rendezvous: ule.rendezvous.is_some(),
        auto_unlinked,
        match_bits: ule.match_bits,
        buffer_id,
        vni: ule.vni,
        mlength: ule.mlength,
        rlength: ule.rlength,
        remote_offset: ule.remote_offset,
        start: ule.start,
        atomic: ule.atomic,
        rendezvous_id: ule.rendezvous.map_or(0, |r| r.rendezvous_id),
        ..base_event(pte, pt, ule.op.overflow_event_type(), ReturnCode::Ok)
    }
}

/// Whether an unexpected header satisfies an entry or search criteria: initiator, and for
/// NO_TRUNCATE criteria, the header's rlength fits in `room`.
fn ule_accept(
    config: &LpeConfig,
    pte: &Ptlte,
    crit: &Le,
    ule: &UnexpectedHeader,
    room: Option<u64>,
) -> bool {
    let logical = pte.opt(PtAllocOpts::USE_LOGICAL);
    (!pte.is_matching()
        || initiator_matches(crit.match_id, ule.initiator, config.pid_bits, logical))
        && (!crit.has(LeFlags::NO_TRUNCATE) || room.is_some_and(|r| ule.rlength <= r))
}

/// Match-bit criteria of `crit` on this PtlTE (a non-matching PtlTE ignores every bit).
fn crit_bits(pte: &Ptlte, crit: &Le) -> (u64, u64) {
    if pte.is_matching() {
        (crit.match_bits, crit.ignore_bits)
    } else {
        (0, u64::MAX)
    }
}

impl Lpe {
    /// APPEND `le` to `list` of PtlTE `pt`.
    ///
    /// A PRIORITY append first consumes matching unexpected headers in arrival order, one
    /// `*_OVERFLOW` event each; a use-once entry (or one that runs out of room) that consumes a
    /// header is never linked. Otherwise the entry takes a pool entry and is linked (LINK
    /// event); without a pool entry the append fails with NO_SPACE and the list becomes
    /// append-disabled until an append carrying `RESTART_SEQ`.
    pub fn append(
        &mut self,
        pt: u16,
        list: PtlList,
        le: Le,
    ) -> Result<CommandOutcome, CommandError> {
        let r = self.append_inner(pt, list, le);
        self.finish(r)
    }

    /// SEARCH the UNEXPECTED list for the first header matching `crit` (match bits, ignore
    /// bits, match id, and with NO_TRUNCATE, rlength <= `crit.length`): one SEARCH event, rc OK
    /// with the header's fields, or NO_MATCH.
    pub fn search(
        &mut self,
        pt: u16,
        list: PtlList,
        crit: &Le,
    ) -> Result<CommandOutcome, CommandError> {
        let r = self.search_inner(pt, list, crit);
        self.finish(r)
    }

    /// SEARCH_AND_DELETE on the UNEXPECTED list: removes every header matching `crit` (only the
    /// first with `USE_ONCE`), one `*_OVERFLOW` event per removed header, then a SEARCH event
    /// (OK if anything was removed, else NO_MATCH).
    pub fn search_and_delete(
        &mut self,
        pt: u16,
        list: PtlList,
        crit: &Le,
    ) -> Result<CommandOutcome, CommandError> {
        let r = self.search_and_delete_inner(pt, list, crit);
        self.finish(r)
    }

    /// UNLINK the first entry of `list` carrying `buffer_id`: UNLINK event rc OK, or
    /// ENTRY_NOT_FOUND when it is gone (already consumed). Always reported (a manual unlink is
    /// not affected by `EVENT_UNLINK_DISABLE`, which covers auto-unlinks).
    pub fn unlink(
        &mut self,
        pt: u16,
        list: PtlList,
        buffer_id: u16,
    ) -> Result<CommandOutcome, CommandError> {
        let r = self.unlink_inner(pt, list, buffer_id);
        self.finish(r)
    }

    /// SETSTATE. DISABLED is always accepted. Leaving DISABLED for ENABLED or
    /// SOFTWARE_MANAGED requires `drop_count` to equal the PtlTE's drop count (0xFFFFFF skips
    /// the check); on success the count restarts at 0, on mismatch the PtlTE stays DISABLED and
    /// the STATE_CHANGE event carries NO_MATCH. ENABLED <-> SOFTWARE_MANAGED needs no check.
    pub fn set_state(
        &mut self,
        pt: u16,
        state: PtlteState,
        drop_count: u32,
    ) -> Result<CommandOutcome, CommandError> {
        let r = self.set_state_inner(pt, state, drop_count);
        self.finish(r)
    }

    fn finish(
        &mut self,
        r: Result<CommandOutcome, CommandError>,
    ) -> Result<CommandOutcome, CommandError> {
        match &r {
            Ok(out) => {
                self.counters.success_cntr += 1;
                count_events(&mut self.counters, &out.events);
            }
            Err(_) => self.counters.fail_cntr += 1,
        }
        r
    }

    fn cx_for(&mut self, pt: u16) -> Result<(&mut Ptlte, Cx<'_>), CommandError> {
        let Lpe {
            table,
            pools,
            counters,
            config,
            next_ule_id,
        } = self;
        let pte = table.get_mut(pt).ok_or(CommandError::NoSuchPtlte(pt))?;
        if pte.state == PtlteState::Reset {
            return Err(CommandError::NoSuchPtlte(pt));
        }
        Ok((
            pte,
            Cx {
                pt,
                pools,
                counters,
                config,
                next_ule_id,
            },
        ))
    }

    fn append_inner(
        &mut self,
        pt: u16,
        list: PtlList,
        le: Le,
    ) -> Result<CommandOutcome, CommandError> {
        if list == PtlList::Unexpected {
            return Err(CommandError::InvalidList(list));
        }
        let (pte, mut cx) = self.cx_for(pt)?;
        bump(&mut cx.counters.append_cmds, pte.config.cntr_pool);
        let mut out = CommandOutcome::default();
        let link_event = |pte: &Ptlte, rc: ReturnCode| TargetEvent {
            ptl_list: list,
            match_bits: le.match_bits,
            buffer_id: le.buffer_id,
            start: le.start,
            ..base_event(pte, pt, EventType::Link, rc)
        };

        let Some(l) = pte.list_mut(list) else {
            return Err(CommandError::InvalidList(list));
        };
        if le.has(LeFlags::RESTART_SEQ) {
            l.append_disabled = false;
        }
        if l.append_disabled {
            out.push_event(pte, link_event(pte, ReturnCode::NoSpace));
            return Ok(out);
        }
        if list == PtlList::Priority && pte.state == PtlteState::SoftwareManaged {
            cx.counters.err_ptlte_sw_managed += 1;
            out.push_event(pte, link_event(pte, ReturnCode::PtlteSwManaged));
            return Ok(out);
        }

        if list == PtlList::Priority {
            let mut linked = LinkedLe::new(le);
            if consume_unexpected(pte, &mut cx, &mut linked, &mut out) {
                // Unlinked before ever being linked: no LINK event, no pool entry.
                bump(&mut cx.counters.append_success, pte.config.cntr_pool);
                return Ok(out);
            }
            // The entry keeps the local offset it reached while consuming headers.
            return Ok(link(pte, &mut cx, list, linked, out, link_event));
        }
        Ok(link(pte, &mut cx, list, LinkedLe::new(le), out, link_event))
    }

    fn search_inner(
        &mut self,
        pt: u16,
        list: PtlList,
        crit: &Le,
    ) -> Result<CommandOutcome, CommandError> {
        if list != PtlList::Unexpected {
            return Err(CommandError::InvalidList(list));
        }
        let (pte, mut cx) = self.cx_for(pt)?;
        cx.counters.search_cmds += 1;
        count_search_wildcards(pte, &mut cx, crit);
        let (bits, ignore) = crit_bits(pte, crit);
        let config = cx.config;
        let found = pte
            .unexpected
            .find_match(bits, ignore, |u| {
                ule_accept(config, pte, crit, u, Some(crit.length))
            })
            .and_then(|seq| pte.unexpected.get(seq).copied());
        let mut out = CommandOutcome::default();
        match found {
            Some(ule) => {
                cx.counters.search_success += 1;
                let ev = TargetEvent {
                    event_type: EventType::Search,
                    ptl_list: PtlList::Unexpected,
                    ..overflow_event(pte, pt, &ule, crit.buffer_id, false)
                };
                out.push_event(pte, ev);
            }
            None => {
                cx.counters.search_fail += 1;
                cx.counters.err_search_no_match += 1;
                out.push_event(pte, search_no_match(pte, pt, crit));
            }
        }
        Ok(out)
    }

    fn search_and_delete_inner(
        &mut self,
        pt: u16,
        list: PtlList,
        crit: &Le,
    ) -> Result<CommandOutcome, CommandError> {
        if list != PtlList::Unexpected {
            return Err(CommandError::InvalidList(list));
        }
        let (pte, mut cx) = self.cx_for(pt)?;
        cx.counters.search_delete_cmds += 1;
        count_search_wildcards(pte, &mut cx, crit);
        let (bits, ignore) = crit_bits(pte, crit);
        let mut out = CommandOutcome::default();
        let mut removed = 0u64;
        loop {
            let config = cx.config;
            let Some(seq) = pte.unexpected.find_match(bits, ignore, |u| {
                ule_accept(config, pte, crit, u, Some(crit.length))
            }) else {
                break;
            };
            let Some(ule) = pte.unexpected.remove(seq) else {
                break;
            };
            cx.pools.free(pte.config.pe, pte.config.le_pool, 1);
            removed += 1;
            out.released_ules.push(ule.id);
            let ev = overflow_event(pte, pt, &ule, crit.buffer_id, false);
            out.push_event(pte, ev);
            if crit.has(LeFlags::USE_ONCE) {
                break;
            }
        }
        if removed > 0 {
            cx.counters.search_delete_success += removed;
            out.push_event(
                pte,
                TargetEvent {
                    ptl_list: PtlList::Unexpected,
                    match_bits: crit.match_bits,
                    buffer_id: crit.buffer_id,
                    ..base_event(pte, pt, EventType::Search, ReturnCode::Ok)
                },
            );
        } else {
            cx.counters.search_delete_fail += 1;
            cx.counters.err_search_no_match += 1;
            out.push_event(pte, search_no_match(pte, pt, crit));
        }
        Ok(out)
    }

    fn unlink_inner(
        &mut self,
        pt: u16,
        list: PtlList,
        buffer_id: u16,
    ) -> Result<CommandOutcome, CommandError> {
        if list == PtlList::Unexpected {
            return Err(CommandError::InvalidList(list));
        }
        let (pte, cx) = self.cx_for(pt)?;
        cx.counters.unlink_cmds += 1;
        let mut out = CommandOutcome::default();
        let removed = pte
            .list_mut(list)
            .and_then(|l| l.find_buffer(buffer_id).and_then(|seq| l.remove(seq)));
        match removed {
            Some(linked) => {
                cx.pools.free(pte.config.pe, pte.config.le_pool, 1);
                cx.counters.unlink_success += 1;
                out.push_event(pte, unlink_event(pte, pt, list, &linked.le, false));
            }
            None => {
                cx.counters.err_entry_not_found_unlink_failed += 1;
                out.push_event(
                    pte,
                    TargetEvent {
                        ptl_list: list,
                        buffer_id,
                        ..base_event(pte, pt, EventType::Unlink, ReturnCode::EntryNotFound)
                    },
                );
            }
        }
        Ok(out)
    }

    fn set_state_inner(
        &mut self,
        pt: u16,
        state: PtlteState,
        drop_count: u32,
    ) -> Result<CommandOutcome, CommandError> {
        if matches!(state, PtlteState::Reset | PtlteState::Ethernet) {
            return Err(CommandError::InvalidState(state));
        }
        let (pte, mut cx) = self.cx_for(pt)?;
        let pool = pte.config.cntr_pool;
        bump(&mut cx.counters.setstate_cmds, pool);
        let mut out = CommandOutcome::default();
        let drop_count = drop_count & DROP_COUNT_MASK;
        if state != PtlteState::Disabled
            && pte.state == PtlteState::Disabled
            && drop_count != DROP_COUNT_IGNORE
            && drop_count != pte.drop_count
        {
            cx.counters.err_setstate_no_match += 1;
            if pte.has_eq() {
                out.events.push(TargetEvent {
                    state_change: Some(StateChange {
                        ptlte_state: pte.state,
                        sc_reason: None,
                        sc_nic_auto: false,
                    }),
                    ..base_event(pte, pt, EventType::StateChange, ReturnCode::NoMatch)
                });
            }
            return Ok(out);
        }
        if state != PtlteState::Disabled && pte.state == PtlteState::Disabled {
            pte.drop_count = 0;
        }
        pte.state = state;
        bump(&mut cx.counters.setstate_success, pool);
        out.events
            .extend(state_change_event(pte, &mut cx, state, None));
        tracing::debug!(pt, ?state, "lpe setstate");
        Ok(out)
    }
}

fn search_no_match(pte: &Ptlte, pt: u16, crit: &Le) -> TargetEvent {
    TargetEvent {
        ptl_list: PtlList::Unexpected,
        match_bits: crit.match_bits,
        buffer_id: crit.buffer_id,
        initiator: crit.match_id,
        ..base_event(pte, pt, EventType::Search, ReturnCode::NoMatch)
    }
}

/// Counters `search_{nid,pid,rank}_any` for wildcard fields of a search.
fn count_search_wildcards(pte: &Ptlte, cx: &mut Cx<'_>, crit: &Le) {
    let pool = pte.config.cntr_pool;
    let pid_bits = cx.config.pid_bits;
    let pid_any = pid_bits.pid_mask();
    if match_id_pid(pid_bits, crit.match_id) == pid_any {
        bump(&mut cx.counters.search_pid_any, pool);
    }
    let ep = match_id_ep(pid_bits, crit.match_id);
    if pte.opt(PtAllocOpts::USE_LOGICAL) {
        if ep == RANK_ANY & ((1u32 << (32 - pid_bits.get())) - 1) {
            bump(&mut cx.counters.search_rank_any, pool);
        }
    } else if ep & NID_ANY == NID_ANY {
        bump(&mut cx.counters.search_nid_any, pool);
    }
}

/// PRIORITY append: consumes matching unexpected headers into `linked` in arrival order.
/// Returns true when the entry unlinked itself (use_once, or min_free reached).
fn consume_unexpected(
    pte: &mut Ptlte,
    cx: &mut Cx<'_>,
    linked: &mut LinkedLe,
    out: &mut CommandOutcome,
) -> bool {
    let le = linked.le;
    let pt = cx.pt;
    let manage_local = le.has(LeFlags::MANAGE_LOCAL);
    let comm_on = !le.has(LeFlags::EVENT_COMM_DISABLE) && !le.has(LeFlags::EVENT_SUCCESS_DISABLE);
    let unlink_on = !le.has(LeFlags::EVENT_UNLINK_DISABLE);
    let (bits, ignore) = crit_bits(pte, &le);
    let min_free = u64::from(le.min_free) << cx.config.min_free_shift;
    loop {
        let config = cx.config;
        let cur = *linked;
        let Some(seq) = pte.unexpected.find_match(bits, ignore, |u| {
            let room = ule_room(&cur, u);
            u.op.permitted_by(le.flags) && ule_accept(config, pte, &le, u, room)
        }) else {
            return false;
        };
        let Some(ule) = pte.unexpected.remove(seq) else {
            return false;
        };
        cx.pools.free(pte.config.pe, pte.config.le_pool, 1);
        out.released_ules.push(ule.id);

        let offset = if manage_local {
            linked.local_offset
        } else {
            ule_target_offset(&ule)
        };
        let room = le.length.saturating_sub(offset);
        let total = ule.rlength.min(room);
        if manage_local {
            linked.local_offset = linked.local_offset.saturating_add(total);
        }
        let unlink =
            le.has(LeFlags::USE_ONCE) || (manage_local && min_free > 0 && room - total < min_free);
        let dest = le.start.wrapping_add(offset);

        let ev = overflow_event(pte, pt, &ule, le.buffer_id, unlink);
        if comm_on && pte.has_eq() {
            out.events.push(ev);
        }
        if le.ct != CT_NONE && le.has(LeFlags::EVENT_CT_OVERFLOW) {
            out.ct.push(CtUpdate {
                ct: le.ct,
                success_increment: if le.has(LeFlags::EVENT_CT_BYTES) {
                    ule.mlength
                } else {
                    1
                },
            });
        }
        if let Some(r) = ule.rendezvous {
            let eager = ule.mlength.min(total);
            // Nothing left to pull (the LE is no longer than the eager part): the NIC
            // issues no Get and says so, and software pulls what lets the source complete.
            let issued = cx.config.rdzv_get_en && total > eager;
            if issued {
                bump(&mut cx.counters.rndzv_puts_offloaded, pte.config.cntr_pool);
            }
            out.rendezvous.push(RendezvousGet {
                ptlte_index: pt,
                buffer_id: le.buffer_id,
                ule_id: Some(ule.id),
                source_nid: r.source_nid,
                source_pid: match_id_pid(cx.config.pid_bits, ule.initiator),
                initiator: ule.initiator,
                rendezvous_id: r.rendezvous_id,
                put_match_bits: ule.match_bits,
                remote_offset: ule.remote_offset,
                use_offset_for_get: r.use_offset_for_get,
                length: total - eager,
                source_offset: super::incoming::get_base(r.use_offset_for_get, ule.remote_offset)
                    .wrapping_add(eager),
                dest_start: dest.wrapping_add(eager),
                dest_lac: le.lac,
                get_issued: issued,
            });
            if comm_on && pte.has_eq() {
                out.events.push(TargetEvent {
                    event_type: EventType::Rendezvous,
                    get_issued: issued,
                    initiator: rendezvous_dfa(
                        r.source_nid,
                        match_id_pid(cx.config.pid_bits, ule.initiator),
                        cx.config.pid_bits,
                    ),
                    mlength: total,
                    start: dest,
                    ptl_list: PtlList::Priority,
                    ..ev
                });
            }
        }
        if ule.op.is_get_or_amo() {
            out.delayed.push(super::event::DelayedOp {
                ule_id: ule.id,
                op: ule.op,
                initiator: ule.initiator,
                ptlte_index: pt,
                buffer_id: le.buffer_id,
                start: dest,
                lac: le.lac,
                mlength: total,
                rlength: ule.rlength,
            });
        }
        if unlink {
            if unlink_on && pte.has_eq() {
                out.events
                    .push(unlink_event(pte, pt, PtlList::Priority, &le, true));
            }
            return true;
        }
    }
}

/// Room an entry has for a header (None when the header's offset is past the end).
fn ule_room(e: &LinkedLe, ule: &UnexpectedHeader) -> Option<u64> {
    let offset = if e.le.has(LeFlags::MANAGE_LOCAL) {
        e.local_offset
    } else {
        ule_target_offset(ule)
    };
    e.le.length.checked_sub(offset)
}

/// Target offset of a header's data in a non-locally-managed entry: its remote offset, or 0
/// for a rendezvous put whose remote offset is the source's (`use_offset_for_get`).
fn ule_target_offset(ule: &UnexpectedHeader) -> u64 {
    match ule.rendezvous {
        Some(r) if r.use_offset_for_get => 0,
        _ => ule.remote_offset,
    }
}

/// Takes a pool entry and links; NO_SPACE (or, with `en_sw_hw_st_chng` on an ENABLED PtlTE's
/// priority list, PTLTE_SW_MANAGED plus a NIC transition to SOFTWARE_MANAGED) when none is left.
fn link(
    pte: &mut Ptlte,
    cx: &mut Cx<'_>,
    list: PtlList,
    linked: LinkedLe,
    mut out: CommandOutcome,
    link_event: impl Fn(&Ptlte, ReturnCode) -> TargetEvent,
) -> CommandOutcome {
    let le = linked.le;
    if !cx.pools.try_alloc(pte.config.pe, pte.config.le_pool) {
        cx.counters.err_no_space_append += 1;
        if let Some(l) = pte.list_mut(list) {
            l.append_disabled = true;
        }
        if list == PtlList::Priority
            && pte.state == PtlteState::Enabled
            && pte.opt(PtAllocOpts::EN_SW_HW_ST_CHNG)
        {
            pte.state = PtlteState::SoftwareManaged;
            out.push_event(pte, link_event(pte, ReturnCode::PtlteSwManaged));
            out.events.extend(state_change_event(
                pte,
                cx,
                PtlteState::SoftwareManaged,
                Some(ScReason::SmAppendFail),
            ));
        } else {
            out.push_event(pte, link_event(pte, ReturnCode::NoSpace));
        }
        tracing::debug!(pt = cx.pt, ?list, "lpe append: no list entry left");
        return out;
    }
    if let Some(l) = pte.list_mut(list) {
        let seq = l.push(le);
        if let Some(e) = l.get_mut(seq) {
            e.local_offset = linked.local_offset;
        }
    }
    bump(&mut cx.counters.append_success, pte.config.cntr_pool);
    // LINK is suppressed only by EVENT_LINK_DISABLE (`ptl_le.c: le_append_pt`; libfabric's
    // MR code and libcxi's utilities wait for the LINK of SUCCESS_DISABLE entries).
    if !le.has(LeFlags::EVENT_LINK_DISABLE) {
        out.push_event(pte, link_event(pte, ReturnCode::Ok));
    }
    out
}
