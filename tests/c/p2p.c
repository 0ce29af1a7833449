/* Point-to-point: messages to self and around a ring, every send mode, wildcards, probes,
 * matched probes, cancel, persistent requests, the multi-request calls, MPI_PROC_NULL. */
#include <stdlib.h>
#include <string.h>
#include "check.h"

static int rank, size;

static void self_messages(void) {
    int out[4] = {rank, 1, 2, 3}, in[4] = {0};
    MPI_Request r[2];
    MPI_Status st[2];
    /* Isend to self before the receive is posted, then Irecv. */
    CHECK_OK(MPI_Isend(out, 4, MPI_INT, rank, 7, MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Irecv(in, 4, MPI_INT, rank, 7, MPI_COMM_WORLD, &r[1]));
    CHECK_OK(MPI_Waitall(2, r, st));
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
    CHECK(memcmp(in, out, sizeof out) == 0);
    CHECK(st[1].MPI_SOURCE == rank && st[1].MPI_TAG == 7);
    int count = -1;
    CHECK_OK(MPI_Get_count(&st[1], MPI_INT, &count));
    CHECK(count == 4);
    CHECK_OK(MPI_Get_elements(&st[1], MPI_INT, &count));
    CHECK(count == 4);
    CHECK_OK(MPI_Get_count(&st[1], MPI_DOUBLE, &count));
    CHECK(count == 2);

    /* Receive posted first, blocking send; wildcards. */
    double d = 2.5, e = 0;
    MPI_Status s;
    CHECK_OK(MPI_Irecv(&e, 1, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Send(&d, 1, MPI_DOUBLE, rank, 42, MPI_COMM_WORLD));
    CHECK_OK(MPI_Wait(&r[0], &s));
    CHECK(e == 2.5 && s.MPI_SOURCE == rank && s.MPI_TAG == 42);

    /* Synchronous and ready sends need the receive posted. */
    CHECK_OK(MPI_Irecv(in, 1, MPI_INT, rank, 1, MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Ssend(&out[1], 1, MPI_INT, rank, 1, MPI_COMM_WORLD));
    CHECK_OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(in[0] == 1);
    CHECK_OK(MPI_Irecv(in, 1, MPI_INT, rank, 2, MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Rsend(&out[2], 1, MPI_INT, rank, 2, MPI_COMM_WORLD));
    CHECK_OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(in[0] == 2);

    /* A buffered send with an attached buffer. */
    int bsize = 4 * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
    void *buf = malloc(bsize);
    CHECK_OK(MPI_Buffer_attach(buf, bsize));
    CHECK_OK(MPI_Bsend(out, 4, MPI_INT, rank, 3, MPI_COMM_WORLD));
    memset(in, 0, sizeof in);
    CHECK_OK(MPI_Recv(in, 4, MPI_INT, rank, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(memcmp(in, out, sizeof out) == 0);
    void *back;
    int bback;
    CHECK_OK(MPI_Buffer_detach(&back, &bback));
    CHECK(back == buf && bback == bsize);
    free(buf);
}

static void large_to_self(void) {
    int n = 1 << 18; /* 1 MiB: the rendezvous protocols */
    int *a = malloc(n * sizeof(int)), *b = calloc(n, sizeof(int));
    for (int i = 0; i < n; i++) a[i] = i * 3 + rank;
    MPI_Request r[2];
    CHECK_OK(MPI_Irecv(b, n, MPI_INT, rank, 5, MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Isend(a, n, MPI_INT, rank, 5, MPI_COMM_WORLD, &r[1]));
    CHECK_OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n; i++) CHECK(b[i] == i * 3 + rank);
    free(a);
    free(b);
}

static void ring(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long out = 1000 + rank, in = -1;
    MPI_Status s;
    CHECK_OK(MPI_Sendrecv(&out, 1, MPI_LONG, right, 9, &in, 1, MPI_LONG, left, 9, MPI_COMM_WORLD, &s));
    CHECK(in == 1000 + left && s.MPI_SOURCE == left);
    long v = rank;
    CHECK_OK(MPI_Sendrecv_replace(&v, 1, MPI_LONG, right, 10, left, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(v == left);
}

static void probes(void) {
    short out[3] = {1, 2, 3}, in[3] = {0};
    int flag = 0, count = 0;
    MPI_Status s;
    MPI_Request r;
    CHECK_OK(MPI_Iprobe(rank, 11, MPI_COMM_WORLD, &flag, &s));
    CHECK(flag == 0);
    CHECK_OK(MPI_Isend(out, 3, MPI_SHORT, rank, 11, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Probe(MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &s));
    CHECK_OK(MPI_Get_count(&s, MPI_SHORT, &count));
    CHECK(count == 3 && s.MPI_SOURCE == rank);
    CHECK_OK(MPI_Iprobe(rank, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &s));
    CHECK(flag == 1 && s.MPI_TAG == 11);
    CHECK_OK(MPI_Recv(in, 3, MPI_SHORT, rank, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(in[2] == 3);
    CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));

    /* Matched probe: the message is taken out of matching. */
    MPI_Message m;
    CHECK_OK(MPI_Improbe(rank, 12, MPI_COMM_WORLD, &flag, &m, &s));
    CHECK(flag == 0);
    CHECK_OK(MPI_Isend(out, 2, MPI_SHORT, rank, 12, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Mprobe(rank, 12, MPI_COMM_WORLD, &m, &s));
    CHECK_OK(MPI_Iprobe(rank, 12, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 0);
    memset(in, 0, sizeof in);
    CHECK_OK(MPI_Mrecv(in, 3, MPI_SHORT, &m, &s));
    CHECK(m == MPI_MESSAGE_NULL && in[0] == 1 && in[1] == 2 && in[2] == 0);
    CHECK_OK(MPI_Get_count(&s, MPI_SHORT, &count));
    CHECK(count == 2);
    CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_OK(MPI_Isend(out, 1, MPI_SHORT, rank, 13, MPI_COMM_WORLD, &r));
    do {
        CHECK_OK(MPI_Improbe(MPI_ANY_SOURCE, 13, MPI_COMM_WORLD, &flag, &m, &s));
    } while (!flag);
    MPI_Request rr;
    CHECK_OK(MPI_Imrecv(in, 1, MPI_SHORT, &m, &rr));
    CHECK_OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
    CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
}

static void cancel_and_free(void) {
    int x = 0, flag = 0;
    MPI_Request r;
    MPI_Status s;
    CHECK_OK(MPI_Irecv(&x, 1, MPI_INT, rank, 999, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 0);
    CHECK_OK(MPI_Cancel(&r));
    CHECK_OK(MPI_Wait(&r, &s));
    CHECK_OK(MPI_Test_cancelled(&s, &flag));
    CHECK(flag == 1);
    /* A freed send still delivers. */
    int y = 77;
    CHECK_OK(MPI_Isend(&y, 1, MPI_INT, rank, 14, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL);
    CHECK_OK(MPI_Recv(&x, 1, MPI_INT, rank, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(x == 77);
}

static void persistent(void) {
    int out = 0, in = -1;
    MPI_Request r[2];
    CHECK_OK(MPI_Recv_init(&in, 1, MPI_INT, rank, 15, MPI_COMM_WORLD, &r[0]));
    CHECK_OK(MPI_Send_init(&out, 1, MPI_INT, rank, 15, MPI_COMM_WORLD, &r[1]));
    for (int i = 0; i < 3; i++) {
        out = 10 * i + rank;
        CHECK_OK(MPI_Startall(2, r));
        CHECK_OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(r[0] != MPI_REQUEST_NULL && in == 10 * i + rank);
    }
    CHECK_OK(MPI_Request_free(&r[0]));
    CHECK_OK(MPI_Request_free(&r[1]));
}

static void multi(void) {
    int v[3] = {5, 6, 7}, w[3] = {0}, index = -1, outcount = 0, flag = 0, idx[3];
    MPI_Request r[3];
    for (int i = 0; i < 3; i++) CHECK_OK(MPI_Irecv(&w[i], 1, MPI_INT, rank, 20 + i, MPI_COMM_WORLD, &r[i]));
    CHECK_OK(MPI_Testany(3, r, &index, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 0 && index == MPI_UNDEFINED);
    CHECK_OK(MPI_Send(&v[1], 1, MPI_INT, rank, 21, MPI_COMM_WORLD));
    CHECK_OK(MPI_Waitany(3, r, &index, MPI_STATUS_IGNORE));
    CHECK(index == 1 && w[1] == 6 && r[1] == MPI_REQUEST_NULL);
    CHECK_OK(MPI_Send(&v[0], 1, MPI_INT, rank, 20, MPI_COMM_WORLD));
    CHECK_OK(MPI_Send(&v[2], 1, MPI_INT, rank, 22, MPI_COMM_WORLD));
    int got = 0;
    while (got < 2) {
        MPI_Status sts[3];
        CHECK_OK(MPI_Waitsome(3, r, &outcount, idx, sts));
        CHECK(outcount >= 1);
        got += outcount;
    }
    CHECK(w[0] == 5 && w[2] == 7);
    CHECK_OK(MPI_Waitsome(3, r, &outcount, idx, MPI_STATUSES_IGNORE));
    CHECK(outcount == MPI_UNDEFINED);
    CHECK_OK(MPI_Testall(3, r, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag == 1);
}

static void proc_null(void) {
    int x = 3;
    MPI_Status s;
    CHECK_OK(MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    CHECK_OK(MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &s));
    CHECK(s.MPI_SOURCE == MPI_PROC_NULL && s.MPI_TAG == MPI_ANY_TAG && x == 3);
    int count = -1;
    CHECK_OK(MPI_Get_count(&s, MPI_INT, &count));
    CHECK(count == 0);
}

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    self_messages();
    /* self_messages posts receives from any source with any tag: no other rank's message
     * (the ring's) may exist before they matched. */
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    large_to_self();
    ring();
    probes();
    cancel_and_free();
    persistent();
    multi();
    proc_null();
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_OK(MPI_Finalize());
    if (rank == 0) printf("p2p: OK\n");
    return 0;
}
