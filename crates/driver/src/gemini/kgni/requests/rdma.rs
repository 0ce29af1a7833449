//! RDMA posts: the caller's registrations checked (`own_registration`), `post_rdma` on FMA or
//! BTE.

use super::super::state::*;
use super::super::*;

impl Kgni {
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
}
