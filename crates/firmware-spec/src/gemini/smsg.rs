//! SMSG (short messages over FMA into per-peer mailboxes).
//!
//! Public (`gni_pub.h`): `gni_smsg_attr_t`, the message types, `GNI_SMSG_MAX_SIZE` 65535,
//! `GNI_SMSG_ANY_TAG` 0xFF, `FMA_SMSG_MAX_RETRANS_DEFAULT` 10; `GNI_SmsgSend` returns
//! NOT_DONE when out of credits and ERROR_RESOURCE when header + data exceed `msg_maxsize`.
//!
//! Our choice (the mailbox format is private to libugni; see `docs/gemini-formats.md`):
//! a mailbox is a 64-byte control block followed by `mbox_maxcredit` slots; a slot is a
//! 16-byte [`SmsgHeader`] followed by the user header and data, rounded up to 64 bytes.
//! Message `seqno` (starting at 0) uses slot `seqno % mbox_maxcredit`. Credits return
//! through the sender's own mailbox: the receiver writes its running count of released
//! slots into the control block of the mailbox it sends into (and piggybacks the low 16
//! bits in the `back_credits` header field of its own messages).

use super::gni::{ReturnCode, SmsgType};
use super::layout::bit_format;
use super::limits::{SMSG_MAX_SIZE, SMSG_MBOX_ALIGN};
use super::mdd::MemHandle;

/// Size of the mailbox control block.
pub const CONTROL_SIZE: u32 = 64;
/// Size of the per-message header.
pub const HEADER_SIZE: u32 = 16;

bit_format! {
    /// Header at the start of each mailbox slot (our layout, 16 bytes).
    pub struct SmsgHeader, 16, {
        /// Sequence number of the message on this mailbox (from 0).
        seqno: 0, 32;
        /// Tag given to `GNI_SmsgSendWTag`.
        tag: 32, 8;
        /// [`SlotKind`] code.
        kind: 40, 8;
        /// Bytes of user header.
        hdr_len: 48, 16;
        /// Bytes of data.
        data_len: 64, 16;
        /// Low 16 bits of the sender's released-slot count (piggybacked credits).
        back_credits: 80, 16;
    }
}

/// What a slot holds (`SmsgHeader::kind`).
pub mod slot_kind {
    /// Never written, or released.
    pub const EMPTY: u64 = 0;
    /// A message.
    pub const MESSAGE: u64 = 1;
}

bit_format! {
    /// The mailbox control block (our layout; the first 8 of 64 bytes are used).
    pub struct SmsgControl, 64, {
        /// Running count (mod 2^32) of slots the peer has released in the mailbox this side
        /// sends into: written by the peer.
        credits_returned: 0, 32;
        /// Running count of messages the peer has sent into this mailbox (diagnostic).
        peer_sent: 32, 32;
    }
}

/// `gni_smsg_attr_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SmsgAttr {
    /// Mailbox type.
    pub msg_type: SmsgType,
    /// Base of the registered mailbox region (opaque address).
    pub msg_buffer: u64,
    /// Bytes of this mailbox (from `GNI_SmsgBufferSizeNeeded`).
    pub buff_size: u32,
    /// Registration of `msg_buffer`.
    pub mem_hndl: MemHandle,
    /// Offset of this peer's mailbox within `msg_buffer`.
    pub mbox_offset: u32,
    /// Most messages in flight into the mailbox.
    pub mbox_maxcredit: u16,
    /// Most header + data bytes per message.
    pub msg_maxsize: u32,
}

/// Bytes of one slot for `msg_maxsize`: header + payload, rounded up to 64.
pub const fn slot_size(msg_maxsize: u32) -> u64 {
    let raw = HEADER_SIZE as u64 + msg_maxsize as u64;
    raw.div_ceil(SMSG_MBOX_ALIGN) * SMSG_MBOX_ALIGN
}

