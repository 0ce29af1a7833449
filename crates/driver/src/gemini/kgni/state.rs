//! The per-device objects and tables behind kgni's handles.

use super::*;

pub(super) trait Owned {
    fn owner(&self) -> ClientId;
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct JobUse {
    pub(super) mdd: u32,
    pub(super) mrt: u32,
    pub(super) fma: u32,
    pub(super) cq: u32,
    pub(super) bte: u32,
}

#[derive(Clone, Debug)]
pub(super) struct NttGroup {
    pub(super) first_entry: u32,
    pub(super) entries: u32,
    pub(super) table: Vec<u32>,
}

#[derive(Clone, Debug)]
pub(super) struct Job {
    pub(super) cookie: u32,
    pub(super) owner: ClientId,
    pub(super) limits: JobLimits,
    pub(super) ntt: Option<NttGroup>,
    pub(super) usage: JobUse,
    pub(super) attached: u32,
    pub(super) released: bool,
    pub(super) generation: u64,
}

pub(super) fn under_limit(limit: i32, used: u32) -> bool {
    limit < 0 || i64::from(used) < i64::from(limit)
}

impl Job {
    pub(super) fn pe_group(&self) -> Option<(u32, u32)> {
        self.ntt
            .as_ref()
            .map(|n| (2 * n.first_entry, n.table.len() as u32))
    }
}

#[derive(Debug)]
pub(super) struct Cdm {
    pub(super) owner: ClientId,
    pub(super) inst_id: u32,
    pub(super) ptag: u8,
    pub(super) cookie: u32,
    pub(super) modes: CdmMode,
    pub(super) fma: Option<u32>,
}

impl Owned for Cdm {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Debug)]
pub(super) struct Fma {
    pub(super) owner: ClientId,
    pub(super) ptag: u8,
    pub(super) sharers: u32,
    pub(super) desc: FmaDescriptor,
    pub(super) window: u64,
    pub(super) map: Arc<MapShared>,
    pub(super) job: Option<u8>,
}

impl Owned for Fma {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Debug)]
pub(super) struct Cq {
    pub(super) owner: ClientId,
    pub(super) cdm: u32,
    pub(super) ring: Arc<PageBlock>,
    pub(super) ring_entries: u32,
    pub(super) mode: CqMode,
    pub(super) vector: u32,
    /// Endpoints that complete into it (they keep it from being destroyed).
    pub(super) users: u32,
    pub(super) map: Arc<MapShared>,
    pub(super) job: Option<u8>,
}

impl Owned for Cq {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Debug)]
pub(super) struct Reg {
    pub(super) owner: ClientId,
    pub(super) cdm: u32,
    pub(super) handle: MemHandle,
    pub(super) va: u64,
    pub(super) len: u64,
    pub(super) read_only: bool,
    pub(super) mrt: Option<(u32, u32)>,
    pub(super) dst_cq: Option<u32>,
    pub(super) job: Option<u8>,
    pub(super) _pinned: Pinned,
}

impl Owned for Reg {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Bound {
    pub(super) phys: u32,
    pub(super) remote_id: u32,
}

#[derive(Debug)]
pub(super) struct Ep {
    pub(super) owner: ClientId,
    pub(super) cdm: u32,
    pub(super) cq: Option<u32>,
    pub(super) bound: Option<Bound>,
    pub(super) event_local: Option<u32>,
    pub(super) event_remote: u32,
}

impl Owned for Ep {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Clone, Debug)]
pub(super) struct TxRing {
    pub(super) base: u16,
    pub(super) count: u16,
    /// Next ring position software fills.
    pub(super) write: u16,
    /// Oldest position not yet retired (started by the BTE and complete).
    pub(super) tail: u16,
    /// What each in-flight TXD holds on to.
    pub(super) recs: Vec<Option<TxRec>>,
    /// The CPU copy of the ring: the BTE writes each completed TXD (with `COMPLETE`) here.
    pub(super) cpu: Arc<PageBlock>,
}

/// The resources an in-flight TXD uses: they may not be reused before it completes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TxRec {
    /// CQ that gets its events.
    pub(super) cq: Option<u32>,
    /// Local MDD it reads or writes.
    pub(super) mdh: Option<u32>,
    /// Job `(ptag, generation)` charged for it.
    pub(super) job: Option<(u8, u64)>,
}

impl TxRing {
    pub(super) fn in_flight(&self) -> u16 {
        if self.count == 0 {
            return 0;
        }
        (self.write + self.count - self.tail) % self.count
    }

