//! Counting events (`cxi_ct.c`): allocation and write-back buffers.

use super::*;

impl Op<'_> {
    // ---- Counting events ----

    pub(super) fn ct_wb(&self, wb: u64) -> Result<Pinned, Errno> {
        if !wb.is_multiple_of(8) {
            return Err(Errno::Einval);
        }
        self.space()?.resolve(wb, 8).ok_or(Errno::Efault)
    }

    /// `cass_ct.c: cxi_ct_alloc`: a NULL `wb` is allowed (libcxi's utilities allocate their
    /// counters so, `utils/cxi_context.c: ctx_alloc_ct`): the counter then has no write-back
    /// buffer (context 0 in `c_cq_cfg_ct_wb_mem_addr`) until CT_WB_UPDATE gives it one.
    pub(crate) fn ct_alloc(&mut self, c: &CtAllocCmd) -> Result<CtAllocResp, Errno> {
        let rgid = self.lni(c.lni)?.rgid;
        let pin = if c.wb == 0 {
            None
        } else {
            Some(self.ct_wb(c.wb)?)
        };
        self.check_limit(c.lni, rsrc::CT)?;
        let n = self.st.ctn.alloc().ok_or(Errno::Enospc)?;
        let (acid, wb) = match &pin {
            Some(p) => (PHYS_ACID, p.bus_address(0)),
            None => (0, 0),
        };
        if let Err(e) = self.hw().ct_enable(n, acid, wb, rgid) {
            let _ = self.hw().ct_disable(n);
            self.st.ctn.free(n);
            return Err(eio(e));
        }
        let shared = MapShared::new();
        let doorbell = self.new_token(
            MMIO_PAGE,
            MapTarget::Mmio {
                offset: hw::ct_doorbell_offset(n),
                len: MMIO_PAGE,
            },
            &shared,
        )?;
        self.st.cts.insert(
            n,
            Ct {
                client: self.client,
                lni: c.lni,
                _pin: pin,
                token: doorbell.offset,
                shared,
            },
        );
        svc_use(self.st, c.lni, rsrc::CT, 1);
        lni_ref(self.st, c.lni, 1);
        Ok(CtAllocResp {
            ctn: n,
            pad0: 0,
            doorbell,
        })
    }

    /// A NULL `wb` is `EINVAL` here (`cass_ct.c: cxi_ct_wb_update`).
    pub(crate) fn ct_wb_update(&mut self, c: &CtWbUpdateCmd) -> Result<(), Errno> {
        owned!(self.st.cts, c.ctn, self.client);
        if c.wb == 0 {
            return Err(Errno::Einval);
        }
        let pin = self.ct_wb(c.wb)?;
        self.hw()
            .ct_set_wb(c.ctn, PHYS_ACID, pin.bus_address(0))
            .map_err(eio)?;
        if let Some(ct) = self.st.cts.get_mut(&c.ctn) {
            ct._pin = Some(pin);
        }
        Ok(())
    }

    pub(crate) fn ct_free(&mut self, c: &CtFreeCmd) -> Result<(), Errno> {
        let ct = owned!(self.st.cts, c.ctn, self.client);
        if Arc::strong_count(&ct.shared) > 2 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_ct(self.st, c.ctn);
        Ok(())
    }
}
