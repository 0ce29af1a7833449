//! Communicators, groups, attributes, error handlers, info objects.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use super::callbacks::{ErrhandlerFunction, UserErrhandler};
use super::mem::{self, put, slice, slice_mut};
use crate::comm;
use crate::consts::*;
use crate::error::AbiError;
use crate::state::{Eh, ErrhObj, call, raise};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_size(c: Handle, size: *mut c_int) -> c_int {
    // SAFETY: MPI_Comm_size's contract: `size` points to an int.
    let size = unsafe { mem::out(size) };
    call("MPI_Comm_size", Eh::Comm(c), |s| {
        put(size, s.comm(c)?.comm.size())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_rank(c: Handle, rank: *mut c_int) -> c_int {
    // SAFETY: MPI_Comm_rank's contract: `rank` points to an int.
    let rank = unsafe { mem::out(rank) };
    call("MPI_Comm_rank", Eh::Comm(c), |s| {
        put(rank, s.comm(c)?.comm.rank())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_dup(c: Handle, out: *mut Handle) -> c_int {
    // SAFETY: MPI_Comm_dup's contract: `out` points to a communicator handle.
    let out = unsafe { mem::out(out) };
    call("MPI_Comm_dup", Eh::Comm(c), |s| put(out, comm::dup(s, c)?))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_dup_with_info(
    c: Handle,
    info: Handle,
    out: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Comm_dup_with_info's contract: `out` points to a communicator handle.
    let out = unsafe { mem::out(out) };
    call("MPI_Comm_dup_with_info", Eh::Comm(c), |s| {
        comm::check_info(s, info)?;
        put(out, comm::dup(s, c)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_split(
    c: Handle,
    color: c_int,
    key: c_int,
    out: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Comm_split's contract: `out` points to a communicator handle.
    let out = unsafe { mem::out(out) };
    call("MPI_Comm_split", Eh::Comm(c), |s| {
        put(out, comm::split(s, c, color, key)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_split_type(
    c: Handle,
    kind: c_int,
    key: c_int,
    info: Handle,
    out: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Comm_split_type's contract: `out` points to a communicator handle.
    let out = unsafe { mem::out(out) };
    call("MPI_Comm_split_type", Eh::Comm(c), |s| {
        comm::check_info(s, info)?;
        put(out, comm::split_type(s, c, kind, key)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_create(c: Handle, g: Handle, out: *mut Handle) -> c_int {
    // SAFETY: MPI_Comm_create's contract: `out` points to a communicator handle.
    let out = unsafe { mem::out(out) };
    call("MPI_Comm_create", Eh::Comm(c), |s| {
        put(out, comm::create(s, c, g)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_free(c: *mut Handle) -> c_int {
    // SAFETY: MPI_Comm_free's contract: `c` points to a communicator handle.
    let c = unsafe { mem::out(c) };
    let eh = Eh::Comm(c.as_deref().copied().unwrap_or(MPI_COMM_NULL));
    call("MPI_Comm_free", eh, |s| {
        comm::free(
            s,
            c.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null communicator pointer"))?,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_compare(a: Handle, b: Handle, result: *mut c_int) -> c_int {
    // SAFETY: MPI_Comm_compare's contract: `result` points to an int.
    let result = unsafe { mem::out(result) };
    call("MPI_Comm_compare", Eh::Comm(a), |s| {
        put(result, comm::compare(s, a, b)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_test_inter(c: Handle, flag: *mut c_int) -> c_int {
    // SAFETY: MPI_Comm_test_inter's contract: `flag` points to an int.
    let flag = unsafe { mem::out(flag) };
    call("MPI_Comm_test_inter", Eh::Comm(c), |s| {
        s.comm(c)?;
        put(flag, 0)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_set_name(c: Handle, name: *const c_char) -> c_int {
    // SAFETY: MPI_Comm_set_name's contract: `name` is a NUL-terminated string.
    let name = unsafe { mem::cstr(name) };
    call("MPI_Comm_set_name", Eh::Comm(c), |s| {
        s.comm_mut(c)?.name = name.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null name"))?;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_get_name(c: Handle, name: *mut c_char, len: *mut c_int) -> c_int {
    // SAFETY: MPI_Comm_get_name's contract: `name` holds MPI_MAX_OBJECT_NAME chars, `len`
    // points to an int.
    let (buf, len) = unsafe { (slice_mut(name, MPI_MAX_OBJECT_NAME as i64), mem::out(len)) };
    call("MPI_Comm_get_name", Eh::Comm(c), |s| {
        let n = s.comm(c)?.name.clone();
        put(len, mem::write_str(buf, &n)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_group(c: Handle, g: *mut Handle) -> c_int {
    // SAFETY: MPI_Comm_group's contract: `g` points to a group handle.
    let g = unsafe { mem::out(g) };
    call("MPI_Comm_group", Eh::Comm(c), |s| {
        put(g, comm::group(s, c)?)
    })
}

unsafe fn ranks_arg<'a>(p: *const c_int, n: c_int) -> Result<&'a [c_int], AbiError> {
    // SAFETY: the group calls' contract: `p` holds `n` ranks.
    unsafe { slice(p, n.into()) }
        .ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null or negative-length rank array"))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Group_incl(
    g: Handle,
    n: c_int,
    ranks: *const c_int,
    out: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Group_incl's contract: `ranks` holds `n` ranks, `out` points to a group.
    let (r, out) = unsafe { (ranks_arg(ranks, n), mem::out(out)) };
    call("MPI_Group_incl", Eh::Other, |s| {
        put(out, comm::group_subset(s, g, r?, true)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Group_excl(
    g: Handle,
    n: c_int,
    ranks: *const c_int,
    out: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Group_excl's contract: `ranks` holds `n` ranks, `out` points to a group.
    let (r, out) = unsafe { (ranks_arg(ranks, n), mem::out(out)) };
    call("MPI_Group_excl", Eh::Other, |s| {
        put(out, comm::group_subset(s, g, r?, false)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Group_translate_ranks(
    a: Handle,
    n: c_int,
    ranks: *const c_int,
    b: Handle,
    out: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Group_translate_ranks's contract: `ranks` and `out` hold `n` ints.
    let (r, out) = unsafe { (ranks_arg(ranks, n), slice_mut(out, n.into())) };
    call("MPI_Group_translate_ranks", Eh::Other, |s| {
        let t = comm::translate(s, a, r?, b)?;
        let out = out.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null output array"))?;
        out.copy_from_slice(&t);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Group_size(g: Handle, size: *mut c_int) -> c_int {
    // SAFETY: MPI_Group_size's contract: `size` points to an int.
    let size = unsafe { mem::out(size) };
    call("MPI_Group_size", Eh::Other, |s| {
        put(size, s.group(g)?.size())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Group_rank(g: Handle, rank: *mut c_int) -> c_int {
    // SAFETY: MPI_Group_rank's contract: `rank` points to an int.
    let rank = unsafe { mem::out(rank) };
    call("MPI_Group_rank", Eh::Other, |s| {
        put(rank, s.group(g)?.rank().unwrap_or(MPI_UNDEFINED))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Group_free(g: *mut Handle) -> c_int {
    // SAFETY: MPI_Group_free's contract: `g` points to a group handle.
    let g = unsafe { mem::out(g) };
    call("MPI_Group_free", Eh::Other, |s| {
        comm::group_free(
            s,
            g.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null group pointer"))?,
        )
    })
}

static TAG_UB_ATTR: c_int = TAG_UB_VALUE;
static HOST_ATTR: c_int = MPI_PROC_NULL;
static IO_ATTR: c_int = MPI_ANY_SOURCE;
static WTIME_GLOBAL_ATTR: c_int = 0;
static UNIVERSE_SIZE_ATTR: AtomicI32 = AtomicI32::new(1);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_get_attr(
    c: Handle,
    key: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Comm_get_attr's contract: `value` points to a `void*`, `flag` to an int.
    let (value, flag) = unsafe { (mem::out(value.cast::<usize>()), mem::out(flag)) };
    call("MPI_Comm_get_attr", Eh::Comm(c), |s| {
        s.comm(c)?;
        let v = match key {
            MPI_TAG_UB => Some(&TAG_UB_ATTR as *const c_int as usize),
            MPI_HOST => Some(&HOST_ATTR as *const c_int as usize),
            MPI_IO => Some(&IO_ATTR as *const c_int as usize),
            MPI_WTIME_IS_GLOBAL => Some(&WTIME_GLOBAL_ATTR as *const c_int as usize),
            MPI_UNIVERSE_SIZE => {
                let n = s.comm(MPI_COMM_WORLD)?.comm.size();
                UNIVERSE_SIZE_ATTR.store(n, Ordering::Relaxed);
                Some(UNIVERSE_SIZE_ATTR.as_ptr() as usize)
            }
            MPI_APPNUM => None,
            k => comm::get_attr(s, c, k)?,
        };
        if let Some(v) = v {
            put(value, v)?;
        }
        put(flag, c_int::from(v.is_some()))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_set_attr(c: Handle, key: c_int, value: *mut c_void) -> c_int {
    call("MPI_Comm_set_attr", Eh::Comm(c), |s| {
        comm::set_attr(s, c, key, value as usize)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_delete_attr(c: Handle, key: c_int) -> c_int {
    call("MPI_Comm_delete_attr", Eh::Comm(c), |s| {
        comm::delete_attr(s, c, key)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_create_keyval(
    copy: usize,
    delete: usize,
    key: *mut c_int,
    _extra: *mut c_void,
) -> c_int {
    // SAFETY: MPI_Comm_create_keyval's contract: `key` points to an int.
    let key = unsafe { mem::out(key) };
    call("MPI_Comm_create_keyval", Eh::Other, |s| {
        // MPI_COMM_NULL_COPY_FN (0) and MPI_COMM_DUP_FN (1) are the copy functions this
        // library runs; MPI_COMM_NULL_DELETE_FN (0) the only delete function.
        if copy > 1 || delete != 0 {
            return Err(AbiError::unsupported(
                "an attribute copy or delete callback of the program (MPI_COMM_NULL_COPY_FN, MPI_COMM_DUP_FN and MPI_COMM_NULL_DELETE_FN are supported)",
            ));
        }
        put(key, comm::create_keyval(s, copy == 1))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_free_keyval(key: *mut c_int) -> c_int {
    // SAFETY: MPI_Comm_free_keyval's contract: `key` points to an int.
    let key = unsafe { mem::out(key) };
    call("MPI_Comm_free_keyval", Eh::Other, |s| {
        comm::free_keyval(
            s,
            key.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null key pointer"))?,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_set_errhandler(c: Handle, e: Handle) -> c_int {
    call("MPI_Comm_set_errhandler", Eh::Comm(c), |s| {
        comm::check_errh(s, e)?;
        s.comm_mut(c)?.errh = e;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_get_errhandler(c: Handle, e: *mut Handle) -> c_int {
    // SAFETY: MPI_Comm_get_errhandler's contract: `e` points to an error handler handle.
    let e = unsafe { mem::out(e) };
    call("MPI_Comm_get_errhandler", Eh::Comm(c), |s| {
        put(e, s.comm(c)?.errh)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_call_errhandler(c: Handle, code: c_int) -> c_int {
    let e = AbiError::new(code, "raised by MPI_Comm_call_errhandler");
    raise("MPI_Comm_call_errhandler", Eh::Comm(c), e);
    MPI_SUCCESS
}

/// `MPI_*_create_errhandler`.
///
/// # Safety
/// `out` is null or points to an error handler handle; `f` is an error handler function.
unsafe fn create_errhandler(name: &str, f: Option<ErrhandlerFunction>, out: *mut Handle) -> c_int {
    // SAFETY: the function's contract.
    let out = unsafe { mem::out(out) };
    call(name, Eh::Other, |s| {
        let f = f.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null error handler function"))?;
        // SAFETY: the contract of MPI_*_create_errhandler: `f` is an error handler function.
        let u = unsafe { UserErrhandler::new(f) };
        let h = s.handle();
        s.errhs.insert(h, ErrhObj::User(u));
        put(out, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_create_errhandler(
    f: Option<ErrhandlerFunction>,
    out: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Comm_create_errhandler's contract is `create_errhandler`'s.
    unsafe { create_errhandler("MPI_Comm_create_errhandler", f, out) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_create_errhandler(
    f: Option<ErrhandlerFunction>,
    out: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Win_create_errhandler's contract is `create_errhandler`'s.
    unsafe { create_errhandler("MPI_Win_create_errhandler", f, out) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Errhandler_free(e: *mut Handle) -> c_int {
    // SAFETY: MPI_Errhandler_free's contract: `e` points to an error handler handle.
    let e = unsafe { mem::out(e) };
    call("MPI_Errhandler_free", Eh::Other, |s| {
        let e = e.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null error handler pointer"))?;
        comm::check_errh(s, *e)?;
        // A handler still set on an object stays in force; only the handle goes.
        *e = MPI_ERRHANDLER_NULL;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_set_errhandler(w: Handle, e: Handle) -> c_int {
    call("MPI_Win_set_errhandler", Eh::Win(w), |s| {
        comm::check_errh(s, e)?;
        crate::rma::win(s, w)?.errh = e;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Win_get_errhandler(w: Handle, e: *mut Handle) -> c_int {
    // SAFETY: MPI_Win_get_errhandler's contract: `e` points to an error handler handle.
    let e = unsafe { mem::out(e) };
    call("MPI_Win_get_errhandler", Eh::Win(w), |s| {
        let h = crate::rma::win(s, w)?.errh;
        put(e, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Info_create(info: *mut Handle) -> c_int {
    // SAFETY: MPI_Info_create's contract: `info` points to an info handle.
    let info = unsafe { mem::out(info) };
    call("MPI_Info_create", Eh::Other, |s| {
        let h = s.handle();
        s.infos.insert(h, Default::default());
        put(info, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Info_set(
    info: Handle,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    // SAFETY: MPI_Info_set's contract: NUL-terminated strings.
    let (k, v) = unsafe { (mem::cstr(key), mem::cstr(value)) };
    call("MPI_Info_set", Eh::Other, |s| {
        let k = k.ok_or_else(|| AbiError::new(MPI_ERR_INFO_KEY, "a null key"))?;
        if k.is_empty() || k.len() >= MPI_MAX_INFO_KEY {
            return Err(AbiError::new(
                MPI_ERR_INFO_KEY,
                format!("key {k:?} is empty or too long"),
            ));
        }
        let v = v.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null value"))?;
        comm::info(s, info)?.insert(k, v);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Info_get_string(
    info: Handle,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Info_get_string's contract: `key` is a NUL-terminated string, `buflen`
    // and `flag` point to ints, `value` holds `*buflen` chars.
    let (k, blen, flag) = unsafe { (mem::cstr(key), mem::out(buflen), mem::out(flag)) };
    call("MPI_Info_get_string", Eh::Other, |s| {
        let k = k.ok_or_else(|| AbiError::new(MPI_ERR_INFO_KEY, "a null key"))?;
        let blen = blen.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null buffer length"))?;
        let v = comm::info(s, info)?.get(&k).cloned();
        match v {
            Some(v) => {
                if *blen > 0 {
                    // SAFETY: as above: `value` holds `*buflen` chars.
                    let buf = unsafe { slice_mut(value, (*blen).into()) };
                    mem::write_str(buf, &v)?;
                }
                *blen = v.len() as c_int + 1;
                put(flag, 1)
            }
            None => put(flag, 0),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Info_get_nkeys(info: Handle, n: *mut c_int) -> c_int {
    // SAFETY: MPI_Info_get_nkeys's contract: `n` points to an int.
    let n = unsafe { mem::out(n) };
    call("MPI_Info_get_nkeys", Eh::Other, |s| {
        put(n, comm::info(s, info)?.len() as c_int)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Info_get_nthkey(info: Handle, i: c_int, key: *mut c_char) -> c_int {
    // SAFETY: MPI_Info_get_nthkey's contract: `key` holds MPI_MAX_INFO_KEY chars.
    let buf = unsafe { slice_mut(key, MPI_MAX_INFO_KEY as i64) };
    call("MPI_Info_get_nthkey", Eh::Other, |s| {
        let k = usize::try_from(i)
            .ok()
            .and_then(|i| comm::info(s, info).ok()?.keys().nth(i).cloned());
        let k = k.ok_or_else(|| AbiError::new(MPI_ERR_ARG, format!("no key number {i}")))?;
        mem::write_str(buf, &k).map(|_| ())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Info_delete(info: Handle, key: *const c_char) -> c_int {
    // SAFETY: MPI_Info_delete's contract: `key` is a NUL-terminated string.
    let k = unsafe { mem::cstr(key) };
    call("MPI_Info_delete", Eh::Other, |s| {
        let k = k.ok_or_else(|| AbiError::new(MPI_ERR_INFO_KEY, "a null key"))?;
        comm::info(s, info)?
            .remove(&k)
            .map(|_| ())
            .ok_or_else(|| AbiError::new(MPI_ERR_INFO_NOKEY, format!("no key {k:?}")))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Info_dup(info: Handle, out: *mut Handle) -> c_int {
    // SAFETY: MPI_Info_dup's contract: `out` points to an info handle.
    let out = unsafe { mem::out(out) };
    call("MPI_Info_dup", Eh::Other, |s| {
        let m = comm::info(s, info)?.clone();
        let h = s.handle();
        s.infos.insert(h, m);
        put(out, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Info_free(info: *mut Handle) -> c_int {
    // SAFETY: MPI_Info_free's contract: `info` points to an info handle.
    let info = unsafe { mem::out(info) };
    call("MPI_Info_free", Eh::Other, |s| {
        let h = info.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null info pointer"))?;
        s.infos.remove(h).ok_or_else(|| {
            AbiError::new(MPI_ERR_INFO, format!("{:#x} is not an info handle", *h))
        })?;
        *h = MPI_INFO_NULL;
        Ok(())
    })
}
