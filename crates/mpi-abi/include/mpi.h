/*
 * mpi.h of nicemu's MPI library (libmpi_abi.so.1): the MPI 5.0 standard ABI (MPI-5.0,
 * chapter 20). Written for nicemu; the numbers (handle values, constants, error classes) and
 * the layout of MPI_Status are the standard's, as listed by the MPI Forum's ABI reference
 * header (mpi-forum/mpi-abi-stubs 1.0.0) and summarised in the project's MPI baseline notes
 * (section 5: "MPI standard ABI"). A program compiled against this header runs with any
 * MPI library of that ABI, and a program compiled against another implementation's
 * standard-ABI header runs with this library.
 *
 * Declared here: the functions this library exports (see docs/c-abi.md for the list and for
 * what is not supported). Handles are pointers to incomplete structs; predefined handles
 * are small constants.
 */
#ifndef NICEMU_MPI_H
#define NICEMU_MPI_H

#include <stdint.h>

#if defined(__cplusplus)
extern "C" {
#endif

#define MPI_VERSION    5
#define MPI_SUBVERSION 0
#define MPI_ABI_VERSION    1
#define MPI_ABI_SUBVERSION 0

/* Integer types (LP64 and LLP64 alike: pointer-sized address, 64-bit offset and count). */
typedef intptr_t MPI_Aint;
typedef int64_t  MPI_Offset;
typedef int64_t  MPI_Count;

/* Status: 32 bytes; the five internal ints are the library's. */
typedef struct {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int MPI_internal[5];
} MPI_Status;

/* Handles. */
typedef struct MPI_ABI_Op *MPI_Op;
typedef struct MPI_ABI_Comm *MPI_Comm;
typedef struct MPI_ABI_Group *MPI_Group;
typedef struct MPI_ABI_Win *MPI_Win;
typedef struct MPI_ABI_File *MPI_File;
typedef struct MPI_ABI_Session *MPI_Session;
typedef struct MPI_ABI_Message *MPI_Message;
typedef struct MPI_ABI_Info *MPI_Info;
typedef struct MPI_ABI_Errhandler *MPI_Errhandler;
typedef struct MPI_ABI_Request *MPI_Request;
typedef struct MPI_ABI_Datatype *MPI_Datatype;

/* Predefined operations. */
#define MPI_OP_NULL     ((MPI_Op)0x020)
#define MPI_SUM         ((MPI_Op)0x021)
#define MPI_MIN         ((MPI_Op)0x022)
#define MPI_MAX         ((MPI_Op)0x023)
#define MPI_PROD        ((MPI_Op)0x024)
#define MPI_BAND        ((MPI_Op)0x028)
#define MPI_BOR         ((MPI_Op)0x029)
#define MPI_BXOR        ((MPI_Op)0x02a)
#define MPI_LAND        ((MPI_Op)0x030)
#define MPI_LOR         ((MPI_Op)0x031)
#define MPI_LXOR        ((MPI_Op)0x032)
#define MPI_MINLOC      ((MPI_Op)0x038)
#define MPI_MAXLOC      ((MPI_Op)0x039)
#define MPI_REPLACE     ((MPI_Op)0x03c)
#define MPI_NO_OP       ((MPI_Op)0x03d)

/* Other predefined handles. */
#define MPI_COMM_NULL          ((MPI_Comm)0x100)
#define MPI_COMM_WORLD         ((MPI_Comm)0x101)
#define MPI_COMM_SELF          ((MPI_Comm)0x102)
#define MPI_GROUP_NULL         ((MPI_Group)0x108)
#define MPI_GROUP_EMPTY        ((MPI_Group)0x109)
#define MPI_WIN_NULL           ((MPI_Win)0x110)
#define MPI_FILE_NULL          ((MPI_File)0x118)
#define MPI_SESSION_NULL       ((MPI_Session)0x120)
#define MPI_MESSAGE_NULL       ((MPI_Message)0x128)
#define MPI_MESSAGE_NO_PROC    ((MPI_Message)0x129)
#define MPI_INFO_NULL          ((MPI_Info)0x130)
#define MPI_INFO_ENV           ((MPI_Info)0x131)
#define MPI_ERRHANDLER_NULL    ((MPI_Errhandler)0x140)
#define MPI_ERRORS_ARE_FATAL   ((MPI_Errhandler)0x141)
#define MPI_ERRORS_ABORT       ((MPI_Errhandler)0x142)
#define MPI_ERRORS_RETURN      ((MPI_Errhandler)0x143)
#define MPI_REQUEST_NULL       ((MPI_Request)0x180)

/* Predefined datatypes. */
#define MPI_DATATYPE_NULL          ((MPI_Datatype)0x200)
#define MPI_AINT                   ((MPI_Datatype)0x201)
#define MPI_COUNT                  ((MPI_Datatype)0x202)
#define MPI_OFFSET                 ((MPI_Datatype)0x203)
#define MPI_PACKED                 ((MPI_Datatype)0x207)
#define MPI_SHORT                  ((MPI_Datatype)0x208)
#define MPI_INT                    ((MPI_Datatype)0x209)
#define MPI_LONG                   ((MPI_Datatype)0x20a)
#define MPI_LONG_LONG              ((MPI_Datatype)0x20b)
#define MPI_LONG_LONG_INT          MPI_LONG_LONG
#define MPI_UNSIGNED_SHORT         ((MPI_Datatype)0x20c)
#define MPI_UNSIGNED               ((MPI_Datatype)0x20d)
#define MPI_UNSIGNED_LONG          ((MPI_Datatype)0x20e)
#define MPI_UNSIGNED_LONG_LONG     ((MPI_Datatype)0x20f)
#define MPI_FLOAT                  ((MPI_Datatype)0x210)
#define MPI_C_FLOAT_COMPLEX        ((MPI_Datatype)0x212)
#define MPI_C_COMPLEX              MPI_C_FLOAT_COMPLEX
#define MPI_CXX_FLOAT_COMPLEX      ((MPI_Datatype)0x213)
#define MPI_DOUBLE                 ((MPI_Datatype)0x214)
#define MPI_C_DOUBLE_COMPLEX       ((MPI_Datatype)0x216)
#define MPI_CXX_DOUBLE_COMPLEX     ((MPI_Datatype)0x217)
#define MPI_LOGICAL                ((MPI_Datatype)0x218)
#define MPI_INTEGER                ((MPI_Datatype)0x219)
#define MPI_REAL                   ((MPI_Datatype)0x21a)
#define MPI_COMPLEX                ((MPI_Datatype)0x21b)
#define MPI_DOUBLE_PRECISION       ((MPI_Datatype)0x21c)
#define MPI_DOUBLE_COMPLEX         ((MPI_Datatype)0x21d)
#define MPI_CHARACTER              ((MPI_Datatype)0x21e)
#define MPI_LONG_DOUBLE            ((MPI_Datatype)0x220)
#define MPI_C_LONG_DOUBLE_COMPLEX  ((MPI_Datatype)0x224)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x225)
#define MPI_FLOAT_INT              ((MPI_Datatype)0x228)
#define MPI_DOUBLE_INT             ((MPI_Datatype)0x229)
#define MPI_LONG_INT               ((MPI_Datatype)0x22a)
#define MPI_2INT                   ((MPI_Datatype)0x22b)
#define MPI_SHORT_INT              ((MPI_Datatype)0x22c)
#define MPI_LONG_DOUBLE_INT        ((MPI_Datatype)0x22d)
#define MPI_2REAL                  ((MPI_Datatype)0x230)
#define MPI_2DOUBLE_PRECISION      ((MPI_Datatype)0x231)
#define MPI_2INTEGER               ((MPI_Datatype)0x232)
#define MPI_C_BOOL                 ((MPI_Datatype)0x238)
#define MPI_CXX_BOOL               ((MPI_Datatype)0x239)
#define MPI_WCHAR                  ((MPI_Datatype)0x23c)
#define MPI_INT8_T                 ((MPI_Datatype)0x240)
#define MPI_UINT8_T                ((MPI_Datatype)0x241)
#define MPI_CHAR                   ((MPI_Datatype)0x243)
#define MPI_SIGNED_CHAR            ((MPI_Datatype)0x244)
#define MPI_UNSIGNED_CHAR          ((MPI_Datatype)0x245)
#define MPI_BYTE                   ((MPI_Datatype)0x247)
#define MPI_INT16_T                ((MPI_Datatype)0x248)
#define MPI_UINT16_T               ((MPI_Datatype)0x249)
#define MPI_INT32_T                ((MPI_Datatype)0x250)
#define MPI_UINT32_T               ((MPI_Datatype)0x251)
#define MPI_INT64_T                ((MPI_Datatype)0x258)
#define MPI_UINT64_T               ((MPI_Datatype)0x259)

/* Error classes. */
enum {
    MPI_SUCCESS = 0,
    MPI_ERR_BUFFER = 1, MPI_ERR_COUNT = 2, MPI_ERR_TYPE = 3, MPI_ERR_TAG = 4,
    MPI_ERR_COMM = 5, MPI_ERR_RANK = 6, MPI_ERR_REQUEST = 7, MPI_ERR_ROOT = 8,
    MPI_ERR_GROUP = 9, MPI_ERR_OP = 10, MPI_ERR_TOPOLOGY = 11, MPI_ERR_DIMS = 12,
    MPI_ERR_ARG = 13, MPI_ERR_UNKNOWN = 14, MPI_ERR_TRUNCATE = 15, MPI_ERR_OTHER = 16,
    MPI_ERR_INTERN = 17, MPI_ERR_PENDING = 18, MPI_ERR_IN_STATUS = 19, MPI_ERR_ACCESS = 20,
    MPI_ERR_AMODE = 21, MPI_ERR_ASSERT = 22, MPI_ERR_BAD_FILE = 23, MPI_ERR_BASE = 24,
    MPI_ERR_CONVERSION = 25, MPI_ERR_DISP = 26, MPI_ERR_DUP_DATAREP = 27,
    MPI_ERR_FILE_EXISTS = 28, MPI_ERR_FILE_IN_USE = 29, MPI_ERR_FILE = 30,
    MPI_ERR_INFO_KEY = 31, MPI_ERR_INFO_NOKEY = 32, MPI_ERR_INFO_VALUE = 33,
    MPI_ERR_INFO = 34, MPI_ERR_IO = 35, MPI_ERR_KEYVAL = 36, MPI_ERR_LOCKTYPE = 37,
    MPI_ERR_NAME = 38, MPI_ERR_NO_MEM = 39, MPI_ERR_NOT_SAME = 40, MPI_ERR_NO_SPACE = 41,
    MPI_ERR_NO_SUCH_FILE = 42, MPI_ERR_PORT = 43, MPI_ERR_QUOTA = 44, MPI_ERR_READ_ONLY = 45,
    MPI_ERR_RMA_ATTACH = 46, MPI_ERR_RMA_CONFLICT = 47, MPI_ERR_RMA_RANGE = 48,
    MPI_ERR_RMA_SHARED = 49, MPI_ERR_RMA_SYNC = 50, MPI_ERR_SERVICE = 51, MPI_ERR_SIZE = 52,
    MPI_ERR_SPAWN = 53, MPI_ERR_UNSUPPORTED_DATAREP = 54,
    MPI_ERR_UNSUPPORTED_OPERATION = 55, MPI_ERR_WIN = 56, MPI_ERR_RMA_FLAVOR = 57,
    MPI_ERR_PROC_ABORTED = 58, MPI_ERR_VALUE_TOO_LARGE = 59, MPI_ERR_SESSION = 60,
    MPI_ERR_ERRHANDLER = 61, MPI_ERR_ABI = 62,
    MPI_ERR_LASTCODE = 16383
};

/* Buffer addresses and ignored arguments. */
#define MPI_BOTTOM            ((void *)0)
#define MPI_IN_PLACE          ((void *)1)
#define MPI_BUFFER_AUTOMATIC  ((void *)2)
#define MPI_ARGV_NULL         ((char **)0)
#define MPI_ARGVS_NULL        ((char ***)0)
#define MPI_ERRCODES_IGNORE   ((int *)0)
#define MPI_STATUS_IGNORE     ((MPI_Status *)0)
#define MPI_STATUSES_IGNORE   ((MPI_Status *)0)
#define MPI_UNWEIGHTED        ((int *)10)
#define MPI_WEIGHTS_EMPTY     ((int *)11)

/* String sizes. */
#define MPI_MAX_DATAREP_STRING          128
#define MPI_MAX_ERROR_STRING            512
#define MPI_MAX_INFO_KEY                256
#define MPI_MAX_INFO_VAL               1024
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
#define MPI_MAX_OBJECT_NAME             128
#define MPI_MAX_PORT_NAME              1024
#define MPI_MAX_PROCESSOR_NAME          256
#define MPI_MAX_STRINGTAG_LEN          1024
#define MPI_MAX_PSET_NAME_LEN          1024
#define MPI_BSEND_OVERHEAD              512

/* Window assertion modes. */
enum {
    MPI_MODE_NOCHECK = 1024, MPI_MODE_NOPRECEDE = 2048, MPI_MODE_NOPUT = 4096,
    MPI_MODE_NOSTORE = 8192, MPI_MODE_NOSUCCEED = 16384
};

/* Sentinels. */
enum {
    MPI_ANY_SOURCE = -1, MPI_ANY_TAG = -2, MPI_PROC_NULL = -3, MPI_ROOT = -4,
    MPI_UNDEFINED = -32766
};

enum {
    MPI_THREAD_SINGLE = 0, MPI_THREAD_FUNNELED = 1024, MPI_THREAD_SERIALIZED = 2048,
    MPI_THREAD_MULTIPLE = 4096,
    MPI_ORDER_C = 12, MPI_ORDER_FORTRAN = 15,
    MPI_COMBINER_NAMED = 101, MPI_COMBINER_DUP = 102, MPI_COMBINER_CONTIGUOUS = 103,
    MPI_COMBINER_VECTOR = 104, MPI_COMBINER_HVECTOR = 105, MPI_COMBINER_INDEXED = 106,
    MPI_COMBINER_HINDEXED = 107, MPI_COMBINER_INDEXED_BLOCK = 108,
    MPI_COMBINER_HINDEXED_BLOCK = 109, MPI_COMBINER_STRUCT = 110,
    MPI_COMBINER_RESIZED = 116,
    MPI_IDENT = 201, MPI_CONGRUENT = 202, MPI_SIMILAR = 203, MPI_UNEQUAL = 204,
    MPI_CART = 211, MPI_GRAPH = 212, MPI_DIST_GRAPH = 213,
    MPI_COMM_TYPE_SHARED = 221, MPI_COMM_TYPE_HW_UNGUIDED = 222,
    MPI_COMM_TYPE_HW_GUIDED = 223, MPI_COMM_TYPE_RESOURCE_GUIDED = 224,
    MPI_LOCK_EXCLUSIVE = 301, MPI_LOCK_SHARED = 302,
    MPI_WIN_FLAVOR_CREATE = 311, MPI_WIN_FLAVOR_ALLOCATE = 312,
    MPI_WIN_FLAVOR_DYNAMIC = 313, MPI_WIN_FLAVOR_SHARED = 314,
    MPI_WIN_UNIFIED = 321, MPI_WIN_SEPARATE = 322
};

/* Predefined attribute keys. */
enum {
    MPI_KEYVAL_INVALID = 0,
    MPI_TAG_UB = 501, MPI_IO = 502, MPI_HOST = 503, MPI_WTIME_IS_GLOBAL = 504,
    MPI_APPNUM = 505, MPI_LASTUSEDCODE = 506, MPI_UNIVERSE_SIZE = 507,
    MPI_WIN_BASE = 601, MPI_WIN_DISP_UNIT = 602, MPI_WIN_SIZE = 603,
    MPI_WIN_CREATE_FLAVOR = 604, MPI_WIN_MODEL = 605
};

/* Callback types. */
typedef void (MPI_User_function)(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype);
typedef int (MPI_Comm_copy_attr_function)(MPI_Comm comm, int keyval, void *extra_state,
                                          void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int (MPI_Comm_delete_attr_function)(MPI_Comm comm, int keyval, void *attribute_val,
                                            void *extra_state);
typedef void (MPI_Comm_errhandler_function)(MPI_Comm *comm, int *error_code, ...);
typedef void (MPI_Win_errhandler_function)(MPI_Win *win, int *error_code, ...);

#define MPI_COMM_NULL_COPY_FN    ((MPI_Comm_copy_attr_function *)0x0)
#define MPI_COMM_DUP_FN          ((MPI_Comm_copy_attr_function *)0x1)
#define MPI_COMM_NULL_DELETE_FN  ((MPI_Comm_delete_attr_function *)0x0)

/* Environment. */
int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Finalize(void);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Query_thread(int *provided);
int MPI_Is_thread_main(int *flag);
int MPI_Abort(MPI_Comm comm, int errorcode);
double MPI_Wtime(void);
double MPI_Wtick(void);
int MPI_Get_processor_name(char *name, int *resultlen);
int MPI_Get_version(int *version, int *subversion);
int MPI_Get_library_version(char *version, int *resultlen);
int MPI_Abi_get_version(int *abi_major, int *abi_minor);
int MPI_Error_string(int errorcode, char *string, int *resultlen);
int MPI_Error_class(int errorcode, int *errorclass);
int MPI_Buffer_attach(void *buffer, int size);
int MPI_Buffer_detach(void *buffer_addr, int *size);
int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr);
int MPI_Free_mem(void *base);

/* Communicators and groups. */
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm);
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result);
int MPI_Comm_test_inter(MPI_Comm comm, int *flag);
int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name);
int MPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen);
int MPI_Comm_group(MPI_Comm comm, MPI_Group *group);
int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup);
int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup);
int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]);
int MPI_Group_size(MPI_Group group, int *size);
int MPI_Group_rank(MPI_Group group, int *rank);
int MPI_Group_free(MPI_Group *group);
int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag);
int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val);
int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval);
int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function *comm_delete_attr_fn,
                           int *comm_keyval, void *extra_state);
