/* FI_WAIT_FD wait objects of the nicemu provider (fi_control(FI_GETWAIT), fi_trywait,
 * poll): an EQ's descriptor is readable exactly while an event is queued; a CQ's while a
 * completion is queued, and fi_trywait refuses to let the reader sleep while its endpoint
 * has a receive in flight (progress is manual); a counter's becomes readable when it
 * changes and fi_trywait clears it. Objects without a descriptor answer FI_GETWAIT with
 * -FI_ENOSYS. Prints "wait_fd: ok" and exits 0 on success. */
#include <poll.h>
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

#define TEST_NAME "wait_fd"
#include "check.h"

/* Whether `fd` is readable now. */
static int readable(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, 0);
    CHECK(n >= 0, "poll");
    return n == 1 && (p.revents & POLLIN);
}

static struct fid_fabric *fabric;

static int trywait(struct fid *f) { return fi_trywait(fabric, &f, 1); }

int main(void) {
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    CHECK(hints, "fi_allocinfo");
    hints->caps = FI_TAGGED;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->fabric_attr->prov_name = strdup("nicemu");
    CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
    struct fid_domain *domain;
    CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
    CALL(fi_domain(fabric, info, &domain, NULL));
    int fd = -1;

    /* EQ. */
    struct fi_eq_attr eq_attr = {.size = 4, .wait_obj = FI_WAIT_FD};
    struct fid_eq *eq;
    CALL(fi_eq_open(fabric, &eq_attr, &eq, NULL));
    CALL(fi_control(&eq->fid, FI_GETWAIT, &fd));
    CHECK(fd >= 0, "EQ descriptor %d", fd);
    CALL(trywait(&eq->fid));
    CHECK(!readable(fd), "an empty EQ's descriptor is readable");
    struct fi_eq_entry entry = {.context = eq};
    uint32_t event;
    for (int i = 0; i < 2; i++)
        CHECK(fi_eq_write(eq, FI_NOTIFY, &entry, sizeof entry, 0) == sizeof entry, "write");
    CHECK(readable(fd), "an EQ with events: descriptor not readable");
    CHECK(trywait(&eq->fid) == -FI_EAGAIN, "trywait with events queued");
    CHECK(fi_eq_read(eq, &event, &entry, sizeof entry, FI_PEEK) == sizeof entry, "peek");
    CHECK(fi_eq_read(eq, &event, &entry, sizeof entry, 0) == sizeof entry, "read");
    CHECK(readable(fd), "one event left: descriptor not readable");
    CHECK(fi_eq_sread(eq, &event, &entry, sizeof entry, 1000, 0) == sizeof entry, "sread");
    CHECK(!readable(fd), "a drained EQ's descriptor is readable");
    CALL(trywait(&eq->fid));

    /* CQ of a receiving endpoint. */
    struct fid_av *av;
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CALL(fi_av_open(domain, &av_attr, &av, NULL));
    struct fid_cq *cq[2];
    struct fid_ep *ep[2];
    fi_addr_t addr[2];
    char names[2][8];
    for (int i = 0; i < 2; i++) {
        struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED,
                                     .wait_obj = i == 1 ? FI_WAIT_FD : FI_WAIT_NONE};
        CALL(fi_cq_open(domain, &cq_attr, &cq[i], NULL));
        CALL(fi_endpoint(domain, info, &ep[i], NULL));
        CALL(fi_ep_bind(ep[i], &av->fid, 0));
        CALL(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
        CALL(fi_enable(ep[i]));
        size_t len = sizeof names[i];
        CALL(fi_getname(&ep[i]->fid, names[i], &len));
    }
    CHECK(fi_av_insert(av, names, 2, addr, 0, NULL) == 2, "fi_av_insert");
    int rc = fi_control(&cq[0]->fid, FI_GETWAIT, &fd);
    CHECK(rc == -FI_ENOSYS, "FI_GETWAIT of an FI_WAIT_NONE CQ = %d", rc);
    CALL(fi_control(&cq[1]->fid, FI_GETWAIT, &fd));
    CALL(trywait(&cq[1]->fid));
    CHECK(!readable(fd), "an idle CQ's descriptor is readable");
    char rbuf[64], sbuf[64] = "wait objects";
    int rctx;
    CALL(fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 9, 0, &rctx));
    CHECK(trywait(&cq[1]->fid) == -FI_EAGAIN, "trywait with a receive in flight");
    CALL(fi_tsend(ep[0], sbuf, sizeof sbuf, NULL, addr[1], 9, NULL));
    for (long spins = 0; !readable(fd); spins++) {
        CHECK(spins < 10000000L, "the completion never made the descriptor readable");
        CHECK(trywait(&cq[1]->fid) == -FI_EAGAIN, "trywait let the reader sleep");
    }
    struct fi_cq_tagged_entry e;
    CHECK(fi_cq_read(cq[1], &e, 1) == 1 && e.op_context == &rctx, "the receive completion");
    CHECK(memcmp(rbuf, sbuf, sizeof sbuf) == 0, "received bytes");
    CHECK(!readable(fd), "a drained CQ's descriptor is readable");
    CALL(trywait(&cq[1]->fid));
    for (long spins = 0; fi_cq_read(cq[0], &e, 1) != 1; spins++)
        CHECK(spins < 10000000L, "no send completion");

    /* Counter. */
    struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD};
    struct fid_cntr *cntr;
    CALL(fi_cntr_open(domain, &cntr_attr, &cntr, NULL));
    CALL(fi_control(&cntr->fid, FI_GETWAIT, &fd));
    CALL(trywait(&cntr->fid));
    CHECK(!readable(fd), "an unchanged counter's descriptor is readable");
    CALL(fi_cntr_add(cntr, 1));
    CHECK(readable(fd), "a changed counter's descriptor is not readable");
    CALL(trywait(&cntr->fid));
    CHECK(!readable(fd), "trywait left the counter's descriptor readable");
    CALL(fi_ep_bind(ep[1], &cntr->fid, FI_RECV));
    CALL(fi_trecv(ep[1], rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 10, 0, NULL));
    CHECK(trywait(&cntr->fid) == -FI_EAGAIN, "trywait with a counted receive in flight");
    CALL(fi_tsend(ep[0], sbuf, sizeof sbuf, NULL, addr[1], 10, NULL));
    CALL(fi_cntr_wait(cntr, 2, 20000));
    CHECK(readable(fd), "the counted receive left the descriptor unreadable");
    CHECK(fi_cq_read(cq[1], &e, 1) == 1, "the counted receive's completion");

    struct fid *fids[2] = {&eq->fid, &cq[1]->fid};
    CALL(fi_trywait(fabric, fids, 2));
    rc = fi_trywait(fabric, fids, 2);
    CHECK(rc == 0, "trywait of an idle EQ and CQ = %d", rc);
    CHECK(fi_eq_write(eq, FI_NOTIFY, &entry, sizeof entry, 0) == sizeof entry, "write");
    CHECK(fi_trywait(fabric, fids, 2) == -FI_EAGAIN, "trywait of a busy EQ and an idle CQ");

    for (int i = 0; i < 2; i++) {
        CALL(fi_close(&ep[i]->fid));
        CALL(fi_close(&cq[i]->fid));
    }
    CALL(fi_close(&cntr->fid));
    CALL(fi_close(&eq->fid));
    CALL(fi_close(&av->fid));
    CALL(fi_close(&domain->fid));
    CALL(fi_close(&fabric->fid));
    fi_freeinfo(info);
    fi_freeinfo(hints);
    printf("wait_fd: ok\n");
    return 0;
}
