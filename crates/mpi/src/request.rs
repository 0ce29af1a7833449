//! Requests of immediate (nonblocking) operations — point-to-point and collective — and the
//! ways to complete them (`MPI_Wait`, `MPI_Test`, `MPI_Waitall`, `MPI_Waitany`,
//! `MPI_Testall`, `MPI_Cancel`). Requests of both kinds mix freely in one `wait_any` or
//! `wait_all`.

use std::marker::PhantomData;
use std::rc::Rc;

use crate::communicator::SimpleCommunicator;
use crate::progress::{CollFuture, Slot, progress_pending};
use crate::progress::{wait_op, wait_op_into};
use crate::status::Status;
use transport::error::{Error, Result};
use transport::{Completion, OpId};

/// The lifetime of buffers lent to immediate operations (rsmpi's `scope`): requests made in
/// the scope borrow their buffers for it. Here the borrow checker does all the work: a
/// request holds its receive buffer until it completes.
pub struct Scope<'a>(PhantomData<&'a mut &'a ()>);

/// Run `f` with a scope for immediate operations.
pub fn scope<'a, R>(f: impl FnOnce(&Scope<'a>) -> R) -> R {
    f(&Scope(PhantomData))
}

pub(crate) enum Target<'a> {
    /// A send: nothing to deliver.
    Send,
    /// A receive into a borrowed buffer.
    Into(&'a mut [u8]),
    /// A receive whose bytes the request keeps.
    Owned(Option<Vec<u8>>),
    /// A zero-copy receive of at most `capacity` bytes: the NIC writes them where the buffer
    /// is (`Transport::recv_zero_copy`); nothing is delivered, and no reference to the
    /// buffer is held meanwhile (the lifetime keeps it borrowed).
    InPlace {
        capacity: usize,
        _buf: PhantomData<&'a mut [u8]>,
    },
}

/// What a request waits for.
enum Op<'a> {
    /// A transport operation (point-to-point).
    P2p { op: OpId, target: Target<'a> },
    /// An immediate collective; its output, if this rank gets one, is copied into `out` on
    /// completion.
    Coll {
        slot: Rc<Slot>,
        out: Option<&'a mut [u8]>,
    },
}

/// An operation in flight.
///
/// Dropping the request of an immediate collective before it completed frees it
/// (`MPI_Request_free`): the collective still runs to its end, advanced by the rank's later
/// MPI calls (its peers count on this rank's part), and its output is discarded.
#[must_use = "a request must be completed with wait or test"]
pub struct Request<'a> {
    comm: SimpleCommunicator,
    op: Op<'a>,
    done: bool,
    status: Option<Status>,
}

impl<'a> Target<'a> {
    /// A zero-copy receive into `buf`: its address and length go to the NIC; the borrow is
    /// kept, the reference is not.
    pub(crate) fn in_place(buf: &'a mut [u8]) -> (u64, usize, Target<'a>) {
        let addr = buf.as_mut_ptr().expose_provenance() as u64;
        let capacity = buf.len();
        (
            addr,
            capacity,
            Target::InPlace {
                capacity,
                _buf: PhantomData,
            },
        )
    }

    /// A zero-copy receive of `capacity` bytes at an address the caller vouches for (the C
    /// binding: MPI's rules keep the buffer).
    pub(crate) fn in_place_raw(capacity: usize) -> Target<'static> {
        Target::InPlace {
            capacity,
            _buf: PhantomData,
        }
    }
}

impl<'a> Request<'a> {
    pub(crate) fn new(comm: &SimpleCommunicator, op: OpId, target: Target<'a>) -> Self {
        Request {
            comm: comm.clone(),
            op: Op::P2p { op, target },
            done: false,
            status: None,
        }
    }

    /// The request of an immediate collective running `fut`, whose output goes to `out`.
    pub(crate) fn collective(
        comm: &SimpleCommunicator,
        fut: CollFuture,
        out: Option<&'a mut [u8]>,
    ) -> Self {
        let slot = comm.start_immediate(fut);
        Request {
            comm: comm.clone(),
            op: Op::Coll { slot, out },
            done: false,
            status: None,
        }
    }

