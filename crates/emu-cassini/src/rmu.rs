//! Receive match unit: the VNI TCAM (`c_rmu_cfg_vni_list_x/_y`, 256 entries) and the portal
//! TCAM (`c_rmu_cfg_portal_list_x/_y`, 2560 entries) that turn an incoming packet's
//! (VNI, DFA endpoint, index_ext) into a PtlTE index (`c_rmu_cfg_portal_index_table`).
//!
//! TCAM encoding (docs/cassini-programming.md): per bit, x = 1 requires a 1, y = 1 requires a
//! 0, neither is don't-care. Writing an entry's `_y` word sets its (hardware-owned) `valid`
//! bit; writing 1 to `*_invalidate[i]` clears it. The first valid matching entry wins.
//! Lookups are cached until the next RMU write.

use emu_core::sparse::SparseTable;
use firmware_spec::cassini::csr::{self, Csr, Field};
use firmware_spec::cassini::rc::ReturnCode;

use crate::csr::CsrFile;
use emu_core::hash::IntMap;

/// RMU counters (`c_rmu_cntrs` names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RmuCounters {
    pub(crate) ptl_success_cntr: u64,
    pub(crate) ptl_invld_vni_cntr: u64,
    pub(crate) ptl_no_ptlte_cntr: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Tcam {
    x: u64,
    y: u64,
    valid: bool,
}

impl Tcam {
    fn matches(&self, key: u64) -> bool {
        self.valid && key & self.x == self.x && key & self.y == 0
    }
}

/// The receive match unit.
#[derive(Clone, Debug)]
pub(crate) struct Rmu {
    /// The TCAMs and the index table, stored sparsely: an untouched entry is invalid (never
    /// matches) and indexes PtlTE 0 (none).
    vni: SparseTable<Tcam>,
    portal: SparseTable<Tcam>,
    index: SparseTable<u16>,
    cache: IntMap<(u16, u32), Result<u16, ReturnCode>>,
    pub(crate) counters: RmuCounters,
}

const VNI_MASK: u64 = 0xFFFF;
const PORTAL_MASK: u64 = 0xFFFF_FFFF;

/// The two TCAMs, each programmed through an X word, a Y word and an invalidate strobe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TcamList {
    /// `c_rmu_cfg_vni_list_*`.
    Vni,
    /// `c_rmu_cfg_portal_list_*`.
    Portal,
}

impl TcamList {
    /// The X word and its `valid` field.
    fn x(self) -> (&'static Csr, &'static Field) {
        use csr::fields as f;
        match self {
            TcamList::Vni => (csr::C_RMU_CFG_VNI_LIST_X, f::c_rmu_cfg_vni_list_x::VALID),
            TcamList::Portal => (
                csr::C_RMU_CFG_PORTAL_LIST_X,
                f::c_rmu_cfg_portal_list_x::VALID,
            ),
        }
    }

    /// The Y word and its `valid` field.
    fn y(self) -> (&'static Csr, &'static Field) {
        use csr::fields as f;
        match self {
            TcamList::Vni => (csr::C_RMU_CFG_VNI_LIST_Y, f::c_rmu_cfg_vni_list_y::VALID),
            TcamList::Portal => (
                csr::C_RMU_CFG_PORTAL_LIST_Y,
                f::c_rmu_cfg_portal_list_y::VALID,
            ),
        }
    }

    /// The key bits an entry matches on.
    fn mask(self) -> u64 {
        match self {
            TcamList::Vni => VNI_MASK,
            TcamList::Portal => PORTAL_MASK,
        }
    }
}

