//! Requests of immediate (nonblocking) operations and the ways to complete them
//! (`MPI_Wait`, `MPI_Test`, `MPI_Waitall`, `MPI_Waitany`, `MPI_Testall`, `MPI_Cancel`).

use std::marker::PhantomData;

use crate::communicator::SimpleCommunicator;
use crate::error::{Error, Result};
use crate::point_to_point::Status;
use crate::transport::{Completion, OpId};
use crate::universe::wait_op;

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
}

/// An operation in flight.
#[must_use = "a request must be completed with wait or test"]
pub struct Request<'a> {
    comm: SimpleCommunicator,
    op: OpId,
    target: Target<'a>,
    done: bool,
    status: Option<Status>,
}

impl<'a> Request<'a> {
    pub(crate) fn new(comm: &SimpleCommunicator, op: OpId, target: Target<'a>) -> Self {
        Request {
            comm: comm.clone(),
            op,
            target,
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

    fn deliver(&mut self, c: Completion) -> Result<Status> {
        match c {
            Completion::Sent => Ok(Status::empty()),
            Completion::Cancelled => Ok(Status::cancelled()),
            Completion::Fetched(_) => Err(Error::Transport(
                "a point-to-point request completed as an RMA fetch".into(),
            )),
            Completion::Received { envelope, data } => {
                let status = Status::of(&self.comm, &envelope);
                match &mut self.target {
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
                }
                Ok(status)
            }
        }
    }

    /// Wait for completion (`MPI_Wait`).
    pub fn wait(mut self) -> Result<Status> {
        let c = wait_op(&self.comm.core, self.op)?;
        self.finish(c)
    }

    /// Wait, and hand back the received bytes of an owned receive.
    pub(crate) fn wait_owned(mut self) -> Result<(Vec<u8>, Status)> {
        let c = wait_op(&self.comm.core, self.op)?;
        let st = self.finish(c)?;
        let data = match &mut self.target {
            Target::Owned(slot) => slot.take().unwrap_or_default(),
            _ => Vec::new(),
        };
        Ok((data, st))
    }

    /// Complete if done (`MPI_Test`): `Ok(Ok(status))` when complete, `Ok(Err(self))` when not.
    pub fn test(mut self) -> Result<std::result::Result<Status, Self>> {
        let c = self.comm.core.borrow_mut().transport.test(self.op)?;
        match c {
            Some(c) => self.finish(c).map(Ok),
            None => Ok(Err(self)),
        }
    }

    /// Cancel the operation (`MPI_Cancel`): a receive not yet matched completes with a
    /// cancelled status. Sends cannot be cancelled (deprecated in MPI 4): an error.
    pub fn cancel(&self) -> Result<()> {
        match self.target {
            Target::Send => Err(Error::Arg("cancelling a send is not supported".into())),
            _ => {
                self.comm.core.borrow_mut().transport.cancel(self.op)?;
                Ok(())
            }
        }
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if !self.done && !matches!(self.target, Target::Send) {
            // A receive abandoned without completion: take it out of matching, so no message
            // is delivered to a buffer nobody waits for.
            let mut core = self.comm.core.borrow_mut();
            if let Ok(true) = core.transport.cancel(self.op) {
                let _ = core.transport.test(self.op);
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
    let mut w = crate::universe::Waiter::new();
    loop {
        for i in 0..requests.len() {
            let c = {
                let r = &requests[i];
                r.comm.core.borrow_mut().transport.test(r.op)?
            };
            if let Some(c) = c {
                let mut r = requests.remove(i);
                return r.finish(c).map(|s| Some((i, s)));
            }
        }
        w.tick(&requests[0].comm.core, "wait_any")?;
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
        let c = r.comm.core.borrow_mut().transport.test(r.op)?;
        match c {
            Some(c) => {
                r.finish(c)?;
            }
            None => return Ok(None),
        }
    }
    for r in requests.drain(..) {
        statuses.push(r.status.unwrap_or_else(Status::empty));
    }
    Ok(Some(statuses))
}