    pub(super) fn free(&self) -> u16 {
        self.count
            .saturating_sub(1)
            .saturating_sub(self.in_flight())
    }

    /// Whether an in-flight TXD uses `f`.
    pub(super) fn uses(&self, f: impl Fn(&TxRec) -> bool) -> bool {
        self.recs.iter().flatten().any(f)
    }
}

/// A freed resource that in-flight work may still reach: released to its allocator once
/// nothing in flight can use it (`Kgni::reclaim`).
#[derive(Debug, Clone)]
pub(super) enum Held {
    /// A CQ (disabled in hardware) that TXDs in flight name.
    Cq(u32),
    /// An MDD (invalidated) and its MRT run, until no TXD uses it and the FMA descriptors
    /// its owner had are idle.
    Mdd {
        mdh: u32,
        mrt: Option<(u32, u32)>,
        fmas: Vec<u32>,
    },
    /// An FMA descriptor (disabled) with requests in flight.
    Fma(u32),
}

/// Kernel resources of the datagram path.
#[derive(Clone, Debug)]
pub(super) struct KernelRes {
    pub(super) cq: u32,
    pub(super) cq_ring: Arc<PageBlock>,
    pub(super) cq_entries: u32,
    pub(super) cq_rd: u32,
    pub(super) tx_stage: Arc<PageBlock>,
    pub(super) rx_buffers: Arc<PageBlock>,
    pub(super) rx_cpu_ring: Arc<PageBlock>,
    pub(super) rx_pos: u16,
    pub(super) rx_write: u16,
}

/// Bytes of one datagram staging or receive buffer.
pub(super) const DGRAM_BUF: u64 = 256;
/// Kernel CQ entries (errors of datagram sends).
pub(super) const KERNEL_CQ_ENTRIES: u32 = 1023;
/// Vector of datagram reception (RX channel 0).
/// BTE channel of kernel datagram traffic, TX and RX (the convention of the device model,
/// `emu_gemini::datagram::DATAGRAM_CHANNEL`: user RDMA uses channels 0..=2).
pub const DGRAM_CHANNEL: usize = 3;
/// The BTE channels user RDMA is spread over.
pub(super) const USER_CHANNELS: [usize; 3] = [0, 1, 2];
/// Vector of datagram reception (RX channel 3: `GHAL_IRQ_INDEX(3, RX)`).
pub(super) const RX_VECTOR: u32 = gpci::FIRST_INBAND_IRQ + 2 * DGRAM_CHANNEL as u32 + gpci::IRQ_RX;
/// How long one blocking slice of a wait lasts.
pub(super) const WAIT_SLICE: Duration = Duration::from_millis(1);
/// The longest a wait blocks at once before it looks at its condition again.
pub(super) const WAIT_SLICE_MAX: Duration = Duration::from_millis(64);
/// Tag of a datagram request in the CQ data of its SEND (for error reporting).
pub(super) const TAG_REQUEST: u64 = 1;
/// Tag of a datagram response in the CQ data of its SEND; the low 40 bits number it in
/// `State::responses`.
pub(super) const TAG_RESPONSE: u64 = 2;
/// Responses kept for sending again after a network error.
pub(super) const RESPONSES_KEPT: usize = 256;
/// Times one response is sent again before kgni gives up on it.
pub(super) const RESPONSE_RESENDS: u32 = 16;

pub(super) struct State {
    pub(super) clients: std::collections::BTreeSet<ClientId>,
    pub(super) jobs: BTreeMap<u8, Job>,
    pub(super) job_generation: u64,
    pub(super) cdm_alloc: IdAllocator,
    pub(super) cdms: BTreeMap<u32, Cdm>,
    pub(super) fma_alloc: IdAllocator,
    pub(super) fma_os_alloc: IdAllocator,
    pub(super) fmas: BTreeMap<u32, Fma>,
    pub(super) cq_alloc: IdAllocator,
    pub(super) cqs: BTreeMap<u32, Cq>,
    pub(super) mdd_alloc: IdAllocator,
    pub(super) mrt_alloc: IdAllocator,
    pub(super) regs: BTreeMap<u32, Reg>,
    pub(super) ntt_alloc: IdAllocator,
    pub(super) ep_alloc: IdAllocator,
    pub(super) eps: BTreeMap<u32, Ep>,
    pub(super) tx: Vec<TxRing>,
    pub(super) rr: usize,
    pub(super) matcher: Matcher,
    pub(super) backlog: VecDeque<Outgoing>,
    /// Responses sent lately, by number, with their resend count: a response lost in the
    /// network is sent again (the peer's post completed on our side only and would wait for
    /// ever; a copy that arrives after the post completed is dropped by the peer).
    pub(super) responses: VecDeque<(u64, Outgoing, u32)>,
    /// The next response number.
    pub(super) next_response: u64,
    pub(super) kernel: KernelRes,
    /// This device's draws of the fault sites.
    pub(super) faults: crate::faults::FaultDraws,
    pub(super) entropy: u16,
    pub(super) held: Vec<Held>,
}

