//! Domains (`cxi_domain.c`): (VNI, PID) reservations and allocations.

use super::*;

impl Op<'_> {
    // ---- Domains ----

    pub(super) fn pid_free_for(&self, lni: u32, vni: u32, pid: u32) -> bool {
        match self.st.pids.get(&(vni, pid)) {
            None => true,
            Some(o) => o.reserved && o.lni == lni && o.domain.is_none(),
        }
    }

    pub(crate) fn domain_reserve(
        &mut self,
        c: &DomainReserveCmd,
    ) -> Result<DomainReserveResp, Errno> {
        self.lni(c.lni)?;
        self.check_vni(c.lni, c.vni)?;
        let pid_count = self.dev.info.pid_count;
        if c.count == 0 || c.count > pid_count {
            return Err(Errno::Einval);
        }
        let free = |st: &DevState, p: u32| !st.pids.contains_key(&(c.vni, p));
        let first = if c.pid == C_PID_ANY {
            // cxi_rx_profile_alloc_pid: a wildcard reservation must end below the last PID.
            (0..pid_count - c.count)
                .find(|&p| (p..p + c.count).all(|q| free(self.st, q)))
                .ok_or(Errno::Enospc)?
        } else {
            let end = c.pid.checked_add(c.count).ok_or(Errno::Einval)?;
            if end > pid_count {
                return Err(Errno::Einval);
            }
            if !(c.pid..end).all(|q| free(self.st, q)) {
                return Err(Errno::Eexist);
            }
            c.pid
        };
        for p in first..first + c.count {
            self.st.pids.insert(
                (c.vni, p),
                PidOwner {
                    lni: c.lni,
                    domain: None,
                    reserved: true,
                },
            );
        }
        Ok(DomainReserveResp { pid: first })
    }

    pub(crate) fn domain_alloc(&mut self, c: &DomainAllocCmd) -> Result<DomainAllocResp, Errno> {
        self.lni(c.lni)?;
        self.check_vni(c.lni, c.vni)?;
        let pid_count = self.dev.info.pid_count;
        let pid = if c.pid == C_PID_ANY {
            (0..pid_count)
                .find(|&p| !self.st.pids.contains_key(&(c.vni, p)))
                .ok_or(Errno::Enospc)?
        } else if c.pid >= pid_count {
            return Err(Errno::Einval);
        } else if self.pid_free_for(c.lni, c.vni, c.pid) {
            c.pid
        } else {
            return Err(Errno::Eexist);
        };
        // The VNI's RMU entry, shared by every domain of that VNI.
        if !self.st.vnis.contains_key(&c.vni) {
            let idx = self.st.vni_list.alloc().ok_or(Errno::Enospc)?;
            if let Err(e) = self.hw().rmu_vni_set(idx, c.vni) {
                self.st.vni_list.free(idx);
                return Err(eio(e));
            }
            self.st.vnis.insert(c.vni, VniEntry { idx, refs: 0 });
        }
        let Some(id) = self.st.domain_id.alloc() else {
            self.dev.vni_unref(self.st, c.vni);
            return Err(Errno::Enospc);
        };
        if let Some(v) = self.st.vnis.get_mut(&c.vni) {
            v.refs += 1;
        }
        let reserved = self.st.pids.get(&(c.vni, pid)).is_some_and(|o| o.reserved);
        self.st.pids.insert(
            (c.vni, pid),
            PidOwner {
                lni: c.lni,
                domain: Some(id),
                reserved,
            },
        );
        self.st.domains.insert(
            id,
            Domain {
                client: self.client,
                lni: c.lni,
                vni: c.vni,
                pid,
                maps: 0,
            },
        );
        lni_ref(self.st, c.lni, 1);
        Ok(DomainAllocResp {
            domain: id,
            vni: c.vni,
            pid,
        })
    }

    pub(crate) fn domain_free(&mut self, c: &DomainFreeCmd) -> Result<(), Errno> {
        if owned!(self.st.domains, c.domain, self.client).maps > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_domain(self.st, c.domain);
        Ok(())
    }
}
