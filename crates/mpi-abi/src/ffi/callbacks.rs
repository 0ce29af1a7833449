//! Functions of the program that the library calls: reduction operations
//! (`MPI_Op_create`) and error handlers (`MPI_Comm_create_errhandler`, ...).

use std::ffi::{c_int, c_void};

use crate::consts::Handle;

/// `MPI_User_function`.
pub(crate) type UserFunction = unsafe extern "C" fn(
    invec: *mut c_void,
    inoutvec: *mut c_void,
    len: *mut c_int,
    dt: *mut Handle,
);

/// `MPI_Comm_errhandler_function` (and the window one, same shape).
pub(crate) type ErrhandlerFunction = unsafe extern "C" fn(obj: *mut Handle, code: *mut c_int, ...);

/// A reduction operation of the program.
#[derive(Clone, Copy)]
pub(crate) struct UserOp {
    f: UserFunction,
    /// Whether the program declared it commutative.
    pub commute: bool,
}

impl UserOp {
    /// Wrap a function the program passed to `MPI_Op_create`.
    ///
    /// # Safety
    /// `f` is an `MPI_User_function` of the program: callable with two buffers of `len`
    /// elements of `dt` and pointers to `len` and `dt`, touching nothing else of ours.
    pub(crate) unsafe fn new(f: UserFunction, commute: bool) -> Self {
        UserOp { f, commute }
    }

    /// `inout = input op inout` over `count` elements of datatype `dt` (contiguous).
    pub(crate) fn apply(&self, input: &[u8], inout: &mut [u8], count: c_int, dt: Handle) {
        let mut inv = input.to_vec();
        let mut len = count;
        let mut dt = dt;
        // SAFETY: `new`'s contract; both buffers hold `count` contiguous elements of `dt`
        // (the caller checked the datatype is contiguous and sized them by it) and live
        // across the call.
        unsafe {
            (self.f)(
                inv.as_mut_ptr().cast(),
                inout.as_mut_ptr().cast(),
                &mut len,
                &mut dt,
            )
        }
    }
}

/// An error handler of the program.
#[derive(Clone, Copy)]
pub(crate) struct UserErrhandler {
    f: ErrhandlerFunction,
}

impl UserErrhandler {
    /// Wrap a function the program passed to `MPI_*_create_errhandler`.
    ///
    /// # Safety
    /// `f` is an error handler function of the program, callable with a pointer to the
    /// object's handle and a pointer to the error code.
    pub(crate) unsafe fn new(f: ErrhandlerFunction) -> Self {
        UserErrhandler { f }
    }

    /// Call it for error `code` on object `h`.
    pub(crate) fn invoke(&self, h: Handle, code: c_int) {
        let (mut h, mut code) = (h, code);
        // SAFETY: `new`'s contract; the pointers are to locals that outlive the call.
        unsafe { (self.f)(&mut h, &mut code) }
    }
}
