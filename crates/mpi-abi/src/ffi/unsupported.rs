//! Calls of the standard this library declares but does not implement: each answers
//! `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler of its communicator (or of
//! `MPI_COMM_SELF`), with a message naming the call.

use std::ffi::c_int;

use crate::consts::{Handle, MPI_COMM_SELF};
use crate::error::AbiError;
use crate::state::{Eh, call};

fn unsupported(name: &str, comm: Handle) -> c_int {
    call(name, Eh::Comm(comm), |_| Err(AbiError::unsupported(name)))
}

macro_rules! unsupported {
    ($($name:ident($comm:tt, $($arg:ident),*));* $(;)?) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($($arg: usize),*) -> c_int {
            let _ = ($($arg),*);
            unsupported(stringify!($name), unsupported!(@comm $comm))
        }
    )*};
    (@comm self) => { MPI_COMM_SELF };
    (@comm $c:ident) => { $c };
}

// Every argument is passed as a pointer-sized integer: ints and pointers alike arrive in
// integer registers on the supported (LP64) targets, and none of them is looked at.
unsupported! {
    MPI_Comm_idup(comm, comm, newcomm, request);
    MPI_Comm_spawn(comm, command, argv, maxprocs, info, root, comm, intercomm, errcodes);
    MPI_Intercomm_create(local_comm, local_comm, local_leader, peer_comm, remote_leader, tag, newcomm);
    MPI_Cart_create(comm_old, comm_old, ndims, dims, periods, reorder, comm_cart);
    MPI_Dims_create(self, nnodes, ndims, dims);
    MPI_Win_allocate_shared(comm, size, disp_unit, info, comm, baseptr, win);
    MPI_File_open(comm, comm, filename, amode, info, fh);
    MPI_Session_init(self, info, errhandler, session);
}
