//! The typed collective calls, shaped after rsmpi's `CommunicatorCollectives` and `Root`
//! traits (here inherent methods of [`SimpleCommunicator`] and the [`Root`] trait of a
//! [`Process`]). Varcount forms take element counts per rank; the data is packed by rank (the
//! displacements of `MPI_Allgatherv` are the prefix sums of the counts).

use zerocopy::IntoBytes;

use super::blocks::{packed_bounds, same_len};
use super::{immediate, tag};
use crate::communicator::SimpleCommunicator;
use crate::datatype::{Buffer, BufferMut, Equivalence, Kind};
use crate::op::SystemOperation;
use crate::point_to_point::Process;
use crate::request::{Request, Scope};
use transport::error::{Error, Result};

impl SimpleCommunicator {
    pub(super) fn check_counts(&self, counts: &[usize]) -> Result<()> {
        if counts.len() != self.size() as usize {
            return Err(Error::Count(format!(
                "{} counts for a communicator of {}",
                counts.len(),
                self.size()
            )));
        }
        Ok(())
    }

    /// All ranks' `mine` (equal lengths), by rank: the allgather the crate uses internally.
    pub(crate) fn all_gather_bytes(&self, mine: &[u8]) -> Result<Vec<u8>> {
        let mut out = vec![0u8; mine.len() * self.size() as usize];
        self.all_gather_raw(mine, &mut out)?;
        Ok(out)
    }

    fn all_gather_raw(&self, mine: &[u8], out: &mut [u8]) -> Result<()> {
        let p = self.size() as usize;
        same_len("allgather", mine.len() * p, out.len())?;
        let t = self.coll_tag(tag::ALLGATHER);
        self.run("allgather", self.allgather(mine, out, t))
    }

    /// `MPI_Barrier`.
    pub fn barrier(&self) -> Result<()> {
        let t = self.coll_tag(tag::BARRIER);
        self.run("barrier", self.barrier_dissemination(t))
    }

