/* Event queues of the nicemu provider (fi_eq(3)): open with FI_WAIT_UNSPEC, write and read
 * FI_NOTIFY events in order, FI_PEEK, a full queue, a blocking read that times out, no error
 * events, fi_trywait; an RDM endpoint, its address vector and the domain bound to the EQ
 * (fabtests' common setup opens and binds one before any data moves). Prints
 * "event_queue: ok" and exits 0 on success. */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEST_NAME "event_queue"
#include "check.h"

int main(void) {
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    CHECK(hints, "fi_allocinfo");
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED;
    hints->fabric_attr->prov_name = strdup("nicemu");
    CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info) == 0, "fi_getinfo");
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    CHECK(fi_fabric(info->fabric_attr, &fabric, NULL) == 0, "fi_fabric");

    /* FI_WAIT_SET needs a wait set. */
    struct fi_eq_attr attr = {.size = 4, .wait_obj = FI_WAIT_SET};
    struct fid_eq *eq = NULL;
    int rc = fi_eq_open(fabric, &attr, &eq, NULL);
    CHECK(rc == -FI_EINVAL, "fi_eq_open(FI_WAIT_SET) without a set = %d", rc);

    attr.wait_obj = FI_WAIT_UNSPEC;
    attr.flags = FI_WRITE;
    int ctx;
    rc = fi_eq_open(fabric, &attr, &eq, &ctx);
    CHECK(rc == 0 && eq, "fi_eq_open = %d", rc);
    CHECK(eq->fid.fclass == FI_CLASS_EQ && eq->fid.context == &ctx, "the EQ's fid");

    struct fi_eq_entry entry;
    uint32_t event = 0;
    ssize_t n = fi_eq_read(eq, &event, &entry, sizeof entry, 0);
    CHECK(n == -FI_EAGAIN, "read of an empty EQ = %zd", n);
    n = fi_eq_sread(eq, &event, &entry, sizeof entry, 20, 0);
    CHECK(n == -FI_EAGAIN, "sread of an empty EQ = %zd", n);
    struct fid *fids[1] = {&eq->fid};
    CHECK(fi_trywait(fabric, fids, 1) == 0, "trywait on an empty EQ");

    for (int i = 0; i < 4; i++) {
        entry.fid = &fabric->fid;
        entry.context = (void *)(uintptr_t)(100 + i);
        entry.data = (uint64_t)i;
        n = fi_eq_write(eq, FI_NOTIFY, &entry, sizeof entry, 0);
        CHECK(n == (ssize_t)sizeof entry, "write %d = %zd", i, n);
    }
    n = fi_eq_write(eq, FI_NOTIFY, &entry, sizeof entry, 0);
    CHECK(n == -FI_EAGAIN, "write to a full EQ = %zd", n);
    CHECK(fi_trywait(fabric, fids, 1) == -FI_EAGAIN, "trywait with an event");
    char small[4];
    n = fi_eq_read(eq, &event, small, sizeof small, 0);
    CHECK(n == -FI_ETOOSMALL, "read into 4 bytes = %zd", n);

    for (int i = 0; i < 4; i++) {
        for (int peek = 1; peek >= 0; peek--) {
            memset(&entry, 0, sizeof entry);
            event = ~0u;
            n = peek ? fi_eq_read(eq, &event, &entry, sizeof entry, FI_PEEK)
                     : fi_eq_sread(eq, &event, &entry, sizeof entry, -1, 0);
            CHECK(n == (ssize_t)sizeof entry, "read %d (peek %d) = %zd", i, peek, n);
            CHECK(event == FI_NOTIFY, "event %u", event);
            CHECK(entry.fid == &fabric->fid && entry.context == (void *)(uintptr_t)(100 + i) &&
                      entry.data == (uint64_t)i,
                  "entry %d (peek %d): context %p data %llu", i, peek, entry.context,
                  (unsigned long long)entry.data);
        }
    }
    n = fi_eq_read(eq, &event, &entry, sizeof entry, 0);
    CHECK(n == -FI_EAGAIN, "read after draining = %zd", n);
    struct fi_eq_err_entry err;
    memset(&err, 0, sizeof err);
    n = fi_eq_readerr(eq, &err, 0);
    CHECK(n == -FI_EAGAIN, "readerr = %zd", n);
    const char *s = fi_eq_strerror(eq, 0, NULL, NULL, 0);
    CHECK(s && *s, "fi_eq_strerror");

    /* fabtests' setup: domain, AV, CQs, endpoint, with the EQ bound to each that takes one. */
    CHECK(fi_domain(fabric, info, &domain, NULL) == 0, "fi_domain");
    rc = fi_domain_bind(domain, &eq->fid, 0);
    CHECK(rc == 0, "fi_domain_bind(eq) = %d", rc);
    struct fi_av_attr av_attr = {.type = FI_AV_MAP};
    struct fid_av *av;
    CHECK(fi_av_open(domain, &av_attr, &av, NULL) == 0, "fi_av_open");
    rc = fi_av_bind(av, &eq->fid, 0);
    CHECK(rc == 0, "fi_av_bind(eq) = %d", rc);
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
    struct fid_cq *cq;
    CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL) == 0, "fi_cq_open");
    struct fid_ep *ep;
    CHECK(fi_endpoint(domain, info, &ep, NULL) == 0, "fi_endpoint");
    rc = fi_ep_bind(ep, &eq->fid, 0);
    CHECK(rc == 0, "fi_ep_bind(eq) = %d", rc);
    CHECK(fi_ep_bind(ep, &av->fid, 0) == 0, "bind av");
    CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0, "bind cq");
    CHECK(fi_enable(ep) == 0, "fi_enable");
    n = fi_eq_read(eq, &event, &entry, sizeof entry, 0);
    CHECK(n == -FI_EAGAIN, "an event after the setup: %zd", n);

    /* fi_cq_signal ends a blocking read that would wait for ever (the alarm turns a read
     * that ignores the signal into a failure instead of a hang). */
    CHECK(fi_cq_signal(cq) == 0, "fi_cq_signal");
    alarm(60);
    struct fi_cq_tagged_entry comp;
    n = fi_cq_sread(cq, &comp, 1, NULL, -1);
    alarm(0);
    CHECK(n == -FI_EAGAIN, "fi_cq_sread after fi_cq_signal = %zd", n);
    /* fi_shutdown has no connection to end on an RDM endpoint (fabtests' fi_cq_data calls
     * it on every endpoint type). */
    rc = fi_shutdown(ep, 0);
    CHECK(rc == -FI_ENOSYS, "fi_shutdown = %d", rc);

    CHECK(fi_close(&ep->fid) == 0, "closing the endpoint");
    CHECK(fi_close(&cq->fid) == 0, "closing the CQ");
    CHECK(fi_close(&av->fid) == 0, "closing the AV");
    CHECK(fi_close(&domain->fid) == 0, "closing the domain");
    CHECK(fi_close(&eq->fid) == 0, "closing the EQ");
    CHECK(fi_close(&fabric->fid) == 0, "closing the fabric");
    fi_freeinfo(info);
    fi_freeinfo(hints);
    printf("event_queue: ok\n");
    return 0;
}
