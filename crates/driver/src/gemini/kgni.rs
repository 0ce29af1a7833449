//! kgni: the client services of the Gemini driver. One [`Kgni`] per probed NIC holds the job
//! table, the allocators and every object clients made; a [`KgniClient`] is an open file of
//! `/dev/kgniN`. Requests are checked against the caller's ownership; a client's objects are
//! released when it closes (drops).
//!
//! Locking: one mutex per device guards all state; MMIO is done with it held (the device
//! never calls back into the driver). Waits release it while they let the engine progress.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use emu_core::engine::Progress;
use firmware_spec::gemini::bte::{self, RxDescriptor, TxDescriptor, TxdMode1, TxdMode4};
use firmware_spec::gemini::cq::CqDescriptor;
use firmware_spec::gemini::cqe::{Cqe, CqeSource};
use firmware_spec::gemini::fma::{FmaDescriptor, FmaMode2, FmaMode3, PrivMask};
use firmware_spec::gemini::gni::{
    CdmMode, CqEventMode, CqEventType, CqMode, JobLimits, MemFlags, RdmaMode, ReturnCode, ptag,
};
use firmware_spec::gemini::limits;
use firmware_spec::gemini::mdd::{
    MRT_PAGE_SIZES, MddDescriptor, MddModes, MemHandle, MemHandleFlags, MemHandleInfo, MrtEntry,
};
use firmware_spec::gemini::ntt::{LOGICAL_PES, NttEntry};
use firmware_spec::gemini::pci as gpci;
use firmware_spec::gemini::post::PostDescriptor;

use super::alloc::IdAllocator;
use super::datagram::{self, DgramState, Domain, Matcher, Outgoing, PostError, PostSpec, Wire};
use super::error::{KgniError, Object, Resource};
use super::hw::{self, Ghal, HwError, MmioWindow};
use super::uapi::{
    AttachInfo, CdmId, CqId, CqInfo, DatagramResult, EpId, FmaId, JobConfig, MapKind, Mapping,
    MmapToken, PostInfo, Request, Response,
};
use crate::mem::{HostMem, MapShared, MemWindow, PAGE_SIZE, PageBlock, Pinned, UserSpace};
use crate::pci::{Interrupts, PciFunction};

/// Driver settings of one NIC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KgniConfig {
    /// Device minor (`/dev/kgniN`, the `device_id` of `GNI_CdmAttach`).
    pub device_id: u32,
    /// Translate registrations through the MRT (hugepage-style registrations: each takes
    /// MRT entries of the MRT page size, and registration fails when the MRT is full).
    pub use_mrt: bool,
    /// MRT page size code programmed at probe (2 = 2 MiB, the reset value).
    pub mrt_page_code: u8,
    /// Most CDMs on the device (ours: a bounded kernel table).
    pub max_cdms: u32,
    /// Most endpoints on the device (ours).
    pub max_endpoints: u32,
    /// Largest `entry_count` of a CQ (ours: bounds the ring memory one request can take).
    pub max_cq_entries: u32,
    /// TX ring slots of the four BTE channels. Channels 0..=2 carry user RDMA, channel 3 the
    /// kernel's datagram traffic. The sum must not exceed 1023 (the last slot is
    /// reserved for HSS); a channel keeps one slot empty, so its depth is `count - 1`.
    pub tx_ring: [u16; 4],
    /// RX buffers of channel 3 (datagram reception).
    pub rx_ring: u16,
    /// Early datagram requests held per NIC before new ones are rejected.
    pub dgram_unexpected_limit: usize,
}

impl Default for KgniConfig {
    fn default() -> Self {
        KgniConfig {
            device_id: 0,
            use_mrt: false,
            mrt_page_code: 2,
            max_cdms: 1024,
            max_endpoints: 16 * 1024,
            max_cq_entries: 1 << 20,
            tx_ring: [256, 256, 256, 255],
            rx_ring: 256,
            dgram_unexpected_limit: 1024,
        }
    }
}

/// How waits (`CqWait`, `PostDataWait`) make progress.
#[derive(Clone)]
pub enum Waiter {
    /// The device progresses on its own (threaded engine or real hardware): block on the
    /// interrupt's wait object in short slices.
    Interrupts,
    /// A single-threaded virtual-time engine: call `progress` until the condition holds; when
    /// it reports no work nothing can change any more and the wait ends (`Timeout`).
    Deterministic(Arc<dyn Progress>),
    /// A threaded engine: call `progress`, and block briefly on the interrupt when idle.
    Threaded(Arc<dyn Progress>),
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Waiter::Interrupts => "Waiter::Interrupts",
            Waiter::Deterministic(_) => "Waiter::Deterministic",
            Waiter::Threaded(_) => "Waiter::Threaded",
        })
    }
}

