//! Event queues (`cxi_eq.c`): rings behind MDs, interrupts, reserved flow-control slots.

use super::*;

impl Op<'_> {
    // ---- Event queues ----

    pub(super) fn wait_vector(&self, wait: u32) -> Result<Option<u32>, Errno> {
        if wait == NONE {
            return Ok(None);
        }
        Ok(Some(owned!(self.st.waits, wait, self.client).vector))
    }

    pub(crate) fn eq_alloc(&mut self, c: &EqAllocCmd) -> Result<EqAllocResp, Errno> {
        let rgid = self.lni(c.lni)?.rgid;
        let a = &c.attr;
        let flags = EqFlags(a.flags);
        if flags.unknown_bits() != 0 {
            return Err(Errno::Einval);
        }
        if flags.contains(EqFlags::REGISTER_PCT) && !self.creds().admin {
            return Err(Errno::Eperm);
        }
        let pages = a.queue_len / PAGE_SIZE;
        if a.queue_len == 0
            || !a.queue_len.is_multiple_of(PAGE_SIZE)
            || !a.queue.is_multiple_of(PAGE_SIZE)
            || a.queue_len > lim::MAX_EQ_LEN
            || pages >= 1 << 20
        {
            return Err(Errno::Einval);
        }
        let slots = (a.queue_len / 64) as u32;
        if a.reserved_slots >= slots.saturating_sub(lim_eq_reserved()) || a.reserved_slots > 0x3fff
        {
            return Err(Errno::Einval);
        }
        // cass_eq.c: with status updates, at most 4 thresholds, each within 0..=100 percent:
        // the last one, base minus (count - 1) deltas, may not go below 0.
        let span = u64::from(a.status_thresh_count.saturating_sub(1))
            * u64::from(a.status_thresh_delta)
            + u64::from(100u32.saturating_sub(a.status_thresh_base));
        if a.status_thresh_count > 0
            && (a.status_thresh_count > 4
                || a.status_thresh_base > 100
                || a.status_thresh_delta > 100
                || span > 100)
        {
            return Err(Errno::Einval);
        }
        let event_irq = self.wait_vector(c.event_wait)?;
        let status_irq = self.wait_vector(c.status_wait)?;
        self.check_limit(c.lni, rsrc::EQ)?;
        let (addr, acid, md, pin) = if flags.contains(EqFlags::PASSTHROUGH) {
            let pin = self
                .space()?
                .resolve(a.queue, a.queue_len)
                .ok_or(Errno::Efault)?;
            (pin.bus_address(0), PHYS_ACID, NONE, Some(pin))
        } else {
            let md = owned!(self.st.mds, c.queue_md, self.client);
            let end = a.queue.checked_add(a.queue_len).ok_or(Errno::Einval)?;
            if md.lni != c.lni || a.queue < md.va || end > md.va + md.len {
                return Err(Errno::Einval);
            }
            (md.iova + (a.queue - md.va), md.acid, c.queue_md, None)
        };
        let n = self.st.eqn.alloc().ok_or(Errno::Enospc)?;
        let ec = if flags.contains(EqFlags::EC_DISABLE) {
            0
        } else if a.ec_delay == 0 {
            500
        } else {
            a.ec_delay
        };
        let cfg = EqConfig {
            rgid,
            addr,
            len: a.queue_len,
            acid,
            reserved_fc: a.reserved_slots,
            event_irq,
            status_irq,
            drop_status: !flags.contains(EqFlags::DROP_STATUS_DISABLE),
            thresh_count: a.status_thresh_count,
            thresh_base: a.status_thresh_base,
            thresh_delta: a.status_thresh_delta,
            // Our reading: latency tolerance in ns, saturating at the 9-bit field.
            latency_tolerance: ec.min(511),
            init_long: flags.contains(EqFlags::INIT_LONG),
            tgt_long: flags.contains(EqFlags::TGT_LONG),
        };
        if let Err(e) = self.hw().eq_enable(n, &cfg) {
            let _ = self.hw().eq_disable(n);
            self.st.eqn.free(n);
            return Err(eio(e));
        }
        let shared = MapShared::new();
        let csr = self.new_token(
            MMIO_PAGE,
            MapTarget::Mmio {
                offset: hw::eq_sw_state_offset(n),
                len: MMIO_PAGE,
            },
            &shared,
        )?;
        if let Some(m) = self.st.mds.get_mut(&md) {
            m.refs += 1;
        }
        for w in [c.event_wait, c.status_wait] {
            if let Some(w) = self.st.waits.get_mut(&w) {
                w.refs += 1;
            }
        }
        self.st.eqs.insert(
            n,
            EqObj {
                client: self.client,
                lni: c.lni,
                md,
                _pin: pin,
                waits: [c.event_wait, c.status_wait],
                slots,
                reserved_fc: a.reserved_slots,
                refs: 0,
                token: csr.offset,
                shared,
            },
        );
        svc_use(self.st, c.lni, rsrc::EQ, 1);
        lni_ref(self.st, c.lni, 1);
        Ok(EqAllocResp {
            eq: n,
            pad0: 0,
            csr,
        })
    }

    pub(crate) fn eq_free(&mut self, c: &EqFreeCmd) -> Result<(), Errno> {
        let e = owned!(self.st.eqs, c.eq, self.client);
        if e.refs > 0 || Arc::strong_count(&e.shared) > 2 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_eq(self.st, c.eq);
        Ok(())
    }

    pub(crate) fn eq_adjust_reserved_fc(
        &mut self,
        c: &EqAdjustReservedFcCmd,
    ) -> Result<EqAdjustReservedFcResp, Errno> {
        let e = owned!(self.st.eqs, c.eq_hndl, self.client);
        // cass_eq.c `is_valid_eq_reserved_fc`: beyond the 14-bit field is EINVAL; a value the
        // field holds but the queue has no room for is ENOSPC.
        const EQ_MAX_RESERVED_FC: i64 = (1 << 14) - 1;
        let new = i64::from(e.reserved_fc) + i64::from(c.value);
        if i64::from(c.value).abs() > EQ_MAX_RESERVED_FC || !(0..=EQ_MAX_RESERVED_FC).contains(&new)
        {
            return Err(Errno::Einval);
        }
        let max = i64::from(e.slots.saturating_sub(lim_eq_reserved())) - 1;
        if new > max {
            return Err(Errno::Enospc);
        }
        let new = new as u32;
        self.hw().eq_set_reserved_fc(c.eq_hndl, new).map_err(eio)?;
        if let Some(e) = self.st.eqs.get_mut(&c.eq_hndl) {
            e.reserved_fc = new;
        }
        Ok(EqAdjustReservedFcResp {
            reserved_fc: new as i32,
        })
    }
}
