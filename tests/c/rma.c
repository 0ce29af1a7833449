/* One-sided communication: windows created on the program's memory and allocated by the
 * library, fence, passive-target (also contended) and post/start/complete/wait epochs, every
 * access call, request-based ones. */
#include <string.h>
#include "check.h"

static int rank, size;

static void fence_epochs(void) {
    int *mem;
    CHECK_OK(MPI_Alloc_mem(8 * sizeof(int), MPI_INFO_NULL, &mem));
    for (int i = 0; i < 8; i++) mem[i] = 0;
    MPI_Win win;
    CHECK_OK(MPI_Win_create(mem, 8 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int v[2] = {100 + rank, 200 + rank};
    CHECK_OK(MPI_Win_fence(0, win));
    CHECK_OK(MPI_Put(v, 2, MPI_INT, right, 1, 2, MPI_INT, win));
    CHECK_OK(MPI_Win_fence(0, win));
    CHECK(mem[1] == 100 + left && mem[2] == 200 + left && mem[0] == 0 && mem[3] == 0);
    /* Local stores are published by the next synchronization. */
    mem[5] = 55 + rank;
    CHECK_OK(MPI_Win_fence(0, win));
    int got = -1;
    CHECK_OK(MPI_Get(&got, 1, MPI_INT, right, 5, 1, MPI_INT, win));
    CHECK_OK(MPI_Win_fence(0, win));
    CHECK(got == 55 + right);
    /* Everyone adds its rank + 1 to slots 6-7 of rank 0, as one 64-bit integer (the
     * element size NIC atomics of both families do). */
    long one = rank + 1, total;
    CHECK_OK(MPI_Accumulate(&one, 1, MPI_LONG, 0, 6, 1, MPI_LONG, MPI_SUM, win));
    CHECK_OK(MPI_Win_fence(0, win));
    memcpy(&total, &mem[6], sizeof total);
    if (rank == 0) CHECK(total == size * (size + 1) / 2);
    /* 32-bit MAX: no Gemini atomic does it; a compare-and-swap loop does. */
    int mine = rank + 1;
    CHECK_OK(MPI_Accumulate(&mine, 1, MPI_INT, 0, 4, 1, MPI_INT, MPI_MAX, win));
    CHECK_OK(MPI_Win_fence(0, win));
    if (rank == 0) CHECK(mem[4] == size);
    /* A strided target: every other int of slots 0..3 on self. */
    MPI_Datatype every_other;
    CHECK_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &every_other));
    CHECK_OK(MPI_Type_commit(&every_other));
    int pair[2] = {-1, -2};
    CHECK_OK(MPI_Win_fence(0, win));
    CHECK_OK(MPI_Put(pair, 2, MPI_INT, rank, 0, 1, every_other, win));
    CHECK_OK(MPI_Win_fence(0, win));
    CHECK(mem[0] == -1 && mem[2] == -2);
    CHECK_OK(MPI_Type_free(&every_other));
    int flag, *unit, *model, *flavor;
    MPI_Aint *wsize;
    void *base;
    CHECK_OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(flag && base == mem);
    CHECK_OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &wsize, &flag));
    CHECK(flag && *wsize == 8 * sizeof(int));
    CHECK_OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &unit, &flag));
    CHECK(flag && *unit == sizeof(int));
    CHECK_OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_CREATE);
    CHECK_OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && *model == MPI_WIN_SEPARATE);
    CHECK_OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL);
    CHECK_OK(MPI_Free_mem(mem));
}

