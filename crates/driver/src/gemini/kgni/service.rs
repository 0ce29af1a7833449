//! The interrupt-handler side of kgni: BTE rings, the datagram transport, waits, and the
//! release of objects (close, destroy).

use super::state::*;
use super::*;

impl Kgni {
    // ---- BTE rings -----------------------------------------------------------------------

    /// Retire the TXDs of channel `c` that the BTE started and completed, oldest first,
    /// releasing what they held (job charge); then release quarantined resources nothing
    /// in flight can reach any more.
    pub(super) fn reap(&self, st: &mut State, c: usize) {
        let Some(ring) = st.tx.get(c) else {
            return;
        };
        if ring.count == 0 || ring.tail == ring.write {
            return;
        }
        let r = match self.hw.bte_tx_read_index(c as u32) {
            Ok(r) if r < ring.count => r,
            Ok(r) => {
                tracing::warn!(channel = c, r, "kgni: BTE read index outside the ring");
                return;
            }
            Err(e) => {
                tracing::warn!(channel = c, error = %e, "kgni: BTE read index");
                return;
            }
        };
        let State { tx, jobs, .. } = st;
        let ring = &mut tx[c];
        let count = ring.count;
        // Positions tail..r were started by the BTE.
        let started = (r + count - ring.tail) % count;
        for _ in 0..started {
            let pos = ring.tail;
            let flags = self
                .mem
                .load_u64(
                    ring.cpu.addr() + map::BTE_TX_PITCH * u64::from(pos) + 8,
                    Ordering::Acquire,
                )
                .map_or(0, |q1| q1 >> 60);
            if flags & u64::from(TxdFlags::COMPLETE.bits()) == 0 {
                break;
            }
            if let Some(rec) = ring.recs[usize::from(pos)].take()
                && let Some((p, generation)) = rec.job
                && let Some(j) = jobs.get_mut(&p)
                && j.generation == generation
            {
                j.usage.bte = j.usage.bte.saturating_sub(1);
            }
            ring.tail = (pos + 1) % count;
        }
    }

    /// Reap every channel and release the quarantined resources that nothing in flight can
    /// reach any more.
    pub(super) fn reclaim(&self, st: &mut State) {
        for c in 0..st.tx.len() {
            self.reap(st, c);
        }
        if st.held.is_empty() {
            return;
        }
        let fma_idle = |id: u32| {
            self.hw
                .fma_status(id)
                .is_ok_and(|w| w & ((1 << 40) - 1) == 0)
        };
        let held = std::mem::take(&mut st.held);
        for h in held {
            let busy = match &h {
                Held::Cq(i) => st.tx.iter().any(|r| r.uses(|t| t.cq == Some(*i))),
                Held::Mdd { mdh, fmas, .. } => {
                    st.tx.iter().any(|r| r.uses(|t| t.mdh == Some(*mdh)))
                        || !fmas.iter().all(|f| fma_idle(*f))
                }
                Held::Fma(id) => !fma_idle(*id),
            };
            if busy {
                st.held.push(h);
                continue;
            }
            match h {
                Held::Cq(i) => {
                    st.cq_alloc.free(i);
                }
                Held::Mdd { mdh, mrt, .. } => {
                    if let Some((k, n)) = mrt {
                        st.mrt_alloc.free_run(k, n);
                    }
                    st.mdd_alloc.free(mdh);
                }
                Held::Fma(id) => {
                    if !st.fma_alloc.free(id) {
                        st.fma_os_alloc.free(id);
                    }
                }
            }
        }
    }

    /// Fill the next position of channel `c` with `t` (its CPU copy cleared first), record
    /// what it holds, and ring the doorbell. The caller checked `free() > 0`.
    pub(super) fn post_txd(
        &self,
        st: &mut State,
        c: usize,
        t: &TxDescriptor,
        rec: TxRec,
    ) -> Result<u16, KgniError> {
        let ring = &st.tx[c];
        let pos = ring.write;
        let next = (pos + 1) % ring.count;
        self.mem
            .fill(
                ring.cpu.addr() + map::BTE_TX_PITCH * u64::from(pos),
                map::BTE_TX_PITCH,
                0,
            )
            .map_err(|_| KgniError::NoMemory)?;
        let slot = u32::from(ring.base + pos);
        self.hw.bte_post(c as u32, slot, t, next)?;
        let ring = &mut st.tx[c];
        ring.write = next;
        ring.recs[usize::from(pos)] = Some(rec);
        Ok(pos)
    }

