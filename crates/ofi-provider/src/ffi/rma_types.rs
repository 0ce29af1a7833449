//! The C structures and constants of memory registration, RMA and atomics (libfabric 1.17
//! `fi_domain.h`, `fi_rma.h`, `fi_atomic.h`, `fabric.h`), written by hand like
//! [`super::types`]; `layouts_match_the_c_headers` checks them against gcc's.

#![allow(non_camel_case_types, missing_docs)]

use std::ffi::{c_int, c_void};

use super::types::{fi_addr_t, fid, fid_ep, iovec, ssize_t};

pub const FI_READ: u64 = 1 << 8;
pub const FI_WRITE: u64 = 1 << 9;
pub const FI_REMOTE_READ: u64 = 1 << 12;
pub const FI_REMOTE_WRITE: u64 = 1 << 13;
pub const FI_FENCE: u64 = 1 << 21;
pub const FI_TRANSMIT_COMPLETE: u64 = 1 << 27;
pub const FI_DELIVERY_COMPLETE: u64 = 1 << 28;
pub const FI_FETCH_ATOMIC: u64 = 1 << 58;
pub const FI_COMPARE_ATOMIC: u64 = 1 << 59;

pub const FI_MR_UNSPEC: c_int = 0;
pub const FI_MR_BASIC: c_int = 1;
pub const FI_MR_SCALABLE: c_int = 2;
pub const FI_MR_LOCAL: c_int = 1 << 2;
pub const FI_MR_VIRT_ADDR: c_int = 1 << 4;
pub const FI_MR_ALLOCATED: c_int = 1 << 5;
pub const FI_MR_PROV_KEY: c_int = 1 << 6;
pub const FI_MR_ENDPOINT: c_int = 1 << 9;

pub const FI_CLASS_MR: usize = 12;

pub const FI_EACCES: c_int = libc::EACCES;
pub const FI_EIO: c_int = libc::EIO;
pub const FI_EOPNOTSUPP: c_int = libc::EOPNOTSUPP;
/// `FI_ENOKEY` is libfabric's own number, not `ENOKEY` (`fi_errno.h`).
pub const FI_ENOKEY: c_int = 266;
pub const FI_EKEYREJECTED: c_int = libc::EKEYREJECTED;

/// `enum fi_datatype` values.
pub const FI_INT8: c_int = 0;
pub const FI_UINT8: c_int = 1;
pub const FI_INT16: c_int = 2;
pub const FI_UINT16: c_int = 3;
pub const FI_INT32: c_int = 4;
pub const FI_UINT32: c_int = 5;
pub const FI_INT64: c_int = 6;
pub const FI_UINT64: c_int = 7;
pub const FI_FLOAT: c_int = 8;
pub const FI_DOUBLE: c_int = 9;

/// `enum fi_op` values.
pub const FI_MIN: c_int = 0;
pub const FI_MAX: c_int = 1;
pub const FI_SUM: c_int = 2;
pub const FI_PROD: c_int = 3;
pub const FI_LOR: c_int = 4;
pub const FI_LAND: c_int = 5;
pub const FI_BOR: c_int = 6;
pub const FI_BAND: c_int = 7;
pub const FI_LXOR: c_int = 8;
pub const FI_BXOR: c_int = 9;
pub const FI_ATOMIC_READ: c_int = 10;
pub const FI_ATOMIC_WRITE: c_int = 11;
pub const FI_CSWAP: c_int = 12;
pub const FI_CSWAP_NE: c_int = 13;
pub const FI_CSWAP_LE: c_int = 14;
pub const FI_CSWAP_LT: c_int = 15;
pub const FI_CSWAP_GE: c_int = 16;
pub const FI_CSWAP_GT: c_int = 17;
pub const FI_MSWAP: c_int = 18;

#[repr(C)]
pub struct fid_mr {
    pub fid: fid,
    pub mem_desc: *mut c_void,
    pub key: u64,
}

#[repr(C)]
pub struct fi_mr_attr {
    pub mr_iov: *const iovec,
    pub iov_count: usize,
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub context: *mut c_void,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
    pub iface: c_int,
    pub device: u64,
}

pub type MrRegFn = unsafe extern "C" fn(
    *mut fid,
    *const c_void,
    usize,
    u64,
    u64,
    u64,
    u64,
    *mut *mut fid_mr,
    *mut c_void,
) -> c_int;
pub type MrRegvFn = unsafe extern "C" fn(
    *mut fid,
    *const iovec,
    usize,
    u64,
    u64,
    u64,
    u64,
    *mut *mut fid_mr,
    *mut c_void,
) -> c_int;
pub type MrRegattrFn =
    unsafe extern "C" fn(*mut fid, *const fi_mr_attr, u64, *mut *mut fid_mr) -> c_int;

#[repr(C)]
pub struct fi_ops_mr {
    pub size: usize,
    pub reg: Option<MrRegFn>,
    pub regv: Option<MrRegvFn>,
    pub regattr: Option<MrRegattrFn>,
}

#[repr(C)]
pub struct fi_rma_iov {
    pub addr: u64,
    pub len: usize,
    pub key: u64,
}

#[repr(C)]
pub struct fi_msg_rma {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_iov,
    pub rma_iov_count: usize,
    pub context: *mut c_void,
    pub data: u64,
}

type Ep = *mut fid_ep;
type Ctx = *mut c_void;
type Desc = *mut *mut c_void;

