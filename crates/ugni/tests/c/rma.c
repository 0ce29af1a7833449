/*
 * One-sided transfers between two processes, in each process's own memory: rank 1 exposes
 * a registered buffer (with its remote CQ as dst_cq) and rank 0 works on it: FMA PUT with a
 * remote event and FMA GET (GNI_GetCompleted returns the very descriptor posted), a BTE PUT
 * and a BTE GET of 4 MiB, fetching AMOs (FADD, CSWAP, FAX) and a non-fetching ADD, a CQ
 * write whose 48-bit value rank 1 reads from its CQ, and a GET past the end of the
 * registration, which the NIC answers with an error completion (never a fault). Rank 1
 * checks what landed in its memory.
 */
#include "common.h"

#define BIG (4u << 20)

struct exposed {
	uint64_t addr;
	gni_mem_handle_t mh;
};

static gni_cq_handle_t cq;
static gni_ep_handle_t ep;

static void post(int rdma, gni_post_descriptor_t *d)
{
	if (rdma)
		OK(GNI_PostRdma(ep, d));
	else
		OK(GNI_PostFma(ep, d));
	complete(cq, d);
}

static gni_post_descriptor_t desc(gni_post_type_t t, void *local, gni_mem_handle_t lmh,
				  uint64_t remote, gni_mem_handle_t rmh, uint64_t len)
{
	gni_post_descriptor_t d;
	memset(&d, 0, sizeof d);
	d.type = t;
	d.cq_mode = GNI_CQMODE_GLOBAL_EVENT;
	d.dlvr_mode = GNI_DLVMODE_PERFORMANCE;
	d.local_addr = (uint64_t)(uintptr_t)local;
	d.local_mem_hndl = lmh;
	d.remote_addr = remote;
	d.remote_mem_hndl = rmh;
	d.length = len;
	return d;
}

