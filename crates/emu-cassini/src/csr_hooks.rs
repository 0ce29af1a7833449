//! CSR side effects: what the NIC does when software writes a CSR (the block that owns it
//! picks up the change) and which hardware-owned fields it patches into the image software
//! reads. One table, [`HOOKS`], a row per CSR that has an effect, sorted by CSR offset at
//! compile time and searched by binary search on every access; a CSR without a row is plain
//! storage, and a read of one shows the hardware counters it holds, if any
//! (`counters::reflect`). The functions a row names belong to the block that owns the
//! register; the rows only say which block answers.

use emu_core::engine::DeviceIo;
use firmware_spec::cassini::csr::{self, Csr, fields as f};

use crate::cq::CqOps;
use crate::csr::{CsrFile, Piece};
use crate::hw::Hw;
use crate::rmu::TcamList;
use crate::tables::RgidTable;
use crate::tgt;
use crate::tou::{self, TouOps};

/// A store landed in the CSR file: (NIC, CSR file, engine, the piece written, its bytes).
type OnWrite = fn(&mut Hw, &mut CsrFile, &mut DeviceIo<'_>, &Piece, &[u8]);
/// A load is about to read entry `entry`: patch the hardware-owned fields into `image`.
type OnRead = fn(&Hw, u32, &mut [u8]);

/// The effects of one CSR.
#[derive(Clone, Copy)]
struct Hook {
    csr: &'static Csr,
    write: Option<OnWrite>,
    read: Option<OnRead>,
}

/// A CSR whose writes have an effect.
const fn w(csr: &'static Csr, write: OnWrite) -> Hook {
    Hook {
        csr,
        write: Some(write),
        read: None,
    }
}

/// A CSR whose reads show hardware state.
const fn r(csr: &'static Csr, read: OnRead) -> Hook {
    Hook {
        csr,
        write: None,
        read: Some(read),
    }
}

/// A CSR with both.
const fn rw(csr: &'static Csr, write: OnWrite, read: OnRead) -> Hook {
    Hook {
        csr,
        write: Some(write),
        read: Some(read),
    }
}

/// `hooks` sorted by CSR offset (insertion sort: the table is small and sorted once, by the
/// compiler).
const fn by_offset<const N: usize>(mut hooks: [Hook; N]) -> [Hook; N] {
    let mut i = 1;
    while i < N {
        let mut j = i;
        while j > 0 && hooks[j - 1].csr.offset > hooks[j].csr.offset {
            let t = hooks[j - 1];
            hooks[j - 1] = hooks[j];
            hooks[j] = t;
            j -= 1;
        }
        i += 1;
    }
    hooks
}

/// Every CSR with a side effect, and the block function that carries it out.
#[rustfmt::skip]
static HOOKS: [Hook; 49] = by_offset([
    // ---- command queues (cq): enables, configuration, pointers ----
    rw(csr::C_CQ_TXQ_ENABLE,
        |hw, csrs, io, p, _| {
            let en = csrs.field(p.csr, p.entry, f::c_cq_txq_enable::TXQ_ENABLE) != 0;
            hw.cq_enable(csrs, io, false, p.entry, en);
        },
        |hw, n, image| {
            let (en, fence) = hw.cqs.tx_state(n);
            f::c_cq_txq_enable::TXQ_ENABLE.set(image, u64::from(en));
            f::c_cq_txq_enable::FENCE.set(image, u64::from(fence));
        }),
    rw(csr::C_CQ_TGQ_ENABLE,
        |hw, csrs, io, p, _| {
            let en = csrs.field(p.csr, p.entry, f::c_cq_tgq_enable::TGQ_ENABLE) != 0;
            hw.cq_enable(csrs, io, true, p.entry, en);
        },
        |hw, n, image| {
            let en = hw.cqs.tgt_enabled(n);
            f::c_cq_tgq_enable::TGQ_ENABLE.set(image, u64::from(en));
        }),
    w(csr::C_CQ_TXQ_BASE_TABLE, |hw, csrs, _, p, _| hw.cqs.config_written(csrs, false, p.entry)),
    w(csr::C_CQ_TXQ_TC_TABLE, |hw, csrs, _, p, _| hw.cqs.config_written(csrs, false, p.entry)),
    w(csr::C_CQ_TGQ_TABLE, |hw, csrs, _, p, _| hw.cqs.config_written(csrs, true, p.entry)),
    rw(csr::C_CQ_TXQ_WRPTR_TABLE,
        |hw, csrs, io, p, _| {
            let wr = csrs.field(p.csr, p.entry, f::c_cq_txq_wrptr_table::MEM_Q_WR_PTR);
            hw.doorbell(io, false, p.entry, wr);
        },
        |hw, n, image| {
            let (_, wr) = hw.cqs.pointers(false, n);
            f::c_cq_txq_wrptr_table::MEM_Q_WR_PTR.set(image, wr);
        }),
    rw(csr::C_CQ_TGQ_WRPTR_TABLE,
        |hw, csrs, io, p, _| {
            let wr = csrs.field(p.csr, p.entry, f::c_cq_tgq_wrptr_table::MEM_Q_WR_PTR);
            hw.doorbell(io, true, p.entry, wr);
        },
        |hw, n, image| {
            let (_, wr) = hw.cqs.pointers(true, n);
            f::c_cq_tgq_wrptr_table::MEM_Q_WR_PTR.set(image, wr);
        }),
    r(csr::C_CQ_TXQ_RDPTR_TABLE, |hw, n, image| {
        let (rd, _) = hw.cqs.pointers(false, n);
        f::c_cq_txq_rdptr_table::MEM_Q_RD_PTR.set(image, rd);
    }),
    r(csr::C_CQ_TGQ_RDPTR_TABLE, |hw, n, image| {
        let (rd, _) = hw.cqs.pointers(true, n);
        f::c_cq_tgq_rdptr_table::MEM_Q_RD_PTR.set(image, rd);
    }),

    // ---- decoded CQ configuration (tables) ----
    w(csr::C_CQ_CFG_AC_ARRAY, |hw, csrs, _, p, _| hw.tables.ac_written(csrs, p.entry)),
    w(csr::C_CQ_CFG_CID_ARRAY, |hw, csrs, _, p, _| hw.tables.cid_written(csrs, p.entry)),
    w(csr::C_CQ_CFG_CP_TABLE, |hw, csrs, _, p, _| hw.tables.cp_written(csrs, p.entry)),
    w(csr::C_CQ_CFG_CP_FL_TABLE, |hw, csrs, _, p, _| hw.tables.cp_fl_written(csrs, p.entry)),
    w(csr::C_CQ_CFG_PTLTE_RGID_TABLE,
        |hw, csrs, _, p, _| hw.tables.rgid_written(csrs, RgidTable::Ptlte, p.entry)),
    w(csr::C_CQ_CFG_EQ_RGID_TABLE,
        |hw, csrs, _, p, _| hw.tables.rgid_written(csrs, RgidTable::Eq, p.entry)),
    w(csr::C_CQ_CFG_CT_RGID_TABLE,
        |hw, csrs, _, p, _| hw.tables.rgid_written(csrs, RgidTable::Ct, p.entry)),
    w(csr::C_CQ_CFG_CQ_POLICY, |hw, csrs, _, _, _| hw.tables.policy_written(csrs)),

    // ---- counting events and triggered operations (tou) ----
    rw(csr::C_CQ_CFG_CT_ENABLE,
        |hw, csrs, _, p, _| hw.ct_enable_written(csrs, p.entry),
        |hw, n, image| {
            let en = hw.ct.state(n as u16).is_some_and(|s| s.enabled);
            f::c_cq_cfg_ct_enable::CT_ENABLE.set(image, u64::from(en));
        }),
    w(csr::C_CQ_CFG_CT_WB_MEM_ADDR, |hw, csrs, _, p, _| hw.ct_writeback_written(csrs, p.entry)),
    w(csr::C_CQ_CFG_INIT_CT_HW_STATE, |hw, csrs, io, _, _| hw.ct_init_written(csrs, io)),
    rw(csr::C_CQ_CFG_TLE_POOL,
        |hw, csrs, _, p, _| tou::tle_pool_written(&mut hw.ct, csrs, p.entry),
        |hw, n, image| tou::reflect_tle_pool(&hw.ct, n, image)),
    rw(csr::C_CQ_CFG_STS_TLE_SHARED,
        |hw, csrs, _, _, _| tou::tle_shared_written(&mut hw.ct, csrs),
        |hw, _, image| tou::reflect_tle_shared(&hw.ct, image)),
    r(csr::C_CQ_STS_TLE_IN_USE, |hw, n, image| tou::reflect_tle_in_use(&hw.ct, n, image)),
    rw(csr::C_CQ_STS_MAX_TLE_IN_USE,
        |hw, _, _, p, _| hw.ct.clear_tle_max(p.entry as u8),
        |hw, n, image| tou::reflect_tle_max(&hw.ct, n, image)),
    r(csr::C_CQ_TXQ_ACK_CTR, |hw, n, image| tou::reflect_ack_ctr(&hw.ct, false, n, image)),
    r(csr::C_CQ_TGQ_ACK_CTR, |hw, n, image| tou::reflect_ack_ctr(&hw.ct, true, n, image)),
    w(csr::C_CQ_ERR_CLR, |hw, _, _, p, data| tou::err_flag_written(&mut hw.ct, p, data)),
    rw(csr::C_CQ_ERR_FLG,
        |hw, _, _, p, data| tou::err_flag_written(&mut hw.ct, p, data),
        |hw, _, image| tou::reflect_err_flag(&hw.ct, image)),

    // ---- address translation (atu) ----
    w(csr::C_ATU_CFG_AC_TABLE, |hw, csrs, _, p, _| hw.atu.ac_written(csrs, p.entry)),
    w(csr::C_ATU_CFG_CQ_TABLE, |hw, csrs, _, p, _| hw.atu.cq_cmd_written(csrs, p.entry)),

    // ---- event queues (ee) ----
    w(csr::C_EE_CFG_EQ_DESCRIPTOR, |hw, csrs, _, p, _| hw.ee.descriptor_written(csrs, p.entry)),
    w(csr::C_EE_CFG_LONG_EVNT_OVR_TABLE,
        |hw, csrs, _, p, _| hw.ee.long_ovr_written(csrs, p.entry)),
    rw(csr::C_EE_CFG_EQ_SW_STATE,
        |hw, csrs, io, p, _| {
            let qw = csrs.entry_qword(p.csr, p.entry, 0);
            hw.ee.sw_state_written(&mut hw.atu, io, p.entry, qw);
        },
        |hw, n, image| image[..8].copy_from_slice(&hw.ee.sw_state(n).to_le_bytes())),

    // ---- receive match unit (rmu) ----
    w(csr::C_RMU_CFG_VNI_LIST_X,
        |hw, csrs, _, p, _| hw.rmu.x_written(csrs, TcamList::Vni, p.entry)),
    w(csr::C_RMU_CFG_VNI_LIST_Y,
        |hw, csrs, _, p, _| hw.rmu.y_written(csrs, TcamList::Vni, p.entry)),
    w(csr::C_RMU_CFG_VNI_LIST_INVALIDATE,
        |hw, csrs, _, p, data| hw.rmu.invalidate_written(csrs, TcamList::Vni, p.entry, data)),
    w(csr::C_RMU_CFG_PORTAL_LIST_X,
        |hw, csrs, _, p, _| hw.rmu.x_written(csrs, TcamList::Portal, p.entry)),
    w(csr::C_RMU_CFG_PORTAL_LIST_Y,
        |hw, csrs, _, p, _| hw.rmu.y_written(csrs, TcamList::Portal, p.entry)),
    w(csr::C_RMU_CFG_PORTAL_LIST_INVALIDATE,
        |hw, csrs, _, p, data| hw.rmu.invalidate_written(csrs, TcamList::Portal, p.entry, data)),
    w(csr::C_RMU_CFG_PORTAL_INDEX_TABLE, |hw, csrs, _, p, _| hw.rmu.index_written(csrs, p.entry)),

    // ---- list processing: portal table, rendezvous Gets, LE pools (tgt, lpe) ----
    rw(csr::C_LPE_CFG_PTL_TABLE,
        |hw, csrs, _, p, _| {
            // ptl_state is in byte 24 of the entry.
            let state_written = p.byte <= 24 && p.byte + p.len > 24;
            tgt::ptl_table_written(&mut hw.lpe, csrs, p.entry, state_written);
        },
        |hw, n, image| tgt::reflect_ptl_table(&hw.lpe, n, image)),
    w(csr::C_LPE_CFG_GET_CTRL,
        |hw, csrs, _, _, _| tgt::get_ctrl_written(&mut hw.tgt, &mut hw.lpe, csrs)),
    w(csr::C_LPE_CFG_PE_LE_POOLS,
        |hw, csrs, _, p, _| tgt::le_pool_written(&mut hw.lpe, csrs, p.entry)),
    rw(csr::C_LPE_CFG_PE_LE_SHARED,
        |hw, csrs, _, p, _| tgt::le_shared_written(&mut hw.lpe, csrs, p.entry),
        |hw, n, image| tgt::reflect_le_shared(&hw.lpe, n, image)),
    r(csr::C_LPE_STS_PE_LE_ALLOC, |hw, n, image| tgt::reflect_le_alloc(&hw.lpe, n, image)),
    r(csr::C_LPE_STS_LIST_ENTRIES, |hw, n, image| tgt::reflect_list_entry(&hw.lpe, n, image)),

    // ---- reliability (pct) ----
    w(csr::C_PCT_CFG_TIMING, |hw, csrs, _, _, _| hw.pct.timing_written(csrs)),
    r(csr::C_PCT_PRF_SCT_STATUS,
        |hw, _, image| f::c_pct_prf_sct_status::SCT_IN_USE.set(image, hw.pct.sct_in_use())),
    r(csr::C_PCT_PRF_TCT_STATUS,
        |hw, _, image| f::c_pct_prf_tct_status::TCT_IN_USE.set(image, hw.pct.tct_in_use())),
]);

/// The row of CSR `c`, if it has one.
fn hook(c: &Csr) -> Option<&'static Hook> {
    let i = HOOKS
        .binary_search_by_key(&c.offset, |h| h.csr.offset)
        .ok()?;
    let h = &HOOKS[i];
    // Another generation's register may sit at the same offset under another name.
    (h.csr.name == c.name).then_some(h)
}

