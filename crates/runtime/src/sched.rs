//! Ranks as coroutines on the deterministic engine: every rank of a job is a stackful
//! coroutine (corosensei) and the whole job — engine, devices, drivers and ranks — runs on one
//! thread, as SimGrid runs the ranks of an MPI program, so a job of thousands of ranks fits in
//! one process and the same seed replays it bit for bit.
//!
//! Where a rank would wait (a poll loop of the user libraries or the transports, a PMI fence,
//! an MPI wait) it yields: the cluster's progress handles are wrapped ([`yielding_progress`])
//! so that a call to `progress()` from inside a rank suspends the rank instead of running the
//! engine. The scheduler
//!
//! 1. resumes the runnable ranks in rank order (a round); a rank runs until it yields again;
//! 2. when no rank is runnable (or after [`MAX_ROUNDS`] rounds in a row), runs the engine:
//!    the next event and every event within [`LOOKAHEAD`] of it, so virtual time advances
//!    only when no rank can make progress, and only as far as the next thing that happens
//!    (never straight to a far timer while a rank could still react);
//! 3. wakes only the ranks of the nodes whose NIC handled one of those events (and, on
//!    Gemini, whose driver had interrupt-handler work), the ranks of a node whose NIC another
//!    rank of the node wrote to, and the ranks in a PMI fence when a fence completed.
//!
//! A rank that wrote to its NIC may run again at once, a few times in a row
//! ([`SELF_SPINS`]), in case the write changed what it polls; after that it waits for the
//! NIC. No rank runnable and no event pending is a deadlock: the job ends with
//! [`JobError::Deadlock`] naming the waiting ranks. A rank that panics aborts the job
//! ([`JobError::Panicked`]): the other ranks are resumed one last time and unwind.
//!
//! While the job runs, the thread's clock ([`driver::clock`]) is the engine's virtual time, so
//! the transports' timeouts count virtual time; once the job is aborted that clock runs fast
//! (a second per read) so that every wait with a timeout in a rank's destructors ends.

#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{CoroutineResult, ScopedCoroutine, ScopedCoroutineRef};
use driver::clock;
use mpi::Universe;
use platform::{Deterministic, Progress, ProgressWrap, SimTime};
use pmi::Pmi;
use transport::Transport;

use crate::coop::{self, RankAborted, RankYielder, Resume, Suspend};
use crate::{InProcessPmi, Job, JobError, JobReport, Shared, panic_message};

/// Events within this much virtual time of the next one run in the same batch.
pub const LOOKAHEAD: Duration = Duration::from_nanos(50);
/// At most this many events per batch.
const MAX_BATCH: u32 = 4096;
/// Rounds of ranks in a row before the engine runs even though ranks are runnable (ranks of
/// one node waking each other by their writes cannot hold virtual time still).
pub const MAX_ROUNDS: u32 = 64;
/// Times in a row a rank that wrote to its NIC runs again without waiting for the NIC.
pub const SELF_SPINS: u8 = 2;
/// Rounds in a row that resume every waiting rank, when nothing else can happen, before the
/// job is declared deadlocked (see [`Scheduler::run`]). Generous: a rank that calls `test`
/// in a loop a few hundred times without waiting for anything needs one such round per call.
pub const MAX_PROBES: u32 = 1024;
/// Stack of each rank's coroutine (reserved, committed as it is touched).
pub const RANK_STACK: usize = 1 << 20;
/// Stack of the thread that runs the job (the coroutines of all ranks are nested on it).
const JOB_THREAD_STACK: usize = 256 << 20;

/// A progress wrapper for [`platform`] cluster builders: inside a rank coroutine,
/// `progress()` yields to the scheduler (and reports work done, so callers poll again at
/// once); elsewhere it is the wrapped handle.
pub fn yielding_progress() -> ProgressWrap {
    Arc::new(|_node, inner| Arc::new(YieldOnWait { inner }) as Arc<dyn Progress>)
}

