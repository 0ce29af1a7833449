/*
 * gni_pub.h -- the uGNI C interface of nicemu's libugni.so.0 (emulated Cray Gemini).
 *
 * Written for nicemu. Every number, type layout and prototype here follows the uGNI
 * application interface as Cray documented it and as public programs use it (Open MPI's
 * ugni BTL, libfabric's gni provider, Charm++'s and Lustre's GNI layers); the text is ours.
 * Layouts are those of the x86-64 SysV ABI (pointers 8 bytes, enums 4 bytes).
 * crates/ugni/tests/c/layouts.c checks them against the library's own view.
 *
 * Licensed MIT OR Apache-2.0, as the rest of nicemu.
 */
#ifndef _GNI_PUB_H_
#define _GNI_PUB_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ------------------------------------------------------------------------ */

#define GNI_MAJOR_REV 0x00
#define GNI_MINOR_REV 0x5c
#define GNI_CODE_REV  0x0000

#define GNI_GET_MAJOR(v) (((v) >> 24) & 0xFF)
#define GNI_GET_MINOR(v) (((v) >> 16) & 0xFF)
#define GNI_GET_REV(v)   ((v) & 0xFFFF)
#define GNI_VERSION_CHECK(maj, min, code) (((maj) << 24) | ((min) << 16) | (code))
#define GNI_VERSION GNI_VERSION_CHECK(GNI_MAJOR_REV, GNI_MINOR_REV, GNI_CODE_REV)

/* The first versions with a feature. */
#define GNI_VERSION_FMA_SHARING 0x5b0000

/* Argument direction markers (documentation only). */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef INOUT
#define INOUT
#endif

/* ---- Protection tags, keys and cookies ---------------------------------------------- */

enum {
	GNI_PTAG_LND = 1,
	GNI_PTAG_OFED = 2,
	GNI_PTAG_USER_START = 3,
	GNI_PTAG_LND_KNC = 128,
	GNI_PTAG_USER_END = 253,
	GNI_PTAG_HSNBOOT = 254,
	GNI_PTAG_MAX = 254,
	GNI_PTAG_LB = 255
};
/* What an Aries job passes to have the driver choose a ptag. */
#define GNI_FIND_ALLOC_PTAG GNI_PTAG_LB

enum {
	GNI_PKEY_INVALID = 0,
	GNI_PKEY_LND = 1,
	GNI_PKEY_OFED = 2,
	GNI_PKEY_USER_START = 128,
	GNI_PKEY_USER_END = 65407,
	GNI_PKEY_HSNBOOT = 65408,
	GNI_PKEY_MAX = 65534,
	GNI_PKEY_LB = 65535
};

#define GNI_COOKIE_PKEY_MASK      0xFFFF
#define GNI_COOKIE_PKEY_SHIFT     16
#define GNI_COOKIE_CBPS_MDD_MASK  0x7
#define GNI_COOKIE_CBPS_MDD_SHIFT 3
/* A job cookie from a protection key (cbps_mdd is 0 on Gemini). */
#define GNI_JOB_CREATE_COOKIE(pkey, cbps_mdd) \
	(((uint32_t)(pkey) << GNI_COOKIE_PKEY_SHIFT) | \
	 (((cbps_mdd) & GNI_COOKIE_CBPS_MDD_MASK) << GNI_COOKIE_CBPS_MDD_SHIFT))

/* ---- Handles ------------------------------------------------------------------------- */

/* A registration as the NIC names it; sent to peers as is. */
typedef struct gni_mem_handle {
	uint64_t qword1;
	uint64_t qword2;
} gni_mem_handle_t;

typedef enum gni_mem_handle_attr {
	GNI_MEMHNDL_ATTR_READONLY = 1,
	GNI_MEMHNDL_ATTR_VMDH = 2,
	GNI_MEMHNDL_ATTR_MRT = 3,
	GNI_MEMHNDL_ATTR_GART = 4,
	GNI_MEMHNDL_ATTR_IOMMU = 5,
	GNI_MEMHNDL_ATTR_PCI_IOMMU = 6,
	GNI_MEMHNDL_ATTR_CLONE = 7
} gni_mem_handle_attr_t;

typedef struct gni_nic  *gni_nic_handle_t;
typedef struct gni_cdm  *gni_cdm_handle_t;
typedef struct gni_ep   *gni_ep_handle_t;
typedef struct gni_cq   *gni_cq_handle_t;
typedef struct gni_err  *gni_err_handle_t;
typedef struct gni_msgq *gni_msgq_handle_t;
typedef struct gni_ce   *gni_ce_handle_t;

/* ---- Short messages (SMSG) ----------------------------------------------------------- */

typedef enum gni_smsg_type {
	GNI_SMSG_TYPE_INVALID = 0,
	GNI_SMSG_TYPE_MBOX = 1,
	GNI_SMSG_TYPE_MBOX_AUTO_RETRANSMIT = 2
} gni_smsg_type_t;

/* GNI_SmsgGetNextWTag: take a message whatever its tag. */
#define GNI_SMSG_ANY_TAG 0xFF

typedef struct gni_smsg_attr {
	gni_smsg_type_t  msg_type;       /* mailbox kind */
	void            *msg_buffer;     /* start of the registered mailbox memory */
	uint32_t         buff_size;      /* bytes of this mailbox */
	gni_mem_handle_t mem_hndl;       /* registration of msg_buffer */
	uint32_t         mbox_offset;    /* where this peer's mailbox starts in msg_buffer */
	uint16_t         mbox_maxcredit; /* messages in flight into the mailbox at most */
	uint32_t         msg_maxsize;    /* header plus data bytes of one message at most */
} gni_smsg_attr_t;

#define FMA_SMSG_MAX_RETRANS_DEFAULT 10

/* ---- Return codes -------------------------------------------------------------------- */

typedef enum gni_return {
	GNI_RC_SUCCESS = 0,
	GNI_RC_NOT_DONE = 1,
	GNI_RC_INVALID_PARAM = 2,
	GNI_RC_ERROR_RESOURCE = 3,
	GNI_RC_TIMEOUT = 4,
	GNI_RC_PERMISSION_ERROR = 5,
	GNI_RC_DESCRIPTOR_ERROR = 6,
	GNI_RC_ALIGNMENT_ERROR = 7,
	GNI_RC_INVALID_STATE = 8,
	GNI_RC_NO_MATCH = 9,
	GNI_RC_SIZE_ERROR = 10,
	GNI_RC_TRANSACTION_ERROR = 11,
	GNI_RC_ILLEGAL_OP = 12,
	GNI_RC_ERROR_NOMEM = 13
} gni_return_t;

/* The names of the return codes, indexed by code. */
extern const char *gni_err_str[];

/* ---- Communication domain modes ------------------------------------------------------ */

