//! Application memory registered with `fi_mr_reg`: read and written by the provider while
//! the registration lives (libfabric's contract: the buffer stays valid until `fi_close` of
//! the memory region).

#![allow(unsafe_code)]

/// `len` bytes at `ptr` of the application's memory.
pub struct UserRegion {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the memory belongs to the registration until it is closed; the provider copies
// in and out of it under the locks of its endpoints, as the NIC would DMA into it.
unsafe impl Send for UserRegion {}
// SAFETY: as above; concurrent copies touch the memory like concurrent DMA does.
unsafe impl Sync for UserRegion {}

impl UserRegion {
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes until the region is dropped
    /// (null only with `len` 0).
    pub unsafe fn new(ptr: *mut u8, len: usize) -> UserRegion {
        UserRegion { ptr, len }
    }

    /// Its size.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its address.
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// Copy `out.len()` bytes at `offset` out (clipped to the region).
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        let n = out.len().min(self.len.saturating_sub(offset));
        if n > 0 {
            // SAFETY: `new`'s contract; `offset + n <= len`; `out` is a Rust slice, which
            // cannot overlap the application's memory.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), out.as_mut_ptr(), n) };
        }
    }

    /// Copy `data` in at `offset` (clipped to the region).
    pub fn write(&self, offset: usize, data: &[u8]) {
        let n = data.len().min(self.len.saturating_sub(offset));
        if n > 0 {
            // SAFETY: as in `read`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(offset), n) };
        }
    }
}
