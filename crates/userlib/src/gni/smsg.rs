//! SMSG: short messages into per-peer mailboxes, with credits (gemini.md §1.8).
//!
//! Setup: each side sizes its mailbox with [`buffer_size_needed`], registers it with its
//! *remote* CQ as `dst_cq`, zeroes it, swaps its [`SmsgAttr`] with the peer (a datagram:
//! [`attr_to_bytes`] / [`attr_from_bytes`]), and calls [`Ep::smsg_init`] on a bound endpoint.
//!
//! The mailbox format is ours (`firmware_spec::gemini::smsg`, docs/gemini-formats.md): a
//! 64-byte control block, then `mbox_maxcredit` slots; message `seqno` goes in slot
//! `seqno % mbox_maxcredit` as a 16-byte header, the user header, the data. The protocol
//! (docs/userlib-gni.md):
//!
//! - A send is two FMA sequences. The first writes the slot with PUT_MSG stores (the NIC
//!   makes the slot header visible after the payload) and raises a remote event
//!   (`GNI_CQ_EVENT_TYPE_SMSG`, carrying the endpoint's remote event data) in the CQ of the
//!   peer's mailbox. The second writes this side's control word (slots it released in its
//!   own mailbox, messages it sent) into the peer's mailbox control block with one 8-byte
//!   PUT_MSG store (delivered atomically), in order, and raises the local event carrying
//!   `msg_id`. So every send also returns credits.
//! - A sender may have `mbox_maxcredit` messages unreleased at the receiver: credits =
//!   `maxcredit - (sent - returned)`, `returned` read from its own control block. Without
//!   credits [`Ep::smsg_send_w_tag`] returns `GNI_RC_NOT_DONE`.
//! - [`Ep::smsg_release`] frees the slot. When half the mailbox (at least one slot) has been
//!   released without telling the peer, the receiver writes its control word into the
//!   peer's mailbox with a remote event: the back-credit event in the sender's remote CQ
//!   (which `GetNext` on it answers with `NOT_DONE`, as uGNI's credit events).
//! - Mailboxes are `GNI_SMSG_TYPE_MBOX_AUTO_RETRANSMIT` (gemini.md §1.8: the type everyone
//!   uses, which "retransmits on some network errors"; `GNI_SmsgSetMaxRetrans`, default
//!   `FMA_SMSG_MAX_RETRANS_DEFAULT` = 10). A sender keeps each message until the receiver
//!   released it. When a sequence of an SMSG endpoint fails with a recoverable transaction
//!   error, [`crate::gni::Cq::get_event`] does not hand the error over: it writes every
//!   unreleased message of the CQ's SMSG endpoints again, with the same sequence number into
//!   the same slot (a copy of a message the receiver already has is ignored: its slot holds
//!   another sequence number by then, or the same message), and each endpoint's control word.
//!   The local event of a send whose own sequence failed is raised by the retransmission
//!   (its event data carries [`SEND_EVENT_MARK`]), so every send still has one local event.
//!   After `max_retrans` rounds without the peer releasing anything, the error goes to the
//!   caller.

