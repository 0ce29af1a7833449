//! The immediate (nonblocking) collectives (MPI 4.1 §6.12), shaped after rsmpi's
//! `ImmediateCollectiveCommunicator` and the immediate methods of its `Root` trait. Each runs
//! the same algorithm as its blocking form (chosen by the same sizes), as a future owned by
//! the returned [`Request`]: it copies its input when called and delivers its output into the
//! borrowed receive buffer when the request completes. The buffers stay borrowed for the
//! request's lifetime, so neither can be touched before completion:
//!
//! ```no_run
//! use mpi::{SimpleCommunicator, SystemOperation};
//!
//! fn total(world: &SimpleCommunicator, mine: i64) -> mpi::Result<i64> {
//!     let mut sum = 0i64;
//!     mpi::scope(|s| {
//!         let req = world.immediate_all_reduce_into(s, &mine, &mut sum, SystemOperation::sum())?;
//!         // ... other work, other requests ...
//!         req.wait().map(|_| ())
//!     })?;
//!     Ok(sum)
//! }
//! ```
//!
//! Looking at the receive buffer before the request completed does not compile:
//!
//! ```compile_fail,E0502
//! use mpi::{SimpleCommunicator, SystemOperation};
//!
//! fn total(world: &SimpleCommunicator, mine: i64) -> mpi::Result<i64> {
//!     let mut sum = 0i64;
//!     mpi::scope(|s| {
//!         let req = world.immediate_all_reduce_into(s, &mine, &mut sum, SystemOperation::sum())?;
//!         let early = &sum;
//!         req.wait()?;
//!         Ok(*early)
//!     })
//! }
//! ```

use zerocopy::IntoBytes;

use super::blocks::{packed_bounds, same_len};
use super::tag;
use crate::communicator::SimpleCommunicator;
use crate::datatype::{Buffer, BufferMut, Equivalence};
use crate::op::SystemOperation;
use crate::point_to_point::Process;
use crate::request::{Request, Scope};
use transport::error::{Error, Result};

