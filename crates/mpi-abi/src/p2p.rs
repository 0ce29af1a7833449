//! Point-to-point calls: sends in the four modes (buffered sends staged like standard ones
//! once the attached buffer is checked), receives, probes, matched probes.

#![forbid(unsafe_code)]

use std::ffi::c_int;
use std::rc::Rc;

use mpi::typemap::Layout;
use mpi::{SimpleCommunicator, Source};

use crate::consts::*;
use crate::error::{AResult, AbiError};
use crate::ffi::mem::{Lent, Staged};
use crate::requests::{Dest, Req, StatusInfo};
use crate::state::{MsgObj, State};
use crate::types::count;

/// Send modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Standard,
    Synchronous,
    Ready,
    Buffered,
}

fn check_tag(tag: c_int, recv: bool) -> AResult<Option<c_int>> {
    if recv && tag == MPI_ANY_TAG {
        return Ok(None);
    }
    if tag < 0 {
        return Err(AbiError::new(
            MPI_ERR_TAG,
            format!(
                "tag {tag} is not valid (0..={TAG_UB_VALUE}{})",
                if recv { " or MPI_ANY_TAG" } else { "" }
            ),
        ));
    }
    Ok(Some(tag))
}

fn check_rank(comm: &SimpleCommunicator, r: c_int, any: bool) -> AResult<()> {
    if (any && r == MPI_ANY_SOURCE) || r == MPI_PROC_NULL || (0..comm.size()).contains(&r) {
        Ok(())
    } else {
        Err(AbiError::new(
            MPI_ERR_RANK,
            format!("rank {r} is not in a communicator of size {}", comm.size()),
        ))
    }
}

/// Where `count` elements of `layout` at `buf` are when the NIC moves them in place (zero
/// copy: a contiguous buffer of at least the transport's zero-copy size, on a node hosted in
/// this process): its address and length.
fn in_place(
    c: &SimpleCommunicator,
    buf: Lent,
    layout: &Layout,
    count: usize,
) -> Option<(u64, usize)> {
    let min = c.zero_copy_min()?;
    let len = layout.size().checked_mul(count)?;
    if !layout.is_contiguous() || len < min || buf.is_in_place() || buf.addr() == 0 {
        return None;
    }
    Some((buf.addr() as u64, len))
}

/// The bytes to send: `count` elements of `dtype` from `buf`, packed.
fn payload(s: &State, buf: Lent, cnt: c_int, dtype: Handle) -> AResult<Vec<u8>> {
    let n = count(cnt)?;
    let l = s.layout(dtype)?;
    buf.read(&l, n)
}

fn check_bsend(s: &State, len: usize) -> AResult<()> {
    match s.bsend {
        Some((_, size)) if size >= len + MPI_BSEND_OVERHEAD => Ok(()),
        Some((_, size)) => Err(AbiError::new(
            MPI_ERR_BUFFER,
            format!(
                "MPI_Bsend of {len} bytes needs {} bytes of attached buffer; {size} are attached",
                len + MPI_BSEND_OVERHEAD
            ),
        )),
        None => Err(AbiError::new(
            MPI_ERR_BUFFER,
            "MPI_Bsend without an attached buffer (MPI_Buffer_attach)",
        )),
    }
}

/// A blocking send.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send(
    s: &mut State,
    buf: Lent,
    cnt: c_int,
    dtype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    mode: Mode,
) -> AResult<()> {
    let c = s.comm(comm)?.comm.clone();
    let tag = check_tag(tag, false)?.unwrap_or(0);
    check_rank(&c, dest, false)?;
    if mode != Mode::Buffered
        && dest != MPI_PROC_NULL
        && let Some((addr, len)) = in_place(&c, buf, &*s.layout(dtype)?, count(cnt)?)
    {
        let r = c.process_at_rank(dest).immediate_send_in_place(
            addr,
            len,
            tag,
            mode == Mode::Synchronous,
        )?;
        r.wait()?;
        return Ok(());
    }
    let data = payload(s, buf, cnt, dtype)?;
    if mode == Mode::Buffered {
        check_bsend(s, data.len())?;
    }
    if dest == MPI_PROC_NULL {
        return Ok(());
    }
    let p = c.process_at_rank(dest);
    match mode {
        Mode::Standard | Mode::Buffered => p.send_with_tag(&data[..], tag)?,
        Mode::Synchronous => p.synchronous_send_with_tag(&data[..], tag)?,
        Mode::Ready => p.ready_send_with_tag(&data[..], tag)?,
    }
    Ok(())
}

