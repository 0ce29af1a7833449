//! MPI over the gni transport on emulated Gemini nodes: the semantics suite, protocol choice
//! by size and by knob, and bad knobs.

use mpi::Universe;
use runtime::{Job, JobError, Nic};

fn job(ranks: u32) -> Job {
    Job::new(Nic::Gemini, ranks)
}

#[test]
fn a_message_of_every_protocol_arrives() {
    let sizes = [0usize, 8, 512, 513, 4097, 1 << 20];
    let out = job(2)
        .run(|u: Universe| {
            let w = u.world();
            for (i, &n) in sizes.iter().enumerate() {
                let data: Vec<u8> = (0..n).map(|k| (k * 7 + i) as u8).collect();
                if w.rank() == 0 {
                    w.process_at_rank(1)
                        .send_with_tag(&data[..], i as i32)
                        .unwrap();
                } else {
                    let (got, st) = w.process_at_rank(0).receive_vec::<u8>().unwrap();
                    assert_eq!(st.tag(), i as i32);
                    assert_eq!(got, data, "size {n}");
                }
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    let sender = &out[0];
    assert_eq!(sender.get("E0"), Some(&3), "{sender:?}");
    assert_eq!(sender.get("R0"), Some(&3), "{sender:?}");
    let receiver = &out[1];
    assert_eq!(receiver.get("fma"), Some(&1), "{receiver:?}");
    assert_eq!(receiver.get("bte"), Some(&2), "{receiver:?}");
}

#[test]
fn the_semantics_suite_passes_on_gemini() {
    for ranks in [1, 2, 3, 5, 8, 13, 17] {
        job(ranks)
            .run(|u: Universe| tests::mpi_semantics::run(&u.world()))
            .unwrap_or_else(|e| panic!("{ranks} ranks: {e}"));
    }
}

#[test]
fn the_vshort_knob_moves_the_eager_limit_and_bad_knobs_are_init_errors() {
    let stats = job(2)
        .env("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "64")
        .run(|u: Universe| {
            let w = u.world();
            for n in [64usize, 65] {
                if w.rank() == 0 {
                    w.process_at_rank(1).send(&vec![1u8; n][..]).unwrap();
                } else {
                    let (v, _) = w.process_at_rank(0).receive_vec::<u8>().unwrap();
                    assert_eq!(v.len(), n);
                }
            }
            u.with_transport(|t| t.stats())
        })
        .expect("job");
    assert_eq!(stats[0].get("E0"), Some(&1), "{:?}", stats[0]);
    assert_eq!(stats[0].get("R0"), Some(&1), "{:?}", stats[0]);
    for (var, value) in [
        ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "lots"),
        ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "20000"),
        ("MPICH_GNI_RDMA_THRESHOLD", "-1"),
    ] {
        match job(2).env(var, value).run(|_u: Universe| ()) {
            Err(JobError::Init { error, .. }) => {
                assert!(error.to_string().contains(var), "{error}");
            }
            other => panic!("{var}={value}: expected an init error, got {other:?}"),
        }
    }
}

#[test]
fn many_rendezvous_in_flight_arrive_intact() {
    // Sixteen 1 MiB messages in flight at once: sixteen BTE GETs on one channel, whose
    // completions must reach the right receives (a BTE channel retires its TXDs in order).
    let n = 1 << 20;
    let out = job(2)
        .run(|u: Universe| -> Result<(), String> {
            let w = u.world();
            for it in 0..3u8 {
                if w.rank() == 0 {
                    let bufs: Vec<Vec<u8>> = (0..16u8).map(|k| vec![k ^ it; n]).collect();
                    let reqs = bufs
                        .iter()
                        .map(|b| w.process_at_rank(1).immediate_send_with_tag(&b[..], 5))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| e.to_string())?;
                    mpi::request::wait_all(reqs).map_err(|e| e.to_string())?;
                } else {
                    let mut bufs = vec![vec![0u8; n]; 16];
                    mpi::scope(|s| -> Result<(), String> {
                        let reqs = bufs
                            .iter_mut()
                            .map(|b| {
                                w.process_at_rank(0).immediate_receive_into_with_tag(
                                    s,
                                    &mut b[..],
                                    5,
                                )
                            })
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| e.to_string())?;
                        mpi::request::wait_all(reqs).map_err(|e| e.to_string())?;
                        Ok(())
                    })?;
                    for (k, b) in bufs.iter().enumerate() {
                        if b.iter().any(|&x| x != k as u8 ^ it) {
                            return Err(format!("round {it}: message {k} corrupt"));
                        }
                    }
                }
            }
            Ok(())
        })
        .expect("job");
    assert!(out.iter().all(Result::is_ok), "{out:?}");
}
