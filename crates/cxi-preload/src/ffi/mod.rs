//! The C side: the libc functions this library interposes ([`interpose`]), the real ones
//! behind them ([`real`], found with `dlsym(RTLD_NEXT)`), the system calls it makes for
//! itself ([`os`]) and `FILE` streams over sysfs files ([`cookie`]). Every `unsafe` block of
//! the crate is here, each with its safety argument.
//!
//! The library's own calls to interposed functions (`mmap`, `munmap`, `close`, ...) go to the
//! real ones through [`real`], so nothing re-enters an interposer while holding one of the
//! library's locks.

#![allow(unsafe_code)]

pub mod cookie;
pub mod interpose;
pub mod os;
pub mod real;
pub mod trap;

/// Set `errno`.
pub fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// `errno`.
pub fn errno() -> i32 {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() }
}