/// `GNI_SmsgBufferSizeNeeded`: reads only type, max credit and max size.
/// `InvalidParam` for an invalid type, zero credits, or a max size of 0 or above 65535.
pub fn buffer_size_needed(attr: &SmsgAttr) -> Result<u32, ReturnCode> {
    if attr.msg_type == SmsgType::Invalid
        || attr.mbox_maxcredit == 0
        || attr.msg_maxsize == 0
        || attr.msg_maxsize > SMSG_MAX_SIZE
    {
        return Err(ReturnCode::InvalidParam);
    }
    let total = CONTROL_SIZE as u64 + attr.mbox_maxcredit as u64 * slot_size(attr.msg_maxsize);
    u32::try_from(total).map_err(|_| ReturnCode::InvalidParam)
}

/// Byte offset of the slot of message `seqno` inside a mailbox.
pub const fn slot_offset(seqno: u32, maxcredit: u16, msg_maxsize: u32) -> u64 {
    let credits = if maxcredit == 0 { 1 } else { maxcredit as u64 };
    CONTROL_SIZE as u64 + (seqno as u64 % credits) * slot_size(msg_maxsize)
}

/// Messages a sender may still post: `maxcredit - (sent - returned)` (mod 2^32 counters),
/// 0 if the counters are inconsistent.
pub const fn credits_available(maxcredit: u16, sent: u32, returned: u32) -> u32 {
    let in_flight = sent.wrapping_sub(returned);
    (maxcredit as u32).saturating_sub(in_flight)
}

/// What `GNI_SmsgSend` returns before sending: ERROR_RESOURCE when `hlen + dlen` exceeds
/// `msg_maxsize`, NOT_DONE without credits, else SUCCESS.
pub const fn send_check(msg_maxsize: u32, hlen: u32, dlen: u32, credits: u32) -> ReturnCode {
    let total = hlen as u64 + dlen as u64;
    if total > msg_maxsize as u64 {
        ReturnCode::ErrorResource
    } else if credits == 0 {
        ReturnCode::NotDone
    } else {
        ReturnCode::Success
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::check_table;
    use super::*;

    fn attr(credit: u16, size: u32) -> SmsgAttr {
        SmsgAttr {
            msg_type: SmsgType::MboxAutoRetransmit,
            msg_buffer: 0,
            buff_size: 0,
            mem_hndl: MemHandle::default(),
            mbox_offset: 0,
            mbox_maxcredit: credit,
            msg_maxsize: size,
        }
    }

    #[test]
    fn layout_and_sizes() {
        check_table(SmsgHeader::FIELDS, SmsgHeader::SIZE).unwrap();
        check_table(SmsgControl::FIELDS, SmsgControl::SIZE).unwrap();
        assert_eq!(slot_size(48), 64);
        assert_eq!(slot_size(49), 128);
        assert_eq!(buffer_size_needed(&attr(32, 1024)), Ok(64 + 32 * 1088));
        assert_eq!(
            buffer_size_needed(&attr(0, 1024)),
            Err(ReturnCode::InvalidParam)
        );
        assert_eq!(
            buffer_size_needed(&attr(4, 65536)),
            Err(ReturnCode::InvalidParam)
        );
        assert_eq!(
            buffer_size_needed(&attr(u16::MAX, 65535)),
            Err(ReturnCode::InvalidParam)
        );
        let mut a = attr(4, 8);
        a.msg_type = SmsgType::Invalid;
        assert_eq!(buffer_size_needed(&a), Err(ReturnCode::InvalidParam));
        assert_eq!(slot_offset(5, 4, 48), 64 + 64);
    }

    #[test]
    fn credits() {
        assert_eq!(credits_available(8, 10, 4), 2);
        assert_eq!(credits_available(8, 2, u32::MAX - 1), 4);
        assert_eq!(credits_available(8, 20, 4), 0);
        assert_eq!(send_check(100, 60, 41, 5), ReturnCode::ErrorResource);
        assert_eq!(send_check(100, 60, 40, 0), ReturnCode::NotDone);
        assert_eq!(send_check(100, 60, 40, 1), ReturnCode::Success);
    }
}
