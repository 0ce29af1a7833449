//! Collective calls, blocking and nonblocking, over the mpi crate's collectives: buffers are
//! packed through their datatypes into staged bytes and unpacked on completion; vector forms
//! pack blocks at their displacements. Predefined reductions run in the mpi crate's
//! algorithms; `MPI_MINLOC`/`MPI_MAXLOC` and operations made with `MPI_Op_create` fold
//! every rank's contribution locally, in rank order, after an allgather. Reduce-scatter is an
//! allreduce of which each rank keeps its block.

#![forbid(unsafe_code)]

use std::ffi::c_int;
use std::rc::Rc;

use mpi::datatype::KindVec;
use mpi::traits::Root;
use mpi::typemap::Layout;
use mpi::{Kind, SimpleCommunicator, SystemOperation};

use crate::consts::*;
use crate::error::{AResult, AbiError};
use crate::ffi::callbacks::UserOp;
use crate::ffi::mem::{Lent, Staged};
use crate::requests::{Dest, Req, StatusInfo};
use crate::state::State;
use crate::types::{count, counts, pair_of};

/// Nothing to send.
pub(crate) fn no_data() -> KindVec {
    KindVec {
        bytes: Vec::new(),
        kind: Kind::U8,
    }
}

/// A reduction operation.
#[derive(Clone, Copy)]
pub(crate) enum OpKind {
    System(SystemOperation),
    /// MINLOC (`false`) or MAXLOC (`true`) on a pair type.
    Loc {
        max: bool,
        value: Kind,
        index_at: usize,
        extent: usize,
    },
    User {
        op: UserOp,
        dtype: Handle,
        count: c_int,
    },
}

/// The predefined operation of handle `h`.
pub(crate) fn system_op(h: Handle) -> Option<SystemOperation> {
    Some(match h {
        MPI_SUM => SystemOperation::Sum,
        MPI_PROD => SystemOperation::Product,
        MPI_MAX => SystemOperation::Max,
        MPI_MIN => SystemOperation::Min,
        MPI_LAND => SystemOperation::LogicalAnd,
        MPI_LOR => SystemOperation::LogicalOr,
        MPI_LXOR => SystemOperation::LogicalXor,
        MPI_BAND => SystemOperation::BitwiseAnd,
        MPI_BOR => SystemOperation::BitwiseOr,
        MPI_BXOR => SystemOperation::BitwiseXor,
        _ => return None,
    })
}

fn resolve_op(s: &State, op: Handle, dtype: Handle, cnt: c_int) -> AResult<OpKind> {
    if let Some(o) = system_op(op) {
        return Ok(OpKind::System(o));
    }
    if op == MPI_MINLOC || op == MPI_MAXLOC {
        let (value, index_at, extent) = pair_of(dtype).ok_or_else(|| {
            AbiError::new(
                MPI_ERR_OP,
                "MPI_MINLOC/MPI_MAXLOC need a pair datatype such as MPI_2INT",
            )
        })?;
        return Ok(OpKind::Loc {
            max: op == MPI_MAXLOC,
            value,
            index_at,
            extent,
        });
    }
    if let Some(u) = s.ops.get(&op) {
        if !s.layout(dtype)?.is_contiguous() {
            return Err(AbiError::unsupported(
                "a user-defined reduction on a non-contiguous datatype",
            ));
        }
        return Ok(OpKind::User {
            op: u.user,
            dtype,
            count: cnt,
        });
    }
    Err(AbiError::new(
        MPI_ERR_OP,
        format!("{op:#x} is not an operation handle"),
    ))
}

fn loc_cmp(kind: Kind, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    fn get<const N: usize>(x: &[u8]) -> [u8; N] {
        let mut o = [0u8; N];
        o.copy_from_slice(&x[..N]);
        o
    }
    match kind {
        Kind::F32 => f32::from_le_bytes(get(a)).total_cmp(&f32::from_le_bytes(get(b))),
        Kind::F64 => f64::from_le_bytes(get(a)).total_cmp(&f64::from_le_bytes(get(b))),
        Kind::I64 => i64::from_le_bytes(get(a)).cmp(&i64::from_le_bytes(get(b))),
        Kind::I16 => i16::from_le_bytes(get(a)).cmp(&i16::from_le_bytes(get(b))),
        _ => i32::from_le_bytes(get(a)).cmp(&i32::from_le_bytes(get(b))),
    }
}

