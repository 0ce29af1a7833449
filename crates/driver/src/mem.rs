//! Memory that the CPU side (the driver and user processes) and a device share.
//!
//! The driver never touches an emulator type here: it sees host memory through the
//! [`HostMem`] trait. The emulated backend implements it over the emulated node's RAM
//! ([`EmulatedHostMemory`]); a vfio backend would implement it over pinned process memory.
//!
//! On top of it:
//! - [`PageBlock`]: page-granular memory owned by the driver (command rings, ATU page tables,
//!   user buffers). Freed when the last reference goes, so a mapping or a memory registration
//!   that still holds it keeps it alive, as a pinned page outlives `munmap` on Linux.
//! - [`UserSpace`] / [`UserMemory`]: a process's address space and the buffers in it. A
//!   buffer's address ([`UserMemory::va`]) is what the user library hands to the driver as a
//!   "virtual address" (ATU_MAP, EQ buffers, CT write-back). On the emulated backend the
//!   buffers the driver allocates for a process are in the node's RAM, so their virtual
//!   address is the RAM address. For a node hosted in this process the RAM sits at its own
//!   virtual addresses and the rest of the process's memory can be registered too
//!   ([`HostMem::pin`]): then a virtual address is simply the process's.
//! - [`MemWindow`]: a mapped view (a command ring mapped with `mmap`), revoked when the object
//!   behind it is freed.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use emu_core::memory::{GuestAddress, GuestRange, HostMemory};
pub use emu_core::procmem::{Pin as ProcessPin, PinAccess};
use thiserror::Error;

/// The page size of host memory and of every mapping the driver makes.
pub const PAGE_SIZE: u64 = 4096;

/// Why a memory access or allocation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MemError {
    /// Some byte of the range is outside the memory (or the range overflows).
    #[error("memory access [{addr:#x}, +{len:#x}) is out of range")]
    OutOfRange {
        /// First address.
        addr: u64,
        /// Length.
        len: u64,
    },
    /// An atomic access at an address that is not naturally aligned.
    #[error("atomic access at {addr:#x} is not aligned to {align} bytes")]
    Misaligned {
        /// The address.
        addr: u64,
        /// Required alignment.
        align: u64,
    },
    /// No free memory of that size.
    #[error("out of memory allocating {len:#x} bytes")]
    Exhausted {
        /// Requested length.
        len: u64,
    },
    /// A zero-length allocation.
    #[error("allocation of zero bytes")]
    ZeroLength,
    /// Free of a range that is not exactly one live allocation.
    #[error("free of [{addr:#x}, +{len:#x}) which is not a live allocation")]
    NotAllocated {
        /// First address.
        addr: u64,
        /// Length.
        len: u64,
    },
    /// The mapping was revoked (the object behind it was freed, or its client closed).
    #[error("the mapping was revoked")]
    Revoked,
    /// Process memory (a node hosted in this process) that is not mapped, not registered,
    /// or went away under the access.
    #[error("process memory [{addr:#x}, +{len:#x}) is not reachable")]
    Fault {
        /// First address.
        addr: u64,
        /// Length.
        len: u64,
    },
}

