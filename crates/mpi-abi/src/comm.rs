//! Communicators, groups, attributes and info objects.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::c_int;

use mpi::SimpleCommunicator;
use mpi::topology::CommunicatorRelation;

use crate::consts::*;
use crate::error::{AResult, AbiError};
use crate::state::{CommObj, Keyval, State};

fn register(s: &mut State, c: Option<SimpleCommunicator>, parent: Handle) -> AResult<Handle> {
    let Some(c) = c else {
        return Ok(MPI_COMM_NULL);
    };
    let p = s.comm(parent)?;
    let errh = p.errh;
    let copied: Vec<(c_int, usize)> = p
        .attrs
        .iter()
        .filter(|(k, _)| s.keyvals.get(k).is_some_and(|kv| kv.copy_on_dup))
        .map(|(&k, &v)| (k, v))
        .collect();
    let h = s.handle();
    let mut obj = CommObj::new(c, errh, "");
    obj.attrs.extend(copied);
    s.comms.insert(h, obj);
    Ok(h)
}

/// `MPI_Comm_dup`.
pub(crate) fn dup(s: &mut State, ch: Handle) -> AResult<Handle> {
    let c = s.comm(ch)?.comm.duplicate()?;
    register(s, Some(c), ch)
}

/// `MPI_Comm_split` (`MPI_UNDEFINED` color: `MPI_COMM_NULL`).
pub(crate) fn split(s: &mut State, ch: Handle, color: c_int, key: c_int) -> AResult<Handle> {
    if color < 0 && color != MPI_UNDEFINED {
        return Err(AbiError::new(
            MPI_ERR_ARG,
            format!("color {color} is negative"),
        ));
    }
    let c = s.comm(ch)?.comm.clone();
    let col = (color != MPI_UNDEFINED).then_some(color);
    let n = c.split_by_color_with_key(col, key)?;
    register(s, n, ch)
}

/// `MPI_Comm_split_type`: `MPI_COMM_TYPE_SHARED` groups the ranks of one node.
pub(crate) fn split_type(s: &mut State, ch: Handle, kind: c_int, key: c_int) -> AResult<Handle> {
    let color = match kind {
        MPI_UNDEFINED => MPI_UNDEFINED,
        MPI_COMM_TYPE_SHARED => s.world.node as c_int,
        k => {
            return Err(AbiError::unsupported(&format!(
                "MPI_Comm_split_type with split type {k} (only MPI_COMM_TYPE_SHARED is)"
            )));
        }
    };
    split(s, ch, color, key)
}

/// `MPI_Comm_create`.
pub(crate) fn create(s: &mut State, ch: Handle, gh: Handle) -> AResult<Handle> {
    let g = s.group(gh)?.clone();
    let n = s.comm(ch)?.comm.split_by_subgroup(&g)?;
    register(s, n, ch)
}

/// `MPI_Comm_free`.
pub(crate) fn free(s: &mut State, ch: &mut Handle) -> AResult<()> {
    if *ch == MPI_COMM_WORLD || *ch == MPI_COMM_SELF {
        return Err(AbiError::new(
            MPI_ERR_COMM,
            "a predefined communicator cannot be freed",
        ));
    }
    s.comms
        .remove(ch)
        .ok_or_else(|| crate::state::bad_comm(*ch))?;
    *ch = MPI_COMM_NULL;
    Ok(())
}

/// `MPI_Comm_compare`.
pub(crate) fn compare(s: &State, a: Handle, b: Handle) -> AResult<c_int> {
    if a == b {
        s.comm(a)?;
        return Ok(MPI_IDENT);
    }
    let rel = s.comm(a)?.comm.compare(&s.comm(b)?.comm);
    Ok(match rel {
        CommunicatorRelation::Identical => MPI_IDENT,
        CommunicatorRelation::Congruent => MPI_CONGRUENT,
        CommunicatorRelation::Similar => MPI_SIMILAR,
        CommunicatorRelation::Unequal => MPI_UNEQUAL,
    })
}

/// `MPI_Comm_group`.
pub(crate) fn group(s: &mut State, ch: Handle) -> AResult<Handle> {
    let g = s.comm(ch)?.comm.group();
    let h = s.handle();
    s.groups.insert(h, g);
    Ok(h)
}

