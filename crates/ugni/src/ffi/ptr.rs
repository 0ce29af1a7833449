//! Raw memory at the C boundary: out-parameters, input structures, byte ranges and handles.
//! The one place where the library touches memory through pointers the program passed;
//! every other module works on values and slices.
//!
//! The contract every function here relies on is uGNI's: a pointer argument is null where
//! the call allows it, or points to memory of the size the call's arguments say, valid for
//! the call (or, for a datagram's out-buffer, until the exchange is collected).

use std::ffi::c_void;

use firmware_spec::gemini::gni::ReturnCode;

use super::{Handle, R};

/// An out-parameter: `None` when the program passed null.
///
/// # Safety
/// `p` is null or points to a writable, aligned `T` that outlives `'a`.
pub(crate) unsafe fn out<'a, T>(p: *mut T) -> Option<&'a mut T> {
    // SAFETY: the function's contract.
    unsafe { p.as_mut() }
}

/// Write `v` through an out-parameter, `GNI_RC_INVALID_PARAM` when it is null.
pub(crate) fn put<T>(p: Option<&mut T>, v: T) -> R<()> {
    let p = p.ok_or(ReturnCode::InvalidParam)?;
    *p = v;
    Ok(())
}

/// Read an input structure (any alignment); `GNI_RC_INVALID_PARAM` when null.
///
/// # Safety
/// `p` is null or points to a readable `T`.
pub(crate) unsafe fn read<T: Copy>(p: *const T) -> R<T> {
    if p.is_null() {
        return Err(ReturnCode::InvalidParam);
    }
    // SAFETY: the function's contract: a readable `T` at a non-null `p`.
    Ok(unsafe { p.read_unaligned() })
}

/// `n` input bytes at `p` (empty for `n == 0`, whatever `p`); `GNI_RC_INVALID_PARAM` for a
/// null `p` with `n > 0`.
///
/// # Safety
/// `p` is null or points to `n` readable bytes that outlive `'a`.
pub(crate) unsafe fn bytes<'a>(p: *const c_void, n: usize) -> R<&'a [u8]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(ReturnCode::InvalidParam);
    }
    // SAFETY: the function's contract: `n` readable bytes at a non-null `p`.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) })
}

/// `n` writable bytes at `p`, as [`bytes`].
///
/// # Safety
/// `p` is null or points to `n` writable bytes that outlive `'a` and nothing else refers to.
pub(crate) unsafe fn bytes_mut<'a>(p: *mut c_void, n: usize) -> R<&'a mut [u8]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(ReturnCode::InvalidParam);
    }
    // SAFETY: the function's contract: `n` writable bytes at a non-null `p`.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), n) })
}

/// Copy `data` to a datagram out-buffer recorded when the datagram was posted (at most
/// `len` bytes).
///
/// # Safety
/// `addr` is 0 or the address of `len` writable bytes the program keeps valid until the
/// exchange is collected (uGNI's contract for `GNI_EpPostData[WId]`'s `out_buf`).
pub(crate) unsafe fn deliver(addr: usize, len: usize, data: &[u8]) {
    let n = data.len().min(len);
    if addr == 0 || n == 0 {
        return;
    }
    // SAFETY: the function's contract: `len >= n` writable bytes at `addr`, not overlapping
    // `data` (the library's own copy of the peer's payload).
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, n) }
}

/// Write `v` at byte `offset` of a structure the program passed (any alignment): the
/// library's fields of a post descriptor.
///
/// # Safety
/// `base` points to a writable object of at least `offset + size_of::<T>()` bytes.
pub(crate) unsafe fn write_at<T>(base: *mut c_void, offset: usize, v: T) {
    // SAFETY: the function's contract.
    unsafe { base.cast::<u8>().add(offset).cast::<T>().write_unaligned(v) }
}

/// The number a C handle carries.
pub(crate) fn handle(h: Handle) -> usize {
    h as usize
}

/// A handle number as C receives it.
pub(crate) fn to_handle(n: usize) -> Handle {
    std::ptr::without_provenance_mut(n)
}
