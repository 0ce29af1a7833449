//! `cxi_*`: client services of one Cassini device. Per-device allocators with the hardware's
//! limits, services, LNIs, domains, communication profiles, CQs, EQs, PtlTEs, CTs, wait
//! objects and memory descriptors, each owned by the client that made it; a client may only
//! name its own objects (anything else is `EINVAL`, as the driver's per-client idr lookups
//! give). Closing a client releases everything it held; a device reset releases everything.
//!
//! The uAPI front end ([`super::client`]) decodes requests and calls the handlers here with
//! the device lock held; hardware is programmed through [`super::hw`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use emu_core::memory::PageAllocator;
use firmware_spec::cassini::dfa::{self, C_PID_ANY, PidBits};
use firmware_spec::cassini::le::{CqAllocFlags, EqFlags, MapFlags, PtAllocOpts, PtlteState};
use firmware_spec::cassini::limits as lim;
use firmware_spec::cassini::pci::{CSR_SIZE, CassiniVersion, Generation, Platform};
use firmware_spec::cassini::rc::ReturnCode;

use super::atu::NtaTables;
use super::hw::{self, CassHw, CqConfig, EqConfig, HwError, PortalKey, PtlteConfig, TaMode};
use super::uapi::*;
use crate::alloc::IdAllocator;
use crate::mem::{HostMem, MapShared, MemError, PAGE_SIZE, PageBlock, Pinned, UserSpace};
use crate::pci::{Interrupts, PciAddress, PciFunction, PciId, WaitObject};

/// A client of the device (an open file of `/dev/cxiN`).
pub type ClientId = u32;

/// Module parameters of the driver (`cxi-ss1.ko` parameters where they exist).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverConfig {
    /// `pid_bits` (6..9).
    pub pid_bits: u32,
    /// `default_vnis`: VNIs of the default service.
    pub default_vnis: Vec<u16>,
    /// `disable_default_svc`.
    pub disable_default_svc: bool,
    /// First IOVA of each address context (bytes, page aligned, non-zero).
    pub iova_base: u64,
    /// Size of each address context's IOVA space (bytes, page aligned).
    pub iova_size: u64,
    /// MSI-X vectors to enable (the driver asks for 128 under NETSIM).
    pub msix_vectors: u32,
    /// `rdzv_get_en_default`.
    pub rdzv_get_en: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            pid_bits: lim::DEFAULT_PID_BITS,
            default_vnis: vec![1, 10],
            disable_default_svc: false,
            iova_base: 1 << 30,
            iova_size: 1 << 40,
            msix_vectors: 128,
            rdzv_get_en: true,
        }
    }
}

/// What probing learned about a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevInfo {
    /// PCI address.
    pub address: PciAddress,
    /// PCI ids.
    pub id: PciId,
    /// Chip version.
    pub version: CassiniVersion,
    /// Platform.
    pub platform: Platform,
    /// `c_mb_sts_rev.rev`.
    pub rev: u16,
    /// `c_mb_sts_rev.proto`.
    pub proto: u16,
    /// NID.
    pub nid: u32,
    /// PID width.
    pub pid_bits: PidBits,
    /// PIDs per VNI (`2^pid_bits - 1`: the top value is the wildcard).
    pub pid_count: u32,
    /// PtlTE indices per PID.
    pub pid_granule: u32,
    /// PtlTE index of rendezvous Gets (`pid_granule - 1`).
    pub rdzv_get_idx: u32,
    /// A virtual function (BAR0 smaller than a PF's).
    pub is_vf: bool,
    /// MSI-X vectors enabled.
    pub msix_vectors: u32,
}

/// Credentials of a client (the opener's uid/gid and CAP_SYS_ADMIN).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// CAP_SYS_ADMIN (and the device is a PF).
    pub admin: bool,
}

/// Free entries of every allocator, to check that closing clients returns everything.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FreeCounts {
    /// Transmit CQs.
    pub txqs: u32,
    /// Target CQs.
    pub tgqs: u32,
    /// EQs.
    pub eqs: u32,
    /// CTs.
    pub cts: u32,
    /// PtlTEs.
    pub ptes: u32,
    /// Resource groups (LNIs).
    pub rgids: u32,
    /// Address contexts.
    pub acs: u32,
    /// Communication profile table entries.
    pub cps: u32,
    /// RMU portal TCAM entries.
    pub portal_entries: u32,
    /// RMU VNI list entries.
    pub vni_entries: u32,
    /// MSI-X vectors for wait objects.
    pub wait_vectors: u32,
    /// Memory descriptor ids.
    pub mds: u32,
    /// Domain ids.
    pub domains: u32,
    /// CP handles.
    pub cp_handles: u32,
    /// PIDs in use or reserved, over all VNIs.
    pub pids_in_use: u32,
    /// TLE pools (4; pool 0 is the default service's and the shared one).
    pub tle_pools: u32,
    /// Host pages the driver holds for rings and page tables.
    pub driver_pages: u64,
    /// mmap tokens outstanding.
    pub mmap_tokens: u32,
}

/// `enum cxi_rsrc_type` indices.
mod rsrc {
    pub const PTE: usize = 0;
    pub const TXQ: usize = 1;
    pub const TGQ: usize = 2;
    pub const EQ: usize = 3;
    pub const CT: usize = 4;
    pub const LE: usize = 5;
    pub const TLE: usize = 6;
    pub const AC: usize = 7;
}

/// The physical (passthrough) AC the driver uses for its own memory (`C_NUM_ACS`: "0
/// invalid, 1 physical").
pub const PHYS_ACID: u32 = 1;
/// Size of a mapped launch, EE or doorbell page (one host page, cassini.md §1.2).
const MMIO_PAGE: u64 = PAGE_SIZE;
/// `CXI_WAIT_NONE`, `CXI_MD_NONE`, `C_EQ_NONE`.
const NONE: u32 = 0;
/// `enum cxi_trig_cp`.
const TRIG_LCID: u32 = 0;
const NON_TRIG_LCID: u32 = 1;
const ANY_LCID: u32 = 2;

/// Svc descriptor bits.
mod svcbits {
    pub const RESTRICTED_MEMBERS: u8 = 1 << 0;
    pub const RESTRICTED_VNIS: u8 = 1 << 1;
    pub const RESTRICTED_TCS: u8 = 1 << 2;
    pub const RESOURCE_LIMITS: u8 = 1 << 3;
    pub const ENABLE: u8 = 1 << 4;
    pub const IS_SYSTEM_SVC: u8 = 1 << 5;
}

#[derive(Debug)]
struct Service {
    desc: SvcDesc,
    lnis: u32,
    in_use: [u16; 8],
    lpr: u32,
    /// Its own TLE pool (services with a TLE limit), else pool 0.
    tle_pool: u32,
}

#[derive(Debug)]
struct Lni {
    client: ClientId,
    svc: u32,
    rgid: u32,
    pe: u32,
    lcids: IdAllocator,
    /// AC behind LAC 0 (0 = none yet).
    acid: u32,
    refs: u32,
}

#[derive(Debug)]
struct CpEntry {
    vni: u32,
    tc: u32,
    tc_type: u32,
    refs: u32,
}

#[derive(Debug)]
struct CpHandle {
    client: ClientId,
    lni: u32,
    cp: u32,
    lcid: u32,
}

#[derive(Debug)]
struct Domain {
    client: ClientId,
    lni: u32,
    vni: u32,
    pid: u32,
    maps: u32,
}

#[derive(Debug, Clone, Copy)]
struct PidOwner {
    lni: u32,
    domain: Option<u32>,
    reserved: bool,
}

#[derive(Debug)]
struct VniEntry {
    idx: u32,
    refs: u32,
}

#[derive(Debug)]
struct Cq {
    client: ClientId,
    lni: u32,
    tx: bool,
    n: u32,
    eq: u32,
    ring: Arc<PageBlock>,
    tokens: [u64; 2],
    shared: Arc<MapShared>,
}

#[derive(Debug)]
struct EqObj {
    client: ClientId,
    lni: u32,
    md: u32,
    _pin: Option<Pinned>,
    waits: [u32; 2],
    slots: u32,
    reserved_fc: u32,
    refs: u32,
    token: u64,
    shared: Arc<MapShared>,
}

#[derive(Debug)]
struct Pte {
    client: ClientId,
    lni: u32,
    eq: u32,
    maps: u32,
}

#[derive(Debug)]
struct PteMapping {
    client: ClientId,
    pte: u32,
    domain: u32,
    key: PortalKey,
}

#[derive(Debug)]
struct Ct {
    client: ClientId,
    lni: u32,
    _pin: Pinned,
    token: u64,
    shared: Arc<MapShared>,
}

#[derive(Debug)]
struct MdObj {
    client: ClientId,
    lni: u32,
    acid: u32,
    va: u64,
    len: u64,
    iova: u64,
    pins: Vec<Pinned>,
    refs: u32,
}

#[derive(Debug)]
struct Ac {
    tables: NtaTables,
    iova: PageAllocator,
    mds: u32,
}

#[derive(Debug)]
struct Wait {
    client: ClientId,
    lni: u32,
    vector: u32,
    refs: u32,
}

/// Where an mmap token points.
#[derive(Clone, Debug)]
pub(crate) enum MapTarget {
    /// A window of BAR0.
    Mmio { offset: u64, len: u64 },
    /// Driver-owned host pages.
    Memory {
        pages: Arc<PageBlock>,
        offset: u64,
        len: u64,
    },
}

/// One mmap token of a client.
#[derive(Clone, Debug)]
pub(crate) struct MmapEntry {
    pub(crate) size: u64,
    pub(crate) target: MapTarget,
    pub(crate) shared: Arc<MapShared>,
}

#[derive(Debug)]
pub(crate) struct ClientState {
    pub(crate) creds: Credentials,
    pub(crate) space: UserSpace,
    pub(crate) mmaps: BTreeMap<u64, MmapEntry>,
    next_mmap: u64,
    pub(crate) dead: bool,
}

/// Allocators and objects of one device.
#[derive(Debug)]
pub(crate) struct DevState {
    txq: IdAllocator,
    tgq: IdAllocator,
    eqn: IdAllocator,
    ctn: IdAllocator,
    ptn: IdAllocator,
    rgid: IdAllocator,
    acid: IdAllocator,
    cpn: IdAllocator,
    portal: IdAllocator,
    vni_list: IdAllocator,
    wait_vec: IdAllocator,
    md_id: IdAllocator,
    domain_id: IdAllocator,
    cp_hndl: IdAllocator,
    svc_id: IdAllocator,
    tle_pool: IdAllocator,

    services: BTreeMap<u32, Service>,
    lnis: BTreeMap<u32, Lni>,
    cps: BTreeMap<u32, CpEntry>,
    cp_handles: BTreeMap<u32, CpHandle>,
    domains: BTreeMap<u32, Domain>,
    pids: BTreeMap<(u32, u32), PidOwner>,
    vnis: BTreeMap<u32, VniEntry>,
    cqs: BTreeMap<u32, Cq>,
    eqs: BTreeMap<u32, EqObj>,
    ptes: BTreeMap<u32, Pte>,
    pte_maps: BTreeMap<u32, PteMapping>,
    cts: BTreeMap<u32, Ct>,
    mds: BTreeMap<u32, MdObj>,
    acs: BTreeMap<u32, Ac>,
    waits: BTreeMap<u32, Wait>,
    pub(crate) clients: BTreeMap<ClientId, ClientState>,
    next_client: ClientId,
}

fn eio(e: HwError) -> Errno {
    tracing::warn!(error = %e, "cassini hardware access failed");
    Errno::Eio
}

fn enomem(e: MemError) -> Errno {
    match e {
        MemError::Exhausted { .. } | MemError::ZeroLength => Errno::Enomem,
        _ => Errno::Eio,
    }
}

