//! Environment calls: init/finalize, thread levels, timers, versions, errors, abort.

use std::ffi::{c_char, c_double, c_int};
use std::sync::OnceLock;
use std::time::Instant;

use super::mem::{self, Lent, put, slice_mut};
use crate::consts::*;
use crate::error::{AbiError, class_text};
use crate::init::start_world;
use crate::state::{self, Eh, FINALIZED, INITIALIZED, State, call, phase, raise};

fn init(name: &str, required: c_int, provided: Option<&mut c_int>) -> c_int {
    match phase() {
        INITIALIZED => {
            return raise(
                name,
                Eh::Other,
                AbiError::new(MPI_ERR_OTHER, "MPI is already initialized"),
            );
        }
        FINALIZED => {
            return raise(
                name,
                Eh::Other,
                AbiError::new(
                    MPI_ERR_OTHER,
                    "MPI was finalized and cannot be initialized again",
                ),
            );
        }
        _ => {}
    }
    let level = required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED);
    match start_world() {
        Ok(w) => {
            state::install(State::new(w, level));
            state::set_phase(INITIALIZED);
            if let Some(p) = provided {
                *p = level;
            }
            MPI_SUCCESS
        }
        Err(e) => {
            // The default error handler is MPI_ERRORS_ARE_FATAL.
            eprintln!("nicemu MPI: {name} failed: {}", e.msg);
            std::process::exit(e.class.clamp(1, 255));
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    init("MPI_Init", MPI_THREAD_SINGLE, None)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Init_thread's contract: `provided` points to an int.
    let provided = unsafe { mem::out(provided) };
    init("MPI_Init_thread", required, provided)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    if phase() != INITIALIZED {
        return raise(
            "MPI_Finalize",
            Eh::Other,
            AbiError::new(MPI_ERR_OTHER, "MPI is not initialized"),
        );
    }
    let Some(st) = state::take() else {
        return raise(
            "MPI_Finalize",
            Eh::Other,
            AbiError::new(
                MPI_ERR_OTHER,
                "MPI_Finalize called from a thread other than the one that initialized MPI, or from a callback",
            ),
        );
    };
    state::set_phase(FINALIZED);
    match st.finalize() {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise("MPI_Finalize", Eh::Other, e),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Initialized(flag: *mut c_int) -> c_int {
    // SAFETY: MPI_Initialized's contract: `flag` points to an int.
    match unsafe { mem::out(flag) } {
        Some(f) => {
            *f = c_int::from(phase() != state::NOT_INITIALIZED);
            MPI_SUCCESS
        }
        None => MPI_ERR_ARG,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Finalized(flag: *mut c_int) -> c_int {
    // SAFETY: MPI_Finalized's contract: `flag` points to an int.
    match unsafe { mem::out(flag) } {
        Some(f) => {
            *f = c_int::from(phase() == FINALIZED);
            MPI_SUCCESS
        }
        None => MPI_ERR_ARG,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    // SAFETY: MPI_Query_thread's contract: `provided` points to an int.
    let provided = unsafe { mem::out(provided) };
    call("MPI_Query_thread", Eh::Other, |s| {
        put(provided, s.thread_level)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Is_thread_main(flag: *mut c_int) -> c_int {
    // SAFETY: MPI_Is_thread_main's contract: `flag` points to an int.
    let flag = unsafe { mem::out(flag) };
    // The state lives on the initializing thread: reaching it means this is that thread.
    match flag {
        Some(f) => {
            *f = 0;
            let r = call("MPI_Is_thread_main", Eh::Other, |_| Ok(()));
            if r == MPI_SUCCESS {
                *f = 1;
            }
            MPI_SUCCESS
        }
        None => MPI_ERR_ARG,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Abort(_comm: Handle, errorcode: c_int) -> c_int {
    eprintln!("nicemu MPI: MPI_Abort called with error code {errorcode}");
    // The exit status keeps the low byte; an abort never exits with success.
    let status = errorcode & 0xff;
    crate::state::exit_job(
        if status == 0 { 1 } else { status },
        &format!("MPI_Abort called with error code {errorcode}"),
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Alloc_mem(
    size: isize,
    info: Handle,
    baseptr: *mut std::ffi::c_void,
) -> c_int {
    // SAFETY: MPI_Alloc_mem's contract: `baseptr` points to a `void*`.
    let bp = unsafe { mem::out(baseptr.cast::<usize>()) };
    call("MPI_Alloc_mem", Eh::Other, |s| {
        crate::comm::check_info(s, info)?;
        let size = usize::try_from(size)
            .map_err(|_| AbiError::new(MPI_ERR_ARG, format!("a negative size {size}")))?;
        let (m, at) = mem::OwnedMem::new(size);
        // Registered memory, as MPI_Alloc_mem promises: on a node that reaches this
        // process's memory the NIC keeps it registered until MPI_Free_mem, so messages in it
        // go zero copy without a registration on the way.
        // A registration the NIC refuses (out of memory descriptors) leaves ordinary memory,
        // which the first message in it registers.
        let _ = s
            .world
            .universe
            .with_transport(|t| t.keep_registered(at.addr() as u64, size));
        s.allocs.insert(at.addr(), m);
        put(bp, at.addr())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Free_mem(base: *mut std::ffi::c_void) -> c_int {
    call("MPI_Free_mem", Eh::Other, |s| {
        s.world
            .universe
            .with_transport(|t| t.forget_registered(base as u64));
        s.allocs.remove(&(base as usize)).map(drop).ok_or_else(|| {
            AbiError::new(
                MPI_ERR_ARG,
                format!("{base:?} was not allocated by MPI_Alloc_mem"),
            )
        })
    })
}

fn epoch() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

#[unsafe(no_mangle)]
pub extern "C" fn MPI_Wtime() -> c_double {
    epoch().elapsed().as_secs_f64()
}

#[unsafe(no_mangle)]
pub extern "C" fn MPI_Wtick() -> c_double {
    1e-9
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    // SAFETY: MPI_Get_processor_name's contract: `name` holds MPI_MAX_PROCESSOR_NAME chars.
    let name = unsafe { slice_mut(name, MPI_MAX_PROCESSOR_NAME as i64) };
    // SAFETY: as above: `resultlen` points to an int.
    let len = unsafe { mem::out(resultlen) };
    call("MPI_Get_processor_name", Eh::Other, |s| {
        let n = format!(
            "nicemu-{}-node{}",
            format!("{:?}", s.world.nic).to_lowercase(),
            s.world.node
        );
        put(len, mem::write_str(name, &n)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    // SAFETY: MPI_Get_version's contract: both point to ints.
    let (v, sv) = unsafe { (mem::out(version), mem::out(subversion)) };
    match (v, sv) {
        (Some(v), Some(sv)) => {
            *v = 5;
            *sv = 0;
            MPI_SUCCESS
        }
        _ => MPI_ERR_ARG,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Abi_get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    // SAFETY: MPI_Abi_get_version's contract: both point to ints.
    let (v, sv) = unsafe { (mem::out(version), mem::out(subversion)) };
    match (v, sv) {
        (Some(v), Some(sv)) => {
            *v = 1;
            *sv = 0;
            MPI_SUCCESS
        }
        _ => MPI_ERR_ARG,
    }
}

/// The library's version line.
pub const LIBRARY_VERSION: &str = concat!(
    "nicemu MPI ",
    env!("CARGO_PKG_VERSION"),
    " (MPI 5.0, standard ABI 1.0; emulated Cassini/Gemini NICs)"
);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Get_library_version(
    version: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Get_library_version's contract: `version` holds
    // MPI_MAX_LIBRARY_VERSION_STRING chars, `resultlen` points to an int.
    let (buf, len) = unsafe {
        (
            slice_mut(version, MPI_MAX_LIBRARY_VERSION_STRING as i64),
            mem::out(resultlen),
        )
    };
    match mem::write_str(buf, LIBRARY_VERSION).and_then(|n| put(len, n)) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => e.class,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Error_string(
    code: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Error_string's contract: `string` holds MPI_MAX_ERROR_STRING chars,
    // `resultlen` points to an int.
    let (buf, len) = unsafe {
        (
            slice_mut(string, MPI_MAX_ERROR_STRING as i64),
            mem::out(resultlen),
        )
    };
    let Some(text) = state::error_text(code) else {
        return MPI_ERR_ARG;
    };
    match mem::write_str(buf, &text).and_then(|n| put(len, n)) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => e.class,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Error_class(code: c_int, class: *mut c_int) -> c_int {
    // SAFETY: MPI_Error_class's contract: `class` points to an int.
    let class = unsafe { mem::out(class) };
    if class_text(code).is_none() {
        return MPI_ERR_ARG;
    }
    match put(class, code) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => e.class,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Buffer_attach(buffer: *mut std::ffi::c_void, size: c_int) -> c_int {
    // SAFETY: MPI_Buffer_attach's contract: `buffer` holds `size` bytes (only its size is
    // used: buffered sends are staged like standard ones).
    let b = unsafe { Lent::new(buffer) };
    call("MPI_Buffer_attach", Eh::Other, |s| {
        if s.bsend.is_some() {
            return Err(AbiError::new(
                MPI_ERR_BUFFER,
                "a buffer is already attached",
            ));
        }
        let size = crate::types::count(size)?;
        s.bsend = Some((b.addr(), size));
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Buffer_detach(
    buffer: *mut std::ffi::c_void,
    size: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Buffer_detach's contract: `buffer` points to a `void*`, `size` to an int.
    let (bp, sz) = unsafe { (mem::out(buffer.cast::<usize>()), mem::out(size)) };
    call("MPI_Buffer_detach", Eh::Other, |s| {
        let (addr, n) = s.bsend.take().unwrap_or((0, 0));
        put(bp, addr)?;
        put(sz, n as c_int)
    })
}
