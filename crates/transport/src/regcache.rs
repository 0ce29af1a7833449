//! The registration cache of application buffers, for zero copy on a node hosted in the
//! process (what libfabric's MR cache, `prov/util/src/util_mr_cache.c`, is to its providers,
//! and udreg to Cray MPICH on Gemini).
//!
//! A message sent from, or received into, the application's own buffer needs that buffer
//! registered with the NIC (an MD on Cassini, an MDD on Gemini). Registering costs a pin and
//! the NIC's table updates, so registrations are kept and found again by address: an
//! application that sends from the same buffer again (every benchmark, most solvers) pays
//! once. Entries cover whole pages and are looked up by containment.
//!
//! A registration stays right only while its memory is the memory that was registered: once
//! the program unmaps, remaps or discards it, the pin under the registration is invalid
//! (`emu_core::procmem`'s monitor clears it before the memory goes away) and the entry is
//! dropped at its next lookup and registered afresh — libfabric's cache is invalidated by its
//! memory monitor the same way. At most [`Limits::count`] entries and [`Limits::bytes`]
//! registered bytes are kept (`FI_MR_CACHE_MAX_COUNT`, `FI_MR_CACHE_MAX_SIZE`, libfabric's
//! names); beyond that the least recently used go. An operation in flight holds its entry
//! (`Arc`), so an eviction never pulls a registration from under the NIC.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use driver::mem::{MemError, UserMemory, UserSpace};

use crate::env::Env;
use crate::error::{Error, Result};

/// Page size of registrations.
const PAGE: u64 = 4096;

/// How much the cache keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Entries kept (`FI_MR_CACHE_MAX_COUNT`, default 1024 as libfabric's).
    pub count: usize,
    /// Registered bytes kept (`FI_MR_CACHE_MAX_SIZE`, default 4 GiB).
    pub bytes: u64,
}

impl Limits {
    /// From `FI_MR_CACHE_MAX_COUNT` and `FI_MR_CACHE_MAX_SIZE`; `0` for either keeps nothing
    /// (every zero-copy message registers and deregisters its buffer).
    pub fn from_env(env: &Env) -> Result<Limits> {
        let count = env.parse("FI_MR_CACHE_MAX_COUNT", 1024usize)?;
        let bytes = env.size("FI_MR_CACHE_MAX_SIZE", 4 << 30)? as u64;
        Ok(Limits { count, bytes })
    }
}

/// When a transport moves a message straight from or into the application's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZeroCopyConfig {
    /// `NICEMU_ZERO_COPY` (default on): zero copy where the NIC reaches the process's memory.
    pub enabled: bool,
    /// `NICEMU_ZERO_COPY_MIN` (default 16K, the rendezvous threshold): the smallest message
    /// sent or received in place; smaller ones are staged (a copy is cheaper than a
    /// registration lookup and keeps them on the NIC's small-message paths).
    pub min: usize,
    /// What the registration cache keeps.
    pub limits: Limits,
}

impl ZeroCopyConfig {
    /// From the environment.
    pub fn from_env(env: &Env) -> Result<Self> {
        Ok(ZeroCopyConfig {
            enabled: env.flag("NICEMU_ZERO_COPY", true)?,
            min: env.size("NICEMU_ZERO_COPY_MIN", 16 << 10)?.max(1),
            limits: Limits::from_env(env)?,
        })
    }
}

/// One registration: the pinned pages and what the NIC knows them by.
pub struct Reg<R> {
    /// The registered pages (whole pages around what was asked for), pinned.
    pub mem: UserMemory,
    /// The NIC's handle (released when the last holder drops it).
    pub handle: R,
    last_use: AtomicU64,
    /// Kept registered on request ([`ZeroCopy::keep`]): never evicted.
    kept: AtomicBool,
}

/// What a lookup found or made: the registration and the part of it asked for.
pub struct Hit<R> {
    /// The registration (kept alive by whoever holds this).
    pub reg: Arc<Reg<R>>,
    /// `[va, va + len)` as a buffer (a view of `reg.mem`).
    pub mem: UserMemory,
}

