//! What the cxi transport puts on the wire besides the payload: the transport's 16 bits of
//! the match bits ([`crate::MatchBits::TRANSPORT_MASK`]), header data, buffer ids.
//!
//! | bits | use |
//! |---|---|
//! | 48..51 | LAC of a rendezvous source buffer (the NIC mirrors bits 48..64 of the put into its Get, which the source's LE per LAC matches: `cxip_rdzv_pte.c`, cassini.md §6) |
//! | 52..60 | rendezvous id (also in the command's 8-bit `rendezvous_id`) |
//! | 61 | rendezvous put |
//! | 62 | synchronous send: the receiver notifies the sender when an unexpected message is matched (libfabric's match-complete protocol) |
//! | 63 | control message, never seen by MPI receives |
//!
//! Header data: the sender's operation id (eager messages; the notice carries it back), or
//! the source buffer's IOVA (rendezvous puts, for a receiver that has to issue the Get itself).
//!
//! Control messages are zero-byte IDC messages to the control LE on the RMA PtlTE (index
//! 117, libfabric's control PtlTE, cassini.md §4.3), which is never flow controlled: match
//! bits [`CTRL`] | kind << [`KIND_SHIFT`] (window keys never have bit 63 set), header data
//! the value. Kinds: [`NOTICE`] (a synchronous send was matched: its operation id),
//! [`FC_NOTIFY`] (flow-control recovery: how many of the sender's messages the receiver's
//! PtlTE dropped) and [`FC_RESUME`] (recovered: replay them).

use crate::MatchBits;

/// Shift of the rendezvous source LAC.
pub const LAC_SHIFT: u32 = 48;
/// Bits of the rendezvous source LAC.
pub const LAC_MASK: u64 = 0x7 << LAC_SHIFT;
/// Shift of the rendezvous id.
pub const RID_SHIFT: u32 = 52;
/// Bits of the rendezvous id.
pub const RID_MASK: u64 = 0xFF << RID_SHIFT;
/// A rendezvous put.
pub const RDZV: u64 = 1 << 61;
/// A synchronous send.
pub const SYNC: u64 = 1 << 62;
/// A control message.
pub const CTRL: u64 = 1 << 63;
/// Shift of a control message's kind.
pub const KIND_SHIFT: u32 = 56;
/// Bits of a control message's kind.
pub const KIND_MASK: u64 = 0x7F << KIND_SHIFT;
/// Control message: match-complete notice of a synchronous send.
pub const NOTICE: u64 = 1;
/// Control message: the sender's count of messages dropped by flow control.
pub const FC_NOTIFY: u64 = 2;
/// Control message: the receiver's PtlTE recovered; replay the dropped messages.
pub const FC_RESUME: u64 = 3;

/// Match bits of a control message of `kind`.
pub fn ctrl_bits(kind: u64) -> u64 {
    CTRL | kind << KIND_SHIFT
}

/// The kind of control message `bits`.
pub fn ctrl_kind(bits: u64) -> u64 {
    (bits & KIND_MASK) >> KIND_SHIFT
}

/// Bits a receive ignores on top of the MPI layer's ignore bits.
pub const RECV_IGNORE: u64 = MatchBits::TRANSPORT_MASK & !CTRL;

/// Wire headers in front of a DMA put's payload in a request buffer: `c_port_fab_hdr` (20 B)
/// + `c_port_unrestricted_hdr` (43 B) (cassini.md §§4.2, 11).
pub const DMA_WIRE_HDR: usize = 20 + 43;

/// Transaction type of NIC rendezvous Gets (cassini.md §6: the driver uses 0xF).
pub const RDZV_GET_TYPE: u64 = 0xF;

/// Buffer id of the persistent LE that catches control messages.
pub const CTRL_BID: u16 = 1;
/// Buffer id of probe searches.
pub const SEARCH_BID: u16 = 2;
/// Buffer id of the SEARCH_AND_DELETE that onloads the unexpected headers (hybrid mode).
pub const ONLOAD_BID: u16 = 3;
/// Buffer ids of window LEs on the RMA PtlTE: `WIN_BID..WIN_BID + WIN_BIDS` (apart from the
/// control LE's and the keyed regions' ids on that PtlTE, so that freeing a window unlinks
/// only its own LE).
pub const WIN_BID: u16 = 0x2000;
/// How many windows can be live at once.
pub const WIN_BIDS: u16 = 0x2000;
/// First buffer id of overflow / request buffers.
pub const BUF_BID: u16 = 0x100;
/// First buffer id of receives.
pub const RECV_BID: u16 = 0x1000;

/// The MPI part of match bits.
pub fn user_bits(bits: u64) -> u64 {
    bits & !MatchBits::TRANSPORT_MASK
}

/// The rendezvous id carried in match bits.
pub fn rid_of(bits: u64) -> u8 {
    ((bits & RID_MASK) >> RID_SHIFT) as u8
}

/// Match bits of the Get that pulls a rendezvous put with `put_bits` (`struct
/// cxi_rdzv_match_bits`: rendezvous_id@0:8, transaction_type@8:4, put bits 48..64).
pub fn rdzv_get_bits(put_bits: u64) -> u64 {
    u64::from(rid_of(put_bits)) | RDZV_GET_TYPE << 8 | (put_bits & MatchBits::TRANSPORT_MASK)
}