/// Look up `id` in `map`, requiring `client` to own it.
macro_rules! owned {
    ($map:expr, $id:expr, $client:expr) => {
        match $map.get(&$id) {
            Some(o) if o.client == $client => o,
            _ => return Err(Errno::Einval),
        }
    };
}
macro_rules! owned_mut {
    ($map:expr, $id:expr, $client:expr) => {
        match $map.get_mut(&$id) {
            Some(o) if o.client == $client => o,
            _ => return Err(Errno::Einval),
        }
    };
}

impl DevState {
    fn new(wait_vectors: u32) -> Self {
        DevState {
            txq: IdAllocator::new(0, lim::C_NUM_TRANSMIT_CQS as u32),
            tgq: IdAllocator::new(0, lim::C_NUM_TARGET_CQS as u32),
            eqn: IdAllocator::new(1, lim::C_NUM_EQS as u32),
            ctn: IdAllocator::new(1, lim::C_NUM_CTS as u32),
            ptn: IdAllocator::new(1, lim::C_NUM_PTLTES as u32),
            rgid: IdAllocator::new(1, lim::C_NUM_RGIDS as u32),
            acid: IdAllocator::new(PHYS_ACID + 1, lim::C_NUM_ACS as u32),
            cpn: IdAllocator::new(0, lim::C_CQ_CFG_CP_TABLE_ENTRIES as u32),
            portal: IdAllocator::new(0, 2560),
            vni_list: IdAllocator::new(0, lim::C_RMU_VNI_LIST_ENTRIES as u32),
            wait_vec: IdAllocator::new(0, wait_vectors),
            md_id: IdAllocator::new(1, 1 << 16),
            domain_id: IdAllocator::new(1, 1 << 16),
            cp_hndl: IdAllocator::new(1, 1 << 16),
            svc_id: IdAllocator::new(1, 1 << 10),
            // Pool 0 serves the default service and every service without a TLE limit.
            tle_pool: {
                let mut a = IdAllocator::new(0, NUM_TLE_POOLS);
                a.alloc_specific(0);
                a
            },
            services: BTreeMap::new(),
            lnis: BTreeMap::new(),
            cps: BTreeMap::new(),
            cp_handles: BTreeMap::new(),
            domains: BTreeMap::new(),
            pids: BTreeMap::new(),
            vnis: BTreeMap::new(),
            cqs: BTreeMap::new(),
            eqs: BTreeMap::new(),
            ptes: BTreeMap::new(),
            pte_maps: BTreeMap::new(),
            cts: BTreeMap::new(),
            mds: BTreeMap::new(),
            acs: BTreeMap::new(),
            waits: BTreeMap::new(),
            clients: BTreeMap::new(),
            next_client: 1,
        }
    }

    fn free_counts(&self) -> FreeCounts {
        let ring_pages: u64 = self.cqs.values().map(|c| c.ring.len() / PAGE_SIZE).sum();
        let table_pages: u64 = self
            .acs
            .values()
            .map(|a| a.tables.table_pages() as u64)
            .sum();
        FreeCounts {
            txqs: self.txq.free_count(),
            tgqs: self.tgq.free_count(),
            eqs: self.eqn.free_count(),
            cts: self.ctn.free_count(),
            ptes: self.ptn.free_count(),
            rgids: self.rgid.free_count(),
            acs: self.acid.free_count(),
            cps: self.cpn.free_count(),
            portal_entries: self.portal.free_count(),
            vni_entries: self.vni_list.free_count(),
            wait_vectors: self.wait_vec.free_count(),
            mds: self.md_id.free_count(),
            domains: self.domain_id.free_count(),
            cp_handles: self.cp_hndl.free_count(),
            pids_in_use: self.pids.len() as u32,
            tle_pools: self.tle_pool.free_count(),
            driver_pages: ring_pages + table_pages,
            mmap_tokens: self.clients.values().map(|c| c.mmaps.len() as u32).sum(),
        }
    }
}

/// The limits of every `enum cxi_rsrc_type` on this device (`cxi_properties_info.rsrcs`).
fn device_limits() -> [u16; 8] {
    let mut l = [0u16; 8];
    l[rsrc::PTE] = (lim::C_NUM_PTLTES - 1) as u16;
    l[rsrc::TXQ] = lim::C_NUM_TRANSMIT_CQS as u16;
    l[rsrc::TGQ] = lim::C_NUM_TARGET_CQS as u16;
    l[rsrc::EQ] = (lim::C_NUM_EQS - 1) as u16;
    l[rsrc::CT] = (lim::C_NUM_CTS - 1) as u16;
    l[rsrc::LE] = u16::try_from(lim::C_NUM_LES).unwrap_or(u16::MAX);
    l[rsrc::TLE] = lim::C_NUM_TLES as u16;
    l[rsrc::AC] = (lim::C_NUM_ACS - 2) as u16;
    l
}

/// One Cassini device bound to this driver: `struct cxi_dev` + `struct cass_dev`.
pub struct CxiDevice {
    function: Arc<PciFunction>,
    hw: CassHw,
    mem: Arc<dyn HostMem>,
    config: DriverConfig,
    info: DevInfo,
    irqs: Option<Interrupts>,
    initial: FreeCounts,
    state: Mutex<DevState>,
    resets: AtomicU64,
    progress: OnceLock<Arc<dyn emu_core::engine::Progress>>,
}

impl std::fmt::Debug for CxiDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CxiDevice")
            .field("address", &self.info.address)
            .field("nid", &format_args!("{:#x}", self.info.nid))
            .field("version", &self.info.version)
            .finish_non_exhaustive()
    }
}