static void passive(void) {
    long *base = NULL;
    MPI_Win win;
    CHECK_OK(MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    CHECK(base != NULL && base[0] == 0 && base[3] == 0);
    /* The allocated window is the NIC's memory (unified model): peers' updates show at once,
     * so everyone checks its zeros before anyone updates. */
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    /* Rank 0's counter, incremented by everyone with fetch-and-op. */
    long inc = 1, old = -1;
    CHECK_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    CHECK_OK(MPI_Fetch_and_op(&inc, &old, MPI_LONG, 0, 0, MPI_SUM, win));
    CHECK_OK(MPI_Win_unlock(0, win));
    CHECK(old >= 0 && old < size);
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_OK(MPI_Win_unlock(0, win));
        CHECK(base[0] == size);
    }
    /* Compare-and-swap on self. */
    long cmp = 0, val = 9, res = -1;
    CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    CHECK_OK(MPI_Compare_and_swap(&val, &cmp, &res, MPI_LONG, rank, 1, win));
    CHECK_OK(MPI_Win_flush(rank, win));
    CHECK(res == 0);
    CHECK_OK(MPI_Compare_and_swap(&val, &cmp, &res, MPI_LONG, rank, 1, win));
    CHECK(res == 9);
    /* Get_accumulate with MPI_NO_OP reads; with MPI_REPLACE swaps. */
    long two[2] = {4, 5}, before[2] = {-1, -1};
    CHECK_OK(MPI_Get_accumulate(two, 2, MPI_LONG, before, 2, MPI_LONG, rank, 2, 2, MPI_LONG, MPI_REPLACE, win));
    CHECK(before[0] == 0 && before[1] == 0);
    CHECK_OK(MPI_Get_accumulate(NULL, 0, MPI_LONG, before, 2, MPI_LONG, rank, 2, 2, MPI_LONG, MPI_NO_OP, win));
    CHECK(before[0] == 4 && before[1] == 5);
    CHECK_OK(MPI_Win_unlock(rank, win));
    CHECK(base[1] == 9 && base[2] == 4 && base[3] == 5);
    /* Request-based put and get on self under lock_all. */
    MPI_Request r[2];
    long put = 77, get = 0;
    CHECK_OK(MPI_Win_lock_all(0, win));
    CHECK_OK(MPI_Rput(&put, 1, MPI_LONG, rank, 3, 1, MPI_LONG, win, &r[0]));
    CHECK_OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK_OK(MPI_Rget(&get, 1, MPI_LONG, rank, 3, 1, MPI_LONG, win, &r[1]));
    CHECK_OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
    CHECK(get == 77);
    CHECK_OK(MPI_Win_flush_all(win));
    CHECK_OK(MPI_Win_unlock_all(win));
    CHECK_OK(MPI_Win_sync(win));
    CHECK(base[3] == 77);
    /* Request-based operations to the right neighbour, in flight together: each request
     * completes its own (a get's bytes are there once its request is complete, before any
     * synchronization); the put is complete at the target after the unlock. */
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long peer[2] = {-1, -1}, mark = 1000 + rank;
    MPI_Request q[3];
    CHECK_OK(MPI_Win_lock_all(0, win));
    CHECK_OK(MPI_Rget(&peer[0], 1, MPI_LONG, right, 1, 1, MPI_LONG, win, &q[0]));
    CHECK_OK(MPI_Rget(&peer[1], 1, MPI_LONG, right, 2, 1, MPI_LONG, win, &q[1]));
    CHECK_OK(MPI_Rput(&mark, 1, MPI_LONG, right, 0, 1, MPI_LONG, win, &q[2]));
    int done = 0;
    while (!done) CHECK_OK(MPI_Test(&q[1], &done, MPI_STATUS_IGNORE));
    CHECK(peer[1] == 4 && q[1] == MPI_REQUEST_NULL);
    CHECK_OK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
    CHECK(peer[0] == 9);
    CHECK_OK(MPI_Win_unlock_all(win));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(base[0] == 1000 + left);
    MPI_Group g;
    int gs;
    CHECK_OK(MPI_Win_get_group(win, &g));
    CHECK_OK(MPI_Group_size(g, &gs));
    CHECK(gs == size);
    CHECK_OK(MPI_Group_free(&g));
    CHECK_OK(MPI_Win_free(&win));
}

/* Writers and readers on the same lock words at once: each rank takes the exclusive lock on
 * itself while the others take shared locks on everyone. A reader's attempt that meets a
 * writer backs out; the writer's release in between must keep the reader's count, or the
 * word is left locked for good and every later lock spins forever. */