struct YieldOnWait {
    inner: Arc<dyn Progress>,
}

impl Progress for YieldOnWait {
    fn progress(&self) -> bool {
        coop::suspend(Suspend::Poll) || self.inner.progress()
    }

    fn before_sleep(&self) -> bool {
        !coop::in_rank() && self.inner.before_sleep()
    }

    fn can_sleep(&self) -> bool {
        self.inner.can_sleep()
    }
}

/// What the scheduler needs of the machine.
pub(crate) struct Machine<'a> {
    /// The engine.
    pub engine: &'a Deterministic,
    /// The node of each engine device, by device id.
    pub node_of_device: Vec<usize>,
    /// The driver's interrupt-handler work of a node (Gemini), true if it did something.
    pub service: Option<&'a (dyn Fn(usize) -> bool + Sync)>,
}

/// How a rank's coroutine ended.
enum Outcome<R> {
    Done(Result<R, JobError>),
    Panicked(String),
    Aborted,
}

type Coro<'a, R> = ScopedCoroutine<'a, Resume, Suspend, Outcome<R>, DefaultStack>;
type CoroRef<'b, R> = ScopedCoroutineRef<'b, Resume, Suspend, Outcome<R>, DefaultStack>;

/// Run `f` as every rank of `job`, each a coroutine, all on one thread with `m`'s engine.
pub(crate) fn run_coroutines<R, T, M, F>(
    job: &Job,
    m: Machine<'_>,
    make: M,
    f: F,
) -> Result<JobReport<R>, JobError>
where
    R: Send,
    T: Transport + 'static,
    M: Fn(u32, Box<dyn Pmi>) -> mpi::Result<T> + Sync,
    F: Fn(Universe) -> R + Sync,
{
    let size = job.ranks();
    if size == 0 {
        return Err(JobError::Shape("a job needs at least one rank".into()));
    }
    let wall = Instant::now();
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("job".into())
            .stack_size(JOB_THREAD_STACK)
            .spawn_scoped(s, || run_on_this_thread(job, &m, &make, &f))
            .map_err(|e| JobError::Machine(format!("starting the job thread: {e}")))?
            .join()
            .unwrap_or_else(|p| {
                Err(JobError::Machine(format!(
                    "the scheduler failed: {}",
                    panic_message(&p)
                )))
            })
    })
    .map(|mut r| {
        r.wall = wall.elapsed();
        r
    })
}

