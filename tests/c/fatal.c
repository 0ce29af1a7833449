/* The default error handler, MPI_ERRORS_ARE_FATAL: a send to a rank that does not exist
 * ends the program with a message (the test harness checks the exit status and message). */
#include "check.h"

int main(int argc, char **argv) {
    int size, x = 1;
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    MPI_Send(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD);
    printf("fatal: not reached\n");
    MPI_Finalize();
    return 0;
}
