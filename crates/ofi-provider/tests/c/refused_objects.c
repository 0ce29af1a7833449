/* Objects the nicemu provider does not provide (poll sets, wait sets with a descriptor):
 * their open calls fail with -FI_ENOSYS instead of calling through a null entry of the operation
 * tables (fabtests' fi_eq_test, fi_cq_test and fi_dom_test crashed on it).
 * Prints "refused_objects: ok" and exits 0 on success. */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_NAME "refused_objects"
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
    CHECK(fi_domain(fabric, info, &domain, NULL) == 0, "fi_domain");

    struct fi_wait_attr wait_attr = {.wait_obj = FI_WAIT_FD};
    struct fid_wait *wait = NULL;
    int rc = fi_wait_open(fabric, &wait_attr, &wait);
    CHECK(rc == -FI_ENOSYS && wait == NULL, "fi_wait_open(FI_WAIT_FD) = %d", rc);
    struct fi_poll_attr poll_attr = {0};
    struct fid_poll *poll = NULL;
    rc = fi_poll_open(domain, &poll_attr, &poll);
    CHECK(rc == -FI_ENOSYS && poll == NULL, "fi_poll_open = %d", rc);

    CHECK(fi_close(&domain->fid) == 0, "closing the domain");
    CHECK(fi_close(&fabric->fid) == 0, "closing the fabric");
    fi_freeinfo(info);
    fi_freeinfo(hints);
    printf("refused_objects: ok\n");
    return 0;
}