#define GNI_CDM_MODE_FORK_NOCOPY            0x00000001
#define GNI_CDM_MODE_FORK_FULLCOPY          0x00000002
#define GNI_CDM_MODE_FORK_PARTCOPY          0x00000004 /* the default */
#define GNI_CDM_MODE_ERR_NO_KILL            0x00000008
#define GNI_CDM_MODE_ERR_ALL_KILL           0x00000010
#define GNI_CDM_MODE_FAST_DATAGRAM_POLL     0x00000020
#define GNI_CDM_MODE_BTE_SINGLE_CHANNEL     0x00000040
#define GNI_CDM_MODE_USE_PCI_IOMMU          0x00000080
#define GNI_CDM_MODE_MDD_DEDICATED          0x00000100
#define GNI_CDM_MODE_MDD_SHARED             0x00000200
#define GNI_CDM_MODE_DUAL_EVENTS            0x00001000
#define GNI_CDM_MODE_DLA_ENABLE_FORWARDING  0x00004000 /* Aries */
#define GNI_CDM_MODE_DLA_DISABLE_FORWARDING 0x00008000 /* Aries */
#define GNI_CDM_MODE_FMA_DEDICATED          0x00010000
#define GNI_CDM_MODE_FMA_SHARED             0x00020000
#define GNI_CDM_MODE_CACHED_AMO_ENABLED     0x00040000
#define GNI_CDM_MODE_CQ_NIC_LOCAL_PLACEMENT 0x00080000
#define GNI_CDM_MODE_FLBTE_DISABLE          0x00100000
#define GNI_CDM_MODE_FMA_SMALL_WINDOW       0x00200000
#define GNI_CDM_MODE_MASK                   0x0FFFFFFF
/* The top four bits are the library's own. */
#define GNI_CDM_MODE_PRIV_RESERVED_1        0x10000000
#define GNI_CDM_MODE_PRIV_RESERVED_2        0x20000000
#define GNI_CDM_MODE_PRIV_RESERVED_3        0x40000000
#define GNI_CDM_MODE_PRIV_RESERVED_4        0x80000000
#define GNI_CDM_MODE_PRIV_MASK              0xF0000000

/* ---- Datagram (post) states ---------------------------------------------------------- */

typedef enum gni_post_state {
	GNI_POST_PENDING = 0,
	GNI_POST_COMPLETED = 1,
	GNI_POST_ERROR = 2,
	GNI_POST_TIMEOUT = 3,
	GNI_POST_TERMINATED = 4,
	GNI_POST_REMOTE_DATA = 5
} gni_post_state_t;

/* ---- Memory registration flags ------------------------------------------------------- */

#define GNI_MEM_READWRITE           0x00000000
#define GNI_MEM_READ_ONLY           0x00000001
#define GNI_MEM_USE_VMDH            0x00000002
#define GNI_MEM_USE_GART            0x00000004
#define GNI_MEM_PHYS_CONT           0x00000008
#define GNI_MEM_PHYS_SEGMENTS       0x00000010
#define GNI_MEM_STRICT_PI_ORDERING  0x00000020
#define GNI_MEM_PI_FLUSH            0x00000040
#define GNI_MEM_MDD_CLONE           0x00000080
#define GNI_MEM_RELAXED_PI_ORDERING 0x00000100
#define GNI_MEM_RESERVE_REGION      0x00000200
#define GNI_MEM_UPDATE_REGION       0x00000400
#define GNI_MEM_MDD_SHARED          0x00000800
#define GNI_MEM_MDD_DEDICATED       0x00001000
#define GNI_MEM_CUDA                0x01000000
#define GNI_EXMEM_FLAGS(flag)       ((flag) >> 24)
#define GNI_MEM_IS_EXTERNAL(flag)   (GNI_EXMEM_FLAGS(flag))

typedef struct gni_mem_segment {
	uint64_t address;
	uint64_t length;
} gni_mem_segment_t;

/* ---- Completion queues --------------------------------------------------------------- */

typedef uint32_t gni_cq_mode_t;

#define GNI_CQ_NOBLOCK    0x00000000
#define GNI_CQ_BLOCKING   0x00000001
#define GNI_CQ_EMULATED   0x00000002 /* the library's own */
#define GNI_CQ_EMULATED_INVALID (GNI_CQ_EMULATED | GNI_CQ_BLOCKING)
#define GNI_CQ_PHYS_PAGES 0x00000004
#define GNI_CQ_UNMANAGED  0x00000008

#define GNI_CQ_IS_NON_BLOCKING(m)     (((m) & GNI_CQ_BLOCKING) == GNI_CQ_NOBLOCK)
#define GNI_CQ_IS_BLOCKING(m)         (((m) & GNI_CQ_BLOCKING) == GNI_CQ_BLOCKING)
#define GNI_CQ_IS_EMULATED(m)         (((m) & GNI_CQ_EMULATED) == GNI_CQ_EMULATED)
#define GNI_CQ_IS_NOT_EMULATED(m)     (((m) & GNI_CQ_EMULATED) == 0)
#define GNI_CQ_IS_INVALID_EMULATED(m) (((m) & GNI_CQ_EMULATED_INVALID) == GNI_CQ_EMULATED_INVALID)
#define GNI_CQ_USE_PHYS_PAGES(m)      (((m) & GNI_CQ_PHYS_PAGES) == GNI_CQ_PHYS_PAGES)

/* Event types (the two-bit type field of an entry). */
#define GNI_CQ_EVENT_TYPE_POST  0x0ULL
#define GNI_CQ_EVENT_TYPE_SMSG  0x1ULL
#define GNI_CQ_EVENT_TYPE_DMAPP 0x2ULL
#define GNI_CQ_EVENT_TYPE_MSGQ  0x3ULL

/* One completion entry. Read it only with the accessors below. */
typedef uint64_t gni_cq_entry_t;

