/* Two RDM endpoints of the nicemu provider in one process exchange tagged messages from
 * 0 B to the largest supported size (expected and unexpected), injects, remote CQ data, an
 * untagged message, a wildcard receive and a truncated one; every payload is checked.
 * Prints "two_endpoints: ok" and exits 0 on success. */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_NAME "two_endpoints"
#include "check.h"

/* Endpoints 0 and 1, and 2 bound with FI_SELECTIVE_COMPLETION; one CQ each. */
#define NEP 3
static struct fid_cq *cq[NEP];
static struct fid_ep *ep[NEP];
static fi_addr_t addr[NEP];

static unsigned char pattern(size_t i, size_t seed) { return (unsigned char)(i * 7 + seed * 13 + 1); }

/* Completions read while waiting on the other CQ, with their sources. */
#define STASH 64
static struct fi_cq_tagged_entry stash[NEP][STASH];
static fi_addr_t stash_src[NEP][STASH];
static int stashed[NEP];

/* Poll cq[i] once, stashing a completion; an error completion fails the test. */
static void poll_cq(int i) {
    struct fi_cq_tagged_entry e;
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    ssize_t n = fi_cq_readfrom(cq[i], &e, 1, &src);
    if (n == 1) {
        CHECK(stashed[i] < STASH, "too many completions on CQ %d", i);
        stash[i][stashed[i]] = e;
        stash_src[i][stashed[i]++] = src;
        return;
    }
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err = {0};
        fi_cq_readerr(cq[i], &err, 0);
        CHECK(0, "error completion on CQ %d: %s (%s)", i, fi_strerror(err.err),
              fi_cq_strerror(cq[i], err.prov_errno, err.err_data, NULL, 0));
    }
    CHECK(n == -FI_EAGAIN, "fi_cq_readfrom = %zd", n);
}

/* Wait for the next completion of cq[i], progressing both endpoints (progress is manual). */
static void wait_one(int i, struct fi_cq_tagged_entry *e, fi_addr_t *src) {
    for (long spins = 0; stashed[i] == 0; spins++) {
        for (int j = 0; j < NEP; j++)
            if (cq[j])
                poll_cq(j);
        CHECK(spins < 100000000L, "no completion on CQ %d", i);
    }
    *e = stash[i][0];
    if (src)
        *src = stash_src[i][0];
    memmove(&stash[i][0], &stash[i][1], sizeof stash[i][0] * (size_t)--stashed[i]);
    memmove(&stash_src[i][0], &stash_src[i][1], sizeof stash_src[i][0] * (size_t)stashed[i]);
}

static void exchange(size_t len, int unexpected, uint64_t tag) {
    unsigned char *s = malloc(len ? len : 1), *r = malloc(len ? len : 1);
    CHECK(s && r, "malloc");
    for (size_t i = 0; i < len; i++) {
        s[i] = pattern(i, len);
        r[i] = 0xee;
    }
    int sctx, rctx;
    if (unexpected)
        CALL(fi_tsend(ep[0], s, len, NULL, addr[1], tag, &sctx));
    CALL(fi_trecv(ep[1], r, len, NULL, FI_ADDR_UNSPEC, tag, 0, &rctx));
    if (!unexpected)
        CALL(fi_tsend(ep[0], s, len, NULL, addr[1], tag, &sctx));
    struct fi_cq_tagged_entry e;
    fi_addr_t src = 12345;
    wait_one(1, &e, &src);
    CHECK(e.op_context == &rctx, "receive context");
    CHECK(e.len == len, "received %zu bytes of %zu", e.len, len);
    CHECK(e.tag == tag, "tag %#lx, expected %#lx", (unsigned long)e.tag, (unsigned long)tag);
    CHECK((e.flags & (FI_RECV | FI_TAGGED)) == (FI_RECV | FI_TAGGED), "receive flags %#lx",
          (unsigned long)e.flags);
    CHECK(e.buf == r, "receive buffer");
    CHECK(src == addr[0], "source %lu, expected %lu", (unsigned long)src, (unsigned long)addr[0]);
    for (size_t i = 0; i < len; i++)
        CHECK(r[i] == pattern(i, len), "%zu B: byte %zu is %#x, expected %#x", len, i, r[i],
              pattern(i, len));
    wait_one(0, &e, NULL);
    CHECK(e.op_context == &sctx && (e.flags & (FI_SEND | FI_TAGGED)) == (FI_SEND | FI_TAGGED),
          "send completion");
    free(s);
    free(r);
}