/// `inout = input op inout`, element by element (the convention of `MPI_User_function`).
fn fold(op: OpKind, input: &[u8], inout: &mut [u8]) -> AResult<()> {
    match op {
        OpKind::System(o) => Err(AbiError::new(
            MPI_ERR_INTERN,
            format!("{o:?} folded locally"),
        )),
        OpKind::Loc {
            max,
            value,
            index_at,
            extent,
        } => {
            // Packed pairs: value then int, `value.size() + 4` bytes each.
            let vs = value.size();
            let step = vs + 4;
            let _ = (index_at, extent);
            for (a, b) in input.chunks_exact(step).zip(inout.chunks_exact_mut(step)) {
                let ord = loc_cmp(value, &a[..vs], &b[..vs]);
                let ia = i32::from_le_bytes([a[vs], a[vs + 1], a[vs + 2], a[vs + 3]]);
                let ib = i32::from_le_bytes([b[vs], b[vs + 1], b[vs + 2], b[vs + 3]]);
                let better = if max { ord.is_gt() } else { ord.is_lt() };
                if better || (ord.is_eq() && ia < ib) {
                    b.copy_from_slice(a);
                }
            }
            Ok(())
        }
        OpKind::User { op, dtype, count } => {
            op.apply(input, inout, count, dtype);
            Ok(())
        }
    }
}

/// Every rank's `mine` folded in rank order: all of them (`upto = None`) or those of ranks
/// `..upto`.
fn fold_all(
    c: &SimpleCommunicator,
    mine: &[u8],
    op: OpKind,
    upto: Option<usize>,
) -> AResult<Option<Vec<u8>>> {
    let p = c.size() as usize;
    let mut all = vec![0u8; mine.len() * p];
    c.all_gather_into(mine, &mut all[..])?;
    let n = upto.unwrap_or(p);
    if n == 0 {
        return Ok(None);
    }
    let blocks: Vec<&[u8]> = if mine.is_empty() {
        vec![&[][..]; p]
    } else {
        all.chunks_exact(mine.len()).collect()
    };
    let mut acc = blocks[n - 1].to_vec();
    for i in (0..n - 1).rev() {
        fold(op, blocks[i], &mut acc)?;
    }
    Ok(Some(acc))
}

fn comm(s: &State, h: Handle) -> AResult<SimpleCommunicator> {
    Ok(s.comm(h)?.comm.clone())
}

fn check_root(c: &SimpleCommunicator, root: c_int) -> AResult<()> {
    if (0..c.size()).contains(&root) {
        Ok(())
    } else {
        Err(AbiError::new(
            MPI_ERR_ROOT,
            format!("root {root} is not in a communicator of size {}", c.size()),
        ))
    }
}

fn kind_of(l: &Layout) -> Kind {
    l.kind().unwrap_or(Kind::Bytes(l.size().max(1)))
}

/// A completed-request or an in-flight collective, by whether the caller wants a request.
fn staged_req(staged: Staged, dest: Option<Dest>) -> Req {
    Req::Coll { staged, dest }
}

/// Run a nonblocking collective's operation, or wait for it (the blocking form).
fn finish(s: &mut State, r: Req, blocking: bool) -> AResult<Option<Req>> {
    if !blocking {
        return Ok(Some(r));
    }
    let h = s.handle();
    s.reqs.insert(h, r);
    let mut h = h;
    crate::requests::wait(s, &mut h)?;
    Ok(None)
}

/// `MPI_Barrier` / `MPI_Ibarrier`.
pub(crate) fn barrier(s: &mut State, ch: Handle, blocking: bool) -> AResult<Option<Req>> {
    let c = comm(s, ch)?;
    if blocking {
        c.barrier()?;
        return Ok(None);
    }
    let st = Staged::start(no_data(), 0, |_, _| c.immediate_barrier())?;
    Ok(Some(staged_req(st, None)))
}

