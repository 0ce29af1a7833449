/* Two libfabric rules the nicemu provider keeps:
 *
 * - A send does not block. Endpoint 0 sends 64 KiB tagged messages (rendezvous) that
 *   endpoint 1 has not posted receives for; once the provider has no room for another,
 *   fi_tsend returns -FI_EAGAIN (the provider has 256 rendezvous ids) instead of waiting for
 *   a receive that only this thread could post. Then endpoint 1 receives every message,
 *   each intact, and the refused send goes through.
 * - An object in use cannot be closed: fi_close of a domain whose endpoints, CQs, AV,
 *   counter or memory region are open, or of a fabric whose domain or EQ is open, returns
 *   -FI_EBUSY and leaves the object usable; once its children are closed it closes.
 *
 * Prints "busy_and_backlog: ok (N sends before -FI_EAGAIN)" and exits 0 on success. */
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
#include <unistd.h>

#define TEST_NAME "busy_and_backlog"
#include "check.h"

#define LEN (64 * 1024)
/* More than the provider can hold unreceived: it must say -FI_EAGAIN before this many. */
#define MAX_SENDS 2000

static struct fid_cq *cq[2];
static struct fid_ep *ep[2];
static fi_addr_t addr[2];

static unsigned char pattern(size_t i, int msg) { return (unsigned char)(i * 5 + (size_t)msg * 11 + 3); }

/* Read one completion of cq[i] if there is one: 1, else 0; an error completion fails. */
static int read_one(int i) {
    struct fi_cq_tagged_entry e;
    ssize_t n = fi_cq_read(cq[i], &e, 1);
    if (n == 1)
        return 1;
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err = {0};
        fi_cq_readerr(cq[i], &err, 0);
        CHECK(0, "error completion on CQ %d: %s", i, fi_strerror(err.err));
    }
    CHECK(n == -FI_EAGAIN, "fi_cq_read = %zd", n);
    return 0;
}

/* Progress both endpoints until `sends` send and `recvs` receive completions were read. */
static void complete(int sends, int recvs) {
    int s = 0, r = 0;
    for (long spins = 0; s < sends || r < recvs; spins++) {
        CHECK(spins < 200000000L, "%d of %d sends, %d of %d receives completed", s, sends, r,
              recvs);
        s += read_one(0);
        r += read_one(1);
    }
}

int main(void) {
    /* A send that blocks would hang this test: end it instead. */
    alarm(300);
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    CHECK(hints, "fi_allocinfo");
    hints->caps = FI_TAGGED | FI_MSG | FI_RMA;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->domain_attr->mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_LOCAL;
    hints->fabric_attr->prov_name = strdup("nicemu");
    CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));

    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_eq *eq;
    struct fid_cntr *cntr;
    struct fid_mr *mr;
    CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
    struct fi_eq_attr eq_attr = {.size = 8, .wait_obj = FI_WAIT_NONE};
    CALL(fi_eq_open(fabric, &eq_attr, &eq, NULL));
    CALL(fi_domain(fabric, info, &domain, NULL));
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CALL(fi_av_open(domain, &av_attr, &av, NULL));
    char names[2][8];
    for (int i = 0; i < 2; i++) {
        struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
        CALL(fi_cq_open(domain, &cq_attr, &cq[i], NULL));
        CALL(fi_endpoint(domain, info, &ep[i], NULL));
        CALL(fi_ep_bind(ep[i], &av->fid, 0));
        CALL(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
        CALL(fi_enable(ep[i]));
        size_t len = sizeof names[i];
        CALL(fi_getname(&ep[i]->fid, names[i], &len));
    }
    CHECK(fi_av_insert(av, names, 2, addr, 0, NULL) == 2, "fi_av_insert");
    struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
    CALL(fi_cntr_open(domain, &cntr_attr, &cntr, NULL));
    static unsigned char region[4096];
    CALL(fi_mr_reg(domain, region, sizeof region, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));

    /* Sends nobody receives yet, until the provider refuses one. */
    unsigned char *src = malloc((size_t)LEN * MAX_SENDS);
    CHECK(src, "malloc");
    int sent = 0;
    ssize_t rc = 0;
    for (; sent < MAX_SENDS; sent++) {
        unsigned char *m = src + (size_t)sent * LEN;
        for (size_t i = 0; i < LEN; i++)
            m[i] = pattern(i, sent);
        rc = fi_tsend(ep[0], m, LEN, NULL, addr[1], (uint64_t)sent, NULL);
        if (rc != 0)
            break;
    }
    CHECK(rc == -FI_EAGAIN, "send %d of %d unreceived messages = %zd (%s), expected -FI_EAGAIN",
          sent, MAX_SENDS, rc, fi_strerror((int)-rc));
    CHECK(sent >= 64, "only %d sends before -FI_EAGAIN", sent);

    /* Every message is received, intact; then the refused send goes out. */
    unsigned char *dst = malloc((size_t)LEN * (size_t)(sent + 1));
    CHECK(dst, "malloc");
    for (int k = 0; k < sent; k++)
        CALL(fi_trecv(ep[1], dst + (size_t)k * LEN, LEN, NULL, FI_ADDR_UNSPEC, (uint64_t)k, 0,
                      NULL));
    complete(sent, sent);
    for (int k = 0; k < sent; k++)
        for (size_t i = 0; i < LEN; i++)
            CHECK(dst[(size_t)k * LEN + i] == pattern(i, k), "message %d byte %zu", k, i);
    unsigned char *last = src + (size_t)sent * LEN;
    CALL(fi_tsend(ep[0], last, LEN, NULL, addr[1], (uint64_t)sent, NULL));
    CALL(fi_trecv(ep[1], dst + (size_t)sent * LEN, LEN, NULL, FI_ADDR_UNSPEC, (uint64_t)sent, 0,
                  NULL));
    complete(1, 1);
    CHECK(memcmp(dst + (size_t)sent * LEN, last, LEN) == 0, "the retried message");

    /* Parents in use are busy; each child closed in turn, they close. */
    int r = fi_close(&domain->fid);
    CHECK(r == -FI_EBUSY, "closing a domain with endpoints, CQs, an AV, a counter and an MR = %d",
          r);
    r = fi_close(&fabric->fid);
    CHECK(r == -FI_EBUSY, "closing a fabric with a domain and an EQ = %d", r);
    /* Still usable after the refused close. */
    CALL(fi_tsend(ep[0], src, 1, NULL, addr[1], 7, NULL));
    CALL(fi_trecv(ep[1], dst, 1, NULL, FI_ADDR_UNSPEC, 7, 0, NULL));
    complete(1, 1);
    for (int i = 0; i < 2; i++) {
        CALL(fi_close(&ep[i]->fid));
        CALL(fi_close(&cq[i]->fid));
    }
    CHECK(fi_close(&domain->fid) == -FI_EBUSY, "a domain with an AV, a counter and an MR");
    CALL(fi_close(&av->fid));
    CALL(fi_close(&cntr->fid));
    CHECK(fi_close(&domain->fid) == -FI_EBUSY, "a domain with a memory region");
    CALL(fi_close(&mr->fid));
    CALL(fi_close(&domain->fid));
    CHECK(fi_close(&fabric->fid) == -FI_EBUSY, "a fabric with an EQ");
    CALL(fi_close(&eq->fid));
    CALL(fi_close(&fabric->fid));
    fi_freeinfo(info);
    fi_freeinfo(hints);
    free(src);
    free(dst);
    printf("busy_and_backlog: ok (%d sends before -FI_EAGAIN)\n", sent);
    return 0;
}
