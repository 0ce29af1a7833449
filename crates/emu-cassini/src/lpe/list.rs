//! Ordered lists with match indexes.
//!
//! Hardware walks a list from its head; the first entry that matches wins. The model keeps each
//! list as a map from an arrival sequence number to the entry (so order, O(log n) removal and
//! in-order iteration come for free) plus an index that finds the first matching entry without
//! walking the whole list:
//!
//! * entries are grouped by their `ignore_bits` mask; inside a group, entries are bucketed by
//!   `match_bits & !ignore_bits`. For an incoming header, each group is looked up with the key
//!   `incoming & !mask`, and the bucket is walked in order until an entry also passes the
//!   initiator and length checks. The earliest candidate over all groups is the first match of
//!   the whole list, exactly as a head-to-tail walk would find. Message queues use a handful of
//!   masks, so matching costs a few hash lookups instead of a walk over thousands of entries.
//! * unexpected headers have concrete match bits: they are bucketed by those bits. An append
//!   without ignore bits looks up its bucket; one with ignore bits walks the list in order.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::le::{Le, LinkedLe, UnexpectedHeader, bits_match};

/// Entries with the same ignore mask, bucketed by their masked match bits.
#[derive(Debug, Default, Clone)]
struct MaskGroup {
    ignore: u64,
    buckets: HashMap<u64, BTreeSet<u64>>,
    count: usize,
}

/// One PRIORITY / OVERFLOW / REQUEST list of a PtlTE.
#[derive(Debug, Default, Clone)]
pub(crate) struct LeList {
    entries: BTreeMap<u64, LinkedLe>,
    groups: Vec<MaskGroup>,
    by_buffer: HashMap<u16, BTreeSet<u64>>,
    next_seq: u64,
    /// Set by a failed append; cleared by an append carrying `RESTART_SEQ`.
    pub(crate) append_disabled: bool,
}

impl LeList {
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Links `le` at the tail; returns its sequence number (its position key).
    pub(crate) fn push(&mut self, le: Le) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let ignore = le.ignore_bits;
        let key = le.match_bits & !ignore;
        let group = match self.groups.iter().position(|g| g.ignore == ignore) {
            Some(i) => &mut self.groups[i],
            None => {
                self.groups.push(MaskGroup {
                    ignore,
                    ..MaskGroup::default()
                });
                let last = self.groups.len() - 1;
                &mut self.groups[last]
            }
        };
        group.buckets.entry(key).or_default().insert(seq);
        group.count += 1;
        self.by_buffer.entry(le.buffer_id).or_default().insert(seq);
        self.entries.insert(seq, LinkedLe::new(le));
        seq
    }

    /// Unlinks the entry at `seq`.
    pub(crate) fn remove(&mut self, seq: u64) -> Option<LinkedLe> {
        let linked = self.entries.remove(&seq)?;
        let le = &linked.le;
        let key = le.match_bits & !le.ignore_bits;
        if let Some(gi) = self.groups.iter().position(|g| g.ignore == le.ignore_bits) {
            let group = &mut self.groups[gi];
            if let Some(bucket) = group.buckets.get_mut(&key) {
                bucket.remove(&seq);
                if bucket.is_empty() {
                    group.buckets.remove(&key);
                }
            }
            group.count = group.count.saturating_sub(1);
            if group.count == 0 {
                self.groups.swap_remove(gi);
            }
        }
        if let Some(set) = self.by_buffer.get_mut(&le.buffer_id) {
            set.remove(&seq);
            if set.is_empty() {
                self.by_buffer.remove(&le.buffer_id);
            }
        }
        Some(linked)
    }

    pub(crate) fn get(&self, seq: u64) -> Option<&LinkedLe> {
        self.entries.get(&seq)
    }

    pub(crate) fn get_mut(&mut self, seq: u64) -> Option<&mut LinkedLe> {
        self.entries.get_mut(&seq)
    }

    /// Sequence number of the head entry.
    pub(crate) fn first(&self) -> Option<u64> {
        self.entries.keys().next().copied()
    }

    /// The first entry (in list order) carrying `buffer_id`.
    pub(crate) fn find_buffer(&self, buffer_id: u16) -> Option<u64> {
        self.by_buffer
            .get(&buffer_id)
            .and_then(|s| s.iter().next().copied())
    }

    /// The first entry, in list order, whose match bits match `incoming` and for which
    /// `accept` holds (initiator and length checks).
    pub(crate) fn find_match(
        &self,
        incoming: u64,
        mut accept: impl FnMut(&LinkedLe) -> bool,
    ) -> Option<u64> {
        let mut best: Option<u64> = None;
        for group in &self.groups {
            let Some(bucket) = group.buckets.get(&(incoming & !group.ignore)) else {
                continue;
            };
            for &seq in bucket {
                if best.is_some_and(|b| seq >= b) {
                    break;
                }
                let Some(linked) = self.entries.get(&seq) else {
                    continue;
                };
                if accept(linked) {
                    best = Some(seq);
                    break;
                }
            }
        }
        best
    }

    /// Entries in list order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &LinkedLe)> {
        self.entries.iter().map(|(s, l)| (*s, l))
    }

    /// Removes every entry; returns how many were linked.
    pub(crate) fn clear(&mut self) -> usize {
        let n = self.entries.len();
        self.entries.clear();
        self.groups.clear();
        self.by_buffer.clear();
        self.append_disabled = false;
        n
    }
}

