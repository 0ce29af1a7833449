/* Prints the size and selected field offsets of the libfabric structures the provider
 * declares in Rust, for tests/ofi.rs to compare. */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/providers/fi_prov.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(t) printf("%s %zu\n", #t, sizeof(struct t))
#define OFF(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(struct t, f))

int main(void) {
    SIZE(fi_info); SIZE(fi_tx_attr); SIZE(fi_rx_attr); SIZE(fi_ep_attr); SIZE(fi_domain_attr);
    SIZE(fi_fabric_attr); SIZE(fi_provider); SIZE(fid); SIZE(fi_ops); SIZE(fid_fabric);
    SIZE(fid_domain); SIZE(fid_av); SIZE(fid_cq); SIZE(fid_ep); SIZE(fi_ops_fabric); SIZE(fi_ops_domain);
    SIZE(fi_ops_av); SIZE(fi_ops_cq); SIZE(fi_ops_ep); SIZE(fi_ops_cm); SIZE(fi_ops_msg);
    SIZE(fi_ops_tagged); SIZE(fi_av_attr); SIZE(fi_cq_attr); SIZE(fi_cq_tagged_entry);
    SIZE(fi_cq_err_entry); SIZE(fi_msg); SIZE(fi_msg_tagged);
    SIZE(fi_eq_attr); SIZE(fi_eq_err_entry); SIZE(fid_eq); SIZE(fi_ops_eq);
    OFF(fi_info, nic); OFF(fi_info, fabric_attr); OFF(fi_domain_attr, tclass);
    OFF(fi_domain_attr, mr_mode); OFF(fi_ep_attr, mem_tag_format); OFF(fi_provider, getinfo);
    OFF(fi_provider, cleanup); OFF(fi_ops_domain, query_collective); OFF(fid_ep, collective);
    OFF(fi_cq_err_entry, err_data_size); OFF(fi_msg_tagged, data);
    SIZE(fi_cntr_attr); SIZE(fid_cntr); SIZE(fi_ops_cntr); OFF(fi_cntr_attr, flags);
    OFF(fi_ops_cntr, seterr);
    SIZE(fi_wait_attr); SIZE(fid_wait); SIZE(fi_ops_wait);
    /* Memory registration, RMA, atomics. */
    SIZE(fid_mr); SIZE(fi_mr_attr); SIZE(fi_ops_mr); SIZE(fi_rma_iov); SIZE(fi_msg_rma);
    SIZE(fi_ops_rma); SIZE(fi_ioc); SIZE(fi_rma_ioc); SIZE(fi_msg_atomic); SIZE(fi_atomic_attr);
    SIZE(fi_ops_atomic);
    OFF(fid_mr, key); OFF(fi_mr_attr, requested_key); OFF(fi_mr_attr, iface);
    OFF(fi_msg_rma, data); OFF(fi_msg_atomic, op); OFF(fi_msg_atomic, data);
    OFF(fi_ops_atomic, compwritevalid); OFF(fi_ops_rma, injectdata);
    OFF(fi_ops_domain, query_atomic);
    return 0;
}
