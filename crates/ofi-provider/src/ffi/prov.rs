//! The entry point libfabric looks up (`fi_prov_ini`), `getinfo` and `fi_fabric`.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;

use super::types::*;
use super::{layout, objects, version};
use crate::ep::{INJECT_SIZE, MAX_MSG_SIZE};
use crate::{info, wire};

/// Provider version 0.1.
const VERSION: u32 = fi_version(0, 1);

const NAME: &CStr = c"nicemu";
const FABRIC_NAME: &CStr = c"nicemu";
const DOMAIN_NAME: &CStr = c"cxi0";

/// Every capability an `fi_info` of the provider may carry (`crate::info`).
pub const CAPS: u64 = info::CAPS;

/// Mutable because libfabric's core writes its bookkeeping into `context`, and
/// `fi_prov_ini` sets `fi_version` to the loader's ([`version::declared`]).
static mut PROVIDER: fi_provider = fi_provider {
    version: VERSION,
    fi_version: version::OLDEST,
    context: fi_context {
        internal: [ptr::null_mut(); 4],
    },
    name: NAME.as_ptr(),
    getinfo: Some(getinfo),
    fabric: Some(fabric),
    cleanup: Some(cleanup),
};

/// The provider entry point (`FI_EXT_INI`): called once by libfabric after `dlopen`.
#[unsafe(no_mangle)]
pub extern "C" fn fi_prov_ini() -> *mut fi_provider {
    let api = version::declared(version::loader());
    let p = &raw mut PROVIDER;
    // SAFETY: libfabric calls the entry point once, from its initialisation, before it uses
    // the structure; from then on it owns the structure's use (it writes `context`), and the
    // provider itself never reads or writes it again.
    unsafe { (*p).fi_version = api };
    p
}

extern "C" fn cleanup() {}

/// The hints as [`info::Hints`], or why they ask for what no `fi_info` here has.
///
/// # Safety
/// `hints` and the attribute and address pointers in it are null or valid (libfabric's
/// contract).
unsafe fn read_hints(hints: &fi_info, api: u32) -> Result<info::Hints, &'static str> {
    if hints.addr_format != FI_FORMAT_UNSPEC {
        return Err("address format");
    }
    // SAFETY: per the function's contract each attribute is null or valid.
    let (ep, dom, fab, tx, rx) = unsafe {
        (
            hints.ep_attr.as_ref(),
            hints.domain_attr.as_ref(),
            hints.fabric_attr.as_ref(),
            hints.tx_attr.as_ref(),
            hints.rx_attr.as_ref(),
        )
    };
    if let Some(ep) = ep {
        if ep.type_ != FI_EP_UNSPEC && ep.type_ != FI_EP_RDM {
            return Err("endpoint type");
        }
        if ep.max_msg_size > MAX_MSG_SIZE {
            return Err("max_msg_size");
        }
        if ep.mem_tag_format & !wire::TAG_MASK != 0 {
            return Err("mem_tag_format");
        }
    }
    if let Some(d) = dom {
        if ![FI_AV_UNSPEC, FI_AV_MAP, FI_AV_TABLE].contains(&d.av_type) {
            return Err("av_type");
        }
        // `data_progress` is 2.x's `progress` (same offset, a union since 2.0).
        if ![FI_PROGRESS_UNSPEC, FI_PROGRESS_MANUAL].contains(&d.data_progress)
            || !control_progress_ok(d.control_progress, api)
        {
            return Err("progress");
        }
        // SAFETY: a non-null name is a C string (contract).
        if !d.name.is_null() && unsafe { CStr::from_ptr(d.name) } != DOMAIN_NAME {
            return Err("domain name");
        }
    }
    if let Some(f) = fab {
        // SAFETY: as above.
        if !f.name.is_null() && unsafe { CStr::from_ptr(f.name) } != FABRIC_NAME {
            return Err("fabric name");
        }
    }
    let address = |a: *const c_void, len: usize| {
        (!a.is_null()).then(|| {
            // SAFETY: a non-null address has `len` bytes (contract).
            unsafe { std::slice::from_raw_parts(a.cast::<u8>(), len) }.to_vec()
        })
    };
    Ok(info::Hints {
        caps: hints.caps,
        tx_caps: tx.map_or(0, |t| t.caps),
        rx_caps: rx.map_or(0, |r| r.caps),
        domain_caps: dom.map_or(0, |d| d.caps),
        tx_order: tx.map_or(0, |t| t.msg_order),
        rx_order: rx.map_or(0, |r| r.msg_order),
        comp_order: tx.map_or(0, |t| t.comp_order) | rx.map_or(0, |r| r.comp_order),
        src_addr: address(hints.src_addr, hints.src_addrlen),
        dest_addr: address(hints.dest_addr, hints.dest_addrlen),
        mr_mode: dom.map_or(0, |d| d.mr_mode),
        legacy_mr: false,
    })
}