    fn finish(&mut self, c: Completion) -> Result<Status> {
        self.done = true;
        let st = self.deliver(c)?;
        self.status = Some(st);
        Ok(st)
    }

    /// Test once without waiting: the status when complete.
    fn poll(&mut self) -> Result<Option<Status>> {
        match &mut self.op {
            Op::P2p { op, target } => {
                let op = *op;
                progress_pending(&self.comm.core);
                let c = {
                    let mut core = self.comm.core.borrow_mut();
                    match target {
                        Target::Into(buf) => core.transport.test_into(op, buf)?,
                        _ => core.transport.test(op)?,
                    }
                };
                match c {
                    Some(c) => self.finish(c).map(Some),
                    None => Ok(None),
                }
            }
            Op::Coll { slot, out } => {
                progress_pending(&self.comm.core);
                if !slot.advance() {
                    return Ok(None);
                }
                self.done = true;
                let data = slot.take()?;
                if let Some(out) = out {
                    if data.len() != out.len() {
                        return Err(Error::Count(format!(
                            "a collective produced {} bytes for a buffer of {}",
                            data.len(),
                            out.len()
                        )));
                    }
                    out.copy_from_slice(&data);
                }
                let st = Status::empty();
                self.status = Some(st);
                Ok(Some(st))
            }
        }
    }

    fn deliver(&mut self, c: Completion) -> Result<Status> {
        let Op::P2p { target, .. } = &mut self.op else {
            return Err(Error::Transport(
                "a collective request completed as a transport operation".into(),
            ));
        };
        match c {
            Completion::Sent => Ok(Status::empty()),
            Completion::Cancelled => Ok(Status::cancelled()),
            Completion::Fetched(_) => Err(Error::Transport(
                "a point-to-point request completed as an RMA fetch".into(),
            )),
            Completion::Landed { envelope, len } => {
                if let Target::InPlace { capacity, .. } = target {
                    let capacity = *capacity;
                    if len != envelope.len.min(capacity) {
                        return Err(Error::Transport(format!(
                            "a zero-copy receive completed with {len} bytes for a buffer of \
                             {capacity} and a message of {}",
                            envelope.len
                        )));
                    }
                    if envelope.len > capacity {
                        return Err(Error::Truncate {
                            len: envelope.len,
                            capacity,
                        });
                    }
                    return Ok(Status::of(&self.comm, &envelope));
                }
                let Target::Into(buf) = target else {
                    return Err(Error::Transport(
                        "a receive without a buffer completed in place".into(),
                    ));
                };
                if len > buf.len() || len != envelope.len.min(buf.len()) {
                    return Err(Error::Transport(format!(
                        "a receive completed with {len} bytes in place for a buffer of {} \
                         and a message of {}",
                        buf.len(),
                        envelope.len
                    )));
                }
                if envelope.len > buf.len() {
                    return Err(Error::Truncate {
                        len: envelope.len,
                        capacity: buf.len(),
                    });
                }
                Ok(Status::of(&self.comm, &envelope))
            }
            Completion::Received { envelope, data } => {
                let status = Status::of(&self.comm, &envelope);
                match target {
                    Target::Send => {}
                    Target::Into(buf) => {
                        let n = data.len().min(buf.len());
                        buf[..n].copy_from_slice(&data[..n]);
                        if envelope.len > buf.len() {
                            return Err(Error::Truncate {
                                len: envelope.len,
                                capacity: buf.len(),
                            });
                        }
                    }
                    Target::Owned(slot) => *slot = Some(data),
                    Target::InPlace { .. } => {
                        return Err(Error::Transport(
                            "a zero-copy receive completed with its bytes in a vector".into(),
                        ));
                    }
                }
                Ok(status)
            }
        }
    }

