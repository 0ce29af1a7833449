//! What the target keeps between packets: the puts still receiving packets ([`InMsg`],
//! [`FramesSeen`]), the Gets and rendezvous puts waiting for an append ([`PendingGet`]), and
//! the Gets answered as trains whose events are owed to their last frame ([`ReplyStream`],
//! [`OwedGet`]). A leaf of `tgt`: every stage of the journey reads and changes it.

use emu_core::fabric::{PortId, TrafficClass};
use emu_core::hash::IntMap;
use firmware_spec::cassini::rc::ReturnCode;

use crate::atu::Mapped;
use crate::block::GetCtrl;
use crate::lpe::{CtUpdate, IncomingOutcome, TargetEvent};
use crate::wire::{AmoPayload, Fab, MTU, Response};

/// Target state between packets.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tgt {
    pub(super) msgs: IntMap<(u32, u32), InMsg>,
    pub(super) pending_gets: IntMap<u64, PendingGet>,
    /// Rendezvous puts waiting as unexpected headers: the fabric header and traffic class
    /// they arrived with (for the Get an append will start).
    pub(super) pending_rdzv: IntMap<u64, (Fab, TrafficClass)>,
    pub(crate) rdzv_get: GetCtrl,
    /// Target events of Gets answered as trains, by [`ReplyStream::token`]: posted when
    /// their last REPLY packet is acknowledged.
    pub(super) owed: IntMap<u64, OwedGet>,
    pub(super) next_token: u64,
}

/// A put longer than one packet, between its first and last packet.
#[derive(Debug, Clone)]
pub(crate) struct InMsg {
    pub(super) pt: u16,
    pub(super) ac: u16,
    /// Where the data goes and how much of it is placed (after truncation), including `hdr`
    /// bytes of wire headers in front of the payload (REQUEST list).
    pub(super) start: u64,
    pub(super) length: u64,
    pub(super) hdr: u64,
    /// Which of its frames have arrived (frame `i` carries the bytes at `i * MTU`).
    pub(super) frames: FramesSeen,
    /// The landing range as checked at the first frame, translated once for all of them.
    pub(super) mapped: Option<Mapped>,
    pub(super) data_rc: ReturnCode,
    pub(super) outcome: IncomingOutcome,
    pub(super) tc: TrafficClass,
    pub(super) fab: Fab,
    /// When its last packet arrived (ps): a message still receiving packets is alive,
    /// however long it takes in all.
    pub(super) at: u64,
}

/// The frames of a multi-packet put that have arrived. A put is complete when every frame
/// has come, whatever their order: the frames of a restricted put travel unordered (cassini.md
/// §2), so neither the frame flagged end-of-message nor a byte count (duplicates) says that
/// the rest has landed. Kept as the count of frames seen in order plus the ones seen ahead of
/// it, so its size follows the frames that arrived out of order, not the message length.
#[derive(Debug, Clone, Default)]
pub(crate) struct FramesSeen {
    total: u64,
    upto: u64,
    ahead: std::collections::BTreeSet<u64>,
}

impl FramesSeen {
    /// A message of `bytes` bytes on the wire, its first frame (`first` bytes) arrived.
    pub(super) fn new(bytes: u64, first: u64) -> Self {
        let mut f = FramesSeen {
            total: bytes.div_ceil(MTU as u64).max(1),
            ..FramesSeen::default()
        };
        if first > 0 {
            f.saw(0);
        }
        f
    }

    /// Frame `i` arrived (a duplicate or a frame beyond the message changes nothing).
    pub(super) fn saw(&mut self, i: u64) {
        if i < self.upto || i >= self.total {
            return;
        }
        if i > self.upto {
            self.ahead.insert(i);
            return;
        }
        self.upto += 1;
        while self.ahead.remove(&self.upto) {
            self.upto += 1;
        }
    }

    /// Every frame has arrived.
    pub(super) fn complete(&self) -> bool {
        self.upto >= self.total
    }
}

/// The REPLY frames of a Get answered as trains ([`Train`]): on the threaded engine, when
/// nothing on the way to a port of this process needs the frames' bytes
/// ([`DeviceIo::train_ok`]). The PCT keeps it in the connection's backlog and asks for the
/// next packet as the window opens ([`TgtGet::reply_next`](super::TgtGet::reply_next)): a frame read from host memory
/// carrying a train of as many following frames as the window's room allows, their payload
/// left in this NIC's host memory for the initiator to copy when the train lands. The
/// target events of the Get ([`OwedGet`]) are posted when the last packet is acknowledged,
/// so they never come before the bytes were read.
#[derive(Debug, Clone)]
pub(crate) struct ReplyStream {
    /// The fabric header of the frames (from this NIC to the initiator).
    pub(super) back: Fab,
    pub(super) src: PortId,
    pub(super) dst: PortId,
    pub(super) tc: TrafficClass,
    /// The frames' response header (handle, list, total length).
    pub(super) rsp: Response,
    pub(super) ac: u16,
    pub(super) start: u64,
    /// Offset of the next frame's bytes in the reply.
    pub(super) off: u64,
    pub(super) length: u64,
    /// The key of the owed target events in [`Tgt::owed`].
    pub(super) token: u64,
    /// A train could not be made (a piece of the source would not read): the rest goes
    /// frame by frame, each read when it leaves.
    pub(super) frames_only: bool,
}

impl ReplyStream {
    /// The PCT connection the frames travel on: (fabric port, VNI, traffic class).
    pub(crate) fn conn_key(&self) -> (u32, u16, u8) {
        (self.dst.0, self.back.vni, self.tc.0)
    }

    /// Whether every frame has been made.
    pub(crate) fn done(&self) -> bool {
        self.off >= self.length
    }

    /// The key of the target events owed to the stream's end.
    pub(crate) fn token(&self) -> u64 {
        self.token
    }
}

/// The target events and counting event of a Get answered as trains, posted once its
/// REPLY frames have been read ([`ReplyStream`]).
#[derive(Debug, Clone)]
pub(crate) struct OwedGet {
    pub(super) events: Vec<TargetEvent>,
    pub(super) ct: Option<CtUpdate>,
    /// The return code of the read (a frame that would not read ends the reply with it).
    pub(super) rc: ReturnCode,
}

/// A Get that matched an overflow entry (DELAYED): answered when an append matches its
/// unexpected header.
#[derive(Debug, Clone, Copy)]
pub(super) struct PendingGet {
    pub(super) fab: Fab,
    pub(super) handle: u32,
    pub(super) tc: TrafficClass,
    /// A delayed atomic (else a Get).
    pub(super) amo: Option<(AmoPayload, bool)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_is_complete_once_every_frame_came_in_any_order() {
        let mtu = MTU as u64;
        let mut f = FramesSeen::new(4 * mtu - 1, mtu);
        f.saw(3);
        assert!(!f.complete(), "the last frame alone does not complete it");
        f.saw(3);
        f.saw(99);
        f.saw(0);
        assert!(
            !f.complete(),
            "duplicates and frames beyond it count nothing"
        );
        f.saw(1);
        assert!(!f.complete());
        f.saw(2);
        assert!(f.complete());
        assert!(f.ahead.is_empty(), "frames seen ahead are folded in");
        let mut in_order = FramesSeen::new(3 * mtu, mtu);
        in_order.saw(1);
        assert!(!in_order.complete());
        in_order.saw(2);
        assert!(in_order.complete());
        assert!(in_order.ahead.is_empty());
    }
}
