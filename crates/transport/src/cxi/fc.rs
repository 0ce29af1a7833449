//! Flow-control recovery, the CXI provider's protocol (cassini.md §4.3, fi_cxi.7; own code).
//!
//! The receive PtlTE is allocated with `en_flowctrl`: when a flood of unexpected messages
//! exhausts its resources (overflow or request buffers, unexpected-header list entries, EQ
//! slots) the NIC disables it, reports a STATE_CHANGE (DISABLED, `sc_nic_auto`, a reason)
//! and drops everything that arrives, answering each sender with `C_RC_PT_DISABLED` and
//! counting the drops.
//!
//! - **Senders.** A send acknowledged with PT_DISABLED is kept for a replay and its peer is
//!   *held*: later sends to it are queued, not issued. When no send to the peer is in flight
//!   any more, the sender tells the peer how many of its messages were dropped (FC_NOTIFY, a
//!   control message to the peer's control LE, which is never flow controlled). On FC_RESUME
//!   it issues the dropped and the queued sends again, in the order they were first
//!   started, so MPI's non-overtaking order holds.
//! - **Receiver, hybrid mode, first time.** The endpoint switches to software matching:
//!   one SEARCH_AND_DELETE moves every unexpected header off the NIC (their eager bytes were
//!   already copied out of the overflow buffers) into the software unexpected queue in
//!   arrival order, every receive still posted as a priority LE is unlinked and posted to
//!   the software queue in posting order, the overflow buffers are retired and request
//!   buffers appended.
//! - **Receiver, every time.** Once the drops reported by FC_NOTIFY add up to the PtlTE's
//!   drop count (plus the triggering message Cassini 1 does not count, as libfabric's count
//!   starting at -1 there), the PtlTE goes to SOFTWARE_MANAGED (`cxil_pte_transition_sm`,
//!   which checks the count), and every peer that reported drops gets FC_RESUME.
//!
//! A hybrid endpoint still matching in hardware whose priority-LE append fails (NO_SPACE:
//! the LE pool is shared with the unexpected headers) disables the PtlTE itself and
//! recovers the same way.
//!
//! - **Receiver, hardware mode.** As the CXI provider (`cxip_recv_pte_cb`): an episode for a
//!   full EQ (FC_EQ_FULL) or exhausted overflow buffers (FC_NO_MATCH) needs no list entries
//!   back, so it recovers in hardware matching: the unexpected headers are onloaded into the
//!   software unexpected queue (which receives, probes and claims search before the NIC's
//!   lists from then on), the posted receives stay on the NIC, and once every drop is
//!   reported a SETSTATE(ENABLED, drop count) re-enables the PtlTE (a NO_MATCH answer means
//!   a drop came in meanwhile: wait for its report). An episode for unexpected-header LEs
//!   (FC_UNEXPECTED_FAIL) recovers only if a receive freed one of them meanwhile, and is
//!   otherwise fatal with the provider's message, as is a failed append.

use driver::clock::Instant;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use firmware_spec::cassini::cmd::TgtOp;
use firmware_spec::cassini::csr::Generation;
use firmware_spec::cassini::event::TargetLong;
use firmware_spec::cassini::le::{LeFlags, PtlList, PtlteState, ScReason};
use firmware_spec::cassini::pci::CassiniVersion;
use firmware_spec::cassini::rc::ReturnCode;

use super::endpoint::{Buf, RMA_INDEX};
use super::proto::{self, FC_NOTIFY, FC_RESUME, NOTICE};
use super::{CxiTransport, LandingBuf, MatchMode, SwMsg};
use crate::error::{Error, Result};
use crate::{Envelope, OpId, Rank};

/// How long a control message the peer could not take waits before it is sent again.
const CTRL_RETRY: Duration = Duration::from_millis(1);

/// A control message in flight (sent again if the peer's NIC refused it).
pub(super) struct CtrlMsg {
    to: Rank,
    kind: u64,
    value: u64,
    retry_at: Option<Instant>,
}

/// Flow-control state of this rank as a sender to one peer.
#[derive(Default)]
pub(super) struct PeerFc {
    /// Sends issued to the peer and not yet acknowledged.
    inflight: usize,
    /// The peer's PtlTE dropped some of our messages: send nothing new.
    held: bool,
    /// FC_NOTIFY sent; waiting for FC_RESUME.
    notified: bool,
    /// Dropped sends (ids), and sends started while held.
    replay: BTreeSet<u64>,
    /// Drops not yet reported.
    drops: u64,
}

