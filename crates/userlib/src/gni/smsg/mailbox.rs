//! The SMSG state of one endpoint ([`Smsg`]: the two mailboxes, sequence numbers, credits,
//! the messages kept for retransmission) and the mailbox formats: attribute sizes and their
//! wire form, received messages.

use firmware_spec::gemini::fma::op;
use firmware_spec::gemini::gni::{DlvrMode, SmsgType};
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::smsg::{self as fs, SmsgAttr, credits_available, slot_offset};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Duration;

use driver::clock::Instant;
use driver::mem::Pinned;

use crate::gni::error::{GniError, Result};
use crate::gni::fma::Target;

/// The descriptor command of SMSG mailbox writes (`GHAL_FMA_PUT_MSG & 0x1F`).
pub(super) const PUT_MSG_COMMAND: u64 = (op::PUT_MSG & 0x1F) as u64;
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

/// Where the current message lies in the local mailbox ([`Ep::smsg_get_next_in_place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmsgInPlace {
    /// The message's tag.
    pub tag: u8,
    /// Its sequence number on the mailbox.
    pub seqno: u32,
    /// Bytes of user header.
    pub hdr_len: u32,
    /// Bytes of data after the header.
    pub data_len: u32,
    /// Host address of the slot (its 16-byte slot header comes first).
    pub(super) host: u64,
    /// The user header's address in the process (`msg_buffer + mbox_offset` of the local
    /// attributes, plus the slot's offset and the slot header): what the C
    /// `GNI_SmsgGetNext[WTag]` returns.
    pub va: u64,
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
pub(super) const RETRANS_BURST: Duration = Duration::from_millis(1);

/// A message sent and not yet released by the receiver, kept for retransmission.
pub(super) struct Unacked {
    pub(super) seqno: u32,
    /// Offset of its slot in the remote mailbox.
    pub(super) slot: u64,
    /// Slot header, user header, data (padded to 8 bytes).
    pub(super) image: Vec<u8>,
    /// The remote event's data.
    pub(super) remote_ev: u64,
}

/// The SMSG state of one endpoint.
pub(crate) struct Smsg {
    pub(super) local: SmsgAttr,
    pub(super) remote: SmsgAttr,
    /// The local mailbox's pages (kept alive).
    pub(super) mbox: Pinned,
    /// Host address of the local mailbox.
    pub(super) base: u64,
    /// The remote mailbox: MDH and offset in its domain.
    pub(super) rmdh: u16,
    pub(super) rbase: u64,
    pub(super) sent: u32,
    pub(super) r_seqno: u32,
    pub(super) released: u32,
    pub(super) reported: u32,
    pub(super) current: bool,
    /// Messages the receiver has not released, oldest first (at most `mbox_maxcredit`).
    pub(super) unacked: VecDeque<Unacked>,
    /// Retransmission rounds since the receiver last released a message.
    pub(super) retrans: u32,
    /// `returned` when last looked at.
    pub(super) last_returned: u32,
    /// A retransmission found no free FMA sequence: it is done on the next poll, with these
    /// local events.
    pub(super) pending: Option<Vec<u64>>,
    /// When the last retransmission round was written.
    pub(super) last_round: Option<Instant>,
    /// Buffers of released messages' images, reused for the next sends.
    pub(super) spare: Vec<Vec<u8>>,
}

/// Most image buffers an endpoint keeps for reuse.
pub(super) const SPARE_IMAGES: usize = 16;

impl Smsg {
    pub(super) fn mem(&self) -> &std::sync::Arc<dyn driver::mem::HostMem> {
        self.mbox.memory()
    }

    /// Slots the peer released of the mailbox this side sends into.
    pub(super) fn returned(&self) -> Result<u32> {
        Ok(self.mem().load_u64(self.base, Ordering::Acquire)? as u32)
    }

    pub(super) fn credits(&self) -> Result<u32> {
        Ok(credits_available(
            self.remote.mbox_maxcredit,
            self.sent,
            self.returned()?,
        ))
    }

    pub(super) fn control_word(&self) -> u64 {
        u64::from(self.released) | u64::from(self.sent) << 32
    }

    pub(super) fn threshold(&self) -> u32 {
        (u32::from(self.local.mbox_maxcredit) / 2).max(1)
    }

    pub(super) fn slot(&self) -> u64 {
        self.base
            + slot_offset(
                self.r_seqno,
                self.local.mbox_maxcredit,
                self.local.msg_maxsize,
            )
    }

    pub(super) fn target(&self, pe: u32, dlvr: DlvrMode) -> Target {
        Target {
            command: PUT_MSG_COMMAND,
            rem_mdh: self.rmdh,
            src_mdh: 0,
            dlvr,
            pe,
        }
    }

    /// Forget the messages the receiver released; a release is progress (the retransmission
    /// rounds start again).
    pub(super) fn prune(&mut self) -> Result<()> {
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
}

pub(super) fn check_attr(a: &SmsgAttr, what: &'static str) -> Result<u64> {
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
    use firmware_spec::gemini::gni::ReturnCode;

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