fn run_on_this_thread<R, T, M, F>(
    job: &Job,
    m: &Machine<'_>,
    make: &M,
    f: &F,
) -> Result<JobReport<R>, JobError>
where
    T: Transport + 'static,
    M: Fn(u32, Box<dyn Pmi>) -> mpi::Result<T> + Sync,
    F: Fn(Universe) -> R + Sync,
{
    let size = job.ranks();
    let aborted = Arc::new(AtomicBool::new(false));
    let fast = Arc::new(AtomicU64::new(0));
    let _clock = {
        let (engine, aborted, fast) = (m.engine.clone(), Arc::clone(&aborted), Arc::clone(&fast));
        clock::install_virtual(Arc::new(move || {
            let extra = if aborted.load(Ordering::Relaxed) {
                fast.fetch_add(1_000_000_000_000, Ordering::Relaxed)
            } else {
                fast.load(Ordering::Relaxed)
            };
            SimTime(engine.now().as_ps().saturating_add(extra))
        }))
    };
    let shared = Shared::new();
    let mut coros = Vec::with_capacity(size as usize);
    for rank in 0..size {
        let stack = DefaultStack::new(RANK_STACK)
            .map_err(|e| JobError::Machine(format!("rank {rank}: no stack: {e}")))?;
        let shared = Arc::clone(&shared);
        let local = (job.ranks_per_node, rank % job.ranks_per_node);
        let body = move |y: &RankYielder, first: Resume| -> Outcome<R> {
            if first == Resume::Abort {
                return Outcome::Aborted;
            }
            let _entered = coop::enter(y);
            let r = catch_unwind(AssertUnwindSafe(|| {
                let pmi = InProcessPmi::new(Arc::clone(&shared), rank, size, local);
                let transport = make(rank, Box::new(pmi)).map_err(|error| {
                    shared.abort(&format!("rank {rank}: {error}"));
                    JobError::Init { rank, error }
                })?;
                Ok(f(Universe::new(Box::new(transport))))
            }));
            match r {
                Ok(r) => Outcome::Done(r),
                Err(p) if p.is::<RankAborted>() => Outcome::Aborted,
                Err(p) => Outcome::Panicked(panic_message(&p)),
            }
        };
        coros.push(Coro::with_stack(stack, body));
    }
    let mut sched = Scheduler {
        job,
        m,
        shared: &shared,
        aborted: &aborted,
        trace: 0xcbf2_9ce4_8422_2325,
        rounds: 0,
        batches: 0,
    };
    let (mut outcomes, deadlock, first_bad) = nest(coros, Vec::new(), &mut |refs| sched.run(refs));
    if let Some(e) = deadlock {
        return Err(e);
    }
    // The rank whose failure ended the job, if one did; else the first failure by rank.
    if let Some(r) = first_bad {
        match outcomes[r as usize].take() {
            Some(Outcome::Panicked(message)) => {
                return Err(JobError::Panicked { rank: r, message });
            }
            Some(Outcome::Done(Err(e))) => return Err(e),
            _ => {}
        }
    }
    let mut results = Vec::with_capacity(size as usize);
    for (rank, o) in outcomes.into_iter().enumerate() {
        match o {
            Some(Outcome::Done(Ok(v))) => results.push(v),
            Some(Outcome::Done(Err(e))) => return Err(e),
            Some(Outcome::Panicked(message)) => {
                return Err(JobError::Panicked {
                    rank: rank as u32,
                    message,
                });
            }
            Some(Outcome::Aborted) | None => {
                return Err(JobError::Machine(format!("rank {rank} did not finish")));
            }
        }
    }
    let end = m.engine.now();
    let trace = m.engine.trace_digest();
    let mut digest = crate::mix(0, trace);
    digest = crate::mix(digest, end.as_ps());
    digest = crate::mix(digest, sched.trace);
    digest = crate::mix(digest, u64::from(size));
    Ok(JobReport {
        results,
        wall: Duration::ZERO,
        virtual_time: Some(Duration::from_nanos(end.as_ps() / 1000)),
        digest: Some(digest),
        events: m.engine.counters().events,
        rounds: sched.rounds,
        fabric: Some(platform::Engine::fabric_counters(m.engine)),
        nic_faults: Some(platform::Engine::nic_fault_counters(m.engine)),
        packets_injected: 0,
    })
}

