//! Safe wrappers of the system calls the library makes for itself: doorbell pages (one page
//! of a memfd mapped twice: the process's view and the watcher's), the process's own memory
//! as the driver's `copy_from_user`/`copy_to_user` reach it (`process_vm_readv`/`writev` on
//! this process: a bad address is `EFAULT`, never a fault), memfds holding a sysfs file's
//! bytes, and the socket pairs behind wait objects.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use driver::cassini::{Errno, UserAccess};

use super::real;

const PAGE: usize = 4096;

/// One doorbell page: a page of a memfd mapped twice, read-write: `user` for the process
/// (unmapped by its `munmap`), `alias` for the watcher (unmapped when the page is dropped).
#[derive(Debug)]
pub struct Page {
    user: AtomicU64,
    alias: usize,
}

impl Page {
    /// A fresh zeroed page.
    pub fn new() -> io::Result<Page> {
        // SAFETY: memfd_create with a NUL-terminated name and valid flags; the result is
        // checked.
        let fd = unsafe { libc::memfd_create(c"nicemu-cxi-doorbell".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ftruncate of an owned memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let map = || {
            // SAFETY: a new shared mapping of one page of `fd`, at an address the kernel
            // chooses; nothing existing is replaced.
            let p = unsafe {
                real::mmap(
                    std::ptr::null_mut(),
                    PAGE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                Err(io::Error::last_os_error())
            } else {
                Ok(p as usize)
            }
        };
        let alias = map()?;
        let user = match map() {
            Ok(u) => u,
            Err(e) => {
                // SAFETY: unmapping the page mapped just above, used by nothing yet.
                unsafe { real::munmap(alias as *mut libc::c_void, PAGE) };
                return Err(e);
            }
        };
        Ok(Page {
            user: AtomicU64::new(user as u64),
            alias,
        })
    }

    /// The process's address of the page (0 once unmapped).
    pub fn user_address(&self) -> usize {
        self.user.load(Ordering::Acquire) as usize
    }

    /// The watcher's address of the page.
    pub fn alias_address(&self) -> usize {
        self.alias
    }

    /// Bytes of the page.
    pub fn len(&self) -> usize {
        PAGE
    }

    /// Never true.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Unmap the process's view (once).
    pub fn unmap_user(&self) {
        let u = self.user.swap(0, Ordering::AcqRel) as usize;
        if u != 0 {
            // SAFETY: `u` is the process's view mapped in `new`, unmapped only here (the
            // swap makes this happen once); the process asked for it to go.
            unsafe { real::munmap(u as *mut libc::c_void, PAGE) };
        }
    }

    fn word(&self, off: u64) -> Option<&AtomicU64> {
        let off = usize::try_from(off).ok()?;
        if off % 8 != 0 || off + 8 > PAGE {
            return None;
        }
        // SAFETY: `alias` is a live read-write mapping of PAGE bytes for as long as `self`
        // (unmapped in Drop only); `off` is 8-aligned and in bounds, and the page is
        // page-aligned, so the word is aligned for AtomicU64. Other parties (the process
        // through its view) access it only with aligned stores, and AtomicU64 has the
        // layout of u64.
        Some(unsafe { &*((self.alias + off) as *const AtomicU64) })
    }

    /// The 8-byte word at `off` (0 out of bounds).
    pub fn load(&self, off: u64) -> u64 {
        self.word(off).map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Store `v` at `off`.
    pub fn store(&self, off: u64, v: u64) {
        if let Some(w) = self.word(off) {
            w.store(v, Ordering::Release);
        }
    }

    /// Swap `v` in at `off`; the old value.
    pub fn swap(&self, off: u64, v: u64) -> u64 {
        self.word(off).map_or(0, |w| w.swap(v, Ordering::AcqRel))
    }

    /// Copy `buf.len()` bytes (a multiple of 8) from `off`, word by word.
    pub fn read(&self, off: u64, buf: &mut [u8]) {
        for (i, c) in buf.chunks_mut(8).enumerate() {
            let v = self.load(off + 8 * i as u64).to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }

    /// Zero `len` bytes at `off`, word by word.
    pub fn clear(&self, off: u64, len: u64) {
        for i in (0..len).step_by(8) {
            self.store(off + i, 0);
        }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        self.unmap_user();
        // SAFETY: the watcher's view, mapped in `new`, used only through `&self` which no
        // longer exists.
        unsafe { real::munmap(self.alias as *mut libc::c_void, PAGE) };
    }
}

/// This process's memory, as the driver's `copy_from_user`/`copy_to_user` reach it: through
/// `process_vm_readv`/`process_vm_writev` on the process itself, so an unmapped or
/// read-only address is `EFAULT` rather than a fault.
pub struct SelfMemory;

fn vm_copy(local: *mut libc::c_void, remote: u64, len: usize, write: bool) -> Result<(), Errno> {
    if len == 0 {
        return Ok(());
    }
    let Some(_) = remote.checked_add(len as u64) else {
        return Err(Errno::Efault);
    };
    let l = libc::iovec {
        iov_base: local,
        iov_len: len,
    };
    let r = libc::iovec {
        iov_base: remote as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the local iovec names `len` bytes the caller owns (a live slice); the remote
    // one is an address of this process that the kernel checks (EFAULT when not mapped with
    // the needed access); `getpid` is this process.
    let n = unsafe {
        let pid = libc::getpid();
        if write {
            libc::process_vm_writev(pid, &l, 1, &r, 1, 0)
        } else {
            libc::process_vm_readv(pid, &l, 1, &r, 1, 0)
        }
    };
    if n == len as isize {
        Ok(())
    } else {
        Err(Errno::Efault)
    }
}

impl UserAccess for SelfMemory {
    fn copy_from_user(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        vm_copy(buf.as_mut_ptr().cast(), addr, buf.len(), false)
    }
    fn copy_to_user(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        vm_copy(data.as_ptr().cast_mut().cast(), addr, data.len(), true)
    }
}

/// A memfd holding `bytes`, positioned at 0 (what `open` of a sysfs file gives).
pub fn memfd_with(name: &std::ffi::CStr, bytes: &[u8], cloexec: bool) -> io::Result<RawFd> {
    let flags = if cloexec { libc::MFD_CLOEXEC } else { 0 };
    // SAFETY: memfd_create with a NUL-terminated name; checked.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is ours and open.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if !bytes.is_empty() {
        // SAFETY: pwrite of a live slice to our memfd.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), 0) };
        if n != bytes.len() as isize {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(std::os::fd::IntoRawFd::into_raw_fd(fd))
}

/// The whole content of a memfd (to commit what a process wrote to a writable attribute).
pub fn read_all(fd: RawFd) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    let mut off = 0;
    loop {
        // SAFETY: pread into a live buffer from a descriptor the caller owns.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), off) };
        if n <= 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
        off += n as libc::off_t;
        if out.len() > 1 << 16 {
            break;
        }
    }
    out
}

/// A connected pair of stream sockets: the process's end (returned to `open`) and ours.
pub fn socket_pair(cloexec: bool) -> io::Result<(RawFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    let flags = libc::SOCK_STREAM | if cloexec { libc::SOCK_CLOEXEC } else { 0 };
    // SAFETY: socketpair writes two descriptors into a live array; checked.
    if unsafe { libc::socketpair(libc::AF_UNIX, flags, 0, fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fds[1] was just created and belongs to nothing else.
    let ours = unsafe { OwnedFd::from_raw_fd(fds[1]) };
    // Our end never blocks the device's interrupt path.
    // SAFETY: fcntl on our own descriptor.
    unsafe {
        let fl = libc::fcntl(ours.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(ours.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    Ok((fds[0], ours))
}

/// Send one urgent byte on `fd`: the peer's end polls `POLLPRI` until it reads it, as a
/// sysfs file polls `POLLPRI | POLLERR` after `sysfs_notify`.
pub fn send_urgent(fd: RawFd) {
    // SAFETY: send of one byte from a live buffer on a socket we own.
    unsafe {
        libc::send(
            fd,
            b"!".as_ptr().cast(),
            1,
            libc::MSG_OOB | libc::MSG_DONTWAIT,
        )
    };
}

/// Take a pending urgent byte from `fd`, if any (the read that clears a sysfs
/// notification).
pub fn take_urgent(fd: RawFd) {
    let mut b = [0u8; 1];
    // SAFETY: recv into a live one-byte buffer; a socket without urgent data answers
    // EINVAL or EAGAIN, which is fine.
    unsafe {
        libc::recv(
            fd,
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_OOB | libc::MSG_DONTWAIT,
        )
    };
}

/// The effective user and group ids.
pub fn ids() -> (u32, u32) {
    // SAFETY: geteuid/getegid cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}