    /// `MPI_Allreduce`: `recv = op(every rank's send)`.
    pub fn all_reduce_into<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
        op: SystemOperation,
    ) -> Result<()> {
        let kind = send.kind();
        same_len("allreduce", send.bytes().len(), recv.bytes().len())?;
        let t = self.coll_tag(tag::ALLREDUCE);
        let acc = recv.bytes_mut();
        acc.copy_from_slice(send.bytes());
        self.run("allreduce", self.allreduce(acc, kind, op, t))
    }

    /// `MPI_Allgather`: every rank's `send` (equal lengths), by rank.
    pub fn all_gather_into<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()> {
        self.all_gather_raw(send.bytes(), recv.bytes_mut())
    }

    /// `MPI_Allgatherv`: rank `i` contributes `counts[i]` elements; packed by rank.
    pub fn all_gather_varcount_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    ) -> Result<()> {
        self.check_counts(counts)?;
        let elem = std::mem::size_of::<T>();
        let bounds = packed_bounds(counts, elem);
        let r = self.rank() as usize;
        same_len("allgatherv (own block)", send.len(), counts[r])?;
        same_len("allgatherv", recv.len(), counts.iter().sum::<usize>())?;
        let t = self.coll_tag(tag::ALLGATHER);
        let out = recv.as_mut_bytes();
        let (s, l) = bounds[r];
        out[s..s + l].copy_from_slice(send.as_bytes());
        self.run("allgatherv", self.allgather_ring(out, &|i| bounds[i], t))
    }

    /// `MPI_Alltoall`: `send` holds `size` equal blocks, block `i` for rank `i`; `recv` gets
    /// block `i` from rank `i`.
    pub fn all_to_all_into<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()> {
        let p = self.size() as usize;
        let (sb, rb) = (send.bytes(), recv.bytes_mut());
        same_len("alltoall", sb.len(), rb.len())?;
        if sb.len() % p != 0 {
            return Err(Error::Count(format!(
                "alltoall: {} bytes do not split into {p} blocks",
                sb.len()
            )));
        }
        let t = self.coll_tag(tag::ALLTOALL);
        self.run("alltoall", self.alltoall(sb, rb, sb.len() / p, t))
    }

    /// `MPI_Alltoallv`: `send_counts[i]` elements go to rank `i`, `recv_counts[i]` come from
    /// it; both packed by rank.
    pub fn all_to_all_varcount_into<T: Equivalence>(
        &self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
    ) -> Result<()> {
        self.check_counts(send_counts)?;
        self.check_counts(recv_counts)?;
        same_len("alltoallv (send)", send.len(), send_counts.iter().sum())?;
        same_len("alltoallv (recv)", recv.len(), recv_counts.iter().sum())?;
        let elem = std::mem::size_of::<T>();
        let sbounds = packed_bounds(send_counts, elem);
        let rbounds = packed_bounds(recv_counts, elem);
        let t = self.coll_tag(tag::ALLTOALL);
        self.run(
            "alltoallv",
            self.alltoall_pairwise(
                send.as_bytes(),
                &|i| sbounds[i],
                recv.as_mut_bytes(),
                &|i| rbounds[i],
                t,
            ),
        )
    }

    /// `MPI_Reduce_scatter_block`: `send` holds `size` blocks of `recv.len()` elements; rank
    /// `i` gets the reduction of everyone's block `i`.
    pub fn reduce_scatter_block_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: SystemOperation,
    ) -> Result<()> {
        let counts = vec![recv.len(); self.size() as usize];
        self.reduce_scatter_into(send, recv, &counts, op)
    }

    /// `MPI_Reduce_scatter`: rank `i` gets `counts[i]` elements of the reduction.
    pub fn reduce_scatter_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        op: SystemOperation,
    ) -> Result<()> {
        self.check_counts(counts)?;
        same_len("reduce_scatter", send.len(), counts.iter().sum())?;
        let r = self.rank() as usize;
        same_len("reduce_scatter (own block)", recv.len(), counts[r])?;
        let bounds = packed_bounds(counts, std::mem::size_of::<T>());
        let t = self.coll_tag(tag::REDUCE_SCATTER);
        let mut acc = send.as_bytes().to_vec();
        self.run(
            "reduce_scatter",
            self.reduce_scatter_ring(&mut acc, T::KIND, op, &|i| bounds[i], t),
        )?;
        let (s, l) = bounds[r];
        recv.as_mut_bytes().copy_from_slice(&acc[s..s + l]);
        Ok(())
    }

    /// `MPI_Scan` (inclusive prefix reduction).
    pub fn scan_into<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
        op: SystemOperation,
    ) -> Result<()> {
        same_len("scan", send.bytes().len(), recv.bytes().len())?;
        let kind = send.kind();
        let t = self.coll_tag(tag::SCAN);
        self.run(
            "scan",
            self.scan_recursive_doubling(send.bytes(), recv.bytes_mut(), kind, op, false, t),
        )
    }

    /// `MPI_Exscan` (exclusive prefix reduction; `recv` is untouched on rank 0).
    pub fn exclusive_scan_into<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
        op: SystemOperation,
    ) -> Result<()> {
        same_len("exscan", send.bytes().len(), recv.bytes().len())?;
        let kind = send.kind();
        let t = self.coll_tag(tag::EXSCAN);
        self.run(
            "exscan",
            self.scan_recursive_doubling(send.bytes(), recv.bytes_mut(), kind, op, true, t),
        )
    }
}

