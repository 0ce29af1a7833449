//! The MPI semantics suite: one program, run by every rank of a job, that checks
//! point-to-point semantics (order, wildcards, probes, truncation, cancel, synchronous sends,
//! derived datatypes), communicator management, and every collective — blocking, and
//! immediate ones all in flight at once, completed out of order — against a sequential
//! reference, on the world and on split communicators. It runs unchanged on any transport
//! (the loopback reference, cxi, gni); a failed check panics with what differed.

use mpi::collective::Root;
use mpi::topology::CommunicatorRelation;
use mpi::{Error, LockType, Request, SimpleCommunicator, Source, SystemOperation, Vector};

/// Run the whole suite on `world`.
pub fn run(world: &SimpleCommunicator) {
    point_to_point(world);
    communicators(world);
    collectives(world);
    immediate_collectives(world);
    immediate_barrier_waits_for_the_last_rank(world);
    blocked_ranks_advance_pending_collectives(world);
    // The same collectives on split communicators (odd / even ranks, reversed order).
    let half = world
        .split_by_color_with_key(Some(world.rank() % 2), -world.rank())
        .expect("split")
        .expect("every rank has a color");
    collectives(&half);
    immediate_collectives(&half);
    immediate_barrier_waits_for_the_last_rank(&half);
    blocked_ranks_advance_pending_collectives(&half);
    rma(world);
    rma(&half);
    world.barrier().expect("final barrier");
}

/// A value every rank can compute for (rank, index).
fn v(rank: i32, i: usize) -> i64 {
    i64::from(rank) * 1000 + i as i64
}

fn point_to_point(w: &SimpleCommunicator) {
    let (r, p) = (w.rank(), w.size());
    if p < 2 {
        return;
    }
    // Non-overtaking: 40 messages with varied tags from 0 to 1, received with ANY_TAG.
    if r == 0 {
        for i in 0..40 {
            let msg: Vec<i64> = vec![i; (i as usize % 5) * 100];
            w.process_at_rank(1)
                .send_with_tag(&msg[..], (i % 3) as i32)
                .expect("send");
        }
    } else if r == 1 {
        for i in 0..40 {
            let (m, st) = w.process_at_rank(0).receive_vec::<i64>().expect("recv");
            assert_eq!(st.tag(), (i % 3) as i32, "message {i} out of order");
            assert_eq!(m.len(), (i as usize % 5) * 100);
            assert!(m.iter().all(|&x| x == i));
        }
    }
    w.barrier().expect("barrier");

    // ANY_SOURCE: everyone sends its rank to 0.
    if r == 0 {
        let mut seen = vec![false; p as usize];
        for _ in 1..p {
            let (x, st) = w.any_process().receive_with_tag::<i32>(7).expect("recv");
            assert_eq!(x, st.source_rank());
            assert!(!seen[x as usize], "rank {x} twice");
            seen[x as usize] = true;
        }
    } else {
        w.process_at_rank(0).send_with_tag(&r, 7).expect("send");
    }
    w.barrier().expect("barrier");

    // Probe, matched probe, truncation, cancel, synchronous send — between 0 and 1.
    if r == 1 {
        let data: Vec<u32> = (0..37).collect();
        w.process_at_rank(0)
            .send_with_tag(&data[..], 11)
            .expect("send");
        w.process_at_rank(0)
            .send_with_tag(&data[..], 12)
            .expect("send");
        w.process_at_rank(0)
            .send_with_tag(&[1u64, 2], 13)
            .expect("send");
        w.process_at_rank(0)
            .synchronous_send_with_tag(&5u8, 14)
            .expect("ssend");
    } else if r == 0 {
        let st = w.process_at_rank(1).probe_with_tag(11).expect("probe");
        assert_eq!((st.source_rank(), st.tag(), st.count::<u32>()), (1, 11, 37));
        let (msg, st) = w.any_process().matched_probe_with_tag(12).expect("mprobe");
        assert_eq!(st.count::<u32>(), 37);
        let (v12, _) = msg.matched_receive_vec::<u32>().expect("mrecv");
        let (v11, _) = w
            .process_at_rank(1)
            .receive_vec_with_tag::<u32>(11)
            .expect("recv");
        assert_eq!(v11, v12);
        assert_eq!(v11, (0..37).collect::<Vec<u32>>());
        let mut small = 0u64;
        match w.process_at_rank(1).receive_into_with_tag(&mut small, 13) {
            Err(Error::Truncate {
                len: 16,
                capacity: 8,
            }) => {}
            other => panic!("expected a truncation error, got {other:?}"),
        }
        let (b, _) = w
            .process_at_rank(1)
            .receive_with_tag::<u8>(14)
            .expect("recv");
        assert_eq!(b, 5);
        let mut never = [0u8; 4];
        mpi::scope(|s| {
            let req = w
                .process_at_rank(1)
                .immediate_receive_into_with_tag(s, &mut never, 999)
                .expect("irecv");
            req.cancel().expect("cancel");
            let st = req.wait().expect("wait");
            assert!(st.is_cancelled());
        });
    }
    w.barrier().expect("barrier");

    // Immediate operations in a ring, and a derived vector type.
    let right = (r + 1) % p;
    let left = (r + p - 1) % p;
    let col = Vector::new(4, 1, 3);
    let matrix: Vec<f64> = (0..12).map(|i| f64::from(r) + i as f64).collect();
    let packed = col.pack(&matrix).expect("pack");
    let mut got = vec![0f64; 4];
    mpi::scope(|s| {
        let rreq = w
            .process_at_rank(left)
            .immediate_receive_into_with_tag(s, &mut got[..], 3)
            .expect("irecv");
        let sreq = w
            .process_at_rank(right)
            .immediate_send_with_tag(&packed[..], 3)
            .expect("isend");
        mpi::request::wait_all(vec![sreq, rreq]).expect("waitall");
    });
    let mut out = vec![-1f64; 12];
    col.unpack(&got, &mut out).expect("unpack");
    for k in 0..4 {
        assert_eq!(out[k * 3], f64::from(left) + (k * 3) as f64);
    }
    let mut sr = 0i32;
    w.sendrecv_into(&r, right, 4, &mut sr, Some(left), Some(4))
        .expect("sendrecv");
    assert_eq!(sr, left);
    w.barrier().expect("barrier");
}

