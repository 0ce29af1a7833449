//! Hardware matching (`FI_CXI_RX_MATCH_MODE=hardware`, cassini.md §4.2): a posted receive is
//! a use-once PRIORITY LE with its match bits, ignore bits and the initiator's match id
//! (`CXI_MATCH_ID_ANY` for `MPI_ANY_SOURCE`). A message no LE takes lands in an OVERFLOW
//! buffer and leaves an unexpected header in the NIC; an append that matches a header gives
//! PUT_OVERFLOW and the eager bytes are copied out of the overflow buffer. A rendezvous put
//! matched by an LE is pulled by the target NIC itself (RENDEZVOUS with `get_issued`, then a
//! REPLY). Probe is a SEARCH of the unexpected list, claim a SEARCH_AND_DELETE of one header
//! (the rest of a claimed rendezvous is then pulled by a Get software issues), cancel an
//! UNLINK.

use std::collections::HashMap;

use firmware_spec::cassini::cmd::{DmaFlags, DmaOp, TgtOp};
use firmware_spec::cassini::dma::FullDma;
use firmware_spec::cassini::event::TargetLong;
use firmware_spec::cassini::le::{LeFlags, PtlList};
use firmware_spec::cassini::rc::ReturnCode;

use super::endpoint::Buf;
use super::proto::{self, RDZV, RECV_IGNORE, SYNC};
use super::retry::RdzvSource;
use super::{CxiTransport, RecvOp, UxKey};
use crate::error::{Error, Result};
use crate::{Completion, Envelope, MatchSpec, OpId};

/// A receive whose bytes are all there, not yet tested: the first `keep` bytes of the
/// message are `eager` followed by `buf` from offset `eager.len()` (all of them in `buf` when
/// the message landed in the receive's LE, `eager` empty).
pub(super) struct Arrived {
    envelope: Envelope,
    keep: usize,
    eager: Vec<u8>,
    buf: Option<Buf>,
    /// `buf` is the application's own memory (a zero-copy receive).
    zero_copy: bool,
}

/// Fill `out` with the bytes of an arrived receive: `eager` first, then `buf` from offset
/// `eager.len()`.
fn copy_arrived(eager: &[u8], buf: Option<&Buf>, out: &mut [u8]) -> Result<()> {
    let n = eager.len().min(out.len());
    out[..n].copy_from_slice(&eager[..n]);
    let rest = &mut out[n..];
    if rest.is_empty() {
        return Ok(());
    }
    let b = buf.ok_or_else(|| Error::Transport("cxi: a receive's bytes went missing".into()))?;
    b.mem
        .read(n as u64, rest)
        .map_err(|e| Error::Transport(format!("cxi: reading a receive buffer: {e}")))
}

/// Take what is kept for the unexpected message `key` at IOVA `start` (its eager bytes, or
/// the receive waiting for them), forgetting the IOVA once nothing else is kept there: an
/// emptied entry left behind would read as something still awaited (the hybrid switch
/// waits until nothing is).
pub(super) fn take_at<V>(
    map: &mut HashMap<u64, Vec<(UxKey, V)>>,
    start: u64,
    key: UxKey,
) -> Option<V> {
    let v = map.get_mut(&start)?;
    let i = v.iter().position(|(k, _)| *k == key)?;
    let (_, x) = v.remove(i);
    if v.is_empty() {
        map.remove(&start);
    }
    Some(x)
}

/// The LE match fields of `spec`.
fn le_bits(spec: &MatchSpec) -> (u64, u64) {
    (
        proto::user_bits(spec.bits),
        (spec.ignore & !proto::CTRL) | RECV_IGNORE,
    )
}

impl CxiTransport {
    fn spec_match_id(&self, spec: &MatchSpec) -> u32 {
        spec.source.map_or(u32::MAX, |s| self.match_ids[s as usize])
    }

