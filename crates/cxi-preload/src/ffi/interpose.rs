//! The interposed libc functions. Each one first decides cheaply whether the call is ours
//! (a path under `/sys/` or `/dev/cxi`, a descriptor marked in [`crate::device::kind`], an
//! address in the mapping table) and otherwise calls the real function unchanged.
//!
//! `open` and `openat` are variadic in C; they are defined here with the mode as a named
//! third (fourth) argument, which on the x86-64 and AArch64 Linux calling conventions is
//! passed where a variadic argument is; it is only read when `O_CREAT` or `O_TMPFILE` is set,
//! i.e. when the caller passed it.
//!
//! Paths must be absolute to be ours: libcxi, the CXI provider and their tools name sysfs
//! files by absolute paths (docs/real-cxi.md).

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::Once;

use super::{cookie, os, real, set_errno};
use crate::content;
use crate::device::{self, Kind, LiveFiles};
use crate::sysfs::{self, FileId, Node, Resolved, WalkError};

/// A path argument as text, when it may be one of ours.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn ours(p: *const c_char) -> Option<&'static str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller passes a NUL-terminated string (libc's contract for the path
    // argument); it is read, not kept beyond the call.
    let b = unsafe { CStr::from_ptr(p) }.to_bytes();
    if !sysfs::maybe_ours(b) {
        return None;
    }
    // The str borrows the caller's buffer for the duration of the interposed call only.
    std::str::from_utf8(b).ok().map(|s| {
        // SAFETY: the bytes stay valid and unchanged while the call runs (the caller owns
        // them); the 'static lifetime is never used beyond the call.
        unsafe { std::mem::transmute::<&str, &'static str>(s) }
    })
}

enum Virt {
    Real,
    Err(i32),
    Node(Resolved),
}

/// Where `p` leads in the tree.
///
/// # Safety
/// As [`ours`].
unsafe fn resolve(p: *const c_char, follow: bool) -> Virt {
    // SAFETY: forwarded contract.
    let Some(path) = (unsafe { ours(p) }) else {
        return Virt::Real;
    };
    match sysfs::walk(path, follow, &LiveFiles) {
        Ok(r) => Virt::Node(r),
        Err(WalkError::Real) => Virt::Real,
        Err(WalkError::NoEntry) => Virt::Err(libc::ENOENT),
        Err(WalkError::NotDir) => Virt::Err(libc::ENOTDIR),
        Err(WalkError::Loop) => Virt::Err(libc::ELOOP),
    }
}

fn fail<T>(e: i32, v: T) -> T {
    set_errno(e);
    v
}

/// The bytes of a file of the tree (building the node when they need the device).
fn file_bytes(id: &FileId) -> Result<Vec<u8>, i32> {
    let node;
    let dev = if content::needs_device(id) {
        node = crate::node::get().map_err(|_| libc::ENODEV)?;
        node.device(0)
    } else {
        None
    };
    content::bytes(id, dev).ok_or(libc::EIO)
}

fn register_exit() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        extern "C" fn at_exit() {
            crate::node::finalize();
        }
        // SAFETY: registering a plain function with no captured state.
        unsafe { libc::atexit(at_exit) };
    });
}

/// At load, with `NICEMU_CXI_JOIN=start` ([`crate::node::JOIN_VAR`]): bring the node up (and
/// join the job's fabric) in a thread of its own, so that the device exists from the start as a
/// real NIC does, instead of on the first open of `/dev/cxi0`. Programs that talk to their peer
/// over a socket before they open the device (fabtests, libcxi's utilities) would otherwise wait
/// for that peer while it waits in the collective join.
extern "C" fn join_at_start() {
    if !crate::node::join_at_start() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("nicemu-cxi-join".into())
        .spawn(|| {
            if crate::node::get().is_ok() {
                register_exit();
            }
        });
}

// SAFETY: a constructor the dynamic loader calls once, after the C library is initialised;
// it only reads the environment and starts a thread.
#[used]
#[unsafe(link_section = ".init_array")]
static JOIN_AT_START: extern "C" fn() = join_at_start;

