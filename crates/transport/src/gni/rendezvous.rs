//! Rendezvous protocols: the send completes when the receiver has the bytes.
//!
//! - **R0** (up to `MPICH_GNI_NDREG_MAXSIZE`): GET rendezvous. The sender registers a staged
//!   copy of the bytes — at the user buffer's address modulo 4, as a registration of the user
//!   buffer itself would be — and sends RTS with its address and handle; the receiver, once
//!   a receive matched, GETs it (FMA below `MPICH_GNI_RDMA_THRESHOLD`, BTE at and above) into
//!   a registered buffer and answers FIN at once. The bytes stay there until the receive is
//!   completed: a receive with a buffer of its own gets them with one copy out of that
//!   registered buffer (`Transport::test_into`, `R0 landed`), one without (an owned receive,
//!   a matched probe) in a vector (`R0 copied`).
//! - **Put Fallback**: Gemini GETs need a 4-byte aligned remote address and length. When the
//!   RTS breaks either rule the receiver does not GET: it registers a buffer and answers CTS
//!   with it; the sender PUTs the bytes (PUTs have no alignment rule) and sends PUT-DONE once
//!   the PUT is globally complete. The receiver keeps the bytes in the buffer it granted
//!   until the receive is completed, as after a GET.
//! - **R1** (above `MPICH_GNI_NDREG_MAXSIZE`): pipelined PUT, receiver-driven. The RTS names
//!   no memory; the receiver grants chunks of `MPICH_GNI_NDREG_MAXSIZE` bytes, each a CTS
//!   with a registered chunk buffer, [`R1_WINDOW`] at a time; the sender copies each chunk
//!   into a registered bounce chunk and PUTs it, then PUT-DONE; the receiver copies the chunk
//!   out and grants the next. No more than a window of chunks is ever registered on either
//!   side.

use firmware_spec::gemini::gni::PostType;
use firmware_spec::gemini::mdd::MemHandle;
use userlib::gni::post::put_desc;

use super::wire::{Header, Kind};
use super::{GetFor, GniTransport, Staged, mem_err};
use crate::error::{Error, Result};
use crate::{Completion, Envelope, OpId, Rank};

/// R1 chunks granted at once per message.
pub(super) const R1_WINDOW: usize = 2;

/// Sender-side state of a message until the receiver is done with it.
pub(super) enum Held {
    /// E1: the bounce buffer, until FIN (the send completed at once).
    Bounce(Staged),
    /// R0: the staged copy (bytes at `skew..skew + len`).
    Staged {
        op: OpId,
        stage: Staged,
        skew: u64,
        len: usize,
        put: usize,
    },
    /// R1: the bytes, PUT chunk by chunk.
    Bytes { op: OpId, data: Vec<u8>, put: usize },
}

/// A PUT of this rank in flight.
pub(super) struct PutOut {
    dest: Rank,
    id: u64,
    offset: u64,
    len: u64,
    /// The bounce chunk (R1).
    chunk: Option<Staged>,
}

/// A receive being filled by PUTs (Put Fallback, R1).
pub(super) struct PutIn {
    op: OpId,
    envelope: Envelope,
    capacity: usize,
    data: Vec<u8>,
    chunk: usize,
    /// The next offset to grant.
    next: usize,
    received: usize,
    /// Granted chunk buffers by offset.
    granted: Vec<(usize, Staged)>,
}

/// An R0 receive whose GET finished: the bytes wait in the registered buffer the NIC put
/// them in (at `skew`) until the receive is completed and they are copied out once.
pub(super) struct Landed {
    envelope: Envelope,
    /// Bytes for the receive (`min(envelope.len, capacity)`).
    n: usize,
    stage: Staged,
    skew: usize,
}

/// A GET of a rendezvous in flight.
pub(super) struct Get {
    op: OpId,
    envelope: Envelope,
    capacity: usize,
    stage: Staged,
    skew: usize,
    id: u64,
}