/// Host memory as the driver sees it: allocate pages, copy bytes, and atomically access
/// words that the CPU and the device hand over to each other.
pub trait HostMem: Send + Sync + fmt::Debug {
    /// Size of the address space in bytes.
    fn size(&self) -> u64;
    /// Allocate `len` bytes (rounded up to pages), aligned to `align` (a power of two, at least
    /// a page). Returns the address.
    fn alloc(&self, len: u64, align: u64) -> Result<u64, MemError>;
    /// Free an allocation made by [`HostMem::alloc`] (`len` as returned: whole pages).
    fn free(&self, addr: u64, len: u64) -> Result<(), MemError>;
    /// Bytes the page allocator still has free.
    fn free_bytes(&self) -> u64;
    /// Copy `buf.len()` bytes from `addr`.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemError>;
    /// Copy `buf` to `addr`.
    fn write(&self, addr: u64, buf: &[u8]) -> Result<(), MemError>;
    /// Set `len` bytes at `addr` to `byte`.
    fn fill(&self, addr: u64, len: u64, byte: u8) -> Result<(), MemError>;
    /// Atomic 8-byte load (`addr` 8-aligned).
    fn load_u64(&self, addr: u64, order: Ordering) -> Result<u64, MemError>;
    /// Atomic 8-byte store (`addr` 8-aligned).
    fn store_u64(&self, addr: u64, value: u64, order: Ordering) -> Result<(), MemError>;
    /// Atomic 8-byte fetch-and-add; returns the old value.
    fn fetch_add_u64(&self, addr: u64, value: u64) -> Result<u64, MemError>;
    /// Atomic 8-byte compare-and-swap; `Ok(old)` when swapped, `Err(actual)` when not.
    fn compare_exchange_u64(
        &self,
        addr: u64,
        current: u64,
        new: u64,
    ) -> Result<Result<u64, u64>, MemError>;
    /// Atomic 4-byte load (`addr` 4-aligned).
    fn load_u32(&self, addr: u64, order: Ordering) -> Result<u32, MemError>;
    /// Atomic 4-byte store (`addr` 4-aligned).
    fn store_u32(&self, addr: u64, value: u32, order: Ordering) -> Result<(), MemError>;
    /// The address the device uses to reach `addr` (a bus address). The emulated node's
    /// device reaches its RAM through a passthrough IOMMU, so this is `addr` itself.
    fn bus_address(&self, addr: u64) -> u64 {
        addr
    }
    /// Where `[addr, addr + len)` lives in this process, when the memory is this process's
    /// own (the emulated node's RAM is); `None` otherwise. No access is made.
    fn host_ptr(&self, _addr: u64, _len: u64) -> Option<*mut u8> {
        None
    }
    /// Pin `[addr, addr + len)` of this process's own memory (outside the RAM) for the
    /// device, as a driver pins a registration's pages (`get_user_pages`): for a node hosted
    /// in this process. [`MemError::Fault`] when the range is not mapped (the driver's
    /// `EFAULT`), or when this memory has no process memory beside it.
    fn pin(&self, addr: u64, len: u64, access: PinAccess) -> Result<ProcessPin, MemError> {
        let _ = access;
        Err(MemError::Fault { addr, len })
    }
    /// Whether process memory can be registered ([`HostMem::pin`]).
    fn process_memory(&self) -> bool {
        false
    }
    /// Pages from bus address 0 that the device's passthrough address context must cover:
    /// the RAM (`0` = unbounded, for a node hosted in a process, whose RAM and registered
    /// memory sit at the process's addresses; the platform's DMA port checks those).
    fn passthrough_pages(&self) -> u64 {
        self.size().div_ceil(PAGE_SIZE)
    }
}

fn mem_err(e: emu_core::memory::MemoryError) -> MemError {
    use emu_core::memory::MemoryError as E;
    match e {
        E::OutOfRange { addr, len } => MemError::OutOfRange { addr, len },
        E::Misaligned { addr, align } => MemError::Misaligned { addr, align },
        E::Create { size, .. } => MemError::OutOfRange { addr: 0, len: size },
        // Only `HostMemory::restore` reports it, which the driver never calls.
        E::Snapshot(_) => MemError::OutOfRange { addr: 0, len: 0 },
        E::Process(p) => proc_err(p),
    }
}

fn proc_err(e: emu_core::procmem::ProcError) -> MemError {
    use emu_core::procmem::ProcError as P;
    match e {
        P::Misaligned { addr, align } => MemError::Misaligned { addr, align },
        P::Unmapped { addr, len } | P::Fault { addr, len } | P::BadRange { addr, len } => {
            MemError::Fault { addr, len }
        }
        P::NotPinned { addr } | P::Permission { addr } => MemError::Fault { addr, len: 0 },
    }
}

/// The emulated node's RAM as driver host memory.
#[derive(Clone, Debug)]
pub struct EmulatedHostMemory {
    mem: HostMemory,
}

impl EmulatedHostMemory {
    /// Wrap a node's RAM.
    pub fn new(mem: HostMemory) -> Self {
        EmulatedHostMemory { mem }
    }

    /// The wrapped RAM.
    pub fn memory(&self) -> &HostMemory {
        &self.mem
    }
}