uint64_t gni_cq_get_data(gni_cq_entry_t);
uint64_t gni_cq_get_source(gni_cq_entry_t);
uint64_t gni_cq_get_status(gni_cq_entry_t);
uint64_t gni_cq_get_info(gni_cq_entry_t);
uint64_t gni_cq_overrun(gni_cq_entry_t);
uint64_t gni_cq_rem_overrun(gni_cq_entry_t);
uint64_t gni_cq_get_inst_id(gni_cq_entry_t);
uint64_t gni_cq_get_rem_inst_id(gni_cq_entry_t);
uint64_t gni_cq_get_tid(gni_cq_entry_t);
uint64_t gni_cq_get_msg_id(gni_cq_entry_t);
uint64_t gni_cq_get_type(gni_cq_entry_t);
uint64_t gni_cq_get_block_id(gni_cq_entry_t);
uint64_t gni_cq_get_unsuccessful_cnt(gni_cq_entry_t);
uint64_t gni_cq_get_marker_id(gni_cq_entry_t);
uint64_t gni_cq_get_failed_enqueue_cnt(gni_cq_entry_t);
uint64_t gni_cq_get_ce_id(gni_cq_entry_t);
uint64_t gni_cq_get_reductn_id(gni_cq_entry_t);
uint64_t gni_cq_get_trans_type(gni_cq_entry_t);
void     gni_cq_set_inst_id(gni_cq_entry_t *, uint64_t);
void     gni_cq_set_rem_inst_id(gni_cq_entry_t *, uint64_t);
void     gni_cq_set_tid(gni_cq_entry_t *, uint64_t);
void     gni_cq_set_msg_id(gni_cq_entry_t *, uint64_t);
void     gni_cq_set_type(gni_cq_entry_t *, uint64_t);
void     gni_cq_clr_status(gni_cq_entry_t *);
unsigned gni_cq_status_dla_overflow(gni_cq_entry_t);
unsigned gni_cq_bte_enq_status(gni_cq_entry_t);

#define GNI_CQ_GET_DATA               gni_cq_get_data
#define GNI_CQ_GET_SOURCE             gni_cq_get_source
#define GNI_CQ_GET_STATUS             gni_cq_get_status
#define GNI_CQ_GET_INFO               gni_cq_get_info
#define GNI_CQ_GET_INST_ID            gni_cq_get_inst_id /* 32 bits on Gemini */
#define GNI_CQ_GET_REM_INST_ID        gni_cq_get_rem_inst_id
#define GNI_CQ_GET_TID                gni_cq_get_tid
#define GNI_CQ_GET_MSG_ID             gni_cq_get_msg_id
#define GNI_CQ_GET_TYPE               gni_cq_get_type
#define GNI_CQ_OVERRUN                gni_cq_overrun
#define GNI_CQ_REM_OVERRUN            gni_cq_rem_overrun
#define GNI_CQ_GET_BLOCK_ID           gni_cq_get_block_id
#define GNI_CQ_GET_UNSUCCESSFUL_CNT   gni_cq_get_unsuccessful_cnt
#define GNI_CQ_GET_MARKER_ID          gni_cq_get_marker_id
#define GNI_CQ_GET_FAILED_ENQUEUE_CNT gni_cq_get_failed_enqueue_cnt
#define GNI_CQ_GET_CE_ID              gni_cq_get_ce_id
#define GNI_CQ_GET_REDUCTN_ID         gni_cq_get_reductn_id
#define GNI_CQ_GET_TRANS_TYPE         gni_cq_get_trans_type
#define GNI_CQ_SET_INST_ID(e, v)      gni_cq_set_inst_id(&(e), (v))
#define GNI_CQ_SET_REM_INST_ID(e, v)  gni_cq_set_rem_inst_id(&(e), (v))
#define GNI_CQ_SET_TID(e, v)          gni_cq_set_tid(&(e), (v))
#define GNI_CQ_SET_MSG_ID(e, v)       gni_cq_set_msg_id(&(e), (v))
#define GNI_CQ_SET_TYPE(e, v)         gni_cq_set_type(&(e), (v))
#define GNI_CQ_CLR_STATUS(e)          gni_cq_clr_status(&(e))
#define GNI_CQ_STATUS_OK(e)           (gni_cq_get_status(e) == 0)
#define GNI_CQ_STATUS_DLA_OVERFLOW(e) (gni_cq_status_dla_overflow(e))
#define GNI_CQ_BTE_ENQ_STATUS(e)      gni_cq_bte_enq_status(e)

/* ---- Posts --------------------------------------------------------------------------- */

typedef enum gni_post_type {
	GNI_POST_RDMA_PUT = 1,
	GNI_POST_RDMA_GET = 2,
	GNI_POST_FMA_PUT = 3,
	GNI_POST_FMA_PUT_W_SYNCFLAG = 4,
	GNI_POST_FMA_GET = 5,
	GNI_POST_AMO = 6,
	GNI_POST_CQWRITE = 7,
	GNI_POST_CE = 8,
	GNI_POST_FMA_GET_W_FLAG = 9,
	GNI_POST_AMO_W_FLAG = 10
} gni_post_type_t;

/* Bytes of the flag a flagged GET or AMO response writes after the data. */
#define GNI_FMA_FLAGGED_RESPONSE_SIZE 4

/* AMO commands. Gemini executes the first-generation 64-bit set only; the second
 * generation (ATOMIC2), 32-bit (_S) and floating-point commands are Aries'. */