use firmware_spec::gemini::cqe::Cqe;
use firmware_spec::gemini::fma::{SyncType, op};
use firmware_spec::gemini::gni::{CqEventType, DlvrMode, ReturnCode, SmsgType};
use firmware_spec::gemini::limits::SMSG_ANY_TAG;
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::smsg::{
    self as fs, HEADER_SIZE, SmsgAttr, SmsgHeader, credits_available, send_check, slot_kind,
    slot_offset, slot_size,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use driver::clock::Instant;
use driver::mem::Pinned;

use super::cdm::{NicInner, lock};
use super::ep::{Ep, EpInner};
use super::error::{GniError, Result};
use super::fma::{Target, Win};
use super::mem::handle_info;

/// The descriptor command of SMSG mailbox writes (`GHAL_FMA_PUT_MSG & 0x1F`).
const PUT_MSG_COMMAND: u64 = (op::PUT_MSG & 0x1F) as u64;
/// Bytes of an [`SmsgAttr`] on the wire ([`attr_to_bytes`]).
pub const ATTR_WIRE_SIZE: usize = 48;
/// Alignment a mailbox needs in this library (its control word is one 8-byte store).
pub const MBOX_ALIGN: u64 = 8;

/// `GNI_SmsgBufferSizeNeeded`: bytes of one mailbox for `attr` (reads the type, max
/// credit and max size; a multiple of 64). `GNI_RC_INVALID_PARAM` for an invalid type,
/// zero credits, or a max size of 0 or above 65535.
pub fn buffer_size_needed(attr: &SmsgAttr) -> Result<u32> {
    fs::buffer_size_needed(attr).map_err(|rc| GniError::new(rc, "invalid SMSG attributes"))
}

/// An [`SmsgAttr`] as bytes for a datagram (our layout, little endian): type u32 @0,
/// buff_size u32 @4, msg_buffer u64 @8, mem_hndl 16 B @16, mbox_offset u32 @32,
/// msg_maxsize u32 @36, mbox_maxcredit u16 @40, zero to 48.
pub fn attr_to_bytes(a: &SmsgAttr) -> [u8; ATTR_WIRE_SIZE] {
    let mut b = [0u8; ATTR_WIRE_SIZE];
    b[0..4].copy_from_slice(&a.msg_type.code().to_le_bytes());
    b[4..8].copy_from_slice(&a.buff_size.to_le_bytes());
    b[8..16].copy_from_slice(&a.msg_buffer.to_le_bytes());
    b[16..32].copy_from_slice(&a.mem_hndl.to_bytes());
    b[32..36].copy_from_slice(&a.mbox_offset.to_le_bytes());
    b[36..40].copy_from_slice(&a.msg_maxsize.to_le_bytes());
    b[40..42].copy_from_slice(&a.mbox_maxcredit.to_le_bytes());
    b
}

/// Decode [`attr_to_bytes`]; `GNI_RC_INVALID_PARAM` when short or of an unknown type.
pub fn attr_from_bytes(b: &[u8]) -> Result<SmsgAttr> {
    if b.len() < ATTR_WIRE_SIZE {
        return Err(GniError::param("SMSG attributes too short"));
    }
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let mut q = [0u8; 8];
    q.copy_from_slice(&b[8..16]);
    Ok(SmsgAttr {
        msg_type: SmsgType::try_from(u32_at(0))
            .map_err(|_| GniError::param("unknown SMSG type"))?,
        buff_size: u32_at(4),
        msg_buffer: u64::from_le_bytes(q),
        mem_hndl: MemHandle::from_bytes(&b[16..32])
            .map_err(|_| GniError::param("SMSG memory handle"))?,
        mbox_offset: u32_at(32),
        msg_maxsize: u32_at(36),
        mbox_maxcredit: u16::from_le_bytes([b[40], b[41]]),
    })
}

/// A message taken with `GNI_SmsgGetNext[WTag]`: the user header followed by the data, as
/// the sender passed them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmsgMsg {
    /// The message's tag.
    pub tag: u8,
    /// Its sequence number on the mailbox.
    pub seqno: u32,
    /// Bytes of user header at the start of `bytes`.
    pub hdr_len: usize,
    /// User header, then data.
    pub bytes: Vec<u8>,
}

impl SmsgMsg {
    /// The user header.
    pub fn header(&self) -> &[u8] {
        &self.bytes[..self.hdr_len.min(self.bytes.len())]
    }

    /// The data.
    pub fn data(&self) -> &[u8] {
        &self.bytes[self.hdr_len.min(self.bytes.len())..]
    }
}

/// `FMA_SMSG_MAX_RETRANS_DEFAULT` (gni_pub.h; gemini.md §1.8): retransmission rounds of an
/// `MBOX_AUTO_RETRANSMIT` mailbox before an error reaches the caller.
pub const SMSG_MAX_RETRANS_DEFAULT: u32 = 10;

/// Bit of an SMSG send's local event data (in the TID field, bits 32–47, which an SMSG
/// event does not use; `GNI_CQ_GET_MSG_ID` reads bits 0–31): the failed sequence was the one
/// that raises the send's local event, so the retransmission must raise it.
pub const SEND_EVENT_MARK: u64 = 1 << 47;