impl HostMem for EmulatedHostMemory {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn alloc(&self, len: u64, align: u64) -> Result<u64, MemError> {
        use emu_core::memory::AllocError as A;
        match self.mem.alloc(len, align.max(PAGE_SIZE)) {
            Ok(r) => Ok(r.start.0),
            Err(A::ZeroLength) => Err(MemError::ZeroLength),
            Err(_) => Err(MemError::Exhausted { len }),
        }
    }
    fn free(&self, addr: u64, len: u64) -> Result<(), MemError> {
        self.mem
            .free(GuestRange::new(GuestAddress(addr), len))
            .map_err(|_| MemError::NotAllocated { addr, len })
    }
    fn free_bytes(&self) -> u64 {
        self.mem.free_bytes()
    }
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.mem.read(GuestAddress(addr), buf).map_err(mem_err)
    }
    fn write(&self, addr: u64, buf: &[u8]) -> Result<(), MemError> {
        self.mem.write(GuestAddress(addr), buf).map_err(mem_err)
    }
    fn fill(&self, addr: u64, len: u64, byte: u8) -> Result<(), MemError> {
        self.mem
            .fill(GuestAddress(addr), len, byte)
            .map_err(mem_err)
    }
    fn load_u64(&self, addr: u64, order: Ordering) -> Result<u64, MemError> {
        self.mem
            .with_atomic_u64(GuestAddress(addr), |a| a.load(order))
            .map_err(mem_err)
    }
    fn store_u64(&self, addr: u64, value: u64, order: Ordering) -> Result<(), MemError> {
        self.mem
            .with_atomic_u64(GuestAddress(addr), |a| a.store(value, order))
            .map_err(mem_err)
    }
    fn fetch_add_u64(&self, addr: u64, value: u64) -> Result<u64, MemError> {
        self.mem
            .with_atomic_u64(GuestAddress(addr), |a| a.fetch_add(value, Ordering::AcqRel))
            .map_err(mem_err)
    }
    fn compare_exchange_u64(
        &self,
        addr: u64,
        current: u64,
        new: u64,
    ) -> Result<Result<u64, u64>, MemError> {
        self.mem
            .with_atomic_u64(GuestAddress(addr), |a| {
                a.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
            })
            .map_err(mem_err)
    }
    fn load_u32(&self, addr: u64, order: Ordering) -> Result<u32, MemError> {
        self.mem
            .with_atomic_u32(GuestAddress(addr), |a| a.load(order))
            .map_err(mem_err)
    }
    fn store_u32(&self, addr: u64, value: u32, order: Ordering) -> Result<(), MemError> {
        self.mem
            .with_atomic_u32(GuestAddress(addr), |a| a.store(value, order))
            .map_err(mem_err)
    }
    fn host_ptr(&self, addr: u64, len: u64) -> Option<*mut u8> {
        self.mem.host_ptr(GuestAddress(addr), len).ok()
    }
    fn pin(&self, addr: u64, len: u64, access: PinAccess) -> Result<ProcessPin, MemError> {
        let fault = MemError::Fault { addr, len };
        let p = self.mem.process().ok_or(fault.clone())?;
        // The RAM is reached as RAM (its buffers), never as process memory.
        let end = addr.checked_add(len).ok_or(fault.clone())?;
        if end > self.mem.base() && addr < self.mem.base() + self.mem.size() {
            return Err(fault);
        }
        p.pin(addr, len, access).map_err(proc_err)
    }
    fn process_memory(&self) -> bool {
        self.mem.process().is_some()
    }
    fn passthrough_pages(&self) -> u64 {
        if self.mem.process().is_some() {
            0
        } else {
            self.size().div_ceil(PAGE_SIZE)
        }
    }
}

/// Page-granular memory owned by the driver, freed when the last reference drops.
pub struct PageBlock {
    mem: Arc<dyn HostMem>,
    addr: u64,
    len: u64,
}

impl fmt::Debug for PageBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageBlock")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &format_args!("{:#x}", self.len))
            .finish()
    }
}

impl PageBlock {
    /// Allocate `len` bytes (rounded up to whole pages), zero-filled.
    pub fn alloc(mem: &Arc<dyn HostMem>, len: u64) -> Result<Arc<PageBlock>, MemError> {
        if len == 0 {
            return Err(MemError::ZeroLength);
        }
        let len = len
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(MemError::Exhausted { len })?;
        let addr = mem.alloc(len, PAGE_SIZE)?;
        let block = Arc::new(PageBlock {
            mem: Arc::clone(mem),
            addr,
            len,
        });
        mem.fill(addr, len, 0)?;
        Ok(block)
    }

