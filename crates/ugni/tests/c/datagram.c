/*
 * Two processes set up a connection as uGNI users do (Open MPI's ugni BTL): rank 1 listens
 * with a wildcard datagram posted with an id on an unbound endpoint; rank 0 binds an
 * endpoint to rank 1 and posts a bound datagram; the exchange swaps both payloads. Rank 1
 * finds it with GNI_PostdataProbeWaitById, collects it with GNI_EpPostDataWaitById and
 * binds to the peer the exchange names; a second exchange between the bound endpoints ends
 * the test on both sides together.
 */
#include "common.h"

int main(void)
{
	test_name = "datagram";
	int me = rank(), peer = 1 - me;
	CHECK(job_size() == 2, "a job of two processes");
	gni_cdm_handle_t cdm;
	gni_nic_handle_t nic;
	gni_ep_handle_t ep;
	uint32_t addr, paddr, pinst, raddr, rid;
	gni_post_state_t st;
	uint32_t inst = 100 + me;

	OK(GNI_CdmCreate(inst, job_ptag(), job_cookie(),
			 GNI_CDM_MODE_FMA_SHARED | GNI_CDM_MODE_FAST_DATAGRAM_POLL, &cdm));
	OK(GNI_CdmAttach(cdm, 0, &addr, &nic));
	const char *loc = getenv("PMI_GNI_LOC_ADDR");
	if (loc != NULL)
		CHECK(addr == strtoul(loc, NULL, 10), "the NIC address is PMI_GNI_LOC_ADDR (%u, %s)",
		      addr, loc);
	exchange(addr, inst, peer, &paddr, &pinst);
	CHECK(paddr != addr, "each process has its own NIC (%u)", addr);

	char in[128], out[128];
	memset(out, 0, sizeof out);
	snprintf(in, sizeof in, "hello from rank %d", me);
	OK(GNI_EpCreate(nic, NULL, &ep));
	if (me == 1) {
		OK(GNI_EpPostDataWId(ep, in, strlen(in) + 1, out, sizeof out, 42));
		uint64_t id = 0;
		OK(GNI_PostdataProbeWaitById(nic, 60000, &id));
		CHECK(id == 42, "the probe names the datagram (%lu)", (unsigned long)id);
		OK(GNI_EpPostDataWaitById(ep, 42, -1, &st, &raddr, &rid));
		CHECK(st == GNI_POST_COMPLETED, "completed (%d)", st);
		CHECK(raddr == paddr && rid == pinst, "from rank 0 (%u %u)", raddr, rid);
		CHECK(strcmp(out, "hello from rank 0") == 0, "rank 0's payload: %s", out);
		OK(GNI_EpBind(ep, raddr, rid));
	} else {
		OK(GNI_EpBind(ep, paddr, pinst));
		OK(GNI_EpPostData(ep, in, strlen(in) + 1, out, sizeof out));
		OK(GNI_EpPostDataWait(ep, 60000, &st, &raddr, &rid));
		CHECK(st == GNI_POST_COMPLETED, "completed (%d)", st);
		CHECK(raddr == paddr && rid == pinst, "from rank 1 (%u %u)", raddr, rid);
		CHECK(strcmp(out, "hello from rank 1") == 0, "rank 1's payload: %s", out);
	}
	EXPECT(GNI_RC_INVALID_STATE, GNI_EpBind(ep, paddr, pinst));

	/* Bound to bound, both sides post: the last exchange. */
	uint32_t token = 0xC0FFEE00 + me, back = 0;
	OK(GNI_EpPostData(ep, &token, sizeof token, &back, sizeof back));
	OK(GNI_EpPostDataWait(ep, 60000, &st, &raddr, &rid));
	CHECK(st == GNI_POST_COMPLETED && back == 0xC0FFEE00u + peer, "the last exchange (%x)", back);

	OK(GNI_EpUnbind(ep));
	OK(GNI_EpDestroy(ep));
	OK(GNI_CdmDestroy(cdm));
	printf("datagram: OK (rank %d)\n", me);
	return 0;
}
