//! The memory monitor: learn that registered memory is about to go away *before* it does.
//!
//! What libfabric's MR cache monitors do (facts from `prov/util/src/util_mem_hooks.c` and
//! `uffd_mem_monitor.c`, read for this design; no code taken):
//!
//! - `memhooks` overwrites the first bytes of the C library's `mmap`, `munmap`, `mremap`,
//!   `madvise`, `shmat`, `shmdt` and `brk` with an absolute jump to its own functions, which
//!   notify the cache (under the monitor's lock) and then make the system call themselves.
//!   Calls inside the C library (its `free` of an mmapped chunk calls `munmap`) run the same
//!   patched code, so they are seen too. It notifies for `MAP_FIXED` mappings, `munmap`,
//!   the old range of `mremap`, `madvise` with `MADV_DONTNEED`/`MADV_FREE`/`MADV_REMOVE`,
//!   `shmat` with `SHM_REMAP`, everything above the address of a `shmdt`, and a `brk` that
//!   shrinks the heap. It refuses to patch a function that already carries its jump.
//! - `userfaultfd` registers each range (`UFFDIO_REGISTER_MODE_MISSING`) with the features
//!   `UFFD_FEATURE_EVENT_UNMAP | EVENT_REMOVE | EVENT_REMAP` (`UFFD_USER_MODE_ONLY` for
//!   unprivileged processes) and a thread reads the events and notifies the cache. The events
//!   arrive after the kernel changed the mapping, on another thread; the monitor must also
//!   serve missing-page faults of the registered ranges.
//!
//! We choose patching, as memhooks: it is synchronous (the pins are invalidated before the
//! memory goes away, so no write can reach memory mapped again in between), needs no
//! privilege, and sees the C library's own calls. We also intercept `mprotect` (a range made
//! unreadable or unwritable invalidates the pins needing that access). Each of our functions
//! notifies [`super::notify`] and then makes the raw system call (or, when another library
//! had already patched the function with the same jump, calls that library's function, so
//! both see the call). A forked child gets the C library's original bytes back (its copy of
//! the table is of no use to it). Where patching is not possible (not x86-64 glibc, a text
//! page that cannot be made writable) the monitor is [`Monitor::None`]: accesses still
//! cannot crash the process (see `raw`), but memory unmapped and mapped again under a live
//! registration would receive the device's writes; docs/emu-core-memory.md says so.

/// Which monitor invalidates pins in this process.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Monitor {
    /// The C library's memory functions are intercepted (synchronous).
    Hooks,
    /// None: pins are never invalidated by the process's own unmapping.
    None,
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
pub(super) use patch::{current, install};

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu")))]
pub(super) fn install() {}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu")))]
pub(super) fn current() -> Monitor {
    Monitor::None
}

#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
#[allow(unsafe_code)]
mod patch {
    use std::ffi::{CStr, c_int, c_void};
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::{Change, notify};
    use super::Monitor;

    /// `movabs r11, imm64; jmp r11`: 13 bytes, the imm64 at offset 2 (a trampoline slot).
    const SLOT_LEN: usize = 13;
    /// `jmp rel32`: what we write at the start of a C library function.
    const JMP_LEN: usize = 5;

    fn abs_jump(target: usize) -> [u8; SLOT_LEN] {
        let mut p = [0u8; SLOT_LEN];
        p[0] = 0x49;
        p[1] = 0xBB;
        p[2..10].copy_from_slice(&(target as u64).to_le_bytes());
        p[10] = 0x41;
        p[11] = 0xFF;
        p[12] = 0xE3;
        p
    }

    /// Where a function that another library already patched jumps to: our shape (`jmp
    /// rel32`) or libfabric memhooks' (`movabs r11; jmp r11`).
    fn existing_jump(at: usize, code: &[u8; 16]) -> Option<usize> {
        if code[0] == 0xE9 {
            let rel = i32::from_le_bytes([code[1], code[2], code[3], code[4]]);
            return Some((at as i64 + JMP_LEN as i64 + i64::from(rel)) as usize);
        }
        (code[0] == 0x49
            && code[1] == 0xBB
            && code[10] == 0x41
            && code[11] == 0xFF
            && code[12] == 0xE3)
            .then(|| {
                u64::from_le_bytes([
                    code[2], code[3], code[4], code[5], code[6], code[7], code[8], code[9],
                ]) as usize
            })
    }

