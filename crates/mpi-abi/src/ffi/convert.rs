//! Handle conversions of the standard ABI (`MPI_Comm_toint`, `MPI_Comm_fromint`, ...): this
//! library's handles are small numbers (predefined values, or 0x10000 up for objects the
//! program made), so the integer is the handle's value.

use std::ffi::c_int;

use crate::consts::Handle;

macro_rules! handle_int {
    ($($to:ident $from:ident;)*) => {$(
        #[unsafe(no_mangle)]
        pub extern "C" fn $to(h: Handle) -> c_int {
            c_int::try_from(h).unwrap_or(-1)
        }

        #[unsafe(no_mangle)]
        pub extern "C" fn $from(i: c_int) -> Handle {
            Handle::try_from(i).unwrap_or(0)
        }
    )*};
}

handle_int! {
    MPI_Comm_toint MPI_Comm_fromint;
    MPI_Errhandler_toint MPI_Errhandler_fromint;
    MPI_File_toint MPI_File_fromint;
    MPI_Group_toint MPI_Group_fromint;
    MPI_Info_toint MPI_Info_fromint;
    MPI_Message_toint MPI_Message_fromint;
    MPI_Op_toint MPI_Op_fromint;
    MPI_Request_toint MPI_Request_fromint;
    MPI_Session_toint MPI_Session_fromint;
    MPI_Type_toint MPI_Type_fromint;
    MPI_Win_toint MPI_Win_fromint;
}
