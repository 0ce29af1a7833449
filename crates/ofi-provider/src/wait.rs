//! Wait objects: file descriptors ([`Signal`]) and wait sets ([`WaitSet`]).
//!
//! `FI_WAIT_FD`: a pipe whose read end is readable while the
//! object it belongs to (a CQ, an EQ, a counter) has something for its reader. The
//! application gets the read end from `fi_control(FI_GETWAIT)` and sleeps in `poll`/`epoll`
//! after `fi_trywait` said it may (`fi_eq(3)`, `fi_cq(3)`, `fi_cntr(3)`, `fi_trywait(3)`,
//! libfabric 1.17: the descriptor is only for waiting; reading it is the provider's
//! business).
//!
//! At most one byte is ever in the pipe: [`Signal::raise`] writes it when the object
//! gains an entry, [`Signal::clear`] reads it back when the object is found empty, so the
//! pipe needs neither non-blocking mode nor a count.

#![forbid(unsafe_code)]

use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::cntr::Cntr;
use crate::cq::Cq;
use crate::eq::Eq;

struct Ends {
    reader: PipeReader,
    writer: PipeWriter,
    /// Whether the byte is in the pipe.
    raised: bool,
}

/// The wait object of one CQ, EQ or counter.
pub struct Signal {
    ends: Mutex<Ends>,
    fd: RawFd,
}

impl Signal {
    /// A new, unraised signal.
    pub fn new() -> std::io::Result<Signal> {
        let (reader, writer) = std::io::pipe()?;
        let fd = reader.as_raw_fd();
        Ok(Signal {
            ends: Mutex::new(Ends {
                reader,
                writer,
                raised: false,
            }),
            fd,
        })
    }

    /// The descriptor to poll for reading (valid while the signal lives).
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Make the descriptor readable.
    pub fn raise(&self) {
        let mut e = self.lock();
        if !e.raised && e.writer.write_all(&[1]).is_ok() {
            e.raised = true;
        }
    }

    /// Make the descriptor unreadable (the object is empty).
    pub fn clear(&self) {
        let mut e = self.lock();
        let mut b = [0u8; 1];
        if e.raised && e.reader.read_exact(&mut b).is_ok() {
            e.raised = false;
        }
    }

    /// Whether the descriptor is readable.
    pub fn raised(&self) -> bool {
        self.lock().raised
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ends> {
        self.ends.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Raises after raises and clears after clears leave the pipe with exactly the one byte
    /// the bookkeeping says it has.
    #[test]
    fn raise_and_clear_keep_at_most_one_byte() {
        let s = Signal::new().unwrap();
        assert!(!s.raised());
        s.raise();
        s.raise();
        assert!(s.raised());
        s.clear();
        assert!(!s.raised());
        s.clear();
        s.raise();
        // Exactly one byte is in the pipe: reading it back succeeds once.
        let mut e = s.lock();
        let mut b = [0u8; 2];
        assert_eq!(e.reader.read(&mut b).unwrap(), 1);
        assert!(s.fd() >= 0);
    }
}

/// A wait set (`fi_wait_open`): CQs, EQs and counters opened with `FI_WAIT_SET` join it,
/// and `fi_wait` returns when one of them has something for its reader (a completion, an
/// event, a counter change since the set last reported it) or its timeout passes (`fi_wait(3)`,
/// libfabric 1.17). Progress is manual, so waiting progresses the members' endpoints and
/// polls; the set has no descriptor of its own (`FI_WAIT_FD` sets are refused).
#[derive(Default)]
pub struct WaitSet {
    members: Mutex<Vec<Member>>,
}

/// One object of a wait set.
pub enum Member {
    /// A completion queue.
    Cq(Weak<Cq>),
    /// An event queue.
    Eq(Weak<Eq>),
    /// A counter, with the counts the set last saw.
    Cntr(Weak<Cntr>, Mutex<(u64, u64)>),
}

impl Member {
    /// A counter member, seen as it is now.
    pub fn cntr(c: &Arc<Cntr>) -> Member {
        Member::Cntr(Arc::downgrade(c), Mutex::new(c.snapshot()))
    }

    fn ready(&self) -> bool {
        match self {
            Member::Cq(w) => w.upgrade().is_some_and(|c| c.ready()),
            Member::Eq(w) => w.upgrade().is_some_and(|e| e.pending()),
            Member::Cntr(w, seen) => w.upgrade().is_some_and(|c| {
                c.progress();
                let now = c.snapshot();
                let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                let changed = *seen != now;
                *seen = now;
                changed
            }),
        }
    }
}

impl WaitSet {
    /// Add an object.
    pub fn join(&self, m: Member) {
        self.members
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(m);
    }

    /// `fi_wait`: `true` when a member has something, `false` after `timeout` (`None`: for
    /// ever).
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let start = Instant::now();
        loop {
            {
                let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
                members.retain(Member::alive);
                if members.iter().any(Member::ready) {
                    return true;
                }
            }
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                return false;
            }
            std::thread::yield_now();
        }
    }
}

impl Member {
    fn alive(&self) -> bool {
        match self {
            Member::Cq(w) => w.strong_count() > 0,
            Member::Eq(w) => w.strong_count() > 0,
            Member::Cntr(w, _) => w.strong_count() > 0,
        }
    }
}

#[cfg(test)]
mod set_tests {
    use super::*;

    #[test]
    fn a_wait_set_wakes_for_an_event_or_a_counter_change_and_times_out() {
        let set = WaitSet::default();
        let eq = Arc::new(Eq::new(4));
        let cntr = Arc::new(Cntr::default());
        set.join(Member::Eq(Arc::downgrade(&eq)));
        set.join(Member::cntr(&cntr));
        assert!(!set.wait(Some(Duration::from_millis(5))), "nothing yet");
        assert!(eq.write(1, &[0]));
        assert!(set.wait(Some(Duration::ZERO)), "an event");
        assert!(matches!(eq.read(8, false), crate::eq::Read::Event(_)));
        assert!(!set.wait(Some(Duration::ZERO)), "the event was read");
        cntr.add(1);
        assert!(set.wait(Some(Duration::ZERO)), "a counter change");
        assert!(
            !set.wait(Some(Duration::ZERO)),
            "the change was reported once"
        );
        drop(eq);
        drop(cntr);
        assert!(!set.wait(Some(Duration::ZERO)), "closed members are gone");
    }
}
