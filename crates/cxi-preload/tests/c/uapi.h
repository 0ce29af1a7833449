/*
 * The part of the Cassini uAPI (what HPE's libcxi writes to /dev/cxiN) these tests use,
 * written for nicemu from the facts of shs-cxi-driver's cxi-abi.h: opcode numbers, struct
 * sizes and field offsets on x86-64 (the same facts crates/driver/src/cassini/uapi checks).
 * Every request starts with its opcode; a request with a response carries the response's
 * address at offset 8, where the driver writes the answer.
 */
#ifndef NICEMU_TEST_UAPI_H
#define NICEMU_TEST_UAPI_H

#include <assert.h>
#include <stdint.h>

enum {
	OP_LNI_ALLOC = 1,
	OP_LNI_FREE = 2,
	OP_DOMAIN_ALLOC = 4,
	OP_DOMAIN_FREE = 5,
	OP_CP_FREE = 7,
	OP_CQ_FREE = 9,
	OP_ATU_MAP = 11,
	OP_ATU_UNMAP = 12,
	OP_EQ_ALLOC = 13,
	OP_EQ_FREE = 14,
	OP_PTE_ALLOC = 17,
	OP_PTE_FREE = 18,
	OP_PTE_MAP = 19,
	OP_PTE_UNMAP = 20,
	OP_WAIT_ALLOC = 23,
	OP_WAIT_FREE = 24,
	OP_SVC_LIST_GET = 27,
	OP_SVC_ALLOC = 28,
	OP_DEV_INFO_GET = 52,
	OP_TRIG_CP_ALLOC = 83,
	OP_CQ_ALLOC_BUF = 86,
	OP_MAX = 110,
};

/* An mmap token: the offset and length to pass to mmap. */
struct tok {
	uint64_t offset;
	uint64_t size;
};

struct hdr_cmd { /* 16 bytes: every request with a response starts so */
	uint32_t op, pad;
	uint64_t resp;
};

struct lni_alloc_cmd { /* 24 */
	uint32_t op, pad;
	uint64_t resp;
	uint32_t svc_id, pad1;
};

struct lni_free_cmd { /* 8 */
	uint32_t op, lni;
};

struct domain_alloc_cmd { /* 32 */
	uint32_t op, pad;
	uint64_t resp;
	uint32_t lni, vni, pid, pad1;
};
struct domain_alloc_resp { /* 12 */
	uint32_t domain, vni, pid;
};

struct trig_cp_alloc_cmd { /* 40; cp_type 0 = the triggered LCID 0, 1 = any other */
	uint32_t op, pad;
	uint64_t resp;
	uint32_t lni, vni, tc, tc_type, cp_type, pad1;
};
struct cp_alloc_resp { /* 8 */
	uint32_t cp, lcid;
};

struct cq_opts { /* 24 */
	uint32_t count, policy, stat_cnt_pool, flags, lcid, lpe_cdt_thresh_id;
};
struct cq_alloc_buf_cmd { /* 72 */
	uint32_t op, pad;
	uint64_t resp;
	uint32_t lni, eq;
	struct cq_opts opts;
	uint64_t buf;
	uint8_t is_host_mem, pad2[3];
	int32_t dmabuf_fd;
	uint64_t dmabuf_offset;
};
struct cq_alloc_resp { /* 40 */
	uint32_t cq, count;
	struct tok cmds, wp_addr;
};
struct cq_free_cmd { /* 8 */
	uint32_t op, cq;
};

/* DEV_INFO_GET answers 120 bytes; the tests read a few fields by offset. */
enum {
	DEVINFO_SIZE = 120,
	DEVINFO_NID = 0,
	DEVINFO_PID_GRANULE = 12,
	DEVINFO_PLATFORM = 40,
	DEVINFO_LINK_MTU = 56,
};

/* cxi_cq_alloc_opts.flags */
enum { CQ_IS_TX = 1 << 1 };
/* Traffic class BEST_EFFORT, type DEFAULT. */
enum { TC_BEST_EFFORT = 3 };

/* Command queues: 64-byte slots, commands from slot 4; the first 8 bytes of the ring are
 * the status the NIC writes back: rd_ptr (16 bits), ..., return_code at bit 48 (6 bits). */
enum {
	CQ_FIRST_SLOT = 4,
	LL_64 = 0x400, /* the 64-byte low-latency window of a launch page */
	CMD_CQ_NOOP = 0x07, /* c_cmd: type CQ (3) | size 64 B (1 << 2) | opcode NOOP (0) */
	CMD_CQ_BAD = 0xF7, /* the same with an opcode no CQ command has */
	RC_OK = 1,
	RC_ILLEGAL_OP = 46,
	RC_CMD_INVALID_ARG = 50,
};

static inline unsigned cq_rd_ptr(volatile uint64_t *status)
{
	return (unsigned)(*status & 0xffff);
}

static inline unsigned cq_return_code(volatile uint64_t *status)
{
	return (unsigned)((*status >> 48) & 0x3f);
}

_Static_assert(sizeof(struct lni_alloc_cmd) == 24, "lni_alloc");
_Static_assert(sizeof(struct domain_alloc_cmd) == 32, "domain_alloc");
_Static_assert(sizeof(struct trig_cp_alloc_cmd) == 40, "trig_cp_alloc");
_Static_assert(sizeof(struct cq_alloc_buf_cmd) == 72, "cq_alloc_buf");
_Static_assert(sizeof(struct cq_alloc_resp) == 40, "cq_alloc_resp");

#endif
