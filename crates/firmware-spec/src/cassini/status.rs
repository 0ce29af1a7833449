//! Status write-back blocks, software-state words, doorbells and ring geometry of CQs, EQs
//! and CTs (`cassini_user_defs.h` `c_cq_status`, `c_cmdq`, `c_eq_status`,
//! `c_ct_writeback`; csr_defs.json `c_ee_cfg_eq_sw_state`; `cxi_prov_hw.h` ring constants
//! and accessors; cassini.md §1.4, §3.1, §5).

use super::cmd::{CmdHeader, CmdSize};
use super::layout::layout;
use super::rc::ReturnCode;

// ---------------------------------------------------------------------------------------
// Command queues
// ---------------------------------------------------------------------------------------

/// `C_CQ_CMD_SIZE` (`cxi_prov_hw.h`): a CQ ring slot is 64 bytes (hardware granularity).
pub const C_CQ_CMD_SIZE: usize = 64;
/// Software tracks the ring in 32-byte half-slots (`wp32`).
pub const C_CQ_HALF_SLOT: usize = 32;
/// `C_CQ_FIRST_WR_PTR` (`cxi_prov_hw.h`): first command slot; slots 0..3 (256 B) hold the
/// status write-back, and the write pointer wraps back here, not to 0.
pub const C_CQ_FIRST_WR_PTR: u64 = 4;
/// `C_CQ_FIRST_WR_PTR_32`: [`C_CQ_FIRST_WR_PTR`] in half-slots.
pub const C_CQ_FIRST_WR_PTR_32: u64 = 2 * C_CQ_FIRST_WR_PTR;
/// Software re-reads the written-back `rd_ptr` only when its cached free space drops below
/// this many half-slots (`__cxi_cq_free_slots`).
pub const CQ_RD_PTR_REFRESH_SLOTS32: u64 = 16;

/// `C_CQ_LAUNCH_PAGE_SIZE` (`cassini_user_defs.h`): BAR0 stride of CQ launch pages.
pub const C_CQ_LAUNCH_PAGE_SIZE: usize = 0x10000;
/// `struct c_cmdq` `wr_ptr` offset in the launch page: the doorbell, a 64-bit store of the
/// write pointer in 64 B slots.
pub const CQ_LAUNCH_WR_PTR: usize = 0x000;
/// `struct c_cmdq` `ll_wr64a0123[128]`: low-latency window for 64 B commands.
pub const CQ_LAUNCH_LL_64: usize = 0x400;
/// `struct c_cmdq` `ll_wr128a02[128]`: low-latency window for 128 B-aligned 128 B commands.
pub const CQ_LAUNCH_LL_128A: usize = 0x800;
/// `struct c_cmdq` `ll_wr128a13[128]`: low-latency window for 128 B commands that start on
/// an odd 64 B slot (after two 32 B NOOPs).
pub const CQ_LAUNCH_LL_128U: usize = 0xC00;
/// Size of each low-latency window (128 qwords).
pub const CQ_LAUNCH_LL_WINDOW: usize = 0x400;
/// Size of `struct c_cmdq`.
pub const CQ_LAUNCH_LEN: usize = 0x1000;

/// `LL_OFFSET(wp32)` (`cxi_prov_hw.h`): offset inside a low-latency window where the command
/// at half-slot `wp32` is copied: `((wp32 / 2) & 0xF) * 64`.
pub const fn ll_offset(wp32: u64) -> usize {
    (((wp32 / 2) & 0xF) * 64) as usize
}

/// `__cxi_pad_slots[wp32 % 8][size]` (`cxi_prov_hw.h`): 32 B NOOP half-slots needed before a
/// command of `size` at half-slot `wp32` so it is naturally aligned in the ring.
pub const fn pad_slots32(wp32: u64, size: CmdSize) -> u64 {
    let n = size.slots32() as u64;
    (n - wp32 % n) % n
}

/// Bytes of a ring of `count` 64 B slots.
pub const fn cq_ring_bytes(count: usize) -> usize {
    count * C_CQ_CMD_SIZE
}

