//! LNIs (`cxi_lni.c`): allocation and release of logical network interfaces.

use super::*;

impl Op<'_> {
    // ---- LNI ----

    pub(crate) fn lni_alloc(&mut self, c: &LniAllocCmd) -> Result<LniAllocResp, Errno> {
        let creds = self.creds();
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        // cass_lni.c: a disabled service is EKEYREVOKED; a caller who is not a member is
        // EPERM (`cxi_rgroup_valid_user`).
        if s.desc.bits & svcbits::ENABLE == 0 {
            return Err(Errno::Ekeyrevoked);
        }
        if !svc_admits(s, &creds) {
            return Err(Errno::Eperm);
        }
        let rgid = self.st.rgid.alloc().ok_or(Errno::Enospc)?;
        self.st.lnis.insert(
            rgid,
            Lni {
                client: self.client,
                svc: c.svc_id,
                rgid,
                pe: rgid % lim::C_PE_COUNT as u32,
                lcids: IdAllocator::new(0, lim::C_COMM_PROF_PER_CQ as u32),
                acid: 0,
                refs: 0,
            },
        );
        if let Some(s) = self.st.services.get_mut(&c.svc_id) {
            s.lnis += 1;
        }
        Ok(LniAllocResp { lni: rgid })
    }

    pub(crate) fn lni_free(&mut self, c: &LniFreeCmd) -> Result<(), Errno> {
        if self.lni(c.lni)?.refs > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_lni(self.st, c.lni);
        Ok(())
    }
}
