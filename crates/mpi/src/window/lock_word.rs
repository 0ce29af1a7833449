//! The passive-target lock word at the start of each rank's window, and the NIC atomics that
//! take and release it (the reader-writer lock of MPI libraries over RDMA networks).
//!
//! The word holds a writer bit and a count of readers. A writer takes it with a
//! compare-and-swap from 0 (no reader, no writer). A reader adds one; when the old word shows
//! a writer, the reader backs out by adding minus one and tries again later. So a reader's
//! attempt leaves a transient one in the count for a moment even while a writer holds the
//! lock, and every release must keep the bits it does not own: a writer releases by taking
//! its bit away (adding it again: the top bit, no carry into the count), never by storing 0.
//! A store of 0 lands between a reader's add and its back-out, which then turns the word to
//! all ones: a writer bit no one holds, and the lock is never free again.

use crate::window::LockType;
use transport::AmoOp;

/// The writer bit of the lock word.
pub(crate) const WRITER: u64 = 1 << 63;

/// One fetching NIC atomic on the lock word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    pub op: AmoOp,
    pub operand: u64,
    pub compare: u64,
}

const fn step(op: AmoOp, operand: u64, compare: u64) -> Step {
    Step {
        op,
        operand,
        compare,
    }
}

/// The attempt to take a lock of `kind`.
pub(crate) fn attempt(kind: LockType) -> Step {
    match kind {
        LockType::Exclusive => step(AmoOp::CompareSwap, WRITER, 0),
        LockType::Shared => step(AmoOp::Sum, 1, 0),
    }
}

/// Whether an attempt that found the word at `old` took the lock.
pub(crate) fn took(kind: LockType, old: u64) -> bool {
    match kind {
        LockType::Exclusive => old == 0,
        LockType::Shared => old & WRITER == 0,
    }
}

/// What undoes a failed attempt (a reader's count), if anything.
pub(crate) fn back_out(kind: LockType) -> Option<Step> {
    match kind {
        LockType::Exclusive => None,
        LockType::Shared => Some(step(AmoOp::Sum, 1u64.wrapping_neg(), 0)),
    }
}

/// The release of a lock of `kind` this rank holds.
pub(crate) fn release(kind: LockType) -> Step {
    match kind {
        // Adding the top bit clears it (the carry leaves the word) and keeps the count.
        LockType::Exclusive => step(AmoOp::Sum, WRITER.wrapping_neg(), 0),
        LockType::Shared => step(AmoOp::Sum, 1u64.wrapping_neg(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the NIC does with a step on `word`; the old value.
    fn apply(word: &mut u64, s: Step) -> u64 {
        let old = *word;
        match s.op {
            AmoOp::Sum => *word = old.wrapping_add(s.operand),
            AmoOp::CompareSwap if old == s.compare => *word = s.operand,
            AmoOp::CompareSwap => {}
            AmoOp::Replace => *word = s.operand,
            op => panic!("the lock word takes no {op:?}"),
        }
        old
    }

    /// A writer holds the lock; its release comes before, between or after a reader's
    /// attempt and the step that follows it (back-out, or release when the attempt took the
    /// lock). Afterwards the word is free: a reader and then a writer each take it.
    #[test]
    fn a_release_between_a_readers_attempt_and_back_out_leaves_the_word_free() {
        for release_at in 0..3 {
            let mut word = 0;
            assert!(took(
                LockType::Exclusive,
                apply(&mut word, attempt(LockType::Exclusive))
            ));
            let writer = |at: usize, w: &mut u64| {
                if at == release_at {
                    apply(w, release(LockType::Exclusive));
                }
            };
            writer(0, &mut word);
            let old = apply(&mut word, attempt(LockType::Shared));
            writer(1, &mut word);
            let then = if took(LockType::Shared, old) {
                release(LockType::Shared)
            } else {
                back_out(LockType::Shared).expect("a reader backs out")
            };
            apply(&mut word, then);
            writer(2, &mut word);
            assert_eq!(word, 0, "writer released at {release_at}: {word:#x}");
            assert!(took(
                LockType::Shared,
                apply(&mut word, attempt(LockType::Shared))
            ));
            apply(&mut word, release(LockType::Shared));
            assert!(took(
                LockType::Exclusive,
                apply(&mut word, attempt(LockType::Exclusive))
            ));
        }
    }

    #[test]
    fn a_writer_waits_for_readers_and_a_reader_for_the_writer() {
        let mut word = 0;
        assert!(took(
            LockType::Shared,
            apply(&mut word, attempt(LockType::Shared))
        ));
        assert!(!took(
            LockType::Exclusive,
            apply(&mut word, attempt(LockType::Exclusive))
        ));
        apply(&mut word, release(LockType::Shared));
        assert!(took(
            LockType::Exclusive,
            apply(&mut word, attempt(LockType::Exclusive))
        ));
        assert!(!took(
            LockType::Shared,
            apply(&mut word, attempt(LockType::Shared))
        ));
        apply(&mut word, back_out(LockType::Shared).expect("back out"));
        assert_eq!(word, WRITER);
    }
}
