/* Helpers of the C test programs: a failed check prints where and aborts the job. */
#ifndef NICEMU_TEST_CHECK_H
#define NICEMU_TEST_CHECK_H
#include <stdio.h>
#include <mpi.h>

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
            MPI_Abort(MPI_COMM_WORLD, 99);                                              \
        }                                                                               \
    } while (0)

#define CHECK_OK(call) CHECK((call) == MPI_SUCCESS)

#endif
