//! Sparse device tables: the storage model of on-chip SRAM tables that software configures a
//! few entries of.
//!
//! A NIC has many tables of thousands of entries (portal table, counting events, command and
//! event queue descriptors, address contexts, TCAMs). Real hardware keeps them in SRAM; an
//! idle NIC has written almost none of them, and an entry nobody wrote reads as its reset
//! value. [`SparseTable`] models exactly that: entries are kept in pages of [`PAGE`] entries
//! that are allocated on the first write to any entry of the page; a read of an entry in an
//! untouched page returns the table's reset value. Lookups stay O(1) (two index operations,
//! no hashing), so the per-packet paths that index these tables are not slowed down.

use thiserror::Error;

/// Entries per page: the unit of allocation. Small, so that configuring one entry of a table
/// of large entries costs little; large enough that the page directory of a 2048-entry table
/// is 1 KiB.
pub const PAGE: usize = 16;

/// An index beyond the end of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("table index {index} out of range (table has {len} entries)")]
pub struct OutOfRange {
    /// The index asked for.
    pub index: usize,
    /// Entries in the table.
    pub len: usize,
}

/// A fixed-length table whose entries read as `reset` until written (module docs). The page
/// directory is empty until the first write, so an untouched table costs no heap: for tables
/// of one-byte entries the directory (one pointer per page) is as large as the entries.
#[derive(Debug, Clone)]
pub struct SparseTable<T> {
    len: usize,
    reset: T,
    pages: Box<[Option<Box<[T]>>]>,
}

impl<T: Clone> SparseTable<T> {
    /// A table of `len` entries, all at `reset`, with no page allocated.
    pub fn new(len: usize, reset: T) -> Self {
        Self {
            len,
            reset,
            pages: Box::default(),
        }
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value untouched entries read as.
    pub fn reset_value(&self) -> &T {
        &self.reset
    }

    /// Entry `i`: its stored value, or the reset value if its page was never written.
    #[inline]
    pub fn get(&self, i: usize) -> Result<&T, OutOfRange> {
        if i >= self.len {
            return Err(self.out_of_range(i));
        }
        Ok(match self.page(i) {
            Some(page) => &page[i % PAGE],
            None => &self.reset,
        })
    }

    /// Entry `i` for writing; allocates its page (all entries at reset) on first use.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Result<&mut T, OutOfRange> {
        if i >= self.len {
            return Err(self.out_of_range(i));
        }
        if self.pages.is_empty() {
            self.pages = (0..self.len.div_ceil(PAGE)).map(|_| None).collect();
        }
        let reset = &self.reset;
        let page = self.pages[i / PAGE].get_or_insert_with(|| vec![reset.clone(); PAGE].into());
        Ok(&mut page[i % PAGE])
    }

    /// Entry `i` for writing only if its page is already allocated (an untouched entry is at
    /// reset, and a caller that only changes non-reset entries need not allocate it).
    #[inline]
    pub fn get_mut_if_touched(&mut self, i: usize) -> Result<Option<&mut T>, OutOfRange> {
        if i >= self.len {
            return Err(self.out_of_range(i));
        }
        Ok(self
            .pages
            .get_mut(i / PAGE)
            .and_then(Option::as_mut)
            .map(|p| &mut p[i % PAGE]))
    }

    /// Store `v` at entry `i`.
    pub fn set(&mut self, i: usize, v: T) -> Result<(), OutOfRange> {
        *self.get_mut(i)? = v;
        Ok(())
    }

    /// Every entry back to reset, releasing all pages.
    pub fn clear(&mut self) {
        self.pages.iter_mut().for_each(|p| *p = None);
    }

    /// Entries backed by allocated pages (a multiple of [`PAGE`]); 0 for an untouched table.
    pub fn allocated_entries(&self) -> usize {
        self.pages.iter().flatten().map(|p| p.len()).sum()
    }

