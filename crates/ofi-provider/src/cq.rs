//! Completion queues: entries written by endpoint progress, read in `FI_CQ_FORMAT_*`
//! shapes by the FFI layer. Progress is manual: reading a CQ progresses every endpoint
//! bound to it.

#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

use crate::ep::Ep;

/// A completion.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The operation's context (a user pointer).
    pub context: usize,
    /// `FI_SEND`/`FI_RECV`, `FI_MSG`/`FI_TAGGED`, `FI_REMOTE_CQ_DATA`.
    pub flags: u64,
    /// Bytes received.
    pub len: usize,
    /// Receive buffer (0 for sends: libfabric reports no buffer for them).
    pub buf: usize,
    /// Remote CQ data.
    pub data: u64,
    /// Tag of a tagged receive.
    pub tag: u64,
    /// Source `fi_addr_t` of a receive (`FI_ADDR_NOTAVAIL` if unknown).
    pub src: u64,
}

/// A completion with an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrEntry {
    /// What a successful completion would have said.
    pub entry: Entry,
    /// Positive libfabric error number (`FI_ETRUNC`, `FI_ECANCELED`, ...).
    pub err: i32,
    /// Bytes that did not fit (truncation).
    pub olen: usize,
    /// Why, for `fi_cq_strerror`.
    pub message: String,
}

#[derive(Default)]
struct Queues {
    ok: VecDeque<Entry>,
    err: VecDeque<ErrEntry>,
}

/// A completion queue.
#[derive(Default)]
pub struct Cq {
    queues: Mutex<Queues>,
    eps: Mutex<Vec<Weak<Ep>>>,
    /// The last error read, kept for `fi_cq_strerror`.
    pub last_error: Mutex<String>,
    /// `fi_cq_signal` was called: the next blocking read that finds nothing returns at once.
    signalled: std::sync::atomic::AtomicBool,
    /// The descriptor of an `FI_WAIT_FD` CQ: readable while a completion is queued.
    signal: Option<Arc<crate::wait::Signal>>,
}

/// What reading found.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// Up to the requested number of completions.
    Entries(Vec<Entry>),
    /// An error completion waits (`-FI_EAVAIL`).
    ErrorAvailable,
    /// Nothing (`-FI_EAGAIN`).
    Empty,
}

impl Cq {
    /// A CQ whose queued completions make `signal` readable (`FI_WAIT_FD`).
    pub fn with_signal(signal: Option<Arc<crate::wait::Signal>>) -> Cq {
        Cq {
            signal,
            ..Cq::default()
        }
    }

    /// The wait object of an `FI_WAIT_FD` CQ.
    pub fn wait_object(&self) -> Option<&Arc<crate::wait::Signal>> {
        self.signal.as_ref()
    }

    /// `fi_trywait`: progress; `true` (the caller may sleep on the descriptor) only when no
    /// completion is queued and no bound endpoint has an operation in flight. Progress is
    /// manual, so while something is in flight only reading the CQ completes it.
    pub fn try_wait(&self) -> bool {
        self.progress();
        let q = self.lock();
        if !q.ok.is_empty() || !q.err.is_empty() {
            return false;
        }
        drop(q);
        let eps = self.lock_eps();
        if eps.iter().filter_map(Weak::upgrade).any(|ep| !ep.idle()) {
            return false;
        }
        if let Some(s) = &self.signal {
            s.clear();
        }
        true
    }

    /// Progress; whether a completion (or error completion) is queued.
    pub fn ready(&self) -> bool {
        self.progress();
        let q = self.lock();
        !q.ok.is_empty() || !q.err.is_empty()
    }

    /// Progress the endpoints bound to this CQ.
    pub fn bind(&self, ep: &Arc<Ep>) {
        self.lock_eps().push(Arc::downgrade(ep));
    }

    /// Queue a completion.
    pub fn push(&self, e: std::result::Result<Entry, ErrEntry>) {
        let mut q = self.lock();
        match e {
            Ok(e) => q.ok.push_back(e),
            Err(e) => q.err.push_back(e),
        }
        if let Some(s) = &self.signal {
            s.raise();
        }
    }

    /// Progress, then take up to `max` completions.
    pub fn read(&self, max: usize) -> Read {
        self.progress();
        let mut q = self.lock();
        if !q.err.is_empty() {
            return Read::ErrorAvailable;
        }
        if q.ok.is_empty() {
            return Read::Empty;
        }
        let n = max.min(q.ok.len());
        let es = q.ok.drain(..n).collect();
        if q.ok.is_empty()
            && let Some(s) = &self.signal
        {
            s.clear();
        }
        Read::Entries(es)
    }

    /// `fi_cq_signal`: wake a blocking read (now or the next one) without a completion.
    pub fn signal(&self) {
        self.signalled
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a signal arrived since the last call (and clear it).
    pub fn take_signal(&self) -> bool {
        self.signalled
            .swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    /// Take the first error completion.
    pub fn read_err(&self) -> Option<ErrEntry> {
        self.progress();
        let e = {
            let mut q = self.lock();
            let e = q.err.pop_front();
            if q.ok.is_empty()
                && q.err.is_empty()
                && let Some(s) = &self.signal
            {
                s.clear();
            }
            e
        };
        if let Some(e) = &e {
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = e.message.clone();
        }
        e
    }

    fn progress(&self) {
        let eps: Vec<Arc<Ep>> = {
            let mut eps = self.lock_eps();
            eps.retain(|w| w.strong_count() > 0);
            eps.iter().filter_map(Weak::upgrade).collect()
        };
        for ep in eps {
            ep.progress();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_eps(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Ep>>> {
        self.eps.lock().unwrap_or_else(|p| p.into_inner())
    }
}
