//! The initiator's state: the table of outstanding requests waiting for an ACK or a REPLY
//! ([`Ixe`], [`Req`]; handles carry a generation so a late response cannot complete a newer
//! request), the timeout rules, and the continuation frames of a put still to be streamed
//! ([`OutStream`]). A leaf of `ixe`.

use emu_core::fabric::{PortId, TrafficClass};
use emu_core::time::SimDuration;
use firmware_spec::cassini::cmd::DmaFlags;
use firmware_spec::cassini::rc::ReturnCode;

use crate::atu::Mapped;
use crate::lpe::CtUpdate;
use crate::wire::Fab;

/// The `cq` of a request no command queue launched (a rendezvous Get the NIC issues).
pub(super) const NO_CQ: u32 = u32::MAX;

/// Outstanding requests the initiator can track (handles are 20 bits on the wire).
const MAX_REQUESTS: usize = 1 << INDEX_BITS;
/// A handle is a table index (low 16 bits) and a generation (high 4 bits) bumped each time
/// the entry is reused, so a late or duplicated response cannot complete a newer request.
const INDEX_BITS: u32 = 16;
const GEN_MASK: u32 = 0xF;

/// Kind of an outstanding request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ReqKind {
    #[default]
    Put,
    Get,
    /// Non-fetching atomic (completes with an ACK).
    Amo,
    /// Fetching atomic (completes with a REPLY carrying the old value).
    FetchAmo,
}

/// An outstanding request.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Req {
    pub(super) active: bool,
    pub(super) kind: ReqKind,
    pub(super) cq: u32,
    pub(super) eq: u16,
    pub(super) ct: u16,
    pub(super) user_ptr: u64,
    pub(super) flags: DmaFlags,
    /// Non-matching command: success events are never posted.
    pub(super) nomatch: bool,
    pub(super) rlength: u32,
    /// Get: where the reply data goes.
    pub(super) local_ac: u16,
    pub(super) local_addr: u64,
    /// Get: first data error while landing the reply.
    pub(super) data_rc: Option<ReturnCode>,
    /// When it was launched (ps of engine time).
    pub(super) at: u64,
    /// Time added to [`REQUEST_TIMEOUT`] for this request (ps): a restricted put's
    /// [`restricted_grace`].
    pub(super) grace: u64,
    /// Generation of the table entry (see [`INDEX_BITS`]).
    pub(super) generation: u32,
    /// A rendezvous Get the NIC issued: its REPLY event has `rendezvous` set.
    pub(super) rendezvous: bool,
    /// The receiving entry's counting event, applied when the rendezvous Get completes.
    pub(super) rdzv_ct: Option<CtUpdate>,
    /// A put sent as a train (`Train`): the target reads its source buffer when the train
    /// arrives, so its SEND event is owed until the request completes.
    pub(super) send_owed: bool,
}

/// How long a request waits for its ACK or REPLY (counted from its launch, or from the last
/// sign of life this initiator saw, whichever is later: a response, or the PCT's
/// acknowledgement of packets) before it completes with UNDELIVERABLE. The fabric may lose
/// packets: a port without a device, a link down, drop faults. Sequenced messages stream
/// (their frames are read as the window opens and acknowledged as they land), so a long one
/// stays alive while it moves; a restricted put is answered only once all of it has landed,
/// so its timeout is extended by [`restricted_grace`].
pub(crate) const REQUEST_TIMEOUT: SimDuration = SimDuration::from_us(1_000_000);
/// The slowest rate at which the emulator is assumed to carry a restricted put's bytes
/// (bytes per second of engine time). A restricted put is unsequenced: all its frames leave
/// at the doorbell and nothing comes back until the last has landed, so on the threaded
/// engine its answer arrives only after the host CPU moved every byte. Its timeout is
/// extended by the time its length takes at this rate (1 GiB: 21.5 s), so the emulator's
/// own slowness is not reported as a lost packet; a put that is really lost still completes
/// UNDELIVERABLE after the extended time. An emulator rule, not a hardware figure (the
/// hardware carries 1 GiB in about 43 ms at 200 Gb/s, well inside its timeout).
pub(crate) const RESTRICTED_FLOOR_BYTES_PER_S: u64 = 50_000_000;

/// The extra timeout of a restricted put of `len` bytes ([`RESTRICTED_FLOOR_BYTES_PER_S`]).
pub(crate) fn restricted_grace(len: u32) -> SimDuration {
    SimDuration::from_ps(u64::from(len) * (1_000_000_000_000 / RESTRICTED_FLOOR_BYTES_PER_S))
}
/// Period of the timeout scan while requests are outstanding.
pub(crate) const SCAN_PERIOD: SimDuration = SimDuration::from_us(10_000);
/// Timer token of the timeout scan.
pub(crate) const TOKEN_SCAN: u64 = 1;

