/* Several Open MPI ranks over `--mca pml cm --mca mtl ofi` on the nicemu provider (or MPICH
 * ranks over ch4:ofi, tests/mpich_wheel.rs), each in its own process with its own emulated
 * NIC: every rank sends tagged messages of 0 B to 4 MiB to its right neighbour and receives
 * them from its left one (receives posted first for even sizes' indices, sent first so that
 * they arrive unexpected for odd ones), checking every byte, the count, tag and source; then
 * a message from every rank to rank 0 under MPI_ANY_SOURCE, and two allreduces (one
 * integer, and 1 MiB of doubles). Prints "mpi_ranks: ok" per rank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(int rank, const char *what, int n) {
    printf("mpi_ranks: rank %d: %s (%d B)\n", rank, what, n);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    const int max = 4 << 20;
    unsigned char *s = malloc(max), *r = malloc(max);
    int sizes[] = {0, 1, 192, 193, 16384, 16385, 100000, 1 << 20, 4 << 20};
    int count = (int)(sizeof sizes / sizeof *sizes);
    long long sent = 0;
    for (int k = 0; k < count; k++) {
        int n = sizes[k];
        for (int i = 0; i < n; i++) {
            s[i] = (unsigned char)(i * 7 + k + 31 * rank);
            r[i] = 0;
        }
        /* Isend: a rendezvous send completes only once the receive is posted. */
        MPI_Request q[2];
        MPI_Status sts[2], st;
        if (k % 2 == 0) {
            MPI_Irecv(r, n, MPI_BYTE, left, 100 + k, MPI_COMM_WORLD, &q[0]);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Isend(s, n, MPI_BYTE, right, 100 + k, MPI_COMM_WORLD, &q[1]);
        } else {
            MPI_Isend(s, n, MPI_BYTE, right, 100 + k, MPI_COMM_WORLD, &q[1]);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Irecv(r, n, MPI_BYTE, left, 100 + k, MPI_COMM_WORLD, &q[0]);
        }
        MPI_Waitall(2, q, sts);
        st = sts[0];
        sent += n;
        int got;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if (got != n || st.MPI_TAG != 100 + k || st.MPI_SOURCE != left)
            return fail(rank, "wrong count, tag or source", n);
        for (int i = 0; i < n; i++)
            if (r[i] != (unsigned char)(i * 7 + k + 31 * left))
                return fail(rank, "wrong byte", n);
    }
    /* Everyone to rank 0, any source. */
    if (rank == 0) {
        int seen = 0;
        for (int i = 1; i < size; i++) {
            int v;
            MPI_Status st;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
            if (v != 1000 + st.MPI_SOURCE || (seen & (1 << st.MPI_SOURCE)))
                return fail(rank, "wrong any-source message", 4);
            seen |= 1 << st.MPI_SOURCE;
        }
    } else {
        int v = 1000 + rank;
        MPI_Send(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    }
    long long one = rank + 1, total = 0;
    MPI_Allreduce(&one, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (total != (long long)size * (size + 1) / 2)
        return fail(rank, "wrong allreduce sum", 8);
    int nd = (1 << 20) / (int)sizeof(double);
    double *a = (double *)s, *b = (double *)r;
    for (int i = 0; i < nd; i++)
        a[i] = (double)(i % 1000) * (rank + 1);
    MPI_Allreduce(a, b, nd, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < nd; i++)
        if (b[i] != (double)(i % 1000) * (double)total)
            return fail(rank, "wrong vector allreduce", 1 << 20);
    MPI_Finalize();
    printf("mpi_ranks: ok (rank %d of %d, %lld B to its neighbour)\n", rank, size, sent);
    free(s);
    free(r);
    return 0;
}