/// `open` of a path of the tree: `None` when the path is not ours.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
unsafe fn open_virtual(path: *const c_char, flags: c_int) -> Option<c_int> {
    // SAFETY: forwarded contract.
    let r = match unsafe { resolve(path, flags & libc::O_NOFOLLOW == 0) } {
        Virt::Real => return None,
        Virt::Err(e) => return Some(fail(e, -1)),
        Virt::Node(r) => r,
    };
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let acc = flags & libc::O_ACCMODE;
    Some(match r.node {
        Node::CharDev => {
            let fd = match os::memfd_with(c"cxi0", &[], cloexec) {
                Ok(fd) => fd,
                Err(e) => return Some(fail(e.raw_os_error().unwrap_or(libc::EIO), -1)),
            };
            match device::open_device(fd) {
                Ok(()) => {
                    register_exit();
                    fd
                }
                Err(e) => {
                    // SAFETY: closing the memfd made just above, handed to nobody.
                    unsafe { real::close(fd) };
                    fail(e, -1)
                }
            }
        }
        Node::Dir(_) if acc != libc::O_RDONLY => fail(libc::EISDIR, -1),
        // Directories of the tree are not opened (listings are not served).
        Node::Dir(_) => fail(libc::EACCES, -1),
        Node::Link(_) => fail(libc::ELOOP, -1),
        Node::File(_) if flags & libc::O_DIRECTORY != 0 => fail(libc::ENOTDIR, -1),
        Node::File(FileId::Intr { client, wait }) => {
            if acc != libc::O_RDONLY {
                return Some(fail(libc::EACCES, -1));
            }
            match device::open_intr(client, wait, cloexec) {
                Ok(fd) => fd,
                Err(e) => fail(e, -1),
            }
        }
        Node::File(id) => {
            let writes = acc != libc::O_RDONLY;
            if writes && !id.writable() {
                return Some(fail(libc::EACCES, -1));
            }
            let bytes = if flags & libc::O_TRUNC != 0 && writes {
                Vec::new()
            } else {
                match file_bytes(&id) {
                    Ok(b) => b,
                    Err(e) => return Some(fail(e, -1)),
                }
            };
            match os::memfd_with(c"sysfs", &bytes, cloexec) {
                Ok(fd) => {
                    if writes {
                        device::open_attr(fd, id);
                    }
                    fd
                }
                Err(e) => fail(e.raw_os_error().unwrap_or(libc::EIO), -1),
            }
        }
    })
}

/// `open(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    // SAFETY: libc's contract for `path`.
    match unsafe { open_virtual(path, flags) } {
        Some(r) => r,
        // SAFETY: forwarding the caller's arguments.
        None => unsafe { real::open(path, flags, mode) },
    }
}

/// `open64(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: libc::mode_t) -> c_int {
    // SAFETY: as `open`.
    match unsafe { open_virtual(path, flags) } {
        Some(r) => r,
        // SAFETY: forwarding.
        None => unsafe { real::open64(path, flags, mode) },
    }
}

/// `__open_2` (fortified `open`).
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as `open`.
    match unsafe { open_virtual(path, flags) } {
        Some(r) => r,
        // SAFETY: forwarding.
        None => unsafe { real::__open_2(path, flags) },
    }
}

/// `__open64_2`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as `open`.
    match unsafe { open_virtual(path, flags) } {
        Some(r) => r,
        // SAFETY: forwarding.
        None => unsafe { real::__open64_2(path, flags) },
    }
}

/// `openat(2)`: ours for an absolute path.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
) -> c_int {
    // SAFETY: as `open`.
    match unsafe { open_virtual(path, flags) } {
        Some(r) => r,
        // SAFETY: forwarding.
        None => unsafe { real::openat(dirfd, path, flags, mode) },
    }
}

/// `openat64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
) -> c_int {
    // SAFETY: as `open`.
    match unsafe { open_virtual(path, flags) } {
        Some(r) => r,
        // SAFETY: forwarding.
        None => unsafe { real::openat64(dirfd, path, flags, mode) },
    }
}

/// `__openat_2`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as `open`.
    match unsafe { open_virtual(path, flags) } {
        Some(r) => r,
        // SAFETY: forwarding.
        None => unsafe { real::__openat_2(dirfd, path, flags) },
    }
}

/// `__openat64_2`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: as `open`.
    match unsafe { open_virtual(path, flags) } {
        Some(r) => r,
        // SAFETY: forwarding.
        None => unsafe { real::__openat64_2(dirfd, path, flags) },
    }
}

/// `close(2)`: a device file releases its client first, an attribute stores what was
/// written.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if device::kind(fd) != Kind::None && !device::close(fd) {
        // SAFETY: closing the caller's descriptor, as asked.
        unsafe { real::close(fd) };
        return fail(libc::EINVAL, -1);
    }
    // SAFETY: forwarding.
    unsafe { real::close(fd) }
}

/// `write(2)`: on `/dev/cxi0`, one uAPI request.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    match device::kind(fd) {
        Kind::Device => match device::write(fd, buf as u64, n) {
            Ok(n) => n as isize,
            Err(e) => fail(e, -1),
        },
        // A wait object's file has no store.
        Kind::Intr => fail(libc::EIO, -1),
        // SAFETY: forwarding.
        _ => unsafe { real::write(fd, buf, n) },
    }
}

