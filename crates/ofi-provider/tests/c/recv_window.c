/* A window of posted 4 MiB tagged receives on one endpoint of the nicemu provider, as
 * osu_bw posts them (Open MPI's MTL posts a receive of the full length; the provider adds
 * room for 8 bytes of remote CQ data): NPOST of them must fit the emulated node's memory,
 * then every one is cancelled and reported with FI_ECANCELED.
 * Prints "recv_window: ok (N receives of S B)" and exits 0 on success. */
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

#define TEST_NAME "recv_window"
#include "check.h"

/* 72 x 4 MiB = 288 MiB: fits the node's 512 MiB only when a receive of 4 MiB + 8 B takes
 * 4 MiB and a page, not the next power of two (8 MiB). */
#define NPOST 72

int main(void) {
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    CHECK(hints, "fi_allocinfo");
    hints->caps = FI_TAGGED;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->fabric_attr->prov_name = strdup("nicemu");
    CALL(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
    size_t len = info->ep_attr->max_msg_size;
    CHECK(len == 4u << 20, "max_msg_size %zu", len);

    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
    CALL(fi_domain(fabric, info, &domain, NULL));
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    CALL(fi_av_open(domain, &av_attr, &av, NULL));
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
    CALL(fi_cq_open(domain, &cq_attr, &cq, NULL));
    CALL(fi_endpoint(domain, info, &ep, NULL));
    CALL(fi_ep_bind(ep, &av->fid, 0));
    CALL(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CALL(fi_enable(ep));

    unsigned char *buf = malloc(len);
    CHECK(buf, "malloc");
    static int ctx[NPOST];
    for (int i = 0; i < NPOST; i++)
        CALL(fi_trecv(ep, buf, len, NULL, FI_ADDR_UNSPEC, (uint64_t)i, 0, &ctx[i]));
    for (int i = 0; i < NPOST; i++)
        CALL(fi_cancel(&ep->fid, &ctx[i]));
    int cancelled = 0;
    for (long spins = 0; cancelled < NPOST; spins++) {
        CHECK(spins < 100000000L, "%d of %d cancellations reported", cancelled, NPOST);
        struct fi_cq_tagged_entry e;
        ssize_t n = fi_cq_read(cq, &e, 1);
        CHECK(n == -FI_EAGAIN || n == -FI_EAVAIL, "fi_cq_read = %zd", n);
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err = {0};
            CHECK(fi_cq_readerr(cq, &err, 0) == 1, "fi_cq_readerr");
            CHECK(err.err == FI_ECANCELED, "error %d (%s), expected FI_ECANCELED", err.err,
                  fi_strerror(err.err));
            int *c = err.op_context;
            CHECK(c >= ctx && c < ctx + NPOST, "unknown context");
            cancelled++;
        }
    }
    CALL(fi_close(&ep->fid));
    CALL(fi_close(&cq->fid));
    CALL(fi_close(&av->fid));
    CALL(fi_close(&domain->fid));
    CALL(fi_close(&fabric->fid));
    fi_freeinfo(info);
    fi_freeinfo(hints);
    free(buf);
    printf("recv_window: ok (%d receives of %zu B)\n", NPOST, len);
    return 0;
}
