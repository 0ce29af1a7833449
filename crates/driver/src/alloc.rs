//! Identifier allocators of both drivers: a bitmap over `[first, end)` that hands out the
//! lowest free id (Cassini CQ, EQ, CT, PtlTE and RGID numbers; Gemini CQ, FMA, MDD and endpoint
//! numbers) or the lowest run of consecutive free ids (Gemini MRT and NTT entries), as the
//! kernel's `ida`/`idr` do.

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

    /// The lowest free id in `[lo, hi)`, marked used.
    pub fn alloc_in(&mut self, lo: u32, hi: u32) -> Option<u32> {
        let id = (lo.max(self.first)..hi.min(self.end)).find(|&i| !self.is_used(i))?;
        self.alloc_specific(id).then_some(id)
    }

    /// The first id of the lowest run of `count` consecutive free ids, all marked used.
    pub fn alloc_contiguous(&mut self, count: u32) -> Option<u32> {
        if count == 0 || count > self.free_count() {
            return None;
        }
        let mut run = 0;
        let mut start = self.first;
        let mut id = self.first;
        while id < self.end {
            // Skip whole used words quickly.
            let i = id - self.first;
            if i.is_multiple_of(64) && self.words[(i / 64) as usize] == u64::MAX {
                run = 0;
                id = id.saturating_add(64).min(self.end);
                start = id;
                continue;
            }
            if self.is_used(id) {
                run = 0;
                start = id + 1;
            } else {
                run += 1;
                if run == count {
                    for j in start..start + count {
                        self.alloc_specific(j);
                    }
                    return Some(start);
                }
            }
            id += 1;
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

    /// Return the run `start..start + count`; false (and nothing changes) unless every id of
    /// it was allocated.
    pub fn free_run(&mut self, start: u32, count: u32) -> bool {
        let Some(end) = start.checked_add(count) else {
            return false;
        };
        if count == 0 || !(start..end).all(|i| self.is_used(i)) {
            return false;
        }
        for i in start..end {
            self.free(i);
        }
        true
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
    fn runs() {
        let mut a = IdAllocator::new(0, 200);
        assert!(a.alloc_specific(3));
        assert_eq!(a.alloc_contiguous(4), Some(4));
        assert_eq!(a.alloc_contiguous(3), Some(0));
        // Fill a whole word so the skip path runs.
        assert_eq!(a.alloc_contiguous(120), Some(8));
        assert_eq!(a.alloc_contiguous(80), None);
        assert_eq!(a.alloc_contiguous(72), Some(128));
        assert_eq!(a.used_count(), 200);
        assert!(a.free_run(8, 120));
        assert!(!a.free_run(8, 1));
        // A run that is only partly allocated is refused whole.
        assert!(!a.free_run(0, 9));
        assert!(!a.free_run(u32::MAX, 2));
        assert_eq!(a.free_count(), 120);
        assert!(a.free_run(0, 8));
        assert_eq!(a.free_count(), 128);
    }

    #[test]
    fn specific_ranges_and_clear() {
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
        fn matches_a_set(ops in prop::collection::vec((0u8..3, 0u32..80, 1u32..6), 1..200)) {
            let mut a = IdAllocator::new(5, 75);
            let mut model = std::collections::BTreeSet::new();
            for (op, id, n) in ops {
                match op {
                    0 => {
                        let got = a.alloc();
                        let want = (5..75).find(|i| !model.contains(i));
                        prop_assert_eq!(got, want);
                        if let Some(i) = got { model.insert(i); }
                    }
                    1 => {
                        let got = a.alloc_contiguous(n);
                        let want = (5..=75u32.saturating_sub(n))
                            .find(|s| (*s..s + n).all(|i| !model.contains(&i)));
                        prop_assert_eq!(got, want);
                        if let Some(s) = got { model.extend(s..s + n); }
                    }
                    _ => prop_assert_eq!(a.free(id), model.remove(&id)),
                }
                prop_assert_eq!(a.used_count() as usize, model.len());
            }
        }
    }
}