    pub(super) fn new_recv(&mut self, capacity: usize) -> (u64, u16) {
        let id = self.new_op();
        let bid = self.new_bid(id);
        self.recvs.insert(
            id,
            RecvOp {
                capacity,
                bid,
                spec: None,
                cancelling: false,
                append_failed: false,
                buf: None,
                env: None,
                expected: false,
                eager: None,
                ux_start: None,
                rdzv_pending: false,
                rdzv_from: None,
                tries: 0,
                zero_copy: false,
            },
        );
        (id, bid)
    }

    pub(super) fn hw_recv(&mut self, spec: MatchSpec, capacity: usize) -> Result<OpId> {
        let (id, bid) = self.new_recv(capacity);
        let buf = self.ep.buf(capacity)?;
        self.hw_post(id, bid, spec, capacity, buf)
    }

    /// A receive posted as a priority LE over `buf`: the application's own memory, where the
    /// message lands in place (zero copy).
    pub(super) fn hw_recv_in_place(
        &mut self,
        spec: MatchSpec,
        capacity: usize,
        buf: Buf,
    ) -> Result<OpId> {
        let (id, bid) = self.new_recv(capacity);
        if let Some(r) = self.recvs.get_mut(&id) {
            r.zero_copy = true;
        }
        self.hw_post(id, bid, spec, capacity, buf)
    }

    fn hw_post(
        &mut self,
        id: u64,
        bid: u16,
        spec: MatchSpec,
        capacity: usize,
        buf: Buf,
    ) -> Result<OpId> {
        let (bits, ignore) = le_bits(&spec);
        let match_id = self.spec_match_id(&spec);
        let pte = self.ep.rx.pte.clone();
        self.ep.append(
            &pte,
            PtlList::Priority,
            Some((&buf, capacity as u64)),
            LeFlags::OP_PUT
                | LeFlags::USE_ONCE
                | LeFlags::EVENT_UNLINK_DISABLE
                | LeFlags::UNRESTRICTED_BODY_RO
                | LeFlags::UNRESTRICTED_END_RO,
            match_id,
            bits,
            ignore,
            bid,
            0,
        )?;
        if let Some(op) = self.recvs.get_mut(&id) {
            op.buf = Some(buf);
            op.spec = Some(spec);
        }
        Ok(OpId(id))
    }

    /// Wait for the answer (SEARCH or UNLINK event) to the target command tagged `bid`.
    fn answer(&mut self, bid: u16, what: &str) -> Result<TargetLong> {
        self.wait_for(what, |t| t.answers.remove(&bid))
    }

    pub(super) fn hw_cancel(&mut self, op: OpId) -> Result<bool> {
        let Some(r) = self.recvs.get_mut(&op.0) else {
            return Ok(false);
        };
        if r.env.is_some() {
            return Ok(false);
        }
        // A hybrid switch starting meanwhile leaves this LE to the cancel.
        r.cancelling = true;
        let bid = r.bid;
        self.ep.target_cmd(
            TgtOp::Unlink,
            PtlList::Priority,
            LeFlags::empty(),
            0,
            0,
            0,
            bid,
        )?;
        let ev = self.answer(bid, "waiting for an UNLINK")?;
        if let Some(r) = self.recvs.get_mut(&op.0) {
            r.cancelling = false;
        }
        if ev.return_code != ReturnCode::Ok {
            // Already matched: its events are on their way.
            return Ok(false);
        }
        self.drop_recv(op.0);
        self.done.insert(op, Completion::Cancelled);
        Ok(true)
    }

    /// Forget receive `id` and give back its resources.
    pub(super) fn drop_recv(&mut self, id: u64) -> Option<RecvOp> {
        let mut r = self.recvs.remove(&id)?;
        self.bids.remove(&r.bid);
        if let Some(b) = r.buf.take() {
            self.ep.release(b);
        }
        Some(r)
    }