layout! {
    /// `struct c_cq_status` (8 B) at byte 0 of every CQ ring, written back by hardware.
    pub struct CqStatus("c_cq_status", 8) {
        /// `rd_ptr`: hardware read pointer in 64 B slots.
        rd_ptr[0:16]: u16,
        /// `num_write_cmds_rejected`.
        num_write_cmds_rejected[16:16]: u16,
        /// `fail_command`: the `c_cmd` byte of the failed command.
        fail_command[32:8]: CmdHeader,
        /// `return_code` (6 bits); libcxi initialises it to `C_RC_OK`.
        return_code[48:6]: ReturnCode,
        /// `fail_loc_32`: the failure was in the second 32 B half.
        fail_loc_32[61:1]: bool,
        /// `fail_ll`: a low-latency write failed.
        fail_ll[62:1]: bool,
        /// `ll_disabled`: low-latency writes are disabled.
        ll_disabled[63:1]: bool,
    }
    consts {}
    derived {}
}

// ---------------------------------------------------------------------------------------
// Event queues
// ---------------------------------------------------------------------------------------

/// `C_EE_CFG_ECB_SIZE` (`cxi_prov_hw.h`): event-combining buffer size; also the EQ status
/// block size, the offset of the first event, and the unit of `rd_ptr` / `wr_ptr`.
pub const C_EE_CFG_ECB_SIZE: usize = 64;
/// Byte offset of the first event in an EQ ring; events wrap back here.
pub const EQ_FIRST_EVENT_OFFSET: usize = C_EE_CFG_ECB_SIZE;
/// `C_EQ_RESERVED_EVENT_SLOTS` (`cxi_prov_hw.h`): 64 B slots hardware reserves (the status
/// slot and one for overrun detection).
pub const C_EQ_RESERVED_EVENT_SLOTS: usize = 2;
/// `C_EE_SW_STATE_PAGE_SIZE` (`cassini_user_defs.h`): BAR0 stride of EE software-state
/// pages; the 64-bit `c_ee_cfg_eq_sw_state` is at offset 0.
pub const C_EE_SW_STATE_PAGE_SIZE: usize = 0x10000;

layout! {
    /// `struct c_eq_status` (64 B) at byte 0 of every EQ ring. Torn-read protocol: re-read
    /// until `timestamp_* == timestamp_*_cpy` (`cxi_eq_get_status`).
    pub struct EqStatus("c_eq_status", 64) {
        /// `timestamp_ns_cpy` (30 bits).
        timestamp_ns_cpy[0:30]: u32,
        /// `timestamp_sec_cpy` (48 bits).
        timestamp_sec_cpy[64:48]: u64,
        /// `thld_sts`: the write-back was caused by a fill threshold.
        thld_sts[112:1]: bool,
        /// `thld_id`: which threshold (0..3).
        thld_id[116:2]: u8,
        /// `unackd_dropped_event`: events dropped since the last drop acknowledgement.
        unackd_dropped_event[120:1]: bool,
        /// `event_drop_seq_no`.
        event_drop_seq_no[124:1]: bool,
        /// `event_slots_free` (26 bits, 64 B slots).
        event_slots_free[128:26]: u32,
        /// `event_slots_rsrvd` (26 bits).
        event_slots_rsrvd[160:26]: u32,
        /// `wr_ptr` (26 bits, 64 B units).
        wr_ptr[192:26]: u32,
        /// `using_buffer_b`.
        using_buffer_b[224:1]: bool,
        /// `timestamp_ns` (30 bits).
        timestamp_ns[416:30]: u32,
        /// `timestamp_sec` (48 bits).
        timestamp_sec[448:48]: u64,
    }
    consts {}
    derived {}
}

impl EqStatus {
    /// Whether the copy timestamps match (the block was not torn).
    pub fn is_consistent(&self) -> bool {
        self.timestamp_ns == self.timestamp_ns_cpy && self.timestamp_sec == self.timestamp_sec_cpy
    }
}

layout! {
    /// `union c_ee_cfg_eq_sw_state` (8 B; csr_defs.json): the EQ software state software
    /// writes with one 64-bit store to its EE page.
    pub struct EqSwState("c_ee_cfg_eq_sw_state", 8) {
        /// `rd_ptr` (26 bits): read offset / 64.
        rd_ptr[0:26]: u32,
        /// `reading_buffer_b`.
        reading_buffer_b[31:1]: bool,
        /// `event_int_disable`.
        event_int_disable[32:1]: bool,
        /// `eq_sts_int_disable`.
        eq_sts_int_disable[33:1]: bool,
        /// `event_drop_seq_no`: copied from the status to acknowledge drops.
        event_drop_seq_no[40:1]: bool,
    }
    consts {}
    derived {}
}

