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

    /// The smallest message this rank's NIC sends from and receives into the caller's own
    /// memory without a copy (zero copy: a node hosted in this process), if it can.
    pub fn zero_copy_min(&self) -> Option<usize> {
        self.core.borrow().transport.zero_copy_min()
    }

    /// Whether a message of `len` bytes goes zero copy.
    pub(crate) fn in_place(&self, len: usize) -> bool {
        self.zero_copy_min().is_some_and(|m| len >= m)
    }

    /// Start a send of the `len` bytes at `addr`, read in place by the NIC.
    pub(crate) fn start_send_in_place(
        &self,
        dest: CommRank,
        tag: u32,
        addr: u64,
        len: usize,
        mode: SendMode,
    ) -> Result<OpId> {
        let world = self.world_rank(dest)?;
        let bits = self.bits(tag, false);
        self.core
            .borrow_mut()
            .transport
            .send_zero_copy(world, bits, addr, len, mode)
    }

    /// Keep `[addr, addr + len)` of this process registered with the NIC until
    /// [`forget_registered`](Self::forget_registered): memory `MPI_Alloc_mem` hands out, so
    /// that zero-copy messages in it find it registered. Nothing happens where there is no
    /// zero copy.
    pub fn keep_registered(&self, addr: u64, len: usize) -> Result<()> {
        self.core.borrow_mut().transport.keep_registered(addr, len)
    }

    /// Stop keeping the memory at `addr` registered (`MPI_Free_mem`).
    pub fn forget_registered(&self, addr: u64) {
        self.core.borrow_mut().transport.forget_registered(addr);
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
        let bytes = buf.bytes();
        let tag = check_tag(tag)?;
        // A blocking send holds the buffer until the NIC is done with it: zero copy is safe
        // here whenever the NIC can.
        let op = if self.comm.in_place(bytes.len()) {
            let addr = bytes.as_ptr().expose_provenance() as u64;
            self.comm
                .start_send_in_place(self.rank, tag, addr, bytes.len(), mode)?
        } else {
            self.comm.start_send(self.rank, tag, false, bytes, mode)?
        };
        wait_op(&self.comm.core, op).map(|_| ())
    }

    /// `MPI_Isend` (`synchronous`: `MPI_Issend`) of the `len` bytes at address `addr` of
    /// this process, read in place by the NIC (zero copy). The C binding's path: the program
    /// leaves the buffer unchanged until the request completes (MPI's rule for a send
    /// buffer), which a borrow cannot express across the C interface. An error unless
    /// [`SimpleCommunicator::zero_copy_min`] allows `len`.
    pub fn immediate_send_in_place(
        &self,
        addr: u64,
        len: usize,
        tag: Tag,
        synchronous: bool,
    ) -> Result<Request<'static>> {
        if !self.comm.in_place(len) {
            return Err(Error::Arg(format!("no zero-copy send of {len} bytes here")));
        }
        let mode = if synchronous {
            SendMode::Synchronous
        } else {
            SendMode::Standard
        };
        let op = self
            .comm
            .start_send_in_place(self.rank, check_tag(tag)?, addr, len, mode)?;
        Ok(Request::new(self.comm, op, Target::Send))
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
}

/// Any process of a communicator, as a source (`MPI_ANY_SOURCE`).
#[derive(Clone, Copy)]
pub struct AnyProcess<'c> {
    comm: &'c SimpleCommunicator,
}

