//! The raw accesses to the mapping: the only `unsafe` code of host memory. Every function
//! checks its range against the mapping itself, so callers cannot misuse them.

use std::sync::atomic::{AtomicU32, AtomicU64};
use vm_memory::MmapRegion;

/// The mapping's bytes `[off, off + len)` as a pointer, if they lie inside it.
fn span(map: &MmapRegion<()>, off: usize, len: usize) -> Option<*mut u8> {
    let end = off.checked_add(len)?;
    (end <= map.size()).then(|| map.as_ptr().wrapping_add(off))
}

/// The mapping's bytes `[off, off + len)` as a pointer, if they lie inside it (no access
/// is made).
pub(super) fn ptr(map: &MmapRegion<()>, off: usize, len: usize) -> Option<*mut u8> {
    span(map, off, len)
}

/// Copy `buf.len()` bytes from the mapping at `off` into `buf`; false (nothing copied)
/// if the range is not inside the mapping.
pub(super) fn read(map: &MmapRegion<()>, off: usize, buf: &mut [u8]) -> bool {
    let Some(src) = span(map, off, buf.len()) else {
        return false;
    };
    let n = buf.len();
    let dst = buf.as_mut_ptr();
    if n <= 8 {
        for i in 0..n {
            // SAFETY: `src..src + n` is inside the live mapping (`span`), `dst..dst + n`
            // is `buf`; byte accesses have no alignment requirement. The load is
            // volatile because another thread (the device or the CPU side) may store to
            // the word concurrently.
            unsafe { dst.add(i).write(src.add(i).read_volatile()) };
        }
    } else {
        // SAFETY: both ranges are valid for `n` bytes (`span`, and `buf`); they cannot
        // overlap: `buf` is a Rust `&mut [u8]` and host memory never hands out a
        // reference into the mapping other than `&AtomicU64`/`&AtomicU32` words, which
        // cannot become a `&mut [u8]`. Concurrent stores by another thread make the
        // copied bytes unspecified, never unsound for plain bytes (vm-memory copies
        // guest memory shared with devices the same way).
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    }
    true
}

/// Copy `buf` into the mapping at `off`; false (nothing copied) if the range is not
/// inside the mapping.
pub(super) fn write(map: &MmapRegion<()>, off: usize, buf: &[u8]) -> bool {
    let Some(dst) = span(map, off, buf.len()) else {
        return false;
    };
    let n = buf.len();
    let src = buf.as_ptr();
    if n <= 8 {
        for i in 0..n {
            // SAFETY: as in `read`, with the volatile access on the mapping's side.
            unsafe { dst.add(i).write_volatile(src.add(i).read()) };
        }
    } else {
        // SAFETY: as in `read`: valid, non-overlapping ranges of `n` bytes.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    }
    true
}

/// The naturally aligned 8-byte word at `off` as an atomic, if it lies inside the
/// mapping and `off` is 8-aligned.
pub(super) fn atomic_u64(map: &MmapRegion<()>, off: usize) -> Option<&AtomicU64> {
    let p = span(map, off, 8)?;
    if !(p as usize).is_multiple_of(align_of::<AtomicU64>()) {
        return None;
    }
    // SAFETY: `p` is valid for 8 bytes for as long as `map` is borrowed (the returned
    // reference borrows it), and aligned for `AtomicU64`; every bit pattern is a valid
    // `u64`. Other accesses to the word are atomic, or byte copies that the program
    // tolerates seeing unspecified values from (shared device memory).
    Some(unsafe { AtomicU64::from_ptr(p.cast::<u64>()) })
}

/// The naturally aligned 4-byte word at `off` as an atomic (see [`atomic_u64`]).
pub(super) fn atomic_u32(map: &MmapRegion<()>, off: usize) -> Option<&AtomicU32> {
    let p = span(map, off, 4)?;
    if !(p as usize).is_multiple_of(align_of::<AtomicU32>()) {
        return None;
    }
    // SAFETY: as in `atomic_u64`, for 4 bytes.
    Some(unsafe { AtomicU32::from_ptr(p.cast::<u32>()) })
}
