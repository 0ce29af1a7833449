//! Hardware counters under their public names (`cassini_cntr_defs.h` / the `c_*_cntrs` views
//! of `csr_defs.json`). The counters are plain fields of the blocks; software reads them
//! through the per-block event-counter arrays (`c_cq_sts_event_cnts`, `c_lpe_sts_event_cnts`,
//! ...), at the offset the public view gives the counter's name; counter arrays (one 64-bit
//! counter per traffic class, ...) at that offset + 8 per element. To expose another
//! counter, add a line to [`COUNTERS`] or [`COUNTER_ARRAYS`].

use firmware_spec::cassini::csr::{self, Csr};

use crate::atu::Atu;
use crate::block::Counters;
use crate::ct::CtBlock;
use crate::ee::Ee;
use crate::lpe::Lpe;
use crate::pct::Pct;
use crate::rmu::Rmu;

/// The state the counters are read from: a borrow of every block that keeps counters, named
/// like the fields of the NIC that owns them. `hw` builds one for each counter read.
#[derive(Clone, Copy)]
pub(crate) struct CounterView<'a> {
    pub(crate) counters: &'a Counters,
    pub(crate) ct: &'a CtBlock,
    pub(crate) ee: &'a Ee,
    pub(crate) lpe: &'a Lpe,
    pub(crate) rmu: &'a Rmu,
    pub(crate) atu: &'a Atu,
    pub(crate) pct: &'a Pct,
}