typedef enum gni_fma_cmd_type {
	/* fetching: the old value lands at local_addr */
	GNI_FMA_ATOMIC_FADD = 0x008,
	GNI_FMA_ATOMIC_FADD_C = 0x018,
	GNI_FMA_ATOMIC_FAND = 0x009,
	GNI_FMA_ATOMIC_FAND_C = 0x019,
	GNI_FMA_ATOMIC_FOR = 0x00A,
	GNI_FMA_ATOMIC_FOR_C = 0x01A,
	GNI_FMA_ATOMIC_FXOR = 0x00B,
	GNI_FMA_ATOMIC_FXOR_C = 0x01B,
	GNI_FMA_ATOMIC_FAX = 0x00C,
	GNI_FMA_ATOMIC_FAX_C = 0x01C,
	GNI_FMA_ATOMIC_CSWAP = 0x00D,
	GNI_FMA_ATOMIC_CSWAP_C = 0x01D,
	GNI_FMA_ATOMIC2_FAND_S = 0x240,
	GNI_FMA_ATOMIC2_FAND = 0x041,
	GNI_FMA_ATOMIC2_FAND_SC = 0x260,
	GNI_FMA_ATOMIC2_FAND_C = 0x061,
	GNI_FMA_ATOMIC2_FOR_S = 0x242,
	GNI_FMA_ATOMIC2_FOR = 0x043,
	GNI_FMA_ATOMIC2_FOR_SC = 0x262,
	GNI_FMA_ATOMIC2_FOR_C = 0x063,
	GNI_FMA_ATOMIC2_FXOR_S = 0x244,
	GNI_FMA_ATOMIC2_FXOR = 0x045,
	GNI_FMA_ATOMIC2_FXOR_SC = 0x264,
	GNI_FMA_ATOMIC2_FXOR_C = 0x065,
	GNI_FMA_ATOMIC2_FSWAP_S = 0x246,
	GNI_FMA_ATOMIC2_FSWAP = 0x047,
	GNI_FMA_ATOMIC2_FSWAP_SC = 0x266,
	GNI_FMA_ATOMIC2_FSWAP_C = 0x067,
	GNI_FMA_ATOMIC2_FAX_S = 0x248,
	GNI_FMA_ATOMIC2_FAX = 0x049,
	GNI_FMA_ATOMIC2_FAX_SC = 0x268,
	GNI_FMA_ATOMIC2_FAX_C = 0x069,
	GNI_FMA_ATOMIC2_FCSWAP_S = 0x24A,
	GNI_FMA_ATOMIC2_FCSWAP = 0x04B,
	GNI_FMA_ATOMIC2_FCSWAP_SC = 0x26A,
	GNI_FMA_ATOMIC2_FCSWAP_C = 0x06B,
	GNI_FMA_ATOMIC2_FIMIN_S = 0x250,
	GNI_FMA_ATOMIC2_FIMIN = 0x051,
	GNI_FMA_ATOMIC2_FIMIN_SC = 0x270,
	GNI_FMA_ATOMIC2_FIMIN_C = 0x071,
	GNI_FMA_ATOMIC2_FIMAX_S = 0x252,
	GNI_FMA_ATOMIC2_FIMAX = 0x053,
	GNI_FMA_ATOMIC2_FIMAX_SC = 0x272,
	GNI_FMA_ATOMIC2_FIMAX_C = 0x073,
	GNI_FMA_ATOMIC2_FIADD_S = 0x254,
	GNI_FMA_ATOMIC2_FIADD = 0x055,
	GNI_FMA_ATOMIC2_FIADD_SC = 0x274,
	GNI_FMA_ATOMIC2_FIADD_C = 0x075,
	GNI_FMA_ATOMIC2_FFPMIN_S = 0x258,
	GNI_FMA_ATOMIC2_FFPMIN = 0x059,
	GNI_FMA_ATOMIC2_FFPMIN_SC = 0x278,
	GNI_FMA_ATOMIC2_FFPMIN_C = 0x079,
	GNI_FMA_ATOMIC2_FFPMAX_S = 0x25A,
	GNI_FMA_ATOMIC2_FFPMAX = 0x05B,
	GNI_FMA_ATOMIC2_FFPMAX_SC = 0x27A,
	GNI_FMA_ATOMIC2_FFPMAX_C = 0x07B,
	GNI_FMA_ATOMIC2_FFPADD_S = 0x25C,
	GNI_FMA_ATOMIC2_FFPADD = 0x05D,
	GNI_FMA_ATOMIC2_FFPADD_SC = 0x27C,
	GNI_FMA_ATOMIC2_FFPADD_C = 0x07D,
	/* non-fetching */
	GNI_FMA_ATOMIC_ADD = 0x108,
	GNI_FMA_ATOMIC_ADD_C = 0x118,
	GNI_FMA_ATOMIC_AND = 0x109,
	GNI_FMA_ATOMIC_AND_C = 0x119,
	GNI_FMA_ATOMIC_OR = 0x10A,
	GNI_FMA_ATOMIC_OR_C = 0x11A,
	GNI_FMA_ATOMIC_XOR = 0x10B,
	GNI_FMA_ATOMIC_XOR_C = 0x11B,
	GNI_FMA_ATOMIC_AX = 0x10C,
	GNI_FMA_ATOMIC_AX_C = 0x11C,
	GNI_FMA_ATOMIC2_AND_S = 0x340,
	GNI_FMA_ATOMIC2_AND = 0x141,
	GNI_FMA_ATOMIC2_AND_SC = 0x360,
	GNI_FMA_ATOMIC2_AND_C = 0x161,
	GNI_FMA_ATOMIC2_OR_S = 0x342,
	GNI_FMA_ATOMIC2_OR = 0x143,
	GNI_FMA_ATOMIC2_OR_SC = 0x362,
	GNI_FMA_ATOMIC2_OR_C = 0x163,
	GNI_FMA_ATOMIC2_XOR_S = 0x344,
	GNI_FMA_ATOMIC2_XOR = 0x145,
	GNI_FMA_ATOMIC2_XOR_SC = 0x364,
	GNI_FMA_ATOMIC2_XOR_C = 0x165,
	GNI_FMA_ATOMIC2_SWAP_S = 0x346,
	GNI_FMA_ATOMIC2_SWAP = 0x147,
	GNI_FMA_ATOMIC2_SWAP_SC = 0x366,
	GNI_FMA_ATOMIC2_SWAP_C = 0x167,
	GNI_FMA_ATOMIC2_AX_S = 0x348,
	GNI_FMA_ATOMIC2_AX = 0x149,
	GNI_FMA_ATOMIC2_AX_SC = 0x368,
	GNI_FMA_ATOMIC2_AX_C = 0x169,
	GNI_FMA_ATOMIC2_CSWAP_S = 0x34A,
	GNI_FMA_ATOMIC2_CSWAP = 0x14B,
	GNI_FMA_ATOMIC2_CSWAP_SC = 0x36A,
	GNI_FMA_ATOMIC2_CSWAP_C = 0x16B,
	GNI_FMA_ATOMIC2_IMIN_S = 0x350,
	GNI_FMA_ATOMIC2_IMIN = 0x151,
	GNI_FMA_ATOMIC2_IMIN_SC = 0x370,
	GNI_FMA_ATOMIC2_IMIN_C = 0x171,
	GNI_FMA_ATOMIC2_IMAX_S = 0x352,
	GNI_FMA_ATOMIC2_IMAX = 0x153,
	GNI_FMA_ATOMIC2_IMAX_SC = 0x372,
	GNI_FMA_ATOMIC2_IMAX_C = 0x173,
	GNI_FMA_ATOMIC2_IADD_S = 0x354,
	GNI_FMA_ATOMIC2_IADD = 0x155,
	GNI_FMA_ATOMIC2_IADD_SC = 0x374,
	GNI_FMA_ATOMIC2_IADD_C = 0x175,
	GNI_FMA_ATOMIC2_FPMIN_S = 0x358,
	GNI_FMA_ATOMIC2_FPMIN = 0x159,
	GNI_FMA_ATOMIC2_FPMIN_SC = 0x378,
	GNI_FMA_ATOMIC2_FPMIN_C = 0x179,
	GNI_FMA_ATOMIC2_FPMAX_S = 0x35A,
	GNI_FMA_ATOMIC2_FPMAX = 0x15B,
	GNI_FMA_ATOMIC2_FPMAX_SC = 0x37A,
	GNI_FMA_ATOMIC2_FPMAX_C = 0x17B,
	GNI_FMA_ATOMIC2_FPADD_S = 0x35C,
	GNI_FMA_ATOMIC2_FPADD = 0x15D,
	GNI_FMA_ATOMIC2_FPADD_SC = 0x37C,
	GNI_FMA_ATOMIC2_FPADD_C = 0x17D
} gni_fma_cmd_type_t;

