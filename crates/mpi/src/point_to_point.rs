//! Point-to-point communication (MPI 4.1 ch. 3): blocking and immediate sends in the four
//! modes, receives from a process or any process, probes and matched probes, statuses.
//!
//! Shaped after rsmpi: `world.process_at_rank(r).send(&x)`, `world.any_process().receive()`,
//! `process.immediate_send(&buf)`; every call returns a `Result` instead of aborting.

use crate::communicator::{CommRank, SimpleCommunicator, Tag};
use crate::datatype::{Buffer, BufferMut, Equivalence, value_from_bytes, vec_from_bytes};
use crate::progress::{Waiter, wait_op};
use crate::request::{Request, Scope, Target};
pub use crate::status::Status;
use transport::error::{Error, Result};
use transport::{MatchBits, MatchSpec, OpId, SendMode};

fn check_tag(tag: Tag) -> Result<u32> {
    u32::try_from(tag).map_err(|_| Error::Tag(i64::from(tag)))
}

impl SimpleCommunicator {
    /// The process of rank `r`, as a destination or source.
    pub fn process_at_rank(&self, r: CommRank) -> Process<'_> {
        Process {
            comm: self,
            rank: r,
        }
    }

    /// Any process, as a source (`MPI_ANY_SOURCE`).
    pub fn any_process(&self) -> AnyProcess<'_> {
        AnyProcess { comm: self }
    }

    pub(crate) fn start_send(
        &self,
        dest: CommRank,
        tag: u32,
        collective: bool,
        data: &[u8],
        mode: SendMode,
    ) -> Result<OpId> {
        let world = self.world_rank(dest)?;
        let bits = self.bits(tag, collective);
        self.core
            .borrow_mut()
            .transport
            .send(world, bits, data, mode)
    }

    pub(crate) fn spec(
        &self,
        source: Option<CommRank>,
        tag: Option<Tag>,
        collective: bool,
    ) -> Result<MatchSpec> {
        let source = source.map(|s| self.world_rank(s)).transpose()?;
        let (t, ignore) = match tag {
            Some(t) => (check_tag(t)?, 0),
            None => (0, MatchBits::TAG_MASK),
        };
        Ok(MatchSpec {
            source,
            bits: self.bits(t, collective),
            ignore,
        })
    }

    pub(crate) fn start_recv(&self, spec: MatchSpec, capacity: usize) -> Result<OpId> {
        self.core.borrow_mut().transport.recv(spec, capacity)
    }

    /// Send `send` to `dest` and receive into `recv` from `source` (`MPI_Sendrecv`).
    pub fn sendrecv_into<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        dest: CommRank,
        send_tag: Tag,
        recv: &mut R,
        source: Option<CommRank>,
        recv_tag: Option<Tag>,
    ) -> Result<Status> {
        let spec = self.spec(source, recv_tag, false)?;
        let rop = self.start_recv(spec, recv.bytes().len())?;
        let r = Request::new(self, rop, Target::Into(recv.bytes_mut()));
        let sop = self.start_send(
            dest,
            check_tag(send_tag)?,
            false,
            send.bytes(),
            SendMode::Standard,
        )?;
        wait_op(&self.core, sop)?;
        r.wait()
    }
}

/// A process of a communicator, as destination or source.
#[derive(Clone, Copy)]
pub struct Process<'c> {
    comm: &'c SimpleCommunicator,
    rank: CommRank,
}

impl<'c> Process<'c> {
    /// Its rank.
    pub fn rank(&self) -> CommRank {
        self.rank
    }

