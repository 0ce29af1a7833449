//! Event queues (`fi_eq_open`): a bounded queue of events with a blocking read.
//!
//! On an RDM endpoint of this provider nothing completes asynchronously outside the CQs:
//! address vector inserts finish before `fi_av_insert` returns (no `FI_EVENT`) and there are
//! no connections. So the only events are those the application writes (`fi_eq_write`,
//! e.g. `FI_NOTIFY`), and there are never error events (`fi_eq_readerr` answers
//! `-FI_EAGAIN`). Applications still need the object: libfabric's fabtests open one for
//! every test and bind it. Semantics from `fi_eq(3)` (libfabric 1.17).

#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::wait::Signal;

/// Entries an EQ holds when `fi_eq_attr.size` is 0.
pub const DEFAULT_SIZE: usize = 1024;

/// One event: its type (`FI_NOTIFY`, ...) and the entry bytes written with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// `event` of `fi_eq_write`.
    pub event: u32,
    /// The entry (`struct fi_eq_entry` or larger), as written.
    pub data: Vec<u8>,
}

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// The next event (removed unless peeking).
    Event(Event),
    /// The next event does not fit the caller's buffer (`-FI_ETOOSMALL`); it stays queued.
    TooSmall,
    /// Nothing (`-FI_EAGAIN`).
    Empty,
}

/// An event queue.
pub struct Eq {
    size: usize,
    events: Mutex<VecDeque<Event>>,
    ready: Condvar,
    /// The descriptor of an `FI_WAIT_FD` EQ: readable while an event is queued.
    signal: Option<Arc<Signal>>,
}

impl Eq {
    /// An EQ of `size` entries (0: [`DEFAULT_SIZE`]).
    pub fn new(size: usize) -> Eq {
        Eq::with_signal(size, None)
    }

    /// An EQ whose queued events make `signal` readable (`FI_WAIT_FD`).
    pub fn with_signal(size: usize, signal: Option<Arc<Signal>>) -> Eq {
        Eq {
            size: if size == 0 { DEFAULT_SIZE } else { size },
            events: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            signal,
        }
    }

    /// The wait object of an `FI_WAIT_FD` EQ.
    pub fn signal(&self) -> Option<&Arc<Signal>> {
        self.signal.as_ref()
    }

    /// `fi_eq_write`: queue an event; `false` when the queue is full (`-FI_EAGAIN`).
    pub fn write(&self, event: u32, data: &[u8]) -> bool {
        let mut q = self.lock();
        if q.len() >= self.size {
            return false;
        }
        q.push_back(Event {
            event,
            data: data.to_vec(),
        });
        if let Some(s) = &self.signal {
            s.raise();
        }
        drop(q);
        self.ready.notify_all();
        true
    }

    /// `fi_eq_read`: the next event if it fits in `room` bytes; left queued with `peek`.
    pub fn read(&self, room: usize, peek: bool) -> Read {
        let mut q = self.lock();
        let r = Self::take(&mut q, room, peek);
        self.settle(&q);
        r
    }

    /// `fi_eq_sread`: as [`Eq::read`], waiting up to `timeout` (`None`: for ever) for an
    /// event.
    pub fn sread(&self, room: usize, peek: bool, timeout: Option<Duration>) -> Read {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut q = self.lock();
        while q.is_empty() {
            match deadline {
                None => q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Read::Empty;
                    }
                    q = self
                        .ready
                        .wait_timeout(q, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
        let r = Self::take(&mut q, room, peek);
        self.settle(&q);
        r
    }

    /// An empty queue leaves the descriptor unreadable.
    fn settle(&self, q: &VecDeque<Event>) {
        if q.is_empty()
            && let Some(s) = &self.signal
        {
            s.clear();
        }
    }

    /// Whether an event waits (`fi_trywait` refuses to let the caller sleep then).
    pub fn pending(&self) -> bool {
        !self.lock().is_empty()
    }

    fn take(q: &mut VecDeque<Event>, room: usize, peek: bool) -> Read {
        match q.front() {
            None => Read::Empty,
            Some(e) if e.data.len() > room => Read::TooSmall,
            Some(e) if peek => Read::Event(e.clone()),
            Some(_) => q.pop_front().map_or(Read::Empty, Read::Event),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Event>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_back_in_order_peeked_and_bounded() {
        let eq = Eq::new(2);
        assert!(eq.write(1, &[1, 2]));
        assert!(eq.write(2, &[3]));
        assert!(!eq.write(3, &[4]), "a full EQ refuses");
        assert_eq!(eq.read(1, false), Read::TooSmall);
        let first = Event {
            event: 1,
            data: vec![1, 2],
        };
        assert_eq!(eq.read(8, true), Read::Event(first.clone()));
        assert_eq!(eq.read(8, false), Read::Event(first));
        assert!(eq.pending());
        assert!(matches!(
            eq.read(8, false),
            Read::Event(Event { event: 2, .. })
        ));
        assert_eq!(eq.read(8, false), Read::Empty);
        assert!(!eq.pending());
    }

    #[test]
    fn a_blocking_read_ends_with_a_write_or_its_timeout() {
        let eq = Arc::new(Eq::new(0));
        assert_eq!(
            eq.sread(8, false, Some(Duration::from_millis(10))),
            Read::Empty
        );
        let writer = {
            let eq = Arc::clone(&eq);
            std::thread::spawn(move || assert!(eq.write(7, &[9])))
        };
        let got = eq.sread(8, false, None);
        writer.join().unwrap();
        assert_eq!(
            got,
            Read::Event(Event {
                event: 7,
                data: vec![9]
            })
        );
    }
}