    /// Bytes of heap this table holds (page directory and pages).
    pub fn heap_bytes(&self) -> usize {
        self.pages.len() * size_of::<Option<Box<[T]>>>() + self.allocated_entries() * size_of::<T>()
    }

    /// Every entry in index order, reset values included.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        (0..self.len).map(move |i| {
            (
                i,
                match self.page(i) {
                    Some(page) => &page[i % PAGE],
                    None => &self.reset,
                },
            )
        })
    }

    /// Entries of allocated pages, in index order (untouched pages are skipped: every entry
    /// in them is at reset).
    pub fn iter_touched(&self) -> impl Iterator<Item = (usize, &T)> {
        let len = self.len;
        self.pages.iter().enumerate().flat_map(move |(p, page)| {
            page.iter().flat_map(move |pg| {
                pg.iter()
                    .enumerate()
                    .map(move |(k, v)| (p * PAGE + k, v))
                    .filter(move |(i, _)| *i < len)
            })
        })
    }

    /// Mutable entries of allocated pages, in index order.
    pub fn iter_touched_mut(&mut self) -> impl Iterator<Item = (usize, &mut T)> {
        let len = self.len;
        self.pages
            .iter_mut()
            .enumerate()
            .flat_map(move |(p, page)| {
                page.iter_mut().flat_map(move |pg| {
                    pg.iter_mut()
                        .enumerate()
                        .map(move |(k, v)| (p * PAGE + k, v))
                        .filter(move |(i, _)| *i < len)
                })
            })
    }

    /// The first index at or after `from` whose entry satisfies `pred`; an untouched page is
    /// tested once, through the reset value.
    pub fn position_from(&self, from: usize, mut pred: impl FnMut(&T) -> bool) -> Option<usize> {
        let mut i = from;
        while i < self.len {
            match self.page(i) {
                Some(page) => {
                    if pred(&page[i % PAGE]) {
                        return Some(i);
                    }
                    i += 1;
                }
                None => {
                    if pred(&self.reset) {
                        return Some(i);
                    }
                    i = (i / PAGE + 1) * PAGE;
                }
            }
        }
        None
    }

    /// The page holding entry `i`, if allocated (the page directory itself is allocated on
    /// the first write to the table, so a table nobody wrote holds no heap at all).
    #[inline]
    fn page(&self, i: usize) -> Option<&[T]> {
        self.pages.get(i / PAGE).and_then(|p| p.as_deref())
    }

    fn out_of_range(&self, index: usize) -> OutOfRange {
        OutOfRange {
            index,
            len: self.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untouched_table_holds_no_heap_and_the_directory_comes_with_the_first_write() {
        let mut t = SparseTable::new(4096, 0u8);
        assert_eq!(t.heap_bytes(), 0, "no directory before a write");
        assert_eq!(t.get_mut_if_touched(100), Ok(None));
        assert_eq!(t.position_from(5, |v| *v == 0), Some(5));
        assert_eq!(t.position_from(5, |v| *v == 1), None);
        assert_eq!(t.heap_bytes(), 0, "reads and searches allocate nothing");
        t.set(100, 7).unwrap();
        let dir = 4096 / PAGE * size_of::<Option<Box<[u8]>>>();
        assert_eq!(t.heap_bytes(), dir + PAGE);
        assert_eq!(*t.get(100).unwrap(), 7);
        assert_eq!(*t.get(4095).unwrap(), 0);
        assert_eq!(t.position_from(0, |v| *v == 7), Some(100));
        assert_eq!(t.iter().filter(|(_, v)| **v == 7).count(), 1);
        t.clear();
        assert_eq!(t.allocated_entries(), 0);
        assert_eq!(*t.get(100).unwrap(), 0);
    }

    #[test]
    fn untouched_entries_read_as_reset_and_allocate_nothing() {
        let t = SparseTable::new(2048, 0xabu8);
        assert_eq!(t.len(), 2048);
        assert_eq!(*t.get(0).unwrap(), 0xab);
        assert_eq!(*t.get(2047).unwrap(), 0xab);
        assert_eq!(t.allocated_entries(), 0);
        assert_eq!(t.iter_touched().count(), 0);
        assert!(t.iter().all(|(_, v)| *v == 0xab));
    }

    #[test]
    fn writes_stick_and_allocate_only_their_page() {
        let mut t = SparseTable::new(100, 7u32);
        t.set(33, 1).unwrap();
        *t.get_mut(99).unwrap() = 2;
        assert_eq!(*t.get(33).unwrap(), 1);
        assert_eq!(*t.get(99).unwrap(), 2);
        // Neighbours in the same page read as reset.
        assert_eq!(*t.get(32).unwrap(), 7);
        assert_eq!(*t.get(34).unwrap(), 7);
        assert_eq!(*t.get(0).unwrap(), 7);
        assert_eq!(t.allocated_entries(), 2 * PAGE);
        let touched: Vec<_> = t
            .iter_touched()
            .filter(|(_, v)| **v != 7)
            .map(|(i, v)| (i, *v))
            .collect();
        assert_eq!(touched, vec![(33, 1), (99, 2)]);
        // The last page is partial: iteration stops at len.
        assert!(t.iter_touched().all(|(i, _)| i < 100));
        t.clear();
        assert_eq!(*t.get(33).unwrap(), 7);
        assert_eq!(t.allocated_entries(), 0);
    }

    #[test]
    fn out_of_range_is_an_error() {
        let mut t = SparseTable::new(10, 0u8);
        assert_eq!(t.get(10), Err(OutOfRange { index: 10, len: 10 }));
        assert!(t.get_mut(usize::MAX).is_err());
        assert!(t.set(10, 1).is_err());
        assert!(t.get_mut_if_touched(11).is_err());
        assert_eq!(t.allocated_entries(), 0);
        let e = t.get(12).unwrap_err().to_string();
        assert!(e.contains("12") && e.contains("10 entries"), "{e}");
    }

    #[test]
    fn get_mut_if_touched_does_not_allocate() {
        let mut t = SparseTable::new(64, 0u8);
        assert_eq!(t.get_mut_if_touched(5).unwrap(), None);
        assert_eq!(t.allocated_entries(), 0);
        t.set(5, 3).unwrap();
        *t.get_mut_if_touched(6).unwrap().unwrap() = 4;
        assert_eq!(*t.get(6).unwrap(), 4);
    }

    #[test]
    fn position_from_sees_reset_entries_of_untouched_pages() {
        let mut t: SparseTable<Option<u8>> = SparseTable::new(64, None);
        for i in 0..20 {
            t.set(i, Some(1)).unwrap();
        }
        assert_eq!(t.position_from(1, Option::is_none), Some(20));
        assert_eq!(t.position_from(0, |v| *v == Some(1)), Some(0));
        assert_eq!(t.position_from(20, |v| *v == Some(1)), None);
        let mut full = SparseTable::new(3, None);
        for i in 0..3 {
            full.set(i, Some(0u8)).unwrap();
        }
        assert_eq!(full.position_from(0, Option::is_none), None);
    }

    proptest::proptest! {
        #[test]
        fn behaves_like_a_dense_table(ops in proptest::collection::vec((0usize..80, 0u16..5), 0..60)) {
            let mut sparse = SparseTable::new(70, 9u16);
            let mut dense = [9u16; 70];
            for (i, v) in ops {
                let r = sparse.set(i, v);
                if i < 70 {
                    proptest::prop_assert!(r.is_ok());
                    dense[i] = v;
                } else {
                    proptest::prop_assert!(r.is_err());
                }
            }
            for (i, d) in dense.iter().enumerate() {
                proptest::prop_assert_eq!(sparse.get(i).unwrap(), d);
            }
        }
    }
}
