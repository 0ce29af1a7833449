//! The accesses to process memory: the only code that touches a registered range's bytes.
//!
//! Two ways, chosen once per process ([`init`]):
//!
//! - **Guarded** (x86-64 Linux): loads, stores, `rep movsb` and `rep stosb` in a few
//!   assembly routines whose faulting instruction has a fix-up address. A `SIGSEGV`/`SIGBUS`
//!   handler that finds the faulting instruction pointer on one of them moves it to the
//!   fix-up, which returns "failed"; any other fault goes to the handler that was installed
//!   before ours (or to the default action), as if ours were not there. This is the kernel's
//!   exception-table technique (`copy_from_user`) in user space. Cost: a few nanoseconds, as
//!   a plain `memcpy`.
//! - **Syscall**: `process_vm_readv`/`process_vm_writev` on this process, which return
//!   `EFAULT` for memory that is not mapped. About 0.6 µs a call on the 2-vCPU test VM,
//!   whatever the size up to a few KiB (docs/emu-core-memory.md).
//!
//! If another handler replaces ours later, guarded accesses would no longer be recovered:
//! [`still_guarded`] notices it (every pin asks) and the process switches to syscalls.
//!
//! Every function here takes a raw address and never creates a Rust reference to the
//! memory behind it; the caller ([`super::ProcessMemory`]) has checked the pins, which is
//! what makes an access *allowed*; what makes it *sound* is that a fault cannot escape.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU8, Ordering};

/// How accesses to process memory move bytes in this process.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AccessMode {
    /// Direct loads and stores whose faults are recovered (x86-64 Linux).
    Guarded,
    /// `process_vm_readv` / `process_vm_writev` on this process.
    Syscall,
}

const GUARDED: u8 = 1;
const SYSCALL: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(SYSCALL);

/// Choose the access mode (once, at the first [`super::ProcessMemory::new`]).
pub(super) fn init(force_syscall: bool) {
    let m = if !force_syscall && guarded::install() {
        GUARDED
    } else {
        SYSCALL
    };
    MODE.store(m, Ordering::Release);
}

/// The mode in use.
pub(super) fn mode() -> AccessMode {
    if MODE.load(Ordering::Acquire) == GUARDED {
        AccessMode::Guarded
    } else {
        AccessMode::Syscall
    }
}

fn is_guarded() -> bool {
    MODE.load(Ordering::Acquire) == GUARDED
}

/// Whether guarded accesses are still recovered; switches the process to syscalls when
/// another fault handler replaced ours.
pub(super) fn still_guarded() -> bool {
    if !is_guarded() {
        return false;
    }
    if guarded::installed() {
        return true;
    }
    tracing::warn!(
        "another SIGSEGV/SIGBUS handler replaced nicemu's: process memory is now reached with process_vm_readv/writev"
    );
    MODE.store(SYSCALL, Ordering::Release);
    false
}

fn ptr(addr: u64) -> *mut u8 {
    std::ptr::with_exposed_provenance_mut(addr as usize)
}

/// Copy `buf.len()` bytes from process address `addr` into `buf`.
pub(super) fn read(addr: u64, buf: &mut [u8]) -> Result<(), ()> {
    if is_guarded() {
        // SAFETY: `buf` is valid for writes of its length; the source is read only by the
        // guarded routine, whose faults are recovered (module doc), so an unmapped source
        // cannot crash the process. The source may be stored to concurrently (device
        // memory shared with the program): the copied bytes are then unspecified, which
        // `u8` tolerates.
        return guarded::copy(buf.as_mut_ptr(), ptr(addr), buf.len());
    }
    syscall::transfer(addr, buf.as_mut_ptr(), buf.len(), false)
}

/// Copy `buf` to process address `addr`.
pub(super) fn write(addr: u64, buf: &[u8]) -> Result<(), ()> {
    if is_guarded() {
        // SAFETY: `buf` is valid for reads of its length; the destination is written only by
        // the guarded routine (faults recovered). The destination was registered for device
        // writes by the program, which thereby accepts that the device stores there.
        return guarded::copy(ptr(addr), buf.as_ptr(), buf.len());
    }
    syscall::transfer(addr, buf.as_ptr().cast_mut(), buf.len(), true)
}

