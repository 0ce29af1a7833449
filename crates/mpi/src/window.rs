//! One-sided communication (MPI 4.1 ch. 12): windows of registered memory on every rank,
//! reached with NIC RDMA (put, get) and NIC atomics (accumulate, get_accumulate,
//! fetch_and_op, compare_and_swap), synchronized by fence or by passive-target locks.
//!
//! Nothing here is emulated with messages: every access is a transport RMA operation or NIC
//! atomic. Locks are a 64-bit word at the start of each rank's window, taken with NIC atomics
//! (exclusive: compare-and-swap 0 → writer bit, released by taking the bit away; shared:
//! fetch-add of one reader, backed out when a writer holds it; `lock_word`), as MPI libraries
//! over RDMA networks implement passive target.
//! General active target (post/start/complete/wait) keeps posts and completes in two more
//! header words, added to by the peers' NIC atomics: completes are counted; a post sets the
//! poster's bit (communicators of at most 64 ranks, so that a start waits for its own
//! group's posts) or counts one (larger ones).
//! Operations an NIC atomic cannot do (`MPI_PROD`, element types other than 32/64-bit
//! integers and floats) are `MPI_ERR_OP`.

use std::collections::HashMap;
use std::marker::PhantomData;

use zerocopy::IntoBytes;

use crate::communicator::{CommRank, SimpleCommunicator};
use crate::datatype::{Equivalence, Kind, value_from_bytes, vec_from_bytes};
use crate::op::SystemOperation;
use crate::progress::wait_op;
use transport::error::{Error, Result};
use transport::{AmoOp, AmoType, Atomic, Completion, OpId, WinId};

/// Bytes before the user's part of each rank's window: the lock word, then padding, so that
/// the user's part starts 64-byte aligned (window memory is page aligned) for a program that
/// works on it directly ([`Window::local_memory`]).
const HEADER: usize = 64;
/// At most this many bytes of puts and gets in flight per window (each holds a staging
/// buffer in the node's memory); beyond it the oldest operations are completed first, which
/// MPI allows (an operation may complete any time before its synchronization).
const IN_FLIGHT_BYTES: usize = 8 << 20;
/// What one NIC atomic in flight is counted as against [`IN_FLIGHT_BYTES`] (its staging
/// buffer, a page on cxi).
const ATOMIC_STAGING: usize = 4096;
/// Offset of the word holding the posts this rank received as an origin (PSCW; a bit per
/// poster, or a count: `post_mark`).
const POSTS: usize = 8;
/// Offset of the word counting the completes this rank received as a target (PSCW).
const COMPLETES: usize = 16;

mod bytes;
mod lock_word;
mod sync;

/// The kind of a passive-target lock (`MPI_LOCK_EXCLUSIVE`, `MPI_LOCK_SHARED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockType {
    /// One writer.
    Exclusive,
    /// Many readers.
    Shared,
}

/// A window of `T` elements on every rank of a communicator (`MPI_Win_allocate`).
pub struct Window<T: Equivalence> {
    comm: SimpleCommunicator,
    win: WinId,
    len: usize,
    /// Operations issued and not yet known complete, by target, oldest first, with the
    /// staging bytes each holds.
    pending: Vec<(CommRank, OpId, usize)>,
    /// Staging bytes of `pending`.
    in_flight: usize,
    /// Bytes of gets completed by a synchronization and not yet taken
    /// ([`take_get`](Window::take_get)).
    fetched: HashMap<OpId, Vec<u8>>,
    /// Locks held: (target, kind).
    locks: Vec<(CommRank, LockType)>,
    /// The targets of the access epoch opened by [`start`](Window::start).
    access: Option<Vec<CommRank>>,
    /// The number of origins of the exposure epoch opened by [`post`](Window::post).
    exposure: Option<usize>,
    _t: PhantomData<T>,
}

