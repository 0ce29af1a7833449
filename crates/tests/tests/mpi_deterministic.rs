//! MPI jobs on the deterministic engine, where the ranks run as coroutines on one thread: the
//! semantics suite on both NICs (Cassini in both match modes), replay (same seed, same
//! digest), a deadlock that ends with an error naming the waiting ranks, and a panicking rank.

use mpi::{Source, Universe};
use platform::EngineKind;
use runtime::{Job, JobError, Nic};

fn det(nic: Nic, ranks: u32, seed: u64) -> Job {
    Job::new(nic, ranks).engine(EngineKind::Deterministic { seed })
}

const SIZES: [u32; 4] = [1, 2, 3, 5];

#[test]
fn the_semantics_suite_passes_as_coroutines_on_gemini() {
    for ranks in SIZES {
        det(Nic::Gemini, ranks, 7)
            .run(|u: Universe| tests::mpi_semantics::run(&u.world()))
            .unwrap_or_else(|e| panic!("{ranks} ranks: {e}"));
    }
}

#[test]
fn the_semantics_suite_passes_as_coroutines_on_cassini_hardware_matching() {
    for ranks in SIZES {
        det(Nic::Cassini, ranks, 7)
            .env("FI_CXI_RX_MATCH_MODE", "hardware")
            .run(|u: Universe| tests::mpi_semantics::run(&u.world()))
            .unwrap_or_else(|e| panic!("{ranks} ranks: {e}"));
    }
}

#[test]
fn the_semantics_suite_passes_as_coroutines_on_cassini_software_matching() {
    for ranks in SIZES {
        det(Nic::Cassini, ranks, 7)
            .env("FI_CXI_RX_MATCH_MODE", "software")
            .run(|u: Universe| tests::mpi_semantics::run(&u.world()))
            .unwrap_or_else(|e| panic!("{ranks} ranks: {e}"));
    }
}

/// A small job: allreduce, then a ring exchange; every rank returns what it computed.
fn ring(u: Universe) -> (u64, u64) {
    use mpi::SystemOperation;
    let w = u.world();
    let (rank, size) = (w.rank(), w.size());
    let mut sum = 0u64;
    w.all_reduce_into(&(rank as u64 + 1), &mut sum, SystemOperation::sum())
        .expect("allreduce");
    let right = (rank + 1) % size;
    let left = (rank + size - 1) % size;
    let mut got = 0u64;
    w.process_at_rank(right)
        .send(&(rank as u64 * 10))
        .expect("send");
    w.process_at_rank(left)
        .receive_into(&mut got)
        .expect("receive");
    (sum, got)
}

#[test]
fn the_same_seed_replays_the_same_job() {
    for nic in [Nic::Cassini, Nic::Gemini] {
        let a = det(nic, 4, 11).run_with_digest(ring).expect("first run");
        let b = det(nic, 4, 11).run_with_digest(ring).expect("second run");
        assert_eq!(a.results, b.results);
        assert_eq!(a.results[0], (10, 30));
        assert!(a.digest.is_some(), "{nic:?}: no digest");
        assert_eq!(a.digest, b.digest, "{nic:?}: same seed, different digest");
        assert_eq!(a.virtual_time, b.virtual_time);
        assert!(a.virtual_time.is_some_and(|t| !t.is_zero()));
        let c = det(nic, 4, 12).run_with_digest(ring).expect("other seed");
        assert_eq!(c.results, a.results);
    }
}

#[test]
fn ranks_left_waiting_by_an_aborted_job_end_it_with_the_abort_not_a_deadlock() {
    // Rank 0 aborts (as a fatal network error does) and then waits like rank 1: nothing can
    // run, but the job's end is the abort and its reason.
    for nic in [Nic::Cassini, Nic::Gemini] {
        let r = det(nic, 2, 3).run(|u: Universe| {
            let w = u.world();
            if w.rank() == 0 {
                u.abort("status REQUEST_TIMEOUT");
            }
            let mut x = 0u32;
            w.process_at_rank(1 - w.rank())
                .receive_into(&mut x)
                .map(|_| x)
        });
        match r {
            Err(JobError::Aborted { why, waiting }) => {
                assert_eq!(why, "rank 0: status REQUEST_TIMEOUT", "{nic:?}");
                assert_eq!(waiting, vec![0, 1], "{nic:?}");
            }
            other => panic!("{nic:?}: expected the abort, got {other:?}"),
        }
    }
}

#[test]
fn two_ranks_that_both_receive_first_end_in_a_deadlock_error() {
    for nic in [Nic::Cassini, Nic::Gemini] {
        let r = det(nic, 2, 3).run(|u: Universe| {
            let w = u.world();
            let peer = 1 - w.rank();
            let mut x = 0u32;
            w.process_at_rank(peer).receive_into(&mut x).map(|_| x)
        });
        match r {
            Err(JobError::Deadlock { waiting, .. }) => {
                assert_eq!(waiting, vec![0, 1], "{nic:?}");
            }
            other => panic!("{nic:?}: expected a deadlock, got {other:?}"),
        }
        let msg = det(nic, 2, 3)
            .run(|u: Universe| {
                let w = u.world();
                let mut x = 0u32;
                w.process_at_rank(1 - w.rank())
                    .receive_into(&mut x)
                    .map(|_| x)
            })
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("deadlock: ranks 0, 1 wait"), "{msg}");
    }
}

#[test]
fn a_panicking_rank_aborts_the_job() {
    for nic in [Nic::Cassini, Nic::Gemini] {
        let r = det(nic, 3, 5).run(|u: Universe| {
            let w = u.world();
            if w.rank() == 1 {
                panic!("rank one gives up");
            }
            // The others wait for it in a barrier.
            w.barrier().map(|_| w.rank())
        });
        match r {
            Err(JobError::Panicked { rank, message }) => {
                assert_eq!(rank, 1, "{nic:?}");
                assert!(message.contains("gives up"), "{message}");
            }
            other => panic!("{nic:?}: expected a panic, got {other:?}"),
        }
    }
}