impl GniTransport {
    /// R0 or R1 send of `data` (longer than the eager limit).
    pub(super) fn send_rndv(
        &mut self,
        dest: Rank,
        bits: u64,
        data: &[u8],
        sync: bool,
        op: OpId,
    ) -> Result<()> {
        let mut h = Header {
            kind: Kind::RtsPut,
            sync,
            src: self.rank,
            bits,
            len: data.len() as u64,
            id: op.0,
            va: 0,
            mh: MemHandle::default(),
        };
        if data.len() > self.cfg.ndreg_maxsize {
            self.held.insert(
                op.0,
                Held::Bytes {
                    op,
                    data: data.to_vec(),
                    put: 0,
                },
            );
            self.count("R1");
            return self.smsg(dest, &h, &[]);
        }
        // Where the user's bytes sit relative to a 4-byte boundary (a pointer's address, no
        // dereference): a registration of the user buffer keeps it, so the staged copy does.
        let skew = (data.as_ptr().addr() % 4) as u64;
        let s = self.stage(data.len() + skew as usize)?;
        s.mem.write(skew, data).map_err(mem_err)?;
        h.kind = Kind::Rts;
        h.va = s.mem.va() + skew;
        h.mh = s.mh;
        self.held.insert(
            op.0,
            Held::Staged {
                op,
                stage: s,
                skew,
                len: data.len(),
                put: 0,
            },
        );
        self.count("R0");
        self.smsg(dest, &h, &[])
    }

    /// A receive matched an R0 request: GET, or Put Fallback when the GET would break
    /// Gemini's alignment rule.
    pub(super) fn rts_matched(
        &mut self,
        op: OpId,
        capacity: usize,
        envelope: Envelope,
        id: u64,
        va: u64,
        mh: MemHandle,
    ) -> Result<()> {
        let len = envelope.len as u64;
        let user = self.zc_take_dest(op, envelope.len);
        let user_aligned = user.as_ref().is_none_or(|u| u.mem.va().is_multiple_of(4));
        if !va.is_multiple_of(4) || !len.is_multiple_of(4) || !user_aligned {
            self.count("PutFallback");
            if let Some(u) = user {
                self.zc_put_back(op, u);
            }
            return self.grant_puts(op, capacity, envelope, id, envelope.len.max(1));
        }
        let stage = match user {
            Some(u) => u,
            None => self.stage(envelope.len)?,
        };
        let token = self.get(envelope.source, &stage, 0, va, mh, len)?;
        self.gets.insert(
            token,
            GetFor::Rndv(Get {
                op,
                envelope,
                capacity,
                stage,
                skew: 0,
                id,
            }),
        );
        Ok(())
    }

    /// A receive matched an R1 request.
    pub(super) fn rts_put_matched(
        &mut self,
        op: OpId,
        capacity: usize,
        envelope: Envelope,
        id: u64,
    ) -> Result<()> {
        let chunk = self.cfg.ndreg_maxsize;
        self.grant_puts(op, capacity, envelope, id, chunk)
    }

    /// Receive `envelope` by PUTs of `chunk` bytes at most.
    fn grant_puts(
        &mut self,
        op: OpId,
        capacity: usize,
        envelope: Envelope,
        id: u64,
        chunk: usize,
    ) -> Result<()> {
        let key = (envelope.source, id);
        self.incoming.insert(
            key,
            PutIn {
                op,
                envelope,
                capacity,
                // Allocated at the first chunk that is not the whole message.
                data: Vec::new(),
                chunk,
                next: 0,
                received: 0,
                granted: Vec::new(),
            },
        );
        if envelope.len == 0 {
            return self.put_arrived(envelope.source, id, 0, 0);
        }
        for _ in 0..R1_WINDOW {
            self.grant(key)?;
        }
        Ok(())
    }

    /// Grant the next chunk of incoming message `key`, if any is left.
    fn grant(&mut self, key: (Rank, u64)) -> Result<()> {
        let Some(p) = self.incoming.get(&key) else {
            return Ok(());
        };
        if p.next >= p.envelope.len {
            return Ok(());
        }
        let (offset, len) = (p.next, p.chunk.min(p.envelope.len - p.next));
        let (op, whole) = (p.op, offset == 0 && len == p.envelope.len);
        // A zero-copy receive granted the whole message at once takes the PUT in place.
        let stage = match self.zc_take_dest(op, len) {
            Some(u) if whole => u,
            Some(u) => {
                self.zc_put_back(op, u);
                self.stage(len)?
            }
            None => self.stage(len)?,
        };
        let h = Header {
            kind: Kind::Cts,
            sync: false,
            src: self.rank,
            bits: offset as u64,
            len: len as u64,
            id: key.1,
            va: stage.mem.va(),
            mh: stage.mh,
        };
        if let Some(p) = self.incoming.get_mut(&key) {
            p.next += len;
            p.granted.push((offset, stage));
        }
        self.smsg(key.0, &h, &[])
    }