/// The outstanding-request table.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ixe {
    pub(super) reqs: Vec<Req>,
    pub(super) free: Vec<u32>,
    /// The timeout scan is armed.
    pub(super) scan_armed: bool,
    /// When a response for a live request last arrived (ps). A request's timeout runs from
    /// the later of its launch and this: while answers keep coming the pipe is draining, and
    /// requests queued behind a long backlog (hundreds of multi-MiB puts launched by one
    /// doorbell) must not expire just because their turn has not come yet. A request that is
    /// really lost still completes UNDELIVERABLE once the initiator has heard nothing for
    /// [`REQUEST_TIMEOUT`].
    pub(super) last_progress: u64,
    /// Transmit CQs stalled at a command because every request entry was in use; run again
    /// when one is released ([`IxeComplete::finish`](super::IxeComplete::finish)). The hardware back-pressures the queue
    /// rather than failing the command.
    pub(super) stalled: Vec<u32>,
}

impl Ixe {
    pub(crate) fn new() -> Self {
        Ixe::default()
    }

    pub(super) fn alloc(&mut self, mut r: Req) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            let slot = &mut self.reqs[i as usize];
            r.generation = (slot.generation + 1) & GEN_MASK;
            *slot = r;
            return Some(i | (r.generation << INDEX_BITS));
        }
        if self.reqs.len() >= MAX_REQUESTS {
            return None;
        }
        r.generation = 0;
        self.reqs.push(r);
        Some((self.reqs.len() - 1) as u32)
    }

    fn slot(h: u32) -> usize {
        (h & ((1 << INDEX_BITS) - 1)) as usize
    }

    pub(super) fn get(&self, h: u32) -> Option<&Req> {
        self.reqs
            .get(Self::slot(h))
            .filter(|r| r.active && r.generation == h >> INDEX_BITS)
    }

    pub(super) fn get_mut(&mut self, h: u32) -> Option<&mut Req> {
        self.reqs
            .get_mut(Self::slot(h))
            .filter(|r| r.active && r.generation == h >> INDEX_BITS)
    }

    pub(super) fn release(&mut self, h: u32) {
        if let Some(r) = self.get_mut(h) {
            r.active = false;
            self.free.push(Self::slot(h) as u32);
        }
    }

    /// The handle of the active entry at index `i`.
    pub(super) fn handle_of(&self, i: usize) -> u32 {
        let g = self.reqs.get(i).map_or(0, |r| r.generation);
        i as u32 | (g << INDEX_BITS)
    }
}

/// The continuation frames of a put still to be sent, read from host memory one frame at a
/// time as the connection's window opens (the hardware streams a message from host memory;
/// it does not stage it). The PCT keeps it in the connection's backlog and asks the
/// initiator for the next frame ([`IxeLaunch::stream_next`](super::IxeLaunch::stream_next));
/// the SEND event follows the last.
#[derive(Debug, Clone)]
pub(crate) struct OutStream {
    pub(super) handle: u32,
    pub(super) fab: Fab,
    pub(super) src: PortId,
    pub(super) dst: PortId,
    pub(super) tc: TrafficClass,
    pub(super) ac: u16,
    pub(super) addr: u64,
    /// Offset of the next frame's bytes in the message.
    pub(super) off: usize,
    pub(super) total: usize,
    /// The source buffer as checked at the launch, translated once for every frame.
    pub(super) mapped: Option<Box<Mapped>>,
}

impl OutStream {
    /// The request the frames belong to.
    pub(crate) fn handle(&self) -> u32 {
        self.handle
    }

    /// The PCT connection the frames travel on: (fabric port, VNI, traffic class).
    pub(crate) fn conn_key(&self) -> (u32, u16, u8) {
        (self.dst.0, self.fab.vni, self.tc.0)
    }

    /// Whether every frame has been made.
    pub(crate) fn done(&self) -> bool {
        self.off >= self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_handles_change_generation_and_stale_ones_miss() {
        let mut t = Ixe::new();
        let r = Req {
            active: true,
            ..Req::default()
        };
        let a = t.alloc(r).unwrap();
        let b = t.alloc(r).unwrap();
        assert_ne!(a, b);
        assert!(t.get(a).is_some());
        t.release(a);
        assert!(t.get(a).is_none());
        let c = t.alloc(r).unwrap();
        assert_eq!(c & 0xFFFF, a & 0xFFFF, "the entry is reused");
        assert_ne!(c, a, "with a new generation");
        assert!(
            t.get(a).is_none(),
            "a late response for the old request misses"
        );
        t.release(a);
        assert!(t.get(c).is_some(), "and cannot release the new one");
        assert!(c < 1 << 20, "handles fit the 20 wire bits");
    }
}
