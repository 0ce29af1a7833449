//! Completion queues: `cq_create` (ring in host memory, interrupt wiring) and `cq_wait`.

use super::super::state::*;
use super::super::*;

impl Kgni {
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
}
