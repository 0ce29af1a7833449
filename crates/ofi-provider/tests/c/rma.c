/* RMA and atomics between two RDM endpoints of the nicemu provider in one process: memory
 * registration with provider keys, fi_write/writev/writemsg/inject_write/writedata (remote
 * CQ data on the target's CQ), fi_read/readv/readmsg, fi_atomic/fetch_atomic/
 * compare_atomic over several types, fi_query_atomic/fi_atomicvalid, and accesses the NIC
 * must refuse (outside the region, a wrong key, a write to a read-only region) ending in an
 * FI_EACCES error completion while the endpoint goes on working. A second domain opened
 * without FI_MR_PROV_KEY uses the application's keys. Prints "rma: ok" on success. */
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_NAME "rma"
#include "check.h"

static struct fid_cq *cq[2];
static struct fid_ep *ep[2];
static fi_addr_t addr[2];

/* Completions of the other CQ read while waiting (progress is manual: reading a CQ
 * progresses its endpoint). */
static struct fi_cq_data_entry stash[2][16];
static int stashed[2];

static void poll_other(int j) {
    struct fi_cq_data_entry e;
    if (stashed[j] < 16 && fi_cq_read(cq[j], &e, 1) == 1)
        stash[j][stashed[j]++] = e;
}

/* Next completion on cq[i] (progressing both CQs); returns 0, or the error number of an
 * error completion (its entry in *err). */
static int wait_cq(int i, struct fi_cq_data_entry *e, struct fi_cq_err_entry *err) {
    if (stashed[i]) {
        *e = stash[i][0];
        memmove(&stash[i][0], &stash[i][1], sizeof stash[i][0] * (size_t)--stashed[i]);
        return 0;
    }
    for (long spins = 0;; spins++) {
        poll_other(1 - i);
        ssize_t n = fi_cq_read(cq[i], e, 1);
        if (n == 1)
            return 0;
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry tmp = {0};
            if (!err)
                err = &tmp;
            CHECK(fi_cq_readerr(cq[i], err, 0) == 1, "fi_cq_readerr");
            if (err == &tmp)
                CHECK(0, "error completion on CQ %d: %s", i, fi_strerror(err->err));
            return err->err;
        }
        CHECK(n == -FI_EAGAIN, "fi_cq_read = %zd", n);
        CHECK(spins < 50000000L, "no completion on CQ %d", i);
    }
}

static void expect_ok(int i, void *ctx, uint64_t flags) {
    struct fi_cq_data_entry e;
    CHECK(wait_cq(i, &e, NULL) == 0, "completion");
    CHECK(e.op_context == ctx, "context %p, expected %p", e.op_context, ctx);
    CHECK((e.flags & flags) == flags, "flags %#lx, expected %#lx", (unsigned long)e.flags,
          (unsigned long)flags);
}

static void expect_error(void *ctx, const char *what) {
    struct fi_cq_data_entry e;
    struct fi_cq_err_entry err = {0};
    int rc = wait_cq(0, &e, &err);
    CHECK(rc == FI_EACCES, "%s: error %d (%s), expected FI_EACCES", what, rc, fi_strerror(rc));
    CHECK(err.op_context == ctx, "%s: error context", what);
}

/* Progress the target until its registered memory shows what peers did. */
static void settle(void) {
    for (int k = 0; k < 100; k++)
        poll_other(1);
}

static struct fi_info *get_info(int mr_mode) {
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    CHECK(hints, "fi_allocinfo");
    hints->caps = FI_MSG | FI_RMA | FI_ATOMIC;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->domain_attr->mr_mode = mr_mode;
    hints->fabric_attr->prov_name = strdup("nicemu");
    CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
    fi_freeinfo(hints);
    return info;
}