/// What the device showed at probe time, before the driver programmed it (the reset values
/// the contract gives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResetReport {
    /// `NODE_ID`.
    pub node_id: u32,
    /// Revision from config space.
    pub revision: u8,
    /// Class code from config space.
    pub class_code: u32,
    /// BAR 0 size.
    pub bar0_size: u64,
    /// MSI-X vectors.
    pub msix_vectors: u32,
    /// `MRT_PAGESIZE` code.
    pub mrt_page_code: u8,
    /// FMA descriptors whose `PRVMASK` was not `PrivMask::DEFAULT`.
    pub fma_masks_not_default: Vec<u32>,
    /// FMA descriptors with `FMA_ENABLE` set.
    pub fma_enabled: Vec<u32>,
    /// CQ descriptors that were enabled.
    pub cqs_enabled: Vec<u32>,
    /// MDDs that were valid.
    pub mdds_valid: Vec<u32>,
    /// The BTE TX ring partition `(base, count)`.
    pub tx_rings: ([u16; 4], [u16; 4]),
}

/// Free counts of every allocator (and held datagram state), for leak checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreeCounts {
    /// CDM slots.
    pub cdm: u32,
    /// CQ descriptors.
    pub cq: u32,
    /// General FMA descriptors.
    pub fma: u32,
    /// OS FMA descriptors.
    pub fma_os: u32,
    /// MDDs.
    pub mdd: u32,
    /// MRT entries.
    pub mrt: u32,
    /// NTT entries.
    pub ntt: u32,
    /// Endpoints.
    pub endpoint: u32,
    /// Free positions of each BTE TX channel (after reaping what the hardware finished).
    pub bte: [u16; 4],
    /// Datagram posts held.
    pub datagram_posts: usize,
    /// Early datagram requests held.
    pub datagram_unexpected: usize,
    /// Jobs configured.
    pub jobs: usize,
}

/// Identity of an open file.
pub type ClientId = u64;

trait Owned {
    fn owner(&self) -> ClientId;
}

#[derive(Clone, Copy, Debug, Default)]
struct JobUse {
    mdd: u32,
    mrt: u32,
    fma: u32,
    cq: u32,
    bte: u32,
}

#[derive(Debug)]
struct NttGroup {
    first_entry: u32,
    entries: u32,
    table: Vec<u32>,
}

#[derive(Debug)]
struct Job {
    cookie: u32,
    owner: ClientId,
    limits: JobLimits,
    ntt: Option<NttGroup>,
    usage: JobUse,
    attached: u32,
    released: bool,
    generation: u64,
}

fn under_limit(limit: i32, used: u32) -> bool {
    limit < 0 || i64::from(used) < i64::from(limit)
}

impl Job {
    fn pe_group(&self) -> Option<(u32, u32)> {
        self.ntt
            .as_ref()
            .map(|n| (2 * n.first_entry, n.table.len() as u32))
    }
}

#[derive(Debug)]
struct Cdm {
    owner: ClientId,
    inst_id: u32,
    ptag: u8,
    cookie: u32,
    modes: CdmMode,
    fma: Option<u32>,
}

impl Owned for Cdm {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Debug)]
struct Fma {
    owner: ClientId,
    ptag: u8,
    sharers: u32,
    desc: FmaDescriptor,
    window: u64,
    map: Arc<MapShared>,
    job: Option<u8>,
}

impl Owned for Fma {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Debug)]
struct Cq {
    owner: ClientId,
    cdm: u32,
    ring: Arc<PageBlock>,
    ring_entries: u32,
    mode: CqMode,
    vector: u32,
    users: u32,
    map: Arc<MapShared>,
    job: Option<u8>,
}

impl Owned for Cq {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Debug)]
struct Reg {
    owner: ClientId,
    cdm: u32,
    handle: MemHandle,
    va: u64,
    len: u64,
    read_only: bool,
    mrt: Option<(u32, u32)>,
    dst_cq: Option<u32>,
    job: Option<u8>,
    _pinned: Pinned,
}

impl Owned for Reg {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Debug, Clone, Copy)]
struct Bound {
    phys: u32,
    remote_id: u32,
}

#[derive(Debug)]
struct Ep {
    owner: ClientId,
    cdm: u32,
    cq: Option<u32>,
    bound: Option<Bound>,
    event_local: Option<u32>,
    event_remote: u32,
}

impl Owned for Ep {
    fn owner(&self) -> ClientId {
        self.owner
    }
}

#[derive(Debug)]
struct TxRing {
    base: u16,
    count: u16,
    write: u16,
    read: u16,
    /// Job `(ptag, generation)` charged for the TXD at each position.
    charged: Vec<Option<(u8, u64)>>,
}

impl TxRing {
    fn in_flight(&self) -> u16 {
        if self.count == 0 {
            return 0;
        }
        (self.write + self.count - self.read) % self.count
    }

    fn free(&self) -> u16 {
        self.count
            .saturating_sub(1)
            .saturating_sub(self.in_flight())
    }
}

/// Kernel resources of the datagram path.
#[derive(Debug)]
struct KernelRes {
    cq: u32,
    cq_ring: Arc<PageBlock>,
    cq_entries: u32,
    cq_rd: u32,
    tx_stage: Arc<PageBlock>,
    rx_buffers: Arc<PageBlock>,
    rx_cpu_ring: Arc<PageBlock>,
    rx_pos: u16,
    rx_write: u16,
}