/* Collective engine commands (Aries only; Gemini refuses them). */
typedef enum gni_ce_cmd_type {
	GNI_FMA_CE_AND_S = 0x0,
	GNI_FMA_CE_AND = 0x1,
	GNI_FMA_CE_OR_S = 0x2,
	GNI_FMA_CE_OR = 0x3,
	GNI_FMA_CE_XOR_S = 0x4,
	GNI_FMA_CE_XOR = 0x5,
	GNI_FMA_CE_IMIN_LIDX_S = 0x10,
	GNI_FMA_CE_IMIN_LIDX = 0x11,
	GNI_FMA_CE_IMAX_LIDX_S = 0x12,
	GNI_FMA_CE_IMAX_LIDX = 0x13,
	GNI_FMA_CE_IADD_S = 0x14,
	GNI_FMA_CE_IADD = 0x15,
	GNI_FMA_CE_FPMIN_LIDX_S = 0x18,
	GNI_FMA_CE_FPMIN_LIDX = 0x19,
	GNI_FMA_CE_FPMAX_LIDX_S = 0x1a,
	GNI_FMA_CE_FPMAX_LIDX = 0x1b,
	GNI_FMA_CE_FPADD_S = 0x1c,
	GNI_FMA_CE_FPADD = 0x1d,
	GNI_FMA_CE_IMIN_GIDX_S = 0x30,
	GNI_FMA_CE_IMIN_GIDX = 0x31,
	GNI_FMA_CE_IMAX_GIDX_S = 0x32,
	GNI_FMA_CE_IMAX_GIDX = 0x33,
	GNI_FMA_CE_FPMIN_GIDX_S = 0x38,
	GNI_FMA_CE_FPMIN_GIDX = 0x39,
	GNI_FMA_CE_FPMAX_GIDX_S = 0x3a,
	GNI_FMA_CE_FPMAX_GIDX = 0x3b
} gni_ce_cmd_type_t;

typedef struct gni_ce_result {
	uint64_t control;
	uint64_t result1;
	uint64_t result2;
} gni_ce_result_t;

typedef enum {
	GNI_CE_CHILD_UNUSED,
	GNI_CE_CHILD_VCE,
	GNI_CE_CHILD_PE
} gni_ce_child_t;

#define GNI_CE_MAX_CHILDREN 32

/* Which completion events a post asks for. */
#define GNI_CQMODE_SILENT       0x0000
#define GNI_CQMODE_LOCAL_EVENT  0x0001
#define GNI_CQMODE_GLOBAL_EVENT 0x0002
#define GNI_CQMODE_REMOTE_EVENT 0x0004
#define GNI_CQMODE_DUAL_EVENTS  (GNI_CQMODE_LOCAL_EVENT | GNI_CQMODE_GLOBAL_EVENT)

/* Routing (delivery) modes. */
#define GNI_DLVMODE_PERFORMANCE  0x0000
#define GNI_DLVMODE_NO_ADAPT     0x0001
#define GNI_DLVMODE_NO_HASH      0x0002
#define GNI_DLVMODE_NO_RADAPT    0x0004
#define GNI_DLVMODE_IN_ORDER     (GNI_DLVMODE_NO_ADAPT | GNI_DLVMODE_NO_HASH)
#define GNI_DLVMODE_MNON_HASH    GNI_DLVMODE_IN_ORDER
#define GNI_DLVMODE_NMIN_HASH    0x0008
#define GNI_DLVMODE_MIN_HASH     0x0010
#define GNI_DLVMODE_ADAPTIVE0    GNI_DLVMODE_PERFORMANCE
#define GNI_DLVMODE_ADAPTIVE1    0x0020
#define GNI_DLVMODE_ADAPTIVE2    0x0040
#define GNI_DLVMODE_ADAPTIVE3    0x0080
#define GNI_DLVMODE_ORDERED_TAIL 0x0100

/* Error event categories. */
#define GNI_ERRMASK_CORRECTABLE_MEMORY  (1 << 0)
#define GNI_ERRMASK_CRITICAL            (1 << 1)
#define GNI_ERRMASK_TRANSACTION         (1 << 2)
#define GNI_ERRMASK_ADDRESS_TRANSLATION (1 << 3)
#define GNI_ERRMASK_TRANSIENT           (1 << 4)
#define GNI_ERRMASK_INFORMATIONAL       (1 << 5)
#define GNI_ERRMASK_DIAG_ONLY           (1 << 6)
#define GNI_ERRMASK_UNKNOWN_TRANSACTION (1 << 7)

/* RDMA (BTE) modes. */
#define GNI_RDMAMODE_PHYS_ADDR 0x0001 /* kernel only */
#define GNI_RDMAMODE_FENCE     0x0002
#define GNI_RDMAMODE_GETWC_DIS 0x0004 /* Aries */

/* Collective engine post modes (Aries). */
#define GNI_CEMODE_TWO_OP        (1 << 0)
#define GNI_CEMODE_FPE_OP_INVAL  (1 << 1)
#define GNI_CEMODE_FPE_OFLOW     (1 << 2)
#define GNI_CEMODE_FPE_UFLOW     (1 << 3)
#define GNI_CEMODE_FPE_PRECISION (1 << 4)

/* Bytes a datagram carries each way at most. */
#define GNI_DATAGRAM_MAXSIZE 128
/* Header plus data bytes of one short message at most. */
#define GNI_SMSG_MAX_SIZE 65535

/* One transaction. The first five fields are the caller's own (list links, id, status);
 * the library reads the rest. */
typedef struct gni_post_descriptor {
	void              *next_descr;
	void              *prev_descr;
	uint64_t           post_id;
	uint64_t           status;
	uint16_t           cq_mode_complete;
	gni_post_type_t    type;
	uint16_t           cq_mode;          /* GNI_CQMODE_* */
	uint16_t           dlvr_mode;        /* GNI_DLVMODE_* */
	uint64_t           local_addr;       /* PUT source; GET and fetched AMO target */
	gni_mem_handle_t   local_mem_hndl;
	uint64_t           remote_addr;
	gni_mem_handle_t   remote_mem_hndl;
	uint64_t           length;
	uint16_t           rdma_mode;        /* GNI_RDMAMODE_* */
	gni_cq_handle_t    src_cq_hndl;      /* RDMA: the CQ of local events (NULL: the EP's) */
	uint64_t           sync_flag_value;  /* FMA_PUT_W_SYNCFLAG */
	uint64_t           sync_flag_addr;
	gni_fma_cmd_type_t amo_cmd;
	uint64_t           first_operand;    /* CSWAP: the compare value */
	uint64_t           second_operand;   /* CSWAP: the swap value */
	uint64_t           cqwrite_value;    /* the low 48 bits reach the target */
	gni_ce_cmd_type_t  ce_cmd;
	uint32_t           ce_mode;
	uint64_t           ce_red_id;
} gni_post_descriptor_t;

/* ---- Node translation table and jobs ------------------------------------------------- */

typedef struct gni_ntt_entry {
	uint32_t blck_addr;
	uint32_t rplc_addr;
	uint8_t  rplc_size;
} gni_ntt_entry_t;