impl SimpleCommunicator {
    /// `MPI_Ibarrier`: completes once every rank has entered it.
    pub fn immediate_barrier(&self) -> Result<Request<'static>> {
        let t = self.coll_tag(tag::BARRIER);
        let c = self.clone();
        let fut = Box::pin(async move {
            c.barrier_dissemination(t).await?;
            Ok(Vec::new())
        });
        Ok(Request::collective(self, fut, None))
    }

    /// `MPI_Iallreduce`: `recv = op(every rank's send)`.
    pub fn immediate_all_reduce_into<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
        op: SystemOperation,
    ) -> Result<Request<'a>> {
        same_len("allreduce", send.bytes().len(), recv.bytes().len())?;
        let kind = send.kind();
        let t = self.coll_tag(tag::ALLREDUCE);
        let mut acc = send.bytes().to_vec();
        let c = self.clone();
        let fut = Box::pin(async move {
            c.allreduce(&mut acc, kind, op, t).await?;
            Ok(acc)
        });
        Ok(Request::collective(self, fut, Some(recv.bytes_mut())))
    }

    /// `MPI_Iallgather`: every rank's `send` (equal lengths), by rank.
    pub fn immediate_all_gather_into<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
    ) -> Result<Request<'a>> {
        let p = self.size() as usize;
        same_len("allgather", send.bytes().len() * p, recv.bytes().len())?;
        let t = self.coll_tag(tag::ALLGATHER);
        let mine = send.bytes().to_vec();
        let mut out = vec![0u8; recv.bytes().len()];
        let c = self.clone();
        let fut = Box::pin(async move {
            c.allgather(&mine, &mut out, t).await?;
            Ok(out)
        });
        Ok(Request::collective(self, fut, Some(recv.bytes_mut())))
    }

    /// `MPI_Iallgatherv`: rank `i` contributes `counts[i]` elements; packed by rank.
    pub fn immediate_all_gather_varcount_into<'a, T: Equivalence>(
        &self,
        _scope: &Scope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        counts: &[usize],
    ) -> Result<Request<'a>> {
        self.check_counts(counts)?;
        let r = self.rank() as usize;
        same_len("allgatherv (own block)", send.len(), counts[r])?;
        same_len("allgatherv", recv.len(), counts.iter().sum::<usize>())?;
        let bounds = packed_bounds(counts, std::mem::size_of::<T>());
        let t = self.coll_tag(tag::ALLGATHER);
        let mut out = vec![0u8; recv.as_bytes().len()];
        let (s, l) = bounds[r];
        out[s..s + l].copy_from_slice(send.as_bytes());
        let c = self.clone();
        let fut = Box::pin(async move {
            c.allgather_ring(&mut out, &|i| bounds[i], t).await?;
            Ok(out)
        });
        Ok(Request::collective(self, fut, Some(recv.as_mut_bytes())))
    }

    /// `MPI_Ialltoall`: `send` holds `size` equal blocks, block `i` for rank `i`; `recv` gets
    /// block `i` from rank `i`.
    pub fn immediate_all_to_all_into<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
    ) -> Result<Request<'a>> {
        let p = self.size() as usize;
        let n = send.bytes().len();
        same_len("alltoall", n, recv.bytes().len())?;
        if !n.is_multiple_of(p) {
            return Err(Error::Count(format!(
                "alltoall: {n} bytes do not split into {p} blocks"
            )));
        }
        let t = self.coll_tag(tag::ALLTOALL);
        let mine = send.bytes().to_vec();
        let mut out = vec![0u8; n];
        let c = self.clone();
        let fut = Box::pin(async move {
            c.alltoall(&mine, &mut out, n / p, t).await?;
            Ok(out)
        });
        Ok(Request::collective(self, fut, Some(recv.bytes_mut())))
    }

    /// `MPI_Ialltoallv`: `send_counts[i]` elements go to rank `i`, `recv_counts[i]` come
    /// from it; both packed by rank.
    pub fn immediate_all_to_all_varcount_into<'a, T: Equivalence>(
        &self,
        _scope: &Scope<'a>,
        send: &'a [T],
        send_counts: &[usize],
        recv: &'a mut [T],
        recv_counts: &[usize],
    ) -> Result<Request<'a>> {
        self.check_counts(send_counts)?;
        self.check_counts(recv_counts)?;
        same_len("alltoallv (send)", send.len(), send_counts.iter().sum())?;
        same_len("alltoallv (recv)", recv.len(), recv_counts.iter().sum())?;
        let elem = std::mem::size_of::<T>();
        let sbounds = packed_bounds(send_counts, elem);
        let rbounds = packed_bounds(recv_counts, elem);
        let t = self.coll_tag(tag::ALLTOALL);
        let mine = send.as_bytes().to_vec();
        let mut out = vec![0u8; recv.as_bytes().len()];
        let c = self.clone();
        let fut = Box::pin(async move {
            c.alltoall_pairwise(&mine, &|i| sbounds[i], &mut out, &|i| rbounds[i], t)
                .await?;
            Ok(out)
        });
        Ok(Request::collective(self, fut, Some(recv.as_mut_bytes())))
    }

    /// `MPI_Ireduce_scatter_block`: `send` holds `size` blocks of `recv.len()` elements; rank
    /// `i` gets the reduction of everyone's block `i`.
    pub fn immediate_reduce_scatter_block_into<'a, T: Equivalence>(
        &self,
        scope: &Scope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: SystemOperation,
    ) -> Result<Request<'a>> {
        let counts = vec![recv.len(); self.size() as usize];
        self.immediate_reduce_scatter_into(scope, send, recv, &counts, op)
    }

    /// `MPI_Ireduce_scatter`: rank `i` gets `counts[i]` elements of the reduction.
    pub fn immediate_reduce_scatter_into<'a, T: Equivalence>(
        &self,
        _scope: &Scope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        counts: &[usize],
        op: SystemOperation,
    ) -> Result<Request<'a>> {
        self.check_counts(counts)?;
        same_len("reduce_scatter", send.len(), counts.iter().sum())?;
        let r = self.rank() as usize;
        same_len("reduce_scatter (own block)", recv.len(), counts[r])?;
        let bounds = packed_bounds(counts, std::mem::size_of::<T>());
        let t = self.coll_tag(tag::REDUCE_SCATTER);
        let mut acc = send.as_bytes().to_vec();
        let c = self.clone();
        let fut = Box::pin(async move {
            c.reduce_scatter_ring(&mut acc, T::KIND, op, &|i| bounds[i], t)
                .await?;
            let (s, l) = bounds[r];
            Ok(acc[s..s + l].to_vec())
        });
        Ok(Request::collective(self, fut, Some(recv.as_mut_bytes())))
    }

    /// `MPI_Iscan` (inclusive prefix reduction).
    pub fn immediate_scan_into<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
        op: SystemOperation,
    ) -> Result<Request<'a>> {
        self.immediate_scan(scope, send, recv, op, false)
    }

    /// `MPI_Iexscan` (exclusive prefix reduction; `recv` is untouched on rank 0).
    pub fn immediate_exclusive_scan_into<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
        op: SystemOperation,
    ) -> Result<Request<'a>> {
        self.immediate_scan(scope, send, recv, op, true)
    }

    fn immediate_scan<'a, S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        _scope: &Scope<'a>,
        send: &'a S,
        recv: &'a mut R,
        op: SystemOperation,
        exclusive: bool,
    ) -> Result<Request<'a>> {
        let what = if exclusive { "exscan" } else { "scan" };
        same_len(what, send.bytes().len(), recv.bytes().len())?;
        let kind = send.kind();
        let t = self.coll_tag(if exclusive { tag::EXSCAN } else { tag::SCAN });
        let mine = send.bytes().to_vec();
        let mut result = vec![0u8; mine.len()];
        let c = self.clone();
        let fut = Box::pin(async move {
            c.scan_recursive_doubling(&mine, &mut result, kind, op, exclusive, t)
                .await?;
            Ok(result)
        });
        let out = if exclusive && self.rank() == 0 {
            None
        } else {
            Some(recv.bytes_mut())
        };
        Ok(Request::collective(self, fut, out))
    }
}

