/* Collectives on MPI_COMM_WORLD (any size), blocking and nonblocking, with MPI_IN_PLACE,
 * MINLOC/MAXLOC and an operation of the program. */
#include <stdlib.h>
#include <string.h>
#include "check.h"

static int rank, size;

/* inout[i] = in[i] * 10 + inout[i]: not commutative, so the rank order shows. */
static void shift_add(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    long *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = a[i] * 10 + b[i];
}

static void rooted(void) {
    int root = size - 1;
    double v[3] = {0};
    if (rank == root) { v[0] = 1.5; v[1] = -2; v[2] = 8; }
    CHECK_OK(MPI_Bcast(v, 3, MPI_DOUBLE, root, MPI_COMM_WORLD));
    CHECK(v[0] == 1.5 && v[1] == -2 && v[2] == 8);

    int mine[2] = {rank, 1}, sum[2] = {-1, -1};
    CHECK_OK(MPI_Reduce(mine, sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0) CHECK(sum[0] == size * (size - 1) / 2 && sum[1] == size);
    if (rank == 0) {
        int inplace[2] = {rank, 1};
        CHECK_OK(MPI_Reduce(MPI_IN_PLACE, inplace, 2, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD));
        CHECK(inplace[0] == size - 1 && inplace[1] == 1);
    } else {
        CHECK_OK(MPI_Reduce(mine, NULL, 2, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD));
    }

    int *all = malloc(2 * size * sizeof(int));
    CHECK_OK(MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int i = 0; i < size; i++) CHECK(all[2 * i] == i && all[2 * i + 1] == 1);

    /* Gatherv: rank i sends i+1 ints, placed with a gap of one between blocks. */
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
    int total = 0;
    for (int i = 0; i < size; i++) { counts[i] = i + 1; displs[i] = total; total += i + 2; }
    int *send = malloc((rank + 1) * sizeof(int)), *recv = malloc(total * sizeof(int));
    for (int i = 0; i <= rank; i++) send[i] = 100 * rank + i;
    for (int i = 0; i < total; i++) recv[i] = -7;
    CHECK_OK(MPI_Gatherv(send, rank + 1, MPI_INT, recv, counts, displs, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int i = 0; i < size; i++) {
            for (int j = 0; j <= i; j++) CHECK(recv[displs[i] + j] == 100 * i + j);
            CHECK(recv[displs[i] + i + 1] == -7);
        }

    /* Scatter and Scatterv back. */
    int got[2] = {0};
    for (int i = 0; i < size; i++) { all[2 * i] = 10 * i; all[2 * i + 1] = 10 * i + 1; }
    CHECK_OK(MPI_Scatter(all, 2, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD));
    CHECK(got[0] == 10 * rank && got[1] == 10 * rank + 1);
    for (int i = 0; i < total; i++) recv[i] = i;
    memset(send, 0, (rank + 1) * sizeof(int));
    CHECK_OK(MPI_Scatterv(recv, counts, displs, MPI_INT, send, rank + 1, MPI_INT, 0, MPI_COMM_WORLD));
    for (int j = 0; j <= rank; j++) CHECK(send[j] == displs[rank] + j);
    free(all); free(counts); free(displs); free(send); free(recv);
}

static void everyone(void) {
    double x = rank + 0.5, m = 0;
    CHECK_OK(MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK(m == size - 0.5);
    long l = rank + 1;
    CHECK_OK(MPI_Allreduce(MPI_IN_PLACE, &l, 1, MPI_LONG, MPI_PROD, MPI_COMM_WORLD));
    long f = 1;
    for (int i = 1; i <= size; i++) f *= i;
    CHECK(l == f);

    int s = 0, e = -5, one = rank + 1;
    CHECK_OK(MPI_Scan(&one, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(s == (rank + 1) * (rank + 2) / 2);
    CHECK_OK(MPI_Exscan(&one, &e, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank > 0) CHECK(e == rank * (rank + 1) / 2);
    else CHECK(e == -5);

    int *all = malloc(size * sizeof(int)), *bl = malloc(size * sizeof(int));
    CHECK_OK(MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) CHECK(all[i] == i);
    for (int i = 0; i < size; i++) all[i] = (i == rank) ? 40 + rank : -1;
    CHECK_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) CHECK(all[i] == 40 + i);
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
    for (int i = 0; i < size; i++) { counts[i] = 1; displs[i] = size - 1 - i; }
    CHECK_OK(MPI_Allgatherv(&rank, 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) CHECK(all[size - 1 - i] == i);

    for (int i = 0; i < size; i++) all[i] = rank * 100 + i;
    CHECK_OK(MPI_Alltoall(all, 1, MPI_INT, bl, 1, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) CHECK(bl[i] == i * 100 + rank);
    for (int i = 0; i < size; i++) { counts[i] = 1; displs[i] = i; }
    CHECK_OK(MPI_Alltoallv(all, counts, displs, MPI_INT, bl, counts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) CHECK(bl[i] == i * 100 + rank);

    /* Reduce-scatter: block i of everyone's vector summed goes to rank i. */
    int *vec = malloc(2 * size * sizeof(int)), rs[2];
    for (int i = 0; i < 2 * size; i++) vec[i] = i;
    CHECK_OK(MPI_Reduce_scatter_block(vec, rs, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(rs[0] == 2 * rank * size && rs[1] == (2 * rank + 1) * size);
    for (int i = 0; i < size; i++) counts[i] = 2;
    CHECK_OK(MPI_Reduce_scatter(vec, rs, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(rs[0] == 2 * rank * size);
    free(all); free(bl); free(counts); free(displs); free(vec);
}

static void loc_and_user_ops(void) {
    struct { double v; int i; } in = {(double)(rank % 2), rank}, out;
    CHECK_OK(MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
    CHECK(out.v == 0.0 && out.i == 0);
    int pair[2] = {rank, rank}, res[2];
    CHECK_OK(MPI_Allreduce(pair, res, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
    CHECK(res[0] == size - 1 && res[1] == size - 1);

    MPI_Op op;
    int commute = -1;
    CHECK_OK(MPI_Op_create(shift_add, 0, &op));
    CHECK_OK(MPI_Op_commutative(op, &commute));
    CHECK(commute == 0);
    long mine = rank + 1, r = 0;
    CHECK_OK(MPI_Allreduce(&mine, &r, 1, MPI_LONG, op, MPI_COMM_WORLD));
    /* a0 op (a1 op (...)) with x op y = 10x + y. */
    long expect = size;
    for (int i = size - 2; i >= 0; i--) expect = (i + 1) * 10 + expect;
    CHECK(r == expect);
    CHECK_OK(MPI_Op_free(&op));
    CHECK(op == MPI_OP_NULL);
}

static void nonblocking(void) {
    MPI_Request r[6];
    int b = rank == 0 ? 31 : 0, sum = 0, one = 1, sc = 0, all[64];
    double d = rank, dm = -1;
    CHECK_OK(MPI_Ibarrier(MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Ibcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, &r[1]));
    CHECK_OK(MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[2]));
    CHECK_OK(MPI_Ireduce(&d, &dm, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD, &r[3]));
    CHECK_OK(MPI_Iscan(&one, &sc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[4]));
    CHECK(size <= 64);
    CHECK_OK(MPI_Iallgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &r[5]));
    CHECK_OK(MPI_Waitall(6, r, MPI_STATUSES_IGNORE));
    CHECK(b == 31 && sum == size && sc == rank + 1);
    if (rank == 0) CHECK(dm == size - 1);
    for (int i = 0; i < size; i++) CHECK(all[i] == i);
    int flag = 0;
    CHECK_OK(MPI_Ibarrier(MPI_COMM_WORLD, &r[0]));
    while (!flag) CHECK_OK(MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE));

    /* Gather to the last rank, scatter from it, alltoall, in-place allgather: in flight
     * together. */
    int root = size - 1, g[64], sc_in[64], sc_out = -1, a2a_in[64], a2a_out[64], ip[64];
    for (int i = 0; i < size; i++) {
        g[i] = -1;
        sc_in[i] = 500 + i;
        a2a_in[i] = 1000 * rank + i;
        ip[i] = i == rank ? 70 + rank : -1;
    }
    int mine = 3 * rank;
    CHECK_OK(MPI_Igather(&mine, 1, MPI_INT, g, 1, MPI_INT, root, MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Iscatter(sc_in, 1, MPI_INT, &sc_out, 1, MPI_INT, root, MPI_COMM_WORLD, &r[1]));
    CHECK_OK(MPI_Ialltoall(a2a_in, 1, MPI_INT, a2a_out, 1, MPI_INT, MPI_COMM_WORLD, &r[2]));
    CHECK_OK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ip, 1, MPI_INT, MPI_COMM_WORLD, &r[3]));
    CHECK_OK(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
    CHECK(sc_out == 500 + rank);
    for (int i = 0; i < size; i++) {
        if (rank == root) CHECK(g[i] == 3 * i);
        else CHECK(g[i] == -1);
        CHECK(a2a_out[i] == 1000 * i + rank);
        CHECK(ip[i] == 70 + i);
    }
}

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    rooted();
    everyone();
    loc_and_user_ops();
    nonblocking();
    CHECK_OK(MPI_Finalize());
    if (rank == 0) printf("coll: OK\n");
    return 0;
}
