/*
 * Bad calls get uGNI's return codes, never a crash: null and made-up handles, bad modes and
 * flags, a foreign cookie, double attach, an unknown device, a non-blocking CQ waited on,
 * empty CQs, oversized and duplicate datagrams, unbound endpoints, unaligned GETs and AMOs,
 * Aries-only calls, a CQ still in use. One process.
 */
#include "common.h"

int main(void)
{
	test_name = "errors";
	gni_cdm_handle_t cdm, cdm2, cdm3;
	gni_nic_handle_t nic, nic2;
	gni_cq_handle_t cq, bcq;
	gni_ep_handle_t ep, ep2;
	gni_cq_entry_t ev;
	uint32_t addr, cpu, a, id, got;
	int n;
	gni_post_state_t st;
	gni_cdm_handle_t junk = (gni_cdm_handle_t)(uintptr_t)0x12345678;
	uint8_t ptag = job_ptag();
	uint32_t cookie = job_cookie();

	/* Devices and versions. */
	OK(GNI_GetNumLocalDevices(&n));
	CHECK(n == 1, "one local device, got %d", n);
	EXPECT(GNI_RC_INVALID_PARAM, GNI_GetNumLocalDevices(NULL));
	OK(GNI_CdmGetNicAddress(0, &addr, &cpu));
	EXPECT(GNI_RC_NO_MATCH, GNI_CdmGetNicAddress(3, &addr, &cpu));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CdmGetNicAddress(0, NULL, &cpu));
	gni_nic_device_t dt;
	OK(GNI_GetDeviceType(&dt));
	CHECK(dt == GNI_DEVICE_GEMINI, "a Gemini");
	uint32_t ver;
	OK(GNI_GetVersion(&ver));
	CHECK(GNI_GET_MINOR(ver) == GNI_MINOR_REV, "the header's minor revision");

	/* Domains. */
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CdmCreate(0, ptag, cookie, 0, NULL));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CdmCreate(0, ptag, cookie, GNI_CDM_MODE_PRIV_RESERVED_1, &cdm));
	EXPECT(GNI_RC_INVALID_PARAM,
	       GNI_CdmCreate(0, ptag, cookie, GNI_CDM_MODE_FMA_SHARED | GNI_CDM_MODE_FMA_DEDICATED, &cdm));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CdmCreate(0, 0, cookie, 0, &cdm));
	OK(GNI_CdmCreate(7, ptag, cookie + 8, 0, &cdm2));
	EXPECT(GNI_RC_PERMISSION_ERROR, GNI_CdmAttach(cdm2, 0, &addr, &nic2));
	OK(GNI_CdmDestroy(cdm2));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CdmDestroy(cdm2));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CdmDestroy(junk));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CdmAttach(junk, 0, &addr, &nic));

	OK(GNI_CdmCreate(1, ptag, cookie, GNI_CDM_MODE_FORK_PARTCOPY | GNI_CDM_MODE_ERR_NO_KILL, &cdm));
	EXPECT(GNI_RC_NO_MATCH, GNI_CdmAttach(cdm, 5, &addr, &nic));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CdmAttach(cdm, 0, NULL, &nic));
	OK(GNI_CdmAttach(cdm, 0, &a, &nic));
	OK(GNI_CdmGetNicAddress(0, &addr, &cpu));
	CHECK(a == addr, "the attach answers the device's address (%u, %u)", a, addr);
	EXPECT(GNI_RC_INVALID_STATE, GNI_CdmAttach(cdm, 0, &a, &nic2));
	/* A second domain with the same instance id on the NIC. */
	OK(GNI_CdmCreate(1, ptag, cookie, 0, &cdm3));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CdmAttach(cdm3, 0, &a, &nic2));
	OK(GNI_CdmDestroy(cdm3));

	/* Completion queues. */
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CqCreate(nic, 16, 0, 0x80, NULL, NULL, &cq));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CqCreate((gni_nic_handle_t)junk, 16, 0, GNI_CQ_NOBLOCK, NULL, NULL, &cq));
	OK(GNI_CqCreate(nic, 16, 0, GNI_CQ_NOBLOCK, NULL, NULL, &cq));
	OK(GNI_CqCreate(nic, 16, 0, GNI_CQ_BLOCKING, NULL, NULL, &bcq));
	EXPECT(GNI_RC_NOT_DONE, GNI_CqGetEvent(cq, &ev));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CqGetEvent(cq, NULL));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CqGetEvent((gni_cq_handle_t)nic, &ev));
	EXPECT(GNI_RC_ERROR_RESOURCE, GNI_CqWaitEvent(cq, 1, &ev));
	EXPECT(GNI_RC_TIMEOUT, GNI_CqWaitEvent(bcq, 10, &ev));
	EXPECT(GNI_RC_NOT_DONE, GNI_CqTestEvent(cq));
	gni_post_descriptor_t *pd;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_GetCompleted(cq, 0, NULL));
	char buf[8];
	EXPECT(GNI_RC_SIZE_ERROR, GNI_CqErrorStr(0, buf, 2));

	/* Endpoints and datagrams. */
	OK(GNI_EpCreate(nic, cq, &ep));
	EXPECT(GNI_RC_ERROR_RESOURCE, GNI_CqDestroy(cq));
	char big[200] = {0}, out[128];
	EXPECT(GNI_RC_SIZE_ERROR, GNI_EpPostDataWId(ep, big, 129, out, sizeof out, 1));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_EpPostDataWId(ep, big, 8, out, sizeof out, (uint64_t)-1));
	OK(GNI_EpPostDataWId(ep, big, 8, out, sizeof out, 1));
	EXPECT(GNI_RC_ERROR_RESOURCE, GNI_EpPostDataWId(ep, big, 8, out, sizeof out, 2));
	OK(GNI_EpPostDataTestById(ep, 1, &st, &a, &id));
	CHECK(st == GNI_POST_PENDING, "a wildcard nobody answered is pending (%d)", st);
	EXPECT(GNI_RC_INVALID_PARAM, GNI_EpPostDataWait(ep, 0, &st, &a, &id));
	EXPECT(GNI_RC_TIMEOUT, GNI_EpPostDataWaitById(ep, 1, 20, &st, &a, &id));
	uint64_t did;
	EXPECT(GNI_RC_NO_MATCH, GNI_PostDataProbeById(nic, &did));
	EXPECT(GNI_RC_TIMEOUT, GNI_PostdataProbeWaitById(nic, 20, &did));
	OK(GNI_EpPostDataCancelById(ep, 1));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_EpBind((gni_ep_handle_t)cq, 0, 0));

	/* Short messages and posts on an unbound endpoint. */
	gni_smsg_attr_t at;
	memset(&at, 0, sizeof at);
	unsigned int sz;
	at.msg_type = GNI_SMSG_TYPE_MBOX_AUTO_RETRANSMIT;
	at.mbox_maxcredit = 0;
	at.msg_maxsize = 128;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_SmsgBufferSizeNeeded(&at, &sz));
	at.mbox_maxcredit = 8;
	OK(GNI_SmsgBufferSizeNeeded(&at, &sz));
	CHECK(sz >= 8 * 128, "a mailbox holds its credits (%u bytes)", sz);
	EXPECT(GNI_RC_INVALID_STATE, GNI_SmsgInit(ep, &at, &at));
	EXPECT(GNI_RC_INVALID_STATE, GNI_SmsgSendWTag(ep, buf, 4, NULL, 0, 1, 0));
	EXPECT(GNI_RC_ERROR_RESOURCE, GNI_SmsgSendWTag(ep, big, 40000, big, 40000, 1, 0));

	gni_post_descriptor_t d;
	memset(&d, 0, sizeof d);
	d.type = GNI_POST_FMA_GET;
	d.cq_mode = GNI_CQMODE_GLOBAL_EVENT;
	d.local_addr = 0x1000;
	d.remote_addr = 0x2002;
	d.length = 8;
	EXPECT(GNI_RC_ALIGNMENT_ERROR, GNI_PostFma(ep, &d));
	d.remote_addr = 0x2000;
	d.length = 6;
	EXPECT(GNI_RC_ALIGNMENT_ERROR, GNI_PostFma(ep, &d));
	d.length = 0;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_PostFma(ep, &d));
	d.type = GNI_POST_AMO;
	d.amo_cmd = GNI_FMA_ATOMIC_FADD;
	d.length = 8;
	d.remote_addr = 0x2004;
	EXPECT(GNI_RC_ALIGNMENT_ERROR, GNI_PostFma(ep, &d));
	d.amo_cmd = GNI_FMA_ATOMIC2_FIADD;
	d.remote_addr = 0x2000;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_PostFma(ep, &d));
	d.amo_cmd = GNI_FMA_ATOMIC_FADD_C;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_PostFma(ep, &d));
	d.type = GNI_POST_RDMA_PUT;
	EXPECT(GNI_RC_ILLEGAL_OP, GNI_PostFma(ep, &d));
	d.type = GNI_POST_FMA_PUT;
	EXPECT(GNI_RC_ILLEGAL_OP, GNI_PostRdma(ep, &d));
	d.cq_mode = GNI_CQMODE_LOCAL_EVENT | GNI_CQMODE_GLOBAL_EVENT;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_PostFma(ep, &d));
	d.cq_mode = GNI_CQMODE_GLOBAL_EVENT;
	d.type = 77;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_PostFma(ep, &d));
	d.type = GNI_POST_FMA_PUT;
	EXPECT(GNI_RC_INVALID_STATE, GNI_PostFma(ep, &d));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_PostFma(ep, NULL));
	EXPECT(GNI_RC_DESCRIPTOR_ERROR, GNI_GetCompleted(cq, 0, &pd));
	CHECK(pd == NULL, "no descriptor for an event of no post");

	/* Memory. */
	gni_mem_handle_t mh;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_MemRegister(nic, (uint64_t)(uintptr_t)buf, 0, NULL, GNI_MEM_READWRITE, -1, &mh));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_MemRegister(nic, (uint64_t)(uintptr_t)buf, 8, NULL, 0x40000000, -1, &mh));
	mh.qword1 = 1;
	mh.qword2 = 2;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_MemDeregister(nic, &mh));
	int yes;
	EXPECT(GNI_RC_INVALID_PARAM, GNI_MemHndlQueryAttr(&mh, GNI_MEMHNDL_ATTR_READONLY, &yes));

	/* Aries-only and absent features. */
	gni_ce_handle_t ce;
	EXPECT(GNI_RC_ILLEGAL_OP, GNI_CeCreate(nic, &ce));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CeCreate((gni_nic_handle_t)junk, &ce));
	gni_err_handle_t eh;
	EXPECT(GNI_RC_ILLEGAL_OP, GNI_SubscribeErrors(nic, 0, GNI_ERRMASK_TRANSACTION, 0, &eh));

	/* Statistics and resources. */
	OK(GNI_GetNicStat(nic, GNI_STAT_SMSG_RETRANS_COUNT, &got));
	CHECK(got == 0, "no retransmission yet");
	EXPECT(GNI_RC_INVALID_PARAM, GNI_GetNicStat(nic, GNI_NUM_STATS, &got));
	gni_job_res_desc_t jr;
	OK(GNI_GetJobResInfo(0, ptag, GNI_JOB_RES_MDD, &jr));
	CHECK(jr.limit == 4096, "4K MDDs (%lu)", (unsigned long)jr.limit);

	/* Teardown: the endpoint first, then the CQs, then the domain. */
	OK(GNI_EpDestroy(ep));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_EpDestroy(ep));
	OK(GNI_CqDestroy(cq));
	OK(GNI_CqDestroy(bcq));
	OK(GNI_EpCreate(nic, NULL, &ep2));
	OK(GNI_CdmDestroy(cdm));
	/* Everything made under the domain went with it. */
	EXPECT(GNI_RC_INVALID_PARAM, GNI_EpDestroy(ep2));
	EXPECT(GNI_RC_INVALID_PARAM, GNI_CqCreate(nic, 16, 0, GNI_CQ_NOBLOCK, NULL, NULL, &cq));
	printf("errors: OK\n");
	return 0;
}
