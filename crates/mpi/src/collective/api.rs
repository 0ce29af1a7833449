//! The typed collective calls, shaped after rsmpi's `CommunicatorCollectives` and `Root`
//! traits (here inherent methods of [`SimpleCommunicator`] and the [`Root`] trait of a
//! [`Process`]). Varcount forms take element counts per rank; the data is packed by rank (the
//! displacements of `MPI_Allgatherv` are the prefix sums of the counts).

use zerocopy::IntoBytes;

use super::algorithms::{
    ALLGATHER_RING_MIN, ALLREDUCE_RING_MIN, ALLTOALL_BRUCK_MAX, BCAST_LONG_MIN,
};
use super::tag;
use crate::communicator::SimpleCommunicator;
use crate::datatype::{Buffer, BufferMut, Equivalence, Kind};
use crate::error::{Error, Result};
use crate::op::SystemOperation;
use crate::point_to_point::Process;

fn same_len(what: &str, a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(Error::Count(format!("{what}: {a} bytes against {b}")));
    }
    Ok(())
}

/// Offsets of packed varcount blocks: chunk `i` is `counts[i]` elements of `elem` bytes.
fn packed_bounds(counts: &[usize], elem: usize) -> Vec<(usize, usize)> {
    let mut off = 0;
    counts
        .iter()
        .map(|&c| {
            let b = (off, c * elem);
            off += c * elem;
            b
        })
        .collect()
}

impl SimpleCommunicator {
    fn check_counts(&self, counts: &[usize]) -> Result<()> {
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
        if out.len() < ALLGATHER_RING_MIN {
            self.allgather_bruck(mine, out)
        } else {
            let b = mine.len();
            let r = self.rank() as usize;
            out[r * b..(r + 1) * b].copy_from_slice(mine);
            self.allgather_ring(out, &|i| (i * b, b), tag::ALLGATHER)
        }
    }

    /// `MPI_Barrier`.
    pub fn barrier(&self) -> Result<()> {
        self.barrier_dissemination()
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
        let acc = recv.bytes_mut();
        acc.copy_from_slice(send.bytes());
        if acc.len() >= ALLREDUCE_RING_MIN && acc.len() / kind.size() >= self.size() as usize {
            self.allreduce_ring(acc, kind, op)
        } else {
            self.allreduce_recursive_doubling(acc, kind, op)
        }
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
        let out = recv.as_mut_bytes();
        let (s, l) = bounds[r];
        out[s..s + l].copy_from_slice(send.as_bytes());
        self.allgather_ring(out, &|i| bounds[i], tag::ALLGATHER)
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
        let b = sb.len() / p;
        if b <= ALLTOALL_BRUCK_MAX && p >= 8 {
            self.alltoall_bruck(sb, rb, b)
        } else {
            self.alltoall_pairwise(sb, &|i| (i * b, b), rb, &|i| (i * b, b))
        }
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
        self.alltoall_pairwise(
            send.as_bytes(),
            &|i| sbounds[i],
            recv.as_mut_bytes(),
            &|i| rbounds[i],
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
        let mut acc = send.as_bytes().to_vec();
        self.reduce_scatter_ring(&mut acc, T::KIND, op, &|i| bounds[i], tag::REDUCE_SCATTER)?;
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
        self.scan_recursive_doubling(send.bytes(), recv.bytes_mut(), kind, op, false)
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
        self.scan_recursive_doubling(send.bytes(), recv.bytes_mut(), kind, op, true)
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
        let b = buf.bytes_mut();
        if b.len() >= BCAST_LONG_MIN && c.size() >= 8 {
            c.bcast_scatter_allgather(b, self.rank())
        } else {
            c.bcast_binomial(b, self.rank())
        }
    }

    fn reduce_into<S: Buffer + ?Sized>(&self, send: &S, op: SystemOperation) -> Result<()> {
        self.check_root()?;
        if self.is_me() {
            return Err(Error::Arg(
                "reduce_into on the root: use reduce_into_root".into(),
            ));
        }
        let mut acc = send.bytes().to_vec();
        self.comm()
            .reduce_binomial(&mut acc, send.kind(), op, self.rank())
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
        let acc = recv.bytes_mut();
        acc.copy_from_slice(send.bytes());
        self.comm().reduce_binomial(acc, kind, op, self.rank())
    }

    fn gather_into<S: Buffer + ?Sized>(&self, send: &S) -> Result<()> {
        self.check_root()?;
        self.comm()
            .gather_binomial(send.bytes(), self.rank())
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
        if let Some(all) = self.comm().gather_binomial(send.bytes(), self.rank())? {
            recv.bytes_mut().copy_from_slice(&all);
        }
        Ok(())
    }

    fn gather_varcount_into<T: Equivalence>(&self, send: &[T]) -> Result<()> {
        self.check_root()?;
        self.comm()
            .coll_send(self.rank(), tag::GATHER, send.as_bytes())
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
        let out = recv.as_mut_bytes();
        for (i, &(s, l)) in bounds.iter().enumerate() {
            if i as i32 == c.rank() {
                same_len("gatherv (own block)", send.as_bytes().len(), l)?;
                out[s..s + l].copy_from_slice(send.as_bytes());
            } else {
                c.coll_recv(i as i32, tag::GATHER, &mut out[s..s + l])?;
            }
        }
        Ok(())
    }

    fn scatter_into<R: BufferMut + ?Sized>(&self, recv: &mut R) -> Result<()> {
        self.check_root()?;
        self.comm()
            .scatter_binomial(&[], recv.bytes_mut(), self.rank())
    }

    fn scatter_into_root<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        recv: &mut R,
    ) -> Result<()> {
        self.check_root()?;
        let p = self.comm().size() as usize;
        same_len("scatter", recv.bytes().len() * p, send.bytes().len())?;
        self.comm()
            .scatter_binomial(send.bytes(), recv.bytes_mut(), self.rank())
    }

    fn scatter_varcount_into<T: Equivalence>(&self, recv: &mut [T]) -> Result<()> {
        self.check_root()?;
        self.comm()
            .coll_recv(self.rank(), tag::SCATTER, recv.as_mut_bytes())
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
        let all = send.as_bytes();
        for (i, &(s, l)) in bounds.iter().enumerate() {
            if i as i32 == c.rank() {
                same_len("scatterv (own block)", recv.as_bytes().len(), l)?;
                recv.as_mut_bytes().copy_from_slice(&all[s..s + l]);
            } else {
                c.coll_send(i as i32, tag::SCATTER, &all[s..s + l])?;
            }
        }
        Ok(())
    }
}
