//! Services (`cxi_service.c`): descriptors, limits, enable, lists, LPR.

use super::*;

impl Op<'_> {
    // ---- Services ----

    pub(super) fn validate_desc(
        &self,
        d: &SvcDesc,
        except: Option<u32>,
    ) -> Result<(), (Errno, SvcFailInfo)> {
        if d.bits & svcbits::RESTRICTED_VNIS != 0
            && (d.num_vld_vnis == 0 || usize::from(d.num_vld_vnis) > lim::CXI_SVC_MAX_VNIS)
        {
            return Err((Errno::Einval, SvcFailInfo::default()));
        }
        if d.bits & svcbits::RESTRICTED_MEMBERS != 0 && d.members.iter().any(|m| m.kind > 3) {
            return Err((Errno::Einval, SvcFailInfo::default()));
        }
        if d.bits & svcbits::RESOURCE_LIMITS != 0 {
            let totals = device_limits();
            let mut fail = SvcFailInfo::default();
            let mut short = false;
            for (t, l) in d.limits.iter().enumerate() {
                if l.res > l.max || l.max > totals[t] {
                    return Err((Errno::Einval, SvcFailInfo::default()));
                }
                let reserved: u32 = self
                    .st
                    .services
                    .iter()
                    .filter(|(id, s)| {
                        // The default service's TLE reservation counts although it has no
                        // resource limits.
                        Some(**id) != except
                            && (s.desc.bits & svcbits::RESOURCE_LIMITS != 0 || t == rsrc::TLE)
                    })
                    .map(|(_, s)| u32::from(s.desc.limits[t].res))
                    .sum();
                let avail = u32::from(totals[t]).saturating_sub(reserved);
                if u32::from(l.res) > avail {
                    fail.rsrc_avail[t] = avail.min(0xffff) as u16;
                    short = true;
                }
            }
            if short {
                return Err((Errno::Enospc, fail));
            }
        }
        Ok(())
    }

    pub(crate) fn svc_alloc(
        &mut self,
        c: &SvcAllocCmd,
    ) -> Result<SvcAllocResp, (Errno, SvcFailInfo)> {
        self.validate_desc(&c.svc_desc, None)?;
        let wants_pool =
            c.svc_desc.bits & svcbits::RESOURCE_LIMITS != 0 && c.svc_desc.limits[rsrc::TLE].max > 0;
        let tle_pool = if wants_pool {
            let Some(p) = self.st.tle_pool.alloc() else {
                let fail = SvcFailInfo {
                    no_tle_pools: 1,
                    ..SvcFailInfo::default()
                };
                return Err((Errno::Enospc, fail));
            };
            p
        } else {
            0
        };
        let Some(id) = self.st.svc_id.alloc() else {
            if tle_pool != 0 {
                self.st.tle_pool.free(tle_pool);
            }
            return Err((Errno::Enospc, SvcFailInfo::default()));
        };
        let mut desc = c.svc_desc;
        desc.svc_id = id;
        self.st.services.insert(
            id,
            Service {
                desc,
                lnis: 0,
                in_use: [0; 8],
                lpr: 1,
                tle_pool,
            },
        );
        if tle_pool != 0
            && let Err(e) = program_tle_pools(self.hw(), self.st)
        {
            return Err((eio(e), SvcFailInfo::default()));
        }
        Ok(SvcAllocResp {
            svc_id: id,
            fail_info: SvcFailInfo::default(),
        })
    }

    pub(crate) fn svc_update(
        &mut self,
        c: &SvcUpdateCmd,
    ) -> Result<SvcUpdateResp, (Errno, SvcFailInfo)> {
        let id = c.svc_desc.svc_id;
        let s = self
            .st
            .services
            .get(&id)
            .ok_or((Errno::Einval, SvcFailInfo::default()))?;
        if s.lnis > 0 {
            return Err((Errno::Ebusy, SvcFailInfo::default()));
        }
        self.validate_desc(&c.svc_desc, Some(id))?;
        let mut pool = 0;
        if let Some(s) = self.st.services.get_mut(&id) {
            s.desc = c.svc_desc;
            pool = s.tle_pool;
        }
        if pool != 0 {
            program_tle_pools(self.hw(), self.st).map_err(|e| (eio(e), SvcFailInfo::default()))?;
        }
        Ok(SvcUpdateResp::default())
    }

    pub(crate) fn svc_destroy(&mut self, c: &SvcDestroyCmd) -> Result<(), Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        if s.desc.bits & svcbits::IS_SYSTEM_SVC != 0 && c.svc_id == lim::CXI_DEFAULT_SVC_ID {
            return Err(Errno::Einval);
        }
        if s.lnis > 0 {
            return Err(Errno::Ebusy);
        }
        let pool = s.tle_pool;
        self.st.services.remove(&c.svc_id);
        self.st.svc_id.free(c.svc_id);
        if pool != 0 {
            self.st.tle_pool.free(pool);
            program_tle_pools(self.hw(), self.st).map_err(eio)?;
        }
        Ok(())
    }

    pub(crate) fn svc_enable(&mut self, c: &SvcEnableCmd) -> Result<(), Errno> {
        if c.enable > 1 {
            return Err(Errno::Einval);
        }
        let s = self.st.services.get_mut(&c.svc_id).ok_or(Errno::Einval)?;
        if c.enable == 1 {
            s.desc.bits |= svcbits::ENABLE;
        } else {
            s.desc.bits &= !svcbits::ENABLE;
        }
        Ok(())
    }

    pub(crate) fn svc_get(&self, c: &SvcIdCmd) -> Result<SvcDesc, Errno> {
        Ok(self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?.desc)
    }

    pub(super) fn rsrc_use(id: u32, s: &Service) -> RsrcUse {
        RsrcUse {
            svc_id: id,
            tle_pool_id: s.tle_pool,
            in_use: s.in_use,
        }
    }

    pub(crate) fn svc_rsrc_get(&self, c: &SvcIdCmd) -> Result<RsrcUse, Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        Ok(Self::rsrc_use(c.svc_id, s))
    }

    pub(super) fn copy_list<T: zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        c: &SvcListGetCmd,
        items: &[T],
    ) -> Result<SvcListGetResp, Errno> {
        let total = items.len() as u32;
        if c.count >= total && total > 0 {
            let space = self.space()?;
            let size = std::mem::size_of::<T>() as u64;
            for (i, it) in items.iter().enumerate() {
                let at = c.list.checked_add(i as u64 * size).ok_or(Errno::Efault)?;
                space.copy_to_user(at, it.as_bytes()).ok_or(Errno::Efault)?;
            }
        }
        Ok(SvcListGetResp { count: total })
    }

    pub(crate) fn svc_list_get(&self, c: &SvcListGetCmd) -> Result<SvcListGetResp, Errno> {
        let items: Vec<SvcDesc> = self.st.services.values().map(|s| s.desc).collect();
        self.copy_list(c, &items)
    }

    pub(crate) fn svc_rsrc_list_get(&self, c: &SvcListGetCmd) -> Result<SvcListGetResp, Errno> {
        let items: Vec<RsrcUse> = self
            .st
            .services
            .iter()
            .map(|(id, s)| Self::rsrc_use(*id, s))
            .collect();
        self.copy_list(c, &items)
    }

    pub(crate) fn svc_set_lpr(&mut self, c: &SvcLprCmd) -> Result<(), Errno> {
        if c.lnis_per_rgid == 0 || c.lnis_per_rgid > lim::C_NUM_LACS as u32 {
            return Err(Errno::Einval);
        }
        let s = self.st.services.get_mut(&c.svc_id).ok_or(Errno::Einval)?;
        if s.lnis > 0 {
            return Err(Errno::Ebusy);
        }
        s.lpr = c.lnis_per_rgid;
        Ok(())
    }

    pub(crate) fn svc_get_lpr(&self, c: &SvcLprCmd) -> Result<SvcGetValueResp, Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        Ok(SvcGetValueResp { value: s.lpr })
    }
}