/// `MPI_Bcast` / `MPI_Ibcast`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bcast(
    s: &mut State,
    buf: Lent,
    cnt: c_int,
    dt: Handle,
    root: c_int,
    ch: Handle,
    blocking: bool,
) -> AResult<Option<Req>> {
    let c = comm(s, ch)?;
    check_root(&c, root)?;
    let n = count(cnt)?;
    let l = s.layout(dt)?;
    let mine = if c.rank() == root {
        buf.read(&l, n)?
    } else {
        vec![0; l.size() * n]
    };
    let len = mine.len();
    let st = Staged::start(no_data(), len, |_, rb| {
        rb.copy_from_slice(&mine);
        mpi::scope(|sc| c.process_at_rank(root).immediate_broadcast_into(sc, rb))
    })?;
    let dest = (c.rank() != root).then_some(Dest {
        buf,
        layout: l,
        count: n,
    });
    finish(s, staged_req(st, dest), blocking)
}

/// The send side of a reduction: `sendbuf`, or `recvbuf` for `MPI_IN_PLACE`.
fn reduction_input(s: &State, send: Lent, recv: Lent, n: usize, l: &Layout) -> AResult<Vec<u8>> {
    let _ = s;
    if send.is_in_place() {
        recv.read(l, n)
    } else {
        send.read(l, n)
    }
}

/// `MPI_Reduce` / `MPI_Allreduce` (root `None`) and their nonblocking forms.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce(
    s: &mut State,
    send: Lent,
    recv: Lent,
    cnt: c_int,
    dt: Handle,
    op: Handle,
    root: Option<c_int>,
    ch: Handle,
    blocking: bool,
) -> AResult<Option<Req>> {
    let c = comm(s, ch)?;
    if let Some(r) = root {
        check_root(&c, r)?;
    }
    let n = count(cnt)?;
    let l = s.layout(dt)?;
    let opk = resolve_op(s, op, dt, cnt)?;
    let am_root = root.is_none_or(|r| r == c.rank());
    let input = if send.is_in_place() && !am_root {
        return Err(AbiError::new(
            MPI_ERR_BUFFER,
            "MPI_IN_PLACE is for the root's send buffer only",
        ));
    } else {
        reduction_input(s, send, recv, n, &l)?
    };
    let dest = am_root.then(|| Dest {
        buf: recv,
        layout: Rc::clone(&l),
        count: n,
    });
    let OpKind::System(sop) = opk else {
        if let Some(out) = fold_all(&c, &input, opk, None)?
            && let Some(d) = &dest
        {
            d.buf.write(&d.layout, d.count, &out)?;
        }
        return finish(s, Req::Done(StatusInfo::empty()), blocking);
    };
    let kv = KindVec {
        bytes: input,
        kind: kind_of(&l),
    };
    let len = kv.bytes.len();
    let st = Staged::start(kv, len, |sb, rb| {
        mpi::scope(|sc| match root {
            None => c.immediate_all_reduce_into(sc, sb, rb, sop),
            Some(r) if r == c.rank() => c
                .process_at_rank(r)
                .immediate_reduce_into_root(sc, sb, rb, sop),
            Some(r) => c.process_at_rank(r).immediate_reduce_into(sc, sb, sop),
        })
    })?;
    finish(s, staged_req(st, dest), blocking)
}

/// `MPI_Scan` / `MPI_Exscan` and their nonblocking forms.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan(
    s: &mut State,
    send: Lent,
    recv: Lent,
    cnt: c_int,
    dt: Handle,
    op: Handle,
    exclusive: bool,
    ch: Handle,
    blocking: bool,
) -> AResult<Option<Req>> {
    let c = comm(s, ch)?;
    let n = count(cnt)?;
    let l = s.layout(dt)?;
    let opk = resolve_op(s, op, dt, cnt)?;
    let input = reduction_input(s, send, recv, n, &l)?;
    let me = c.rank() as usize;
    let write = !(exclusive && me == 0);
    let dest = write.then(|| Dest {
        buf: recv,
        layout: Rc::clone(&l),
        count: n,
    });
    let OpKind::System(sop) = opk else {
        let upto = if exclusive { me } else { me + 1 };
        if let Some(out) = fold_all(&c, &input, opk, Some(upto))?
            && let Some(d) = &dest
        {
            d.buf.write(&d.layout, d.count, &out)?;
        }
        return finish(s, Req::Done(StatusInfo::empty()), blocking);
    };
    let kv = KindVec {
        bytes: input,
        kind: kind_of(&l),
    };
    let len = kv.bytes.len();
    let st = Staged::start(kv, len, |sb, rb| {
        mpi::scope(|sc| {
            if exclusive {
                c.immediate_exclusive_scan_into(sc, sb, rb, sop)
            } else {
                c.immediate_scan_into(sc, sb, rb, sop)
            }
        })
    })?;
    finish(s, staged_req(st, dest), blocking)
}