/// A read of an `intr` file into the caller's buffer.
///
/// # Safety
/// `buf` holds `n` writable bytes.
unsafe fn intr_read(fd: c_int, buf: *mut c_void, n: usize, off: Option<usize>) -> isize {
    if buf.is_null() && n > 0 {
        return fail(libc::EFAULT, -1);
    }
    let mut local = [0u8; 1];
    let got = device::read_intr(fd, off, &mut local[..n.min(1)]);
    if got > 0 {
        // SAFETY: `buf` holds at least `n >= got` bytes (caller's contract).
        unsafe { *(buf as *mut u8) = local[0] };
    }
    got as isize
}

/// `read(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    match device::kind(fd) {
        // `/dev/cxiN` has no read (ucxi_fops): EINVAL.
        Kind::Device => fail(libc::EINVAL, -1),
        // SAFETY: caller's buffer contract.
        Kind::Intr => unsafe { intr_read(fd, buf, n, None) },
        // SAFETY: forwarding.
        _ => unsafe { real::read(fd, buf, n) },
    }
}

/// `pread(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: usize, off: libc::off_t) -> isize {
    match device::kind(fd) {
        Kind::Device => fail(libc::EINVAL, -1),
        // SAFETY: caller's buffer contract.
        Kind::Intr => unsafe { intr_read(fd, buf, n, Some(off.max(0) as usize)) },
        // SAFETY: forwarding.
        _ => unsafe { real::pread(fd, buf, n, off) },
    }
}

/// `pread64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread64(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    off: libc::off64_t,
) -> isize {
    match device::kind(fd) {
        Kind::Device => fail(libc::EINVAL, -1),
        // SAFETY: caller's buffer contract.
        Kind::Intr => unsafe { intr_read(fd, buf, n, Some(off.max(0) as usize)) },
        // SAFETY: forwarding.
        _ => unsafe { real::pread64(fd, buf, n, off) },
    }
}

fn map_device(fd: c_int, flags: c_int, off: i64, len: usize) -> *mut c_void {
    if flags & libc::MAP_FIXED != 0 || off < 0 {
        return fail(libc::EINVAL, libc::MAP_FAILED);
    }
    match device::mmap(fd, off as u64, len) {
        Ok(device::Mapped::Existing(a) | device::Mapped::Bell(a)) => a as *mut c_void,
        Err(e) => fail(e, libc::MAP_FAILED),
    }
}

/// `mmap(2)`: a token of `/dev/cxi0`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut c_void {
    if fd >= 0 && device::kind(fd) == Kind::Device {
        return map_device(fd, flags, off, len);
    }
    // SAFETY: forwarding.
    unsafe { real::mmap(addr, len, prot, flags, fd, off) }
}

/// `mmap64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off64_t,
) -> *mut c_void {
    if fd >= 0 && device::kind(fd) == Kind::Device {
        return map_device(fd, flags, off, len);
    }
    // SAFETY: forwarding.
    unsafe { real::mmap64(addr, len, prot, flags, fd, off) }
}

/// `munmap(2)`: a mapping of `/dev/cxi0` goes back to the driver.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
    if device::munmap(addr as usize, len) {
        return 0;
    }
    // SAFETY: forwarding.
    unsafe { real::munmap(addr, len) }
}

/// `syscall(3)`: `SYS_mmap` of `/dev/cxi0` and `SYS_munmap` of one of its mappings are the
/// device's, as `mmap`/`munmap` are; every other call goes to the C library's `syscall`.
///
/// libfabric's `memhooks` memory monitor (`prov/util/src/util_mem_hooks.c`) overwrites the
/// first bytes of the `mmap` and `munmap` that `dlsym(RTLD_NEXT)` finds with a jump to its
/// own functions, which make the system call with `syscall(SYS_mmap, ...)`. When libfabric is
/// linked into the program (the provider's `cxitest`), that `mmap` is this library's, so the
/// device's mappings arrive here.
///
/// The C prototype is variadic; on x86-64 the six integer arguments after the number are
/// passed where a non-variadic function with seven `long` parameters reads them (registers,
/// then the stack), and arguments a caller did not pass are only forwarded, never used.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(
    n: libc::c_long,
    a1: libc::c_long,
    a2: libc::c_long,
    a3: libc::c_long,
    a4: libc::c_long,
    a5: libc::c_long,
    a6: libc::c_long,
) -> libc::c_long {
    if n == libc::SYS_mmap
        && let Ok(fd) = c_int::try_from(a5)
        && fd >= 0
        && device::kind(fd) == Kind::Device
    {
        return map_device(fd, a4 as c_int, a6, a2 as usize) as libc::c_long;
    }
    if n == libc::SYS_munmap && device::munmap(a1 as usize, a2 as usize) {
        return 0;
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real::syscall(n, a1, a2, a3, a4, a5, a6) }
}

