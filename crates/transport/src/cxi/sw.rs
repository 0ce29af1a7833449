//! Software matching (`FI_CXI_RX_MATCH_MODE=software`, cassini.md §4.3): the receive PtlTE is
//! SOFTWARE_MANAGED, so the NIC matches nothing and packs every message, wire headers
//! first, into the locally managed REQUEST buffers; the host matches with
//! [`crate::matching::Matcher`]. A rendezvous put leaves only its eager bytes there, and the
//! receiver pulls the rest with a Get to the source's rendezvous PtlTE once it matched.
//!
//! Hybrid mode starts in hardware matching and switches to this when the PtlTE enters flow
//! control ([`super::fc`]).

use firmware_spec::cassini::event::TargetLong;

use super::proto::{self, CTRL, DMA_WIRE_HDR, RDZV, SYNC};
use super::{CxiTransport, SwMsg};
use crate::error::Result;
use crate::{Completion, Envelope, MatchSpec, OpId};

impl CxiTransport {
    pub(super) fn sw_recv(&mut self, spec: MatchSpec, capacity: usize) -> Result<OpId> {
        let (id, _) = self.new_recv(capacity);
        if let Some((u, _)) = self.matcher.post(OpId(id), spec, id) {
            self.sw_deliver(id, u.envelope, u.data)?;
        }
        Ok(OpId(id))
    }

    pub(super) fn sw_cancel(&mut self, op: OpId) -> Result<bool> {
        if self.matcher.cancel(op).is_some() {
            self.drop_recv(op.0);
            self.done.insert(op, Completion::Cancelled);
            return Ok(true);
        }
        Ok(false)
    }

    pub(super) fn sw_claim(&mut self, spec: MatchSpec) -> Result<Option<(Envelope, OpId)>> {
        self.sw_take(&spec, usize::MAX)
    }

    /// The first message in the software unexpected queue that `spec` matches, delivered
    /// into a new receive of `capacity` (in hardware mode the queue holds what flow-control
    /// recovery onloaded, older than anything still on the NIC).
    pub(super) fn sw_take(
        &mut self,
        spec: &MatchSpec,
        capacity: usize,
    ) -> Result<Option<(Envelope, OpId)>> {
        let Some(u) = self.matcher.claim(spec) else {
            return Ok(None);
        };
        let (id, _) = self.new_recv(capacity);
        let env = u.envelope;
        self.sw_deliver(id, env, u.data)?;
        Ok(Some((env, OpId(id))))
    }

    /// A message landed in request buffer `i`.
    pub(super) fn on_request_landing(&mut self, i: usize, t: &TargetLong) -> Result<()> {
        let Some(lb) = self.landing.get_mut(i) else {
            return Ok(());
        };
        let rdzv = t.match_bits & RDZV != 0;
        let mlength = t.mlength as usize;
        let rlength = t.rlength as usize;
        // The wire headers land in front of the payload (cassini.md §4.2): a rendezvous put
        // is a DMA command and keeps only its eager part; anything else carried all of it.
        let (hdr, payload) = if rdzv {
            (DMA_WIRE_HDR, mlength.saturating_sub(DMA_WIRE_HDR))
        } else {
            (mlength.saturating_sub(rlength), rlength)
        };
        let off = t.start.wrapping_sub(lb.buf.md.iova()) + hdr as u64;
        let data = lb.buf.read(off, payload)?;
        // Posted again only once every message of this posting was reported and copied
        // out, not as soon as an event says `auto_unlinked` (`landing`).
        if lb.landed(t) {
            self.append_landing(i)?;
        }
        if t.match_bits & CTRL != 0 {
            self.on_notice(t.header_data);
            return Ok(());
        }
        let env = Envelope {
            source: self.rank_of(t.initiator)?,
            bits: proto::user_bits(t.match_bits),
            len: rlength,
        };
        let msg = SwMsg {
            eager: data,
            bits: t.match_bits,
            header_data: t.header_data,
        };
        match self.matcher.arrive(env, msg) {
            Some((p, msg)) => {
                self.bump("expected");
                self.sw_deliver(p.op.0, env, msg)
            }
            None => {
                self.bump("unexpected");
                Ok(())
            }
        }
    }

    /// Message `msg` matched receive `id`.
    pub(super) fn sw_deliver(&mut self, id: u64, env: Envelope, msg: SwMsg) -> Result<()> {
        if msg.bits & SYNC != 0 {
            self.send_notice(env.source, msg.header_data)?;
        }
        let rdzv = msg.bits & RDZV != 0;
        let eager = msg.eager.len();
        let Some(r) = self.recvs.get_mut(&id) else {
            return Ok(());
        };
        r.env = Some(env);
        r.eager = Some(msg.eager);
        if rdzv {
            r.rdzv_pending = true;
            self.sw_get(id, env.source, msg.bits, msg.header_data, eager)?;
        }
        self.finish_recv(id)
    }
}