/// A nonblocking send: its request.
#[allow(clippy::too_many_arguments)]
pub(crate) fn isend(
    s: &mut State,
    buf: Lent,
    cnt: c_int,
    dtype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    mode: Mode,
) -> AResult<Req> {
    let c = s.comm(comm)?.comm.clone();
    let tag = check_tag(tag, false)?.unwrap_or(0);
    check_rank(&c, dest, false)?;
    if mode != Mode::Buffered
        && dest != MPI_PROC_NULL
        && let Some((addr, len)) = in_place(&c, buf, &*s.layout(dtype)?, count(cnt)?)
    {
        let r = c.process_at_rank(dest).immediate_send_in_place(
            addr,
            len,
            tag,
            mode == Mode::Synchronous,
        )?;
        return Ok(Req::Direct(r));
    }
    let data = payload(s, buf, cnt, dtype)?;
    if mode == Mode::Buffered {
        check_bsend(s, data.len())?;
    }
    if dest == MPI_PROC_NULL {
        return Ok(Req::Done(StatusInfo::empty()));
    }
    let p = c.process_at_rank(dest);
    let r = match mode {
        Mode::Synchronous => p.immediate_synchronous_send_with_tag(&data[..], tag)?,
        // A ready send's receive is posted: a standard send behaves the same.
        _ => p.immediate_send_with_tag(&data[..], tag)?,
    };
    Ok(Req::Send(r))
}

/// A nonblocking receive: its request.
pub(crate) fn irecv(
    s: &mut State,
    buf: Lent,
    cnt: c_int,
    dtype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
) -> AResult<Req> {
    let c = s.comm(comm)?.comm.clone();
    let tag = check_tag(tag, true)?;
    check_rank(&c, source, true)?;
    let n = count(cnt)?;
    let layout: Rc<Layout> = s.layout(dtype)?;
    if source == MPI_PROC_NULL {
        return Ok(Req::Done(StatusInfo::empty()));
    }
    if let Some((addr, len)) = in_place(&c, buf, &layout, n) {
        let r = if source == MPI_ANY_SOURCE {
            c.any_process().immediate_receive_in_place(addr, len, tag)?
        } else {
            c.process_at_rank(source)
                .immediate_receive_in_place(addr, len, tag)?
        };
        return Ok(Req::Direct(r));
    }
    let cap = layout.size() * n;
    fn irecv<'a, 'c>(
        from: &impl Source<'c>,
        sc: &mpi::request::Scope<'a>,
        rb: &'a mut [u8],
        tag: Option<c_int>,
    ) -> mpi::Result<mpi::Request<'a>> {
        match tag {
            Some(t) => from.immediate_receive_into_with_tag(sc, rb, t),
            None => from.immediate_receive_into(sc, rb),
        }
    }
    let staged = Staged::start(crate::coll::no_data(), cap, |_, rb| {
        mpi::scope(|sc| {
            if source == MPI_ANY_SOURCE {
                irecv(&c.any_process(), sc, rb, tag)
            } else {
                irecv(&c.process_at_rank(source), sc, rb, tag)
            }
        })
    })?;
    Ok(Req::Recv {
        staged,
        dest: Dest {
            buf,
            layout,
            count: n,
        },
    })
}

