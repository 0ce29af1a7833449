//! The request handlers: every uAPI request checked against the caller's ownership.

use super::state::*;
use super::*;

impl Kgni {
    // ---- requests ------------------------------------------------------------------------

    pub(super) fn handle(&self, client: &KgniClient, req: Request) -> Result<Response, KgniError> {
        match req {
            Request::CqWait { cq, timeout } => return self.cq_wait(client.id, cq, timeout),
            Request::PostDataWait { ep, timeout } => {
                return self.dgram_wait(client.id, ep, timeout);
            }
            _ => {}
        }
        let mut st = self.lock();
        let st = &mut *st;
        let id = client.id;
        match req {
            Request::ConfigureJob(job) => self.configure_job(st, client, job),
            Request::ReleaseJob { ptag, cookie } => self.release_job(st, client, ptag, cookie),
            Request::CdmCreate {
                inst_id,
                ptag,
                cookie,
                modes,
            } => self.cdm_create(st, client, inst_id, ptag, cookie, modes),
            Request::CdmDestroy { cdm } => {
                lookup(&mut st.cdms, id, Object::Cdm, cdm.0)?;
                self.teardown_cdm(st, cdm.0);
                Ok(Response::Done)
            }
            Request::CdmAttach { cdm, device_id } => self.cdm_attach(st, client, cdm, device_id),
            Request::FmaSetCq { cdm, cq } => self.fma_set_cq(st, id, cdm, cq),
            Request::CqCreate {
                cdm,
                entry_count,
                delay_count,
                mode,
            } => self.cq_create(st, id, cdm, entry_count, delay_count, mode),
            Request::CqDestroy { cq } => {
                let c = lookup(&mut st.cqs, id, Object::Cq, cq.0)?;
                if c.users > 0 {
                    return Err(KgniError::Busy(
                        "the CQ is used by an endpoint or a memory registration",
                    ));
                }
                self.destroy_cq(st, cq.0);
                Ok(Response::Done)
            }
            Request::MemRegister {
                cdm,
                addr,
                len,
                dst_cq,
                flags,
            } => self.mem_register(st, client, cdm, addr, len, dst_cq, flags),
            Request::MemDeregister { cdm, handle } => {
                lookup(&mut st.cdms, id, Object::Cdm, cdm.0)?;
                let info = handle
                    .decode()
                    .map_err(|_| KgniError::InvalidParam("corrupt memory handle"))?;
                let mdh = u32::from(info.mdh);
                let r = lookup(&mut st.regs, id, Object::MemHandle, mdh)?;
                if r.handle != handle || r.cdm != cdm.0 {
                    return Err(KgniError::NoSuchHandle {
                        kind: Object::MemHandle,
                        handle: u64::from(mdh),
                    });
                }
                self.deregister(st, mdh);
                Ok(Response::Done)
            }
            Request::EpCreate { cdm, cq } => self.ep_create(st, id, cdm, cq),
            Request::EpBind {
                ep,
                remote_addr,
                remote_id,
            } => self.ep_bind(st, id, ep, remote_addr, remote_id),
            Request::EpUnbind { ep } => {
                let e = lookup(&mut st.eps, id, Object::Endpoint, ep.0)?;
                if e.bound.is_none() {
                    return Err(KgniError::InvalidState("the endpoint is not bound"));
                }
                if st.matcher.post_of(u64::from(ep.0)).is_some() {
                    return Err(KgniError::NotDone);
                }
                if let Some(e) = st.eps.get_mut(&ep.0) {
                    e.bound = None;
                }
                Ok(Response::Done)
            }
            Request::EpDestroy { ep } => {
                lookup(&mut st.eps, id, Object::Endpoint, ep.0)?;
                self.destroy_ep(st, ep.0);
                Ok(Response::Done)
            }
            Request::EpSetEventData { ep, local, remote } => {
                let e = lookup(&mut st.eps, id, Object::Endpoint, ep.0)?;
                e.event_local = Some(local);
                e.event_remote = remote;
                Ok(Response::Done)
            }
            Request::PostRdma { ep, desc } => self.post_rdma(st, client, ep, &desc),
            Request::EpPostData {
                ep,
                id: uid,
                data,
                out_len,
            } => self.post_data(st, id, ep, uid, data, out_len),
            Request::PostDataTest { ep } => {
                self.service_locked(st);
                self.dgram_collect(st, id, ep)?.ok_or(KgniError::NotDone)
            }
            Request::PostDataTestById { cdm, id: uid } => {
                self.service_locked(st);
                let ep = self.ep_by_dgram_id(st, id, cdm, uid)?;
                self.dgram_collect(st, id, ep)?.ok_or(KgniError::NotDone)
            }
            Request::PostDataProbe { cdm } => {
                self.service_locked(st);
                lookup(&mut st.cdms, id, Object::Cdm, cdm.0)?;
                let (remote_addr, remote_id) = st
                    .matcher
                    .probe(u64::from(cdm.0))
                    .ok_or(KgniError::NoMatch)?;
                Ok(Response::Probe {
                    remote_addr,
                    remote_id,
                })
            }
            Request::PostDataProbeById { cdm } => {
                self.service_locked(st);
                lookup(&mut st.cdms, id, Object::Cdm, cdm.0)?;
                st.matcher
                    .probe_by_id(u64::from(cdm.0))
                    .map(Response::ProbeId)
                    .ok_or(KgniError::NoMatch)
            }
            Request::PostDataCancel { ep } => self.dgram_cancel(st, id, ep),
            Request::PostDataCancelById { cdm, id: uid } => {
                let ep = self.ep_by_dgram_id(st, id, cdm, uid)?;
                self.dgram_cancel(st, id, ep)
            }
            Request::Mmap { token } => self.mmap(st, id, token),
            Request::CqWait { .. } | Request::PostDataWait { .. } => {
                Err(KgniError::InvalidState("wait handled above"))
            }
        }
    }