fn communicators(w: &SimpleCommunicator) {
    let d = w.duplicate().expect("dup");
    assert_eq!(d.compare(w), CommunicatorRelation::Congruent);
    assert_eq!(w.compare(&w.clone()), CommunicatorRelation::Identical);
    // Traffic on the duplicate does not match receives on the original.
    if w.size() > 1 {
        if w.rank() == 0 {
            d.process_at_rank(1).send_with_tag(&1i32, 0).expect("send");
            w.process_at_rank(1).send_with_tag(&2i32, 0).expect("send");
        } else if w.rank() == 1 {
            let (a, _) = w
                .process_at_rank(0)
                .receive_with_tag::<i32>(0)
                .expect("recv");
            let (b, _) = d
                .process_at_rank(0)
                .receive_with_tag::<i32>(0)
                .expect("recv");
            assert_eq!((a, b), (2, 1));
        }
    }
    let none = w
        .split_by_color(if w.rank() == 0 { None } else { Some(1) })
        .expect("split");
    assert_eq!(none.is_none(), w.rank() == 0);
    if let Some(c) = none {
        assert_eq!(c.size(), w.size() - 1);
        assert_eq!(c.rank(), w.rank() - 1);
    }
    let g = w.group();
    assert_eq!(g.rank(), Some(w.rank()));
    let sub = g.include(&[0]).expect("incl");
    let c = w.split_by_subgroup(&sub).expect("create");
    assert_eq!(c.is_some(), w.rank() == 0);
}

