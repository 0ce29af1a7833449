//! The numbers of the MPI 5.0 standard ABI (MPI-5.0 chapter 20): predefined handle values,
//! error classes and other constants. They must equal `include/mpi.h`; the C programs of
//! `tests/c` check the pairs they use. Source of the values: the MPI Forum's ABI reference
//! header (mpi-forum/mpi-abi-stubs 1.0.0) as summarised in the project's MPI baseline notes
//! (section 5); only the numbers are taken.

#![allow(missing_docs)]

use std::ffi::c_int;

/// A handle as it crosses the C boundary: a pointer-sized value.
pub type Handle = usize;

// Operations.
pub const MPI_OP_NULL: Handle = 0x20;
pub const MPI_SUM: Handle = 0x21;
pub const MPI_MIN: Handle = 0x22;
pub const MPI_MAX: Handle = 0x23;
pub const MPI_PROD: Handle = 0x24;
pub const MPI_BAND: Handle = 0x28;
pub const MPI_BOR: Handle = 0x29;
pub const MPI_BXOR: Handle = 0x2a;
pub const MPI_LAND: Handle = 0x30;
pub const MPI_LOR: Handle = 0x31;
pub const MPI_LXOR: Handle = 0x32;
pub const MPI_MINLOC: Handle = 0x38;
pub const MPI_MAXLOC: Handle = 0x39;
pub const MPI_REPLACE: Handle = 0x3c;
pub const MPI_NO_OP: Handle = 0x3d;

// Communicators, groups, windows, messages, infos, error handlers, requests.
pub const MPI_COMM_NULL: Handle = 0x100;
pub const MPI_COMM_WORLD: Handle = 0x101;
pub const MPI_COMM_SELF: Handle = 0x102;
pub const MPI_GROUP_NULL: Handle = 0x108;
pub const MPI_GROUP_EMPTY: Handle = 0x109;
pub const MPI_WIN_NULL: Handle = 0x110;
pub const MPI_MESSAGE_NULL: Handle = 0x128;
pub const MPI_MESSAGE_NO_PROC: Handle = 0x129;
pub const MPI_INFO_NULL: Handle = 0x130;
pub const MPI_INFO_ENV: Handle = 0x131;
pub const MPI_ERRHANDLER_NULL: Handle = 0x140;
pub const MPI_ERRORS_ARE_FATAL: Handle = 0x141;
pub const MPI_ERRORS_ABORT: Handle = 0x142;
pub const MPI_ERRORS_RETURN: Handle = 0x143;
pub const MPI_REQUEST_NULL: Handle = 0x180;

// Datatypes (those with a C meaning; the Fortran ones are unknown to this library).
pub const MPI_DATATYPE_NULL: Handle = 0x200;
pub const MPI_AINT: Handle = 0x201;
pub const MPI_COUNT: Handle = 0x202;
pub const MPI_OFFSET: Handle = 0x203;
pub const MPI_PACKED: Handle = 0x207;
pub const MPI_SHORT: Handle = 0x208;
pub const MPI_INT: Handle = 0x209;
pub const MPI_LONG: Handle = 0x20a;
pub const MPI_LONG_LONG: Handle = 0x20b;
pub const MPI_UNSIGNED_SHORT: Handle = 0x20c;
pub const MPI_UNSIGNED: Handle = 0x20d;
pub const MPI_UNSIGNED_LONG: Handle = 0x20e;
pub const MPI_UNSIGNED_LONG_LONG: Handle = 0x20f;
pub const MPI_FLOAT: Handle = 0x210;
pub const MPI_C_FLOAT_COMPLEX: Handle = 0x212;
pub const MPI_DOUBLE: Handle = 0x214;
pub const MPI_C_DOUBLE_COMPLEX: Handle = 0x216;
pub const MPI_LONG_DOUBLE: Handle = 0x220;
pub const MPI_FLOAT_INT: Handle = 0x228;
pub const MPI_DOUBLE_INT: Handle = 0x229;
pub const MPI_LONG_INT: Handle = 0x22a;
pub const MPI_2INT: Handle = 0x22b;
pub const MPI_SHORT_INT: Handle = 0x22c;
pub const MPI_C_BOOL: Handle = 0x238;
pub const MPI_WCHAR: Handle = 0x23c;
pub const MPI_INT8_T: Handle = 0x240;
pub const MPI_UINT8_T: Handle = 0x241;
pub const MPI_CHAR: Handle = 0x243;
pub const MPI_SIGNED_CHAR: Handle = 0x244;
pub const MPI_UNSIGNED_CHAR: Handle = 0x245;
pub const MPI_BYTE: Handle = 0x247;
pub const MPI_INT16_T: Handle = 0x248;
pub const MPI_UINT16_T: Handle = 0x249;
pub const MPI_INT32_T: Handle = 0x250;
pub const MPI_UINT32_T: Handle = 0x251;
pub const MPI_INT64_T: Handle = 0x258;
pub const MPI_UINT64_T: Handle = 0x259;