    /// First address.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length in bytes (whole pages).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: a block has at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory the block lives in.
    pub fn memory(&self) -> &Arc<dyn HostMem> {
        &self.mem
    }

    /// The bus address of byte `offset` of the block.
    pub fn bus_address(&self, offset: u64) -> u64 {
        self.mem.bus_address(self.addr.saturating_add(offset))
    }

    /// The address of `[offset, offset + len)` inside the block, checked.
    fn at(&self, offset: u64, len: u64) -> Result<u64, MemError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.addr + offset),
            _ => Err(MemError::OutOfRange {
                addr: self.addr.saturating_add(offset),
                len,
            }),
        }
    }
}

impl Drop for PageBlock {
    fn drop(&mut self) {
        if let Err(e) = self.mem.free(self.addr, self.len) {
            tracing::error!(addr = self.addr, len = self.len, error = %e, "page block free failed");
        }
    }
}

/// Byte-level accessors shared by [`UserMemory`] and [`MemWindow`]: a checked window of a
/// [`PageBlock`].
macro_rules! window_accessors {
    () => {
        /// Copy `buf.len()` bytes from byte `offset`.
        pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), MemError> {
            let a = self.addr_of(offset, buf.len() as u64)?;
            self.memory().read(a, buf)
        }
        /// Copy `buf` to byte `offset`.
        pub fn write(&self, offset: u64, buf: &[u8]) -> Result<(), MemError> {
            let a = self.addr_of(offset, buf.len() as u64)?;
            self.memory().write(a, buf)
        }
        /// Set `len` bytes at `offset` to `byte`.
        pub fn fill(&self, offset: u64, len: u64, byte: u8) -> Result<(), MemError> {
            let a = self.addr_of(offset, len)?;
            self.memory().fill(a, len, byte)
        }
        /// Read a little-endian `u64` (not atomic).
        pub fn read_u64(&self, offset: u64) -> Result<u64, MemError> {
            let mut b = [0u8; 8];
            self.read(offset, &mut b)?;
            Ok(u64::from_le_bytes(b))
        }
        /// Write a little-endian `u64` (not atomic).
        pub fn write_u64(&self, offset: u64, v: u64) -> Result<(), MemError> {
            self.write(offset, &v.to_le_bytes())
        }
        /// Atomic 8-byte load with acquire ordering (`offset` 8-aligned in memory).
        pub fn load_u64_acquire(&self, offset: u64) -> Result<u64, MemError> {
            let a = self.addr_of(offset, 8)?;
            self.memory().load_u64(a, Ordering::Acquire)
        }
        /// Atomic 8-byte store with release ordering.
        pub fn store_u64_release(&self, offset: u64, v: u64) -> Result<(), MemError> {
            let a = self.addr_of(offset, 8)?;
            self.memory().store_u64(a, v, Ordering::Release)
        }
        /// Atomic 4-byte load with acquire ordering.
        pub fn load_u32_acquire(&self, offset: u64) -> Result<u32, MemError> {
            let a = self.addr_of(offset, 4)?;
            self.memory().load_u32(a, Ordering::Acquire)
        }
        /// Atomic 4-byte store with release ordering.
        pub fn store_u32_release(&self, offset: u64, v: u32) -> Result<(), MemError> {
            let a = self.addr_of(offset, 4)?;
            self.memory().store_u32(a, v, Ordering::Release)
        }
        /// Atomic 8-byte fetch-and-add; returns the old value.
        pub fn fetch_add_u64(&self, offset: u64, v: u64) -> Result<u64, MemError> {
            let a = self.addr_of(offset, 8)?;
            self.memory().fetch_add_u64(a, v)
        }
        /// Atomic 8-byte compare-and-swap: `Ok(old)` when swapped, `Err(actual)` when not.
        pub fn compare_exchange_u64(
            &self,
            offset: u64,
            current: u64,
            new: u64,
        ) -> Result<Result<u64, u64>, MemError> {
            let a = self.addr_of(offset, 8)?;
            self.memory().compare_exchange_u64(a, current, new)
        }
    };
}

/// What backs a buffer or a pinned range of a process.
#[derive(Clone, Debug)]
enum Backing {
    /// Pages of the node's RAM that the driver allocated for the process.
    Ram(Arc<PageBlock>),
    /// The process's own memory (a node hosted in this process), pinned.
    Process(Arc<ProcessRange>),
}

