/* Counting events as libcxi's utilities allocate them (utils/cxi_context.c: ctx_alloc_ct
 * passes a NULL write-back buffer, which cass_ct.c: cxi_ct_alloc accepts): CT_ALLOC with
 * wb = NULL succeeds and hands out the doorbell page; CT_WB_UPDATE later gives it a buffer
 * (NULL or unaligned there is EINVAL); a counter whose doorbell is mapped cannot be freed.
 * The doorbell is also mapped and unmapped with syscall(SYS_mmap/SYS_munmap), as libfabric's
 * memhooks monitor does once it has patched mmap and munmap (util_mem_hooks.c). */
#include <sys/syscall.h>

#include "check.h"

struct ct_alloc_cmd { /* 32 */
	uint32_t op, pad;
	uint64_t resp;
	uint32_t lni, pad1;
	uint64_t wb;
};
struct ct_alloc_resp { /* 24 */
	uint32_t ctn, pad;
	struct tok doorbell;
};
struct ct_wb_update_cmd { /* 16 */
	uint32_t op, ctn;
	uint64_t wb;
};
struct ct_free_cmd { /* 8 */
	uint32_t op, ctn;
};
_Static_assert(sizeof(struct ct_alloc_cmd) == 32, "ct_alloc");
_Static_assert(sizeof(struct ct_alloc_resp) == 24, "ct_alloc_resp");
enum { OP_CT_ALLOC = 25, OP_CT_FREE = 26, OP_CT_WB_UPDATE = 38 };

int main(void)
{
	int fd = open_dev();
	uint32_t lni = alloc_lni(fd);
	struct ct_alloc_resp r = {0};
	struct ct_alloc_cmd a = {.op = OP_CT_ALLOC, .resp = (uintptr_t)&r, .lni = lni, .wb = 0};
	CHECK(req(fd, &a, sizeof a) == 0, "CT_ALLOC without a write-back buffer");
	CHECK(r.doorbell.size == 4096, "doorbell token of %llu bytes",
	      (unsigned long long)r.doorbell.size);
	volatile uint64_t *db = map_tok(fd, r.doorbell);

	static uint64_t wb[4] __attribute__((aligned(64)));
	struct ct_wb_update_cmd u = {.op = OP_CT_WB_UPDATE, .ctn = r.ctn, .wb = 0};
	CHECK(req(fd, &u, sizeof u) == -EINVAL, "CT_WB_UPDATE to NULL");
	u.wb = (uintptr_t)wb + 4;
	CHECK(req(fd, &u, sizeof u) == -EINVAL, "CT_WB_UPDATE unaligned");
	u.wb = (uintptr_t)wb;
	CHECK(req(fd, &u, sizeof u) == 0, "CT_WB_UPDATE");

	/* A second counter with a buffer from the start; unaligned is EINVAL. */
	struct ct_alloc_resp r2 = {0};
	a.resp = (uintptr_t)&r2;
	a.wb = (uintptr_t)&wb[1] + 4;
	CHECK(req(fd, &a, sizeof a) == -EINVAL, "CT_ALLOC unaligned write-back");
	a.wb = (uintptr_t)&wb[2];
	CHECK(req(fd, &a, sizeof a) == 0, "CT_ALLOC with a write-back buffer");
	CHECK(r2.ctn != r.ctn, "two counters, one number");

	struct ct_free_cmd f = {.op = OP_CT_FREE, .ctn = r.ctn};
	CHECK(req(fd, &f, sizeof f) == -EBUSY, "free while the doorbell is mapped");
	CHECK(munmap((void *)db, r.doorbell.size) == 0, "unmap doorbell");
	CHECK(req(fd, &f, sizeof f) == 0, "CT_FREE");
	CHECK(req(fd, &f, sizeof f) == -EINVAL, "CT_FREE twice");
	/* The second counter's doorbell through syscall(2): the device's mapping, released by
	 * SYS_munmap (else CT_FREE would stay EBUSY). */
	long p = syscall(SYS_mmap, 0L, (long)r2.doorbell.size, (long)(PROT_READ | PROT_WRITE),
			 (long)MAP_SHARED, (long)fd, (long)r2.doorbell.offset);
	CHECK(p != -1 && p != 0, "syscall(SYS_mmap) of the doorbell token: errno %d", errno);
	f.ctn = r2.ctn;
	CHECK(req(fd, &f, sizeof f) == -EBUSY, "free while mapped through syscall");
	CHECK(syscall(SYS_munmap, p, (long)r2.doorbell.size) == 0, "syscall(SYS_munmap)");
	CHECK(req(fd, &f, sizeof f) == 0, "CT_FREE of the second");
	close(fd);
	printf("counter: ok\n");
	return 0;
}