/// The rooted collectives, called on the root's [`Process`] (rsmpi's `Root`).
pub trait Root {
    /// `MPI_Bcast` of `buf` from this root.
    fn broadcast_into<B: BufferMut + ?Sized>(&self, buf: &mut B) -> Result<()>;
    /// `MPI_Reduce` on a non-root: contribute `send`.
    fn reduce_into<S: Buffer + ?Sized>(&self, send: &S, op: SystemOperation) -> Result<()>;
    /// `MPI_Reduce` on the root: `recv = op(every rank's send)`.
    fn reduce_into_root<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
        op: SystemOperation,
    ) -> Result<()>;
    /// `MPI_Gather` on a non-root.
    fn gather_into<S: Buffer + ?Sized>(&self, send: &S) -> Result<()>;
    /// `MPI_Gather` on the root: every rank's `send` (equal lengths), by rank.
    fn gather_into_root<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()>;
    /// `MPI_Gatherv` on a non-root.
    fn gather_varcount_into<T: Equivalence>(&self, send: &[T]) -> Result<()>;
    /// `MPI_Gatherv` on the root: rank `i`'s `counts[i]` elements, packed by rank.
    fn gather_varcount_into_root<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    ) -> Result<()>;
    /// `MPI_Scatter` on a non-root.
    fn scatter_into<R: BufferMut + ?Sized>(&self, recv: &mut R) -> Result<()>;
    /// `MPI_Scatter` on the root: block `i` of `send` to rank `i`.
    fn scatter_into_root<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()>;
    /// `MPI_Scatterv` on a non-root (receives `recv.len()` elements).
    fn scatter_varcount_into<T: Equivalence>(&self, recv: &mut [T]) -> Result<()>;
    /// `MPI_Scatterv` on the root: `counts[i]` elements of `send` (packed) to rank `i`.
    fn scatter_varcount_into_root<T: Equivalence>(
        &self,
        send: &[T],
        counts: &[usize],
        recv: &mut [T],
    ) -> Result<()>;

    /// `MPI_Ibcast` of `buf` from this root.
    fn immediate_broadcast_into<'a, B: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        buf: &'a mut B,
    ) -> Result<Request<'a>>;
    /// `MPI_Ireduce` on a non-root: contribute `send`.
    fn immediate_reduce_into<'a, S: Buffer + ?Sized>(
        &self,
        scope: &Scope<'a>,
        send: &'a S,
        op: SystemOperation,
    ) -> Result<Request<'a>>;
    /// `MPI_Ireduce` on the root: `recv = op(every rank's send)`.
    fn immediate_reduce_into_root<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
        op: SystemOperation,
    ) -> Result<Request<'a>>;
    /// `MPI_Igather` on a non-root.
    fn immediate_gather_into<'a, S: Buffer + ?Sized>(
        &self,
        scope: &Scope<'a>,
        send: &'a S,
    ) -> Result<Request<'a>>;
    /// `MPI_Igather` on the root: every rank's `send` (equal lengths), by rank.
    fn immediate_gather_into_root<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
    ) -> Result<Request<'a>>;
    /// `MPI_Igatherv` on a non-root.
    fn immediate_gather_varcount_into<'a, T: Equivalence>(
        &self,
        scope: &Scope<'a>,
        send: &'a [T],
    ) -> Result<Request<'a>>;
    /// `MPI_Igatherv` on the root: rank `i`'s `counts[i]` elements, packed by rank.
    fn immediate_gather_varcount_into_root<'a, T: Equivalence>(
        &self,
        scope: &Scope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        counts: &[usize],
    ) -> Result<Request<'a>>;
    /// `MPI_Iscatter` on a non-root.
    fn immediate_scatter_into<'a, R: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        recv: &'a mut R,
    ) -> Result<Request<'a>>;
    /// `MPI_Iscatter` on the root: block `i` of `send` to rank `i`.
    fn immediate_scatter_into_root<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
    ) -> Result<Request<'a>>;
    /// `MPI_Iscatterv` on a non-root (receives `recv.len()` elements).
    fn immediate_scatter_varcount_into<'a, T: Equivalence>(
        &self,
        scope: &Scope<'a>,
        recv: &'a mut [T],
    ) -> Result<Request<'a>>;
    /// `MPI_Iscatterv` on the root: `counts[i]` elements of `send` (packed) to rank `i`.
    fn immediate_scatter_varcount_into_root<'a, T: Equivalence>(
        &self,
        scope: &Scope<'a>,
        send: &'a [T],
        counts: &[usize],
        recv: &'a mut [T],
    ) -> Result<Request<'a>>;
}