    pub(super) fn configure_job(
        &self,
        st: &mut State,
        client: &KgniClient,
        job: JobConfig,
    ) -> Result<Response, KgniError> {
        if !client.privileged {
            return Err(KgniError::Permission("configuring jobs needs privilege"));
        }
        if job.ptag == 0 {
            return Err(KgniError::InvalidParam("ptag 0 is invalid"));
        }
        if st.jobs.contains_key(&job.ptag) {
            return Err(KgniError::Busy("the ptag already has a job"));
        }
        if job.ntt.len() as u64 > LOGICAL_PES {
            return Err(KgniError::InvalidParam("NTT larger than 16384 PEs"));
        }
        if job.ntt.iter().any(|p| *p > limits::PE_MASK) {
            return Err(KgniError::InvalidParam("NTT PE wider than 18 bits"));
        }
        let ntt = if job.ntt.is_empty() {
            None
        } else {
            let entries = job.ntt.len().div_ceil(2) as u32;
            let first = st
                .ntt_alloc
                .alloc_contiguous(entries)
                .ok_or(KgniError::NoResource(Resource::Ntt))?;
            for e in 0..entries {
                let pe = |k: usize| job.ntt.get(k).copied().map_or(0, u64::from);
                let entry = NttEntry {
                    nic_pe0: pe(2 * e as usize),
                    nic_pe1: pe(2 * e as usize + 1),
                    ..NttEntry::default()
                };
                if let Err(err) = self.hw.write_ntt(first + e, &entry) {
                    st.ntt_alloc.free_run(first, entries);
                    return Err(err.into());
                }
            }
            Some(NttGroup {
                first_entry: first,
                entries,
                table: job.ntt,
            })
        };
        st.job_generation += 1;
        st.jobs.insert(
            job.ptag,
            Job {
                cookie: job.cookie,
                owner: client.id,
                limits: job.limits,
                ntt,
                usage: JobUse::default(),
                attached: 0,
                released: false,
                generation: st.job_generation,
            },
        );
        Ok(Response::Done)
    }

    pub(super) fn release_job(
        &self,
        st: &mut State,
        client: &KgniClient,
        p: u8,
        cookie: u32,
    ) -> Result<Response, KgniError> {
        if !client.privileged {
            return Err(KgniError::Permission("releasing jobs needs privilege"));
        }
        let j = st
            .jobs
            .get_mut(&p)
            .filter(|j| j.cookie == cookie && !j.released)
            .ok_or(KgniError::NoSuchHandle {
                kind: Object::Job,
                handle: u64::from(p),
            })?;
        if j.attached > 0 {
            return Err(KgniError::Busy("CDMs are attached to the job"));
        }
        j.released = true;
        self.maybe_free_job(st, p);
        Ok(Response::Done)
    }

