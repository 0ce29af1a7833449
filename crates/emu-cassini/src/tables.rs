//! Decoded copies of the small CQ configuration tables the data path reads (access
//! controls, communication profiles, PtlTE resource groups, CQ policies). `hw` keeps them up
//! to date from CSR writes, so no block reads the CSR file on the data path. The per-entry
//! tables are sparse (`emu_core::sparse::SparseTable`): an idle NIC's driver writes few of
//! their entries, and an entry nobody wrote reads as its reset value (0). A leaf.

use emu_core::sparse::SparseTable;
use firmware_spec::cassini::csr;

use crate::csr::CsrFile;

/// The resource-group tables of the objects a command may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RgidTable {
    /// `c_cq_cfg_ptlte_rgid_table`.
    Ptlte,
    /// `c_cq_cfg_eq_rgid_table`.
    Eq,
    /// `c_cq_cfg_ct_rgid_table`.
    Ct,
}

/// A communication profile (`c_cq_cfg_cp_table` + `c_cq_cfg_cp_fl_table`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cp {
    pub(crate) vni: u16,
    pub(crate) valid: bool,
    pub(crate) tc: u8,
}

/// Decoded copies of the small configuration tables used on the data path.
#[derive(Clone, Debug)]
pub(crate) struct Tables {
    /// `c_cq_cfg_ac_array`: (rgid * 8 + lac) -> AC.
    pub(crate) ac_array: SparseTable<u16>,
    /// `c_cq_cfg_cid_array`: (rgid * 16 + lcid) -> CP.
    pub(crate) cid_array: SparseTable<u8>,
    pub(crate) cp: SparseTable<Cp>,
    /// `c_cq_cfg_ptlte_rgid_table`.
    pub(crate) ptlte_rgid: SparseTable<u8>,
    /// `c_cq_cfg_eq_rgid_table`: resource group of each EQ.
    pub(crate) eq_rgid: SparseTable<u8>,
    /// `c_cq_cfg_ct_rgid_table`: resource group of each counting event.
    pub(crate) ct_rgid: SparseTable<u8>,
    /// `c_cq_cfg_cq_policy`: (shift, write back on empty) per policy.
    pub(crate) policy: [(u8, bool); 4],
    /// Bumped on every change of the CP tables (CQs cache their resolved CP).
    pub(crate) cp_gen: u64,
}

impl Tables {
    pub(crate) fn new() -> Self {
        Tables {
            ac_array: SparseTable::new(csr::C_CQ_CFG_AC_ARRAY.entries as usize, 0),
            cid_array: SparseTable::new(csr::C_CQ_CFG_CID_ARRAY.entries as usize, 0),
            cp: SparseTable::new(csr::C_CQ_CFG_CP_TABLE.entries as usize, Cp::default()),
            ptlte_rgid: SparseTable::new(csr::C_CQ_CFG_PTLTE_RGID_TABLE.entries as usize, 0),
            eq_rgid: SparseTable::new(csr::C_CQ_CFG_EQ_RGID_TABLE.entries as usize, 0),
            ct_rgid: SparseTable::new(csr::C_CQ_CFG_CT_RGID_TABLE.entries as usize, 0),
            policy: [(4, false); 4],
            cp_gen: 1,
        }
    }

    /// AC of `lac` in resource group `rgid` (0 = none, which the ATU rejects).
    pub(crate) fn lac_ac(&self, rgid: u8, lac: u8) -> u16 {
        let i = usize::from(rgid) * 8 + usize::from(lac & 7);
        self.ac_array.get(i).copied().unwrap_or(0)
    }