/// Every collective against the sequential reference.
pub fn collectives(c: &SimpleCommunicator) {
    let (r, p) = (c.rank(), c.size());
    let pu = p as usize;
    c.barrier().expect("barrier");

    for &n in &[1usize, 3, 300, 70_000] {
        // Allreduce (recursive doubling below 64 KiB, ring above).
        let mine: Vec<i64> = (0..n).map(|i| v(r, i)).collect();
        let mut sum = vec![0i64; n];
        c.all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum())
            .expect("allreduce");
        for (i, s) in sum.iter().enumerate() {
            let want: i64 = (0..p).map(|q| v(q, i)).sum();
            assert_eq!(*s, want, "allreduce n={n} i={i} p={p}");
        }
        let mut mx = vec![0i64; n];
        c.all_reduce_into(&mine[..], &mut mx[..], SystemOperation::max())
            .expect("allreduce max");
        assert!(mx.iter().enumerate().all(|(i, &x)| x == v(p - 1, i)));

        for root in [0, p - 1] {
            // Bcast.
            let mut b: Vec<i64> = if r == root {
                (0..n).map(|i| v(root, i)).collect()
            } else {
                vec![0; n]
            };
            c.process_at_rank(root)
                .broadcast_into(&mut b[..])
                .expect("bcast");
            assert!(
                b.iter().enumerate().all(|(i, &x)| x == v(root, i)),
                "bcast n={n}"
            );
            // Reduce.
            let proc_ = c.process_at_rank(root);
            if r == root {
                let mut out = vec![0i64; n];
                proc_
                    .reduce_into_root(&mine[..], &mut out[..], SystemOperation::sum())
                    .expect("reduce");
                assert_eq!(out, sum, "reduce n={n}");
            } else {
                proc_
                    .reduce_into(&mine[..], SystemOperation::sum())
                    .expect("reduce");
            }
        }
    }
    // Long bcast (scatter + allgather when p >= 8).
    let n = (600 << 10) / 8;
    let mut b: Vec<i64> = if r == 0 {
        (0..n).map(|i| i as i64).collect()
    } else {
        vec![0; n]
    };
    c.process_at_rank(0)
        .broadcast_into(&mut b[..])
        .expect("long bcast");
    assert!(b.iter().enumerate().all(|(i, &x)| x == i as i64));

    // Gather / scatter (binomial) and their v forms.
    let root = p / 2;
    let mine = [r, r * 2];
    if r == root {
        let mut all = vec![0i32; 2 * pu];
        c.process_at_rank(root)
            .gather_into_root(&mine[..], &mut all[..])
            .expect("gather");
        for q in 0..p {
            assert_eq!(&all[2 * q as usize..2 * q as usize + 2], &[q, q * 2]);
        }
        let mut got = [0i32; 2];
        let src: Vec<i32> = (0..2 * p).collect();
        c.process_at_rank(root)
            .scatter_into_root(&src[..], &mut got[..])
            .expect("scatter");
        assert_eq!(got, [2 * r, 2 * r + 1]);
    } else {
        c.process_at_rank(root)
            .gather_into(&mine[..])
            .expect("gather");
        let mut got = [0i32; 2];
        c.process_at_rank(root)
            .scatter_into(&mut got[..])
            .expect("scatter");
        assert_eq!(got, [2 * r, 2 * r + 1]);
    }
    let counts: Vec<usize> = (0..pu).map(|q| q % 3 + 1).collect();
    let mine: Vec<i32> = vec![r; counts[r as usize]];
    let total: usize = counts.iter().sum();
    let expect: Vec<i32> = (0..p).flat_map(|q| vec![q; counts[q as usize]]).collect();
    if r == root {
        let mut all = vec![0i32; total];
        c.process_at_rank(root)
            .gather_varcount_into_root(&mine[..], &mut all[..], &counts)
            .expect("gatherv");
        assert_eq!(all, expect);
        let mut got = vec![0i32; counts[r as usize]];
        c.process_at_rank(root)
            .scatter_varcount_into_root(&expect[..], &counts, &mut got[..])
            .expect("scatterv");
        assert_eq!(got, mine);
    } else {
        c.process_at_rank(root)
            .gather_varcount_into(&mine[..])
            .expect("gatherv");
        let mut got = vec![0i32; counts[r as usize]];
        c.process_at_rank(root)
            .scatter_varcount_into(&mut got[..])
            .expect("scatterv");
        assert_eq!(got, mine);
    }

    // Allgather (Bruck small, ring large) and allgatherv.
    for &n in &[1usize, 12_000] {
        let mine: Vec<i64> = (0..n).map(|i| v(r, i)).collect();
        let mut all = vec![0i64; n * pu];
        c.all_gather_into(&mine[..], &mut all[..])
            .expect("allgather");
        for q in 0..pu {
            assert!(
                (0..n).all(|i| all[q * n + i] == v(q as i32, i)),
                "allgather n={n}"
            );
        }
    }
    let mut allv = vec![0i32; total];
    c.all_gather_varcount_into(&mine[..], &mut allv[..], &counts)
        .expect("allgatherv");
    assert_eq!(allv, expect);

    // Alltoall (Bruck for 8 B blocks with >= 8 ranks, pairwise otherwise) and alltoallv.
    for &n in &[1usize, 100] {
        let send: Vec<i64> = (0..pu * n).map(|k| v(r, k)).collect();
        let mut recv = vec![0i64; pu * n];
        c.all_to_all_into(&send[..], &mut recv[..])
            .expect("alltoall");
        for q in 0..pu {
            for i in 0..n {
                assert_eq!(recv[q * n + i], v(q as i32, r as usize * n + i), "alltoall");
            }
        }
    }
    // Rank r sends (r + q) % 3 elements to q.
    let scounts: Vec<usize> = (0..p).map(|q| ((r + q) % 3) as usize).collect();
    let rcounts: Vec<usize> = (0..p).map(|q| ((q + r) % 3) as usize).collect();
    let send: Vec<i32> = (0..p)
        .flat_map(|q| vec![r * 100 + q; scounts[q as usize]])
        .collect();
    let mut recv = vec![0i32; rcounts.iter().sum()];
    c.all_to_all_varcount_into(&send[..], &scounts, &mut recv[..], &rcounts)
        .expect("alltoallv");
    let want: Vec<i32> = (0..p)
        .flat_map(|q| vec![q * 100 + r; rcounts[q as usize]])
        .collect();
    assert_eq!(recv, want);

    // Reduce-scatter (block), scan, exscan.
    let send: Vec<i64> = (0..pu * 3).map(|k| v(r, k)).collect();
    let mut mine_rs = [0i64; 3];
    c.reduce_scatter_block_into(&send[..], &mut mine_rs[..], SystemOperation::sum())
        .expect("reduce_scatter_block");
    for (i, x) in mine_rs.iter().enumerate() {
        let k = r as usize * 3 + i;
        assert_eq!(*x, (0..p).map(|q| v(q, k)).sum::<i64>());
    }
    let mut sc = 0i64;
    c.scan_into(&i64::from(r + 1), &mut sc, SystemOperation::sum())
        .expect("scan");
    assert_eq!(sc, i64::from((r + 1) * (r + 2) / 2));
    let mut ex = -7i64;
    c.exclusive_scan_into(&i64::from(r + 1), &mut ex, SystemOperation::sum())
        .expect("exscan");
    assert_eq!(
        ex,
        if r == 0 {
            -7
        } else {
            i64::from(r * (r + 1) / 2)
        }
    );
    c.barrier().expect("barrier");
}