/// What a receive or a probe names as its source: one process ([`Process`]) or any
/// ([`AnyProcess`], `MPI_ANY_SOURCE`), as rsmpi's `Source` trait. The methods without a tag
/// accept any tag (`MPI_ANY_TAG`); `*_with_tag` take one.
pub trait Source<'c> {
    /// The communicator the source belongs to.
    fn communicator(&self) -> &'c SimpleCommunicator;

    /// The source's rank, `None` for any process.
    fn source_rank(&self) -> Option<CommRank>;

    /// `MPI_Recv` of one `T` (any tag).
    fn receive<T: Equivalence>(&self) -> Result<(T, Status)> {
        receive(&at(self), None)
    }

    /// `MPI_Recv` of one `T` with `tag`.
    fn receive_with_tag<T: Equivalence>(&self, tag: Tag) -> Result<(T, Status)> {
        receive(&at(self), Some(tag))
    }

    /// `MPI_Recv` of a message of any length (any tag).
    fn receive_vec<T: Equivalence>(&self) -> Result<(Vec<T>, Status)> {
        receive_vec(&at(self), None)
    }

    /// `MPI_Recv` of a message of any length with `tag`.
    fn receive_vec_with_tag<T: Equivalence>(&self, tag: Tag) -> Result<(Vec<T>, Status)> {
        receive_vec(&at(self), Some(tag))
    }

    /// `MPI_Recv` into `buf` (any tag).
    fn receive_into<B: BufferMut + ?Sized>(&self, buf: &mut B) -> Result<Status> {
        receive_into(&at(self), buf, None)
    }

    /// `MPI_Recv` into `buf` with `tag`.
    fn receive_into_with_tag<B: BufferMut + ?Sized>(
        &self,
        buf: &mut B,
        tag: Tag,
    ) -> Result<Status> {
        receive_into(&at(self), buf, Some(tag))
    }

    /// `MPI_Irecv` into `buf` (any tag).
    fn immediate_receive_into<'a, B: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        buf: &'a mut B,
    ) -> Result<Request<'a>> {
        immediate_receive_into(&at(self), scope, buf, None)
    }

    /// `MPI_Irecv` into `buf` with `tag`.
    fn immediate_receive_into_with_tag<'a, B: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        buf: &'a mut B,
        tag: Tag,
    ) -> Result<Request<'a>> {
        immediate_receive_into(&at(self), scope, buf, Some(tag))
    }

    /// `MPI_Irecv` of at most `capacity` bytes into address `addr` of this process, written
    /// in place by the NIC (zero copy); `tag` `None` for any tag. The C binding's path: the
    /// program leaves the buffer alone until the request completes, which a borrow cannot
    /// express across the C interface. An error unless
    /// [`SimpleCommunicator::zero_copy_min`] allows `capacity`.
    fn immediate_receive_in_place(
        &self,
        addr: u64,
        capacity: usize,
        tag: Option<Tag>,
    ) -> Result<Request<'static>> {
        receive_in_place(&at(self), addr, capacity, tag)
    }

    /// `MPI_Probe` (any tag).
    fn probe(&self) -> Result<Status> {
        probe(&at(self), None)
    }

    /// `MPI_Probe` with `tag`.
    fn probe_with_tag(&self, tag: Tag) -> Result<Status> {
        probe(&at(self), Some(tag))
    }

    /// `MPI_Iprobe` (any tag).
    fn immediate_probe(&self) -> Result<Option<Status>> {
        immediate_probe(&at(self), None)
    }

    /// `MPI_Iprobe` with `tag`.
    fn immediate_probe_with_tag(&self, tag: Tag) -> Result<Option<Status>> {
        immediate_probe(&at(self), Some(tag))
    }

    /// `MPI_Mprobe` (any tag).
    fn matched_probe(&self) -> Result<(Message<'c>, Status)> {
        matched_probe(&at(self), None)
    }

    /// `MPI_Mprobe` with `tag`.
    fn matched_probe_with_tag(&self, tag: Tag) -> Result<(Message<'c>, Status)> {
        matched_probe(&at(self), Some(tag))
    }

    /// `MPI_Improbe` (any tag).
    fn immediate_matched_probe(&self) -> Result<Option<(Message<'c>, Status)>> {
        immediate_matched_probe(&at(self), None)
    }

    /// `MPI_Improbe` with `tag`.
    fn immediate_matched_probe_with_tag(&self, tag: Tag) -> Result<Option<(Message<'c>, Status)>> {
        immediate_matched_probe(&at(self), Some(tag))
    }
}

impl<'c> Source<'c> for Process<'c> {
    fn communicator(&self) -> &'c SimpleCommunicator {
        self.comm
    }

    fn source_rank(&self) -> Option<CommRank> {
        Some(self.rank)
    }
}

impl<'c> Source<'c> for AnyProcess<'c> {
    fn communicator(&self) -> &'c SimpleCommunicator {
        self.comm
    }

    fn source_rank(&self) -> Option<CommRank> {
        None
    }
}

/// A source as the receive and probe calls below take it: the communicator, the rank (or
/// any) and the tag (or any).
struct Origin<'c> {
    comm: &'c SimpleCommunicator,
    rank: Option<CommRank>,
}