    pub(super) fn hw_probe(&mut self, spec: MatchSpec) -> Result<Option<Envelope>> {
        let (bits, ignore) = le_bits(&spec);
        let match_id = self.spec_match_id(&spec);
        self.ep.target_cmd(
            TgtOp::Search,
            PtlList::Unexpected,
            LeFlags::empty(),
            match_id,
            bits,
            ignore,
            proto::SEARCH_BID,
        )?;
        let ev = self.answer(proto::SEARCH_BID, "waiting for a SEARCH")?;
        if ev.return_code != ReturnCode::Ok {
            return Ok(None);
        }
        Ok(Some(Envelope {
            source: self.rank_of(ev.initiator)?,
            bits: proto::user_bits(ev.match_bits),
            len: ev.rlength as usize,
        }))
    }

    pub(super) fn hw_claim(&mut self, spec: MatchSpec) -> Result<Option<(Envelope, OpId)>> {
        let (bits, ignore) = le_bits(&spec);
        let match_id = self.spec_match_id(&spec);
        let (id, bid) = self.new_recv(usize::MAX);
        self.ep.target_cmd(
            TgtOp::SearchAndDelete,
            PtlList::Unexpected,
            LeFlags::USE_ONCE,
            match_id,
            bits,
            ignore,
            bid,
        )?;
        let ev = self.answer(bid, "waiting for a SEARCH_AND_DELETE")?;
        if ev.return_code != ReturnCode::Ok {
            self.drop_recv(id);
            return Ok(None);
        }
        // The PUT_OVERFLOW of the removed header came before the SEARCH event.
        let env = match self.recvs.get(&id) {
            Some(r) => r.env,
            None => self.arrived_envelope(OpId(id)),
        };
        let env = env.ok_or_else(|| {
            Error::Transport("cxi: SEARCH_AND_DELETE matched but reported no header".into())
        })?;
        Ok(Some((env, OpId(id))))
    }

    /// PUT on the priority list into receive `id`: the message was expected.
    pub(super) fn on_expected(&mut self, id: u64, t: &TargetLong) -> Result<()> {
        let env = Envelope {
            source: self.rank_of(t.initiator)?,
            bits: proto::user_bits(t.match_bits),
            len: t.rlength as usize,
        };
        self.bump("expected");
        if let Some(r) = self.recvs.get_mut(&id) {
            r.env = Some(env);
            r.expected = true;
            r.rdzv_pending = t.match_bits & RDZV != 0;
        }
        self.finish_recv(id)
    }

    /// A message landed in overflow buffer `i` (unexpected).
    pub(super) fn on_overflow_landing(&mut self, i: usize, t: &TargetLong) -> Result<()> {
        let Some(lb) = self.landing.get_mut(i) else {
            return Ok(());
        };
        let off = t.start.wrapping_sub(lb.buf.md.iova());
        let data = lb.buf.read(off, t.mlength as usize)?;
        lb.outstanding += 1;
        lb.landed(t);
        self.bump("unexpected");
        let key = (t.initiator, t.match_bits, t.rlength);
        match take_at(&mut self.ux_waiting, t.start, key) {
            Some(id) => {
                self.ux_consumed(t.start)?;
                if let Some(r) = self.recvs.get_mut(&id) {
                    r.eager = Some(data);
                    r.ux_start = None;
                }
                self.finish_recv(id)
            }
            None => {
                self.ux_data.entry(t.start).or_default().push((key, data));
                Ok(())
            }
        }
    }

    /// The unexpected message at `start` is no longer needed: its overflow buffer may go
    /// back to the NIC once its posting is finished (every message it took was reported,
    /// `landing`) and nothing in it is needed.
    pub(super) fn ux_consumed(&mut self, start: u64) -> Result<()> {
        let Some(i) = self.landing.iter().position(|l| {
            let base = l.buf.md.iova();
            start >= base && start < base + l.buf.mem.len()
        }) else {
            return Ok(());
        };
        let lb = &mut self.landing[i];
        lb.outstanding = lb.outstanding.saturating_sub(1);
        if lb.posting.finished() && lb.outstanding == 0 && i > 0 {
            self.append_landing(i)?;
        }
        Ok(())
    }

