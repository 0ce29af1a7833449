//! Requests in flight, as the initiating NIC sees them: where one goes ([`Dest`]), who waits
//! for its answer ([`Owner`]), where the answer's data lands ([`Landing`]), and the table
//! that tags requests and numbers in-order streams ([`Requests`]).
//!
//! FMA and BTE build requests, the device stamps and sends them, the target side matches
//! answers to them by tag. This module imports no block.

use crate::fault::Fault;
use crate::mdd::Access;
use crate::packet::{Header, flag};
use emu_core::hash::IntMap;

/// Who waits for a request's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    /// An FMA sequence.
    Seq(u32),
    /// A BTE transfer.
    Xfer(u32),
}

/// Where the data of an answer lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Landing {
    /// Nowhere (acks).
    None,
    /// In a local memory domain; `flag`: write the 4-byte value 1 after `len` bytes.
    Mdd {
        acc: Access,
        offset: u64,
        len: u32,
        flag: bool,
    },
    /// At a DMA address (BTE with NAT off).
    Phys { addr: u64 },
}

/// An outstanding request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Req {
    pub(crate) owner: Owner,
    pub(crate) landing: Landing,
    /// A GET or fetching AMO (for the FMA status counters).
    pub(crate) is_get: bool,
}

/// How a request ended: its answer arrived (`fault` from its status or from landing its
/// data), or the watchdog gave up on it (`Fault::Timeout`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answer {
    pub(crate) req: Req,
    pub(crate) fault: Option<Fault>,
    /// The target lost the request's remote event to a full CQ.
    pub(crate) rem_overrun: bool,
    /// Further requests the same answer ends, tagged after the one of `req` (a train's
    /// frames, [`Requests::open_train`]); 0 for an answer of one frame.
    pub(crate) more: u32,
    /// The tag of `req`.
    pub(crate) tag: u32,
}

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dest {
    /// Physical PE.
    pub(crate) pe: u32,
    /// Target memory domain.
    pub(crate) acc: Access,
    /// In-order delivery requested.
    pub(crate) ordered: bool,
    /// Stream id (FMA descriptor or BTE channel).
    pub(crate) stream: u16,
}

/// The outstanding requests of one NIC, by tag, and the next position of each in-order
/// stream it sends.
#[derive(Clone, Debug, Default)]
pub(crate) struct Requests {
    reqs: IntMap<u32, Req>,
    next_tag: u32,
    order_tx: IntMap<(u32, u16), u32>,
}

impl Requests {
    /// Give `req` the next tag, stamp the tag and `dest`'s addressing (and its stream
    /// position, if ordered) into `hdr`, and remember who waits. Returns the tag.
    pub(crate) fn open(&mut self, req: Req, dest: &Dest, hdr: &mut Header) -> u32 {
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1);
        hdr.tag = tag;
        hdr.ptag = dest.acc.ptag;
        hdr.mdh = dest.acc.mdh;
        hdr.stream = dest.stream;
        if dest.acc.vmdh {
            hdr.flags |= flag::VMDH;
        }
        if dest.ordered {
            hdr.flags |= flag::ORDERED;
            let n = self.order_tx.entry((dest.pe, dest.stream)).or_insert(0);
            hdr.seq = *n;
            *n = n.wrapping_add(1);
        }
        self.reqs.insert(tag, req);
        tag
    }

    /// [`Requests::open`] for a train of `frames` frames (at least 1): each frame is a
    /// request of its own (consecutive tags, consecutive stream positions), as if sent one
    /// by one, so flow control, the watchdog and in-order streams count frames. `hdr` is
    /// stamped for the first. Returns the first tag.
    pub(crate) fn open_train(
        &mut self,
        req: Req,
        dest: &Dest,
        hdr: &mut Header,
        frames: u32,
    ) -> u32 {
        let first = self.open(req, dest, hdr);
        for _ in 1..frames {
            let mut h = *hdr;
            self.open(req, dest, &mut h);
        }
        first
    }

    /// The request tagged `tag`, which is no longer outstanding.
    pub(crate) fn take(&mut self, tag: u32) -> Option<Req> {
        self.reqs.remove(&tag)
    }

    /// The tags of `owner`'s outstanding requests, in ascending order.
    pub(crate) fn tags_of(&self, owner: Owner) -> Vec<u32> {
        let mut tags: Vec<u32> = self
            .reqs
            .iter()
            .filter(|(_, r)| r.owner == owner)
            .map(|(&t, _)| t)
            .collect();
        tags.sort_unstable();
        tags
    }

    /// How many requests are outstanding.
    pub(crate) fn len(&self) -> usize {
        self.reqs.len()
    }

    /// Whether no request is outstanding.
    pub(crate) fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }
}
