//! Collectives and their nonblocking forms.

use std::ffi::{c_int, c_void};

use super::mem::{self, Lent, put, slice};
use crate::coll;
use crate::consts::*;
use crate::error::{AResult, AbiError};
use crate::requests::Req;
use crate::state::{Eh, State, call};

/// Store the request of a nonblocking collective.
fn store(s: &mut State, r: Option<Req>, req: Option<&mut Handle>) -> AResult<()> {
    let r = r.unwrap_or_else(coll::done);
    let h = s.new_req(r);
    put(req, h)
}

/// An array argument of one entry per rank of `comm`.
///
/// # Safety
/// `p` is null or holds one `T` per rank of `comm`.
unsafe fn per_rank<'a, T>(s: &State, comm: Handle, p: *const T) -> AResult<&'a [T]> {
    let n = coll::comm_size(s, comm)?;
    // SAFETY: the function's contract.
    unsafe { slice(p, n as i64) }
        .ok_or_else(|| AbiError::new(MPI_ERR_ARG, "a null count, displacement or type array"))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Barrier(comm: Handle) -> c_int {
    call("MPI_Barrier", Eh::Comm(comm), |s| {
        coll::barrier(s, comm, true).map(|_| ())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Ibarrier(comm: Handle, req: *mut Handle) -> c_int {
    // SAFETY: MPI_Ibarrier's contract: `req` points to a request.
    let req = unsafe { mem::out(req) };
    call("MPI_Ibarrier", Eh::Comm(comm), |s| {
        let r = coll::barrier(s, comm, false)?;
        store(s, r, req)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Bcast(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    root: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: MPI_Bcast's contract: `buf` holds `count` elements of `dt`.
    let buf = unsafe { Lent::new(buf) };
    call("MPI_Bcast", Eh::Comm(comm), |s| {
        coll::bcast(s, buf, count, dt, root, comm, true).map(|_| ())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Ibcast(
    buf: *mut c_void,
    count: c_int,
    dt: Handle,
    root: c_int,
    comm: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Ibcast's contract: `buf` holds `count` elements of `dt` until completion;
    // `req` points to a request.
    let (buf, req) = unsafe { (Lent::new(buf), mem::out(req)) };
    call("MPI_Ibcast", Eh::Comm(comm), |s| {
        let r = coll::bcast(s, buf, count, dt, root, comm, false)?;
        store(s, r, req)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Handle,
    op: Handle,
    root: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: MPI_Reduce's contract: both buffers hold `count` elements of `dt` (the receive
    // buffer at the root only).
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    call("MPI_Reduce", Eh::Comm(comm), |s| {
        coll::reduce(s, sb, rb, count, dt, op, Some(root), comm, true).map(|_| ())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Ireduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Handle,
    op: Handle,
    root: c_int,
    comm: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Ireduce's contract: as MPI_Reduce until completion; `req` points to a
    // request.
    let (sb, rb, req) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf), mem::out(req)) };
    call("MPI_Ireduce", Eh::Comm(comm), |s| {
        let r = coll::reduce(s, sb, rb, count, dt, op, Some(root), comm, false)?;
        store(s, r, req)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Handle,
    op: Handle,
    comm: Handle,
) -> c_int {
    // SAFETY: MPI_Allreduce's contract: both buffers hold `count` elements of `dt`.
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    call("MPI_Allreduce", Eh::Comm(comm), |s| {
        coll::reduce(s, sb, rb, count, dt, op, None, comm, true).map(|_| ())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Iallreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Handle,
    op: Handle,
    comm: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: MPI_Iallreduce's contract: as MPI_Allreduce until completion; `req` points to
    // a request.
    let (sb, rb, req) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf), mem::out(req)) };
    call("MPI_Iallreduce", Eh::Comm(comm), |s| {
        let r = coll::reduce(s, sb, rb, count, dt, op, None, comm, false)?;
        store(s, r, req)
    })
}

macro_rules! scan_fn {
    ($name:ident, $iname:ident, $excl:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            count: c_int,
            dt: Handle,
            op: Handle,
            comm: Handle,
        ) -> c_int {
            // SAFETY: the scan's contract: both buffers hold `count` elements of `dt`.
            let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
            call(stringify!($name), Eh::Comm(comm), |s| {
                coll::scan(s, sb, rb, count, dt, op, $excl, comm, true).map(|_| ())
            })
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $iname(
            sendbuf: *const c_void,
            recvbuf: *mut c_void,
            count: c_int,
            dt: Handle,
            op: Handle,
            comm: Handle,
            req: *mut Handle,
        ) -> c_int {
            // SAFETY: the scan's contract until completion; `req` points to a request.
            let (sb, rb, req) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf), mem::out(req)) };
            call(stringify!($iname), Eh::Comm(comm), |s| {
                let r = coll::scan(s, sb, rb, count, dt, op, $excl, comm, false)?;
                store(s, r, req)
            })
        }
    };
}
scan_fn!(MPI_Scan, MPI_Iscan, false);
scan_fn!(MPI_Exscan, MPI_Iexscan, true);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Handle,
    op: Handle,
    comm: Handle,
) -> c_int {
    // SAFETY: the call's contract: the send buffer holds `count` elements per rank, the
    // receive buffer `count`.
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    call("MPI_Reduce_scatter_block", Eh::Comm(comm), |s| {
        let counts = vec![count; coll::comm_size(s, comm)?];
        coll::reduce_scatter(s, sb, rb, &counts, dt, op, comm, true).map(|_| ())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Ireduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: Handle,
    op: Handle,
    comm: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: as MPI_Reduce_scatter_block; `req` points to a request.
    let (sb, rb, req) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf), mem::out(req)) };
    call("MPI_Ireduce_scatter_block", Eh::Comm(comm), |s| {
        let counts = vec![count; coll::comm_size(s, comm)?];
        let r = coll::reduce_scatter(s, sb, rb, &counts, dt, op, comm, false)?;
        store(s, r, req)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: *const c_int,
    dt: Handle,
    op: Handle,
    comm: Handle,
) -> c_int {
    // SAFETY: the call's contract: `counts` holds one count per rank; the buffers hold
    // their sum and this rank's count of elements of `dt`.
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    call("MPI_Reduce_scatter", Eh::Comm(comm), |s| {
        // SAFETY: as above.
        let c = unsafe { per_rank(s, comm, counts) }?;
        coll::reduce_scatter(s, sb, rb, c, dt, op, comm, true).map(|_| ())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Ireduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: *const c_int,
    dt: Handle,
    op: Handle,
    comm: Handle,
    req: *mut Handle,
) -> c_int {
    // SAFETY: as MPI_Reduce_scatter; `req` points to a request.
    let (sb, rb, req) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf), mem::out(req)) };
    call("MPI_Ireduce_scatter", Eh::Comm(comm), |s| {
        // SAFETY: as above.
        let c = unsafe { per_rank(s, comm, counts) }?;
        let r = coll::reduce_scatter(s, sb, rb, c, dt, op, comm, false)?;
        store(s, r, req)
    })
}

/// A blocking collective whose body is `$body`.
macro_rules! blocking {
    ($name:ident, $c:ident, ($($arg:ident : $ty:ty),*), $body:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let f: &dyn Fn(&mut State) -> AResult<()> = &$body;
            call(stringify!($name), Eh::Comm($c), |s| f(s))
        }
    };
}

/// A nonblocking plain gather, scatter, allgather or alltoall.
macro_rules! iplain {
    ($name:ident, $($root:ident)?, $kind:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void,
            recvcount: c_int, recvtype: Handle, $($root: c_int,)? comm: Handle, req: *mut Handle,
        ) -> c_int {
            // SAFETY: the collective's contract: the buffers hold their counts of their
            // datatypes (one block per rank where the call says so) until the request
            // completes; `req` points to a request.
            let (sb, rb, req) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf), mem::out(req)) };
            call(stringify!($name), Eh::Comm(comm), |s| {
                let a = coll::Plain { send: sb, scount: sendcount, stype: sendtype, recv: rb, rcount: recvcount, rtype: recvtype };
                let r = coll::iplain(s, a, $kind, comm)?;
                store(s, Some(r), req)
            })
        }
    };
}

iplain!(MPI_Igather, root, coll::PlainKind::Gather(root));
iplain!(MPI_Iscatter, root, coll::PlainKind::Scatter(root));
iplain!(MPI_Iallgather, , coll::PlainKind::Allgather);
iplain!(MPI_Ialltoall, , coll::PlainKind::Alltoall);

/// The blocking gather/scatter/allgather/alltoall families, with their nonblocking forms
/// completing before they return (see docs/c-abi.md).
macro_rules! both {
    ($name:ident, $iname:ident, $c:ident, ($($arg:ident : $ty:ty),*), $body:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let f: &dyn Fn(&mut State) -> AResult<()> = &$body;
            call(stringify!($name), Eh::Comm($c), |s| f(s))
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $iname($($arg: $ty),*, req: *mut Handle) -> c_int {
            // SAFETY: the nonblocking call's contract: `req` points to a request.
            let req = unsafe { mem::out(req) };
            let f: &dyn Fn(&mut State) -> AResult<()> = &$body;
            call(stringify!($iname), Eh::Comm($c), |s| {
                f(s)?;
                store(s, None, req)
            })
        }
    };
}

blocking!(MPI_Gather, comm,
(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle),
|s: &mut State| {
    // SAFETY: the gather's contract: the buffers hold their counts of their datatypes
    // (the receive buffer one block per rank, at the root).
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    let counts = vec![recvcount; coll::comm_size(s, comm)?];
    coll::gather(s, sb, sendcount, sendtype, rb, &counts, None, recvtype, root, comm)
});

both!(MPI_Gatherv, MPI_Igatherv, comm,
(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int, comm: Handle),
|s: &mut State| {
    // SAFETY: the gatherv's contract: the buffers hold their counts of their datatypes;
    // at the root, `recvcounts` and `displs` hold one entry per rank.
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    let me = s.comm(comm)?.comm.rank();
    let (c, d) = if me == root {
        // SAFETY: as above.
        unsafe { (per_rank(s, comm, recvcounts)?, per_rank(s, comm, displs)?) }
    } else {
        (&[][..], &[][..])
    };
    let c = if me == root { c.to_vec() } else { vec![0; coll::comm_size(s, comm)?] };
    let d = if me == root { d.to_vec() } else { c.clone() };
    coll::gather(s, sb, sendcount, sendtype, rb, &c, Some(&d), recvtype, root, comm)
});

blocking!(MPI_Scatter, comm,
(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle),
|s: &mut State| {
    // SAFETY: the scatter's contract: the buffers hold their counts of their datatypes
    // (the send buffer one block per rank, at the root).
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    let counts = vec![sendcount; coll::comm_size(s, comm)?];
    coll::scatter(s, sb, &counts, None, sendtype, rb, recvcount, recvtype, root, comm)
});

both!(MPI_Scatterv, MPI_Iscatterv, comm,
(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle),
|s: &mut State| {
    // SAFETY: the scatterv's contract: the buffers hold their counts of their datatypes;
    // at the root, `sendcounts` and `displs` hold one entry per rank.
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    let me = s.comm(comm)?.comm.rank();
    let p = coll::comm_size(s, comm)?;
    let (c, d) = if me == root {
        // SAFETY: as above.
        unsafe { (per_rank(s, comm, sendcounts)?.to_vec(), per_rank(s, comm, displs)?.to_vec()) }
    } else {
        (vec![0; p], vec![0; p])
    };
    coll::scatter(s, sb, &c, Some(&d), sendtype, rb, recvcount, recvtype, root, comm)
});

blocking!(MPI_Allgather, comm,
(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle),
|s: &mut State| {
    // SAFETY: the allgather's contract: the buffers hold their counts of their datatypes
    // (the receive buffer one block per rank).
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    let counts = vec![recvcount; coll::comm_size(s, comm)?];
    coll::allgather(s, sb, sendcount, sendtype, rb, &counts, None, recvtype, comm)
});

both!(MPI_Allgatherv, MPI_Iallgatherv, comm,
(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle),
|s: &mut State| {
    // SAFETY: the allgatherv's contract: the buffers hold their counts of their
    // datatypes; `recvcounts` and `displs` hold one entry per rank.
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    // SAFETY: as above.
    let (c, d) = unsafe { (per_rank(s, comm, recvcounts)?, per_rank(s, comm, displs)?) };
    coll::allgather(s, sb, sendcount, sendtype, rb, c, Some(d), recvtype, comm)
});

blocking!(MPI_Alltoall, comm,
(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle),
|s: &mut State| {
    // SAFETY: the alltoall's contract: each buffer holds one block per rank of its count
    // of its datatype.
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    let p = coll::comm_size(s, comm)?;
    coll::alltoall(s, sb, &vec![sendcount; p], None, sendtype, rb, &vec![recvcount; p], None, recvtype, comm)
});

both!(MPI_Alltoallv, MPI_Ialltoallv, comm,
(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle),
|s: &mut State| {
    // SAFETY: the alltoallv's contract: the count and displacement arrays hold one entry
    // per rank; the buffers hold the blocks they describe.
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    // SAFETY: as above.
    let (rc, rd) = unsafe { (per_rank(s, comm, recvcounts)?, per_rank(s, comm, rdispls)?) };
    let (sc, sd) = if sb.is_in_place() {
        (rc, rd)
    } else {
        // SAFETY: as above.
        unsafe { (per_rank(s, comm, sendcounts)?, per_rank(s, comm, sdispls)?) }
    };
    coll::alltoall(s, sb, sc, Some(sd), sendtype, rb, rc, Some(rd), recvtype, comm)
});

both!(MPI_Alltoallw, MPI_Ialltoallw, comm,
(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const Handle, comm: Handle),
|s: &mut State| {
    // SAFETY: the alltoallw's contract: the count, displacement and type arrays hold one
    // entry per rank; the buffers hold the blocks they describe.
    let (sb, rb) = unsafe { (Lent::new(sendbuf), Lent::new(recvbuf)) };
    // SAFETY: as above.
    let (rc, rd, rt) = unsafe { (per_rank(s, comm, recvcounts)?, per_rank(s, comm, rdispls)?, per_rank(s, comm, recvtypes)?) };
    let (sc, sd, st) = if sb.is_in_place() {
        (rc, rd, rt)
    } else {
        // SAFETY: as above.
        unsafe { (per_rank(s, comm, sendcounts)?, per_rank(s, comm, sdispls)?, per_rank(s, comm, sendtypes)?) }
    };
    coll::alltoallw(s, sb, sc, sd, st, rb, rc, rd, rt, comm)
});
