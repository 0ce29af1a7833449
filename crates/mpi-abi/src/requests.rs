//! Requests (`MPI_Request`): point-to-point and collective operations in flight, completed
//! ones, persistent ones; testing and waiting for one, any, some or all of them.

#![forbid(unsafe_code)]

use std::ffi::c_int;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mpi::typemap::Layout;

use crate::consts::*;
use crate::error::{AResult, AbiError};
use crate::ffi::mem::{Lent, Staged};
use crate::p2p::{self, Mode};
use crate::state::State;

/// What a completed operation reports (`MPI_Status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusInfo {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    pub len: usize,
    pub cancelled: bool,
}

impl StatusInfo {
    /// The status of an operation with `MPI_PROC_NULL` (MPI 4.1 §3.11) or of an empty one.
    pub fn empty() -> Self {
        StatusInfo {
            source: MPI_PROC_NULL,
            tag: MPI_ANY_TAG,
            ..Default::default()
        }
    }

    pub fn of(st: &mpi::Status) -> Self {
        StatusInfo {
            source: st.source_rank(),
            tag: st.tag(),
            error: MPI_SUCCESS,
            len: st.len(),
            cancelled: st.is_cancelled(),
        }
    }
}

/// Where a receive's bytes go.
pub(crate) struct Dest {
    pub buf: Lent,
    pub layout: Rc<Layout>,
    pub count: usize,
}

/// The arguments of a persistent operation.
#[derive(Clone)]
pub(crate) struct Persist {
    pub send: Option<Mode>,
    pub buf: Lent,
    pub count: c_int,
    pub dtype: Handle,
    pub peer: c_int,
    pub tag: c_int,
    pub comm: Handle,
}

