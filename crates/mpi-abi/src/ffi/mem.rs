//! Raw memory at the C boundary, the one place where the library touches memory through
//! pointers the program passed: out-parameters, argument arrays, strings, and the data
//! buffers of MPI calls ([`Lent`]). Every other module works on slices and values.
//!
//! The contract every function here relies on is the MPI standard's: a pointer argument is
//! either null where the standard allows it, or points to memory of the size the call's
//! arguments say, valid for the duration the standard says (the call, or until a
//! nonblocking operation completes).

use std::ffi::{CStr, c_char, c_void};
use std::marker::PhantomData;

use mpi::Request;
use mpi::datatype::KindVec;
use mpi::typemap::Layout;

use crate::consts::{IN_PLACE, MPI_ERR_ARG, MPI_ERR_BUFFER};
use crate::error::{AResult, AbiError};

/// An out-parameter: `None` when the program passed null.
///
/// # Safety
/// `p` is null or points to a writable, aligned `T` that outlives `'a`.
pub(crate) unsafe fn out<'a, T>(p: *mut T) -> Option<&'a mut T> {
    // SAFETY: the function's contract.
    unsafe { p.as_mut() }
}

/// Write `v` through an out-parameter, `MPI_ERR_ARG` when it is null.
pub(crate) fn put<T>(p: Option<&mut T>, v: T) -> AResult<()> {
    match p {
        Some(p) => {
            *p = v;
            Ok(())
        }
        None => Err(AbiError::new(
            MPI_ERR_ARG,
            "a null pointer for an output argument",
        )),
    }
}

/// An input array of `n` elements: `None` when null with `n > 0`, or `n` negative.
///
/// # Safety
/// `p` is null or points to `n` readable `T` that outlive `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, n: i64) -> Option<&'a [T]> {
    let n = usize::try_from(n).ok()?;
    if n == 0 {
        return Some(&[]);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the function's contract: `n` elements at a non-null `p`.
    Some(unsafe { std::slice::from_raw_parts(p, n) })
}

/// An output array of `n` elements.
///
/// # Safety
/// `p` is null or points to `n` writable `T` that outlive `'a`.
pub(crate) unsafe fn slice_mut<'a, T>(p: *mut T, n: i64) -> Option<&'a mut [T]> {
    let n = usize::try_from(n).ok()?;
    if n == 0 {
        return Some(&mut []);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the function's contract: `n` writable elements at a non-null `p`.
    Some(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// A NUL-terminated input string (lossy UTF-8), `None` when null.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn cstr(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the function's contract.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Copy `s` into a C string buffer of `cap` bytes (truncated, always NUL-terminated); the
/// length written (without the NUL).
pub(crate) fn write_str(buf: Option<&mut [c_char]>, s: &str) -> AResult<i32> {
    let buf = buf.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null string buffer"))?;
    if buf.is_empty() {
        return Ok(0);
    }
    let n = s.len().min(buf.len() - 1);
    for (d, &b) in buf.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = b as c_char;
    }
    buf[n] = 0;
    Ok(n as i32)
}

/// A data buffer argument of an MPI call (`buf`, `sendbuf`, `origin_addr`, ...): an address
/// the program lends to the library, which reads or writes it through a datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lent(usize);

impl Lent {
    /// Take the address of a buffer argument.
    ///
    /// # Safety
    /// `p` is a buffer argument of the MPI call being made: with the datatype and count the
    /// call names for it, it spans memory the program lets the library read (and, for output
    /// buffers, write) until the operation completes — the standard's rule for buffers.
    /// `MPI_IN_PLACE` and `MPI_BOTTOM` are values of `p` the library recognises.
    pub(crate) unsafe fn new(p: *const c_void) -> Lent {
        Lent(p as usize)
    }

    /// Whether it is `MPI_IN_PLACE`.
    pub(crate) fn is_in_place(self) -> bool {
        self.0 == IN_PLACE
    }

    /// The address.
    pub(crate) fn addr(self) -> usize {
        self.0
    }

    /// The buffer `bytes` further on (a displacement within the lent buffer, as the vector
    /// collectives and windows use).
    pub(crate) fn offset(self, bytes: isize) -> Lent {
        Lent(self.0.wrapping_add_signed(bytes))
    }

    /// The start address of `count` elements of `layout` and their span, checked non-null.
    fn span(self, layout: &Layout, count: usize) -> AResult<Option<(usize, usize, isize)>> {
        let (lo, len) = layout.span(count);
        if len == 0 {
            return Ok(None);
        }
        let start = self.0.wrapping_add_signed(lo);
        if start == 0 || self.is_in_place() {
            return Err(AbiError::new(
                MPI_ERR_BUFFER,
                format!("a null buffer for {count} elements of {len} bytes"),
            ));
        }
        Ok(Some((start, len, -lo)))
    }

    /// The selected bytes of `count` elements of `layout` at this buffer, packed.
    pub(crate) fn read(self, layout: &Layout, count: usize) -> AResult<Vec<u8>> {
        let Some((start, len, origin)) = self.span(layout, count)? else {
            return Ok(Vec::new());
        };
        // SAFETY: `Lent::new`'s contract: the span of `count` elements of the call's datatype
        // at this address is readable while the operation runs; it is read only here.
        let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, len) };
        Ok(layout.pack(bytes, origin, count)?)
    }

    /// Scatter `packed` into the selected bytes of (at most) `count` elements of `layout` at
    /// this buffer; the bytes used.
    pub(crate) fn write(self, layout: &Layout, count: usize, packed: &[u8]) -> AResult<usize> {
        let Some((start, len, origin)) = self.span(layout, count)? else {
            return Ok(0);
        };
        // SAFETY: `Lent::new`'s contract: an output buffer's span is writable until the
        // operation completes, and the program does not touch it meanwhile.
        let bytes = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, len) };
        Ok(layout.unpack(packed, bytes, origin, count)?)
    }

    /// `len` bytes at this address, read (window memory of the program).
    pub(crate) fn read_bytes(self, len: usize) -> AResult<Vec<u8>> {
        self.read(&Layout::basic(mpi::Kind::U8), len)
    }

    /// Write `data` at this address (window memory of the program).
    pub(crate) fn write_bytes(self, data: &[u8]) -> AResult<()> {
        self.write(&Layout::basic(mpi::Kind::U8), data.len(), data)
            .map(|_| ())
    }
}

