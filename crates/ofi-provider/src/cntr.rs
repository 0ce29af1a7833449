//! Counters (`fi_cntr_open`): a success and an error count of the operations of the
//! endpoints bound to the counter, and the application's own `add`/`set`.
//!
//! **Counted by the provider, not by Cassini counting events.** The real CXI provider backs
//! an `fi_cntr` with a hardware counting event (CT) that the NIC increments as the commands
//! it is attached to complete (reference/cassini.md). Here every message of an endpoint goes
//! through the MPI layer's cxi transport, which owns the commands and the NIC event queue
//! and exposes completions, not CTs; attaching a CT to each transport command would put
//! libfabric's counter objects into the transport. So a counter counts in the provider: an
//! endpoint's progress adds one to each counter bound for the kind of operation that
//! completed (`FI_SEND`: sends and injects, `FI_RECV`: receives), to the error count when it
//! completed in error (truncated, cancelled, transport failure). Counting does not depend
//! on completion flags: an operation without a CQ entry (inject, selective completion) is
//! counted all the same (`fi_cntr(3)`, libfabric 1.17).
//!
//! Progress is manual: reading or waiting on a counter progresses every endpoint bound to
//! it. `fi_cntr_wait` returns when the count reaches the threshold, with `-FI_EAVAIL` when
//! the error count changed while waiting ("any change in a counter's error value will
//! unblock any thread inside fi_cntr_wait", `fi_cntr(3)`), or `-FI_ETIMEDOUT`.

#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::ep::Ep;
use crate::ffi::types::{FI_READ, FI_RECV, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_SEND, FI_WRITE};
use crate::wait::Signal;

/// The `fi_ep_bind` flags a counter may be bound with: one counter per kind of event.
pub const BIND_FLAGS: u64 =
    FI_SEND | FI_RECV | FI_WRITE | FI_READ | FI_REMOTE_WRITE | FI_REMOTE_READ;

/// What an endpoint counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A send or inject (`FI_SEND`).
    Send,
    /// A receive (`FI_RECV`).
    Recv,
    /// An RMA write or atomic update this endpoint started (`FI_WRITE`).
    Write,
    /// An RMA read or fetching atomic this endpoint started (`FI_READ`).
    Read,
    /// An RMA write into this endpoint's memory by a peer (`FI_REMOTE_WRITE`).
    RemoteWrite,
    /// An RMA read of this endpoint's memory by a peer (`FI_REMOTE_READ`).
    RemoteRead,
}

impl Event {
    const ALL: [(Event, u64); 6] = [
        (Event::Send, FI_SEND),
        (Event::Recv, FI_RECV),
        (Event::Write, FI_WRITE),
        (Event::Read, FI_READ),
        (Event::RemoteWrite, FI_REMOTE_WRITE),
        (Event::RemoteRead, FI_REMOTE_READ),
    ];

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Default)]
struct Counts {
    value: u64,
    err: u64,
}

/// Why `fi_cntr_wait` returned without reaching its threshold.
#[derive(Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The error count changed (`-FI_EAVAIL`).
    Error,
    /// The timeout passed (`-FI_ETIMEDOUT`).
    TimedOut,
}

/// A counter.
#[derive(Default)]
pub struct Cntr {
    counts: Mutex<Counts>,
    eps: Mutex<Vec<Weak<Ep>>>,
    /// Made readable on every change, for an `FI_WAIT_FD` counter.
    signal: Option<Arc<Signal>>,
}

impl Cntr {
    /// A counter whose changes also raise `signal` (its `FI_WAIT_FD` descriptor).
    pub fn with_signal(signal: Option<Arc<Signal>>) -> Cntr {
        Cntr {
            signal,
            ..Cntr::default()
        }
    }

    /// The wait object of an `FI_WAIT_FD` counter.
    pub fn signal(&self) -> Option<&Arc<Signal>> {
        self.signal.as_ref()
    }

    /// Progress `ep` when the counter is read or waited on.
    pub fn attach(&self, ep: &Arc<Ep>) {
        let mut eps = self.eps.lock().unwrap_or_else(|p| p.into_inner());
        if !eps.iter().any(|w| w.as_ptr() == Arc::as_ptr(ep)) {
            eps.push(Arc::downgrade(ep));
        }
    }

    /// `fi_cntr_read`: progress, then the success count.
    pub fn read(&self) -> u64 {
        self.progress();
        self.lock().value
    }

    /// `fi_cntr_readerr`: progress, then the error count.
    pub fn read_err(&self) -> u64 {
        self.progress();
        self.lock().err
    }

    /// `fi_cntr_add`.
    pub fn add(&self, n: u64) {
        self.change(|c| c.value = c.value.wrapping_add(n));
    }

    /// `fi_cntr_set`.
    pub fn set(&self, n: u64) {
        self.change(|c| c.value = n);
    }

    /// `fi_cntr_adderr`.
    pub fn add_err(&self, n: u64) {
        self.change(|c| c.err = c.err.wrapping_add(n));
    }

    /// `fi_cntr_seterr`.
    pub fn set_err(&self, n: u64) {
        self.change(|c| c.err = n);
    }

    /// An operation completed: one more success or error.
    pub fn completed(&self, ok: bool) {
        if ok {
            self.add(1);
        } else {
            self.add_err(1);
        }
    }

