//! The physical page allocator of a node's RAM ([`PageAllocator`]): page-granular ranges
//! ([`GuestRange`]) for kernel rings and pinned user buffers.

use std::collections::BTreeMap;

use vm_memory::GuestAddress;

use super::error::AllocError;

/// Page size of the emulated node (4 KiB, as on x86-64 and the default arm64 kernels).
pub const PAGE_SIZE: u64 = 4096;

/// A range of host physical memory `[start, start + len)`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GuestRange {
    /// First byte.
    pub start: GuestAddress,
    /// Length in bytes.
    pub len: u64,
}

impl GuestRange {
    /// A range from its first byte and length.
    pub const fn new(start: GuestAddress, len: u64) -> Self {
        GuestRange { start, len }
    }
    /// One past the last byte (saturating).
    pub fn end(&self) -> u64 {
        self.start.0.saturating_add(self.len)
    }
    /// Whether `addr` lies inside the range.
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start.0 && addr - self.start.0 < self.len
    }
    /// Whether the two ranges share at least one byte.
    pub fn overlaps(&self, other: &GuestRange) -> bool {
        self.len > 0 && other.len > 0 && self.start.0 < other.end() && other.start.0 < self.end()
    }
}

/// A first-fit allocator of page-granular ranges inside `[base, base + size)`.
///
/// Lengths are rounded up to [`PAGE_SIZE`] and alignments raised to at least [`PAGE_SIZE`].
/// Free ranges are kept coalesced: freeing a range next to free space merges them, so after
/// everything is freed the allocator holds one free range again. Not thread-safe by itself;
/// [`HostMemory`] puts one behind a mutex.
#[derive(Clone, Debug)]
pub struct PageAllocator {
    base: u64,
    size: u64,
    /// Free ranges: start -> length. Never adjacent (always coalesced), never empty.
    free: BTreeMap<u64, u64>,
    /// Live allocations: start -> length.
    used: BTreeMap<u64, u64>,
}

impl PageAllocator {
    /// An allocator managing `[base, base + size)`; both must be multiples of [`PAGE_SIZE`].
    pub fn new(base: u64, size: u64) -> Result<Self, AllocError> {
        if size == 0
            || !base.is_multiple_of(PAGE_SIZE)
            || !size.is_multiple_of(PAGE_SIZE)
            || base.checked_add(size).is_none()
        {
            return Err(AllocError::BadRange { base, size });
        }
        let mut free = BTreeMap::new();
        free.insert(base, size);
        Ok(PageAllocator {
            base,
            size,
            free,
            used: BTreeMap::new(),
        })
    }

    /// Allocate `len` bytes (rounded up to whole pages) aligned to `align` (a power of two;
    /// raised to at least [`PAGE_SIZE`]). First fit: the lowest suitable address wins.
    pub fn alloc(&mut self, len: u64, align: u64) -> Result<GuestRange, AllocError> {
        if len == 0 {
            return Err(AllocError::ZeroLength);
        }
        if !align.is_power_of_two() {
            return Err(AllocError::BadAlignment { align });
        }
        let align = align.max(PAGE_SIZE);
        let exhausted = AllocError::Exhausted { len, align };
        let len = len
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(exhausted.clone())?;
        let mut found = None;
        for (&start, &flen) in &self.free {
            let Some(aligned) = start.checked_next_multiple_of(align) else {
                continue;
            };
            let pad = aligned - start;
            if flen >= pad && flen - pad >= len {
                found = Some((start, flen, aligned));
                break;
            }
        }
        let (start, flen, aligned) = found.ok_or(exhausted)?;
        self.free.remove(&start);
        if aligned > start {
            self.free.insert(start, aligned - start);
        }
        let tail = start + flen - (aligned + len);
        if tail > 0 {
            self.free.insert(aligned + len, tail);
        }
        self.used.insert(aligned, len);
        Ok(GuestRange::new(GuestAddress(aligned), len))
    }

    /// Return a range obtained from [`PageAllocator::alloc`]. The range must be exactly a
    /// live allocation (same start and length); anything else is an error and changes nothing.
    pub fn free(&mut self, range: GuestRange) -> Result<(), AllocError> {
        let start = range.start.0;
        let not_allocated = AllocError::NotAllocated {
            start,
            len: range.len,
        };
        match self.used.get(&start) {
            Some(&len) if len == range.len => {}
            _ => return Err(not_allocated),
        }
        self.used.remove(&start);
        let mut new_start = start;
        let mut new_len = range.len;
        // Merge with the free range ending exactly at `start`.
        if let Some((&pstart, &plen)) = self.free.range(..start).next_back()
            && pstart + plen == start
        {
            self.free.remove(&pstart);
            new_start = pstart;
            new_len += plen;
        }
        // Merge with the free range starting exactly at our end.
        let end = start + range.len;
        if let Some(nlen) = self.free.remove(&end) {
            new_len += nlen;
        }
        self.free.insert(new_start, new_len);
        Ok(())
    }

    /// The managed range.
    pub fn managed(&self) -> GuestRange {
        GuestRange::new(GuestAddress(self.base), self.size)
    }
    /// Total free bytes.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }
    /// Number of separate free ranges (1 when nothing is allocated: free space coalesces).
    pub fn free_ranges(&self) -> usize {
        self.free.len()
    }
    /// Number of live allocations.
    pub fn allocations(&self) -> usize {
        self.used.len()
    }
}
