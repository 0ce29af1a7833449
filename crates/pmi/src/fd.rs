//! Adopting the socket a PMI launcher passed by number (`PMI_FD`). The one place of this crate
//! with `unsafe`: turning a raw descriptor into an owned stream.

#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once the inherited descriptor has been adopted: it can be owned only once.
static ADOPTED: AtomicBool = AtomicBool::new(false);

/// Take ownership of the inherited socket `fd` (`PMI_FD`). Fails, without touching the
/// descriptor, if it is a standard stream, not an open socket of this process, or already
/// adopted by an earlier call.
pub(crate) fn adopt_socket(fd: RawFd) -> Result<UnixStream, String> {
    if fd < 3 {
        return Err(format!("PMI_FD={fd} is a standard stream, not a socket"));
    }
    // What the descriptor is, as the kernel shows it: `socket:[<inode>]` for a socket.
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map_err(|e| format!("PMI_FD={fd} is not an open descriptor of this process ({e})"))?;
    if !target.to_string_lossy().starts_with("socket:") {
        return Err(format!(
            "PMI_FD={fd} is not a socket (it is {})",
            target.display()
        ));
    }
    if ADOPTED.swap(true, Ordering::SeqCst) {
        return Err(format!(
            "PMI_FD={fd} was already taken by an earlier PMI connection of this process"
        ));
    }
    // SAFETY: `fd` was checked above to be an open socket of this process, and the `ADOPTED`
    // flag makes this the only place that ever takes ownership of it, so the returned stream
    // is its sole owner and closes it exactly once. The launcher passes it to us for this use
    // alone (hydra's `PMI_FD` convention); nothing else in the process reads or closes it.
    // Reading and writing a non-Unix (e.g. TCP) socket through a `UnixStream` is sound: the
    // type only issues read/write/setsockopt system calls on the descriptor.
    Ok(unsafe { UnixStream::from_raw_fd(fd) })
}