/// A pinned range of the process's own memory.
#[derive(Debug)]
struct ProcessRange {
    mem: Arc<dyn HostMem>,
    /// Shared by the views of one pin ([`UserMemory::view`]).
    pin: Arc<ProcessPin>,
    /// First byte (a virtual address = host address) and length, as asked for.
    addr: u64,
    len: u64,
}

impl Backing {
    fn memory(&self) -> &Arc<dyn HostMem> {
        match self {
            Backing::Ram(p) => &p.mem,
            Backing::Process(r) => &r.mem,
        }
    }
    /// Host address of the first byte.
    fn addr(&self) -> u64 {
        match self {
            Backing::Ram(p) => p.addr,
            Backing::Process(r) => r.addr,
        }
    }
    fn len(&self) -> u64 {
        match self {
            Backing::Ram(p) => p.len,
            Backing::Process(r) => r.len,
        }
    }
    /// The host address of `[offset, offset + len)`, checked.
    fn at(&self, offset: u64, len: u64) -> Result<u64, MemError> {
        match self {
            Backing::Ram(p) => p.at(offset, len),
            Backing::Process(r) => match offset.checked_add(len) {
                Some(end) if end <= r.len => Ok(r.addr + offset),
                _ => Err(MemError::OutOfRange {
                    addr: r.addr.saturating_add(offset),
                    len,
                }),
            },
        }
    }
    fn bus_address(&self, offset: u64) -> u64 {
        match self {
            Backing::Ram(p) => p.bus_address(offset),
            Backing::Process(r) => r.mem.bus_address(r.addr.saturating_add(offset)),
        }
    }
    fn is_valid(&self) -> bool {
        match self {
            Backing::Ram(_) => true,
            Backing::Process(r) => r.pin.is_valid(),
        }
    }
}

/// One buffer in a process's address space, as the process sees it.
#[derive(Debug)]
struct UserRegion {
    backing: Backing,
}

/// A buffer of user memory (what `malloc`/`mmap` gives a process): a virtual address range
/// backed by host pages the driver allocated ([`UserSpace::alloc`]), or, for a node hosted in
/// this process, by the process's own memory ([`UserSpace::attach`]). Cloning shares the
/// buffer; allocated memory is returned when the last clone drops and no memory
/// registration still pins it.
#[derive(Clone, Debug)]
pub struct UserMemory {
    region: Arc<UserRegion>,
}

impl UserMemory {
    /// The buffer's virtual address (what ATU_MAP, EQ_ALLOC and CT_ALLOC take).
    pub fn va(&self) -> u64 {
        self.region.backing.addr()
    }

    /// Length in bytes (whole pages for an allocated buffer).
    pub fn len(&self) -> u64 {
        self.region.backing.len()
    }

    /// Whether the buffer has no bytes (never: a buffer has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `[va, va + len)` lies inside the buffer.
    pub fn contains(&self, va: u64, len: u64) -> bool {
        va >= self.va()
            && va
                .checked_add(len)
                .is_some_and(|end| end <= self.va() + self.len())
    }

    /// Whether the buffer is the process's own memory rather than pages the driver
    /// allocated.
    pub fn is_process_memory(&self) -> bool {
        matches!(self.region.backing, Backing::Process(_))
    }

    /// Whether the memory is still what it was (false once process memory behind the
    /// buffer was unmapped, remapped or discarded: the pin is invalid).
    pub fn is_valid(&self) -> bool {
        self.region.backing.is_valid()
    }

    fn memory(&self) -> &Arc<dyn HostMem> {
        self.region.backing.memory()
    }

    /// Where the buffer's bytes live in this process, when its memory is this process's own
    /// ([`HostMem::host_ptr`], or process memory itself): a program may then load and store
    /// them directly, as it does with memory it registered with a real NIC. Valid while this
    /// buffer lives.
    pub fn host_ptr(&self) -> Option<*mut u8> {
        match &self.region.backing {
            Backing::Ram(p) => p.mem.host_ptr(p.addr, p.len),
            Backing::Process(r) => Some(std::ptr::with_exposed_provenance_mut(r.addr as usize)),
        }
    }

    fn addr_of(&self, offset: u64, len: u64) -> Result<u64, MemError> {
        self.region.backing.at(offset, len)
    }

