//! The driver's view of the target: the portal table (`c_lpe_cfg_ptl_table`: PtlTE options
//! and state written, state and list status read back), the rendezvous Get settings
//! (`c_lpe_cfg_get_ctrl`), the list-entry pools (`c_lpe_cfg_pe_le_pools`,
//! `c_lpe_cfg_pe_le_shared`) and the list-entry RAM (`c_lpe_sts_list_entries`).

use firmware_spec::cassini::csr;
use firmware_spec::cassini::le::{PtAllocOpts, PtlList, PtlteState};

use crate::block::GetCtrl;
use crate::csr::CsrFile;
use crate::lpe::{
    Lpe, PE_LE_MAX, POOLS_PER_PE, PeLimits, PoolLimits, PtlteConfig, UnexpectedHeader,
};

use super::state::Tgt;

/// The PtlTE options of a `c_lpe_cfg_ptl_table` entry as `cxi_pt_alloc_opts` bits.
fn pt_options(csrs: &CsrFile, n: u32) -> PtlteConfig {
    use csr::fields::c_lpe_cfg_ptl_table as f;
    let c = csr::C_LPE_CFG_PTL_TABLE;
    let g = |fld| csrs.field(c, n, fld) != 0;
    let mut o = PtAllocOpts::empty();
    let map = [
        (f::CLR_REMOTE_OFFSET, PtAllocOpts::CLR_REMOTE_OFFSET),
        (f::EN_FLOWCTRL, PtAllocOpts::EN_FLOWCTRL),
        (f::USE_LONG_EVENT, PtAllocOpts::USE_LONG_EVENT),
        (f::LOSSLESS, PtAllocOpts::LOSSLESS),
        (f::EN_EVENT_MATCH, PtAllocOpts::EN_EVENT_MATCH),
        (
            f::EN_RESTRICTED_UNICAST_LM,
            PtAllocOpts::EN_RESTRICTED_UNICAST_LM,
        ),
        (f::USE_LOGICAL, PtAllocOpts::USE_LOGICAL),
        (f::IS_MATCHING, PtAllocOpts::IS_MATCHING),
        (f::DO_SPACE_CHECK, PtAllocOpts::DO_SPACE_CHECK),
        (f::EN_ALIGN_LM, PtAllocOpts::EN_ALIGN_LM),
        (f::EN_MATCH_ON_VNI, PtAllocOpts::EN_MATCH_ON_VNI),
        (f::EN_SW_HW_ST_CHNG, PtAllocOpts::EN_SW_HW_ST_CHNG),
        (f::SIGNAL_INVALID, PtAllocOpts::SIGNAL_INVALID),
        (f::SIGNAL_UNDERFLOW, PtAllocOpts::SIGNAL_UNDERFLOW),
        (f::SIGNAL_OVERFLOW, PtAllocOpts::SIGNAL_OVERFLOW),
        (f::SIGNAL_INEXACT, PtAllocOpts::SIGNAL_INEXACT),
    ];
    for (fld, opt) in map {
        o = o.with(opt, g(fld));
    }
    PtlteConfig {
        options: o,
        eq: csrs.field(c, n, f::EQ_HANDLE) as u16,
        pe: csrs.field(c, n, f::PE_NUM) as u8,
        le_pool: csrs.field(c, n, f::LE_POOL) as u8,
        cntr_pool: csrs.field(c, n, f::CNTR_POOL) as u8,
    }
}

