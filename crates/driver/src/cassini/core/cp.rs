//! Communication profiles (`cxi_cp.c`): VNI + traffic class per LCID, modify, triggered CPs.

use super::*;

impl Op<'_> {
    // ---- Communication profiles ----

    pub(super) fn cp_alloc_common(
        &mut self,
        lni: u32,
        vni: u32,
        tc: u32,
        tc_type: u32,
        cp_type: u32,
    ) -> Result<CpAllocResp, Errno> {
        self.lni(lni)?;
        self.check_vni(lni, vni)?;
        if tc >= lim_tc_max() || tc_type > 3 || cp_type > ANY_LCID {
            return Err(Errno::Einval);
        }
        if let Some(p) = self.dev.config.qos_profile
            && !qos_allows(p, tc, tc_type)
        {
            return Err(Errno::Einval);
        }
        // CXI_TC_ETH is for privileged (Ethernet) clients.
        if tc == 4 && !self.creds().admin {
            return Err(Errno::Eperm);
        }
        let s = self.service_of(lni)?;
        if s.desc.bits & svcbits::RESTRICTED_TCS != 0
            && s.desc.tcs.get(tc as usize).copied().unwrap_or(0) == 0
        {
            return Err(Errno::Eperm);
        }
        let l = self.st.lnis.get_mut(&lni).ok_or(Errno::Einval)?;
        // A trigger CQ's profile must be LCID 0 (cassini.md §1.4); others avoid it.
        let lcid = match cp_type {
            TRIG_LCID => l.lcids.alloc_specific(0).then_some(0),
            NON_TRIG_LCID => l.lcids.alloc_in(1, lim::C_COMM_PROF_PER_CQ as u32),
            _ => l.lcids.alloc(),
        }
        .ok_or(Errno::Enospc)?;
        let rgid = l.rgid;
        let existing = self
            .st
            .cps
            .iter()
            .find(|(_, e)| e.vni == vni && e.tc == tc && e.tc_type == tc_type)
            .map(|(k, _)| *k);
        let undo_lcid = |st: &mut DevState| {
            if let Some(l) = st.lnis.get_mut(&lni) {
                l.lcids.free(lcid);
            }
        };
        let cp = match existing {
            Some(cp) => cp,
            None => {
                let Some(cp) = self.st.cpn.alloc() else {
                    undo_lcid(self.st);
                    return Err(Errno::Enospc);
                };
                if let Err(e) = self.hw().cp_set(cp, vni, tc) {
                    self.st.cpn.free(cp);
                    undo_lcid(self.st);
                    return Err(eio(e));
                }
                self.st.cps.insert(
                    cp,
                    CpEntry {
                        vni,
                        tc,
                        tc_type,
                        refs: 0,
                    },
                );
                cp
            }
        };
        let Some(h) = self.st.cp_hndl.alloc() else {
            undo_lcid(self.st);
            return Err(Errno::Enospc);
        };
        if let Err(e) = self.hw().lcid_set(rgid, lcid, cp) {
            self.st.cp_hndl.free(h);
            undo_lcid(self.st);
            return Err(eio(e));
        }
        if let Some(e) = self.st.cps.get_mut(&cp) {
            e.refs += 1;
        }
        self.st.cp_handles.insert(
            h,
            CpHandle {
                client: self.client,
                lni,
                cp,
                lcid,
            },
        );
        lni_ref(self.st, lni, 1);
        Ok(CpAllocResp { cp_hndl: h, lcid })
    }

    pub(crate) fn cp_alloc(&mut self, c: &CpAllocCmd) -> Result<CpAllocResp, Errno> {
        self.cp_alloc_common(c.lni, c.vni, c.tc, c.tc_type, NON_TRIG_LCID)
    }

    pub(crate) fn trig_cp_alloc(&mut self, c: &TrigCpAllocCmd) -> Result<CpAllocResp, Errno> {
        self.cp_alloc_common(c.lni, c.vni, c.tc, c.tc_type, c.cp_type)
    }

    pub(crate) fn cp_free(&mut self, c: &CpFreeCmd) -> Result<(), Errno> {
        owned!(self.st.cp_handles, c.cp_hndl, self.client);
        self.dev.free_cp(self.st, c.cp_hndl);
        Ok(())
    }

    pub(crate) fn cp_modify(&mut self, c: &CpModifyCmd) -> Result<(), Errno> {
        let h = owned!(self.st.cp_handles, c.cp_hndl, self.client);
        let (lni, cp) = (h.lni, h.cp);
        self.check_vni(lni, c.vni)?;
        let e = self.st.cps.get_mut(&cp).ok_or(Errno::Einval)?;
        // Only a profile nobody else shares may change its VNI.
        if e.refs != 1 {
            return Err(Errno::Ebusy);
        }
        let tc = e.tc;
        e.vni = c.vni;
        self.hw().cp_set(cp, c.vni, tc).map_err(eio)
    }
}
