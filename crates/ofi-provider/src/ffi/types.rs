//! The libfabric provider interface, as far as this provider uses it: written by hand from the
//! public headers of libfabric **1.17** (`rdma/fabric.h`, `fi_domain.h`, `fi_endpoint.h`,
//! `fi_eq.h`, `fi_tagged.h`, `fi_cm.h`, `providers/fi_prov.h`; Debian's `libfabric-dev`
//! 1.17.0-3). Only the items used are declared; the layouts are checked against the C
//! compiler by `tests/ofi.rs` (`layouts_match_the_c_headers`).

#![allow(non_camel_case_types, dead_code)]

use std::ffi::{c_char, c_int, c_void};

pub type fi_addr_t = u64;
pub type ssize_t = isize;

/// `FI_VERSION(major, minor)`.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

// Capabilities and flags (fabric.h).
pub const FI_MSG: u64 = 1 << 1;
pub const FI_RMA: u64 = 1 << 2;
pub const FI_ATOMIC: u64 = 1 << 4;
pub const FI_TAGGED: u64 = 1 << 3;
pub const FI_RECV: u64 = 1 << 10;
pub const FI_SEND: u64 = 1 << 11;
pub const FI_TRANSMIT: u64 = FI_SEND;
pub const FI_MULTI_RECV: u64 = 1 << 16;
pub const FI_REMOTE_CQ_DATA: u64 = 1 << 17;
pub const FI_COMPLETION: u64 = 1 << 24;
pub const FI_INJECT: u64 = 1 << 25;
pub const FI_HMEM: u64 = 1 << 47;
pub const FI_LOCAL_COMM: u64 = 1 << 51;
pub const FI_REMOTE_COMM: u64 = 1 << 52;
pub const FI_SHARED_AV: u64 = 1 << 53;
pub const FI_SOURCE: u64 = 1 << 57;
pub const FI_DIRECTED_RECV: u64 = 1 << 59;
pub const FI_SELECTIVE_COMPLETION: u64 = 1 << 59;
pub const FI_ORDER_RAW: u64 = 1 << 1;
pub const FI_ORDER_SAS: u64 = 1 << 8;
pub const FI_ADDR_UNSPEC: fi_addr_t = u64::MAX;
pub const FI_ADDR_NOTAVAIL: fi_addr_t = u64::MAX;

// Enumerations (fabric.h, fi_eq.h).
pub const FI_FORMAT_UNSPEC: u32 = 0;
pub const FI_EP_UNSPEC: c_int = 0;
pub const FI_EP_RDM: c_int = 3;
pub const FI_AV_UNSPEC: c_int = 0;
pub const FI_AV_MAP: c_int = 1;
pub const FI_AV_TABLE: c_int = 2;
pub const FI_PROGRESS_UNSPEC: c_int = 0;
pub const FI_PROGRESS_MANUAL: c_int = 2;
/// 2.0 and later (fabric.h of libfabric v2.x).
pub const FI_PROGRESS_CONTROL_UNIFIED: c_int = 3;
pub const FI_THREAD_SAFE: c_int = 1;
pub const FI_THREAD_DOMAIN: c_int = 3;
pub const FI_THREAD_ENDPOINT: c_int = 5;
pub const FI_RM_ENABLED: c_int = 2;
pub const FI_CQ_FORMAT_UNSPEC: c_int = 0;
pub const FI_CQ_FORMAT_CONTEXT: c_int = 1;
pub const FI_CQ_FORMAT_MSG: c_int = 2;
pub const FI_CQ_FORMAT_DATA: c_int = 3;
pub const FI_CQ_FORMAT_TAGGED: c_int = 4;
pub const FI_WAIT_NONE: c_int = 0;
pub const FI_WAIT_UNSPEC: c_int = 1;
pub const FI_WAIT_SET: c_int = 2;
pub const FI_WAIT_FD: c_int = 3;
pub const FI_WAIT_MUTEX_COND: c_int = 4;
pub const FI_WAIT_YIELD: c_int = 5;

// fid classes (enum fi_class).
pub const FI_CLASS_FABRIC: usize = 1;
pub const FI_CLASS_DOMAIN: usize = 2;
pub const FI_CLASS_EP: usize = 3;
pub const FI_CLASS_AV: usize = 11;
pub const FI_CLASS_EQ: usize = 13;
pub const FI_CLASS_CQ: usize = 14;

// fi_control commands (fabric.h: FI_GETFIDFLAG 0, FI_SETFIDFLAG 1, ..., FI_ENABLE 6).
pub const FI_ENABLE: c_int = 6;