/// Hold every coroutine in its scope (one nested scope per rank) and call `run` with
/// references to all of them, in rank order.
fn nest<'b, R, O>(
    mut rest: Vec<Coro<'_, R>>,
    held: Vec<CoroRef<'b, R>>,
    run: &mut dyn FnMut(&mut [CoroRef<'_, R>]) -> O,
) -> O {
    match rest.pop() {
        None => {
            let mut held = held;
            held.reverse();
            run(&mut held)
        }
        Some(c) => c.scope(move |mut r| {
            let mut held: Vec<CoroRef<'_, R>> = held;
            held.push(r.as_mut());
            nest(rest, held, run)
        }),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Runnable,
    Poll,
    Pmi,
    Done,
}

struct Scheduler<'s, 'm> {
    job: &'s Job,
    m: &'s Machine<'m>,
    shared: &'s Shared,
    aborted: &'s AtomicBool,
    trace: u64,
    rounds: u64,
    batches: u64,
}

/// Every rank's outcome, the deadlock that ended the job if one did, and the rank whose
/// failure (panic, init error) ended it if one did.
type RunResult<R> = (Vec<Option<Outcome<R>>>, Option<JobError>, Option<u32>);

impl Scheduler<'_, '_> {
    fn node_of(&self, rank: u32) -> usize {
        (rank / self.job.ranks_per_node.max(1)) as usize
    }

    fn run<R>(&mut self, refs: &mut [CoroRef<'_, R>]) -> RunResult<R> {
        let n = refs.len();
        let nodes = self
            .m
            .node_of_device
            .iter()
            .copied()
            .max()
            .map_or(0, |x| x + 1);
        let nodes = nodes.max(self.node_of(n.saturating_sub(1) as u32) + 1);
        let mut state = vec![State::Runnable; n];
        let mut outcomes: Vec<Option<Outcome<R>>> = (0..n).map(|_| None).collect();
        let mut runnable: BTreeSet<u32> = (0..n as u32).collect();
        let mut node_waiters: Vec<Vec<u32>> = vec![Vec::new(); nodes];
        let mut pmi_waiters: Vec<u32> = Vec::new();
        let mut spins = vec![0u8; n];
        let mut quiet = vec![0u8; n];
        let mut probes = 0u32;
        let mut done = 0usize;
        let mut epoch = self.shared.epoch();
        let mut failure: Option<JobError> = None;
        let mut first_bad: Option<u32> = None;
        let mut idle_rounds = 0u32;
        let mut touched: Vec<usize> = Vec::new();
        let engine = self.m.engine;

        let wake = |node: usize,
                    node_waiters: &mut [Vec<u32>],
                    runnable: &mut BTreeSet<u32>,
                    state: &mut [State],
                    spins: &mut [u8],
                    quiet: &mut [u8]| {
            for r in node_waiters[node].drain(..) {
                state[r as usize] = State::Runnable;
                spins[r as usize] = 0;
                quiet[r as usize] = 0;
                runnable.insert(r);
            }
        };

        while done < n && failure.is_none() && first_bad.is_none() {
            if !runnable.is_empty() && idle_rounds < MAX_ROUNDS {
                idle_rounds += 1;
                self.rounds += 1;
                let round: Vec<u32> = std::mem::take(&mut runnable).into_iter().collect();
                for r in round {
                    let ri = r as usize;
                    let node = self.node_of(r);
                    let writes = engine.counters().mmio_writes;
                    let res = refs[ri].as_mut().resume(Resume::Go);
                    let mut own = engine.counters().mmio_writes != writes;
                    if let Some(svc) = self.m.service {
                        own |= svc(node);
                    }
                    if own {
                        wake(
                            node,
                            &mut node_waiters,
                            &mut runnable,
                            &mut state,
                            &mut spins,
                            &mut quiet,
                        );
                    }
                    let kind = match res {
                        CoroutineResult::Yield(Suspend::Poll) => {
                            // Run again at once after a write (a few times), or after the
                            // first quiet poll (a one-off progress call is no wait); wait
                            // for the NIC otherwise.
                            let again = if own {
                                spins[ri] = spins[ri].saturating_add(1);
                                spins[ri] <= SELF_SPINS
                            } else {
                                quiet[ri] = quiet[ri].saturating_add(1);
                                quiet[ri] <= 1
                            };
                            if again {
                                state[ri] = State::Runnable;
                                runnable.insert(r);
                            } else {
                                state[ri] = State::Poll;
                                node_waiters[node].push(r);
                            }
                            1
                        }
                        CoroutineResult::Yield(Suspend::Pmi) => {
                            state[ri] = State::Pmi;
                            pmi_waiters.push(r);
                            2
                        }
                        CoroutineResult::Return(o) => {
                            state[ri] = State::Done;
                            done += 1;
                            probes = 0;
                            if matches!(o, Outcome::Panicked(_) | Outcome::Done(Err(_))) {
                                first_bad = Some(r);
                            }
                            outcomes[ri] = Some(o);
                            3
                        }
                    };
                    self.trace = crate::mix(self.trace, (u64::from(r) << 2) | kind);
                    if first_bad.is_some() {
                        break;
                    }
                }
                let e = self.shared.epoch();
                if e != epoch {
                    epoch = e;
                    probes = 0;
                    for r in pmi_waiters.drain(..) {
                        state[r as usize] = State::Runnable;
                        runnable.insert(r);
                    }
                }
                continue;
            }
            // No rank can run (or ranks kept each other busy for too long): run the engine.
            idle_rounds = 0;
            let Some(t0) = engine.next_event_time() else {
                if !runnable.is_empty() {
                    continue;
                }
                // Nothing can happen unless a waiting rank was not really waiting (a one-off
                // progress call, a wait on something other than its NIC): resume every rank
                // that waits on its NIC. Rounds of that which change nothing (no event, no
                // rank done, no fence) end the job as a deadlock.
                let parked: usize = node_waiters.iter().map(Vec::len).sum();
                if parked > 0 && probes < MAX_PROBES {
                    probes += 1;
                    for node in 0..node_waiters.len() {
                        wake(
                            node,
                            &mut node_waiters,
                            &mut runnable,
                            &mut state,
                            &mut spins,
                            &mut quiet,
                        );
                    }
                    for &r in &runnable {
                        quiet[r as usize] = 1;
                    }
                    continue;
                }
                {
                    let waiting: Vec<u32> = (0..n as u32)
                        .filter(|&r| state[r as usize] != State::Done)
                        .collect();
                    let in_fence: Vec<u32> = waiting
                        .iter()
                        .copied()
                        .filter(|&r| state[r as usize] == State::Pmi)
                        .collect();
                    failure = Some(match self.shared.aborted() {
                        Some(why) => JobError::Aborted { why, waiting },
                        None => JobError::Deadlock {
                            waiting,
                            in_fence,
                            at: Duration::from_nanos(engine.now().as_ps() / 1000),
                        },
                    });
                }
                continue;
            };
            self.batches += 1;
            probes = 0;
            let until = SimTime(
                t0.as_ps()
                    .saturating_add(LOOKAHEAD.as_nanos() as u64 * 1000),
            );
            touched.clear();
            let mut k = 0;
            while k < MAX_BATCH && engine.next_event_time().is_some_and(|t| t <= until) {
                if let Some(d) = engine.step_event()
                    && let Some(&node) = self.m.node_of_device.get(d.0 as usize)
                {
                    touched.push(node);
                }
                k += 1;
            }
            touched.sort_unstable();
            touched.dedup();
            for &node in &touched {
                if let Some(svc) = self.m.service {
                    let mut i = 0;
                    while i < 64 && svc(node) {
                        i += 1;
                    }
                }
                wake(
                    node,
                    &mut node_waiters,
                    &mut runnable,
                    &mut state,
                    &mut spins,
                    &mut quiet,
                );
            }
            self.trace = crate::mix(self.trace, engine.now().as_ps());
        }

        let why = match (&failure, first_bad) {
            (Some(e), _) => Some(e.to_string()),
            (None, Some(r)) => Some(format!("rank {r} failed")),
            (None, None) => None,
        };
        if let Some(why) = why {
            // End the job: abort its PMI, let timeouts expire, unwind every rank left.
            self.shared.abort(&why);
            self.aborted.store(true, Ordering::Relaxed);
            for (ri, c) in refs.iter_mut().enumerate() {
                let mut tries = 0;
                while state[ri] != State::Done && tries < 16 {
                    tries += 1;
                    if let CoroutineResult::Return(o) = c.as_mut().resume(Resume::Abort) {
                        state[ri] = State::Done;
                        outcomes[ri] = Some(o);
                    }
                }
            }
        }
        (outcomes, failure, first_bad)
    }
}
