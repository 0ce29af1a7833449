//! A rank whose program fails ends the job (`Job::try_run`): its peer, waiting for a message
//! the failed rank will never send, ends with the job instead of waiting forever, and the
//! job's error is the failed rank's, not what its peer then saw. On both NICs and both
//! engines.

use mpi::Source;
use platform::EngineKind;
use runtime::{Job, JobError, Nic};

fn one_rank_fails(job: Job) -> JobError {
    job.try_run(|u| {
        let w = u.world();
        if w.rank() == 1 {
            return Err("the program gave up".to_string());
        }
        // Never sent: only the abort can end this receive.
        let mut buf = [0u8; 8];
        w.process_at_rank(1)
            .receive_into(&mut buf[..])
            .map_err(|e| format!("receive: {e}"))?;
        Ok(())
    })
    .expect_err("a job with a failing rank")
}

#[test]
fn a_failing_rank_ends_the_job_with_its_own_error() {
    for nic in [Nic::Cassini, Nic::Gemini] {
        for engine in [EngineKind::Threaded, EngineKind::Deterministic { seed: 5 }] {
            let err = one_rank_fails(Job::new(nic, 2).engine(engine.clone()));
            let why = err.to_string();
            assert!(
                why.contains("rank 1: the program gave up"),
                "{nic:?} {engine:?}: {why}"
            );
            assert!(!why.contains("receive:"), "{nic:?} {engine:?}: {why}");
        }
    }
}

#[test]
fn a_job_without_failures_returns_every_rank_result() {
    let got = Job::new(Nic::Cassini, 3)
        .engine(EngineKind::Deterministic { seed: 2 })
        .try_run(|u| Ok::<_, String>(u.world().rank()))
        .expect("no rank fails");
    assert_eq!(got, [0, 1, 2]);
}
