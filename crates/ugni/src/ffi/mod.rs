//! The C boundary: every function, type and table `include/gni_pub.h` declares. Each
//! function turns its pointer arguments into values with [`ptr`], resolves its handles in
//! the tables of [`crate::handles`] and calls `userlib::gni`; [`call`] turns the outcome
//! into a `gni_return_t` and keeps a panic from crossing into C.
//!
//! Safety: every exported function relies on its caller following the uGNI contract for its
//! arguments (valid pointers of the sizes the arguments say, or null where the call allows
//! it; a datagram's out-buffer valid until the exchange is collected); that contract is the
//! `# Safety` of each of them.

#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc, non_snake_case, non_camel_case_types)]

pub mod cdm;
pub mod cq;
pub mod ep;
pub mod mem;
pub mod misc;
pub mod post;
pub(crate) mod ptr;
pub mod smsg;
pub mod unsupported;

use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};

use firmware_spec::gemini::gni::ReturnCode;
use userlib::gni::GniError;

/// `gni_return_t` (a C enum: 4 bytes).
pub type gni_return_t = u32;

/// `gni_cq_entry_t`.
pub type gni_cq_entry_t = u64;

/// `gni_mem_handle_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct gni_mem_handle_t {
    pub qword1: u64,
    pub qword2: u64,
}

impl From<gni_mem_handle_t> for userlib::gni::MemHandle {
    fn from(h: gni_mem_handle_t) -> Self {
        userlib::gni::MemHandle {
            qword1: h.qword1,
            qword2: h.qword2,
        }
    }
}

impl From<userlib::gni::MemHandle> for gni_mem_handle_t {
    fn from(h: userlib::gni::MemHandle) -> Self {
        gni_mem_handle_t {
            qword1: h.qword1,
            qword2: h.qword2,
        }
    }
}

/// `gni_smsg_attr_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct gni_smsg_attr_t {
    pub msg_type: u32,
    /// `void *msg_buffer`.
    pub msg_buffer: u64,
    pub buff_size: u32,
    pub mem_hndl: gni_mem_handle_t,
    pub mbox_offset: u32,
    pub mbox_maxcredit: u16,
    pub msg_maxsize: u32,
}

/// An opaque handle as C sees it (`gni_cdm_handle_t`, ...).
pub type Handle = *mut std::ffi::c_void;

/// A library outcome as a C return code.
pub(crate) type R<T> = Result<T, ReturnCode>;

/// The return code of a library error.
pub(crate) fn rc(e: GniError) -> ReturnCode {
    e.rc()
}

/// Run the body of an exported function: its outcome as a `gni_return_t`; a panic (a bug of
/// ours) is reported on stderr and returned as `GNI_RC_INVALID_STATE` instead of unwinding
/// into C.
pub(crate) fn call(name: &str, f: impl FnOnce() -> R<()>) -> gni_return_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => traced(name, ReturnCode::Success),
        Ok(Err(rc)) => traced(name, rc),
        Err(_) => {
            eprintln!("nicemu-ugni: internal error in {name}");
            ReturnCode::InvalidState.code()
        }
    }
}

/// `NICEMU_UGNI_TRACE`: 1 prints every call that returns an error on stderr (not `SUCCESS`,
/// nor `NOT_DONE` and a probe's `NO_MATCH`, which polling calls return all the time), 2
/// every call. A uGNI program that gives up on a return code rarely says which call
/// returned it; this does.
fn trace_level() -> u8 {
    static LEVEL: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| {
        std::env::var(crate::host::TRACE)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    })
}

/// `rc` as the C code, printed first if [`trace_level`] asks for it.
fn traced(name: &str, rc: ReturnCode) -> gni_return_t {
    let level = trace_level();
    let polling = matches!(rc, ReturnCode::Success | ReturnCode::NotDone)
        || (rc == ReturnCode::NoMatch && name.starts_with("GNI_PostDataProbe"));
    if level >= 2 || (level == 1 && !polling) {
        // One write per line, so that the lines of the ranks a launcher collects on one
        // stream do not interleave.
        let line = format!(
            "nicemu-ugni[{}]: {name} -> {}\n",
            std::process::id(),
            rc.name()
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
    rc.code()
}

/// Like [`call`], for a body that may succeed with another code (`GNI_RC_NOT_DONE` is an
/// answer, not an error, for some calls).
pub(crate) fn call_rc(name: &str, f: impl FnOnce() -> R<ReturnCode>) -> gni_return_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(rc)) | Ok(Err(rc)) => traced(name, rc),
        Err(_) => {
            eprintln!("nicemu-ugni: internal error in {name}");
            ReturnCode::InvalidState.code()
        }
    }
}