    // ---- datagram transport ----------------------------------------------------------------

    pub(super) fn send_all(&self, st: &mut State, out: Vec<Outgoing>) {
        st.backlog.extend(out);
        self.flush_backlog(st);
    }

    pub(super) fn flush_backlog(&self, st: &mut State) -> bool {
        let mut did = false;
        while !st.backlog.is_empty() {
            self.reap(st, DGRAM_CHANNEL);
            if st.tx[DGRAM_CHANNEL].free() == 0 {
                break;
            }
            let Some(o) = st.backlog.pop_front() else {
                break;
            };
            did = true;
            if let Err(e) = self.send_wire(st, &o) {
                tracing::warn!(dest = o.dest_pe, error = %e, "kgni: datagram send failed");
                if o.wire.kind == datagram::WireKind::Request {
                    st.matcher.fail(o.wire.seq);
                }
            }
        }
        did
    }

    pub(super) fn send_wire(&self, st: &mut State, o: &Outgoing) -> Result<(), KgniError> {
        let bytes = o.wire.encode();
        let pos = st.tx[DGRAM_CHANNEL].write;
        let off = u64::from(pos) * DGRAM_BUF;
        let k = &st.kernel;
        self.mem
            .write(k.tx_stage.addr() + off, &bytes)
            .map_err(|_| KgniError::NoMemory)?;
        let (tag, id) = match o.wire.kind {
            datagram::WireKind::Request => (TAG_REQUEST, o.wire.seq),
            datagram::WireKind::Response => {
                let id = match st.responses.iter().find(|(_, r, _)| r == o) {
                    Some((id, _, _)) => *id,
                    None => {
                        let id = st.next_response & ((1 << 40) - 1);
                        st.next_response += 1;
                        if st.responses.len() >= RESPONSES_KEPT {
                            st.responses.pop_front();
                        }
                        st.responses.push_back((id, o.clone(), 0));
                        id
                    }
                };
                (TAG_RESPONSE, id)
            }
            _ => (0, o.wire.seq),
        };
        let cq_data = Cqe::sw(CqEventType::Post, (tag << 40) | (id & ((1 << 40) - 1)))
            .sw_data56()
            .map_err(HwError::from)?;
        let mut t = TxDescriptor {
            dest_pe: u64::from(o.dest_pe & limits::PE_MASK),
            mode1: u64::from(TxdMode1::SEND.bits()),
            src_cq_hndl: u64::from(k.cq),
            dest_ptag: u64::from(o.wire.domain.ptag),
            src_ptag: u64::from(o.wire.domain.ptag),
            data_len: bytes.len() as u64,
            src_cq_data: cq_data,
            ..TxDescriptor::default()
        };
        t.set_src_phys_addr(k.tx_stage.bus_address(off));
        let rec = TxRec {
            cq: Some(k.cq),
            ..TxRec::default()
        };
        self.post_txd(st, DGRAM_CHANNEL, &t, rec)?;
        Ok(())
    }

    pub(super) fn reap_kernel_cq(&self, st: &mut State) -> bool {
        let mut did = false;
        loop {
            let k = &st.kernel;
            let addr = k.cq_ring.addr() + u64::from(k.cq_rd) * 8;
            let v = match self.mem.load_u64(addr, Ordering::Acquire) {
                Ok(v) => v,
                Err(_) => break,
            };
            let e = Cqe::from_u64(v);
            if !e.is_ready() {
                break;
            }
            did = true;
            if e.status != 0 && e.source().ok() == Some(CqeSource::Bte) {
                let data = e.data();
                tracing::debug!(status = e.status, data, "kgni: datagram send failed");
                let id = data & ((1 << 40) - 1);
                match data >> 40 {
                    TAG_REQUEST => {
                        let again = st.matcher.send_failed(id);
                        st.backlog.extend(again);
                    }
                    TAG_RESPONSE => {
                        if let Some(r) = st.responses.iter_mut().find(|(i, _, _)| *i == id)
                            && r.2 < RESPONSE_RESENDS
                        {
                            r.2 += 1;
                            st.backlog.push_back(r.1.clone());
                        }
                    }
                    _ => {}
                }
            }
            let _ = self.mem.store_u64(addr, 0, Ordering::Release);
            let k = &mut st.kernel;
            k.cq_rd = (k.cq_rd + 1) % k.cq_entries;
        }
        if did {
            let k = &st.kernel;
            if let Err(e) = self.hw.cq_set_read_index(k.cq, u64::from(k.cq_rd)) {
                tracing::warn!(error = %e, "kgni: kernel CQ read index");
            }
        }
        did
    }