int MPI_Comm_free_keyval(int *comm_keyval);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler);
int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function *comm_errhandler_fn, MPI_Errhandler *errhandler);
int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode);
int MPI_Errhandler_free(MPI_Errhandler *errhandler);

/* Info. */
int MPI_Info_create(MPI_Info *info);
int MPI_Info_set(MPI_Info info, const char *key, const char *value);
int MPI_Info_get_string(MPI_Info info, const char *key, int *buflen, char *value, int *flag);
int MPI_Info_get_nkeys(MPI_Info info, int *nkeys);
int MPI_Info_get_nthkey(MPI_Info info, int n, char *key);
int MPI_Info_delete(MPI_Info info, const char *key);
int MPI_Info_dup(MPI_Info info, MPI_Info *newinfo);
int MPI_Info_free(MPI_Info *info);

/* Point-to-point. */
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status);
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status);
int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Start(MPI_Request *request);
int MPI_Startall(int count, MPI_Request array_of_requests[]);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);
int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status);
int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status);
int MPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status);
int MPI_Imrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request);
int MPI_Wait(MPI_Request *request, MPI_Status *status);
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);
int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[]);
int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status);
int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag, MPI_Status *status);
int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[], MPI_Status array_of_statuses[]);
int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[], MPI_Status array_of_statuses[]);
int MPI_Cancel(MPI_Request *request);
int MPI_Test_cancelled(const MPI_Status *status, int *flag);
int MPI_Request_free(MPI_Request *request);
int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count);
int MPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype, int *count);
int MPI_Status_set_elements(MPI_Status *status, MPI_Datatype datatype, int count);
int MPI_Status_set_cancelled(MPI_Status *status, int flag);
int MPI_Status_set_source(MPI_Status *status, int source);
int MPI_Status_set_tag(MPI_Status *status, int tag);
int MPI_Status_set_error(MPI_Status *status, int error);