/// Counters, for `Transport::stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups served by a kept registration.
    pub hits: u64,
    /// Lookups that registered.
    pub misses: u64,
    /// Entries dropped because their memory went away.
    pub invalidated: u64,
    /// Entries dropped for room.
    pub evicted: u64,
}

/// The cache of one transport.
pub struct RegCache<R> {
    limits: Limits,
    /// Entries by first page (several may start at one page: the key adds a sequence).
    entries: BTreeMap<(u64, u64), Arc<Reg<R>>>,
    /// The longest entry (how far before an address an entry holding it may start).
    max_len: u64,
    bytes: u64,
    clock: u64,
    seq: u64,
    stats: CacheStats,
}

impl<R> RegCache<R> {
    /// An empty cache.
    pub fn new(limits: Limits) -> Self {
        RegCache {
            limits,
            entries: BTreeMap::new(),
            max_len: 0,
            bytes: 0,
            clock: 0,
            seq: 0,
            stats: CacheStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The registration of `[va, va + len)` (`len > 0`) of the process's memory in `space`:
    /// a kept one whose memory is still valid, else a new one (`register` makes the NIC's
    /// handle for the pinned pages). `Ok(None)` when the memory cannot be registered (not
    /// mapped; not the process's own); the caller then stages the bytes.
    pub fn get(
        &mut self,
        space: &UserSpace,
        va: u64,
        len: u64,
        register: impl FnOnce(&UserMemory) -> Result<R>,
    ) -> Result<Option<Hit<R>>> {
        let end = va
            .checked_add(len)
            .ok_or_else(|| Error::Arg(format!("a buffer at {va:#x} of {len} bytes wraps")))?;
        self.clock += 1;
        if let Some(reg) = self.find(va, end) {
            self.stats.hits += 1;
            reg.last_use.store(self.clock, Ordering::Relaxed);
            let mem = view(&reg.mem, va, len)?;
            return Ok(Some(Hit { reg, mem }));
        }
        self.sweep();
        let start = va & !(PAGE - 1);
        let Some(stop) = end.checked_next_multiple_of(PAGE) else {
            return Ok(None);
        };
        let Ok(pages) = space.attach(start, stop - start) else {
            return Ok(None);
        };
        let handle = register(&pages)?;
        self.stats.misses += 1;
        let reg = Arc::new(Reg {
            mem: pages,
            handle,
            last_use: AtomicU64::new(self.clock),
            kept: AtomicBool::new(false),
        });
        let mem = view(&reg.mem, va, len)?;
        if self.limits.count > 0 && stop - start <= self.limits.bytes {
            self.seq += 1;
            self.entries.insert((start, self.seq), Arc::clone(&reg));
            self.max_len = self.max_len.max(stop - start);
            self.bytes += stop - start;
            self.evict();
        }
        Ok(Some(Hit { reg, mem }))
    }

    /// A valid entry holding `[va, end)`; invalid entries met on the way are dropped.
    fn find(&mut self, va: u64, end: u64) -> Option<Arc<Reg<R>>> {
        let from = (va & !(PAGE - 1)).saturating_sub(self.max_len);
        let mut stale = Vec::new();
        let mut found = None;
        for (&k, r) in self.entries.range((from, 0)..=(va, u64::MAX)).rev() {
            let (s, e) = (r.mem.va(), r.mem.va() + r.mem.len());
            if e <= va {
                continue;
            }
            if !r.mem.is_valid() {
                stale.push(k);
                continue;
            }
            if s <= va && end <= e {
                found = Some(Arc::clone(r));
                break;
            }
        }
        for k in stale {
            self.remove(k);
            self.stats.invalidated += 1;
        }
        found
    }

    fn remove(&mut self, k: (u64, u64)) {
        if let Some(r) = self.entries.remove(&k) {
            self.bytes = self.bytes.saturating_sub(r.mem.len());
        }
    }

    /// Drop every entry whose memory went away.
    fn sweep(&mut self) {
        let stale: Vec<_> = self
            .entries
            .iter()
            .filter(|(_, r)| !r.mem.is_valid())
            .map(|(k, _)| *k)
            .collect();
        for k in stale {
            self.remove(k);
            self.stats.invalidated += 1;
        }
        self.max_len = self
            .entries
            .values()
            .map(|r| r.mem.len())
            .max()
            .unwrap_or(0);
    }

    /// Keep within the limits, least recently used out first.
    fn evict(&mut self) {
        while self.entries.len() > self.limits.count || self.bytes > self.limits.bytes {
            let Some(k) = self
                .entries
                .iter()
                .filter(|(_, r)| !r.kept.load(Ordering::Relaxed))
                .min_by_key(|(_, r)| r.last_use.load(Ordering::Relaxed))
                .map(|(k, _)| *k)
            else {
                break;
            };
            self.remove(k);
            self.stats.evicted += 1;
        }
    }

    /// Drop every entry (registrations still held by operations live on until they end).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
        self.max_len = 0;
    }
}

/// `[va, va + len)` of `pages`.
fn view(pages: &UserMemory, va: u64, len: u64) -> Result<UserMemory> {
    pages
        .view(va - pages.va(), len)
        .map_err(|e: MemError| Error::Transport(format!("registration cache: {e}")))
}

/// The zero-copy state of a transport: its configuration, its registration cache, the
/// registrations kept on request, and the receives that must end in the application's memory
/// although they were not posted there (their bytes are written there at completion).
pub struct ZeroCopy<R> {
    /// When to go zero copy.
    pub cfg: ZeroCopyConfig,
    /// The registration cache.
    pub cache: RegCache<R>,
    kept: std::collections::HashMap<u64, Arc<Reg<R>>>,
    /// Receives completed into the application's memory by a copy, by operation: their
    /// destination (`None` for a zero-byte receive).
    pub dest: std::collections::HashMap<crate::OpId, Option<UserMemory>>,
}

impl<R> ZeroCopy<R> {
    /// From the environment.
    pub fn new(env: &Env) -> Result<Self> {
        let cfg = ZeroCopyConfig::from_env(env)?;
        Ok(ZeroCopy {
            cfg,
            cache: RegCache::new(cfg.limits),
            kept: Default::default(),
            dest: Default::default(),
        })
    }