    pub(super) fn cdm_create(
        &self,
        st: &mut State,
        client: &KgniClient,
        inst_id: u32,
        p: u8,
        cookie: u32,
        modes: u32,
    ) -> Result<Response, KgniError> {
        let modes = check_cdm_modes(modes)?;
        if p == 0 {
            return Err(KgniError::InvalidParam("ptag 0 is invalid"));
        }
        if !client.privileged && !ptag::is_user(p) {
            return Err(KgniError::Permission("ptag outside the user range"));
        }
        let id = st
            .cdm_alloc
            .alloc()
            .ok_or(KgniError::NoResource(Resource::Cdm))?;
        st.cdms.insert(
            id,
            Cdm {
                owner: client.id,
                inst_id,
                ptag: p,
                cookie,
                modes,
                fma: None,
            },
        );
        Ok(Response::Cdm(CdmId(id)))
    }

    pub(super) fn cdm_attach(
        &self,
        st: &mut State,
        client: &KgniClient,
        cdm: CdmId,
        device_id: i32,
    ) -> Result<Response, KgniError> {
        let c = lookup(&mut st.cdms, client.id, Object::Cdm, cdm.0)?;
        if c.fma.is_some() {
            return Err(KgniError::InvalidState("the CDM is already attached"));
        }
        if device_id != -1 && u32::try_from(device_id).ok() != Some(self.config.device_id) {
            return Err(KgniError::InvalidParam("no such device"));
        }
        let (p, cookie, inst, modes) = (c.ptag, c.cookie, c.inst_id, c.modes);
        let job = st.jobs.get(&p);
        let needs_job = !client.privileged || ptag::is_user(p);
        if needs_job {
            match job {
                Some(j) if j.cookie == cookie && !j.released => {}
                Some(j) if j.cookie != cookie => {
                    return Err(KgniError::Permission(
                        "cookie does not match the ptag's job",
                    ));
                }
                _ => return Err(KgniError::Permission("no job with this ptag")),
            }
        }
        let dup = st
            .cdms
            .iter()
            .any(|(i, o)| *i != cdm.0 && o.fma.is_some() && o.ptag == p && o.inst_id == inst);
        if dup {
            return Err(KgniError::InvalidParam(
                "inst_id already attached in this domain",
            ));
        }
        let group = job.and_then(Job::pe_group);
        let job_key = job.map(|_| p);
        // FMA_SHARED: reuse a descriptor this client already has for the ptag.
        let shared = if modes.contains(CdmMode::FMA_SHARED) {
            st.fmas
                .iter()
                .find(|(_, f)| f.owner == client.id && f.ptag == p)
                .map(|(i, _)| *i)
        } else {
            None
        };
        let fma = match shared {
            Some(i) => {
                if let Some(f) = st.fmas.get_mut(&i) {
                    f.sharers += 1;
                }
                i
            }
            None => self.new_fma(st, client, p, group, job_key, modes)?,
        };
        if let Some(j) = st.jobs.get_mut(&p) {
            j.attached += 1;
        }
        if let Some(c) = st.cdms.get_mut(&cdm.0) {
            c.fma = Some(fma);
        }
        let window = st.fmas.get(&fma).map_or(0, |f| f.window);
        Ok(Response::Attached(AttachInfo {
            nic_addr: self.pe,
            device_id: self.config.device_id,
            fma: FmaId(fma),
            fma_page: MmapToken::new(MapKind::FmaUserPage, fma),
            put_wc: MmapToken::new(MapKind::FmaPutWc, fma),
            get: MmapToken::new(MapKind::FmaGet, fma),
            put_uc: MmapToken::new(MapKind::FmaPutUc, fma),
            window_size: window,
            ntt: group,
        }))
    }

    pub(super) fn new_fma(
        &self,
        st: &mut State,
        client: &KgniClient,
        p: u8,
        group: Option<(u32, u32)>,
        job: Option<u8>,
        modes: CdmMode,
    ) -> Result<u32, KgniError> {
        if let Some(j) = job.and_then(|k| st.jobs.get(&k))
            && !under_limit(j.limits.fma_limit, j.usage.fma)
        {
            return Err(KgniError::JobLimit(Resource::Fma));
        }
        // Descriptors, CQs and MDDs freed while work was in flight come back here.
        self.reclaim(st);
        let id = if client.privileged {
            st.fma_os_alloc.alloc().or_else(|| st.fma_alloc.alloc())
        } else {
            st.fma_alloc.alloc()
        }
        .ok_or(KgniError::NoResource(Resource::Fma))?;
        let mut desc = FmaDescriptor {
            src_ptag: u64::from(p),
            dest_ptag: u64::from(p),
            mode2: u64::from(FmaMode2::FMA_ENABLE.bits()),
            ..FmaDescriptor::default()
        };
        if let Some((base, n)) = group {
            desc.mode3 = u64::from(FmaMode3::NTT_ENABLE.bits());
            desc.pe_base = u64::from(base);
            desc.num_pes = u64::from(n);
        }
        if let Err(e) = self.hw.fma_configure(id, &desc, PrivMask::DEFAULT) {
            if !st.fma_alloc.free(id) {
                st.fma_os_alloc.free(id);
            }
            return Err(e.into());
        }
        let window = if modes.contains(CdmMode::FMA_SMALL_WINDOW) {
            limits::FMA_SMALL_WINDOW
        } else {
            firmware_spec::gemini::fma::WINDOW_SIZE
        };
        if let Some(j) = job.and_then(|k| st.jobs.get_mut(&k)) {
            j.usage.fma += 1;
        }
        st.fmas.insert(
            id,
            Fma {
                owner: client.id,
                ptag: p,
                sharers: 1,
                desc,
                window,
                map: MapShared::new(),
                job,
            },
        );
        Ok(id)
    }