// The rooted immediate collectives, called by `Root`'s methods.

pub(super) fn broadcast<'a, B: BufferMut + ?Sized>(
    root: &Process<'_>,
    buf: &'a mut B,
) -> Result<Request<'a>> {
    let c = root.communicator();
    c.world_rank(root.rank())?;
    let t = c.coll_tag(tag::BCAST);
    let mut data = buf.bytes().to_vec();
    let (cc, r) = (c.clone(), root.rank());
    let fut = Box::pin(async move {
        cc.bcast(&mut data, r, t).await?;
        Ok(data)
    });
    Ok(Request::collective(c, fut, Some(buf.bytes_mut())))
}

pub(super) fn reduce<'a, S: Buffer + ?Sized>(
    root: &Process<'_>,
    send: &'a S,
    recv: Option<&'a mut [u8]>,
    op: SystemOperation,
) -> Result<Request<'a>> {
    let c = root.communicator();
    c.world_rank(root.rank())?;
    let is_root = root.rank() == c.rank();
    match (&recv, is_root) {
        (Some(out), true) => same_len("reduce", send.bytes().len(), out.len())?,
        (None, false) => {}
        (None, true) => {
            return Err(Error::Arg(
                "immediate_reduce_into on the root: use immediate_reduce_into_root".into(),
            ));
        }
        (Some(_), false) => {
            return Err(Error::Arg(
                "immediate_reduce_into_root on a rank that is not the root".into(),
            ));
        }
    }
    let kind = send.kind();
    let t = c.coll_tag(tag::REDUCE);
    let mut acc = send.bytes().to_vec();
    let (cc, r) = (c.clone(), root.rank());
    let fut = Box::pin(async move {
        cc.reduce_binomial(&mut acc, kind, op, r, t).await?;
        Ok(if is_root { acc } else { Vec::new() })
    });
    Ok(Request::collective(c, fut, recv))
}

