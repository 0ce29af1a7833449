/* Bad use of the uAPI gets what the real driver gives (cxi_user_core.c dispatch()): the
 * header is read first (EFAULT), then the opcode (EINVAL), its handler (EOPNOTSUPP), the
 * exact length (EINVAL); unknown handles are EINVAL; a response that cannot be written is
 * EFAULT and what was made is released; the device file has no read; a token maps once,
 * exactly; a mapped queue cannot be freed (EBUSY). */
#include "check.h"

int main(void)
{
	int fd = open_dev();
	uint32_t lni = 0;
	struct lni_alloc_cmd a = {.op = OP_LNI_ALLOC, .resp = (uintptr_t)&lni, .svc_id = 1};

	CHECK(req(fd, NULL, 24) == -EFAULT, "NULL buffer");
	struct hdr_cmd zero = {0};
	CHECK(req(fd, &zero, 0) == -EINVAL, "zeroed header, length 0");
	struct hdr_cmd big = {.op = OP_MAX};
	CHECK(req(fd, &big, sizeof big) == -EINVAL, "opcode past the last");
	struct hdr_cmd obsolete = {.op = 35};
	CHECK(req(fd, &obsolete, sizeof obsolete) == -EOPNOTSUPP, "obsolete opcode");
	CHECK(req(fd, &a, sizeof a - 1) == -EINVAL, "one byte short");
	char longer[sizeof a + 1];
	memcpy(longer, &a, sizeof a);
	CHECK(req(fd, longer, sizeof longer) == -EINVAL, "one byte long");

	/* The response goes nowhere: EFAULT, and the LNI is released (255 can be made). */
	struct lni_alloc_cmd bad = a;
	bad.resp = 8;
	CHECK(req(fd, &bad, sizeof bad) == -EFAULT, "unwritable response");
	struct lni_alloc_cmd ro = a;
	ro.resp = (uintptr_t)"read-only";
	CHECK(req(fd, &ro, sizeof ro) == -EFAULT, "read-only response");
	uint32_t lnis[255];
	int made = 0;
	for (; made < 255; made++) {
		a.resp = (uintptr_t)&lnis[made];
		if (req(fd, &a, sizeof a))
			break;
	}
	CHECK(made == 255, "only %d LNIs: a failed response leaked one", made);
	CHECK(req(fd, &a, sizeof a) == -ENOSPC, "the 256th");
	for (int i = 0; i < made; i++) {
		struct lni_free_cmd f = {.op = OP_LNI_FREE, .lni = lnis[i]};
		CHECK(req(fd, &f, sizeof f) == 0, "free %u", lnis[i]);
	}

	/* Unknown handles. */
	struct lni_free_cmd nolni = {.op = OP_LNI_FREE, .lni = 999};
	CHECK(req(fd, &nolni, sizeof nolni) == -EINVAL, "unknown LNI");
	struct cq_free_cmd nocq = {.op = OP_CQ_FREE, .cq = 77};
	CHECK(req(fd, &nocq, sizeof nocq) == -EINVAL, "unknown CQ");
	lni = alloc_lni(fd);
	struct domain_alloc_resp dr;
	struct domain_alloc_cmd d = {.op = OP_DOMAIN_ALLOC, .resp = (uintptr_t)&dr, .lni = lni,
				     .vni = 0, .pid = 0};
	CHECK(req(fd, &d, sizeof d) == -EINVAL, "VNI 0");
	d.vni = 4242;
	CHECK(req(fd, &d, sizeof d) == -EINVAL, "a VNI no service holds");

	/* A transmit queue needs a communication profile at its LCID. */
	struct cq_alloc_resp q;
	CHECK(alloc_txq(fd, lni, 0, 64, &q) == -EINVAL, "TX CQ without a CP");
	struct cp_alloc_resp cp = alloc_cp(fd, lni, 1);
	CHECK(alloc_txq(fd, lni, cp.lcid, 70000, &q) == -E2BIG, "too many commands");
	CHECK(alloc_txq(fd, lni, cp.lcid, 64, &q) == 0, "TX CQ");

	/* No read on the device; tokens map exactly and once. */
	char c;
	CHECK(read(fd, &c, 1) == -1 && errno == EINVAL, "read");
	CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED &&
		      errno == EINVAL, "offset 0 is no token");
	CHECK(mmap(NULL, q.cmds.size + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   (off_t)q.cmds.offset) == MAP_FAILED && errno == EINVAL, "wrong size");
	void *ring = map_tok(fd, q.cmds);
	CHECK(mmap(NULL, q.cmds.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   (off_t)q.cmds.offset) == MAP_FAILED && errno == EINVAL, "mapped twice");
	void *launch = map_tok(fd, q.wp_addr);
	struct cq_free_cmd f = {.op = OP_CQ_FREE, .cq = q.cq};
	CHECK(req(fd, &f, sizeof f) == -EBUSY, "free while mapped");
	CHECK(munmap(launch, q.wp_addr.size) == 0, "unmap launch");
	CHECK(req(fd, &f, sizeof f) == -EBUSY, "free while the ring is mapped");
	CHECK(munmap(ring, q.cmds.size) == 0, "unmap ring");
	CHECK(req(fd, &f, sizeof f) == 0, "free");
	CHECK(req(fd, &f, sizeof f) == -EINVAL, "double free");
	close(fd);
	printf("uapi_errors: ok\n");
	return 0;
}