    pub(super) fn attached_fma(
        st: &mut State,
        client: ClientId,
        cdm: CdmId,
    ) -> Result<u32, KgniError> {
        lookup(&mut st.cdms, client, Object::Cdm, cdm.0)?
            .fma
            .ok_or(KgniError::InvalidState("the CDM is not attached"))
    }

    pub(super) fn fma_set_cq(
        &self,
        st: &mut State,
        client: ClientId,
        cdm: CdmId,
        cq: Option<CqId>,
    ) -> Result<Response, KgniError> {
        let fma = Self::attached_fma(st, client, cdm)?;
        if let Some(cq) = cq {
            let c = lookup(&mut st.cqs, client, Object::Cq, cq.0)?;
            if c.cdm != cdm.0 {
                return Err(KgniError::InvalidParam("the CQ belongs to another CDM"));
            }
        }
        let f = st.fmas.get_mut(&fma).ok_or(KgniError::NoSuchHandle {
            kind: Object::Fma,
            handle: u64::from(fma),
        })?;
        f.desc.cq_hndl = cq.map_or(0, |c| u64::from(c.0));
        self.hw.fma_write_qw3(fma, &f.desc)?;
        Ok(Response::Done)
    }

    pub(super) fn cq_create(
        &self,
        st: &mut State,
        client: ClientId,
        cdm: CdmId,
        entry_count: u32,
        delay_count: u32,
        mode: u32,
    ) -> Result<Response, KgniError> {
        Self::attached_fma(st, client, cdm)?;
        let p = st.cdms.get(&cdm.0).map_or(0, |c| c.ptag);
        if entry_count == 0 {
            return Err(KgniError::InvalidParam("a CQ needs at least one entry"));
        }
        if entry_count > self.config.max_cq_entries {
            return Err(KgniError::InvalidParam("CQ entry count above the limit"));
        }
        let mode =
            CqMode::from_bits(mode).map_err(|_| KgniError::InvalidParam("unknown CQ mode bits"))?;
        if mode.contains(CqMode::EMULATED) {
            return Err(KgniError::Unsupported("emulated CQs are internal to uGNI"));
        }
        let job = st.jobs.get(&p).map(|_| p);
        if let Some(j) = st.jobs.get(&p)
            && !under_limit(j.limits.cq_limit, j.usage.cq)
        {
            return Err(KgniError::JobLimit(Resource::Cq));
        }
        self.reclaim(st);
        let idx = st
            .cq_alloc
            .alloc()
            .ok_or(KgniError::NoResource(Resource::Cq))?;
        let ring_entries = entry_count + 1;
        let ring = match PageBlock::alloc(&self.mem, u64::from(ring_entries) * 8) {
            Ok(r) => r,
            Err(_) => {
                st.cq_alloc.free(idx);
                return Err(KgniError::NoMemory);
            }
        };
        let vector = gpci::irq_cq_index(idx % gpci::IRQ_CQ_MAX_INDEX);
        let desc = CqDescriptor {
            base_addr: ring.bus_address(0),
            max_index: u64::from(entry_count),
            irq_thresh_index: u64::from(delay_count.clamp(1, (1 << 13) - 1)),
            irq_req_index: u64::from(vector),
            ..CqDescriptor::default()
        };
        if let Err(e) = self.hw.cq_enable(idx, &desc) {
            st.cq_alloc.free(idx);
            return Err(e.into());
        }
        if let Some(j) = st.jobs.get_mut(&p) {
            j.usage.cq += 1;
        }
        st.cqs.insert(
            idx,
            Cq {
                owner: client,
                cdm: cdm.0,
                ring,
                ring_entries,
                mode,
                vector,
                users: 0,
                map: MapShared::new(),
                job,
            },
        );
        Ok(Response::Cq(CqInfo {
            cq: CqId(idx),
            ring_entries,
            ring: MmapToken::new(MapKind::CqRing, idx),
            alias: MmapToken::new(MapKind::CqAlias, idx),
            vector,
        }))
    }

