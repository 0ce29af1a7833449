//! SMSG on an endpoint: `GNI_SmsgInit`, sending into the peer's mailbox and returning
//! credits, taking and releasing received messages, and the retransmission rounds the NIC
//! runs for its SMSG endpoints when a sequence fails.

use firmware_spec::gemini::cqe::Cqe;
use firmware_spec::gemini::fma::SyncType;
use firmware_spec::gemini::gni::{CqEventType, DlvrMode, ReturnCode};
use firmware_spec::gemini::limits::SMSG_ANY_TAG;
use firmware_spec::gemini::smsg::{
    HEADER_SIZE, SmsgAttr, SmsgHeader, send_check, slot_kind, slot_offset, slot_size,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use driver::clock::Instant;

use crate::gni::ep::Ep;
use crate::gni::error::{GniError, Result};
use crate::gni::fma::Win;
use crate::gni::mem::handle_info;
use crate::gni::objects::{EpInner, NicInner};
use crate::gni::post::fma_data56;
use crate::gni::sync::lock;

use super::mailbox::{
    RETRANS_BURST, SEND_EVENT_MARK, Smsg, SmsgInPlace, SmsgMsg, Unacked, buffer_size_needed,
    check_attr,
};

impl Smsg {
    /// Tell the peer how many slots were released (with a remote event) when enough have
    /// piled up; `force` does it for any. Out of FMA sequences, it waits for the next call.
    pub(super) fn return_credits(
        &mut self,
        nic: &NicInner,
        pe: u32,
        ev_remote: u32,
        force: bool,
    ) -> Result<()> {
        let unreported = self.released.wrapping_sub(self.reported);
        if unreported == 0 || (!force && unreported < self.threshold()) {
            return Ok(());
        }
        let mut fma = lock(&nic.fma);
        match fma.reserve(1) {
            Ok(()) => {}
            Err(e) if e.rc() == ReturnCode::ErrorResource => return Ok(()),
            Err(e) => return Err(e),
        }
        let data56 = fma_data56(CqEventType::Smsg, u64::from(ev_remote))?;
        fma.aim(&self.target(pe, DlvrMode::IN_ORDER), self.rbase)?;
        fma.store_u64(Win::PutWc, self.control_word())?;
        fma.sync(SyncType::REMOTE_EVENT, data56)?;
        self.reported = self.released;
        Ok(())
    }

    /// One retransmission round: every unreleased message again (same sequence number, same
    /// slot, same bytes, with its remote event), then this side's control word, whose
    /// sequence raises the `local` events (sends whose own local-event sequence failed).
    /// `Ok(false)` when the round budget `max` is spent. Out of FMA sequences, the round is
    /// left pending for the next poll. Returns the messages written again through `sent`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn retransmit(
        &mut self,
        nic: &NicInner,
        pe: u32,
        ev_remote: u32,
        cq: Option<u32>,
        mut local: Vec<u64>,
        max: u32,
    ) -> Result<bool> {
        self.prune()?;
        if let Some(p) = self.pending.take() {
            local.extend(p);
        }
        let burst = self.last_round.is_some_and(|t| t.elapsed() < RETRANS_BURST);
        if burst && local.is_empty() {
            return Ok(true);
        }
        if !burst && (!self.unacked.is_empty() || !local.is_empty()) {
            if self.retrans >= max {
                return Ok(false);
            }
            self.retrans += 1;
            self.last_round = Some(Instant::now());
        }
        let resend = if burst { 0 } else { self.unacked.len() };
        let mut fma = lock(&nic.fma);
        if let Some(cq) = cq {
            nic.fma_cq(&mut fma, cq)?;
        }
        let n = resend as u64 + local.len().max(1) as u64;
        match fma.reserve(n) {
            Ok(()) => {}
            Err(e) if e.rc() == ReturnCode::ErrorResource => {
                self.pending = Some(local);
                nic.smsg_pending.store(true, Ordering::Relaxed);
                return Ok(true);
            }
            Err(e) => return Err(e),
        }
        let t = self.target(pe, nic.smsg_dlvr());
        for u in self.unacked.iter().take(resend) {
            fma.put(
                Win::PutWc,
                &t,
                self.rbase + u.slot,
                u.image.len() as u64,
                |off, buf| {
                    let o = off as usize;
                    buf.copy_from_slice(&u.image[o..o + buf.len()]);
                    Ok(())
                },
            )?;
            fma.sync(SyncType::REMOTE_EVENT, u.remote_ev)?;
        }
        nic.smsg_retransmits
            .fetch_add(resend as u64, Ordering::Relaxed);
        self.reported = self.released;
        let word = self.control_word();
        let inorder = self.target(pe, DlvrMode::IN_ORDER);
        if local.is_empty() {
            // No event on success; a failure is reported with this data, typed SMSG, so
            // that it comes back here.
            let quiet = fma_data56(CqEventType::Smsg, u64::from(ev_remote))?;
            fma.aim(&inorder, self.rbase)?;
            fma.store_u64(Win::PutWc, word)?;
            fma.sync(SyncType::NO_EVENT, quiet)?;
        }
        for d in local {
            fma.aim(&inorder, self.rbase)?;
            fma.store_u64(Win::PutWc, word)?;
            fma.sync(SyncType::LOCAL_EVENT, d)?;
        }
        Ok(true)
    }
}

