/* fi_getinfo of the nicemu provider against libfabric's fi_getinfo(3) rules, as fabtests'
 * fi_getinfo_test checks them: a source address in every fi_info (this NIC's NID with
 * C_PID_ANY), a destination address from node and service, only the primary capabilities
 * asked for, no domain capabilities in tx/rx attributes, the domain capabilities asked for,
 * and -FI_ENODATA (never another error, never an fi_info that lacks what was asked) for
 * hints the provider cannot meet. Prints "getinfo: ok" and exits 0 on success. */
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_NAME "getinfo"
#include "check.h"

#define PID_ANY 511u

static struct fi_info *base_hints(void) {
    struct fi_info *h = fi_allocinfo();
    CHECK(h, "fi_allocinfo");
    h->fabric_attr->prov_name = strdup("nicemu");
    h->ep_attr->type = FI_EP_RDM;
    return h;
}

static void addr_is(const void *a, size_t len, uint32_t nid, uint32_t pid, const char *what) {
    CHECK(a && len == 8, "%s: address %p of %zu bytes", what, a, len);
    uint32_t got[2];
    memcpy(got, a, 8);
    CHECK(got[0] == nid && got[1] == pid, "%s: NID %#x PID %u, expected NID %#x PID %u", what,
          got[0], got[1], nid, pid);
}

static int get(const char *node, const char *service, uint64_t flags, struct fi_info *hints,
               struct fi_info **info) {
    *info = NULL;
    return fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints, info);
}

