/* Init, the environment queries, the ABI facts of the header, finalize. */
#include <string.h>
#include "check.h"

int main(int argc, char **argv) {
    int flag = -1, provided = -1, rank = -1, size = -1, v = 0, sv = 0, len = 0;
    CHECK_OK(MPI_Initialized(&flag));
    CHECK(flag == 0);
    CHECK_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_FUNNELED);
    CHECK_OK(MPI_Query_thread(&v));
    CHECK(v == provided);
    CHECK_OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 1);
    CHECK_OK(MPI_Initialized(&flag));
    CHECK(flag == 1);
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 1 && rank >= 0 && rank < size);
    CHECK_OK(MPI_Comm_size(MPI_COMM_SELF, &v));
    CHECK(v == 1);
    CHECK_OK(MPI_Get_version(&v, &sv));
    CHECK(v == 5 && sv == 0);
    CHECK_OK(MPI_Abi_get_version(&v, &sv));
    CHECK(v == 1 && sv == 0);
    CHECK(sizeof(MPI_Status) == 32 && sizeof(MPI_Comm) == sizeof(void *));
    CHECK(sizeof(MPI_Aint) == sizeof(void *) && sizeof(MPI_Count) == 8);
    char name[MPI_MAX_PROCESSOR_NAME];
    CHECK_OK(MPI_Get_processor_name(name, &len));
    CHECK(len > 0 && (int)strlen(name) == len && strncmp(name, "nicemu-", 7) == 0);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    CHECK_OK(MPI_Get_library_version(lib, &len));
    CHECK(strstr(lib, "nicemu") != NULL);
    double t0 = MPI_Wtime();
    CHECK(MPI_Wtick() > 0.0 && MPI_Wtime() >= t0);
    int *tag_ub = NULL;
    CHECK_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag == 1 && *tag_ub >= 32767);
    printf("rank %d of %d on %s: abi %d.%d\n", rank, size, name, 1, 0);
    CHECK_OK(MPI_Finalize());
    CHECK_OK(MPI_Finalized(&flag));
    CHECK(flag == 1);
    if (rank == 0) printf("hello: OK\n");
    return 0;
}