/* Datatypes and packing. */
int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_indexed(int count, const int array_of_blocklengths[], const int array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_create_struct(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[], const MPI_Datatype array_of_types[], MPI_Datatype *newtype);
int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *newtype);
int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_commit(MPI_Datatype *datatype);
int MPI_Type_free(MPI_Datatype *datatype);
int MPI_Type_size(MPI_Datatype datatype, int *size);
int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent);
int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent);
int MPI_Type_set_name(MPI_Datatype datatype, const char *type_name);
int MPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen);
int MPI_Get_address(const void *location, MPI_Aint *address);
MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp);
MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2);
int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize, int *position, MPI_Comm comm);
int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype datatype, MPI_Comm comm);
int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int *size);
int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op);
int MPI_Op_free(MPI_Op *op);
int MPI_Op_commutative(MPI_Op op, int *commute);

/* Collectives. */
int MPI_Barrier(MPI_Comm comm);
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm);
int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, MPI_Request *request);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request);
int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request);
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request);
int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm);
int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request);

/* One-sided communication. */
int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win);
int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win);
int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win);
int MPI_Win_attach(MPI_Win win, void *base, MPI_Aint size);
int MPI_Win_detach(MPI_Win win, const void *base);
int MPI_Win_free(MPI_Win *win);
int MPI_Win_fence(int assert, MPI_Win win);
int MPI_Win_lock(int lock_type, int rank, int assert, MPI_Win win);
int MPI_Win_unlock(int rank, MPI_Win win);
int MPI_Win_lock_all(int assert, MPI_Win win);
int MPI_Win_unlock_all(MPI_Win win);
int MPI_Win_flush(int rank, MPI_Win win);
int MPI_Win_flush_all(MPI_Win win);
int MPI_Win_flush_local(int rank, MPI_Win win);
int MPI_Win_flush_local_all(MPI_Win win);
int MPI_Win_sync(MPI_Win win);
int MPI_Win_get_group(MPI_Win win, MPI_Group *group);
int MPI_Win_get_attr(MPI_Win win, int win_keyval, void *attribute_val, int *flag);
int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler);
int MPI_Win_get_errhandler(MPI_Win win, MPI_Errhandler *errhandler);
int MPI_Win_create_errhandler(MPI_Win_errhandler_function *win_errhandler_fn, MPI_Errhandler *errhandler);
int MPI_Put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win);
int MPI_Get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win);
int MPI_Rput(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request *request);
int MPI_Rget(void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request *request);
int MPI_Accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win);
int MPI_Raccumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win, MPI_Request *request);
int MPI_Get_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr, int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win);
int MPI_Fetch_and_op(const void *origin_addr, void *result_addr, MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Op op, MPI_Win win);
int MPI_Compare_and_swap(const void *origin_addr, const void *compare_addr, void *result_addr, MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Win win);