/// Complete `reqs` out of an order that differs from rank to rank: even ranks take them
/// with `wait_any` after rotating the list by their rank, odd ranks test them in reverse in
/// a loop; the last ones go through `test_all`.
fn complete_out_of_order(rank: i32, mut reqs: Vec<Request<'_>>) {
    let n = reqs.len();
    if n == 0 {
        return;
    }
    reqs.rotate_left(rank as usize % n);
    if rank % 2 == 0 {
        while reqs.len() > 2 {
            mpi::request::wait_any(&mut reqs)
                .expect("wait_any")
                .expect("a request");
        }
    } else {
        reqs.reverse();
        let mut slots: Vec<Option<Request<'_>>> = reqs.into_iter().map(Some).collect();
        let mut left = slots.len();
        while left > 2 {
            for slot in slots.iter_mut() {
                if let Some(r) = slot.take() {
                    match r.test().expect("test") {
                        Ok(_) => left -= 1,
                        Err(r) => *slot = Some(r),
                    }
                }
            }
        }
        reqs = slots.into_iter().flatten().collect();
    }
    while mpi::request::test_all(&mut reqs)
        .expect("test_all")
        .is_none()
    {}
}

/// Every immediate collective in flight at once (two allreduces of different lengths among
/// them, and long messages on the ring and scatter + allgather paths), beside immediate
/// point-to-point requests, a blocking bcast and a sendrecv issued while they are pending;
/// completed out of order, then checked against the sequential reference.
pub fn immediate_collectives(c: &SimpleCommunicator) {
    let (r, p) = (c.rank(), c.size());
    let pu = p as usize;
    let (root, groot) = (p - 1, p / 2);
    let right = (r + 1) % p;
    let left = (r + p - 1) % p;
    let sum = SystemOperation::sum();

    let ar_a: Vec<i64> = (0..3).map(|i| v(r, i)).collect();
    let ar_b: Vec<i64> = (0..5).map(|i| v(r, i) * 2).collect();
    let ar_long: Vec<i64> = (0..9000).map(|i| v(r, i)).collect();
    let (mut ar_a_out, mut ar_b_out, mut ar_long_out) =
        (vec![0i64; 3], vec![0i64; 5], vec![0i64; 9000]);
    let mut bc: Vec<i64> = (0..6)
        .map(|i| if r == root { v(root, i) } else { 0 })
        .collect();
    let long_n = (600 << 10) / 8;
    let mut bc_long: Vec<i64> = (0..long_n)
        .map(|i| if r == 0 { i as i64 } else { 0 })
        .collect();
    let mut red_out = vec![0i64; 3];
    let gmine = [r, r * 2];
    let mut gall = vec![0i32; 2 * pu];
    let counts: Vec<usize> = (0..pu).map(|q| q % 3 + 1).collect();
    let total: usize = counts.iter().sum();
    let vmine: Vec<i32> = vec![r; counts[r as usize]];
    let vexpect: Vec<i32> = (0..p).flat_map(|q| vec![q; counts[q as usize]]).collect();
    let mut gvall = vec![0i32; total];
    let ssrc: Vec<i32> = (0..2 * p).collect();
    let mut sgot = [0i32; 2];
    let mut svgot = vec![0i32; counts[r as usize]];
    let ag_mine = [v(r, 0), v(r, 1)];
    let mut ag_out = vec![0i64; 2 * pu];
    let ag_long: Vec<i64> = (0..12_000).map(|i| v(r, i)).collect();
    let mut ag_long_out = vec![0i64; 12_000 * pu];
    let mut agv_out = vec![0i32; total];
    let a2a_send: Vec<i64> = (0..pu).map(|k| v(r, k)).collect();
    let mut a2a_recv = vec![0i64; pu];
    let scounts: Vec<usize> = (0..p).map(|q| ((r + q) % 3) as usize).collect();
    let rcounts: Vec<usize> = (0..p).map(|q| ((q + r) % 3) as usize).collect();
    let a2av_send: Vec<i32> = (0..p)
        .flat_map(|q| vec![r * 100 + q; scounts[q as usize]])
        .collect();
    let mut a2av_recv = vec![0i32; rcounts.iter().sum()];
    let rs_send: Vec<i64> = (0..pu * 3).map(|k| v(r, k)).collect();
    let mut rsb_out = [0i64; 3];
    let rs_counts: Vec<usize> = (0..pu).map(|q| q % 2 + 1).collect();
    let rs_total: usize = rs_counts.iter().sum();
    let rs_send_v: Vec<i64> = (0..rs_total).map(|k| v(r, k)).collect();
    let mut rs_out = vec![0i64; rs_counts[r as usize]];
    let scan_in = i64::from(r + 1);
    let (mut sc, mut ex) = (0i64, -7i64);
    let mut p2p_got = -1i32;
    let mut blocking = vec![0i64; 7];
    if r == 0 {
        blocking = (0..7).map(|i| v(0, i) + 5).collect();
    }
    let mut sr = -1i32;

    mpi::scope(|s| {
        let at = |q| c.process_at_rank(q);
        let mut reqs: Vec<Request<'_>> = vec![
            c.immediate_barrier().expect("ibarrier"),
            c.immediate_all_reduce_into(s, &ar_a[..], &mut ar_a_out[..], sum)
                .expect("iallreduce"),
            at(root)
                .immediate_broadcast_into(s, &mut bc[..])
                .expect("ibcast"),
            c.immediate_all_reduce_into(s, &ar_b[..], &mut ar_b_out[..], SystemOperation::max())
                .expect("iallreduce max"),
            c.immediate_all_reduce_into(s, &ar_long[..], &mut ar_long_out[..], sum)
                .expect("iallreduce long"),
            at(0)
                .immediate_broadcast_into(s, &mut bc_long[..])
                .expect("ibcast long"),
        ];
        reqs.push(if r == 0 {
            at(0)
                .immediate_reduce_into_root(s, &ar_a[..], &mut red_out[..], sum)
                .expect("ireduce")
        } else {
            at(0)
                .immediate_reduce_into(s, &ar_a[..], sum)
                .expect("ireduce")
        });
        if r == groot {
            reqs.push(
                at(groot)
                    .immediate_gather_into_root(s, &gmine[..], &mut gall[..])
                    .expect("igather"),
            );
            reqs.push(
                at(groot)
                    .immediate_gather_varcount_into_root(s, &vmine[..], &mut gvall[..], &counts)
                    .expect("igatherv"),
            );
            reqs.push(
                at(groot)
                    .immediate_scatter_into_root(s, &ssrc[..], &mut sgot[..])
                    .expect("iscatter"),
            );
            reqs.push(
                at(groot)
                    .immediate_scatter_varcount_into_root(s, &vexpect[..], &counts, &mut svgot[..])
                    .expect("iscatterv"),
            );
        } else {
            reqs.push(
                at(groot)
                    .immediate_gather_into(s, &gmine[..])
                    .expect("igather"),
            );
            reqs.push(
                at(groot)
                    .immediate_gather_varcount_into(s, &vmine[..])
                    .expect("igatherv"),
            );
            reqs.push(
                at(groot)
                    .immediate_scatter_into(s, &mut sgot[..])
                    .expect("iscatter"),
            );
            reqs.push(
                at(groot)
                    .immediate_scatter_varcount_into(s, &mut svgot[..])
                    .expect("iscatterv"),
            );
        }
        reqs.push(
            at(left)
                .immediate_receive_into_with_tag(s, &mut p2p_got, 21)
                .expect("irecv"),
        );
        reqs.push(
            c.immediate_all_gather_into(s, &ag_mine[..], &mut ag_out[..])
                .expect("iallgather"),
        );
        reqs.push(
            c.immediate_all_gather_into(s, &ag_long[..], &mut ag_long_out[..])
                .expect("iallgather long"),
        );
        reqs.push(
            c.immediate_all_gather_varcount_into(s, &vmine[..], &mut agv_out[..], &counts)
                .expect("iallgatherv"),
        );
        reqs.push(
            c.immediate_all_to_all_into(s, &a2a_send[..], &mut a2a_recv[..])
                .expect("ialltoall"),
        );
        reqs.push(
            c.immediate_all_to_all_varcount_into(
                s,
                &a2av_send[..],
                &scounts,
                &mut a2av_recv[..],
                &rcounts,
            )
            .expect("ialltoallv"),
        );
        reqs.push(
            c.immediate_reduce_scatter_block_into(s, &rs_send[..], &mut rsb_out[..], sum)
                .expect("ireduce_scatter_block"),
        );
        reqs.push(
            c.immediate_reduce_scatter_into(s, &rs_send_v[..], &mut rs_out[..], &rs_counts, sum)
                .expect("ireduce_scatter"),
        );
        reqs.push(
            c.immediate_scan_into(s, &scan_in, &mut sc, sum)
                .expect("iscan"),
        );
        reqs.push(
            c.immediate_exclusive_scan_into(s, &scan_in, &mut ex, sum)
                .expect("iexscan"),
        );
        reqs.push(at(right).immediate_send_with_tag(&r, 21).expect("isend"));
        // A blocking collective and a sendrecv while all of the above are pending.
        at(0)
            .broadcast_into(&mut blocking[..])
            .expect("blocking bcast");
        c.sendrecv_into(&r, right, 22, &mut sr, Some(left), Some(22))
            .expect("sendrecv");
        complete_out_of_order(r, reqs);
    });

    assert_eq!(
        blocking,
        (0..7).map(|i| v(0, i) + 5).collect::<Vec<_>>(),
        "blocking bcast"
    );
    assert_eq!(sr, left, "sendrecv");
    assert_eq!(p2p_got, left, "immediate receive");
    for (i, x) in ar_a_out.iter().enumerate() {
        assert_eq!(
            *x,
            (0..p).map(|q| v(q, i)).sum::<i64>(),
            "iallreduce i={i} p={p}"
        );
    }
    assert_eq!(
        ar_b_out,
        (0..5).map(|i| v(p - 1, i) * 2).collect::<Vec<_>>(),
        "iallreduce max"
    );
    assert!(
        ar_long_out
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (0..p).map(|q| v(q, i)).sum::<i64>()),
        "iallreduce long"
    );
    assert_eq!(bc, (0..6).map(|i| v(root, i)).collect::<Vec<_>>(), "ibcast");
    assert!(
        bc_long.iter().enumerate().all(|(i, &x)| x == i as i64),
        "ibcast long"
    );
    if r == 0 {
        assert_eq!(red_out, ar_a_out, "ireduce");
    }
    if r == groot {
        for q in 0..p {
            assert_eq!(
                &gall[2 * q as usize..2 * q as usize + 2],
                &[q, q * 2],
                "igather"
            );
        }
        assert_eq!(gvall, vexpect, "igatherv");
    }
    assert_eq!(sgot, [2 * r, 2 * r + 1], "iscatter");
    assert_eq!(svgot, vmine, "iscatterv");
    for q in 0..pu {
        assert_eq!(
            &ag_out[2 * q..2 * q + 2],
            &[v(q as i32, 0), v(q as i32, 1)],
            "iallgather"
        );
        assert!(
            (0..12_000).all(|i| ag_long_out[q * 12_000 + i] == v(q as i32, i)),
            "iallgather long"
        );
        assert_eq!(a2a_recv[q], v(q as i32, r as usize), "ialltoall");
    }
    assert_eq!(agv_out, vexpect, "iallgatherv");
    let want: Vec<i32> = (0..p)
        .flat_map(|q| vec![q * 100 + r; rcounts[q as usize]])
        .collect();
    assert_eq!(a2av_recv, want, "ialltoallv");
    for (i, x) in rsb_out.iter().enumerate() {
        let k = r as usize * 3 + i;
        assert_eq!(
            *x,
            (0..p).map(|q| v(q, k)).sum::<i64>(),
            "ireduce_scatter_block"
        );
    }
    let off: usize = rs_counts[..r as usize].iter().sum();
    for (i, x) in rs_out.iter().enumerate() {
        assert_eq!(
            *x,
            (0..p).map(|q| v(q, off + i)).sum::<i64>(),
            "ireduce_scatter"
        );
    }
    assert_eq!(sc, i64::from((r + 1) * (r + 2) / 2), "iscan");
    assert_eq!(
        ex,
        if r == 0 {
            -7
        } else {
            i64::from(r * (r + 1) / 2)
        },
        "iexscan"
    );

    // A request dropped before completion frees its collective (MPI_Request_free): it still
    // runs to its end, advanced by later calls, without disturbing the next collective.
    let (mut freed, mut next, tenfold) = (0i64, 0i64, scan_in * 10);
    mpi::scope(|s| {
        drop(
            c.immediate_all_reduce_into(s, &scan_in, &mut freed, sum)
                .expect("iallreduce"),
        );
        c.immediate_all_reduce_into(s, &tenfold, &mut next, sum)
            .expect("iallreduce")
            .wait()
            .expect("wait");
    });
    assert_eq!(
        next,
        i64::from(10 * p * (p + 1) / 2),
        "iallreduce after a freed one"
    );
    c.barrier().expect("barrier");
}