/// An unexpected header moved off the NIC, waiting for its eager bytes.
struct Onloaded {
    initiator: u32,
    bits: u64,
    rlength: u32,
    start: u64,
    header_data: u64,
}

/// An onload of the unexpected headers under way: the switch of a hybrid endpoint to
/// software matching, or a hardware-mode recovery that keeps matching in hardware.
struct Switch {
    /// The endpoint moves to software matching (else it stays in hardware matching).
    to_software: bool,
    /// The SEARCH_AND_DELETE of the unexpected list answered.
    onloaded: bool,
    headers: Vec<Onloaded>,
    /// Receives being unlinked from the priority list: (operation, buffer id).
    unlinks: Vec<(u64, u16)>,
}

/// Flow-control state of this rank's receive PtlTE.
#[derive(Default)]
pub(super) struct RxFc {
    /// The NIC disabled the PtlTE and recovery is under way.
    active: bool,
    switch: Option<Switch>,
    /// Drops reported by FC_NOTIFY in this episode.
    reported: u64,
    /// Peers that reported drops (they get FC_RESUME).
    notifiers: BTreeSet<Rank>,
    /// Something changed that may allow re-enabling.
    dirty: bool,
    /// The NIC disabled the PtlTE (its drop count misses the triggering message on
    /// Cassini 1), rather than software.
    auto: bool,
    /// Software asked for DISABLED (a failed append) and waits for the STATE_CHANGE.
    forcing: bool,
    /// Hardware mode: the episode re-enables the PtlTE in hardware matching.
    in_hardware: bool,
    /// Hardware mode: the episode was for unexpected-header LEs (FC_UNEXPECTED_FAIL), so it
    /// can recover only once a receive frees one.
    needs_ule: bool,
    /// Hardware mode: a receive matched an unexpected header during the episode.
    ule_freed: bool,
    /// Hardware mode: SETSTATE(ENABLED) sent, its STATE_CHANGE not yet seen.
    enabling: bool,
}

/// All flow-control state.
#[derive(Default)]
pub(super) struct FcState {
    pub(super) peers: BTreeMap<Rank, PeerFc>,
    pub(super) rx: RxFc,
    pub(super) ctrl: BTreeMap<u64, CtrlMsg>,
}

impl CxiTransport {
    // ---- control messages ----

    /// Send control message `kind` carrying `value` to `to`'s control LE.
    pub(super) fn send_ctrl(&mut self, to: Rank, kind: u64, value: u64) -> Result<()> {
        let id = self.new_op();
        self.fc.ctrl.insert(
            id,
            CtrlMsg {
                to,
                kind,
                value,
                retry_at: None,
            },
        );
        self.emit_ctrl(id)
    }

    fn emit_ctrl(&mut self, id: u64) -> Result<()> {
        let Some(m) = self.fc.ctrl.get_mut(&id) else {
            return Ok(());
        };
        m.retry_at = None;
        let (to, kind, value) = (m.to, m.kind, m.value);
        let addr = self.peers[to as usize];
        self.ep.idc_msg(
            addr,
            RMA_INDEX,
            proto::ctrl_bits(kind),
            value,
            id,
            &[],
            false,
        )
    }

    /// The ACK of control message `id`; `true` if `id` was one.
    pub(super) fn on_ctrl_ack(&mut self, id: u64, rc: ReturnCode) -> bool {
        let Some(m) = self.fc.ctrl.get_mut(&id) else {
            return false;
        };
        match rc {
            ReturnCode::Ok => {
                self.fc.ctrl.remove(&id);
            }
            // The peer's NIC had no room for it (its EQ was full): again, a little later.
            ReturnCode::EntryNotFound | ReturnCode::PtDisabled => {
                m.retry_at = Instant::now().checked_add(CTRL_RETRY);
                self.bump("ctrl_retries");
            }
            // The peer is gone.
            _ => {
                self.fc.ctrl.remove(&id);
            }
        }
        true
    }

