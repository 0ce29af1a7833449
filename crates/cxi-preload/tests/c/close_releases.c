/* Closing the device releases everything the file held, as the driver's release does: the
 * doorbell page is unmapped (a later store faults, as after the kernel's vm_munmap), the
 * queue and the LNI are freed (a new file can make as many as before). */
#include <signal.h>
#include <sys/wait.h>

#include "check.h"

int main(void)
{
	int fd = open_dev();
	uint32_t lni = alloc_lni(fd);
	struct cp_alloc_resp cp = alloc_cp(fd, lni, 1);
	struct cq_alloc_resp q;
	CHECK(alloc_txq(fd, lni, cp.lcid, 64, &q) == 0, "TX CQ");
	(void)map_tok(fd, q.cmds);
	volatile uint64_t *launch = map_tok(fd, q.wp_addr);
	CHECK(close(fd) == 0, "close");
	pid_t child = fork();
	if (child == 0) {
		*launch = 5; /* faults: the page went with the file */
		_exit(0);
	}
	int st = 0;
	CHECK(waitpid(child, &st, 0) == child, "wait");
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "store after close: status %#x", st);

	/* Everything came back: 255 LNIs again. */
	fd = open_dev();
	int made = 0;
	for (; made < 256; made++) {
		uint32_t l;
		struct lni_alloc_cmd a = {.op = OP_LNI_ALLOC, .resp = (uintptr_t)&l, .svc_id = 1};
		if (req(fd, &a, sizeof a))
			break;
	}
	CHECK(made == 255, "LNIs after close: %d", made);
	close(fd);
	printf("close_releases: ok\n");
	return 0;
}