    /// Functions we intercept, by symbol, with the hook that replaces each.
    const MUNMAP: usize = 0;
    const MMAP: usize = 1;
    const MREMAP: usize = 2;
    const MADVISE: usize = 3;
    const MPROTECT: usize = 4;
    const BRK: usize = 5;
    const SHMDT: usize = 6;
    const SHMAT: usize = 7;
    const N: usize = 8;

    const SYMBOLS: [&CStr; N] = [
        c"munmap",
        c"mmap",
        c"mremap",
        c"madvise",
        c"mprotect",
        c"brk",
        c"shmdt",
        c"shmat",
    ];

    fn hooks() -> [usize; N] {
        [
            hook_munmap as extern "C" fn(*mut c_void, usize) -> c_int as usize,
            hook_mmap as extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, i64) -> *mut c_void
                as usize,
            hook_mremap
                as extern "C" fn(*mut c_void, usize, usize, c_int, *mut c_void) -> *mut c_void
                as usize,
            hook_madvise as extern "C" fn(*mut c_void, usize, c_int) -> c_int as usize,
            hook_mprotect as extern "C" fn(*mut c_void, usize, c_int) -> c_int as usize,
            hook_brk as extern "C" fn(*mut c_void) -> c_int as usize,
            hook_shmdt as extern "C" fn(*const c_void) -> c_int as usize,
            hook_shmat as extern "C" fn(c_int, *const c_void, c_int) -> *mut c_void as usize,
        ]
    }

    /// A function of another library that already jumped from the C library's function when
    /// we patched (libfabric's memhooks): ours calls it instead of the system call.
    static NEXT: [AtomicUsize; N] = [const { AtomicUsize::new(0) }; N];

    /// A patched function: its address and the aligned 8-byte word we replaced (or, when
    /// the jump crosses an 8-byte boundary, the two words).
    struct Patched {
        at: usize,
        original: [u8; 16],
    }

    static STATE: OnceLock<Result<Vec<Patched>, String>> = OnceLock::new();

    /// Which monitor is active.
    pub(in super::super) fn current() -> Monitor {
        match STATE.get() {
            Some(Ok(_)) => Monitor::Hooks,
            _ => Monitor::None,
        }
    }

    /// Patch the C library once per process.
    pub(in super::super) fn install() {
        let r = STATE.get_or_init(patch_all);
        if let Err(e) = r {
            tracing::warn!(reason = %e, "no memory monitor: registered memory that is unmapped is not noticed");
        }
    }

    const PAGE: usize = 4096;

    fn page_of(a: usize) -> usize {
        a & !(PAGE - 1)
    }

    /// `mprotect` as a raw system call (`mprotect` itself is one of the functions patched).
    fn protect(first: usize, len: usize, prot: c_int) -> Result<(), String> {
        // SAFETY: mprotect of pages of this process; a failure is reported.
        let r = unsafe { libc::syscall(libc::SYS_mprotect, first, len, prot) };
        if r == 0 {
            Ok(())
        } else {
            Err(format!(
                "mprotect failed: {}",
                std::io::Error::last_os_error()
            ))
        }
    }

    /// Replace the first `bytes.len()` bytes of the code at `at`: the pages made writable,
    /// the bytes stored (as one aligned 8-byte store when they fit in one aligned word, so
    /// that a thread fetching them sees either the old or the new instruction), the pages
    /// made read-execute again.
    ///
    /// # Safety
    /// `at` must be the start of a function of the C library's text.
    unsafe fn write_code(at: usize, bytes: &[u8]) -> Result<(), String> {
        let first = page_of(at);
        let len = page_of(at + bytes.len() - 1) + PAGE - first;
        protect(
            first,
            len,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
        )?;
        let word = at & !7;
        if at + bytes.len() <= word + 8 {
            let w = std::ptr::with_exposed_provenance_mut::<u64>(word);
            // SAFETY: `word` is 8-aligned and inside the writable pages; the word is
            // replaced by one atomic store, keeping the bytes around `bytes`.
            unsafe {
                let a = std::sync::atomic::AtomicU64::from_ptr(w);
                let mut b = a.load(Ordering::Acquire).to_le_bytes();
                b[at - word..at - word + bytes.len()].copy_from_slice(bytes);
                a.store(u64::from_le_bytes(b), Ordering::Release);
            }
        } else {
            // SAFETY: the bytes lie in the writable pages.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    std::ptr::with_exposed_provenance_mut::<u8>(at),
                    bytes.len(),
                );
            }
        }
        protect(first, len, libc::PROT_READ | libc::PROT_EXEC)
    }

    /// A page for the trampolines within reach of a `jmp rel32` from `near` (±2 GiB).
    fn page_near(near: usize) -> Result<usize, String> {
        const STEP: usize = 16 << 20;
        for k in 1..96usize {
            for hint in [near.checked_sub(k * STEP), near.checked_add(k * STEP)] {
                let Some(hint) = hint.map(page_of) else {
                    continue;
                };
                // SAFETY: an anonymous mapping that may not replace anything
                // (MAP_FIXED_NOREPLACE); a raw system call, as `mmap` is patched.
                let p = unsafe {
                    libc::syscall(
                        libc::SYS_mmap,
                        hint,
                        PAGE,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                        -1,
                        0,
                    )
                };
                if p == -1 {
                    continue;
                }
                let p = p as usize;
                if p.abs_diff(near) < (1 << 31) - (1 << 24) {
                    return Ok(p);
                }
                // An old kernel took the hint as a hint only.
                // SAFETY: unmapping the page we just mapped.
                unsafe { libc::syscall(libc::SYS_munmap, p, PAGE) };
            }
        }
        Err("no page for trampolines near the C library".into())
    }

    fn patch_all() -> Result<Vec<Patched>, String> {
        let hooks = hooks();
        let mut addrs = [0usize; N];
        // The C library's own definitions: a library preloaded before it may define the same
        // names (libnicemu_cxi.so interposes `mmap` and `munmap` by symbol), and those must
        // stay as they are; the default lookup would find them first.
        // SAFETY: dlopen of an already loaded library by its soname (RTLD_NOLOAD: no load).
        let libc_handle =
            unsafe { libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        let handle = if libc_handle.is_null() {
            libc::RTLD_DEFAULT
        } else {
            libc_handle
        };
        for (i, name) in SYMBOLS.iter().enumerate() {
            // SAFETY: dlsym with a valid handle and a NUL-terminated name.
            let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
            if p.is_null() {
                return Err(format!("{name:?} not found"));
            }
            addrs[i] = p as usize;
        }
        // One trampoline slot of 16 bytes per function: `movabs r11, hook; jmp r11`.
        let tramp = page_near(addrs[MUNMAP])?;
        for (i, &h) in hooks.iter().enumerate() {
            let slot = abs_jump(h);
            // SAFETY: the slot lies in the page we just mapped read-write.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    slot.as_ptr(),
                    std::ptr::with_exposed_provenance_mut::<u8>(tramp + 16 * i),
                    SLOT_LEN,
                );
            }
        }
        protect(tramp, PAGE, libc::PROT_READ | libc::PROT_EXEC)?;
        let mut done: Vec<Patched> = Vec::with_capacity(N);
        let undo = |done: &[Patched]| {
            for d in done {
                // SAFETY: restoring the bytes we replaced.
                let _ = unsafe { write_code(d.at, &d.original[..JMP_LEN]) };
            }
        };
        for i in 0..N {
            let at = addrs[i];
            if done.iter().any(|d| d.at == at) {
                continue;
            }
            let slot = tramp + 16 * i;
            let rel = slot as i64 - (at as i64 + JMP_LEN as i64);
            let Ok(rel) = i32::try_from(rel) else {
                undo(&done);
                return Err("trampolines out of reach of the C library".into());
            };
            let mut original = [0u8; 16];
            // SAFETY: the first bytes of a C library function are readable code.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    std::ptr::with_exposed_provenance::<u8>(at),
                    original.as_mut_ptr(),
                    16,
                );
            }
            if let Some(t) = existing_jump(at, &original) {
                NEXT[i].store(t, Ordering::Release);
            }
            let mut jmp = [0u8; JMP_LEN];
            jmp[0] = 0xE9;
            jmp[1..].copy_from_slice(&rel.to_le_bytes());
            // SAFETY: `at` is the C library function `SYMBOLS[i]`.
            if let Err(e) = unsafe { write_code(at, &jmp) } {
                undo(&done);
                return Err(e);
            }
            done.push(Patched { at, original });
        }
        // SAFETY: registering a plain function as the child's fork handler.
        unsafe {
            libc::pthread_atfork(None, None, Some(in_child));
        }
        Ok(done)
    }

    /// After `fork`, in the child: give the C library its code back (the child's copy of the
    /// table is of no use to it, and a lock another thread held at the fork stays held).
    extern "C" fn in_child() {
        if let Some(Ok(done)) = STATE.get() {
            for d in done {
                // SAFETY: restoring the bytes we replaced; the child has one thread.
                let _ = unsafe { write_code(d.at, &d.original[..JMP_LEN]) };
            }
        }
    }

    fn next(i: usize) -> usize {
        NEXT[i].load(Ordering::Acquire)
    }

    extern "C" fn hook_munmap(addr: *mut c_void, len: usize) -> c_int {
        notify(addr as u64, len as u64, Change::Gone);
        let n = next(MUNMAP);
        if n != 0 {
            // SAFETY: `n` is the function another library installed in munmap's place.
            let f: extern "C" fn(*mut c_void, usize) -> c_int = unsafe { std::mem::transmute(n) };
            return f(addr, len);
        }
        // SAFETY: the system call munmap itself would make.
        unsafe { libc::syscall(libc::SYS_munmap, addr, len) as c_int }
    }

    extern "C" fn hook_mmap(
        addr: *mut c_void,
        len: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        off: i64,
    ) -> *mut c_void {
        if flags & libc::MAP_FIXED != 0 && !addr.is_null() {
            notify(addr as u64, len as u64, Change::Gone);
        }
        let n = next(MMAP);
        if n != 0 {
            // SAFETY: as in `hook_munmap`.
            let f: extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, i64) -> *mut c_void =
                unsafe { std::mem::transmute(n) };
            return f(addr, len, prot, flags, fd, off);
        }
        // SAFETY: the system call mmap makes on x86-64.
        unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) as *mut c_void }
    }

    extern "C" fn hook_mremap(
        old: *mut c_void,
        old_len: usize,
        new_len: usize,
        flags: c_int,
        new_addr: *mut c_void,
    ) -> *mut c_void {
        notify(old as u64, old_len as u64, Change::Gone);
        // The fifth argument exists only with MREMAP_FIXED (the C function is variadic).
        let new_addr = if flags & libc::MREMAP_FIXED != 0 {
            notify(new_addr as u64, new_len as u64, Change::Gone);
            new_addr
        } else {
            std::ptr::null_mut()
        };
        let n = next(MREMAP);
        if n != 0 {
            // SAFETY: as in `hook_munmap`.
            let f: extern "C" fn(*mut c_void, usize, usize, c_int, *mut c_void) -> *mut c_void =
                unsafe { std::mem::transmute(n) };
            return f(old, old_len, new_len, flags, new_addr);
        }
        // SAFETY: the system call mremap makes.
        unsafe {
            libc::syscall(libc::SYS_mremap, old, old_len, new_len, flags, new_addr) as *mut c_void
        }
    }

    /// `MADV_DONTNEED_LOCKED` (Linux 5.18).
    const MADV_DONTNEED_LOCKED: c_int = 24;

    extern "C" fn hook_madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int {
        if matches!(
            advice,
            libc::MADV_DONTNEED | libc::MADV_FREE | libc::MADV_REMOVE | MADV_DONTNEED_LOCKED
        ) {
            notify(addr as u64, len as u64, Change::Gone);
        }
        let n = next(MADVISE);
        if n != 0 {
            // SAFETY: as in `hook_munmap`.
            let f: extern "C" fn(*mut c_void, usize, c_int) -> c_int =
                unsafe { std::mem::transmute(n) };
            return f(addr, len, advice);
        }
        // SAFETY: the system call madvise makes.
        unsafe { libc::syscall(libc::SYS_madvise, addr, len, advice) as c_int }
    }

    extern "C" fn hook_mprotect(addr: *mut c_void, len: usize, prot: c_int) -> c_int {
        let read = prot & libc::PROT_READ != 0;
        let write = prot & libc::PROT_WRITE != 0;
        if !(read && write) {
            notify(addr as u64, len as u64, Change::Protect { read, write });
        }
        let n = next(MPROTECT);
        if n != 0 {
            // SAFETY: as in `hook_munmap`.
            let f: extern "C" fn(*mut c_void, usize, c_int) -> c_int =
                unsafe { std::mem::transmute(n) };
            return f(addr, len, prot);
        }
        // SAFETY: the system call mprotect makes.
        unsafe { libc::syscall(libc::SYS_mprotect, addr, len, prot) as c_int }
    }

    unsafe extern "C" {
        /// The C library's record of the program break (glibc `brk`/`sbrk` keep it).
        static mut __curbrk: *mut c_void;
    }

    extern "C" fn hook_brk(addr: *mut c_void) -> c_int {
        // SAFETY: brk(0) reads the break.
        let cur = unsafe { libc::syscall(libc::SYS_brk, 0usize) } as u64;
        let want = addr as u64;
        if want < cur {
            notify(want, cur - want, Change::Gone);
        }
        let n = next(BRK);
        if n != 0 {
            // SAFETY: as in `hook_munmap`.
            let f: extern "C" fn(*mut c_void) -> c_int = unsafe { std::mem::transmute(n) };
            return f(addr);
        }
        // SAFETY: the system call brk makes; then glibc's record of the break is updated as
        // its own brk does (sbrk relies on it).
        unsafe {
            let got = libc::syscall(libc::SYS_brk, addr) as *mut c_void;
            __curbrk = got;
            if (got as u64) < want {
                *libc::__errno_location() = libc::ENOMEM;
                return -1;
            }
        }
        0
    }

    extern "C" fn hook_shmdt(addr: *const c_void) -> c_int {
        // The segment's size is not known here: everything from its address up (as
        // libfabric's memhooks does).
        notify(addr as u64, u64::MAX - addr as u64, Change::Gone);
        let n = next(SHMDT);
        if n != 0 {
            // SAFETY: as in `hook_munmap`.
            let f: extern "C" fn(*const c_void) -> c_int = unsafe { std::mem::transmute(n) };
            return f(addr);
        }
        // SAFETY: the system call shmdt makes.
        unsafe { libc::syscall(libc::SYS_shmdt, addr) as c_int }
    }

    extern "C" fn hook_shmat(id: c_int, addr: *const c_void, flags: c_int) -> *mut c_void {
        if !addr.is_null() && flags & libc::SHM_REMAP != 0 {
            // SAFETY: IPC_STAT into a zeroed structure.
            let size = unsafe {
                let mut ds: libc::shmid_ds = std::mem::zeroed();
                if libc::shmctl(id, libc::IPC_STAT, &mut ds) == 0 {
                    ds.shm_segsz as u64
                } else {
                    u64::MAX - addr as u64
                }
            };
            let start = if flags & libc::SHM_RND != 0 {
                addr as u64 & !(PAGE as u64 - 1)
            } else {
                addr as u64
            };
            notify(start, size, Change::Gone);
        }
        let n = next(SHMAT);
        if n != 0 {
            // SAFETY: as in `hook_munmap`.
            let f: extern "C" fn(c_int, *const c_void, c_int) -> *mut c_void =
                unsafe { std::mem::transmute(n) };
            return f(id, addr, flags);
        }
        // SAFETY: the system call shmat makes.
        unsafe { libc::syscall(libc::SYS_shmat, id, addr, flags) as *mut c_void }
    }
}
