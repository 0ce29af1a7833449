//! File-descriptor wait objects (`FI_WAIT_FD`): a pipe whose read end is readable while the
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
use std::sync::Mutex;

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
