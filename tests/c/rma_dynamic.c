/* Dynamic windows: memory attached and detached after MPI_Win_create_dynamic, reached at
 * target displacements that are addresses (MPI_Get_address, relative to MPI_BOTTOM) of the
 * target's memory, with puts, gets and accumulates under fence and lock epochs; and the
 * errors: an address outside the attached memory, an overlapping attach, a detach of memory
 * never attached, attach on a window of another flavor. */
#include <stdlib.h>
#include "check.h"

static int rank, size;

static int error_class(int err) {
    int cls = -1;
    CHECK_OK(MPI_Error_class(err, &cls));
    return cls;
}

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    MPI_Win win;
    CHECK_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int flag, *flavor;
    void *wbase;
    CHECK_OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_DYNAMIC);
    CHECK_OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &wbase, &flag));
    CHECK(flag && wbase == MPI_BOTTOM);

    /* Two regions per rank: four longs (set before attaching: the window exposes them as
     * they are), and three ints at an odd place of a byte buffer. */
    long *longs = malloc(4 * sizeof(long));
    char *bytes = malloc(64);
    int *ints = (int *)(bytes + 4);
    for (int i = 0; i < 4; i++) longs[i] = 10 * rank + i;
    for (int i = 0; i < 3; i++) ints[i] = -1;
    CHECK_OK(MPI_Win_attach(win, longs, 4 * sizeof(long)));
    CHECK_OK(MPI_Win_attach(win, ints, 3 * sizeof(int)));
    MPI_Aint mine[2], *all = malloc(2 * size * sizeof(MPI_Aint));
    CHECK_OK(MPI_Get_address(longs, &mine[0]));
    CHECK_OK(MPI_Get_address(ints, &mine[1]));
    CHECK_OK(MPI_Allgather(mine, 2, MPI_AINT, all, 2, MPI_AINT, MPI_COMM_WORLD));
    MPI_Aint r_longs = all[2 * right], r_ints = all[2 * right + 1];

    /* Fence epoch: read the right neighbour's longs 1..2, write two ints into its second
     * region. */
    long got[2] = {-1, -1};
    int pair[2] = {100 + rank, 200 + rank};
    CHECK_OK(MPI_Win_fence(0, win));
    CHECK_OK(MPI_Get(got, 2, MPI_LONG, right, MPI_Aint_add(r_longs, sizeof(long)), 2, MPI_LONG, win));
    CHECK_OK(MPI_Put(pair, 2, MPI_INT, right, MPI_Aint_add(r_ints, sizeof(int)), 2, MPI_INT, win));
    CHECK_OK(MPI_Win_fence(0, win));
    CHECK(got[0] == 10 * right + 1 && got[1] == 10 * right + 2);
    CHECK(ints[0] == -1 && ints[1] == 100 + left && ints[2] == 200 + left);

    /* Passive target: everyone adds rank + 1 to rank 0's longs[3]. */
    long one = rank + 1;
    CHECK_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    CHECK_OK(MPI_Accumulate(&one, 1, MPI_LONG, 0, MPI_Aint_add(all[0], 3 * sizeof(long)), 1, MPI_LONG, MPI_SUM, win));
    CHECK_OK(MPI_Win_unlock(0, win));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_OK(MPI_Win_unlock(0, win));
        CHECK(longs[3] == 3 + size * (size + 1) / 2);
    }
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Errors, and the window stays usable. */
    CHECK_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    long x = 0;
    CHECK_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    /* One long past the end of the longs. */
    CHECK(error_class(MPI_Put(&x, 1, MPI_LONG, right, MPI_Aint_add(r_longs, 4 * sizeof(long)), 1, MPI_LONG, win)) == MPI_ERR_RMA_RANGE);
    /* Straddling the end of the ints. */
    CHECK(error_class(MPI_Get(&x, 1, MPI_LONG, right, MPI_Aint_add(r_ints, 2 * sizeof(int)), 1, MPI_LONG, win)) == MPI_ERR_RMA_RANGE);
    CHECK_OK(MPI_Win_unlock(right, win));
    CHECK(error_class(MPI_Win_attach(win, longs + 1, sizeof(long))) == MPI_ERR_RMA_ATTACH);
    CHECK(error_class(MPI_Win_detach(win, bytes)) == MPI_ERR_RMA_ATTACH);
    MPI_Win plain;
    long cell = 0;
    CHECK_OK(MPI_Win_create(&cell, sizeof cell, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &plain));
    CHECK_OK(MPI_Win_set_errhandler(plain, MPI_ERRORS_RETURN));
    CHECK(error_class(MPI_Win_attach(plain, longs, sizeof(long))) == MPI_ERR_RMA_FLAVOR);
    CHECK_OK(MPI_Win_free(&plain));

    /* Detached memory is out of reach; what stays attached is still reached. */
    CHECK_OK(MPI_Win_detach(win, ints));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    CHECK(error_class(MPI_Get(&x, 1, MPI_INT, right, r_ints, 1, MPI_INT, win)) == MPI_ERR_RMA_RANGE);
    CHECK_OK(MPI_Get(&x, 1, MPI_LONG, right, r_longs, 1, MPI_LONG, win));
    CHECK_OK(MPI_Win_unlock(right, win));
    CHECK(x == 10 * right);
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_OK(MPI_Win_detach(win, longs));
    CHECK_OK(MPI_Win_free(&win));
    free(all);
    free(bytes);
    free(longs);
    CHECK_OK(MPI_Finalize());
    if (rank == 0) printf("rma_dynamic: OK\n");
    return 0;
}
