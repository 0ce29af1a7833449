/* Error paths with MPI_ERRORS_RETURN: each bad call returns its class and leaves the
 * library usable. */
#include <string.h>
#include "check.h"

static int rank, size;

/* Standard calls this library exports without implementing them; mpi.h does not declare
 * them (a program compiled against another standard-ABI header would). */
int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup);
int MPI_T_init_thread(int required, int *provided);

#define EXPECT(call, cls)                                                                   \
    do {                                                                                    \
        int rc_ = (call), c_ = -1;                                                          \
        if (rc_ != (cls)) {                                                                 \
            fprintf(stderr, "%s:%d: %s returned %d, expected %s\n", __FILE__, __LINE__,     \
                    #call, rc_, #cls);                                                      \
            MPI_Abort(MPI_COMM_WORLD, 98);                                                  \
        }                                                                                   \
        CHECK_OK(MPI_Error_class(rc_, &c_));                                                \
        CHECK(c_ == (cls));                                                                 \
    } while (0)

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    MPI_Errhandler eh;
    CHECK_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    CHECK_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);

    int x[4] = {1, 2, 3, 4}, y[4];
    /* Bad ranks and tags. */
    EXPECT(MPI_Send(x, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Send(x, 1, MPI_INT, -7, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    EXPECT(MPI_Recv(y, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_RANK);
    EXPECT(MPI_Send(x, 1, MPI_INT, rank, -5, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT(MPI_Send(x, 1, MPI_INT, rank, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG);
    EXPECT(MPI_Send(x, -1, MPI_INT, rank, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT(MPI_Bcast(x, 1, MPI_INT, size, MPI_COMM_WORLD), MPI_ERR_ROOT);

    /* Truncation: four ints into a buffer of two. */
    MPI_Request r;
    MPI_Status s;
    CHECK_OK(MPI_Isend(x, 4, MPI_INT, rank, 1, MPI_COMM_WORLD, &r));
    EXPECT(MPI_Recv(y, 2, MPI_INT, rank, 1, MPI_COMM_WORLD, &s), MPI_ERR_TRUNCATE);
    CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    CHECK_OK(MPI_Error_string(MPI_ERR_TRUNCATE, msg, &len));
    CHECK(strstr(msg, "MPI_ERR_TRUNCATE") != NULL && strstr(msg, "16 bytes") != NULL);

    /* Invalid handles of every kind. */
    MPI_Comm bogus_comm = (MPI_Comm)0x7777;
    MPI_Datatype bogus_type = (MPI_Datatype)0x7778;
    int n;
    EXPECT(MPI_Comm_size(bogus_comm, &n), MPI_ERR_COMM);
    EXPECT(MPI_Comm_rank(MPI_COMM_NULL, &n), MPI_ERR_COMM);
    EXPECT(MPI_Send(x, 1, MPI_INT, rank, 0, bogus_comm), MPI_ERR_COMM);
    EXPECT(MPI_Send(x, 1, bogus_type, rank, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT(MPI_Send(x, 1, (MPI_Datatype)MPI_COMM_WORLD, rank, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT(MPI_Type_size(MPI_DATATYPE_NULL, &n), MPI_ERR_TYPE);
    MPI_Request bad_req = (MPI_Request)0x7779;
    EXPECT(MPI_Wait(&bad_req, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
    EXPECT(MPI_Allreduce(x, y, 1, MPI_INT, (MPI_Op)0x7780, MPI_COMM_WORLD), MPI_ERR_OP);
    EXPECT(MPI_Allreduce(x, y, 1, MPI_BYTE, MPI_MINLOC, MPI_COMM_WORLD), MPI_ERR_OP);
    MPI_Group bad_group = (MPI_Group)0x7781;
    EXPECT(MPI_Group_size(bad_group, &n), MPI_ERR_GROUP);
    EXPECT(MPI_Win_fence(0, (MPI_Win)0x7782), MPI_ERR_WIN);
    MPI_Info bad_info = (MPI_Info)0x7783;
    EXPECT(MPI_Info_set(bad_info, "k", "v"), MPI_ERR_INFO);
    EXPECT(MPI_Comm_free(&bogus_comm), MPI_ERR_COMM);
    MPI_Comm world = MPI_COMM_WORLD;
    EXPECT(MPI_Comm_free(&world), MPI_ERR_COMM);

    /* An uncommitted datatype cannot carry data. */
    MPI_Datatype pair;
    CHECK_OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    EXPECT(MPI_Send(x, 1, pair, rank, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    CHECK_OK(MPI_Type_free(&pair));
    MPI_Datatype predefined = MPI_INT;
    EXPECT(MPI_Type_free(&predefined), MPI_ERR_TYPE);

    /* Memory not from MPI_Alloc_mem. */
    EXPECT(MPI_Free_mem(x), MPI_ERR_ARG);

    /* Null output pointers and buffers. */
    EXPECT(MPI_Comm_rank(MPI_COMM_WORLD, NULL), MPI_ERR_ARG);
    EXPECT(MPI_Send(NULL, 4, MPI_INT, rank, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);

    /* A call this library does not implement. */
    MPI_Comm c2;
    EXPECT(MPI_Comm_idup(MPI_COMM_WORLD, &c2, &r), MPI_ERR_UNSUPPORTED_OPERATION);
    CHECK_OK(MPI_Error_string(MPI_ERR_UNSUPPORTED_OPERATION, msg, &len));
    CHECK(strstr(msg, "MPI_Comm_idup") != NULL && strstr(msg, "not supported") != NULL);
    int dims[2] = {0, 0};
    EXPECT(MPI_Dims_create(4, 2, dims), MPI_ERR_UNSUPPORTED_OPERATION);
    /* Declared by mpi.h (the OSU Micro-Benchmarks name them), not implemented. */
    EXPECT(MPI_Cart_coords(MPI_COMM_WORLD, 0, 2, dims), MPI_ERR_UNSUPPORTED_OPERATION);
    EXPECT(MPI_Error_string(-12345, msg, &len), MPI_ERR_ARG);
    MPI_Group wg, ug;
    CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    EXPECT(MPI_Group_union(wg, wg, &ug), MPI_ERR_UNSUPPORTED_OPERATION);
    CHECK_OK(MPI_Group_free(&wg));
    int provided;
    CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == 1004); /* MPI_T_ERR_NOT_SUPPORTED */

    /* Handle conversions round-trip. */
    CHECK(MPI_Comm_fromint(MPI_Comm_toint(MPI_COMM_WORLD)) == MPI_COMM_WORLD);
    CHECK(MPI_Type_toint(MPI_INT) == 0x209);
    MPI_Comm d;
    CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    MPI_Comm back = MPI_Comm_fromint(MPI_Comm_toint(d));
    CHECK_OK(MPI_Comm_size(back, &n));
    CHECK(n == size);
    CHECK_OK(MPI_Comm_free(&back));

    /* Window errors go to the window's handler (inherited from its communicator). */
    long *base;
    MPI_Win win;
    CHECK_OK(MPI_Win_allocate(8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    EXPECT(MPI_Win_lock(12345, rank, 0, win), MPI_ERR_LOCKTYPE);
    EXPECT(MPI_Win_detach(win, base), MPI_ERR_RMA_FLAVOR); /* not a dynamic window */
    EXPECT(MPI_Win_wait(win), MPI_ERR_RMA_SYNC);
    EXPECT(MPI_Win_unlock(rank, win), MPI_ERR_RMA_SYNC);
    long v = 1;
    CHECK_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    EXPECT(MPI_Put(&v, 1, MPI_LONG, rank, 1, 1, MPI_LONG, win), MPI_ERR_RMA_RANGE);
    EXPECT(MPI_Put(&v, 1, MPI_LONG, size, 0, 1, MPI_LONG, win), MPI_ERR_RANK);
    CHECK_OK(MPI_Win_unlock(rank, win));
    CHECK_OK(MPI_Win_free(&win));

    /* After all this, the library still works. */
    int sum = 0, one = 1;
    CHECK_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size);
    CHECK_OK(MPI_Finalize());
    if (rank == 0) printf("errors: OK\n");
    return 0;
}
