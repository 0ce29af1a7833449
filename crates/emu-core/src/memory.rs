//! Host memory of one emulated node, and a physical page allocator over it.
//!
//! [`HostMemory`] is the RAM that the CPU side (driver, user library) and the devices (through
//! their [`crate::dma::DmaPort`]) share. It wraps one anonymous vm-memory mapping starting at
//! host physical address 0; anonymous mappings are committed lazily, so a node can have a
//! gigabyte of RAM and only pay for the pages it touches. The handle is cheap to clone (an
//! `Arc` inside) and every accessor is bounds-checked: a bad address is a typed
//! [`MemoryError`], never a panic.
//!
//! Plain reads and writes copy in one `memcpy`-sized chunk, straight from the mapping's base
//! pointer after one bounds check (the [`raw`] module holds the only `unsafe` code, each
//! block with its safety argument); accesses of up to 8 bytes are volatile, larger ones a
//! `memcpy`, as vm-memory does for guest memory. The `*_acquire` / `*_release` accessors are
//! real atomic 4- or 8-byte accesses, for words that the CPU and a device hand over to each
//! other (ring valid bits, producer/consumer indices, AMO targets).
//!
//! [`PageAllocator`] hands out page-granular ranges of that RAM (kernel pages for rings,
//! pinned user buffers); [`HostMemory::alloc`] / [`HostMemory::free`] are its thread-safe
//! front end.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use thiserror::Error;
pub use vm_memory::GuestAddress;

use crate::procmem::{ProcError, ProcessMemory};
use vm_memory::{Bytes, MmapRegion, VolatileMemory, VolatileSlice};

/// Page size of the emulated node (4 KiB, as on x86-64 and the default arm64 kernels).
pub const PAGE_SIZE: u64 = 4096;

/// Bytes per chunk of the write tracking behind [`HostMemory::snapshot`]: a restore copies
/// back whole chunks that were written since.
pub const SNAPSHOT_CHUNK: u64 = PAGE_SIZE;

/// Bytes copied per step when filling memory with a byte value.
const FILL_CHUNK: usize = 4096;

/// Why a host-memory access failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MemoryError {
    /// Some byte of `[addr, addr + len)` is outside the node's RAM (or the range overflows).
    #[error("host memory access [{addr:#x}, +{len:#x}) is out of range")]
    OutOfRange { addr: u64, len: u64 },
    /// An atomic access of `align` bytes at an address that is not a multiple of `align`.
    #[error("atomic access at {addr:#x} is not aligned to {align} bytes")]
    Misaligned { addr: u64, align: u64 },
    /// The RAM could not be created (bad size or the mmap failed).
    #[error("cannot create host memory of {size:#x} bytes: {reason}")]
    Create { size: u64, reason: String },
    /// [`HostMemory::restore`] of a snapshot of other RAM, or of one older than the RAM's
    /// latest snapshot.
    #[error("cannot restore host memory: {0}")]
    Snapshot(&'static str),
    /// An access outside the RAM of a node hosted in this process, to the process's own
    /// memory, failed ([`crate::procmem`]).
    #[error(transparent)]
    Process(#[from] ProcError),
}

/// Why a page allocation or free failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AllocError {
    /// A request for zero bytes.
    #[error("allocation of zero bytes")]
    ZeroLength,
    /// The alignment is not a power of two.
    #[error("alignment {align:#x} is not a power of two")]
    BadAlignment { align: u64 },
    /// No free range is large enough (after alignment).
    #[error("out of memory: no free range of {len:#x} bytes aligned to {align:#x}")]
    Exhausted { len: u64, align: u64 },
    /// `free` of a range that is not exactly one live allocation.
    #[error("free of [{start:#x}, +{len:#x}) which is not a live allocation")]
    NotAllocated { start: u64, len: u64 },
    /// The allocator's managed range is invalid (empty, unaligned or overflowing).
    #[error("invalid allocator range [{base:#x}, +{size:#x})")]
    BadRange { base: u64, size: u64 },
}

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

struct Inner {
    /// One anonymous private mapping; host physical address `base + a` is byte `a` of it.
    map: MmapRegion<()>,
    size: u64,
    /// Host address of the RAM's first byte: 0, or, for a node hosted in this process, the
    /// mapping's own address ([`HostMemory::hosted`]).
    base: u64,
    /// The rest of the host address space of a node hosted in this process: the process's
    /// registered memory, at host address = virtual address.
    process: Option<ProcessMemory>,
    alloc: Mutex<PageAllocator>,
    /// Write tracking, from the first [`HostMemory::snapshot`] on.
    written: OnceLock<Written>,
    /// Ranges handed out by [`HostMemory::host_ptr`] (written behind this handle's back).
    exposed: Mutex<Vec<(u64, u64)>>,
}

/// Which [`SNAPSHOT_CHUNK`]s were written since the latest snapshot or restore.
struct Written {
    /// One bit per chunk.
    bits: Box<[AtomicU64]>,
    /// Number of the latest snapshot (the bits are relative to it).
    generation: AtomicU64,
}