/// `c_lpe_cfg_ptl_table[n]` was written (docs/cassini-programming.md, "PtlTE table writes").
pub(crate) fn ptl_table_written(lpe: &mut Lpe, csrs: &CsrFile, n: u32, state_written: bool) {
    let Ok(pt) = u16::try_from(n) else {
        return;
    };
    let c = csr::C_LPE_CFG_PTL_TABLE;
    let raw = csrs.field(c, n, csr::fields::c_lpe_cfg_ptl_table::PTL_STATE) as u8;
    let Ok(state) = PtlteState::try_from(raw) else {
        return;
    };
    let cfg = pt_options(csrs, n);
    let current = lpe.state(pt);
    if !state_written {
        // Only the options changed; the state field holds whatever software last wrote.
        if current.is_some() {
            let _ = lpe.update_config(pt, cfg);
        }
        return;
    }
    // Errors below (index 0, bad pool) leave the PtlTE as it was: the driver sees the state it
    // reads back.
    match (state, current) {
        (PtlteState::Reset, Some(_)) => {
            let _ = lpe.free(pt);
        }
        (PtlteState::Reset, None) => {}
        (_, None) => {
            if lpe.configure(pt, cfg).is_ok() && state != PtlteState::Disabled {
                let _ = lpe.force_state(pt, state);
            }
        }
        (s, Some(cur)) => {
            let _ = lpe.update_config(pt, cfg);
            if s != cur {
                if s == PtlteState::SoftwareManaged && cur == PtlteState::Disabled {
                    // `cxil_pte_transition_sm`: the write carries the drop count software
                    // checked, and the NIC takes it only if no drop came in since, checked
                    // here, between two packets. A drop in between leaves the PtlTE
                    // DISABLED (the driver reads that back: -EAGAIN) so that its sender's
                    // report is still awaited; comparing with the live count would let
                    // that drop be forgotten.
                    let written = csrs.field(c, n, csr::fields::c_lpe_cfg_ptl_table::DROP_COUNT);
                    let _ = lpe.transition_sm(pt, written as u32);
                } else {
                    let _ = lpe.force_state(pt, s);
                }
            }
        }
    }
}

/// Patch the hardware-owned fields of `c_lpe_cfg_ptl_table[n]` with the model's state.
pub(crate) fn reflect_ptl_table(lpe: &Lpe, n: u32, image: &mut [u8]) {
    use csr::fields::c_lpe_cfg_ptl_table as f;
    let Ok(pt) = u16::try_from(n) else {
        return;
    };
    let state = lpe.state(pt).unwrap_or(PtlteState::Reset);
    f::PTL_STATE.set(image, u64::from(u8::from(state)));
    f::DROP_COUNT.set(image, u64::from(lpe.drop_count(pt).unwrap_or(0)));
    f::PRIO_LIST_VLD.set(image, u64::from(lpe.list_len(pt, PtlList::Priority) > 0));
    f::OVF_LIST_VLD.set(image, u64::from(lpe.list_len(pt, PtlList::Overflow) > 0));
    f::SWREQ_LIST_VLD.set(image, u64::from(lpe.list_len(pt, PtlList::Request) > 0));
    f::UNEXP_LIST_VLD.set(image, u64::from(lpe.list_len(pt, PtlList::Unexpected) > 0));
    // The UNEXPECTED list in the PE's list-entry RAM (`c_lpe_sts_list_entries`, read as
    // `c_ule_entry` by `cxil_pte_status`), in the layout of `Lpe::ule_ram_span`.
    let (head, tail) = lpe.ule_ram_span(pt).unwrap_or((0, 0));
    f::UNEXP_HEAD.set(image, u64::from(head));
    f::UNEXP_TAIL.set(image, u64::from(tail));
    f::PRIO_APPEND_DISABLED.set(image, u64::from(lpe.append_disabled(pt, PtlList::Priority)));
    f::OVF_APPEND_DISABLED.set(image, u64::from(lpe.append_disabled(pt, PtlList::Overflow)));
}

/// `c_lpe_cfg_get_ctrl` was written: where the NIC sends the Gets of rendezvous puts, and
/// whether it issues them (`get_en`).
pub(crate) fn get_ctrl_written(tgt: &mut Tgt, lpe: &mut Lpe, csrs: &CsrFile) {
    use csr::fields::c_lpe_cfg_get_ctrl as f;
    let g = |fld| csrs.field(csr::C_LPE_CFG_GET_CTRL, 0, fld);
    tgt.rdzv_get = GetCtrl {
        index: (g(f::GET_INDEX) & 0xFFF) as u16,
        index_ext: (g(f::GET_INDEX_EXT) & 0x1F) as u8,
        transaction_type: (g(f::TRANSACTION_TYPE) & 0xF) as u8,
    };
    lpe.set_rdzv_get_en(g(f::GET_EN) != 0);
}

