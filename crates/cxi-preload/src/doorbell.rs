//! Doorbells as plain stores: the pages a process gets from `mmap` of a CQ's `wp_addr`, an
//! EQ's `csr` or a CT's `doorbell` token are ordinary memory ([`crate::ffi::os::Page`]); one
//! thread per process (the doorbell watcher) reads them and replays what it finds as stores
//! to the emulated device's BAR, as the NIC would have seen them.
//!
//! - **CQ launch page**: offset 0 is the write pointer (`*wp_addr = wp32 / 2`, in 64-byte
//!   slots); a new value is forwarded. The low-latency windows at 0x400 (64 B), 0x800 (128 B
//!   aligned) and 0xC00 (128 B unaligned) hold a copy of the command libcxi also put in the
//!   ring (`cxi_cq_ll_ring`, `LL_OFFSET` = `((wp32 / 2) & 0xF) * 64`): the watcher keeps the
//!   hardware's write pointer `h`, looks at the slot of `h` (of `h + 1` in the unaligned
//!   window, whose first 64 B slot is a NOOP), forwards a non-empty slot as the burst the NIC
//!   would have received, clears it and moves `h` past the command. Windows are looked at
//!   before the write pointer; when a write pointer covers positions whose low-latency copy
//!   was not seen yet (x86 makes it visible no later than the write pointer), those slots are
//!   cleared without being forwarded: the ring announced them.
//! - **EQ software state**: offset 0 is `c_ee_cfg_eq_sw_state`, a register whose last value
//!   counts; a new value is forwarded.
//! - **CT doorbells**: +0 increment success, +64 increment failure (values), +128 and +192
//!   reset (a store of 0). Every store counts (two increments of 10 are 20), so these pages
//!   are trapped ([`crate::ffi::trap`]): each store is single-stepped and queued, and the
//!   watcher forwards the queue before it looks at any page, keeping the order of a CT store
//!   and a later doorbell. Where trapping is not possible the page is polled: increments are
//!   taken with an atomic swap to 0, resets replace a non-zero sentinel, and two identical
//!   increments between two looks would read as one.
//!
//! The watcher spins for a short time after a doorbell (the next one often follows), then
//! polls while yielding the CPU, then sleeps between looks with a growing pause, so an idle
//! process costs next to nothing; `NICEMU_CXI_POLL_SPIN_US`, `NICEMU_CXI_POLL_YIELD_US` and
//! `NICEMU_CXI_POLL_SLEEP_MAX_US` set the phases.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use driver::cassini::MmioWindow;
use emu_core::mmio::Mmio;
use firmware_spec::cassini::status::C_CQ_FIRST_WR_PTR;

use crate::ffi::os::Page;
use crate::ffi::trap;

/// Low-latency windows: (page offset, command bytes, slot of the command relative to `h`).
const LL_WINDOWS: [(u64, u64, u64); 3] = [(0x400, 64, 0), (0x800, 128, 0), (0xC00, 128, 1)];
/// CT doorbell slots.
const CT_INC_SUCCESS: u64 = 0;
const CT_INC_FAILURE: u64 = 64;
const CT_RESET_SUCCESS: u64 = 128;
const CT_RESET_FAILURE: u64 = 192;
/// What the reset slots hold between resets.
const RESET_SENTINEL: u64 = u64::MAX;

/// What a doorbell page is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A CQ launch page of a ring of `slots` 64-byte slots.
    Launch {
        /// Slots of the ring (`mem_q_max_ptr + 1`).
        slots: u64,
    },
    /// An EQ software-state page.
    EqState,
    /// A CT doorbell page.
    Ct,
}

#[derive(Debug)]
struct LaunchState {
    /// The last write pointer seen at offset 0.
    last_wp: u64,
    /// Where the hardware's write pointer is (64-byte slots).
    h: u64,
}

/// One mapped doorbell page and the device window behind it.
pub struct Bell {
    page: Page,
    kind: Kind,
    /// The trap slot of a CT page whose stores are trapped.
    trap_slot: Option<usize>,
    /// The window (`None` once unwatched: the mapping no longer holds the object) and the
    /// launch page's state; locked for a whole look.
    inner: Mutex<Inner>,
    last: AtomicU64,
}

struct Inner {
    mmio: Option<Arc<MmioWindow>>,
    launch: LaunchState,
}

