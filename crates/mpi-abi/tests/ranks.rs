//! The C API with three ranks in one process: each rank of an in-process job (threads) gets
//! its own MPI state (`mpi_abi::testing::with_rank`) and calls the exported functions, so
//! the paths a singleton never takes — non-root sides of rooted collectives, rings, remote
//! window accesses, sub-communicators — run on both NICs.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::ptr::{null, null_mut};

use mpi_abi::consts::*;
use mpi_abi::testing::with_rank;
use mpi_abi::*;
use runtime::{Job, Nic};

const RANKS: u32 = 3;

fn ok(rc: c_int, what: &str) {
    assert_eq!(rc, MPI_SUCCESS, "{what} failed with class {rc}");
}

fn ptr<T>(x: &T) -> *const c_void {
    (x as *const T).cast()
}

fn mptr<T>(x: &mut T) -> *mut c_void {
    (x as *mut T).cast()
}

fn rank_body() {
    let (mut rank, mut size) = (-1, -1);
    // SAFETY: every pointer passed to the MPI calls in this function is to a live local of
    // the type and length the call's arguments say.
    unsafe {
        ok(MPI_Comm_rank(MPI_COMM_WORLD, &mut rank), "rank");
        ok(MPI_Comm_size(MPI_COMM_WORLD, &mut size), "size");
        ok(
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
            "errhandler",
        );
    }
    assert_eq!(size, RANKS as c_int);
    let (right, left) = ((rank + 1) % size, (rank + size - 1) % size);
    let p = size as usize;

    // A ring.
    let mut got: c_int = -1;
    let mut st = MpiStatus::default();
    // SAFETY: as above.
    unsafe {
        ok(
            MPI_Sendrecv(
                ptr(&rank),
                1,
                MPI_INT,
                right,
                3,
                mptr(&mut got),
                1,
                MPI_INT,
                left,
                3,
                MPI_COMM_WORLD,
                &mut st,
            ),
            "sendrecv",
        );
    }
    assert_eq!((got, st.source, st.tag), (left, left, 3));

    // Rooted collectives with roots other than this rank.
    let mine = [rank * 10, rank * 10 + 1];
    let mut all = vec![-1 as c_int; 2 * p];
    let mut sum = [0 as c_int; 2];
    let mut part = [0 as c_int; 2];
    let src: Vec<c_int> = (0..2 * p as c_int).map(|i| 100 + i).collect();
    // SAFETY: as above.
    unsafe {
        ok(
            MPI_Gather(
                ptr(&mine),
                2,
                MPI_INT,
                mptr(&mut all[0]),
                2,
                MPI_INT,
                1,
                MPI_COMM_WORLD,
            ),
            "gather",
        );
        ok(
            MPI_Reduce(
                ptr(&mine),
                mptr(&mut sum),
                2,
                MPI_INT,
                MPI_SUM,
                2,
                MPI_COMM_WORLD,
            ),
            "reduce",
        );
        ok(
            MPI_Scatter(
                ptr(&src[0]),
                2,
                MPI_INT,
                mptr(&mut part),
                2,
                MPI_INT,
                0,
                MPI_COMM_WORLD,
            ),
            "scatter",
        );
    }
    if rank == 1 {
        assert_eq!(all, vec![0, 1, 10, 11, 20, 21]);
    } else {
        assert!(all.iter().all(|&x| x == -1));
    }
    if rank == 2 {
        assert_eq!(sum, [30, 33]);
    }
    assert_eq!(part, [100 + 2 * rank, 101 + 2 * rank]);

    // Gatherv to rank 0: rank r sends r + 1 ints.
    let counts: Vec<c_int> = (1..=size).collect();
    let displs: Vec<c_int> = (0..size).map(|r| r * (r + 1) / 2).collect();
    let send: Vec<c_int> = (0..=rank).map(|i| rank * 100 + i).collect();
    let mut recv = vec![-1 as c_int; 6];
    // SAFETY: as above.
    unsafe {
        ok(
            MPI_Gatherv(
                ptr(&send[0]),
                rank + 1,
                MPI_INT,
                mptr(&mut recv[0]),
                counts.as_ptr(),
                displs.as_ptr(),
                MPI_INT,
                0,
                MPI_COMM_WORLD,
            ),
            "gatherv",
        );
    }
    if rank == 0 {
        assert_eq!(recv, vec![0, 100, 101, 200, 201, 202]);
    }

    // MINLOC across ranks, and a broadcast of a strided column from the last rank.
    let pair = [(rank - 1).abs(), rank];
    let mut min = [0 as c_int; 2];
    let mut m = [[0 as c_int; 2]; 3];
    if rank == 2 {
        m = [[1, 2], [3, 4], [5, 6]];
    }
    let mut column = MPI_DATATYPE_NULL;
    // SAFETY: as above.
    unsafe {
        ok(
            MPI_Allreduce(
                ptr(&pair),
                mptr(&mut min),
                1,
                MPI_2INT,
                MPI_MINLOC,
                MPI_COMM_WORLD,
            ),
            "minloc",
        );
        ok(MPI_Type_vector(3, 1, 2, MPI_INT, &mut column), "vector");
        ok(MPI_Type_commit(&mut column), "commit");
        ok(
            MPI_Bcast(mptr(&mut m[0][1]), 1, column, 2, MPI_COMM_WORLD),
            "bcast",
        );
        ok(MPI_Type_free(&mut column), "free");
    }
    assert_eq!(min, [0, 1]);
    assert_eq!(m.map(|r| r[1]), [2, 4, 6]);

    // Nonblocking rooted collectives and alltoall in flight together.
    let mut reqs = [MPI_REQUEST_NULL; 3];
    let mut g = vec![-1 as c_int; p];
    let mut s_out: c_int = -1;
    let s_in: Vec<c_int> = (0..size).map(|i| 700 + i).collect();
    let a_in: Vec<c_int> = (0..size).map(|i| rank * 10 + i).collect();
    let mut a_out = vec![-1 as c_int; p];
    // SAFETY: as above; the buffers outlive the requests, which are waited for below.
    unsafe {
        ok(
            MPI_Igather(
                ptr(&rank),
                1,
                MPI_INT,
                mptr(&mut g[0]),
                1,
                MPI_INT,
                2,
                MPI_COMM_WORLD,
                &mut reqs[0],
            ),
            "igather",
        );
        ok(
            MPI_Iscatter(
                ptr(&s_in[0]),
                1,
                MPI_INT,
                mptr(&mut s_out),
                1,
                MPI_INT,
                1,
                MPI_COMM_WORLD,
                &mut reqs[1],
            ),
            "iscatter",
        );
        ok(
            MPI_Ialltoall(
                ptr(&a_in[0]),
                1,
                MPI_INT,
                mptr(&mut a_out[0]),
                1,
                MPI_INT,
                MPI_COMM_WORLD,
                &mut reqs[2],
            ),
            "ialltoall",
        );
        ok(MPI_Waitall(3, reqs.as_mut_ptr(), null_mut()), "waitall");
    }
    if rank == 2 {
        assert_eq!(g, vec![0, 1, 2]);
    }
    assert_eq!(s_out, 700 + rank);
    assert_eq!(a_out, (0..size).map(|i| i * 10 + rank).collect::<Vec<_>>());

    // Split by parity; reduce inside.
    let mut half = MPI_COMM_NULL;
    let (mut hsize, mut hsum) = (0, 0);
    // SAFETY: as above.
    unsafe {
        ok(
            MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &mut half),
            "split",
        );
        ok(MPI_Comm_size(half, &mut hsize), "size");
        ok(
            MPI_Allreduce(ptr(&rank), mptr(&mut hsum), 1, MPI_INT, MPI_SUM, half),
            "allreduce",
        );
        ok(MPI_Comm_free(&mut half), "free");
    }
    assert_eq!((hsize, hsum), if rank % 2 == 0 { (2, 2) } else { (1, 1) });

    // Windows: put to the right neighbour under fences, then everyone accumulates into
    // rank 0 under an exclusive lock.
    let mut base: *mut i64 = null_mut();
    let mut win = MPI_WIN_NULL;
    let v = i64::from(rank) + 40;
    let one = i64::from(rank) + 1;
    // SAFETY: as above; `base` points to the window's 4 elements until MPI_Win_free.
    unsafe {
        ok(
            MPI_Win_allocate(
                32,
                8,
                MPI_INFO_NULL,
                MPI_COMM_WORLD,
                mptr(&mut base),
                &mut win,
            ),
            "win_allocate",
        );
        ok(MPI_Win_fence(0, win), "fence");
        ok(
            MPI_Put(ptr(&v), 1, MPI_LONG, right, 1, 1, MPI_LONG, win),
            "put",
        );
        ok(MPI_Win_fence(0, win), "fence");
        assert_eq!(*base.add(1), i64::from(left) + 40);
        ok(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win), "lock");
        ok(
            MPI_Accumulate(ptr(&one), 1, MPI_LONG, 0, 2, 1, MPI_LONG, MPI_SUM, win),
            "accumulate",
        );
        ok(MPI_Win_unlock(0, win), "unlock");
        ok(MPI_Barrier(MPI_COMM_WORLD), "barrier");
        ok(MPI_Win_sync(win), "sync");
        if rank == 0 {
            assert_eq!(*base.add(2), 6);
        }
        let mut got = 0i64;
        ok(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win), "lock");
        ok(
            MPI_Get(mptr(&mut got), 1, MPI_LONG, 0, 2, 1, MPI_LONG, win),
            "get",
        );
        ok(MPI_Win_unlock(0, win), "unlock");
        assert_eq!(got, 6);
        ok(MPI_Win_free(&mut win), "win_free");
    }

    // Errors of one rank leave the others undisturbed.
    // SAFETY: as above (a null buffer with count 0 is allowed).
    unsafe {
        assert_eq!(
            MPI_Send(null(), 0, MPI_INT, size, 0, MPI_COMM_WORLD),
            MPI_ERR_RANK
        );
        ok(MPI_Barrier(MPI_COMM_WORLD), "barrier");
    }
}

fn three_ranks(nic: Nic) {
    Job::new(nic, RANKS)
        .run(|u| {
            let node = u.world().rank() as u32;
            with_rank(u, nic, node, rank_body)
        })
        .unwrap_or_else(|e| panic!("{nic:?}: {e}"));
}

#[test]
fn three_ranks_on_cassini() {
    three_ranks(Nic::Cassini);
}

#[test]
fn three_ranks_on_gemini() {
    three_ranks(Nic::Gemini);
}
