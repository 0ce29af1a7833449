//! Memory registration: `mem_register` (an MDD for the pages, through the MRT when it is in
//! use, within the job's limits).

use super::super::state::*;
use super::super::*;

impl Kgni {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mem_register(
        &self,
        st: &mut State,
        client: &KgniClient,
        cdm: CdmId,
        addr: u64,
        len: u64,
        dst_cq: Option<CqId>,
        flags: u32,
    ) -> Result<Response, KgniError> {
        let id = client.id;
        Self::attached_fma(st, id, cdm)?;
        let p = st.cdms.get(&cdm.0).map_or(0, |c| c.ptag);
        if len == 0 {
            return Err(KgniError::InvalidParam("zero-length registration"));
        }
        let end = addr
            .checked_add(len)
            .ok_or(KgniError::InvalidParam("registration range overflows"))?;
        let flags = MemFlags::from_bits(flags)
            .map_err(|_| KgniError::InvalidParam("unknown GNI_MEM flag bits"))?;
        let unsupported = MemFlags::USE_VMDH
            | MemFlags::USE_GART
            | MemFlags::PHYS_CONT
            | MemFlags::PHYS_SEGMENTS
            | MemFlags::MDD_CLONE
            | MemFlags::RESERVE_REGION
            | MemFlags::UPDATE_REGION
            | MemFlags::CUDA;
        if flags.bits() & unsupported.bits() != 0 {
            return Err(KgniError::Unsupported(
                "GNI_MEM flag not offered by this driver",
            ));
        }
        if let Some(cq) = dst_cq {
            let c = lookup(&mut st.cqs, id, Object::Cq, cq.0)?;
            if c.cdm != cdm.0 {
                return Err(KgniError::InvalidParam("the CQ belongs to another CDM"));
            }
        }
        let start = addr & !(PAGE_SIZE - 1);
        let end = end
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(KgniError::InvalidParam("registration range overflows"))?;
        let npages = (end - start) / PAGE_SIZE;
        if npages >= 1 << 28 {
            return Err(KgniError::InvalidParam(
                "registration larger than 2^28 pages",
            ));
        }
        let pinned = client
            .space
            .resolve(start, end - start)
            .ok_or(KgniError::Fault(
                "range not inside one buffer of the client",
            ))?;
        // Fault site `pin_fail`: the pages cannot be pinned (memory pressure).
        if st.faults.pin_fails() {
            return Err(KgniError::NoMemory);
        }
        let bus_start = pinned.bus_address(0);
        let bus_end = bus_start + (end - start);
        let job = st.jobs.get(&p).map(|_| p);
        if let Some(j) = st.jobs.get(&p)
            && !under_limit(j.limits.mdd_limit, j.usage.mdd)
        {
            return Err(KgniError::JobLimit(Resource::Mdd));
        }
        self.reclaim(st);
        let mdh = st
            .mdd_alloc
            .alloc()
            .ok_or(KgniError::NoResource(Resource::Mdd))?;
        let (mrt, mem_base, max_base) = if self.config.use_mrt {
            let psize = MRT_PAGE_SIZES[usize::from(self.config.mrt_page_code)];
            let first = bus_start & !(psize - 1);
            let n = (bus_end - first).div_ceil(psize) as u32;
            if let Some(j) = st.jobs.get(&p)
                && j.limits.mrt_limit >= 0
                && i64::from(j.usage.mrt) + i64::from(n) > i64::from(j.limits.mrt_limit)
            {
                st.mdd_alloc.free(mdh);
                return Err(KgniError::JobLimit(Resource::Mrt));
            }
            let Some(k) = st.mrt_alloc.alloc_contiguous(n) else {
                st.mdd_alloc.free(mdh);
                return Err(KgniError::NoResource(Resource::Mrt));
            };
            let mut res = Ok(());
            for j in 0..n {
                let Some(e) = MrtEntry::for_addr(first + u64::from(j) * psize) else {
                    res = Err(KgniError::InvalidParam("memory beyond the MRT's reach"));
                    break;
                };
                if let Err(e) = self.hw.write_mrt(k + j, &e) {
                    res = Err(e.into());
                    break;
                }
            }
            if let Err(e) = res {
                for j in 0..n {
                    let _ = self.hw.clear_mrt(k + j);
                }
                st.mrt_alloc.free_run(k, n);
                st.mdd_alloc.free(mdh);
                return Err(e);
            }
            let mrt_base = u64::from(k) * psize;
            (
                Some((k, n)),
                (mrt_base + (bus_start - first)) >> 12,
                (mrt_base + (bus_end - first) - 1) >> 12,
            )
        } else {
            (None, bus_start >> 12, (bus_end - 1) >> 12)
        };
        let read_only = flags.contains(MemFlags::READ_ONLY);
        let mut modes = MddModes::VALID;
        if !read_only {
            modes |= MddModes::WRITABLE;
        }
        if flags.contains(MemFlags::PI_FLUSH) {
            modes |= MddModes::FLUSH;
        }
        let mdd = MddDescriptor {
            ptag: u64::from(p),
            mem_base,
            mrt_enable: u64::from(mrt.is_some()),
            modes: u64::from(modes.bits()),
            max_base,
            cqh: dst_cq.map_or(0, |c| u64::from(c.0)),
        };
        st.entropy = (st.entropy + 1) & 0xFFF;
        let mut hflags = MemHandleFlags::NEW_FRMT;
        if read_only {
            hflags |= MemHandleFlags::READONLY;
        }
        if mrt.is_some() {
            hflags |= MemHandleFlags::MRT;
        }
        let built = MemHandle::build(&MemHandleInfo {
            va: start,
            mdh: mdh as u16,
            npages: npages as u32,
            page_shift: 12,
            flags: hflags.bits(),
            entropy: st.entropy,
        });
        let written = built
            .map_err(HwError::from)
            .and_then(|h| self.hw.write_mdd(mdh, &mdd).map(|_| h));
        let handle = match written {
            Ok(h) => h,
            Err(e) => {
                let _ = self.hw.invalidate_mdd(mdh);
                if let Some((k, n)) = mrt {
                    for j in 0..n {
                        let _ = self.hw.clear_mrt(k + j);
                    }
                    st.mrt_alloc.free_run(k, n);
                }
                st.mdd_alloc.free(mdh);
                return Err(e.into());
            }
        };
        if let Some(j) = st.jobs.get_mut(&p) {
            j.usage.mdd += 1;
            j.usage.mrt += mrt.map_or(0, |(_, n)| n);
        }
        st.regs.insert(
            mdh,
            Reg {
                owner: id,
                cdm: cdm.0,
                handle,
                va: start,
                len: end - start,
                read_only,
                mrt,
                dst_cq: dst_cq.map(|c| c.0),
                job,
                _pinned: pinned,
            },
        );
        Ok(Response::MemHandle(handle))
    }
}
