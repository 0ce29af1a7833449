//! The vocabulary the hardware blocks share: how a command ended ([`Exec`], [`Fail`]),
//! which event-queue reserve an event may use ([`EventClass`]), the rendezvous Get settings
//! ([`GetCtrl`]) and the NIC-wide counters no block owns ([`Counters`]). A leaf: it imports
//! no other module of the crate, so every block can use it without importing another block.

use firmware_spec::cassini::layout::FormatError;
use firmware_spec::cassini::rc::ReturnCode;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exec {
    /// Go on with the next command.
    Next,
    /// A CQ FENCE is waiting for earlier commands: stop after this one.
    Fence,
    /// The command cannot run yet: stop before it (it runs again later).
    Stall,
}

/// A command failure: its return code (COMMAND_FAILURE, `c_cq_status.return_code`).
pub(crate) type Fail = ReturnCode;

/// The failure of a command that does not decode: ILLEGAL_OP for a command this model does
/// not know, CMD_INVALID_ARG for a malformed one.
pub(crate) fn format_rc(e: &FormatError) -> Fail {
    match e {
        FormatError::UnsupportedCommand { .. } => ReturnCode::IllegalOp,
        _ => ReturnCode::CmdInvalidArg,
    }
}

/// Which reserve an event may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventClass {
    /// A network receive event (target communication events): it must leave the
    /// `reserved_fc` slots free.
    Receive,
    /// Anything else (initiator, LINK/UNLINK/SEARCH, state change, command failure).
    Other,
}

/// Where the NIC sends the Gets of rendezvous puts (`c_lpe_cfg_get_ctrl`, cassini.md §6):
/// endpoint `index` + the source PID, `index_ext`, and the `transaction_type` put in the
/// Get's match bits. `get_en` is the LPE's `rdzv_get_en`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GetCtrl {
    pub(crate) index: u16,
    pub(crate) index_ext: u8,
    pub(crate) transaction_type: u8,
}

impl Default for GetCtrl {
    /// What the cxi driver programs with the default `pid_bits` 9: index `rdzv_get_idx` 255
    /// of the PID granule (`cxi_build_dfa`: endpoint (255 >> 5) << 9, index_ext 255 & 31),
    /// transaction type 0xF.
    fn default() -> Self {
        GetCtrl {
            index: (255 >> 5) << 9,
            index_ext: 0x1F,
            transaction_type: 0xF,
        }
    }
}

/// Counters of the CQ block (`c_cq_cntrs`) and a few IXE/OXE ones that have no block of their
/// own in this model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub(crate) success_tx_cntr: u64,
    pub(crate) success_tgt_cntr: u64,
    pub(crate) fail_tx_cntr: u64,
    pub(crate) fail_tgt_cntr: u64,
    pub(crate) wr_ptr_updt_err_cntr: u64,
    pub(crate) num_txq_cmd_reads: u64,
    pub(crate) num_tgq_cmd_reads: u64,
    pub(crate) num_tx_cmd_align_errors: u64,
    pub(crate) num_tx_cmd_op_errors: u64,
    pub(crate) num_tx_cmd_arg_errors: u64,
    pub(crate) num_tgt_cmd_arg_errors: u64,
    /// Commands naming an EQ, CT or PtlTE of another resource group.
    pub(crate) num_tx_cmd_perm_errors: u64,
    pub(crate) num_tgt_cmd_perm_errors: u64,
    pub(crate) num_idc_cmds: u64,
    pub(crate) num_dma_cmds: u64,
    pub(crate) num_cq_cmds: u64,
    pub(crate) num_tgt_cmds: u64,
    pub(crate) num_ll_ops_received: u64,
    pub(crate) num_ll_ops_successful: u64,
    /// IXE: packets whose DFA names another NIC.
    pub(crate) port_dfa_mismatch: u64,
    /// IXE: packets that could not be parsed (or failed their CRC).
    pub(crate) rx_unrecognized_pkt: u64,
    pub(crate) rx_ptl_unrestricted_pkt: u64,
    pub(crate) rx_ptl_smallmsg_pkt: u64,
    pub(crate) rx_ptl_continuation_pkt: u64,
    pub(crate) rx_ptl_response_pkt: u64,
    pub(crate) rx_ptl_msgs: u64,
    pub(crate) rx_ptl_multi_msgs: u64,
    /// OXE: messages and packets sent.
    pub(crate) ptl_tx_put_msgs: u64,
    pub(crate) ptl_tx_get_msgs: u64,
    pub(crate) ptl_tx_put_pkts: u64,
    /// OXE: local translation errors.
    pub(crate) err_no_translation: u64,
    pub(crate) err_invalid_ac: u64,
    pub(crate) err_page_perm: u64,
    /// IXE: packets dropped by the PCT (duplicates, stale or out-of-window sequence numbers).
    pub(crate) rx_pkt_drop_pct: u64,
    /// IXE: PCT connection-management frames (standalone acknowledgements and NACKs).
    pub(crate) rx_ptl_connmgmt_pkt: u64,
    /// IXE: restricted (unsequenced) request packets.
    pub(crate) rx_ptl_restricted_pkt: u64,
    /// HNI: frames sent (all good: the model never poisons a frame).
    pub(crate) tx_ok_opt: u64,
    /// HNI: frames received with a good CRC.
    pub(crate) rx_ok_opt: u64,
    /// HNI: frames received with a bad CRC (dropped at the port).
    pub(crate) rx_bad_opt: u64,
    /// HNI: frames sent, by traffic class.
    pub(crate) pkts_sent_by_tc: [u64; 8],
    /// HNI: good frames received, by traffic class.
    pub(crate) pkts_recv_by_tc: [u64; 8],
}
