//! The process's own memory as host memory: for a node hosted in a rank process, the NIC
//! reaches the process's virtual addresses directly, as a real NIC reaches the pages a
//! process registered with its driver (architecture seam 2, second backend).
//!
//! A real driver pins the pages of a registration (`get_user_pages`), so they stay the
//! process's until the registration ends, whatever the process does with its mappings. An
//! emulator inside the process cannot pin: it reaches the memory by its virtual address, and a
//! virtual address can stop being mapped, or be mapped again to other memory, at any time. So
//! this module keeps three promises:
//!
//! 1. **Only what was registered.** [`ProcessMemory::pin`] records a range (after checking
//!    that it is mapped and readable, as pinning does: [`ProcError::Unmapped`] is the
//!    driver's `EFAULT`); every access checks that its bytes lie in live pins of this
//!    [`ProcessMemory`] with the access they need ([`ProcError::NotPinned`],
//!    [`ProcError::Permission`]).
//! 2. **No SIGSEGV.** Memory that went away under a live pin (a mapping removed behind the
//!    monitor's back) fails the access with [`ProcError::Fault`]: on x86-64 the bytes move
//!    with a `rep movsb` whose page fault a signal handler turns into an error return (the
//!    kernel's `copy_from_user` does the same with its exception table); elsewhere, or on
//!    request (`NICEMU_PROCMEM_ACCESS=syscall`), with `process_vm_readv`/`process_vm_writev`
//!    on this process, which return `EFAULT`.
//! 3. **No stray write.** A pin is invalidated *before* its memory goes away: the memory
//!    monitor ([`monitor`]) intercepts `munmap`, `mremap`, `madvise(DONTNEED/FREE/REMOVE)`,
//!    `mmap(MAP_FIXED)`, `mprotect`, `brk` and `shmdt` in the C library (glibc's own `free`
//!    of a large chunk calls `munmap` through the same code), invalidates every pin the call
//!    touches, waiting for accesses in flight, and only then makes the system call. A range
//!    unmapped and mapped again therefore never receives a write through its old pin.
//!
//! Ordering and atomics: [`ProcessMemory::store_u64_release`] stores its word after every
//! earlier store (events: the valid word last). [`ProcessMemory::with_atomic_u64`] runs the
//! device's read-modify-write on a copy of the word under one lock: atomic with respect to
//! every other device atomic on process memory, not with respect to the CPU's own atomics
//! (a real NIC's AMOs are not coherent with the host's either).
//!
//! The pins of every [`ProcessMemory`] of the process live in one table behind a read/write
//! lock: accesses read it, pins and invalidations write it. The monitor may run in any
//! thread at any `free`, including one that already holds the table while it allocates; such a
//! nested invalidation is recorded and applied before the holder lets go (see `Table`).
//!
//! The unsafe code is in two submodules: `raw` (the accesses, the fault handler, the probe)
//! and `hooks` (the monitor's interception of the C library).

pub mod bench;
mod hooks;
mod raw;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use thiserror::Error;

pub use hooks::Monitor;
pub use raw::AccessMode;

/// The page size of process memory as pins count it.
pub const PAGE: u64 = 4096;

/// Why a pin or an access to process memory failed. Nothing was written when this is
/// returned, except for [`ProcError::Fault`] (the bytes before the fault moved).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProcError {
    /// Pinning found a byte of the range not mapped (or not readable) in the process: what
    /// the driver's pinning reports as `EFAULT`.
    #[error("[{addr:#x}, +{len:#x}) is not mapped in this process")]
    Unmapped { addr: u64, len: u64 },
    /// The byte at `addr` is not in a live pin: never registered, unregistered, or
    /// invalidated because its memory went away.
    #[error("process memory at {addr:#x} is not registered")]
    NotPinned { addr: u64 },
    /// The pin holding `addr` does not grant the access.
    #[error("process memory at {addr:#x}: access not granted by its registration")]
    Permission { addr: u64 },
    /// The memory of a live pin went away under the access (the page faulted).
    #[error("process memory [{addr:#x}, +{len:#x}) faulted")]
    Fault { addr: u64, len: u64 },
    /// An atomic access that is not naturally aligned.
    #[error("atomic access to process memory at {addr:#x} is not aligned to {align} bytes")]
    Misaligned { addr: u64, align: u64 },
    /// A zero-length or overflowing pin.
    #[error("bad range [{addr:#x}, +{len:#x}) for a registration")]
    BadRange { addr: u64, len: u64 },
}