/// Errors that arrive within this time after a retransmission round belong to the failure
/// that round answered: the NIC reports a lost request only after its request timeout (100
/// ms in the model, `emu_gemini::config`), so they are of sequences written before the round,
/// whose messages the round already wrote again. They raise their local events and do not
/// start another round.
const RETRANS_BURST: Duration = Duration::from_millis(1);

/// A message sent and not yet released by the receiver, kept for retransmission.
struct Unacked {
    seqno: u32,
    /// Offset of its slot in the remote mailbox.
    slot: u64,
    /// Slot header, user header, data (padded to 8 bytes).
    image: Vec<u8>,
    /// The remote event's data.
    remote_ev: u64,
}

/// The SMSG state of one endpoint.
pub(crate) struct Smsg {
    local: SmsgAttr,
    remote: SmsgAttr,
    /// The local mailbox's pages (kept alive).
    mbox: Pinned,
    /// Host address of the local mailbox.
    base: u64,
    /// The remote mailbox: MDH and offset in its domain.
    rmdh: u16,
    rbase: u64,
    sent: u32,
    r_seqno: u32,
    released: u32,
    reported: u32,
    current: bool,
    /// Messages the receiver has not released, oldest first (at most `mbox_maxcredit`).
    unacked: VecDeque<Unacked>,
    /// Retransmission rounds since the receiver last released a message.
    retrans: u32,
    /// `returned` when last looked at.
    last_returned: u32,
    /// A retransmission found no free FMA sequence: it is done on the next poll, with these
    /// local events.
    pending: Option<Vec<u64>>,
    /// When the last retransmission round was written.
    last_round: Option<Instant>,
    /// Buffers of released messages' images, reused for the next sends.
    spare: Vec<Vec<u8>>,
}

/// Most image buffers an endpoint keeps for reuse.
const SPARE_IMAGES: usize = 16;

impl Smsg {
    fn mem(&self) -> &std::sync::Arc<dyn driver::mem::HostMem> {
        self.mbox.memory()
    }

    /// Slots the peer released of the mailbox this side sends into.
    fn returned(&self) -> Result<u32> {
        Ok(self.mem().load_u64(self.base, Ordering::Acquire)? as u32)
    }

    fn credits(&self) -> Result<u32> {
        Ok(credits_available(
            self.remote.mbox_maxcredit,
            self.sent,
            self.returned()?,
        ))
    }

    fn control_word(&self) -> u64 {
        u64::from(self.released) | u64::from(self.sent) << 32
    }

    fn threshold(&self) -> u32 {
        (u32::from(self.local.mbox_maxcredit) / 2).max(1)
    }

    fn slot(&self) -> u64 {
        self.base
            + slot_offset(
                self.r_seqno,
                self.local.mbox_maxcredit,
                self.local.msg_maxsize,
            )
    }

    fn target(&self, pe: u32, dlvr: DlvrMode) -> Target {
        Target {
            command: PUT_MSG_COMMAND,
            rem_mdh: self.rmdh,
            src_mdh: 0,
            dlvr,
            pe,
        }
    }

    /// Tell the peer how many slots were released (with a remote event) when enough have
    /// piled up; `force` does it for any. Out of FMA sequences, it waits for the next call.
    fn return_credits(
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
        let data56 = super::post::fma_data56(CqEventType::Smsg, u64::from(ev_remote))?;
        fma.aim(&self.target(pe, DlvrMode::IN_ORDER), self.rbase)?;
        fma.store_u64(Win::PutWc, self.control_word())?;
        fma.sync(SyncType::REMOTE_EVENT, data56)?;
        self.reported = self.released;
        Ok(())
    }

    /// Forget the messages the receiver released; a release is progress (the retransmission
    /// rounds start again).
    fn prune(&mut self) -> Result<()> {
        let r = self.returned()?;
        if r != self.last_returned {
            self.last_returned = r;
            self.retrans = 0;
        }
        while self
            .unacked
            .front()
            .is_some_and(|u| (u.seqno.wrapping_sub(r) as i32) < 0)
        {
            if let Some(u) = self.unacked.pop_front()
                && self.spare.len() < SPARE_IMAGES
            {
                self.spare.push(u.image);
            }
        }
        Ok(())
    }