    /// A control message arrived on the control LE.
    pub(super) fn on_ctrl(&mut self, t: &TargetLong) -> Result<()> {
        if t.return_code != ReturnCode::Ok {
            return Ok(());
        }
        let from = self.rank_of(t.initiator)?;
        match proto::ctrl_kind(t.match_bits) {
            NOTICE => self.on_notice(t.header_data),
            FC_NOTIFY => {
                self.bump("fc_notify_received");
                if !self.fc.rx.active && self.rx_pte_takes_messages()? {
                    // The drops belong to an episode that ended by the time their report
                    // came (the NIC disabled the PtlTE again just before our re-enable,
                    // which its drop count could not tell): the sender may replay now.
                    self.bump("fc_late_notify");
                    return self.send_ctrl(from, FC_RESUME, 0);
                }
                self.fc.rx.reported = self.fc.rx.reported.saturating_add(t.header_data);
                self.fc.rx.notifiers.insert(from);
                self.fc.rx.dirty = true;
            }
            FC_RESUME => self.on_resume(from)?,
            _ => {}
        }
        Ok(())
    }

    // ---- sender side ----

    /// Whether sends to `dest` are held.
    pub(super) fn fc_holds(&self, dest: Rank) -> bool {
        self.fc.peers.get(&dest).is_some_and(|p| p.held)
    }

    /// Send `id` to `dest` waits for the peer's FC_RESUME.
    pub(super) fn fc_queue(&mut self, dest: Rank, id: u64) {
        self.fc.peers.entry(dest).or_default().replay.insert(id);
    }

    /// A send to `dest` went on the wire.
    pub(super) fn fc_issued(&mut self, dest: Rank) {
        self.fc.peers.entry(dest).or_default().inflight += 1;
    }

    /// The ACK of send `id` to `dest`; `false` if the send was dropped by flow control (it
    /// will be replayed).
    pub(super) fn fc_acked(&mut self, id: u64, dest: Rank, rc: ReturnCode) -> Result<bool> {
        let dropped = rc == ReturnCode::PtDisabled;
        let p = self.fc.peers.entry(dest).or_default();
        p.inflight = p.inflight.saturating_sub(1);
        if dropped {
            p.held = true;
            p.drops += 1;
            p.replay.insert(id);
            self.bump("fc_dropped");
        }
        self.fc_maybe_notify(dest)?;
        Ok(!dropped)
    }

    /// Report our drops to `dest` once nothing to it is in flight.
    fn fc_maybe_notify(&mut self, dest: Rank) -> Result<()> {
        let Some(p) = self.fc.peers.get_mut(&dest) else {
            return Ok(());
        };
        if !p.held || p.notified || p.inflight > 0 {
            return Ok(());
        }
        p.notified = true;
        let drops = std::mem::take(&mut p.drops);
        self.bump("fc_notify_sent");
        self.send_ctrl(dest, FC_NOTIFY, drops)
    }

    /// `from` recovered: replay what it dropped and what waited, in order.
    fn on_resume(&mut self, from: Rank) -> Result<()> {
        let Some(p) = self.fc.peers.get_mut(&from) else {
            return Ok(());
        };
        if !p.notified {
            return Ok(());
        }
        p.notified = false;
        p.held = false;
        let ids = std::mem::take(&mut p.replay);
        for id in ids {
            if let Some(op) = self.sends.get_mut(&id) {
                op.acked = false;
                self.bump("fc_replayed");
                self.issue_send(id)?;
            }
        }
        Ok(())
    }

    // ---- receiver side ----

    /// The receive PtlTE was disabled: by the NIC (`auto`, for `reason`) or by software
    /// after a failed append.
    pub(super) fn fc_disabled(&mut self, reason: Option<ScReason>, auto: bool) -> Result<()> {
        let hardware = self.cfg.mode == MatchMode::Hardware;
        let recoverable_in_hw = matches!(
            reason,
            Some(ScReason::FcEqFull | ScReason::FcNoMatch | ScReason::FcUnexpectedFail)
        );
        if (hardware && !recoverable_in_hw) || reason == Some(ScReason::DisUncor) {
            return Err(self.flow_control_error());
        }
        if self.fc.rx.active {
            return Ok(());
        }
        self.bump("flow_control");
        let rx = &mut self.fc.rx;
        rx.active = true;
        rx.dirty = true;
        rx.auto = auto;
        rx.in_hardware = hardware;
        rx.needs_ule = hardware && reason == Some(ScReason::FcUnexpectedFail);
        rx.ule_freed = false;
        if !self.software && rx.switch.is_none() {
            self.start_onload(!hardware)?;
        }
        Ok(())
    }