/// The accesses a pin grants.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PinAccess {
    /// The device may read.
    pub read: bool,
    /// The device may write.
    pub write: bool,
}

impl PinAccess {
    /// Read only.
    pub const READ: PinAccess = PinAccess {
        read: true,
        write: false,
    };
    /// Write only.
    pub const WRITE: PinAccess = PinAccess {
        read: false,
        write: true,
    };
    /// Read and write.
    pub const RW: PinAccess = PinAccess {
        read: true,
        write: true,
    };
    /// No access (only that the bytes are pinned).
    pub const NONE: PinAccess = PinAccess {
        read: false,
        write: false,
    };

    fn allows(self, need: PinAccess) -> bool {
        (self.read || !need.read) && (self.write || !need.write)
    }
}

/// One live pin in the table.
struct PinState {
    id: u64,
    owner: u64,
    addr: u64,
    len: u64,
    access: PinAccess,
    /// Cleared when the memory went away ([`monitor`]); never set again.
    valid: AtomicBool,
}

impl PinState {
    fn end(&self) -> u64 {
        self.addr + self.len
    }
}

/// What a monitored call does to the pins it touches.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The memory goes away (or its contents do): every pin touching it is invalidated.
    Gone,
    /// The range is protected to `read`/`write`: pins needing more are invalidated.
    Protect { read: bool, write: bool },
}

/// Every pin of the process: (start, id) -> pin. `max_len` bounds how far before an address
/// a pin containing it can start.
struct Table {
    pins: BTreeMap<(u64, u64), Arc<PinState>>,
    max_len: u64,
    next_id: u64,
}

static TABLE: RwLock<Table> = RwLock::new(Table {
    pins: BTreeMap::new(),
    max_len: 0,
    next_id: 1,
});

/// Invalidations the monitor saw while this thread held the table for writing (an
/// allocation inside the table's own update called `munmap` or `madvise`): applied before the
/// thread lets go of the table. More than fit means "everything".
#[derive(Copy, Clone)]
struct Deferred {
    n: usize,
    overflow: bool,
    items: [(u64, u64, Change); 8],
}

impl Deferred {
    const EMPTY: Deferred = Deferred {
        n: 0,
        overflow: false,
        items: [(0, 0, Change::Gone); 8],
    };
}

thread_local! {
    static HOLDING: Cell<bool> = const { Cell::new(false) };
    static DEFERRED: RefCell<Deferred> = const { RefCell::new(Deferred::EMPTY) };
}

fn read_table() -> RwLockReadGuard<'static, Table> {
    TABLE.read().unwrap_or_else(|p| p.into_inner())
}

/// Run `f` with the table held for writing; nested invalidations (see [`Deferred`]) are
/// applied before the lock is released. `f` may allocate and free.
fn write_table<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    HOLDING.with(|h| h.set(true));
    let mut t = TABLE.write().unwrap_or_else(|p| p.into_inner());
    let r = f(&mut t);
    apply_deferred(&mut t);
    drop(t);
    HOLDING.with(|h| h.set(false));
    r
}

fn apply_deferred(t: &mut RwLockWriteGuard<'static, Table>) {
    let d = DEFERRED.with(|d| std::mem::replace(&mut *d.borrow_mut(), Deferred::EMPTY));
    if d.overflow {
        t.invalidate(0, u64::MAX, Change::Gone);
    }
    for &(a, l, c) in &d.items[..d.n] {
        t.invalidate(a, l, c);
    }
}

/// The monitor's entry: `[addr, addr + len)` is about to change as `change` says. Waits for
/// accesses in flight, invalidates the pins it touches; allocates nothing.
pub(crate) fn notify(addr: u64, len: u64, change: Change) {
    if len == 0 {
        return;
    }
    if HOLDING.with(|h| h.get()) {
        DEFERRED.with(|d| {
            let mut d = d.borrow_mut();
            if d.n < d.items.len() {
                let n = d.n;
                d.items[n] = (addr, len, change);
                d.n += 1;
            } else {
                d.overflow = true;
            }
        });
        return;
    }
    write_table(|t| t.invalidate(addr, len, change));
}