fn amo_type(kind: Kind) -> Result<AmoType> {
    Ok(match kind {
        Kind::I32 => AmoType::I32,
        Kind::U32 => AmoType::U32,
        Kind::I64 => AmoType::I64,
        Kind::U64 => AmoType::U64,
        Kind::F32 => AmoType::F32,
        Kind::F64 => AmoType::F64,
        k => {
            return Err(Error::Op(format!(
                "no NIC atomic on elements of {k:?} (32/64-bit integers and floats only)"
            )));
        }
    })
}

fn amo_op(op: SystemOperation) -> Result<AmoOp> {
    Ok(match op {
        SystemOperation::Sum => AmoOp::Sum,
        SystemOperation::Min => AmoOp::Min,
        SystemOperation::Max => AmoOp::Max,
        SystemOperation::BitwiseAnd => AmoOp::Band,
        SystemOperation::BitwiseOr => AmoOp::Bor,
        SystemOperation::BitwiseXor => AmoOp::Bxor,
        SystemOperation::LogicalAnd => AmoOp::Land,
        SystemOperation::LogicalOr => AmoOp::Lor,
        SystemOperation::LogicalXor => AmoOp::Lxor,
        SystemOperation::Product => {
            return Err(Error::Op("MPI_PROD is not a NIC atomic operation".into()));
        }
    })
}

impl SimpleCommunicator {
    /// Allocate a window of `count` zeroed elements on every rank (`MPI_Win_allocate`).
    /// Collective.
    pub fn window_allocate<T: Equivalence>(&self, count: usize) -> Result<Window<T>> {
        let bytes = count
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| b.checked_add(HEADER))
            .ok_or_else(|| Error::Count(format!("a window of {count} elements")))?;
        let (win, key) = self.core.borrow_mut().transport.win_create(bytes)?;
        // Keys may differ in length: exchange lengths, then the padded keys.
        let lens =
            vec_from_bytes::<u64>(&self.all_gather_bytes(&(key.len() as u64).to_le_bytes())?);
        let max = lens.iter().copied().max().unwrap_or(0) as usize;
        let mut padded = key.clone();
        padded.resize(max, 0);
        let all = self.all_gather_bytes(&padded)?;
        let world = self.world_size();
        let mut keys = vec![Vec::new(); world];
        for (r, len) in lens.iter().enumerate() {
            let w = self.world_rank(r as CommRank)? as usize;
            keys[w] = all[r * max..r * max + *len as usize].to_vec();
        }
        self.core.borrow_mut().transport.win_connect(win, keys)?;
        self.barrier()?;
        Ok(Window {
            comm: self.clone(),
            win,
            len: count,
            pending: Vec::new(),
            in_flight: 0,
            fetched: HashMap::new(),
            locks: Vec::new(),
            access: None,
            exposure: None,
            _t: PhantomData,
        })
    }

    fn world_size(&self) -> usize {
        self.core.borrow().transport.size() as usize
    }
}