impl std::fmt::Debug for Bell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bell")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Bell {
    /// A doorbell page for `mmio` (a fresh zeroed page; CT reset slots armed).
    pub fn new(kind: Kind, mmio: Arc<MmioWindow>) -> std::io::Result<Arc<Bell>> {
        let page = Page::new()?;
        let mut trap_slot = None;
        if kind == Kind::Ct {
            page.store(CT_RESET_SUCCESS, RESET_SENTINEL);
            page.store(CT_RESET_FAILURE, RESET_SENTINEL);
            trap_slot = trap::watch(page.user_address(), page.alias_address());
        }
        Ok(Arc::new(Bell {
            page,
            kind,
            trap_slot,
            inner: Mutex::new(Inner {
                mmio: Some(mmio),
                launch: LaunchState {
                    last_wp: 0,
                    h: C_CQ_FIRST_WR_PTR,
                },
            }),
            last: AtomicU64::new(0),
        }))
    }

    /// The address the process stores to.
    pub fn user_address(&self) -> usize {
        self.page.user_address()
    }

    /// The page's size.
    pub fn len(&self) -> usize {
        self.page.len()
    }

    /// Never true.
    pub fn is_empty(&self) -> bool {
        self.page.len() == 0
    }

    /// Take the process's view of the page away (its `munmap`); the watcher keeps its own.
    pub fn unmap_user(&self) {
        self.page.unmap_user();
    }

    /// Look at the page once and forward what changed; true if anything was rung.
    pub fn poll(&self) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Inner { mmio, launch } = &mut *inner;
        let Some(mmio) = mmio.as_deref() else {
            return false;
        };
        match self.kind {
            Kind::Launch { slots } => self.poll_launch(mmio, launch, slots),
            Kind::EqState => {
                let v = self.page.load(0);
                if v != self.last.swap(v, Ordering::Relaxed) {
                    ring(mmio, 0, v);
                    true
                } else {
                    false
                }
            }
            Kind::Ct if self.trap_slot.is_some() => false,
            Kind::Ct => self.poll_ct(mmio),
        }
    }

    /// Forward one trapped store of this CT page.
    fn ring_trapped(&self, off: u64, v: u64) {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(m) = inner.mmio.as_deref() {
            ring(m, off, v);
        }
    }

    /// Look one last time, then let go of the device window (the object behind it can be
    /// freed from now on).
    pub fn detach(&self) {
        if let Some(slot) = self.trap_slot {
            trap::release(slot);
            drain_traps();
        }
        self.poll();
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .mmio = None;
    }

    fn poll_ct(&self, mmio: &MmioWindow) -> bool {
        let mut any = false;
        for off in [CT_INC_SUCCESS, CT_INC_FAILURE] {
            let v = self.page.swap(off, 0);
            if v != 0 {
                ring(mmio, off, v);
                any = true;
            }
        }
        for off in [CT_RESET_SUCCESS, CT_RESET_FAILURE] {
            let v = self.page.swap(off, RESET_SENTINEL);
            if v != RESET_SENTINEL {
                ring(mmio, off, v);
                any = true;
            }
        }
        any
    }

    fn poll_launch(&self, mmio: &MmioWindow, st: &mut LaunchState, slots: u64) -> bool {
        let mut any = false;
        // Low-latency writes at the hardware's write pointer, in order.
        'll: for _ in 0..16 {
            for (win, bytes, skip) in LL_WINDOWS {
                let pos = advance(st.h, skip, slots);
                let off = win + (pos & 0xF) * 64;
                if self.page.load(off) == 0 {
                    continue;
                }
                let mut cmd = [0u8; 128];
                let cmd = &mut cmd[..bytes as usize];
                self.page.read(off, cmd);
                let _ = mmio.write_burst(off, cmd);
                self.page.clear(off, bytes);
                st.h = advance(pos, bytes / 64, slots);
                any = true;
                continue 'll;
            }
            break;
        }
        let wp = self.page.load(0);
        if wp != st.last_wp {
            st.last_wp = wp;
            ring(mmio, 0, wp);
            // Low-latency copies of commands this write pointer covers: already announced.
            if (C_CQ_FIRST_WR_PTR..slots).contains(&wp) {
                let covered = distance(st.h, wp, slots).min(16);
                for i in 0..covered {
                    let pos = advance(st.h, i, slots);
                    if pos & 0xF == wp & 0xF {
                        continue;
                    }
                    for (win, _, _) in LL_WINDOWS {
                        self.page.clear(win + (pos & 0xF) * 64, 64);
                    }
                }
                st.h = wp;
            }
            any = true;
        }
        any
    }
}

fn ring(mmio: &MmioWindow, off: u64, v: u64) {
    // A window of a freed object refuses every access: the store reaches nothing, as a
    // store to a launch page of a disabled queue reaches no command.
    let _ = mmio.write(off, &v.to_le_bytes());
}

/// `pos + n` in a ring of `slots` slots whose commands start at slot 4.
fn advance(pos: u64, n: u64, slots: u64) -> u64 {
    let usable = slots.saturating_sub(C_CQ_FIRST_WR_PTR).max(1);
    let p = pos.max(C_CQ_FIRST_WR_PTR) - C_CQ_FIRST_WR_PTR;
    C_CQ_FIRST_WR_PTR + (p + n) % usable
}

/// Slots from `from` to `to` going forward in the ring.
fn distance(from: u64, to: u64, slots: u64) -> u64 {
    let usable = slots.saturating_sub(C_CQ_FIRST_WR_PTR).max(1);
    let f = from.max(C_CQ_FIRST_WR_PTR) - C_CQ_FIRST_WR_PTR;
    let t = to.max(C_CQ_FIRST_WR_PTR) - C_CQ_FIRST_WR_PTR;
    (t + usable - f % usable) % usable
}