impl Written {
    fn new(size: u64) -> Self {
        let chunks = size.div_ceil(SNAPSHOT_CHUNK);
        Written {
            bits: (0..chunks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            generation: AtomicU64::new(0),
        }
    }

    /// Mark the chunks of `[off, off + len)` written (the range is inside the RAM).
    fn mark(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = off / SNAPSHOT_CHUNK;
        let last = (off + len - 1) / SNAPSHOT_CHUNK;
        for c in first..=last {
            if let Some(w) = self.bits.get((c / 64) as usize) {
                w.fetch_or(1 << (c % 64), Ordering::Relaxed);
            }
        }
    }
}

/// The contents and page allocations of one [`HostMemory`] at one moment
/// ([`HostMemory::snapshot`]). Chunks that were zero are not stored.
pub struct MemorySnapshot {
    memory: usize,
    generation: u64,
    chunks: Vec<Option<Box<[u8]>>>,
    alloc: PageAllocator,
}

impl fmt::Debug for MemorySnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemorySnapshot")
            .field("chunks", &self.chunks.len())
            .field("stored", &self.chunks.iter().flatten().count())
            .finish_non_exhaustive()
    }
}

/// The raw accesses to the mapping: the only `unsafe` code of host memory. Every function
/// checks its range against the mapping itself, so callers cannot misuse them.
#[allow(unsafe_code)]
mod raw {
    use std::sync::atomic::{AtomicU32, AtomicU64};
    use vm_memory::MmapRegion;

    /// The mapping's bytes `[off, off + len)` as a pointer, if they lie inside it.
    fn span(map: &MmapRegion<()>, off: usize, len: usize) -> Option<*mut u8> {
        let end = off.checked_add(len)?;
        (end <= map.size()).then(|| map.as_ptr().wrapping_add(off))
    }

    /// The mapping's bytes `[off, off + len)` as a pointer, if they lie inside it (no access
    /// is made).
    pub(super) fn ptr(map: &MmapRegion<()>, off: usize, len: usize) -> Option<*mut u8> {
        span(map, off, len)
    }

    /// Copy `buf.len()` bytes from the mapping at `off` into `buf`; false (nothing copied)
    /// if the range is not inside the mapping.
    pub(super) fn read(map: &MmapRegion<()>, off: usize, buf: &mut [u8]) -> bool {
        let Some(src) = span(map, off, buf.len()) else {
            return false;
        };
        let n = buf.len();
        let dst = buf.as_mut_ptr();
        if n <= 8 {
            for i in 0..n {
                // SAFETY: `src..src + n` is inside the live mapping (`span`), `dst..dst + n`
                // is `buf`; byte accesses have no alignment requirement. The load is
                // volatile because another thread (the device or the CPU side) may store to
                // the word concurrently.
                unsafe { dst.add(i).write(src.add(i).read_volatile()) };
            }
        } else {
            // SAFETY: both ranges are valid for `n` bytes (`span`, and `buf`); they cannot
            // overlap: `buf` is a Rust `&mut [u8]` and host memory never hands out a
            // reference into the mapping other than `&AtomicU64`/`&AtomicU32` words, which
            // cannot become a `&mut [u8]`. Concurrent stores by another thread make the
            // copied bytes unspecified, never unsound for plain bytes (vm-memory copies
            // guest memory shared with devices the same way).
            unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
        }
        true
    }

    /// Copy `buf` into the mapping at `off`; false (nothing copied) if the range is not
    /// inside the mapping.
    pub(super) fn write(map: &MmapRegion<()>, off: usize, buf: &[u8]) -> bool {
        let Some(dst) = span(map, off, buf.len()) else {
            return false;
        };
        let n = buf.len();
        let src = buf.as_ptr();
        if n <= 8 {
            for i in 0..n {
                // SAFETY: as in `read`, with the volatile access on the mapping's side.
                unsafe { dst.add(i).write_volatile(src.add(i).read()) };
            }
        } else {
            // SAFETY: as in `read`: valid, non-overlapping ranges of `n` bytes.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
        }
        true
    }

    /// The naturally aligned 8-byte word at `off` as an atomic, if it lies inside the
    /// mapping and `off` is 8-aligned.
    pub(super) fn atomic_u64(map: &MmapRegion<()>, off: usize) -> Option<&AtomicU64> {
        let p = span(map, off, 8)?;
        if !(p as usize).is_multiple_of(align_of::<AtomicU64>()) {
            return None;
        }
        // SAFETY: `p` is valid for 8 bytes for as long as `map` is borrowed (the returned
        // reference borrows it), and aligned for `AtomicU64`; every bit pattern is a valid
        // `u64`. Other accesses to the word are atomic, or byte copies that the program
        // tolerates seeing unspecified values from (shared device memory).
        Some(unsafe { AtomicU64::from_ptr(p.cast::<u64>()) })
    }

    /// The naturally aligned 4-byte word at `off` as an atomic (see [`atomic_u64`]).
    pub(super) fn atomic_u32(map: &MmapRegion<()>, off: usize) -> Option<&AtomicU32> {
        let p = span(map, off, 4)?;
        if !(p as usize).is_multiple_of(align_of::<AtomicU32>()) {
            return None;
        }
        // SAFETY: as in `atomic_u64`, for 4 bytes.
        Some(unsafe { AtomicU32::from_ptr(p.cast::<u32>()) })
    }
}

/// The RAM of one emulated node: a cheap-to-clone handle shared by the CPU side and devices.
///
/// Addresses are host physical addresses `0..size`. The first page is never handed out by
/// [`HostMemory::alloc`], so address 0 can serve as "no buffer" in descriptors.
#[derive(Clone)]
pub struct HostMemory {
    inner: Arc<Inner>,
}

impl fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostMemory")
            .field("size", &self.inner.size)
            .finish_non_exhaustive()
    }
}