    /// `Transport::zero_copy_min` for a NIC that reaches process memory or not.
    pub fn min(&self, reaches_process_memory: bool) -> Option<usize> {
        (self.cfg.enabled && reaches_process_memory).then_some(self.cfg.min)
    }

    /// Keep the registration of `[va, va + len)` (found or made by `get`) until
    /// [`ZeroCopy::forget`].
    pub fn keep(&mut self, va: u64, hit: Hit<R>) {
        hit.reg.kept.store(true, Ordering::Relaxed);
        self.kept.insert(va, hit.reg);
    }

    /// Stop keeping the registration kept at `va`.
    pub fn forget(&mut self, va: u64) {
        if let Some(r) = self.kept.remove(&va) {
            r.kept.store(false, Ordering::Relaxed);
        }
    }

    /// The counters of the cache as statistics (`mr_cache_*`).
    pub fn report(&self, stats: &mut crate::Stats) {
        let c = self.cache.stats();
        stats.insert("mr_cache_hits", c.hits);
        stats.insert("mr_cache_misses", c.misses);
        stats.insert("mr_cache_invalidated", c.invalidated);
        stats.insert("mr_cache_evicted", c.evicted);
    }

    /// Complete a receive of [`ZeroCopy::dest`]: a [`crate::Completion::Received`] becomes
    /// [`crate::Completion::Landed`] once its bytes are written to the destination.
    pub fn land(&mut self, op: crate::OpId, c: crate::Completion) -> Result<crate::Completion> {
        let Some(dest) = self.dest.remove(&op) else {
            return Ok(c);
        };
        match c {
            crate::Completion::Received { envelope, data } => {
                if let Some(d) = dest
                    && !data.is_empty()
                {
                    let n = data.len().min(d.len() as usize);
                    d.write(0, &data[..n]).map_err(|e| {
                        Error::Transport(format!("writing a receive into its buffer: {e}"))
                    })?;
                }
                Ok(crate::Completion::Landed {
                    envelope,
                    len: data.len(),
                })
            }
            other => Ok(other),
        }
    }
}