/// Bytes of one datagram staging or receive buffer.
const DGRAM_BUF: u64 = 256;
/// Kernel CQ entries (errors of datagram sends).
const KERNEL_CQ_ENTRIES: u32 = 1023;
/// Vector of datagram reception (RX channel 0).
/// BTE channel of kernel datagram traffic, TX and RX (the convention of the device model,
/// `emu_gemini::datagram::DATAGRAM_CHANNEL`: user RDMA uses channels 0..=2).
pub const DGRAM_CHANNEL: usize = 3;
/// The BTE channels user RDMA is spread over.
const USER_CHANNELS: [usize; 3] = [0, 1, 2];
/// Vector of datagram reception (RX channel 3: `GHAL_IRQ_INDEX(3, RX)`).
const RX_VECTOR: u32 = gpci::FIRST_INBAND_IRQ + 2 * DGRAM_CHANNEL as u32 + gpci::IRQ_RX;
/// How long one blocking slice of a wait lasts.
const WAIT_SLICE: Duration = Duration::from_millis(1);
/// Tag of a datagram request in the CQ data of its SEND (for error reporting).
const TAG_REQUEST: u64 = 1;

struct State {
    clients: std::collections::BTreeSet<ClientId>,
    jobs: BTreeMap<u8, Job>,
    job_generation: u64,
    cdm_alloc: IdAllocator,
    cdms: BTreeMap<u32, Cdm>,
    fma_alloc: IdAllocator,
    fma_os_alloc: IdAllocator,
    fmas: BTreeMap<u32, Fma>,
    cq_alloc: IdAllocator,
    cqs: BTreeMap<u32, Cq>,
    mdd_alloc: IdAllocator,
    mrt_alloc: IdAllocator,
    regs: BTreeMap<u32, Reg>,
    ntt_alloc: IdAllocator,
    ep_alloc: IdAllocator,
    eps: BTreeMap<u32, Ep>,
    tx: Vec<TxRing>,
    rr: usize,
    matcher: Matcher,
    backlog: VecDeque<Outgoing>,
    kernel: KernelRes,
    entropy: u16,
}

/// The driver state of one Gemini NIC (the kernel's per-device `kgni` instance).
pub struct Kgni {
    function: Arc<PciFunction>,
    hw: Ghal,
    mem: Arc<dyn HostMem>,
    irqs: Interrupts,
    config: KgniConfig,
    pe: u32,
    reset: ResetReport,
    state: Mutex<State>,
    waiter: Mutex<Waiter>,
    next_client: AtomicU64,
}

impl fmt::Debug for Kgni {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kgni")
            .field("address", &self.function.address())
            .field("device_id", &self.config.device_id)
            .field("pe", &self.pe)
            .finish_non_exhaustive()
    }
}