/// How the watcher paces itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacing {
    /// Spin (no yield) this long after the last doorbell.
    pub spin: Duration,
    /// Then poll, yielding the CPU between looks, until this long after it.
    pub yield_until: Duration,
    /// Then sleep between looks, the pause doubling from 20 µs up to this.
    pub sleep_max: Duration,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            spin: Duration::from_micros(20),
            yield_until: Duration::from_millis(2),
            sleep_max: Duration::from_millis(10),
        }
    }
}

impl Pacing {
    /// The pacing the variables ask for (defaults for absent or bad values).
    pub fn from_env() -> Pacing {
        let us = |v: &str| {
            std::env::var(v)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .map(Duration::from_micros)
        };
        let d = Pacing::default();
        Pacing {
            spin: us("NICEMU_CXI_POLL_SPIN_US").unwrap_or(d.spin),
            yield_until: us("NICEMU_CXI_POLL_YIELD_US").unwrap_or(d.yield_until),
            sleep_max: us("NICEMU_CXI_POLL_SLEEP_MAX_US")
                .unwrap_or(d.sleep_max)
                .max(Duration::from_micros(20)),
        }
    }
}

struct Watcher {
    bells: Mutex<Vec<Arc<Bell>>>,
    /// CT pages by trap slot.
    trapped: Mutex<std::collections::BTreeMap<usize, Arc<Bell>>>,
    thread: OnceLock<()>,
    looks: AtomicU64,
    rung: AtomicU64,
}

fn watcher() -> &'static Watcher {
    static W: OnceLock<Watcher> = OnceLock::new();
    W.get_or_init(|| Watcher {
        bells: Mutex::new(Vec::new()),
        trapped: Mutex::new(std::collections::BTreeMap::new()),
        thread: OnceLock::new(),
        looks: AtomicU64::new(0),
        rung: AtomicU64::new(0),
    })
}

/// Watch `bell` from now on (the watcher thread starts with the first one).
pub fn watch(bell: Arc<Bell>) {
    let w = watcher();
    if let Some(slot) = bell.trap_slot {
        w.trapped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(slot, Arc::clone(&bell));
    }
    w.bells
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(bell);
    w.thread.get_or_init(|| {
        let pacing = Pacing::from_env();
        let _ = std::thread::Builder::new()
            .name("nicemu-doorbells".into())
            .spawn(move || run(pacing));
    });
    trap::notify();
}

/// Forward the trapped CT stores queued so far, in order.
fn drain_traps() -> bool {
    let w = watcher();
    trap::drain(|slot, off, v| {
        let b = w
            .trapped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&slot)
            .cloned();
        if let Some(b) = b {
            b.ring_trapped(off, v);
        }
    })
}

/// Stop watching `bell` (after one last look, so a store made just before is not lost) and
/// let go of its device window.
pub fn unwatch(bell: &Arc<Bell>) {
    bell.detach();
    let w = watcher();
    if let Some(slot) = bell.trap_slot {
        w.trapped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&slot);
    }
    w.bells
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|b| !Arc::ptr_eq(b, bell));
}

/// (looks at the pages, doorbells forwarded) so far: what the watcher cost and did.
pub fn stats() -> (u64, u64) {
    let w = watcher();
    (
        w.looks.load(Ordering::Relaxed),
        w.rung.load(Ordering::Relaxed),
    )
}

fn run(pacing: Pacing) {
    let w = watcher();
    let mut last = Instant::now();
    let mut pause = Duration::from_micros(20);
    let mut spins = 0u32;
    loop {
        let seen = trap::wake_count();
        w.looks.fetch_add(1, Ordering::Relaxed);
        // Trapped CT stores first: they were made before any doorbell now in a page.
        let mut any = drain_traps();
        let bells: Vec<Arc<Bell>> = w
            .bells
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for b in &bells {
            if b.poll() {
                any = true;
                w.rung.fetch_add(1, Ordering::Relaxed);
            }
        }
        if any {
            last = Instant::now();
            pause = Duration::from_micros(20);
            spins = 0;
            continue;
        }
        if bells.is_empty() {
            trap::wait(seen, Duration::from_secs(1));
            last = Instant::now();
            continue;
        }
        // Checking the clock costs more than a look: every 64 spins.
        spins = spins.wrapping_add(1);
        if !spins.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        let idle = last.elapsed();
        if idle < pacing.spin {
            std::hint::spin_loop();
        } else if idle < pacing.yield_until {
            std::thread::yield_now();
        } else {
            trap::wait(seen, pause);
            pause = (pause * 2).min(pacing.sleep_max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_positions_wrap_to_slot_four() {
        assert_eq!(advance(4, 1, 64), 5);
        assert_eq!(advance(63, 1, 64), 4);
        assert_eq!(advance(62, 2, 64), 4);
        assert_eq!(distance(60, 5, 64), 5);
        assert_eq!(distance(5, 5, 64), 0);
        assert_eq!(distance(4, 63, 64), 59);
    }
}