    pub(super) fn cq_wait(
        &self,
        client: ClientId,
        cq: CqId,
        timeout: Option<Duration>,
    ) -> Result<Response, KgniError> {
        let vector = {
            let mut st = self.lock();
            let c = lookup(&mut st.cqs, client, Object::Cq, cq.0)?;
            if !c.mode.contains(CqMode::BLOCKING) {
                return Err(KgniError::InvalidParam(
                    "only BLOCKING CQs can be waited on",
                ));
            }
            c.vector
        };
        self.wait_for(timeout, vector, || {
            let mut st = self.lock();
            let c = lookup(&mut st.cqs, client, Object::Cq, cq.0)?;
            let base = c.ring.bus_address(0);
            let ready = |hw: &Ghal| -> Result<bool, KgniError> {
                let d = hw.cq_read(cq.0)?;
                Ok(d.pending() > 0 || hw.cq_status(cq.0)? & 1 != 0)
            };
            if ready(&self.hw)? {
                return Ok(Some(Response::Done));
            }
            // Arm the one-shot interrupt, then look again (an event may have landed between).
            self.hw.cq_arm(cq.0, base)?;
            Ok(ready(&self.hw)?.then_some(Response::Done))
        })
    }

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
        if let Some(c) = dst_cq.and_then(|c| st.cqs.get_mut(&c.0)) {
            c.users += 1;
        }
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

    pub(super) fn ep_create(
        &self,
        st: &mut State,
        client: ClientId,
        cdm: CdmId,
        cq: Option<CqId>,
    ) -> Result<Response, KgniError> {
        Self::attached_fma(st, client, cdm)?;
        let inst = st.cdms.get(&cdm.0).map_or(0, |c| c.inst_id);
        if let Some(cq) = cq {
            let c = lookup(&mut st.cqs, client, Object::Cq, cq.0)?;
            if c.cdm != cdm.0 {
                return Err(KgniError::InvalidParam("the CQ belongs to another CDM"));
            }
        }
        let ep = st
            .ep_alloc
            .alloc()
            .ok_or(KgniError::NoResource(Resource::Endpoint))?;
        if let Some(c) = cq.and_then(|c| st.cqs.get_mut(&c.0)) {
            c.users += 1;
        }
        st.eps.insert(
            ep,
            Ep {
                owner: client,
                cdm: cdm.0,
                cq: cq.map(|c| c.0),
                bound: None,
                event_local: None,
                event_remote: inst,
            },
        );
        Ok(Response::Ep(EpId(ep)))
    }

    /// Physical PE of `addr` for a CDM of ptag `p`: through the job's NTT when it has one.
    pub(super) fn resolve_pe(st: &State, p: u8, addr: u32) -> Result<u32, KgniError> {
        match st.jobs.get(&p).and_then(|j| j.ntt.as_ref()) {
            Some(n) => n
                .table
                .get(addr as usize)
                .copied()
                .ok_or(KgniError::InvalidParam("logical PE outside the job's NTT")),
            None if addr <= limits::PE_MASK => Ok(addr),
            None => Err(KgniError::InvalidParam("PE wider than 18 bits")),
        }
    }

    pub(super) fn ep_bind(
        &self,
        st: &mut State,
        client: ClientId,
        ep: EpId,
        remote_addr: u32,
        remote_id: u32,
    ) -> Result<Response, KgniError> {
        let e = lookup(&mut st.eps, client, Object::Endpoint, ep.0)?;
        if e.bound.is_some() {
            return Err(KgniError::InvalidState("the endpoint is already bound"));
        }
        let cdm = e.cdm;
        if st.matcher.post_of(u64::from(ep.0)).is_some() {
            return Err(KgniError::InvalidState(
                "the endpoint has an outstanding datagram",
            ));
        }
        let p = st.cdms.get(&cdm).map_or(0, |c| c.ptag);
        let phys = Self::resolve_pe(st, p, remote_addr)?;
        if let Some(e) = st.eps.get_mut(&ep.0) {
            e.bound = Some(Bound { phys, remote_id });
        }
        Ok(Response::Done)
    }