impl Rmu {
    /// TCAM and index entries backed by storage (0 at reset).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.vni.allocated_entries()
            + self.portal.allocated_entries()
            + self.index.allocated_entries()
    }

    pub(crate) fn new() -> Self {
        Rmu {
            vni: SparseTable::new(csr::C_RMU_CFG_VNI_LIST_X.entries as usize, Tcam::default()),
            portal: SparseTable::new(
                csr::C_RMU_CFG_PORTAL_LIST_X.entries as usize,
                Tcam::default(),
            ),
            index: SparseTable::new(4 * csr::C_RMU_CFG_PORTAL_INDEX_TABLE.entries as usize, 0),
            cache: IntMap::default(),
            counters: RmuCounters::default(),
        }
    }

    fn tcam(&mut self, l: TcamList) -> &mut SparseTable<Tcam> {
        match l {
            TcamList::Vni => &mut self.vni,
            TcamList::Portal => &mut self.portal,
        }
    }

    /// `c_rmu_cfg_{vni,portal}_list_x[n]` was written: the bits entry `n` requires to be 1.
    pub(crate) fn x_written(&mut self, csrs: &CsrFile, l: TcamList, n: u32) {
        self.cache.clear();
        let (c, ..) = l.x();
        let x = csrs.entry_qword(c, n, 0) & l.mask();
        if let Ok(t) = self.tcam(l).get_mut(n as usize) {
            t.x = x;
        }
    }

    /// `c_rmu_cfg_{vni,portal}_list_y[n]` was written: the bits entry `n` requires to be 0;
    /// the entry becomes valid.
    pub(crate) fn y_written(&mut self, csrs: &mut CsrFile, l: TcamList, n: u32) {
        self.cache.clear();
        let (c, _) = l.y();
        let y = csrs.entry_qword(c, n, 0) & l.mask();
        if let Ok(t) = self.tcam(l).get_mut(n as usize) {
            t.y = y;
            t.valid = true;
            Self::set_valid(csrs, l, n, true);
        }
    }

    /// `c_rmu_cfg_{vni,portal}_list_invalidate[n]` was written: a 1 invalidates entry `n`.
    pub(crate) fn invalidate_written(
        &mut self,
        csrs: &mut CsrFile,
        l: TcamList,
        n: u32,
        data: &[u8],
    ) {
        self.cache.clear();
        if data.first().is_some_and(|b| b & 1 != 0)
            && let Ok(t) = self.tcam(l).get_mut(n as usize)
        {
            t.valid = false;
            Self::set_valid(csrs, l, n, false);
        }
    }

    /// `c_rmu_cfg_portal_index_table[n]` was written: the PtlTE indexes of portal entries
    /// `4n` to `4n + 3`.
    pub(crate) fn index_written(&mut self, csrs: &CsrFile, n: u32) {
        self.cache.clear();
        let qw = csrs.entry_qword(csr::C_RMU_CFG_PORTAL_INDEX_TABLE, n, 0);
        for k in 0..4 {
            if let Ok(s) = self.index.get_mut(4 * n as usize + k) {
                *s = ((qw >> (16 * k)) & 0x7FF) as u16;
            }
        }
    }

    /// The hardware-owned `valid` bits of entry `n` of list `l`, in its X and Y words.
    fn set_valid(csrs: &mut CsrFile, l: TcamList, n: u32, v: bool) {
        for (c, f) in [l.x(), l.y()] {
            csrs.hw_set(c, n, f, u64::from(v));
        }
    }

    /// The PtlTE addressed by a packet on `vni` to DFA endpoint `ep` with `index_ext`.
    pub(crate) fn resolve(
        &mut self,
        vni: u16,
        ep: u16,
        index_ext: u8,
        multicast: bool,
    ) -> Result<u16, ReturnCode> {
        let key = u32::from(index_ext & 0x1F)
            | (u32::from(ep & 0xFFF) << 5)
            | (u32::from(multicast) << 20);
        if let Some(r) = self.cache.get(&(vni, key)).copied() {
            self.count(r);
            return r;
        }
        let r = self.lookup(vni, key);
        if self.cache.len() > 4096 {
            self.cache.clear();
        }
        self.cache.insert((vni, key), r);
        self.count(r);
        r
    }

    fn count(&mut self, r: Result<u16, ReturnCode>) {
        match r {
            Ok(_) => self.counters.ptl_success_cntr += 1,
            Err(ReturnCode::VniNotFound) => self.counters.ptl_invld_vni_cntr += 1,
            Err(_) => self.counters.ptl_no_ptlte_cntr += 1,
        }
    }

    fn lookup(&self, vni: u16, key: u32) -> Result<u16, ReturnCode> {
        let vi = self
            .vni
            .iter_touched()
            .find(|(_, t)| t.matches(u64::from(vni)))
            .map(|(i, _)| i)
            .ok_or(ReturnCode::VniNotFound)?;
        let full = u64::from(key) | ((vi as u64 & 0xFF) << 24);
        let j = self
            .portal
            .iter_touched()
            .find(|(_, t)| t.matches(full))
            .map(|(j, _)| j)
            .ok_or(ReturnCode::PtlteNotFound)?;
        match self.index.get(j).copied() {
            Ok(pt) if pt != 0 => Ok(pt),
            _ => Err(ReturnCode::PtlteNotFound),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcam_rule_exact_and_wildcards() {
        let exact = Tcam {
            x: 0x12,
            y: !0x12 & VNI_MASK,
            valid: true,
        };
        assert!(exact.matches(0x12));
        assert!(!exact.matches(0x13));
        let any = Tcam {
            x: 0,
            y: 0,
            valid: true,
        };
        assert!(any.matches(0xBEEF));
        assert!(
            !Tcam {
                valid: false,
                ..any
            }
            .matches(0)
        );
    }

    #[test]
    fn resolve_walks_vni_then_portal_then_index() {
        let mut r = Rmu::new();
        *r.vni.get_mut(3).unwrap() = Tcam {
            x: 10,
            y: !10 & VNI_MASK,
            valid: true,
        };
        let key = 5u64 | (7 << 5) | (3 << 24);
        *r.portal.get_mut(9).unwrap() = Tcam {
            x: key,
            y: !key & PORTAL_MASK,
            valid: true,
        };
        *r.index.get_mut(9).unwrap() = 42;
        assert_eq!(r.resolve(10, 7, 5, false), Ok(42));
        assert_eq!(r.resolve(11, 7, 5, false), Err(ReturnCode::VniNotFound));
        assert_eq!(r.resolve(10, 8, 5, false), Err(ReturnCode::PtlteNotFound));
        assert_eq!(r.counters.ptl_success_cntr, 1);
        assert_eq!(r.counters.ptl_invld_vni_cntr, 1);
        assert_eq!(r.counters.ptl_no_ptlte_cntr, 1);
    }
}
