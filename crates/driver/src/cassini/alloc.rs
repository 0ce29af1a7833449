//! Identifier allocators: a bitmap over `[first, end)` handing out the lowest free id, as the
//! kernel's `ida`/`idr` do for CQ, EQ, CT, PtlTE and RGID numbers.

/// A bitmap allocator of ids in `[first, end)`.
#[derive(Clone, Debug)]
pub struct IdAllocator {
    first: u32,
    end: u32,
    words: Vec<u64>,
    used: u32,
}

impl IdAllocator {
    /// Ids `first..end` (an empty range when `end <= first`).
    pub fn new(first: u32, end: u32) -> Self {
        let n = end.saturating_sub(first);
        IdAllocator {
            first,
            end: first + n,
            words: vec![0; n.div_ceil(64) as usize],
            used: 0,
        }
    }

    /// Number of ids the allocator manages.
    pub fn capacity(&self) -> u32 {
        self.end - self.first
    }

    /// Ids not allocated.
    pub fn free_count(&self) -> u32 {
        self.capacity() - self.used
    }

    /// Ids allocated.
    pub fn used_count(&self) -> u32 {
        self.used
    }

    fn slot(&self, id: u32) -> Option<(usize, u64)> {
        if id < self.first || id >= self.end {
            return None;
        }
        let i = id - self.first;
        Some(((i / 64) as usize, 1u64 << (i % 64)))
    }

    /// Whether `id` is allocated (false for ids outside the range).
    pub fn is_used(&self, id: u32) -> bool {
        self.slot(id)
            .is_some_and(|(w, b)| self.words.get(w).is_some_and(|x| x & b != 0))
    }

    /// The lowest free id, marked used.
    pub fn alloc(&mut self) -> Option<u32> {
        let (w, word) = self
            .words
            .iter()
            .enumerate()
            .find(|(_, x)| **x != u64::MAX)?;
        let bit = (!*word).trailing_zeros();
        let id = self.first + (w as u32) * 64 + bit;
        if id >= self.end {
            return None;
        }
        self.words[w] |= 1 << bit;
        self.used += 1;
        Some(id)
    }

    /// The lowest free id in `[lo, hi)`, marked used.
    pub fn alloc_in(&mut self, lo: u32, hi: u32) -> Option<u32> {
        let id = (lo.max(self.first)..hi.min(self.end)).find(|&i| !self.is_used(i))?;
        self.alloc_specific(id).then_some(id)
    }

    /// Mark `id` used; false if it is outside the range or already used.
    pub fn alloc_specific(&mut self, id: u32) -> bool {
        match self.slot(id) {
            Some((w, b)) if self.words[w] & b == 0 => {
                self.words[w] |= b;
                self.used += 1;
                true
            }
            _ => false,
        }
    }

    /// The first id of `count` consecutive free ids (lowest first), all marked used.
    pub fn alloc_contiguous(&mut self, count: u32) -> Option<u32> {
        if count == 0 || count > self.capacity() {
            return None;
        }
        let mut run = 0;
        let mut start = self.first;
        for id in self.first..self.end {
            if self.is_used(id) {
                run = 0;
                start = id + 1;
            } else {
                run += 1;
                if run == count {
                    for i in start..start + count {
                        self.alloc_specific(i);
                    }
                    return Some(start);
                }
            }
        }
        None
    }

    /// Return `id`; false (and nothing changes) if it was not allocated.
    pub fn free(&mut self, id: u32) -> bool {
        match self.slot(id) {
            Some((w, b)) if self.words[w] & b != 0 => {
                self.words[w] &= !b;
                self.used -= 1;
                true
            }
            _ => false,
        }
    }

    /// Free every id.
    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lowest_first_and_exhaustion() {
        let mut a = IdAllocator::new(1, 4);
        assert_eq!(a.capacity(), 3);
        assert_eq!(a.alloc(), Some(1));
        assert_eq!(a.alloc(), Some(2));
        assert_eq!(a.alloc(), Some(3));
        assert_eq!(a.alloc(), None);
        assert!(a.free(2));
        assert!(!a.free(2));
        assert!(!a.free(0));
        assert!(!a.free(4));
        assert_eq!(a.alloc(), Some(2));
        assert_eq!(a.free_count(), 0);
    }

    #[test]
    fn contiguous_and_specific() {
        let mut a = IdAllocator::new(0, 130);
        assert!(a.alloc_specific(3));
        assert!(!a.alloc_specific(3));
        assert!(!a.alloc_specific(130));
        assert_eq!(a.alloc_contiguous(4), Some(4));
        assert_eq!(a.alloc_contiguous(3), Some(0));
        assert_eq!(a.alloc_in(100, 102), Some(100));
        assert_eq!(a.alloc_contiguous(200), None);
        assert_eq!(a.used_count(), 9);
        a.clear();
        assert_eq!(a.free_count(), 130);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_a_set(ops in prop::collection::vec((any::<bool>(), 0u32..80), 1..200)) {
            let mut a = IdAllocator::new(5, 75);
            let mut model = std::collections::BTreeSet::new();
            for (alloc, id) in ops {
                if alloc {
                    let got = a.alloc();
                    let want = (5..75).find(|i| !model.contains(i));
                    prop_assert_eq!(got, want);
                    if let Some(i) = got { model.insert(i); }
                } else {
                    prop_assert_eq!(a.free(id), model.remove(&id));
                }
                prop_assert_eq!(a.used_count() as usize, model.len());
            }
        }
    }
}
