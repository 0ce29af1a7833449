/*
 * Teardown in the order Open MPI's ugni BTL uses at MPI_Finalize: the remote CQ that the
 * mailboxes' registration names is destroyed first, the registration later (its
 * registration cache goes last). Cray's header has GNI_CqDestroy refuse only a CQ that
 * endpoints still use, so the CQ goes with GNI_RC_SUCCESS; the registration stays usable
 * (a PUT into it still lands) and raises no event any more, not even in a CQ created
 * after, which may reuse the destroyed one's number. One process, two domains.
 */
#include "common.h"

int main(void)
{
	test_name = "teardown";
	gni_cdm_handle_t a, b;
	gni_nic_handle_t na, nb;
	gni_cq_handle_t lcq, rcq, rcq2;
	gni_ep_handle_t ep;
	uint32_t addr;

	two_domains(&a, &na, &b, &nb, &addr);
	static unsigned char src[4096] __attribute__((aligned(4096)));
	static unsigned char dst[4096] __attribute__((aligned(4096)));
	gni_mem_handle_t smh, dmh;
	loopback(na, nb, addr, 64, src, dst, sizeof src, &lcq, &rcq, &smh, &dmh, &ep);

	gni_post_descriptor_t d;
	memset(&d, 0, sizeof d);
	d.type = GNI_POST_FMA_PUT;
	d.cq_mode = GNI_CQMODE_GLOBAL_EVENT | GNI_CQMODE_REMOTE_EVENT;
	d.dlvr_mode = GNI_DLVMODE_IN_ORDER;
	d.local_addr = (uint64_t)(uintptr_t)src;
	d.local_mem_hndl = smh;
	d.remote_addr = (uint64_t)(uintptr_t)dst;
	d.remote_mem_hndl = dmh;
	d.length = 64;

	/* While the CQ lives, a PUT into the region raises a remote event there. */
	memset(src, 0x11, 64);
	OK(GNI_PostFma(ep, &d));
	complete(lcq, &d);
	gni_cq_entry_t ev = wait_event(rcq);
	CHECK(GNI_CQ_STATUS_OK(ev), "remote event status");
	CHECK(dst[0] == 0x11 && dst[63] == 0x11, "the first PUT landed");

	/* The endpoint's CQ is held by the endpoint; the registration's CQ is not. */
	EXPECT(GNI_RC_ERROR_RESOURCE, GNI_CqDestroy(lcq));
	OK(GNI_CqDestroy(rcq));
	gni_cq_entry_t none;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CqGetEvent(rcq, &none));

	/* A new CQ of the same domain (perhaps the same number) hears nothing of the region. */
	OK(GNI_CqCreate(nb, 64, 0, GNI_CQ_NOBLOCK, NULL, NULL, &rcq2));
	memset(src, 0x22, 64);
	OK(GNI_PostFma(ep, &d));
	complete(lcq, &d);
	CHECK(dst[0] == 0x22 && dst[63] == 0x22, "a PUT after the CQ went still lands");
	EXPECT(GNI_RC_NOT_DONE, GNI_CqGetEvent(rcq2, &none));

	/* Then the rest, in Open MPI's order: endpoints, CQs, registrations, domains. */
	OK(GNI_EpUnbind(ep));
	OK(GNI_EpDestroy(ep));
	OK(GNI_CqDestroy(lcq));
	OK(GNI_CqDestroy(rcq2));
	OK(GNI_MemDeregister(nb, &dmh));
	OK(GNI_MemDeregister(na, &smh));
	OK(GNI_CdmDestroy(a));
	OK(GNI_CdmDestroy(b));
	printf("teardown: OK\n");
	return 0;
}