impl EqSwState {
    /// As the 64-bit word stored to the EE page.
    pub fn to_u64(&self) -> u64 {
        u64::from_le_bytes(self.encode())
    }

    /// From the 64-bit word (reserved bits ignored).
    pub fn from_u64(qw: u64) -> Self {
        let b = qw.to_le_bytes();
        EqSwState {
            rd_ptr: crate::bits::get_bits(&b, 0, 26) as u32,
            reading_buffer_b: qw & (1 << 31) != 0,
            event_int_disable: qw & (1 << 32) != 0,
            eq_sts_int_disable: qw & (1 << 33) != 0,
            event_drop_seq_no: qw & (1 << 40) != 0,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Counting events
// ---------------------------------------------------------------------------------------

/// `C_TOU_LAUNCH_PAGE_SIZE` (`cassini_user_defs.h`): BAR0 stride of CT doorbell pages.
pub const C_TOU_LAUNCH_PAGE_SIZE: usize = 0x10000;
/// `CT_INC_SUCCESS_OFFSET`: doorbell store adds the value (48 bits) to the success count.
pub const CT_INC_SUCCESS_OFFSET: usize = 0;
/// `CT_INC_FAILURE_OFFSET`: doorbell store adds the value (7 bits) to the failure count.
pub const CT_INC_FAILURE_OFFSET: usize = 64;
/// `CT_RESET_SUCCESS_OFFSET`: doorbell store resets the success count to 0.
pub const CT_RESET_SUCCESS_OFFSET: usize = 128;
/// `CT_RESET_FAILURE_OFFSET`: doorbell store resets the failure count to 0.
pub const CT_RESET_FAILURE_OFFSET: usize = 192;
/// `CT_SUCCESS_MASK`: 48 bits.
pub const CT_SUCCESS_MASK: u64 = (1 << 48) - 1;
/// `CT_FAILURE_MASK`: 7 bits.
pub const CT_FAILURE_MASK: u64 = (1 << 7) - 1;

layout! {
    /// `struct c_ct_writeback` (8 B, 8-byte aligned in host memory): written back by the CT
    /// unit, with `ct_writeback` set on every write-back (software clears it).
    pub struct CtWriteback("c_ct_writeback", 8) {
        /// `ct_success` (48 bits).
        ct_success[0:48]: u64,
        /// `ct_failure` (7 bits).
        ct_failure[48:7]: u8,
        /// `ct_writeback`.
        ct_writeback[63:1]: bool,
    }
    consts {}
    derived {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_table_matches_cxi_pad_slots() {
        // __cxi_pad_slots[8][4] of cxi_prov_hw.h.
        let table: [[u64; 4]; 8] = [
            [0, 0, 0, 0],
            [0, 1, 3, 7],
            [0, 0, 2, 6],
            [0, 1, 1, 5],
            [0, 0, 0, 4],
            [0, 1, 3, 3],
            [0, 0, 2, 2],
            [0, 1, 1, 1],
        ];
        for (pos, row) in table.iter().enumerate() {
            for (s, want) in row.iter().enumerate() {
                let size = CmdSize::ALL[s];
                assert_eq!(pad_slots32(pos as u64 + 64, size), *want, "{pos} {s}");
            }
        }
    }

    #[test]
    fn launch_page() {
        assert_eq!(ll_offset(8), 4 * 64);
        assert_eq!(ll_offset(2 * 17), 64);
        assert_eq!(CQ_LAUNCH_LL_128U + CQ_LAUNCH_LL_WINDOW, CQ_LAUNCH_LEN);
    }

    #[test]
    fn sw_state_word() {
        let s = EqSwState {
            rd_ptr: 0x3FF_FFFF,
            reading_buffer_b: true,
            event_int_disable: false,
            eq_sts_int_disable: true,
            event_drop_seq_no: true,
        };
        let qw = s.to_u64();
        assert_eq!(qw, 0x3FF_FFFF | 1 << 31 | 1 << 33 | 1 << 40);
        assert_eq!(EqSwState::from_u64(qw), s);
    }
}