/// Set `len` bytes at process address `addr` to `byte`.
pub(super) fn fill(addr: u64, len: u64, byte: u8) -> Result<(), ()> {
    let len = usize::try_from(len).map_err(|_| ())?;
    if is_guarded() {
        // SAFETY: as in `write`.
        return guarded::fill(ptr(addr), byte, len);
    }
    let chunk = [byte; 4096];
    let mut off = 0usize;
    while off < len {
        let n = (len - off).min(chunk.len());
        syscall::transfer(addr + off as u64, chunk.as_ptr().cast_mut(), n, true)?;
        off += n;
    }
    Ok(())
}

/// Load the naturally aligned 8-byte word at `addr` (one load: not torn).
pub(super) fn load_u64(addr: u64) -> Result<u64, ()> {
    if is_guarded() {
        return guarded::load64(ptr(addr));
    }
    let mut b = [0u8; 8];
    syscall::transfer(addr, b.as_mut_ptr(), 8, false)?;
    Ok(u64::from_le_bytes(b))
}

/// Store the naturally aligned 8-byte word at `addr` after every earlier store.
pub(super) fn store_u64_release(addr: u64, v: u64) -> Result<(), ()> {
    if is_guarded() {
        return guarded::store64(ptr(addr), v);
    }
    std::sync::atomic::fence(Ordering::Release);
    let b = v.to_le_bytes();
    syscall::transfer(addr, b.as_ptr().cast_mut(), 8, true)
}

/// Load the naturally aligned 4-byte word at `addr`.
pub(super) fn load_u32(addr: u64) -> Result<u32, ()> {
    if is_guarded() {
        return guarded::load32(ptr(addr));
    }
    let mut b = [0u8; 4];
    syscall::transfer(addr, b.as_mut_ptr(), 4, false)?;
    Ok(u32::from_le_bytes(b))
}

/// Store the naturally aligned 4-byte word at `addr` after every earlier store.
pub(super) fn store_u32_release(addr: u64, v: u32) -> Result<(), ()> {
    if is_guarded() {
        return guarded::store32(ptr(addr), v);
    }
    std::sync::atomic::fence(Ordering::Release);
    let b = v.to_le_bytes();
    syscall::transfer(addr, b.as_ptr().cast_mut(), 4, true)
}

/// Check that every page of `[start, start + len)` (page aligned) is mapped and readable
/// now, reading one byte of each (which also faults it in, as pinning does). `Err(addr)`
/// names the first page that is not.
pub(super) fn probe(start: u64, len: u64) -> Result<(), u64> {
    let pages = len / super::PAGE;
    if is_guarded() && still_guarded() {
        let mut b = [0u8; 1];
        for i in 0..pages {
            let a = start + i * super::PAGE;
            // SAFETY: `b` is a valid 1-byte buffer; the source is read by the guarded
            // routine (faults recovered).
            guarded::copy(b.as_mut_ptr(), ptr(a), 1).map_err(|()| a)?;
        }
        return Ok(());
    }
    syscall::probe(start, pages)
}

/// The system-call path, for tests on any platform.
#[cfg(test)]
pub(super) fn syscall_read(addr: u64, buf: &mut [u8]) -> Result<(), ()> {
    syscall::transfer(addr, buf.as_mut_ptr(), buf.len(), false)
}

/// The system-call path, for tests on any platform.
#[cfg(test)]
pub(super) fn syscall_write(addr: u64, buf: &[u8]) -> Result<(), ()> {
    syscall::transfer(addr, buf.as_ptr().cast_mut(), buf.len(), true)
}

