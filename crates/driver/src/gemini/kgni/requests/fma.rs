//! FMA descriptors: a CDM's descriptor allocated (`new_fma`), looked up, and bound to a CQ.

use super::super::state::*;
use super::super::*;

impl Kgni {
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
}
