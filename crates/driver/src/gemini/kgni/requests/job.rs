//! Jobs and communication domains: `configure_job` / `release_job` (ptags, NTT, limits),
//! `cdm_create` and `cdm_attach` (a CDM bound to a NIC).

use super::super::state::*;
use super::super::*;

impl Kgni {
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
}
