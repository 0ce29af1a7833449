//! The device side of SMSG.
//!
//! SMSG is library software over FMA (`gni_pub.h`): the sender writes the message header and
//! payload into its slot of the peer's mailbox (`firmware_spec::gemini::smsg` layout) through
//! a PUT window with descriptor command PUT_MSG (`fma::op::PUT_MSG`), then stores
//! `SYNC_COMPLETE` with `REMOTE_EVENT | LOCAL_EVENT`. What the NIC contributes, and what this
//! model guarantees:
//! - PUT_MSG stores are write-combined and delivered like PUTs (frames carry
//!   [`crate::packet::flag::MSG`]);
//! - the remote event is raised in the CQ of the mailbox's memory domain (`MDD.cqh`) only
//!   after every byte of the message (and a `WITH_FLAG` flag) is in the receiver's memory,
//!   whatever the delivery mode, so a receiver that sees the event finds the message;
//! - if that CQ is full the event is lost, the receiver's CQ records the overrun, and the
//!   sender's local CQE carries `rem_overrun` (`GNI_CQ_REM_OVERRUN`);
//! - the local event follows the remote one.

use firmware_spec::gemini::fma::{SyncType, op, sync_complete_word};

/// The descriptor `command` value for SMSG mailbox writes (`GHAL_FMA_PUT_MSG & 0x1F`).
pub const PUT_MSG_COMMAND: u64 = (op::PUT_MSG & 0x1F) as u64;

/// The `SYNC_COMPLETE` doorbell value that ends an SMSG send: remote and local events with
/// the 56-bit event data `data56`.
pub fn send_doorbell(data56: u64) -> u64 {
    sync_complete_word(SyncType::REMOTE_EVENT | SyncType::LOCAL_EVENT, data56)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbell_has_both_events() {
        let v = send_doorbell(0x1234);
        assert_eq!(v >> 56, 3);
        assert_eq!(v & 0xFFFF, 0x1234);
        assert_eq!(PUT_MSG_COMMAND, 0x10);
    }
}