    /// The receiver granted bytes `h.bits..h.bits + h.len` of send `h.id`: PUT them.
    pub(super) fn on_cts(&mut self, h: &Header) -> Result<()> {
        let (offset, len) = (h.bits, h.len);
        let (local_va, local_mh, chunk) = match self.held.get(&h.id) {
            Some(Held::Staged {
                stage,
                skew,
                len: n,
                ..
            }) => {
                if offset + len > *n as u64 {
                    return Err(Error::Transport("gni: a CTS beyond the message".into()));
                }
                (stage.mem.va() + skew + offset, stage.mh, None)
            }
            Some(Held::Bytes { data, .. }) => {
                let (o, l) = (offset as usize, len as usize);
                let Some(bytes) = data.get(o..o + l).map(<[u8]>::to_vec) else {
                    return Err(Error::Transport("gni: a CTS beyond the message".into()));
                };
                let c = self.stage(l)?;
                c.mem.write(0, &bytes).map_err(mem_err)?;
                (c.mem.va(), c.mh, Some(c))
            }
            _ => {
                return Err(Error::Transport(format!(
                    "gni: a CTS for unknown send {}",
                    h.id
                )));
            }
        };
        let bte = len as usize >= self.cfg.rdma_threshold;
        let ty = if bte {
            PostType::RdmaPut
        } else {
            PostType::FmaPut
        };
        let d = put_desc(ty, local_va, local_mh, h.va, h.mh, len);
        let token = self.post(h.src, d, bte)?;
        self.puts.insert(
            token,
            PutOut {
                dest: h.src,
                id: h.id,
                offset,
                len,
                chunk,
            },
        );
        Ok(())
    }