/// The system-call probe, for tests on any platform.
#[cfg(test)]
pub(super) fn syscall_probe(start: u64, pages: u64) -> Result<(), u64> {
    syscall::probe(start, pages)
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod guarded {
    use std::ffi::c_void;
    use std::sync::OnceLock;

    // Each routine: the instruction that may fault is at `<name>_at`, its fix-up at
    // `<name>_fix`; the routine returns 0 in eax when done, 1 after a fault. No stack is
    // used between entry and the faulting instruction, so the fix-up's `ret` returns to the
    // caller. `rep movsb`/`rep stosb` use rdi, rsi, rcx, al (caller-saved in the SysV ABI);
    // the direction flag is clear at every call (ABI).
    std::arch::global_asm!(
        ".pushsection .text.nicemu_procmem,\"ax\",@progbits",
        ".p2align 4",
        ".globl nicemu_procmem_copy",
        ".hidden nicemu_procmem_copy",
        "nicemu_procmem_copy:",
        "    mov rcx, rdx",
        ".globl nicemu_procmem_copy_at",
        ".hidden nicemu_procmem_copy_at",
        "nicemu_procmem_copy_at:",
        "    rep movsb",
        "    xor eax, eax",
        "    ret",
        ".globl nicemu_procmem_copy_fix",
        ".hidden nicemu_procmem_copy_fix",
        "nicemu_procmem_copy_fix:",
        "    mov eax, 1",
        "    ret",
        ".p2align 4",
        ".globl nicemu_procmem_fill",
        ".hidden nicemu_procmem_fill",
        "nicemu_procmem_fill:",
        "    mov rcx, rdx",
        "    mov eax, esi",
        ".globl nicemu_procmem_fill_at",
        ".hidden nicemu_procmem_fill_at",
        "nicemu_procmem_fill_at:",
        "    rep stosb",
        "    xor eax, eax",
        "    ret",
        ".globl nicemu_procmem_fill_fix",
        ".hidden nicemu_procmem_fill_fix",
        "nicemu_procmem_fill_fix:",
        "    mov eax, 1",
        "    ret",
        ".p2align 4",
        ".globl nicemu_procmem_load64",
        ".hidden nicemu_procmem_load64",
        "nicemu_procmem_load64:",
        ".globl nicemu_procmem_load64_at",
        ".hidden nicemu_procmem_load64_at",
        "nicemu_procmem_load64_at:",
        "    mov rax, qword ptr [rdi]",
        "    mov qword ptr [rsi], rax",
        "    xor eax, eax",
        "    ret",
        ".globl nicemu_procmem_load64_fix",
        ".hidden nicemu_procmem_load64_fix",
        "nicemu_procmem_load64_fix:",
        "    mov eax, 1",
        "    ret",
        ".p2align 4",
        ".globl nicemu_procmem_store64",
        ".hidden nicemu_procmem_store64",
        "nicemu_procmem_store64:",
        "    sfence",
        ".globl nicemu_procmem_store64_at",
        ".hidden nicemu_procmem_store64_at",
        "nicemu_procmem_store64_at:",
        "    mov qword ptr [rdi], rsi",
        "    xor eax, eax",
        "    ret",
        ".globl nicemu_procmem_store64_fix",
        ".hidden nicemu_procmem_store64_fix",
        "nicemu_procmem_store64_fix:",
        "    mov eax, 1",
        "    ret",
        ".p2align 4",
        ".globl nicemu_procmem_load32",
        ".hidden nicemu_procmem_load32",
        "nicemu_procmem_load32:",
        ".globl nicemu_procmem_load32_at",
        ".hidden nicemu_procmem_load32_at",
        "nicemu_procmem_load32_at:",
        "    mov eax, dword ptr [rdi]",
        "    mov dword ptr [rsi], eax",
        "    xor eax, eax",
        "    ret",
        ".globl nicemu_procmem_load32_fix",
        ".hidden nicemu_procmem_load32_fix",
        "nicemu_procmem_load32_fix:",
        "    mov eax, 1",
        "    ret",
        ".p2align 4",
        ".globl nicemu_procmem_store32",
        ".hidden nicemu_procmem_store32",
        "nicemu_procmem_store32:",
        "    sfence",
        ".globl nicemu_procmem_store32_at",
        ".hidden nicemu_procmem_store32_at",
        "nicemu_procmem_store32_at:",
        "    mov dword ptr [rdi], esi",
        "    xor eax, eax",
        "    ret",
        ".globl nicemu_procmem_store32_fix",
        ".hidden nicemu_procmem_store32_fix",
        "nicemu_procmem_store32_fix:",
        "    mov eax, 1",
        "    ret",
        ".popsection",
    );

    unsafe extern "C" {
        fn nicemu_procmem_copy(dst: *mut u8, src: *const u8, len: usize) -> u32;
        fn nicemu_procmem_fill(dst: *mut u8, byte: u32, len: usize) -> u32;
        fn nicemu_procmem_load64(src: *const u8, out: *mut u64) -> u32;
        fn nicemu_procmem_store64(dst: *mut u8, v: u64) -> u32;
        fn nicemu_procmem_load32(src: *const u8, out: *mut u32) -> u32;
        fn nicemu_procmem_store32(dst: *mut u8, v: u32) -> u32;
        // Code labels: only their addresses are used, never their bytes.
        safe static nicemu_procmem_copy_at: u8;
        safe static nicemu_procmem_copy_fix: u8;
        safe static nicemu_procmem_fill_at: u8;
        safe static nicemu_procmem_fill_fix: u8;
        safe static nicemu_procmem_load64_at: u8;
        safe static nicemu_procmem_load64_fix: u8;
        safe static nicemu_procmem_store64_at: u8;
        safe static nicemu_procmem_store64_fix: u8;
        safe static nicemu_procmem_load32_at: u8;
        safe static nicemu_procmem_load32_fix: u8;
        safe static nicemu_procmem_store32_at: u8;
        safe static nicemu_procmem_store32_fix: u8;
    }

    /// (faulting instruction, fix-up) of every routine.
    fn fixups() -> [(usize, usize); 6] {
        let a = |p: &'static u8| std::ptr::from_ref(p) as usize;
        [
            (a(&nicemu_procmem_copy_at), a(&nicemu_procmem_copy_fix)),
            (a(&nicemu_procmem_fill_at), a(&nicemu_procmem_fill_fix)),
            (a(&nicemu_procmem_load64_at), a(&nicemu_procmem_load64_fix)),
            (
                a(&nicemu_procmem_store64_at),
                a(&nicemu_procmem_store64_fix),
            ),
            (a(&nicemu_procmem_load32_at), a(&nicemu_procmem_load32_fix)),
            (
                a(&nicemu_procmem_store32_at),
                a(&nicemu_procmem_store32_fix),
            ),
        ]
    }

    /// `dst` and `src` valid or guarded for `len` bytes (see the callers).
    pub(super) fn copy(dst: *mut u8, src: *const u8, len: usize) -> Result<(), ()> {
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the routine reads `len` bytes at `src` and writes `len` at `dst`; the
        // callers pass a Rust buffer on one side and registered process memory on the
        // other, whose faults the handler turns into the return value 1.
        let r = unsafe { nicemu_procmem_copy(dst, src, len) };
        if r == 0 { Ok(()) } else { Err(()) }
    }

    pub(super) fn fill(dst: *mut u8, byte: u8, len: usize) -> Result<(), ()> {
        if len == 0 {
            return Ok(());
        }
        // SAFETY: as in `copy`, for stores only.
        let r = unsafe { nicemu_procmem_fill(dst, u32::from(byte), len) };
        if r == 0 { Ok(()) } else { Err(()) }
    }

    pub(super) fn load64(src: *const u8) -> Result<u64, ()> {
        let mut v = 0u64;
        // SAFETY: `v` is a valid out slot; the load at `src` is guarded.
        let r = unsafe { nicemu_procmem_load64(src, &mut v) };
        if r == 0 { Ok(v) } else { Err(()) }
    }

    pub(super) fn store64(dst: *mut u8, v: u64) -> Result<(), ()> {
        // SAFETY: the store at `dst` is guarded; `sfence` first orders it after every
        // earlier store, string stores included.
        let r = unsafe { nicemu_procmem_store64(dst, v) };
        if r == 0 { Ok(()) } else { Err(()) }
    }

    pub(super) fn load32(src: *const u8) -> Result<u32, ()> {
        let mut v = 0u32;
        // SAFETY: as in `load64`.
        let r = unsafe { nicemu_procmem_load32(src, &mut v) };
        if r == 0 { Ok(v) } else { Err(()) }
    }

    pub(super) fn store32(dst: *mut u8, v: u32) -> Result<(), ()> {
        // SAFETY: as in `store64`.
        let r = unsafe { nicemu_procmem_store32(dst, v) };
        if r == 0 { Ok(()) } else { Err(()) }
    }

    static PREV_SEGV: OnceLock<libc::sigaction> = OnceLock::new();
    static PREV_BUS: OnceLock<libc::sigaction> = OnceLock::new();

    fn handler_address() -> usize {
        on_fault as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) as usize
    }

    /// The fault handler. Async-signal-safe: reads the context, a constant table and the
    /// saved previous actions; calls nothing but the previous handler or `sigaction`.
    extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
        if !ctx.is_null() {
            // SAFETY: for an SA_SIGINFO handler the kernel passes a valid `ucontext_t` as
            // the third argument, ours to modify for the return from the handler.
            let uc = unsafe { &mut *ctx.cast::<libc::ucontext_t>() };
            let rip = &mut uc.uc_mcontext.gregs[libc::REG_RIP as usize];
            for (at, fix) in fixups() {
                if *rip as usize == at {
                    *rip = fix as i64;
                    return;
                }
            }
        }
        chain(sig, info, ctx);
    }

    /// Hand a fault that is not ours to whatever handled it before us.
    fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
        let prev = match sig {
            libc::SIGSEGV => PREV_SEGV.get(),
            libc::SIGBUS => PREV_BUS.get(),
            _ => None,
        };
        match prev {
            Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
                if p.sa_flags & libc::SA_SIGINFO != 0 {
                    // SAFETY: an SA_SIGINFO action's `sa_sigaction` is a function of this
                    // type, installed by its owner for exactly this call.
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
                        unsafe { std::mem::transmute(p.sa_sigaction) };
                    f(sig, info, ctx);
                } else {
                    // SAFETY: a plain action's handler takes the signal number.
                    let f: extern "C" fn(libc::c_int) =
                        unsafe { std::mem::transmute(p.sa_sigaction) };
                    f(sig);
                }
            }
            _ => {
                // The default action: restore it and return; the faulting instruction runs
                // again and the signal now does what it would have done without us.
                // SAFETY: a zeroed `sigaction` with SIG_DFL is a valid action.
                unsafe {
                    let mut dfl: libc::sigaction = std::mem::zeroed();
                    dfl.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(sig, &dfl, std::ptr::null_mut());
                }
            }
        }
    }

    fn install_one(sig: libc::c_int, slot: &OnceLock<libc::sigaction>) -> bool {
        // SAFETY: plain `sigaction` calls with valid, initialised structures.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                return false;
            }
            if old.sa_sigaction == handler_address() {
                return true;
            }
            let _ = slot.set(old);
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler_address();
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut()) == 0
        }
    }

    /// Install the handler for SIGSEGV and SIGBUS (once per process).
    pub(super) fn install() -> bool {
        install_one(libc::SIGSEGV, &PREV_SEGV) && install_one(libc::SIGBUS, &PREV_BUS)
    }

    fn is_ours(sig: libc::c_int) -> bool {
        // SAFETY: a query-only `sigaction` call into a valid structure.
        unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                && cur.sa_sigaction == handler_address()
        }
    }

    /// Whether our handler is still the one installed.
    pub(super) fn installed() -> bool {
        is_ours(libc::SIGSEGV) && is_ours(libc::SIGBUS)
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod guarded {
    pub(super) fn install() -> bool {
        false
    }
    pub(super) fn installed() -> bool {
        false
    }
    pub(super) fn copy(_: *mut u8, _: *const u8, _: usize) -> Result<(), ()> {
        Err(())
    }
    pub(super) fn fill(_: *mut u8, _: u8, _: usize) -> Result<(), ()> {
        Err(())
    }
    pub(super) fn load64(_: *const u8) -> Result<u64, ()> {
        Err(())
    }
    pub(super) fn store64(_: *mut u8, _: u64) -> Result<(), ()> {
        Err(())
    }
    pub(super) fn load32(_: *const u8) -> Result<u32, ()> {
        Err(())
    }
    pub(super) fn store32(_: *mut u8, _: u32) -> Result<(), ()> {
        Err(())
    }
}

mod syscall {
    /// Move `len` bytes between `local` (a valid buffer of ours) and process address
    /// `remote`, with `process_vm_writev` (`write`) or `process_vm_readv`. `Err` when a byte
    /// of the remote range is not mapped with the access.
    pub(super) fn transfer(remote: u64, local: *mut u8, len: usize, write: bool) -> Result<(), ()> {
        let mut done = 0usize;
        while done < len {
            let l = libc::iovec {
                iov_base: local.wrapping_add(done).cast(),
                iov_len: len - done,
            };
            let r = libc::iovec {
                iov_base: super::ptr(remote + done as u64).cast(),
                iov_len: len - done,
            };
            // SAFETY: `l` describes part of the caller's valid buffer; the kernel checks
            // `r` against this process's mappings and fails with EFAULT rather than
            // faulting. No Rust reference to either range exists during the call.
            let n = unsafe {
                let pid = libc::getpid();
                if write {
                    libc::process_vm_writev(pid, &l, 1, &r, 1, 0)
                } else {
                    libc::process_vm_readv(pid, &l, 1, &r, 1, 0)
                }
            };
            if n <= 0 {
                return Err(());
            }
            done += n as usize;
        }
        Ok(())
    }

    /// One byte of each of `pages` pages from `start`, in batches of up to 1024 iovecs.
    pub(super) fn probe(start: u64, pages: u64) -> Result<(), u64> {
        const BATCH: u64 = 1024;
        let mut buf = vec![0u8; BATCH.min(pages) as usize];
        let mut local = Vec::with_capacity(buf.len());
        let mut remote = Vec::with_capacity(buf.len());
        let mut first = 0u64;
        while first < pages {
            let n = BATCH.min(pages - first);
            local.clear();
            remote.clear();
            for i in 0..n {
                local.push(libc::iovec {
                    iov_base: buf.as_mut_ptr().wrapping_add(i as usize).cast(),
                    iov_len: 1,
                });
                remote.push(libc::iovec {
                    iov_base: super::ptr(start + (first + i) * super::super::PAGE).cast(),
                    iov_len: 1,
                });
            }
            // SAFETY: every local iovec is one byte of `buf`; the remote ones are checked
            // by the kernel (EFAULT, no fault).
            let got = unsafe {
                libc::process_vm_readv(
                    libc::getpid(),
                    local.as_ptr(),
                    n as libc::c_ulong,
                    remote.as_ptr(),
                    n as libc::c_ulong,
                    0,
                )
            };
            if got < 0 {
                let e = std::io::Error::last_os_error().raw_os_error();
                if matches!(e, Some(libc::ENOSYS) | Some(libc::EPERM)) {
                    return mincore(start, pages);
                }
                return Err(start + first * super::super::PAGE);
            }
            if (got as u64) < n {
                return Err(start + (first + got as u64) * super::super::PAGE);
            }
            first += n;
        }
        Ok(())
    }

    /// Where `process_vm_readv` is not allowed: that every page is mapped (not that it is
    /// readable).
    fn mincore(start: u64, pages: u64) -> Result<(), u64> {
        let mut vec = vec![0u8; pages as usize];
        // SAFETY: `vec` has one byte per page of the range; mincore fails with ENOMEM for
        // a range that is not mapped and touches no page.
        let r = unsafe {
            libc::mincore(
                super::ptr(start).cast(),
                (pages * super::super::PAGE) as usize,
                vec.as_mut_ptr(),
            )
        };
        if r == 0 { Ok(()) } else { Err(start) }
    }
}