    /// The communicator it belongs to.
    pub fn communicator(&self) -> &'c SimpleCommunicator {
        self.comm
    }

    fn send_mode<B: Buffer + ?Sized>(&self, buf: &B, tag: Tag, mode: SendMode) -> Result<()> {
        let op = self
            .comm
            .start_send(self.rank, check_tag(tag)?, false, buf.bytes(), mode)?;
        wait_op(&self.comm.core, op).map(|_| ())
    }

    /// `MPI_Send` with tag 0.
    pub fn send<B: Buffer + ?Sized>(&self, buf: &B) -> Result<()> {
        self.send_mode(buf, 0, SendMode::Standard)
    }

    /// `MPI_Send`.
    pub fn send_with_tag<B: Buffer + ?Sized>(&self, buf: &B, tag: Tag) -> Result<()> {
        self.send_mode(buf, tag, SendMode::Standard)
    }

    /// `MPI_Ssend` with tag 0: returns once the receiver matched the message.
    pub fn synchronous_send<B: Buffer + ?Sized>(&self, buf: &B) -> Result<()> {
        self.send_mode(buf, 0, SendMode::Synchronous)
    }

    /// `MPI_Ssend`.
    pub fn synchronous_send_with_tag<B: Buffer + ?Sized>(&self, buf: &B, tag: Tag) -> Result<()> {
        self.send_mode(buf, tag, SendMode::Synchronous)
    }

    /// `MPI_Rsend` (the receive must already be posted).
    pub fn ready_send_with_tag<B: Buffer + ?Sized>(&self, buf: &B, tag: Tag) -> Result<()> {
        self.send_mode(buf, tag, SendMode::Ready)
    }

    /// `MPI_Isend` with tag 0.
    pub fn immediate_send<B: Buffer + ?Sized>(&self, buf: &B) -> Result<Request<'static>> {
        self.immediate_send_with_tag(buf, 0)
    }

    /// `MPI_Isend` (the bytes are staged at once; the buffer is free on return).
    pub fn immediate_send_with_tag<B: Buffer + ?Sized>(
        &self,
        buf: &B,
        tag: Tag,
    ) -> Result<Request<'static>> {
        let op = self.comm.start_send(
            self.rank,
            check_tag(tag)?,
            false,
            buf.bytes(),
            SendMode::Standard,
        )?;
        Ok(Request::new(self.comm, op, Target::Send))
    }

    /// `MPI_Issend`.
    pub fn immediate_synchronous_send_with_tag<B: Buffer + ?Sized>(
        &self,
        buf: &B,
        tag: Tag,
    ) -> Result<Request<'static>> {
        let op = self.comm.start_send(
            self.rank,
            check_tag(tag)?,
            false,
            buf.bytes(),
            SendMode::Synchronous,
        )?;
        Ok(Request::new(self.comm, op, Target::Send))
    }

    fn source(&self) -> Source<'c> {
        Source {
            comm: self.comm,
            rank: Some(self.rank),
        }
    }

    /// `MPI_Recv` of one `T` (any tag).
    pub fn receive<T: Equivalence>(&self) -> Result<(T, Status)> {
        self.source().receive(None)
    }

    /// `MPI_Recv` of one `T` with `tag`.
    pub fn receive_with_tag<T: Equivalence>(&self, tag: Tag) -> Result<(T, Status)> {
        self.source().receive(Some(tag))
    }

    /// `MPI_Recv` of a message of any length (any tag).
    pub fn receive_vec<T: Equivalence>(&self) -> Result<(Vec<T>, Status)> {
        self.source().receive_vec(None)
    }

    /// `MPI_Recv` of a message of any length with `tag`.
    pub fn receive_vec_with_tag<T: Equivalence>(&self, tag: Tag) -> Result<(Vec<T>, Status)> {
        self.source().receive_vec(Some(tag))
    }

    /// `MPI_Recv` into `buf` (any tag).
    pub fn receive_into<B: BufferMut + ?Sized>(&self, buf: &mut B) -> Result<Status> {
        self.source().receive_into(buf, None)
    }

    /// `MPI_Recv` into `buf` with `tag`.
    pub fn receive_into_with_tag<B: BufferMut + ?Sized>(
        &self,
        buf: &mut B,
        tag: Tag,
    ) -> Result<Status> {
        self.source().receive_into(buf, Some(tag))
    }

    /// `MPI_Irecv` into `buf` (any tag).
    pub fn immediate_receive_into<'a, B: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        buf: &'a mut B,
    ) -> Result<Request<'a>> {
        self.source().immediate_receive_into(scope, buf, None)
    }

    /// `MPI_Irecv` into `buf` with `tag`.
    pub fn immediate_receive_into_with_tag<'a, B: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        buf: &'a mut B,
        tag: Tag,
    ) -> Result<Request<'a>> {
        self.source().immediate_receive_into(scope, buf, Some(tag))
    }

    /// `MPI_Probe` (any tag).
    pub fn probe(&self) -> Result<Status> {
        self.source().probe(None)
    }

    /// `MPI_Probe` with `tag`.
    pub fn probe_with_tag(&self, tag: Tag) -> Result<Status> {
        self.source().probe(Some(tag))
    }

    /// `MPI_Iprobe` (any tag).
    pub fn immediate_probe(&self) -> Result<Option<Status>> {
        self.source().immediate_probe(None)
    }

    /// `MPI_Iprobe` with `tag`.
    pub fn immediate_probe_with_tag(&self, tag: Tag) -> Result<Option<Status>> {
        self.source().immediate_probe(Some(tag))
    }

    /// `MPI_Mprobe` (any tag).
    pub fn matched_probe(&self) -> Result<(Message<'c>, Status)> {
        self.source().matched_probe(None)
    }

    /// `MPI_Mprobe` with `tag`.
    pub fn matched_probe_with_tag(&self, tag: Tag) -> Result<(Message<'c>, Status)> {
        self.source().matched_probe(Some(tag))
    }

    /// `MPI_Improbe` with `tag` (`None`: any tag).
    pub fn immediate_matched_probe_with_tag(
        &self,
        tag: Option<Tag>,
    ) -> Result<Option<(Message<'c>, Status)>> {
        self.source().immediate_matched_probe(tag)
    }
}