/// `c_lpe_cfg_pe_le_pools[n]` was written: the list-entry limits of pool `n % POOLS_PER_PE`
/// of PE `n / POOLS_PER_PE`.
pub(crate) fn le_pool_written(lpe: &mut Lpe, csrs: &CsrFile, n: u32) {
    use csr::fields::c_lpe_cfg_pe_le_pools as f;
    let c = csr::C_LPE_CFG_PE_LE_POOLS;
    let limits = PoolLimits {
        num_reserved: csrs.field(c, n, f::NUM_RESERVED) as u32,
        max_alloc: csrs.field(c, n, f::MAX_ALLOC) as u32,
    };
    let per_pe = POOLS_PER_PE as u32;
    let _ = lpe.set_pool_limits((n / per_pe) as u8, (n % per_pe) as u8, limits);
}

/// `c_lpe_cfg_pe_le_shared[n]` was written: PE `n`'s shared and total list entries.
pub(crate) fn le_shared_written(lpe: &mut Lpe, csrs: &CsrFile, n: u32) {
    use csr::fields::c_lpe_cfg_pe_le_shared as f;
    let c = csr::C_LPE_CFG_PE_LE_SHARED;
    let limits = PeLimits {
        num_shared: csrs.field(c, n, f::NUM_SHARED) as u32,
        num_total: csrs.field(c, n, f::NUM_TOTAL) as u32,
    };
    let _ = lpe.set_pe_limits(n as u8, limits);
}

/// `c_lpe_cfg_pe_le_shared[entry]` read: the PE's pool usage. (`c_lpe_cfg_get_ctrl` reads
/// back what software wrote: its reset value before that, while the device uses the
/// defaults of [`GetCtrl`] and its configuration's `rdzv_get_en`.)
pub(crate) fn reflect_le_shared(lpe: &Lpe, entry: u32, image: &mut [u8]) {
    use csr::fields::c_lpe_cfg_pe_le_shared as f;
    let (shared, total) = lpe.pe_usage(entry as u8);
    f::NUM_SHARED_ALLOCATED.set(image, u64::from(shared));
    f::NUM_TOTAL_ALLOCATED.set(image, u64::from(total));
}

/// `c_lpe_sts_pe_le_alloc[entry]` read (entry `pe * POOLS_PER_PE + pool`): LEs and
/// unexpected headers the pool holds.
pub(crate) fn reflect_le_alloc(lpe: &Lpe, entry: u32, image: &mut [u8]) {
    let per = POOLS_PER_PE as u32;
    let (pe, pool) = ((entry / per) as u8, (entry % per) as u8);
    let used = lpe.pool_usage(pe, pool).allocated;
    csr::fields::c_lpe_sts_pe_le_alloc::NUM_ALLOCATED.set(image, u64::from(used));
}

/// `c_lpe_sts_list_entries[entry]` read (entry `pe * LES_PER_PE + addr`): presented as a
/// `c_ule_entry` when an unexpected header sits there (LEs are not reflected).
pub(crate) fn reflect_list_entry(lpe: &Lpe, entry: u32, image: &mut [u8]) {
    let (pe, addr) = ((entry / PE_LE_MAX) as u8, entry % PE_LE_MAX);
    if let Some((ule, next)) = lpe.ule_ram_entry(pe, addr) {
        write_ule_entry(&ule, next, image);
    }
}

/// Fill a `c_lpe_sts_list_entries` image with unexpected header `ule` in the `c_ule_entry`
/// view (csr_defs.json); `next` is the `addr` link. The opcode, DSCP, traffic class and
/// restricted bits are not modelled and stay 0.
fn write_ule_entry(ule: &UnexpectedHeader, next: u32, image: &mut [u8]) {
    use csr::fields::c_ule_entry as u;
    if image.len() < 48 {
        return;
    }
    if let Some(r) = ule.rendezvous {
        u::USE_OFFSET_FOR_GET.set(image, u64::from(r.use_offset_for_get));
        u::RENDEZVOUS_ID.set(image, u64::from(r.rendezvous_id));
        u::SFA_NID.set(image, u64::from(r.source_nid));
    }
    u::VNI.set(image, u64::from(ule.vni));
    u::HDR_DATA.set(image, ule.header_data);
    u::MATCH_BITS.set(image, ule.match_bits);
    u::INITIATOR.set(image, u64::from(ule.initiator));
    u::START_OR_OFFSET.set(image, ule.start_or_offset());
    u::MLENGTH.set(image, ule.mlength);
    u::REQUEST_LEN.set(image, ule.rlength);
    u::ADDR.set(image, u64::from(next));
    u::VLD.set(image, 1);
}
