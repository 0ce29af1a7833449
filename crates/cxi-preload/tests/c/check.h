/* Assertions and the steps every test takes, written as libcxi takes them: open(2) of the
 * device, write(2) of a request struct, mmap(2) of a token. */
#ifndef NICEMU_TEST_CHECK_H
#define NICEMU_TEST_CHECK_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "uapi.h"

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, \
				#cond);                                               \
			fprintf(stderr, __VA_ARGS__);                                 \
			fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno)); \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

/* write(2) a request; 0 or -errno. */
static inline int req(int fd, const void *cmd, size_t len)
{
	ssize_t n = write(fd, cmd, len);
	if (n == (ssize_t)len)
		return 0;
	return n < 0 ? -errno : -EIO;
}

static inline int open_dev(void)
{
	int fd = open("/dev/cxi0", O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0, "open /dev/cxi0");
	return fd;
}

static inline uint32_t alloc_lni(int fd)
{
	uint32_t lni = 0;
	struct lni_alloc_cmd c = {.op = OP_LNI_ALLOC, .resp = (uintptr_t)&lni, .svc_id = 1};
	int rc = req(fd, &c, sizeof c);
	CHECK(rc == 0, "LNI_ALLOC: %d", rc);
	return lni;
}

/* A communication profile on VNI 1 at `cp_type` (0: LCID 0 for triggered commands). */
static inline struct cp_alloc_resp alloc_cp(int fd, uint32_t lni, uint32_t cp_type)
{
	struct cp_alloc_resp r = {0};
	struct trig_cp_alloc_cmd c = {.op = OP_TRIG_CP_ALLOC, .resp = (uintptr_t)&r, .lni = lni,
				      .vni = 1, .tc = TC_BEST_EFFORT, .cp_type = cp_type};
	int rc = req(fd, &c, sizeof c);
	CHECK(rc == 0, "TRIG_CP_ALLOC: %d", rc);
	return r;
}

/* A transmit CQ of `count` commands with the driver's ring (libcxi's cxil_alloc_cmdq). */
static inline int alloc_txq(int fd, uint32_t lni, uint32_t lcid, uint32_t count,
			    struct cq_alloc_resp *r)
{
	struct cq_alloc_buf_cmd c = {.op = OP_CQ_ALLOC_BUF, .resp = (uintptr_t)r, .lni = lni,
				     .opts = {.count = count, .flags = CQ_IS_TX, .lcid = lcid}};
	return req(fd, &c, sizeof c);
}

static inline void *map_tok(int fd, struct tok t)
{
	void *p = mmap(NULL, t.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)t.offset);
	CHECK(p != MAP_FAILED, "mmap of token %#llx+%#llx", (unsigned long long)t.offset,
	      (unsigned long long)t.size);
	return p;
}

/* Wait (up to about 10 s) until `cond` holds; the NIC works in other threads. */
#define WAIT_FOR(cond, ...)                                                           \
	do {                                                                          \
		long spins_ = 0;                                                      \
		while (!(cond)) {                                                     \
			CHECK(++spins_ < 10L * 1000 * 100, __VA_ARGS__);              \
			usleep(10);                                                   \
		}                                                                     \
	} while (0)

#endif
