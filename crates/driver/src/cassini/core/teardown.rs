//! Teardown of single objects, without ownership checks: what closing a client, freeing
//! an object and resetting the device share.

use super::*;

impl CxiDevice {
    pub(super) fn free_pte_map(&self, st: &mut DevState, j: u32) {
        let Some(m) = st.pte_maps.remove(&j) else {
            return;
        };
        Self::log_hw(self.hw.rmu_portal_clear(j));
        st.portal.free(j);
        if let Some(p) = st.ptes.get_mut(&m.pte) {
            p.maps = p.maps.saturating_sub(1);
        }
        if let Some(d) = st.domains.get_mut(&m.domain) {
            d.maps = d.maps.saturating_sub(1);
        }
    }

    pub(super) fn free_pte(&self, st: &mut DevState, n: u32) {
        let Some(p) = st.ptes.remove(&n) else {
            return;
        };
        Self::log_hw(self.hw.ptlte_disable(n));
        st.ptn.free(n);
        if let Some(e) = st.eqs.get_mut(&p.eq) {
            e.refs = e.refs.saturating_sub(1);
        }
        svc_use(st, p.lni, rsrc::PTE, -1);
        lni_ref(st, p.lni, -1);
    }

    pub(super) fn free_cq(&self, st: &mut DevState, h: u32) {
        let Some(c) = st.cqs.remove(&h) else {
            return;
        };
        if c.tx {
            Self::log_hw(self.hw.txq_disable(c.n));
            st.txq.free(c.n);
            svc_use(st, c.lni, rsrc::TXQ, -1);
        } else {
            Self::log_hw(self.hw.tgq_disable(c.n));
            st.tgq.free(c.n);
            svc_use(st, c.lni, rsrc::TGQ, -1);
        }
        c.shared.revoke();
        for t in c.tokens {
            Self::drop_token(st, c.client, t);
        }
        if let Some(e) = st.eqs.get_mut(&c.eq) {
            e.refs = e.refs.saturating_sub(1);
        }
        lni_ref(st, c.lni, -1);
    }

    pub(super) fn free_ct(&self, st: &mut DevState, n: u32) {
        let Some(c) = st.cts.remove(&n) else {
            return;
        };
        Self::log_hw(self.hw.ct_disable(n));
        st.ctn.free(n);
        c.shared.revoke();
        Self::drop_token(st, c.client, c.token);
        svc_use(st, c.lni, rsrc::CT, -1);
        lni_ref(st, c.lni, -1);
    }

    pub(super) fn free_eq(&self, st: &mut DevState, n: u32) {
        let Some(e) = st.eqs.remove(&n) else {
            return;
        };
        Self::log_hw(self.hw.eq_disable(n));
        st.eqn.free(n);
        e.shared.revoke();
        Self::drop_token(st, e.client, e.token);
        if let Some(m) = st.mds.get_mut(&e.md) {
            m.refs = m.refs.saturating_sub(1);
        }
        for w in e.waits {
            if let Some(w) = st.waits.get_mut(&w) {
                w.refs = w.refs.saturating_sub(1);
            }
        }
        svc_use(st, e.lni, rsrc::EQ, -1);
        lni_ref(st, e.lni, -1);
    }

    pub(super) fn free_wait(&self, st: &mut DevState, id: u32) {
        let Some(w) = st.waits.remove(&id) else {
            return;
        };
        st.wait_vec.free(w.vector);
        lni_ref(st, w.lni, -1);
    }