/// Why a device could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// BAR0 is missing.
    #[error("the function has no BAR0")]
    NoBar0,
    /// Identification or programming failed.
    #[error(transparent)]
    Init(#[from] hw::InitError),
    /// Bad driver configuration.
    #[error("bad driver configuration: {0}")]
    Config(String),
    /// The PCI layer refused something.
    #[error(transparent)]
    Pci(#[from] crate::pci::PciError),
    /// Host memory for the driver failed.
    #[error(transparent)]
    Memory(#[from] MemError),
}

/// PCI command register: memory space and bus master enable.
const PCI_COMMAND: u16 = 0x04;
const PCI_COMMAND_MEMORY: u32 = 1 << 1;
const PCI_COMMAND_MASTER: u32 = 1 << 2;
/// Capabilities pointer and the MSI-X capability id.
const PCI_CAPABILITY_LIST: u16 = 0x34;
const PCI_CAP_ID_MSIX: u32 = 0x11;
const PCI_MSIX_ENABLE: u32 = 1 << 15;

impl CxiDevice {
    /// Bring up the device behind `function` (the probe): identify it, enable memory and bus
    /// mastering, enable MSI-X, program the device-wide defaults, create the default service.
    pub fn probe(
        function: Arc<PciFunction>,
        mem: Arc<dyn HostMem>,
        config: DriverConfig,
    ) -> Result<Arc<CxiDevice>, DeviceError> {
        let pid_bits = PidBits::new(config.pid_bits).map_err(|_| {
            DeviceError::Config(format!("pid_bits {} not in 6..=9", config.pid_bits))
        })?;
        if config.iova_base == 0
            || !config.iova_base.is_multiple_of(PAGE_SIZE)
            || !config.iova_size.is_multiple_of(PAGE_SIZE)
            || config.iova_size == 0
            || config
                .iova_base
                .checked_add(config.iova_size)
                .is_none_or(|e| e > 1 << super::atu::IOVA_BITS)
        {
            return Err(DeviceError::Config("bad IOVA window".into()));
        }
        if config.default_vnis.len() > lim::CXI_SVC_MAX_VNIS {
            return Err(DeviceError::Config("more than 4 default VNIs".into()));
        }
        let bar0 = function.bar(0).ok_or(DeviceError::NoBar0)?;
        let bar0_size = bar0.size();
        let generation =
            firmware_spec::cassini::pci::identify(firmware_spec::cassini::pci::PciId {
                vendor: function.vendor_id(),
                device: function.device_id(),
            })
            .map(|(g, _)| g)
            .unwrap_or(Generation::Cassini1);
        let hw = CassHw::new(bar0, generation);
        let ident = hw.identify(function.vendor_id(), function.device_id())?;

        // pci_enable_device + pci_set_master.
        let cmd = function.config_read(PCI_COMMAND)?;
        function.config_write(PCI_COMMAND, cmd | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER)?;

        let want = config.msix_vectors.min(function.msix_vectors());
        let irqs = if want > 0 {
            let irqs = function.enable_msix(want)?;
            hw.msix_program(want).map_err(hw::InitError::from)?;
            msix_capability_enable(&function, true)?;
            Some(irqs)
        } else {
            None
        };
        let msix_vectors = irqs.as_ref().map_or(0, |i| i.len());

        let granule = pid_bits.pid_granule();
        let info = DevInfo {
            address: function.address(),
            id: function.id(),
            version: ident.version,
            platform: ident.platform,
            rev: ident.sts_rev.rev,
            proto: ident.sts_rev.proto,
            nid: ident.nid,
            pid_bits,
            pid_count: (1u32 << pid_bits.get()) - 1,
            pid_granule: granule,
            rdzv_get_idx: granule - 1,
            is_vf: firmware_spec::cassini::pci::function_from_bar0_size(bar0_size)
                == firmware_spec::cassini::pci::Function::Vf,
            msix_vectors,
        };
        let phys_pages = mem.size().div_ceil(PAGE_SIZE);
        hw.init_defaults(info.nid, pid_bits, info.rdzv_get_idx, PHYS_ACID, phys_pages)
            .map_err(hw::InitError::from)?;

        let mut st = DevState::new(msix_vectors);
        if !config.disable_default_svc {
            create_default_service(&mut st, &config);
        }
        program_tle_pools(&hw, &st).map_err(hw::InitError::from)?;
        let initial = st.free_counts();
        tracing::info!(address = %info.address, nid = info.nid, version = ?info.version, platform = ?info.platform, "cassini device up");
        Ok(Arc::new(CxiDevice {
            function,
            hw,
            mem,
            config,
            info,
            irqs,
            initial,
            state: Mutex::new(st),
            resets: AtomicU64::new(0),
            progress: OnceLock::new(),
        }))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, DevState> {
        // Handlers leave the state consistent at every early return; a panic in one would
        // not leave it half-updated in a way later calls rely on.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What probing learned.
    pub fn info(&self) -> &DevInfo {
        &self.info
    }

    /// The driver configuration in force.
    pub fn config(&self) -> &DriverConfig {
        &self.config
    }

    /// The PCI function.
    pub fn function(&self) -> &Arc<PciFunction> {
        &self.function
    }

    /// Hardware access (for diagnostics and tests: CSR reads through BAR0).
    pub fn hw(&self) -> &CassHw {
        &self.hw
    }

    /// The host memory the driver and its clients use.
    pub fn memory(&self) -> &Arc<dyn HostMem> {
        &self.mem
    }

    /// Free entries of every allocator now.
    pub fn free_counts(&self) -> FreeCounts {
        self.lock().free_counts()
    }

    /// Free entries right after probe (with the default service and no client).
    pub fn initial_free_counts(&self) -> FreeCounts {
        self.initial
    }

    /// Number of open clients.
    pub fn client_count(&self) -> usize {
        self.lock().clients.values().filter(|c| !c.dead).count()
    }

    /// Attach the engine's progress handle (emulated devices; set once by the cluster).
    pub fn set_progress(&self, p: Arc<dyn emu_core::engine::Progress>) {
        let _ = self.progress.set(p);
    }

    /// Let the device make progress (the deterministic engine runs its next event; the
    /// threaded engine yields; a real device needs nothing). True if any device work was done.
    /// Code that polls rings in host memory calls this while it waits.
    pub fn progress(&self) -> bool {
        self.progress.get().is_some_and(|p| p.progress())
    }

    /// How many times the device was reset.
    pub fn reset_count(&self) -> u64 {
        self.resets.load(Ordering::Relaxed)
    }

    /// The wait object of MSI-X vector `v`.
    pub(crate) fn vector(&self, v: u32) -> Option<Arc<WaitObject>> {
        self.irqs.as_ref()?.vector(v).cloned()
    }

    /// Register a new client (the `open()` of `/dev/cxiN`).
    pub(crate) fn add_client(&self, creds: Credentials, space: UserSpace) -> ClientId {
        let mut st = self.lock();
        let id = st.next_client;
        st.next_client = st.next_client.wrapping_add(1).max(1);
        st.clients.insert(
            id,
            ClientState {
                creds,
                space,
                mmaps: BTreeMap::new(),
                next_mmap: PAGE_SIZE,
                dead: false,
            },
        );
        id
    }

    /// Release everything `client` holds and forget it (the `release()` of the file).
    pub(crate) fn close_client(&self, client: ClientId) {
        let mut st = self.lock();
        self.release_all(&mut st, client);
        if let Some(c) = st.clients.remove(&client) {
            for m in c.mmaps.values() {
                m.shared.revoke();
            }
        }
    }

    /// Reset the device: every client loses every object (their later requests fail with
    /// `EIO`), the device-wide configuration is programmed again and every allocator is back
    /// to its initial state.
    pub fn reset(&self) -> Result<(), Errno> {
        let mut st = self.lock();
        let ids: Vec<ClientId> = st.clients.keys().copied().collect();
        for id in ids {
            self.release_all(&mut st, id);
            if let Some(c) = st.clients.get_mut(&id) {
                c.dead = true;
                for m in c.mmaps.values() {
                    m.shared.revoke();
                }
                c.mmaps.clear();
            }
        }
        let svcs: Vec<u32> = st.services.keys().copied().collect();
        for s in svcs {
            st.services.remove(&s);
            st.svc_id.free(s);
        }
        let mut fresh = DevState::new(self.info.msix_vectors);
        fresh.clients = std::mem::take(&mut st.clients);
        fresh.next_client = st.next_client;
        *st = fresh;
        if !self.config.disable_default_svc {
            create_default_service(&mut st, &self.config);
        }
        self.resets.fetch_add(1, Ordering::Relaxed);
        let phys_pages = self.mem.size().div_ceil(PAGE_SIZE);
        self.hw
            .init_defaults(
                self.info.nid,
                self.info.pid_bits,
                self.info.rdzv_get_idx,
                PHYS_ACID,
                phys_pages,
            )
            .map_err(eio)?;
        self.hw.msix_program(self.info.msix_vectors).map_err(eio)?;
        program_tle_pools(&self.hw, &st).map_err(eio)?;
        tracing::info!(address = %self.info.address, "cassini device reset");
        Ok(())
    }

    /// Free every object of `client` in dependency order, ignoring hardware errors.
    fn release_all(&self, st: &mut DevState, client: ClientId) {
        fn mine<T>(
            m: &BTreeMap<u32, T>,
            client: ClientId,
            owner: impl Fn(&T) -> ClientId,
        ) -> Vec<u32> {
            m.iter()
                .filter(|(_, o)| owner(o) == client)
                .map(|(k, _)| *k)
                .collect()
        }
        for j in mine(&st.pte_maps, client, |o| o.client) {
            self.free_pte_map(st, j);
        }
        for n in mine(&st.ptes, client, |o| o.client) {
            self.free_pte(st, n);
        }
        for h in mine(&st.cqs, client, |o| o.client) {
            self.free_cq(st, h);
        }
        for n in mine(&st.cts, client, |o| o.client) {
            self.free_ct(st, n);
        }
        for n in mine(&st.eqs, client, |o| o.client) {
            self.free_eq(st, n);
        }
        for w in mine(&st.waits, client, |o| o.client) {
            self.free_wait(st, w);
        }
        for id in mine(&st.mds, client, |o| o.client) {
            self.free_md(st, id);
        }
        for d in mine(&st.domains, client, |o| o.client) {
            self.free_domain(st, d);
        }
        for h in mine(&st.cp_handles, client, |o| o.client) {
            self.free_cp(st, h);
        }
        for l in mine(&st.lnis, client, |o| o.client) {
            self.free_lni(st, l);
        }
        if let Some(c) = st.clients.get_mut(&client) {
            for m in c.mmaps.values() {
                m.shared.revoke();
            }
            c.mmaps.clear();
        }
    }

    fn log_hw(r: Result<(), HwError>) {
        if let Err(e) = r {
            tracing::warn!(error = %e, "teardown: hardware access failed");
        }
    }

    fn drop_token(st: &mut DevState, client: ClientId, token: u64) {
        if let Some(c) = st.clients.get_mut(&client) {
            c.mmaps.remove(&token);
        }
    }

    // ---- teardown of single objects (no ownership checks) ----

    fn free_pte_map(&self, st: &mut DevState, j: u32) {
        let Some(m) = st.pte_maps.remove(&j) else {
            return;
        };
        Self::log_hw(self.hw.rmu_portal_clear(j));
        st.portal.free(j);
        if let Some(p) = st.ptes.get_mut(&m.pte) {
            p.maps = p.maps.saturating_sub(1);
        }
        if let Some(d) = st.domains.get_mut(&m.domain) {
            d.maps = d.maps.saturating_sub(1);
        }
    }

    fn free_pte(&self, st: &mut DevState, n: u32) {
        let Some(p) = st.ptes.remove(&n) else {
            return;
        };
        Self::log_hw(self.hw.ptlte_disable(n));
        st.ptn.free(n);
        if let Some(e) = st.eqs.get_mut(&p.eq) {
            e.refs = e.refs.saturating_sub(1);
        }
        svc_use(st, p.lni, rsrc::PTE, -1);
        lni_ref(st, p.lni, -1);
    }

    fn free_cq(&self, st: &mut DevState, h: u32) {
        let Some(c) = st.cqs.remove(&h) else {
            return;
        };
        if c.tx {
            Self::log_hw(self.hw.txq_disable(c.n));
            st.txq.free(c.n);
            svc_use(st, c.lni, rsrc::TXQ, -1);
        } else {
            Self::log_hw(self.hw.tgq_disable(c.n));
            st.tgq.free(c.n);
            svc_use(st, c.lni, rsrc::TGQ, -1);
        }
        c.shared.revoke();
        for t in c.tokens {
            Self::drop_token(st, c.client, t);
        }
        if let Some(e) = st.eqs.get_mut(&c.eq) {
            e.refs = e.refs.saturating_sub(1);
        }
        lni_ref(st, c.lni, -1);
    }

    fn free_ct(&self, st: &mut DevState, n: u32) {
        let Some(c) = st.cts.remove(&n) else {
            return;
        };
        Self::log_hw(self.hw.ct_disable(n));
        st.ctn.free(n);
        c.shared.revoke();
        Self::drop_token(st, c.client, c.token);
        svc_use(st, c.lni, rsrc::CT, -1);
        lni_ref(st, c.lni, -1);
    }

    fn free_eq(&self, st: &mut DevState, n: u32) {
        let Some(e) = st.eqs.remove(&n) else {
            return;
        };
        Self::log_hw(self.hw.eq_disable(n));
        st.eqn.free(n);
        e.shared.revoke();
        Self::drop_token(st, e.client, e.token);
        if let Some(m) = st.mds.get_mut(&e.md) {
            m.refs = m.refs.saturating_sub(1);
        }
        for w in e.waits {
            if let Some(w) = st.waits.get_mut(&w) {
                w.refs = w.refs.saturating_sub(1);
            }
        }
        svc_use(st, e.lni, rsrc::EQ, -1);
        lni_ref(st, e.lni, -1);
    }

    fn free_wait(&self, st: &mut DevState, id: u32) {
        let Some(w) = st.waits.remove(&id) else {
            return;
        };
        st.wait_vec.free(w.vector);
        lni_ref(st, w.lni, -1);
    }

    fn free_md(&self, st: &mut DevState, id: u32) {
        let Some(md) = st.mds.remove(&id) else {
            return;
        };
        st.md_id.free(id);
        let mut ac_empty = false;
        if let Some(ac) = st.acs.get_mut(&md.acid) {
            let mut off = 0;
            while off < md.len {
                if let Err(e) = ac.tables.unmap_page(md.iova + off) {
                    tracing::warn!(error = %e, "unmap of an MD page failed");
                }
                off += PAGE_SIZE;
            }
            Self::log_hw(self.hw.atu_invalidate(md.acid, md.iova));
            let range =
                emu_core::memory::GuestRange::new(emu_core::memory::GuestAddress(md.iova), md.len);
            if let Err(e) = ac.iova.free(range) {
                tracing::warn!(error = %e, "IOVA free failed");
            }
            ac.mds = ac.mds.saturating_sub(1);
            ac_empty = ac.mds == 0;
        }
        drop(md.pins);
        if ac_empty {
            self.free_ac(st, md.acid, md.lni);
        }
        lni_ref(st, md.lni, -1);
    }

    fn free_ac(&self, st: &mut DevState, acid: u32, lni: u32) {
        if st.acs.remove(&acid).is_none() {
            return;
        }
        if let Some(l) = st.lnis.get_mut(&lni) {
            l.acid = 0;
            let rgid = l.rgid;
            Self::log_hw(self.hw.lac_set(rgid, 0, 0));
        }
        Self::log_hw(self.hw.ac_disable(acid));
        Self::log_hw(self.hw.atu_invalidate(acid, 0));
        st.acid.free(acid);
        svc_use(st, lni, rsrc::AC, -1);
    }

    fn free_domain(&self, st: &mut DevState, id: u32) {
        let Some(d) = st.domains.remove(&id) else {
            return;
        };
        st.domain_id.free(id);
        let key = (d.vni, d.pid);
        match st.pids.get(&key).copied() {
            Some(o) if o.reserved && st.lnis.contains_key(&o.lni) => {
                st.pids.insert(key, PidOwner { domain: None, ..o });
            }
            _ => {
                st.pids.remove(&key);
            }
        }
        self.vni_unref(st, d.vni);
        lni_ref(st, d.lni, -1);
    }

    fn vni_unref(&self, st: &mut DevState, vni: u32) {
        let drop_it = match st.vnis.get_mut(&vni) {
            Some(v) => {
                v.refs = v.refs.saturating_sub(1);
                v.refs == 0
            }
            None => false,
        };
        if drop_it && let Some(v) = st.vnis.remove(&vni) {
            Self::log_hw(self.hw.rmu_vni_clear(v.idx));
            st.vni_list.free(v.idx);
        }
    }

    fn free_cp(&self, st: &mut DevState, h: u32) {
        let Some(c) = st.cp_handles.remove(&h) else {
            return;
        };
        st.cp_hndl.free(h);
        if let Some(l) = st.lnis.get_mut(&c.lni) {
            l.lcids.free(c.lcid);
            let rgid = l.rgid;
            Self::log_hw(self.hw.lcid_set(rgid, c.lcid, 0));
        }
        let gone = match st.cps.get_mut(&c.cp) {
            Some(e) => {
                e.refs = e.refs.saturating_sub(1);
                e.refs == 0
            }
            None => false,
        };
        if gone {
            st.cps.remove(&c.cp);
            Self::log_hw(self.hw.cp_clear(c.cp));
            st.cpn.free(c.cp);
        }
        lni_ref(st, c.lni, -1);
    }

    fn free_lni(&self, st: &mut DevState, id: u32) {
        let Some(l) = st.lnis.remove(&id) else {
            return;
        };
        st.pids.retain(|_, o| o.lni != id);
        Self::log_hw(self.hw.rgid_clear(l.rgid));
        st.rgid.free(l.rgid);
        if let Some(s) = st.services.get_mut(&l.svc) {
            s.lnis = s.lnis.saturating_sub(1);
        }
    }
}

/// Account `delta` uses of resource `kind` to the service of `lni`.
fn svc_use(st: &mut DevState, lni: u32, kind: usize, delta: i32) {
    let Some(svc) = st.lnis.get(&lni).map(|l| l.svc) else {
        return;
    };
    if let Some(s) = st.services.get_mut(&svc)
        && let Some(u) = s.in_use.get_mut(kind)
    {
        *u = if delta >= 0 {
            u.saturating_add(delta as u16)
        } else {
            u.saturating_sub(delta.unsigned_abs() as u16)
        };
    }
}

/// Count a reference to `lni` from one of its objects (or drop one).
fn lni_ref(st: &mut DevState, lni: u32, delta: i32) {
    if let Some(l) = st.lnis.get_mut(&lni) {
        l.refs = l.refs.saturating_add_signed(delta);
    }
}

/// Set or clear the MSI-X enable bit of the function's MSI-X capability (config space).
fn msix_capability_enable(function: &PciFunction, on: bool) -> Result<(), crate::pci::PciError> {
    let mut ptr = (function.config_read(PCI_CAPABILITY_LIST)? & 0xfc) as u16;
    let mut hops = 0;
    while ptr != 0 && hops < 48 {
        let dw = function.config_read(ptr)?;
        if dw & 0xff == PCI_CAP_ID_MSIX {
            let ctl = if on {
                dw | PCI_MSIX_ENABLE << 16
            } else {
                dw & !(PCI_MSIX_ENABLE << 16)
            };
            return function.config_write(ptr, ctl);
        }
        ptr = ((dw >> 8) & 0xfc) as u16;
        hops += 1;
    }
    Ok(())
}

fn create_default_service(st: &mut DevState, cfg: &DriverConfig) {
    let Some(id) = st.svc_id.alloc() else {
        return;
    };
    let mut desc = SvcDesc {
        bits: svcbits::RESTRICTED_VNIS | svcbits::ENABLE | svcbits::IS_SYSTEM_SVC,
        num_vld_vnis: cfg.default_vnis.len() as u8,
        tcs: [1; 5],
        svc_id: id,
        ..SvcDesc::default()
    };
    for (d, v) in desc.vnis.iter_mut().zip(&cfg.default_vnis) {
        *d = *v;
    }
    // cass_svc.c: the default service reserves `default_svc_num_tles` TLEs.
    let totals = device_limits();
    for (l, t) in desc.limits.iter_mut().zip(totals) {
        l.max = t;
    }
    desc.limits[rsrc::TLE].res = lim::DEFAULT_SVC_NUM_TLES as u16;
    st.services.insert(
        id,
        Service {
            desc,
            lnis: 0,
            in_use: [0; 8],
            lpr: 1,
            tle_pool: 0,
        },
    );
}

/// TLE pools (`c_cq_cfg_tle_pool` has 4 entries).
const NUM_TLE_POOLS: u32 = 4;

/// Program the TLE pools from the services (cass_tle.c): pool 0 reserves the default
/// service's `default_svc_num_tles`, a service with a TLE limit has its own pool
/// (`res`/`max`), unused pools hold nothing, and the rest of the 2048 TLEs is the shared
/// reserve.
fn program_tle_pools(hw: &CassHw, st: &DevState) -> Result<(), HwError> {
    let mut reserved = lim::DEFAULT_SVC_NUM_TLES as u32;
    hw.tle_pool_set(0, reserved, lim::DEFAULT_SVC_NUM_TLES as u32)?;
    for pool in 1..NUM_TLE_POOLS {
        let svc = st.services.values().find(|s| s.tle_pool == pool);
        let (res, max) = svc.map_or((0, 0), |s| {
            let l = s.desc.limits[rsrc::TLE];
            (u32::from(l.res), u32::from(l.max))
        });
        hw.tle_pool_set(pool, res, max)?;
        reserved += res;
    }
    hw.tle_shared_set((lim::C_NUM_TLES as u32).saturating_sub(reserved))
}

/// The context every handler runs in.
pub(crate) struct Op<'a> {
    pub(crate) dev: &'a CxiDevice,
    pub(crate) st: &'a mut DevState,
    pub(crate) client: ClientId,
}

impl Op<'_> {
    fn creds(&self) -> Credentials {
        self.st
            .clients
            .get(&self.client)
            .map(|c| c.creds)
            .unwrap_or_default()
    }

    fn space(&self) -> Result<UserSpace, Errno> {
        self.st
            .clients
            .get(&self.client)
            .map(|c| c.space.clone())
            .ok_or(Errno::Eio)
    }

    fn hw(&self) -> &CassHw {
        &self.dev.hw
    }

    fn new_token(
        &mut self,
        size: u64,
        target: MapTarget,
        shared: &Arc<MapShared>,
    ) -> Result<MmInfo, Errno> {
        let c = self.st.clients.get_mut(&self.client).ok_or(Errno::Eio)?;
        let offset = c.next_mmap;
        let step = size
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(Errno::Einval)?;
        c.next_mmap = c.next_mmap.checked_add(step).ok_or(Errno::Enospc)?;
        c.mmaps.insert(
            offset,
            MmapEntry {
                size,
                target,
                shared: Arc::clone(shared),
            },
        );
        Ok(MmInfo { offset, size })
    }

    fn lni(&self, id: u32) -> Result<&Lni, Errno> {
        Ok(owned!(self.st.lnis, id, self.client))
    }

    fn service_of(&self, lni: u32) -> Result<&Service, Errno> {
        let svc = self.lni(lni)?.svc;
        self.st.services.get(&svc).ok_or(Errno::Einval)
    }

    fn check_vni(&self, lni: u32, vni: u32) -> Result<(), Errno> {
        if vni > 0xffff {
            return Err(Errno::Einval);
        }
        let s = self.service_of(lni)?;
        if s.desc.bits & svcbits::RESTRICTED_VNIS != 0 {
            let n = usize::from(s.desc.num_vld_vnis).min(lim::CXI_SVC_MAX_VNIS);
            if !s.desc.vnis[..n].iter().any(|v| u32::from(*v) == vni) {
                return Err(Errno::Eperm);
            }
        }
        Ok(())
    }

    /// A service's limit on `kind` (resource_limits), checked before an allocation.
    fn check_limit(&self, lni: u32, kind: usize) -> Result<(), Errno> {
        let s = self.service_of(lni)?;
        if s.desc.bits & svcbits::RESOURCE_LIMITS != 0
            && s.in_use.get(kind).copied().unwrap_or(0)
                >= s.desc.limits.get(kind).map_or(0, |l| l.max)
        {
            return Err(Errno::Enospc);
        }
        Ok(())
    }

    fn eq_ref(&mut self, eq: u32) -> Result<(), Errno> {
        if eq == NONE {
            return Ok(());
        }
        let e = owned_mut!(self.st.eqs, eq, self.client);
        e.refs += 1;
        Ok(())
    }

    fn check_eq(&self, eq: u32) -> Result<(), Errno> {
        if eq != NONE {
            owned!(self.st.eqs, eq, self.client);
        }
        Ok(())
    }

    // ---- LNI ----

    pub(crate) fn lni_alloc(&mut self, c: &LniAllocCmd) -> Result<LniAllocResp, Errno> {
        let creds = self.creds();
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        if s.desc.bits & svcbits::ENABLE == 0 {
            return Err(Errno::Eperm);
        }
        if s.desc.bits & svcbits::RESTRICTED_MEMBERS != 0 && !creds.admin {
            let ok = s.desc.members.iter().any(|m| match m.kind {
                1 => m.value == creds.uid,
                2 => m.value == creds.gid,
                _ => false,
            });
            if !ok {
                return Err(Errno::Eperm);
            }
        }
        let rgid = self.st.rgid.alloc().ok_or(Errno::Enospc)?;
        self.st.lnis.insert(
            rgid,
            Lni {
                client: self.client,
                svc: c.svc_id,
                rgid,
                pe: rgid % lim::C_PE_COUNT as u32,
                lcids: IdAllocator::new(0, lim::C_COMM_PROF_PER_CQ as u32),
                acid: 0,
                refs: 0,
            },
        );
        if let Some(s) = self.st.services.get_mut(&c.svc_id) {
            s.lnis += 1;
        }
        Ok(LniAllocResp { lni: rgid })
    }

    pub(crate) fn lni_free(&mut self, c: &LniFreeCmd) -> Result<(), Errno> {
        if self.lni(c.lni)?.refs > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_lni(self.st, c.lni);
        Ok(())
    }

    // ---- Domains ----

    fn pid_free_for(&self, lni: u32, vni: u32, pid: u32) -> bool {
        match self.st.pids.get(&(vni, pid)) {
            None => true,
            Some(o) => o.reserved && o.lni == lni && o.domain.is_none(),
        }
    }

    pub(crate) fn domain_reserve(
        &mut self,
        c: &DomainReserveCmd,
    ) -> Result<DomainReserveResp, Errno> {
        self.lni(c.lni)?;
        self.check_vni(c.lni, c.vni)?;
        let pid_count = self.dev.info.pid_count;
        if c.count == 0 || c.count > pid_count {
            return Err(Errno::Einval);
        }
        let free = |st: &DevState, p: u32| !st.pids.contains_key(&(c.vni, p));
        let first = if c.pid == C_PID_ANY {
            (0..=pid_count - c.count)
                .find(|&p| (p..p + c.count).all(|q| free(self.st, q)))
                .ok_or(Errno::Enospc)?
        } else {
            let end = c.pid.checked_add(c.count).ok_or(Errno::Einval)?;
            if end > pid_count {
                return Err(Errno::Einval);
            }
            if !(c.pid..end).all(|q| free(self.st, q)) {
                return Err(Errno::Eexist);
            }
            c.pid
        };
        for p in first..first + c.count {
            self.st.pids.insert(
                (c.vni, p),
                PidOwner {
                    lni: c.lni,
                    domain: None,
                    reserved: true,
                },
            );
        }
        Ok(DomainReserveResp { pid: first })
    }

    pub(crate) fn domain_alloc(&mut self, c: &DomainAllocCmd) -> Result<DomainAllocResp, Errno> {
        self.lni(c.lni)?;
        self.check_vni(c.lni, c.vni)?;
        let pid_count = self.dev.info.pid_count;
        let pid = if c.pid == C_PID_ANY {
            (0..pid_count)
                .find(|&p| !self.st.pids.contains_key(&(c.vni, p)))
                .ok_or(Errno::Enospc)?
        } else if c.pid >= pid_count {
            return Err(Errno::Einval);
        } else if self.pid_free_for(c.lni, c.vni, c.pid) {
            c.pid
        } else {
            return Err(Errno::Eexist);
        };
        // The VNI's RMU entry, shared by every domain of that VNI.
        if !self.st.vnis.contains_key(&c.vni) {
            let idx = self.st.vni_list.alloc().ok_or(Errno::Enospc)?;
            if let Err(e) = self.hw().rmu_vni_set(idx, c.vni) {
                self.st.vni_list.free(idx);
                return Err(eio(e));
            }
            self.st.vnis.insert(c.vni, VniEntry { idx, refs: 0 });
        }
        let Some(id) = self.st.domain_id.alloc() else {
            self.dev.vni_unref(self.st, c.vni);
            return Err(Errno::Enospc);
        };
        if let Some(v) = self.st.vnis.get_mut(&c.vni) {
            v.refs += 1;
        }
        let reserved = self.st.pids.get(&(c.vni, pid)).is_some_and(|o| o.reserved);
        self.st.pids.insert(
            (c.vni, pid),
            PidOwner {
                lni: c.lni,
                domain: Some(id),
                reserved,
            },
        );
        self.st.domains.insert(
            id,
            Domain {
                client: self.client,
                lni: c.lni,
                vni: c.vni,
                pid,
                maps: 0,
            },
        );
        lni_ref(self.st, c.lni, 1);
        Ok(DomainAllocResp {
            domain: id,
            vni: c.vni,
            pid,
        })
    }

    pub(crate) fn domain_free(&mut self, c: &DomainFreeCmd) -> Result<(), Errno> {
        if owned!(self.st.domains, c.domain, self.client).maps > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_domain(self.st, c.domain);
        Ok(())
    }

    // ---- Communication profiles ----

    fn cp_alloc_common(
        &mut self,
        lni: u32,
        vni: u32,
        tc: u32,
        tc_type: u32,
        cp_type: u32,
    ) -> Result<CpAllocResp, Errno> {
        self.lni(lni)?;
        self.check_vni(lni, vni)?;
        if tc >= lim_tc_max() || tc_type > 3 || cp_type > ANY_LCID {
            return Err(Errno::Einval);
        }
        // CXI_TC_ETH is for privileged (Ethernet) clients.
        if tc == 4 && !self.creds().admin {
            return Err(Errno::Eperm);
        }
        let s = self.service_of(lni)?;
        if s.desc.bits & svcbits::RESTRICTED_TCS != 0
            && s.desc.tcs.get(tc as usize).copied().unwrap_or(0) == 0
        {
            return Err(Errno::Eperm);
        }
        let l = self.st.lnis.get_mut(&lni).ok_or(Errno::Einval)?;
        // A trigger CQ's profile must be LCID 0 (cassini.md §1.4); others avoid it.
        let lcid = match cp_type {
            TRIG_LCID => l.lcids.alloc_specific(0).then_some(0),
            NON_TRIG_LCID => l.lcids.alloc_in(1, lim::C_COMM_PROF_PER_CQ as u32),
            _ => l.lcids.alloc(),
        }
        .ok_or(Errno::Enospc)?;
        let rgid = l.rgid;
        let existing = self
            .st
            .cps
            .iter()
            .find(|(_, e)| e.vni == vni && e.tc == tc && e.tc_type == tc_type)
            .map(|(k, _)| *k);
        let undo_lcid = |st: &mut DevState| {
            if let Some(l) = st.lnis.get_mut(&lni) {
                l.lcids.free(lcid);
            }
        };
        let cp = match existing {
            Some(cp) => cp,
            None => {
                let Some(cp) = self.st.cpn.alloc() else {
                    undo_lcid(self.st);
                    return Err(Errno::Enospc);
                };
                if let Err(e) = self.hw().cp_set(cp, vni, tc) {
                    self.st.cpn.free(cp);
                    undo_lcid(self.st);
                    return Err(eio(e));
                }
                self.st.cps.insert(
                    cp,
                    CpEntry {
                        vni,
                        tc,
                        tc_type,
                        refs: 0,
                    },
                );
                cp
            }
        };
        let Some(h) = self.st.cp_hndl.alloc() else {
            undo_lcid(self.st);
            return Err(Errno::Enospc);
        };
        if let Err(e) = self.hw().lcid_set(rgid, lcid, cp) {
            self.st.cp_hndl.free(h);
            undo_lcid(self.st);
            return Err(eio(e));
        }
        if let Some(e) = self.st.cps.get_mut(&cp) {
            e.refs += 1;
        }
        self.st.cp_handles.insert(
            h,
            CpHandle {
                client: self.client,
                lni,
                cp,
                lcid,
            },
        );
        lni_ref(self.st, lni, 1);
        Ok(CpAllocResp { cp_hndl: h, lcid })
    }

    pub(crate) fn cp_alloc(&mut self, c: &CpAllocCmd) -> Result<CpAllocResp, Errno> {
        self.cp_alloc_common(c.lni, c.vni, c.tc, c.tc_type, NON_TRIG_LCID)
    }

    pub(crate) fn trig_cp_alloc(&mut self, c: &TrigCpAllocCmd) -> Result<CpAllocResp, Errno> {
        self.cp_alloc_common(c.lni, c.vni, c.tc, c.tc_type, c.cp_type)
    }

    pub(crate) fn cp_free(&mut self, c: &CpFreeCmd) -> Result<(), Errno> {
        owned!(self.st.cp_handles, c.cp_hndl, self.client);
        self.dev.free_cp(self.st, c.cp_hndl);
        Ok(())
    }

    pub(crate) fn cp_modify(&mut self, c: &CpModifyCmd) -> Result<(), Errno> {
        let h = owned!(self.st.cp_handles, c.cp_hndl, self.client);
        let (lni, cp) = (h.lni, h.cp);
        self.check_vni(lni, c.vni)?;
        let e = self.st.cps.get_mut(&cp).ok_or(Errno::Einval)?;
        // Only a profile nobody else shares may change its VNI.
        if e.refs != 1 {
            return Err(Errno::Ebusy);
        }
        let tc = e.tc;
        e.vni = c.vni;
        self.hw().cp_set(cp, c.vni, tc).map_err(eio)
    }

    // ---- Command queues ----

    pub(crate) fn cq_alloc(&mut self, c: &CqAllocCmd) -> Result<CqAllocResp, Errno> {
        let rgid = self.lni(c.lni)?.rgid;
        let tle_pool = self.service_of(c.lni)?.tle_pool;
        self.check_eq(c.eq)?;
        let o = &c.opts;
        let flags = CqAllocFlags(o.flags);
        if flags.unknown_bits() != 0
            || o.count == 0
            || o.count as usize > lim::CXI_MAX_CQ_COUNT
            || o.policy > 3
            || o.stat_cnt_pool > 3
            || o.lpe_cdt_thresh_id > 3
            || o.lcid >= lim::C_COMM_PROF_PER_CQ as u32
        {
            return Err(Errno::Einval);
        }
        let tx = flags.contains(CqAllocFlags::IS_TX);
        if !tx
            && (flags.contains(CqAllocFlags::TX_ETHERNET)
                || flags.contains(CqAllocFlags::TX_WITH_TRIG_CMDS))
        {
            return Err(Errno::Einval);
        }
        if flags.contains(CqAllocFlags::TX_ETHERNET) && !self.creds().admin {
            return Err(Errno::Eperm);
        }
        self.check_limit(c.lni, if tx { rsrc::TXQ } else { rsrc::TGQ })?;
        // Round up to a power-of-two number of pages, at least one page (cass_cq.c).
        let bytes = (u64::from(o.count) * 64).max(PAGE_SIZE).next_power_of_two();
        let slots = (bytes / 64) as u32;
        let n = if tx {
            self.st.txq.alloc()
        } else {
            self.st.tgq.alloc()
        }
        .ok_or(Errno::Enospc)?;
        let free_n = |st: &mut DevState| {
            if tx {
                st.txq.free(n);
            } else {
                st.tgq.free(n);
            }
        };
        let ring = match PageBlock::alloc(&self.dev.mem, bytes) {
            Ok(r) => r,
            Err(e) => {
                free_n(self.st);
                return Err(enomem(e));
            }
        };
        let cfg = CqConfig {
            ring: ring.bus_address(0),
            slots,
            eq: c.eq,
            rgid,
            lcid: o.lcid,
            policy: o.policy as u8,
            acid: PHYS_ACID,
            stat_cnt_pool: o.stat_cnt_pool as u8,
            trig: flags.contains(CqAllocFlags::TX_WITH_TRIG_CMDS),
            tle_pool: tle_pool as u8,
        };
        let r = if tx {
            self.hw().txq_enable(n, &cfg)
        } else {
            self.hw().tgq_enable(n, &cfg)
        };
        if let Err(e) = r {
            let _ = if tx {
                self.hw().txq_disable(n)
            } else {
                self.hw().tgq_disable(n)
            };
            free_n(self.st);
            return Err(eio(e));
        }
        let shared = MapShared::new();
        let handle = if tx {
            n
        } else {
            lim::C_NUM_TRANSMIT_CQS as u32 + n
        };
        let launch = if tx {
            hw::txq_launch_offset(n)
        } else {
            hw::tgq_launch_offset(n)
        };
        let cmds = self.new_token(
            bytes,
            MapTarget::Memory {
                pages: Arc::clone(&ring),
                offset: 0,
                len: bytes,
            },
            &shared,
        )?;
        let wp_addr = self.new_token(
            MMIO_PAGE,
            MapTarget::Mmio {
                offset: launch,
                len: MMIO_PAGE,
            },
            &shared,
        )?;
        self.eq_ref(c.eq)?;
        self.st.cqs.insert(
            handle,
            Cq {
                client: self.client,
                lni: c.lni,
                tx,
                n,
                eq: c.eq,
                ring,
                tokens: [cmds.offset, wp_addr.offset],
                shared,
            },
        );
        svc_use(self.st, c.lni, if tx { rsrc::TXQ } else { rsrc::TGQ }, 1);
        lni_ref(self.st, c.lni, 1);
        Ok(CqAllocResp {
            cq: handle,
            count: slots,
            cmds,
            wp_addr,
        })
    }

    pub(crate) fn cq_free(&mut self, c: &CqFreeCmd) -> Result<(), Errno> {
        let cq = owned!(self.st.cqs, c.cq, self.client);
        if Arc::strong_count(&cq.shared) > 1 + 2 {
            // Still mmapped (the queue and its two tokens hold three references).
            return Err(Errno::Ebusy);
        }
        self.dev.free_cq(self.st, c.cq);
        Ok(())
    }

    pub(crate) fn cq_ack_counter(
        &mut self,
        c: &CqAckCounterCmd,
    ) -> Result<CqAckCounterResp, Errno> {
        let cq = owned!(self.st.cqs, c.cq, self.client);
        let (tx, n) = (cq.tx, cq.n);
        let ack_counter = self.hw().cq_ack_counter(tx, n).map_err(eio)?;
        Ok(CqAckCounterResp { ack_counter })
    }

    // ---- Memory descriptors and the ATU ----

    fn lni_ac(&mut self, lni: u32) -> Result<u32, Errno> {
        let l = self.lni(lni)?;
        if l.acid != 0 {
            return Ok(l.acid);
        }
        let rgid = l.rgid;
        self.check_limit(lni, rsrc::AC)?;
        let acid = self.st.acid.alloc().ok_or(Errno::Enospc)?;
        let cfg = &self.dev.config;
        let tables = match NtaTables::new(&self.dev.mem) {
            Ok(t) => t,
            Err(e) => {
                self.st.acid.free(acid);
                return Err(enomem(e));
            }
        };
        let iova = match PageAllocator::new(cfg.iova_base, cfg.iova_size) {
            Ok(a) => a,
            Err(_) => {
                self.st.acid.free(acid);
                return Err(Errno::Einval);
            }
        };
        let programmed = self
            .hw()
            .ac_enable(
                acid,
                TaMode::Nta,
                tables.root(),
                cfg.iova_base / PAGE_SIZE,
                cfg.iova_size / PAGE_SIZE,
            )
            .and_then(|()| self.hw().lac_set(rgid, 0, acid));
        if let Err(e) = programmed {
            let _ = self.hw().ac_disable(acid);
            self.st.acid.free(acid);
            return Err(eio(e));
        }
        self.st.acs.insert(
            acid,
            Ac {
                tables,
                iova,
                mds: 0,
            },
        );
        if let Some(l) = self.st.lnis.get_mut(&lni) {
            l.acid = acid;
        }
        svc_use(self.st, lni, rsrc::AC, 1);
        Ok(acid)
    }

    fn check_map_flags(flags: u32) -> Result<MapFlags, Errno> {
        let f = MapFlags(flags);
        if f.unknown_bits() != 0 || f.contains(MapFlags::UNUSED) {
            return Err(Errno::Einval);
        }
        if f.contains(MapFlags::ATS)
            || f.contains(MapFlags::ATS_PT)
            || f.contains(MapFlags::ATS_DYN)
        {
            // No ATS on this platform.
            return Err(Errno::Einval);
        }
        if f.contains(MapFlags::DEVICE) {
            return Err(Errno::Eopnotsupp);
        }
        if !f.contains(MapFlags::READ) && !f.contains(MapFlags::WRITE) {
            return Err(Errno::Einval);
        }
        Ok(f)
    }

    /// Write the page table entries for `[va, va + len)` (page aligned, inside user memory)
    /// at `iova`. Returns the pin.
    fn map_range(
        &mut self,
        acid: u32,
        iova: u64,
        va: u64,
        len: u64,
        flags: MapFlags,
    ) -> Result<Pinned, Errno> {
        let pin = self.space()?.resolve(va, len).ok_or(Errno::Efault)?;
        let ac = self.st.acs.get_mut(&acid).ok_or(Errno::Einval)?;
        let (r, w) = (
            flags.contains(MapFlags::READ),
            flags.contains(MapFlags::WRITE),
        );
        let mut off = 0;
        while off < len {
            if let Err(e) = ac.tables.map_page(iova + off, pin.bus_address(off), r, w) {
                let mut back = 0;
                while back < off {
                    let _ = ac.tables.unmap_page(iova + back);
                    back += PAGE_SIZE;
                }
                return Err(enomem(e));
            }
            off += PAGE_SIZE;
        }
        Ok(pin)
    }

    pub(crate) fn atu_map(&mut self, c: &AtuMapCmd) -> Result<AtuMapResp, Errno> {
        self.lni(c.lni)?;
        let flags = Self::check_map_flags(c.flags)?;
        if c.hints.page_shift != 0 && c.hints.page_shift != super::atu::PAGE_SHIFT as i32 {
            return Err(Errno::Einval);
        }
        if c.hints.dmabuf_valid != 0 {
            return Err(Errno::Eopnotsupp);
        }
        if c.len == 0 {
            return Err(Errno::Einval);
        }
        let end = c.va.checked_add(c.len).ok_or(Errno::Einval)?;
        let va = c.va & !(PAGE_SIZE - 1);
        let end = end
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(Errno::Einval)?;
        let len = end - va;
        if len > self.dev.config.iova_size {
            return Err(Errno::Enospc);
        }
        let alloc_only = flags.contains(MapFlags::ALLOC_MD);
        if !alloc_only && self.space()?.resolve(va, len).is_none() {
            return Err(Errno::Efault);
        }
        let acid = self.lni_ac(c.lni)?;
        let id = match self.st.md_id.alloc() {
            Some(id) => id,
            None => {
                self.release_ac_if_unused(acid, c.lni);
                return Err(Errno::Enospc);
            }
        };
        let iova = match self
            .st
            .acs
            .get_mut(&acid)
            .map(|ac| ac.iova.alloc(len, PAGE_SIZE))
        {
            Some(Ok(r)) => r.start.0,
            _ => {
                self.st.md_id.free(id);
                self.release_ac_if_unused(acid, c.lni);
                return Err(Errno::Enospc);
            }
        };
        let pins = if alloc_only {
            Vec::new()
        } else {
            match self.map_range(acid, iova, va, len, flags) {
                Ok(p) => vec![p],
                Err(e) => {
                    if let Some(ac) = self.st.acs.get_mut(&acid) {
                        let _ = ac.iova.free(emu_core::memory::GuestRange::new(
                            emu_core::memory::GuestAddress(iova),
                            len,
                        ));
                    }
                    self.st.md_id.free(id);
                    self.release_ac_if_unused(acid, c.lni);
                    return Err(e);
                }
            }
        };
        if let Some(ac) = self.st.acs.get_mut(&acid) {
            ac.mds += 1;
        }
        self.st.mds.insert(
            id,
            MdObj {
                client: self.client,
                lni: c.lni,
                acid,
                va,
                len,
                iova,
                pins,
                refs: 0,
            },
        );
        lni_ref(self.st, c.lni, 1);
        Ok(AtuMapResp {
            id,
            pad0: 0,
            md: Md {
                iova,
                va,
                len,
                lac: 0,
                page_shift: super::atu::PAGE_SHIFT as i32,
                huge_shift: super::atu::PAGE_SHIFT as i32,
                id,
                ..Md::default()
            },
        })
    }

    fn release_ac_if_unused(&mut self, acid: u32, lni: u32) {
        if self.st.acs.get(&acid).is_some_and(|a| a.mds == 0) {
            self.dev.free_ac(self.st, acid, lni);
        }
    }

    pub(crate) fn atu_unmap(&mut self, c: &AtuUnmapCmd) -> Result<(), Errno> {
        if owned!(self.st.mds, c.id, self.client).refs > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_md(self.st, c.id);
        Ok(())
    }

    pub(crate) fn atu_update_md(&mut self, c: &AtuUpdateMdCmd) -> Result<(), Errno> {
        let md = owned!(self.st.mds, c.id, self.client);
        let (acid, md_va, md_len, md_iova) = (md.acid, md.va, md.len, md.iova);
        let flags = Self::check_map_flags(c.flags)?;
        if c.len == 0 {
            return Err(Errno::Einval);
        }
        let end = c.va.checked_add(c.len).ok_or(Errno::Einval)?;
        let va = c.va & !(PAGE_SIZE - 1);
        let end = end
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(Errno::Einval)?;
        if va < md_va || end > md_va + md_len {
            return Err(Errno::Einval);
        }
        let pin = self.map_range(acid, md_iova + (va - md_va), va, end - va, flags)?;
        self.hw().atu_invalidate(acid, md_iova).map_err(eio)?;
        if let Some(md) = self.st.mds.get_mut(&c.id) {
            md.pins.push(pin);
        }
        Ok(())
    }

    // ---- Event queues ----

    fn wait_vector(&self, wait: u32) -> Result<Option<u32>, Errno> {
        if wait == NONE {
            return Ok(None);
        }
        Ok(Some(owned!(self.st.waits, wait, self.client).vector))
    }

    pub(crate) fn eq_alloc(&mut self, c: &EqAllocCmd) -> Result<EqAllocResp, Errno> {
        self.lni(c.lni)?;
        let a = &c.attr;
        let flags = EqFlags(a.flags);
        if flags.unknown_bits() != 0 {
            return Err(Errno::Einval);
        }
        if flags.contains(EqFlags::REGISTER_PCT) && !self.creds().admin {
            return Err(Errno::Eperm);
        }
        let pages = a.queue_len / PAGE_SIZE;
        if a.queue_len == 0
            || !a.queue_len.is_multiple_of(PAGE_SIZE)
            || !a.queue.is_multiple_of(PAGE_SIZE)
            || a.queue_len > lim::MAX_EQ_LEN
            || pages >= 1 << 20
        {
            return Err(Errno::Einval);
        }
        let slots = (a.queue_len / 64) as u32;
        if a.reserved_slots >= slots.saturating_sub(lim_eq_reserved()) || a.reserved_slots > 0x3fff
        {
            return Err(Errno::Einval);
        }
        if a.status_thresh_count > 4 || a.status_thresh_base > 100 || a.status_thresh_delta > 100 {
            return Err(Errno::Einval);
        }
        let event_irq = self.wait_vector(c.event_wait)?;
        let status_irq = self.wait_vector(c.status_wait)?;
        self.check_limit(c.lni, rsrc::EQ)?;
        let (addr, acid, md, pin) = if flags.contains(EqFlags::PASSTHROUGH) {
            let pin = self
                .space()?
                .resolve(a.queue, a.queue_len)
                .ok_or(Errno::Efault)?;
            (pin.bus_address(0), PHYS_ACID, NONE, Some(pin))
        } else {
            let md = owned!(self.st.mds, c.queue_md, self.client);
            let end = a.queue.checked_add(a.queue_len).ok_or(Errno::Einval)?;
            if md.lni != c.lni || a.queue < md.va || end > md.va + md.len {
                return Err(Errno::Einval);
            }
            (md.iova + (a.queue - md.va), md.acid, c.queue_md, None)
        };
        let n = self.st.eqn.alloc().ok_or(Errno::Enospc)?;
        let ec = if flags.contains(EqFlags::EC_DISABLE) {
            0
        } else if a.ec_delay == 0 {
            500
        } else {
            a.ec_delay
        };
        let cfg = EqConfig {
            addr,
            len: a.queue_len,
            acid,
            reserved_fc: a.reserved_slots,
            event_irq,
            status_irq,
            drop_status: !flags.contains(EqFlags::DROP_STATUS_DISABLE),
            thresh_count: a.status_thresh_count,
            thresh_base: a.status_thresh_base,
            thresh_delta: a.status_thresh_delta,
            // Our reading: latency tolerance in ns, saturating at the 9-bit field.
            latency_tolerance: ec.min(511),
            init_long: flags.contains(EqFlags::INIT_LONG),
            tgt_long: flags.contains(EqFlags::TGT_LONG),
        };
        if let Err(e) = self.hw().eq_enable(n, &cfg) {
            let _ = self.hw().eq_disable(n);
            self.st.eqn.free(n);
            return Err(eio(e));
        }
        let shared = MapShared::new();
        let csr = self.new_token(
            MMIO_PAGE,
            MapTarget::Mmio {
                offset: hw::eq_sw_state_offset(n),
                len: MMIO_PAGE,
            },
            &shared,
        )?;
        if let Some(m) = self.st.mds.get_mut(&md) {
            m.refs += 1;
        }
        for w in [c.event_wait, c.status_wait] {
            if let Some(w) = self.st.waits.get_mut(&w) {
                w.refs += 1;
            }
        }
        self.st.eqs.insert(
            n,
            EqObj {
                client: self.client,
                lni: c.lni,
                md,
                _pin: pin,
                waits: [c.event_wait, c.status_wait],
                slots,
                reserved_fc: a.reserved_slots,
                refs: 0,
                token: csr.offset,
                shared,
            },
        );
        svc_use(self.st, c.lni, rsrc::EQ, 1);
        lni_ref(self.st, c.lni, 1);
        Ok(EqAllocResp {
            eq: n,
            pad0: 0,
            csr,
        })
    }

    pub(crate) fn eq_free(&mut self, c: &EqFreeCmd) -> Result<(), Errno> {
        let e = owned!(self.st.eqs, c.eq, self.client);
        if e.refs > 0 || Arc::strong_count(&e.shared) > 2 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_eq(self.st, c.eq);
        Ok(())
    }

    pub(crate) fn eq_adjust_reserved_fc(
        &mut self,
        c: &EqAdjustReservedFcCmd,
    ) -> Result<EqAdjustReservedFcResp, Errno> {
        let e = owned!(self.st.eqs, c.eq_hndl, self.client);
        let new = i64::from(e.reserved_fc) + i64::from(c.value);
        let max = i64::from(e.slots.saturating_sub(lim_eq_reserved())) - 1;
        if new < 0 || new > max.min(0x3fff) {
            return Err(Errno::Einval);
        }
        let new = new as u32;
        self.hw().eq_set_reserved_fc(c.eq_hndl, new).map_err(eio)?;
        if let Some(e) = self.st.eqs.get_mut(&c.eq_hndl) {
            e.reserved_fc = new;
        }
        Ok(EqAdjustReservedFcResp {
            reserved_fc: new as i32,
        })
    }

    // ---- Portal table entries ----

    pub(crate) fn pte_alloc(&mut self, c: &PteAllocCmd) -> Result<PteAllocResp, Errno> {
        let l = self.lni(c.lni_hndl)?;
        let (rgid, pe) = (l.rgid, l.pe);
        self.check_eq(c.evtq_hndl)?;
        let opts = PtAllocOpts(c.opts);
        if opts.unknown_bits() != 0 {
            return Err(Errno::Einval);
        }
        if opts.contains(PtAllocOpts::ETHERNET) && !self.creds().admin {
            return Err(Errno::Eperm);
        }
        if opts.contains(PtAllocOpts::EN_MATCH_ON_VNI)
            && self.hw().generation() == Generation::Cassini1
        {
            return Err(Errno::Einval);
        }
        self.check_limit(c.lni_hndl, rsrc::PTE)?;
        let n = self.st.ptn.alloc().ok_or(Errno::Enospc)?;
        let cfg = PtlteConfig {
            opts: c.opts,
            eq: c.evtq_hndl,
            rgid,
            pe,
            le_pool: 0,
        };
        if let Err(e) = self.hw().ptlte_enable(n, &cfg) {
            let _ = self.hw().ptlte_disable(n);
            self.st.ptn.free(n);
            return Err(eio(e));
        }
        self.eq_ref(c.evtq_hndl)?;
        self.st.ptes.insert(
            n,
            Pte {
                client: self.client,
                lni: c.lni_hndl,
                eq: c.evtq_hndl,
                maps: 0,
            },
        );
        svc_use(self.st, c.lni_hndl, rsrc::PTE, 1);
        lni_ref(self.st, c.lni_hndl, 1);
        Ok(PteAllocResp { pte_number: n })
    }

    pub(crate) fn pte_free(&mut self, c: &PteFreeCmd) -> Result<(), Errno> {
        if owned!(self.st.ptes, c.pte_number, self.client).maps > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_pte(self.st, c.pte_number);
        Ok(())
    }

    pub(crate) fn pte_map(&mut self, c: &PteMapCmd) -> Result<PteMapResp, Errno> {
        owned!(self.st.ptes, c.pte_number, self.client);
        let d = owned!(self.st.domains, c.domain_hndl, self.client);
        let (vni, pid) = (d.vni, d.pid);
        let vni_list_idx = self.st.vnis.get(&vni).map(|v| v.idx).ok_or(Errno::Einval)?;
        let key = match c.is_multicast {
            0 => {
                if c.pid_offset >= self.dev.info.pid_granule {
                    return Err(Errno::Einval);
                }
                let (dfa, index_ext) =
                    dfa::build_dfa(self.dev.info.nid, pid, self.dev.info.pid_bits, c.pid_offset);
                PortalKey {
                    index_ext: u32::from(index_ext),
                    endpoint: dfa::dfa_ep(dfa),
                    is_multicast: false,
                    vni_list_idx,
                }
            }
            1 => {
                if c.pid_offset >> 18 != 0 {
                    return Err(Errno::Einval);
                }
                PortalKey {
                    index_ext: (c.pid_offset >> 13) & 0x1f,
                    endpoint: c.pid_offset & 0x1fff,
                    is_multicast: true,
                    vni_list_idx,
                }
            }
            _ => return Err(Errno::Einval),
        };
        if self.st.pte_maps.values().any(|m| m.key == key) {
            return Err(Errno::Eexist);
        }
        let j = self.st.portal.alloc().ok_or(Errno::Enospc)?;
        if let Err(e) = self.hw().rmu_portal_set(j, &key, c.pte_number) {
            let _ = self.hw().rmu_portal_clear(j);
            self.st.portal.free(j);
            return Err(eio(e));
        }
        self.st.pte_maps.insert(
            j,
            PteMapping {
                client: self.client,
                pte: c.pte_number,
                domain: c.domain_hndl,
                key,
            },
        );
        if let Some(p) = self.st.ptes.get_mut(&c.pte_number) {
            p.maps += 1;
        }
        if let Some(d) = self.st.domains.get_mut(&c.domain_hndl) {
            d.maps += 1;
        }
        Ok(PteMapResp { pte_index: j })
    }

    pub(crate) fn pte_unmap(&mut self, c: &PteUnmapCmd) -> Result<(), Errno> {
        owned!(self.st.pte_maps, c.pte_index, self.client);
        self.dev.free_pte_map(self.st, c.pte_index);
        Ok(())
    }

    pub(crate) fn pte_le_invalidate(&mut self, c: &PteLeInvalidateCmd) -> Result<(), Errno> {
        owned!(self.st.ptes, c.pte_index, self.client);
        if c.list > 3 || c.buffer_id > 0xffff {
            return Err(Errno::Einval);
        }
        let rc = u8::from(ReturnCode::MstCancelled);
        self.hw()
            .mst_cancel(c.pte_index, c.list, c.buffer_id, rc)
            .map(|_| ())
            .map_err(eio)
    }

    pub(crate) fn pte_status(
        &mut self,
        c: &PteStatusCmd,
        inout: &PteStatus,
    ) -> Result<PteStatus, Errno> {
        let p = owned!(self.st.ptes, c.pte_index, self.client);
        let lni = p.lni;
        let pe = self.st.lnis.get(&lni).map_or(0, |l| l.pe);
        let entry = self.hw().ptlte_entry(c.pte_index).map_err(eio)?;
        use firmware_spec::cassini::csr::fields::c_lpe_cfg_ptl_table as t;
        let (reserved, allocated, max) = self.hw().le_pool_usage(pe, 0).map_err(eio)?;
        let mut out = PteStatus {
            drop_count: t::DROP_COUNT.get(&entry) as u32,
            state: t::PTL_STATE.get(&entry) as u8,
            les_reserved: reserved.min(0xffff) as u16,
            les_allocated: allocated.min(0xffff) as u16,
            les_max: max.min(0xffff) as u16,
            ule_offsets: inout.ule_offsets,
            ule_count: 0,
            ..PteStatus::default()
        };
        if inout.ule_offsets != 0 && inout.ule_count > 0 && t::UNEXP_LIST_VLD.get(&entry) != 0 {
            let space = self.space()?;
            let bytes = u64::from(inout.ule_count) * 8;
            if space.resolve(inout.ule_offsets, bytes).is_none() {
                return Err(Errno::Efault);
            }
            let mut addr = t::UNEXP_HEAD.get(&entry) as u32;
            let tail = t::UNEXP_TAIL.get(&entry) as u32;
            let mut n = 0u16;
            while n < inout.ule_count {
                let (offset, next, vld) = self.hw().ule_entry(pe, addr).map_err(eio)?;
                if !vld {
                    break;
                }
                space
                    .copy_to_user(inout.ule_offsets + u64::from(n) * 8, &offset.to_le_bytes())
                    .ok_or(Errno::Efault)?;
                n += 1;
                if addr == tail {
                    break;
                }
                addr = next;
            }
            out.ule_count = n;
        }
        Ok(out)
    }

    pub(crate) fn pte_transition_sm(&mut self, c: &PteTransitionSmCmd) -> Result<(), Errno> {
        owned!(self.st.ptes, c.pte_index, self.client);
        let (state, drops) = self.hw().ptlte_state(c.pte_index).map_err(eio)?;
        if state != u8::from(PtlteState::Disabled) {
            return Err(Errno::Einval);
        }
        if drops != c.drop_count {
            return Err(Errno::Eagain);
        }
        self.hw()
            .ptlte_set_state(c.pte_index, u8::from(PtlteState::SoftwareManaged))
            .map_err(eio)
    }

    // ---- Wait objects ----

    pub(crate) fn wait_alloc(&mut self, c: &WaitAllocCmd) -> Result<WaitAllocResp, Errno> {
        self.lni(c.lni)?;
        let vector = self.st.wait_vec.alloc().ok_or(Errno::Enospc)?;
        // A fresh wait object starts with nothing pending.
        if let Some(w) = self.dev.vector(vector) {
            w.poll();
        }
        let id = vector + 1;
        self.st.waits.insert(
            id,
            Wait {
                client: self.client,
                lni: c.lni,
                vector,
                refs: 0,
            },
        );
        lni_ref(self.st, c.lni, 1);
        Ok(WaitAllocResp {
            client_id: self.client,
            wait: id,
        })
    }

    pub(crate) fn wait_free(&mut self, c: &WaitFreeCmd) -> Result<(), Errno> {
        if owned!(self.st.waits, c.wait, self.client).refs > 0 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_wait(self.st, c.wait);
        Ok(())
    }

    /// The wait object behind a wait handle.
    pub(crate) fn wait_object(&self, wait: u32) -> Result<Arc<WaitObject>, Errno> {
        let v = owned!(self.st.waits, wait, self.client).vector;
        self.dev.vector(v).ok_or(Errno::Einval)
    }

    // ---- Counting events ----

    fn ct_wb(&self, wb: u64) -> Result<Pinned, Errno> {
        if !wb.is_multiple_of(8) {
            return Err(Errno::Einval);
        }
        self.space()?.resolve(wb, 8).ok_or(Errno::Efault)
    }

    pub(crate) fn ct_alloc(&mut self, c: &CtAllocCmd) -> Result<CtAllocResp, Errno> {
        let rgid = self.lni(c.lni)?.rgid;
        let pin = self.ct_wb(c.wb)?;
        self.check_limit(c.lni, rsrc::CT)?;
        let n = self.st.ctn.alloc().ok_or(Errno::Enospc)?;
        if let Err(e) = self.hw().ct_enable(n, PHYS_ACID, pin.bus_address(0), rgid) {
            let _ = self.hw().ct_disable(n);
            self.st.ctn.free(n);
            return Err(eio(e));
        }
        let shared = MapShared::new();
        let doorbell = self.new_token(
            MMIO_PAGE,
            MapTarget::Mmio {
                offset: hw::ct_doorbell_offset(n),
                len: MMIO_PAGE,
            },
            &shared,
        )?;
        self.st.cts.insert(
            n,
            Ct {
                client: self.client,
                lni: c.lni,
                _pin: pin,
                token: doorbell.offset,
                shared,
            },
        );
        svc_use(self.st, c.lni, rsrc::CT, 1);
        lni_ref(self.st, c.lni, 1);
        Ok(CtAllocResp {
            ctn: n,
            pad0: 0,
            doorbell,
        })
    }

    pub(crate) fn ct_wb_update(&mut self, c: &CtWbUpdateCmd) -> Result<(), Errno> {
        owned!(self.st.cts, c.ctn, self.client);
        let pin = self.ct_wb(c.wb)?;
        self.hw()
            .ct_set_wb(c.ctn, PHYS_ACID, pin.bus_address(0))
            .map_err(eio)?;
        if let Some(ct) = self.st.cts.get_mut(&c.ctn) {
            ct._pin = pin;
        }
        Ok(())
    }

    pub(crate) fn ct_free(&mut self, c: &CtFreeCmd) -> Result<(), Errno> {
        let ct = owned!(self.st.cts, c.ctn, self.client);
        if Arc::strong_count(&ct.shared) > 2 {
            return Err(Errno::Ebusy);
        }
        self.dev.free_ct(self.st, c.ctn);
        Ok(())
    }

    // ---- Device information, CSRs ----

    pub(crate) fn map_csrs(&mut self) -> Result<MapCsrsResp, Errno> {
        let shared = MapShared::new();
        let csr = self.new_token(
            CSR_SIZE,
            MapTarget::Mmio {
                offset: hw::csr_region_offset(),
                len: CSR_SIZE,
            },
            &shared,
        )?;
        Ok(MapCsrsResp { csr })
    }

    fn rsrc_limits() -> [Limits; 8] {
        let mut l = [Limits::default(); 8];
        for (x, t) in l.iter_mut().zip(device_limits()) {
            x.max = t;
        }
        l
    }

    pub(crate) fn dev_properties(&self) -> PropertiesInfo {
        let i = &self.dev.info;
        PropertiesInfo {
            nid: i.nid,
            pid_bits: i.pid_bits.get(),
            pid_count: i.pid_count,
            pid_granule: i.pid_granule,
            min_free_shift: 0,
            rdzv_get_idx: i.rdzv_get_idx,
            rsrcs: Self::rsrc_limits(),
            device_rev: u32::from(i.rev),
            device_proto: u32::from(i.proto),
            device_platform: i.platform as u32,
            cassini_version: u32::from(i.version.value()),
            rdzv_get_en: u8::from(self.dev.config.rdzv_get_en),
            amo_remap_to_pcie_fadd: -1,
            ..PropertiesInfo::default()
        }
    }

    pub(crate) fn dev_info(&self) -> DevInfoUse {
        let i = &self.dev.info;
        let l = device_limits();
        let mut fru = [0u8; 16];
        let name = b"nicemu cassini";
        fru[..name.len()].copy_from_slice(name);
        DevInfoUse {
            nid: i.nid,
            pid_bits: i.pid_bits.get(),
            pid_count: i.pid_count,
            pid_granule: i.pid_granule,
            min_free_shift: 0,
            rdzv_get_idx: i.rdzv_get_idx,
            vendor_id: u32::from(i.id.vendor),
            device_id: u32::from(i.id.device),
            device_rev: u32::from(i.rev),
            device_proto: u32::from(i.proto),
            device_platform: i.platform as u32,
            pct_eq: 0,
            uc_nic: -1,
            link_mtu: lim::C_MAX_HPC_MTU as u64,
            link_speed: 200_000,
            link_state: 1,
            num_ptes: l[rsrc::PTE],
            num_txqs: l[rsrc::TXQ],
            num_tgqs: l[rsrc::TGQ],
            num_eqs: l[rsrc::EQ],
            num_cts: l[rsrc::CT],
            num_acs: l[rsrc::AC],
            num_tles: l[rsrc::TLE],
            num_les: l[rsrc::LE],
            fru_description: fru,
            cassini_version: u32::from(i.version.value()),
            system_type_identifier: match i.version.generation() {
                Generation::Cassini1 => 1,
                Generation::Cassini2 => 2,
            },
            ..DevInfoUse::default()
        }
    }

    // ---- Services ----

    fn validate_desc(&self, d: &SvcDesc, except: Option<u32>) -> Result<(), (Errno, SvcFailInfo)> {
        if d.bits & svcbits::RESTRICTED_VNIS != 0
            && (d.num_vld_vnis == 0 || usize::from(d.num_vld_vnis) > lim::CXI_SVC_MAX_VNIS)
        {
            return Err((Errno::Einval, SvcFailInfo::default()));
        }
        if d.bits & svcbits::RESTRICTED_MEMBERS != 0 && d.members.iter().any(|m| m.kind > 3) {
            return Err((Errno::Einval, SvcFailInfo::default()));
        }
        if d.bits & svcbits::RESOURCE_LIMITS != 0 {
            let totals = device_limits();
            let mut fail = SvcFailInfo::default();
            let mut short = false;
            for (t, l) in d.limits.iter().enumerate() {
                if l.res > l.max || l.max > totals[t] {
                    return Err((Errno::Einval, SvcFailInfo::default()));
                }
                let reserved: u32 = self
                    .st
                    .services
                    .iter()
                    .filter(|(id, s)| {
                        // The default service's TLE reservation counts although it has no
                        // resource limits.
                        Some(**id) != except
                            && (s.desc.bits & svcbits::RESOURCE_LIMITS != 0 || t == rsrc::TLE)
                    })
                    .map(|(_, s)| u32::from(s.desc.limits[t].res))
                    .sum();
                let avail = u32::from(totals[t]).saturating_sub(reserved);
                if u32::from(l.res) > avail {
                    fail.rsrc_avail[t] = avail.min(0xffff) as u16;
                    short = true;
                }
            }
            if short {
                return Err((Errno::Enospc, fail));
            }
        }
        Ok(())
    }

    pub(crate) fn svc_alloc(
        &mut self,
        c: &SvcAllocCmd,
    ) -> Result<SvcAllocResp, (Errno, SvcFailInfo)> {
        self.validate_desc(&c.svc_desc, None)?;
        let wants_pool =
            c.svc_desc.bits & svcbits::RESOURCE_LIMITS != 0 && c.svc_desc.limits[rsrc::TLE].max > 0;
        let tle_pool = if wants_pool {
            let Some(p) = self.st.tle_pool.alloc() else {
                let fail = SvcFailInfo {
                    no_tle_pools: 1,
                    ..SvcFailInfo::default()
                };
                return Err((Errno::Enospc, fail));
            };
            p
        } else {
            0
        };
        let Some(id) = self.st.svc_id.alloc() else {
            if tle_pool != 0 {
                self.st.tle_pool.free(tle_pool);
            }
            return Err((Errno::Enospc, SvcFailInfo::default()));
        };
        let mut desc = c.svc_desc;
        desc.svc_id = id;
        self.st.services.insert(
            id,
            Service {
                desc,
                lnis: 0,
                in_use: [0; 8],
                lpr: 1,
                tle_pool,
            },
        );
        if tle_pool != 0
            && let Err(e) = program_tle_pools(self.hw(), self.st)
        {
            return Err((eio(e), SvcFailInfo::default()));
        }
        Ok(SvcAllocResp {
            svc_id: id,
            fail_info: SvcFailInfo::default(),
        })
    }

    pub(crate) fn svc_update(
        &mut self,
        c: &SvcUpdateCmd,
    ) -> Result<SvcUpdateResp, (Errno, SvcFailInfo)> {
        let id = c.svc_desc.svc_id;
        let s = self
            .st
            .services
            .get(&id)
            .ok_or((Errno::Einval, SvcFailInfo::default()))?;
        if s.lnis > 0 {
            return Err((Errno::Ebusy, SvcFailInfo::default()));
        }
        self.validate_desc(&c.svc_desc, Some(id))?;
        let mut pool = 0;
        if let Some(s) = self.st.services.get_mut(&id) {
            s.desc = c.svc_desc;
            pool = s.tle_pool;
        }
        if pool != 0 {
            program_tle_pools(self.hw(), self.st).map_err(|e| (eio(e), SvcFailInfo::default()))?;
        }
        Ok(SvcUpdateResp::default())
    }

    pub(crate) fn svc_destroy(&mut self, c: &SvcDestroyCmd) -> Result<(), Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        if s.desc.bits & svcbits::IS_SYSTEM_SVC != 0 && c.svc_id == lim::CXI_DEFAULT_SVC_ID {
            return Err(Errno::Einval);
        }
        if s.lnis > 0 {
            return Err(Errno::Ebusy);
        }
        let pool = s.tle_pool;
        self.st.services.remove(&c.svc_id);
        self.st.svc_id.free(c.svc_id);
        if pool != 0 {
            self.st.tle_pool.free(pool);
            program_tle_pools(self.hw(), self.st).map_err(eio)?;
        }
        Ok(())
    }

    pub(crate) fn svc_enable(&mut self, c: &SvcEnableCmd) -> Result<(), Errno> {
        if c.enable > 1 {
            return Err(Errno::Einval);
        }
        let s = self.st.services.get_mut(&c.svc_id).ok_or(Errno::Einval)?;
        if c.enable == 1 {
            s.desc.bits |= svcbits::ENABLE;
        } else {
            s.desc.bits &= !svcbits::ENABLE;
        }
        Ok(())
    }

    pub(crate) fn svc_get(&self, c: &SvcIdCmd) -> Result<SvcDesc, Errno> {
        Ok(self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?.desc)
    }

    fn rsrc_use(id: u32, s: &Service) -> RsrcUse {
        RsrcUse {
            svc_id: id,
            tle_pool_id: s.tle_pool,
            in_use: s.in_use,
        }
    }

    pub(crate) fn svc_rsrc_get(&self, c: &SvcIdCmd) -> Result<RsrcUse, Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        Ok(Self::rsrc_use(c.svc_id, s))
    }

    fn copy_list<T: zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        c: &SvcListGetCmd,
        items: &[T],
    ) -> Result<SvcListGetResp, Errno> {
        let total = items.len() as u32;
        if c.count >= total && total > 0 {
            let space = self.space()?;
            let size = std::mem::size_of::<T>() as u64;
            for (i, it) in items.iter().enumerate() {
                let at = c.list.checked_add(i as u64 * size).ok_or(Errno::Efault)?;
                space.copy_to_user(at, it.as_bytes()).ok_or(Errno::Efault)?;
            }
        }
        Ok(SvcListGetResp { count: total })
    }

    pub(crate) fn svc_list_get(&self, c: &SvcListGetCmd) -> Result<SvcListGetResp, Errno> {
        let items: Vec<SvcDesc> = self.st.services.values().map(|s| s.desc).collect();
        self.copy_list(c, &items)
    }

    pub(crate) fn svc_rsrc_list_get(&self, c: &SvcListGetCmd) -> Result<SvcListGetResp, Errno> {
        let items: Vec<RsrcUse> = self
            .st
            .services
            .iter()
            .map(|(id, s)| Self::rsrc_use(*id, s))
            .collect();
        self.copy_list(c, &items)
    }

    pub(crate) fn svc_set_lpr(&mut self, c: &SvcLprCmd) -> Result<(), Errno> {
        if c.lnis_per_rgid == 0 || c.lnis_per_rgid > lim::C_NUM_LACS as u32 {
            return Err(Errno::Einval);
        }
        let s = self.st.services.get_mut(&c.svc_id).ok_or(Errno::Einval)?;
        if s.lnis > 0 {
            return Err(Errno::Ebusy);
        }
        s.lpr = c.lnis_per_rgid;
        Ok(())
    }

    pub(crate) fn svc_get_lpr(&self, c: &SvcLprCmd) -> Result<SvcGetValueResp, Errno> {
        let s = self.st.services.get(&c.svc_id).ok_or(Errno::Einval)?;
        Ok(SvcGetValueResp { value: s.lpr })
    }
}