impl NicInner {
    /// Register an endpoint whose SMSG was initialized (for retransmission).
    fn smsg_register(&self, ep: &Arc<EpInner>) {
        let mut eps = lock(&self.smsg_eps);
        eps.retain(|w| w.strong_count() > 0);
        eps.push(Arc::downgrade(ep));
    }

    /// The live SMSG endpoints whose local CQ is `cq`, in registration order.
    fn smsg_eps_on(&self, cq: u32) -> Vec<Arc<EpInner>> {
        lock(&self.smsg_eps)
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .filter(|e| e.cq.as_ref().is_some_and(|c| c.id == cq))
            .collect()
    }

    /// A sequence of an SMSG endpoint on CQ `cq` failed with the recoverable error `e`:
    /// retransmit (see the module). `Ok(false)`: not ours to recover, or out of rounds; the
    /// caller gets the error.
    pub(crate) fn smsg_recover(&self, cq: u32, e: &Cqe) -> Result<bool> {
        let mut local = Vec::new();
        if e.data() & SEND_EVENT_MARK != 0 {
            local.push(fma_data56(CqEventType::Smsg, e.data())?);
        }
        let eps = self.smsg_eps_on(cq);
        if eps.is_empty() {
            return Ok(false);
        }
        let max = self.smsg_max_retrans.load(Ordering::Relaxed);
        for ep in eps {
            let mut st = lock(&ep.st);
            let Ok((pe, _, ev_remote)) = st.peer() else {
                continue;
            };
            let Some(s) = st.smsg.as_mut() else {
                continue;
            };
            if !s.retransmit(
                self,
                pe,
                ev_remote,
                Some(cq),
                std::mem::take(&mut local),
                max,
            )? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Retransmission rounds left pending for lack of FMA sequences, on CQ `cq`'s endpoints.
    pub(crate) fn smsg_flush_pending(&self, cq: u32) -> Result<()> {
        if !self.smsg_pending.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let max = self.smsg_max_retrans.load(Ordering::Relaxed);
        for ep in self.smsg_eps_on(cq) {
            let mut st = lock(&ep.st);
            let Ok((pe, _, ev_remote)) = st.peer() else {
                continue;
            };
            let Some(s) = st.smsg.as_mut() else {
                continue;
            };
            if s.pending.is_some()
                && !s.retransmit(self, pe, ev_remote, Some(cq), Vec::new(), max)?
            {
                return Err(GniError::new(
                    ReturnCode::TransactionError,
                    "SMSG retransmissions exhausted",
                ));
            }
        }
        Ok(())
    }
}

impl Ep {
    /// `GNI_SmsgInit(ep, local, remote)`: start SMSG on a bound endpoint with this side's
    /// mailbox (`local`, where the peer writes) and the peer's (`remote`).
    /// `GNI_RC_INVALID_STATE` when unbound or already initialized, `GNI_RC_INVALID_PARAM`
    /// for bad attributes or a local mailbox outside the process's memory.
    pub fn smsg_init(&self, local: &SmsgAttr, remote: &SmsgAttr) -> Result<()> {
        let mut st = lock(&self.inner.st);
        st.peer()?;
        if st.smsg.is_some() {
            return Err(GniError::state("SMSG already initialized on the endpoint"));
        }
        let lbase = check_attr(local, "local mailbox smaller than needed")?;
        let rbase_addr = check_attr(remote, "remote mailbox smaller than needed")?;
        let need = u64::from(buffer_size_needed(local)?);
        let mbox = self
            .inner
            .nic
            .client
            .space()
            .resolve(lbase, need)
            .ok_or(GniError::param(
                "local mailbox outside the process's memory",
            ))?;
        let base = mbox.host_address(0);
        let rinfo = handle_info(&remote.mem_hndl)?;
        let rbase = rbase_addr
            .checked_sub(rinfo.va)
            .ok_or(GniError::param("remote mailbox below its memory handle"))?;
        st.smsg = Some(Smsg {
            local: *local,
            remote: *remote,
            mbox,
            base,
            rmdh: rinfo.mdh,
            rbase,
            sent: 0,
            r_seqno: 0,
            released: 0,
            reported: 0,
            current: false,
            unacked: VecDeque::new(),
            retrans: 0,
            last_returned: 0,
            pending: None,
            last_round: None,
            spare: Vec::new(),
        });
        drop(st);
        self.inner.nic.smsg_register(&self.inner);
        Ok(())
    }

    /// `GNI_SmsgSend`: [`Ep::smsg_send_w_tag`] with tag 0.
    pub fn smsg_send(&self, header: &[u8], data: &[u8], msg_id: u32) -> Result<()> {
        self.smsg_send_w_tag(header, data, msg_id, 0)
    }

    /// `GNI_SmsgSendWTag(ep, header, data, msg_id, tag)`: non-blocking.
    /// `GNI_RC_NOT_DONE` when out of credits (or out of FMA transactions): retry later,
    /// after the peer released messages. `GNI_RC_ERROR_RESOURCE` when header + data exceed
    /// `msg_maxsize`. The local event (type SMSG) carries `msg_id`.
    pub fn smsg_send_w_tag(&self, header: &[u8], data: &[u8], msg_id: u32, tag: u8) -> Result<()> {
        let mut st = lock(&self.inner.st);
        let (pe, _, ev_remote) = st.peer()?;
        let s = st
            .smsg
            .as_mut()
            .ok_or(GniError::state("GNI_SmsgInit was not called"))?;
        s.prune()?;
        let too_big =
            || GniError::new(ReturnCode::ErrorResource, "message larger than msg_maxsize");
        let hlen = u32::try_from(header.len()).map_err(|_| too_big())?;
        let dlen = u32::try_from(data.len()).map_err(|_| too_big())?;
        match send_check(s.remote.msg_maxsize, hlen, dlen, s.credits()?) {
            ReturnCode::Success => {}
            ReturnCode::NotDone => {
                return Err(GniError::new(ReturnCode::NotDone, "no SMSG credits"));
            }
            rc => return Err(GniError::new(rc, "message larger than msg_maxsize")),
        }
        let nic = &self.inner.nic;
        let cq = self.inner.cq.as_ref();
        let h = SmsgHeader {
            seqno: u64::from(s.sent),
            tag: u64::from(tag),
            kind: slot_kind::MESSAGE,
            hdr_len: u64::from(hlen),
            data_len: u64::from(dlen),
            back_credits: u64::from(s.released & 0xFFFF),
        };
        let hb = h
            .encode()
            .map_err(|_| GniError::param("SMSG header fields out of range"))?;
        let total = (HEADER_SIZE + hlen + dlen) as usize;
        let mut image = s.spare.pop().unwrap_or_default();
        image.clear();
        image.extend_from_slice(&hb);
        image.extend_from_slice(header);
        image.extend_from_slice(data);
        image.resize(total.next_multiple_of(8), 0);
        let slot = slot_offset(s.sent, s.remote.mbox_maxcredit, s.remote.msg_maxsize);
        let remote_ev = fma_data56(CqEventType::Smsg, u64::from(ev_remote))?;
        let local_ev = fma_data56(CqEventType::Smsg, u64::from(msg_id) | SEND_EVENT_MARK)?;

        let mut fma = lock(&nic.fma);
        if let Some(cq) = cq {
            nic.fma_cq(&mut fma, cq.id)?;
        }
        fma.reserve(2).map_err(|e| {
            if e.rc() == ReturnCode::ErrorResource {
                GniError::new(ReturnCode::NotDone, "FMA transactions exhausted")
            } else {
                e
            }
        })?;
        let t = s.target(pe, nic.smsg_dlvr());
        // The descriptor stays aimed at the start of the peer's mailbox: the slot and the
        // control word below are then data stores at window offsets, with no BASE_OFFSET
        // store per send (unless the mailbox is wider than the window).
        let sent = if slot + image.len() as u64 <= fma.window_bytes() {
            fma.aim(&t, s.rbase)
                .and_then(|_| fma.store_at(Win::PutWc, slot, &image))
        } else {
            fma.put(
                Win::PutWc,
                &t,
                s.rbase + slot,
                image.len() as u64,
                |off, buf| {
                    let o = off as usize;
                    buf.copy_from_slice(&image[o..o + buf.len()]);
                    Ok(())
                },
            )
        }
        .and_then(|_| fma.sync(SyncType::REMOTE_EVENT, remote_ev));
        if let Err(e) = sent {
            let _ = fma.sync(SyncType::NO_EVENT, 0);
            return Err(e);
        }
        s.unacked.push_back(Unacked {
            seqno: s.sent,
            slot,
            image,
            remote_ev,
        });
        s.sent = s.sent.wrapping_add(1);
        s.reported = s.released;
        fma.aim(&s.target(pe, DlvrMode::IN_ORDER), s.rbase)?;
        fma.store_u64(Win::PutWc, s.control_word())?;
        let sync = if cq.is_some() {
            SyncType::LOCAL_EVENT
        } else {
            SyncType::NO_EVENT
        };
        fma.sync(sync, local_ev)
    }

    /// `GNI_SmsgGetNext`: [`Ep::smsg_get_next_w_tag`] with `GNI_SMSG_ANY_TAG`.
    pub fn smsg_get_next(&self) -> Result<Option<SmsgMsg>> {
        self.smsg_get_next_w_tag(SMSG_ANY_TAG)
    }

    /// `GNI_SmsgGetNextWTag(ep, &msg, &tag)`: the next message in order, or `None`
    /// (`GNI_RC_NOT_DONE`) when there is none. With a `tag` other than `GNI_SMSG_ANY_TAG`
    /// (0xFF), a message with another tag gives `GNI_RC_NO_MATCH` and stays. The message
    /// stays current (later calls return it again) until [`Ep::smsg_release`].
    pub fn smsg_get_next_w_tag(&self, tag: u8) -> Result<Option<SmsgMsg>> {
        let Some((at, mem)) = self.smsg_next(tag)? else {
            return Ok(None);
        };
        let mut bytes = vec![0u8; (at.hdr_len + at.data_len) as usize];
        mem.read(at.host + u64::from(HEADER_SIZE), &mut bytes)?;
        Ok(Some(SmsgMsg {
            tag: at.tag,
            seqno: at.seqno,
            hdr_len: at.hdr_len as usize,
            bytes,
        }))
    }

    /// [`Ep::smsg_get_next_w_tag`] without copying the message out of the mailbox: where it
    /// lies in the process's memory, as the C `GNI_SmsgGetNextWTag` hands out a pointer to
    /// the message in the mailbox. Valid until [`Ep::smsg_release`].
    pub fn smsg_get_next_in_place(&self, tag: u8) -> Result<Option<SmsgInPlace>> {
        Ok(self.smsg_next(tag)?.map(|(at, _)| at))
    }

    /// The next message's slot, made current; `None` when there is none.
    fn smsg_next(
        &self,
        tag: u8,
    ) -> Result<Option<(SmsgInPlace, std::sync::Arc<dyn driver::mem::HostMem>)>> {
        let mut st = lock(&self.inner.st);
        let (pe, _, ev_remote) = st.peer()?;
        let s = st
            .smsg
            .as_mut()
            .ok_or(GniError::state("GNI_SmsgInit was not called"))?;
        s.return_credits(&self.inner.nic, pe, ev_remote, false)?;
        let slot = s.slot();
        let mem = std::sync::Arc::clone(s.mem());
        let w0 = mem.load_u64(slot, Ordering::Acquire)?;
        let mut hb = [0u8; HEADER_SIZE as usize];
        hb[..8].copy_from_slice(&w0.to_le_bytes());
        mem.read(slot + 8, &mut hb[8..])?;
        let h =
            SmsgHeader::decode(&hb).map_err(|_| GniError::state("unreadable SMSG slot header"))?;
        if h.kind != slot_kind::MESSAGE || h.seqno != u64::from(s.r_seqno) {
            return Ok(None);
        }
        let len = h.hdr_len + h.data_len;
        if u64::from(HEADER_SIZE) + len > slot_size(s.local.msg_maxsize) {
            return Err(GniError::state("corrupt SMSG slot"));
        }
        if tag != SMSG_ANY_TAG && h.tag != u64::from(tag) {
            return Err(GniError::new(
                ReturnCode::NoMatch,
                "the next message has another tag",
            ));
        }
        s.current = true;
        let local_base = s.local.msg_buffer + u64::from(s.local.mbox_offset);
        let at = SmsgInPlace {
            tag: h.tag as u8,
            seqno: s.r_seqno,
            hdr_len: h.hdr_len as u32,
            data_len: h.data_len as u32,
            host: slot,
            va: local_base + (slot - s.base) + u64::from(HEADER_SIZE),
        };
        Ok(Some((at, mem)))
    }

    /// `GNI_SmsgRelease`: done with the current message; its slot is free for the sender.
    /// `GNI_RC_NOT_DONE` when there is no current message.
    pub fn smsg_release(&self) -> Result<()> {
        let mut st = lock(&self.inner.st);
        let (pe, _, ev_remote) = st.peer()?;
        let s = st
            .smsg
            .as_mut()
            .ok_or(GniError::state("GNI_SmsgInit was not called"))?;
        if !s.current {
            return Err(GniError::new(
                ReturnCode::NotDone,
                "no current SMSG message",
            ));
        }
        let slot = s.slot();
        let mem = std::sync::Arc::clone(s.mem());
        mem.store_u64(slot + 8, 0, Ordering::Relaxed)?;
        mem.store_u64(slot, 0, Ordering::Release)?;
        s.r_seqno = s.r_seqno.wrapping_add(1);
        s.released = s.released.wrapping_add(1);
        s.current = false;
        s.return_credits(&self.inner.nic, pe, ev_remote, false)
    }

    /// Credits left for sending (ours, a diagnostic).
    pub fn smsg_credits(&self) -> Result<u32> {
        let st = lock(&self.inner.st);
        st.smsg
            .as_ref()
            .ok_or(GniError::state("GNI_SmsgInit was not called"))?
            .credits()
    }

    /// Return every released slot to the peer now, with a back-credit event (ours; release
    /// does it by itself once half the mailbox is released).
    pub fn smsg_flush_credits(&self) -> Result<()> {
        let mut st = lock(&self.inner.st);
        let (pe, _, ev_remote) = st.peer()?;
        let s = st
            .smsg
            .as_mut()
            .ok_or(GniError::state("GNI_SmsgInit was not called"))?;
        s.return_credits(&self.inner.nic, pe, ev_remote, true)
    }
}
