//! The hardware vocabulary of the LPE: enums, flag words and limits from `firmware-spec`
//! (defined once there, from `cassini_user_defs.h`, `cxi_prov_hw.h`, `cxi-abi.h`), plus the
//! few LPE-specific constants no header names.

pub use firmware_spec::cassini::dfa::{
    C_NID_ANY as NID_ANY, C_PID_ANY as PID_ANY, C_RANK_ANY as RANK_ANY,
    CXI_MATCH_ID_ANY as MATCH_ID_ANY, PidBits, match_id, match_id_ep, match_id_pid,
};
pub use firmware_spec::cassini::event::EventType;
pub use firmware_spec::cassini::le::{LeFlags, PtAllocOpts, PtlList, PtlteState, ScReason};
pub use firmware_spec::cassini::rc::ReturnCode;

use firmware_spec::cassini::limits;

/// `C_EQ_NONE`: no event queue.
pub const EQ_NONE: u16 = limits::C_EQ_NONE;
/// `C_CT_NONE`: no counting event.
pub const CT_NONE: u16 = limits::C_CT_NONE;
/// `C_NUM_PTLTES`.
pub const NUM_PTLTES: usize = limits::C_NUM_PTLTES;
/// `C_PE_COUNT`: list processing engines.
pub const PE_COUNT: usize = limits::C_PE_COUNT;
/// LE pools per processing engine.
pub const POOLS_PER_PE: usize = limits::LE_POOLS_PER_PE;
/// List entries per processing engine (65,536 ME/ULE RAM entries / 4 PEs).
pub const PE_LE_MAX: u32 = limits::LES_PER_PE as u32;
/// Width mask of a PtlTE's drop counter (`c_lpe_cfg_ptl_table.drop_count`, 24 bits).
pub const DROP_COUNT_MASK: u32 = (1 << 24) - 1;
/// SETSTATE drop count that skips the check (`CXIP_PTE_IGNORE_DROPS` in libfabric).
pub const DROP_COUNT_IGNORE: u32 = DROP_COUNT_MASK;
/// Counter pools (`cntr_pool` of `c_lpe_cfg_ptl_table`, 2 bits).
pub const CNTR_POOLS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_the_lpe_relies_on() {
        assert_eq!(match_id(PidBits::DEFAULT, PID_ANY, RANK_ANY), MATCH_ID_ANY);
        assert_eq!(NID_ANY, 0xF_FFFF);
        assert_eq!(LeFlags::USE_ONCE.bits(), 0x400);
        assert_eq!(u8::from(ReturnCode::PtDisabled), 3);
        assert_eq!(u8::from(EventType::PutOverflow), 4);
        assert_eq!(u8::from(ScReason::FcUnexpectedFail), 2);
        assert_eq!(PE_LE_MAX as usize * PE_COUNT, 65_536);
        assert_eq!(PtAllocOpts::EN_FLOWCTRL.bits(), 1 << 2);
    }
}