    /// Entries backed by storage across the per-entry tables (0 out of reset).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.ac_array.allocated_entries()
            + self.cid_array.allocated_entries()
            + self.cp.allocated_entries()
            + self.ptlte_rgid.allocated_entries()
            + self.eq_rgid.allocated_entries()
            + self.ct_rgid.allocated_entries()
    }

    /// Communication profile of `lcid` in resource group `rgid`.
    pub(crate) fn cp(&self, rgid: u8, lcid: u8) -> Cp {
        let i = usize::from(rgid) * 16 + usize::from(lcid & 15);
        let cp = self.cid_array.get(i).copied().unwrap_or(0);
        self.cp.get(usize::from(cp)).copied().unwrap_or_default()
    }

    /// Whether a command of a queue in resource group `rgid` may name EQ `eq` and counting
    /// event `ct` (0 names none). The CQ block checks every handle a command carries against
    /// `c_cq_cfg_{eq,ct}_rgid_table`, so that one process cannot post events to, or count
    /// on, another's objects (their resource groups differ). An object of group 0 belongs to
    /// nobody (the driver resets the entry when it frees the object): that is left to the
    /// block's own checks (a disabled EQ takes no event, a disabled CT fails the command).
    pub(crate) fn handles_in_rgid(&self, rgid: u8, eq: u16, ct: u16) -> bool {
        let ok = |t: &SparseTable<u8>, i: u16| {
            i == 0
                || t.get(usize::from(i))
                    .ok()
                    .is_none_or(|&g| g == 0 || g == rgid)
        };
        ok(&self.eq_rgid, eq) && ok(&self.ct_rgid, ct)
    }

    /// Whether a target command of a queue in resource group `rgid` may name PtlTE `pt`
    /// (`c_cq_cfg_ptlte_rgid_table`; group 0 as in [`Tables::handles_in_rgid`]).
    pub(crate) fn ptlte_in_rgid(&self, rgid: u8, pt: u16) -> bool {
        let g = self.ptlte_rgid(pt);
        g == 0 || g == rgid
    }

    /// Resource group of PtlTE `pt`.
    pub(crate) fn ptlte_rgid(&self, pt: u16) -> u8 {
        self.ptlte_rgid.get(usize::from(pt)).copied().unwrap_or(0)
    }

    // ---- the CSR writes that change them (hooked by `csr_hooks`) ----

    /// `c_cq_cfg_ac_array[n]` was written.
    pub(crate) fn ac_written(&mut self, csrs: &CsrFile, n: u32) {
        use csr::fields::c_cq_cfg_ac_array as f;
        if let Ok(s) = self.ac_array.get_mut(n as usize) {
            *s = csrs.field(csr::C_CQ_CFG_AC_ARRAY, n, f::AC) as u16;
        }
    }

    /// `c_cq_cfg_cid_array[n]` was written.
    pub(crate) fn cid_written(&mut self, csrs: &CsrFile, n: u32) {
        use csr::fields::c_cq_cfg_cid_array as f;
        if let Ok(s) = self.cid_array.get_mut(n as usize) {
            *s = csrs.field(csr::C_CQ_CFG_CID_ARRAY, n, f::CID) as u8;
        }
        self.cp_gen += 1;
    }

    /// `c_cq_cfg_cp_table[n]` was written.
    pub(crate) fn cp_written(&mut self, csrs: &CsrFile, n: u32) {
        use csr::fields::c_cq_cfg_cp_table as f;
        let c = csr::C_CQ_CFG_CP_TABLE;
        if let Ok(s) = self.cp.get_mut(n as usize) {
            s.vni = csrs.field(c, n, f::VNI) as u16;
            s.valid = csrs.field(c, n, f::VALID) != 0;
        }
        self.cp_gen += 1;
    }

    /// `c_cq_cfg_cp_fl_table[n]` was written.
    pub(crate) fn cp_fl_written(&mut self, csrs: &CsrFile, n: u32) {
        use csr::fields::c_cq_cfg_cp_fl_table as f;
        if let Ok(s) = self.cp.get_mut(n as usize) {
            s.tc = csrs.field(csr::C_CQ_CFG_CP_FL_TABLE, n, f::TC) as u8;
        }
        self.cp_gen += 1;
    }

    /// `c_cq_cfg_{ptlte,eq,ct}_rgid_table[n]` was written.
    pub(crate) fn rgid_written(&mut self, csrs: &CsrFile, table: RgidTable, n: u32) {
        use csr::fields as f;
        let (t, c, fld) = match table {
            RgidTable::Ptlte => (
                &mut self.ptlte_rgid,
                csr::C_CQ_CFG_PTLTE_RGID_TABLE,
                f::c_cq_cfg_ptlte_rgid_table::RGID,
            ),
            RgidTable::Eq => (
                &mut self.eq_rgid,
                csr::C_CQ_CFG_EQ_RGID_TABLE,
                f::c_cq_cfg_eq_rgid_table::RGID,
            ),
            RgidTable::Ct => (
                &mut self.ct_rgid,
                csr::C_CQ_CFG_CT_RGID_TABLE,
                f::c_cq_cfg_ct_rgid_table::RGID,
            ),
        };
        if let Ok(s) = t.get_mut(n as usize) {
            *s = csrs.field(c, n, fld) as u8;
        }
    }

    /// `c_cq_cfg_cq_policy` was written: a byte per policy, {shift (4 bits), write back on
    /// empty (bit 4)}.
    pub(crate) fn policy_written(&mut self, csrs: &CsrFile) {
        let qw = csrs.entry_qword(csr::C_CQ_CFG_CQ_POLICY, 0, 0);
        for (i, p) in self.policy.iter_mut().enumerate() {
            let b = qw >> (8 * i);
            *p = ((b & 0xF) as u8, b & 0x10 != 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu_core::sparse::PAGE;

    #[test]
    fn reset_tables_hold_nothing_and_read_as_zero() {
        let t = Tables::new();
        assert_eq!(t.allocated_entries(), 0);
        assert_eq!(t.lac_ac(3, 5), 0);
        assert_eq!(t.cp(3, 5), Cp::default());
        assert_eq!(t.ptlte_rgid(100), 0);
        // Group 0 belongs to nobody: any group may name such handles.
        assert!(t.handles_in_rgid(7, 12, 34));
        assert!(t.ptlte_in_rgid(7, 100));
        assert_eq!(t.allocated_entries(), 0, "reads allocate nothing");
    }

    #[test]
    fn written_entries_are_read_back_and_cost_one_page_each() {
        let mut t = Tables::new();
        *t.ac_array.get_mut(3 * 8 + 5).unwrap() = 0x123;
        *t.cid_array.get_mut(3 * 16 + 2).unwrap() = 9;
        *t.cp.get_mut(9).unwrap() = Cp {
            vni: 77,
            valid: true,
            tc: 2,
        };
        *t.eq_rgid.get_mut(40).unwrap() = 4;
        *t.ct_rgid.get_mut(41).unwrap() = 4;
        *t.ptlte_rgid.get_mut(42).unwrap() = 4;
        assert_eq!(t.allocated_entries(), 6 * PAGE);
        assert_eq!(t.lac_ac(3, 5), 0x123);
        assert_eq!(t.lac_ac(3, 4), 0);
        assert_eq!(t.cp(3, 2).vni, 77);
        assert!(t.cp(3, 2).valid);
        assert_eq!(t.cp(3, 3), Cp::default());
        assert!(t.handles_in_rgid(4, 40, 41));
        assert!(!t.handles_in_rgid(5, 40, 0), "another group's EQ");
        assert!(!t.handles_in_rgid(5, 0, 41), "another group's CT");
        assert!(t.ptlte_in_rgid(4, 42));
        assert!(!t.ptlte_in_rgid(5, 42));
        // Out of range handles are left to the blocks' own checks; no allocation either.
        assert!(t.handles_in_rgid(5, u16::MAX, u16::MAX));
        assert_eq!(t.allocated_entries(), 6 * PAGE);
    }
}