impl<T: Equivalence> Window<T> {
    /// Elements per rank.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, target: CommRank, disp: usize, count: usize) -> Result<(u32, usize)> {
        let world = self.comm.world_rank(target)?;
        if disp.checked_add(count).is_none_or(|e| e > self.len) {
            return Err(Error::Rma(format!(
                "{count} elements at displacement {disp} outside a window of {}",
                self.len
            )));
        }
        Ok((world, HEADER + disp * std::mem::size_of::<T>()))
    }

    /// This rank's part of the window (a local load; synchronize first).
    pub fn local(&self) -> Result<Vec<T>> {
        let mut b = vec![0u8; self.len * std::mem::size_of::<T>()];
        self.comm
            .core
            .borrow_mut()
            .transport
            .win_read(self.win, HEADER, &mut b)?;
        Ok(vec_from_bytes(&b))
    }

    /// Store `data` into this rank's part at `disp` (a local store).
    pub fn local_write(&self, disp: usize, data: &[T]) -> Result<()> {
        let me = self.comm.rank();
        let (_, off) = self.check(me, disp, data.len())?;
        self.comm
            .core
            .borrow_mut()
            .transport
            .win_write(self.win, off, data.as_bytes())
    }

    /// `MPI_Put`: complete at the next synchronization (fence, flush, unlock).
    pub fn put(&mut self, data: &[T], target: CommRank, disp: usize) -> Result<()> {
        self.put_start(data, target, disp).map(|_| ())
    }

    /// `MPI_Rput`: a put whose completion can be tested on its own
    /// ([`put_done`](Self::put_done)); a synchronization completes it too.
    pub fn put_start(&mut self, data: &[T], target: CommRank, disp: usize) -> Result<PendingPut> {
        let (w, off) = self.check(target, disp, data.len())?;
        self.make_room(data.as_bytes().len())?;
        let op = self
            .comm
            .core
            .borrow_mut()
            .transport
            .put(self.win, w, off, data.as_bytes())?;
        self.issued(target, op, data.as_bytes().len());
        Ok(PendingPut { op })
    }

    /// Whether put `p` is complete at its target (tests once, without waiting).
    pub fn put_done(&mut self, p: &PendingPut) -> Result<bool> {
        self.op_done(p.op)
    }

    /// Whether get `g` is complete (tests once, without waiting); its elements then wait in
    /// [`take_get`](Self::take_get).
    pub fn get_done(&mut self, g: &PendingGet) -> Result<bool> {
        self.op_done(g.op)
    }

    /// Test operation `op` once: complete when a synchronization completed it or the
    /// transport reports it done (a get's bytes then go to `fetched`).
    fn op_done(&mut self, op: OpId) -> Result<bool> {
        if self.fetched.contains_key(&op) {
            return Ok(true);
        }
        let Some(i) = self.pending.iter().position(|p| p.1 == op) else {
            return Ok(true);
        };
        let r = self.comm.core.borrow_mut().transport.test(op);
        match r {
            Ok(Some(c)) => {
                let (_, _, bytes) = self.pending.remove(i);
                self.in_flight -= bytes;
                self.finished(op, c);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(crate::progress::fatal(&self.comm.core, e)),
        }
    }

    /// `MPI_Get` (here completed before returning, which the standard allows).
    pub fn get(&mut self, target: CommRank, disp: usize, count: usize) -> Result<Vec<T>> {
        let g = self.get_start(target, disp, count)?;
        self.get_wait(g)
    }

    /// `MPI_Get` left in flight: its elements are there once a synchronization that completes
    /// operations to `target` (flush, unlock, fence) has returned ([`take_get`]
    /// (Self::take_get)), or when [`get_wait`](Self::get_wait) returns them. Many gets in
    /// flight overlap on the network, where [`get`](Self::get) waits for each.
    pub fn get_start(&mut self, target: CommRank, disp: usize, count: usize) -> Result<PendingGet> {
        let (w, off) = self.check(target, disp, count)?;
        let n = count * std::mem::size_of::<T>();
        self.make_room(n)?;
        let op = self
            .comm
            .core
            .borrow_mut()
            .transport
            .get(self.win, w, off, n)?;
        self.issued(target, op, n);
        Ok(PendingGet { op, target })
    }

    /// Whether get `g` is complete (its elements wait in [`take_get`](Self::take_get)).
    pub fn get_ready(&self, g: &PendingGet) -> bool {
        self.fetched.contains_key(&g.op)
    }

    /// The elements of get `g` if it is complete (a synchronization completed it), else
    /// `None` and `g` stays in flight.
    pub fn take_get(&mut self, g: &PendingGet) -> Option<Vec<T>> {
        self.fetched.remove(&g.op).map(|b| vec_from_bytes(&b))
    }

    /// The elements of get `g`, waiting for it if needed (`MPI_Wait` on an `MPI_Rget`).
    pub fn get_wait(&mut self, g: PendingGet) -> Result<Vec<T>> {
        if let Some(i) = self.pending.iter().position(|p| p.1 == g.op) {
            self.complete_pending(i)?;
        }
        self.take_get(&g)
            .ok_or_else(|| Error::Rma(format!("get {:?} has no data", g.op)))
    }

    /// Record an operation just issued.
    fn issued(&mut self, target: CommRank, op: OpId, bytes: usize) {
        self.pending.push((target, op, bytes));
        self.in_flight += bytes;
    }

    /// Complete the oldest operations until `bytes` more fit in [`IN_FLIGHT_BYTES`].
    fn make_room(&mut self, bytes: usize) -> Result<()> {
        while !self.pending.is_empty() && self.in_flight + bytes > IN_FLIGHT_BYTES {
            self.complete_pending(0)?;
        }
        Ok(())
    }

    /// Wait for `pending[i]` and take it out (a get's bytes go to `fetched`).
    fn complete_pending(&mut self, i: usize) -> Result<()> {
        let (_, op, bytes) = self.pending.remove(i);
        self.in_flight -= bytes;
        self.finished(op, wait_op(&self.comm.core, op)?);
        Ok(())
    }

    fn finished(&mut self, op: OpId, c: Completion) {
        if let Completion::Fetched(b) = c {
            self.fetched.insert(op, b);
        }
    }

    fn atomic(
        &mut self,
        target: CommRank,
        off: usize,
        op: AmoOp,
        operand: &[u8],
        compare: &[u8],
        fetch: bool,
    ) -> Result<OpId> {
        self.atomic_typed(target, off, op, amo_type(T::KIND)?, operand, compare, fetch)
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic_typed(
        &mut self,
        target: CommRank,
        off: usize,
        op: AmoOp,
        ty: AmoType,
        operand: &[u8],
        compare: &[u8],
        fetch: bool,
    ) -> Result<OpId> {
        let (w, _) = self.check(target, 0, 0)?;
        self.make_room(ATOMIC_STAGING)?;
        let a = Atomic {
            op,
            ty,
            operand: operand.to_vec(),
            compare: compare.to_vec(),
            fetch,
        };
        self.comm
            .core
            .borrow_mut()
            .transport
            .atomic(self.win, w, off, &a)
    }

    /// `MPI_Accumulate`: element-wise NIC atomics; complete at the next synchronization.
    pub fn accumulate(
        &mut self,
        data: &[T],
        target: CommRank,
        disp: usize,
        op: SystemOperation,
    ) -> Result<()> {
        let (_, off) = self.check(target, disp, data.len())?;
        let aop = amo_op(op)?;
        let size = std::mem::size_of::<T>();
        for (i, x) in data.iter().enumerate() {
            let id = self.atomic(target, off + i * size, aop, x.as_bytes(), &[], false)?;
            self.issued(target, id, ATOMIC_STAGING);
        }
        Ok(())
    }

    /// `MPI_Accumulate` with `MPI_REPLACE` (an atomic put).
    pub fn accumulate_replace(&mut self, data: &[T], target: CommRank, disp: usize) -> Result<()> {
        let (_, off) = self.check(target, disp, data.len())?;
        let size = std::mem::size_of::<T>();
        for (i, x) in data.iter().enumerate() {
            let id = self.atomic(
                target,
                off + i * size,
                AmoOp::Replace,
                x.as_bytes(),
                &[],
                false,
            )?;
            self.issued(target, id, ATOMIC_STAGING);
        }
        Ok(())
    }

    fn fetched(&self, op: OpId) -> Result<T> {
        match wait_op(&self.comm.core, op)? {
            Completion::Fetched(b) => value_from_bytes(&b),
            c => Err(Error::Rma(format!("a fetching atomic completed as {c:?}"))),
        }
    }

    /// `MPI_Get_accumulate`: the old elements, then `op` applied (element-wise atomics).
    pub fn get_accumulate(
        &mut self,
        data: &[T],
        target: CommRank,
        disp: usize,
        op: SystemOperation,
    ) -> Result<Vec<T>> {
        let (_, off) = self.check(target, disp, data.len())?;
        let aop = amo_op(op)?;
        let size = std::mem::size_of::<T>();
        let ops = data
            .iter()
            .enumerate()
            .map(|(i, x)| self.atomic(target, off + i * size, aop, x.as_bytes(), &[], true))
            .collect::<Result<Vec<_>>>()?;
        ops.into_iter().map(|op| self.fetched(op)).collect()
    }

    /// `MPI_Fetch_and_op`.
    pub fn fetch_and_op(
        &mut self,
        value: T,
        target: CommRank,
        disp: usize,
        op: SystemOperation,
    ) -> Result<T> {
        let (_, off) = self.check(target, disp, 1)?;
        let id = self.atomic(target, off, amo_op(op)?, value.as_bytes(), &[], true)?;
        self.fetched(id)
    }

    /// `MPI_Fetch_and_op` with `MPI_NO_OP`: an atomic read.
    pub fn fetch(&mut self, target: CommRank, disp: usize) -> Result<T> {
        let (_, off) = self.check(target, disp, 1)?;
        let zero = T::new_zeroed();
        let id = self.atomic(target, off, AmoOp::NoOp, zero.as_bytes(), &[], true)?;
        self.fetched(id)
    }

    /// `MPI_Compare_and_swap`: store `value` if the target equals `compare`; the old value.
    pub fn compare_and_swap(
        &mut self,
        value: T,
        compare: T,
        target: CommRank,
        disp: usize,
    ) -> Result<T> {
        let (_, off) = self.check(target, disp, 1)?;
        let id = self.atomic(
            target,
            off,
            AmoOp::CompareSwap,
            value.as_bytes(),
            compare.as_bytes(),
            true,
        )?;
        self.fetched(id)
    }

    /// `MPI_Win_flush`: every operation to `target` is complete at the target.
    pub fn flush(&mut self, target: CommRank) -> Result<()> {
        while let Some(i) = self.pending.iter().position(|p| p.0 == target) {
            self.complete_pending(i)?;
        }
        Ok(())
    }

    /// `MPI_Win_flush_all`.
    pub fn flush_all(&mut self) -> Result<()> {
        while !self.pending.is_empty() {
            self.complete_pending(0)?;
        }
        Ok(())
    }

    /// `MPI_Win_fence`: every operation of every rank since the last fence is complete.
    /// Collective.
    pub fn fence(&mut self) -> Result<()> {
        self.flush_all()?;
        self.comm.barrier()
    }
}

/// A put in flight ([`Window::put_start`]).
#[derive(Debug)]
pub struct PendingPut {
    op: OpId,
}

/// A get in flight ([`Window::get_start`]).
#[derive(Debug)]
pub struct PendingGet {
    op: OpId,
    target: CommRank,
}

impl PendingGet {
    /// The rank the get reads from.
    pub fn target(&self) -> CommRank {
        self.target
    }
}

/// What an accumulate does with each target element (`MPI_Accumulate`'s operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccumulateOp {
    /// A predefined reduction.
    Op(SystemOperation),
    /// `MPI_REPLACE`.
    Replace,
    /// `MPI_NO_OP` (an atomic read; `MPI_Get_accumulate` and `MPI_Fetch_and_op` only).
    NoOp,
}

impl AccumulateOp {
    fn amo(self) -> Result<AmoOp> {
        match self {
            AccumulateOp::Op(op) => amo_op(op),
            AccumulateOp::Replace => Ok(AmoOp::Replace),
            AccumulateOp::NoOp => Ok(AmoOp::NoOp),
        }
    }
}

impl<T: Equivalence> Window<T> {
    /// `MPI_Win_free`: complete this rank's operations, wait until every rank has, release
    /// the memory. Collective.
    pub fn free(mut self) -> Result<()> {
        self.flush_all()?;
        self.comm.barrier()
        // Drop releases the memory.
    }
}

impl<T: Equivalence> Drop for Window<T> {
    fn drop(&mut self) {
        // Complete what is in flight, then release this rank's memory. Without a prior
        // `free` (the collective form), peers still accessing this rank's part get errors.
        let _ = self.flush_all();
        let _ = self.comm.core.borrow_mut().transport.win_free(self.win);
    }
}
