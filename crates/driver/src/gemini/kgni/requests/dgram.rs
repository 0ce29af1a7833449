//! Datagrams: `post_data`, lookup by datagram id, completion (`dgram_collect`, `result`),
//! `dgram_wait` and `dgram_cancel`.

use super::super::state::*;
use super::super::*;

impl Kgni {
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
}