    /// `[offset, offset + len)` of a buffer of the process's own memory as a buffer of its
    /// own, sharing this one's pin (no new pin: a registration cache hands out the part of a
    /// cached registration that one message uses this way). `OutOfRange` beyond the buffer;
    /// `Fault` for a buffer of allocated pages, which has no views.
    pub fn view(&self, offset: u64, len: u64) -> Result<UserMemory, MemError> {
        let Backing::Process(r) = &self.region.backing else {
            return Err(MemError::Fault {
                addr: self.va().saturating_add(offset),
                len,
            });
        };
        let addr = self.region.backing.at(offset, len)?;
        Ok(UserMemory {
            region: Arc::new(UserRegion {
                backing: Backing::Process(Arc::new(ProcessRange {
                    mem: Arc::clone(&r.mem),
                    pin: Arc::clone(&r.pin),
                    addr,
                    len,
                })),
            }),
        })
    }

    window_accessors!();
}

struct SpaceInner {
    mem: Arc<dyn HostMem>,
    regions: Mutex<BTreeMap<u64, Weak<UserRegion>>>,
}

/// A process's address space: the user buffers it allocated, by virtual address. The driver
/// resolves the virtual addresses in requests through it, as the kernel walks a process's
/// page tables; an address outside every live buffer is a fault (`EFAULT`), except, for a
/// node hosted in this process, mapped memory of the process itself, which is pinned
/// ([`HostMem::pin`]). Cloning shares the space (several device clients of one process).
#[derive(Clone)]
pub struct UserSpace {
    inner: Arc<SpaceInner>,
}

impl fmt::Debug for UserSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserSpace")
            .field("regions", &self.regions().len())
            .finish()
    }
}

/// A range of user memory resolved to its backing pages, which it keeps (allocated pages
/// outlive the buffer; process memory stays pinned until this is dropped).
#[derive(Clone, Debug)]
pub struct Pinned {
    backing: Backing,
    /// Offset of the requested virtual address inside the backing.
    offset: u64,
    /// Requested length.
    len: u64,
}

impl Pinned {
    /// The bus address of byte `delta` of the pinned range.
    pub fn bus_address(&self, delta: u64) -> u64 {
        self.backing.bus_address(self.offset.saturating_add(delta))
    }

    /// The host address of byte `delta` of the pinned range (what [`Pinned::memory`] is
    /// accessed at).
    pub fn host_address(&self, delta: u64) -> u64 {
        self.backing
            .addr()
            .saturating_add(self.offset)
            .saturating_add(delta)
    }

    /// The memory the range lives in.
    pub fn memory(&self) -> &Arc<dyn HostMem> {
        self.backing.memory()
    }

    /// Requested length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the requested length was 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the range is the process's own memory (not pages the driver allocated).
    pub fn is_process_memory(&self) -> bool {
        matches!(self.backing, Backing::Process(_))
    }

    /// Whether the memory is still what was pinned (see [`UserMemory::is_valid`]).
    pub fn is_valid(&self) -> bool {
        self.backing.is_valid()
    }
}