/// `fopen(3)`: a `FILE` over a file of the tree.
///
/// # Safety
/// `path` is NULL or NUL-terminated; `mode` is NUL-terminated.
unsafe fn fopen_virtual(path: *const c_char, mode: *const c_char) -> Option<*mut libc::FILE> {
    // SAFETY: forwarded contract.
    let r = match unsafe { resolve(path, true) } {
        Virt::Real => return None,
        Virt::Err(e) => return Some(fail(e, std::ptr::null_mut())),
        Virt::Node(r) => r,
    };
    if mode.is_null() {
        return Some(fail(libc::EINVAL, std::ptr::null_mut()));
    }
    // SAFETY: `mode` is NUL-terminated (libc's contract).
    let m = unsafe { CStr::from_ptr(mode) }.to_bytes();
    let writes = m.iter().any(|c| matches!(c, b'w' | b'a' | b'+'));
    Some(match r.node {
        Node::File(FileId::Intr { .. }) | Node::CharDev => fail(libc::EACCES, std::ptr::null_mut()),
        Node::File(id) => {
            if writes && !id.writable() {
                return Some(fail(libc::EACCES, std::ptr::null_mut()));
            }
            let data = if m.first() == Some(&b'w') {
                Vec::new()
            } else {
                match file_bytes(&id) {
                    Ok(b) => b,
                    Err(e) => return Some(fail(e, std::ptr::null_mut())),
                }
            };
            // SAFETY: `mode` is the caller's NUL-terminated mode, not NULL (checked above).
            unsafe { cookie::open(id, data, writes, mode) }
        }
        Node::Dir(_) => fail(libc::EISDIR, std::ptr::null_mut()),
        Node::Link(_) => fail(libc::ELOOP, std::ptr::null_mut()),
    })
}

/// `fopen(3)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: libc's contract.
    match unsafe { fopen_virtual(path, mode) } {
        Some(f) => f,
        // SAFETY: forwarding.
        None => unsafe { real::fopen(path, mode) },
    }
}

/// `fopen64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: libc's contract.
    match unsafe { fopen_virtual(path, mode) } {
        Some(f) => f,
        // SAFETY: forwarding.
        None => unsafe { real::fopen64(path, mode) },
    }
}

/// `access(2)` on a node of the tree.
fn access_node(node: &Node, mode: c_int) -> c_int {
    let dir = matches!(node, Node::Dir(_));
    let writable = matches!(node, Node::File(id) if id.writable()) || matches!(node, Node::CharDev);
    if (mode & libc::W_OK != 0 && !writable) || (mode & libc::X_OK != 0 && !dir) {
        return fail(libc::EACCES, -1);
    }
    0
}

/// `access(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: libc's contract.
    match unsafe { resolve(path, true) } {
        Virt::Node(r) => access_node(&r.node, mode),
        Virt::Err(e) => fail(e, -1),
        // SAFETY: forwarding.
        Virt::Real => unsafe { real::access(path, mode) },
    }
}

/// `faccessat(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn faccessat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: libc's contract.
    match unsafe { resolve(path, flags & libc::AT_SYMLINK_NOFOLLOW == 0) } {
        Virt::Node(r) => access_node(&r.node, mode),
        Virt::Err(e) => fail(e, -1),
        // SAFETY: forwarding.
        Virt::Real => unsafe { real::faccessat(dirfd, path, mode, flags) },
    }
}

/// The `stat` of a node: (mode, size, inode, rdev).
fn stat_of(r: &Resolved) -> (u32, i64, u64, u64) {
    let ino = r.canonical.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    match &r.node {
        Node::Dir(_) => (libc::S_IFDIR | 0o755, 0, ino, 0),
        Node::Link(t) => (libc::S_IFLNK | 0o777, t.len() as i64, ino, 0),
        // `/dev/cxi0`: char device, major of the cxi_user class (our choice: 240), mode 0666.
        Node::CharDev => (libc::S_IFCHR | 0o666, 0, ino, libc::makedev(240, 0)),
        // BAR0 of a PF is 2 GiB; libcxi takes a smaller resource0 for a VF.
        Node::File(FileId::Pci("resource0")) => (
            libc::S_IFREG | 0o600,
            firmware_spec::cassini::pci::BAR0_SIZE_PF as i64,
            ino,
            0,
        ),
        Node::File(id) => (
            libc::S_IFREG | if id.writable() { 0o644 } else { 0o444 },
            4096,
            ino,
            0,
        ),
    }
}