/// The UNEXPECTED list of a PtlTE, in arrival order.
#[derive(Debug, Default, Clone)]
pub(crate) struct UleList {
    entries: BTreeMap<u64, UnexpectedHeader>,
    by_bits: HashMap<u64, BTreeSet<u64>>,
    next_seq: u64,
}

impl UleList {
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn push(&mut self, ule: UnexpectedHeader) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_bits.entry(ule.match_bits).or_default().insert(seq);
        self.entries.insert(seq, ule);
        seq
    }

    pub(crate) fn remove(&mut self, seq: u64) -> Option<UnexpectedHeader> {
        let ule = self.entries.remove(&seq)?;
        if let Some(set) = self.by_bits.get_mut(&ule.match_bits) {
            set.remove(&seq);
            if set.is_empty() {
                self.by_bits.remove(&ule.match_bits);
            }
        }
        Some(ule)
    }

    /// The first header in arrival order whose bits match `(match_bits, ignore_bits)` and for
    /// which `accept` holds.
    pub(crate) fn find_match(
        &self,
        match_bits: u64,
        ignore_bits: u64,
        mut accept: impl FnMut(&UnexpectedHeader) -> bool,
    ) -> Option<u64> {
        if ignore_bits == 0 {
            let bucket = self.by_bits.get(&match_bits)?;
            bucket
                .iter()
                .copied()
                .find(|seq| self.entries.get(seq).is_some_and(&mut accept))
        } else {
            self.entries
                .iter()
                .find(|(_, u)| bits_match(u.match_bits, match_bits, ignore_bits) && accept(u))
                .map(|(s, _)| *s)
        }
    }

    pub(crate) fn get(&self, seq: u64) -> Option<&UnexpectedHeader> {
        self.entries.get(&seq)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &UnexpectedHeader> {
        self.entries.values()
    }

    /// Removes every header; returns their ids in arrival order.
    pub(crate) fn drain_ids(&mut self) -> Vec<u64> {
        let ids = self.entries.values().map(|u| u.id).collect();
        self.entries.clear();
        self.by_bits.clear();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::super::hw::LeFlags;
    use super::super::le::NetOp;
    use super::*;

    fn le(id: u16, bits: u64, ignore: u64) -> Le {
        Le::new(id, 0, 64, LeFlags::OP_PUT).with_match(bits, ignore)
    }

    #[test]
    fn first_match_across_mask_groups() {
        let mut l = LeList::default();
        l.push(le(1, 5, 0));
        l.push(le(2, 0, u64::MAX)); // wildcard, later
        l.push(le(3, 5, 0));
        let s = l
            .find_match(5, |_| true)
            .and_then(|s| l.get(s))
            .map(|x| x.le.buffer_id);
        assert_eq!(s, Some(1));
        let s = l
            .find_match(6, |_| true)
            .and_then(|s| l.get(s))
            .map(|x| x.le.buffer_id);
        assert_eq!(s, Some(2));
        // A rejecting predicate on the first exact entry moves to the next earliest (wildcard).
        let s = l
            .find_match(5, |x| x.le.buffer_id != 1)
            .and_then(|s| l.get(s))
            .map(|x| x.le.buffer_id);
        assert_eq!(s, Some(2));
    }

    #[test]
    fn remove_keeps_indexes_consistent() {
        let mut l = LeList::default();
        let a = l.push(le(1, 5, 0));
        let b = l.push(le(1, 5, 0xF0));
        assert_eq!(l.find_buffer(1), Some(a));
        assert!(l.remove(a).is_some());
        assert_eq!(l.find_buffer(1), Some(b));
        assert_eq!(l.find_match(5, |_| true), Some(b));
        assert!(l.remove(b).is_some());
        assert!(l.remove(b).is_none());
        assert_eq!(l.find_match(5, |_| true), None);
        assert_eq!(l.groups.len(), 0);
        assert_eq!(l.len(), 0);
    }

    fn ule(id: u64, bits: u64) -> UnexpectedHeader {
        UnexpectedHeader {
            id,
            op: NetOp::Put,
            initiator: 0,
            match_bits: bits,
            header_data: 0,
            rlength: 8,
            mlength: 8,
            start: 0,
            lac: 0,
            remote_offset: 0,
            vni: 0,
            atomic: Default::default(),
            rendezvous: None,
            overflow_buffer_id: 0,
        }
    }

    #[test]
    fn ule_find_in_arrival_order() {
        let mut u = UleList::default();
        u.push(ule(10, 3));
        u.push(ule(11, 4));
        u.push(ule(12, 3));
        let first = |u: &UleList, b, i| {
            u.find_match(b, i, |_| true)
                .and_then(|s| u.entries.get(&s))
                .map(|x| x.id)
        };
        assert_eq!(first(&u, 3, 0), Some(10));
        assert_eq!(first(&u, 0, u64::MAX), Some(10));
        assert_eq!(first(&u, 4, 0), Some(11));
        let s = u.find_match(3, 0, |_| true).unwrap_or(u64::MAX);
        assert!(u.remove(s).is_some());
        assert_eq!(first(&u, 3, 0), Some(12));
        assert_eq!(u.drain_ids(), vec![11, 12]);
        assert_eq!(u.len(), 0);
    }
}