    /// PUT_OVERFLOW into receive (or claim) `id`: an unexpected header was matched.
    pub(super) fn on_ux_matched(&mut self, id: u64, t: &TargetLong) -> Result<()> {
        self.fc_ule_freed();
        let source = self.rank_of(t.initiator)?;
        let env = Envelope {
            source,
            bits: proto::user_bits(t.match_bits),
            len: t.rlength as usize,
        };
        if t.match_bits & SYNC != 0 {
            self.send_notice(source, t.header_data)?;
        }
        let key = (t.initiator, t.match_bits, t.rlength);
        let mut data = take_at(&mut self.ux_data, t.start, key);
        if self.cfg.inject_ux_bug
            && let Some(last) = data.as_mut().and_then(|d| d.last_mut())
        {
            // The deliberate bug of `Config::inject_ux_bug` (once per transport).
            *last ^= 0xFF;
            self.cfg.inject_ux_bug = false;
        }
        let known = data.is_some();
        if known {
            self.ux_consumed(t.start)?;
        } else {
            // Matched while its message is still landing: the NIC reports the message
            // when its last packet is in.
            self.bump("ux_matched_early");
            self.ux_waiting.entry(t.start).or_default().push((key, id));
        }
        let rdzv = t.match_bits & RDZV != 0;
        let Some(r) = self.recvs.get_mut(&id) else {
            return Ok(());
        };
        r.env = Some(env);
        r.eager = data;
        if !known {
            r.ux_start = Some(t.start);
        }
        if rdzv {
            r.rdzv_pending = true;
            if r.buf.is_none() {
                // Claimed: no LE, so no NIC Get; pull the rest from the source ourselves.
                let eager = t.mlength as usize;
                self.sw_get(id, source, t.match_bits, t.header_data, eager)?;
            }
        }
        self.finish_recv(id)
    }

    /// Pull the part of rendezvous message (`put_bits`, source IOVA `src`) after its `eager`
    /// bytes into receive `id` with a Get to the source's rendezvous PtlTE (what libfabric
    /// does when the RENDEZVOUS event says `get_issued = 0`, cassini.md §6).
    pub(super) fn sw_get(
        &mut self,
        id: u64,
        source: u32,
        put_bits: u64,
        src: u64,
        eager: usize,
    ) -> Result<()> {
        let Some(r) = self.recvs.get_mut(&id) else {
            return Ok(());
        };
        r.rdzv_from = Some(RdzvSource {
            source,
            put_bits,
            src,
            eager,
        });
        let len = r.env.map_or(0, |e| e.len);
        let keep = len.min(r.capacity);
        // At least one byte, so that the source sees its Get and completes.
        let n = keep.saturating_sub(eager).max(1);
        let buf = match r.buf.is_some() {
            true => None,
            false => Some(self.ep.buf(eager + n)?),
        };
        if let Some(b) = buf
            && let Some(r) = self.recvs.get_mut(&id)
        {
            r.buf = Some(b);
        }
        let (local, lac) = {
            let b = self.recvs[&id].buf.as_ref().expect("buffer set above");
            (b.iova(eager as u64), b.md.lac())
        };
        let to = self.peers[source as usize];
        let (dfa, index_ext) = self.ep.dfa(to, self.ep.rdzv_get_idx);
        self.ep.dma(FullDma {
            opcode: DmaOp::Get,
            index_ext,
            lac,
            flags: DmaFlags::default(),
            dfa,
            remote_offset: src + eager as u64,
            local_addr: local,
            request_len: n as u32,
            eq: self.ep.eq.eqn() as u16,
            initiator: self.ep.my_match_id(),
            match_bits: proto::rdzv_get_bits(put_bits),
            user_ptr: id,
            ..FullDma::default()
        })?;
        self.bump("sw_gets");
        Ok(())
    }