/// Whether a hinted `control_progress` is served (manual progress). From API 2.0 the field
/// is deprecated (`progress` covers control and data) and may say
/// `FI_PROGRESS_CONTROL_UNIFIED`: the application serialises control and data calls itself,
/// which implies manual progress (fi_domain(3) of libfabric v2.5.1); the provider's control
/// calls are thread-safe anyway, so that is served too.
fn control_progress_ok(p: c_int, api: u32) -> bool {
    p == FI_PROGRESS_UNSPEC
        || p == FI_PROGRESS_MANUAL
        || (api >= version::V2 && p == FI_PROGRESS_CONTROL_UNIFIED)
}

/// The threading model returned for a hinted one: the hint itself when it names a model
/// (`FI_THREAD_SAFE` .. `FI_THREAD_ENDPOINT`, the same values in 1.17 and 2.x; fi_domain(3)
/// lets a provider return the model the application asked for when it supports it, and a
/// thread-safe provider supports all), else `FI_THREAD_SAFE`.
fn threading_served(hint: c_int) -> c_int {
    if (FI_THREAD_SAFE..=FI_THREAD_ENDPOINT).contains(&hint) {
        hint
    } else {
        FI_THREAD_SAFE
    }
}

/// A C string argument, or `None` when null or not UTF-8.
///
/// # Safety
/// `s` is null or a C string.
unsafe fn arg<'a>(s: *const c_char) -> Option<&'a str> {
    if s.is_null() {
        return None;
    }
    // SAFETY: per the contract, a non-null `s` is a C string.
    unsafe { CStr::from_ptr(s) }.to_str().ok()
}

/// This host's name (for `node`), empty if unknown.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// `malloc`ed copy of an address, for `fi_freeinfo` to `free`.
fn c_addr(a: &[u8; 8]) -> *mut c_void {
    // SAFETY: `malloc` returns null or room for 8 bytes; copying 8 bytes into it is valid.
    unsafe {
        let p = libc::malloc(a.len());
        if !p.is_null() {
            ptr::copy_nonoverlapping(a.as_ptr(), p.cast::<u8>(), a.len());
        }
        p
    }
}