impl Table {
    /// Pins that may overlap `[addr, end)`, in start order.
    fn around(&self, addr: u64, end: u64) -> impl Iterator<Item = &Arc<PinState>> {
        let from = addr.saturating_sub(self.max_len);
        self.pins
            .range((from, 0)..(end, 0))
            .map(|(_, p)| p)
            .filter(move |p| p.end() > addr)
    }

    fn invalidate(&mut self, addr: u64, len: u64, change: Change) {
        let end = addr.saturating_add(len);
        for p in self.around(addr, end) {
            let gone = match change {
                Change::Gone => true,
                Change::Protect { read, write } => {
                    (p.access.read && !read) || (p.access.write && !write)
                }
            };
            if gone && p.valid.swap(false, Ordering::AcqRel) {
                STATS.invalidated.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Check that every byte of `[addr, addr + len)` lies in valid pins of `owner` granting
    /// `need`.
    fn covers(&self, owner: u64, addr: u64, len: u64, need: PinAccess) -> Result<(), ProcError> {
        let end = addr.checked_add(len).ok_or(ProcError::NotPinned { addr })?;
        let mut cur = addr;
        loop {
            let mut best: Option<u64> = None;
            let mut denied = false;
            for p in self.around(cur, cur.saturating_add(1)) {
                if p.owner != owner || p.addr > cur || !p.valid.load(Ordering::Acquire) {
                    continue;
                }
                if !p.access.allows(need) {
                    denied = true;
                    continue;
                }
                best = Some(best.map_or(p.end(), |b| b.max(p.end())));
            }
            match best {
                Some(e) if e >= end => return Ok(()),
                Some(e) => cur = e,
                None if denied => return Err(ProcError::Permission { addr: cur }),
                None => return Err(ProcError::NotPinned { addr: cur }),
            }
        }
    }
}

/// Process-wide counters of process memory.
struct Stats {
    pins: AtomicU64,
    invalidated: AtomicU64,
    faults: AtomicU64,
}

static STATS: Stats = Stats {
    pins: AtomicU64::new(0),
    invalidated: AtomicU64::new(0),
    faults: AtomicU64::new(0),
};

/// Counters of the process's process memory (all [`ProcessMemory`] handles).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStats {
    /// Pins made.
    pub pins: u64,
    /// Pins invalidated because their memory went away.
    pub invalidated: u64,
    /// Accesses that faulted (memory gone under a live pin).
    pub faults: u64,
}

/// Counters since the process started.
pub fn stats() -> ProcStats {
    ProcStats {
        pins: STATS.pins.load(Ordering::Relaxed),
        invalidated: STATS.invalidated.load(Ordering::Relaxed),
        faults: STATS.faults.load(Ordering::Relaxed),
    }
}

/// Which monitor keeps pins honest in this process (installed by the first
/// [`ProcessMemory::new`]).
pub fn monitor() -> Monitor {
    hooks::current()
}

/// How accesses move bytes in this process.
pub fn access_mode() -> AccessMode {
    raw::mode()
}

struct Shared {
    owner: u64,
    /// Device atomics on process memory, one at a time.
    amo: Mutex<()>,
}

/// This process's memory as one node's NIC reaches it: the ranges its driver pinned. Cheap to
/// clone; every clone is the same owner of pins.
#[derive(Clone)]
pub struct ProcessMemory {
    shared: Arc<Shared>,
}

impl fmt::Debug for ProcessMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessMemory")
            .field("owner", &self.shared.owner)
            .field("monitor", &monitor())
            .field("access", &access_mode())
            .finish()
    }
}

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// The one-time set-up of the process (fault handler, monitor).
fn setup() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let syscall = std::env::var("NICEMU_PROCMEM_ACCESS").is_ok_and(|v| v == "syscall");
        raw::init(syscall);
        let off = std::env::var("NICEMU_PROCMEM_MONITOR").is_ok_and(|v| v == "none");
        if !off {
            hooks::install();
        }
    });
}

impl ProcessMemory {
    /// A new owner of pins in this process. The first one installs the fault handler and the
    /// memory monitor (see the module doc; `NICEMU_PROCMEM_MONITOR=none` leaves the C library
    /// alone, for measurements).
    pub fn new() -> Self {
        setup();
        ProcessMemory {
            shared: Arc::new(Shared {
                owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
                amo: Mutex::new(()),
            }),
        }
    }