impl Hw {
    /// Patch hardware-owned fields of entry `entry` of CSR `c` before software reads it.
    pub(crate) fn reflect(&self, c: &'static Csr, entry: u32, image: &mut [u8]) {
        match hook(c).and_then(|h| h.read) {
            Some(read) => read(self, entry, image),
            None => crate::counters::reflect(&self.counter_view(), c, entry, image),
        }
    }

    /// Software wrote (part of) a CSR entry: let the owning block pick up the change.
    pub(crate) fn csr_written(
        &mut self,
        csrs: &mut CsrFile,
        io: &mut DeviceIo<'_>,
        p: &Piece,
        data: &[u8],
    ) {
        if let Some(write) = hook(p.csr).and_then(|h| h.write) {
            write(self, csrs, io, p, data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_csr_in_offset_order() {
        for pair in HOOKS.windows(2) {
            assert!(
                pair[0].csr.offset < pair[1].csr.offset,
                "{} and {} are out of order or share a row",
                pair[0].csr.name,
                pair[1].csr.name
            );
        }
        for h in &HOOKS {
            assert!(
                h.write.is_some() || h.read.is_some(),
                "{} does nothing",
                h.csr.name
            );
            let found = hook(csr::lookup(h.csr.name).unwrap()).map(|x| x.csr.name);
            assert_eq!(
                found,
                Some(h.csr.name),
                "{} is found by its offset",
                h.csr.name
            );
        }
    }

    #[test]
    fn a_csr_without_a_row_has_no_hook() {
        assert!(hook(csr::C_MB_STS_REV).is_none());
    }
}