/// `MPI_Reduce_scatter` (`counts`) / `MPI_Reduce_scatter_block` (one count): an allreduce of
/// the whole vector, of which each rank keeps its block.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_scatter(
    s: &mut State,
    send: Lent,
    recv: Lent,
    rcounts: &[c_int],
    dt: Handle,
    op: Handle,
    ch: Handle,
    blocking: bool,
) -> AResult<Option<Req>> {
    let c = comm(s, ch)?;
    let p = c.size() as usize;
    if rcounts.len() != p {
        return Err(AbiError::new(
            MPI_ERR_COUNT,
            "one receive count per rank is needed",
        ));
    }
    let cs = counts(rcounts)?;
    let total: usize = cs.iter().sum();
    let me = c.rank() as usize;
    let l = s.layout(dt)?;
    let opk = resolve_op(s, op, dt, total as c_int)?;
    let input = if send.is_in_place() {
        recv.read(&l, total)?
    } else {
        send.read(&l, total)?
    };
    let out = match opk {
        OpKind::System(sop) => {
            let kv = KindVec {
                bytes: input,
                kind: kind_of(&l),
            };
            let mut out = vec![0u8; kv.bytes.len()];
            c.all_reduce_into(&kv, &mut out[..], sop)?;
            out
        }
        _ => fold_all(&c, &input, opk, None)?.unwrap_or_default(),
    };
    let start: usize = cs[..me].iter().sum::<usize>() * l.size();
    let mine = &out[start..start + cs[me] * l.size()];
    recv.write(&l, cs[me], mine)?;
    finish(s, Req::Done(StatusInfo::empty()), blocking)
}

/// One rank's block of a vector collective: `counts[i]` elements of `layout` at
/// `displs[i]` extents (or bytes, for the `w` forms) from the buffer.
struct Blocks {
    counts: Vec<usize>,
    /// Byte offsets.
    offsets: Vec<isize>,
    layouts: Vec<Rc<Layout>>,
}

impl Blocks {
    fn new(
        s: &State,
        p: usize,
        cnts: &[c_int],
        displs: Option<&[c_int]>,
        dt: Handle,
    ) -> AResult<Self> {
        if cnts.len() < p || displs.is_some_and(|d| d.len() < p) {
            return Err(AbiError::new(
                MPI_ERR_COUNT,
                "one count and displacement per rank are needed",
            ));
        }
        let l = s.layout(dt)?;
        let counts = counts(&cnts[..p])?;
        let offsets = match displs {
            Some(d) => d[..p].iter().map(|&x| x as isize * l.extent()).collect(),
            None => (0..p)
                .map(|i| (i * counts[i]) as isize * l.extent())
                .collect(),
        };
        Ok(Blocks {
            counts,
            offsets,
            layouts: vec![l; p],
        })
    }

    fn w(s: &State, p: usize, cnts: &[c_int], displs: &[c_int], types: &[Handle]) -> AResult<Self> {
        if cnts.len() < p || displs.len() < p || types.len() < p {
            return Err(AbiError::new(
                MPI_ERR_COUNT,
                "one count, displacement and type per rank are needed",
            ));
        }
        Ok(Blocks {
            counts: counts(&cnts[..p])?,
            offsets: displs[..p].iter().map(|&x| x as isize).collect(),
            layouts: types[..p]
                .iter()
                .map(|&t| s.layout(t))
                .collect::<AResult<_>>()?,
        })
    }

    fn bytes(&self, i: usize) -> usize {
        self.counts[i] * self.layouts[i].size()
    }