type Getter = fn(&CounterView<'_>) -> u64;

/// (view, counter name, value) of every counter software can read.
pub(crate) const COUNTERS: &[(&str, &str, Getter)] = &[
    ("c_cq_cntrs", "success_tx_cntr", |h| {
        h.counters.success_tx_cntr
    }),
    ("c_cq_cntrs", "success_tgt_cntr", |h| {
        h.counters.success_tgt_cntr
    }),
    ("c_cq_cntrs", "fail_tx_cntr", |h| h.counters.fail_tx_cntr),
    ("c_cq_cntrs", "fail_tgt_cntr", |h| h.counters.fail_tgt_cntr),
    ("c_cq_cntrs", "wr_ptr_updt_err_cntr", |h| {
        h.counters.wr_ptr_updt_err_cntr
    }),
    ("c_cq_cntrs", "num_txq_cmd_reads", |h| {
        h.counters.num_txq_cmd_reads
    }),
    ("c_cq_cntrs", "num_tgq_cmd_reads", |h| {
        h.counters.num_tgq_cmd_reads
    }),
    ("c_cq_cntrs", "num_tx_cmd_align_errors", |h| {
        h.counters.num_tx_cmd_align_errors
    }),
    ("c_cq_cntrs", "num_tx_cmd_op_errors", |h| {
        h.counters.num_tx_cmd_op_errors
    }),
    ("c_cq_cntrs", "num_tx_cmd_arg_errors", |h| {
        h.counters.num_tx_cmd_arg_errors
    }),
    ("c_cq_cntrs", "num_tgt_cmd_arg_errors", |h| {
        h.counters.num_tgt_cmd_arg_errors
    }),
    ("c_cq_cntrs", "num_tx_cmd_perm_errors", |h| {
        h.counters.num_tx_cmd_perm_errors
    }),
    ("c_cq_cntrs", "num_tgt_cmd_perm_errors", |h| {
        h.counters.num_tgt_cmd_perm_errors
    }),
    ("c_cq_cntrs", "num_idc_cmds", |h| h.counters.num_idc_cmds),
    ("c_cq_cntrs", "num_dma_cmds", |h| h.counters.num_dma_cmds),
    ("c_cq_cntrs", "num_cq_cmds", |h| h.counters.num_cq_cmds),
    ("c_cq_cntrs", "num_tgt_cmds", |h| h.counters.num_tgt_cmds),
    ("c_cq_cntrs", "num_ll_ops_received", |h| {
        h.counters.num_ll_ops_received
    }),
    ("c_cq_cntrs", "num_ll_ops_successful", |h| {
        h.counters.num_ll_ops_successful
    }),
    ("c_tou_cntrs", "num_doorbell_writes", |h| {
        h.ct.counters().doorbells
    }),
    ("c_tou_cntrs", "num_ct_updates", |h| {
        h.ct.counters().ct_updates
    }),
    ("c_tou_cntrs", "num_trig_cmds", |h| h.ct.counters().fired),
    ("c_ee_cntrs", "events_enqueued_cntr", |h| {
        h.ee.counters.events_enqueued_cntr
    }),
    ("c_ee_cntrs", "events_dropped_rsrvn_cntr", |h| {
        h.ee.counters.events_dropped_rsrvn_cntr
    }),
    ("c_ee_cntrs", "events_dropped_ordinary_cntr", |h| {
        h.ee.counters.events_dropped_ordinary_cntr
    }),
    ("c_ee_cntrs", "eq_status_update_cntr", |h| {
        h.ee.counters.eq_status_update_cntr
    }),
    ("c_ee_cntrs", "eq_sw_state_wr_cntr", |h| {
        h.ee.counters.eq_sw_state_wr_cntr
    }),
    ("c_lpe_cntrs", "success_cntr", |h| {
        h.lpe.counters().success_cntr
    }),
    ("c_lpe_cntrs", "fail_cntr", |h| h.lpe.counters().fail_cntr),
    ("c_lpe_cntrs", "put_cmds", |h| h.lpe.counters().put_cmds),
    ("c_lpe_cntrs", "get_cmds", |h| h.lpe.counters().get_cmds),
    ("c_lpe_cntrs", "err_op_violation", |h| {
        h.lpe.counters().err_op_violation
    }),
    ("c_lpe_cntrs", "err_no_space_append", |h| {
        h.lpe.counters().err_no_space_append
    }),
    ("c_lpe_cntrs", "event_put_overflow", |h| {
        h.lpe.counters().event_put_overflow
    }),
    ("c_lpe_cntrs", "event_link", |h| h.lpe.counters().event_link),
    ("c_lpe_cntrs", "event_unlink", |h| {
        h.lpe.counters().event_unlink
    }),
    ("c_lpe_cntrs", "event_search", |h| {
        h.lpe.counters().event_search
    }),
    ("c_lpe_cntrs", "unlink_cmds", |h| {
        h.lpe.counters().unlink_cmds
    }),
    ("c_rmu_cntrs", "ptl_success_cntr", |h| {
        h.rmu.counters.ptl_success_cntr
    }),
    ("c_rmu_cntrs", "ptl_invld_vni_cntr", |h| {
        h.rmu.counters.ptl_invld_vni_cntr
    }),
    ("c_rmu_cntrs", "ptl_no_ptlte_cntr", |h| {
        h.rmu.counters.ptl_no_ptlte_cntr
    }),
    ("c_ixe_cntrs", "port_dfa_mismatch", |h| {
        h.counters.port_dfa_mismatch
    }),
    ("c_ixe_cntrs", "rx_unrecognized_pkt", |h| {
        h.counters.rx_unrecognized_pkt
    }),
    ("c_ixe_cntrs", "rx_ptl_unrestricted_pkt", |h| {
        h.counters.rx_ptl_unrestricted_pkt
    }),
    ("c_ixe_cntrs", "rx_ptl_smallmsg_pkt", |h| {
        h.counters.rx_ptl_smallmsg_pkt
    }),
    ("c_ixe_cntrs", "rx_ptl_continuation_pkt", |h| {
        h.counters.rx_ptl_continuation_pkt
    }),
    ("c_ixe_cntrs", "rx_ptl_response_pkt", |h| {
        h.counters.rx_ptl_response_pkt
    }),
    ("c_ixe_cntrs", "rx_ptl_msgs", |h| h.counters.rx_ptl_msgs),
    ("c_ixe_cntrs", "rx_ptl_multi_msgs", |h| {
        h.counters.rx_ptl_multi_msgs
    }),
    ("c_atu_cntrs", "cache_miss", |h| h.atu.counters.cache_miss),
    ("c_atu_cntrs", "cache_hit_base_page_size", |h| {
        h.atu.counters.cache_hit_base_page_size
    }),
    ("c1_oxe_cntrs", "err_no_translation", |h| {
        h.counters.err_no_translation
    }),
    ("c1_oxe_cntrs", "err_invalid_ac", |h| {
        h.counters.err_invalid_ac
    }),
    ("c1_oxe_cntrs", "err_page_perm", |h| {
        h.counters.err_page_perm
    }),
    ("c1_oxe_cntrs", "ptl_tx_put_msgs_tsc", |h| {
        h.counters.ptl_tx_put_msgs
    }),
    ("c1_oxe_cntrs", "ptl_tx_get_msgs_tsc", |h| {
        h.counters.ptl_tx_get_msgs
    }),
    ("c1_oxe_cntrs", "ptl_tx_put_pkts_tsc", |h| {
        h.counters.ptl_tx_put_pkts
    }),
    // Reliability (pct.rs; docs/cassini-reliability.md).
    ("c_pct_cntrs", "req_ordered", |h| h.pct.counters.req_ordered),
    ("c_pct_cntrs", "req_unordered", |h| {
        h.pct.counters.req_unordered
    }),
    ("c_pct_cntrs", "ptls_response", |h| {
        h.pct.counters.ptls_response
    }),
    ("c_pct_cntrs", "responses_received", |h| {
        h.pct.counters.responses_received
    }),
    ("c_pct_cntrs", "conn_sct_open", |h| {
        h.pct.counters.conn_sct_open
    }),
    ("c_pct_cntrs", "conn_tct_open", |h| {
        h.pct.counters.conn_tct_open
    }),
    ("c_pct_cntrs", "bad_seq_nacks", |h| {
        h.pct.counters.bad_seq_nacks
    }),
    ("c_pct_cntrs", "spt_timeouts", |h| {
        h.pct.counters.spt_timeouts
    }),
    ("c_pct_cntrs", "sct_timeouts", |h| {
        h.pct.counters.sct_timeouts
    }),
    ("c_pct_cntrs", "retry_srb_requests", |h| {
        h.pct.counters.retry_srb_requests
    }),
    ("c_pct_cntrs", "rsp_dropped_inactive", |h| {
        h.pct.counters.rsp_dropped_inactive
    }),
    ("c_ixe_cntrs", "rx_pkt_drop_pct", |h| {
        h.counters.rx_pkt_drop_pct
    }),
    ("c_ixe_cntrs", "rx_ptl_connmgmt_pkt", |h| {
        h.counters.rx_ptl_connmgmt_pkt
    }),
    ("c_ixe_cntrs", "rx_ptl_restricted_pkt", |h| {
        h.counters.rx_ptl_restricted_pkt
    }),
    // Every RMU rejection is answered with a NACK in this model ("with response").
    ("c_ixe_cntrs", "rx_pkt_drop_rmu_wrsp", |h| {
        h.rmu.counters.ptl_invld_vni_cntr + h.rmu.counters.ptl_no_ptlte_cntr
    }),
    ("c_hni_cntrs", "tx_ok_opt", |h| h.counters.tx_ok_opt),
    ("c_hni_cntrs", "rx_ok_opt", |h| h.counters.rx_ok_opt),
    ("c_hni_cntrs", "rx_bad_opt", |h| h.counters.rx_bad_opt),
    // LPE drops by reason (lpe/counters.rs).
    ("c_lpe_cntrs", "err_pt_disabled_eq_full", |h| {
        h.lpe.counters().err_pt_disabled_eq_full
    }),
    ("c_lpe_cntrs", "err_pt_disabled_req_empty", |h| {
        h.lpe.counters().err_pt_disabled_req_empty
    }),
    (
        "c_lpe_cntrs",
        "err_pt_disabled_cant_alloc_unexpected",
        |h| h.lpe.counters().err_pt_disabled_cant_alloc_unexpected,
    ),
    ("c_lpe_cntrs", "err_pt_disabled_no_match_in_overflow", |h| {
        h.lpe.counters().err_pt_disabled_no_match_in_overflow
    }),
    ("c_lpe_cntrs", "err_entry_not_found_eq_full", |h| {
        h.lpe.counters().err_entry_not_found_eq_full
    }),
    ("c_lpe_cntrs", "err_entry_not_found_req_empty", |h| {
        h.lpe.counters().err_entry_not_found_req_empty
    }),
    (
        "c_lpe_cntrs",
        "err_entry_not_found_no_match_in_overflow",
        |h| h.lpe.counters().err_entry_not_found_no_match_in_overflow,
    ),
    (
        "c_lpe_cntrs",
        "err_entry_not_found_cant_alloc_unexpected",
        |h| h.lpe.counters().err_entry_not_found_cant_alloc_unexpected,
    ),
    ("c_lpe_cntrs", "err_no_space_net", |h| {
        h.lpe.counters().err_no_space_net
    }),
    ("c_lpe_cntrs", "err_restricted_unicast", |h| {
        h.lpe.counters().err_restricted_unicast
    }),
];

type ArrayGetter = fn(&CounterView<'_>, usize) -> u64;

/// (view, counter array name, value of element `i`) of the counter arrays software can
/// read: one 64-bit counter per element, element `i` at the array's offset + 8·i.
pub(crate) const COUNTER_ARRAYS: &[(&str, &str, ArrayGetter)] = &[
    ("c_hni_cntrs", "pkts_sent_by_tc", |h, i| {
        h.counters.pkts_sent_by_tc.get(i).copied().unwrap_or(0)
    }),
    ("c_hni_cntrs", "pkts_recv_by_tc", |h, i| {
        h.counters.pkts_recv_by_tc.get(i).copied().unwrap_or(0)
    }),
];

/// CSR-region offset of counter `name` of view `view`.
pub(crate) fn offset_of(view: &str, name: &str) -> Option<u64> {
    let v = csr::lookup(view)?;
    let f = v.field(name)?;
    Some(v.offset + u64::from(f.bit / 8))
}

/// CSR-region offset and width in bits of counter (array) `name` of view `view`.
fn span_of(view: &str, name: &str) -> Option<(u64, u32)> {
    let v = csr::lookup(view)?;
    let f = v.field(name)?;
    Some((v.offset + u64::from(f.bit / 8), f.width))
}

/// If entry `entry` of `c` is a counter slot named in [`COUNTERS`] or
/// [`COUNTER_ARRAYS`], put its value into `image`.
pub(crate) fn reflect(nic: &CounterView<'_>, c: &'static Csr, entry: u32, image: &mut [u8]) {
    if !c.name.ends_with("_sts_event_cnts") || image.len() < 8 {
        return;
    }
    let off = c.offset + u64::from(entry) * u64::from(c.size);
    for (view, name, get) in COUNTERS {
        if offset_of(view, name) == Some(off) {
            image[..8].copy_from_slice(&get(nic).to_le_bytes());
            return;
        }
    }
    for (view, name, get) in COUNTER_ARRAYS {
        let Some((base, bits)) = span_of(view, name) else {
            continue;
        };
        if off >= base && off < base + u64::from(bits / 8) {
            let i = ((off - base) / 8) as usize;
            image[..8].copy_from_slice(&get(nic, i).to_le_bytes());
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_name_is_public_and_lies_in_an_event_counter_array() {
        for (view, name, _) in COUNTER_ARRAYS {
            let (off, bits) = span_of(view, name).unwrap_or_else(|| panic!("{view}.{name}"));
            assert_eq!(bits % 64, 0, "{view}.{name} is an array of 64-bit counters");
            let hit = csr::at_offset(csr::Generation::Cassini1, off + u64::from(bits / 8) - 8)
                .unwrap_or_else(|| panic!("{view}.{name} at {off:#x}"));
            assert!(hit.csr.name.ends_with("_sts_event_cnts"), "{view}.{name}");
        }
        for (view, name, _) in COUNTERS {
            let off = offset_of(view, name).unwrap_or_else(|| panic!("{view}.{name}"));
            let hit = csr::at_offset(csr::Generation::Cassini1, off)
                .unwrap_or_else(|| panic!("{view}.{name} at {off:#x}"));
            assert!(
                hit.csr.name.ends_with("_sts_event_cnts"),
                "{view}.{name} is in {}",
                hit.csr.name
            );
        }
    }
}
