//! A receive buffer the application lent until the receive completes.

#![allow(unsafe_code)]

/// A user buffer of `len` bytes at `ptr`, valid until its operation completes (libfabric's
/// contract for `fi_recv` and `fi_trecv`).
pub struct UserBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer belongs to the posted operation until it completes; the provider
// touches it only under its endpoint's lock, so moving the handle between threads is fine.
unsafe impl Send for UserBuf {}

impl UserBuf {
    /// # Safety
    /// `ptr` must be valid for writes of `len` bytes until the operation using this buffer
    /// completes or is cancelled (null only with `len` 0).
    pub unsafe fn new(ptr: *mut u8, len: usize) -> UserBuf {
        UserBuf { ptr, len }
    }

    /// Its size.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no room.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its address (for `fi_cq_*_entry.buf`).
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// Copy as much of `data` as fits; returns the bytes copied.
    pub fn write(&self, data: &[u8]) -> usize {
        let n = data.len().min(self.len);
        if n > 0 {
            // SAFETY: `new`'s contract: `ptr` is valid for `len` >= `n` bytes of writes, and
            // `data` is a Rust slice, which cannot overlap the application's buffer.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr, n) };
        }
        n
    }
}

impl UserBuf {
    /// A buffer of no bytes (a receive that takes nothing: `FI_DISCARD`).
    pub fn empty() -> UserBuf {
        UserBuf {
            ptr: std::ptr::null_mut(),
            len: 0,
        }
    }
}