    /// Whether two handles are the same owner.
    pub fn same_as(&self, other: &ProcessMemory) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Pin `[addr, addr + len)` (whole pages around it) for `access`, as a driver pins the
    /// pages of a registration: the range must be mapped and readable now
    /// ([`ProcError::Unmapped`]). The pin lasts until the returned [`Pin`] is dropped or its
    /// memory goes away ([`Pin::is_valid`]).
    pub fn pin(&self, addr: u64, len: u64, access: PinAccess) -> Result<Pin, ProcError> {
        let bad = ProcError::BadRange { addr, len };
        let end = addr.checked_add(len).ok_or(bad.clone())?;
        if len == 0 {
            return Err(bad);
        }
        let start = addr & !(PAGE - 1);
        let end = end.checked_next_multiple_of(PAGE).ok_or(bad)?;
        let len = end - start;
        // Into the table first, then probe: memory that goes away after the probe
        // invalidates the pin; memory gone before it fails the probe.
        let state = write_table(|t| {
            let id = t.next_id;
            t.next_id += 1;
            let p = Arc::new(PinState {
                id,
                owner: self.shared.owner,
                addr: start,
                len,
                access,
                valid: AtomicBool::new(true),
            });
            t.pins.insert((start, id), Arc::clone(&p));
            t.max_len = t.max_len.max(len);
            p
        });
        let pin = Pin { state };
        raw::probe(start, len).map_err(|at| ProcError::Unmapped {
            addr: at,
            len: end - at,
        })?;
        STATS.pins.fetch_add(1, Ordering::Relaxed);
        Ok(pin)
    }

    /// Check that every byte of `[addr, addr + len)` is pinned for `need`, without an access.
    pub fn check(&self, addr: u64, len: u64, need: PinAccess) -> Result<(), ProcError> {
        if len == 0 {
            return Ok(());
        }
        read_table().covers(self.shared.owner, addr, len, need)
    }

    fn fault(&self, addr: u64, len: u64) -> ProcError {
        STATS.faults.fetch_add(1, Ordering::Relaxed);
        ProcError::Fault { addr, len }
    }

