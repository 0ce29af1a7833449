//! Synchronization of a window: passive target (lock, unlock, lock_all, unlock_all on the
//! lock word, [`super::lock_word`]) and general active target (post, start, complete, wait,
//! test on the two counting header words). Fence is in the parent: a flush and a barrier.

use super::*;

impl<T: Equivalence> Window<T> {
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
        let mut w = crate::progress::Waiter::new();
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
        let mut w = crate::progress::Waiter::new();
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