    /// A receive matched an unexpected header (its list entry is free again).
    pub(super) fn fc_ule_freed(&mut self) {
        if self.fc.rx.active {
            self.fc.rx.ule_freed = true;
        }
    }

    /// Hybrid, still matching in hardware: an append found no list entry left (the LE pool
    /// is shared with the unexpected headers). As libfabric does, software disables the
    /// PtlTE itself and recovers as from flow control, switching to software matching; the
    /// receive whose append failed is posted in software then.
    pub(super) fn fc_append_failed(&mut self, bid: u16) -> Result<()> {
        if let Some(&id) = self.bids.get(&bid)
            && let Some(r) = self.recvs.get_mut(&id)
        {
            r.append_failed = true;
        }
        self.bump("append_failed");
        if self.fc.rx.active || self.fc.rx.forcing {
            return Ok(());
        }
        self.fc.rx.forcing = true;
        let cmd = self.ep.rx.pte.set_state_cmd(PtlteState::Disabled, 0);
        self.ep.emit(true, |q| q.emit_set_state(&cmd))?;
        self.ep.ring_tg()
    }

    /// A STATE_CHANGE to DISABLED that software asked for.
    pub(super) fn fc_forced(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.fc.rx.forcing) {
            return Ok(());
        }
        self.fc_disabled(None, false)
    }

    /// Take the unexpected headers off the NIC and, when the endpoint moves to software
    /// matching (hybrid), the posted receives too.
    fn start_onload(&mut self, to_software: bool) -> Result<()> {
        self.ep.target_cmd(
            TgtOp::SearchAndDelete,
            PtlList::Unexpected,
            LeFlags::empty(),
            u32::MAX,
            0,
            u64::MAX,
            proto::ONLOAD_BID,
        )?;
        let mut posted: Vec<(u64, u16)> = self
            .recvs
            .iter()
            .filter(|_| to_software)
            .filter(|(_, r)| r.spec.is_some() && r.env.is_none() && !r.cancelling)
            .map(|(&id, r)| (id, r.bid))
            .collect();
        posted.sort_unstable();
        let pte = self.ep.rx.pte.clone();
        for &(_, bid) in &posted {
            self.ep
                .target_cmd_on(&pte, TgtOp::Unlink, PtlList::Priority, bid)?;
        }
        self.fc.rx.switch = Some(Switch {
            to_software,
            onloaded: false,
            headers: Vec::new(),
            unlinks: posted,
        });
        Ok(())
    }

    /// A PUT_OVERFLOW of the onload: one unexpected header, in list order.
    pub(super) fn on_onloaded(&mut self, t: &TargetLong) {
        if let Some(s) = &mut self.fc.rx.switch {
            s.headers.push(Onloaded {
                initiator: t.initiator,
                bits: t.match_bits,
                rlength: t.rlength,
                start: t.start,
                header_data: t.header_data,
            });
        }
    }

    /// Whether an onload is under way (receives, probes and claims wait for it).
    pub(super) fn fc_switching(&self) -> bool {
        self.fc.rx.switch.is_some()
    }

    /// Whether anything of flow control still needs this rank's progress.
    /// The receive PtlTE is in flow control (disabled, being recovered).
    pub(super) fn fc_rx_active(&self) -> bool {
        self.fc.rx.active
    }

    pub(super) fn fc_busy(&self) -> bool {
        self.fc.rx.active || !self.fc.ctrl.is_empty() || self.fc.peers.values().any(|p| p.held)
    }

    /// Advance flow control: resend refused control messages, finish a switch, re-enable.
    pub(super) fn fc_step(&mut self) -> Result<()> {
        if !self.fc.ctrl.is_empty() {
            let now = Instant::now();
            let due: Vec<u64> = self
                .fc
                .ctrl
                .iter()
                .filter(|(_, m)| m.retry_at.is_some_and(|t| t <= now))
                .map(|(&id, _)| id)
                .collect();
            for id in due {
                self.emit_ctrl(id)?;
            }
        }
        if !self.fc.rx.active {
            return Ok(());
        }
        if self.fc.rx.switch.is_some() {
            if !self.switch_ready() {
                return Ok(());
            }
            self.finish_switch()?;
        }
        self.try_reenable()
    }

    /// Every answer of the switch is in and every onloaded header has its bytes.
    fn switch_ready(&mut self) -> bool {
        let Some(s) = &mut self.fc.rx.switch else {
            return false;
        };
        if !s.onloaded && self.answers.remove(&proto::ONLOAD_BID).is_some() {
            s.onloaded = true;
        }
        if !s.onloaded
            || s.unlinks
                .iter()
                .any(|(_, bid)| !self.answers.contains_key(bid))
            || !self.ux_waiting.is_empty()
        {
            return false;
        }
        s.headers.iter().all(|h| {
            self.ux_data.get(&h.start).is_some_and(|v| {
                v.iter()
                    .any(|(k, _)| *k == (h.initiator, h.bits, h.rlength))
            })
        })
    }

    fn finish_switch(&mut self) -> Result<()> {
        let Some(s) = self.fc.rx.switch.take() else {
            return Ok(());
        };
        if !s.to_software {
            return self.finish_hw_onload(s.headers);
        }
        self.software = true;
        // The unexpected messages, in the NIC's order.
        for h in s.headers {
            let key = (h.initiator, h.bits, h.rlength);
            let data = super::rx::take_at(&mut self.ux_data, h.start, key).unwrap_or_default();
            let env = Envelope {
                source: self.rank_of(h.initiator)?,
                bits: proto::user_bits(h.bits),
                len: h.rlength as usize,
            };
            let msg = SwMsg {
                eager: data,
                bits: h.bits,
                header_data: h.header_data,
            };
            self.bump("onloaded");
            if let Some((p, msg)) = self.matcher.arrive(env, msg) {
                self.sw_deliver(p.op.0, env, msg)?;
            }
        }
        // The receives that were still posted, in posting order.
        for (id, bid) in s.unlinks {
            let unlinked = self
                .answers
                .remove(&bid)
                .is_some_and(|a| a.return_code == ReturnCode::Ok);
            let Some(r) = self.recvs.get_mut(&id) else {
                continue;
            };
            if !unlinked && !r.append_failed {
                // Matched before the PtlTE stopped: its events complete it.
                continue;
            }
            let Some(spec) = r.spec.take() else {
                continue;
            };
            if let Some(b) = r.buf.take() {
                self.ep.release(b);
            }
            self.bump("reposted");
            if let Some((u, _)) = self.matcher.post(OpId(id), spec, id) {
                self.sw_deliver(id, u.envelope, u.data)?;
            }
        }
        // Overflow buffers go; request buffers come.
        let pte = self.ep.rx.pte.clone();
        for i in 1..self.landing.len() {
            let lb = &mut self.landing[i];
            if lb.retired {
                continue;
            }
            lb.retired = true;
            if !lb.unlinked {
                lb.unlinked = true;
                let bid = proto::BUF_BID + i as u16;
                self.ep
                    .target_cmd_on(&pte, TgtOp::Unlink, PtlList::Overflow, bid)?;
            }
        }
        self.ux_data.clear();
        for _ in 0..self.cfg.req_count {
            let buf: Buf = self.ep.buf(self.cfg.req_size)?;
            self.landing.push(LandingBuf::new(buf));
            let i = self.landing.len() - 1;
            self.append_landing(i)?;
        }
        self.fc.rx.dirty = true;
        Ok(())
    }

    /// Hardware mode: the onloaded headers join the software unexpected queue (behind
    /// those of earlier episodes, so arrival order holds), and their overflow-buffer space
    /// is free.
    fn finish_hw_onload(&mut self, headers: Vec<Onloaded>) -> Result<()> {
        for h in headers {
            let key = (h.initiator, h.bits, h.rlength);
            let data = super::rx::take_at(&mut self.ux_data, h.start, key).unwrap_or_default();
            self.ux_consumed(h.start)?;
            let env = Envelope {
                source: self.rank_of(h.initiator)?,
                bits: proto::user_bits(h.bits),
                len: h.rlength as usize,
            };
            let msg = SwMsg {
                eager: data,
                bits: h.bits,
                header_data: h.header_data,
            };
            self.bump("onloaded");
            // No receive is ever posted in software in hardware mode: it queues.
            if let Some((p, msg)) = self.matcher.arrive(env, msg) {
                self.sw_deliver(p.op.0, env, msg)?;
            }
        }
        self.fc.rx.dirty = true;
        Ok(())
    }

    /// Hardware mode: the STATE_CHANGE answering our SETSTATE(ENABLED); `true` if it was.
    pub(super) fn fc_enable_answer(&mut self, rc: ReturnCode, state: PtlteState) -> Result<bool> {
        if !self.fc.rx.enabling {
            return Ok(false);
        }
        self.fc.rx.enabling = false;
        if rc == ReturnCode::Ok && state == PtlteState::Enabled {
            self.fc_recovered()?;
        } else {
            // A drop came in after the status was read: its sender will report it.
            self.bump("fc_reenable_refused");
            self.fc.rx.dirty = true;
        }
        Ok(true)
    }

    /// The PtlTE takes messages again: the peers that reported drops replay them.
    fn fc_recovered(&mut self) -> Result<()> {
        self.fc.rx.active = false;
        self.fc.rx.reported = 0;
        self.bump("fc_recovered");
        let peers = std::mem::take(&mut self.fc.rx.notifiers);
        for p in peers {
            self.send_ctrl(p, FC_RESUME, 0)?;
        }
        Ok(())
    }

    /// Re-enable the PtlTE once every drop has been reported: SOFTWARE_MANAGED (hybrid and
    /// software modes), or ENABLED again in hardware mode.
    fn try_reenable(&mut self) -> Result<()> {
        if !self.fc.rx.dirty || self.fc.rx.enabling {
            return Ok(());
        }
        self.fc.rx.dirty = false;
        let pte = self.ep.rx.pte.clone();
        let st = pte
            .status()
            .map_err(super::endpoint::cxi_err("reading the PtlTE status"))?;
        if st.state != PtlteState::Disabled {
            // The STATE_CHANGE that began this episode was older than our last re-enable
            // (see `on_ctrl`): the PtlTE already takes messages.
            self.bump("fc_stale_episode");
            return self.fc_recovered();
        }
        // Cassini 1 does not count the message that made the NIC disable the PtlTE
        // (libfabric starts its count at -1 there); a disable software asked for leaves
        // nothing uncounted.
        let version = CassiniVersion::from_value(self.ep.dev.info().cassini_version as u8);
        let uncounted = match version {
            _ if !self.fc.rx.auto => 0,
            Some(v) if v.generation() == Generation::Cassini2 => 0,
            _ => 1,
        };
        let expected = u64::from(st.drop_count) + uncounted;
        if self.fc.rx.reported < expected {
            return Ok(());
        }
        if self.fc.rx.reported > expected {
            return Err(Error::Transport(format!(
                "cxi: PtlTE {}: peers reported {} dropped messages, the NIC counted {}",
                pte.number(),
                self.fc.rx.reported,
                expected
            )));
        }
        if self.fc.rx.in_hardware {
            if self.fc.rx.needs_ule && !self.fc.rx.ule_freed {
                return Err(self.flow_control_error());
            }
            let cmd = pte.set_state_cmd(PtlteState::Enabled, st.drop_count);
            self.ep.emit(true, |q| q.emit_set_state(&cmd))?;
            self.ep.ring_tg()?;
            self.fc.rx.enabling = true;
            return Ok(());
        }
        if pte.transition_sm(st.drop_count).is_err() {
            // A drop came in meanwhile: its sender will report it.
            return Ok(());
        }
        self.fc_recovered()
    }

    /// Whether the receive PtlTE is enabled (hardware or software managed).
    fn rx_pte_takes_messages(&self) -> Result<bool> {
        let st = self
            .ep
            .rx
            .pte
            .status()
            .map_err(super::endpoint::cxi_err("reading the PtlTE status"))?;
        Ok(st.state != PtlteState::Disabled)
    }

    /// Wait until an onload under way is done.
    pub(super) fn fc_settle(&mut self) -> Result<()> {
        if self.fc_switching() {
            self.wait_for("switching to software matching", |t| {
                (!t.fc_switching()).then_some(())
            })?;
        }
        Ok(())
    }
}