/// `CXI_TC_MAX`.
fn lim_tc_max() -> u32 {
    firmware_spec::cassini::le::CXI_TC_MAX as u32
}

/// `C_EQ_RESERVED_EVENT_SLOTS`.
fn lim_eq_reserved() -> u32 {
    firmware_spec::cassini::status::C_EQ_RESERVED_EVENT_SLOTS as u32
}

const _: () = {
    const fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<CxiDevice>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_limits_are_the_public_numbers() {
        let l = device_limits();
        assert_eq!(l[rsrc::TXQ], 1024);
        assert_eq!(l[rsrc::TGQ], 512);
        assert_eq!(l[rsrc::EQ], 2047);
        assert_eq!(l[rsrc::PTE], 2047);
        assert_eq!(l[rsrc::CT], 2047);
        assert_eq!(l[rsrc::AC], 1022);
        assert_eq!(l[rsrc::TLE], 2048);
        assert_eq!(l[rsrc::LE], u16::MAX);
    }

    #[test]
    fn fresh_state_has_the_hardware_counts() {
        let st = DevState::new(128);
        let f = st.free_counts();
        assert_eq!(f.txqs, 1024);
        assert_eq!(f.tgqs, 512);
        assert_eq!(f.eqs, 2047);
        assert_eq!(f.cts, 2047);
        assert_eq!(f.ptes, 2047);
        assert_eq!(f.rgids, 255);
        assert_eq!(f.acs, 1022);
        assert_eq!(f.cps, 256);
        assert_eq!(f.vni_entries, 256);
        assert_eq!(f.portal_entries, 2560);
        assert_eq!(f.wait_vectors, 128);
    }
}