    /// Complete receive `id` once its envelope and every byte are there. The bytes stay where
    /// the NIC put them (the receive's buffer, and the eager part taken from an overflow or
    /// request buffer) until the receive is tested: [`CxiTransport::take_arrived`] then copies
    /// them once, into the caller's buffer when there is one.
    pub(super) fn finish_recv(&mut self, id: u64) -> Result<()> {
        let Some(r) = self.recvs.get(&id) else {
            return Ok(());
        };
        let Some(env) = r.env else {
            return Ok(());
        };
        if r.ux_start.is_some() || r.rdzv_pending {
            return Ok(());
        }
        let mut r = self.drop_recv_keep_buf(id);
        let keep = env.len.min(r.capacity);
        // The eager part: the front of the message when it did not land in the LE.
        let eager = if r.expected {
            Vec::new()
        } else {
            let mut e = r.eager.take().unwrap_or_default();
            e.truncate(keep);
            e
        };
        let buf = r.buf.take();
        if eager.len() < keep && buf.is_none() {
            return Err(Error::Transport(format!(
                "cxi: receive {id} completed with {} of {keep} bytes and no buffer for the rest",
                eager.len()
            )));
        }
        self.arrived.insert(
            OpId(id),
            Arrived {
                envelope: env,
                keep,
                eager,
                buf,
                zero_copy: r.zero_copy,
            },
        );
        Ok(())
    }

    /// The envelope of receive `op` if it completed and was not tested yet.
    pub(super) fn arrived_envelope(&self, op: OpId) -> Option<Envelope> {
        self.arrived.get(&op).map(|a| a.envelope)
    }

    /// Complete receive `op` if its bytes arrived: copied straight into `out` when it is given
    /// and has room for them ([`Completion::Landed`], counted `recv_landed`), else into a new
    /// vector ([`Completion::Received`], counted `recv_copied`: owned receives, claimed
    /// messages received into a shorter buffer).
    pub(super) fn take_arrived(
        &mut self,
        op: OpId,
        out: Option<&mut [u8]>,
    ) -> Result<Option<Completion>> {
        let Some(a) = self.arrived.remove(&op) else {
            return Ok(None);
        };
        let Arrived {
            envelope,
            keep,
            eager,
            buf,
            zero_copy,
        } = a;
        if zero_copy {
            // The NIC wrote the message in place; an eager part it first put in an overflow
            // buffer (the message came unexpected) goes in front of it.
            if let Some(b) = buf {
                if !eager.is_empty() {
                    b.write(0, &eager)?;
                }
                self.ep.release(b);
            }
            self.bump("recv_zero_copy");
            return Ok(Some(Completion::Landed {
                envelope,
                len: keep,
            }));
        }
        let c = match out {
            Some(out) if out.len() >= keep => {
                copy_arrived(&eager, buf.as_ref(), &mut out[..keep])?;
                self.bump("recv_landed");
                Completion::Landed {
                    envelope,
                    len: keep,
                }
            }
            _ => {
                let data = if buf.is_none() {
                    eager
                } else {
                    let mut v = vec![0u8; keep];
                    copy_arrived(&eager, buf.as_ref(), &mut v)?;
                    v
                };
                self.bump("recv_copied");
                Completion::Received { envelope, data }
            }
        };
        if let Some(b) = buf {
            self.ep.release(b);
        }
        Ok(Some(c))
    }

    /// `test` (`out` = `None`) and `test_into`: a completion already recorded, or a receive
    /// whose bytes arrived, before and after one round of progress.
    pub(super) fn test_maybe_into(
        &mut self,
        op: OpId,
        mut out: Option<&mut [u8]>,
    ) -> Result<Option<Completion>> {
        crate::look_around_progress(self, |t| match t.done.remove(&op) {
            Some(c) => Ok(Some(c)),
            None => t.take_arrived(op, out.as_deref_mut()),
        })
    }

    fn drop_recv_keep_buf(&mut self, id: u64) -> RecvOp {
        let r = self.recvs.remove(&id).expect("present");
        self.bids.remove(&r.bid);
        r
    }
}
