//! The event loop: every event of the endpoint's one EQ, dispatched by type, PtlTE and
//! buffer id (target events) or user pointer (initiator events).

use firmware_spec::cassini::event::{Event, EventType, TargetLong};
use firmware_spec::cassini::le::{PtlList, PtlteState};
use firmware_spec::cassini::rc::ReturnCode;

use super::endpoint::cxi_err;
use super::proto;
use super::retry::RdzvSource;
use super::{CxiTransport, MatchMode};
use crate::error::Result;
use crate::{Completion, OpId};

/// Events handled per call at most.
const BATCH: usize = 256;

/// Events consumed before the EQ is acknowledged (libfabric's `FI_CXI_EQ_ACK_BATCH_SIZE`,
/// default 32): each acknowledgement is an MMIO store of the read pointer, and the device
/// needs the read pointer only to know how much of the ring is free.
pub(super) const ACK_BATCH: u32 = 32;

/// Bytes consumed (NULL padding included) before the EQ is acknowledged whatever the count.
pub(super) const ACK_BYTES: u64 = 2048;

/// The most bytes a batched acknowledgement leaves unacknowledged: just under
/// [`ACK_BYTES`], plus one event of 64 bytes and the NULL padding in front of it. The EQ's
/// ring is larger than the ring of an endpoint that acknowledges every drain by more than
/// this ([`super::endpoint::EQ_ACK_SLACK`]), so the device always sees at least the free
/// space it saw then: batching can never fill the EQ.
pub(super) const ACK_MAX_UNACKED: u64 = ACK_BYTES + 64 + 48;
// The endpoint's slack covers what batching leaves unacknowledged and keeps the ring whole
// pages.
const _: () = assert!(
    super::endpoint::EQ_ACK_SLACK >= ACK_MAX_UNACKED
        && super::endpoint::EQ_ACK_SLACK.is_multiple_of(4096)
);

/// When the EQ is acknowledged: after [`ACK_BATCH`] events or [`ACK_BYTES`] bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct AckBatch {
    /// Events consumed since the last acknowledgement.
    events: u32,
}

impl AckBatch {
    /// One more event was consumed and `unacked` bytes now are: whether to acknowledge now.
    pub(super) fn consumed(&mut self, unacked: u64) -> bool {
        self.events += 1;
        self.events >= ACK_BATCH || unacked >= ACK_BYTES
    }

    /// The EQ was acknowledged.
    pub(super) fn acked(&mut self) {
        self.events = 0;
    }

    /// Events consumed and not acknowledged.
    pub(super) fn pending(&self) -> u32 {
        self.events
    }
}

impl CxiTransport {
    /// Handle what the EQ holds; `true` if there was anything.
    pub(super) fn drain_events(&mut self) -> Result<bool> {
        let mut any = false;
        for _ in 0..BATCH {
            let ev = self
                .ep
                .eq
                .get_event()
                .map_err(cxi_err("reading the event queue"))?;
            let Some(ev) = ev else { break };
            any = true;
            if self.ack_batch.consumed(self.ep.eq.unacked_bytes()) {
                self.ack_events()?;
            }
            if let Err(e) = self.handle(ev) {
                self.fatal.get_or_insert_with(|| e.to_string());
                break;
            }
        }
        // While the receive PtlTE recovers from flow control (maybe from a full EQ) every
        // slot counts: no batching.
        if self.ack_batch.pending() > 0 && (self.fc_rx_active() || self.fatal.is_some()) {
            self.ack_events()?;
        }
        Ok(any)
    }

    /// Acknowledge every event consumed so far.
    pub(super) fn ack_events(&mut self) -> Result<()> {
        self.ack_batch.acked();
        self.ep.eq.ack().map_err(cxi_err("acknowledging events"))
    }

    fn handle(&mut self, ev: Event) -> Result<()> {
        match ev {
            Event::InitiatorShort(i) => self.on_initiator(
                i.event_type,
                i.return_code,
                i.user_ptr,
                i.ptl_list,
                i.rendezvous,
            ),
            Event::InitiatorLong(i) => self.on_initiator(
                i.event_type,
                i.return_code,
                i.user_ptr,
                i.ptl_list,
                i.rendezvous,
            ),
            Event::TargetLong(t) => self.on_target(&t),
            Event::CommandFailure(c) => Err(crate::Error::Transport(format!(
                "cxi: a command failed: {c:?}"
            ))),
            _ => Ok(()),
        }
    }

