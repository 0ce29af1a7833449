//! Landing buffers: the overflow (hardware matching) and request (software matching)
//! buffers, locally managed LEs the NIC packs messages into one after the other, and when
//! one may be posted again.
//!
//! The NIC takes a message's place in such a buffer when the message's first packet arrives
//! (the LE's local offset moves on by the message's `mlength` then) and unlinks the buffer
//! as soon as less than `min_free` is left, but it reports a message only when its last
//! packet has landed (cassini.md §4.2). So the event that says `auto_unlinked` may come
//! before the event of a multi-packet message that took its place earlier and is still
//! landing. Posting the buffer again on that event would let new messages land on top of
//! the unreported one, or the rest of it on top of them.
//!
//! **Rule.** A posting is finished when its auto-unlinking message was reported *and* the
//! bytes of the messages reported so far reach the end of that message (`start` − the
//! buffer's IOVA + `mlength`): messages are packed with no gap, so every message that took
//! a place in front of it has been reported by then. libfabric's CXI provider re-posts its
//! request and overflow buffers by the same count of consumed bytes (a fact from its public
//! source: the buffer is released when the consumed length reaches the unlink length).

use firmware_spec::cassini::event::TargetLong;

use super::endpoint::Buf;

/// What the landing events handled so far say about one posting of a buffer.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Posting {
    /// Bytes of the buffer taken by the messages reported so far.
    consumed: u64,
    /// Where the posting ended: the end of the message whose event said `auto_unlinked`.
    unlink_at: Option<u64>,
}

impl Posting {
    /// A message of `mlength` bytes at `offset` in the buffer was reported; `true` once the
    /// posting is finished ([`Posting::finished`]).
    pub(super) fn landed(&mut self, offset: u64, mlength: u64, auto_unlinked: bool) -> bool {
        self.consumed = self.consumed.saturating_add(mlength);
        if auto_unlinked {
            self.unlink_at = Some(offset.saturating_add(mlength));
        }
        self.finished()
    }

    /// The NIC unlinked the posting and every message it took has been reported.
    pub(super) fn finished(&self) -> bool {
        self.unlink_at.is_some_and(|end| self.consumed >= end)
    }

    /// The NIC unlinked the posting (some of its messages may still be landing).
    pub(super) fn unlinked(&self) -> bool {
        self.unlink_at.is_some()
    }
}

/// An overflow (hardware mode) or request (software mode) buffer.
pub(super) struct LandingBuf {
    pub(super) buf: Buf,
    /// Unexpected messages stored in it and not yet matched (hardware mode).
    pub(super) outstanding: usize,
    /// Not on the NIC's list (not posted yet, unlinked by the NIC or by software).
    pub(super) unlinked: bool,
    /// The current posting.
    pub(super) posting: Posting,
    /// An overflow buffer of a hybrid endpoint that switched to software matching: never
    /// appended again.
    pub(super) retired: bool,
}

impl LandingBuf {
    /// A buffer not posted yet.
    pub(super) fn new(buf: Buf) -> Self {
        LandingBuf {
            buf,
            outstanding: 0,
            unlinked: true,
            posting: Posting::default(),
            retired: false,
        }
    }

    /// Account for landing event `t` of this buffer; `true` once its posting is finished.
    pub(super) fn landed(&mut self, t: &TargetLong) -> bool {
        let offset = t.start.wrapping_sub(self.buf.md.iova());
        let done = self
            .posting
            .landed(offset, u64::from(t.mlength), t.auto_unlinked);
        if self.posting.unlinked() {
            self.unlinked = true;
        }
        done
    }

    /// The buffer goes (back) on the NIC's list: a new posting starts.
    pub(super) fn posted(&mut self) {
        self.unlinked = false;
        self.posting = Posting::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wire headers in front of a DMA put in a request buffer (20 + 43 bytes).
    const HDR: u64 = 63;

    #[test]
    fn a_posting_waits_for_a_message_reported_after_the_unlinking_one() {
        // What the flood tests saw: a 6,000 B eager message takes its place first, a small
        // IDC message behind it leaves less than min_free and unlinks the buffer; the small
        // one is reported first (one packet), the big one when its third packet landed.
        let mut p = Posting::default();
        let mut at = 0;
        for _ in 0..400 {
            assert!(!p.landed(at, HDR + 56, false));
            at += HDR + 56;
        }
        let big = at;
        let small = big + HDR + 6000;
        assert!(
            !p.landed(small, 49 + 8, true),
            "finished while the 6,000 B message in front of the unlinking one is still landing"
        );
        assert!(p.unlinked());
        assert!(p.landed(big, HDR + 6000, false));
        assert!(p.finished());
    }

    #[test]
    fn a_posting_whose_messages_are_reported_in_order_finishes_at_the_unlinking_one() {
        let mut p = Posting::default();
        assert!(!p.landed(0, 100, false));
        assert!(!p.finished());
        assert!(!p.unlinked());
        assert!(p.landed(100, 200, true));
        // Zero-byte messages (overflow buffers) take no place.
        let mut q = Posting::default();
        assert!(!q.landed(0, 0, false));
        assert!(q.landed(0, 0, true));
    }

    #[test]
    fn several_late_messages_all_count() {
        let mut p = Posting::default();
        // Places: a [0, 3000), b [3000, 5000), c [5000, 5100) unlinks; reported c, a, b.
        assert!(!p.landed(5000, 100, true));
        assert!(!p.landed(0, 3000, false));
        assert!(p.landed(3000, 2000, false));
    }

    #[test]
    fn a_new_posting_starts_from_nothing() {
        let mut p = Posting::default();
        assert!(p.landed(0, 10, true));
        p = Posting::default();
        assert!(!p.finished());
        assert!(!p.unlinked());
    }
}