pub(super) fn gather<'a, S: Buffer + ?Sized>(
    root: &Process<'_>,
    send: &'a S,
    recv: Option<&'a mut [u8]>,
) -> Result<Request<'a>> {
    let c = root.communicator();
    c.world_rank(root.rank())?;
    if let Some(out) = &recv {
        same_len("gather", send.bytes().len() * c.size() as usize, out.len())?;
    }
    let t = c.coll_tag(tag::GATHER);
    let mine = send.bytes().to_vec();
    let (cc, r) = (c.clone(), root.rank());
    let fut =
        Box::pin(async move { Ok(cc.gather_binomial(&mine, r, t).await?.unwrap_or_default()) });
    Ok(Request::collective(c, fut, recv))
}

pub(super) fn gather_varcount<'a, T: Equivalence>(
    root: &Process<'_>,
    send: &'a [T],
    recv: Option<(&'a mut [T], &[usize])>,
) -> Result<Request<'a>> {
    let c = root.communicator();
    c.world_rank(root.rank())?;
    let mine = send.as_bytes().to_vec();
    let cc = c.clone();
    match recv {
        None => {
            let t = c.coll_tag(tag::GATHER);
            let r = root.rank();
            let fut = Box::pin(async move {
                cc.coll_send(r, t, &mine).await?;
                Ok(Vec::new())
            });
            Ok(Request::collective(c, fut, None))
        }
        Some((recv, counts)) => {
            c.check_counts(counts)?;
            same_len("gatherv", recv.len(), counts.iter().sum())?;
            let bounds = packed_bounds(counts, std::mem::size_of::<T>());
            same_len(
                "gatherv (own block)",
                mine.len(),
                bounds[c.rank() as usize].1,
            )?;
            let t = c.coll_tag(tag::GATHER);
            let mut out = vec![0u8; recv.as_bytes().len()];
            let fut = Box::pin(async move {
                cc.gatherv_linear(&mine, &mut out, &bounds, t).await?;
                Ok(out)
            });
            Ok(Request::collective(c, fut, Some(recv.as_mut_bytes())))
        }
    }
}

pub(super) fn scatter<'a>(
    root: &Process<'_>,
    send: Option<&'a [u8]>,
    recv: &'a mut [u8],
) -> Result<Request<'a>> {
    let c = root.communicator();
    c.world_rank(root.rank())?;
    if let Some(all) = send {
        same_len("scatter", recv.len() * c.size() as usize, all.len())?;
    }
    let t = c.coll_tag(tag::SCATTER);
    let all = send.map(<[u8]>::to_vec).unwrap_or_default();
    let mut out = vec![0u8; recv.len()];
    let (cc, r) = (c.clone(), root.rank());
    let fut = Box::pin(async move {
        cc.scatter_binomial(&all, &mut out, r, t).await?;
        Ok(out)
    });
    Ok(Request::collective(c, fut, Some(recv)))
}

pub(super) fn scatter_varcount<'a, T: Equivalence>(
    root: &Process<'_>,
    send: Option<(&'a [T], &[usize])>,
    recv: &'a mut [T],
) -> Result<Request<'a>> {
    let c = root.communicator();
    c.world_rank(root.rank())?;
    let mut out = vec![0u8; recv.as_bytes().len()];
    let cc = c.clone();
    match send {
        None => {
            let t = c.coll_tag(tag::SCATTER);
            let r = root.rank();
            let fut = Box::pin(async move {
                cc.coll_recv(r, t, &mut out).await?;
                Ok(out)
            });
            Ok(Request::collective(c, fut, Some(recv.as_mut_bytes())))
        }
        Some((send, counts)) => {
            c.check_counts(counts)?;
            same_len("scatterv", send.len(), counts.iter().sum())?;
            let bounds = packed_bounds(counts, std::mem::size_of::<T>());
            same_len(
                "scatterv (own block)",
                out.len(),
                bounds[c.rank() as usize].1,
            )?;
            let t = c.coll_tag(tag::SCATTER);
            let all = send.as_bytes().to_vec();
            let fut = Box::pin(async move {
                cc.scatterv_linear(&all, &mut out, &bounds, t).await?;
                Ok(out)
            });
            Ok(Request::collective(c, fut, Some(recv.as_mut_bytes())))
        }
    }
}