int main(void) {
    struct fi_info *info, *h;
    int rc;

    /* A source address without hints, node or service: NID 0 (a process alone), PID any. */
    h = base_hints();
    rc = get(NULL, NULL, 0, h, &info);
    CHECK(rc == 0, "no hints: %d", rc);
    addr_is(info->src_addr, info->src_addrlen, 0, PID_ANY, "src_addr");
    CHECK(!info->dest_addr && info->dest_addrlen == 0, "a dest_addr nobody asked for");
    /* tx/rx attributes hold transmit/receive capabilities only (no FI_LOCAL_COMM ...),
     * the domain its own. */
    CHECK((info->tx_attr->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM)) == 0, "tx caps %#llx",
          (unsigned long long)info->tx_attr->caps);
    CHECK((info->rx_attr->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM | FI_REMOTE_CQ_DATA)) == 0,
          "rx caps %#llx", (unsigned long long)info->rx_attr->caps);
    CHECK((info->domain_attr->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM)) ==
              (FI_LOCAL_COMM | FI_REMOTE_COMM),
          "domain caps %#llx", (unsigned long long)info->domain_attr->caps);
    fi_freeinfo(info);

    /* node and service name a destination: this host is this process's NIC, the service
     * a PID. */
    rc = get("localhost", "5", 0, h, &info);
    CHECK(rc == 0, "localhost:5: %d", rc);
    addr_is(info->dest_addr, info->dest_addrlen, 0, 5, "dest_addr");
    addr_is(info->src_addr, info->src_addrlen, 0, PID_ANY, "src_addr beside dest_addr");
    fi_freeinfo(info);
    rc = get("0x2a", "7", 0, h, &info);
    CHECK(rc == 0, "0x2a:7: %d", rc);
    addr_is(info->dest_addr, info->dest_addrlen, 0x2a, 7, "dest_addr of a NID");
    fi_freeinfo(info);
    /* FI_SOURCE with this host: the source address; the service (a TCP port to fabtests)
     * does not choose the PID. Another NID cannot be a source. */
    rc = get("localhost", "9228", FI_SOURCE, h, &info);
    CHECK(rc == 0, "FI_SOURCE localhost:9228: %d", rc);
    addr_is(info->src_addr, info->src_addrlen, 0, PID_ANY, "FI_SOURCE src_addr");
    fi_freeinfo(info);
    rc = get("0x7", NULL, FI_SOURCE, h, &info);
    CHECK(rc == -FI_ENODATA, "FI_SOURCE of another NID: %d", rc);
    rc = get("elsewhere.invalid", "5", 0, h, &info);
    CHECK(rc == -FI_ENODATA, "an unknown host: %d", rc);

    /* Only the primary capabilities asked for. */
    h->caps = FI_MSG;
    rc = get(NULL, NULL, 0, h, &info);
    CHECK(rc == 0, "FI_MSG: %d", rc);
    CHECK((info->caps & (FI_MSG | FI_TAGGED)) == FI_MSG, "caps %#llx for FI_MSG",
          (unsigned long long)info->caps);
    CHECK((info->tx_attr->caps & FI_MSG) && !(info->tx_attr->caps & FI_TAGGED),
          "tx caps %#llx for FI_MSG", (unsigned long long)info->tx_attr->caps);
    fi_freeinfo(info);
    h->caps = FI_TAGGED | FI_DIRECTED_RECV;
    rc = get(NULL, NULL, 0, h, &info);
    CHECK(rc == 0, "FI_TAGGED|FI_DIRECTED_RECV: %d", rc);
    CHECK((info->caps & (FI_MSG | FI_TAGGED | FI_DIRECTED_RECV)) == (FI_TAGGED | FI_DIRECTED_RECV),
          "caps %#llx", (unsigned long long)info->caps);
    CHECK(info->rx_attr->caps & FI_DIRECTED_RECV, "rx caps %#llx",
          (unsigned long long)info->rx_attr->caps);
    fi_freeinfo(info);
    h->caps = 0;

    /* What cannot be met is -FI_ENODATA. */
    uint64_t bad_caps[] = {FI_TAGGED | FI_MULTI_RECV, FI_MSG | FI_HMEM,
                           FI_TAGGED | FI_VARIABLE_MSG};
    for (size_t i = 0; i < sizeof bad_caps / sizeof bad_caps[0]; i++) {
        h->caps = bad_caps[i];
        rc = get(NULL, NULL, 0, h, &info);
        CHECK(rc == -FI_ENODATA, "caps %#llx: %d", (unsigned long long)bad_caps[i], rc);
    }
    h->caps = 0;
    h->tx_attr->msg_order = FI_ORDER_SAS;
    rc = get(NULL, NULL, 0, h, &info);
    CHECK(rc == 0 && (info->tx_attr->msg_order & FI_ORDER_SAS), "FI_ORDER_SAS: %d", rc);
    fi_freeinfo(info);
    h->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_RAW;
    rc = get(NULL, NULL, 0, h, &info);
    CHECK(rc == -FI_ENODATA, "tx msg_order SAS|RAW: %d", rc);
    h->tx_attr->msg_order = 0;
    h->rx_attr->msg_order = FI_ORDER_DATA;
    rc = get(NULL, NULL, 0, h, &info);
    CHECK(rc == -FI_ENODATA, "rx msg_order DATA: %d", rc);
    h->rx_attr->msg_order = 0;
    h->domain_attr->caps = FI_LOCAL_COMM;
    rc = get(NULL, NULL, 0, h, &info);
    CHECK(rc == 0 && (info->domain_attr->caps & FI_LOCAL_COMM), "domain FI_LOCAL_COMM: %d", rc);
    fi_freeinfo(info);
    h->domain_attr->caps = FI_SHARED_AV;
    rc = get(NULL, NULL, 0, h, &info);
    CHECK(rc == -FI_ENODATA, "domain FI_SHARED_AV: %d", rc);
    h->domain_attr->caps = 0;
    h->domain_attr->name = strdup("invalid_domain");
    rc = get(NULL, NULL, 0, h, &info);
    CHECK(rc == -FI_ENODATA, "an unknown domain: %d", rc);

    fi_freeinfo(h);
    printf("getinfo: ok\n");
    return 0;
}
