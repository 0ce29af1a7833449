//! AMOs (gemini.md §1.7): Gemini's first-generation 64-bit set only, posted with
//! [`crate::gni::Ep::post_fma`] and a descriptor of type `GNI_POST_AMO` whose `amo_cmd` is a
//! [`AmoCmd`] code. Fetching commands return the old value into `local_addr` (registered,
//! 8-byte aligned); the target must be 8-byte aligned. For CSWAP `first_operand` is the
//! compare value and `second_operand` the swap value; AX/FAX compute
//! `new = (old & first) ^ second`. Cached (`_C`) commands need
//! `GNI_CDM_MODE_CACHED_AMO_ENABLED`. The NIC side: a fetching AMO is a GET control word with
//! the AMO command, a non-fetching one an 8-byte store to a PUT window with the descriptor's
//! `command` set, operands in the scratch registers (docs/gemini-programming.md).

use firmware_spec::gemini::gni::{CdmMode, CqEventMode, PostType};
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::post::PostDescriptor;

pub use firmware_spec::gemini::amo::{AmoCmd, AmoOp};

use super::error::{GniError, Result};

/// Bytes of a Gemini AMO operand and result.
pub const AMO_SIZE: u64 = 8;

/// An AMO descriptor: `cmd` on the 8-byte word at `remote_addr`, the old value (fetching
/// commands) landing at `local_addr`. Completion: a GLOBAL event.
pub fn amo_desc(
    cmd: AmoCmd,
    local: Option<(u64, MemHandle)>,
    remote_addr: u64,
    remote_mem_hndl: MemHandle,
    first_operand: u64,
    second_operand: u64,
) -> PostDescriptor {
    let mut d = PostDescriptor::new(PostType::Amo);
    d.amo_cmd = cmd.code();
    if let Some((addr, h)) = local {
        d.local_addr = addr;
        d.local_mem_hndl = h;
    }
    d.remote_addr = remote_addr;
    d.remote_mem_hndl = remote_mem_hndl;
    d.length = AMO_SIZE;
    d.first_operand = first_operand;
    d.second_operand = second_operand;
    d.cq_mode = CqEventMode::GLOBAL_EVENT;
    d
}

/// `FADD`: add `value` to the remote word and fetch the old value into `local_addr`.
pub fn fetch_add(
    local_addr: u64,
    local_mem_hndl: MemHandle,
    remote_addr: u64,
    remote_mem_hndl: MemHandle,
    value: u64,
) -> PostDescriptor {
    amo_desc(
        AmoCmd::Fadd,
        Some((local_addr, local_mem_hndl)),
        remote_addr,
        remote_mem_hndl,
        value,
        0,
    )
}

/// `ADD`: add `value` to the remote word (no fetch).
pub fn add(remote_addr: u64, remote_mem_hndl: MemHandle, value: u64) -> PostDescriptor {
    amo_desc(AmoCmd::Add, None, remote_addr, remote_mem_hndl, value, 0)
}

/// `CSWAP`: if the remote word equals `compare`, store `swap`; the old value lands at
/// `local_addr`.
pub fn compare_swap(
    local_addr: u64,
    local_mem_hndl: MemHandle,
    remote_addr: u64,
    remote_mem_hndl: MemHandle,
    compare: u64,
    swap: u64,
) -> PostDescriptor {
    amo_desc(
        AmoCmd::Cswap,
        Some((local_addr, local_mem_hndl)),
        remote_addr,
        remote_mem_hndl,
        compare,
        swap,
    )
}

/// The checks `GNI_PostFma` makes on an AMO beyond [`PostDescriptor::check`]: a cached
/// command needs `GNI_CDM_MODE_CACHED_AMO_ENABLED`.
pub(crate) fn check_mode(desc: &PostDescriptor, modes: CdmMode) -> Result<()> {
    // Only an AMO's command matters: other posts may carry any value there (a program that
    // reuses descriptors leaves old ones).
    if desc.post_type.is_amo()
        && let Ok(cmd) = desc.amo()
        && cmd.is_cached()
        && !modes.contains(CdmMode::CACHED_AMO_ENABLED)
    {
        return Err(GniError::param(
            "cached AMOs need GNI_CDM_MODE_CACHED_AMO_ENABLED",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use firmware_spec::gemini::gni::ReturnCode;

    #[test]
    fn descriptors_pass_the_gemini_checks() {
        let h = MemHandle::default();
        let d = fetch_add(0x1000, h, 0x2008, h, 5);
        assert_eq!(d.amo_cmd, 0x008);
        assert_eq!(d.check(false, CdmMode::empty()), ReturnCode::Success);
        let mut bad = add(0x2004, h, 1);
        assert_eq!(
            bad.check(false, CdmMode::empty()),
            ReturnCode::AlignmentError
        );
        bad.remote_addr = 0x2000;
        bad.amo_cmd = AmoCmd::AddC.code();
        assert!(check_mode(&bad, CdmMode::empty()).is_err());
        assert!(check_mode(&bad, CdmMode::CACHED_AMO_ENABLED).is_ok());
        let c = compare_swap(0x1000, h, 0x2000, h, 1, 2);
        assert_eq!((c.first_operand, c.second_operand), (1, 2));
    }
}