int main(void)
{
	test_name = "rma";
	int me = rank(), peer = 1 - me;
	CHECK(job_size() == 2, "a job of two processes");
	gni_cdm_handle_t cdm;
	gni_nic_handle_t nic;
	gni_cq_handle_t rcq;
	uint32_t addr, paddr, pinst, inst = 300 + me;

	OK(GNI_CdmCreate(inst, job_ptag(), job_cookie(), 0, &cdm));
	OK(GNI_CdmAttach(cdm, 0, &addr, &nic));
	exchange(addr, inst, peer, &paddr, &pinst);
	OK(GNI_CqCreate(nic, 64, 0, GNI_CQ_NOBLOCK, NULL, NULL, &cq));
	OK(GNI_CqCreate(nic, 64, 0, GNI_CQ_NOBLOCK, NULL, NULL, &rcq));
	OK(GNI_EpCreate(nic, cq, &ep));
	OK(GNI_EpBind(ep, paddr, pinst));

	/* Each side's buffer: 4 MiB + a page of the process's own memory. */
	unsigned char *buf;
	CHECK(posix_memalign((void **)&buf, 4096, BIG + 4096) == 0, "memory");
	memset(buf, 0, BIG + 4096);
	struct exposed mine, theirs;
	mine.addr = (uint64_t)(uintptr_t)buf;
	OK(GNI_MemRegister(nic, mine.addr, BIG + 4096, rcq, GNI_MEM_READWRITE, -1, &mine.mh));
	swap_blob(nic, paddr, pinst, &mine, &theirs, sizeof mine);

	if (me == 0) {
		unsigned char *amo = buf + BIG; /* 8-byte AMO results land here */
		/* FMA PUT of 64 bytes with a remote event, then GET them back. */
		for (int i = 0; i < 64; i++)
			buf[i] = (unsigned char)(i + 1);
		gni_post_descriptor_t d = desc(GNI_POST_FMA_PUT, buf, mine.mh, theirs.addr + 128,
					       theirs.mh, 64);
		d.cq_mode |= GNI_CQMODE_REMOTE_EVENT;
		post(0, &d);
		d = desc(GNI_POST_FMA_GET, buf + 256, mine.mh, theirs.addr + 128, theirs.mh, 64);
		post(0, &d);
		CHECK(memcmp(buf, buf + 256, 64) == 0, "FMA GET read the FMA PUT's bytes");

		/* BTE PUT of 4 MiB, BTE GET of it back into another part of the buffer. */
		for (uint32_t i = 0; i < BIG; i += 4)
			*(uint32_t *)(buf + i) = i * 2654435761u;
		d = desc(GNI_POST_RDMA_PUT, buf, mine.mh, theirs.addr, theirs.mh, BIG);
		post(1, &d);
		memset(buf, 0, BIG);
		d = desc(GNI_POST_RDMA_GET, buf, mine.mh, theirs.addr, theirs.mh, BIG);
		post(1, &d);
		for (uint32_t i = 0; i < BIG; i += 4)
			CHECK(*(uint32_t *)(buf + i) == i * 2654435761u, "BTE GET byte %u", i);

		/* AMOs on the first word of the remote page after the 4 MiB. */
		uint64_t target = theirs.addr + BIG;
		d = desc(GNI_POST_AMO, amo, mine.mh, target, theirs.mh, 8);
		d.amo_cmd = GNI_FMA_ATOMIC_FADD;
		d.first_operand = 5;
		post(0, &d);
		CHECK(*(uint64_t *)amo == 0, "FADD fetched the old value 0");
		d.amo_cmd = GNI_FMA_ATOMIC_CSWAP;
		d.first_operand = 5; /* compare */
		d.second_operand = 0xF0F0; /* swap */
		post(0, &d);
		CHECK(*(uint64_t *)amo == 5, "CSWAP fetched 5");
		d.amo_cmd = GNI_FMA_ATOMIC_FAX;
		d.first_operand = 0xFF00; /* and */
		d.second_operand = 0x000F; /* xor */
		post(0, &d);
		CHECK(*(uint64_t *)amo == 0xF0F0, "FAX fetched 0xF0F0");
		d = desc(GNI_POST_AMO, NULL, mine.mh, target, theirs.mh, 8);
		d.amo_cmd = GNI_FMA_ATOMIC_ADD;
		d.first_operand = 0x100;
		post(0, &d);

		/* A CQ write into rank 1's remote CQ. */
		d = desc(GNI_POST_CQWRITE, NULL, mine.mh, theirs.addr, theirs.mh, 0);
		d.cqwrite_value = 0xABCDEF123456ull | (0x77ull << 48);
		d.dlvr_mode = GNI_DLVMODE_NO_ADAPT;
		OK(GNI_PostCqWrite(ep, &d));
		complete(cq, &d);

		/* A GET past the end of the registration: an error completion. */
		d = desc(GNI_POST_FMA_GET, buf, mine.mh, theirs.addr + BIG + 4096 - 8, theirs.mh, 64);
		OK(GNI_PostFma(ep, &d));
		gni_return_t rc;
		gni_cq_entry_t ev = next_event(cq, &rc);
		CHECK(rc == GNI_RC_TRANSACTION_ERROR, "out of bounds GET: %s", gni_err_str[rc]);
		CHECK(!GNI_CQ_STATUS_OK(ev), "the entry carries the error");
		char why[128];
		OK(GNI_CqErrorStr(ev, why, sizeof why));
		gni_post_descriptor_t *got;
		EXPECT(GNI_RC_TRANSACTION_ERROR, GNI_GetCompleted(cq, ev, &got));
		CHECK(got == &d && d.status != 0, "the failed descriptor, with its status");
		barrier(nic, paddr, pinst);
	} else {
		/* Remote events: the PUT's (rank 0's instance id), the CQ write's value. */
		int put_seen = 0, cqw_seen = 0;
		double start = now();
		while (!(put_seen && cqw_seen)) {
			gni_cq_entry_t ev;
			gni_return_t rc = GNI_CqGetEvent(rcq, &ev);
			if (rc == GNI_RC_NOT_DONE) {
				CHECK(now() - start < 60, "remote events missing (%d %d)", put_seen,
				      cqw_seen);
				continue;
			}
			CHECK(rc == GNI_RC_SUCCESS, "remote CQ: %s", gni_err_str[rc]);
			if (GNI_CQ_GET_DATA(ev) == 0xABCDEF123456ull)
				cqw_seen = 1;
			else if (GNI_CQ_GET_INST_ID(ev) == pinst)
				put_seen = 1;
			else
				FAIL("unexpected remote event %lx", (unsigned long)ev);
		}
		barrier(nic, paddr, pinst);
		for (uint32_t i = 0; i < BIG; i += 4)
			CHECK(*(uint32_t *)(buf + i) == i * 2654435761u, "BTE PUT byte %u", i);
		uint64_t w = *(uint64_t *)(buf + BIG);
		CHECK(w == (((0xF0F0 & 0xFF00) ^ 0x000F) + 0x100), "the AMOs' result %lx",
		      (unsigned long)w);
	}
	barrier(nic, paddr, pinst);
	OK(GNI_EpDestroy(ep));
	OK(GNI_MemDeregister(nic, &mine.mh));
	OK(GNI_CqDestroy(cq));
	OK(GNI_CqDestroy(rcq));
	OK(GNI_CdmDestroy(cdm));
	free(buf);
	printf("rma: OK (rank %d)\n", me);
	return 0;
}