    pub(super) fn receive(&self, st: &mut State) -> bool {
        let count = self.config.rx_ring;
        let r = match self.hw.bte_rx_read_index(DGRAM_CHANNEL as u32) {
            Ok(r) if r < count => r,
            Ok(r) => {
                tracing::warn!(r, "kgni: RX read index outside the ring");
                return false;
            }
            Err(e) => {
                tracing::warn!(error = %e, "kgni: RX read index");
                return false;
            }
        };
        let mut did = false;
        let mut out = Vec::new();
        while st.kernel.rx_pos != r {
            did = true;
            let k = &st.kernel;
            let mut img = [0u8; hw::CPU_RX_PITCH as usize];
            let cpu = k.rx_cpu_ring.addr() + u64::from(k.rx_pos) * hw::CPU_RX_PITCH;
            let desc = self
                .mem
                .read(cpu, &mut img)
                .ok()
                .and_then(|_| hw::decode_cpu_rx(&img).ok());
            // The buffer the NIC used: the one whose bus address it reports, if it is ours.
            let buf_base = k.rx_buffers.bus_address(0);
            let buffer = desc.as_ref().and_then(|d| {
                let off = d.buff_addr.checked_sub(buf_base)?;
                (off % DGRAM_BUF == 0 && off / DGRAM_BUF < u64::from(count)).then_some(off)
            });
            if let (Some(d), Some(off)) = (&desc, buffer) {
                let ok = d.flags & bte::RXD_FLAG_BTE_COMPLETE != 0 && d.err_status() == 0;
                let len = (d.data_len).min(DGRAM_BUF) as usize;
                let mut data = vec![0u8; len];
                if ok && self.mem.read(k.rx_buffers.addr() + off, &mut data).is_ok() {
                    match Wire::decode(&data) {
                        Ok(w) => out.extend(st.matcher.incoming(w)),
                        Err(e) => tracing::debug!(error = %e, "kgni: foreign RX message"),
                    }
                } else {
                    tracing::debug!(flags = d.flags, "kgni: RX message with an error");
                }
            } else {
                tracing::warn!(pos = k.rx_pos, "kgni: unreadable RX completion");
            }
            // Repost a buffer at the write position: the one just used, or (if the NIC
            // reported something we cannot place) the buffer that belongs to this position.
            let k = &mut st.kernel;
            let reuse = buffer.unwrap_or(u64::from(k.rx_pos) * DGRAM_BUF);
            let w = k.rx_write;
            let res = self.hw.bte_write_rxd(
                u32::from(w),
                &RxDescriptor {
                    base_addr: k.rx_buffers.bus_address(reuse),
                    mode1: 0,
                },
            );
            k.rx_write = (w + 1) % count;
            k.rx_pos = (k.rx_pos + 1) % count;
            if let Err(e) = res.and_then(|_| {
                self.hw
                    .bte_rx_set_write_index(DGRAM_CHANNEL as u32, k.rx_write)
            }) {
                tracing::warn!(error = %e, "kgni: RX repost");
            }
        }
        self.send_all(st, out);
        did
    }

    // ---- waits ---------------------------------------------------------------------------

    pub(super) fn block(&self, vector: u32, deadline: Option<Instant>, slice: Duration) {
        let slice = deadline.map_or(slice, |d| {
            d.saturating_duration_since(Instant::now()).min(slice)
        });
        match self.irqs.vector(vector) {
            Some(w) => {
                w.wait(Some(slice));
            }
            None => std::thread::sleep(slice),
        }
    }

