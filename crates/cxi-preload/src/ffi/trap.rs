//! Doorbell pages whose every store must be seen (the CT doorbells: two increments of the same
//! value in a row are two increments): the process's view of the page is read-only; a store
//! faults, the fault handler makes the page writable and single-steps the store (the trap
//! flag), and the trap handler reads what was stored through the watcher's view of the page,
//! queues it, clears the page, makes it read-only again. Only the stores themselves move; no
//! instruction is decoded.
//!
//! The handlers own SIGSEGV and SIGTRAP while any page is trapped. Other faults and traps go
//! to the handler the process (or another library, such as the process-memory fault fix-up
//! of `emu_core::procmem`) installed: `sigaction` and `signal` are interposed for these two
//! signals, keep what the process asked for and report it back, so every handler sees the
//! chain it expects. Handlers use atomics, raw system calls and the queue only.
//!
//! Steps are serialized by one lock (the thread that holds it steps); a page made writable for
//! one thread's step can take another thread's store in that instant without a fault: its
//! value is read with the first one's unless both wrote the same word (docs/real-cxi.md).

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::real;

/// Trapped pages at most.
const SLOTS: usize = 1024;
/// Words of a CT doorbell page that carry stores: +0, +64, +128, +192.
pub const WORDS: [u64; 4] = [0, 64, 128, 192];
/// What each word holds between stores (the reset words a non-zero sentinel: their stores
/// write 0).
pub const REST: [u64; 4] = [0, 0, u64::MAX, u64::MAX];

const PAGE: usize = 4096;
const TF: i64 = 0x100;

static USER: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static ALIAS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];

/// The thread stepping (its tid; 0: none) and the slots it made writable.
static OWNER: AtomicI32 = AtomicI32::new(0);
static STEPPING: [AtomicUsize; 4] = [const { AtomicUsize::new(usize::MAX) }; 4];

/// The queue of stores: (slot, word index, value), written by the stepping thread only
/// (under `OWNER`), read by the watcher.
const QLEN: usize = 4096;
static Q_SLOT: [AtomicUsize; QLEN] = [const { AtomicUsize::new(0) }; QLEN];
static Q_VAL: [AtomicU64; QLEN] = [const { AtomicU64::new(0) }; QLEN];
static Q_HEAD: AtomicUsize = AtomicUsize::new(0);
static Q_TAIL: AtomicUsize = AtomicUsize::new(0);

/// What the watcher waits on (a futex word bumped by every queued store).
static WAKE: AtomicU32 = AtomicU32::new(0);

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The actions the process believes are installed for SIGSEGV and SIGTRAP.
struct Virtual {
    lock: AtomicBool,
    act: std::cell::UnsafeCell<libc::sigaction>,
}

// SAFETY: `act` is only touched with `lock` held (a spin lock), or read by a handler, which
// copies it under the lock too.
unsafe impl Sync for Virtual {}

static VIRT_SEGV: Virtual = Virtual {
    lock: AtomicBool::new(false),
    // SAFETY: all-zero is a valid sigaction (SIG_DFL, no flags, empty mask).
    act: std::cell::UnsafeCell::new(unsafe { std::mem::zeroed() }),
};
static VIRT_TRAP: Virtual = Virtual {
    lock: AtomicBool::new(false),
    // SAFETY: as above.
    act: std::cell::UnsafeCell::new(unsafe { std::mem::zeroed() }),
};

impl Virtual {
    fn with<R>(&self, f: impl FnOnce(&mut libc::sigaction) -> R) -> R {
        while self
            .lock
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held.
        let r = f(unsafe { &mut *self.act.get() });
        self.lock.store(false, Ordering::Release);
        r
    }
}

fn virt(sig: c_int) -> Option<&'static Virtual> {
    match sig {
        libc::SIGSEGV => Some(&VIRT_SEGV),
        libc::SIGTRAP => Some(&VIRT_TRAP),
        _ => None,
    }
}