/// An immediate barrier does not complete before the last rank entered it: every rank but 0
/// enters, tests its request repeatedly and finds it incomplete, then tells rank 0, which
/// enters only once it heard from everyone (so the order is fixed by messages, not timing).
pub fn immediate_barrier_waits_for_the_last_rank(c: &SimpleCommunicator) {
    let (r, p) = (c.rank(), c.size());
    if r == 0 {
        for _ in 1..p {
            c.any_process().receive_with_tag::<i32>(31).expect("recv");
        }
        c.immediate_barrier()
            .expect("ibarrier")
            .wait()
            .expect("wait");
    } else {
        let mut req = c.immediate_barrier().expect("ibarrier");
        for _ in 0..200 {
            req = match req.test().expect("test") {
                Ok(_) => panic!("rank {r}: the immediate barrier completed before rank 0 entered"),
                Err(req) => req,
            };
        }
        c.process_at_rank(0).send_with_tag(&r, 31).expect("send");
        req.wait().expect("wait");
    }
}

/// MPI's progress rule: a rank blocked in another call still advances its pending immediate
/// collectives. Every rank but 0 starts an immediate barrier and blocks in a receive from
/// rank 0, which sends only once its own barrier completed; with 3 ranks or more that takes
/// later rounds of the others' barriers, made while they are blocked in the receive.
pub fn blocked_ranks_advance_pending_collectives(c: &SimpleCommunicator) {
    let (r, p) = (c.rank(), c.size());
    if r == 0 {
        c.immediate_barrier()
            .expect("ibarrier")
            .wait()
            .expect("wait");
        for q in 1..p {
            c.process_at_rank(q).send_with_tag(&q, 32).expect("send");
        }
    } else {
        let req = c.immediate_barrier().expect("ibarrier");
        let (x, _) = c
            .process_at_rank(0)
            .receive_with_tag::<i32>(32)
            .expect("recv");
        assert_eq!(x, r);
        req.wait().expect("wait");
    }
}

