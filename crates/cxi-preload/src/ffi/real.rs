//! The real libc functions behind the interposed ones: looked up once with
//! `dlsym(RTLD_NEXT, name)` (the next definition after this library: libc's).

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Resolve `name` (NUL-terminated) once; the address is cached in `slot`.
fn lookup(slot: &AtomicUsize, name: &str) -> usize {
    let p = slot.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    let Ok(name) = CStr::from_bytes_with_nul(name.as_bytes()) else {
        return 0;
    };
    // SAFETY: dlsym with the RTLD_NEXT pseudo-handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    slot.store(p, Ordering::Release);
    p
}

/// Declare a real function: `fn name(args) -> ret`, calling the next definition.
macro_rules! real {
    ($( $name:ident ( $($a:ident : $t:ty),* ) -> $r:ty ; )+) => {
        $(
            /// The real function of that name.
            ///
            /// # Safety
            /// As for the libc function.
            pub unsafe fn $name($($a: $t),*) -> $r {
                static SLOT: AtomicUsize = AtomicUsize::new(0);
                let p = lookup(&SLOT, concat!(stringify!($name), "\0"));
                if p == 0 {
                    super::set_errno(libc::ENOSYS);
                    return fail::<$r>();
                }
                // SAFETY: `p` is libc's definition of this symbol, whose C signature is the
                // one declared here.
                let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { std::mem::transmute(p) };
                // SAFETY: the caller upholds the function's contract.
                unsafe { f($($a),*) }
            }
        )+
    };
}

/// What a missing function returns.
fn fail<R: Failure>() -> R {
    R::failure()
}

/// The failure value of a return type.
pub trait Failure {
    /// `-1`, `NULL`, `MAP_FAILED`, ...
    fn failure() -> Self;
}
impl Failure for c_int {
    fn failure() -> Self {
        -1
    }
}
impl Failure for isize {
    fn failure() -> Self {
        -1
    }
}
impl Failure for i64 {
    fn failure() -> Self {
        -1
    }
}
impl Failure for *mut c_void {
    fn failure() -> Self {
        libc::MAP_FAILED
    }
}
impl Failure for *mut c_char {
    fn failure() -> Self {
        std::ptr::null_mut()
    }
}
impl Failure for *mut libc::FILE {
    fn failure() -> Self {
        std::ptr::null_mut()
    }
}
impl Failure for *mut libc::DIR {
    fn failure() -> Self {
        std::ptr::null_mut()
    }
}
impl Failure for *mut libc::dirent {
    fn failure() -> Self {
        std::ptr::null_mut()
    }
}
impl Failure for libc::sighandler_t {
    fn failure() -> Self {
        libc::SIG_ERR
    }
}
impl Failure for *mut libc::dirent64 {
    fn failure() -> Self {
        std::ptr::null_mut()
    }
}

/// `glob`'s error callback.
pub type GlobErr = Option<unsafe extern "C" fn(*const c_char, c_int) -> c_int>;

real! {
    open(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int;
    open64(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int;
    openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int;
    openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int;
    __open_2(path: *const c_char, flags: c_int) -> c_int;
    __open64_2(path: *const c_char, flags: c_int) -> c_int;
    __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
    __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
    close(fd: c_int) -> c_int;
    write(fd: c_int, buf: *const c_void, n: usize) -> isize;
    read(fd: c_int, buf: *mut c_void, n: usize) -> isize;
    pread(fd: c_int, buf: *mut c_void, n: usize, off: libc::off_t) -> isize;
    pread64(fd: c_int, buf: *mut c_void, n: usize, off: libc::off64_t) -> isize;
    mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: libc::off_t) -> *mut c_void;
    mmap64(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: libc::off64_t) -> *mut c_void;
    munmap(addr: *mut c_void, len: usize) -> c_int;
    syscall(n: libc::c_long, a1: libc::c_long, a2: libc::c_long, a3: libc::c_long, a4: libc::c_long, a5: libc::c_long, a6: libc::c_long) -> libc::c_long;
    fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE;
    fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE;
    access(path: *const c_char, mode: c_int) -> c_int;
    faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int;
    stat(path: *const c_char, buf: *mut libc::stat) -> c_int;
    stat64(path: *const c_char, buf: *mut libc::stat64) -> c_int;
    lstat(path: *const c_char, buf: *mut libc::stat) -> c_int;
    lstat64(path: *const c_char, buf: *mut libc::stat64) -> c_int;
    fstatat(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int;
    fstatat64(dirfd: c_int, path: *const c_char, buf: *mut libc::stat64, flags: c_int) -> c_int;
    __xstat(ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int;
    __xstat64(ver: c_int, path: *const c_char, buf: *mut libc::stat64) -> c_int;
    __lxstat(ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int;
    __lxstat64(ver: c_int, path: *const c_char, buf: *mut libc::stat64) -> c_int;
    statx(dirfd: c_int, path: *const c_char, flags: c_int, mask: libc::c_uint, buf: *mut libc::statx) -> c_int;
    realpath(path: *const c_char, out: *mut c_char) -> *mut c_char;
    __realpath_chk(path: *const c_char, out: *mut c_char, outlen: usize) -> *mut c_char;
    canonicalize_file_name(path: *const c_char) -> *mut c_char;
    readlink(path: *const c_char, buf: *mut c_char, n: usize) -> isize;
    readlinkat(dirfd: c_int, path: *const c_char, buf: *mut c_char, n: usize) -> isize;
    glob(pattern: *const c_char, flags: c_int, errfunc: GlobErr, pglob: *mut libc::glob_t) -> c_int;
    glob64(pattern: *const c_char, flags: c_int, errfunc: GlobErr, pglob: *mut libc::glob64_t) -> c_int;
    opendir(path: *const c_char) -> *mut libc::DIR;
    readdir(d: *mut libc::DIR) -> *mut libc::dirent;
    readdir64(d: *mut libc::DIR) -> *mut libc::dirent64;
    closedir(d: *mut libc::DIR) -> c_int;
    sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
    signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t;
}