impl UserSpace {
    /// An empty address space over `mem`.
    pub fn new(mem: Arc<dyn HostMem>) -> Self {
        UserSpace {
            inner: Arc::new(SpaceInner {
                mem,
                regions: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    fn regions(&self) -> MutexGuard<'_, BTreeMap<u64, Weak<UserRegion>>> {
        self.inner
            .regions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The memory the space lives in.
    pub fn memory(&self) -> &Arc<dyn HostMem> {
        &self.inner.mem
    }

    /// Whether two handles are the same space.
    pub fn same_as(&self, other: &UserSpace) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Allocate a zeroed buffer of `len` bytes (rounded up to pages).
    pub fn alloc(&self, len: u64) -> Result<UserMemory, MemError> {
        let pages = PageBlock::alloc(&self.inner.mem, len)?;
        let region = Arc::new(UserRegion {
            backing: Backing::Ram(pages),
        });
        let mut regions = self.regions();
        regions.retain(|_, w| w.strong_count() > 0);
        regions.insert(region.backing.addr(), Arc::downgrade(&region));
        Ok(UserMemory { region })
    }

    /// Whether the space can reach the process's own memory ([`UserSpace::attach`]): a node
    /// hosted in this process.
    pub fn process_memory(&self) -> bool {
        self.inner.mem.process_memory()
    }

    /// The caller's own memory `[va, va + len)` as a buffer of this space, pinned (a node
    /// hosted in this process): what a program hands to `cxil_map` or `GNI_MemRegister` is
    /// then simply its own pointer. [`MemError::Fault`] if the range is not mapped, or the
    /// node is not hosted in this process.
    pub fn attach(&self, va: u64, len: u64) -> Result<UserMemory, MemError> {
        let pin = self.inner.mem.pin(va, len, PinAccess::RW)?;
        Ok(UserMemory {
            region: Arc::new(UserRegion {
                backing: Backing::Process(Arc::new(ProcessRange {
                    mem: Arc::clone(&self.inner.mem),
                    pin: Arc::new(pin),
                    addr: va,
                    len,
                })),
            }),
        })
    }

    /// Resolve `[va, va + len)` to the pages of the one live buffer containing it (`len` may
    /// be 0 for a single address), or, for a node hosted in this process, to the process's
    /// own memory, pinned. `None` when the range is not inside a live buffer (nor mapped in
    /// the process).
    pub fn resolve(&self, va: u64, len: u64) -> Option<Pinned> {
        self.resolve_for(va, len, PinAccess::RW)
    }

    /// [`UserSpace::resolve`] for a registration that the device only reads or only writes
    /// (`access`: what a pin of process memory grants).
    pub fn resolve_for(&self, va: u64, len: u64, access: PinAccess) -> Option<Pinned> {
        let end = va.checked_add(len)?;
        if let Some(p) = self.resolve_ram(va, len, end) {
            return Some(p);
        }
        if !self.inner.mem.process_memory() {
            return None;
        }
        let pin = self.inner.mem.pin(va, len.max(1), access).ok()?;
        let start = pin.addr();
        let plen = pin.len();
        Some(Pinned {
            backing: Backing::Process(Arc::new(ProcessRange {
                mem: Arc::clone(&self.inner.mem),
                pin: Arc::new(pin),
                addr: start,
                len: plen,
            })),
            offset: va - start,
            len,
        })
    }

    fn resolve_ram(&self, va: u64, len: u64, end: u64) -> Option<Pinned> {
        let regions = self.regions();
        let (_, weak) = regions.range(..=va).next_back()?;
        let region = weak.upgrade()?;
        let Backing::Ram(pages) = &region.backing else {
            return None;
        };
        if end > pages.addr + pages.len || (len == 0 && va >= pages.addr + pages.len) {
            return None;
        }
        Some(Pinned {
            backing: Backing::Ram(Arc::clone(pages)),
            offset: va - pages.addr,
            len,
        })
    }

    /// Copy `buf` to user address `va` (`copy_to_user`): `None` on a fault.
    pub fn copy_to_user(&self, va: u64, buf: &[u8]) -> Option<()> {
        let p = self.resolve_for(va, buf.len() as u64, PinAccess::WRITE)?;
        p.memory().write(p.host_address(0), buf).ok()
    }

    /// Copy from user address `va` into `buf` (`copy_from_user`): `None` on a fault.
    pub fn copy_from_user(&self, va: u64, buf: &mut [u8]) -> Option<()> {
        let p = self.resolve_for(va, buf.len() as u64, PinAccess::READ)?;
        p.memory().read(p.host_address(0), buf).ok()
    }

    /// Number of live allocated buffers.
    pub fn live_buffers(&self) -> usize {
        self.regions()
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}

/// Shared state of one mmap-able object and every mapping of it.
#[derive(Debug, Default)]
pub(crate) struct MapShared {
    revoked: AtomicBool,
}

impl MapShared {
    pub(crate) fn new() -> Arc<MapShared> {
        Arc::new(MapShared::default())
    }
    pub(crate) fn revoke(&self) {
        self.revoked.store(true, Ordering::Release);
    }
    pub(crate) fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::Acquire)
    }
}

/// A mapped view of driver-owned host memory (a command ring). It keeps its pages alive;
/// after the object behind it is freed every access fails with [`MemError::Revoked`].
#[derive(Clone, Debug)]
pub struct MemWindow {
    pages: Arc<PageBlock>,
    offset: u64,
    len: u64,
    shared: Arc<MapShared>,
}

impl MemWindow {
    pub(crate) fn new(
        pages: Arc<PageBlock>,
        offset: u64,
        len: u64,
        shared: Arc<MapShared>,
    ) -> Self {
        MemWindow {
            pages,
            offset,
            len,
            shared,
        }
    }

    /// Length of the window in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for a window of no bytes (never, in practice).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the object behind the window was freed.
    pub fn is_revoked(&self) -> bool {
        self.shared.is_revoked()
    }

    /// Where the window's bytes live in this process, when the memory is this process's own
    /// ([`HostMem::host_ptr`]): what `mmap` of a command ring hands a process hosting its
    /// NIC. Valid while this window (which keeps the pages) lives.
    pub fn host_ptr(&self) -> Option<*mut u8> {
        let p = &self.pages;
        p.mem.host_ptr(p.addr + self.offset, self.len)
    }

    fn memory(&self) -> &Arc<dyn HostMem> {
        &self.pages.mem
    }

    fn addr_of(&self, offset: u64, len: u64) -> Result<u64, MemError> {
        if self.shared.is_revoked() {
            return Err(MemError::Revoked);
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.len => self.pages.at(self.offset + offset, len),
            _ => Err(MemError::OutOfRange { addr: offset, len }),
        }
    }

    window_accessors!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem() -> Arc<dyn HostMem> {
        Arc::new(EmulatedHostMemory::new(HostMemory::new(1 << 20).unwrap()))
    }

    #[test]
    fn page_blocks_are_zeroed_and_freed_on_drop() {
        let m = mem();
        let before = m.free_bytes();
        let b = PageBlock::alloc(&m, 10).unwrap();
        assert_eq!(b.len(), PAGE_SIZE);
        assert_eq!(m.free_bytes(), before - PAGE_SIZE);
        let mut x = [1u8; 16];
        m.read(b.addr(), &mut x).unwrap();
        assert_eq!(x, [0u8; 16]);
        drop(b);
        assert_eq!(m.free_bytes(), before);
        assert_eq!(PageBlock::alloc(&m, 0).unwrap_err(), MemError::ZeroLength);
    }

    #[test]
    fn user_space_resolves_only_live_buffers() {
        let m = mem();
        let space = UserSpace::new(Arc::clone(&m));
        let a = space.alloc(3 * PAGE_SIZE).unwrap();
        let va = a.va();
        assert!(space.resolve(va, 3 * PAGE_SIZE).is_some());
        assert!(space.resolve(va + PAGE_SIZE, 10).is_some());
        assert!(space.resolve(va, 3 * PAGE_SIZE + 1).is_none());
        assert!(space.resolve(va.wrapping_sub(1), 2).is_none());
        assert!(space.resolve(u64::MAX, 2).is_none());
        a.write_u64(8, 0xdead).unwrap();
        let mut b = [0u8; 8];
        space.copy_from_user(va + 8, &mut b).unwrap();
        assert_eq!(u64::from_le_bytes(b), 0xdead);
        let pinned = space.resolve(va, 8).unwrap();
        drop(a);
        // Unmapped from the process, but the pin keeps the pages.
        assert!(space.resolve(va, 8).is_none());
        assert_eq!(space.live_buffers(), 0);
        let before = m.free_bytes();
        drop(pinned);
        assert_eq!(m.free_bytes(), before + 3 * PAGE_SIZE);
    }

    #[test]
    fn windows_are_bounded_and_revocable() {
        let m = mem();
        let pages = PageBlock::alloc(&m, 2 * PAGE_SIZE).unwrap();
        let shared = MapShared::new();
        let w = MemWindow::new(pages, PAGE_SIZE, PAGE_SIZE, Arc::clone(&shared));
        w.store_u64_release(0, 5).unwrap();
        assert_eq!(w.fetch_add_u64(0, 2).unwrap(), 5);
        assert_eq!(w.compare_exchange_u64(0, 7, 9).unwrap(), Ok(7));
        assert_eq!(w.load_u64_acquire(0).unwrap(), 9);
        assert!(w.write(PAGE_SIZE - 4, &[0u8; 8]).is_err());
        assert!(matches!(
            w.load_u64_acquire(4),
            Err(MemError::Misaligned { .. })
        ));
        shared.revoke();
        assert_eq!(w.read_u64(0), Err(MemError::Revoked));
    }
}
