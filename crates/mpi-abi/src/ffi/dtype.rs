//! Datatypes, packing, addresses and reduction operations.

use std::ffi::{c_char, c_int, c_void};

use mpi::typemap::Layout;

use super::callbacks::{UserFunction, UserOp};
use super::mem::{self, Lent, put, slice, slice_mut};
use crate::consts::*;
use crate::error::{AResult, AbiError};
use crate::state::{Eh, OpObj, State, call};
use crate::types::{self, count};

/// An array argument of `n` entries.
///
/// # Safety
/// `p` is null or holds `n` entries.
unsafe fn arr<'a, T>(p: *const T, n: c_int) -> AResult<&'a [T]> {
    // SAFETY: the function's contract.
    unsafe { slice(p, n.into()) }
        .ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null or negative-length array argument"))
}

/// Run a type constructor and store its datatype in `out`.
///
/// # Safety
/// `out` is null or points to a datatype handle.
unsafe fn new_type(
    name: &str,
    out: *mut Handle,
    f: impl FnOnce(&mut State) -> AResult<Handle>,
) -> c_int {
    // SAFETY: the function's contract.
    let out = unsafe { mem::out(out) };
    call(name, Eh::Other, |s| {
        let h = f(s)?;
        put(out, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_contiguous(n: c_int, old: Handle, out: *mut Handle) -> c_int {
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe {
        new_type("MPI_Type_contiguous", out, |s| {
            let n = count(n)?;
            types::derive(s, old, |l| Layout::contiguous(n, l))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_vector(
    n: c_int,
    blocklen: c_int,
    stride: c_int,
    old: Handle,
    out: *mut Handle,
) -> c_int {
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe {
        new_type("MPI_Type_vector", out, |s| {
            let (n, b) = (count(n)?, count(blocklen)?);
            types::derive(s, old, |l| Layout::vector(n, b, stride as isize, l))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_create_hvector(
    n: c_int,
    blocklen: c_int,
    stride: isize,
    old: Handle,
    out: *mut Handle,
) -> c_int {
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe {
        new_type("MPI_Type_create_hvector", out, |s| {
            let (n, b) = (count(n)?, count(blocklen)?);
            types::derive(s, old, |l| Layout::hvector(n, b, stride, l))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_indexed(
    n: c_int,
    blocklens: *const c_int,
    displs: *const c_int,
    old: Handle,
    out: *mut Handle,
) -> c_int {
    // SAFETY: the constructor's contract: the arrays hold `n` entries, `out` points to
    // a datatype handle.
    let (bl, di) = unsafe { (arr(blocklens, n), arr(displs, n)) };
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe {
        new_type("MPI_Type_indexed", out, |s| {
            let b = types::counts(bl?)?;
            let d: Vec<isize> = di?.iter().map(|&x| x as isize).collect();
            types::derive(s, old, |l| Layout::indexed(&b, &d, l))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_create_hindexed(
    n: c_int,
    blocklens: *const c_int,
    displs: *const isize,
    old: Handle,
    out: *mut Handle,
) -> c_int {
    // SAFETY: the constructor's contract: the arrays hold `n` entries, `out` points to
    // a datatype handle.
    let (bl, di) = unsafe { (arr(blocklens, n), arr(displs, n)) };
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe {
        new_type("MPI_Type_create_hindexed", out, |s| {
            let b = types::counts(bl?)?;
            let d = di?;
            types::derive(s, old, |l| Layout::hindexed(&b, d, l))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_create_indexed_block(
    n: c_int,
    blocklen: c_int,
    displs: *const c_int,
    old: Handle,
    out: *mut Handle,
) -> c_int {
    // SAFETY: the constructor's contract: the arrays hold `n` entries, `out` points to
    // a datatype handle.
    let (di,) = unsafe { (arr(displs, n),) };
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe {
        new_type("MPI_Type_create_indexed_block", out, |s| {
            let b = count(blocklen)?;
            let d: Vec<isize> = di?.iter().map(|&x| x as isize).collect();
            types::derive(s, old, |l| Layout::indexed_block(b, &d, l))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_create_hindexed_block(
    n: c_int,
    blocklen: c_int,
    displs: *const isize,
    old: Handle,
    out: *mut Handle,
) -> c_int {
    // SAFETY: the constructor's contract: the arrays hold `n` entries, `out` points to
    // a datatype handle.
    let (di,) = unsafe { (arr(displs, n),) };
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe {
        new_type("MPI_Type_create_hindexed_block", out, |s| {
            let b = vec![count(blocklen)?; count(n)?];
            let d = di?;
            types::derive(s, old, |l| Layout::hindexed(&b, d, l))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_create_struct(
    n: c_int,
    blocklens: *const c_int,
    displs: *const isize,
    types_: *const Handle,
    out: *mut Handle,
) -> c_int {
    // SAFETY: the constructor's contract: the arrays hold `n` entries, `out` points to
    // a datatype handle.
    let (bl, di, ty) = unsafe { (arr(blocklens, n), arr(displs, n), arr(types_, n)) };
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe {
        new_type("MPI_Type_create_struct", out, |s| {
            types::structure(s, bl?, di?, ty?)
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_create_resized(
    old: Handle,
    lb: isize,
    extent: isize,
    out: *mut Handle,
) -> c_int {
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe {
        new_type("MPI_Type_create_resized", out, |s| {
            types::derive(s, old, |l| Layout::resized(l, lb, extent))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_dup(old: Handle, out: *mut Handle) -> c_int {
    // SAFETY: the constructor's contract: `out` points to a datatype handle.
    unsafe { new_type("MPI_Type_dup", out, |s| types::dup(s, old)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_commit(dt: *mut Handle) -> c_int {
    // SAFETY: MPI_Type_commit's contract: `dt` points to a datatype handle.
    let dt = unsafe { mem::out(dt) };
    call("MPI_Type_commit", Eh::Other, |s| {
        let h = *dt.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null datatype pointer"))?;
        types::commit(s, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_free(dt: *mut Handle) -> c_int {
    // SAFETY: MPI_Type_free's contract: `dt` points to a datatype handle.
    let dt = unsafe { mem::out(dt) };
    call("MPI_Type_free", Eh::Other, |s| {
        let h = dt.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null datatype pointer"))?;
        types::free(s, *h)?;
        *h = MPI_DATATYPE_NULL;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_size(dt: Handle, size: *mut c_int) -> c_int {
    // SAFETY: MPI_Type_size's contract: `size` points to an int.
    let size = unsafe { mem::out(size) };
    call("MPI_Type_size", Eh::Other, |s| {
        put(size, types::size_int(s, dt)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_get_extent(
    dt: Handle,
    lb: *mut isize,
    extent: *mut isize,
) -> c_int {
    // SAFETY: MPI_Type_get_extent's contract: both point to MPI_Aint.
    let (lb, ext) = unsafe { (mem::out(lb), mem::out(extent)) };
    call("MPI_Type_get_extent", Eh::Other, |s| {
        let l = s.any_layout(dt)?;
        put(lb, l.lb())?;
        put(ext, l.extent())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_get_true_extent(
    dt: Handle,
    lb: *mut isize,
    extent: *mut isize,
) -> c_int {
    // SAFETY: MPI_Type_get_true_extent's contract: both point to MPI_Aint.
    let (lb, ext) = unsafe { (mem::out(lb), mem::out(extent)) };
    call("MPI_Type_get_true_extent", Eh::Other, |s| {
        let l = s.any_layout(dt)?;
        put(lb, l.true_lb())?;
        put(ext, l.true_extent())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_set_name(dt: Handle, name: *const c_char) -> c_int {
    // SAFETY: MPI_Type_set_name's contract: `name` is a NUL-terminated string.
    let name = unsafe { mem::cstr(name) };
    call("MPI_Type_set_name", Eh::Other, |s| {
        let n = name.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null name"))?;
        let t = s
            .types
            .get_mut(&dt)
            .ok_or_else(|| crate::state::bad_type(dt))?;
        t.name = n;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Type_get_name(
    dt: Handle,
    name: *mut c_char,
    len: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Type_get_name's contract: `name` holds MPI_MAX_OBJECT_NAME chars, `len`
    // points to an int.
    let (buf, len) = unsafe { (slice_mut(name, MPI_MAX_OBJECT_NAME as i64), mem::out(len)) };
    call("MPI_Type_get_name", Eh::Other, |s| {
        let t = s.types.get(&dt).ok_or_else(|| crate::state::bad_type(dt))?;
        put(len, mem::write_str(buf, &t.name)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Get_address(location: *const c_void, address: *mut isize) -> c_int {
    // SAFETY: MPI_Get_address's contract: `address` points to an MPI_Aint.
    let address = unsafe { mem::out(address) };
    call("MPI_Get_address", Eh::Other, |_| {
        put(address, location as isize)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn MPI_Aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}

#[unsafe(no_mangle)]
pub extern "C" fn MPI_Aint_diff(a: isize, b: isize) -> isize {
    a.wrapping_sub(b)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Pack(
    inbuf: *const c_void,
    incount: c_int,
    dt: Handle,
    outbuf: *mut c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: MPI_Pack's contract: `inbuf` holds `incount` elements of `dt`, `outbuf`
    // `outsize` bytes, `position` points to an int.
    let (inb, outb, pos) = unsafe { (Lent::new(inbuf), Lent::new(outbuf), mem::out(position)) };
    call("MPI_Pack", Eh::Comm(comm), |s| {
        s.comm(comm)?;
        let l = s.layout(dt)?;
        let data = inb.read(&l, count(incount)?)?;
        let pos = pos.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null position"))?;
        let at = types::pack_room(*pos, outsize, data.len())?;
        outb.offset(at as isize).write_bytes(&data)?;
        *pos += data.len() as c_int;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Unpack(
    inbuf: *const c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut c_void,
    outcount: c_int,
    dt: Handle,
    comm: Handle,
) -> c_int {
    // SAFETY: MPI_Unpack's contract: `inbuf` holds `insize` bytes, `outbuf` `outcount`
    // elements of `dt`, `position` points to an int.
    let (inb, outb, pos) = unsafe { (Lent::new(inbuf), Lent::new(outbuf), mem::out(position)) };
    call("MPI_Unpack", Eh::Comm(comm), |s| {
        s.comm(comm)?;
        let l = s.layout(dt)?;
        let n = count(outcount)?;
        let pos = pos.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null position"))?;
        let need = l.size() * n;
        let at = types::pack_room(*pos, insize, need)?;
        let data = inb.offset(at as isize).read_bytes(need)?;
        outb.write(&l, n, &data)?;
        *pos += need as c_int;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Pack_size(
    incount: c_int,
    dt: Handle,
    comm: Handle,
    size: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Pack_size's contract: `size` points to an int.
    let size = unsafe { mem::out(size) };
    call("MPI_Pack_size", Eh::Comm(comm), |s| {
        s.comm(comm)?;
        let n = count(incount)? * s.any_layout(dt)?.size();
        put(
            size,
            c_int::try_from(n)
                .map_err(|_| AbiError::new(MPI_ERR_COUNT, "the packed size does not fit an int"))?,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Op_create(
    f: Option<UserFunction>,
    commute: c_int,
    op: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Op_create's contract: `op` points to an operation handle.
    let op = unsafe { mem::out(op) };
    call("MPI_Op_create", Eh::Other, |s| {
        let f = f.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null user function"))?;
        // SAFETY: MPI_Op_create's contract: `f` is an MPI_User_function.
        let user = unsafe { UserOp::new(f, commute != 0) };
        let h = s.handle();
        s.ops.insert(h, OpObj { user });
        put(op, h)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Op_free(op: *mut Handle) -> c_int {
    // SAFETY: MPI_Op_free's contract: `op` points to an operation handle.
    let op = unsafe { mem::out(op) };
    call("MPI_Op_free", Eh::Other, |s| {
        let h = op.ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null operation pointer"))?;
        s.ops.remove(h).ok_or_else(|| {
            AbiError::new(
                MPI_ERR_OP,
                format!("{:#x} is not an operation made by MPI_Op_create", *h),
            )
        })?;
        *h = MPI_OP_NULL;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Op_commutative(op: Handle, commute: *mut c_int) -> c_int {
    // SAFETY: MPI_Op_commutative's contract: `commute` points to an int.
    let commute = unsafe { mem::out(commute) };
    call("MPI_Op_commutative", Eh::Other, |s| {
        let c = if crate::coll::system_op(op).is_some()
            || matches!(op, MPI_MINLOC | MPI_MAXLOC | MPI_REPLACE | MPI_NO_OP)
        {
            true
        } else {
            s.ops
                .get(&op)
                .ok_or_else(|| {
                    AbiError::new(MPI_ERR_OP, format!("{op:#x} is not an operation handle"))
                })?
                .user
                .commute
        };
        put(commute, c_int::from(c))
    })
}