    pub(super) fn free_md(&self, st: &mut DevState, id: u32) {
        let Some(md) = st.mds.remove(&id) else {
            return;
        };
        st.md_id.free(id);
        let mut ac_empty = false;
        if let Some(ac) = st.acs.get_mut(&md.acid) {
            // Only what was mapped (ranges of later updates may overlap earlier ones).
            let mut mapped = md.mapped.clone();
            mapped.sort_unstable();
            let mut done_to = 0;
            for (start, len) in mapped {
                let mut page = start.max(done_to);
                while page < start + len {
                    if let Err(e) = ac.tables.unmap_page(page) {
                        tracing::warn!(error = %e, "unmap of an MD page failed");
                    }
                    page += PAGE_SIZE;
                }
                done_to = done_to.max(start + len);
            }
            Self::log_hw(self.hw.atu_invalidate(md.acid, md.iova));
            let range =
                emu_core::memory::GuestRange::new(emu_core::memory::GuestAddress(md.iova), md.len);
            if let Err(e) = ac.iova.free(range) {
                tracing::warn!(error = %e, "IOVA free failed");
            }
            ac.mds = ac.mds.saturating_sub(1);
            ac_empty = ac.mds == 0;
        }
        drop(md.pins);
        if ac_empty {
            self.free_ac(st, md.acid, md.lni);
        }
        lni_ref(st, md.lni, -1);
    }

    pub(super) fn free_ac(&self, st: &mut DevState, acid: u32, lni: u32) {
        if st.acs.remove(&acid).is_none() {
            return;
        }
        if let Some(l) = st.lnis.get_mut(&lni) {
            l.acid = 0;
            let rgid = l.rgid;
            Self::log_hw(self.hw.lac_set(rgid, 0, 0));
        }
        Self::log_hw(self.hw.ac_disable(acid));
        Self::log_hw(self.hw.atu_invalidate(acid, 0));
        st.acid.free(acid);
        svc_use(st, lni, rsrc::AC, -1);
    }

    pub(super) fn free_domain(&self, st: &mut DevState, id: u32) {
        let Some(d) = st.domains.remove(&id) else {
            return;
        };
        st.domain_id.free(id);
        // The PID goes back to the VNI's table even when it was reserved: a domain on a
        // reserved PID consumes the reservation (`cxi_rx_profile_update_pid_table` clears the
        // bit when the domain is freed).
        st.pids.remove(&(d.vni, d.pid));
        self.vni_unref(st, d.vni);
        lni_ref(st, d.lni, -1);
    }

    pub(super) fn vni_unref(&self, st: &mut DevState, vni: u32) {
        let drop_it = match st.vnis.get_mut(&vni) {
            Some(v) => {
                v.refs = v.refs.saturating_sub(1);
                v.refs == 0
            }
            None => false,
        };
        if drop_it && let Some(v) = st.vnis.remove(&vni) {
            Self::log_hw(self.hw.rmu_vni_clear(v.idx));
            st.vni_list.free(v.idx);
        }
    }

    pub(super) fn free_cp(&self, st: &mut DevState, h: u32) {
        let Some(c) = st.cp_handles.remove(&h) else {
            return;
        };
        st.cp_hndl.free(h);
        if let Some(l) = st.lnis.get_mut(&c.lni) {
            l.lcids.free(c.lcid);
            let rgid = l.rgid;
            Self::log_hw(self.hw.lcid_set(rgid, c.lcid, 0));
        }
        let gone = match st.cps.get_mut(&c.cp) {
            Some(e) => {
                e.refs = e.refs.saturating_sub(1);
                e.refs == 0
            }
            None => false,
        };
        if gone {
            st.cps.remove(&c.cp);
            Self::log_hw(self.hw.cp_clear(c.cp));
            st.cpn.free(c.cp);
        }
        lni_ref(st, c.lni, -1);
    }

    pub(super) fn free_lni(&self, st: &mut DevState, id: u32) {
        let Some(l) = st.lnis.remove(&id) else {
            return;
        };
        st.pids.retain(|_, o| o.lni != id);
        Self::log_hw(self.hw.rgid_clear(l.rgid));
        st.rgid.free(l.rgid);
        if let Some(s) = st.services.get_mut(&l.svc) {
            s.lnis = s.lnis.saturating_sub(1);
        }
    }
}
