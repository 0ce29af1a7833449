/* CHECK and CALL for the provider's C tests. A test defines TEST_NAME (its name, as it
 * prints "TEST_NAME: ok") before including this. A failed check prints the test's name,
 * where it failed and why on stderr, and exits 1. */
#ifndef NICEMU_TEST_CHECK_H
#define NICEMU_TEST_CHECK_H

#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s: %s:%d: ", TEST_NAME, __FILE__, __LINE__);     \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* A libfabric call that must return 0; otherwise its return code and its meaning. */
#define CALL(expr)                                                             \
    do {                                                                       \
        long rc_ = (long)(expr);                                               \
        CHECK(rc_ == 0, "%s = %ld (%s)", #expr, rc_, fi_strerror((int)-rc_));  \
    } while (0)

#endif