static void lock_contention(void) {
    enum { ROUNDS = 100 };
    long *base = NULL;
    MPI_Win win;
    CHECK_OK(MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    int right = (rank + 1) % size;
    for (int i = 0; i < ROUNDS; i++) {
        CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
        base[0] += 1;
        CHECK_OK(MPI_Win_unlock(rank, win));
        long seen = -1;
        CHECK_OK(MPI_Win_lock_all(0, win));
        CHECK_OK(MPI_Get(&seen, 1, MPI_LONG, right, 0, 1, MPI_LONG, win));
        CHECK_OK(MPI_Win_unlock_all(win));
        CHECK(seen >= 0 && seen <= ROUNDS);
    }
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(base[0] == ROUNDS);
    CHECK_OK(MPI_Win_free(&win));
}

/* Accumulates of elements no NIC atomic does (8-bit sums), from every rank at once into the
 * same bytes of rank 0, at an odd place and length (partial 64-bit words at both ends): each
 * word is updated by one compare-and-swap, all words in flight together, retried for the
 * words another rank changed meanwhile. */
static void byte_accumulates(void) {
    enum { N = 61 };
    signed char *base = NULL, add[N], old[N];
    MPI_Win win;
    CHECK_OK(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < N; i++) add[i] = (signed char)(i % 5 + rank);
    CHECK_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    CHECK_OK(MPI_Accumulate(add, N, MPI_SIGNED_CHAR, 0, 1, N, MPI_SIGNED_CHAR, MPI_SUM, win));
    CHECK_OK(MPI_Win_unlock(0, win));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    CHECK_OK(MPI_Get_accumulate(NULL, 0, MPI_SIGNED_CHAR, old, N, MPI_SIGNED_CHAR, 0, 1, N, MPI_SIGNED_CHAR, MPI_NO_OP, win));
    CHECK_OK(MPI_Win_unlock(0, win));
    for (int i = 0; i < N; i++) CHECK(old[i] == size * (i % 5) + size * (size - 1) / 2);
    if (rank == 0) CHECK(base[0] == 0 && base[N + 1] == 0);
    CHECK_OK(MPI_Win_free(&win));
}

/* General active target around the ring: each rank exposes its window to its left
 * neighbour and accesses its right one, twice (the epochs' counters start over; the second
 * exposure ends with MPI_Win_test). */
static void pscw(int allocate) {
    long *base, *mine = NULL;
    MPI_Win win;
    if (allocate) {
        CHECK_OK(MPI_Win_allocate(2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    } else {
        CHECK_OK(MPI_Alloc_mem(2 * sizeof(long), MPI_INFO_NULL, &mine));
        base = mine;
        base[0] = base[1] = 0;
        CHECK_OK(MPI_Win_create(base, 2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    }
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Group world, gl, gr;
    CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_OK(MPI_Group_incl(world, 1, &left, &gl));
    CHECK_OK(MPI_Group_incl(world, 1, &right, &gr));
    for (int epoch = 0; epoch < 2; epoch++) {
        CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
        base[1] = 1000 * (epoch + 1) + rank;
        CHECK_OK(MPI_Win_unlock(rank, win));
        CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
        long v = 100 * (epoch + 1) + rank, got = -1;
        CHECK_OK(MPI_Win_post(gl, 0, win));
        CHECK_OK(MPI_Win_start(gr, 0, win));
        CHECK_OK(MPI_Put(&v, 1, MPI_LONG, right, 0, 1, MPI_LONG, win));
        CHECK_OK(MPI_Get(&got, 1, MPI_LONG, right, 1, 1, MPI_LONG, win));
        CHECK_OK(MPI_Win_complete(win));
        CHECK(got == 1000 * (epoch + 1) + right);
        if (epoch == 0) {
            CHECK_OK(MPI_Win_wait(win));
        } else {
            /* MPI_Win_test ends the exposure epoch once the origin completed. */
            int done = 0;
            while (!done) CHECK_OK(MPI_Win_test(win, &done));
        }
        CHECK(base[0] == 100 * (epoch + 1) + left);
        CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    /* Ending an epoch that is not open is an error, and the window stays usable. */
    CHECK_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK(MPI_Win_complete(win) != MPI_SUCCESS);
    CHECK(MPI_Win_wait(win) != MPI_SUCCESS);
    int flag = -1;
    CHECK(MPI_Win_test(win, &flag) != MPI_SUCCESS);
    CHECK_OK(MPI_Group_free(&gl));
    CHECK_OK(MPI_Group_free(&gr));
    CHECK_OK(MPI_Group_free(&world));
    CHECK_OK(MPI_Win_free(&win));
    if (mine) CHECK_OK(MPI_Free_mem(mine));
}

/* Post groups that differ between epochs: rank 1 posts to rank 0 for rank 0's second
 * access epoch while rank 0 still waits in its first, whose group is rank 2 only. Rank 0's
 * first start must wait for rank 2's post (which comes after rank 1's), not take rank 1's. */
static void pscw_posts_match_origins(void) {
    long *base = NULL;
    MPI_Win win;
    CHECK_OK(MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Group world, g;
    CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int zero = 0, one = 1, two = 2, token = 0;
    if (rank == 0) {
        long got = -1;
        CHECK_OK(MPI_Group_incl(world, 1, &two, &g));
        CHECK_OK(MPI_Win_start(g, 0, win));
        CHECK_OK(MPI_Get(&got, 1, MPI_LONG, 2, 0, 1, MPI_LONG, win));
        CHECK_OK(MPI_Win_complete(win));
        CHECK(got == 42);
        CHECK_OK(MPI_Group_free(&g));
        CHECK_OK(MPI_Group_incl(world, 1, &one, &g));
        CHECK_OK(MPI_Win_start(g, 0, win));
        CHECK_OK(MPI_Get(&got, 1, MPI_LONG, 1, 0, 1, MPI_LONG, win));
        CHECK_OK(MPI_Win_complete(win));
        CHECK(got == 0);
        CHECK_OK(MPI_Group_free(&g));
    } else if (rank == 1 || rank == 2) {
        CHECK_OK(MPI_Group_incl(world, 1, &zero, &g));
        if (rank == 1) {
            CHECK_OK(MPI_Win_post(g, 0, win));
            CHECK_OK(MPI_Send(&token, 1, MPI_INT, 2, 7, MPI_COMM_WORLD));
        } else {
            CHECK_OK(MPI_Recv(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 2, 0, win));
            base[0] = 42;
            CHECK_OK(MPI_Win_unlock(2, win));
            CHECK_OK(MPI_Win_post(g, 0, win));
        }
        CHECK_OK(MPI_Win_wait(win));
        CHECK_OK(MPI_Group_free(&g));
    }
    CHECK_OK(MPI_Group_free(&world));
    CHECK_OK(MPI_Win_free(&win));
}

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    fence_epochs();
    passive();
    lock_contention();
    byte_accumulates();
    pscw(1);
    pscw(0);
    if (size >= 3) pscw_posts_match_origins();
    CHECK_OK(MPI_Finalize());
    if (rank == 0) printf("rma: OK\n");
    return 0;
}
