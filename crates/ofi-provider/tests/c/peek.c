/* FI_PEEK, FI_CLAIM and FI_DISCARD of fi_trecvmsg on the nicemu provider (fi_tagged(3)):
 * a peek that finds nothing completes with FI_ENOMSG; a peek reports the length, tag
 * (through an ignore mask) and source of an unexpected message and leaves it for a receive;
 * a claimed message (here a rendezvous one) matches no other receive and arrives whole with
 * FI_CLAIM and the claim's context; FI_PEEK | FI_DISCARD and FI_CLAIM | FI_DISCARD drop
 * messages; FI_CLAIM without a claim and FI_DISCARD alone are refused. Prints "peek: ok"
 * and exits 0 on success. */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_NAME "peek"
#include "check.h"

static struct fid_cq *cq[2];
static struct fid_ep *ep[2];
static fi_addr_t addr[2];

static unsigned char pattern(size_t i, uint64_t tag) { return (unsigned char)(i * 3 + tag); }

/* The next completion of cq[i] (reading progresses its endpoint; the other's sends need no
 * progress of their own to reach it): 0 and *e, or the error number of an error completion
 * with *err. */
static int next(int i, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err) {
    for (long spins = 0;; spins++) {
        CHECK(spins < 100000000L, "no completion on CQ %d", i);
        ssize_t n = fi_cq_read(cq[i], e, 1);
        if (n == 1)
            return 0;
        if (n == -FI_EAVAIL) {
            memset(err, 0, sizeof *err);
            CHECK(fi_cq_readerr(cq[i], err, 0) == 1, "fi_cq_readerr");
            return err->err;
        }
        CHECK(n == -FI_EAGAIN, "fi_cq_read = %zd", n);
    }
}

/* fi_trecvmsg on endpoint 1 with `flags`, then its completion. */
static int search(uint64_t tag, uint64_t ignore, void *buf, size_t len, struct fi_context *ctx,
                  uint64_t flags, struct fi_cq_tagged_entry *e) {
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct fi_msg_tagged msg = {.msg_iov = buf ? &iov : NULL,
                                .iov_count = buf ? 1 : 0,
                                .addr = FI_ADDR_UNSPEC,
                                .tag = tag,
                                .ignore = ignore,
                                .context = ctx};
    CALL(fi_trecvmsg(ep[1], &msg, flags));
    struct fi_cq_err_entry err;
    int rc = next(1, e, &err);
    if (rc) {
        CHECK(err.op_context == ctx, "error completion context");
        CHECK(err.flags & FI_RECV, "error completion flags %#lx", (unsigned long)err.flags);
    } else {
        CHECK(e->op_context == ctx, "completion context");
    }
    return rc;
}

/* Peek until the message arrives (it is unexpected, and may still be on its way). */
static void peek_until_found(uint64_t tag, uint64_t ignore, struct fi_context *ctx,
                             uint64_t flags, struct fi_cq_tagged_entry *e) {
    for (int tries = 0;; tries++) {
        CHECK(tries < 1000000, "the message of tag %#lx never showed", (unsigned long)tag);
        int rc = search(tag, ignore, NULL, 0, ctx, FI_PEEK | flags, e);
        if (rc == 0)
            return;
        CHECK(rc == FI_ENOMSG, "peek error %d", rc);
    }
}

static unsigned char *message(size_t len, uint64_t tag) {
    unsigned char *m = malloc(len);
    CHECK(m, "malloc");
    for (size_t i = 0; i < len; i++)
        m[i] = pattern(i, tag);
    return m;
}

static void check_message(const unsigned char *m, size_t len, uint64_t tag) {
    for (size_t i = 0; i < len; i++)
        CHECK(m[i] == pattern(i, tag), "tag %#lx byte %zu", (unsigned long)tag, i);
}

