//! Target CQ commands: list-entry operations and PtlTE state changes
//! (`cassini_user_defs.h` `c_target_cmd`, `c_set_state_cmd`; `cxi_prov_hw.h`
//! `cxi_cq_emit_target`, `cxi_target_cmd_setopts`; cassini.md §2.2, §4). Always 64 B,
//! `cmd_type = CQ`.

use super::cmd_header::{CmdSize, CmdType, TgtOp};
use super::layout::layout;
use super::le::{LeFlags, PtlList, PtlteState};

layout! {
    /// `struct c_target_cmd` (64 B): APPEND / SEARCH / SEARCH_AND_DELETE / UNLINK.
    pub struct TargetCmd("c_target_cmd", 64) {
        /// `opcode`: `Append`, `Search`, `SearchAndDelete` or `Unlink`.
        opcode[4:4]: TgtOp,
        /// `ptl_list` (UNEXPECTED only for the searches).
        ptl_list[8:2]: PtlList,
        /// `ptlte_index`.
        ptlte_index[16:11]: u16,
        /// `event_ct_bytes`@32 .. `op_put`@46 in `C_LE_*` bit order (`C_LE_EVENT_CT_BYTES`
        /// .. `C_LE_OP_PUT`); `C_LE_RESTART_SEQ` is [`TargetCmd::restart_seq`].
        flags[32:15]: LeFlags,
        /// `ct`.
        ct[48:11]: u16,
        /// `buffer_id`: software tag echoed in events.
        buffer_id[64:16]: u16,
        /// `lac` of `start`.
        lac[80:3]: u8,
        /// `restart_seq`.
        restart_seq[88:1]: bool,
        /// `start`: buffer IOVA (57 bits).
        start[128:57]: u64,
        /// `length` (56 bits).
        length[192:56]: u64,
        /// `min_free` (24 bits, scaled by `min_free_shift`).
        min_free[256:24]: u32,
        /// `match_id`: initiator to match (`CXI_MATCH_ID_ANY` for any).
        match_id[288:32]: u32,
        /// `match_bits`.
        match_bits[320:64]: u64,
        /// `ignore_bits`.
        ignore_bits[384:64]: u64,
    }
    consts { cmd_type[0:2] = CmdType::Cq as u8, cmd_size[2:2] = CmdSize::B64 as u8 }
    derived {}
}

impl TargetCmd {
    /// The full `C_LE_*` option word: [`TargetCmd::flags`] plus `C_LE_RESTART_SEQ` from
    /// [`TargetCmd::restart_seq`].
    pub fn opts(&self) -> LeFlags {
        LeFlags(self.flags.bits() & 0x7FFF).with(LeFlags::RESTART_SEQ, self.restart_seq)
    }

    /// Set every option from a `C_LE_*` word (`cxi_target_cmd_setopts`, but also clearing
    /// the options not given).
    pub fn set_opts(&mut self, opts: LeFlags) {
        self.flags = LeFlags(opts.bits() & 0x7FFF);
        self.restart_seq = opts.contains(LeFlags::RESTART_SEQ);
    }
}

layout! {
    /// `struct c_set_state_cmd` (64 B): SETSTATE of a PtlTE.
    pub struct SetStateCmd("c_set_state_cmd", 64) {
        /// `ptlte_state`: the requested state.
        ptlte_state[8:3]: PtlteState,
        /// `ptlte_index`.
        ptlte_index[16:11]: u16,
        /// `current_addr` (57 bits).
        current_addr[64:57]: u64,
        /// `drop_count` (24 bits): must equal the PtlTE's drop count (else NO_MATCH).
        drop_count[128:24]: u32,
    }
    consts {
        cmd_type[0:2] = CmdType::Cq as u8,
        cmd_size[2:2] = CmdSize::B64 as u8,
        opcode[4:4] = TgtOp::Setstate as u8,
    }
    derived {}
}
