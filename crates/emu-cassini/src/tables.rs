//! Decoded copies of the small CQ configuration tables the data path reads (access
//! controls, communication profiles, PtlTE resource groups, CQ policies). `hw` keeps them up
//! to date from CSR writes, so no block reads the CSR file on the data path. A leaf.

use firmware_spec::cassini::csr;

/// A communication profile (`c_cq_cfg_cp_table` + `c_cq_cfg_cp_fl_table`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cp {
    pub(crate) vni: u16,
    pub(crate) valid: bool,
    pub(crate) tc: u8,
}

/// Decoded copies of the small configuration tables used on the data path.
#[derive(Debug)]
pub(crate) struct Tables {
    /// `c_cq_cfg_ac_array`: (rgid * 8 + lac) -> AC.
    pub(crate) ac_array: Vec<u16>,
    /// `c_cq_cfg_cid_array`: (rgid * 16 + lcid) -> CP.
    pub(crate) cid_array: Vec<u8>,
    pub(crate) cp: Vec<Cp>,
    /// `c_cq_cfg_ptlte_rgid_table`.
    pub(crate) ptlte_rgid: Vec<u8>,
    /// `c_cq_cfg_eq_rgid_table`: resource group of each EQ.
    pub(crate) eq_rgid: Vec<u8>,
    /// `c_cq_cfg_ct_rgid_table`: resource group of each counting event.
    pub(crate) ct_rgid: Vec<u8>,
    /// `c_cq_cfg_cq_policy`: (shift, write back on empty) per policy.
    pub(crate) policy: [(u8, bool); 4],
    /// Bumped on every change of the CP tables (CQs cache their resolved CP).
    pub(crate) cp_gen: u64,
}

impl Tables {
    pub(crate) fn new() -> Self {
        Tables {
            ac_array: vec![0; csr::C_CQ_CFG_AC_ARRAY.entries as usize],
            cid_array: vec![0; csr::C_CQ_CFG_CID_ARRAY.entries as usize],
            cp: vec![Cp::default(); csr::C_CQ_CFG_CP_TABLE.entries as usize],
            ptlte_rgid: vec![0; csr::C_CQ_CFG_PTLTE_RGID_TABLE.entries as usize],
            eq_rgid: vec![0; csr::C_CQ_CFG_EQ_RGID_TABLE.entries as usize],
            ct_rgid: vec![0; csr::C_CQ_CFG_CT_RGID_TABLE.entries as usize],
            policy: [(4, false); 4],
            cp_gen: 1,
        }
    }

    /// AC of `lac` in resource group `rgid` (0 = none, which the ATU rejects).
    pub(crate) fn lac_ac(&self, rgid: u8, lac: u8) -> u16 {
        let i = usize::from(rgid) * 8 + usize::from(lac & 7);
        self.ac_array.get(i).copied().unwrap_or(0)
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
        let ok =
            |t: &[u8], i: u16| i == 0 || t.get(usize::from(i)).is_none_or(|&g| g == 0 || g == rgid);
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
}
