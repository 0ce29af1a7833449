/* Wait sets of the nicemu provider (fi_wait_open, fi_wait): an EQ, a CQ and a counter
 * opened with FI_WAIT_SET join the set; fi_wait times out with nothing to read and returns
 * for an event, a counter change and a message that arrives while waiting (the wait
 * progresses the CQ's endpoint). Prints "wait_set: ok" and exits 0 on success. */
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

#define TEST_NAME "wait_set"
#include "check.h"

int main(void) {
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    CHECK(hints, "fi_allocinfo");
    hints->caps = FI_TAGGED;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->fabric_attr->prov_name = strdup("nicemu");
    CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
    CALL(fi_domain(fabric, info, &domain, NULL));

    struct fi_wait_attr wait_attr = {.wait_obj = FI_WAIT_UNSPEC, .flags = 1};
    struct fid_wait *set;
    CHECK(fi_wait_open(fabric, &wait_attr, &set) == -FI_EINVAL, "flags accepted");
    wait_attr.flags = 0;
    CALL(fi_wait_open(fabric, &wait_attr, &set));
    CHECK(set->fid.fclass == FI_CLASS_WAIT, "the wait set's class");
    int rc = fi_wait(set, 10);
    CHECK(rc == -FI_ETIMEDOUT, "fi_wait of an empty set = %d", rc);

    struct fi_eq_attr eq_attr = {.size = 4, .wait_obj = FI_WAIT_SET, .wait_set = set};
    struct fid_eq *eq;
    CALL(fi_eq_open(fabric, &eq_attr, &eq, NULL));
    struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_SET,
                                     .wait_set = set};
    struct fid_cntr *cntr;
    CALL(fi_cntr_open(domain, &cntr_attr, &cntr, NULL));
    struct fid_av *av;
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CALL(fi_av_open(domain, &av_attr, &av, NULL));
    struct fid_cq *cq[2];
    struct fid_ep *ep[2];
    fi_addr_t addr[2];
    char names[2][8];
    for (int i = 0; i < 2; i++) {
        struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED,
                                     .wait_obj = i == 1 ? FI_WAIT_SET : FI_WAIT_NONE,
                                     .wait_set = i == 1 ? set : NULL};
        CALL(fi_cq_open(domain, &cq_attr, &cq[i], NULL));
        CALL(fi_endpoint(domain, info, &ep[i], NULL));
        CALL(fi_ep_bind(ep[i], &av->fid, 0));
        CALL(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
        CALL(fi_enable(ep[i]));
        size_t len = sizeof names[i];
        CALL(fi_getname(&ep[i]->fid, names[i], &len));
    }
    CHECK(fi_av_insert(av, names, 2, addr, 0, NULL) == 2, "fi_av_insert");
    rc = fi_wait(set, 10);
    CHECK(rc == -FI_ETIMEDOUT, "fi_wait with nothing to read = %d", rc);

    /* An event. */
    struct fi_eq_entry entry = {.context = eq};
    uint32_t event;
    CHECK(fi_eq_write(eq, FI_NOTIFY, &entry, sizeof entry, 0) == sizeof entry, "write");
    CALL(fi_wait(set, 1000));
    CHECK(fi_eq_read(eq, &event, &entry, sizeof entry, 0) == sizeof entry, "read");
    rc = fi_wait(set, 10);
    CHECK(rc == -FI_ETIMEDOUT, "fi_wait after the event was read = %d", rc);

    /* A counter change, reported once. */
    CALL(fi_cntr_add(cntr, 3));
    CALL(fi_wait(set, 1000));
    rc = fi_wait(set, 10);
    CHECK(rc == -FI_ETIMEDOUT, "fi_wait after the change was reported = %d", rc);

    /* A message arriving while the set waits (no other progress is made). */
    char rbuf[32], sbuf[32] = "through a wait set";
    int rctx;
    CALL(fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 5, 0, &rctx));
    CALL(fi_tsend(ep[0], sbuf, sizeof sbuf, NULL, addr[1], 5, NULL));
    CALL(fi_wait(set, 20000));
    struct fi_cq_tagged_entry e;
    CHECK(fi_cq_read(cq[1], &e, 1) == 1 && e.op_context == &rctx, "the completion fi_wait saw");
    CHECK(memcmp(rbuf, sbuf, sizeof sbuf) == 0, "received bytes");
    for (long spins = 0; fi_cq_read(cq[0], &e, 1) != 1; spins++)
        CHECK(spins < 10000000L, "no send completion");

    for (int i = 0; i < 2; i++) {
        CALL(fi_close(&ep[i]->fid));
        CALL(fi_close(&cq[i]->fid));
    }
    CALL(fi_close(&cntr->fid));
    CALL(fi_close(&eq->fid));
    rc = fi_wait(set, 10);
    CHECK(rc == -FI_ETIMEDOUT, "fi_wait with its members closed = %d", rc);
    CALL(fi_close(&set->fid));
    CALL(fi_close(&av->fid));
    CALL(fi_close(&domain->fid));
    CALL(fi_close(&fabric->fid));
    fi_freeinfo(info);
    fi_freeinfo(hints);
    printf("wait_set: ok\n");
    return 0;
}