impl HostMemory {
    /// RAM of `size` bytes (a non-zero multiple of [`PAGE_SIZE`], at least two pages),
    /// zero-filled, committed lazily by the host kernel, at host addresses `0..size`.
    pub fn new(size: u64) -> Result<Self, MemoryError> {
        Self::create(size, None)
    }

    /// The host memory of a node hosted in this process: RAM of `size` bytes at host
    /// addresses equal to its own virtual addresses in this process, and around it the
    /// process's memory that `process` pinned, also at host address = virtual address
    /// (docs/emu-core-memory.md, "A node hosted in a process").
    pub fn hosted(size: u64, process: ProcessMemory) -> Result<Self, MemoryError> {
        Self::create(size, Some(process))
    }

    fn create(size: u64, process: Option<ProcessMemory>) -> Result<Self, MemoryError> {
        let create = |reason: String| MemoryError::Create { size, reason };
        if size < 2 * PAGE_SIZE || !size.is_multiple_of(PAGE_SIZE) {
            return Err(create(
                "size must be a multiple of 4096 and at least two pages".into(),
            ));
        }
        let len = usize::try_from(size).map_err(|_| create("size exceeds usize".into()))?;
        let map = MmapRegion::<()>::new(len).map_err(|e| create(e.to_string()))?;
        let base = if process.is_some() {
            map.as_ptr() as u64
        } else {
            0
        };
        // The first page stays reserved so that 0 (the base) is never a valid allocation.
        let alloc = PageAllocator::new(base + PAGE_SIZE, size - PAGE_SIZE)
            .map_err(|e| create(e.to_string()))?;
        Ok(HostMemory {
            inner: Arc::new(Inner {
                map,
                size,
                base,
                process,
                alloc: Mutex::new(alloc),
                written: OnceLock::new(),
                exposed: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Size of the RAM in bytes.
    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// Whether two handles refer to the same RAM.
    pub fn same_as(&self, other: &HostMemory) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Host address of the RAM's first byte (0 except for a node hosted in this process).
    pub fn base(&self) -> u64 {
        self.inner.base
    }

    /// The process memory beside the RAM, for a node hosted in this process.
    pub fn process(&self) -> Option<&ProcessMemory> {
        self.inner.process.as_ref()
    }

    /// Check that `[addr, addr + len)` lies inside the RAM, or in process memory pinned for
    /// this node. A zero-length range at any RAM address up to its end is valid.
    pub fn check(&self, addr: GuestAddress, len: u64) -> Result<(), MemoryError> {
        if self.ram(addr, len).is_some() {
            return Ok(());
        }
        let p = self.outside(addr, len)?;
        Ok(p.check(addr.0, len, crate::procmem::PinAccess::NONE)?)
    }

    /// Whether `[addr, addr + len)` is RAM, or, for a node hosted in this process, may be
    /// process memory (no overflow, not straddling the RAM): what a passthrough access may
    /// try without translation. The access itself checks the pins.
    pub fn reachable(&self, addr: u64, len: u64) -> bool {
        self.ram(GuestAddress(addr), len).is_some() || self.outside(GuestAddress(addr), len).is_ok()
    }

    /// The offset in the RAM mapping of `[addr, addr + len)`, if it lies inside the RAM.
    #[inline]
    fn ram(&self, addr: GuestAddress, len: u64) -> Option<usize> {
        let off = addr.0.checked_sub(self.inner.base)?;
        let end = off.checked_add(len)?;
        if end <= self.inner.size {
            usize::try_from(off).ok()
        } else {
            None
        }
    }

    /// The process memory for `[addr, addr + len)` outside the RAM: `OutOfRange` for a node
    /// that is not hosted in this process, and for a range that overflows or overlaps the
    /// RAM.
    fn outside(&self, addr: GuestAddress, len: u64) -> Result<&ProcessMemory, MemoryError> {
        let oor = MemoryError::OutOfRange { addr: addr.0, len };
        let p = self.inner.process.as_ref().ok_or(oor.clone())?;
        let end = addr.0.checked_add(len).ok_or(oor.clone())?;
        let ram_end = self.inner.base + self.inner.size;
        if end > self.inner.base && addr.0 < ram_end {
            return Err(oor);
        }
        Ok(p)
    }

    /// A volatile view of `[addr, addr + len)` of the RAM after a bounds check.
    fn slice(&self, addr: GuestAddress, len: u64) -> Result<VolatileSlice<'_, ()>, MemoryError> {
        let oor = MemoryError::OutOfRange { addr: addr.0, len };
        let off = self.ram(addr, len).ok_or(oor.clone())?;
        let count = usize::try_from(len).map_err(|_| oor.clone())?;
        self.inner.map.get_slice(off, count).map_err(|_| oor)
    }

    /// The offset of `addr` in the RAM mapping, for an access of `len` bytes (bounds
    /// checked).
    fn offset(&self, addr: GuestAddress, len: usize) -> Result<usize, MemoryError> {
        self.ram(addr, len as u64).ok_or(MemoryError::OutOfRange {
            addr: addr.0,
            len: len as u64,
        })
    }

    /// Where `[addr, addr + len)` lives in this process: a pointer into the mapping (bounds
    /// checked), valid as long as any handle to this RAM lives. For a program that shares a
    /// range of the node's RAM with the emulated devices, as a process shares its pinned
    /// buffers with a real NIC (the MPI C bindings hand an `MPI_Win_allocate` window's memory
    /// to the program this way). Accesses through it are the caller's to make sound; this
    /// handle's own accessors tolerate concurrent stores to it (see [`raw`]).
    pub fn host_ptr(&self, addr: GuestAddress, len: u64) -> Result<*mut u8, MemoryError> {
        let off = self.offset(addr, usize::try_from(len).unwrap_or(usize::MAX))?;
        let p = raw::ptr(&self.inner.map, off, len as usize)
            .ok_or(MemoryError::OutOfRange { addr: addr.0, len })?;
        // Stores through the pointer are not seen here: a restore copies the range back
        // whole, whatever happened to it.
        let mut exposed = lock(&self.inner.exposed);
        if !exposed.contains(&(addr.0, len)) {
            exposed.push((addr.0, len));
        }
        self.mark_written(addr.0, len);
        Ok(p)
    }

    /// Copy `buf.len()` bytes from `addr` into `buf`.
    pub fn read(&self, addr: GuestAddress, buf: &mut [u8]) -> Result<(), MemoryError> {
        let Some(off) = self.ram(addr, buf.len() as u64) else {
            let p = self.outside(addr, buf.len() as u64)?;
            return Ok(p.read(addr.0, buf)?);
        };
        if raw::read(&self.inner.map, off, buf) {
            Ok(())
        } else {
            Err(MemoryError::OutOfRange {
                addr: addr.0,
                len: buf.len() as u64,
            })
        }
    }

    /// Copy `buf` into memory at `addr`.
    pub fn write(&self, addr: GuestAddress, buf: &[u8]) -> Result<(), MemoryError> {
        let Some(off) = self.ram(addr, buf.len() as u64) else {
            let p = self.outside(addr, buf.len() as u64)?;
            return Ok(p.write(addr.0, buf)?);
        };
        if raw::write(&self.inner.map, off, buf) {
            self.mark_written(addr.0, buf.len() as u64);
            Ok(())
        } else {
            Err(MemoryError::OutOfRange {
                addr: addr.0,
                len: buf.len() as u64,
            })
        }
    }

    /// Read a little-endian `u32` (any alignment; not atomic).
    pub fn read_u32(&self, addr: GuestAddress) -> Result<u32, MemoryError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    /// Read a little-endian `u64` (any alignment; not atomic).
    pub fn read_u64(&self, addr: GuestAddress) -> Result<u64, MemoryError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    /// Write a little-endian `u32` (any alignment; not atomic).
    pub fn write_u32(&self, addr: GuestAddress, v: u32) -> Result<(), MemoryError> {
        self.write(addr, &v.to_le_bytes())
    }
    /// Write a little-endian `u64` (any alignment; not atomic).
    pub fn write_u64(&self, addr: GuestAddress, v: u64) -> Result<(), MemoryError> {
        self.write(addr, &v.to_le_bytes())
    }

    /// Run `f` on the naturally aligned 8-byte word at `addr` as an atomic (the AMO unit's
    /// fetch-add / compare-swap, a valid word's acquire load).
    pub fn with_atomic_u64<R>(
        &self,
        addr: GuestAddress,
        f: impl FnOnce(&AtomicU64) -> R,
    ) -> Result<R, MemoryError> {
        if !addr.0.is_multiple_of(8) {
            return Err(MemoryError::Misaligned {
                addr: addr.0,
                align: 8,
            });
        }
        let Some(off) = self.ram(addr, 8) else {
            return Ok(self.outside(addr, 8)?.with_atomic_u64(addr.0, f)?);
        };
        self.mark_written(addr.0, 8);
        let a = raw::atomic_u64(&self.inner.map, off).ok_or(MemoryError::Misaligned {
            addr: addr.0,
            align: 8,
        })?;
        Ok(f(a))
    }

    /// Run `f` on the naturally aligned 4-byte word at `addr` as an atomic.
    pub fn with_atomic_u32<R>(
        &self,
        addr: GuestAddress,
        f: impl FnOnce(&AtomicU32) -> R,
    ) -> Result<R, MemoryError> {
        if !addr.0.is_multiple_of(4) {
            return Err(MemoryError::Misaligned {
                addr: addr.0,
                align: 4,
            });
        }
        let Some(off) = self.ram(addr, 4) else {
            return Ok(self.outside(addr, 4)?.with_atomic_u32(addr.0, f)?);
        };
        self.mark_written(addr.0, 4);
        let a = raw::atomic_u32(&self.inner.map, off).ok_or(MemoryError::Misaligned {
            addr: addr.0,
            align: 4,
        })?;
        Ok(f(a))
    }

    /// Atomic 8-byte load with acquire ordering (`addr` 8-aligned).
    pub fn load_u64_acquire(&self, addr: GuestAddress) -> Result<u64, MemoryError> {
        if self.ram(addr, 8).is_none() {
            return Ok(self.outside(addr, 8)?.load_u64_acquire(addr.0)?);
        }
        self.with_atomic_u64(addr, |a| a.load(Ordering::Acquire))
    }
    /// Atomic 8-byte store with release ordering (`addr` 8-aligned): everything written
    /// before it is visible to whoever acquires the new value.
    pub fn store_u64_release(&self, addr: GuestAddress, v: u64) -> Result<(), MemoryError> {
        if self.ram(addr, 8).is_none() {
            return Ok(self.outside(addr, 8)?.store_u64_release(addr.0, v)?);
        }
        self.with_atomic_u64(addr, |a| a.store(v, Ordering::Release))
    }
    /// Atomic 4-byte load with acquire ordering (`addr` 4-aligned).
    pub fn load_u32_acquire(&self, addr: GuestAddress) -> Result<u32, MemoryError> {
        if self.ram(addr, 4).is_none() {
            return Ok(self.outside(addr, 4)?.load_u32_acquire(addr.0)?);
        }
        self.with_atomic_u32(addr, |a| a.load(Ordering::Acquire))
    }
    /// Atomic 4-byte store with release ordering (`addr` 4-aligned).
    pub fn store_u32_release(&self, addr: GuestAddress, v: u32) -> Result<(), MemoryError> {
        if self.ram(addr, 4).is_none() {
            return Ok(self.outside(addr, 4)?.store_u32_release(addr.0, v)?);
        }
        self.with_atomic_u32(addr, |a| a.store(v, Ordering::Release))
    }

    /// Set `len` bytes at `addr` to `byte`.
    pub fn fill(&self, addr: GuestAddress, len: u64, byte: u8) -> Result<(), MemoryError> {
        if len == 0 {
            return self.check(addr, 0);
        }
        if self.ram(addr, len).is_none() {
            return Ok(self.outside(addr, len)?.fill(addr.0, len, byte)?);
        }
        let s = self.slice(addr, len)?;
        let chunk = [byte; FILL_CHUNK];
        let mut seen = [0u8; FILL_CHUNK];
        let mut off = 0usize;
        while off < s.len() {
            let n = (s.len() - off).min(FILL_CHUNK);
            // A zero fill leaves chunks that already read as zero alone: RAM nobody wrote is
            // zero and not yet committed, and writing it would commit it (a driver zeroing
            // the rings it allocates at probe would otherwise cost every idle node their
            // size in resident memory).
            if byte == 0 {
                s.read_slice(&mut seen[..n], off)
                    .map_err(|_| MemoryError::OutOfRange { addr: addr.0, len })?;
                if seen[..n] == chunk[..n] {
                    off += n;
                    continue;
                }
            }
            s.write_slice(&chunk[..n], off)
                .map_err(|_| MemoryError::OutOfRange { addr: addr.0, len })?;
            self.mark_written(addr.0 + off as u64, n as u64);
            off += n;
        }
        Ok(())
    }

    /// Copy `len` bytes from `src` to `dst` inside this RAM. Overlapping ranges are handled
    /// like `memmove`.
    pub fn copy_within(
        &self,
        src: GuestAddress,
        dst: GuestAddress,
        len: u64,
    ) -> Result<(), MemoryError> {
        copy_between(self, src, self, dst, len)
    }

    /// Allocate `len` bytes (rounded up to pages) aligned to `align` (power of two, at least
    /// a page). Thread-safe. The pages keep whatever they held before; callers that need
    /// zeroes [`HostMemory::fill`] them.
    pub fn alloc(&self, len: u64, align: u64) -> Result<GuestRange, AllocError> {
        self.allocator().alloc(len, align)
    }

    /// Return a range from [`HostMemory::alloc`].
    pub fn free(&self, range: GuestRange) -> Result<(), AllocError> {
        self.allocator().free(range)
    }

    /// Free bytes left in the page allocator.
    pub fn free_bytes(&self) -> u64 {
        self.allocator().free_bytes()
    }

    fn allocator(&self) -> MutexGuard<'_, PageAllocator> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that
        // breaks memory safety; keep going with the data as it is.
        lock(&self.inner.alloc)
    }

    /// Note a store to `[addr, addr + len)` (inside the RAM) for the next restore; nothing
    /// to do (one atomic load) until the first snapshot.
    #[inline]
    fn mark_written(&self, addr: u64, len: u64) {
        if let Some(w) = self.inner.written.get() {
            w.mark(addr - self.inner.base, len);
        }
    }

    /// The RAM's contents and page allocations now, to go back to with
    /// [`HostMemory::restore`] (for instance a fuzz target's fixture, built once and
    /// restored before every input). Copies every chunk that is not zero (reading
    /// untouched RAM commits nothing), then tracks which [`SNAPSHOT_CHUNK`]s are written,
    /// at the cost of one atomic load and `or` per store, so that a restore copies back
    /// only those. Devices must be idle while it runs. A later snapshot makes this one
    /// stale (see [`HostMemory::restore`]).
    pub fn snapshot(&self) -> MemorySnapshot {
        let written = self
            .inner
            .written
            .get_or_init(|| Written::new(self.inner.size));
        let size = self.inner.size;
        let mut chunks = Vec::with_capacity(size.div_ceil(SNAPSHOT_CHUNK) as usize);
        let zero = [0u8; SNAPSHOT_CHUNK as usize];
        let mut b = [0u8; SNAPSHOT_CHUNK as usize];
        let mut at = 0u64;
        while at < size {
            let n = SNAPSHOT_CHUNK.min(size - at) as usize;
            let stored =
                raw::read(&self.inner.map, at as usize, &mut b[..n]) && b[..n] != zero[..n];
            chunks.push(stored.then(|| Box::<[u8]>::from(&b[..n])));
            at += SNAPSHOT_CHUNK;
        }
        for w in written.bits.iter() {
            w.store(0, Ordering::Relaxed);
        }
        let generation = written.generation.fetch_add(1, Ordering::AcqRel) + 1;
        MemorySnapshot {
            memory: Arc::as_ptr(&self.inner) as usize,
            generation,
            chunks,
            alloc: self.allocator().clone(),
        }
    }

    /// Put the RAM back as `snap` recorded it: every chunk written since the snapshot (or
    /// the previous restore) gets its recorded bytes back, ranges handed out by
    /// [`HostMemory::host_ptr`] are copied back whole, and the page allocator returns to
    /// its recorded state. Returns the number of chunks copied. Devices and other threads
    /// must not touch the RAM while it runs. Fails, changing nothing, for a snapshot of
    /// other RAM or one older than the latest [`HostMemory::snapshot`] of this RAM (its
    /// write tracking is relative to the latest one).
    pub fn restore(&self, snap: &MemorySnapshot) -> Result<usize, MemoryError> {
        if snap.memory != Arc::as_ptr(&self.inner) as usize {
            return Err(MemoryError::Snapshot("the snapshot is of other RAM"));
        }
        let Some(written) = self.inner.written.get() else {
            return Err(MemoryError::Snapshot("the RAM has no snapshot"));
        };
        if written.generation.load(Ordering::Acquire) != snap.generation {
            return Err(MemoryError::Snapshot(
                "a later snapshot of this RAM replaced this one",
            ));
        }
        for &(addr, len) in lock(&self.inner.exposed).iter() {
            written.mark(addr - self.inner.base, len);
        }
        let zero = [0u8; SNAPSHOT_CHUNK as usize];
        let mut copied = 0;
        for (i, w) in written.bits.iter().enumerate() {
            let mut bits = w.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let c = i * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let at = c as u64 * SNAPSHOT_CHUNK;
                let n = SNAPSHOT_CHUNK.min(self.inner.size - at) as usize;
                let src = snap
                    .chunks
                    .get(c)
                    .and_then(|b| b.as_deref())
                    .unwrap_or(&zero[..n]);
                raw::write(&self.inner.map, at as usize, src);
                copied += 1;
            }
        }
        *self.allocator() = snap.alloc.clone();
        Ok(copied)
    }
}

/// Lock `m`, carrying on after a panic elsewhere poisoned it (the data guarded here stays
/// consistent between operations).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Copy `len` bytes from `src` in `from` to `dst` in `to` (`memmove` semantics when both are
/// the same RAM). Both ranges are checked before anything is copied.
pub(crate) fn copy_between(
    from: &HostMemory,
    src: GuestAddress,
    to: &HostMemory,
    dst: GuestAddress,
    len: u64,
) -> Result<(), MemoryError> {
    if len == 0 {
        from.check(src, 0)?;
        return to.check(dst, 0);
    }
    if from.ram(src, len).is_none() || to.ram(dst, len).is_none() {
        return copy_through(from, src, to, dst, len);
    }
    let s = from.slice(src, len)?;
    let d = to.slice(dst, len)?;
    s.copy_to_volatile_slice(d);
    to.mark_written(dst.0, len);
    Ok(())
}

/// [`copy_between`] where either side is process memory: both ranges checked, then copied
/// through a bounce buffer, backwards when the destination overlaps the source from above.
fn copy_through(
    from: &HostMemory,
    src: GuestAddress,
    to: &HostMemory,
    dst: GuestAddress,
    len: u64,
) -> Result<(), MemoryError> {
    from.check(src, len)?;
    to.check(dst, len)?;
    const CHUNK: u64 = 16 << 10;
    let mut buf = [0u8; CHUNK as usize];
    let backwards = from.same_as(to) && dst.0 > src.0 && dst.0 < src.0.saturating_add(len);
    let mut done = 0u64;
    while done < len {
        let n = CHUNK.min(len - done);
        let at = if backwards { len - done - n } else { done };
        let b = &mut buf[..n as usize];
        from.read(GuestAddress(src.0 + at), b)?;
        to.write(GuestAddress(dst.0 + at), b)?;
        done += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem() -> HostMemory {
        HostMemory::new(1 << 20).unwrap()
    }

    fn contents(m: &HostMemory) -> Vec<u8> {
        let mut b = vec![0u8; m.size() as usize];
        m.read(GuestAddress(0), &mut b).unwrap();
        b
    }

    #[test]
    fn restore_undoes_every_kind_of_store_and_the_allocations() {
        let m = HostMemory::new(64 * PAGE_SIZE + 0x1000).unwrap();
        m.write(GuestAddress(0x3000), &[7u8; 5000]).unwrap();
        let kept = m.alloc(2 * PAGE_SIZE, PAGE_SIZE).unwrap();
        let before = contents(&m);
        let free = m.free_bytes();
        let snap = m.snapshot();
        // Plain, atomic, fill, copy and pointer stores, across chunk boundaries.
        m.write(GuestAddress(0x2FFE), &[1, 2, 3, 4]).unwrap();
        m.store_u64_release(GuestAddress(0x8000), u64::MAX).unwrap();
        m.with_atomic_u32(GuestAddress(0x9004), |a| a.fetch_add(9, Ordering::SeqCst))
            .unwrap();
        m.fill(GuestAddress(0x10_000), 3 * PAGE_SIZE, 0xEE).unwrap();
        m.fill(GuestAddress(0x3000), 100, 0).unwrap();
        m.copy_within(GuestAddress(0x3000), GuestAddress(0x20_000), 5000)
            .unwrap();
        let p = m.host_ptr(GuestAddress(0x30_000), 16).unwrap();
        m.alloc(4 * PAGE_SIZE, PAGE_SIZE).unwrap();
        m.free(kept).unwrap();
        unsafe_store(p);
        assert_ne!(contents(&m), before);
        let copied = m.restore(&snap).unwrap();
        assert_eq!(contents(&m), before);
        assert_eq!(m.free_bytes(), free);
        assert!(
            (1..=16).contains(&copied),
            "only written chunks are copied back, {copied} were"
        );
        // Nothing written since: nothing but the exposed range to copy; the pointer's
        // range is copied back every time.
        unsafe_store(p);
        assert_eq!(m.restore(&snap).unwrap(), 1);
        assert_eq!(contents(&m), before);
        // The last chunk is shorter than a chunk.
        m.write(GuestAddress(m.size() - 8), &[9; 8]).unwrap();
        m.restore(&snap).unwrap();
        assert_eq!(contents(&m), before);
    }

    #[allow(unsafe_code)]
    fn unsafe_store(p: *mut u8) {
        // SAFETY: callers pass a pointer from `host_ptr` of at least one byte whose RAM is
        // alive.
        unsafe { p.write_volatile(0xAA) };
    }

    #[test]
    fn restore_refuses_stale_or_foreign_snapshots() {
        let m = mem();
        let other = mem();
        let old = m.snapshot();
        let new = m.snapshot();
        assert!(matches!(m.restore(&old), Err(MemoryError::Snapshot(_))));
        assert!(matches!(other.restore(&new), Err(MemoryError::Snapshot(_))));
        m.write_u32(GuestAddress(0x1000), 5).unwrap();
        assert_eq!(m.restore(&new).unwrap(), 1);
        assert_eq!(m.read_u32(GuestAddress(0x1000)).unwrap(), 0);
        // A clone of the handle is the same RAM.
        assert_eq!(m.clone().restore(&new).unwrap(), 0);
    }

    #[test]
    fn read_write_round_trip_and_bounds() {
        let m = mem();
        m.write(GuestAddress(0x1000), b"hello").unwrap();
        let mut b = [0u8; 5];
        m.read(GuestAddress(0x1000), &mut b).unwrap();
        assert_eq!(&b, b"hello");
        m.write_u64(GuestAddress(0x2003), 0x0102_0304_0506_0708)
            .unwrap();
        assert_eq!(
            m.read_u64(GuestAddress(0x2003)).unwrap(),
            0x0102_0304_0506_0708
        );
        assert_eq!(m.read_u32(GuestAddress(0x2003)).unwrap(), 0x0506_0708);
        let end = m.size();
        assert_eq!(
            m.write(GuestAddress(end - 4), &[0u8; 8]),
            Err(MemoryError::OutOfRange {
                addr: end - 4,
                len: 8
            })
        );
        assert!(m.read(GuestAddress(u64::MAX), &mut [0u8; 2]).is_err());
        // Zero-length accesses at the end are fine, past it are not.
        assert!(m.read(GuestAddress(end), &mut []).is_ok());
        assert!(m.write(GuestAddress(end + 1), &[]).is_err());
    }

    #[test]
    fn small_and_unaligned_accesses_up_to_the_end() {
        let m = mem();
        let end = m.size();
        for n in 0..=20usize {
            for at in [0x1000 + n as u64, end - n as u64] {
                let data: Vec<u8> = (0..n).map(|i| (i as u8) ^ 0xc3).collect();
                m.write(GuestAddress(at), &data).unwrap();
                let mut back = vec![0u8; n];
                m.read(GuestAddress(at), &mut back).unwrap();
                assert_eq!(back, data, "len {n} at {at:#x}");
            }
            if n > 0 {
                // One byte past the end is refused and nothing is written.
                let at = end - n as u64 + 1;
                let before = m.read_u64(GuestAddress(end - 8)).unwrap();
                assert_eq!(
                    m.write(GuestAddress(at), &vec![0xEE; n]),
                    Err(MemoryError::OutOfRange {
                        addr: at,
                        len: n as u64
                    })
                );
                assert_eq!(m.read_u64(GuestAddress(end - 8)).unwrap(), before);
                assert!(m.read(GuestAddress(at), &mut vec![0; n]).is_err());
            }
        }
        assert!(m.load_u32_acquire(GuestAddress(end - 4)).is_ok());
        assert!(m.load_u32_acquire(GuestAddress(end)).is_err());
        assert!(m.store_u64_release(GuestAddress(end - 8), 1).is_ok());
    }

    #[test]
    fn atomics_need_alignment() {
        let m = mem();
        m.store_u64_release(GuestAddress(0x3000), 7).unwrap();
        assert_eq!(m.load_u64_acquire(GuestAddress(0x3000)).unwrap(), 7);
        assert_eq!(
            m.load_u64_acquire(GuestAddress(0x3004)),
            Err(MemoryError::Misaligned {
                addr: 0x3004,
                align: 8
            })
        );
        m.store_u32_release(GuestAddress(0x300c), 9).unwrap();
        assert_eq!(m.load_u32_acquire(GuestAddress(0x300c)).unwrap(), 9);
        let old = m
            .with_atomic_u64(GuestAddress(0x3000), |a| a.fetch_add(5, Ordering::AcqRel))
            .unwrap();
        assert_eq!(old, 7);
        assert_eq!(m.read_u32(GuestAddress(0x3000)).unwrap(), 12);
        assert!(m.load_u64_acquire(GuestAddress(m.size())).is_err());
    }

    /// The hand-over the rings rely on: one thread fills a buffer with plain copies (both
    /// the volatile small path and the `memcpy` path) and publishes it with a release store;
    /// another waits for it with acquire loads and reads the bytes. Under Miri this checks
    /// the raw accesses for data races and undefined behaviour (docs/testing.md).
    #[test]
    fn release_acquire_hands_a_buffer_between_threads() {
        let m = HostMemory::new(64 * 1024).unwrap();
        let flag = GuestAddress(0x1000);
        let small = GuestAddress(0x2000);
        let big = GuestAddress(0x3000);
        let writer = {
            let m = m.clone();
            std::thread::spawn(move || {
                m.write(small, &[1, 2, 3, 4, 5]).unwrap();
                m.write(big, &[0x5A; 100]).unwrap();
                m.store_u64_release(flag, 7).unwrap();
                m.store_u32_release(GuestAddress(0x1008), 9).unwrap();
            })
        };
        while m.load_u32_acquire(GuestAddress(0x1008)).unwrap() != 9 {
            std::thread::yield_now();
        }
        assert_eq!(m.load_u64_acquire(flag).unwrap(), 7);
        let mut s = [0u8; 5];
        m.read(small, &mut s).unwrap();
        assert_eq!(s, [1, 2, 3, 4, 5]);
        let mut b = [0u8; 100];
        m.read(big, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0x5A));
        writer.join().unwrap();
    }

    #[test]
    fn zero_fill_clears_written_bytes_among_zero_chunks() {
        let m = mem();
        // One byte set in the middle of the third chunk of a 5-chunk range, one in the last.
        m.write(GuestAddress(0x3000 + 2 * 4096 + 100), &[7])
            .unwrap();
        m.write(GuestAddress(0x3000 + 5 * 4096 - 1), &[9]).unwrap();
        m.fill(GuestAddress(0x3000), 5 * 4096, 0).unwrap();
        let mut b = vec![1u8; 5 * 4096];
        m.read(GuestAddress(0x3000), &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0));
    }

    #[test]
    fn fill_and_copy_within() {
        let m = mem();
        m.fill(GuestAddress(0x1000), 10_000, 0xab).unwrap();
        let mut b = vec![0u8; 10_002];
        m.read(GuestAddress(0xfff), &mut b).unwrap();
        assert_eq!(b[0], 0);
        assert!(b[1..10_001].iter().all(|&x| x == 0xab));
        assert_eq!(b[10_001], 0);
        // Overlapping move forward.
        m.write(
            GuestAddress(0x8000),
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
        )
        .unwrap();
        m.copy_within(GuestAddress(0x8000), GuestAddress(0x8002), 10)
            .unwrap();
        let mut c = [0u8; 12];
        m.read(GuestAddress(0x8000), &mut c).unwrap();
        assert_eq!(c, [1, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert!(
            m.copy_within(GuestAddress(0), GuestAddress(m.size() - 4), 8)
                .is_err()
        );
        assert!(m.fill(GuestAddress(m.size() - 1), 2, 0).is_err());
        // Zero-length operations at the very end are valid no-ops.
        m.fill(GuestAddress(m.size()), 0, 1).unwrap();
        m.copy_within(GuestAddress(m.size()), GuestAddress(0), 0)
            .unwrap();
        assert!(m.fill(GuestAddress(m.size() + 1), 0, 1).is_err());
    }

    #[test]
    fn bad_sizes_are_rejected() {
        assert!(HostMemory::new(0).is_err());
        assert!(HostMemory::new(4097).is_err());
        assert!(HostMemory::new(PAGE_SIZE).is_err());
    }

    #[test]
    fn large_memory_is_lazy() {
        let m = HostMemory::new(1 << 30).unwrap();
        m.write_u64(GuestAddress((1 << 30) - 8), 42).unwrap();
        assert_eq!(m.read_u64(GuestAddress((1 << 30) - 8)).unwrap(), 42);
        assert_eq!(m.clone().size(), 1 << 30);
        assert!(m.same_as(&m.clone()));
    }

    #[test]
    fn allocator_first_fit_alignment_and_coalescing() {
        let mut a = PageAllocator::new(0x1000, 0x10_000).unwrap();
        let r1 = a.alloc(1, 1).unwrap();
        assert_eq!(r1, GuestRange::new(GuestAddress(0x1000), 0x1000));
        let r2 = a.alloc(0x2000, 0x4000).unwrap();
        assert_eq!(r2.start, GuestAddress(0x4000));
        assert_eq!(r2.len, 0x2000);
        // The gap [0x2000, 0x4000) is used by first fit.
        let r3 = a.alloc(0x2000, 0x1000).unwrap();
        assert_eq!(r3.start, GuestAddress(0x2000));
        assert_eq!(a.alloc(0, 1), Err(AllocError::ZeroLength));
        assert_eq!(
            a.alloc(0x1000, 3),
            Err(AllocError::BadAlignment { align: 3 })
        );
        assert!(matches!(
            a.alloc(0x100_000, 1),
            Err(AllocError::Exhausted { .. })
        ));
        // Double free and wrong length are rejected.
        assert!(a.free(GuestRange::new(r1.start, 0x2000)).is_err());
        a.free(r1).unwrap();
        assert!(a.free(r1).is_err());
        a.free(r2).unwrap();
        a.free(r3).unwrap();
        assert_eq!(a.free_ranges(), 1);
        assert_eq!(a.free_bytes(), 0x10_000);
        assert_eq!(a.allocations(), 0);
    }

    #[test]
    fn host_alloc_skips_page_zero() {
        let m = mem();
        let r = m.alloc(100, 8).unwrap();
        assert_eq!(r.start, GuestAddress(PAGE_SIZE));
        assert_eq!(m.free_bytes(), m.size() - 2 * PAGE_SIZE);
        m.free(r).unwrap();
        assert_eq!(m.free_bytes(), m.size() - PAGE_SIZE);
    }
}