fn gettid() -> i32 {
    // SAFETY: gettid cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

fn protect(page: usize, prot: c_int) {
    // SAFETY: mprotect of a page this module registered (a raw system call: async-signal-safe
    // and not through the C library's patched `mprotect`).
    unsafe { libc::syscall(libc::SYS_mprotect, page, PAGE, prot) };
}

fn slot_of(page: usize) -> Option<usize> {
    (0..SLOTS).find(|&i| USER[i].load(Ordering::Acquire) == page)
}

fn word(alias: usize, off: u64) -> &'static AtomicU64 {
    // SAFETY: `alias` is a live read-write mapping of a page (the watcher's view, unmapped
    // only after the slot is released), `off` one of WORDS: 8-aligned and in bounds.
    unsafe { &*((alias + off as usize) as *const AtomicU64) }
}

/// Hand a signal that is not ours to the action the process installed.
///
/// # Safety
/// Called from a signal handler with the kernel's arguments.
unsafe fn forward(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let Some(v) = virt(sig) else { return };
    let act = v.with(|a| *a);
    let h = act.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // The default action: put it back and let the fault happen again (it kills).
        // SAFETY: a zeroed sigaction is SIG_DFL.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            real::sigaction(sig, &dfl, std::ptr::null_mut());
        }
        return;
    }
    if act.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: an SA_SIGINFO action's handler has this signature.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a plain handler.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

extern "C" fn on_segv(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo for SIGSEGV.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = addr & !(PAGE - 1);
    let Some(slot) = (if page == 0 { None } else { slot_of(page) }) else {
        // SAFETY: forwarding the kernel's arguments.
        unsafe { forward(sig, info, ctx) };
        return;
    };
    let me = gettid();
    if OWNER.load(Ordering::Acquire) != me {
        while OWNER
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
    }
    if let Some(s) = STEPPING
        .iter()
        .find(|s| s.load(Ordering::Relaxed) == usize::MAX || s.load(Ordering::Relaxed) == slot)
    {
        s.store(slot, Ordering::Relaxed);
    }
    protect(page, libc::PROT_READ | libc::PROT_WRITE);
    // SAFETY: the kernel's ucontext of the interrupted thread; setting the trap flag makes
    // the store execute alone and trap after it.
    unsafe {
        let uc = ctx as *mut libc::ucontext_t;
        (*uc).uc_mcontext.gregs[libc::REG_EFL as usize] |= TF;
    }
}

fn push(slot: usize, idx: usize, v: u64) {
    let tail = Q_TAIL.load(Ordering::Relaxed);
    while tail.wrapping_sub(Q_HEAD.load(Ordering::Acquire)) >= QLEN {
        // Full: the watcher drains it.
        std::hint::spin_loop();
    }
    Q_SLOT[tail % QLEN].store(slot * 4 + idx, Ordering::Relaxed);
    Q_VAL[tail % QLEN].store(v, Ordering::Relaxed);
    Q_TAIL.store(tail.wrapping_add(1), Ordering::Release);
}

extern "C" fn on_trap(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    if OWNER.load(Ordering::Acquire) != gettid() {
        // SAFETY: forwarding the kernel's arguments.
        unsafe { forward(sig, info, ctx) };
        return;
    }
    for s in &STEPPING {
        let slot = s.swap(usize::MAX, Ordering::Relaxed);
        if slot == usize::MAX {
            continue;
        }
        let alias = ALIAS[slot].load(Ordering::Acquire);
        let page = USER[slot].load(Ordering::Acquire);
        if page != 0 {
            protect(page, libc::PROT_READ);
        }
        if alias != 0 {
            for (i, &off) in WORDS.iter().enumerate() {
                let v = word(alias, off).swap(REST[i], Ordering::AcqRel);
                if v != REST[i] {
                    push(slot, i, v);
                }
            }
        }
    }
    // SAFETY: the kernel's ucontext of this thread.
    unsafe {
        let uc = ctx as *mut libc::ucontext_t;
        (*uc).uc_mcontext.gregs[libc::REG_EFL as usize] &= !TF;
    }
    OWNER.store(0, Ordering::Release);
    notify();
}