typedef struct gni_ntt_descriptor {
	uint32_t group_size;
	uint8_t  granularity;
	union {
		uint32_t        *table;
		gni_ntt_entry_t *table_v2;
	} u;
	uint8_t  flags;
} gni_ntt_descriptor_t;

typedef struct gni_error_event {
	uint16_t error_code;
	uint8_t  error_category;
	uint8_t  ptag;
	uint32_t serial_number;
	uint64_t timestamp;
	uint64_t info_mmrs[4];
} gni_error_event_t;

typedef uint8_t gni_error_mask_t;

#define GNI_JOB_INVALID_LIMIT    (-1)
#define GNI_JOB_CTRL_NTT_CLEANUP (0x01)
#define GNI_JOB_CTRL_CE0_MASK    (1 << 0)
#define GNI_JOB_CTRL_CE1_MASK    (1 << 1)
#define GNI_JOB_CTRL_CE2_MASK    (1 << 2)
#define GNI_JOB_CTRL_CE3_MASK    (1 << 3)
#define GNI_JOB_CTRL_ALL_CE_MASK (GNI_JOB_CTRL_CE0_MASK | GNI_JOB_CTRL_CE1_MASK | \
				  GNI_JOB_CTRL_CE2_MASK | GNI_JOB_CTRL_CE3_MASK)

/* Limits of a job; GNI_JOB_INVALID_LIMIT leaves one unset. */
typedef struct gni_job_limits {
	int32_t mdd_limit;
	union {
		int32_t mrt_limit; /* Gemini */
		struct {
			uint8_t ce_limit;
			uint8_t iommu_limit;
			uint8_t res_byte2;
			uint8_t res_byte3;
		} m;               /* Aries */
	} a;
	union {
		int32_t gart_limit; /* Gemini */
		int32_t dla_limit;  /* Aries */
	} b;
	int32_t fma_limit;
	int32_t bte_limit;
	int32_t cq_limit;
	int32_t ntt_ctrl;
	int32_t ntt_base;
	int32_t ntt_size;
} gni_job_limits_t;

typedef enum gni_nic_device {
	GNI_DEVICE_GEMINI = 0,
	GNI_DEVICE_ARIES = 1,
	GNI_DEVICE_PISCES = 2,
	GNI_DEVICE_LAST
} gni_nic_device_t;

typedef enum gni_dev_res {
	GNI_DEV_RES_FIRST = 0,
	GNI_DEV_RES_MDD,
	GNI_DEV_RES_MRT,
	GNI_DEV_RES_CQ,
	GNI_DEV_RES_FMA,
	GNI_DEV_RES_CE,
	GNI_DEV_RES_DLA,
	GNI_DEV_RES_LAST
} gni_dev_res_t;

typedef struct gni_dev_res_desc {
	uint64_t available;
	uint64_t reserved;
	uint64_t held;
	uint64_t total;
} gni_dev_res_desc_t;

typedef enum gni_job_res {
	GNI_JOB_RES_FIRST = 0,
	GNI_JOB_RES_MDD,
	GNI_JOB_RES_MRT,
	GNI_JOB_RES_IOMMU,
	GNI_JOB_RES_GART,
	GNI_JOB_RES_CQ,
	GNI_JOB_RES_FMA,
	GNI_JOB_RES_RMDA,
	GNI_JOB_RES_CE,
	GNI_JOB_RES_DLA,
	GNI_JOB_RES_SFMA,
	GNI_JOB_RES_LAST
} gni_job_res_t;

typedef struct gni_job_res_desc {
	uint64_t used;
	uint64_t limit;
} gni_job_res_desc_t;

/* NIC statistics (the Gemini set). */
typedef enum gni_statistic {
	GNI_STAT_SMSG_BUFF_CREDITS_STALL = 0,
	GNI_STAT_SMSG_DLA_STALL,
	GNI_STAT_SMSG_MBOX_CREDITS_STALL,
	GNI_STAT_SMSG_REQ_STALL,
	GNI_STAT_SMSG_RETRANS_COUNT,
	GNI_STAT_SMSG_RETRANS_DLA_COUNT,
	GNI_STAT_SMSG_RETRANS_STALL,
	GNI_NUM_STATS
} gni_statistic_t;

/* The names of the statistics, indexed by gni_statistic_t. */
extern const char *gni_statistic_str[];

/* ---- Shared message queues (MSGQ) ------------------------------------------------------ */

typedef int gni_msgq_rcv_cb_func(uint32_t snd_id, uint32_t snd_pe, void *msg,
				 uint8_t msg_tag, void *cb_data);

#define GNI_MSGQ_MSG_SZ_MAX     128
#define GNI_MSGQ_NODE_INSTS_MAX 48
#define GNI_MSGQ_MODE_BLOCKING  (0x01)

typedef struct gni_msgq_attr {
	uint32_t max_msg_sz;
	uint32_t smsg_q_sz;
	uint32_t rcv_pool_sz;
	uint32_t num_msgq_eps;
	uint32_t nloc_insts;
	uint8_t  modes;
	uint32_t rcv_cq_sz;
} gni_msgq_attr_t;

typedef struct gni_msgq_rem_inst {
	uint32_t         id;
	gni_mem_handle_t mdh;
	uint64_t         mdh_off;
} gni_msgq_rem_inst_t;

typedef struct gni_msgq_ep_attr {
	uint32_t            pe_addr;
	uint32_t            max_msg_sz;
	uint32_t            smsg_q_sz;
	uint32_t            num_insts;
	gni_msgq_rem_inst_t insts[GNI_MSGQ_NODE_INSTS_MAX];
} gni_msgq_ep_attr_t;

#define MAX_BUILD_STRING_LENGTH 80

typedef struct gni_version_info {
	uint32_t ugni_version;
	uint32_t ugni_svn_revision;
	char     ugni_build_string[MAX_BUILD_STRING_LENGTH];
	uint32_t kgni_version;
	uint32_t kgni_svn_revision;
	char     kgni_build_string[MAX_BUILD_STRING_LENGTH];
} gni_version_info_t;

/* ---- Functions ----------------------------------------------------------------------- */

/* Communication domains */
gni_return_t GNI_CdmCreate(uint32_t inst_id, uint8_t ptag, uint32_t cookie, uint32_t modes,
			   gni_cdm_handle_t *cdm_hndl);
gni_return_t GNI_CdmDestroy(gni_cdm_handle_t cdm_hndl);
gni_return_t GNI_CdmGetNicAddress(uint32_t device_id, uint32_t *address, uint32_t *cpu_id);
gni_return_t GNI_CdmAttach(gni_cdm_handle_t cdm_hndl, uint32_t device_id, uint32_t *local_addr,
			   gni_nic_handle_t *nic_hndl);