    fn on_initiator(
        &mut self,
        ty: EventType,
        rc: ReturnCode,
        user_ptr: u64,
        list: PtlList,
        rendezvous: bool,
    ) -> Result<()> {
        if self.keyed_failed(ty, rc, user_ptr) {
            return Ok(());
        }
        if ty == EventType::Ack {
            if self.on_ctrl_ack(user_ptr, rc) {
                return Ok(());
            }
            // A send the peer's PtlTE dropped in flow control waits for its replay.
            if let Some(dest) = self.sends.get(&user_ptr).map(|op| op.dest)
                && !self.fc_acked(user_ptr, dest, rc)?
            {
                return Ok(());
            }
        }
        if rc == ReturnCode::EntryNotFound && self.retry_refused(ty, user_ptr, rendezvous) {
            return Ok(());
        }
        if rc != ReturnCode::Ok {
            return Err(crate::Error::Transport(format!(
                "cxi: {ty:?} of operation {user_ptr:#x} failed: {rc:?}{}",
                if rc == ReturnCode::PtDisabled {
                    " (the target PtlTE is in flow control)"
                } else {
                    ""
                }
            )));
        }
        match ty {
            EventType::Ack => {
                if let Some(op) = self.sends.get_mut(&user_ptr) {
                    op.acked = true;
                    // Landed on a posted receive: matched (libfabric: ACK ptl_list).
                    if list == PtlList::Priority {
                        op.matched = true;
                    }
                    self.try_finish_send(user_ptr);
                } else if self.rma_ops.contains_key(&user_ptr) {
                    self.finish_rma(user_ptr)?;
                }
            }
            EventType::Reply if rendezvous => {
                // `struct cxi_rdzv_user_ptr`: buffer_id@48:16 names the receive.
                let bid = (user_ptr >> 48) as u16;
                if let Some(&id) = self.bids.get(&bid) {
                    self.bump("hw_gets");
                    if let Some(r) = self.recvs.get_mut(&id) {
                        r.rdzv_pending = false;
                    }
                    self.finish_recv(id)?;
                }
            }
            EventType::Reply => {
                if let Some(r) = self.recvs.get_mut(&user_ptr) {
                    r.rdzv_pending = false;
                    self.finish_recv(user_ptr)?;
                } else if self.rma_ops.contains_key(&user_ptr) {
                    self.finish_rma(user_ptr)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn on_target(&mut self, t: &TargetLong) -> Result<()> {
        if t.ptlte_index == self.ep.rdzv.pte.index() {
            if t.event_type == EventType::Get && t.return_code == ReturnCode::Ok {
                // The receiver pulled a rendezvous source: the send is complete.
                let rid = (t.match_bits & 0xFF) as u8;
                if let Some(id) = self.rdzv_ids.remove(&rid) {
                    if let Some(op) = self.sends.get_mut(&id) {
                        op.pulled = true;
                    }
                    self.try_finish_send(id);
                }
            }
            return Ok(());
        }
        if t.ptlte_index == self.ep.rma.pte.index() {
            if self.keyed_target(t) {
                return Ok(());
            }
            if t.event_type == EventType::Put && t.match_bits & proto::CTRL != 0 {
                return self.on_ctrl(t);
            }
            return Ok(());
        }
        if t.ptlte_index != self.ep.rx.pte.index() {
            return Ok(());
        }
        let bid = t.buffer_id;
        let landing = usize::from(bid.wrapping_sub(proto::BUF_BID));
        let is_landing = bid >= proto::BUF_BID && landing < self.landing.len();
        match t.event_type {
            EventType::StateChange => self.on_state_change(t),
            EventType::Link if t.return_code != ReturnCode::Ok => {
                if t.return_code == ReturnCode::NoSpace {
                    if self.cfg.mode == MatchMode::Hybrid && !self.software {
                        return self.fc_append_failed(bid);
                    }
                    return Err(self.flow_control_error());
                }
                Err(crate::Error::Transport(format!(
                    "cxi: appending a list entry failed: {:?}",
                    t.return_code
                )))
            }
            // Overflow buffers unlinked by the hybrid switch: nobody waits for them.
            EventType::Unlink if is_landing => Ok(()),
            EventType::Search | EventType::Unlink => {
                self.answers.insert(bid, *t);
                Ok(())
            }
            EventType::Put if t.return_code != ReturnCode::Ok => Err(crate::Error::Transport(
                format!("cxi: a message arrived with {:?}", t.return_code),
            )),
            EventType::Put => match t.ptl_list {
                PtlList::Request if is_landing => self.on_request_landing(landing, t),
                PtlList::Overflow if is_landing => self.on_overflow_landing(landing, t),
                PtlList::Priority => match self.bids.get(&bid) {
                    Some(&id) => self.on_expected(id, t),
                    None => Ok(()),
                },
                _ => Ok(()),
            },
            EventType::PutOverflow if bid == proto::ONLOAD_BID => {
                self.on_onloaded(t);
                Ok(())
            }
            EventType::PutOverflow => match self.bids.get(&bid) {
                Some(&id) => self.on_ux_matched(id, t),
                None => Ok(()),
            },
            EventType::Rendezvous => {
                let Some(&id) = self.bids.get(&bid) else {
                    return Ok(());
                };
                let from = RdzvSource {
                    source: self.rank_of(firmware_spec::cassini::dfa::dfa_to_init(
                        t.initiator,
                        self.ep.pid_bits,
                    ))?,
                    put_bits: t.match_bits,
                    src: t.header_data,
                    eager: self.cfg.rdzv_eager.min(t.rlength as usize),
                };
                if t.get_issued {
                    // The NIC issued the Get: kept in case the source refuses it (`retry`).
                    if let Some(r) = self.recvs.get_mut(&id) {
                        r.rdzv_from = Some(from);
                    }
                    return Ok(());
                }
                // The NIC left the Get to software (`rdzv_get_en` off).
                self.sw_get(id, from.source, from.put_bits, from.src, from.eager)
            }
            _ => Ok(()),
        }
    }

    fn on_state_change(&mut self, t: &TargetLong) -> Result<()> {
        let Some(Ok(sc)) = t.state_change() else {
            return Ok(());
        };
        if !sc.sc_nic_auto && self.fc_enable_answer(t.return_code, sc.ptlte_state)? {
            return Ok(());
        }
        if sc.ptlte_state == PtlteState::Disabled {
            if sc.sc_nic_auto {
                return self.fc_disabled(Some(sc.sc_reason), true);
            }
            return self.fc_forced();
        }
        Ok(())
    }

    /// The error of a PtlTE whose flow control this transport cannot recover from (the CXI
    /// provider's message, `cxip_msg_hpc.c`).
    pub(super) fn flow_control_error(&self) -> crate::Error {
        let n = self.ep.rx.pte.number();
        crate::Error::Transport(format!(
            "PtlTE {n} LE resources not recovered during flow control. \
             FI_CXI_RX_MATCH_MODE=[hybrid OR software] is required."
        ))
    }

    /// Complete RMA operation `id`.
    pub(super) fn finish_rma(&mut self, id: u64) -> Result<()> {
        let Some(mut op) = self.rma_ops.remove(&id) else {
            return Ok(());
        };
        let c = if op.fetch {
            let data = match &op.buf {
                Some(b) => b.read(op.at, op.len)?,
                None => Vec::new(),
            };
            Completion::Fetched(data)
        } else {
            Completion::Sent
        };
        if let Some(b) = op.buf.take() {
            self.ep.release(b);
        }
        self.done.insert(OpId(id), c);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eq_is_acknowledged_every_batch_of_events() {
        let mut a = AckBatch::default();
        for round in 0..3 {
            for k in 1..ACK_BATCH {
                assert!(!a.consumed(u64::from(k) * 16), "round {round}, event {k}");
                assert_eq!(a.pending(), k);
            }
            assert!(a.consumed(u64::from(ACK_BATCH) * 16));
            a.acked();
            assert_eq!(a.pending(), 0);
        }
    }

    #[test]
    fn large_events_are_acknowledged_by_bytes_before_the_count() {
        let mut a = AckBatch::default();
        // 64-byte events with 48 bytes of NULL padding in front of each: the worst case.
        let mut unacked = 0;
        let mut n = 0;
        loop {
            unacked += 112;
            n += 1;
            if a.consumed(unacked) {
                break;
            }
        }
        assert!(n < ACK_BATCH, "{n} events");
        assert!(
            unacked <= ACK_MAX_UNACKED,
            "{unacked} bytes left unacknowledged"
        );
        assert!(unacked >= ACK_BYTES);
    }
}
