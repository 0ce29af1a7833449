//! What a completed receive learned (`MPI_Status`, MPI 4.1 §3.2.5).

use crate::communicator::{CommRank, SimpleCommunicator, Tag};
use crate::datatype::Equivalence;
use transport::{Envelope, MatchBits};

/// What a receive learned (`MPI_Status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    source: CommRank,
    tag: Tag,
    len: usize,
    cancelled: bool,
}

impl Status {
    pub(crate) fn of(comm: &SimpleCommunicator, e: &Envelope) -> Self {
        Status {
            source: comm.comm_rank(e.source),
            tag: MatchBits::tag(e.bits) as Tag,
            len: e.len,
            cancelled: false,
        }
    }

    pub(crate) fn empty() -> Self {
        Status {
            source: -1,
            tag: -1,
            len: 0,
            cancelled: false,
        }
    }

    pub(crate) fn cancelled() -> Self {
        Status {
            cancelled: true,
            ..Self::empty()
        }
    }

    /// The sender's rank in the communicator (`MPI_SOURCE`).
    pub fn source_rank(&self) -> CommRank {
        self.source
    }

    /// The tag (`MPI_TAG`).
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// The message length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the message was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of `T` elements in the message (`MPI_Get_count`).
    pub fn count<T: Equivalence>(&self) -> usize {
        self.len / std::mem::size_of::<T>().max(1)
    }

    /// Whether the operation was cancelled (`MPI_Test_cancelled`).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }
}