/// A probe (`blocking`) or an immediate probe: the status of a matching message.
pub(crate) fn probe(
    s: &mut State,
    source: c_int,
    tag: c_int,
    comm: Handle,
    blocking: bool,
) -> AResult<Option<StatusInfo>> {
    let c = s.comm(comm)?.comm.clone();
    let tag = check_tag(tag, true)?;
    check_rank(&c, source, true)?;
    if source == MPI_PROC_NULL {
        return Ok(Some(StatusInfo::empty()));
    }
    fn probe_on<'c>(
        from: &impl Source<'c>,
        blocking: bool,
        tag: Option<c_int>,
    ) -> mpi::Result<Option<mpi::Status>> {
        Ok(match (blocking, tag) {
            (true, Some(t)) => Some(from.probe_with_tag(t)?),
            (true, None) => Some(from.probe()?),
            (false, Some(t)) => from.immediate_probe_with_tag(t)?,
            (false, None) => from.immediate_probe()?,
        })
    }
    let st = if source == MPI_ANY_SOURCE {
        probe_on(&c.any_process(), blocking, tag)?
    } else {
        probe_on(&c.process_at_rank(source), blocking, tag)?
    };
    Ok(st.map(|st| StatusInfo::of(&st)))
}

/// A matched probe: the message handle and its status, `None` when an immediate one found
/// nothing.
pub(crate) fn mprobe(
    s: &mut State,
    source: c_int,
    tag: c_int,
    comm: Handle,
    blocking: bool,
) -> AResult<Option<(Handle, StatusInfo)>> {
    let tag = check_tag(tag, true)?;
    let obj = s.comm_mut(comm)?;
    check_rank(&obj.comm, source, true)?;
    if source == MPI_PROC_NULL {
        return Ok(Some((MPI_MESSAGE_NO_PROC, StatusInfo::empty())));
    }
    let c: &'static SimpleCommunicator = match obj.forever {
        Some(c) => c,
        None => {
            let c: &'static SimpleCommunicator = Box::leak(Box::new(obj.comm.clone()));
            obj.forever = Some(c);
            c
        }
    };
    type Found = Option<(mpi::Message<'static>, mpi::Status)>;
    fn mprobe_on(
        from: &impl Source<'static>,
        blocking: bool,
        tag: Option<c_int>,
    ) -> mpi::Result<Found> {
        Ok(match (blocking, tag) {
            (true, Some(t)) => Some(from.matched_probe_with_tag(t)?),
            (true, None) => Some(from.matched_probe()?),
            (false, Some(t)) => from.immediate_matched_probe_with_tag(t)?,
            (false, None) => from.immediate_matched_probe()?,
        })
    }
    let found = if source == MPI_ANY_SOURCE {
        mprobe_on(&c.any_process(), blocking, tag)?
    } else {
        mprobe_on(&c.process_at_rank(source), blocking, tag)?
    };
    let Some((msg, st)) = found else {
        return Ok(None);
    };
    let info = StatusInfo::of(&st);
    let h = s.handle();
    s.msgs.insert(h, MsgObj { msg });
    Ok(Some((h, info)))
}

/// `MPI_Mrecv`: receive the matched message into `buf`.
pub(crate) fn mrecv(
    s: &mut State,
    buf: Lent,
    cnt: c_int,
    dtype: Handle,
    msg: &mut Handle,
) -> AResult<StatusInfo> {
    if *msg == MPI_MESSAGE_NO_PROC {
        *msg = MPI_MESSAGE_NULL;
        return Ok(StatusInfo::empty());
    }
    let n = count(cnt)?;
    let layout = s.layout(dtype)?;
    let m = s.msgs.remove(msg).ok_or_else(|| {
        AbiError::new(
            MPI_ERR_REQUEST,
            format!("{:#x} is not a matched message handle", *msg),
        )
    })?;
    *msg = MPI_MESSAGE_NULL;
    let cap = layout.size() * n;
    let (data, st) = m.msg.matched_receive_vec::<u8>()?;
    if data.len() > cap {
        return Err(AbiError::new(
            MPI_ERR_TRUNCATE,
            format!(
                "a message of {} bytes arrived for a receive of {cap} bytes",
                data.len()
            ),
        ));
    }
    buf.write(&layout, n, &data)?;
    Ok(StatusInfo::of(&st))
}
