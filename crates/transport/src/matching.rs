//! Software tag matching, as MPI libraries do it when the NIC does not (uGNI, and the CXI
//! provider's software and hybrid modes): a queue of posted receives and a queue of unexpected
//! messages, both searched in order, so that receives match in posting order and messages from
//! one sender in arrival order (which a transport keeps equal to sending order).
//!
//! The queues hold what the transport needs to finish a match: for a posted receive `R` (e.g.
//! its capacity), for an unexpected message `U` (eager bytes, or a rendezvous descriptor).

use std::collections::VecDeque;

use crate::{Envelope, MatchSpec, OpId};

/// A posted receive waiting for a message.
#[derive(Debug)]
pub struct Posted<R> {
    /// The receive's operation.
    pub op: OpId,
    /// What it accepts.
    pub spec: MatchSpec,
    /// The transport's data for it.
    pub data: R,
}

/// A message that arrived before a receive matched it.
#[derive(Debug)]
pub struct Unexpected<U> {
    /// Who sent it, its bits and length.
    pub envelope: Envelope,
    /// The transport's data for it.
    pub data: U,
}

/// The two queues of software matching.
#[derive(Debug)]
pub struct Matcher<R, U> {
    posted: VecDeque<Posted<R>>,
    unexpected: VecDeque<Unexpected<U>>,
}

impl<R, U> Default for Matcher<R, U> {
    fn default() -> Self {
        Matcher {
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
        }
    }
}

impl<R, U> Matcher<R, U> {
    /// Empty queues.
    pub fn new() -> Self {
        Self::default()
    }

    /// A receive is posted: the first unexpected message it matches, taken out of the queue,
    /// or `None` after queueing the receive.
    pub fn post(&mut self, op: OpId, spec: MatchSpec, data: R) -> Option<(Unexpected<U>, R)> {
        match self
            .unexpected
            .iter()
            .position(|u| spec.matches(u.envelope.source, u.envelope.bits))
        {
            Some(i) => self.unexpected.remove(i).map(|u| (u, data)),
            None => {
                self.posted.push_back(Posted { op, spec, data });
                None
            }
        }
    }

    /// A message arrived: the first posted receive it matches, taken out of the queue, or
    /// `None` after queueing the message as unexpected.
    pub fn arrive(&mut self, envelope: Envelope, data: U) -> Option<(Posted<R>, U)> {
        match self
            .posted
            .iter()
            .position(|p| p.spec.matches(envelope.source, envelope.bits))
        {
            Some(i) => self.posted.remove(i).map(|p| (p, data)),
            None => {
                self.unexpected.push_back(Unexpected { envelope, data });
                None
            }
        }
    }

    /// The envelope of the first unexpected message matching `spec` (`MPI_Iprobe`).
    pub fn probe(&self, spec: &MatchSpec) -> Option<Envelope> {
        self.unexpected
            .iter()
            .find(|u| spec.matches(u.envelope.source, u.envelope.bits))
            .map(|u| u.envelope)
    }

    /// Take the first unexpected message matching `spec` out of matching (`MPI_Improbe`).
    pub fn claim(&mut self, spec: &MatchSpec) -> Option<Unexpected<U>> {
        let i = self
            .unexpected
            .iter()
            .position(|u| spec.matches(u.envelope.source, u.envelope.bits))?;
        self.unexpected.remove(i)
    }

    /// Remove the posted receive `op` (cancel); its data if it was still posted.
    pub fn cancel(&mut self, op: OpId) -> Option<R> {
        let i = self.posted.iter().position(|p| p.op == op)?;
        self.posted.remove(i).map(|p| p.data)
    }

    /// Posted receives and unexpected messages queued.
    pub fn depth(&self) -> (usize, usize) {
        (self.posted.len(), self.unexpected.len())
    }

    /// The unexpected messages, in arrival order (for a transport that must revisit them,
    /// e.g. when switching from hardware to software matching).
    pub fn unexpected_mut(&mut self) -> impl Iterator<Item = &mut Unexpected<U>> {
        self.unexpected.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MatchBits;

    fn env(source: u32, tag: u32) -> Envelope {
        Envelope {
            source,
            bits: MatchBits::of(1, tag),
            len: 8,
        }
    }

    fn spec(source: Option<u32>, tag: Option<u32>) -> MatchSpec {
        MatchSpec {
            source,
            bits: MatchBits::of(1, tag.unwrap_or(0)),
            ignore: if tag.is_none() {
                MatchBits::TAG_MASK
            } else {
                0
            },
        }
    }

    #[test]
    fn posted_receives_match_in_order_and_wildcards_work() {
        let mut m: Matcher<u32, &str> = Matcher::new();
        assert!(m.post(OpId(1), spec(None, Some(5)), 1).is_none());
        assert!(m.post(OpId(2), spec(Some(3), None), 2).is_none());
        // Tag 7 from rank 3: only the second receive accepts it.
        let (p, d) = m.arrive(env(3, 7), "a").expect("matched");
        assert_eq!((p.op, d), (OpId(2), "a"));
        // Tag 5 from rank 3: the first receive (posted first).
        let (p, _) = m.arrive(env(3, 5), "b").expect("matched");
        assert_eq!(p.op, OpId(1));
        assert!(m.arrive(env(4, 5), "c").is_none());
        assert_eq!(m.depth(), (0, 1));
    }

    #[test]
    fn unexpected_messages_keep_arrival_order_and_can_be_claimed() {
        let mut m: Matcher<(), u32> = Matcher::new();
        for i in 0..3 {
            assert!(m.arrive(env(2, 9), i).is_none());
        }
        assert_eq!(m.probe(&spec(Some(2), Some(9))).unwrap().source, 2);
        assert!(m.probe(&spec(Some(1), None)).is_none());
        let c = m.claim(&spec(None, None)).unwrap();
        assert_eq!(c.data, 0);
        let (u, ()) = m.post(OpId(9), spec(Some(2), Some(9)), ()).unwrap();
        assert_eq!(u.data, 1);
        assert!(m.post(OpId(10), spec(Some(5), None), ()).is_none());
        assert_eq!(m.cancel(OpId(10)), Some(()));
        assert_eq!(m.cancel(OpId(10)), None);
        assert_eq!(m.depth(), (0, 1));
    }

    #[test]
    fn other_contexts_never_match() {
        let mut m: Matcher<(), ()> = Matcher::new();
        let s = MatchSpec {
            source: None,
            bits: MatchBits::of(2, 0),
            ignore: MatchBits::TAG_MASK,
        };
        assert!(m.post(OpId(1), s, ()).is_none());
        assert!(m.arrive(env(0, 0), ()).is_none());
        assert_eq!(m.depth(), (1, 1));
    }
}
