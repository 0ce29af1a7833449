//! How a collective runs. Every algorithm is written once, as an `async fn` over the
//! nonblocking sends and receives of the call ([`SimpleCommunicator::coll_send`],
//! [`coll_recv`](SimpleCommunicator::coll_recv), [`coll_sendrecv`](SimpleCommunicator::coll_sendrecv));
//! a future is advanced only by polling it, and polling tests the transport operations it
//! waits for (which makes the transport progress). There is no runtime: a no-op waker and a
//! poll loop are enough, because nothing ever needs waking — whoever waits polls.
//!
//! - A blocking collective drives its future to completion at once ([`block_on`]).
//! - An immediate collective owns its data (a copy of the input, its own output) and is kept
//!   in a [`Slot`](crate::progress::Slot) shared by its `Request` and the rank's list of
//!   pending collectives: the request's `test`/`wait` polls it, and so does every blocking
//!   wait of the rank ([`progress_pending`](crate::progress::progress_pending), called by
//!   `Waiter::tick`). That is MPI's progress rule (MPI 4.1 §2.9, §6.12): a rank blocked in
//!   some other call still advances its pending collectives, so a peer waiting on one of them
//!   is not starved.

use std::future::Future;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::communicator::SimpleCommunicator;
use crate::progress::{CollFuture, CoreRef, Slot, Waiter, fatal};
use transport::error::{Error, Result};
use transport::{Completion, MatchSpec, OpId, SendMode};

/// Drive `fut` to completion, polling it and, between polls, the rank's pending immediate
/// collectives.
pub(crate) fn block_on<T>(
    core: &CoreRef,
    what: &'static str,
    fut: impl Future<Output = Result<T>>,
) -> Result<T> {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    let mut w = Waiter::new();
    loop {
        if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            return r;
        }
        w.tick(core, &what)?;
    }
}

/// One transport operation of a collective, as a future. A receive dropped before it
/// completed is cancelled, so it takes no later message.
struct OpWait<'c> {
    core: &'c CoreRef,
    op: OpId,
    recv: bool,
    done: bool,
}

impl Future for OpWait<'_> {
    type Output = Result<Completion>;

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = self.core.borrow_mut().transport.test(self.op);
        match r {
            Ok(None) => Poll::Pending,
            Ok(Some(c)) => {
                self.done = true;
                Poll::Ready(Ok(c))
            }
            Err(e) => {
                self.done = true;
                Poll::Ready(Err(fatal(self.core, e)))
            }
        }
    }
}

impl Drop for OpWait<'_> {
    fn drop(&mut self) {
        if !self.done
            && self.recv
            && let Ok(mut c) = self.core.try_borrow_mut()
            && let Ok(true) = c.transport.cancel(self.op)
        {
            let _ = c.transport.test(self.op);
        }
    }
}

/// The tag of collective call number `seq` of operation `kind`: non-negative as an `i32`
/// (`MPI_TAG_UB` is `i32::MAX`), so any transport carries it.
fn coll_tag_of(seq: u32, kind: u32) -> u32 {
    ((seq & 0x07ff_ffff) << 4) | (kind & 0xf)
}

/// Copy a received message into `out`, which it must fill exactly.
fn deliver(c: Completion, out: &mut [u8]) -> Result<()> {
    match c {
        Completion::Received { envelope, data } => {
            if envelope.len > out.len() {
                return Err(Error::Truncate {
                    len: envelope.len,
                    capacity: out.len(),
                });
            }
            if data.len() != out.len() {
                return Err(Error::Count(format!(
                    "a collective expected {} bytes from a peer and got {}",
                    out.len(),
                    data.len()
                )));
            }
            out.copy_from_slice(&data);
            Ok(())
        }
        other => Err(Error::Transport(format!(
            "a collective receive completed as {other:?}"
        ))),
    }
}

impl SimpleCommunicator {
    /// The tag of the next collective call on this communicator: its collective sequence
    /// number (27 bits, wrapping) above the operation's kind (4 bits). Every rank calls the
    /// collectives of a communicator in the same order (MPI 4.1 §6.12), so the numbers agree,
    /// and messages of two calls in flight at once never match each other's receives.
    pub(crate) fn coll_tag(&self, kind: u32) -> u32 {
        coll_tag_of(self.next_coll_seq(), kind)
    }

    fn coll_spec(&self, src: i32, tag: u32) -> Result<MatchSpec> {
        Ok(MatchSpec {
            source: Some(self.world_rank(src)?),
            bits: self.bits(tag, true),
            ignore: 0,
        })
    }

    fn coll_wait(&self, op: OpId, recv: bool) -> OpWait<'_> {
        OpWait {
            core: &self.core,
            op,
            recv,
            done: false,
        }
    }

    /// Send bytes on the collective context; complete when the send is.
    pub(crate) async fn coll_send(&self, dest: i32, tag: u32, data: &[u8]) -> Result<()> {
        let op = self.start_send(dest, tag, true, data, SendMode::Standard)?;
        self.coll_wait(op, false).await.map(|_| ())
    }

    /// Receive exactly `out.len()` bytes on the collective context.
    pub(crate) async fn coll_recv(&self, src: i32, tag: u32, out: &mut [u8]) -> Result<()> {
        let spec = self.coll_spec(src, tag)?;
        let op = self.start_recv(spec, out.len())?;
        let c = self.coll_wait(op, true).await?;
        deliver(c, out)
    }

    /// Send to `dest` and receive from `src` at once on the collective context (deadlock
    /// free: the receive is posted before the send starts).
    pub(crate) async fn coll_sendrecv(
        &self,
        dest: i32,
        data: &[u8],
        src: i32,
        tag: u32,
        out: &mut [u8],
    ) -> Result<()> {
        let spec = self.coll_spec(src, tag)?;
        let rop = self.start_recv(spec, out.len())?;
        let recv = self.coll_wait(rop, true);
        let sop = self.start_send(dest, tag, true, data, SendMode::Standard)?;
        self.coll_wait(sop, false).await?;
        deliver(recv.await?, out)
    }

    /// Run a blocking collective.
    pub(crate) fn run<T>(
        &self,
        what: &'static str,
        fut: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        block_on(&self.core, what, fut)
    }

    /// Start an immediate collective: poll it once (so its first messages leave now) and,
    /// unless already finished, add it to the rank's pending collectives.
    pub(crate) fn start_immediate(&self, fut: CollFuture) -> Rc<Slot> {
        let slot = Slot::new(fut);
        if !slot.advance() {
            self.core.borrow_mut().pending.push(Rc::clone(&slot));
        }
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::coll_tag_of;

    #[test]
    fn collective_tags_keep_the_kind_and_tell_calls_apart() {
        for kind in 1..=11 {
            for seq in [0u32, 1, 2, 1000, 0x07ff_fffe, 0x07ff_ffff, u32::MAX] {
                let t = coll_tag_of(seq, kind);
                assert!(
                    i32::try_from(t).is_ok(),
                    "tag {t:#x} is not a valid MPI tag"
                );
                assert_eq!(t & 0xf, kind);
                assert_ne!(t, coll_tag_of(seq.wrapping_add(1), kind));
                assert_ne!(t, coll_tag_of(seq, kind % 11 + 1));
            }
        }
    }
}
