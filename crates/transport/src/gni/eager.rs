//! Eager protocols: the send completes at once, whether or not a receive is posted.
//!
//! - **E0** (up to `MPICH_GNI_MAX_VSHORT_MSG_SIZE`): the payload travels inline in the SMSG
//!   message after the header.
//! - **E1** (up to `MPICH_GNI_MAX_EAGER_MSG_SIZE`): the sender copies the payload into a
//!   registered bounce buffer and sends only the header (with the buffer's address and
//!   handle). The receiver GETs it at once, into a registered buffer of its own, without
//!   waiting for a match, and answers FIN, which frees the bounce buffer. Bounce buffers are
//!   page-aligned and the GET length is rounded up to 4 bytes, so E1 never needs Put
//!   Fallback. When a receive was already waiting the GET completes that receive directly:
//!   **Eager GET** (counted `EagerGET` on the receiver); otherwise the bytes wait in the
//!   unexpected queue until a receive matches.

use super::wire::{Header, Kind};
use super::{Arrived, GetFor, GniTransport, Staged, mem_err};
use crate::error::Result;
use crate::{Completion, Envelope, OpId, Rank};

/// A bounce-buffer message on the receiving side, from its header to its delivery.
pub(super) struct BounceIn {
    envelope: Envelope,
    /// The sender's id for FIN.
    id: u64,
    /// This rank's buffer the GET fills.
    stage: Option<Staged>,
    /// The bytes, once the GET finished.
    data: Option<Vec<u8>>,
    /// The receive that matched it, with its capacity.
    recv: Option<(OpId, usize)>,
}

impl GniTransport {
    /// E0 or E1 send of `data` (`data.len() <= eager limit`).
    pub(super) fn send_eager(
        &mut self,
        dest: Rank,
        bits: u64,
        data: &[u8],
        sync: bool,
        op: OpId,
    ) -> Result<()> {
        let mut h = Header {
            kind: super::wire::Kind::Eager,
            sync,
            src: self.rank,
            bits,
            len: data.len() as u64,
            id: op.0,
            va: 0,
            mh: Default::default(),
        };
        if sync {
            self.sync_wait.insert(op.0, op);
        } else {
            self.done.insert(op, Completion::Sent);
        }
        if data.len() <= self.cfg.vshort {
            self.count("E0");
            return self.smsg(dest, &h, data);
        }
        let s = self.stage(data.len())?;
        s.mem.write(0, data).map_err(mem_err)?;
        h.kind = Kind::EagerBounce;
        h.va = s.mem.va();
        h.mh = s.mh;
        self.held.insert(op.0, super::rendezvous::Held::Bounce(s));
        self.count("E1");
        self.smsg(dest, &h, &[])
    }

    /// An E1 header arrived: GET the payload now, then let matching see the message.
    pub(super) fn bounce_arrived(&mut self, h: &Header, envelope: Envelope) -> Result<()> {
        let stage = self.stage(envelope.len)?;
        let len = (envelope.len as u64).next_multiple_of(4);
        let token = self.get(h.src, &stage, 0, h.va, h.mh, len)?;
        self.gets.insert(token, GetFor::Bounce);
        self.bounces.insert(
            token,
            BounceIn {
                envelope,
                id: h.id,
                stage: Some(stage),
                data: None,
                recv: None,
            },
        );
        let a = Arrived::Bounce {
            key: token,
            sync: h.sync.then_some(h.id),
        };
        self.arrive(envelope, a)?;
        if self.bounces.get(&token).is_some_and(|b| b.recv.is_some()) {
            self.count("EagerGET");
        }
        Ok(())
    }

    /// A receive matched E1 message `key`.
    pub(super) fn bounce_matched(
        &mut self,
        op: OpId,
        capacity: usize,
        key: u64,
        sync: Option<u64>,
    ) -> Result<()> {
        let Some(b) = self.bounces.get_mut(&key) else {
            return Err(crate::error::Error::Transport(format!(
                "gni: no eager message {key}"
            )));
        };
        let source = b.envelope.source;
        if let Some(mut data) = b.data.take() {
            let envelope = b.envelope;
            self.bounces.remove(&key);
            data.truncate(capacity);
            self.done
                .insert(op, Completion::Received { envelope, data });
        } else {
            b.recv = Some((op, capacity));
        }
        if let Some(id) = sync {
            let ack = Header::control(Kind::SyncAck, self.rank, id);
            self.smsg(source, &ack, &[])?;
        }
        Ok(())
    }

    /// The GET of E1 message `key` finished: free the sender's bounce buffer, deliver.
    pub(super) fn bounce_fetched(&mut self, key: u64) -> Result<()> {
        let Some(b) = self.bounces.get_mut(&key) else {
            return Ok(());
        };
        let mut data = vec![0u8; b.envelope.len];
        let stage = b.stage.take();
        if let Some(s) = &stage {
            s.mem.read(0, &mut data).map_err(mem_err)?;
        }
        let (source, id) = (b.envelope.source, b.id);
        match b.recv.take() {
            Some((op, capacity)) => {
                let envelope = b.envelope;
                self.bounces.remove(&key);
                data.truncate(capacity);
                self.done
                    .insert(op, Completion::Received { envelope, data });
            }
            None => b.data = Some(data),
        }
        if let Some(s) = stage {
            self.release(s)?;
        }
        let fin = Header::control(Kind::Fin, self.rank, id);
        self.smsg(source, &fin, &[])
    }
}

impl BounceIn {
    /// The registration this message still holds.
    pub(super) fn into_stage(self) -> Option<Staged> {
        self.stage
    }
}