    fn read(&self, buf: Lent, i: usize) -> AResult<Vec<u8>> {
        buf.offset(self.offsets[i])
            .read(&self.layouts[i], self.counts[i])
    }

    fn read_all(&self, buf: Lent) -> AResult<Vec<u8>> {
        let mut v = Vec::new();
        for i in 0..self.counts.len() {
            v.extend(self.read(buf, i)?);
        }
        Ok(v)
    }

    fn write_all(&self, buf: Lent, packed: &[u8], skip: Option<usize>) -> AResult<()> {
        let mut at = 0;
        for i in 0..self.counts.len() {
            let n = self.bytes(i);
            if Some(i) != skip {
                buf.offset(self.offsets[i]).write(
                    &self.layouts[i],
                    self.counts[i],
                    &packed[at..at + n],
                )?;
            }
            at += n;
        }
        Ok(())
    }
}

/// `MPI_Gather(v)` / `MPI_Igather(v)`: `rdispls` `None` for the plain form.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather(
    s: &mut State,
    send: Lent,
    scnt: c_int,
    sdt: Handle,
    recv: Lent,
    rcnts: &[c_int],
    rdispls: Option<&[c_int]>,
    rdt: Handle,
    root: c_int,
    ch: Handle,
) -> AResult<()> {
    let c = comm(s, ch)?;
    check_root(&c, root)?;
    let p = c.size() as usize;
    let me = c.rank();
    if me != root {
        let mine = send.read(&*s.layout(sdt)?, count(scnt)?)?;
        let r = c.process_at_rank(root);
        if rdispls.is_some() {
            r.gather_varcount_into(&mine[..])?;
        } else {
            r.gather_into(&mine[..])?;
        }
        return Ok(());
    }
    let b = Blocks::new(s, p, rcnts, rdispls, rdt)?;
    let mine = if send.is_in_place() {
        b.read(recv, me as usize)?
    } else {
        send.read(&*s.layout(sdt)?, count(scnt)?)?
    };
    let sizes: Vec<usize> = (0..p).map(|i| b.bytes(i)).collect();
    let mut all = vec![0u8; sizes.iter().sum()];
    let r = c.process_at_rank(root);
    if rdispls.is_some() {
        r.gather_varcount_into_root(&mine[..], &mut all[..], &sizes)?;
    } else {
        r.gather_into_root(&mine[..], &mut all[..])?;
    }
    b.write_all(recv, &all, send.is_in_place().then_some(me as usize))
}

/// `MPI_Scatter(v)`: `sdispls` `None` for the plain form.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter(
    s: &mut State,
    send: Lent,
    scnts: &[c_int],
    sdispls: Option<&[c_int]>,
    sdt: Handle,
    recv: Lent,
    rcnt: c_int,
    rdt: Handle,
    root: c_int,
    ch: Handle,
) -> AResult<()> {
    let c = comm(s, ch)?;
    check_root(&c, root)?;
    let p = c.size() as usize;
    let me = c.rank();
    let in_place = recv.is_in_place() && me == root;
    let (rl, rn) = if in_place {
        (Rc::new(Layout::basic(Kind::U8)), 0)
    } else {
        (s.layout(rdt)?, count(rcnt)?)
    };
    let r = c.process_at_rank(root);
    if me != root {
        let mut mine = vec![0u8; rl.size() * rn];
        if sdispls.is_some() {
            r.scatter_varcount_into(&mut mine[..])?;
        } else {
            r.scatter_into(&mut mine[..])?;
        }
        recv.write(&rl, rn, &mine)?;
        return Ok(());
    }
    let b = Blocks::new(s, p, scnts, sdispls, sdt)?;
    let all = b.read_all(send)?;
    let sizes: Vec<usize> = (0..p).map(|i| b.bytes(i)).collect();
    let mut mine = vec![0u8; sizes[me as usize]];
    if sdispls.is_some() {
        r.scatter_varcount_into_root(&all[..], &sizes, &mut mine[..])?;
    } else {
        r.scatter_into_root(&all[..], &mut mine[..])?;
    }
    if !in_place {
        recv.write(&rl, rn, &mine)?;
    }
    Ok(())
}