    /// Wait for completion (`MPI_Wait`).
    pub fn wait(mut self) -> Result<Status> {
        if let Op::P2p { op, target } = &mut self.op {
            let out = match target {
                Target::Into(buf) => Some(&mut **buf),
                _ => None,
            };
            let c = wait_op_into(&self.comm.core, *op, out)?;
            return self.finish(c);
        }
        let mut w = crate::progress::Waiter::new();
        loop {
            if let Some(st) = self.poll()? {
                return Ok(st);
            }
            w.tick(&self.comm.core, &"immediate collective")?;
        }
    }

    /// Wait, and hand back the received bytes of an owned receive.
    pub(crate) fn wait_owned(mut self) -> Result<(Vec<u8>, Status)> {
        let Op::P2p { op, .. } = self.op else {
            return Err(Error::Transport("a collective has no owned receive".into()));
        };
        let c = wait_op(&self.comm.core, op)?;
        let st = self.finish(c)?;
        let data = match &mut self.op {
            Op::P2p {
                target: Target::Owned(slot),
                ..
            } => slot.take().unwrap_or_default(),
            _ => Vec::new(),
        };
        Ok((data, st))
    }

    /// Complete if done (`MPI_Test`): `Ok(Ok(status))` when complete, `Ok(Err(self))` when not.
    pub fn test(mut self) -> Result<std::result::Result<Status, Self>> {
        match self.poll()? {
            Some(st) => Ok(Ok(st)),
            None => Ok(Err(self)),
        }
    }

    /// Cancel the operation (`MPI_Cancel`): a receive not yet matched completes with a
    /// cancelled status. Sends cannot be cancelled (deprecated in MPI 4), nor can
    /// collectives (MPI 4.1 §6.12): an error.
    pub fn cancel(&self) -> Result<()> {
        match &self.op {
            Op::P2p {
                target: Target::Send,
                ..
            } => Err(Error::Arg("cancelling a send is not supported".into())),
            Op::P2p { op, .. } => {
                self.comm.core.borrow_mut().transport.cancel(*op)?;
                Ok(())
            }
            Op::Coll { .. } => Err(Error::Arg(
                "a collective operation cannot be cancelled".into(),
            )),
        }
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        // An abandoned collective stays among the rank's pending ones until it ends.
        if let Op::P2p { op, target } = &self.op
            && !self.done
            && !matches!(target, Target::Send)
        {
            // A receive abandoned without completion: take it out of matching, so no message
            // is delivered to a buffer nobody waits for.
            let mut core = self.comm.core.borrow_mut();
            if let Ok(true) = core.transport.cancel(*op) {
                let _ = core.transport.test(*op);
            }
        }
    }
}

/// Wait for every request (`MPI_Waitall`); statuses in request order.
pub fn wait_all(requests: Vec<Request<'_>>) -> Result<Vec<Status>> {
    requests.into_iter().map(Request::wait).collect()
}

/// Wait for any one request (`MPI_Waitany`): its index in `requests` (removed) and status;
/// `None` if `requests` is empty.
pub fn wait_any(requests: &mut Vec<Request<'_>>) -> Result<Option<(usize, Status)>> {
    if requests.is_empty() {
        return Ok(None);
    }
    let mut w = crate::progress::Waiter::new();
    loop {
        for i in 0..requests.len() {
            if let Some(st) = requests[i].poll()? {
                drop(requests.remove(i));
                return Ok(Some((i, st)));
            }
        }
        w.tick(&requests[0].comm.core, &"wait_any")?;
    }
}

/// Test every request (`MPI_Testall`): the statuses if all are complete (the requests are
/// consumed), else `None` (completed ones are remembered).
pub fn test_all(requests: &mut Vec<Request<'_>>) -> Result<Option<Vec<Status>>> {
    let mut statuses = Vec::with_capacity(requests.len());
    for r in requests.iter_mut() {
        if r.done {
            continue;
        }
        if r.poll()?.is_none() {
            return Ok(None);
        }
    }
    for r in requests.drain(..) {
        statuses.push(r.status.unwrap_or_else(Status::empty));
    }
    Ok(Some(statuses))
}