/// Wake the watcher (a store was queued, or a page was added).
pub fn notify() {
    WAKE.fetch_add(1, Ordering::Release);
    // SAFETY: a futex wake on a static word (async-signal-safe).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            WAKE.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
}

fn install() -> bool {
    if INSTALLED.load(Ordering::Acquire) {
        return true;
    }
    for (sig, h, v) in [
        (
            libc::SIGSEGV,
            on_segv as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize,
            &VIRT_SEGV,
        ),
        (
            libc::SIGTRAP,
            on_trap as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize,
            &VIRT_TRAP,
        ),
    ] {
        // SAFETY: plain sigaction calls with initialised structures.
        let ok = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = h;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            let r = real::sigaction(sig, &act, &mut old);
            if r == 0 {
                v.with(|a| *a = old);
            }
            r == 0
        };
        if !ok {
            return false;
        }
    }
    INSTALLED.store(true, Ordering::Release);
    true
}

/// Trap every store into the page the process sees at `user` (the watcher reads it at
/// `alias`); the slot, or `None` (no slot left, or the handlers could not be installed:
/// then the page is polled instead).
pub fn watch(user: usize, alias: usize) -> Option<usize> {
    if !install() {
        return None;
    }
    for i in 0..SLOTS {
        if ALIAS[i]
            .compare_exchange(0, alias, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            USER[i].store(user, Ordering::Release);
            protect(user, libc::PROT_READ);
            return Some(i);
        }
    }
    None
}

/// Stop trapping slot `slot` (its pages are about to go away).
pub fn release(slot: usize) {
    if slot >= SLOTS {
        return;
    }
    USER[slot].store(0, Ordering::Release);
    // A step of this slot in flight finishes before the alias goes.
    while OWNER.load(Ordering::Acquire) != 0 {
        std::hint::spin_loop();
    }
    ALIAS[slot].store(0, Ordering::Release);
}

/// Take the queued stores: `f(slot, word offset, value)` in the order they were made.
pub fn drain(mut f: impl FnMut(usize, u64, u64)) -> bool {
    let mut any = false;
    loop {
        let head = Q_HEAD.load(Ordering::Relaxed);
        if head == Q_TAIL.load(Ordering::Acquire) {
            return any;
        }
        let k = Q_SLOT[head % QLEN].load(Ordering::Relaxed);
        let v = Q_VAL[head % QLEN].load(Ordering::Relaxed);
        Q_HEAD.store(head.wrapping_add(1), Ordering::Release);
        f(k / 4, WORDS[k % 4], v);
        any = true;
    }
}

/// The current wake-up count (to wait for a change of).
pub fn wake_count() -> u32 {
    WAKE.load(Ordering::Acquire)
}

/// Sleep until a trapped store is queued after `seen` was read, or `timeout` passes.
pub fn wait(seen: u32, timeout: std::time::Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a futex wait on a static word with a valid relative timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            WAKE.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            seen,
            &ts as *const libc::timespec,
        )
    };
}

/// `sigaction` for SIGSEGV and SIGTRAP while the handlers are installed: what the process
/// asks for is kept and reported back; `None` for other signals (or before installation).
///
/// # Safety
/// `act` and `old` are NULL or valid.
pub unsafe fn virtual_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> Option<c_int> {
    if !INSTALLED.load(Ordering::Acquire) {
        return None;
    }
    let v = virt(sig)?;
    v.with(|cur| {
        if !old.is_null() {
            // SAFETY: the caller's buffer.
            unsafe { *old = *cur };
        }
        if !act.is_null() {
            // SAFETY: the caller's action.
            *cur = unsafe { *act };
        }
    });
    Some(0)
}
