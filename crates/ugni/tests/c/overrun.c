/*
 * CQ overrun: a remote CQ of 4 entries receives the remote events of 12 PUTs nobody takes in
 * time. The first event the program then gets after the loss returns GNI_RC_ERROR_RESOURCE
 * with GNI_CQ_OVERRUN set; the CQ then takes events normally again. One process: an
 * endpoint bound to a second domain on the same NIC.
 */
#include "common.h"

int main(void)
{
	test_name = "overrun";
	gni_cdm_handle_t a, b;
	gni_nic_handle_t na, nb;
	gni_cq_handle_t lcq, rcq;
	gni_ep_handle_t ep;
	uint32_t addr;

	two_domains(&a, &na, &b, &nb, &addr);
	static unsigned char src[4096] __attribute__((aligned(4096)));
	static unsigned char dst[4096] __attribute__((aligned(4096)));
	gni_mem_handle_t smh, dmh;
	loopback(na, nb, addr, 4, src, dst, sizeof src, &lcq, &rcq, &smh, &dmh, &ep);

	enum { PUTS = 12 };
	gni_post_descriptor_t d[PUTS];
	for (int i = 0; i < PUTS; i++) {
		memset(&d[i], 0, sizeof d[i]);
		src[i] = (unsigned char)(i + 1);
		d[i].type = GNI_POST_FMA_PUT;
		d[i].cq_mode = GNI_CQMODE_GLOBAL_EVENT | GNI_CQMODE_REMOTE_EVENT;
		d[i].dlvr_mode = GNI_DLVMODE_IN_ORDER;
		d[i].local_addr = (uint64_t)(uintptr_t)(src + i);
		d[i].local_mem_hndl = smh;
		d[i].remote_addr = (uint64_t)(uintptr_t)(dst + i);
		d[i].remote_mem_hndl = dmh;
		d[i].length = 1;
		OK(GNI_PostFma(ep, &d[i]));
	}
	for (int i = 0; i < PUTS; i++)
		complete(lcq, &d[i]);
	CHECK(memcmp(src, dst, PUTS) == 0, "every PUT landed");

	/* The remote CQ held 4 of 12 events: some were lost. */
	int ok = 0, overrun = 0;
	gni_cq_entry_t ev;
	gni_return_t rc;
	while ((rc = GNI_CqGetEvent(rcq, &ev)) != GNI_RC_NOT_DONE) {
		if (rc == GNI_RC_ERROR_RESOURCE) {
			CHECK(GNI_CQ_OVERRUN(ev), "ERROR_RESOURCE comes with GNI_CQ_OVERRUN");
			overrun++;
		} else {
			CHECK(rc == GNI_RC_SUCCESS, "remote CQ: %s", gni_err_str[rc]);
			ok++;
		}
	}
	CHECK(overrun == 1, "the overrun was reported once (%d)", overrun);
	CHECK(ok >= 1 && ok <= 4, "the events the CQ held, no more (%d)", ok);

	/* After the report the CQ takes events again. */
	d[0].cq_mode = GNI_CQMODE_GLOBAL_EVENT | GNI_CQMODE_REMOTE_EVENT;
	OK(GNI_PostFma(ep, &d[0]));
	complete(lcq, &d[0]);
	ev = wait_event(rcq);
	CHECK(!GNI_CQ_OVERRUN(ev), "a normal event after the overrun");
	EXPECT(GNI_RC_NOT_DONE, GNI_CqGetEvent(rcq, &ev));

	OK(GNI_EpDestroy(ep));
	OK(GNI_MemDeregister(na, &smh));
	OK(GNI_MemDeregister(nb, &dmh));
	OK(GNI_CqDestroy(lcq));
	OK(GNI_CqDestroy(rcq));
	OK(GNI_CdmDestroy(a));
	OK(GNI_CdmDestroy(b));
	printf("overrun: OK\n");
	return 0;
}