// Error classes.
pub const MPI_SUCCESS: c_int = 0;
pub const MPI_ERR_BUFFER: c_int = 1;
pub const MPI_ERR_COUNT: c_int = 2;
pub const MPI_ERR_TYPE: c_int = 3;
pub const MPI_ERR_TAG: c_int = 4;
pub const MPI_ERR_COMM: c_int = 5;
pub const MPI_ERR_RANK: c_int = 6;
pub const MPI_ERR_REQUEST: c_int = 7;
pub const MPI_ERR_ROOT: c_int = 8;
pub const MPI_ERR_GROUP: c_int = 9;
pub const MPI_ERR_OP: c_int = 10;
pub const MPI_ERR_ARG: c_int = 13;
pub const MPI_ERR_UNKNOWN: c_int = 14;
pub const MPI_ERR_TRUNCATE: c_int = 15;
pub const MPI_ERR_OTHER: c_int = 16;
pub const MPI_ERR_INTERN: c_int = 17;
pub const MPI_ERR_IN_STATUS: c_int = 19;
pub const MPI_ERR_INFO_KEY: c_int = 31;
pub const MPI_ERR_INFO_NOKEY: c_int = 32;
pub const MPI_ERR_INFO: c_int = 34;
pub const MPI_ERR_KEYVAL: c_int = 36;
pub const MPI_ERR_LOCKTYPE: c_int = 37;
pub const MPI_ERR_NO_MEM: c_int = 39;
pub const MPI_ERR_RMA_ATTACH: c_int = 46;
pub const MPI_ERR_RMA_RANGE: c_int = 48;
pub const MPI_ERR_RMA_SYNC: c_int = 50;
pub const MPI_ERR_SIZE: c_int = 52;
pub const MPI_ERR_UNSUPPORTED_OPERATION: c_int = 55;
pub const MPI_ERR_WIN: c_int = 56;
pub const MPI_ERR_RMA_FLAVOR: c_int = 57;
pub const MPI_ERR_ERRHANDLER: c_int = 61;
pub const MPI_ERR_LASTCODE: c_int = 16383;

// Sentinels and other constants.
pub const MPI_ANY_SOURCE: c_int = -1;
pub const MPI_ANY_TAG: c_int = -2;
pub const MPI_PROC_NULL: c_int = -3;
pub const MPI_ROOT: c_int = -4;
pub const MPI_UNDEFINED: c_int = -32766;
pub const MPI_THREAD_SINGLE: c_int = 0;
pub const MPI_THREAD_FUNNELED: c_int = 1024;
pub const MPI_THREAD_SERIALIZED: c_int = 2048;
pub const MPI_THREAD_MULTIPLE: c_int = 4096;
pub const MPI_IDENT: c_int = 201;
pub const MPI_CONGRUENT: c_int = 202;
pub const MPI_SIMILAR: c_int = 203;
pub const MPI_UNEQUAL: c_int = 204;
pub const MPI_COMM_TYPE_SHARED: c_int = 221;
pub const MPI_LOCK_EXCLUSIVE: c_int = 301;
pub const MPI_LOCK_SHARED: c_int = 302;
pub const MPI_WIN_FLAVOR_CREATE: c_int = 311;
pub const MPI_WIN_FLAVOR_ALLOCATE: c_int = 312;
pub const MPI_WIN_FLAVOR_DYNAMIC: c_int = 313;
pub const MPI_WIN_UNIFIED: c_int = 321;
pub const MPI_WIN_SEPARATE: c_int = 322;
pub const MPI_KEYVAL_INVALID: c_int = 0;
pub const MPI_TAG_UB: c_int = 501;
pub const MPI_HOST: c_int = 503;
pub const MPI_IO: c_int = 502;
pub const MPI_WTIME_IS_GLOBAL: c_int = 504;
pub const MPI_APPNUM: c_int = 505;
pub const MPI_UNIVERSE_SIZE: c_int = 507;
pub const MPI_WIN_BASE: c_int = 601;
pub const MPI_WIN_DISP_UNIT: c_int = 602;
pub const MPI_WIN_SIZE: c_int = 603;
pub const MPI_WIN_CREATE_FLAVOR: c_int = 604;
pub const MPI_WIN_MODEL: c_int = 605;
pub const MPI_MAX_PROCESSOR_NAME: usize = 256;
pub const MPI_MAX_ERROR_STRING: usize = 512;
pub const MPI_MAX_OBJECT_NAME: usize = 128;
pub const MPI_MAX_LIBRARY_VERSION_STRING: usize = 8192;
pub const MPI_MAX_INFO_KEY: usize = 256;
pub const MPI_MAX_INFO_VAL: usize = 1024;
pub const MPI_BSEND_OVERHEAD: usize = 512;

/// `MPI_IN_PLACE` as an address.
pub const IN_PLACE: usize = 1;
/// The largest tag (`MPI_TAG_UB`'s value): the transports carry 32-bit tags.
pub const TAG_UB_VALUE: c_int = c_int::MAX;