    /// Device read of `buf.len()` bytes at `addr`.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ProcError> {
        if buf.is_empty() {
            return Ok(());
        }
        let t = read_table();
        t.covers(self.shared.owner, addr, buf.len() as u64, PinAccess::READ)?;
        let ok = raw::read(addr, buf);
        drop(t);
        ok.map_err(|()| self.fault(addr, buf.len() as u64))
    }

    /// Device write of `buf` at `addr`.
    pub fn write(&self, addr: u64, buf: &[u8]) -> Result<(), ProcError> {
        if buf.is_empty() {
            return Ok(());
        }
        let t = read_table();
        t.covers(self.shared.owner, addr, buf.len() as u64, PinAccess::WRITE)?;
        let ok = raw::write(addr, buf);
        drop(t);
        ok.map_err(|()| self.fault(addr, buf.len() as u64))
    }

    /// Set `len` bytes at `addr` to `byte`.
    pub fn fill(&self, addr: u64, len: u64, byte: u8) -> Result<(), ProcError> {
        if len == 0 {
            return Ok(());
        }
        let t = read_table();
        t.covers(self.shared.owner, addr, len, PinAccess::WRITE)?;
        let ok = raw::fill(addr, len, byte);
        drop(t);
        ok.map_err(|()| self.fault(addr, len))
    }

    /// Atomic 8-byte load with acquire ordering (`addr` 8-aligned).
    pub fn load_u64_acquire(&self, addr: u64) -> Result<u64, ProcError> {
        aligned(addr, 8)?;
        let t = read_table();
        t.covers(self.shared.owner, addr, 8, PinAccess::READ)?;
        let v = raw::load_u64(addr);
        drop(t);
        v.map_err(|()| self.fault(addr, 8))
    }

    /// Atomic 8-byte store with release ordering (`addr` 8-aligned): every store made before
    /// it, through this module or not, is visible before the word is.
    pub fn store_u64_release(&self, addr: u64, v: u64) -> Result<(), ProcError> {
        aligned(addr, 8)?;
        let t = read_table();
        t.covers(self.shared.owner, addr, 8, PinAccess::WRITE)?;
        let ok = raw::store_u64_release(addr, v);
        drop(t);
        ok.map_err(|()| self.fault(addr, 8))
    }

    /// Atomic 4-byte load with acquire ordering (`addr` 4-aligned).
    pub fn load_u32_acquire(&self, addr: u64) -> Result<u32, ProcError> {
        aligned(addr, 4)?;
        let t = read_table();
        t.covers(self.shared.owner, addr, 4, PinAccess::READ)?;
        let v = raw::load_u32(addr);
        drop(t);
        v.map_err(|()| self.fault(addr, 4))
    }

    /// Atomic 4-byte store with release ordering (`addr` 4-aligned).
    pub fn store_u32_release(&self, addr: u64, v: u32) -> Result<(), ProcError> {
        aligned(addr, 4)?;
        let t = read_table();
        t.covers(self.shared.owner, addr, 4, PinAccess::WRITE)?;
        let ok = raw::store_u32_release(addr, v);
        drop(t);
        ok.map_err(|()| self.fault(addr, 4))
    }

    /// Run the device atomic `f` on the 8-byte word at `addr` (8-aligned), under the lock of
    /// device atomics: the word is read, `f` runs on a copy, and the copy is stored back if
    /// `f` changed it (module doc: atomic with respect to other device atomics only). `f`
    /// must not allocate.
    pub fn with_atomic_u64<R>(
        &self,
        addr: u64,
        f: impl FnOnce(&AtomicU64) -> R,
    ) -> Result<R, ProcError> {
        aligned(addr, 8)?;
        let _amo = self.shared.amo.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.load_u64_acquire(addr)?;
        let word = AtomicU64::new(old);
        let r = f(&word);
        let new = word.into_inner();
        if new != old {
            self.store_u64_release(addr, new)?;
        }
        Ok(r)
    }

    /// [`ProcessMemory::with_atomic_u64`] for a 4-byte word (4-aligned).
    pub fn with_atomic_u32<R>(
        &self,
        addr: u64,
        f: impl FnOnce(&AtomicU32) -> R,
    ) -> Result<R, ProcError> {
        aligned(addr, 4)?;
        let _amo = self.shared.amo.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.load_u32_acquire(addr)?;
        let word = AtomicU32::new(old);
        let r = f(&word);
        let new = word.into_inner();
        if new != old {
            self.store_u32_release(addr, new)?;
        }
        Ok(r)
    }
}

impl Default for ProcessMemory {
    fn default() -> Self {
        Self::new()
    }
}

fn aligned(addr: u64, align: u64) -> Result<(), ProcError> {
    if addr.is_multiple_of(align) {
        Ok(())
    } else {
        Err(ProcError::Misaligned { addr, align })
    }
}

/// A pinned range of process memory (whole pages). Unpinned when dropped.
pub struct Pin {
    state: Arc<PinState>,
}

impl fmt::Debug for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pin")
            .field("addr", &format_args!("{:#x}", self.state.addr))
            .field("len", &format_args!("{:#x}", self.state.len))
            .field("access", &self.state.access)
            .field("valid", &self.is_valid())
            .finish()
    }
}

impl Pin {
    /// First byte (page aligned).
    pub fn addr(&self) -> u64 {
        self.state.addr
    }
    /// Length (whole pages).
    pub fn len(&self) -> u64 {
        self.state.len
    }
    /// Never true: a pin holds at least one page.
    pub fn is_empty(&self) -> bool {
        self.state.len == 0
    }
    /// The accesses it grants.
    pub fn access(&self) -> PinAccess {
        self.state.access
    }
    /// Whether its memory is still the memory that was pinned (false once the monitor saw it
    /// unmapped, remapped, discarded or protected against the access).
    pub fn is_valid(&self) -> bool {
        self.state.valid.load(Ordering::Acquire)
    }
    /// Whether `[addr, addr + len)` lies inside the pin.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.state.addr && addr.checked_add(len).is_some_and(|e| e <= self.state.end())
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        let key = (self.state.addr, self.state.id);
        let removed = write_table(|t| {
            let removed = t.pins.remove(&key);
            if removed.as_ref().is_some_and(|p| p.len >= t.max_len) {
                t.max_len = t.pins.values().map(|p| p.len).max().unwrap_or(0);
            }
            removed
        });
        // Freed here, outside the table.
        drop(removed);
    }
}

#[cfg(test)]
mod tests;
