//! Portal table entries (`cxi_pte.c`): allocation, mapping into domains, status, state changes.

use super::*;

impl Op<'_> {
    // ---- Portal table entries ----

    pub(crate) fn pte_alloc(&mut self, c: &PteAllocCmd) -> Result<PteAllocResp, Errno> {
        let l = self.lni(c.lni_hndl)?;
        let (rgid, pe) = (l.rgid, l.pe);
        self.check_eq(c.evtq_hndl)?;
        let opts = PtAllocOpts(c.opts);
        if opts.unknown_bits() != 0 {
            return Err(Errno::Einval);
        }
        if opts.contains(PtAllocOpts::ETHERNET) && !self.creds().admin {
            return Err(Errno::Eperm);
        }
        if opts.contains(PtAllocOpts::EN_MATCH_ON_VNI)
            && self.hw().generation() == Generation::Cassini1
        {
            return Err(Errno::Einval);
        }
        self.check_limit(c.lni_hndl, rsrc::PTE)?;
        let le_pool = self.service_of(c.lni_hndl)?.le_pool;
        let n = self.st.ptn.alloc().ok_or(Errno::Enospc)?;
        let cfg = PtlteConfig {
            opts: c.opts,
            eq: c.evtq_hndl,
            rgid,
            pe,
            le_pool,
        };
        if let Err(e) = self.hw().ptlte_enable(n, &cfg) {
            let _ = self.hw().ptlte_disable(n);
            self.st.ptn.free(n);
            return Err(eio(e));
        }
        self.eq_ref(c.evtq_hndl)?;
        self.st.ptes.insert(
            n,
            Pte {
                client: self.client,
                lni: c.lni_hndl,
                eq: c.evtq_hndl,
                maps: 0,
            },
        );
        svc_use(self.st, c.lni_hndl, rsrc::PTE, 1);
        lni_ref(self.st, c.lni_hndl, 1);
        Ok(PteAllocResp { pte_number: n })
    }

    pub(crate) fn pte_free(&mut self, c: &PteFreeCmd) -> Result<(), Errno> {
        if owned!(self.st.ptes, c.pte_number, self.client).maps > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_pte(self.st, c.pte_number);
        Ok(())
    }

    pub(crate) fn pte_map(&mut self, c: &PteMapCmd) -> Result<PteMapResp, Errno> {
        owned!(self.st.ptes, c.pte_number, self.client);
        let d = owned!(self.st.domains, c.domain_hndl, self.client);
        let (vni, pid) = (d.vni, d.pid);
        let vni_list_idx = self.st.vnis.get(&vni).map(|v| v.idx).ok_or(Errno::Einval)?;
        let key = match c.is_multicast {
            0 => {
                if c.pid_offset >= self.dev.info.pid_granule {
                    return Err(Errno::Einval);
                }
                let (dfa, index_ext) =
                    dfa::build_dfa(self.dev.info.nid, pid, self.dev.info.pid_bits, c.pid_offset);
                PortalKey {
                    index_ext: u32::from(index_ext),
                    endpoint: dfa::dfa_ep(dfa),
                    is_multicast: false,
                    vni_list_idx,
                }
            }
            1 => {
                if c.pid_offset >> 18 != 0 {
                    return Err(Errno::Einval);
                }
                PortalKey {
                    index_ext: (c.pid_offset >> 13) & 0x1f,
                    endpoint: c.pid_offset & 0x1fff,
                    is_multicast: true,
                    vni_list_idx,
                }
            }
            _ => return Err(Errno::Einval),
        };
        if self.st.pte_maps.values().any(|m| m.key == key) {
            return Err(Errno::Eexist);
        }
        let j = self.st.portal.alloc().ok_or(Errno::Enospc)?;
        if let Err(e) = self.hw().rmu_portal_set(j, &key, c.pte_number) {
            let _ = self.hw().rmu_portal_clear(j);
            self.st.portal.free(j);
            return Err(eio(e));
        }
        self.st.pte_maps.insert(
            j,
            PteMapping {
                client: self.client,
                pte: c.pte_number,
                domain: c.domain_hndl,
                key,
            },
        );
        if let Some(p) = self.st.ptes.get_mut(&c.pte_number) {
            p.maps += 1;
        }
        if let Some(d) = self.st.domains.get_mut(&c.domain_hndl) {
            d.maps += 1;
        }
        Ok(PteMapResp { pte_index: j })
    }

    pub(crate) fn pte_unmap(&mut self, c: &PteUnmapCmd) -> Result<(), Errno> {
        owned!(self.st.pte_maps, c.pte_index, self.client);
        self.dev.free_pte_map(self.st, c.pte_index);
        Ok(())
    }

    /// `cass_pt.c: cxi_pte_le_invalidate` walks the MST table for entries whose 16-bit
    /// buffer id and 2-bit list equal the request's, and the uAPI handler returns 0 for any
    /// PtlTE the client owns: a buffer id or list no entry can hold matches nothing and is
    /// not an error (libfabric's CXI provider passes its 64-bit MR key, truncated to 32 bits,
    /// as the buffer id: `cxip_mr.c: cxip_mr_disable_std`).
    pub(crate) fn pte_le_invalidate(&mut self, c: &PteLeInvalidateCmd) -> Result<(), Errno> {
        owned!(self.st.ptes, c.pte_index, self.client);
        if c.list > 3 || c.buffer_id > 0xffff {
            return Ok(());
        }
        let rc = u8::from(ReturnCode::MstCancelled);
        self.hw()
            .mst_cancel(c.pte_index, c.list, c.buffer_id, rc)
            .map(|_| ())
            .map_err(eio)
    }

    pub(crate) fn pte_status(
        &mut self,
        c: &PteStatusCmd,
        inout: &PteStatus,
    ) -> Result<PteStatus, Errno> {
        let p = owned!(self.st.ptes, c.pte_index, self.client);
        let lni = p.lni;
        let pe = self.st.lnis.get(&lni).map_or(0, |l| l.pe);
        let entry = self.hw().ptlte_entry(c.pte_index).map_err(eio)?;
        use firmware_spec::cassini::csr::fields::c_lpe_cfg_ptl_table as t;
        let le_pool = self.service_of(lni)?.le_pool;
        let (reserved, allocated, max) = self.hw().le_pool_usage(pe, le_pool).map_err(eio)?;
        let mut out = PteStatus {
            drop_count: t::DROP_COUNT.get(&entry) as u32,
            state: t::PTL_STATE.get(&entry) as u8,
            les_reserved: reserved.min(0xffff) as u16,
            les_allocated: allocated.min(0xffff) as u16,
            les_max: max.min(0xffff) as u16,
            ule_offsets: inout.ule_offsets,
            ule_count: 0,
            ..PteStatus::default()
        };
        // cass_pt.c `cxi_pte_status`: with an array, the unexpected list is walked; the
        // first `ule_count` remote offsets are copied and the total number of entries is
        // returned in `ule_count`.
        if inout.ule_offsets != 0 && t::UNEXP_LIST_VLD.get(&entry) != 0 {
            let bytes = u64::from(inout.ule_count) * 8;
            if self.user.is_none() && self.space()?.resolve(inout.ule_offsets, bytes).is_none() {
                return Err(Errno::Efault);
            }
            let mut addr = t::UNEXP_HEAD.get(&entry) as u32;
            let tail = t::UNEXP_TAIL.get(&entry) as u32;
            let mut n = 0u32;
            // Bounded by the LEs of a PE, whatever the list's links say.
            while n < lim::LES_PER_PE as u32 {
                let (offset, next, vld) = self.hw().ule_entry(pe, addr).map_err(eio)?;
                if !vld {
                    break;
                }
                if n < u32::from(inout.ule_count) {
                    self.copy_out(inout.ule_offsets + u64::from(n) * 8, &offset.to_le_bytes())?;
                }
                n += 1;
                if addr == tail {
                    break;
                }
                addr = next;
            }
            out.ule_count = n.min(u32::from(u16::MAX)) as u16;
        }
        Ok(out)
    }

    pub(crate) fn pte_transition_sm(&mut self, c: &PteTransitionSmCmd) -> Result<(), Errno> {
        owned!(self.st.ptes, c.pte_index, self.client);
        let (state, drops) = self.hw().ptlte_state(c.pte_index).map_err(eio)?;
        if state != u8::from(PtlteState::Disabled) {
            return Err(Errno::Einval);
        }
        if drops != c.drop_count {
            return Err(Errno::Eagain);
        }
        // The device checks the count again as it takes the new state: a drop between the
        // read above and the write leaves the PtlTE DISABLED.
        if self
            .hw()
            .ptlte_transition_sm(c.pte_index, c.drop_count)
            .map_err(eio)?
        {
            Ok(())
        } else {
            Err(Errno::Eagain)
        }
    }
}
