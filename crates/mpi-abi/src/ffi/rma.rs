//! One-sided communication.

use std::ffi::{c_int, c_void};

use super::mem::{self, Lent, put};
use crate::comm;
use crate::consts::*;
use crate::error::AbiError;
use crate::requests::{Req, StatusInfo};
use crate::rma::{self, Access, Origin, Target};
use crate::state::{Eh, call};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_create(
    base: *mut c_void,
    size: isize,
    disp_unit: c_int,
    info: Handle,
    c: Handle,
    win: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Win_create's contract: `base` holds `size` bytes for the window's life,
    // `win` points to a window handle.
    let (b, win) = unsafe { (Lent::new(base), mem::out(win)) };
    call("MPI_Win_create", Eh::Comm(c), |s| {
        comm::check_info(s, info)?;
        let (h, _) = rma::create(s, Some(b), size as i64, disp_unit, c, MPI_WIN_FLAVOR_CREATE)?;
        put(win, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_allocate(
    size: isize,
    disp_unit: c_int,
    info: Handle,
    c: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Win_allocate's contract: `baseptr` points to a `void*`, `win` to a window
    // handle.
    let (bp, win) = unsafe { (mem::out(baseptr.cast::<usize>()), mem::out(win)) };
    call("MPI_Win_allocate", Eh::Comm(c), |s| {
        comm::check_info(s, info)?;
        let (h, addr) = rma::create(s, None, size as i64, disp_unit, c, MPI_WIN_FLAVOR_ALLOCATE)?;
        put(bp, addr)?;
        put(win, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_create_dynamic(
    info: Handle,
    c: Handle,
    win: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Win_create_dynamic's contract: `win` points to a window handle.
    let win = unsafe { mem::out(win) };
    call("MPI_Win_create_dynamic", Eh::Comm(c), |s| {
        comm::check_info(s, info)?;
        let (h, _) = rma::create(s, None, 0, 1, c, MPI_WIN_FLAVOR_DYNAMIC)?;
        put(win, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_attach(w: Handle, base: *mut c_void, size: isize) -> c_int {
    // SAFETY: MPI_Win_attach's contract: `size` bytes at `base` stay the program's memory
    // until they are detached (or the window is freed).
    let b = unsafe { Lent::new(base) };
    call("MPI_Win_attach", Eh::Win(w), |s| rma::attach(s, w, b, size))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_detach(w: Handle, base: *const c_void) -> c_int {
    // SAFETY: only the address is used (to find the attached memory).
    let b = unsafe { Lent::new(base) };
    call("MPI_Win_detach", Eh::Win(w), |s| rma::detach(s, w, b))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_free(win: *mut Handle) -> c_int {
    // SAFETY: MPI_Win_free's contract: `win` points to a window handle.
    let win = unsafe { mem::out(win) };
    let eh = Eh::Win(win.as_deref().copied().unwrap_or(MPI_WIN_NULL));
    call("MPI_Win_free", eh, |s| {
        rma::free(
            s,
            win.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null window pointer"))?,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_fence(_assert: c_int, w: Handle) -> c_int {
    call("MPI_Win_fence", Eh::Win(w), |s| rma::fence(s, w))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_post(g: Handle, _assert: c_int, w: Handle) -> c_int {
    call("MPI_Win_post", Eh::Win(w), |s| {
        rma::post_start(s, g, w, true)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_start(g: Handle, _assert: c_int, w: Handle) -> c_int {
    call("MPI_Win_start", Eh::Win(w), |s| {
        rma::post_start(s, g, w, false)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_complete(w: Handle) -> c_int {
    call("MPI_Win_complete", Eh::Win(w), |s| {
        rma::complete_wait(s, w, true)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_test(w: Handle, flag: *mut c_int) -> c_int {
    // SAFETY: MPI_Win_test's contract: `flag` points to an int.
    let flag = unsafe { mem::out(flag) };
    call("MPI_Win_test", Eh::Win(w), |s| {
        let done = rma::test(s, w)?;
        put(flag, c_int::from(done))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_wait(w: Handle) -> c_int {
    call("MPI_Win_wait", Eh::Win(w), |s| {
        rma::complete_wait(s, w, false)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_lock(
    kind: c_int,
    rank: c_int,
    _assert: c_int,
    w: Handle,
) -> c_int {
    call("MPI_Win_lock", Eh::Win(w), |s| rma::lock(s, kind, rank, w))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_unlock(rank: c_int, w: Handle) -> c_int {
    call("MPI_Win_unlock", Eh::Win(w), |s| rma::unlock(s, rank, w))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_lock_all(_assert: c_int, w: Handle) -> c_int {
    call("MPI_Win_lock_all", Eh::Win(w), |s| {
        rma::lock_all(s, w, true)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_unlock_all(w: Handle) -> c_int {
    call("MPI_Win_unlock_all", Eh::Win(w), |s| {
        rma::lock_all(s, w, false)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_flush(rank: c_int, w: Handle) -> c_int {
    call("MPI_Win_flush", Eh::Win(w), |s| {
        rma::flush(s, Some(rank), w)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_flush_local(rank: c_int, w: Handle) -> c_int {
    call("MPI_Win_flush_local", Eh::Win(w), |s| {
        rma::flush(s, Some(rank), w)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_flush_all(w: Handle) -> c_int {
    call("MPI_Win_flush_all", Eh::Win(w), |s| rma::flush(s, None, w))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_flush_local_all(w: Handle) -> c_int {
    call("MPI_Win_flush_local_all", Eh::Win(w), |s| {
        rma::flush(s, None, w)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_sync(w: Handle) -> c_int {
    call("MPI_Win_sync", Eh::Win(w), |s| rma::win_sync(s, w))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_get_group(w: Handle, g: *mut Handle) -> c_int {
    // SAFETY: MPI_Win_get_group's contract: `g` points to a group handle.
    let g = unsafe { mem::out(g) };
    call("MPI_Win_get_group", Eh::Win(w), |s| {
        let grp = rma::win(s, w)?.comm.group();
        let h = s.handle();
        s.groups.insert(h, grp);
        put(g, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_get_attr(
    w: Handle,
    key: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Win_get_attr's contract: `value` points to a `void*`, `flag` to an int.
    let (value, flag) = unsafe { (mem::out(value.cast::<usize>()), mem::out(flag)) };
    call("MPI_Win_get_attr", Eh::Win(w), |s| {
        let a = &rma::win(s, w)?.attrs;
        let v = match key {
            // MPI_WIN_BASE's value is the base address itself.
            MPI_WIN_BASE => Some(a.base),
            MPI_WIN_SIZE => Some(&a.size as *const isize as usize),
            MPI_WIN_DISP_UNIT => Some(&a.disp_unit as *const c_int as usize),
            MPI_WIN_CREATE_FLAVOR => Some(&a.flavor as *const c_int as usize),
            MPI_WIN_MODEL => Some(&a.model as *const c_int as usize),
            _ => None,
        };
        if let Some(v) = v {
            put(value, v)?;
        }
        put(flag, c_int::from(v.is_some()))
    })
}

/// The RMA access calls.
///
/// # Safety
/// `ob` holds `oc` elements of `odt` (read for puts and accumulates, written for gets);
/// `req`, when given, is null or points to a request.
#[allow(clippy::too_many_arguments)]
unsafe fn access(
    name: &str,
    what: Access,
    ob: *const c_void,
    oc: c_int,
    odt: Handle,
    rank: c_int,
    disp: isize,
    tc: c_int,
    tdt: Handle,
    w: Handle,
    req: Option<*mut Handle>,
) -> c_int {
    // SAFETY: the function's contract.
    let (o, req) = unsafe { (Lent::new(ob), req.map(|r| mem::out(r))) };
    call(name, Eh::Win(w), |s| {
        let origin = Origin {
            buf: o,
            count: oc,
            dtype: odt,
        };
        let target = Target {
            rank,
            disp,
            count: tc,
            dtype: tdt,
        };
        let Some(req) = req else {
            match what {
                Access::Get => {
                    rma::get(s, origin, target, w)?;
                }
                _ => {
                    rma::put(s, origin, target, what, w, false)?;
                }
            }
            return Ok(());
        };
        let r = match what {
            // Request-based puts and gets stay in flight until the request (or a
            // synchronization) completes them.
            Access::Get => rma::RmaReq {
                win: w,
                puts: Vec::new(),
                get: rma::get(s, origin, target, w)?,
            },
            Access::Put => rma::RmaReq {
                win: w,
                puts: rma::put(s, origin, target, what, w, true)?,
                get: None,
            },
            Access::Acc(_) => {
                // Accumulates complete at the target before they return.
                rma::put(s, origin, target, what, w, false)?;
                rma::flush(s, Some(rank).filter(|&r| r != MPI_PROC_NULL), w)?;
                let h = s.new_req(Req::Done(StatusInfo::empty()));
                return put(req, h);
            }
        };
        let h = s.new_req(Req::Rma(r));
        put(req, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Put(
    ob: *const c_void,
    oc: c_int,
    odt: Handle,
    rank: c_int,
    disp: isize,
    tc: c_int,
    tdt: Handle,
    w: Handle,
) -> c_int {
    // SAFETY: the call's contract is `access`'s.
    unsafe {
        access(
            "MPI_Put",
            Access::Put,
            ob,
            oc,
            odt,
            rank,
            disp,
            tc,
            tdt,
            w,
            None,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Get(
    ob: *mut c_void,
    oc: c_int,
    odt: Handle,
    rank: c_int,
    disp: isize,
    tc: c_int,
    tdt: Handle,
    w: Handle,
) -> c_int {
    // SAFETY: the call's contract is `access`'s.
    unsafe {
        access(
            "MPI_Get",
            Access::Get,
            ob,
            oc,
            odt,
            rank,
            disp,
            tc,
            tdt,
            w,
            None,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Rput(
    ob: *const c_void,
    oc: c_int,
    odt: Handle,
    rank: c_int,
    disp: isize,
    tc: c_int,
    tdt: Handle,
    w: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: the call's contract is `access`'s.
    unsafe {
        access(
            "MPI_Rput",
            Access::Put,
            ob,
            oc,
            odt,
            rank,
            disp,
            tc,
            tdt,
            w,
            Some(req),
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Rget(
    ob: *mut c_void,
    oc: c_int,
    odt: Handle,
    rank: c_int,
    disp: isize,
    tc: c_int,
    tdt: Handle,
    w: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: the call's contract is `access`'s.
    unsafe {
        access(
            "MPI_Rget",
            Access::Get,
            ob,
            oc,
            odt,
            rank,
            disp,
            tc,
            tdt,
            w,
            Some(req),
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Accumulate(
    ob: *const c_void,
    oc: c_int,
    odt: Handle,
    rank: c_int,
    disp: isize,
    tc: c_int,
    tdt: Handle,
    op: Handle,
    w: Handle,
) -> c_int {
    // SAFETY: the call's contract is `access`'s.
    unsafe {
        access(
            "MPI_Accumulate",
            Access::Acc(op),
            ob,
            oc,
            odt,
            rank,
            disp,
            tc,
            tdt,
            w,
            None,
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Raccumulate(
    ob: *const c_void,
    oc: c_int,
    odt: Handle,
    rank: c_int,
    disp: isize,
    tc: c_int,
    tdt: Handle,
    op: Handle,
    w: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: the call's contract is `access`'s.
    unsafe {
        access(
            "MPI_Raccumulate",
            Access::Acc(op),
            ob,
            oc,
            odt,
            rank,
            disp,
            tc,
            tdt,
            w,
            Some(req),
        )
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Get_accumulate(
    ob: *const c_void,
    oc: c_int,
    odt: Handle,
    rb: *mut c_void,
    rc: c_int,
    rdt: Handle,
    rank: c_int,
    disp: isize,
    tc: c_int,
    tdt: Handle,
    op: Handle,
    w: Handle,
) -> c_int {
    // SAFETY: MPI_Get_accumulate's contract: `ob` holds `oc` elements of `odt`, `rb` `rc`
    // elements of `rdt`.
    let (o, r) = unsafe { (Lent::new(ob), Lent::new(rb)) };
    call("MPI_Get_accumulate", Eh::Win(w), |s| {
        rma::get_accumulate(
            s,
            Origin {
                buf: o,
                count: oc,
                dtype: odt,
            },
            Origin {
                buf: r,
                count: rc,
                dtype: rdt,
            },
            Target {
                rank,
                disp,
                count: tc,
                dtype: tdt,
            },
            op,
            w,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Fetch_and_op(
    ob: *const c_void,
    rb: *mut c_void,
    dt: Handle,
    rank: c_int,
    disp: isize,
    op: Handle,
    w: Handle,
) -> c_int {
    // SAFETY: MPI_Fetch_and_op's contract: `ob` and `rb` hold one element of `dt`.
    let (o, r) = unsafe { (Lent::new(ob), Lent::new(rb)) };
    call("MPI_Fetch_and_op", Eh::Win(w), |s| {
        rma::get_accumulate(
            s,
            Origin {
                buf: o,
                count: 1,
                dtype: dt,
            },
            Origin {
                buf: r,
                count: 1,
                dtype: dt,
            },
            Target {
                rank,
                disp,
                count: 1,
                dtype: dt,
            },
            op,
            w,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Compare_and_swap(
    ob: *const c_void,
    cb: *const c_void,
    rb: *mut c_void,
    dt: Handle,
    rank: c_int,
    disp: isize,
    w: Handle,
) -> c_int {
    // SAFETY: MPI_Compare_and_swap's contract: the three buffers hold one element of `dt`.
    let (o, c, r) = unsafe { (Lent::new(ob), Lent::new(cb), Lent::new(rb)) };
    call("MPI_Compare_and_swap", Eh::Win(w), |s| {
        rma::compare_and_swap(s, o, c, r, dt, rank, disp, w)
    })
}
