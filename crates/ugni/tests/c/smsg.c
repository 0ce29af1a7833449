/*
 * SMSG between two processes, as Open MPI's ugni BTL uses it: each rank registers a mailbox
 * of its own memory with its remote CQ as dst_cq, the attributes are swapped over a
 * datagram, GNI_SmsgInit; then a ping-pong of tagged messages of 0 to 200 bytes, every byte
 * checked, the sender's local events carrying msg_id; then credits: with the receiver not
 * taking messages, the sender has exactly mbox_maxcredit sends before GNI_RC_NOT_DONE, and
 * sends again once the receiver released what it took.
 */
#include "common.h"

#define CREDITS 4
#define MAXSIZE 256
#define ROUNDS 200

static gni_ep_handle_t ep;
static gni_cq_handle_t tx_cq, rx_cq;

static void fill(unsigned char *b, int n, int seed)
{
	for (int i = 0; i < n; i++)
		b[i] = (unsigned char)(seed * 31 + i * 7);
}

/* Send a message of `n` bytes of data (seed `seed`) with tag `tag`, retrying on no credit. */
static void send_msg(int seed, int n, uint8_t tag)
{
	unsigned char data[MAXSIZE];
	uint32_t hdr[2] = {(uint32_t)seed, (uint32_t)n};
	fill(data, n, seed);
	gni_return_t rc;
	double start = now();
	while ((rc = GNI_SmsgSendWTag(ep, hdr, sizeof hdr, data, n, 1000 + seed, tag)) ==
	       GNI_RC_NOT_DONE)
		CHECK(now() - start < 60, "no credit within 60 s");
	CHECK(rc == GNI_RC_SUCCESS, "GNI_SmsgSendWTag: %s", gni_err_str[rc]);
	gni_cq_entry_t ev = wait_event(tx_cq);
	CHECK(GNI_CQ_GET_TYPE(ev) == GNI_CQ_EVENT_TYPE_SMSG, "a local SMSG event");
	CHECK(GNI_CQ_GET_MSG_ID(ev) == (uint64_t)(1000 + seed), "the msg_id (%lu)",
	      (unsigned long)GNI_CQ_GET_MSG_ID(ev));
}

/* Take the next message, which must be message `seed` with tag `tag`, and release it. */
static void recv_msg(int seed, uint8_t tag)
{
	void *p = NULL;
	uint8_t t = GNI_SMSG_ANY_TAG;
	gni_return_t rc;
	double start = now();
	for (;;) {
		/* Remote events tell that something arrived (or credits came back): take them
		 * all, then look at the mailbox, as uGNI users do. */
		gni_cq_entry_t ev;
		gni_return_t e;
		while ((e = GNI_CqGetEvent(rx_cq, &ev)) == GNI_RC_SUCCESS)
			CHECK(GNI_CQ_GET_TYPE(ev) == GNI_CQ_EVENT_TYPE_SMSG, "a remote SMSG event");
		CHECK(e == GNI_RC_NOT_DONE, "remote CQ: %s", gni_err_str[e]);
		rc = GNI_SmsgGetNextWTag(ep, &p, &t);
		if (rc == GNI_RC_SUCCESS)
			break;
		CHECK(rc == GNI_RC_NOT_DONE, "GNI_SmsgGetNextWTag: %s", gni_err_str[rc]);
		CHECK(now() - start < 60, "message %d never came", seed);
	}
	CHECK(t == tag, "tag %u, expected %u", t, tag);
	uint32_t hdr[2];
	memcpy(hdr, p, sizeof hdr);
	CHECK(hdr[0] == (uint32_t)seed, "message %u, expected %d", hdr[0], seed);
	unsigned char want[MAXSIZE];
	fill(want, (int)hdr[1], seed);
	CHECK(memcmp((char *)p + sizeof hdr, want, hdr[1]) == 0, "the bytes of message %d", seed);
	OK(GNI_SmsgRelease(ep));
	EXPECT(GNI_RC_NOT_DONE, GNI_SmsgRelease(ep));
}