int main(void) {
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    CHECK(hints, "fi_allocinfo");
    hints->caps = FI_TAGGED | FI_MSG | FI_SOURCE | FI_DIRECTED_RECV;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    hints->fabric_attr->prov_name = strdup("nicemu");
    CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
    CHECK(strcmp(info->fabric_attr->prov_name, "nicemu") == 0, "provider %s",
          info->fabric_attr->prov_name);
    size_t max = info->ep_attr->max_msg_size;
    size_t inject = info->tx_attr->inject_size;
    CHECK(max >= 1 << 20, "max_msg_size %zu", max);

    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
    CALL(fi_domain(fabric, info, &domain, NULL));
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CALL(fi_av_open(domain, &av_attr, &av, NULL));
    char names[2][8]; /* packed, as fi_av_insert reads them */
    for (int i = 0; i < 2; i++) {
        struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
        CALL(fi_cq_open(domain, &cq_attr, &cq[i], NULL));
        CALL(fi_endpoint(domain, info, &ep[i], NULL));
        CALL(fi_ep_bind(ep[i], &av->fid, 0));
        CALL(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
        CALL(fi_enable(ep[i]));
        size_t len = sizeof names[i];
        CALL(fi_getname(&ep[i]->fid, names[i], &len));
        CHECK(len == 8, "address length %zu", len);
    }
    CHECK(memcmp(names[0], names[1], 8) != 0, "both endpoints have one address");
    CHECK(fi_av_insert(av, names, 2, addr, 0, NULL) == 2, "fi_av_insert");
    char got[64];
    size_t glen = sizeof got;
    CALL(fi_av_lookup(av, addr[1], got, &glen));
    CHECK(glen == 8 && memcmp(got, names[1], 8) == 0, "fi_av_lookup");
    char str[64];
    size_t slen = sizeof str;
    CHECK(fi_av_straddr(av, names[0], str, &slen) == str && strncmp(str, "nicemu://", 9) == 0,
          "fi_av_straddr: %s", str);

    /* Tagged messages of every size class: IDC, eager, rendezvous; expected and unexpected. */
    size_t sizes[] = {0,    1,     7,     64,    191,     192,     193,    1000,
                      2048, 16383, 16384, 16385, 65536,   100000,  1 << 20, max};
    int n = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int unexpected = 0; unexpected < 2; unexpected++, n++)
            exchange(sizes[k], unexpected, 0x1000 + k);

    /* Injects and remote CQ data. */
    unsigned char small[64], rbuf[256];
    for (int i = 0; i < 64; i++)
        small[i] = (unsigned char)(200 - i);
    CALL(fi_tinject(ep[0], small, sizeof small, addr[1], 77));
    memset(small, 0, sizeof small); /* the buffer is reusable at once */
    struct fi_cq_tagged_entry e;
    CALL(fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 77, 0, NULL));
    wait_one(1, &e, NULL);
    CHECK(e.len == 64 && e.tag == 77 && rbuf[0] == 200 && rbuf[63] == 137, "tinject");
    CHECK(fi_tinject(ep[0], rbuf, inject + 1, addr[1], 1) == -FI_EMSGSIZE, "inject above inject_size");

    CALL(fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, addr[0], 78, 0, NULL));
    CALL(fi_tsenddata(ep[0], "payload", 8, NULL, 0xdeadbeefcafeULL, addr[1], 78, NULL));
    wait_one(1, &e, NULL);
    CHECK((e.flags & FI_REMOTE_CQ_DATA) && e.data == 0xdeadbeefcafeULL && e.len == 8 &&
              strcmp((char *)rbuf, "payload") == 0,
          "tsenddata: flags %#lx data %#lx len %zu", (unsigned long)e.flags, (unsigned long)e.data,
          e.len);
    wait_one(0, &e, NULL);

    /* A wildcard receive: any tag with the low 8 bits ignored. */
    CALL(fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 0x500, 0xff, NULL));
    CALL(fi_tsend(ep[0], small, 3, NULL, addr[1], 0x5ab, NULL));
    wait_one(1, &e, NULL);
    CHECK(e.tag == 0x5ab && e.len == 3, "wildcard: tag %#lx", (unsigned long)e.tag);
    wait_one(0, &e, NULL);

    /* An untagged message does not match a tagged receive, and vice versa. */
    CALL(fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 0, ~0ULL, NULL));
    char umsg[100], ubuf[100];
    for (int i = 0; i < 100; i++)
        umsg[i] = (char)('a' + i % 26);
    int uctx;
    CALL(fi_recv(ep[1], ubuf, sizeof ubuf, NULL, FI_ADDR_UNSPEC, &uctx));
    CALL(fi_send(ep[0], umsg, sizeof umsg, NULL, addr[1], NULL));
    wait_one(1, &e, NULL);
    CHECK(e.op_context == &uctx && (e.flags & FI_MSG) && !(e.flags & FI_TAGGED) && e.len == 100 &&
              memcmp(umsg, ubuf, 100) == 0,
          "untagged message");
    wait_one(0, &e, NULL);
    /* ... the tagged wildcard receive is still posted: give it a tagged message. */
    CALL(fi_tsend(ep[0], small, 5, NULL, addr[1], 9, NULL));
    wait_one(1, &e, NULL);
    CHECK(e.tag == 9 && e.len == 5, "tagged after untagged");
    wait_one(0, &e, NULL);

    /* Truncation: an error completion with the overflow length. */
    char big[100] = {0}, tiny[10];
    CALL(fi_trecv(ep[1], tiny, sizeof tiny, NULL, FI_ADDR_UNSPEC, 3, 0, &uctx));
    CALL(fi_tsend(ep[0], big, sizeof big, NULL, addr[1], 3, NULL));
    ssize_t r;
    do {
        r = fi_cq_read(cq[1], &e, 1);
        poll_cq(0);
    } while (r == -FI_EAGAIN);
    CHECK(r == -FI_EAVAIL, "truncation: fi_cq_read = %zd", r);
    struct fi_cq_err_entry err = {0};
    CHECK(fi_cq_readerr(cq[1], &err, 0) == 1, "fi_cq_readerr");
    CHECK(err.err == FI_ETRUNC && err.olen == 90 && err.len == 10 && err.op_context == &uctx,
          "truncation: err %d olen %zu len %zu", err.err, err.olen, err.len);
    wait_one(0, &e, NULL);

    /* Cancelling a posted receive: an FI_ECANCELED error completion with its context. */
    int cctx;
    CALL(fi_trecv(ep[1], tiny, sizeof tiny, NULL, FI_ADDR_UNSPEC, 0x999, 0, &cctx));
    CALL(fi_cancel(&ep[1]->fid, &cctx));
    do
        r = fi_cq_read(cq[1], &e, 1);
    while (r == -FI_EAGAIN);
    CHECK(r == -FI_EAVAIL, "cancel: fi_cq_read = %zd", r);
    memset(&err, 0, sizeof err);
    CHECK(fi_cq_readerr(cq[1], &err, 0) == 1 && err.err == FI_ECANCELED && err.op_context == &cctx,
          "cancel: err %d", err.err);

    /* Selective completion: endpoint 2's plain sends report nothing (its op_flags lack
     * FI_COMPLETION), a sendmsg with FI_COMPLETION does. */
    {
        struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
        CALL(fi_cq_open(domain, &cq_attr, &cq[2], NULL));
        CALL(fi_endpoint(domain, info, &ep[2], NULL));
        CALL(fi_ep_bind(ep[2], &av->fid, 0));
        CALL(fi_ep_bind(ep[2], &cq[2]->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
        CALL(fi_enable(ep[2]));
        char name[8];
        size_t len = sizeof name;
        CALL(fi_getname(&ep[2]->fid, name, &len));
        CHECK(fi_av_insert(av, name, 1, &addr[2], 0, NULL) == 1, "fi_av_insert");
        int silent, loud;
        CALL(fi_tsend(ep[2], small, 4, NULL, addr[1], 0x77, &silent));
        CALL(fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, addr[2], 0x77, 0, NULL));
        fi_addr_t src;
        wait_one(1, &e, &src);
        CHECK(e.tag == 0x77 && e.len == 4 && src == addr[2], "from the selective endpoint");
        struct iovec iov = {.iov_base = small, .iov_len = 6};
        struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = addr[1], .tag = 0x78,
                                  .context = &loud};
        CALL(fi_tsendmsg(ep[2], &m, FI_COMPLETION));
        CALL(fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 0x78, 0, NULL));
        wait_one(1, &e, NULL);
        CHECK(e.tag == 0x78 && e.len == 6, "second message from the selective endpoint");
        wait_one(2, &e, NULL);
        CHECK(e.op_context == &loud, "the first completion on the selective CQ is the FI_COMPLETION one");
        for (int i = 0; i < 1000; i++)
            poll_cq(2);
        CHECK(stashed[2] == 0, "the plain send reported a completion under selective completion");
    }

    /* Above max_msg_size: a clear error, nothing sent. */
    CHECK(fi_tsend(ep[0], big, max + 1, NULL, addr[1], 1, NULL) == -FI_EMSGSIZE, "send above max");
    CHECK(fi_tsend(ep[0], big, 1, NULL, 99, 1, NULL) == -FI_EINVAL, "unknown fi_addr");

    for (int i = 0; i < NEP; i++) {
        CALL(fi_close(&ep[i]->fid));
        CALL(fi_close(&cq[i]->fid));
    }
    CALL(fi_close(&av->fid));
    CALL(fi_close(&domain->fid));
    CALL(fi_close(&fabric->fid));
    fi_freeinfo(info);
    fi_freeinfo(hints);
    printf("two_endpoints: ok (%d tagged exchanges up to %zu B)\n", n, max);
    return 0;
}