    /// `fi_cntr_wait`: progress until the count reaches `threshold`, the error count changes
    /// or `timeout` (`None`: for ever) passes.
    pub fn wait(&self, threshold: u64, timeout: Option<Duration>) -> Result<(), WaitEnd> {
        let err_before = self.lock().err;
        self.wait_since(err_before, threshold, timeout)
    }

    /// [`Cntr::wait`] that ends with an error count other than `err_before`.
    fn wait_since(
        &self,
        err_before: u64,
        threshold: u64,
        timeout: Option<Duration>,
    ) -> Result<(), WaitEnd> {
        let start = Instant::now();
        loop {
            self.progress();
            {
                let c = self.lock();
                if c.value >= threshold {
                    return Ok(());
                }
                if c.err != err_before {
                    return Err(WaitEnd::Error);
                }
            }
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                return Err(WaitEnd::TimedOut);
            }
            // Completions come from this thread's progress (or another reader's): poll.
            std::thread::yield_now();
        }
    }

    /// `fi_trywait`: progress; `true` (the caller may sleep on the descriptor until the
    /// counter changes) only when the progress changed nothing and no bound endpoint has an
    /// operation in flight: progress is manual, so only the reader's polling completes them.
    pub fn try_wait(&self) -> bool {
        if let Some(s) = &self.signal {
            s.clear();
        }
        let before = self.snapshot();
        self.progress();
        if self.snapshot() != before {
            return false;
        }
        let eps = self.eps.lock().unwrap_or_else(|p| p.into_inner());
        !eps.iter().filter_map(Weak::upgrade).any(|ep| !ep.idle())
    }

    /// The success and error counts, without progress.
    pub fn snapshot(&self) -> (u64, u64) {
        let c = self.lock();
        (c.value, c.err)
    }

    /// Progress every endpoint bound to the counter.
    pub fn progress(&self) {
        let eps: Vec<Arc<Ep>> = {
            let mut eps = self.eps.lock().unwrap_or_else(|p| p.into_inner());
            eps.retain(|w| w.strong_count() > 0);
            eps.iter().filter_map(Weak::upgrade).collect()
        };
        for ep in eps {
            ep.progress();
        }
    }

    fn change(&self, f: impl FnOnce(&mut Counts)) {
        f(&mut self.lock());
        if let Some(s) = &self.signal {
            s.raise();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The counters bound to one endpoint, by [`Event`].
#[derive(Default)]
pub struct Bound([Option<Arc<Cntr>>; 6]);

impl Bound {
    /// Bind `cntr` for every kind of event in `flags` (a subset of [`BIND_FLAGS`], at least
    /// one); `false` for other flags.
    pub fn bind(&mut self, cntr: &Arc<Cntr>, flags: u64) -> bool {
        if flags & !BIND_FLAGS != 0 || flags & BIND_FLAGS == 0 {
            return false;
        }
        for (ev, bit) in Event::ALL {
            if flags & bit != 0 {
                self.0[ev.index()] = Some(Arc::clone(cntr));
            }
        }
        true
    }

    /// Count one operation of kind `ev`.
    pub fn count(&self, ev: Event, ok: bool) {
        if let Some(c) = &self.0[ev.index()] {
            c.completed(ok);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_set_and_errors_are_separate() {
        let c = Cntr::default();
        c.set(5);
        c.add(3);
        c.set_err(10);
        c.add_err(2);
        assert_eq!((c.read(), c.read_err()), (8, 12));
        c.completed(true);
        c.completed(false);
        assert_eq!((c.read(), c.read_err()), (9, 13));
    }

    #[test]
    fn bindings_count_only_their_events() {
        let (s, r) = (Arc::new(Cntr::default()), Arc::new(Cntr::default()));
        let mut b = Bound::default();
        assert!(b.bind(&s, FI_SEND | FI_WRITE));
        assert!(b.bind(&r, FI_RECV));
        assert!(!b.bind(&r, 0), "no event");
        assert!(!b.bind(&r, FI_RECV | (1 << 40)), "an unknown flag");
        b.count(Event::Send, true);
        b.count(Event::Write, false);
        b.count(Event::Recv, true);
        b.count(Event::Recv, true);
        b.count(Event::RemoteRead, true);
        assert_eq!((s.read(), s.read_err()), (1, 1));
        assert_eq!((r.read(), r.read_err()), (2, 0));
    }

    #[test]
    fn a_wait_ends_at_the_threshold_an_error_or_its_timeout() {
        let c = Arc::new(Cntr::default());
        assert_eq!(
            c.wait(1, Some(Duration::from_millis(5))),
            Err(WaitEnd::TimedOut)
        );
        c.add(2);
        assert_eq!(c.wait(2, Some(Duration::ZERO)), Ok(()));
        let adder = {
            let c = Arc::clone(&c);
            std::thread::spawn(move || c.add(1))
        };
        assert_eq!(c.wait(3, None), Ok(()));
        adder.join().unwrap();
        let failer = {
            let c = Arc::clone(&c);
            std::thread::spawn(move || c.add_err(1))
        };
        assert_eq!(c.wait_since(0, 100, None), Err(WaitEnd::Error));
        failer.join().unwrap();
        assert_eq!((c.read(), c.read_err()), (3, 1));
    }
}