/// `MPI_Allgather(v)`: `rdispls` `None` for the plain form.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allgather(
    s: &mut State,
    send: Lent,
    scnt: c_int,
    sdt: Handle,
    recv: Lent,
    rcnts: &[c_int],
    rdispls: Option<&[c_int]>,
    rdt: Handle,
    ch: Handle,
) -> AResult<()> {
    let c = comm(s, ch)?;
    let p = c.size() as usize;
    let me = c.rank() as usize;
    let b = Blocks::new(s, p, rcnts, rdispls, rdt)?;
    let mine = if send.is_in_place() {
        b.read(recv, me)?
    } else {
        send.read(&*s.layout(sdt)?, count(scnt)?)?
    };
    let sizes: Vec<usize> = (0..p).map(|i| b.bytes(i)).collect();
    let mut all = vec![0u8; sizes.iter().sum()];
    if rdispls.is_some() {
        c.all_gather_varcount_into(&mine[..], &mut all[..], &sizes)?;
    } else {
        c.all_gather_into(&mine[..], &mut all[..])?;
    }
    b.write_all(recv, &all, None)
}

/// `MPI_Alltoall(v,w)`: the send and receive blocks.
fn alltoall_blocks(
    s: &mut State,
    send: Option<Blocks>,
    recv: Lent,
    rb: Blocks,
    sendbuf: Lent,
    ch: Handle,
) -> AResult<()> {
    let c = comm(s, ch)?;
    let p = c.size() as usize;
    let (sdata, ssizes) = match &send {
        Some(b) => (
            b.read_all(sendbuf)?,
            (0..p).map(|i| b.bytes(i)).collect::<Vec<_>>(),
        ),
        None => (rb.read_all(recv)?, (0..p).map(|i| rb.bytes(i)).collect()),
    };
    let rsizes: Vec<usize> = (0..p).map(|i| rb.bytes(i)).collect();
    let mut all = vec![0u8; rsizes.iter().sum()];
    c.all_to_all_varcount_into(&sdata[..], &ssizes, &mut all[..], &rsizes)?;
    rb.write_all(recv, &all, None)
}

/// `MPI_Alltoall` / `MPI_Alltoallv` (`displs` given).
#[allow(clippy::too_many_arguments)]
pub(crate) fn alltoall(
    s: &mut State,
    send: Lent,
    scnts: &[c_int],
    sdispls: Option<&[c_int]>,
    sdt: Handle,
    recv: Lent,
    rcnts: &[c_int],
    rdispls: Option<&[c_int]>,
    rdt: Handle,
    ch: Handle,
) -> AResult<()> {
    let p = comm(s, ch)?.size() as usize;
    let rb = Blocks::new(s, p, rcnts, rdispls, rdt)?;
    let sb = if send.is_in_place() {
        None
    } else {
        Some(Blocks::new(s, p, scnts, sdispls, sdt)?)
    };
    alltoall_blocks(s, sb, recv, rb, send, ch)
}

/// `MPI_Alltoallw`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn alltoallw(
    s: &mut State,
    send: Lent,
    scnts: &[c_int],
    sdispls: &[c_int],
    sdts: &[Handle],
    recv: Lent,
    rcnts: &[c_int],
    rdispls: &[c_int],
    rdts: &[Handle],
    ch: Handle,
) -> AResult<()> {
    let p = comm(s, ch)?.size() as usize;
    let rb = Blocks::w(s, p, rcnts, rdispls, rdts)?;
    let sb = if send.is_in_place() {
        None
    } else {
        Some(Blocks::w(s, p, scnts, sdispls, sdts)?)
    };
    alltoall_blocks(s, sb, recv, rb, send, ch)
}

/// The number of ranks of communicator `ch` (for the sizes of the vector arguments).
pub(crate) fn comm_size(s: &State, ch: Handle) -> AResult<usize> {
    Ok(s.comm(ch)?.comm.size() as usize)
}

/// A completed request for the nonblocking forms that run to completion at once (the
/// vector and gather/scatter families, whose blocking algorithms are used).
pub(crate) fn done() -> Req {
    Req::Done(StatusInfo::empty())
}