/// The device number of the emulated sysfs.
const SYSFS_DEV: u64 = 0x16;

fn fill_stat(r: &Resolved, st: &mut libc::stat) {
    let (mode, size, ino, rdev) = stat_of(r);
    // SAFETY: libc::stat is plain data; all-zero is a valid value.
    *st = unsafe { std::mem::zeroed() };
    st.st_dev = SYSFS_DEV;
    st.st_ino = ino;
    st.st_mode = mode;
    st.st_nlink = if mode & libc::S_IFMT == libc::S_IFDIR {
        2
    } else {
        1
    };
    st.st_rdev = rdev;
    st.st_size = size;
    st.st_blksize = 4096;
    st.st_blocks = (size + 511) / 512;
}

fn fill_stat64(r: &Resolved, st: &mut libc::stat64) {
    let (mode, size, ino, rdev) = stat_of(r);
    // SAFETY: libc::stat64 is plain data; all-zero is a valid value.
    *st = unsafe { std::mem::zeroed() };
    st.st_dev = SYSFS_DEV;
    st.st_ino = ino;
    st.st_mode = mode;
    st.st_nlink = if mode & libc::S_IFMT == libc::S_IFDIR {
        2
    } else {
        1
    };
    st.st_rdev = rdev;
    st.st_size = size;
    st.st_blksize = 4096;
    st.st_blocks = (size + 511) / 512;
}

/// `stat` into `buf`: `None` when not ours.
///
/// # Safety
/// `path` NULL or NUL-terminated; `buf` valid for writes when the path is ours.
unsafe fn stat_virtual(path: *const c_char, follow: bool, buf: *mut libc::stat) -> Option<c_int> {
    // SAFETY: forwarded.
    Some(match unsafe { resolve(path, follow) } {
        Virt::Real => return None,
        Virt::Err(e) => fail(e, -1),
        Virt::Node(r) => {
            if buf.is_null() {
                return Some(fail(libc::EFAULT, -1));
            }
            // SAFETY: the caller's stat buffer.
            fill_stat(&r, unsafe { &mut *buf });
            0
        }
    })
}

/// `stat64` into `buf`.
///
/// # Safety
/// As [`stat_virtual`].
unsafe fn stat64_virtual(
    path: *const c_char,
    follow: bool,
    buf: *mut libc::stat64,
) -> Option<c_int> {
    // SAFETY: forwarded.
    Some(match unsafe { resolve(path, follow) } {
        Virt::Real => return None,
        Virt::Err(e) => fail(e, -1),
        Virt::Node(r) => {
            if buf.is_null() {
                return Some(fail(libc::EFAULT, -1));
            }
            // SAFETY: the caller's stat buffer.
            fill_stat64(&r, unsafe { &mut *buf });
            0
        }
    })
}

/// `stat(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat_virtual(path, true, buf) }.unwrap_or_else(|| {
        // SAFETY: forwarding.
        unsafe { real::stat(path, buf) }
    })
}

/// `stat64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat64_virtual(path, true, buf) }.unwrap_or_else(|| {
        // SAFETY: forwarding.
        unsafe { real::stat64(path, buf) }
    })
}

/// `lstat(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat_virtual(path, false, buf) }.unwrap_or_else(|| {
        // SAFETY: forwarding.
        unsafe { real::lstat(path, buf) }
    })
}

/// `lstat64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat64_virtual(path, false, buf) }.unwrap_or_else(|| {
        // SAFETY: forwarding.
        unsafe { real::lstat64(path, buf) }
    })
}

/// `fstatat(2)`: ours for an absolute path.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat_virtual(path, flags & libc::AT_SYMLINK_NOFOLLOW == 0, buf) }.unwrap_or_else(
        || {
            // SAFETY: forwarding.
            unsafe { real::fstatat(dirfd, path, buf, flags) }
        },
    )
}

/// `fstatat64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat64(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat64,
    flags: c_int,
) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat64_virtual(path, flags & libc::AT_SYMLINK_NOFOLLOW == 0, buf) }.unwrap_or_else(
        || {
            // SAFETY: forwarding.
            unsafe { real::fstatat64(dirfd, path, buf, flags) }
        },
    )
}

