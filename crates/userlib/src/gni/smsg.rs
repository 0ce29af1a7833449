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

use firmware_spec::gemini::fma::{SyncType, op};
use firmware_spec::gemini::gni::{CqEventType, DlvrMode, ReturnCode, SmsgType};
use firmware_spec::gemini::limits::SMSG_ANY_TAG;
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::smsg::{
    self as fs, HEADER_SIZE, SmsgAttr, SmsgHeader, credits_available, send_check, slot_kind,
    slot_offset, slot_size,
};
use std::sync::atomic::Ordering;

use driver::mem::Pinned;

use super::cdm::{NicInner, lock};
use super::ep::Ep;
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
}

impl Smsg {
    fn mem(&self) -> &std::sync::Arc<dyn driver::mem::HostMem> {
        self.mbox.pages.memory()
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
        let base = mbox.pages.addr() + mbox.offset;
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
        });
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
        let mut image = Vec::with_capacity(total.next_multiple_of(8));
        image.extend_from_slice(&hb);
        image.extend_from_slice(header);
        image.extend_from_slice(data);
        image.resize(total.next_multiple_of(8), 0);
        let slot = slot_offset(s.sent, s.remote.mbox_maxcredit, s.remote.msg_maxsize);
        let remote_ev = super::post::fma_data56(CqEventType::Smsg, u64::from(ev_remote))?;
        let local_ev = super::post::fma_data56(CqEventType::Smsg, u64::from(msg_id))?;

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
        let sent = fma
            .put(
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
            .and_then(|_| fma.sync(SyncType::REMOTE_EVENT, remote_ev));
        if let Err(e) = sent {
            let _ = fma.sync(SyncType::NO_EVENT, 0);
            return Err(e);
        }
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