fn at<'c, S: Source<'c> + ?Sized>(s: &S) -> Origin<'c> {
    Origin {
        comm: s.communicator(),
        rank: s.source_rank(),
    }
}

impl Origin<'_> {
    fn spec(&self, tag: Option<Tag>) -> Result<MatchSpec> {
        self.comm.spec(self.rank, tag, false)
    }
}

fn receive<T: Equivalence>(f: &Origin<'_>, tag: Option<Tag>) -> Result<(T, Status)> {
    let mut v = T::new_zeroed();
    let st = receive_into(f, &mut v, tag)?;
    Ok((v, st))
}

fn receive_vec<T: Equivalence>(f: &Origin<'_>, tag: Option<Tag>) -> Result<(Vec<T>, Status)> {
    let (m, _) = matched_probe(f, tag)?;
    let (bytes, st) = m.receive_bytes()?;
    Ok((vec_from_bytes(&bytes), st))
}

fn receive_into<B: BufferMut + ?Sized>(
    f: &Origin<'_>,
    buf: &mut B,
    tag: Option<Tag>,
) -> Result<Status> {
    let spec = f.spec(tag)?;
    let out = buf.bytes_mut();
    if f.comm.in_place(out.len()) {
        // A blocking receive holds the buffer until the message is in: the NIC writes it
        // in place. On an error the request is dropped, which takes the receive out of
        // matching (the errors that reach here end the job, MPI_ERRORS_ARE_FATAL).
        let (addr, cap, target) = Target::in_place(out);
        let op = f
            .comm
            .core
            .borrow_mut()
            .transport
            .recv_zero_copy(spec, addr, cap)?;
        return Request::new(f.comm, op, target).wait();
    }
    let op = f.comm.start_recv(spec, out.len())?;
    Request::new(f.comm, op, Target::Into(out)).wait()
}

fn receive_in_place(
    f: &Origin<'_>,
    addr: u64,
    capacity: usize,
    tag: Option<Tag>,
) -> Result<Request<'static>> {
    if !f.comm.in_place(capacity) {
        return Err(Error::Arg(format!(
            "no zero-copy receive of {capacity} bytes here"
        )));
    }
    let spec = f.spec(tag)?;
    let op = f
        .comm
        .core
        .borrow_mut()
        .transport
        .recv_zero_copy(spec, addr, capacity)?;
    Ok(Request::new(f.comm, op, Target::in_place_raw(capacity)))
}

fn immediate_receive_into<'a, B: BufferMut + ?Sized>(
    f: &Origin<'_>,
    _scope: &Scope<'a>,
    buf: &'a mut B,
    tag: Option<Tag>,
) -> Result<Request<'a>> {
    let spec = f.spec(tag)?;
    let op = f.comm.start_recv(spec, buf.bytes().len())?;
    Ok(Request::new(f.comm, op, Target::Into(buf.bytes_mut())))
}

fn immediate_probe(f: &Origin<'_>, tag: Option<Tag>) -> Result<Option<Status>> {
    let spec = f.spec(tag)?;
    let e = f.comm.core.borrow_mut().transport.probe(spec)?;
    Ok(e.map(|e| Status::of(f.comm, &e)))
}

fn probe(f: &Origin<'_>, tag: Option<Tag>) -> Result<Status> {
    let mut w = Waiter::new();
    loop {
        if let Some(s) = immediate_probe(f, tag)? {
            return Ok(s);
        }
        w.tick(&f.comm.core, &"probe")?;
    }
}

fn immediate_matched_probe<'c>(
    f: &Origin<'c>,
    tag: Option<Tag>,
) -> Result<Option<(Message<'c>, Status)>> {
    let spec = f.spec(tag)?;
    let claimed = f.comm.core.borrow_mut().transport.claim(spec)?;
    Ok(claimed.map(|(e, op)| {
        let st = Status::of(f.comm, &e);
        (Message { comm: f.comm, op }, st)
    }))
}

fn matched_probe<'c>(f: &Origin<'c>, tag: Option<Tag>) -> Result<(Message<'c>, Status)> {
    let mut w = Waiter::new();
    loop {
        if let Some(m) = immediate_matched_probe(f, tag)? {
            return Ok(m);
        }
        w.tick(&f.comm.core, &"matched probe")?;
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