unsafe extern "C" fn getinfo(
    api: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    if info.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: libfabric passes null or a valid `fi_info`.
    let h = match unsafe { hints.as_ref() } {
        None => None,
        // SAFETY: its attributes and addresses are null or valid.
        Some(h) => match unsafe { read_hints(h, api) } {
            Ok(h) => Some(info::Hints {
                legacy_mr: api < fi_version(1, 5),
                ..h
            }),
            Err(_) => return -FI_ENODATA,
        },
    };
    let own_nid = match crate::nic::local_nid() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("{e}");
            return -FI_ENODATA;
        }
    };
    // SAFETY: `node` and `service` are null or C strings (contract).
    let target = unsafe {
        info::Target {
            node: arg(node),
            service: arg(service),
            source: flags & FI_SOURCE != 0,
        }
    };
    let Ok(offer) = info::offer(h.as_ref(), &target, own_nid, &host_name()) else {
        return -FI_ENODATA;
    };
    let i = alloc_info();
    if i.is_null() {
        return -FI_ENOMEM;
    }
    // SAFETY: `i` is the fresh allocation above; all its attribute pointers are valid,
    // zeroed structures, and `hints` is null or valid. `strdup`ed names and `malloc`ed
    // addresses are freed by `fi_freeinfo`.
    unsafe {
        let av_type = hints
            .as_ref()
            .and_then(|h| h.domain_attr.as_ref())
            .map_or(FI_AV_UNSPEC, |d| d.av_type);
        // The threading model asked for: every model is served, since every call is
        // thread-safe; echoing it is what MPICH's ch4:ofi checks (it asks FI_THREAD_DOMAIN
        // and refuses a provider answering anything else, init_provider.c of MPICH 5).
        let threading = hints
            .as_ref()
            .and_then(|h| h.domain_attr.as_ref())
            .map_or(FI_THREAD_SAFE, |d| threading_served(d.threading));
        // Default operation flags: only FI_COMPLETION means something here (with
        // FI_SELECTIVE_COMPLETION, operations without flags report only if it is set).
        let tx_flags = hints
            .as_ref()
            .and_then(|h| h.tx_attr.as_ref())
            .map_or(0, |t| t.op_flags & FI_COMPLETION);
        let rx_flags = hints
            .as_ref()
            .and_then(|h| h.rx_attr.as_ref())
            .map_or(0, |r| r.op_flags & FI_COMPLETION);
        let i = &mut *i;
        i.caps = offer.caps;
        i.mode = 0;
        i.addr_format = FI_FORMAT_UNSPEC;
        i.src_addr = c_addr(&offer.src_addr);
        i.src_addrlen = if i.src_addr.is_null() { 0 } else { 8 };
        if let Some(d) = &offer.dest_addr {
            i.dest_addr = c_addr(d);
            i.dest_addrlen = if i.dest_addr.is_null() { 0 } else { 8 };
        }
        let tx = &mut *i.tx_attr;
        tx.caps = offer.tx_caps;
        tx.op_flags = tx_flags;
        tx.msg_order = info::MSG_ORDER;
        tx.comp_order = 0;
        tx.inject_size = INJECT_SIZE;
        tx.size = 1024;
        tx.iov_limit = 1;
        tx.rma_iov_limit = 1;
        let rx = &mut *i.rx_attr;
        rx.caps = offer.rx_caps;
        rx.op_flags = rx_flags;
        rx.msg_order = info::MSG_ORDER;
        rx.size = 1024;
        rx.iov_limit = 1;
        let ep = &mut *i.ep_attr;
        ep.type_ = FI_EP_RDM;
        ep.max_msg_size = MAX_MSG_SIZE;
        ep.mem_tag_format = wire::TAG_MASK;
        ep.tx_ctx_cnt = 1;
        ep.rx_ctx_cnt = 1;
        let d = &mut *i.domain_attr;
        d.name = libc::strdup(DOMAIN_NAME.as_ptr());
        d.threading = threading;
        d.control_progress = FI_PROGRESS_MANUAL;
        d.data_progress = FI_PROGRESS_MANUAL;
        d.resource_mgmt = FI_RM_ENABLED;
        d.av_type = av_type;
        d.mr_mode = offer.mr_mode;
        d.mr_key_size = 4;
        d.mr_iov_limit = 1;
        d.mr_cnt = 2048;
        d.caps = offer.domain_caps;
        d.cq_data_size = wire::DATA_LEN;
        d.cq_cnt = 64;
        d.cntr_cnt = 64;
        d.ep_cnt = 64;
        d.tx_ctx_cnt = 1;
        d.rx_ctx_cnt = 1;
        d.max_ep_tx_ctx = 1;
        d.max_ep_rx_ctx = 1;
        let f = &mut *i.fabric_attr;
        f.name = libc::strdup(FABRIC_NAME.as_ptr());
        f.prov_version = VERSION;
        // The core stores the asked version there too (`fi_getinfo`, src/fabric.c).
        f.api_version = api;
        *info = i;
    }
    0
}