/// The shape of a plain (non-vector) gather, scatter, allgather or alltoall.
pub(crate) struct Plain {
    pub send: Lent,
    pub scount: c_int,
    pub stype: Handle,
    pub recv: Lent,
    pub rcount: c_int,
    pub rtype: Handle,
}

/// Which plain collective a nonblocking call starts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlainKind {
    Gather(c_int),
    Scatter(c_int),
    Allgather,
    Alltoall,
}

/// `MPI_Igather`, `MPI_Iscatter`, `MPI_Iallgather`, `MPI_Ialltoall`: started on staged
/// buffers, the output unpacked when the request completes.
pub(crate) fn iplain(s: &mut State, a: Plain, kind: PlainKind, ch: Handle) -> AResult<Req> {
    let c = comm(s, ch)?;
    let p = c.size() as usize;
    let me = c.rank();
    let root = match kind {
        PlainKind::Gather(r) | PlainKind::Scatter(r) => {
            check_root(&c, r)?;
            Some(r)
        }
        _ => None,
    };
    let is_root = root == Some(me);
    let gets_output = match kind {
        PlainKind::Gather(_) => is_root,
        PlainKind::Scatter(_) => !(is_root && a.recv.is_in_place()),
        _ => true,
    };
    let sends = match kind {
        PlainKind::Scatter(_) => is_root,
        _ => true,
    };
    let (rl, rn) = if gets_output || matches!(kind, PlainKind::Scatter(_)) && !is_root {
        (s.layout(a.rtype)?, count(a.rcount)?)
    } else {
        (Rc::new(Layout::basic(Kind::U8)), 0)
    };
    let block = rl.size() * rn;
    // The bytes this rank contributes.
    let input = if !sends {
        Vec::new()
    } else if a.send.is_in_place() {
        match kind {
            PlainKind::Alltoall => a.recv.read(&rl, rn * p)?,
            _ => a
                .recv
                .offset(me as isize * rn as isize * rl.extent())
                .read(&rl, rn)?,
        }
    } else {
        let sl = s.layout(a.stype)?;
        let sn = count(a.scount)?;
        match kind {
            PlainKind::Scatter(_) | PlainKind::Alltoall => a.send.read(&sl, sn * p)?,
            _ => a.send.read(&sl, sn)?,
        }
    };
    let out_len = match kind {
        PlainKind::Gather(_) if is_root => input.len() * p,
        PlainKind::Gather(_) => 0,
        PlainKind::Scatter(_) if is_root => input.len() / p.max(1),
        PlainKind::Scatter(_) => block,
        PlainKind::Allgather => input.len() * p,
        PlainKind::Alltoall => input.len(),
    };
    if gets_output
        && out_len
            != block
                * if matches!(kind, PlainKind::Scatter(_)) {
                    1
                } else {
                    p
                }
    {
        return Err(AbiError::new(
            MPI_ERR_COUNT,
            "the send and receive sizes of the collective differ",
        ));
    }
    let kv = KindVec {
        bytes: input,
        kind: Kind::U8,
    };
    let st = Staged::start(kv, out_len, |sb, rb| {
        mpi::scope(|sc| match (kind, root) {
            (PlainKind::Gather(_), Some(r)) if r == me => {
                c.process_at_rank(r).immediate_gather_into_root(sc, sb, rb)
            }
            (PlainKind::Gather(_), Some(r)) => c.process_at_rank(r).immediate_gather_into(sc, sb),
            (PlainKind::Scatter(_), Some(r)) if r == me => {
                c.process_at_rank(r).immediate_scatter_into_root(sc, sb, rb)
            }
            (PlainKind::Scatter(_), Some(r)) => c.process_at_rank(r).immediate_scatter_into(sc, rb),
            (PlainKind::Allgather, _) => c.immediate_all_gather_into(sc, sb, rb),
            _ => c.immediate_all_to_all_into(sc, sb, rb),
        })
    })?;
    let count = match kind {
        PlainKind::Scatter(_) => rn,
        _ => rn * p,
    };
    let dest = gets_output.then_some(Dest {
        buf: a.recv,
        layout: rl,
        count,
    });
    Ok(staged_req(st, dest))
}