    /// One retransmission round: every unreleased message again (same sequence number, same
    /// slot, same bytes, with its remote event), then this side's control word, whose
    /// sequence raises the `local` events (sends whose own local-event sequence failed).
    /// `Ok(false)` when the round budget `max` is spent. Out of FMA sequences, the round is
    /// left pending for the next poll. Returns the messages written again through `sent`.
    #[allow(clippy::too_many_arguments)]
    fn retransmit(
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
            fma.ensure_cq(nic, cq)?;
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
            let quiet = super::post::fma_data56(CqEventType::Smsg, u64::from(ev_remote))?;
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
            local.push(super::post::fma_data56(CqEventType::Smsg, e.data())?);
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

fn check_attr(a: &SmsgAttr, what: &'static str) -> Result<u64> {
    let need = buffer_size_needed(a)?;
    if a.buff_size < need {
        return Err(GniError::param(what));
    }
    let base = a
        .msg_buffer
        .checked_add(u64::from(a.mbox_offset))
        .ok_or(GniError::param("mailbox address overflows"))?;
    if !base.is_multiple_of(MBOX_ALIGN) {
        return Err(GniError::param("mailbox not 8-byte aligned"));
    }
    Ok(base)
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
        let remote_ev = super::post::fma_data56(CqEventType::Smsg, u64::from(ev_remote))?;
        let local_ev =
            super::post::fma_data56(CqEventType::Smsg, u64::from(msg_id) | SEND_EVENT_MARK)?;

        let mut fma = lock(&nic.fma);
        if let Some(cq) = cq {
            fma.ensure_cq(nic, cq.id)?;
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
        let mut bytes = vec![0u8; len as usize];
        mem.read(slot + u64::from(HEADER_SIZE), &mut bytes)?;
        s.current = true;
        Ok(Some(SmsgMsg {
            tag: h.tag as u8,
            seqno: s.r_seqno,
            hdr_len: h.hdr_len as usize,
            bytes,
        }))
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

/// An attribute set for a mailbox of `credits` messages of at most `maxsize` bytes at
/// `buffer + offset` registered as `handle` (type `MBOX_AUTO_RETRANSMIT`, buff_size from
/// [`buffer_size_needed`]).
pub fn mailbox_attr(
    buffer: u64,
    offset: u32,
    handle: MemHandle,
    credits: u16,
    maxsize: u32,
) -> Result<SmsgAttr> {
    let mut a = SmsgAttr {
        msg_type: SmsgType::MboxAutoRetransmit,
        msg_buffer: buffer,
        buff_size: 0,
        mem_hndl: handle,
        mbox_offset: offset,
        mbox_maxcredit: credits,
        msg_maxsize: maxsize,
    };
    a.buff_size = buffer_size_needed(&a)?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attrs_round_trip_and_size() {
        let a = mailbox_attr(
            0x10_0000,
            128,
            MemHandle {
                qword1: 7,
                qword2: 9,
            },
            4,
            48,
        )
        .unwrap();
        assert_eq!(a.buff_size, 64 + 4 * 64);
        let b = attr_to_bytes(&a);
        assert_eq!(attr_from_bytes(&b).unwrap(), a);
        assert!(attr_from_bytes(&b[..40]).is_err());
        let mut bad = b;
        bad[0] = 9;
        assert!(attr_from_bytes(&bad).is_err());
        assert_eq!(
            mailbox_attr(0, 0, MemHandle::default(), 0, 8)
                .unwrap_err()
                .rc(),
            ReturnCode::InvalidParam
        );
    }

    #[test]
    fn messages_split_header_and_data() {
        let m = SmsgMsg {
            tag: 3,
            seqno: 0,
            hdr_len: 2,
            bytes: vec![1, 2, 3, 4, 5],
        };
        assert_eq!(m.header(), &[1, 2]);
        assert_eq!(m.data(), &[3, 4, 5]);
    }
}
