/* One-sided access to ranges of a large window: gets, puts and accumulates of byte ranges
 * (long contiguous ones, short unaligned ones, a strided one) with flushes between them, on
 * a window allocated by the library (the window's own memory, unified model) and on one the
 * program created on its memory (separate model). Every byte is checked. */
#include <stdlib.h>
#include <string.h>
#include "check.h"

#define WIN_BYTES (4 << 20)

static int rank, size;

/* The byte rank `r` stores at offset `i` of its window (and a second pattern for puts). */
static unsigned char own(int r, long i) { return (unsigned char)(r * 131 + i * 7 + (i >> 11)); }
static unsigned char put_byte(int r, long i) { return (unsigned char)(r * 29 + i * 13 + 1); }

/* Byte ranges of the window: (offset, length). */
static const long RANGES[][2] = {
    {0, 1 << 20},                  /* 1 MiB from the start */
    {3, 5},                        /* short and unaligned */
    {(1 << 20) + 1, 65537},        /* unaligned start and length */
    {WIN_BYTES - 100, 100},        /* the end of the window */
    {2 << 20, 1 << 20},            /* another MiB */
};
#define NRANGES ((int)(sizeof RANGES / sizeof RANGES[0]))

static void ranges(int allocate) {
    unsigned char *base, *mine = NULL;
    MPI_Win win;
    if (allocate) {
        CHECK_OK(MPI_Win_allocate(WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    } else {
        mine = calloc(WIN_BYTES, 1);
        CHECK(mine != NULL);
        base = mine;
        CHECK_OK(MPI_Win_create(base, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    }
    int *model, flag;
    CHECK_OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    /* A window the library allocates is the NIC's memory itself: no private copy. */
    CHECK(flag && *model == (allocate ? MPI_WIN_UNIFIED : MPI_WIN_SEPARATE));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* Local stores, made visible by MPI_Win_sync and ordered by the barrier. */
    CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (long i = 0; i < WIN_BYTES; i++) base[i] = own(rank, i);
    CHECK_OK(MPI_Win_unlock(rank, win));
    CHECK_OK(MPI_Win_sync(win));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Gets of every range from the right neighbour, all in flight before one flush. */
    unsigned char *got[NRANGES];
    CHECK_OK(MPI_Win_lock_all(0, win));
    for (int k = 0; k < NRANGES; k++) {
        got[k] = malloc(RANGES[k][1]);
        CHECK(got[k] != NULL);
        CHECK_OK(MPI_Get(got[k], (int)RANGES[k][1], MPI_BYTE, right, RANGES[k][0],
                         (int)RANGES[k][1], MPI_BYTE, win));
    }
    /* A strided target: 1,000 blocks of 3 bytes, 10 apart, at offset 12345. */
    MPI_Datatype strided;
    CHECK_OK(MPI_Type_vector(1000, 3, 10, MPI_BYTE, &strided));
    CHECK_OK(MPI_Type_commit(&strided));
    unsigned char packed[3000];
    CHECK_OK(MPI_Get(packed, 3000, MPI_BYTE, right, 12345, 1, strided, win));
    CHECK_OK(MPI_Win_flush(right, win));
    for (int k = 0; k < NRANGES; k++) {
        for (long i = 0; i < RANGES[k][1]; i++) CHECK(got[k][i] == own(right, RANGES[k][0] + i));
        free(got[k]);
    }
    for (int b = 0; b < 1000; b++)
        for (int j = 0; j < 3; j++) CHECK(packed[b * 3 + j] == own(right, 12345 + b * 10 + j));
    CHECK_OK(MPI_Type_free(&strided));
    CHECK_OK(MPI_Win_unlock_all(win));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Puts of ranges 1..3 into the left neighbour (range 0 is left alone), then a fence. */
    CHECK_OK(MPI_Win_fence(0, win));
    unsigned char *src[NRANGES] = {0};
    for (int k = 1; k < NRANGES; k++) {
        src[k] = malloc(RANGES[k][1]);
        CHECK(src[k] != NULL);
        for (long i = 0; i < RANGES[k][1]; i++) src[k][i] = put_byte(rank, RANGES[k][0] + i);
        CHECK_OK(MPI_Put(src[k], (int)RANGES[k][1], MPI_BYTE, left, RANGES[k][0],
                         (int)RANGES[k][1], MPI_BYTE, win));
    }
    CHECK_OK(MPI_Win_fence(0, win));
    for (int k = 1; k < NRANGES; k++) free(src[k]);
    /* Mine now holds what the right neighbour put, and my own bytes elsewhere. */
    for (long i = 0; i < WIN_BYTES; i++) {
        int put = 0;
        for (int k = 1; k < NRANGES; k++)
            if (i >= RANGES[k][0] && i < RANGES[k][0] + RANGES[k][1]) put = 1;
        CHECK(base[i] == (put ? put_byte(right, i) : own(rank, i)));
    }

    /* Everyone adds rank + 1 to 1,024 ints of rank 0 at byte 8, under a shared lock with a
     * flush in the middle. */
    enum { N = 1024 };
    int *ones = malloc(N * sizeof(int));
    CHECK(ones != NULL);
    for (int i = 0; i < N; i++) ones[i] = rank + 1;
    unsigned before[N];
    if (rank == 0) {
        CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        memcpy(before, base + 8, sizeof before);
        CHECK_OK(MPI_Win_unlock(0, win));
    }
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    CHECK_OK(MPI_Accumulate(ones, N / 2, MPI_INT, 0, 8, N / 2, MPI_INT, MPI_SUM, win));
    CHECK_OK(MPI_Win_flush(0, win));
    CHECK_OK(MPI_Accumulate(ones + N / 2, N / 2, MPI_INT, 0, 8 + N / 2 * sizeof(int), N / 2,
                            MPI_INT, MPI_SUM, win));
    CHECK_OK(MPI_Win_unlock(0, win));
    free(ones);
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        unsigned after[N];
        CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        memcpy(after, base + 8, sizeof after);
        CHECK_OK(MPI_Win_unlock(0, win));
        for (int i = 0; i < N; i++) CHECK(after[i] == before[i] + (unsigned)(size * (size + 1) / 2));
    }
    CHECK_OK(MPI_Win_free(&win));
    free(mine);
}

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    ranges(1);
    ranges(0);
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("rma_ranges: OK\n");
    CHECK_OK(MPI_Finalize());
    return 0;
}