// Error numbers (fi_errno.h): positive values, returned negated.
pub const FI_ENOENT: c_int = libc::ENOENT;
pub const FI_EAGAIN: c_int = libc::EAGAIN;
pub const FI_EBUSY: c_int = libc::EBUSY;
pub const FI_ENOMEM: c_int = libc::ENOMEM;
pub const FI_EINVAL: c_int = libc::EINVAL;
pub const FI_ENOSYS: c_int = libc::ENOSYS;
pub const FI_ENODATA: c_int = libc::ENODATA;
pub const FI_EMSGSIZE: c_int = libc::EMSGSIZE;
pub const FI_EADDRNOTAVAIL: c_int = libc::EADDRNOTAVAIL;
pub const FI_ECANCELED: c_int = libc::ECANCELED;
pub const FI_EOTHER: c_int = 256;
pub const FI_EOPBADSTATE: c_int = 258;
pub const FI_EAVAIL: c_int = 259;
pub const FI_EBADFLAGS: c_int = 260;
pub const FI_ETRUNC: c_int = 265;
pub const FI_ETOOSMALL: c_int = 257;

#[repr(C)]
pub struct fi_context {
    pub internal: [*mut c_void; 4],
}

#[repr(C)]
pub struct fid {
    pub fclass: usize,
    pub context: *mut c_void,
    pub ops: *const fi_ops,
}
pub type fid_t = *mut fid;

#[repr(C)]
pub struct fi_ops {
    pub size: usize,
    pub close: Option<unsafe extern "C" fn(*mut fid) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(*mut fid, *mut fid, u64) -> c_int>,
    pub control: Option<unsafe extern "C" fn(*mut fid, c_int, *mut c_void) -> c_int>,
    pub ops_open: Option<
        unsafe extern "C" fn(*mut fid, *const c_char, u64, *mut *mut c_void, *mut c_void) -> c_int,
    >,
    pub tostr: Option<unsafe extern "C" fn(*const fid, *mut c_char, usize) -> c_int>,
    pub ops_set: Option<
        unsafe extern "C" fn(*mut fid, *const c_char, u64, *mut c_void, *mut c_void) -> c_int,
    >,
}

#[repr(C)]
pub struct fi_tx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: usize,
    pub size: usize,
    pub iov_limit: usize,
    pub rma_iov_limit: usize,
    pub tclass: u32,
}

#[repr(C)]
pub struct fi_rx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub total_buffered_recv: usize,
    pub size: usize,
    pub iov_limit: usize,
}

#[repr(C)]
pub struct fi_ep_attr {
    pub type_: c_int,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: usize,
    pub msg_prefix_size: usize,
    pub max_order_raw_size: usize,
    pub max_order_war_size: usize,
    pub max_order_waw_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
}

#[repr(C)]
pub struct fi_domain_attr {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: c_int,
    pub control_progress: c_int,
    pub data_progress: c_int,
    pub resource_mgmt: c_int,
    pub av_type: c_int,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
}

#[repr(C)]
pub struct fi_fabric_attr {
    pub fabric: *mut fid_fabric,
    pub name: *mut c_char,
    pub prov_name: *mut c_char,
    pub prov_version: u32,
    pub api_version: u32,
}

#[repr(C)]
pub struct fi_info {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr,
    pub rx_attr: *mut fi_rx_attr,
    pub ep_attr: *mut fi_ep_attr,
    pub domain_attr: *mut fi_domain_attr,
    pub fabric_attr: *mut fi_fabric_attr,
    pub nic: *mut c_void,
}

pub type GetinfoFn = unsafe extern "C" fn(
    u32,
    *const c_char,
    *const c_char,
    u64,
    *const fi_info,
    *mut *mut fi_info,
) -> c_int;
pub type FabricFn =
    unsafe extern "C" fn(*mut fi_fabric_attr, *mut *mut fid_fabric, *mut c_void) -> c_int;

#[repr(C)]
pub struct fi_provider {
    pub version: u32,
    pub fi_version: u32,
    pub context: fi_context,
    pub name: *const c_char,
    pub getinfo: Option<GetinfoFn>,
    pub fabric: Option<FabricFn>,
    pub cleanup: Option<unsafe extern "C" fn()>,
}

#[repr(C)]
pub struct fid_fabric {
    pub fid: fid,
    pub ops: *const fi_ops_fabric,
    pub api_version: u32,
}