int main(void) {
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    CHECK(hints, "fi_allocinfo");
    hints->caps = FI_TAGGED;
    hints->mode = FI_CONTEXT;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->fabric_attr->prov_name = strdup("nicemu");
    CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
    CALL(fi_domain(fabric, info, &domain, NULL));
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CALL(fi_av_open(domain, &av_attr, &av, NULL));
    char names[2][8];
    for (int i = 0; i < 2; i++) {
        struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
        CALL(fi_cq_open(domain, &cq_attr, &cq[i], NULL));
        CALL(fi_endpoint(domain, info, &ep[i], NULL));
        CALL(fi_ep_bind(ep[i], &av->fid, 0));
        CALL(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
        CALL(fi_enable(ep[i]));
        size_t len = sizeof names[i];
        CALL(fi_getname(&ep[i]->fid, names[i], &len));
    }
    CHECK(fi_av_insert(av, names, 2, addr, 0, NULL) == 2, "fi_av_insert");

    struct fi_context ctx[8];
    struct fi_cq_tagged_entry e;

    /* Nothing there: FI_ENOMSG, with and without FI_CLAIM. */
    CHECK(search(0xbad, 0, NULL, 0, &ctx[0], FI_PEEK, &e) == FI_ENOMSG, "peek of nothing");
    CHECK(search(0xbad, 0, NULL, 0, &ctx[0], FI_PEEK | FI_CLAIM, &e) == FI_ENOMSG,
          "claim of nothing");

    /* Unexpected messages: an eager one, a rendezvous one, two to drop, one with CQ data. */
    size_t len1 = 100, len2 = 100000, len3 = 50, len4 = 30, len5 = 20;
    unsigned char *m1 = message(len1, 0x11), *m2 = message(len2, 0x22), *m3 = message(len3, 0x33),
                  *m4 = message(len4, 0x44), *m5 = message(len5, 0x55);
    CALL(fi_tsend(ep[0], m1, len1, NULL, addr[1], 0x11, &ctx[1]));
    CALL(fi_tsend(ep[0], m2, len2, NULL, addr[1], 0x22, &ctx[2]));
    CALL(fi_tsend(ep[0], m3, len3, NULL, addr[1], 0x33, &ctx[3]));
    CALL(fi_tsend(ep[0], m4, len4, NULL, addr[1], 0x44, &ctx[4]));
    CALL(fi_tsenddata(ep[0], m5, len5, NULL, 0xda7a, addr[1], 0x55, &ctx[5]));

    /* A peek through an ignore mask reports the message and leaves it. */
    peek_until_found(0x10, 0xf, &ctx[0], 0, &e);
    CHECK(e.len == len1 && e.tag == 0x11 && e.buf == NULL, "peek: len %zu tag %#lx", e.len,
          (unsigned long)e.tag);
    CHECK((e.flags & (FI_RECV | FI_TAGGED)) == (FI_RECV | FI_TAGGED), "peek flags");
    unsigned char *r = calloc(1, len2);
    CHECK(r, "calloc");
    CHECK(search(0x11, 0, r, len1, &ctx[0], 0, &e) == 0, "receive after peek");
    CHECK(e.len == len1 && e.tag == 0x11, "received %zu", e.len);
    check_message(r, len1, 0x11);

    /* Claimed: a plain receive for its tag does not get it; FI_CLAIM does. */
    peek_until_found(0x22, 0, &ctx[6], FI_CLAIM, &e);
    CHECK(e.len == len2 && e.tag == 0x22, "claim: len %zu", e.len);
    unsigned char other[8];
    CALL(fi_trecv(ep[1], other, sizeof other, NULL, FI_ADDR_UNSPEC, 0x22, 0, &ctx[7]));
    memset(r, 0, len2);
    CHECK(search(0x22, 0, r, len2, &ctx[6], FI_CLAIM, &e) == 0, "receive of the claim");
    CHECK(e.len == len2 && e.tag == 0x22 && e.buf == r, "claimed receive: len %zu", e.len);
    check_message(r, len2, 0x22);
    CALL(fi_cancel(&ep[1]->fid, &ctx[7]));
    struct fi_cq_err_entry err;
    CHECK(next(1, &e, &err) == FI_ECANCELED && err.op_context == &ctx[7],
          "the plain receive matched the claimed message");

    /* FI_PEEK | FI_DISCARD drops the message found. */
    peek_until_found(0x33, 0, &ctx[0], FI_DISCARD, &e);
    CHECK(e.len == len3 && e.tag == 0x33, "peek and discard: len %zu", e.len);
    CHECK(search(0x33, 0, NULL, 0, &ctx[0], FI_PEEK, &e) == FI_ENOMSG, "discarded, still there");

    /* FI_CLAIM | FI_DISCARD drops a claimed message. */
    peek_until_found(0x44, 0, &ctx[6], FI_CLAIM, &e);
    CHECK(search(0x44, 0, NULL, 0, &ctx[6], FI_CLAIM | FI_DISCARD, &e) == 0, "discard a claim");
    CHECK(e.len == 0, "a discarded claim delivered %zu bytes", e.len);
    CHECK(search(0x44, 0, NULL, 0, &ctx[0], FI_PEEK, &e) == FI_ENOMSG, "discarded claim remains");

    /* The length of a message with remote CQ data is its payload's. */
    peek_until_found(0x55, 0, &ctx[0], 0, &e);
    CHECK(e.len == len5, "peek of a message with CQ data: len %zu", e.len);
    memset(r, 0, len5);
    CHECK(search(0x55, 0, r, len5, &ctx[0], 0, &e) == 0, "receive with CQ data");
    CHECK(e.len == len5 && (e.flags & FI_REMOTE_CQ_DATA) && e.data == 0xda7a, "CQ data");
    check_message(r, len5, 0x55);

    /* Refused: a claim that was never made, FI_DISCARD alone. */
    struct iovec iov = {.iov_base = r, .iov_len = 8};
    struct fi_msg_tagged msg = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
                                .tag = 1, .context = &ctx[5]};
    ssize_t rc = fi_trecvmsg(ep[1], &msg, FI_CLAIM);
    CHECK(rc == -FI_EINVAL, "FI_CLAIM without a claim = %zd", rc);
    rc = fi_trecvmsg(ep[1], &msg, FI_DISCARD);
    CHECK(rc == -FI_EINVAL, "FI_DISCARD alone = %zd", rc);

    /* Every send completed. */
    int sent = 0;
    while (sent < 5) {
        CHECK(next(0, &e, &err) == 0, "send error %d", err.err);
        CHECK(e.flags & FI_SEND, "send flags");
        sent++;
    }

    for (int i = 0; i < 2; i++) {
        CALL(fi_close(&ep[i]->fid));
        CALL(fi_close(&cq[i]->fid));
    }
    CALL(fi_close(&av->fid));
    CALL(fi_close(&domain->fid));
    CALL(fi_close(&fabric->fid));
    free(m1), free(m2), free(m3), free(m4), free(m5), free(r);
    fi_freeinfo(info);
    fi_freeinfo(hints);
    printf("peek: ok\n");
    return 0;
}
