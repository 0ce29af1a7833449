//! Puts at the target: the first packet's data placed through the ATU (`place_put`), the
//! continuations and trains of a put longer than one MTU landing in its [`InMsg`]
//! (`continuation`, `train`), and the end of the put (`complete_put`: target events, CT,
//! ACK; for a matched rendezvous put, the Get that pulls the rest).

use emu_core::dma::Perm;
use emu_core::engine::DeviceIo;
use emu_core::fabric::{TrafficClass, Train};
use firmware_spec::cassini::cmd::DmaOp;
use firmware_spec::cassini::rc::ReturnCode;

use crate::atu::{Atu, cut_segments};
use crate::lpe::IncomingOutcome;
use crate::wire::{Continuation, Fab, MTU, Request, Response, RspKind};

use super::answer::TgtAnswer;
use super::ctx::TgtCtx;
use super::event::TgtEvents;
use super::state::{FramesSeen, InMsg};

/// Land train `t`, whose payload starts at offset `at` of message `m` (a frame boundary):
/// its payload is copied from the initiator's host memory straight into the landing range,
/// as its frames would have placed it, and every one of its frames counts as arrived.
fn land_train(atu: &mut Atu, io: &DeviceIo<'_>, m: &mut InMsg, at: u64, t: &Train) {
    let off = at + m.hdr;
    if m.data_rc == ReturnCode::Ok && off < m.length {
        let n = t.payload_len().min(m.length - off);
        let to = atu.segments_of(
            io.dma(),
            m.mapped.as_ref(),
            m.ac,
            m.start + off,
            n,
            Perm::WRITE,
            MTU as u64,
        );
        let from = cut_segments(&t.segments, n);
        let copied = to.and_then(|to| {
            t.source
                .copy_segments_to(&from, io.dma(), &to)
                .map_err(|_| ReturnCode::PcieUnsuccessCmpl)
        });
        if let Err(rc) = copied {
            m.data_rc = rc;
        }
    }
    let first = at / MTU as u64;
    for i in 0..u64::from(t.frames) {
        m.frames.saw(first + i);
    }
}

/// Whether a request is a rendezvous put.
fn op_is_rendezvous(req: &Request) -> bool {
    req.opcode == DmaOp::RendezvousPut as u8
}

/// Puts landing at the target, on anything that provides a [`TgtCtx`].
pub(crate) trait TgtPut: TgtCtx {
    /// A put's first packet: place its data, and finish it if it is the only packet.
    #[allow(clippy::too_many_arguments)]
    fn place_put(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        req: &Request,
        hdr: &[u8],
        payload: &[u8],
        tc: TrafficClass,
        pt: u16,
        outcome: IncomingOutcome,
    ) {
        let mut data_rc = ReturnCode::Ok;
        let (mut ac, mut start, mut length, mut hb) = (0u16, 0u64, 0u64, 0u64);
        let mut mapped = None;
        if let Some(d) = outcome.delivery {
            ac = self.tables().lac_ac(self.tables().ptlte_rgid(pt), d.lac);
            start = d.start;
            length = d.length;
            // REQUEST-list buffers get the wire headers in front of the payload.
            hb = d.header_bytes.min(length).min(hdr.len() as u64);
            // The whole landing range is checked before any byte is written (a single write
            // checks its whole range itself).
            let single = u64::from(req.request_len) <= payload.len() as u64 && hb == 0;
            let checked = if single {
                Ok(())
            } else {
                self.atu()
                    .map_range(io.dma(), ac, start, length, Perm::WRITE)
                    .map(|m| mapped = Some(m))
            };
            if let Err(rc) = checked {
                data_rc = rc;
            } else {
                if hb > 0
                    && let Err(rc) = self.atu().write(io.dma(), ac, start, &hdr[..hb as usize])
                {
                    data_rc = rc;
                }
                let n = (payload.len() as u64).min(length - hb) as usize;
                if n > 0
                    && data_rc == ReturnCode::Ok
                    && let Err(rc) = self.atu().write(io.dma(), ac, start + hb, &payload[..n])
                {
                    data_rc = rc;
                }
            }
        }
        if op_is_rendezvous(req)
            && let Some(id) = outcome.unexpected
        {
            self.tgt().pending_rdzv.insert(id, (*fab, tc));
        }
        // Bytes that travel with the request: a rendezvous put carries its eager part only.
        let rlength = if op_is_rendezvous(req) {
            u64::from(req.eager_length.min(req.request_len))
        } else {
            u64::from(req.request_len)
        };
        if rlength > payload.len() as u64 && outcome.return_code == ReturnCode::Ok {
            self.counters().rx_ptl_multi_msgs += 1;
            let m = InMsg {
                pt,
                ac,
                start,
                length,
                hdr: hb,
                frames: FramesSeen::new(rlength, payload.len() as u64),
                mapped,
                data_rc,
                outcome,
                tc,
                fab: *fab,
                at: io.now().as_ps(),
            };
            self.tgt().msgs.insert((fab.sfa >> 12, req.handle), m);
            if !self.ixe_scan_armed() {
                self.arm_scan(io);
            }
            return;
        }
        self.complete_put(io, fab, tc, req.handle, &outcome, data_rc, length);
    }