/// `__xstat` (glibc before 2.33 compiled `stat` to this).
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xstat(ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat_virtual(path, true, buf) }.unwrap_or_else(|| {
        // SAFETY: forwarding.
        unsafe { real::__xstat(ver, path, buf) }
    })
}

/// `__xstat64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __xstat64(
    ver: c_int,
    path: *const c_char,
    buf: *mut libc::stat64,
) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat64_virtual(path, true, buf) }.unwrap_or_else(|| {
        // SAFETY: forwarding.
        unsafe { real::__xstat64(ver, path, buf) }
    })
}

/// `__lxstat`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __lxstat(ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat_virtual(path, false, buf) }.unwrap_or_else(|| {
        // SAFETY: forwarding.
        unsafe { real::__lxstat(ver, path, buf) }
    })
}

/// `__lxstat64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __lxstat64(
    ver: c_int,
    path: *const c_char,
    buf: *mut libc::stat64,
) -> c_int {
    // SAFETY: libc's contract.
    unsafe { stat64_virtual(path, false, buf) }.unwrap_or_else(|| {
        // SAFETY: forwarding.
        unsafe { real::__lxstat64(ver, path, buf) }
    })
}

/// `statx(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buf: *mut libc::statx,
) -> c_int {
    // SAFETY: libc's contract.
    match unsafe { resolve(path, flags & libc::AT_SYMLINK_NOFOLLOW == 0) } {
        Virt::Real => {
            // SAFETY: forwarding.
            unsafe { real::statx(dirfd, path, flags, mask, buf) }
        }
        Virt::Err(e) => fail(e, -1),
        Virt::Node(r) => {
            if buf.is_null() {
                return fail(libc::EFAULT, -1);
            }
            let (mode, size, ino, rdev) = stat_of(&r);
            // SAFETY: the caller's statx buffer; libc::statx is plain data.
            let b = unsafe { &mut *buf };
            // SAFETY: all-zero is a valid statx.
            *b = unsafe { std::mem::zeroed() };
            b.stx_mask = libc::STATX_BASIC_STATS;
            b.stx_blksize = 4096;
            b.stx_nlink = if mode & libc::S_IFMT == libc::S_IFDIR {
                2
            } else {
                1
            };
            b.stx_mode = mode as u16;
            b.stx_ino = ino;
            b.stx_size = size as u64;
            b.stx_blocks = (size as u64).div_ceil(512);
            b.stx_rdev_major = libc::major(rdev);
            b.stx_rdev_minor = libc::minor(rdev);
            b.stx_dev_major = libc::major(SYSFS_DEV);
            b.stx_dev_minor = libc::minor(SYSFS_DEV);
            0
        }
    }
}

/// The canonical path of `path` in a fresh `malloc`ed string, or into `out` (which holds
/// `cap` bytes, `PATH_MAX` for `realpath`).
///
/// # Safety
/// `out` is NULL or holds `cap` writable bytes.
unsafe fn put_path(canonical: &str, out: *mut c_char, cap: usize) -> *mut c_char {
    let bytes = canonical.as_bytes();
    let dst = if out.is_null() {
        // SAFETY: malloc of the string and its NUL; the caller frees it (realpath's
        // contract).
        let p = unsafe { libc::malloc(bytes.len() + 1) } as *mut c_char;
        if p.is_null() {
            return fail(libc::ENOMEM, std::ptr::null_mut());
        }
        p
    } else {
        if bytes.len() + 1 > cap {
            return fail(libc::ENAMETOOLONG, std::ptr::null_mut());
        }
        out
    };
    // SAFETY: `dst` holds at least len + 1 bytes (allocated, or checked against `cap`).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.cast(), bytes.len());
        *dst.add(bytes.len()) = 0;
    }
    dst
}

/// `realpath(3)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realpath(path: *const c_char, out: *mut c_char) -> *mut c_char {
    // SAFETY: libc's contract.
    match unsafe { resolve(path, true) } {
        // SAFETY: `out` is NULL or PATH_MAX bytes (realpath's contract).
        Virt::Node(r) => unsafe { put_path(&r.canonical, out, libc::PATH_MAX as usize) },
        Virt::Err(e) => fail(e, std::ptr::null_mut()),
        // SAFETY: forwarding.
        Virt::Real => unsafe { real::realpath(path, out) },
    }
}

/// `__realpath_chk` (fortified `realpath`).
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __realpath_chk(
    path: *const c_char,
    out: *mut c_char,
    outlen: usize,
) -> *mut c_char {
    // SAFETY: libc's contract.
    match unsafe { resolve(path, true) } {
        // SAFETY: `out` holds `outlen` bytes.
        Virt::Node(r) => unsafe { put_path(&r.canonical, out, outlen) },
        Virt::Err(e) => fail(e, std::ptr::null_mut()),
        // SAFETY: forwarding.
        Virt::Real => unsafe { real::__realpath_chk(path, out, outlen) },
    }
}