int main(void) {
    /* Without FI_RMA in the hints, no RMA is offered. */
    struct fi_info *plain = NULL, *h0 = fi_allocinfo();
    h0->caps = FI_MSG;
    h0->fabric_attr->prov_name = strdup("nicemu");
    CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h0, &plain));
    CHECK((plain->caps & (FI_RMA | FI_ATOMIC)) == 0, "RMA offered unasked");
    fi_freeinfo(plain);
    fi_freeinfo(h0);

    struct fi_info *info = get_info(FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_LOCAL);
    CHECK((info->caps & (FI_RMA | FI_ATOMIC)) == (FI_RMA | FI_ATOMIC), "caps %#lx",
          (unsigned long)info->caps);
    CHECK((info->caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)) ==
              (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE),
          "access modifiers");
    CHECK(info->domain_attr->mr_mode == FI_MR_PROV_KEY, "mr_mode %#x",
          info->domain_attr->mr_mode);
    size_t inject = info->tx_attr->inject_size;

    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
    CALL(fi_domain(fabric, info, &domain, NULL));
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CALL(fi_av_open(domain, &av_attr, &av, NULL));

    /* Registered before the endpoints exist: exposed when they are enabled. */
    enum { LEN = 1 << 20 };
    unsigned char *target = malloc(LEN), *ro = malloc(4096);
    for (size_t i = 0; i < LEN; i++)
        target[i] = (unsigned char)(i * 3 + 1);
    memset(ro, 0x5a, 4096);
    struct fid_mr *mr, *ro_mr;
    CALL(fi_mr_reg(domain, target, LEN, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));
    CALL(fi_mr_reg(domain, ro, 4096, FI_REMOTE_READ, 0, 0, 0, &ro_mr, NULL));
    uint64_t key = fi_mr_key(mr), ro_key = fi_mr_key(ro_mr);
    CHECK(key != FI_KEY_NOTAVAIL && key != ro_key, "keys %#lx %#lx", (unsigned long)key,
          (unsigned long)ro_key);
    CHECK(fi_mr_desc(mr) != NULL, "fi_mr_desc");

    char names[2][8];
    for (int i = 0; i < 2; i++) {
        struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
        CALL(fi_cq_open(domain, &cq_attr, &cq[i], NULL));
        CALL(fi_endpoint(domain, info, &ep[i], NULL));
        CALL(fi_ep_bind(ep[i], &av->fid, 0));
        CALL(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
        CALL(fi_enable(ep[i]));
        size_t len = sizeof names[i];
        CALL(fi_getname(&ep[i]->fid, names[i], &len));
    }
    CHECK(fi_av_insert(av, names, 2, addr, 0, NULL) == 2, "fi_av_insert");

    /* Writes of several sizes at several offsets; the target's memory shows them. */
    size_t sizes[] = {1, 8, 100, 192, 193, 4096, 16385, 100000, LEN / 2};
    unsigned char *src = malloc(LEN), *dst = malloc(LEN);
    int ctx;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t len = sizes[k], off = (k * 4099) % (LEN - len + 1);
        for (size_t i = 0; i < len; i++)
            src[i] = (unsigned char)(i + k + 7);
        CALL(fi_write(ep[0], src, len, NULL, addr[1], off, key, &ctx));
        expect_ok(0, &ctx, FI_RMA | FI_WRITE);
        settle();
        for (size_t i = 0; i < len; i++)
            CHECK(target[off + i] == (unsigned char)(i + k + 7), "write %zu B at %zu: byte %zu",
                  len, off, i);
        /* Read it back, from a different offset of the local buffer. */
        memset(dst, 0, len);
        CALL(fi_read(ep[0], dst, len, NULL, addr[1], off, key, &ctx));
        expect_ok(0, &ctx, FI_RMA | FI_READ);
        CHECK(memcmp(dst, src, len) == 0, "read back %zu B at %zu", len, off);
    }

    /* The target's own stores reach remote readers (mirrored when it next posts). */
    memset(target, 0xc3, 64);
    int sctx;
    char tiny = 1;
    CALL(fi_send(ep[1], &tiny, 1, NULL, addr[0], &sctx));
    struct fi_cq_data_entry e;
    char rtiny;
    CALL(fi_recv(ep[0], &rtiny, 1, NULL, FI_ADDR_UNSPEC, NULL));
    CHECK(wait_cq(0, &e, NULL) == 0, "receive");
    CHECK(wait_cq(1, &e, NULL) == 0, "send");
    CALL(fi_read(ep[0], dst, 64, NULL, addr[1], 0, key, &ctx));
    expect_ok(0, &ctx, FI_RMA | FI_READ);
    for (int i = 0; i < 64; i++)
        CHECK(dst[i] == 0xc3, "the target's store at %d", i);

    /* writev, writemsg (with remote CQ data), readv, readmsg. */
    struct iovec iov = {.iov_base = src, .iov_len = 300};
    memset(src, 0x11, 300);
    CALL(fi_writev(ep[0], &iov, NULL, 1, addr[1], 1000, key, &ctx));
    expect_ok(0, &ctx, FI_RMA | FI_WRITE);
    struct fi_rma_iov riov = {.addr = 2000, .len = 300, .key = key};
    struct fi_msg_rma msg = {.msg_iov = &iov, .iov_count = 1, .addr = addr[1],
                             .rma_iov = &riov, .rma_iov_count = 1, .context = &ctx,
                             .data = 0xfeedbeef};
    CALL(fi_writemsg(ep[0], &msg, FI_COMPLETION | FI_REMOTE_CQ_DATA));
    expect_ok(0, &ctx, FI_RMA | FI_WRITE);
    CHECK(wait_cq(1, &e, NULL) == 0, "remote CQ data");
    CHECK((e.flags & (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)) ==
              (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA) && e.data == 0xfeedbeef,
          "target entry flags %#lx data %#lx", (unsigned long)e.flags, (unsigned long)e.data);
    for (int i = 0; i < 300; i++)
        CHECK(target[1000 + i] == 0x11 && target[2000 + i] == 0x11, "writev/writemsg byte %d", i);
    struct iovec riov2 = {.iov_base = dst, .iov_len = 300};
    CALL(fi_readv(ep[0], &riov2, NULL, 1, addr[1], 1000, key, &ctx));
    expect_ok(0, &ctx, FI_RMA | FI_READ);
    msg.msg_iov = &riov2;
    CALL(fi_readmsg(ep[0], &msg, 0));
    expect_ok(0, &ctx, FI_RMA | FI_READ);
    CHECK(dst[0] == 0x11 && dst[299] == 0x11, "readv/readmsg");

    /* fi_writedata and fi_inject_write (no local completion; the buffer is free at once). */
    memset(src, 0x22, 16);
    CALL(fi_writedata(ep[0], src, 16, NULL, 42, addr[1], 5000, key, &ctx));
    expect_ok(0, &ctx, FI_RMA | FI_WRITE);
    CHECK(wait_cq(1, &e, NULL) == 0 && e.data == 42 && (e.flags & FI_REMOTE_CQ_DATA),
          "writedata's remote CQ data");
    memset(src, 0x33, 16);
    CALL(fi_inject_write(ep[0], src, 16, addr[1], 6000, key));
    memset(src, 0, 16);
    CHECK(fi_inject_write(ep[0], src, inject + 1, addr[1], 0, key) == -FI_EMSGSIZE,
          "inject above inject_size");
    /* A read after the inject completes after it lands (one path, in order). */
    CALL(fi_read(ep[0], dst, 16, NULL, addr[1], 6000, key, &ctx));
    expect_ok(0, &ctx, FI_RMA | FI_READ);
    CHECK(dst[0] == 0x33 && dst[15] == 0x33, "inject_write then read: %#x", dst[0]);
    settle();
    CHECK(target[5000] == 0x22 && target[6015] == 0x33, "writedata/inject in target memory");

    /* Accesses the NIC refuses: error completions, and the endpoint goes on. */
    CALL(fi_write(ep[0], src, 16, NULL, addr[1], LEN - 8, key, &ctx));
    expect_error(&ctx, "a write past the region's end");
    CALL(fi_read(ep[0], dst, 16, NULL, addr[1], LEN, key, &ctx));
    expect_error(&ctx, "a read past the region's end");
    CALL(fi_write(ep[0], src, 16, NULL, addr[1], 0, key + 1000, &ctx));
    expect_error(&ctx, "a write with a wrong key");
    CALL(fi_write(ep[0], src, 16, NULL, addr[1], 0, ro_key, &ctx));
    expect_error(&ctx, "a write to a read-only region");
    uint64_t one = 1, old = 0;
    CALL(fi_atomic(ep[0], &one, 1, NULL, addr[1], LEN, key, FI_UINT64, FI_SUM, &ctx));
    expect_error(&ctx, "an atomic past the region's end");
    CALL(fi_read(ep[0], dst, 4096, NULL, addr[1], 0, ro_key, &ctx));
    expect_ok(0, &ctx, FI_RMA | FI_READ);
    CHECK(dst[0] == 0x5a && dst[4095] == 0x5a, "read of the read-only region");

    /* Atomics. */
    size_t count = 0;
    CALL(fi_atomicvalid(ep[0], FI_UINT64, FI_SUM, &count));
    CHECK(count == 1, "atomicvalid count %zu", count);
    CHECK(fi_atomicvalid(ep[0], FI_DOUBLE, FI_BOR, &count) == -FI_EOPNOTSUPP, "BOR on double");
    CHECK(fi_atomicvalid(ep[0], FI_INT32, FI_PROD, &count) == -FI_EOPNOTSUPP, "PROD");
    CHECK(fi_fetch_atomicvalid(ep[0], FI_INT32, FI_ATOMIC_READ, &count) == 0, "ATOMIC_READ");
    CHECK(fi_compare_atomicvalid(ep[0], FI_INT8, FI_MSWAP, &count) == 0, "MSWAP");
    CHECK(fi_compare_atomicvalid(ep[0], FI_INT8, FI_SUM, &count) == -FI_EOPNOTSUPP,
          "SUM is no compare atomic");
    struct fi_atomic_attr aattr = {0};
    CALL(fi_query_atomic(domain, FI_INT16, FI_CSWAP_GE, &aattr, FI_COMPARE_ATOMIC));
    CHECK(aattr.count == 1 && aattr.size == 2, "query_atomic %zu %zu", aattr.count, aattr.size);
    CHECK(fi_query_atomic(domain, FI_FLOAT_COMPLEX, FI_SUM, &aattr, 0) == -FI_EOPNOTSUPP,
          "complex");
    CHECK(fi_atomic(ep[0], &one, 1, NULL, addr[1], 0, key, FI_INT32, FI_PROD, &ctx) ==
              -FI_EOPNOTSUPP,
          "fi_atomic PROD");

    uint64_t *t64 = (uint64_t *)(target + 8192);
    *t64 = 100;
    /* (the target's store is mirrored at its next post) */
    CALL(fi_send(ep[1], &tiny, 1, NULL, addr[0], &sctx));
    CALL(fi_recv(ep[0], &rtiny, 1, NULL, FI_ADDR_UNSPEC, NULL));
    CHECK(wait_cq(0, &e, NULL) == 0 && wait_cq(1, &e, NULL) == 0, "sync");
    uint64_t v = 5;
    CALL(fi_atomic(ep[0], &v, 1, NULL, addr[1], 8192, key, FI_UINT64, FI_SUM, &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_WRITE);
    v = 7;
    CALL(fi_fetch_atomic(ep[0], &v, 1, NULL, &old, NULL, addr[1], 8192, key, FI_UINT64, FI_SUM,
                         &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_READ);
    CHECK(old == 105, "fetch_atomic SUM old %lu", (unsigned long)old);
    CALL(fi_fetch_atomic(ep[0], NULL, 1, NULL, &old, NULL, addr[1], 8192, key, FI_UINT64,
                         FI_ATOMIC_READ, &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_READ);
    CHECK(old == 112, "ATOMIC_READ %lu", (unsigned long)old);
    uint64_t cmp = 112, swp = 9;
    CALL(fi_compare_atomic(ep[0], &swp, 1, NULL, &cmp, NULL, &old, NULL, addr[1], 8192, key,
                           FI_UINT64, FI_CSWAP, &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_READ);
    CHECK(old == 112, "CSWAP old %lu", (unsigned long)old);
    cmp = 1000; /* CSWAP_GT: swap when 1000 > 9 */
    swp = 44;
    CALL(fi_compare_atomic(ep[0], &swp, 1, NULL, &cmp, NULL, &old, NULL, addr[1], 8192, key,
                           FI_UINT64, FI_CSWAP_GT, &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_READ);
    CHECK(old == 9, "CSWAP_GT old %lu", (unsigned long)old);
    settle();
    CHECK(*t64 == 44, "target after atomics %lu", (unsigned long)*t64);

    /* Narrow and signed types, min/max, bitwise, masked swap, floating point. */
    int8_t *t8 = (int8_t *)(target + 9000);
    int32_t *t32 = (int32_t *)(target + 9004);
    double *td = (double *)(target + 9008);
    uint16_t *t16 = (uint16_t *)(target + 9016);
    *t8 = -5;
    *t32 = 10;
    *td = 1.5;
    *t16 = 0x00ff;
    CALL(fi_send(ep[1], &tiny, 1, NULL, addr[0], &sctx));
    CALL(fi_recv(ep[0], &rtiny, 1, NULL, FI_ADDR_UNSPEC, NULL));
    CHECK(wait_cq(0, &e, NULL) == 0 && wait_cq(1, &e, NULL) == 0, "sync");
    int8_t m8 = -20;
    CALL(fi_atomic(ep[0], &m8, 1, NULL, addr[1], 9000, key, FI_INT8, FI_MIN, &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_WRITE);
    int32_t m32 = -3, o32 = 0;
    CALL(fi_fetch_atomic(ep[0], &m32, 1, NULL, &o32, NULL, addr[1], 9004, key, FI_INT32, FI_MAX,
                         &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_READ);
    CHECK(o32 == 10, "MAX old %d", o32);
    double dv = 2.25, dold = 0;
    CALL(fi_fetch_atomic(ep[0], &dv, 1, NULL, &dold, NULL, addr[1], 9008, key, FI_DOUBLE, FI_SUM,
                         &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_READ);
    CHECK(dold == 1.5, "double SUM old %f", dold);
    uint16_t val = 0xabcd, mask = 0xff00, o16 = 0;
    CALL(fi_compare_atomic(ep[0], &val, 1, NULL, &mask, NULL, &o16, NULL, addr[1], 9016, key,
                           FI_UINT16, FI_MSWAP, &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_READ);
    CHECK(o16 == 0x00ff, "MSWAP old %#x", o16);
    uint16_t bx = 0x0f0f;
    CALL(fi_inject_atomic(ep[0], &bx, 1, addr[1], 9016, key, FI_UINT16, FI_BXOR));
    CALL(fi_fetch_atomic(ep[0], NULL, 1, NULL, &o16, NULL, addr[1], 9016, key, FI_UINT16,
                         FI_ATOMIC_READ, &ctx));
    expect_ok(0, &ctx, FI_ATOMIC | FI_READ);
    settle();
    CHECK(*t8 == -20 && *t32 == 10 && *td == 3.75, "min %d max %d sum %f", *t8, *t32, *td);
    CHECK(o16 == ((0xab00 | 0x00ff) ^ 0x0f0f) && *t16 == o16, "MSWAP+BXOR %#x %#x", o16, *t16);

    /* Closing a region withdraws it: a later access fails. */
    CALL(fi_close(&ro_mr->fid));
    CALL(fi_read(ep[0], dst, 16, NULL, addr[1], 0, ro_key, &ctx));
    expect_error(&ctx, "a read of a closed region");

    for (int i = 0; i < 2; i++) {
        CALL(fi_close(&ep[i]->fid));
        CALL(fi_close(&cq[i]->fid));
    }
    CALL(fi_close(&mr->fid));
    CALL(fi_close(&av->fid));
    CALL(fi_close(&domain->fid));

    /* Without FI_MR_PROV_KEY: the application's keys; a key in use is refused. */
    struct fi_info *info2 = get_info(FI_MR_LOCAL);
    CHECK(info2->domain_attr->mr_mode == 0, "mr_mode %#x", info2->domain_attr->mr_mode);
    CALL(fi_domain(fabric, info2, &domain, NULL));
    struct fid_mr *m1, *m2;
    CALL(fi_mr_reg(domain, target, 4096, FI_REMOTE_WRITE, 0, 0xc0de, 0, &m1, NULL));
    CHECK(fi_mr_key(m1) == 0xc0de, "user key %#lx", (unsigned long)fi_mr_key(m1));
    int rc = fi_mr_reg(domain, target, 4096, FI_REMOTE_WRITE, 0, 0xc0de, 0, &m2, NULL);
    CHECK(rc == -FI_ENOKEY, "a key in use: %d", rc);
    CHECK(fi_mr_reg(domain, target, 4096, FI_REMOTE_WRITE, 0, 1ULL << 40, 0, &m2, NULL) ==
              -FI_EKEYREJECTED,
          "a key above mr_key_size");
    struct fi_mr_attr mattr = {.mr_iov = &iov, .iov_count = 1, .access = FI_REMOTE_READ,
                               .requested_key = 77};
    CALL(fi_mr_regattr(domain, &mattr, 0, &m2));
    CHECK(fi_mr_key(m2) == 77, "regattr key");
    CALL(fi_close(&m2->fid));
    CALL(fi_close(&m1->fid));
    CALL(fi_close(&domain->fid));
    CALL(fi_close(&fabric->fid));
    fi_freeinfo(info);
    fi_freeinfo(info2);
    free(target);
    free(ro);
    free(src);
    free(dst);
    printf("rma: ok\n");
    return 0;
}
