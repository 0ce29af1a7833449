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
        // A service that reserves LEs gets an LE pool of its own (cass_svc.c; 16 per PE,
        // pool 0 shared by the others).
        let wants_le =
            c.svc_desc.bits & svcbits::RESOURCE_LIMITS != 0 && c.svc_desc.limits[rsrc::LE].res > 0;
        let le_pool = if wants_le {
            let Some(p) = self.st.le_pool.alloc() else {
                if tle_pool != 0 {
                    self.st.tle_pool.free(tle_pool);
                }
                let fail = SvcFailInfo {
                    no_le_pools: 1,
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
            if le_pool != 0 {
                self.st.le_pool.free(le_pool);
            }
            return Err((Errno::Enospc, SvcFailInfo::default()));
        };
        let mut desc = c.svc_desc;
        desc.svc_id = id;
        // cass_svc.c: a service with restricted VNIs is enabled at once ("for backwards
        // compatibility"); one without starts disabled until its VNI range is set and it is
        // enabled.
        if desc.bits & svcbits::RESTRICTED_VNIS == 0 {
            desc.bits &= !svcbits::ENABLE;
        } else {
            desc.bits |= svcbits::ENABLE;
        }
        let mut svc = Service::new(desc, tle_pool);
        svc.le_pool = le_pool;
        self.st.services.insert(id, svc);
        if le_pool != 0 {
            let l = desc.limits[rsrc::LE];
            if let Err(e) = self
                .hw()
                .le_pool_set(le_pool, u32::from(l.res), u32::from(l.max))
            {
                return Err((eio(e), SvcFailInfo::default()));
            }
        }
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
        // cxi_svc_update: whether a service has resource limits cannot change.
        if (s.desc.bits ^ c.svc_desc.bits) & svcbits::RESOURCE_LIMITS != 0 {
            return Err((Errno::Einval, SvcFailInfo::default()));
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
        // cass_svc.c: the default service is never destroyed.
        if c.svc_id == lim::CXI_DEFAULT_SVC_ID {
            return Err(Errno::Einval);
        }
        if s.lnis > 0 {
            return Err(Errno::Ebusy);
        }
        let pool = s.tle_pool;
        let le_pool = s.le_pool;
        self.st.services.remove(&c.svc_id);
        self.st.svc_id.free(c.svc_id);
        if le_pool != 0 {
            self.st.le_pool.free(le_pool);
            self.hw().le_pool_set(le_pool, 0, 0).map_err(eio)?;
        }
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
            let size = std::mem::size_of::<T>() as u64;
            for (i, it) in items.iter().enumerate() {
                let at = c.list.checked_add(i as u64 * size).ok_or(Errno::Efault)?;
                self.copy_out(at, it.as_bytes())?;
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

    /// SVC_SET_VNI_RANGE (cass_svc.c `cxi_svc_set_vni_range`): a service without restricted
    /// VNIs gets one range, a power-of-two number of valid VNIs starting at a multiple of
    /// its size; a range overlapping another service's VNIs is `EEXIST` unless both are a
    /// single VNI (`vni_overlap_test`).
    pub(crate) fn svc_set_vni_range(&mut self, c: &SvcVniRangeCmd) -> Result<(), Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        if s.desc.bits & svcbits::RESTRICTED_VNIS != 0 {
            return Err(Errno::Einval);
        }
        let valid = |v: u32| v != 0 && v <= 0xffff;
        if !valid(c.vni_min) || !valid(c.vni_max) || c.vni_max < c.vni_min {
            return Err(Errno::Einval);
        }
        let size = c.vni_max - c.vni_min + 1;
        if !size.is_power_of_two() || c.vni_min & (size - 1) != 0 {
            return Err(Errno::Einval);
        }
        let overlap = self.st.services.values().any(|o| {
            vni_sets(o)
                .iter()
                .any(|&(lo, hi)| lo <= c.vni_max && c.vni_min <= hi && !(size == 1 && lo == hi))
        });
        if overlap {
            return Err(Errno::Eexist);
        }
        let s = self.st.services.get_mut(&c.svc_id).ok_or(Errno::Einval)?;
        s.vni_range = Some((c.vni_min, c.vni_max));
        s.desc.num_vld_vnis = 1;
        Ok(())
    }

    /// SVC_GET_VNI_RANGE: `EINVAL` for a service with restricted VNIs, `ENOENT` before a
    /// range was set.
    pub(crate) fn svc_get_vni_range(
        &self,
        c: &SvcVniRangeCmd,
    ) -> Result<SvcGetVniRangeResp, Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        if s.desc.bits & svcbits::RESTRICTED_VNIS != 0 || s.desc.num_vld_vnis == 0 {
            return Err(Errno::Einval);
        }
        let (vni_min, vni_max) = s.vni_range.ok_or(Errno::Enoent)?;
        Ok(SvcGetVniRangeResp { vni_min, vni_max })
    }

    /// SVC_SET_EXCLUSIVE_CP: only for a service with a VNI range, and not while enabled
    /// (`cxi_tx_profile_set_exclusive_cp`: `EBUSY`).
    pub(crate) fn svc_set_exclusive_cp(&mut self, c: &SvcSetExclusiveCpCmd) -> Result<(), Errno> {
        let s = self.st.services.get_mut(&c.svc_id).ok_or(Errno::Einval)?;
        if s.desc.bits & svcbits::RESTRICTED_VNIS != 0 || s.vni_range.is_none() {
            return Err(Errno::Einval);
        }
        if s.desc.bits & svcbits::ENABLE != 0 {
            return Err(Errno::Ebusy);
        }
        s.exclusive_cp = c.exclusive_cp != 0;
        Ok(())
    }

    /// SVC_GET_EXCLUSIVE_CP: the flag of the service's first transmit profile; `ENOENT`
    /// for a service with neither restricted VNIs nor a range.
    pub(crate) fn svc_get_exclusive_cp(
        &self,
        c: &SvcIdCmd,
    ) -> Result<SvcGetExclusiveCpResp, Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        if s.desc.bits & svcbits::RESTRICTED_VNIS == 0 && s.vni_range.is_none() {
            return Err(Errno::Enoent);
        }
        Ok(SvcGetExclusiveCpResp {
            exclusive_cp: u8::from(s.exclusive_cp),
        })
    }

    /// SVC_SET_NETNS: only a service whose members are restricted to none by uid or gid
    /// takes a network namespace (`EEXIST` otherwise, as `cxi_svc_set_netns`).
    pub(crate) fn svc_set_netns(&mut self, c: &SvcSetNetnsCmd) -> Result<(), Errno> {
        let s = self.st.services.get_mut(&c.svc_id).ok_or(Errno::Einval)?;
        let by_id = s.desc.members.iter().any(|m| m.kind == 1 || m.kind == 2);
        if s.desc.bits & svcbits::RESTRICTED_MEMBERS == 0 || by_id {
            return Err(Errno::Eexist);
        }
        s.netns = Some(c.netns);
        Ok(())
    }

    /// SVC_GET_NETNS: `EINVAL` when the service has none.
    pub(crate) fn svc_get_netns(&self, c: &SvcIdCmd) -> Result<SvcGetValueResp, Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        let value = s.netns.ok_or(Errno::Einval)?;
        Ok(SvcGetValueResp { value })
    }
}

/// The VNIs a service holds, as inclusive ranges: each restricted VNI, or its range.
fn vni_sets(s: &Service) -> Vec<(u32, u32)> {
    if s.desc.bits & svcbits::RESTRICTED_VNIS != 0 {
        let n = usize::from(s.desc.num_vld_vnis).min(lim::CXI_SVC_MAX_VNIS);
        s.desc.vnis[..n]
            .iter()
            .map(|&v| (u32::from(v), u32::from(v)))
            .collect()
    } else {
        s.vni_range.into_iter().collect()
    }
}