/// `canonicalize_file_name(3)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn canonicalize_file_name(path: *const c_char) -> *mut c_char {
    // SAFETY: libc's contract.
    match unsafe { resolve(path, true) } {
        // SAFETY: a malloc'ed result.
        Virt::Node(r) => unsafe { put_path(&r.canonical, std::ptr::null_mut(), 0) },
        Virt::Err(e) => fail(e, std::ptr::null_mut()),
        // SAFETY: forwarding.
        Virt::Real => unsafe { real::canonicalize_file_name(path) },
    }
}

/// `readlink` of a node.
///
/// # Safety
/// `buf` holds `n` writable bytes.
unsafe fn readlink_node(r: &Resolved, buf: *mut c_char, n: usize) -> isize {
    match &r.node {
        Node::Link(t) => {
            let k = t.len().min(n);
            if k > 0 && buf.is_null() {
                return fail(libc::EFAULT, -1);
            }
            // SAFETY: `buf` holds `n >= k` bytes.
            unsafe { std::ptr::copy_nonoverlapping(t.as_ptr(), buf.cast(), k) };
            k as isize
        }
        _ => fail(libc::EINVAL, -1),
    }
}

/// `readlink(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, n: usize) -> isize {
    // SAFETY: libc's contract.
    match unsafe { resolve(path, false) } {
        // SAFETY: `buf` holds `n` bytes.
        Virt::Node(r) => unsafe { readlink_node(&r, buf, n) },
        Virt::Err(e) => fail(e, -1),
        // SAFETY: forwarding.
        Virt::Real => unsafe { real::readlink(path, buf, n) },
    }
}

/// `readlinkat(2)`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    n: usize,
) -> isize {
    // SAFETY: libc's contract.
    match unsafe { resolve(path, false) } {
        // SAFETY: `buf` holds `n` bytes.
        Virt::Node(r) => unsafe { readlink_node(&r, buf, n) },
        Virt::Err(e) => fail(e, -1),
        // SAFETY: forwarding.
        Virt::Real => unsafe { real::readlinkat(dirfd, path, buf, n) },
    }
}

/// The fields `glob` fills, shared by `glob_t` and `glob64_t` (same layout up to the
/// callbacks, which are not used here).
struct GlobView {
    pathc: *mut usize,
    pathv: *mut *mut *mut c_char,
    offs: usize,
}

/// Append the tree's matches `extra` to what the real `glob` returned (`rc`), keeping
/// glibc's layout: `gl_pathv` `malloc`ed with `gl_offs` NULL slots first, each string
/// `malloc`ed (so `globfree` frees them), NULL-terminated, the entries of this call sorted
/// unless `GLOB_NOSORT`.
///
/// # Safety
/// `g` points into the caller's glob structure after the real `glob` ran with `flags`.
unsafe fn glob_merge(rc: c_int, flags: c_int, g: GlobView, extra: Vec<String>) -> c_int {
    if rc != 0 && rc != libc::GLOB_NOMATCH && rc != libc::GLOB_ABORTED {
        return rc;
    }
    // After a failure without GLOB_APPEND glibc leaves the structure empty.
    // SAFETY: the caller's structure.
    let (mut pathc, mut pathv) = unsafe { (*g.pathc, *g.pathv) };
    if rc != 0 && flags & libc::GLOB_APPEND == 0 {
        pathc = 0;
        pathv = std::ptr::null_mut();
    }
    // What the real glob found, to avoid duplicates.
    let mut have = Vec::new();
    for i in 0..pathc {
        // SAFETY: gl_pathv holds offs + pathc valid strings.
        let s = unsafe { *pathv.add(g.offs + i) };
        if !s.is_null() {
            // SAFETY: a NUL-terminated string of the structure.
            have.push(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned());
        }
    }
    let mut add: Vec<String> = extra.into_iter().filter(|e| !have.contains(e)).collect();
    if add.is_empty() {
        return rc;
    }
    if flags & libc::GLOB_MARK != 0 {
        for a in &mut add {
            a.push('/');
        }
    }
    let total = g.offs + pathc + add.len() + 1;
    // SAFETY: realloc of glibc's malloc'ed array (or NULL), to `total` pointers.
    let v = unsafe { libc::realloc(pathv.cast(), total * std::mem::size_of::<*mut c_char>()) }
        as *mut *mut c_char;
    if v.is_null() {
        return libc::GLOB_NOSPACE;
    }
    if pathv.is_null() {
        for i in 0..g.offs {
            // SAFETY: within the `total` slots just allocated.
            unsafe { *v.add(i) = std::ptr::null_mut() };
        }
    }
    for (k, a) in add.iter().enumerate() {
        // SAFETY: malloc'ed copy of the string and its NUL (freed by globfree).
        let s = unsafe { put_path(a, std::ptr::null_mut(), 0) };
        if s.is_null() {
            return libc::GLOB_NOSPACE;
        }
        // SAFETY: within the `total` slots.
        unsafe { *v.add(g.offs + pathc + k) = s };
    }
    let new_from = if rc == 0 && flags & libc::GLOB_APPEND == 0 {
        0
    } else {
        pathc
    };
    let n = pathc + add.len();
    // SAFETY: within the `total` slots.
    unsafe { *v.add(g.offs + n) = std::ptr::null_mut() };
    if flags & libc::GLOB_NOSORT == 0 {
        // SAFETY: the slots [offs + new_from, offs + n) hold the strings of this call.
        let slice =
            unsafe { std::slice::from_raw_parts_mut(v.add(g.offs + new_from), n - new_from) };
        slice.sort_by(|a, b| {
            // SAFETY: NUL-terminated strings of the array.
            unsafe { CStr::from_ptr(*a).cmp(CStr::from_ptr(*b)) }
        });
    }
    // SAFETY: the caller's structure.
    unsafe {
        *g.pathc = n;
        *g.pathv = v;
    }
    0
}

