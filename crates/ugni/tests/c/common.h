/*
 * Helpers of the C tests of libugni.so.0: checks that name the failing call, the job's
 * credentials as a Cray launcher hands them over (PMI_GNI_*), and, for tests of two
 * processes, the exchange of NIC addresses through files in $UGNI_TEST_DIR (each program
 * brings its own, as Cray's examples bring PMI).
 */
#ifndef UGNI_TEST_COMMON_H
#define UGNI_TEST_COMMON_H

#include <gni_pub.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *test_name = "test";

#define FAIL(...)                                                                  \
	do {                                                                       \
		fprintf(stderr, "%s: %s:%d: ", test_name, __FILE__, __LINE__);     \
		fprintf(stderr, __VA_ARGS__);                                      \
		fprintf(stderr, "\n");                                             \
		exit(1);                                                           \
	} while (0)

/* `call` must return `want`. */
#define EXPECT(want, call)                                                         \
	do {                                                                       \
		gni_return_t rc_ = (call);                                         \
		if (rc_ != (want))                                                 \
			FAIL("%s returned %s, expected %s", #call,                 \
			     rc_ <= 13 ? gni_err_str[rc_] : "?",                   \
			     (want) <= 13 ? gni_err_str[(want)] : "?");            \
	} while (0)

#define OK(call) EXPECT(GNI_RC_SUCCESS, call)

#define CHECK(cond, ...)                                                           \
	do {                                                                       \
		if (!(cond))                                                       \
			FAIL(__VA_ARGS__);                                         \
	} while (0)

static inline unsigned long env_num(const char *var, unsigned long dflt)
{
	const char *v = getenv(var);
	return v ? strtoul(v, NULL, 10) : dflt;
}

/* The job's ptag and cookie (nicemu's defaults when unset). */
static inline uint8_t job_ptag(void) { return (uint8_t)env_num("PMI_GNI_PTAG", 16); }
static inline uint32_t job_cookie(void) { return (uint32_t)env_num("PMI_GNI_COOKIE", 0x40000000ul); }
static inline int rank(void) { return (int)env_num("PMI_RANK", 0); }
static inline int job_size(void) { return (int)env_num("PMI_SIZE", 1); }

static inline double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Publish this rank's NIC address and instance id; read `peer`'s (waits up to 60 s). */
static inline void exchange(uint32_t addr, uint32_t inst, int peer, uint32_t *peer_addr,
		     uint32_t *peer_inst)
{
	const char *dir = getenv("UGNI_TEST_DIR");
	char path[4096], tmp[4096];
	CHECK(dir != NULL, "UGNI_TEST_DIR is not set");
	snprintf(tmp, sizeof tmp, "%s/.addr.%d", dir, rank());
	snprintf(path, sizeof path, "%s/addr.%d", dir, rank());
	FILE *f = fopen(tmp, "w");
	CHECK(f != NULL, "cannot write %s", tmp);
	fprintf(f, "%u %u\n", addr, inst);
	fclose(f);
	CHECK(rename(tmp, path) == 0, "cannot rename %s", tmp);
	snprintf(path, sizeof path, "%s/addr.%d", dir, peer);
	double start = now();
	for (;;) {
		f = fopen(path, "r");
		if (f != NULL) {
			int n = fscanf(f, "%u %u", peer_addr, peer_inst);
			fclose(f);
			if (n == 2)
				return;
		}
		CHECK(now() - start < 60, "rank %d never published its address", peer);
		usleep(1000);
	}
}

/* Swap `len` bytes with the peer over a bound datagram (both sides call it). */
static inline void swap_blob(gni_nic_handle_t nic, uint32_t paddr, uint32_t pinst, const void *in,
			     void *out, uint16_t len)
{
	gni_ep_handle_t ep;
	gni_post_state_t st;
	uint32_t ra, ri;
	OK(GNI_EpCreate(nic, NULL, &ep));
	OK(GNI_EpBind(ep, paddr, pinst));
	OK(GNI_EpPostData(ep, (void *)in, len, out, len));
	OK(GNI_EpPostDataWait(ep, 60000, &st, &ra, &ri));
	CHECK(st == GNI_POST_COMPLETED && ra == paddr && ri == pinst, "datagram swap (%d)", st);
	OK(GNI_EpUnbind(ep));
	OK(GNI_EpDestroy(ep));
}