/// Any process of a communicator, as a source (`MPI_ANY_SOURCE`).
#[derive(Clone, Copy)]
pub struct AnyProcess<'c> {
    comm: &'c SimpleCommunicator,
}

impl<'c> AnyProcess<'c> {
    fn source(&self) -> Source<'c> {
        Source {
            comm: self.comm,
            rank: None,
        }
    }

    /// Receive one `T` (any tag).
    pub fn receive<T: Equivalence>(&self) -> Result<(T, Status)> {
        self.source().receive(None)
    }

    /// Receive one `T` with `tag`.
    pub fn receive_with_tag<T: Equivalence>(&self, tag: Tag) -> Result<(T, Status)> {
        self.source().receive(Some(tag))
    }

    /// Receive a message of any length (any tag).
    pub fn receive_vec<T: Equivalence>(&self) -> Result<(Vec<T>, Status)> {
        self.source().receive_vec(None)
    }

    /// Receive a message of any length with `tag` (`None`: any tag).
    pub fn receive_vec_with_tag<T: Equivalence>(
        &self,
        tag: Option<Tag>,
    ) -> Result<(Vec<T>, Status)> {
        self.source().receive_vec(tag)
    }

    /// Receive into `buf` with `tag` (`None`: any tag).
    pub fn receive_into_with_tag<B: BufferMut + ?Sized>(
        &self,
        buf: &mut B,
        tag: Option<Tag>,
    ) -> Result<Status> {
        self.source().receive_into(buf, tag)
    }

    /// Receive into `buf` (any tag).
    pub fn receive_into<B: BufferMut + ?Sized>(&self, buf: &mut B) -> Result<Status> {
        self.source().receive_into(buf, None)
    }

    /// `MPI_Irecv` into `buf` with `tag` (`None`: any tag).
    pub fn immediate_receive_into_with_tag<'a, B: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        buf: &'a mut B,
        tag: Option<Tag>,
    ) -> Result<Request<'a>> {
        self.source().immediate_receive_into(scope, buf, tag)
    }

    /// `MPI_Probe` with `tag` (`None`: any tag).
    pub fn probe_with_tag(&self, tag: Option<Tag>) -> Result<Status> {
        self.source().probe(tag)
    }

    /// `MPI_Iprobe` with `tag` (`None`: any tag).
    pub fn immediate_probe_with_tag(&self, tag: Option<Tag>) -> Result<Option<Status>> {
        self.source().immediate_probe(tag)
    }

    /// `MPI_Mprobe` with `tag` (`None`: any tag).
    pub fn matched_probe_with_tag(&self, tag: Option<Tag>) -> Result<(Message<'c>, Status)> {
        self.source().matched_probe(tag)
    }

    /// `MPI_Improbe` with `tag` (`None`: any tag).
    pub fn immediate_matched_probe_with_tag(
        &self,
        tag: Option<Tag>,
    ) -> Result<Option<(Message<'c>, Status)>> {
        self.source().immediate_matched_probe(tag)
    }
}

/// A source: one process or any.
struct Source<'c> {
    comm: &'c SimpleCommunicator,
    rank: Option<CommRank>,
}