/// `glob(3)`: the tree's entries merged with the real file system's, spelled as the
/// pattern spells them.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn glob(
    pattern: *const c_char,
    flags: c_int,
    errfunc: real::GlobErr,
    pglob: *mut libc::glob_t,
) -> c_int {
    // SAFETY: libc's contract.
    let extra = match unsafe { ours(pattern) } {
        Some(p) => sysfs::glob(p, &LiveFiles),
        None => Vec::new(),
    };
    // SAFETY: forwarding.
    let rc = unsafe { real::glob(pattern, flags, errfunc, pglob) };
    if extra.is_empty() || pglob.is_null() {
        return rc;
    }
    // SAFETY: the caller's structure, filled by the real glob.
    let g = unsafe {
        GlobView {
            pathc: &raw mut (*pglob).gl_pathc,
            pathv: &raw mut (*pglob).gl_pathv,
            offs: if flags & libc::GLOB_DOOFFS != 0 {
                (*pglob).gl_offs
            } else {
                0
            },
        }
    };
    // SAFETY: as documented on glob_merge.
    unsafe { glob_merge(rc, flags, g, extra) }
}

/// `glob64`.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn glob64(
    pattern: *const c_char,
    flags: c_int,
    errfunc: real::GlobErr,
    pglob: *mut libc::glob64_t,
) -> c_int {
    // SAFETY: libc's contract.
    let extra = match unsafe { ours(pattern) } {
        Some(p) => sysfs::glob(p, &LiveFiles),
        None => Vec::new(),
    };
    // SAFETY: forwarding.
    let rc = unsafe { real::glob64(pattern, flags, errfunc, pglob) };
    if extra.is_empty() || pglob.is_null() {
        return rc;
    }
    // SAFETY: the caller's structure, filled by the real glob.
    let g = unsafe {
        GlobView {
            pathc: &raw mut (*pglob).gl_pathc,
            pathv: &raw mut (*pglob).gl_pathv,
            offs: if flags & libc::GLOB_DOOFFS != 0 {
                (*pglob).gl_offs
            } else {
                0
            },
        }
    };
    // SAFETY: as documented on glob_merge.
    unsafe { glob_merge(rc, flags, g, extra) }
}

/// `sigaction(2)`: SIGSEGV and SIGTRAP are kept for the process while doorbell stores are
/// trapped ([`super::trap`]), and the process's handler is called for what is not ours.
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: libc's contract for `act` and `old`.
    if let Some(r) = unsafe { super::trap::virtual_sigaction(sig, act, old) } {
        return r;
    }
    // SAFETY: forwarding.
    unsafe { real::sigaction(sig, act, old) }
}

/// `signal(2)`, as `sigaction` for SIGSEGV and SIGTRAP (BSD semantics: `SA_RESTART`).
///
/// # Safety
/// libc's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: all-zero is a valid sigaction.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid structures.
    match unsafe { super::trap::virtual_sigaction(sig, &act, &mut old) } {
        Some(_) => old.sa_sigaction,
        // SAFETY: forwarding.
        None => unsafe { real::signal(sig, handler) },
    }
}