    /// A PUT of this rank is globally complete: tell the receiver; the send completes with
    /// its last byte.
    pub(super) fn put_complete(&mut self, token: u64) -> Result<()> {
        let Some(p) = self.puts.remove(&token) else {
            return Ok(());
        };
        if let Some(c) = p.chunk {
            self.release(c)?;
        }
        let done = Header {
            kind: Kind::PutDone,
            sync: false,
            src: self.rank,
            bits: p.offset,
            len: p.len,
            id: p.id,
            va: 0,
            mh: MemHandle::default(),
        };
        self.smsg(p.dest, &done, &[])?;
        let finished = match self.held.get_mut(&p.id) {
            Some(Held::Staged { put, len, .. }) => {
                *put += p.len as usize;
                *put >= *len
            }
            Some(Held::Bytes { put, data, .. }) => {
                *put += p.len as usize;
                *put >= data.len()
            }
            _ => false,
        };
        if finished {
            match self.held.remove(&p.id) {
                Some(Held::Staged { op, stage, .. }) => {
                    self.release(stage)?;
                    self.done.insert(op, Completion::Sent);
                }
                Some(Held::Bytes { op, .. }) => {
                    self.done.insert(op, Completion::Sent);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// PUT-DONE from `src`: bytes `offset..offset + len` of its send `id` are here.
    pub(super) fn put_arrived(&mut self, src: Rank, id: u64, offset: u64, len: u64) -> Result<()> {
        let key = (src, id);
        let Some(p) = self.incoming.get_mut(&key) else {
            return Err(Error::Transport(format!(
                "gni: PUT-DONE for unknown message {id} from rank {src}"
            )));
        };
        let (o, l) = (offset as usize, len as usize);
        if l > 0 {
            let Some(i) = p.granted.iter().position(|(g, _)| *g == o) else {
                return Err(Error::Transport(
                    "gni: PUT-DONE for an ungranted chunk".into(),
                ));
            };
            let (_, stage) = p.granted.swap_remove(i);
            if o == 0 && l == p.envelope.len {
                // The whole message in one chunk (Put Fallback): it waits in the buffer the
                // PUT filled until the receive is completed, as an R0 GET's bytes do.
                let (op, envelope, capacity) = (p.op, p.envelope, p.capacity);
                self.incoming.remove(&key);
                self.landed.insert(
                    op,
                    Landed {
                        envelope,
                        n: envelope.len.min(capacity),
                        stage,
                        skew: 0,
                    },
                );
                return Ok(());
            }
            if p.data.is_empty() {
                p.data = vec![0u8; p.envelope.len];
            }
            let Some(dst) = p.data.get_mut(o..o + l) else {
                return Err(Error::Transport("gni: PUT-DONE beyond the message".into()));
            };
            stage.mem.read(0, dst).map_err(mem_err)?;
            p.received += l;
            self.release(stage)?;
        }
        let Some(p) = self.incoming.get(&key) else {
            return Ok(());
        };
        if p.received < p.envelope.len {
            return self.grant(key);
        }
        if let Some(mut p) = self.incoming.remove(&key) {
            p.data.truncate(p.capacity);
            self.done.insert(
                p.op,
                Completion::Received {
                    envelope: p.envelope,
                    data: p.data,
                },
            );
        }
        Ok(())
    }

    /// The GET of an R0 message finished: tell the sender (its send completes), and keep
    /// the bytes where the GET put them until the receive is completed.
    pub(super) fn finish_get(&mut self, g: Get) -> Result<()> {
        let fin = Header::control(Kind::Fin, self.rank, g.id);
        self.smsg(g.envelope.source, &fin, &[])?;
        self.landed.insert(
            g.op,
            Landed {
                envelope: g.envelope,
                n: g.envelope.len.min(g.capacity),
                stage: g.stage,
                skew: g.skew,
            },
        );
        Ok(())
    }

    /// Complete receive `op` if its GET landed: straight into `out` when it is given and
    /// long enough ([`Completion::Landed`], counted `R0 landed`: the one copy out of the
    /// registered buffer the NIC filled), else in a vector (`R0 copied`).
    pub(super) fn take_landed(
        &mut self,
        op: OpId,
        out: Option<&mut [u8]>,
    ) -> Result<Option<Completion>> {
        let Some(l) = self.landed.remove(&op) else {
            return Ok(None);
        };
        if l.stage.user.is_some() {
            // The NIC put the bytes in the application's buffer itself.
            self.count("recv_zero_copy");
            return Ok(Some(Completion::Landed {
                envelope: l.envelope,
                len: l.n,
            }));
        }
        let read = match out.and_then(|o| o.get_mut(..l.n)) {
            Some(dst) => l
                .stage
                .mem
                .read(l.skew as u64, dst)
                .map(|()| None)
                .map_err(mem_err),
            None => {
                let mut data = vec![0u8; l.n];
                l.stage
                    .mem
                    .read(l.skew as u64, &mut data)
                    .map(|()| Some(data))
                    .map_err(mem_err)
            }
        };
        self.release(l.stage)?;
        Ok(Some(match read? {
            None => {
                self.count("R0 landed");
                Completion::Landed {
                    envelope: l.envelope,
                    len: l.n,
                }
            }
            Some(data) => {
                self.count("R0 copied");
                Completion::Received {
                    envelope: l.envelope,
                    data,
                }
            }
        }))
    }

    /// FIN for send `id`: the receiver has its bytes.
    pub(super) fn on_fin(&mut self, id: u64) -> Result<()> {
        match self.held.remove(&id) {
            Some(Held::Bounce(s)) => self.release(s),
            Some(Held::Staged { op, stage, .. }) => {
                self.release(stage)?;
                self.done.insert(op, Completion::Sent);
                Ok(())
            }
            Some(other @ Held::Bytes { .. }) => {
                self.held.insert(id, other);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Sends and receives of this rank not finished.
    pub(super) fn rendezvous_in_flight(&self) -> usize {
        self.held.len() + self.incoming.len() + self.puts.len()
    }

    /// Give every registration held by protocols in flight back (at drop).
    pub(super) fn drain_registrations(&mut self) -> Vec<Staged> {
        let mut out = Vec::new();
        for (_, h) in super::sorted_drain(&mut self.held) {
            match h {
                Held::Bounce(s) | Held::Staged { stage: s, .. } => out.push(s),
                Held::Bytes { .. } => {}
            }
        }
        for (_, p) in super::sorted_drain(&mut self.puts) {
            out.extend(p.chunk);
        }
        for (_, p) in super::sorted_drain(&mut self.incoming) {
            out.extend(p.granted.into_iter().map(|(_, s)| s));
        }
        for (_, l) in super::sorted_drain(&mut self.landed) {
            out.push(l.stage);
        }
        for (_, g) in super::sorted_drain(&mut self.gets) {
            if let GetFor::Rndv(g) = g {
                out.push(g.stage);
            }
        }
        for (_, b) in super::sorted_drain(&mut self.bounces) {
            out.extend(b.into_stage());
        }
        out
    }
}
