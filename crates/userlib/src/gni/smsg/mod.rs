//! SMSG: short messages into per-peer mailboxes, with credits (gemini.md §1.8).
//!
//! Setup: each side sizes its mailbox with [`buffer_size_needed`], registers it with its
//! *remote* CQ as `dst_cq`, zeroes it, swaps its `SmsgAttr` with the peer (a datagram:
//! [`attr_to_bytes`] / [`attr_from_bytes`]), and calls [`crate::gni::Ep::smsg_init`] on a bound endpoint.
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
//!   credits [`crate::gni::Ep::smsg_send_w_tag`] returns `GNI_RC_NOT_DONE`.
//! - [`crate::gni::Ep::smsg_release`] frees the slot. When half the mailbox (at least one slot) has been
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

//!
//! Modules: `mailbox` (an endpoint's SMSG state and the mailbox formats), `endpoint` (the
//! calls on an endpoint and the NIC's retransmission).

mod endpoint;
pub(crate) mod mailbox;

pub use mailbox::{
    ATTR_WIRE_SIZE, MBOX_ALIGN, SEND_EVENT_MARK, SMSG_MAX_RETRANS_DEFAULT, SmsgInPlace, SmsgMsg,
    attr_from_bytes, attr_to_bytes, buffer_size_needed, mailbox_attr,
};