    /// A continuation of a put (and the train of further continuations it carries, if any).
    fn continuation(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        c: &Continuation,
        payload: &[u8],
        train: Option<&Train>,
    ) {
        self.counters().rx_ptl_continuation_pkt += 1 + train.map_or(0, |t| u64::from(t.frames));
        let key = (fab.sfa >> 12, c.handle);
        let (tgt, atu) = self.tgt_and_atu();
        let Some(m) = tgt.msgs.get_mut(&key) else {
            return;
        };
        let off = u64::from(c.offset) + m.hdr;
        if m.data_rc == ReturnCode::Ok && off < m.length {
            let n = (payload.len() as u64).min(m.length - off) as usize;
            let to = m.start + off;
            let w = match &m.mapped {
                Some(map) => atu.write_in(io.dma(), map, to, &payload[..n]),
                None => atu.write(io.dma(), m.ac, to, &payload[..n]),
            };
            if let Err(rc) = w {
                m.data_rc = rc;
            }
        }
        m.frames.saw(u64::from(c.offset) / MTU as u64);
        if let Some(t) = train {
            land_train(atu, io, m, u64::from(c.offset) + payload.len() as u64, t);
        }
        m.at = io.now().as_ps();
        if !m.frames.complete() {
            return;
        }
        let Some(m) = self.tgt().msgs.remove(&key) else {
            return;
        };
        let _ = m.pt;
        self.complete_put(io, &m.fab, m.tc, c.handle, &m.outcome, m.data_rc, m.length);
    }

    /// The continuation frames of a put that came as a train behind its first frame
    /// (`first` payload bytes).
    fn train(&mut self, io: &mut DeviceIo<'_>, fab: &Fab, handle: u32, first: u64, t: &Train) {
        self.counters().rx_ptl_continuation_pkt += u64::from(t.frames);
        let key = (fab.sfa >> 12, handle);
        let (tgt, atu) = self.tgt_and_atu();
        let Some(m) = tgt.msgs.get_mut(&key) else {
            return;
        };
        land_train(atu, io, m, first, t);
        m.at = io.now().as_ps();
        if !m.frames.complete() {
            return;
        }
        let Some(m) = self.tgt().msgs.remove(&key) else {
            return;
        };
        self.complete_put(io, &m.fab, m.tc, handle, &m.outcome, m.data_rc, m.length);
    }

    /// All of a put has landed (or failed): target events, CT, ACK.
    #[allow(clippy::too_many_arguments)]
    fn complete_put(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        handle: u32,
        outcome: &IncomingOutcome,
        data_rc: ReturnCode,
        length: u64,
    ) {
        let failed = data_rc != ReturnCode::Ok;
        self.post_target_events(io, &outcome.events, failed.then_some(data_rc));
        // A rendezvous whose Get the NIC issues counts when the Get completes.
        let pull = outcome
            .rendezvous
            .filter(|g| !failed && g.get_issued && g.length > 0);
        if pull.is_none() {
            self.apply_ct(io, outcome.ct, failed);
        }
        let rc = if outcome.return_code == ReturnCode::Ok && failed {
            data_rc
        } else {
            outcome.return_code
        };
        let r = Response {
            kind: RspKind::Ack,
            rc: rc.into(),
            ptl_list: outcome.list.map_or(0, u8::from),
            offset: 0,
            eom: true,
            handle,
            mlength: if rc == ReturnCode::Ok {
                length.min(u64::from(u32::MAX)) as u32
            } else {
                0
            },
        };
        self.respond(io, fab, tc, &r, &[]);
        if let Some(g) = pull {
            self.launch_rendezvous_get(io, &g, fab, tc, outcome.ct);
        }
    }

    /// Drop target messages that received no packet for `limit` ps (their initiator times
    /// out on its own).
    fn expire_target_messages(&mut self, now: u64, limit: u64) {
        self.tgt()
            .msgs
            .retain(|_, m| now.saturating_sub(m.at) < limit);
    }

    /// Whether target messages are waiting for more packets.
    fn target_busy(&mut self) -> bool {
        !self.tgt().msgs.is_empty()
    }
}

impl<T: TgtCtx + ?Sized> TgtPut for T {}
