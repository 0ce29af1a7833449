//! Datatypes: the predefined ones of the standard ABI (LP64 sizes) and the constructors and
//! queries of the `MPI_Type_*` calls, over [`mpi::typemap::Layout`].

#![forbid(unsafe_code)]

use std::ffi::c_int;

use mpi::Kind;
use mpi::typemap::Layout;

use crate::consts::*;
use crate::error::{AResult, AbiError};
use crate::state::State;

/// Every predefined datatype with a C meaning: handle, name, layout.
pub(crate) fn predefined() -> Vec<(Handle, &'static str, Layout)> {
    use Kind::*;
    let basic = [
        (MPI_AINT, "MPI_AINT", I64),
        (MPI_COUNT, "MPI_COUNT", I64),
        (MPI_OFFSET, "MPI_OFFSET", I64),
        (MPI_PACKED, "MPI_PACKED", U8),
        (MPI_SHORT, "MPI_SHORT", I16),
        (MPI_INT, "MPI_INT", I32),
        (MPI_LONG, "MPI_LONG", I64),
        (MPI_LONG_LONG, "MPI_LONG_LONG", I64),
        (MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", U16),
        (MPI_UNSIGNED, "MPI_UNSIGNED", U32),
        (MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", U64),
        (MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", U64),
        (MPI_FLOAT, "MPI_FLOAT", F32),
        (MPI_DOUBLE, "MPI_DOUBLE", F64),
        (MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", Bytes(16)),
        (MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", Bytes(8)),
        (MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", Bytes(16)),
        (MPI_C_BOOL, "MPI_C_BOOL", U8),
        (MPI_WCHAR, "MPI_WCHAR", I32),
        (MPI_INT8_T, "MPI_INT8_T", I8),
        (MPI_UINT8_T, "MPI_UINT8_T", U8),
        (MPI_CHAR, "MPI_CHAR", I8),
        (MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", I8),
        (MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", U8),
        (MPI_BYTE, "MPI_BYTE", U8),
        (MPI_INT16_T, "MPI_INT16_T", I16),
        (MPI_UINT16_T, "MPI_UINT16_T", U16),
        (MPI_INT32_T, "MPI_INT32_T", I32),
        (MPI_UINT32_T, "MPI_UINT32_T", U32),
        (MPI_INT64_T, "MPI_INT64_T", I64),
        (MPI_UINT64_T, "MPI_UINT64_T", U64),
    ];
    let mut v: Vec<(Handle, &'static str, Layout)> = basic
        .into_iter()
        .map(|(h, n, k)| (h, n, Layout::basic(k)))
        .collect();
    // The pair types of MPI_MINLOC / MPI_MAXLOC, laid out as C structs.
    let pairs = [
        (MPI_FLOAT_INT, "MPI_FLOAT_INT", F32, 4, 8),
        (MPI_DOUBLE_INT, "MPI_DOUBLE_INT", F64, 8, 16),
        (MPI_LONG_INT, "MPI_LONG_INT", I64, 8, 16),
        (MPI_2INT, "MPI_2INT", I32, 4, 8),
        (MPI_SHORT_INT, "MPI_SHORT_INT", I16, 4, 8),
    ];
    for (h, n, k, off, ext) in pairs {
        if let Ok(l) = Layout::basic_struct(&[(0, k), (off, I32)], ext) {
            v.push((h, n, l));
        }
    }
    v
}

/// The value kind and index offset of a MINLOC/MAXLOC pair type.
pub(crate) fn pair_of(h: Handle) -> Option<(Kind, usize, usize)> {
    Some(match h {
        MPI_FLOAT_INT => (Kind::F32, 4, 8),
        MPI_DOUBLE_INT => (Kind::F64, 8, 16),
        MPI_LONG_INT => (Kind::I64, 8, 16),
        MPI_2INT => (Kind::I32, 4, 8),
        MPI_SHORT_INT => (Kind::I16, 4, 8),
        _ => return None,
    })
}

/// A count argument as `usize`, `MPI_ERR_COUNT` when negative.
pub(crate) fn count(n: impl Into<i64>) -> AResult<usize> {
    let n = n.into();
    usize::try_from(n).map_err(|_| AbiError::new(MPI_ERR_COUNT, format!("negative count {n}")))
}

/// Counts of an array argument.
pub(crate) fn counts(v: &[c_int]) -> AResult<Vec<usize>> {
    v.iter().map(|&c| count(c)).collect()
}

/// A new datatype built by `f` from datatype `old`.
pub(crate) fn derive(
    s: &mut State,
    old: Handle,
    f: impl FnOnce(&Layout) -> mpi::Result<Layout>,
) -> AResult<Handle> {
    let l = s.any_layout(old)?;
    let new = f(&l)?;
    Ok(s.new_type(new))
}

/// `MPI_Type_create_struct`.
pub(crate) fn structure(
    s: &mut State,
    blocklens: &[c_int],
    displs: &[isize],
    types: &[Handle],
) -> AResult<Handle> {
    let ls = types
        .iter()
        .map(|&t| s.any_layout(t))
        .collect::<AResult<Vec<_>>>()?;
    let refs: Vec<&Layout> = ls.iter().map(|l| l.as_ref()).collect();
    let new = Layout::structure(&counts(blocklens)?, displs, &refs)?;
    Ok(s.new_type(new))
}

/// `MPI_Type_commit`.
pub(crate) fn commit(s: &mut State, h: Handle) -> AResult<()> {
    let t = s
        .types
        .get_mut(&h)
        .ok_or_else(|| crate::state::bad_type(h))?;
    t.committed = true;
    Ok(())
}

/// `MPI_Type_free`.
pub(crate) fn free(s: &mut State, h: Handle) -> AResult<()> {
    match s.types.get(&h) {
        Some(t) if t.predefined => Err(AbiError::new(
            MPI_ERR_TYPE,
            "a predefined datatype cannot be freed",
        )),
        Some(_) => {
            s.types.remove(&h);
            Ok(())
        }
        None => Err(crate::state::bad_type(h)),
    }
}

/// `MPI_Type_dup`.
pub(crate) fn dup(s: &mut State, h: Handle) -> AResult<Handle> {
    let t = s.types.get(&h).ok_or_else(|| crate::state::bad_type(h))?;
    let (layout, committed) = (t.layout.as_ref().clone(), t.committed);
    let n = s.new_type(layout);
    if let Some(t) = s.types.get_mut(&n) {
        t.committed = committed;
    }
    Ok(n)
}

/// `MPI_Type_size`, as an int (`MPI_UNDEFINED` when it does not fit).
pub(crate) fn size_int(s: &State, h: Handle) -> AResult<c_int> {
    let l = s.any_layout(h)?;
    Ok(c_int::try_from(l.size()).unwrap_or(MPI_UNDEFINED))
}

/// `MPI_Pack`: `data` (already packed from the input buffer) goes at `*position` of an
/// output of `outsize` bytes; the new position.
pub(crate) fn pack_room(position: c_int, outsize: c_int, len: usize) -> AResult<usize> {
    let pos = count(position)?;
    let cap = count(outsize)?;
    if pos + len > cap {
        return Err(AbiError::new(
            MPI_ERR_TRUNCATE,
            format!("MPI_Pack: {len} bytes at position {pos} do not fit a buffer of {cap}"),
        ));
    }
    Ok(pos)
}