    /// Run `check` until it yields a value, letting the device progress in between (without
    /// the state lock held). `Timeout` when `timeout` passes, or when a deterministic engine
    /// has nothing left to do.
    pub(super) fn wait_for<T>(
        &self,
        timeout: Option<Duration>,
        vector: u32,
        mut check: impl FnMut() -> Result<Option<T>, KgniError>,
    ) -> Result<T, KgniError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let waiter = self.waiter();
        // Blocks start short and double up to `WAIT_SLICE_MAX`: the interrupt ends a block
        // early; the slices only bound how late a condition no interrupt announces is seen,
        // and a long wait costs a wake-up per slice.
        let mut slice = WAIT_SLICE;
        loop {
            if let Some(v) = check()? {
                return Ok(v);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(KgniError::Timeout);
            }
            match &waiter {
                Waiter::Deterministic(p) => {
                    if !p.progress() {
                        return check()?.ok_or(KgniError::Timeout);
                    }
                }
                Waiter::Threaded(p) => {
                    // Arrivals the engine wants this thread to take come first
                    // (`before_sleep` says no while they wait).
                    if !p.progress() && p.before_sleep() {
                        self.block(vector, deadline, slice);
                        slice = (slice * 2).min(WAIT_SLICE_MAX);
                    }
                }
                Waiter::Interrupts => {
                    self.block(vector, deadline, slice);
                    slice = (slice * 2).min(WAIT_SLICE_MAX);
                }
            }
        }
    }

    // ---- client close ----------------------------------------------------------------------

    pub(super) fn close(&self, client: ClientId) {
        let mut st = self.lock();
        let cdms: Vec<u32> = st
            .cdms
            .iter()
            .filter(|(_, c)| c.owner == client)
            .map(|(id, _)| *id)
            .collect();
        for cdm in cdms {
            self.teardown_cdm(&mut st, cdm);
        }
        let jobs: Vec<u8> = st
            .jobs
            .iter()
            .filter(|(_, j)| j.owner == client)
            .map(|(p, _)| *p)
            .collect();
        for p in jobs {
            if let Some(j) = st.jobs.get_mut(&p) {
                j.released = true;
            }
            self.maybe_free_job(&mut st, p);
        }
        st.clients.remove(&client);
    }

    pub(super) fn maybe_free_job(&self, st: &mut State, p: u8) {
        let free = st
            .jobs
            .get(&p)
            .is_some_and(|j| j.released && j.attached == 0);
        if !free {
            return;
        }
        if let Some(j) = st.jobs.remove(&p)
            && let Some(n) = j.ntt
        {
            st.ntt_alloc.free_run(n.first_entry, n.entries);
        }
    }

    /// Release everything made under a CDM, then the CDM. Never fails: hardware errors are
    /// logged and the software state is released anyway.
    pub(super) fn teardown_cdm(&self, st: &mut State, cdm: u32) {
        let out = st.matcher.drop_cdm(u64::from(cdm));
        self.send_all(st, out);
        let eps: Vec<u32> = st
            .eps
            .iter()
            .filter(|(_, e)| e.cdm == cdm)
            .map(|(i, _)| *i)
            .collect();
        for ep in eps {
            self.destroy_ep(st, ep);
        }
        let regs: Vec<u32> = st
            .regs
            .iter()
            .filter(|(_, r)| r.cdm == cdm)
            .map(|(i, _)| *i)
            .collect();
        for mdh in regs {
            self.deregister(st, mdh);
        }
        let cqs: Vec<u32> = st
            .cqs
            .iter()
            .filter(|(_, c)| c.cdm == cdm)
            .map(|(i, _)| *i)
            .collect();
        for cq in cqs {
            self.destroy_cq(st, cq);
        }
        let Some(c) = st.cdms.remove(&cdm) else {
            return;
        };
        if let Some(fma) = c.fma {
            self.put_fma(st, fma);
            if let Some(j) = st.jobs.get_mut(&c.ptag) {
                j.attached = j.attached.saturating_sub(1);
            }
            self.maybe_free_job(st, c.ptag);
        }
        st.cdm_alloc.free(cdm);
    }

    pub(super) fn put_fma(&self, st: &mut State, id: u32) {
        let Some(f) = st.fmas.get_mut(&id) else {
            return;
        };
        f.sharers = f.sharers.saturating_sub(1);
        if f.sharers > 0 {
            return;
        }
        let Some(f) = st.fmas.remove(&id) else {
            return;
        };
        f.map.revoke();
        if let Err(e) = self.hw.fma_release(id) {
            tracing::warn!(fma = id, error = %e, "kgni: FMA release");
        }
        if let Some(j) = f.job.and_then(|p| st.jobs.get_mut(&p)) {
            j.usage.fma = j.usage.fma.saturating_sub(1);
        }
        // Sequences still in flight complete into CQ 0 (dropped) now that QW3 is clear;
        // the descriptor is reused only once they are done.
        st.held.push(Held::Fma(id));
        self.reclaim(st);
    }

    pub(super) fn destroy_ep(&self, st: &mut State, ep: u32) {
        if let Some((_, out)) = st.matcher.cancel(u64::from(ep)) {
            self.send_all(st, out);
        }
        if let Some(e) = st.eps.remove(&ep) {
            if let Some(cq) = e.cq.and_then(|c| st.cqs.get_mut(&c)) {
                cq.users = cq.users.saturating_sub(1);
            }
            st.ep_alloc.free(ep);
        }
    }

    pub(super) fn deregister(&self, st: &mut State, mdh: u32) {
        let Some(r) = st.regs.remove(&mdh) else {
            return;
        };
        if let Err(e) = self.hw.invalidate_mdd(mdh) {
            tracing::warn!(mdh, error = %e, "kgni: MDD invalidate");
        }
        if let Some((k, n)) = r.mrt {
            for i in k..k + n {
                if let Err(e) = self.hw.clear_mrt(i) {
                    tracing::warn!(mrt = i, error = %e, "kgni: MRT clear");
                }
            }
        }
        // The MDD is invalid now, so nothing reaches the memory; the number is reused only
        // once no TXD names it and the owner's FMA descriptors are idle (a GET answer lands
        // through the MDD it names when it arrives).
        let fmas: Vec<u32> = st
            .fmas
            .iter()
            .filter(|(_, f)| f.owner == r.owner)
            .map(|(i, _)| *i)
            .collect();
        st.held.push(Held::Mdd {
            mdh,
            mrt: r.mrt,
            fmas,
        });
        self.reclaim(st);
        if let Some(j) = r.job.and_then(|p| st.jobs.get_mut(&p)) {
            j.usage.mdd = j.usage.mdd.saturating_sub(1);
            j.usage.mrt = j.usage.mrt.saturating_sub(r.mrt.map_or(0, |(_, n)| n));
        }
    }

    pub(super) fn destroy_cq(&self, st: &mut State, cq: u32) {
        let Some(c) = st.cqs.remove(&cq) else {
            return;
        };
        c.map.revoke();
        if let Err(e) = self.hw.cq_disable(cq) {
            tracing::warn!(cq, error = %e, "kgni: CQ disable");
        }
        // An FMA descriptor still naming the CQ loses it.
        let users: Vec<u32> = st
            .fmas
            .iter()
            .filter(|(_, f)| f.desc.cq_hndl == u64::from(cq))
            .map(|(i, _)| *i)
            .collect();
        for id in users {
            if let Some(f) = st.fmas.get_mut(&id) {
                f.desc.cq_hndl = 0;
                if let Err(e) = self.hw.fma_write_qw3(id, &f.desc) {
                    tracing::warn!(fma = id, error = %e, "kgni: FMA CQ reset");
                }
            }
        }
        // A registration naming the CQ loses it: its MDD is written again without a CQ, so
        // PUTs into the region raise no remote event any more, not even in a CQ that reuses
        // the number. (uGNI's GNI_CqDestroy refuses only while endpoints use the CQ, per
        // Cray's header; Open MPI's ugni BTL destroys its mailboxes' remote CQ before its
        // registration cache deregisters the mailboxes.)
        let regs: Vec<u32> = st
            .regs
            .iter()
            .filter(|(_, r)| r.dst_cq == Some(cq))
            .map(|(m, _)| *m)
            .collect();
        for mdh in regs {
            if let Some(r) = st.regs.get_mut(&mdh) {
                r.dst_cq = None;
            }
            let rewritten = self.hw.read_mdd(mdh).and_then(|mut d| {
                d.cqh = 0;
                self.hw.write_mdd(mdh, &d)
            });
            if let Err(e) = rewritten {
                tracing::warn!(mdh, cq, error = %e, "kgni: MDD CQ reset");
            }
        }
        if let Some(j) = c.job.and_then(|p| st.jobs.get_mut(&p)) {
            j.usage.cq = j.usage.cq.saturating_sub(1);
        }
        // Disabled, the CQ takes no more events; its number is reused once no TXD in flight
        // names it.
        st.held.push(Held::Cq(cq));
        self.reclaim(st);
    }
}