impl State {
    /// A copy of the state when no client object exists (no CDM, FMA, CQ, registration or
    /// endpoint: what the device holds between jobs' processes), `None` otherwise. Rings
    /// and kernel buffers are shared with `self` (they live as long as the device).
    pub(super) fn idle_copy(&self) -> Option<State> {
        let idle = self.cdms.is_empty()
            && self.fmas.is_empty()
            && self.cqs.is_empty()
            && self.regs.is_empty()
            && self.eps.is_empty();
        idle.then(|| State {
            clients: self.clients.clone(),
            jobs: self.jobs.clone(),
            job_generation: self.job_generation,
            cdm_alloc: self.cdm_alloc.clone(),
            cdms: BTreeMap::new(),
            fma_alloc: self.fma_alloc.clone(),
            fma_os_alloc: self.fma_os_alloc.clone(),
            fmas: BTreeMap::new(),
            cq_alloc: self.cq_alloc.clone(),
            cqs: BTreeMap::new(),
            mdd_alloc: self.mdd_alloc.clone(),
            mrt_alloc: self.mrt_alloc.clone(),
            regs: BTreeMap::new(),
            ntt_alloc: self.ntt_alloc.clone(),
            ep_alloc: self.ep_alloc.clone(),
            eps: BTreeMap::new(),
            tx: self.tx.clone(),
            rr: self.rr,
            matcher: self.matcher.clone(),
            backlog: self.backlog.clone(),
            responses: self.responses.clone(),
            next_response: self.next_response,
            kernel: self.kernel.clone(),
            faults: self.faults.clone(),
            entropy: self.entropy,
            held: self.held.clone(),
        })
    }
}

pub(super) fn lookup<T: Owned>(
    map: &mut BTreeMap<u32, T>,
    client: ClientId,
    kind: Object,
    id: u32,
) -> Result<&mut T, KgniError> {
    let o = map.get_mut(&id).ok_or(KgniError::NoSuchHandle {
        kind,
        handle: u64::from(id),
    })?;
    if o.owner() != client {
        return Err(KgniError::NotOwner {
            kind,
            handle: u64::from(id),
        });
    }
    Ok(o)
}

pub(super) fn check_cdm_modes(raw: u32) -> Result<CdmMode, KgniError> {
    let m =
        CdmMode::from_bits(raw).map_err(|_| KgniError::InvalidParam("unknown CDM mode bits"))?;
    let forks = [
        CdmMode::FORK_NOCOPY,
        CdmMode::FORK_FULLCOPY,
        CdmMode::FORK_PARTCOPY,
    ]
    .iter()
    .filter(|f| m.contains(**f))
    .count();
    if forks > 1 {
        return Err(KgniError::InvalidParam("more than one FORK mode"));
    }
    let both = |a: CdmMode, b: CdmMode| m.contains(a) && m.contains(b);
    if both(CdmMode::ERR_NO_KILL, CdmMode::ERR_ALL_KILL) {
        return Err(KgniError::InvalidParam("ERR_NO_KILL with ERR_ALL_KILL"));
    }
    if both(CdmMode::FMA_DEDICATED, CdmMode::FMA_SHARED) {
        return Err(KgniError::InvalidParam("FMA_DEDICATED with FMA_SHARED"));
    }
    if both(CdmMode::MDD_DEDICATED, CdmMode::MDD_SHARED) {
        return Err(KgniError::InvalidParam("MDD_DEDICATED with MDD_SHARED"));
    }
    if m.contains(CdmMode::DLA_ENABLE_FORWARDING) || m.contains(CdmMode::DLA_DISABLE_FORWARDING) {
        return Err(KgniError::Unsupported("DLA modes are Aries-only"));
    }
    Ok(m)
}