type Unused = Option<unsafe extern "C" fn()>;
/// An `open` entry the provider refuses (`fi_eq_open`, `fi_cntr_open`): every argument is a
/// pointer (object, attributes, out object, context).
pub type OpenRefused =
    Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void, *mut c_void) -> c_int>;
/// The same without a context (`fi_wait_open`, `fi_poll_open`).
pub type OpenRefused3 =
    Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> c_int>;

#[repr(C)]
pub struct fi_ops_fabric {
    pub size: usize,
    pub domain: Option<
        unsafe extern "C" fn(
            *mut fid_fabric,
            *mut fi_info,
            *mut *mut fid_domain,
            *mut c_void,
        ) -> c_int,
    >,
    pub passive_ep: Unused,
    pub eq_open: Option<
        unsafe extern "C" fn(
            *mut fid_fabric,
            *mut fi_eq_attr,
            *mut *mut fid_eq,
            *mut c_void,
        ) -> c_int,
    >,
    pub wait_open: OpenRefused3,
    pub trywait: Option<unsafe extern "C" fn(*mut fid_fabric, *mut *mut fid, c_int) -> c_int>,
    pub domain2: Unused,
}

#[repr(C)]
pub struct fid_domain {
    pub fid: fid,
    pub ops: *const fi_ops_domain,
    pub mr: *const c_void,
}

#[repr(C)]
pub struct fi_ops_domain {
    pub size: usize,
    pub av_open: Option<
        unsafe extern "C" fn(
            *mut fid_domain,
            *mut fi_av_attr,
            *mut *mut fid_av,
            *mut c_void,
        ) -> c_int,
    >,
    pub cq_open: Option<
        unsafe extern "C" fn(
            *mut fid_domain,
            *mut fi_cq_attr,
            *mut *mut fid_cq,
            *mut c_void,
        ) -> c_int,
    >,
    pub endpoint: Option<
        unsafe extern "C" fn(*mut fid_domain, *mut fi_info, *mut *mut fid_ep, *mut c_void) -> c_int,
    >,
    pub scalable_ep: Unused,
    pub cntr_open: OpenRefused,
    pub poll_open: OpenRefused3,
    pub stx_ctx: Unused,
    pub srx_ctx: Unused,
    pub query_atomic: Option<QueryAtomicFn>,
    pub query_collective: Unused,
    pub endpoint2: Unused,
}

#[repr(C)]
pub struct fi_av_attr {
    pub type_: c_int,
    pub rx_ctx_bits: c_int,
    pub count: usize,
    pub ep_per_node: usize,
    pub name: *const c_char,
    pub map_addr: *mut c_void,
    pub flags: u64,
}

#[repr(C)]
pub struct fid_av {
    pub fid: fid,
    pub ops: *const fi_ops_av,
}

#[repr(C)]
pub struct fi_ops_av {
    pub size: usize,
    pub insert: Option<
        unsafe extern "C" fn(
            *mut fid_av,
            *const c_void,
            usize,
            *mut fi_addr_t,
            u64,
            *mut c_void,
        ) -> c_int,
    >,
    pub insertsvc: Option<
        unsafe extern "C" fn(
            *mut fid_av,
            *const c_char,
            *const c_char,
            *mut fi_addr_t,
            u64,
            *mut c_void,
        ) -> c_int,
    >,
    pub insertsym: Option<
        unsafe extern "C" fn(
            *mut fid_av,
            *const c_char,
            usize,
            *const c_char,
            usize,
            *mut fi_addr_t,
            u64,
            *mut c_void,
        ) -> c_int,
    >,
    pub remove: Option<unsafe extern "C" fn(*mut fid_av, *mut fi_addr_t, usize, u64) -> c_int>,
    pub lookup:
        Option<unsafe extern "C" fn(*mut fid_av, fi_addr_t, *mut c_void, *mut usize) -> c_int>,
    pub straddr: Option<
        unsafe extern "C" fn(*mut fid_av, *const c_void, *mut c_char, *mut usize) -> *const c_char,
    >,
    pub av_set: Unused,
}

#[repr(C)]
pub struct fi_cq_attr {
    pub size: usize,
    pub flags: u64,
    pub format: c_int,
    pub wait_obj: c_int,
    pub signaling_vector: c_int,
    pub wait_cond: c_int,
    pub wait_set: *mut c_void,
}

#[repr(C)]
pub struct fid_cq {
    pub fid: fid,
    pub ops: *const fi_ops_cq,
}

#[repr(C)]
pub struct fi_cq_tagged_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
}

#[repr(C)]
pub struct fi_cq_err_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