/// A C string table entry (`const char *`), shareable as a static.
#[repr(transparent)]
pub struct CStr(*const c_char);

// SAFETY: every entry points to a NUL-terminated string literal, immutable for the life of
// the program.
unsafe impl Sync for CStr {}

macro_rules! c_str_table {
    ($($s:literal),* $(,)?) => {
        [$(CStr(concat!($s, "\0").as_ptr().cast())),*]
    };
}

/// `gni_err_str[]`: the names of the return codes, indexed by code.
#[unsafe(no_mangle)]
pub static gni_err_str: [CStr; 14] = c_str_table!(
    "GNI_RC_SUCCESS",
    "GNI_RC_NOT_DONE",
    "GNI_RC_INVALID_PARAM",
    "GNI_RC_ERROR_RESOURCE",
    "GNI_RC_TIMEOUT",
    "GNI_RC_PERMISSION_ERROR",
    "GNI_RC_DESCRIPTOR_ERROR",
    "GNI_RC_ALIGNMENT_ERROR",
    "GNI_RC_INVALID_STATE",
    "GNI_RC_NO_MATCH",
    "GNI_RC_SIZE_ERROR",
    "GNI_RC_TRANSACTION_ERROR",
    "GNI_RC_ILLEGAL_OP",
    "GNI_RC_ERROR_NOMEM",
);

/// `gni_statistic_str[]`: the names of the NIC statistics, indexed by `gni_statistic_t`.
#[unsafe(no_mangle)]
pub static gni_statistic_str: [CStr; 7] = c_str_table!(
    "GNI_STAT_SMSG_BUFF_CREDITS_STALL",
    "GNI_STAT_SMSG_DLA_STALL",
    "GNI_STAT_SMSG_MBOX_CREDITS_STALL",
    "GNI_STAT_SMSG_REQ_STALL",
    "GNI_STAT_SMSG_RETRANS_COUNT",
    "GNI_STAT_SMSG_RETRANS_DLA_COUNT",
    "GNI_STAT_SMSG_RETRANS_STALL",
);

extern "C" fn ugni_at_exit() {
    // A panic must not unwind out of an exit handler.
    let _ = catch_unwind(crate::host::at_exit);
}

/// Have [`crate::host::at_exit`] run when the process exits.
pub(crate) fn exit_hook() {
    // SAFETY: `ugni_at_exit` is an `extern "C" fn()` with no arguments, what atexit takes,
    // and catches every panic.
    let rc = unsafe { libc::atexit(ugni_at_exit) };
    if rc != 0 {
        eprintln!("nicemu-ugni: atexit failed; the node will not linger at exit");
    }
}

/// `GNI_NUM_STATS`.
pub const GNI_NUM_STATS: u32 = 7;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_names_follow_the_codes() {
        for code in 0..14u32 {
            let rc = ReturnCode::try_from(code).unwrap();
            // SAFETY: the table's entries are NUL-terminated literals.
            let s = unsafe { std::ffi::CStr::from_ptr(gni_err_str[code as usize].0) };
            assert_eq!(s.to_str().unwrap(), rc.name());
        }
        assert_eq!(
            std::mem::size_of::<gni_smsg_attr_t>(),
            56,
            "gni_smsg_attr_t on x86-64"
        );
        assert_eq!(std::mem::offset_of!(gni_smsg_attr_t, mem_hndl), 24);
        assert_eq!(std::mem::offset_of!(gni_smsg_attr_t, msg_maxsize), 48);
    }

    #[test]
    fn a_panic_becomes_a_return_code() {
        let rc = call("test", || panic!("bug"));
        assert_eq!(rc, ReturnCode::InvalidState.code());
        assert_eq!(call("test", || Err(ReturnCode::NoMatch)), 9);
        assert_eq!(call_rc("test", || Ok(ReturnCode::NotDone)), 1);
    }
}