/* Handle conversions. */
int MPI_Comm_toint(MPI_Comm comm);
MPI_Comm MPI_Comm_fromint(int i);
int MPI_Errhandler_toint(MPI_Errhandler errhandler);
MPI_Errhandler MPI_Errhandler_fromint(int i);
int MPI_File_toint(MPI_File file);
MPI_File MPI_File_fromint(int i);
int MPI_Group_toint(MPI_Group group);
MPI_Group MPI_Group_fromint(int i);
int MPI_Info_toint(MPI_Info info);
MPI_Info MPI_Info_fromint(int i);
int MPI_Message_toint(MPI_Message message);
MPI_Message MPI_Message_fromint(int i);
int MPI_Op_toint(MPI_Op op);
MPI_Op MPI_Op_fromint(int i);
int MPI_Request_toint(MPI_Request request);
MPI_Request MPI_Request_fromint(int i);
int MPI_Session_toint(MPI_Session session);
MPI_Session MPI_Session_fromint(int i);
int MPI_Type_toint(MPI_Datatype datatype);
MPI_Datatype MPI_Type_fromint(int i);
int MPI_Win_toint(MPI_Win win);
MPI_Win MPI_Win_fromint(int i);

/* Calls of the standard this library answers with MPI_ERR_UNSUPPORTED_OPERATION. Every
 * other function of the standard ABI is exported too and answers the same way (the tools
 * interface, MPI_T_*, with MPI_T_ERR_NOT_SUPPORTED), so programs compiled against another
 * standard-ABI header link; this header declares the ones above only. */
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);
int MPI_Comm_spawn(const char *command, char *argv[], int maxprocs, MPI_Info info, int root, MPI_Comm comm, MPI_Comm *intercomm, int array_of_errcodes[]);
int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag, MPI_Comm *newintercomm);
int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *comm_cart);
int MPI_Dims_create(int nnodes, int ndims, int dims[]);
int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win);
int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh);
int MPI_Session_init(MPI_Info info, MPI_Errhandler errhandler, MPI_Session *session);
int MPI_Session_finalize(MPI_Session *session);
int MPI_Group_from_session_pset(MPI_Session session, const char *pset_name, MPI_Group *newgroup);
int MPI_Comm_create_from_group(MPI_Group group, const char *stringtag, MPI_Info info, MPI_Errhandler errhandler, MPI_Comm *newcomm);
int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]);
int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank);
int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[], int maxoutdegree, int destinations[], int destweights[]);
int MPI_Win_post(MPI_Group group, int assert, MPI_Win win);
int MPI_Win_start(MPI_Group group, int assert, MPI_Win win);
int MPI_Win_complete(MPI_Win win);
int MPI_Win_wait(MPI_Win win);
int MPI_Win_test(MPI_Win win, int *flag);

#if defined(__cplusplus)
}
#endif

#endif /* NICEMU_MPI_H */