#[repr(C)]
pub struct fi_ops_cq {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, usize) -> ssize_t>,
    pub readfrom:
        Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, usize, *mut fi_addr_t) -> ssize_t>,
    pub readerr: Option<unsafe extern "C" fn(*mut fid_cq, *mut fi_cq_err_entry, u64) -> ssize_t>,
    pub sread: Option<
        unsafe extern "C" fn(*mut fid_cq, *mut c_void, usize, *const c_void, c_int) -> ssize_t,
    >,
    pub sreadfrom: Option<
        unsafe extern "C" fn(
            *mut fid_cq,
            *mut c_void,
            usize,
            *mut fi_addr_t,
            *const c_void,
            c_int,
        ) -> ssize_t,
    >,
    pub signal: Option<unsafe extern "C" fn(*mut fid_cq) -> c_int>,
    pub strerror: Option<
        unsafe extern "C" fn(
            *mut fid_cq,
            c_int,
            *const c_void,
            *mut c_char,
            usize,
        ) -> *const c_char,
    >,
}

#[repr(C)]
pub struct fid_ep {
    pub fid: fid,
    pub ops: *const fi_ops_ep,
    pub cm: *const fi_ops_cm,
    pub msg: *const fi_ops_msg,
    pub rma: *const c_void,
    pub tagged: *const fi_ops_tagged,
    pub atomic: *const c_void,
    pub collective: *const c_void,
}

#[repr(C)]
pub struct fi_ops_ep {
    pub size: usize,
    pub cancel: Option<unsafe extern "C" fn(fid_t, *mut c_void) -> ssize_t>,
    pub getopt: Option<unsafe extern "C" fn(fid_t, c_int, c_int, *mut c_void, *mut usize) -> c_int>,
    pub setopt: Option<unsafe extern "C" fn(fid_t, c_int, c_int, *const c_void, usize) -> c_int>,
    pub tx_ctx: Unused,
    pub rx_ctx: Unused,
    pub rx_size_left: Option<unsafe extern "C" fn(*mut fid_ep) -> ssize_t>,
    pub tx_size_left: Option<unsafe extern "C" fn(*mut fid_ep) -> ssize_t>,
}

#[repr(C)]
pub struct fi_ops_cm {
    pub size: usize,
    pub setname: Option<unsafe extern "C" fn(fid_t, *mut c_void, usize) -> c_int>,
    pub getname: Option<unsafe extern "C" fn(fid_t, *mut c_void, *mut usize) -> c_int>,
    pub getpeer: Unused,
    pub connect: Unused,
    pub listen: Unused,
    pub accept: Unused,
    pub reject: Unused,
    pub shutdown: Option<unsafe extern "C" fn(*mut fid_ep, u64) -> c_int>,
    pub join: Unused,
}

#[repr(C)]
pub struct iovec {
    pub iov_base: *mut c_void,
    pub iov_len: usize,
}

#[repr(C)]
pub struct fi_msg {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub context: *mut c_void,
    pub data: u64,
}

#[repr(C)]
pub struct fi_msg_tagged {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub tag: u64,
    pub ignore: u64,
    pub context: *mut c_void,
    pub data: u64,
}

type RecvFn = unsafe extern "C" fn(
    *mut fid_ep,
    *mut c_void,
    usize,
    *mut c_void,
    fi_addr_t,
    *mut c_void,
) -> ssize_t;
type SendFn = unsafe extern "C" fn(
    *mut fid_ep,
    *const c_void,
    usize,
    *mut c_void,
    fi_addr_t,
    *mut c_void,
) -> ssize_t;

#[repr(C)]
pub struct fi_ops_msg {
    pub size: usize,
    pub recv: Option<RecvFn>,
    pub recvv: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const iovec,
            *mut *mut c_void,
            usize,
            fi_addr_t,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub recvmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg, u64) -> ssize_t>,
    pub send: Option<SendFn>,
    pub sendv: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const iovec,
            *mut *mut c_void,
            usize,
            fi_addr_t,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub sendmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg, u64) -> ssize_t>,
    pub inject:
        Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, fi_addr_t) -> ssize_t>,
    pub senddata: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            usize,
            *mut c_void,
            u64,
            fi_addr_t,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub injectdata:
        Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, u64, fi_addr_t) -> ssize_t>,
}

