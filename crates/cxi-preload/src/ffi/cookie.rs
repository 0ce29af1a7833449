//! `FILE` streams over a sysfs file of the tree (`fopen`), with glibc's `fopencookie`: reads
//! come from the bytes the file held at `fopen`, writes of a writable attribute are stored
//! when the stream is closed (as sysfs stores a write when it is flushed).

use std::ffi::{c_char, c_int, c_void};

use crate::sysfs::FileId;

/// `cookie_io_functions_t` (glibc `stdio.h`).
#[repr(C)]
struct IoFunctions {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> isize>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> isize>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

unsafe extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, funcs: IoFunctions)
    -> *mut libc::FILE;
}

struct Stream {
    id: FileId,
    data: Vec<u8>,
    pos: usize,
    written: Option<Vec<u8>>,
}

unsafe extern "C" fn read(cookie: *mut c_void, buf: *mut c_char, size: usize) -> isize {
    // SAFETY: `cookie` is the Box<Stream> leaked in `open`, alive until `close`; stdio
    // serializes calls on one stream.
    let s = unsafe { &mut *(cookie as *mut Stream) };
    let rest = s.data.get(s.pos..).unwrap_or_default();
    let n = rest.len().min(size);
    // SAFETY: stdio hands a buffer of `size` bytes; `n <= size`.
    unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), buf.cast(), n) };
    s.pos += n;
    n as isize
}

unsafe extern "C" fn write(cookie: *mut c_void, buf: *const c_char, size: usize) -> isize {
    // SAFETY: as in `read`.
    let s = unsafe { &mut *(cookie as *mut Stream) };
    let Some(w) = s.written.as_mut() else {
        super::set_errno(libc::EIO);
        return -1;
    };
    // SAFETY: stdio hands `size` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) };
    w.extend_from_slice(bytes);
    size as isize
}

unsafe extern "C" fn seek(cookie: *mut c_void, off: *mut i64, whence: c_int) -> c_int {
    // SAFETY: as in `read`; `off` points at stdio's offset.
    let s = unsafe { &mut *(cookie as *mut Stream) };
    // SAFETY: stdio passes a valid pointer.
    let o = unsafe { *off };
    let base = match whence {
        libc::SEEK_SET => 0,
        libc::SEEK_CUR => s.pos as i64,
        libc::SEEK_END => s.data.len() as i64,
        _ => return -1,
    };
    let Some(p) = base.checked_add(o).filter(|p| *p >= 0) else {
        super::set_errno(libc::EINVAL);
        return -1;
    };
    s.pos = p as usize;
    // SAFETY: as above.
    unsafe { *off = p };
    0
}

unsafe extern "C" fn close(cookie: *mut c_void) -> c_int {
    // SAFETY: the Box leaked in `open`; stdio calls close once.
    let s = unsafe { Box::from_raw(cookie as *mut Stream) };
    match &s.written {
        Some(w) if !w.is_empty() && !crate::content::store(&s.id, w) => {
            super::set_errno(libc::EINVAL);
            -1
        }
        _ => 0,
    }
}

/// A stream over `data`, the bytes of file `id`; `writable` for a mode that writes.
///
/// # Safety
/// `mode` is a NUL-terminated `fopen` mode.
pub unsafe fn open(
    id: FileId,
    data: Vec<u8>,
    writable: bool,
    mode: *const c_char,
) -> *mut libc::FILE {
    let s = Box::new(Stream {
        id,
        data,
        pos: 0,
        written: writable.then(Vec::new),
    });
    let cookie = Box::into_raw(s) as *mut c_void;
    let funcs = IoFunctions {
        read: Some(read),
        write: Some(write),
        seek: Some(seek),
        close: Some(close),
    };
    // SAFETY: `cookie` is a leaked Box the functions above own from now on; `mode` is the
    // caller's NUL-terminated mode string.
    let f = unsafe { fopencookie(cookie, mode, funcs) };
    if f.is_null() {
        // SAFETY: fopencookie failed, so the cookie was not taken.
        drop(unsafe { Box::from_raw(cookie as *mut Stream) });
    }
    f
}
