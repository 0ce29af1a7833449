//! Endpoints: `ep_create`, the remote PE through the job's NTT (`resolve_pe`), `ep_bind`.

use super::super::state::*;
use super::super::*;

impl Kgni {
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
}