#[repr(C)]
pub struct fi_ops_tagged {
    pub size: usize,
    pub recv: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *mut c_void,
            usize,
            *mut c_void,
            fi_addr_t,
            u64,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub recvv: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const iovec,
            *mut *mut c_void,
            usize,
            fi_addr_t,
            u64,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub recvmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_tagged, u64) -> ssize_t>,
    pub send: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            usize,
            *mut c_void,
            fi_addr_t,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub sendv: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const iovec,
            *mut *mut c_void,
            usize,
            fi_addr_t,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub sendmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_tagged, u64) -> ssize_t>,
    pub inject:
        Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, fi_addr_t, u64) -> ssize_t>,
    pub senddata: Option<
        unsafe extern "C" fn(
            *mut fid_ep,
            *const c_void,
            usize,
            *mut c_void,
            u64,
            fi_addr_t,
            u64,
            *mut c_void,
        ) -> ssize_t,
    >,
    pub injectdata: Option<
        unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, u64, fi_addr_t, u64) -> ssize_t,
    >,
}

pub const FI_PEEK: u64 = 1 << 19;
pub const FI_CLAIM: u64 = 1 << 59;

#[repr(C)]
pub struct fi_eq_attr {
    pub size: usize,
    pub flags: u64,
    pub wait_obj: c_int,
    pub signaling_vector: c_int,
    pub wait_set: *mut c_void,
}

#[repr(C)]
pub struct fi_eq_err_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

#[repr(C)]
pub struct fid_eq {
    pub fid: fid,
    pub ops: *const fi_ops_eq,
}

#[repr(C)]
pub struct fi_ops_eq {
    pub size: usize,
    pub read:
        Option<unsafe extern "C" fn(*mut fid_eq, *mut u32, *mut c_void, usize, u64) -> ssize_t>,
    pub readerr: Option<unsafe extern "C" fn(*mut fid_eq, *mut fi_eq_err_entry, u64) -> ssize_t>,
    pub write: Option<unsafe extern "C" fn(*mut fid_eq, u32, *const c_void, usize, u64) -> ssize_t>,
    pub sread: Option<
        unsafe extern "C" fn(*mut fid_eq, *mut u32, *mut c_void, usize, c_int, u64) -> ssize_t,
    >,
    pub strerror: Option<
        unsafe extern "C" fn(
            *mut fid_eq,
            c_int,
            *const c_void,
            *mut c_char,
            usize,
        ) -> *const c_char,
    >,
}

// Counters, FI_PEEK/FI_CLAIM/FI_DISCARD, wait objects (fabric.h, fi_eq.h, fi_errno.h).
pub const FI_READ: u64 = 1 << 8;
pub const FI_WRITE: u64 = 1 << 9;
pub const FI_REMOTE_READ: u64 = 1 << 12;
pub const FI_REMOTE_WRITE: u64 = 1 << 13;
pub const FI_DISCARD: u64 = 1 << 58;
pub const FI_CLASS_CNTR: usize = 15;
pub const FI_CLASS_WAIT: usize = 16;
pub const FI_GETWAIT: c_int = 5;
pub const FI_ENOMSG: c_int = libc::ENOMSG;
pub const FI_ETIMEDOUT: c_int = libc::ETIMEDOUT;
pub const FI_CNTR_EVENTS_COMP: c_int = 0;

#[repr(C)]
pub struct fi_cntr_attr {
    pub events: c_int,
    pub wait_obj: c_int,
    pub wait_set: *mut c_void,
    pub flags: u64,
}

#[repr(C)]
pub struct fid_cntr {
    pub fid: fid,
    pub ops: *const fi_ops_cntr,
}

#[repr(C)]
pub struct fi_ops_cntr {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(*mut fid_cntr) -> u64>,
    pub readerr: Option<unsafe extern "C" fn(*mut fid_cntr) -> u64>,
    pub add: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
    pub set: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
    pub wait: Option<unsafe extern "C" fn(*mut fid_cntr, u64, c_int) -> c_int>,
    pub adderr: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
    pub seterr: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
}

#[repr(C)]
pub struct fi_wait_attr {
    pub wait_obj: c_int,
    pub flags: u64,
}

#[repr(C)]
pub struct fid_wait {
    pub fid: fid,
    pub ops: *const fi_ops_wait,
}

#[repr(C)]
pub struct fi_ops_wait {
    pub size: usize,
    pub wait: Option<unsafe extern "C" fn(*mut fid_wait, c_int) -> c_int>,
}

/// `struct fi_atomic_attr`: what `fi_query_atomic` answers.
#[repr(C)]
pub struct fi_atomic_attr {
    pub count: usize,
    pub size: usize,
}

/// `fi_ops_domain.query_atomic`.
pub type QueryAtomicFn =
    unsafe extern "C" fn(*mut fid_domain, c_int, c_int, *mut fi_atomic_attr, u64) -> c_int;