gni_return_t GNI_CdmCheckpoint(gni_cdm_handle_t cdm_hndl);
gni_return_t GNI_CdmResume(gni_cdm_handle_t cdm_hndl);

/* Jobs (the launcher's calls) */
gni_return_t GNI_SuspendJob(uint32_t device_id, uint64_t job_id, uint8_t ptag, uint32_t cookie,
			    uint32_t timeout);
gni_return_t GNI_ResumeJob(uint32_t device_id, uint64_t job_id, uint8_t ptag, uint32_t cookie);
gni_return_t GNI_ConfigureNTT(int device_id, gni_ntt_descriptor_t *ntt_desc, uint32_t *ntt_base);
gni_return_t GNI_ConfigureJob(uint32_t device_id, uint64_t job_id, uint8_t ptag, uint32_t cookie,
			      gni_job_limits_t *limits);
gni_return_t GNI_ConfigureNTTandJob(int device_id, uint64_t job_id, uint8_t ptag, uint32_t cookie,
				    gni_job_limits_t *limits, gni_ntt_descriptor_t *ntt_desc,
				    uint32_t *ntt_base);

/* Endpoints and datagrams */
gni_return_t GNI_EpCreate(gni_nic_handle_t nic_hndl, gni_cq_handle_t src_cq_hndl,
			  gni_ep_handle_t *ep_hndl);
gni_return_t GNI_EpSetEventData(gni_ep_handle_t ep_hndl, uint32_t local_event,
				uint32_t remote_event);
gni_return_t GNI_EpBind(gni_ep_handle_t ep_hndl, uint32_t remote_addr, uint32_t remote_id);
gni_return_t GNI_EpUnbind(gni_ep_handle_t ep_hndl);
gni_return_t GNI_EpIdle(gni_ep_handle_t ep_hndl);
gni_return_t GNI_EpDestroy(gni_ep_handle_t ep_hndl);
gni_return_t GNI_EpPostData(gni_ep_handle_t ep_hndl, void *in_data, uint16_t data_len,
			    void *out_buf, uint16_t buf_size);
gni_return_t GNI_EpPostDataWId(gni_ep_handle_t ep_hndl, void *in_data, uint16_t data_len,
			       void *out_buf, uint16_t buf_size, uint64_t datagram_id);
gni_return_t GNI_EpPostDataTest(gni_ep_handle_t ep_hndl, gni_post_state_t *post_state,
				uint32_t *remote_addr, uint32_t *remote_id);
gni_return_t GNI_EpPostDataTestById(gni_ep_handle_t ep_hndl, uint64_t datagram_id,
				    gni_post_state_t *post_state, uint32_t *remote_addr,
				    uint32_t *remote_id);
gni_return_t GNI_EpPostDataWait(gni_ep_handle_t ep_hndl, uint32_t timeout,
				gni_post_state_t *post_state, uint32_t *remote_addr,
				uint32_t *remote_id);
gni_return_t GNI_EpPostDataWaitById(gni_ep_handle_t ep_hndl, uint64_t datagram_id,
				    uint32_t timeout, gni_post_state_t *post_state,
				    uint32_t *remote_addr, uint32_t *remote_id);
gni_return_t GNI_PostDataProbe(gni_nic_handle_t nic_hndl, uint32_t *remote_addr,
			       uint32_t *remote_id);
gni_return_t GNI_PostDataProbeById(gni_nic_handle_t nic_hndl, uint64_t *datagram_id);
gni_return_t GNI_PostdataProbeWaitById(gni_nic_handle_t nic_hndl, uint32_t timeout,
				       uint64_t *datagram_id);
gni_return_t GNI_EpPostDataCancel(gni_ep_handle_t ep_hndl);
gni_return_t GNI_EpPostDataCancelById(gni_ep_handle_t ep_hndl, uint64_t datagram_id);

/* Memory */
gni_return_t GNI_MemRegister(gni_nic_handle_t nic_hndl, uint64_t address, uint64_t length,
			     gni_cq_handle_t dst_cq_hndl, uint32_t flags, uint32_t vmdh_index,
			     gni_mem_handle_t *mem_hndl);
gni_return_t GNI_MemRegisterSegments(gni_nic_handle_t nic_hndl, gni_mem_segment_t *mem_segments,
				     uint32_t segments_cnt, gni_cq_handle_t dst_cq_hndl,
				     uint32_t flags, uint32_t vmdh_index,
				     gni_mem_handle_t *mem_hndl);
gni_return_t GNI_SetMddResources(gni_nic_handle_t nic_hndl, uint32_t num_entries);
gni_return_t GNI_MemDeregister(gni_nic_handle_t nic_hndl, gni_mem_handle_t *mem_hndl);
gni_return_t GNI_MemHndlQueryAttr(gni_mem_handle_t *mem_hndl, gni_mem_handle_attr_t attr,
				  int *yesno);
gni_return_t GNI_RebuildMemHndl(gni_mem_handle_t *src_mem_hndl, uint32_t vmdh_index,
				gni_mem_handle_t *dst_mem_hndl);
gni_return_t GNI_MemQueryHndls(gni_nic_handle_t nic_hndl, int fd, gni_mem_handle_t *mem_hndl,
			       uint64_t *address, uint64_t *length);

/* Completion queues */
gni_return_t GNI_CqCreate(gni_nic_handle_t nic_hndl, uint32_t entry_count, uint32_t delay_count,
			  gni_cq_mode_t mode, void (*handler)(gni_cq_entry_t *, void *),
			  void *context, gni_cq_handle_t *cq_hndl);
gni_return_t GNI_CqDestroy(gni_cq_handle_t cq_hndl);
gni_return_t GNI_CqGetEvent(gni_cq_handle_t cq_hndl, gni_cq_entry_t *event_data);
gni_return_t GNI_CqWaitEvent(gni_cq_handle_t cq_hndl, uint64_t timeout,
			     gni_cq_entry_t *event_data);
gni_return_t GNI_CqVectorWaitEvent(gni_cq_handle_t *cq_hndls, uint32_t num_cqs, uint64_t timeout,
				   gni_cq_entry_t *event_data, uint32_t *which);
gni_return_t GNI_CqVectorMonitor(gni_cq_handle_t *cq_hndls, uint32_t num_cqs, uint64_t timeout,
				 uint32_t *which);
gni_return_t GNI_CqInterruptMask(gni_cq_handle_t cq_hndl);
gni_return_t GNI_CqInterruptUnmask(gni_cq_handle_t cq_hndl);
gni_return_t GNI_CqTestEvent(gni_cq_handle_t cq_hndl);
gni_return_t GNI_CqErrorStr(gni_cq_entry_t entry, void *buffer, uint32_t len);
gni_return_t GNI_CqErrorRecoverable(gni_cq_entry_t entry, uint32_t *recoverable);

