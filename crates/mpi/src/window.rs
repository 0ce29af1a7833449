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
use crate::universe::wait_op;
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

mod lock_word;

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
            Err(e) => Err(crate::universe::fatal(&self.comm.core, e)),
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

    /// One step of the lock protocol on `target`'s lock word; the old word.
    fn lock_word(&mut self, target: CommRank, s: lock_word::Step) -> Result<u64> {
        let (w, _) = self.check(target, 0, 0)?;
        let a = Atomic {
            op: s.op,
            ty: AmoType::U64,
            operand: s.operand.to_le_bytes().to_vec(),
            compare: s.compare.to_le_bytes().to_vec(),
            fetch: true,
        };
        let id = self
            .comm
            .core
            .borrow_mut()
            .transport
            .atomic(self.win, w, 0, &a)?;
        match wait_op(&self.comm.core, id)? {
            Completion::Fetched(b) => value_from_bytes(&b),
            c => Err(Error::Rma(format!("a lock atomic completed as {c:?}"))),
        }
    }

    /// `MPI_Win_lock`: start a passive-target epoch on `target`.
    pub fn lock(&mut self, kind: LockType, target: CommRank) -> Result<()> {
        if self.locks.iter().any(|(t, _)| *t == target) {
            return Err(Error::Rma(format!("rank {target} is already locked")));
        }
        let mut w = crate::universe::Waiter::new();
        loop {
            let old = self.lock_word(target, lock_word::attempt(kind))?;
            if lock_word::took(kind, old) {
                self.locks.push((target, kind));
                return Ok(());
            }
            if let Some(s) = lock_word::back_out(kind) {
                self.lock_word(target, s)?;
            }
            w.tick(&self.comm.core, &"a window lock")?;
            self.comm.core.borrow_mut().transport.progress()?;
        }
    }

    /// `MPI_Win_unlock`: complete every operation to `target` and end the epoch.
    pub fn unlock(&mut self, target: CommRank) -> Result<()> {
        let i = self
            .locks
            .iter()
            .position(|(t, _)| *t == target)
            .ok_or_else(|| Error::Rma(format!("rank {target} is not locked")))?;
        self.flush(target)?;
        let (_, kind) = self.locks.remove(i);
        self.lock_word(target, lock_word::release(kind))?;
        Ok(())
    }

    /// Wait until this rank's counter word at `off` reaches `n`, then take `n` off it (with
    /// a NIC atomic on this rank, so that increments from peers are never lost).
    fn consume(&mut self, off: usize, n: usize, what: &str) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.take_when(off, |v| v >= n as u64, n as u64, what)
    }

    /// Wait until this rank's word at `off` satisfies `ready`, then take `sub` off it (a NIC
    /// atomic on this rank).
    fn take_when(
        &mut self,
        off: usize,
        ready: impl Fn(u64) -> bool,
        sub: u64,
        what: &str,
    ) -> Result<()> {
        let me = self.comm.rank();
        let mut w = crate::universe::Waiter::new();
        loop {
            let mut b = [0u8; 8];
            self.comm
                .core
                .borrow_mut()
                .transport
                .win_read(self.win, off, &mut b)?;
            if ready(u64::from_le_bytes(b)) {
                break;
            }
            w.tick(&self.comm.core, &what)?;
            self.comm.core.borrow_mut().transport.progress()?;
        }
        self.counter_add(me, off, sub.wrapping_neg())
    }

    /// What a post from `rank` adds to its origin's posts word: with at most 64 ranks a bit
    /// of its own (a start then waits for the posts of exactly its group's members), else
    /// one (a start waits for as many posts as its group has members).
    fn post_mark(&self, rank: CommRank) -> u64 {
        if self.comm.size() <= 64 { 1 << rank } else { 1 }
    }

    /// Add `v` to the counter word at `off` of `target` (a NIC atomic, complete on return).
    fn counter_add(&mut self, target: CommRank, off: usize, v: u64) -> Result<()> {
        let (w, _) = self.check(target, 0, 0)?;
        let a = Atomic {
            op: AmoOp::Sum,
            ty: AmoType::U64,
            operand: v.to_le_bytes().to_vec(),
            compare: Vec::new(),
            fetch: true,
        };
        let id = self
            .comm
            .core
            .borrow_mut()
            .transport
            .atomic(self.win, w, off, &a)?;
        wait_op(&self.comm.core, id).map(|_| ())
    }

    /// `MPI_Win_post`: expose this rank's part to `origins` (ranks of the window's
    /// communicator) until [`wait`](Self::wait). Each origin is told with a NIC atomic on a
    /// counter in its window header, which its [`start`](Self::start) waits for.
    pub fn post(&mut self, origins: &[CommRank]) -> Result<()> {
        if self.exposure.is_some() {
            return Err(Error::Rma(
                "an exposure epoch is already open (MPI_Win_post)".into(),
            ));
        }
        for &o in origins {
            self.check(o, 0, 0)?;
        }
        for &o in origins {
            let mark = self.post_mark(self.comm.rank());
            self.counter_add(o, POSTS, mark)?;
        }
        self.exposure = Some(origins.len());
        Ok(())
    }

    /// `MPI_Win_start`: open an access epoch to `targets`, once each of them has posted.
    pub fn start(&mut self, targets: &[CommRank]) -> Result<()> {
        if self.access.is_some() {
            return Err(Error::Rma(
                "an access epoch is already open (MPI_Win_start)".into(),
            ));
        }
        for &t in targets {
            self.check(t, 0, 0)?;
        }
        let what = "MPI_Win_start (the targets' posts)";
        if self.comm.size() <= 64 {
            // A target posts to an origin again only after the origin completed the epoch
            // that consumed its previous post, so each target's bit is set at most once.
            let mask = targets.iter().fold(0u64, |m, &t| m | self.post_mark(t));
            self.take_when(POSTS, |v| v & mask == mask, mask, what)?;
        } else {
            self.consume(POSTS, targets.len(), what)?;
        }
        self.access = Some(targets.to_vec());
        Ok(())
    }

    /// `MPI_Win_complete`: complete every operation of the access epoch at its target, then
    /// tell each target (a NIC atomic on a counter in its window header).
    pub fn complete(&mut self) -> Result<()> {
        let targets = self
            .access
            .take()
            .ok_or_else(|| Error::Rma("no access epoch is open (MPI_Win_start)".into()))?;
        for &t in &targets {
            self.flush(t)?;
        }
        for &t in &targets {
            self.counter_add(t, COMPLETES, 1)?;
        }
        Ok(())
    }

    /// `MPI_Win_wait`: end the exposure epoch once every origin has completed.
    pub fn wait(&mut self) -> Result<()> {
        let n = self
            .exposure
            .ok_or_else(|| Error::Rma("no exposure epoch is open (MPI_Win_post)".into()))?;
        self.consume(COMPLETES, n, "MPI_Win_wait (the origins' completes)")?;
        self.exposure = None;
        Ok(())
    }

    /// `MPI_Win_test`: end the exposure epoch if every origin has completed (`true`), else
    /// leave it open (`false`) without waiting.
    pub fn test(&mut self) -> Result<bool> {
        let n = self
            .exposure
            .ok_or_else(|| Error::Rma("no exposure epoch is open (MPI_Win_post)".into()))?;
        self.comm.core.borrow_mut().transport.progress()?;
        let mut b = [0u8; 8];
        self.comm
            .core
            .borrow_mut()
            .transport
            .win_read(self.win, COMPLETES, &mut b)?;
        if u64::from_le_bytes(b) < n as u64 {
            return Ok(false);
        }
        self.consume(COMPLETES, n, "MPI_Win_test (the origins' completes)")?;
        self.exposure = None;
        Ok(true)
    }

    /// `MPI_Win_lock_all`: a shared lock on every rank.
    pub fn lock_all(&mut self) -> Result<()> {
        for r in 0..self.comm.size() {
            self.lock(LockType::Shared, r)?;
        }
        Ok(())
    }

    /// `MPI_Win_unlock_all`.
    pub fn unlock_all(&mut self) -> Result<()> {
        for r in 0..self.comm.size() {
            self.unlock(r)?;
        }
        Ok(())
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

/// Byte windows whose elements are described by a [`Kind`] at each call, as the C bindings
/// use them (displacements in bytes).
impl Window<u8> {
    fn check_kind(
        &self,
        kind: Kind,
        target: CommRank,
        disp: usize,
        len: usize,
    ) -> Result<(usize, usize)> {
        let size = kind.size();
        if size == 0 || !len.is_multiple_of(size) {
            return Err(Error::Count(format!(
                "{len} bytes are not a whole number of {size}-byte elements"
            )));
        }
        let (_, off) = self.check(target, disp, len)?;
        Ok((off, size))
    }

    /// One 64-bit NIC atomic on the word at `off` of `target`'s part; the old word.
    fn word_atomic(
        &mut self,
        target: CommRank,
        off: usize,
        op: AmoOp,
        operand: u64,
        compare: u64,
    ) -> Result<u64> {
        let id = self.atomic_typed(
            target,
            off,
            op,
            AmoType::U64,
            &operand.to_le_bytes(),
            &compare.to_le_bytes(),
            true,
        )?;
        match wait_op(&self.comm.core, id)? {
            Completion::Fetched(b) => value_from_bytes(&b),
            c => Err(Error::Rma(format!("a word atomic completed as {c:?}"))),
        }
    }

    /// An element operation the NIC cannot do (an element type or operation its atomics lack),
    /// done atomically all the same: a compare-and-swap loop on the 64-bit word holding the
    /// element, as MPI libraries do over NICs with few atomics. `update` maps the element's
    /// old bytes to its new bytes (`None`: leave it); returns the old bytes.
    fn element_by_cas(
        &mut self,
        target: CommRank,
        off: usize,
        size: usize,
        update: impl Fn(&[u8]) -> Result<Option<Vec<u8>>>,
    ) -> Result<Vec<u8>> {
        let word = off & !7;
        let shift = off - word;
        if shift + size > 8 || word + 8 > HEADER + self.len {
            return Err(Error::Op(format!(
                "no NIC atomic for this element, and a {size}-byte element at offset {} does not \
                 sit in an 8-byte word of the window (a compare-and-swap loop needs one)",
                off - HEADER
            )));
        }
        let mut old = self.word_atomic(target, word, AmoOp::Sum, 0, 0)?;
        let mut w = crate::universe::Waiter::new();
        loop {
            let bytes = old.to_le_bytes();
            let cur = bytes[shift..shift + size].to_vec();
            let Some(new_part) = update(&cur)? else {
                return Ok(cur);
            };
            let mut nb = bytes;
            nb[shift..shift + size].copy_from_slice(&new_part);
            let new = u64::from_le_bytes(nb);
            let prev = self.word_atomic(target, word, AmoOp::CompareSwap, new, old)?;
            if prev == old {
                return Ok(cur);
            }
            old = prev;
            w.tick(&self.comm.core, &"a compare-and-swap loop")?;
        }
    }

    /// `acc op x` for one element of `kind` (the new target value of an accumulate).
    fn combine(kind: Kind, op: AccumulateOp, acc: &[u8], x: &[u8]) -> Result<Option<Vec<u8>>> {
        match op {
            AccumulateOp::NoOp => Ok(None),
            AccumulateOp::Replace => Ok(Some(x.to_vec())),
            AccumulateOp::Op(o) => {
                let mut a = acc.to_vec();
                crate::op::apply(o, kind, &mut a, x)?;
                Ok(Some(a))
            }
        }
    }

    /// One element of an accumulate as a NIC atomic, in flight, when the NIC has the
    /// operation on elements of `kind` (`None` when it has not).
    fn native(
        &mut self,
        kind: Kind,
        target: CommRank,
        off: usize,
        op: AccumulateOp,
        x: &[u8],
        fetch: bool,
    ) -> Result<Option<OpId>> {
        let Ok((ty, aop)) = amo_type(kind).and_then(|ty| Ok((ty, op.amo()?))) else {
            return Ok(None);
        };
        match self.atomic_typed(target, off, aop, ty, x, &[], fetch) {
            Ok(id) => Ok(Some(id)),
            Err(Error::Op(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Elements the NIC has no atomic for, each `(offset, operand)` of `kind`, updated with
    /// compare-and-swap on the 64-bit words holding them, every word in flight at once: one
    /// fetch of each word, then one compare-and-swap of each (all elements of a word in one),
    /// repeated for the words another writer changed meanwhile. Each word's update is
    /// atomic, so each element's is. The old bytes of each element, in order.
    fn elements_by_cas(
        &mut self,
        kind: Kind,
        target: CommRank,
        op: AccumulateOp,
        elems: &[(usize, &[u8])],
    ) -> Result<Vec<Vec<u8>>> {
        let size = kind.size();
        // The words, in order of first use, and which elements each holds.
        let mut words: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, &(off, _)) in elems.iter().enumerate() {
            let word = off & !7;
            if off - word + size > 8 || word + 8 > HEADER + self.len {
                return Err(Error::Op(format!(
                    "no NIC atomic for this element, and a {size}-byte element at offset {} does \
                     not sit in an 8-byte word of the window (a compare-and-swap loop needs one)",
                    off - HEADER
                )));
            }
            match words.iter_mut().find(|w| w.0 == word) {
                Some(w) => w.1.push(i),
                None => words.push((word, vec![i])),
            }
        }
        let fetch = |me: &mut Self, word: usize, o: AmoOp, new: u64, old: u64| {
            me.atomic_typed(
                target,
                word,
                o,
                AmoType::U64,
                &new.to_le_bytes(),
                &old.to_le_bytes(),
                true,
            )
        };
        let ids = words
            .iter()
            .map(|w| fetch(self, w.0, AmoOp::Sum, 0, 0))
            .collect::<Result<Vec<_>>>()?;
        let mut olds = ids
            .into_iter()
            .map(|id| self.fetched_word(id))
            .collect::<Result<Vec<u64>>>()?;
        let mut out = vec![Vec::new(); elems.len()];
        let mut todo: Vec<usize> = (0..words.len()).collect();
        let mut waiter = crate::universe::Waiter::new();
        loop {
            let mut tries = Vec::with_capacity(todo.len());
            for &k in &todo {
                let (word, members) = &words[k];
                let mut bytes = olds[k].to_le_bytes();
                for &i in members {
                    let (off, x) = elems[i];
                    let at = off - word;
                    let cur = bytes[at..at + size].to_vec();
                    if let Some(v) = Self::combine(kind, op, &cur, x)? {
                        bytes[at..at + size].copy_from_slice(&v);
                    }
                    out[i] = cur;
                }
                let new = u64::from_le_bytes(bytes);
                if new == olds[k] {
                    // Nothing changes (MPI_NO_OP, or an identity): the read was atomic.
                    continue;
                }
                tries.push((k, fetch(self, *word, AmoOp::CompareSwap, new, olds[k])?));
            }
            let mut again = Vec::new();
            for (k, id) in tries {
                let prev = self.fetched_word(id)?;
                if prev != olds[k] {
                    olds[k] = prev;
                    again.push(k);
                }
            }
            if again.is_empty() {
                return Ok(out);
            }
            todo = again;
            waiter.tick(&self.comm.core, &"a compare-and-swap loop")?;
        }
    }

    /// The old word a fetching 64-bit atomic returned.
    fn fetched_word(&mut self, id: OpId) -> Result<u64> {
        match wait_op(&self.comm.core, id)? {
            Completion::Fetched(b) => value_from_bytes(&b),
            c => Err(Error::Rma(format!("a word atomic completed as {c:?}"))),
        }
    }

    /// `MPI_Accumulate` of `data` (elements of `kind`) at byte `disp` of `target`'s part;
    /// complete at the next synchronization. Operations and element types the NIC's atomics
    /// lack run as compare-and-swap loops on the elements' words, all words in flight at
    /// once (complete when this returns).
    pub fn accumulate_kind(
        &mut self,
        kind: Kind,
        data: &[u8],
        target: CommRank,
        disp: usize,
        op: AccumulateOp,
    ) -> Result<()> {
        let (off, size) = self.check_kind(kind, target, disp, data.len())?;
        let mut rest = Vec::new();
        for (i, x) in data.chunks_exact(size).enumerate() {
            let at = off + i * size;
            match self.native(kind, target, at, op, x, false)? {
                Some(id) => self.issued(target, id, ATOMIC_STAGING),
                None => rest.push((at, x)),
            }
        }
        if !rest.is_empty() {
            self.elements_by_cas(kind, target, op, &rest)?;
        }
        Ok(())
    }

    /// `MPI_Get_accumulate` / `MPI_Fetch_and_op`: the old elements (elements of `kind`), then
    /// `op` applied with `data`.
    pub fn get_accumulate_kind(
        &mut self,
        kind: Kind,
        data: &[u8],
        target: CommRank,
        disp: usize,
        op: AccumulateOp,
    ) -> Result<Vec<u8>> {
        let (off, size) = self.check_kind(kind, target, disp, data.len())?;
        let mut elems = Vec::with_capacity(data.len() / size);
        let mut rest = Vec::new();
        for (i, x) in data.chunks_exact(size).enumerate() {
            let at = off + i * size;
            let e = self.native(kind, target, at, op, x, true)?;
            if e.is_none() {
                rest.push((at, x));
            }
            elems.push(e);
        }
        let mut by_cas = if rest.is_empty() {
            Vec::new()
        } else {
            self.elements_by_cas(kind, target, op, &rest)?
        }
        .into_iter();
        let mut out = Vec::with_capacity(data.len());
        for e in elems {
            match e {
                None => out.extend(by_cas.next().unwrap_or_default()),
                Some(id) => match wait_op(&self.comm.core, id)? {
                    Completion::Fetched(b) => out.extend_from_slice(&b[..size.min(b.len())]),
                    c => return Err(Error::Rma(format!("a fetching atomic completed as {c:?}"))),
                },
            }
        }
        Ok(out)
    }

    /// `MPI_Compare_and_swap` on one element of `kind`: store `value` if the target equals
    /// `compare`; the old value. Element types the NIC's atomics lack run as a
    /// compare-and-swap loop on the element's 64-bit word.
    pub fn compare_and_swap_kind(
        &mut self,
        kind: Kind,
        value: &[u8],
        compare: &[u8],
        target: CommRank,
        disp: usize,
    ) -> Result<Vec<u8>> {
        let (off, size) = self.check_kind(kind, target, disp, value.len())?;
        if value.len() != size || compare.len() != size {
            return Err(Error::Count("compare-and-swap takes one element".into()));
        }
        if let Ok(ty) = amo_type(kind) {
            match self.atomic_typed(target, off, AmoOp::CompareSwap, ty, value, compare, true) {
                Ok(id) => {
                    return match wait_op(&self.comm.core, id)? {
                        Completion::Fetched(b) => Ok(b[..size.min(b.len())].to_vec()),
                        c => Err(Error::Rma(format!("a compare-and-swap completed as {c:?}"))),
                    };
                }
                Err(Error::Op(_)) => {}
                Err(e) => return Err(e),
            }
        }
        self.element_by_cas(target, off, size, |cur| {
            Ok((cur == compare).then(|| value.to_vec()))
        })
    }

    /// Where this rank's part of the window lives in this process, when it is this process's
    /// memory (the emulated node's RAM is): the NIC reads and writes these bytes, and a program
    /// may load and store them directly (MPI's unified memory model) instead of through
    /// [`local_read_bytes`](Self::local_read_bytes) / [`local_write`](Window::local_write).
    /// Valid for [`len`](Window::len) bytes until the window is dropped; 64-byte aligned.
    pub fn local_memory(&self) -> Option<*mut u8> {
        let base = self.comm.core.borrow_mut().transport.win_memory(self.win)?;
        Some(base.wrapping_add(HEADER))
    }

    /// Read `out.len()` bytes of this rank's part at byte `disp` (a local load).
    pub fn local_read_bytes(&self, disp: usize, out: &mut [u8]) -> Result<()> {
        let me = self.comm.rank();
        let (_, off) = self.check(me, disp, out.len())?;
        self.comm
            .core
            .borrow_mut()
            .transport
            .win_read(self.win, off, out)
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
