/* Doorbells as libcxi rings them: commands written into the mmapped ring, then a plain
 * 64-bit store of the write pointer into the mmapped launch page (cxi_cq_ring), or the
 * command copied into the 64-byte low-latency window (cxi_cq_ll_ring). The NIC's progress
 * shows in the status it writes back at the head of the ring (rd_ptr, return_code). A
 * malformed command or an impossible write pointer ends in the hardware's error, in the
 * status, and stops the queue. */
#include "check.h"

static void put_cmd(uint8_t *ring, unsigned slot, uint8_t header)
{
	uint64_t cmd[8] = {0};
	cmd[0] = header;
	memcpy(ring + 64 * slot, cmd, 64);
}

static void ring_doorbell(void *launch, uint64_t wp)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*(volatile uint64_t *)launch = wp;
}

/* Copy a 64-byte command into the low-latency window of its slot (LL_OFFSET). */
static void ll_write(void *launch, const uint8_t *ring, unsigned slot)
{
	volatile uint64_t *ll = (volatile uint64_t *)((uint8_t *)launch + LL_64 + (slot & 0xf) * 64);
	const uint64_t *src = (const uint64_t *)(ring + 64 * slot);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (int i = 0; i < 8; i++)
		ll[i] = src[i];
}

int main(void)
{
	int fd = open_dev();
	uint32_t lni = alloc_lni(fd);
	struct cp_alloc_resp cp = alloc_cp(fd, lni, 1);
	struct cq_alloc_resp q;
	CHECK(alloc_txq(fd, lni, cp.lcid, 64, &q) == 0, "TX CQ");
	uint8_t *ring = map_tok(fd, q.cmds);
	void *launch = map_tok(fd, q.wp_addr);
	volatile uint64_t *status = (volatile uint64_t *)ring;

	/* Three CQ NOOPs, one doorbell. */
	for (unsigned s = CQ_FIRST_SLOT; s < CQ_FIRST_SLOT + 3; s++)
		put_cmd(ring, s, CMD_CQ_NOOP);
	ring_doorbell(launch, CQ_FIRST_SLOT + 3);
	WAIT_FOR(cq_rd_ptr(status) == CQ_FIRST_SLOT + 3, "rd_ptr %u", cq_rd_ptr(status));

	/* Back-to-back doorbells, one command each. */
	for (unsigned s = CQ_FIRST_SLOT + 3; s < CQ_FIRST_SLOT + 10; s++) {
		put_cmd(ring, s, CMD_CQ_NOOP);
		ring_doorbell(launch, s + 1);
	}
	WAIT_FOR(cq_rd_ptr(status) == CQ_FIRST_SLOT + 10, "rd_ptr %u", cq_rd_ptr(status));

	/* Low-latency writes, no doorbell store. */
	for (unsigned s = CQ_FIRST_SLOT + 10; s < CQ_FIRST_SLOT + 13; s++) {
		put_cmd(ring, s, CMD_CQ_NOOP);
		ll_write(launch, ring, s);
		WAIT_FOR(cq_rd_ptr(status) == s + 1, "LL: rd_ptr %u", cq_rd_ptr(status));
	}
	CHECK(cq_return_code(status) == RC_OK || cq_return_code(status) == 0, "rc %u",
	      cq_return_code(status));

	/* A command no CQ has: ILLEGAL_OP in the status; the queue stops. */
	unsigned s = CQ_FIRST_SLOT + 13;
	put_cmd(ring, s, CMD_CQ_BAD);
	ring_doorbell(launch, s + 1);
	WAIT_FOR(cq_return_code(status) == RC_ILLEGAL_OP, "rc %u", cq_return_code(status));
	put_cmd(ring, s + 1, CMD_CQ_NOOP);
	ring_doorbell(launch, s + 2);
	usleep(100 * 1000);
	CHECK(cq_rd_ptr(status) == s, "a failed queue takes no more commands: %u",
	      cq_rd_ptr(status));

	/* Another queue: a write pointer past its ring is CMD_INVALID_ARG. */
	struct cq_alloc_resp q2;
	CHECK(alloc_txq(fd, lni, cp.lcid, 64, &q2) == 0, "second TX CQ");
	uint8_t *ring2 = map_tok(fd, q2.cmds);
	void *launch2 = map_tok(fd, q2.wp_addr);
	ring_doorbell(launch2, q2.count + 5);
	WAIT_FOR(cq_return_code((volatile uint64_t *)ring2) == RC_CMD_INVALID_ARG, "rc %u",
		 cq_return_code((volatile uint64_t *)ring2));
	close(fd);
	printf("doorbell: ok\n");
	return 0;
}