/* Posts */
gni_return_t GNI_PostRdma(gni_ep_handle_t ep_hndl, gni_post_descriptor_t *post_descr);
gni_return_t GNI_PostFma(gni_ep_handle_t ep_hndl, gni_post_descriptor_t *post_descr);
gni_return_t GNI_PostCqWrite(gni_ep_handle_t ep_hndl, gni_post_descriptor_t *post_descr);
gni_return_t GNI_GetCompleted(gni_cq_handle_t cq_hndl, gni_cq_entry_t event_data,
			      gni_post_descriptor_t **post_descr);

/* Short messages */
gni_return_t GNI_SmsgBufferSizeNeeded(gni_smsg_attr_t *smsg_attr, unsigned int *size);
gni_return_t GNI_SmsgInit(gni_ep_handle_t ep_hndl, gni_smsg_attr_t *local_smsg_attr,
			  gni_smsg_attr_t *remote_smsg_attr);
gni_return_t GNI_SmsgSetDeliveryMode(gni_nic_handle_t nic_handle, uint16_t dlvr_mode);
gni_return_t GNI_SmsgSend(gni_ep_handle_t ep_hndl, void *header, uint32_t header_length,
			  void *data, uint32_t data_length, uint32_t msg_id);
gni_return_t GNI_SmsgSendWTag(gni_ep_handle_t ep_hndl, void *header, uint32_t header_length,
			      void *data, uint32_t data_length, uint32_t msg_id, uint8_t tag);
gni_return_t GNI_SmsgGetNext(gni_ep_handle_t ep_hndl, void **header);
gni_return_t GNI_SmsgGetNextWTag(gni_ep_handle_t ep_hndl, void **header, uint8_t *tag);
gni_return_t GNI_SmsgRelease(gni_ep_handle_t ep_hndl);
gni_return_t GNI_SmsgSetMaxRetrans(gni_nic_handle_t nic_handle, uint16_t max_retrans);

/* Shared message queues */
gni_return_t GNI_MsgqInit(gni_nic_handle_t nic_hndl, gni_msgq_rcv_cb_func *rcv_cb, void *cb_data,
			  gni_cq_handle_t snd_cq, gni_msgq_attr_t *attrs,
			  gni_msgq_handle_t *msgq_hndl);
gni_return_t GNI_MsgqRelease(gni_msgq_handle_t msgq_hndl);
gni_return_t GNI_MsgqIdle(gni_msgq_handle_t msgq_hndl);
gni_return_t GNI_MsgqGetConnAttrs(gni_msgq_handle_t msgq_hndl, uint32_t pe_addr,
				  gni_msgq_ep_attr_t *attrs, uint32_t *attrs_size);
gni_return_t GNI_MsgqConnect(gni_msgq_handle_t msgq_hndl, uint32_t pe_addr,
			     gni_msgq_ep_attr_t *attrs);
gni_return_t GNI_MsgqConnRelease(gni_msgq_handle_t msgq_hndl, uint32_t pe_addr);
gni_return_t GNI_MsgqSend(gni_msgq_handle_t msgq_hndl, gni_ep_handle_t ep_hndl, void *hdr,
			  uint32_t hdr_len, void *msg, uint32_t msg_len, uint32_t msg_id,
			  uint8_t msg_tag);
gni_return_t GNI_MsgqProgress(gni_msgq_handle_t msgq_hndl, uint32_t timeout);
gni_return_t GNI_MsgqSize(gni_msgq_attr_t *attrs, uint32_t *size);

/* Error events */
gni_return_t GNI_SubscribeErrors(gni_nic_handle_t nic_handle, uint32_t device_id,
				 gni_error_mask_t mask, uint32_t EEQ_size,
				 gni_err_handle_t *err_handle);
gni_return_t GNI_ReleaseErrors(gni_err_handle_t err_handle);
gni_return_t GNI_GetErrorMask(gni_err_handle_t err_handle, gni_error_mask_t *mask);
gni_return_t GNI_SetErrorMask(gni_err_handle_t err_handle, gni_error_mask_t mask_in,
			      gni_error_mask_t *mask_out);
gni_return_t GNI_GetErrorEvent(gni_err_handle_t err_handle, gni_error_event_t *event);
gni_return_t GNI_WaitErrorEvents(gni_err_handle_t err_handle, gni_error_event_t *events,
				 uint32_t events_size, uint32_t timeout, uint32_t *num_events);
gni_return_t GNI_SetErrorPtag(gni_err_handle_t err_handle, uint8_t ptag);

/* Devices, versions, resources */
gni_return_t GNI_GetNumLocalDevices(int *num_devices);
gni_return_t GNI_GetLocalDeviceIds(int len, int *device_ids);
gni_return_t GNI_GetVersion(uint32_t *version);
gni_return_t GNI_GetVersionInformation(gni_version_info_t *version_info);
gni_return_t GNI_GetDeviceType(gni_nic_device_t *dev_type);
gni_return_t GNI_GetDevResInfo(uint32_t device_id, gni_dev_res_t res_type,
			       gni_dev_res_desc_t *res_desc);
gni_return_t GNI_GetJobResInfo(uint32_t device_id, uint8_t ptag, gni_job_res_t res_type,
			       gni_job_res_desc_t *res_desc);
gni_return_t GNI_GetNttGran(uint32_t device_id, uint32_t *ntt_gran);
gni_return_t GNI_GetPtag(uint32_t device_id, uint32_t cookie, uint8_t *ptag);
gni_return_t GNI_GetNicStat(gni_nic_handle_t nic_hndl, gni_statistic_t stat, uint32_t *value);
gni_return_t GNI_ResetNicStat(gni_nic_handle_t nic_hndl, gni_statistic_t stat);

/* Collective engine (Aries; Gemini answers GNI_RC_ILLEGAL_OP) */
gni_return_t GNI_CeCreate(gni_nic_handle_t nic_hndl, gni_ce_handle_t *ce_hndl);
gni_return_t GNI_CeGetId(gni_ce_handle_t ce_hndl, uint32_t *ce_id);
gni_return_t GNI_EpSetCeAttr(gni_ep_handle_t ep_hndl, uint32_t ce_id, uint32_t child_id,
			     gni_ce_child_t child_type);
gni_return_t GNI_CeConfigure(gni_ce_handle_t ce_hndl, gni_ep_handle_t *child_eps,
			     uint32_t num_child_eps, gni_ep_handle_t parent_ep,
			     gni_cq_handle_t cq_hndl, uint32_t modes);
gni_return_t GNI_CeCheckResult(gni_ce_result_t *result, uint32_t length);
gni_return_t GNI_CeDestroy(gni_ce_handle_t ce_hndl);

#ifdef __cplusplus
}
#endif

#endif /* _GNI_PUB_H_ */
