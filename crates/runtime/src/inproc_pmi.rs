//! PMI for ranks that live in one process: a shared key-value space and a fence that every
//! rank of the job joins. A rank that fails aborts the job's fences, so no rank waits forever
//! for one that is gone.
//!
//! A rank that runs as a coroutine (deterministic engine) does not block in a fence: it
//! yields to the scheduler, which resumes it once the PMI state changed ([`Shared::epoch`]).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use pmi::Pmi;
use pmi::{Error, Result};

use crate::coop::{self, Suspend};

#[derive(Default)]
struct State {
    /// Committed values, by (rank, key).
    kvs: HashMap<(u32, String), Vec<u8>>,
    /// Ranks in the current fence, and how many fences completed.
    arrived: u32,
    generation: u64,
    /// Set when a rank failed: fences return an error.
    aborted: Option<String>,
    /// Bumped when a fence completes or the job is aborted.
    epoch: u64,
}

/// The job-wide side, shared by every rank's [`InProcessPmi`].
#[derive(Default)]
pub struct Shared {
    state: Mutex<State>,
    cond: Condvar,
}

impl Shared {
    /// A new key-value space.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Abort the job: every fence, now and later, fails with `why`.
    pub fn abort(&self, why: &str) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.aborted.is_none() {
            st.aborted = Some(why.to_string());
            st.epoch += 1;
        }
        self.cond.notify_all();
    }

    /// Changes whenever a fence completes or the job is aborted: a scheduler resumes the
    /// ranks waiting in a fence when it moved.
    pub fn epoch(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .epoch
    }

    /// Why the job was aborted, if it was.
    pub fn aborted(&self) -> Option<String> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .aborted
            .clone()
    }
}

/// One rank's PMI handle.
pub struct InProcessPmi {
    shared: Arc<Shared>,
    rank: u32,
    size: u32,
    local: (u32, u32),
    pending: Vec<(String, Vec<u8>)>,
}

impl InProcessPmi {
    /// The handle of `rank` of `size`, the `local.1`-th of `local.0` ranks on its node.
    pub fn new(shared: Arc<Shared>, rank: u32, size: u32, local: (u32, u32)) -> Self {
        InProcessPmi {
            shared,
            rank,
            size,
            local,
            pending: Vec::new(),
        }
    }
}

impl Pmi for InProcessPmi {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn local(&self) -> (u32, u32) {
        self.local
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.pending.push((key.to_string(), value.to_vec()));
        Ok(())
    }

    fn fence(&mut self) -> Result<()> {
        let mut st = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (k, v) in self.pending.drain(..) {
            st.kvs.insert((self.rank, k), v);
        }
        if let Some(why) = &st.aborted {
            return Err(Error::Failed(format!("PMI fence: job aborted: {why}")));
        }
        let generation = st.generation;
        st.arrived += 1;
        if st.arrived == self.size {
            st.arrived = 0;
            st.generation += 1;
            st.epoch += 1;
            self.shared.cond.notify_all();
            return Ok(());
        }
        while st.generation == generation {
            if let Some(why) = &st.aborted {
                return Err(Error::Failed(format!("PMI fence: job aborted: {why}")));
            }
            if coop::in_rank() {
                // A coroutine: let the other ranks run instead of blocking the thread.
                drop(st);
                if !coop::suspend(Suspend::Pmi) {
                    return Err(Error::Failed(
                        "PMI fence: the rank is unwinding".to_string(),
                    ));
                }
                st = self
                    .shared
                    .state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            st = self
                .shared
                .cond
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
        Ok(())
    }

    fn abort(&self, why: &str) {
        self.shared.abort(&format!("rank {}: {why}", self.rank));
    }

    fn aborted(&self) -> Option<String> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .aborted
            .clone()
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<Vec<u8>> {
        let st = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        st.kvs
            .get(&(rank, key.to_string()))
            .cloned()
            .ok_or_else(|| Error::Failed(format!("PMI: rank {rank} published no {key:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_seen_after_the_fence_and_abort_releases_waiters() {
        let shared = Shared::new();
        std::thread::scope(|s| {
            for r in 0..3u32 {
                let shared = Arc::clone(&shared);
                s.spawn(move || {
                    let mut p = InProcessPmi::new(shared, r, 3, (3, r));
                    p.put("addr", &[r as u8; 2]).unwrap();
                    p.fence().unwrap();
                    for peer in 0..3 {
                        assert_eq!(p.get(peer, "addr").unwrap(), vec![peer as u8; 2]);
                    }
                    assert!(p.get(0, "nope").is_err());
                });
            }
        });
        let waiter = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || InProcessPmi::new(shared, 0, 2, (2, 0)).fence())
        };
        shared.abort("rank 1 failed");
        assert!(waiter.join().unwrap().is_err());
    }
}