/// `MPI_Group_incl` / `MPI_Group_excl`.
pub(crate) fn group_subset(
    s: &mut State,
    gh: Handle,
    ranks: &[c_int],
    include: bool,
) -> AResult<Handle> {
    let g = s.group(gh)?;
    let mut seen = std::collections::HashSet::new();
    if let Some(r) = ranks.iter().find(|r| !seen.insert(**r)) {
        return Err(AbiError::new(
            MPI_ERR_RANK,
            format!("rank {r} is listed twice"),
        ));
    }
    let n = if include {
        g.include(ranks)?
    } else {
        g.exclude(ranks)?
    };
    let h = s.handle();
    s.groups.insert(h, n);
    Ok(h)
}

/// `MPI_Group_translate_ranks`.
pub(crate) fn translate(s: &State, a: Handle, ranks: &[c_int], b: Handle) -> AResult<Vec<c_int>> {
    let (ga, gb) = (s.group(a)?, s.group(b)?);
    ranks
        .iter()
        .map(|&r| {
            if r == MPI_PROC_NULL {
                return Ok(MPI_PROC_NULL);
            }
            Ok(ga.translate_rank(r, gb)?.unwrap_or(MPI_UNDEFINED))
        })
        .collect()
}

/// `MPI_Group_free`.
pub(crate) fn group_free(s: &mut State, gh: &mut Handle) -> AResult<()> {
    if *gh == MPI_GROUP_EMPTY {
        *gh = MPI_GROUP_NULL;
        return Ok(());
    }
    s.groups
        .remove(gh)
        .ok_or_else(|| AbiError::new(MPI_ERR_GROUP, format!("{:#x} is not a group handle", *gh)))?;
    *gh = MPI_GROUP_NULL;
    Ok(())
}

/// `MPI_Comm_create_keyval`: `copy_on_dup` for `MPI_COMM_DUP_FN`.
pub(crate) fn create_keyval(s: &mut State, copy_on_dup: bool) -> c_int {
    let k = s.keyval();
    s.keyvals.insert(k, Keyval { copy_on_dup });
    k
}

fn check_keyval(s: &State, k: c_int) -> AResult<()> {
    if s.keyvals.contains_key(&k) {
        Ok(())
    } else {
        Err(AbiError::new(
            MPI_ERR_KEYVAL,
            format!("{k} is not an attribute key made by MPI_Comm_create_keyval"),
        ))
    }
}

/// `MPI_Comm_set_attr`.
pub(crate) fn set_attr(s: &mut State, ch: Handle, k: c_int, v: usize) -> AResult<()> {
    check_keyval(s, k)?;
    s.comm_mut(ch)?.attrs.insert(k, v);
    Ok(())
}

/// `MPI_Comm_get_attr` of a key made by the program.
pub(crate) fn get_attr(s: &State, ch: Handle, k: c_int) -> AResult<Option<usize>> {
    check_keyval(s, k)?;
    Ok(s.comm(ch)?.attrs.get(&k).copied())
}

/// `MPI_Comm_delete_attr`.
pub(crate) fn delete_attr(s: &mut State, ch: Handle, k: c_int) -> AResult<()> {
    check_keyval(s, k)?;
    s.comm_mut(ch)?.attrs.remove(&k);
    Ok(())
}

/// `MPI_Comm_free_keyval`.
pub(crate) fn free_keyval(s: &mut State, k: &mut c_int) -> AResult<()> {
    check_keyval(s, *k)?;
    s.keyvals.remove(k);
    *k = MPI_KEYVAL_INVALID;
    Ok(())
}

/// The info object of handle `h`.
pub(crate) fn info(s: &mut State, h: Handle) -> AResult<&mut BTreeMap<String, String>> {
    s.infos
        .get_mut(&h)
        .ok_or_else(|| AbiError::new(MPI_ERR_INFO, format!("{h:#x} is not an info handle")))
}

/// An optional info argument: `MPI_INFO_NULL` or a valid info.
pub(crate) fn check_info(s: &mut State, h: Handle) -> AResult<()> {
    if h == MPI_INFO_NULL || h == MPI_INFO_ENV {
        return Ok(());
    }
    info(s, h).map(|_| ())
}

/// An error handler argument.
pub(crate) fn check_errh(s: &State, h: Handle) -> AResult<()> {
    if matches!(
        h,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT | MPI_ERRORS_RETURN
    ) || s.errhs.contains_key(&h)
    {
        Ok(())
    } else {
        Err(AbiError::new(
            MPI_ERR_ARG,
            format!("{h:#x} is not an error handler"),
        ))
    }
}
