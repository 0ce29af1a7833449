/* One Open MPI rank over `--mca pml cm --mca mtl ofi` on the nicemu provider: messages to
 * itself from 0 B to 100000 B (posted receive first), each byte checked, then finalize
 * (which removes the AV entries). Prints "mpi_self: ok" on success. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static char s[100000], r[100000];
    int sizes[] = {0, 10, 192, 1000, 16000, 20000, 100000};
    for (int k = 0; k < (int)(sizeof sizes / sizeof *sizes); k++) {
        int n = sizes[k];
        for (int i = 0; i < n; i++) {
            s[i] = (char)(i * 3 + k);
            r[i] = 0;
        }
        MPI_Request q;
        MPI_Status st;
        MPI_Irecv(r, n, MPI_CHAR, 0, 5 + k, MPI_COMM_WORLD, &q);
        MPI_Send(s, n, MPI_CHAR, 0, 5 + k, MPI_COMM_WORLD);
        MPI_Wait(&q, &st);
        int got;
        MPI_Get_count(&st, MPI_CHAR, &got);
        if (got != n || st.MPI_TAG != 5 + k || st.MPI_SOURCE != 0 || memcmp(s, r, (size_t)n)) {
            printf("mpi_self: %d B: count %d tag %d source %d, data %s\n", n, got, st.MPI_TAG,
                   st.MPI_SOURCE, memcmp(s, r, (size_t)n) ? "differs" : "equal");
            return 1;
        }
    }
    MPI_Finalize();
    printf("mpi_self: ok (rank %d of %d)\n", rank, size);
    return 0;
}