/// An operation behind a request handle.
pub(crate) enum Req {
    /// Complete; its status.
    Done(StatusInfo),
    /// A send whose bytes are staged.
    Send(mpi::Request<'static>),
    /// A send or receive the NIC moves in place, from or into the program's buffer (zero
    /// copy): nothing to unpack.
    Direct(mpi::Request<'static>),
    /// A receive into a staging buffer, unpacked into `dest` on completion.
    Recv { staged: Staged, dest: Dest },
    /// A collective whose output (if any) is unpacked into `dest` on completion.
    Coll { staged: Staged, dest: Option<Dest> },
    /// Request-based RMA operations (`MPI_Rput`, `MPI_Rget`) in flight.
    Rma(crate::rma::RmaReq),
    /// A persistent operation and its active instance.
    Persistent {
        args: Persist,
        active: Option<Box<Req>>,
    },
}

/// Test `r` once: its status if complete (the request is then spent, except a persistent
/// one, which becomes inactive).
fn test_req(s: &mut State, r: Req) -> AResult<(Option<StatusInfo>, Option<Req>)> {
    match r {
        Req::Done(st) => Ok((Some(st), None)),
        Req::Rma(mut q) => {
            if crate::rma::req_done(s, &mut q)? {
                Ok((Some(StatusInfo::empty()), None))
            } else {
                Ok((None, Some(Req::Rma(q))))
            }
        }
        Req::Send(q) => match q.test()? {
            Ok(st) => Ok((Some(StatusInfo::of(&st)), None)),
            Err(q) => Ok((None, Some(Req::Send(q)))),
        },
        Req::Direct(q) => match q.test()? {
            Ok(st) => Ok((Some(StatusInfo::of(&st)), None)),
            Err(q) => Ok((None, Some(Req::Direct(q)))),
        },
        Req::Recv { mut staged, dest } => {
            let Some(q) = staged.take_op() else {
                return Err(AbiError::new(
                    MPI_ERR_INTERN,
                    "a receive without its operation",
                ));
            };
            let st = match q.test() {
                Ok(Ok(st)) => st,
                Ok(Err(q)) => {
                    staged.put_op(q);
                    return Ok((None, Some(Req::Recv { staged, dest })));
                }
                Err(mpi::Error::Truncate { len, capacity }) => {
                    return Err(AbiError::new(
                        MPI_ERR_TRUNCATE,
                        format!(
                            "a message of {len} bytes arrived for a receive of {capacity} bytes"
                        ),
                    ));
                }
                Err(e) => return Err(e.into()),
            };
            let mut info = StatusInfo::of(&st);
            let data = staged.finish();
            if !info.cancelled {
                let n = info.len.min(data.len());
                dest.buf.write(&dest.layout, dest.count, &data[..n])?;
            } else {
                info.len = 0;
            }
            Ok((Some(info), None))
        }
        Req::Coll { mut staged, dest } => {
            let Some(q) = staged.take_op() else {
                return Err(AbiError::new(
                    MPI_ERR_INTERN,
                    "a collective without its operation",
                ));
            };
            match q.test()? {
                Ok(_) => {
                    let data = staged.finish();
                    if let Some(d) = dest {
                        d.buf.write(&d.layout, d.count, &data)?;
                    }
                    Ok((Some(StatusInfo::empty()), None))
                }
                Err(q) => {
                    staged.put_op(q);
                    Ok((None, Some(Req::Coll { staged, dest })))
                }
            }
        }
        Req::Persistent { args, active } => match active {
            None => Ok((
                Some(StatusInfo::empty()),
                Some(Req::Persistent { args, active: None }),
            )),
            Some(a) => {
                let (st, rest) = test_req(s, *a)?;
                let active = rest.map(Box::new);
                Ok((st, Some(Req::Persistent { args, active })))
            }
        },
    }
}

/// Whether the request is an inactive persistent one or null (ignored by the multi-request
/// calls).
fn inactive(s: &State, h: Handle) -> bool {
    h == MPI_REQUEST_NULL || matches!(s.reqs.get(&h), Some(Req::Persistent { active: None, .. }))
}

/// Test request `*h`: its status when complete (the handle then becomes
/// `MPI_REQUEST_NULL` unless persistent).
pub(crate) fn test(s: &mut State, h: &mut Handle) -> AResult<Option<StatusInfo>> {
    if *h == MPI_REQUEST_NULL {
        return Ok(Some(StatusInfo::empty()));
    }
    let r = s.reqs.remove(h).ok_or_else(|| bad_request(*h))?;
    match test_req(s, r) {
        Ok((st, rest)) => {
            match rest {
                Some(r) => {
                    s.reqs.insert(*h, r);
                }
                None => *h = MPI_REQUEST_NULL,
            }
            Ok(st)
        }
        Err(e) => {
            *h = MPI_REQUEST_NULL;
            Err(e)
        }
    }
}

pub(crate) fn bad_request(h: Handle) -> AbiError {
    AbiError::new(
        MPI_ERR_REQUEST,
        format!("{h:#x} is not an active request handle"),
    )
}

/// Let the transport move (between tests of a waiting loop).
pub(crate) fn progress(s: &State) {
    s.world.universe.with_transport(|t| {
        let _ = t.progress();
    });
}

/// How long a wait may last before it is reported as a hang (as the mpi crate's own waits;
/// the transports have shorter network timeouts of their own).
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(300);

/// The bookkeeping of a waiting loop: fails once the wait lasted [`WAIT_LIMIT`].
pub(crate) struct Patience {
    start: Instant,
    what: &'static str,
}

impl Patience {
    pub(crate) fn new(what: &'static str) -> Self {
        Patience {
            start: Instant::now(),
            what,
        }
    }

    /// Let the transport move once; an error when the wait lasted too long.
    pub(crate) fn tick(&self, s: &State) -> AResult<()> {
        progress(s);
        if self.start.elapsed() > WAIT_LIMIT {
            return Err(AbiError::new(
                MPI_ERR_OTHER,
                format!(
                    "{} did not complete in {WAIT_LIMIT:?} (a receive or collective no peer \
                     answers: the program deadlocked)",
                    self.what
                ),
            ));
        }
        Ok(())
    }
}

/// Wait for request `*h`.
pub(crate) fn wait(s: &mut State, h: &mut Handle) -> AResult<StatusInfo> {
    let p = Patience::new("a wait");
    loop {
        if let Some(st) = test(s, h)? {
            return Ok(st);
        }
        p.tick(s)?;
    }
}

/// Test every request; `Some(statuses)` when all are complete (only then are they spent).
pub(crate) fn test_all(s: &mut State, hs: &mut [Handle]) -> AResult<Option<Vec<StatusInfo>>> {
    // Only complete requests are consumed: check first, by testing each until one is not
    // complete; the completed ones are kept as `Done` meanwhile.
    let mut all = true;
    for h in hs.iter() {
        if inactive(s, *h) {
            continue;
        }
        let r = s.reqs.remove(h).ok_or_else(|| bad_request(*h))?;
        let (st, rest) = test_req(s, r)?;
        match (st, rest) {
            (Some(st), Some(Req::Persistent { args, .. })) => {
                s.reqs.insert(
                    *h,
                    Req::Persistent {
                        args,
                        active: Some(Box::new(Req::Done(st))),
                    },
                );
            }
            (Some(st), _) => {
                s.reqs.insert(*h, Req::Done(st));
            }
            (None, Some(r)) => {
                s.reqs.insert(*h, r);
                all = false;
            }
            (None, None) => all = false,
        }
    }
    if !all {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(hs.len());
    for h in hs.iter_mut() {
        out.push(test(s, h)?.unwrap_or_else(StatusInfo::empty));
    }
    Ok(Some(out))
}

/// Test the requests in turn: the index and status of the first complete one; `Ok(None)`
/// when none is; `MPI_UNDEFINED` index when all are null or inactive.
pub(crate) fn test_any(s: &mut State, hs: &mut [Handle]) -> AResult<Option<(c_int, StatusInfo)>> {
    let mut any_active = false;
    for (i, h) in hs.iter_mut().enumerate() {
        if inactive(s, *h) {
            continue;
        }
        any_active = true;
        if let Some(st) = test(s, h)? {
            return Ok(Some((i as c_int, st)));
        }
    }
    if any_active {
        Ok(None)
    } else {
        Ok(Some((MPI_UNDEFINED, StatusInfo::empty())))
    }
}

/// Test every request: the indices and statuses of those complete; `None` when all are null
/// or inactive (`MPI_UNDEFINED` outcount).
pub(crate) fn test_some(
    s: &mut State,
    hs: &mut [Handle],
) -> AResult<Option<Vec<(c_int, StatusInfo)>>> {
    let mut any_active = false;
    let mut done = Vec::new();
    for (i, h) in hs.iter_mut().enumerate() {
        if inactive(s, *h) {
            continue;
        }
        any_active = true;
        if let Some(st) = test(s, h)? {
            done.push((i as c_int, st));
        }
    }
    Ok(any_active.then_some(done))
}

/// `MPI_Start`: begin a persistent operation.
pub(crate) fn start(s: &mut State, h: Handle) -> AResult<()> {
    let args = match s.reqs.get(&h) {
        Some(Req::Persistent { args, active: None }) => args.clone(),
        Some(Req::Persistent { .. }) => {
            return Err(AbiError::new(
                MPI_ERR_REQUEST,
                "MPI_Start on an active request",
            ));
        }
        Some(_) => {
            return Err(AbiError::new(
                MPI_ERR_REQUEST,
                "MPI_Start on a nonpersistent request",
            ));
        }
        None => return Err(bad_request(h)),
    };
    let r = match args.send {
        Some(mode) => p2p::isend(
            s, args.buf, args.count, args.dtype, args.peer, args.tag, args.comm, mode,
        )?,
        None => p2p::irecv(
            s, args.buf, args.count, args.dtype, args.peer, args.tag, args.comm,
        )?,
    };
    if let Some(Req::Persistent { active, .. }) = s.reqs.get_mut(&h) {
        *active = Some(Box::new(r));
    }
    Ok(())
}

/// `MPI_Request_free`.
pub(crate) fn free(s: &mut State, h: &mut Handle) -> AResult<()> {
    let r = s.reqs.remove(h).ok_or_else(|| bad_request(*h))?;
    // A send in flight completes on its own (its bytes are staged); a receive is cancelled
    // when its request is dropped.
    drop(r);
    *h = MPI_REQUEST_NULL;
    Ok(())
}

/// `MPI_Cancel`.
pub(crate) fn cancel(s: &mut State, h: Handle) -> AResult<()> {
    match s.reqs.get_mut(&h) {
        Some(Req::Recv { staged, .. }) => {
            if let Some(q) = staged.take_op() {
                let r = q.cancel();
                staged.put_op(q);
                r?;
            }
            Ok(())
        }
        Some(Req::Persistent {
            active: Some(a), ..
        }) if matches!(**a, Req::Recv { .. }) => {
            if let Req::Recv { staged, .. } = a.as_mut()
                && let Some(q) = staged.take_op()
            {
                let r = q.cancel();
                staged.put_op(q);
                r?;
            }
            Ok(())
        }
        // A zero-copy send cannot be cancelled (the transport refuses), a receive can.
        Some(Req::Direct(q)) => Ok(q.cancel()?),
        Some(Req::Persistent {
            active: Some(a), ..
        }) if matches!(**a, Req::Direct(_)) => match a.as_ref() {
            Req::Direct(q) => Ok(q.cancel()?),
            _ => Ok(()),
        },
        Some(Req::Done(_)) => Ok(()),
        Some(Req::Send(_)) | Some(Req::Persistent { .. }) => {
            Err(AbiError::unsupported("MPI_Cancel of a send"))
        }
        Some(Req::Coll { .. }) => Err(AbiError::new(
            MPI_ERR_REQUEST,
            "a nonblocking collective cannot be cancelled",
        )),
        Some(Req::Rma(_)) => Err(AbiError::new(
            MPI_ERR_REQUEST,
            "a request-based RMA operation cannot be cancelled",
        )),
        None => Err(bad_request(h)),
    }
}