int main(void)
{
	test_name = "smsg";
	int me = rank(), peer = 1 - me;
	CHECK(job_size() == 2, "a job of two processes");
	gni_cdm_handle_t cdm;
	gni_nic_handle_t nic;
	uint32_t addr, paddr, pinst, inst = 200 + me;

	OK(GNI_CdmCreate(inst, job_ptag(), job_cookie(), GNI_CDM_MODE_FMA_SHARED, &cdm));
	OK(GNI_CdmAttach(cdm, 0, &addr, &nic));
	exchange(addr, inst, peer, &paddr, &pinst);
	OK(GNI_CqCreate(nic, 64, 0, GNI_CQ_NOBLOCK, NULL, NULL, &tx_cq));
	OK(GNI_CqCreate(nic, 256, 0, GNI_CQ_NOBLOCK, NULL, NULL, &rx_cq));

	/* The mailbox: this process's memory, registered with the remote CQ. */
	gni_smsg_attr_t mine, theirs;
	memset(&mine, 0, sizeof mine);
	mine.msg_type = GNI_SMSG_TYPE_MBOX_AUTO_RETRANSMIT;
	mine.mbox_maxcredit = CREDITS;
	mine.msg_maxsize = MAXSIZE;
	unsigned int size;
	OK(GNI_SmsgBufferSizeNeeded(&mine, &size));
	size = (size + 63) & ~63u;
	void *mbox;
	CHECK(posix_memalign(&mbox, 4096, size) == 0, "mailbox memory");
	memset(mbox, 0, size);
	OK(GNI_MemRegister(nic, (uint64_t)(uintptr_t)mbox, size, rx_cq, GNI_MEM_READWRITE, -1,
			   &mine.mem_hndl));
	mine.msg_buffer = mbox;
	mine.buff_size = size;
	mine.mbox_offset = 0;
	swap_blob(nic, paddr, pinst, &mine, &theirs, sizeof mine);

	OK(GNI_EpCreate(nic, tx_cq, &ep));
	OK(GNI_EpBind(ep, paddr, pinst));
	OK(GNI_EpSetEventData(ep, inst, inst));
	OK(GNI_SmsgInit(ep, &mine, &theirs));
	EXPECT(GNI_RC_INVALID_STATE, GNI_SmsgInit(ep, &mine, &theirs));
	unsigned char big[MAXSIZE + 8] = {0};
	EXPECT(GNI_RC_ERROR_RESOURCE, GNI_SmsgSendWTag(ep, big, 8, big, MAXSIZE, 1, 0));

	/* Ping-pong. */
	for (int i = 0; i < ROUNDS; i++) {
		int n = i % 201;
		if (me == 0) {
			send_msg(i, n, (uint8_t)(i % 7));
			recv_msg(i + 100000, 9);
		} else {
			recv_msg(i, (uint8_t)(i % 7));
			send_msg(i + 100000, n, 9);
		}
	}

	/* Credits: rank 1 does not take messages until told over a datagram. */
	if (me == 0) {
		uint32_t hdr[2] = {0, 0};
		for (int k = 0; k < CREDITS; k++) {
			hdr[0] = 500 + k;
			OK(GNI_SmsgSendWTag(ep, hdr, sizeof hdr, NULL, 0, 500 + k, 3));
		}
		EXPECT(GNI_RC_NOT_DONE, GNI_SmsgSendWTag(ep, hdr, sizeof hdr, NULL, 0, 599, 3));
		for (int k = 0; k < CREDITS; k++)
			wait_event(tx_cq);
		barrier(nic, paddr, pinst);
		/* The receiver released them: credits come back. */
		send_msg(504, 16, 3);
	} else {
		barrier(nic, paddr, pinst);
		for (int k = 0; k < CREDITS; k++)
			recv_msg(500 + k, 3);
		recv_msg(504, 3);
	}
	barrier(nic, paddr, pinst);

	OK(GNI_EpDestroy(ep));
	OK(GNI_MemDeregister(nic, &mine.mem_hndl));
	OK(GNI_CqDestroy(tx_cq));
	OK(GNI_CqDestroy(rx_cq));
	OK(GNI_CdmDestroy(cdm));
	free(mbox);
	printf("smsg: OK (rank %d)\n", me);
	return 0;
}
