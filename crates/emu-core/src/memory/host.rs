//! The RAM of one emulated node ([`HostMemory`]): bounds-checked reads and writes, atomics,
//! fills and copies, and the allocator's thread-safe front end.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use vm_memory::{Bytes, GuestAddress, MmapRegion, VolatileMemory, VolatileSlice};

use crate::procmem::ProcessMemory;

use super::alloc::{GuestRange, PAGE_SIZE, PageAllocator};
use super::error::{AllocError, MemoryError};
use super::raw;
use super::written::Written;

/// Bytes copied per step when filling memory with a byte value.
const FILL_CHUNK: usize = 4096;

pub(super) struct Inner {
    /// One anonymous private mapping; host physical address `base + a` is byte `a` of it.
    pub(super) map: MmapRegion<()>,
    pub(super) size: u64,
    /// Host address of the RAM's first byte: 0, or, for a node hosted in this process, the
    /// mapping's own address ([`HostMemory::hosted`]).
    pub(super) base: u64,
    /// The rest of the host address space of a node hosted in this process: the process's
    /// registered memory, at host address = virtual address.
    pub(super) process: Option<ProcessMemory>,
    pub(super) alloc: Mutex<PageAllocator>,
    /// Write tracking, from the first [`HostMemory::snapshot`] on.
    pub(super) written: OnceLock<Written>,
    /// Ranges handed out by [`HostMemory::host_ptr`] (written behind this handle's back).
    pub(super) exposed: Mutex<Vec<(u64, u64)>>,
}

/// The RAM of one emulated node: a cheap-to-clone handle shared by the CPU side and devices.
///
/// Addresses are host physical addresses `0..size`. The first page is never handed out by
/// [`HostMemory::alloc`], so address 0 can serve as "no buffer" in descriptors.
#[derive(Clone)]
pub struct HostMemory {
    pub(super) inner: Arc<Inner>,
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

    pub(super) fn allocator(&self) -> MutexGuard<'_, PageAllocator> {
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
}

/// Lock `m`, carrying on after a panic elsewhere poisoned it (the data guarded here stays
/// consistent between operations).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