/// One-sided communication: fence epochs with put, get and accumulate; fetch-and-op and
/// compare-and-swap; exclusive and shared passive-target locks; errors for bad accesses.
pub fn rma(c: &SimpleCommunicator) {
    let (r, p) = (c.rank(), c.size());
    let pu = p as usize;
    let mut win = c.window_allocate::<i64>(pu + 5).expect("window");
    assert_eq!(
        win.local().expect("local"),
        vec![0; pu + 5],
        "a new window is zeroed"
    );

    // Fence epoch: put my rank into slot r of my right neighbour; accumulate into rank 0.
    win.fence().expect("fence");
    let right = (r + 1) % p;
    win.put(&[i64::from(r) + 100], right, r as usize)
        .expect("put");
    win.accumulate(&[i64::from(r), 1], 0, pu, SystemOperation::sum())
        .expect("accumulate");
    win.fence().expect("fence");
    let local = win.local().expect("local");
    let left = (r + p - 1) % p;
    assert_eq!(local[left as usize], i64::from(left) + 100, "put landed");
    if r == 0 {
        assert_eq!(local[pu], i64::from(p * (p - 1) / 2), "accumulated ranks");
        assert_eq!(local[pu + 1], i64::from(p), "accumulated ones");
    }
    let got = win.get(right, 0, pu).expect("get");
    assert_eq!(got[r as usize], i64::from(r) + 100, "get sees my put");
    win.fence().expect("fence");

    // Fetch-and-op: every rank takes a distinct ticket from rank 0.
    let ticket = win
        .fetch_and_op(1, 0, pu + 2, SystemOperation::sum())
        .expect("fetch_and_op");
    let mut all = vec![0i64; pu];
    c.all_gather_into(&ticket, &mut all[..]).expect("allgather");
    all.sort_unstable();
    assert_eq!(all, (0..i64::from(p)).collect::<Vec<_>>(), "tickets");
    // Compare-and-swap: exactly one rank wins the empty slot.
    let old = win
        .compare_and_swap(i64::from(r) + 1, 0, 0, pu + 3)
        .expect("cas");
    let mut olds = vec![0i64; pu];
    c.all_gather_into(&old, &mut olds[..]).expect("allgather");
    assert_eq!(
        olds.iter().filter(|&&o| o == 0).count(),
        1,
        "one CAS winner"
    );
    win.fence().expect("fence");

    // Exclusive locks serialize read-modify-write: the counter ends at p.
    win.lock(LockType::Exclusive, 0).expect("lock");
    let v = win.get(0, pu + 4, 1).expect("get")[0];
    win.put(&[v + 1], 0, pu + 4).expect("put");
    win.unlock(0).expect("unlock");
    c.barrier().expect("barrier");
    win.lock_all().expect("lock_all");
    let counter = win.get(0, pu + 4, 1).expect("get")[0];
    let fetched = win.fetch(0, pu + 4).expect("atomic read");
    win.unlock_all().expect("unlock_all");
    assert_eq!(
        counter,
        i64::from(p),
        "exclusive epochs were not serialized"
    );
    assert_eq!(fetched, counter);
    c.barrier().expect("barrier");

    // Bad accesses are errors, not crashes.
    assert!(matches!(win.put(&[1], 0, pu + 5), Err(Error::Rma(_))));
    assert!(matches!(win.put(&[1], p, 0), Err(Error::Rank { .. })));
    assert!(matches!(
        win.accumulate(&[1], 0, 0, SystemOperation::product()),
        Err(Error::Op(_))
    ));
    assert!(matches!(win.unlock(0), Err(Error::Rma(_))));
    win.free().expect("free");
}