impl<'c> Source<'c> {
    fn spec(&self, tag: Option<Tag>) -> Result<MatchSpec> {
        self.comm.spec(self.rank, tag, false)
    }

    fn receive<T: Equivalence>(&self, tag: Option<Tag>) -> Result<(T, Status)> {
        let mut v = T::new_zeroed();
        let st = self.receive_into(&mut v, tag)?;
        Ok((v, st))
    }

    fn receive_vec<T: Equivalence>(&self, tag: Option<Tag>) -> Result<(Vec<T>, Status)> {
        let (m, _) = self.matched_probe(tag)?;
        let (bytes, st) = m.receive_bytes()?;
        Ok((vec_from_bytes(&bytes), st))
    }

    fn receive_into<B: BufferMut + ?Sized>(&self, buf: &mut B, tag: Option<Tag>) -> Result<Status> {
        let spec = self.spec(tag)?;
        let op = self.comm.start_recv(spec, buf.bytes().len())?;
        Request::new(self.comm, op, Target::Into(buf.bytes_mut())).wait()
    }

    fn immediate_receive_into<'a, B: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        buf: &'a mut B,
        tag: Option<Tag>,
    ) -> Result<Request<'a>> {
        let spec = self.spec(tag)?;
        let op = self.comm.start_recv(spec, buf.bytes().len())?;
        Ok(Request::new(self.comm, op, Target::Into(buf.bytes_mut())))
    }

    fn immediate_probe(&self, tag: Option<Tag>) -> Result<Option<Status>> {
        let spec = self.spec(tag)?;
        let e = self.comm.core.borrow_mut().transport.probe(spec)?;
        Ok(e.map(|e| Status::of(self.comm, &e)))
    }

    fn probe(&self, tag: Option<Tag>) -> Result<Status> {
        let mut w = Waiter::new();
        loop {
            if let Some(s) = self.immediate_probe(tag)? {
                return Ok(s);
            }
            w.tick(&self.comm.core, &"probe")?;
        }
    }

    fn immediate_matched_probe(&self, tag: Option<Tag>) -> Result<Option<(Message<'c>, Status)>> {
        let spec = self.spec(tag)?;
        let claimed = self.comm.core.borrow_mut().transport.claim(spec)?;
        Ok(claimed.map(|(e, op)| {
            let st = Status::of(self.comm, &e);
            (
                Message {
                    comm: self.comm,
                    op,
                },
                st,
            )
        }))
    }

    fn matched_probe(&self, tag: Option<Tag>) -> Result<(Message<'c>, Status)> {
        let mut w = Waiter::new();
        loop {
            if let Some(m) = self.immediate_matched_probe(tag)? {
                return Ok(m);
            }
            w.tick(&self.comm.core, &"matched probe")?;
        }
    }
}

/// A message taken out of matching by a matched probe (`MPI_Message`); receive it with
/// [`matched_receive_into`](Self::matched_receive_into) or
/// [`matched_receive_vec`](Self::matched_receive_vec).
pub struct Message<'c> {
    comm: &'c SimpleCommunicator,
    op: OpId,
}

impl Message<'_> {
    fn receive_bytes(self) -> Result<(Vec<u8>, Status)> {
        Request::new(self.comm, self.op, Target::Owned(None)).wait_owned()
    }

    /// `MPI_Mrecv` into a vector.
    pub fn matched_receive_vec<T: Equivalence>(self) -> Result<(Vec<T>, Status)> {
        let (b, st) = self.receive_bytes()?;
        Ok((vec_from_bytes(&b), st))
    }

    /// `MPI_Mrecv` of one value.
    pub fn matched_receive<T: Equivalence>(self) -> Result<(T, Status)> {
        let (b, st) = self.receive_bytes()?;
        Ok((value_from_bytes(&b)?, st))
    }

    /// `MPI_Mrecv` into `buf` (a longer message is `MPI_ERR_TRUNCATE`).
    pub fn matched_receive_into<B: BufferMut + ?Sized>(self, buf: &mut B) -> Result<Status> {
        let (b, st) = self.receive_bytes()?;
        let out = buf.bytes_mut();
        if b.len() > out.len() {
            return Err(Error::Truncate {
                len: b.len(),
                capacity: out.len(),
            });
        }
        out[..b.len()].copy_from_slice(&b);
        Ok(st)
    }
}
