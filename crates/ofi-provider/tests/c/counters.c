/* Counters of the nicemu provider (fi_cntr(3)): open (bad attributes refused), set, add,
 * seterr, adderr, read, readerr, a timed-out wait; counters bound to two endpoints with
 * FI_SEND / FI_RECV (and the RMA flags, accepted) count sends, injects and receives of every
 * size class, whether or not a CQ entry is written (selective completion); a truncated and a
 * cancelled receive count as errors and end a wait with -FI_EAVAIL. Prints "counters: ok"
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

#define TEST_NAME "counters"
#include "check.h"

static unsigned char pattern(size_t i, size_t seed) { return (unsigned char)(i * 5 + seed * 3 + 2); }

int main(void) {
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    CHECK(hints, "fi_allocinfo");
    hints->caps = FI_TAGGED | FI_MSG;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->fabric_attr->prov_name = strdup("nicemu");
    CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
    CHECK(info->domain_attr->cntr_cnt > 0, "domain_attr->cntr_cnt is 0");

    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
    CALL(fi_domain(fabric, info, &domain, NULL));

    /* Attributes. */
    struct fid_cntr *c = NULL;
    struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
    attr.flags = 1;
    CHECK(fi_cntr_open(domain, &attr, &c, NULL) == -FI_EINVAL, "flags accepted");
    attr.flags = 0;
    attr.events = (enum fi_cntr_events)7;
    CHECK(fi_cntr_open(domain, &attr, &c, NULL) == -FI_EINVAL, "unknown events accepted");
    attr.events = FI_CNTR_EVENTS_COMP;
    attr.wait_obj = FI_WAIT_SET;
    CHECK(fi_cntr_open(domain, &attr, &c, NULL) == -FI_EINVAL, "FI_WAIT_SET without a set");

    /* Application-driven values. */
    int ctx;
    attr.wait_obj = FI_WAIT_MUTEX_COND;
    CALL(fi_cntr_open(domain, &attr, &c, &ctx));
    CHECK(c->fid.fclass == FI_CLASS_CNTR && c->fid.context == &ctx, "the counter's fid");
    CHECK(fi_cntr_read(c) == 0 && fi_cntr_readerr(c) == 0, "a new counter is not 0");
    CALL(fi_cntr_set(c, 40));
    CALL(fi_cntr_add(c, 2));
    CALL(fi_cntr_seterr(c, 7));
    CALL(fi_cntr_adderr(c, 3));
    CHECK(fi_cntr_read(c) == 42, "value %lu", (unsigned long)fi_cntr_read(c));
    CHECK(fi_cntr_readerr(c) == 10, "errors %lu", (unsigned long)fi_cntr_readerr(c));
    CHECK(fi_cntr_wait(c, 42, 0) == 0, "a wait for a reached threshold");
    int rc = fi_cntr_wait(c, 43, 20);
    CHECK(rc == -FI_ETIMEDOUT, "a wait for 43 at 42 = %d", rc);
    CHECK(fi_cntr_read(c) == 42 && fi_cntr_readerr(c) == 10, "a timed-out wait changed the counts");
    CALL(fi_close(&c->fid));

    /* Two endpoints: 0 sends (its CQ takes only FI_COMPLETION operations), 1 receives. */
    struct fid_cq *cq[2];
    struct fid_ep *ep[2];
    struct fid_cntr *tx, *rx;
    fi_addr_t addr[2];
    attr.wait_obj = FI_WAIT_UNSPEC;
    CALL(fi_cntr_open(domain, &attr, &tx, NULL));
    CALL(fi_cntr_open(domain, &attr, &rx, NULL));
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CALL(fi_av_open(domain, &av_attr, &av, NULL));
    char names[2][8];
    for (int i = 0; i < 2; i++) {
        struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
        CALL(fi_cq_open(domain, &cq_attr, &cq[i], NULL));
        CALL(fi_endpoint(domain, info, &ep[i], NULL));
        CALL(fi_ep_bind(ep[i], &av->fid, 0));
        CALL(fi_ep_bind(ep[i], &cq[i]->fid,
                        FI_TRANSMIT | FI_RECV | (i == 0 ? FI_SELECTIVE_COMPLETION : 0)));
        size_t len = sizeof names[i];
        CALL(fi_getname(&ep[i]->fid, names[i], &len));
    }
    rc = fi_ep_bind(ep[0], &tx->fid, FI_TAGGED);
    CHECK(rc == -FI_EINVAL, "a counter bound with FI_TAGGED = %d", rc);
    rc = fi_ep_bind(ep[0], &tx->fid, 0);
    CHECK(rc == -FI_EINVAL, "a counter bound without flags = %d", rc);
    CALL(fi_ep_bind(ep[0], &tx->fid, FI_SEND | FI_WRITE | FI_READ));
    CALL(fi_ep_bind(ep[1], &rx->fid, FI_RECV | FI_REMOTE_WRITE | FI_REMOTE_READ));
    for (int i = 0; i < 2; i++)
        CALL(fi_enable(ep[i]));
    CHECK(fi_av_insert(av, names, 2, addr, 0, NULL) == 2, "fi_av_insert");

    /* IDC, eager and rendezvous sends and an inject, none with a CQ entry. */
    size_t sizes[] = {8, 1000, 100000, 64};
    enum { N = 4 };
    unsigned char *s[N], *r[N];
    for (int k = 0; k < N; k++) {
        s[k] = malloc(sizes[k]);
        r[k] = calloc(1, sizes[k]);
        CHECK(s[k] && r[k], "malloc");
        for (size_t i = 0; i < sizes[k]; i++)
            s[k][i] = pattern(i, (size_t)k);
        CALL(fi_trecv(ep[1], r[k], sizes[k], NULL, FI_ADDR_UNSPEC, 0x50 + (uint64_t)k, 0, NULL));
    }
    for (int k = 0; k < N - 1; k++)
        CALL(fi_tsend(ep[0], s[k], sizes[k], NULL, addr[1], 0x50 + (uint64_t)k, NULL));
    CALL(fi_tinject(ep[0], s[N - 1], sizes[N - 1], addr[1], 0x50 + N - 1));
    CALL(fi_cntr_wait(rx, N, 20000));
    CALL(fi_cntr_wait(tx, N, 20000));
    CHECK(fi_cntr_read(rx) == N && fi_cntr_readerr(rx) == 0, "receive counts %lu/%lu",
          (unsigned long)fi_cntr_read(rx), (unsigned long)fi_cntr_readerr(rx));
    CHECK(fi_cntr_read(tx) == N && fi_cntr_readerr(tx) == 0, "send counts %lu/%lu",
          (unsigned long)fi_cntr_read(tx), (unsigned long)fi_cntr_readerr(tx));
    for (int k = 0; k < N; k++)
        for (size_t i = 0; i < sizes[k]; i++)
            CHECK(r[k][i] == pattern(i, (size_t)k), "message %d byte %zu", k, i);
    struct fi_cq_tagged_entry e[N];
    CHECK(fi_cq_read(cq[0], e, N) == -FI_EAGAIN, "selective completion wrote send entries");
    CHECK(fi_cq_read(cq[1], e, N) == N, "receive entries");

    /* A truncated receive is an error: it ends a wait for more with -FI_EAVAIL. */
    unsigned char small[4];
    CALL(fi_trecv(ep[1], small, sizeof small, NULL, FI_ADDR_UNSPEC, 0x60, 0, NULL));
    CALL(fi_tsend(ep[0], s[1], 16, NULL, addr[1], 0x60, NULL));
    rc = fi_cntr_wait(rx, N + 1, 20000);
    CHECK(rc == -FI_EAVAIL, "a wait across a truncated receive = %d", rc);
    CHECK(fi_cntr_read(rx) == N && fi_cntr_readerr(rx) == 1, "after truncation %lu/%lu",
          (unsigned long)fi_cntr_read(rx), (unsigned long)fi_cntr_readerr(rx));
    struct fi_cq_err_entry err = {0};
    CHECK(fi_cq_read(cq[1], e, 1) == -FI_EAVAIL, "no error entry");
    CHECK(fi_cq_readerr(cq[1], &err, 0) == 1 && err.err == FI_ETRUNC, "error %d", err.err);
    CALL(fi_cntr_wait(tx, N + 1, 20000));

    /* A cancelled receive too. */
    int rctx;
    CALL(fi_trecv(ep[1], small, sizeof small, NULL, FI_ADDR_UNSPEC, 0x61, 0, &rctx));
    CALL(fi_cancel(&ep[1]->fid, &rctx));
    for (int spins = 0; fi_cntr_readerr(rx) < 2; spins++)
        CHECK(spins < 10000000, "the cancelled receive was not counted");
    CHECK(fi_cntr_read(rx) == N && fi_cntr_readerr(rx) == 2, "after cancel %lu/%lu",
          (unsigned long)fi_cntr_read(rx), (unsigned long)fi_cntr_readerr(rx));
    CHECK(fi_cntr_read(tx) == N + 1 && fi_cntr_readerr(tx) == 0, "send counts after the receive errors");

    for (int i = 0; i < 2; i++) {
        CALL(fi_close(&ep[i]->fid));
        CALL(fi_close(&cq[i]->fid));
    }
    CALL(fi_close(&tx->fid));
    CALL(fi_close(&rx->fid));
    CALL(fi_close(&av->fid));
    CALL(fi_close(&domain->fid));
    CALL(fi_close(&fabric->fid));
    for (int k = 0; k < N; k++) {
        free(s[k]);
        free(r[k]);
    }
    fi_freeinfo(info);
    fi_freeinfo(hints);
    printf("counters: ok\n");
    return 0;
}