impl Process<'_> {
    fn comm(&self) -> &SimpleCommunicator {
        self.communicator()
    }

    fn is_me(&self) -> bool {
        self.rank() == self.comm().rank()
    }

    fn check_root(&self) -> Result<()> {
        self.comm().world_rank(self.rank()).map(|_| ())
    }
}

impl Root for Process<'_> {
    fn broadcast_into<B: BufferMut + ?Sized>(&self, buf: &mut B) -> Result<()> {
        self.check_root()?;
        let c = self.comm();
        let t = c.coll_tag(tag::BCAST);
        c.run("bcast", c.bcast(buf.bytes_mut(), self.rank(), t))
    }

    fn reduce_into<S: Buffer + ?Sized>(&self, send: &S, op: SystemOperation) -> Result<()> {
        self.check_root()?;
        if self.is_me() {
            return Err(Error::Arg(
                "reduce_into on the root: use reduce_into_root".into(),
            ));
        }
        let c = self.comm();
        let t = c.coll_tag(tag::REDUCE);
        let mut acc = send.bytes().to_vec();
        c.run(
            "reduce",
            c.reduce_binomial(&mut acc, send.kind(), op, self.rank(), t),
        )
    }

    fn reduce_into_root<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
        op: SystemOperation,
    ) -> Result<()> {
        self.check_root()?;
        same_len("reduce", send.bytes().len(), recv.bytes().len())?;
        let kind: Kind = send.kind();
        let c = self.comm();
        let t = c.coll_tag(tag::REDUCE);
        let acc = recv.bytes_mut();
        acc.copy_from_slice(send.bytes());
        c.run("reduce", c.reduce_binomial(acc, kind, op, self.rank(), t))
    }

    fn gather_into<S: Buffer + ?Sized>(&self, send: &S) -> Result<()> {
        self.check_root()?;
        let c = self.comm();
        let t = c.coll_tag(tag::GATHER);
        c.run("gather", c.gather_binomial(send.bytes(), self.rank(), t))
            .map(|_| ())
    }

    fn gather_into_root<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()> {
        self.check_root()?;
        let p = self.comm().size() as usize;
        same_len("gather", send.bytes().len() * p, recv.bytes().len())?;
        let c = self.comm();
        let t = c.coll_tag(tag::GATHER);
        if let Some(all) = c.run("gather", c.gather_binomial(send.bytes(), self.rank(), t))? {
            recv.bytes_mut().copy_from_slice(&all);
        }
        Ok(())
    }

    fn gather_varcount_into<T: Equivalence>(&self, send: &[T]) -> Result<()> {
        self.check_root()?;
        let c = self.comm();
        let t = c.coll_tag(tag::GATHER);
        c.run("gatherv", c.coll_send(self.rank(), t, send.as_bytes()))
    }

    fn gather_varcount_into_root<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    ) -> Result<()> {
        let c = self.comm();
        c.check_counts(counts)?;
        same_len("gatherv", recv.len(), counts.iter().sum())?;
        let bounds = packed_bounds(counts, std::mem::size_of::<T>());
        same_len(
            "gatherv (own block)",
            send.as_bytes().len(),
            bounds[c.rank() as usize].1,
        )?;
        let t = c.coll_tag(tag::GATHER);
        c.run(
            "gatherv",
            c.gatherv_linear(send.as_bytes(), recv.as_mut_bytes(), &bounds, t),
        )
    }

    fn scatter_into<R: BufferMut + ?Sized>(&self, recv: &mut R) -> Result<()> {
        self.check_root()?;
        let c = self.comm();
        let t = c.coll_tag(tag::SCATTER);
        c.run(
            "scatter",
            c.scatter_binomial(&[], recv.bytes_mut(), self.rank(), t),
        )
    }

    fn scatter_into_root<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()> {
        self.check_root()?;
        let p = self.comm().size() as usize;
        same_len("scatter", recv.bytes().len() * p, send.bytes().len())?;
        let c = self.comm();
        let t = c.coll_tag(tag::SCATTER);
        c.run(
            "scatter",
            c.scatter_binomial(send.bytes(), recv.bytes_mut(), self.rank(), t),
        )
    }

    fn scatter_varcount_into<T: Equivalence>(&self, recv: &mut [T]) -> Result<()> {
        self.check_root()?;
        let c = self.comm();
        let t = c.coll_tag(tag::SCATTER);
        c.run("scatterv", c.coll_recv(self.rank(), t, recv.as_mut_bytes()))
    }

    fn scatter_varcount_into_root<T: Equivalence>(
        &self,
        send: &[T],
        counts: &[usize],
        recv: &mut [T],
    ) -> Result<()> {
        let c = self.comm();
        c.check_counts(counts)?;
        same_len("scatterv", send.len(), counts.iter().sum())?;
        let bounds = packed_bounds(counts, std::mem::size_of::<T>());
        same_len(
            "scatterv (own block)",
            recv.as_bytes().len(),
            bounds[c.rank() as usize].1,
        )?;
        let t = c.coll_tag(tag::SCATTER);
        c.run(
            "scatterv",
            c.scatterv_linear(send.as_bytes(), recv.as_mut_bytes(), &bounds, t),
        )
    }

    fn immediate_broadcast_into<'a, B: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        buf: &'a mut B,
    ) -> Result<Request<'a>> {
        immediate::broadcast(self, buf)
    }

    fn immediate_reduce_into<'a, S: Buffer + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        send: &'a S,
        op: SystemOperation,
    ) -> Result<Request<'a>> {
        immediate::reduce(self, send, None, op)
    }

    fn immediate_reduce_into_root<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
        op: SystemOperation,
    ) -> Result<Request<'a>> {
        immediate::reduce(self, send, Some(recv.bytes_mut()), op)
    }

    fn immediate_gather_into<'a, S: Buffer + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        send: &'a S,
    ) -> Result<Request<'a>> {
        immediate::gather(self, send, None)
    }

    fn immediate_gather_into_root<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
    ) -> Result<Request<'a>> {
        immediate::gather(self, send, Some(recv.bytes_mut()))
    }

    fn immediate_gather_varcount_into<'a, T: Equivalence>(
        &self,
        _scope: &Scope<'a>,
        send: &'a [T],
    ) -> Result<Request<'a>> {
        immediate::gather_varcount(self, send, None)
    }

    fn immediate_gather_varcount_into_root<'a, T: Equivalence>(
        &self,
        _scope: &Scope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        counts: &[usize],
    ) -> Result<Request<'a>> {
        immediate::gather_varcount(self, send, Some((recv, counts)))
    }

    fn immediate_scatter_into<'a, R: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        recv: &'a mut R,
    ) -> Result<Request<'a>> {
        immediate::scatter(self, None, recv.bytes_mut())
    }

    fn immediate_scatter_into_root<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
    ) -> Result<Request<'a>> {
        immediate::scatter(self, Some(send.bytes()), recv.bytes_mut())
    }

    fn immediate_scatter_varcount_into<'a, T: Equivalence>(
        &self,
        _scope: &Scope<'a>,
        recv: &'a mut [T],
    ) -> Result<Request<'a>> {
        immediate::scatter_varcount(self, None, recv)
    }

    fn immediate_scatter_varcount_into_root<'a, T: Equivalence>(
        &self,
        _scope: &Scope<'a>,
        send: &'a [T],
        counts: &[usize],
        recv: &'a mut [T],
    ) -> Result<Request<'a>> {
        immediate::scatter_varcount(self, Some((send, counts)), recv)
    }
}
