/*
 * osu_small: three OSU-style point-to-point measurements between ranks 0 and 1, written for
 * bench/compare.sh so MPICH (shared memory between two processes) can be measured beside
 * nicemu on the same machine:
 *
 *   latency  ping-pong of SIZE bytes, one-way time in microseconds (as osu_latency reports);
 *   bw       windows of WINDOW non-blocking sends of SIZE bytes, then a 4-byte ack (as osu_bw);
 *   rate     like bw with SIZE-byte messages, reported in messages per second (as osu_mbw_mr
 *            with one pair).
 *
 * usage: osu_small latency|bw|rate SIZE [ITERATIONS] [WINDOW]
 * Prints one line: "<test> <size> <value>".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WINDOW 1024

static double latency(char *buf, int size, int iters, int rank)
{
    int skip = iters / 10 + 1;
    double start = 0.0;
    for (int i = 0; i < iters + skip; i++) {
        if (i == skip)
            start = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - start) * 1e6 / (2.0 * iters);
}

/* Seconds for `iters` windows of `window` messages of `size` bytes from rank 0 to rank 1. */
static double windows(char *buf, int size, int iters, int window, int rank)
{
    MPI_Request reqs[MAX_WINDOW];
    static MPI_Status stats[MAX_WINDOW];
    int skip = iters / 10 + 1;
    double start = 0.0;
    char ack[4];
    for (int i = 0; i < iters + skip; i++) {
        if (i == skip)
            start = MPI_Wtime();
        for (int w = 0; w < window; w++) {
            if (rank == 0)
                MPI_Isend(buf, size, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &reqs[w]);
            else
                MPI_Irecv(buf, size, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &reqs[w]);
        }
        MPI_Waitall(window, reqs, stats);
        if (rank == 0)
            MPI_Recv(ack, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(ack, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - start;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 3 || nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 osu_small latency|bw|rate SIZE [ITERS] [WINDOW]\n");
        MPI_Finalize();
        return 2;
    }
    const char *test = argv[1];
    int size = atoi(argv[2]);
    int iters = argc > 3 ? atoi(argv[3]) : 1000;
    int window = argc > 4 ? atoi(argv[4]) : 64;
    if (size <= 0 || iters <= 0 || window <= 0 || window > MAX_WINDOW) {
        if (rank == 0)
            fprintf(stderr, "osu_small: SIZE, ITERS and WINDOW (<= %d) must be positive\n", MAX_WINDOW);
        MPI_Finalize();
        return 2;
    }
    char *buf = malloc((size_t)size);
    memset(buf, rank + 'a', (size_t)size);
    double value;
    if (strcmp(test, "latency") == 0) {
        value = latency(buf, size, iters, rank);
    } else if (strcmp(test, "bw") == 0) {
        double secs = windows(buf, size, iters, window, rank);
        value = (double)size * window * iters / secs / 1e6; /* MB/s, as OSU */
    } else if (strcmp(test, "rate") == 0) {
        double secs = windows(buf, size, iters, window, rank);
        value = (double)window * iters / secs; /* messages per second */
    } else {
        if (rank == 0)
            fprintf(stderr, "osu_small: unknown test %s\n", test);
        free(buf);
        MPI_Finalize();
        return 2;
    }
    if (rank == 0)
        printf("%s %d %.2f\n", test, size, value);
    free(buf);
    MPI_Finalize();
    return 0;
}
