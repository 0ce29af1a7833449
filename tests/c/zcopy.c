/* Messages between the program's own buffers (zero copy where the rank's NIC reaches this
 * process's memory, as in a job of processes): the same malloc'd buffer sent three times
 * (its registration is found again), a nonblocking pair in MPI_Alloc_mem memory, buffers
 * mmapped, used and unmapped three times (each time a new registration: the old one was
 * invalidated when its memory went), a buffer freed and allocated again, a small
 * message, and a window of MPI_Win_allocate in the unified model. Rank 0 sends, rank 1 receives and checks every byte; other ranks only take part
 * in the barrier. The transport's statistics (NICEMU_TRANSPORT_STATS=1) tell which
 * messages went zero copy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "check.h"

#define MIB (1 << 20)

static int rank, size;

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131 + seed);
}

static int same(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 131 + seed)) return 0;
    return 1;
}

/* `n` bytes from rank 0's `out` into rank 1's `in`, tag `tag`; rank 1 checks them. */
static void pass(unsigned char *out, unsigned char *in, size_t n, unsigned seed, int tag) {
    if (rank == 0) {
        fill(out, n, seed);
        CHECK_OK(MPI_Send(out, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD));
    } else if (rank == 1) {
        MPI_Status st;
        int count = -1;
        memset(in, 0, n);
        CHECK_OK(MPI_Recv(in, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
        CHECK_OK(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == (int)n && st.MPI_TAG == tag);
        CHECK(same(in, n, seed));
    }
}

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (size >= 2) {
        /* One buffer, three messages. */
        unsigned char *out = malloc(MIB), *in = malloc(MIB);
        CHECK(out && in);
        for (int i = 0; i < 3; i++) pass(out, in, MIB, (unsigned)i, 1);

        /* MPI_Alloc_mem hands out registered memory; a nonblocking pair in it. */
        unsigned char *a = NULL;
        CHECK_OK(MPI_Alloc_mem(MIB, MPI_INFO_NULL, &a));
        MPI_Request r;
        if (rank == 0) {
            fill(a, MIB, 7);
            CHECK_OK(MPI_Isend(a, MIB, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &r));
            CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else if (rank == 1) {
            memset(a, 0, MIB);
            CHECK_OK(MPI_Irecv(a, MIB, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &r));
            CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECK(same(a, MIB, 7));
        }
        CHECK_OK(MPI_Free_mem(a));

        /* Mapped, used, unmapped: the next mapping (often at the same address) is other
         * memory, registered afresh. */
        for (int i = 0; i < 3; i++) {
            unsigned char *m = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            CHECK(m != MAP_FAILED);
            pass(m, m, 4 * MIB, (unsigned)(10 + i), 3);
            CHECK(munmap(m, 4 * MIB) == 0);
            CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
        }

        /* Freed (glibc gives a chunk this large back with munmap) and allocated again. */
        free(out);
        free(in);
        out = malloc(4 * MIB);
        in = malloc(4 * MIB);
        CHECK(out && in);
        pass(out, in, 4 * MIB, 20, 4);

        /* A small message goes the small-message way. */
        pass(out, in, 100, 21, 5);
        free(out);
        free(in);
    }
    /* MPI_Win_allocate hands out the window's own memory, which the NIC reaches: the
     * unified model. */
    MPI_Win win;
    unsigned char *wbase = NULL;
    CHECK_OK(MPI_Win_allocate(MIB, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wbase, &win));
    int *model = NULL, found = 0;
    CHECK_OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &found));
    CHECK(found && *model == MPI_WIN_UNIFIED);
    CHECK_OK(MPI_Win_free(&win));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("zcopy: OK\n");
    CHECK_OK(MPI_Finalize());
    return 0;
}
