//! The request handlers: every uAPI request checked against the caller's ownership.
//! `handle` dispatches a request to its family: jobs and CDMs (`job`), FMA descriptors
//! (`fma`), completion queues (`cq`), memory registration (`mem`), endpoints (`ep`), RDMA
//! posts (`rdma`), datagrams (`dgram`) and mmap tokens (`mmap`).

use super::state::*;
use super::*;

mod cq;
mod dgram;
mod ep;
mod fma;
mod job;
mod mem;
mod mmap;
mod rdma;

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
                    return Err(KgniError::Busy("the CQ is used by an endpoint"));
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
}