/* Both sides wait for each other. */
static inline void barrier(gni_nic_handle_t nic, uint32_t paddr, uint32_t pinst)
{
	uint32_t a = 0x5a5a5a5a, b = 0;
	swap_blob(nic, paddr, pinst, &a, &b, sizeof a);
	CHECK(b == 0x5a5a5a5a, "barrier token");
}

/* The next event of `cq` (polling up to 60 s); its return code in *rc. */
static inline gni_cq_entry_t next_event(gni_cq_handle_t cq, gni_return_t *rc)
{
	gni_cq_entry_t ev = 0;
	double start = now();
	for (;;) {
		*rc = GNI_CqGetEvent(cq, &ev);
		if (*rc != GNI_RC_NOT_DONE)
			return ev;
		CHECK(now() - start < 60, "no CQ event within 60 s");
	}
}

/* The next event of `cq`, which must be GNI_RC_SUCCESS. */
static inline gni_cq_entry_t wait_event(gni_cq_handle_t cq)
{
	gni_return_t rc;
	gni_cq_entry_t ev = next_event(cq, &rc);
	CHECK(rc == GNI_RC_SUCCESS, "CQ event returned %s", gni_err_str[rc]);
	return ev;
}

/* Two domains of this process attached to its NIC, instance ids 1 and 2 (one process
 * playing both ends); the NIC's address in *addr. */
static inline void two_domains(gni_cdm_handle_t *a, gni_nic_handle_t *na, gni_cdm_handle_t *b,
			       gni_nic_handle_t *nb, uint32_t *addr)
{
	OK(GNI_CdmCreate(1, job_ptag(), job_cookie(), 0, a));
	OK(GNI_CdmAttach(*a, 0, addr, na));
	OK(GNI_CdmCreate(2, job_ptag(), job_cookie(), 0, b));
	OK(GNI_CdmAttach(*b, 0, addr, nb));
}

/* Between two_domains' domains: a local CQ of 64 entries on `na`, a remote CQ of
 * `rcq_entries` on `nb`, `src` registered on `na` and `dst` on `nb` with the remote CQ
 * (`len` bytes each), and an endpoint of `na` bound to instance 2. */
static inline void loopback(gni_nic_handle_t na, gni_nic_handle_t nb, uint32_t addr,
			    uint32_t rcq_entries, void *src, void *dst, size_t len,
			    gni_cq_handle_t *lcq, gni_cq_handle_t *rcq, gni_mem_handle_t *smh,
			    gni_mem_handle_t *dmh, gni_ep_handle_t *ep)
{
	OK(GNI_CqCreate(na, 64, 0, GNI_CQ_NOBLOCK, NULL, NULL, lcq));
	OK(GNI_CqCreate(nb, rcq_entries, 0, GNI_CQ_NOBLOCK, NULL, NULL, rcq));
	OK(GNI_MemRegister(na, (uint64_t)(uintptr_t)src, len, NULL, GNI_MEM_READWRITE, -1, smh));
	OK(GNI_MemRegister(nb, (uint64_t)(uintptr_t)dst, len, *rcq, GNI_MEM_READWRITE, -1, dmh));
	OK(GNI_EpCreate(na, *lcq, ep));
	OK(GNI_EpBind(*ep, addr, 2));
}

/* Wait for the completion of the post `d` on local CQ `cq`. */
static inline void complete(gni_cq_handle_t cq, gni_post_descriptor_t *d)
{
	gni_cq_entry_t ev = wait_event(cq);
	gni_post_descriptor_t *got = NULL;
	CHECK(GNI_CQ_GET_TYPE(ev) == GNI_CQ_EVENT_TYPE_POST, "a POST event");
	OK(GNI_GetCompleted(cq, ev, &got));
	CHECK(got == d, "GNI_GetCompleted returns the posted descriptor (%p, %p)", (void *)got,
	      (void *)d);
}

#endif
