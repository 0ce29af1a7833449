//! `fi_trecvmsg` with `FI_PEEK`, `FI_CLAIM`, `FI_DISCARD` (`crate::ep` module `peek`).

#![allow(unsafe_code)]

use super::mem::UserBuf;
use super::objects::{ep_of, one_iov};
use super::types::*;
use crate::ep::Peek;

/// `fi_trecvmsg` with any of `FI_PEEK`, `FI_CLAIM`, `FI_DISCARD` in `flags`.
///
/// # Safety
/// `ep` is null or a live fid; `m`'s iovecs are valid, their buffer until the receive
/// completes (libfabric's contract).
pub(super) unsafe fn trecvmsg(ep: *mut fid_ep, m: &fi_msg_tagged, flags: u64) -> ssize_t {
    // SAFETY: per the contract.
    let Some(e) = (unsafe { ep_of(ep.cast()) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    // SAFETY: per the contract.
    let Some((buf, len)) = (unsafe { one_iov(m.msg_iov, m.iov_count) }) else {
        return -(FI_EINVAL as ssize_t);
    };
    if buf.is_null() && len > 0 {
        return -(FI_EINVAL as ssize_t);
    }
    // SAFETY: per the contract, the buffer stays valid until the receive completes.
    let ub = unsafe { UserBuf::new(buf.cast(), len) };
    let discard = flags & FI_DISCARD != 0;
    let r = if flags & FI_PEEK != 0 {
        e.peek(
            Peek {
                src: m.addr,
                tag: m.tag,
                ignore: m.ignore,
                context: m.context as usize,
                claim: flags & FI_CLAIM != 0,
                discard,
            },
            ub,
        )
    } else if flags & FI_CLAIM != 0 {
        let completion = (flags & FI_COMPLETION != 0).then_some(true);
        e.recv_claimed(m.context as usize, ub, discard, completion)
    } else {
        // FI_DISCARD alone: it goes with FI_PEEK or FI_CLAIM (fi_tagged(3)).
        return -(FI_EINVAL as ssize_t);
    };
    r.map_or_else(|e| -(e.errno() as ssize_t), |()| 0)
}