/// A zeroed `fi_info` with zeroed attribute structures, allocated as `fi_allocinfo` does
/// (`calloc` each), so that the core's `fi_freeinfo` (`free` of each) releases it. Each is
/// as large as the largest layout of the libfabric versions served, so that the loader's
/// `fi_dupinfo` copies only allocated bytes (`layout`).
fn alloc_info() -> *mut fi_info {
    // SAFETY: `calloc` returns null or zeroed memory of the size asked, at least the size of
    // the Rust structure it is cast to (`layout`'s sizes include it); every field of these
    // structures is an integer or a pointer, for which all-zero is valid (null / 0).
    unsafe {
        let i = libc::calloc(1, layout::INFO_BYTES).cast::<fi_info>();
        if i.is_null() {
            return i;
        }
        let r = &mut *i;
        r.tx_attr = libc::calloc(1, layout::TX_ATTR_BYTES).cast();
        r.rx_attr = libc::calloc(1, layout::RX_ATTR_BYTES).cast();
        r.ep_attr = libc::calloc(1, layout::EP_ATTR_BYTES).cast();
        r.domain_attr = libc::calloc(1, layout::DOMAIN_ATTR_BYTES).cast();
        r.fabric_attr = libc::calloc(1, layout::FABRIC_ATTR_BYTES).cast();
        if r.tx_attr.is_null()
            || r.rx_attr.is_null()
            || r.ep_attr.is_null()
            || r.domain_attr.is_null()
            || r.fabric_attr.is_null()
        {
            for p in [
                r.tx_attr.cast::<c_void>(),
                r.rx_attr.cast(),
                r.ep_attr.cast(),
                r.domain_attr.cast(),
                r.fabric_attr.cast(),
                i.cast(),
            ] {
                libc::free(p);
            }
            return ptr::null_mut();
        }
        i
    }
}

unsafe extern "C" fn fabric(
    attr: *mut fi_fabric_attr,
    out: *mut *mut fid_fabric,
    context: *mut c_void,
) -> c_int {
    if attr.is_null() || out.is_null() {
        return -FI_EINVAL;
    }
    // SAFETY: libfabric passes a valid attribute structure whose name is null or a C string.
    let name_ok = unsafe { (*attr).name.is_null() || CStr::from_ptr((*attr).name) == FABRIC_NAME };
    if !name_ok {
        return -FI_EINVAL;
    }
    let f = objects::new_fabric(context);
    // SAFETY: `out` is valid for a write (checked non-null; libfabric's contract).
    unsafe { *out = f };
    0
}

#[cfg(test)]
mod version_semantics_tests {
    use super::*;

    #[test]
    fn the_hinted_threading_model_is_echoed_and_anything_else_is_thread_safe() {
        assert_eq!(threading_served(FI_THREAD_DOMAIN), FI_THREAD_DOMAIN);
        assert_eq!(threading_served(FI_THREAD_ENDPOINT), FI_THREAD_ENDPOINT);
        assert_eq!(threading_served(FI_THREAD_SAFE), FI_THREAD_SAFE);
        assert_eq!(threading_served(0), FI_THREAD_SAFE);
        assert_eq!(threading_served(99), FI_THREAD_SAFE);
    }

    #[test]
    fn control_unified_progress_is_served_from_api_2_0_only() {
        let v1 = fi_version(1, 17);
        let v2 = fi_version(2, 5);
        for api in [v1, v2] {
            assert!(control_progress_ok(FI_PROGRESS_UNSPEC, api));
            assert!(control_progress_ok(FI_PROGRESS_MANUAL, api));
            // FI_PROGRESS_AUTO (1) is not served in either series.
            assert!(!control_progress_ok(1, api));
        }
        assert!(!control_progress_ok(FI_PROGRESS_CONTROL_UNIFIED, v1));
        assert!(control_progress_ok(FI_PROGRESS_CONTROL_UNIFIED, v2));
    }
}
