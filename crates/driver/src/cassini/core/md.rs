//! Memory descriptors and the ATU (`cxi_md.c`, `cass_atu.c`): ACs, map/unmap/update.

use super::*;

impl Op<'_> {
    // ---- Memory descriptors and the ATU ----

    pub(super) fn lni_ac(&mut self, lni: u32) -> Result<u32, Errno> {
        let l = self.lni(lni)?;
        if l.acid != 0 {
            return Ok(l.acid);
        }
        let rgid = l.rgid;
        self.check_limit(lni, rsrc::AC)?;
        let acid = self.st.acid.alloc().ok_or(Errno::Enospc)?;
        let cfg = &self.dev.config;
        let tables = match NtaTables::new(&self.dev.mem) {
            Ok(t) => t,
            Err(e) => {
                self.st.acid.free(acid);
                return Err(enomem(e));
            }
        };
        let iova = match PageAllocator::new(cfg.iova_base, cfg.iova_size) {
            Ok(a) => a,
            Err(_) => {
                self.st.acid.free(acid);
                return Err(Errno::Einval);
            }
        };
        let programmed = self
            .hw()
            .ac_enable(
                acid,
                TaMode::Nta,
                tables.root(),
                cfg.iova_base / PAGE_SIZE,
                cfg.iova_size / PAGE_SIZE,
            )
            .and_then(|()| self.hw().lac_set(rgid, 0, acid));
        if let Err(e) = programmed {
            let _ = self.hw().ac_disable(acid);
            self.st.acid.free(acid);
            return Err(eio(e));
        }
        self.st.acs.insert(
            acid,
            Ac {
                tables,
                iova,
                mds: 0,
            },
        );
        if let Some(l) = self.st.lnis.get_mut(&lni) {
            l.acid = acid;
        }
        svc_use(self.st, lni, rsrc::AC, 1);
        Ok(acid)
    }

    pub(super) fn check_map_flags(flags: u32) -> Result<MapFlags, Errno> {
        let f = MapFlags(flags);
        if f.unknown_bits() != 0 || f.contains(MapFlags::UNUSED) {
            return Err(Errno::Einval);
        }
        if f.contains(MapFlags::ATS)
            || f.contains(MapFlags::ATS_PT)
            || f.contains(MapFlags::ATS_DYN)
        {
            // No ATS on this platform.
            return Err(Errno::Einval);
        }
        if f.contains(MapFlags::DEVICE) {
            return Err(Errno::Eopnotsupp);
        }
        // Neither READ nor WRITE registers the pages with no access granted (cass_nta.c
        // builds leaf entries from the two flags alone): any NIC access is refused.
        Ok(f)
    }

    /// Write the page table entries for `[va, va + len)` (page aligned, inside user memory)
    /// at `iova`. Returns the pin.
    pub(super) fn map_range(
        &mut self,
        acid: u32,
        iova: u64,
        va: u64,
        len: u64,
        flags: MapFlags,
    ) -> Result<Pinned, Errno> {
        let pin = self.space()?.resolve(va, len).ok_or(Errno::Efault)?;
        // Fault site `pin_fail`: the pages cannot be pinned (get_user_pages under memory
        // pressure), and the request fails as the real driver's does.
        if self.dev.faults.lock().is_ok_and(|mut f| f.pin_fails()) {
            return Err(Errno::Enomem);
        }
        let ac = self.st.acs.get_mut(&acid).ok_or(Errno::Einval)?;
        let (r, w) = (
            flags.contains(MapFlags::READ),
            flags.contains(MapFlags::WRITE),
        );
        let mut off = 0;
        while off < len {
            if let Err(e) = ac.tables.map_page(iova + off, pin.bus_address(off), r, w) {
                let mut back = 0;
                while back < off {
                    let _ = ac.tables.unmap_page(iova + back);
                    back += PAGE_SIZE;
                }
                return Err(enomem(e));
            }
            off += PAGE_SIZE;
        }
        Ok(pin)
    }

    pub(crate) fn atu_map(&mut self, c: &AtuMapCmd) -> Result<AtuMapResp, Errno> {
        self.lni(c.lni)?;
        let flags = Self::check_map_flags(c.flags)?;
        if c.hints.page_shift != 0 && c.hints.page_shift != crate::cassini::atu::PAGE_SHIFT as i32 {
            return Err(Errno::Einval);
        }
        if c.hints.dmabuf_valid != 0 {
            return Err(Errno::Eopnotsupp);
        }
        if c.len == 0 {
            return Err(Errno::Einval);
        }
        let end = c.va.checked_add(c.len).ok_or(Errno::Einval)?;
        let va = c.va & !(PAGE_SIZE - 1);
        let end = end
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(Errno::Einval)?;
        let len = end - va;
        if len > self.dev.config.iova_size {
            return Err(Errno::Enospc);
        }
        let alloc_only = flags.contains(MapFlags::ALLOC_MD);
        if !alloc_only && self.space()?.resolve(va, len).is_none() {
            return Err(Errno::Efault);
        }
        let acid = self.lni_ac(c.lni)?;
        let id = match self.st.md_id.alloc() {
            Some(id) => id,
            None => {
                self.release_ac_if_unused(acid, c.lni);
                return Err(Errno::Enospc);
            }
        };
        let iova = match self
            .st
            .acs
            .get_mut(&acid)
            .map(|ac| ac.iova.alloc(len, PAGE_SIZE))
        {
            Some(Ok(r)) => r.start.0,
            _ => {
                self.st.md_id.free(id);
                self.release_ac_if_unused(acid, c.lni);
                return Err(Errno::Enospc);
            }
        };
        let (pins, mapped) = if alloc_only {
            (Vec::new(), Vec::new())
        } else {
            match self.map_range(acid, iova, va, len, flags) {
                Ok(p) => (vec![p], vec![(iova, len)]),
                Err(e) => {
                    if let Some(ac) = self.st.acs.get_mut(&acid) {
                        let _ = ac.iova.free(emu_core::memory::GuestRange::new(
                            emu_core::memory::GuestAddress(iova),
                            len,
                        ));
                    }
                    self.st.md_id.free(id);
                    self.release_ac_if_unused(acid, c.lni);
                    return Err(e);
                }
            }
        };
        if let Some(ac) = self.st.acs.get_mut(&acid) {
            ac.mds += 1;
        }
        self.st.mds.insert(
            id,
            MdObj {
                client: self.client,
                lni: c.lni,
                acid,
                va,
                len,
                iova,
                pins,
                mapped,
                refs: 0,
            },
        );
        lni_ref(self.st, c.lni, 1);
        Ok(AtuMapResp {
            id,
            pad0: 0,
            md: Md {
                iova,
                va,
                len,
                lac: 0,
                page_shift: crate::cassini::atu::PAGE_SHIFT as i32,
                huge_shift: crate::cassini::atu::PAGE_SHIFT as i32,
                id,
                ..Md::default()
            },
        })
    }

    pub(super) fn release_ac_if_unused(&mut self, acid: u32, lni: u32) {
        if self.st.acs.get(&acid).is_some_and(|a| a.mds == 0) {
            self.dev.free_ac(self.st, acid, lni);
        }
    }

    pub(crate) fn atu_unmap(&mut self, c: &AtuUnmapCmd) -> Result<(), Errno> {
        if owned!(self.st.mds, c.id, self.client).refs > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_md(self.st, c.id);
        Ok(())
    }

    pub(crate) fn atu_update_md(&mut self, c: &AtuUpdateMdCmd) -> Result<(), Errno> {
        let md = owned!(self.st.mds, c.id, self.client);
        let (acid, md_va, md_len, md_iova) = (md.acid, md.va, md.len, md.iova);
        let flags = Self::check_map_flags(c.flags)?;
        if c.len == 0 {
            return Err(Errno::Einval);
        }
        let end = c.va.checked_add(c.len).ok_or(Errno::Einval)?;
        let va = c.va & !(PAGE_SIZE - 1);
        let end = end
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(Errno::Einval)?;
        if va < md_va || end > md_va + md_len {
            return Err(Errno::Einval);
        }
        let at = md_iova + (va - md_va);
        let pin = self.map_range(acid, at, va, end - va, flags)?;
        self.hw().atu_invalidate(acid, md_iova).map_err(eio)?;
        if let Some(md) = self.st.mds.get_mut(&c.id) {
            md.pins.push(pin);
            md.mapped.push((at, end - va));
        }
        Ok(())
    }
}