    pub(super) fn own_registration<'a>(
        st: &'a State,
        client: ClientId,
        handle: &MemHandle,
    ) -> Result<(MemHandleInfo, &'a Reg), KgniError> {
        let info = handle
            .decode()
            .map_err(|_| KgniError::InvalidParam("corrupt local memory handle"))?;
        let r = st
            .regs
            .get(&u32::from(info.mdh))
            .filter(|r| r.handle == *handle)
            .ok_or(KgniError::NoSuchHandle {
                kind: Object::MemHandle,
                handle: u64::from(info.mdh),
            })?;
        if r.owner != client {
            return Err(KgniError::NotOwner {
                kind: Object::MemHandle,
                handle: u64::from(info.mdh),
            });
        }
        Ok((info, r))
    }

    pub(super) fn post_rdma(
        &self,
        st: &mut State,
        client: &KgniClient,
        ep: EpId,
        desc: &PostDescriptor,
    ) -> Result<Response, KgniError> {
        let id = client.id;
        let e = lookup(&mut st.eps, id, Object::Endpoint, ep.0)?;
        let bound = e
            .bound
            .ok_or(KgniError::InvalidState("the endpoint is not bound"))?;
        let (cdm, ep_cq, ev_local, ev_remote) = (
            e.cdm,
            e.cq,
            e.event_local.unwrap_or(bound.remote_id),
            e.event_remote,
        );
        let c = st
            .cdms
            .get(&cdm)
            .ok_or(KgniError::InvalidState("the endpoint's CDM is gone"))?;
        let (p, modes) = (c.ptag, c.modes);
        let rc = desc.check(true, modes);
        if rc != ReturnCode::Success {
            return Err(KgniError::Post(rc));
        }
        if desc.rdma_mode.contains(RdmaMode::PHYS_ADDR) {
            return Err(KgniError::Permission("PHYS_ADDR posts are for the kernel"));
        }
        let (linfo, lreg) = Self::own_registration(st, id, &desc.local_mem_hndl)?;
        if lreg.cdm != cdm {
            return Err(KgniError::InvalidParam(
                "the local memory handle belongs to another CDM",
            ));
        }
        let lend = desc
            .local_addr
            .checked_add(desc.length)
            .ok_or(KgniError::InvalidParam("local range overflows"))?;
        if desc.local_addr < lreg.va || lend > lreg.va + lreg.len {
            return Err(KgniError::InvalidParam(
                "local range outside its registration",
            ));
        }
        if desc.post_type.is_get() && lreg.read_only {
            return Err(KgniError::Permission("GET into a read-only registration"));
        }
        let rinfo = desc
            .remote_mem_hndl
            .decode()
            .map_err(|_| KgniError::InvalidParam("corrupt remote memory handle"))?;
        let roff = desc
            .remote_addr
            .checked_sub(rinfo.va)
            .filter(|o| o.checked_add(desc.length).is_some_and(|e| e < 1 << 40))
            .ok_or(KgniError::InvalidParam("remote address outside its handle"))?;
        let loff = desc.local_addr - linfo.va;
        let cq = match desc.src_cq_hndl {
            0 => ep_cq,
            h => {
                let h = u32::try_from(h).map_err(|_| KgniError::NoSuchHandle {
                    kind: Object::Cq,
                    handle: h,
                })?;
                let c = lookup(&mut st.cqs, id, Object::Cq, h)?;
                if c.cdm != cdm {
                    return Err(KgniError::InvalidParam("the CQ belongs to another CDM"));
                }
                Some(h)
            }
        };
        let events = desc.cq_mode.contains(CqEventMode::LOCAL_EVENT)
            || desc.cq_mode.contains(CqEventMode::GLOBAL_EVENT);
        if events && cq.is_none() {
            return Err(KgniError::InvalidParam("local events need a CQ"));
        }
        // Job BTE limit.
        let generation = st.jobs.get(&p).map(|j| j.generation);
        if let Some(j) = st.jobs.get(&p)
            && !under_limit(j.limits.bte_limit, j.usage.bte)
        {
            return Err(KgniError::JobLimit(Resource::BteSlot));
        }
        // Channel: round robin over the user channels, or channel 1 only.
        let candidates: Vec<usize> = if modes.contains(CdmMode::BTE_SINGLE_CHANNEL) {
            vec![USER_CHANNELS[0]]
        } else {
            (0..3).map(|i| USER_CHANNELS[(st.rr + i) % 3]).collect()
        };
        let mut chosen = None;
        for c in candidates {
            self.reap(st, c);
            if st.tx.get(c).is_some_and(|r| r.free() > 0) {
                chosen = Some(c);
                break;
            }
        }
        let c = chosen.ok_or(KgniError::NoResource(Resource::BteSlot))?;
        st.rr = st.rr.wrapping_add(1);

        let mut mode1 = if desc.post_type.is_get() {
            TxdMode1::GET
        } else {
            TxdMode1::PUT
        };
        if desc.cq_mode.contains(CqEventMode::LOCAL_EVENT) {
            mode1 |= TxdMode1::CQ_LOCAL;
        }
        if desc.cq_mode.contains(CqEventMode::GLOBAL_EVENT) {
            mode1 |= TxdMode1::CQ_GLOBAL;
        }
        if desc.rdma_mode.contains(RdmaMode::FENCE) {
            mode1 |= TxdMode1::FENCE;
        }
        if desc.dlvr_mode.may_reorder() {
            mode1 |= TxdMode1::ADP_ENABLE;
        }
        let data56 = |v: u32| {
            Cqe::sw(CqEventType::Post, u64::from(v))
                .sw_data56()
                .map_err(HwError::from)
        };
        let t = TxDescriptor {
            dest_pe: u64::from(bound.phys),
            mode1: u64::from(mode1.bits()),
            dest_mem_off: roff,
            dest_mem_dh: u64::from(rinfo.mdh),
            src_cq_hndl: u64::from(cq.unwrap_or(0)),
            dest_ptag: u64::from(p),
            src_ptag: u64::from(p),
            data_len: desc.length,
            src_mem_off: loff,
            src_mem_dh: u64::from(linfo.mdh),
            mode4: u64::from(TxdMode4::NAT_ENABLE.bits()),
            src_cq_data: data56(ev_local)?,
            user_data: data56(ev_remote)?,
            ..TxDescriptor::default()
        };
        let rec = TxRec {
            cq,
            mdh: Some(u32::from(linfo.mdh)),
            job: generation.map(|g| (p, g)),
        };
        let pos = self.post_txd(st, c, &t, rec)?;
        if let Some(j) = st.jobs.get_mut(&p) {
            j.usage.bte += 1;
        }
        Ok(Response::Posted(PostInfo {
            channel: c as u32,
            position: pos,
        }))
    }

    pub(super) fn post_data(
        &self,
        st: &mut State,
        client: ClientId,
        ep: EpId,
        uid: Option<u64>,
        data: Vec<u8>,
        out_len: usize,
    ) -> Result<Response, KgniError> {
        self.service_locked(st);
        let e = lookup(&mut st.eps, client, Object::Endpoint, ep.0)?;
        let (cdm, bound) = (e.cdm, e.bound);
        if uid == Some(u64::MAX) {
            return Err(KgniError::InvalidParam("datagram id -1 is invalid"));
        }
        if bound.is_none() && uid.is_none() {
            return Err(KgniError::InvalidParam(
                "a datagram on an unbound endpoint needs an id",
            ));
        }
        let c = st
            .cdms
            .get(&cdm)
            .filter(|c| c.fma.is_some())
            .ok_or(KgniError::InvalidState("the CDM is not attached"))?;
        let spec = PostSpec {
            ep: u64::from(ep.0),
            cdm: u64::from(cdm),
            domain: Domain {
                ptag: c.ptag,
                cookie: c.cookie,
            },
            local_inst: c.inst_id,
            target: bound.map(|b| (b.phys, b.remote_id)),
            user_id: uid,
            data,
            out_len,
        };
        if let Some(u) = uid
            && st.matcher.ep_by_id(u64::from(cdm), u).is_some()
        {
            return Err(KgniError::InvalidParam("datagram id already in use"));
        }
        let (_, out) = st.matcher.post(spec).map_err(|e| match e {
            PostError::Busy => KgniError::Busy("the endpoint has an outstanding datagram"),
            PostError::TooLong(_) => KgniError::InvalidParam("datagram larger than 128 bytes"),
        })?;
        self.send_all(st, out);
        Ok(Response::Done)
    }

    pub(super) fn ep_by_dgram_id(
        &self,
        st: &mut State,
        client: ClientId,
        cdm: CdmId,
        uid: u64,
    ) -> Result<EpId, KgniError> {
        lookup(&mut st.cdms, client, Object::Cdm, cdm.0)?;
        st.matcher
            .ep_by_id(u64::from(cdm.0), uid)
            .and_then(|e| u32::try_from(e).ok())
            .map(EpId)
            .ok_or(KgniError::NoSuchHandle {
                kind: Object::Datagram,
                handle: uid,
            })
    }

    /// Collect the finished datagram of `ep`: `Ok(None)` while it is pending.
    pub(super) fn dgram_collect(
        &self,
        st: &mut State,
        client: ClientId,
        ep: EpId,
    ) -> Result<Option<Response>, KgniError> {
        lookup(&mut st.eps, client, Object::Endpoint, ep.0)?;
        if st.matcher.post_of(u64::from(ep.0)).is_none() {
            return Err(KgniError::NoSuchHandle {
                kind: Object::Datagram,
                handle: u64::from(ep.0),
            });
        }
        Ok(st
            .matcher
            .take_finished(u64::from(ep.0))
            .map(|p| Response::Datagram(Self::result(p.state, p.spec.user_id))))
    }

    pub(super) fn result(state: DgramState, id: Option<u64>) -> DatagramResult {
        let post_state = state.post_state();
        match state {
            DgramState::Completed {
                remote_pe,
                remote_inst,
                data,
            } => DatagramResult {
                state: post_state,
                remote_addr: remote_pe,
                remote_id: remote_inst,
                data,
                id,
            },
            _ => DatagramResult {
                state: post_state,
                remote_addr: 0,
                remote_id: 0,
                data: Vec::new(),
                id,
            },
        }
    }

    pub(super) fn dgram_wait(
        &self,
        client: ClientId,
        ep: EpId,
        timeout: Option<Duration>,
    ) -> Result<Response, KgniError> {
        self.wait_for(timeout, RX_VECTOR, || {
            let mut st = self.lock();
            self.service_locked(&mut st);
            self.dgram_collect(&mut st, client, ep)
        })
    }

    pub(super) fn dgram_cancel(
        &self,
        st: &mut State,
        client: ClientId,
        ep: EpId,
    ) -> Result<Response, KgniError> {
        lookup(&mut st.eps, client, Object::Endpoint, ep.0)?;
        let (post, out) = st
            .matcher
            .cancel(u64::from(ep.0))
            .ok_or(KgniError::NoSuchHandle {
                kind: Object::Datagram,
                handle: u64::from(ep.0),
            })?;
        self.send_all(st, out);
        let mut r = Self::result(post.state, post.spec.user_id);
        if r.state == firmware_spec::gemini::gni::PostState::Pending {
            r.state = firmware_spec::gemini::gni::PostState::Terminated;
        }
        Ok(Response::Datagram(r))
    }

    pub(super) fn mmap(
        &self,
        st: &mut State,
        client: ClientId,
        token: MmapToken,
    ) -> Result<Response, KgniError> {
        let (kind, index) = token.decode().ok_or(KgniError::NoSuchHandle {
            kind: Object::MmapToken,
            handle: token.0,
        })?;
        let bar = Arc::clone(self.hw.bar());
        let window = |base: u64, size: u64, shared: &Arc<MapShared>| {
            Response::Mapping(Mapping::Mmio(Arc::new(MmioWindow::new(
                Arc::clone(&bar),
                base,
                size,
                Arc::clone(shared),
            ))))
        };
        match kind {
            MapKind::FmaUserPage | MapKind::FmaPutWc | MapKind::FmaGet | MapKind::FmaPutUc => {
                let f = lookup(&mut st.fmas, client, Object::Fma, index)?;
                let pages = hw::fma_pages(index).ok_or(KgniError::NoSuchHandle {
                    kind: Object::Fma,
                    handle: u64::from(index),
                })?;
                Ok(match kind {
                    MapKind::FmaUserPage => window(pages.user_page, 4096, &f.map),
                    MapKind::FmaPutWc => window(pages.put_wc, f.window, &f.map),
                    MapKind::FmaGet => window(pages.get, f.window, &f.map),
                    _ => window(pages.put_uc, f.window, &f.map),
                })
            }
            MapKind::CqAlias => {
                let c = lookup(&mut st.cqs, client, Object::Cq, index)?;
                let page = hw::cq_user_page(index).ok_or(KgniError::NoSuchHandle {
                    kind: Object::Cq,
                    handle: u64::from(index),
                })?;
                Ok(window(page, 4096, &c.map))
            }
            MapKind::CqRing => {
                let c = lookup(&mut st.cqs, client, Object::Cq, index)?;
                Ok(Response::Mapping(Mapping::Memory(MemWindow::new(
                    Arc::clone(&c.ring),
                    0,
                    u64::from(c.ring_entries) * 8,
                    Arc::clone(&c.map),
                ))))
            }
        }
    }
}