/// Why `Kgni::probe` refused a function.
#[derive(Debug, thiserror::Error)]
pub enum KgniProbeError {
    /// The function is not a Gemini this driver can drive.
    #[error("unsupported Gemini function: {0}")]
    Unsupported(String),
    /// Programming it failed.
    #[error(transparent)]
    Hw(#[from] HwError),
    /// MSI-X could not be enabled.
    #[error(transparent)]
    Pci(#[from] crate::pci::PciError),
    /// Kernel rings could not be allocated.
    #[error(transparent)]
    Memory(#[from] crate::mem::MemError),
}

fn lookup<T: Owned>(
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

fn check_cdm_modes(raw: u32) -> Result<CdmMode, KgniError> {
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

impl Kgni {
    /// Take over a probed Gemini function: check it, record its reset state, enable MSI-X,
    /// program the MRT page size, partition and enable the BTE channels, and set up the
    /// kernel's datagram rings. `mem` is the node's host memory.
    pub fn probe(
        function: &Arc<PciFunction>,
        mem: Arc<dyn HostMem>,
        config: KgniConfig,
    ) -> Result<Arc<Kgni>, KgniProbeError> {
        let unsupported = |s: String| KgniProbeError::Unsupported(s);
        if function.class_code() != gpci::CLASS_CODE {
            return Err(unsupported(format!(
                "class code {:06x}, expected {:06x}",
                function.class_code(),
                gpci::CLASS_CODE
            )));
        }
        let bar0 = function
            .bar(gpci::BAR0.index)
            .ok_or_else(|| unsupported("no BAR 0".into()))?;
        let bar0_size = bar0.size();
        let hw = Ghal::new(bar0).map_err(|e| unsupported(e.to_string()))?;
        if function.bar(gpci::BAR2.index).is_none() {
            return Err(unsupported("no BAR 2 (MSI-X)".into()));
        }
        let vectors = function.msix_vectors();
        if vectors < u32::from(gpci::MSIX_VECTORS) {
            return Err(unsupported(format!(
                "{vectors} MSI-X vectors, need {}",
                gpci::MSIX_VECTORS
            )));
        }
        let total_tx: u32 = config.tx_ring.iter().map(|c| u32::from(*c)).sum();
        if total_tx > limits::BTE_TX_DESCRIPTORS as u32
            || USER_CHANNELS.iter().all(|c| config.tx_ring[*c] < 2)
            || config.tx_ring[DGRAM_CHANNEL] < 2
            || config.rx_ring < 2
            || u64::from(config.rx_ring) > limits::BTE_RX_DESCRIPTORS
            || usize::from(config.mrt_page_code) >= MRT_PAGE_SIZES.len()
        {
            return Err(unsupported("invalid KgniConfig ring sizes".into()));
        }

        let reset = Self::read_reset(function, &hw, bar0_size)?;
        let pe = reset.node_id;
        let irqs = function.enable_msix(u32::from(gpci::MSIX_VECTORS))?;
        Self::msix_setup(function)?;

        hw.set_mrt_page_code(config.mrt_page_code)?;

        // BTE TX: contiguous partition from slot 0.
        let mut base = [0u16; 4];
        let mut next = 0u16;
        for (c, b) in base.iter_mut().enumerate() {
            *b = next;
            next += config.tx_ring[c];
        }
        hw.bte_set_tx_rings(base, config.tx_ring)?;
        let mut tx = Vec::new();
        for c in 0..limits::BTE_CHANNELS as u32 {
            let count = config.tx_ring[c as usize];
            hw.bte_tx_channel_enable(c, bte::txvc_flag::ENABLE, gpci::irq_index(c, gpci::IRQ_TX))?;
            tx.push(TxRing {
                base: base[c as usize],
                count,
                write: 0,
                read: 0,
                charged: vec![None; usize::from(count)],
            });
        }

        let mut cq_alloc = IdAllocator::new(1, limits::CQ_DESCRIPTORS as u32);
        let kcq = cq_alloc
            .alloc()
            .ok_or_else(|| unsupported("no CQ for the kernel".into()))?;
        let kcq_ring = PageBlock::alloc(&mem, u64::from(KERNEL_CQ_ENTRIES + 1) * 8)?;
        hw.cq_enable(
            kcq,
            &CqDescriptor {
                base_addr: kcq_ring.bus_address(0),
                max_index: u64::from(KERNEL_CQ_ENTRIES),
                irq_req_index: u64::from(gpci::irq_cq_index(0)),
                irq_thresh_index: 1,
                ..CqDescriptor::default()
            },
        )?;

        // Datagram path: TX staging per channel-0 position, RX buffers and CPU ring.
        let rx = config.rx_ring;
        let tx_stage =
            PageBlock::alloc(&mem, u64::from(config.tx_ring[DGRAM_CHANNEL]) * DGRAM_BUF)?;
        let rx_buffers = PageBlock::alloc(&mem, u64::from(rx) * DGRAM_BUF)?;
        let rx_cpu_ring = PageBlock::alloc(&mem, u64::from(rx) * hw::CPU_RX_PITCH)?;
        hw.bte_set_rx_rings([0, 0, 0, 0], [0, 0, 0, rx])?;
        for r in 0..rx - 1 {
            hw.bte_write_rxd(
                u32::from(r),
                &RxDescriptor {
                    base_addr: rx_buffers.bus_address(u64::from(r) * DGRAM_BUF),
                    mode1: 0,
                },
            )?;
        }
        hw.bte_rx_channel_enable(
            DGRAM_CHANNEL as u32,
            DGRAM_BUF as u32,
            rx_cpu_ring.bus_address(0),
            bte::rxvc_flag::ENABLE | bte::rxvc_flag::IRQ_ENABLE,
            RX_VECTOR,
            rx - 1,
        )?;

        let state = State {
            clients: std::collections::BTreeSet::new(),
            jobs: BTreeMap::new(),
            job_generation: 0,
            cdm_alloc: IdAllocator::new(1, config.max_cdms.saturating_add(1)),
            cdms: BTreeMap::new(),
            fma_alloc: IdAllocator::new(0, limits::FMA_DESCRIPTORS as u32),
            fma_os_alloc: IdAllocator::new(
                limits::FMA_DESCRIPTORS as u32,
                limits::FMA_TOTAL_DESCRIPTORS as u32,
            ),
            fmas: BTreeMap::new(),
            cq_alloc,
            cqs: BTreeMap::new(),
            mdd_alloc: IdAllocator::new(0, limits::MDD_ENTRIES as u32),
            mrt_alloc: IdAllocator::new(0, limits::MRT_ENTRIES as u32),
            regs: BTreeMap::new(),
            ntt_alloc: IdAllocator::new(0, limits::NTT_ENTRIES as u32),
            ep_alloc: IdAllocator::new(1, config.max_endpoints.saturating_add(1)),
            eps: BTreeMap::new(),
            tx,
            rr: 0,
            matcher: Matcher::new(pe, config.dgram_unexpected_limit),
            backlog: VecDeque::new(),
            kernel: KernelRes {
                cq: kcq,
                cq_ring: kcq_ring,
                cq_entries: KERNEL_CQ_ENTRIES + 1,
                cq_rd: 0,
                tx_stage,
                rx_buffers,
                rx_cpu_ring,
                rx_pos: 0,
                rx_write: rx - 1,
            },
            entropy: 0,
        };
        tracing::debug!(address = %function.address(), pe, "kgni: Gemini up");
        Ok(Arc::new(Kgni {
            function: Arc::clone(function),
            hw,
            mem,
            irqs,
            config,
            pe,
            reset,
            state: Mutex::new(state),
            waiter: Mutex::new(Waiter::Interrupts),
            next_client: AtomicU64::new(1),
        }))
    }

    /// `pci_enable_device` + `pci_set_master`, then MSI-X: every table entry in BAR 2 gets an
    /// address and its vector number as data and is unmasked, and the capability's enable bit
    /// is set (function mask clear). The device delivers a vector only when all of that holds.
    fn msix_setup(function: &PciFunction) -> Result<(), KgniProbeError> {
        const PCI_COMMAND: u16 = 0x04;
        const COMMAND_MEMORY: u32 = 1 << 1;
        const COMMAND_MASTER: u32 = 1 << 2;
        const CAP_LIST: u16 = 0x34;
        const CAP_ID_MSIX: u32 = 0x11;
        const MSIX_ENABLE: u32 = 1 << 15;
        const MSIX_FUNCTION_MASK: u32 = 1 << 14;
        // The x86 interrupt address window; the emulated platform delivers by vector.
        const MSI_ADDR: u32 = 0xFEE0_0000;
        let cmd = function.config_read(PCI_COMMAND)?;
        function.config_write(PCI_COMMAND, cmd | COMMAND_MEMORY | COMMAND_MASTER)?;
        let bar2 = function
            .bar(gpci::BAR2.index)
            .ok_or_else(|| KgniProbeError::Unsupported("no BAR 2 (MSI-X)".into()))?;
        let mmio = |off: u64, v: u32| {
            bar2.write_u32(off, v).map_err(|source| HwError::Mmio {
                what: "msix_table",
                offset: off,
                source,
            })
        };
        for v in 0..u32::from(gpci::MSIX_VECTORS) {
            let e = gpci::MSIX_TABLE_OFFSET + 16 * u64::from(v);
            mmio(e, MSI_ADDR)?;
            mmio(e + 4, 0)?;
            mmio(e + 8, v)?;
            mmio(e + 12, 0)?;
        }
        let mut ptr = (function.config_read(CAP_LIST)? & 0xfc) as u16;
        for _ in 0..48 {
            if ptr == 0 {
                break;
            }
            let dw = function.config_read(ptr)?;
            if dw & 0xff == CAP_ID_MSIX {
                let ctl = (dw | (MSIX_ENABLE << 16)) & !(MSIX_FUNCTION_MASK << 16);
                function.config_write(ptr, ctl)?;
                return Ok(());
            }
            ptr = ((dw >> 8) & 0xfc) as u16;
        }
        Err(KgniProbeError::Unsupported("no MSI-X capability".into()))
    }

    fn read_reset(
        function: &PciFunction,
        hw: &Ghal,
        bar0_size: u64,
    ) -> Result<ResetReport, HwError> {
        let mut fma_masks_not_default = Vec::new();
        let mut fma_enabled = Vec::new();
        for id in 0..limits::FMA_TOTAL_DESCRIPTORS as u32 {
            if hw.fma_prvmask(id)? != PrivMask::DEFAULT.bits() {
                fma_masks_not_default.push(id);
            }
            if hw.fma_enabled(id)? {
                fma_enabled.push(id);
            }
        }
        let mut cqs_enabled = Vec::new();
        for i in 0..limits::CQ_DESCRIPTORS as u32 {
            if hw.cq_is_enabled(i)? {
                cqs_enabled.push(i);
            }
        }
        let mut mdds_valid = Vec::new();
        for i in 0..limits::MDD_ENTRIES as u32 {
            if hw.mdd_is_valid(i)? {
                mdds_valid.push(i);
            }
        }
        Ok(ResetReport {
            node_id: hw.node_id()?,
            revision: function.revision(),
            class_code: function.class_code(),
            bar0_size,
            msix_vectors: function.msix_vectors(),
            mrt_page_code: hw.mrt_page_code()?,
            fma_masks_not_default,
            fma_enabled,
            cqs_enabled,
            mdds_valid,
            tx_rings: hw.bte_tx_rings()?,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Handlers leave the state consistent at every await-free step; a panic elsewhere does
        // not invalidate it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The PCI function.
    pub fn function(&self) -> &Arc<PciFunction> {
        &self.function
    }

    /// The hardware access layer.
    pub fn hw(&self) -> &Ghal {
        &self.hw
    }

    /// The MSI-X vectors.
    pub fn interrupts(&self) -> &Interrupts {
        &self.irqs
    }

    /// This NIC's physical PE.
    pub fn nic_addr(&self) -> u32 {
        self.pe
    }

    /// The device minor.
    pub fn device_id(&self) -> u32 {
        self.config.device_id
    }

    /// The settings the device was probed with.
    pub fn config(&self) -> &KgniConfig {
        &self.config
    }

    /// What the device showed before the driver programmed it.
    pub fn reset_report(&self) -> &ResetReport {
        &self.reset
    }

    /// Set how waits make progress (the node assembly knows which engine drives the device).
    pub fn set_waiter(&self, waiter: Waiter) {
        *self.waiter.lock().unwrap_or_else(PoisonError::into_inner) = waiter;
    }

    fn waiter(&self) -> Waiter {
        self.waiter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Open the device as an ordinary process whose memory is `space`.
    pub fn open(self: &Arc<Self>, space: UserSpace) -> KgniClient {
        self.open_as(space, false)
    }

    /// Open the device as a privileged process (the job launcher, a kernel service): it may
    /// configure jobs, use reserved ptags and post physical-address RDMA.
    pub fn open_privileged(self: &Arc<Self>, space: UserSpace) -> KgniClient {
        self.open_as(space, true)
    }

    fn open_as(self: &Arc<Self>, space: UserSpace, privileged: bool) -> KgniClient {
        let id = self.next_client.fetch_add(1, Ordering::Relaxed);
        self.lock().clients.insert(id);
        KgniClient {
            dev: Arc::clone(self),
            id,
            privileged,
            space,
        }
    }

    /// Free counts of every allocator, after reaping finished BTE work.
    pub fn free_counts(&self) -> FreeCounts {
        let mut st = self.lock();
        for c in 0..st.tx.len() {
            self.reap(&mut st, c);
        }
        FreeCounts {
            cdm: st.cdm_alloc.free_count(),
            cq: st.cq_alloc.free_count(),
            fma: st.fma_alloc.free_count(),
            fma_os: st.fma_os_alloc.free_count(),
            mdd: st.mdd_alloc.free_count(),
            mrt: st.mrt_alloc.free_count(),
            ntt: st.ntt_alloc.free_count(),
            endpoint: st.ep_alloc.free_count(),
            bte: [0, 1, 2, 3].map(|c| st.tx.get(c).map_or(0, TxRing::free)),
            datagram_posts: st.matcher.posts(),
            datagram_unexpected: st.matcher.unexpected(),
            jobs: st.jobs.len(),
        }
    }

    /// Clients with the device open.
    pub fn open_clients(&self) -> usize {
        self.lock().clients.len()
    }

    /// Datagram matcher counters.
    pub fn datagram_counters(&self) -> datagram::DgramCounters {
        self.lock().matcher.counters()
    }

    /// The interrupt-handler work: retire finished datagram sends (and their errors), take
    /// received datagram messages, match them, and send what is queued. Returns whether
    /// anything happened. Waits call it; a node assembly may call it from its own progress.
    pub fn service(&self) -> bool {
        let mut st = self.lock();
        self.service_locked(&mut st)
    }

    fn service_locked(&self, st: &mut State) -> bool {
        let mut did = self.reap_kernel_cq(st);
        did |= self.receive(st);
        did |= self.flush_backlog(st);
        did
    }

    // ---- BTE rings -----------------------------------------------------------------------

    fn reap(&self, st: &mut State, c: usize) {
        let Some(ring) = st.tx.get(c) else {
            return;
        };
        if ring.count == 0 {
            return;
        }
        let r = match self.hw.bte_tx_read_index(c as u32) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(channel = c, error = %e, "kgni: BTE read index");
                return;
            }
        };
        if r >= ring.count {
            tracing::warn!(channel = c, r, "kgni: BTE read index outside the ring");
            return;
        }
        let State { tx, jobs, .. } = st;
        let ring = &mut tx[c];
        while ring.read != r && ring.read != ring.write {
            if let Some((p, generation)) = ring.charged[usize::from(ring.read)].take()
                && let Some(j) = jobs.get_mut(&p)
                && j.generation == generation
            {
                j.usage.bte = j.usage.bte.saturating_sub(1);
            }
            ring.read = (ring.read + 1) % ring.count;
        }
    }

    // ---- datagram transport ----------------------------------------------------------------

    fn send_all(&self, st: &mut State, out: Vec<Outgoing>) {
        st.backlog.extend(out);
        self.flush_backlog(st);
    }

    fn flush_backlog(&self, st: &mut State) -> bool {
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
                    st.matcher.send_failed(o.wire.seq);
                }
            }
        }
        did
    }

    fn send_wire(&self, st: &mut State, o: &Outgoing) -> Result<(), KgniError> {
        let bytes = o.wire.encode();
        let ring = &st.tx[DGRAM_CHANNEL];
        let pos = ring.write;
        let next = (pos + 1) % ring.count;
        let off = u64::from(pos) * DGRAM_BUF;
        let k = &st.kernel;
        self.mem
            .write(k.tx_stage.addr() + off, &bytes)
            .map_err(|_| KgniError::NoMemory)?;
        let tag = if o.wire.kind == datagram::WireKind::Request {
            TAG_REQUEST
        } else {
            0
        };
        let cq_data = Cqe::sw(
            CqEventType::Post,
            (tag << 40) | (o.wire.seq & ((1 << 40) - 1)),
        )
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
        let slot = u32::from(ring.base + pos);
        self.hw.bte_post(DGRAM_CHANNEL as u32, slot, &t, next)?;
        st.tx[DGRAM_CHANNEL].write = next;
        Ok(())
    }

    fn reap_kernel_cq(&self, st: &mut State) -> bool {
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
                if data >> 40 == TAG_REQUEST {
                    st.matcher.send_failed(data & ((1 << 40) - 1));
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

    fn receive(&self, st: &mut State) -> bool {
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

    fn block(&self, vector: u32, deadline: Option<Instant>) {
        let slice = deadline.map_or(WAIT_SLICE, |d| {
            d.saturating_duration_since(Instant::now()).min(WAIT_SLICE)
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
    fn wait_for<T>(
        &self,
        timeout: Option<Duration>,
        vector: u32,
        mut check: impl FnMut() -> Result<Option<T>, KgniError>,
    ) -> Result<T, KgniError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let waiter = self.waiter();
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
                    if !p.progress() {
                        self.block(vector, deadline);
                    }
                }
                Waiter::Interrupts => self.block(vector, deadline),
            }
        }
    }

    // ---- client close ----------------------------------------------------------------------

    fn close(&self, client: ClientId) {
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

    fn maybe_free_job(&self, st: &mut State, p: u8) {
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
    fn teardown_cdm(&self, st: &mut State, cdm: u32) {
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

    fn put_fma(&self, st: &mut State, id: u32) {
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
        if !st.fma_alloc.free(id) {
            st.fma_os_alloc.free(id);
        }
    }

    fn destroy_ep(&self, st: &mut State, ep: u32) {
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

    fn deregister(&self, st: &mut State, mdh: u32) {
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
            st.mrt_alloc.free_run(k, n);
        }
        st.mdd_alloc.free(mdh);
        if let Some(cq) = r.dst_cq.and_then(|c| st.cqs.get_mut(&c)) {
            cq.users = cq.users.saturating_sub(1);
        }
        if let Some(j) = r.job.and_then(|p| st.jobs.get_mut(&p)) {
            j.usage.mdd = j.usage.mdd.saturating_sub(1);
            j.usage.mrt = j.usage.mrt.saturating_sub(r.mrt.map_or(0, |(_, n)| n));
        }
    }

    fn destroy_cq(&self, st: &mut State, cq: u32) {
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
        if let Some(j) = c.job.and_then(|p| st.jobs.get_mut(&p)) {
            j.usage.cq = j.usage.cq.saturating_sub(1);
        }
        st.cq_alloc.free(cq);
    }

    // ---- requests ------------------------------------------------------------------------

    fn handle(&self, client: &KgniClient, req: Request) -> Result<Response, KgniError> {
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

    fn configure_job(
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

    fn release_job(
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

    fn cdm_create(
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

    fn cdm_attach(
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

    fn new_fma(
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

    fn attached_fma(st: &mut State, client: ClientId, cdm: CdmId) -> Result<u32, KgniError> {
        lookup(&mut st.cdms, client, Object::Cdm, cdm.0)?
            .fma
            .ok_or(KgniError::InvalidState("the CDM is not attached"))
    }

    fn fma_set_cq(
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

    fn cq_create(
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

    fn cq_wait(
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
    fn mem_register(
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

    fn ep_create(
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
    fn resolve_pe(st: &State, p: u8, addr: u32) -> Result<u32, KgniError> {
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

    fn ep_bind(
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

    fn own_registration<'a>(
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

    fn post_rdma(
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
        let ring = &st.tx[c];
        let pos = ring.write;
        let next = (pos + 1) % ring.count;
        let slot = u32::from(ring.base + pos);
        self.hw.bte_post(c as u32, slot, &t, next)?;
        let ring = &mut st.tx[c];
        ring.write = next;
        ring.charged[usize::from(pos)] = generation.map(|g| (p, g));
        if let Some(j) = st.jobs.get_mut(&p) {
            j.usage.bte += 1;
        }
        Ok(Response::Posted(PostInfo {
            channel: c as u32,
            position: pos,
        }))
    }

    fn post_data(
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

    fn ep_by_dgram_id(
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
    fn dgram_collect(
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

    fn result(state: DgramState, id: Option<u64>) -> DatagramResult {
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

    fn dgram_wait(
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

    fn dgram_cancel(
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

    fn mmap(
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

/// An open file of `/dev/kgniN`. Dropping it closes the file: every object the client made
/// is released and its mappings are revoked.
pub struct KgniClient {
    dev: Arc<Kgni>,
    id: ClientId,
    privileged: bool,
    space: UserSpace,
}

impl fmt::Debug for KgniClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KgniClient")
            .field("id", &self.id)
            .field("privileged", &self.privileged)
            .finish()
    }
}

impl Drop for KgniClient {
    fn drop(&mut self) {
        self.dev.close(self.id);
    }
}

impl KgniClient {
    /// The device.
    pub fn device(&self) -> &Arc<Kgni> {
        &self.dev
    }

    /// This client's id.
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The client's address space.
    pub fn space(&self) -> &UserSpace {
        &self.space
    }

    /// Issue one request (the ioctl).
    pub fn request(&self, req: Request) -> Result<Response, KgniError> {
        self.dev.handle(self, req)
    }

    fn expect<T>(
        &self,
        req: Request,
        f: impl FnOnce(Response) -> Option<T>,
    ) -> Result<T, KgniError> {
        f(self.request(req)?).ok_or(KgniError::InvalidState("unexpected response"))
    }

    /// `ConfigureJob`.
    pub fn configure_job(&self, job: JobConfig) -> Result<(), KgniError> {
        self.request(Request::ConfigureJob(job)).map(|_| ())
    }

    /// `CdmCreate`.
    pub fn cdm_create(
        &self,
        inst_id: u32,
        ptag: u8,
        cookie: u32,
        modes: u32,
    ) -> Result<CdmId, KgniError> {
        self.expect(
            Request::CdmCreate {
                inst_id,
                ptag,
                cookie,
                modes,
            },
            |r| match r {
                Response::Cdm(c) => Some(c),
                _ => None,
            },
        )
    }

    /// `CdmAttach` to this device.
    pub fn cdm_attach(&self, cdm: CdmId) -> Result<AttachInfo, KgniError> {
        self.expect(Request::CdmAttach { cdm, device_id: -1 }, |r| match r {
            Response::Attached(a) => Some(a),
            _ => None,
        })
    }

    /// `CqCreate`.
    pub fn cq_create(
        &self,
        cdm: CdmId,
        entry_count: u32,
        delay_count: u32,
        mode: CqMode,
    ) -> Result<CqInfo, KgniError> {
        self.expect(
            Request::CqCreate {
                cdm,
                entry_count,
                delay_count,
                mode: mode.bits(),
            },
            |r| match r {
                Response::Cq(c) => Some(c),
                _ => None,
            },
        )
    }

    /// `MemRegister`.
    pub fn mem_register(
        &self,
        cdm: CdmId,
        addr: u64,
        len: u64,
        dst_cq: Option<CqId>,
        flags: MemFlags,
    ) -> Result<MemHandle, KgniError> {
        self.expect(
            Request::MemRegister {
                cdm,
                addr,
                len,
                dst_cq,
                flags: flags.bits(),
            },
            |r| match r {
                Response::MemHandle(h) => Some(h),
                _ => None,
            },
        )
    }

    /// `MemDeregister`.
    pub fn mem_deregister(&self, cdm: CdmId, handle: MemHandle) -> Result<(), KgniError> {
        self.request(Request::MemDeregister { cdm, handle })
            .map(|_| ())
    }

    /// `EpCreate`.
    pub fn ep_create(&self, cdm: CdmId, cq: Option<CqId>) -> Result<EpId, KgniError> {
        self.expect(Request::EpCreate { cdm, cq }, |r| match r {
            Response::Ep(e) => Some(e),
            _ => None,
        })
    }

    /// `EpBind`.
    pub fn ep_bind(&self, ep: EpId, remote_addr: u32, remote_id: u32) -> Result<(), KgniError> {
        self.request(Request::EpBind {
            ep,
            remote_addr,
            remote_id,
        })
        .map(|_| ())
    }

    /// `PostRdma`.
    pub fn post_rdma(&self, ep: EpId, desc: PostDescriptor) -> Result<PostInfo, KgniError> {
        self.expect(
            Request::PostRdma {
                ep,
                desc: Box::new(desc),
            },
            |r| match r {
                Response::Posted(p) => Some(p),
                _ => None,
            },
        )
    }

    /// `EpPostData` / `EpPostDataWId`.
    pub fn post_data(
        &self,
        ep: EpId,
        id: Option<u64>,
        data: &[u8],
        out_len: usize,
    ) -> Result<(), KgniError> {
        self.request(Request::EpPostData {
            ep,
            id,
            data: data.to_vec(),
            out_len,
        })
        .map(|_| ())
    }

    /// `EpPostDataTest`.
    pub fn post_data_test(&self, ep: EpId) -> Result<DatagramResult, KgniError> {
        self.expect(Request::PostDataTest { ep }, |r| match r {
            Response::Datagram(d) => Some(d),
            _ => None,
        })
    }

    /// `EpPostDataWait`.
    pub fn post_data_wait(
        &self,
        ep: EpId,
        timeout: Option<Duration>,
    ) -> Result<DatagramResult, KgniError> {
        self.expect(Request::PostDataWait { ep, timeout }, |r| match r {
            Response::Datagram(d) => Some(d),
            _ => None,
        })
    }

    /// `Mmap`.
    pub fn mmap(&self, token: MmapToken) -> Result<Mapping, KgniError> {
        self.expect(Request::Mmap { token }, |r| match r {
            Response::Mapping(m) => Some(m),
            _ => None,
        })
    }
}