/// Buffers owned by the library for a nonblocking operation: an input (`send`) and an
/// output (`recv`) that the operation's request borrows until it is dropped. The request is
/// made by a function that receives the buffers for an arbitrary lifetime, so it cannot keep
/// them anywhere but in the request itself.
pub(crate) struct Staged {
    /// The operation, borrowing the buffers; dropped before them.
    op: Option<Request<'static>>,
    send: *mut KindVec,
    recv: *mut [u8],
    _owns: PhantomData<(Box<KindVec>, Box<[u8]>)>,
}

impl Staged {
    /// Stage `send` and a zeroed output of `recv_len` bytes and start the operation on them.
    pub(crate) fn start(
        send: KindVec,
        recv_len: usize,
        start: impl for<'a> FnOnce(&'a KindVec, &'a mut [u8]) -> mpi::Result<Request<'a>>,
    ) -> mpi::Result<Self> {
        let send = Box::into_raw(Box::new(send));
        let recv = Box::into_raw(vec![0u8; recv_len].into_boxed_slice());
        let mut s = Staged {
            op: None,
            send,
            recv,
            _owns: PhantomData,
        };
        // SAFETY: both pointers come from `Box::into_raw` above and are freed only in
        // `Drop`, after `op` (the only holder of these borrows) is dropped; the shared and
        // the mutable borrow are of distinct allocations. `start` is generic over the
        // borrow's lifetime, so the borrows can only end up inside the request it returns.
        let (sb, rb) = unsafe { (&*send, &mut *recv) };
        let r = start(sb, rb)?;
        // SAFETY: the request borrows the staged buffers only; it is stored in `op`, which
        // is dropped before the buffers are freed (in `finish` and `Drop`), so extending the
        // borrow to the life of this value never lets it dangle.
        s.op = Some(unsafe { std::mem::transmute::<Request<'_>, Request<'static>>(r) });
        Ok(s)
    }

    /// Take the operation out (to consume it), leaving the buffers staged until `finish` or
    /// drop.
    pub(crate) fn take_op(&mut self) -> Option<Request<'static>> {
        self.op.take()
    }

    /// Put an operation taken with [`take_op`](Self::take_op) back.
    pub(crate) fn put_op(&mut self, op: Request<'static>) {
        self.op = Some(op);
    }

    /// End the operation (drop it) and hand back the output bytes.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        drop(self.op.take());
        // SAFETY: the operation holding the borrow is gone; `recv` is the live allocation
        // from `start`, read once here (freed in `Drop`).
        unsafe { (*self.recv).to_vec() }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        drop(self.op.take());
        // SAFETY: both pointers come from `Box::into_raw` in `start` and are freed once,
        // here, after the operation that borrowed them.
        unsafe {
            drop(Box::from_raw(self.send));
            drop(Box::from_raw(self.recv));
        }
    }
}

/// Memory this library allocates and hands to the program (`MPI_Win_allocate`,
/// `MPI_Alloc_mem`): zeroed, freed when this value is dropped.
/// The memory of this rank's part of `win` as a buffer the program may use, when the window
/// lives in memory of this process ([`Window::local_memory`]): what `MPI_Win_allocate`
/// returns. The caller keeps `win` alive as long as the buffer is used (`rma::WinObj` holds
/// both; the program may use the memory until `MPI_Win_free`, the standard's rule).
pub(crate) fn window_memory(win: &mpi::Window<u8>) -> Option<Lent> {
    let p = win.local_memory()?;
    // SAFETY: `Window::local_memory` is valid for the window's `len()` bytes (at least the
    // program's `size`) until the window is dropped, and nothing in Rust holds a reference
    // into it (the NIC side copies through raw pointers); per `Lent::new`'s contract the
    // program lends it to the library at each RMA call like any window memory.
    Some(unsafe { Lent::new(p.cast_const().cast()) })
}

pub(crate) struct OwnedMem {
    mem: *mut [u8],
}

impl OwnedMem {
    /// `len` zeroed bytes, and their address as a buffer the program may use.
    pub(crate) fn new(len: usize) -> (OwnedMem, Lent) {
        let mem = Box::into_raw(vec![0u8; len.max(1)].into_boxed_slice());
        let addr = mem as *mut u8 as usize;
        (OwnedMem { mem }, Lent(addr))
    }
}

impl Drop for OwnedMem {
    fn drop(&mut self) {
        // SAFETY: `mem` comes from `Box::into_raw` in `new` and is freed once, here; the
        // program's use of it ended with the call that released it (MPI_Win_free,
        // MPI_Free_mem).
        unsafe { drop(Box::from_raw(self.mem)) }
    }
}