#[repr(C)]
pub struct fi_ops_rma {
    pub size: usize,
    pub read: Option<
        unsafe extern "C" fn(
            Ep,
            *mut c_void,
            usize,
            *mut c_void,
            fi_addr_t,
            u64,
            u64,
            Ctx,
        ) -> ssize_t,
    >,
    pub readv: Option<
        unsafe extern "C" fn(Ep, *const iovec, Desc, usize, fi_addr_t, u64, u64, Ctx) -> ssize_t,
    >,
    pub readmsg: Option<unsafe extern "C" fn(Ep, *const fi_msg_rma, u64) -> ssize_t>,
    pub write: Option<
        unsafe extern "C" fn(
            Ep,
            *const c_void,
            usize,
            *mut c_void,
            fi_addr_t,
            u64,
            u64,
            Ctx,
        ) -> ssize_t,
    >,
    pub writev: Option<
        unsafe extern "C" fn(Ep, *const iovec, Desc, usize, fi_addr_t, u64, u64, Ctx) -> ssize_t,
    >,
    pub writemsg: Option<unsafe extern "C" fn(Ep, *const fi_msg_rma, u64) -> ssize_t>,
    pub inject:
        Option<unsafe extern "C" fn(Ep, *const c_void, usize, fi_addr_t, u64, u64) -> ssize_t>,
    pub writedata: Option<
        unsafe extern "C" fn(
            Ep,
            *const c_void,
            usize,
            *mut c_void,
            u64,
            fi_addr_t,
            u64,
            u64,
            Ctx,
        ) -> ssize_t,
    >,
    pub injectdata:
        Option<unsafe extern "C" fn(Ep, *const c_void, usize, u64, fi_addr_t, u64, u64) -> ssize_t>,
}

#[repr(C)]
pub struct fi_ioc {
    pub addr: *mut c_void,
    pub count: usize,
}

#[repr(C)]
pub struct fi_rma_ioc {
    pub addr: u64,
    pub count: usize,
    pub key: u64,
}

#[repr(C)]
pub struct fi_msg_atomic {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_ioc,
    pub rma_iov_count: usize,
    pub datatype: c_int,
    pub op: c_int,
    pub context: *mut c_void,
    pub data: u64,
}

pub type AtomicWriteFn = unsafe extern "C" fn(
    Ep,
    *const c_void,
    usize,
    *mut c_void,
    fi_addr_t,
    u64,
    u64,
    c_int,
    c_int,
    Ctx,
) -> ssize_t;
pub type AtomicWritevFn = unsafe extern "C" fn(
    Ep,
    *const fi_ioc,
    Desc,
    usize,
    fi_addr_t,
    u64,
    u64,
    c_int,
    c_int,
    Ctx,
) -> ssize_t;
pub type AtomicWritemsgFn = unsafe extern "C" fn(Ep, *const fi_msg_atomic, u64) -> ssize_t;
pub type AtomicInjectFn =
    unsafe extern "C" fn(Ep, *const c_void, usize, fi_addr_t, u64, u64, c_int, c_int) -> ssize_t;
pub type AtomicReadwriteFn = unsafe extern "C" fn(
    Ep,
    *const c_void,
    usize,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    fi_addr_t,
    u64,
    u64,
    c_int,
    c_int,
    Ctx,
) -> ssize_t;
pub type AtomicReadwritevFn = unsafe extern "C" fn(
    Ep,
    *const fi_ioc,
    Desc,
    usize,
    *mut fi_ioc,
    Desc,
    usize,
    fi_addr_t,
    u64,
    u64,
    c_int,
    c_int,
    Ctx,
) -> ssize_t;
pub type AtomicReadwritemsgFn =
    unsafe extern "C" fn(Ep, *const fi_msg_atomic, *mut fi_ioc, Desc, usize, u64) -> ssize_t;
pub type AtomicCompwriteFn = unsafe extern "C" fn(
    Ep,
    *const c_void,
    usize,
    *mut c_void,
    *const c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    fi_addr_t,
    u64,
    u64,
    c_int,
    c_int,
    Ctx,
) -> ssize_t;
pub type AtomicCompwritevFn = unsafe extern "C" fn(
    Ep,
    *const fi_ioc,
    Desc,
    usize,
    *const fi_ioc,
    Desc,
    usize,
    *mut fi_ioc,
    Desc,
    usize,
    fi_addr_t,
    u64,
    u64,
    c_int,
    c_int,
    Ctx,
) -> ssize_t;
pub type AtomicCompwritemsgFn = unsafe extern "C" fn(
    Ep,
    *const fi_msg_atomic,
    *const fi_ioc,
    Desc,
    usize,
    *mut fi_ioc,
    Desc,
    usize,
    u64,
) -> ssize_t;
pub type AtomicValidFn = unsafe extern "C" fn(Ep, c_int, c_int, *mut usize) -> c_int;

#[repr(C)]
pub struct fi_ops_atomic {
    pub size: usize,
    pub write: Option<AtomicWriteFn>,
    pub writev: Option<AtomicWritevFn>,
    pub writemsg: Option<AtomicWritemsgFn>,
    pub inject: Option<AtomicInjectFn>,
    pub readwrite: Option<AtomicReadwriteFn>,
    pub readwritev: Option<AtomicReadwritevFn>,
    pub readwritemsg: Option<AtomicReadwritemsgFn>,
    pub compwrite: Option<AtomicCompwriteFn>,
    pub compwritev: Option<AtomicCompwritevFn>,
    pub compwritemsg: Option<AtomicCompwritemsgFn>,
    pub writevalid: Option<AtomicValidFn>,
    pub readwritevalid: Option<AtomicValidFn>,
    pub compwritevalid: Option<AtomicValidFn>,
}
