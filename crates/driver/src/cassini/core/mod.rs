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
    /// `active_qos_profile` (1 HPC, 2 LL_BE_BD_ET, 3 LL_BE_BD_ET1_ET2): which traffic
    /// classes and types communication profiles may use ([`qos_allows`]). `None` (nicemu's
    /// own stacks): every class and type.
    pub qos_profile: Option<u8>,
    /// Fault sites (off by default; [`crate::faults`]).
    pub faults: crate::faults::DriverFaults,
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
            qos_profile: None,
            faults: crate::faults::DriverFaults::none(),
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
    /// The opener's network namespace (the inode of `/proc/self/ns/net`; 0 when not
    /// known), matched against a service's SVC_SET_NETNS.
    pub netns: u32,
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
}

#[derive(Clone, Debug)]
struct Service {
    desc: SvcDesc,
    lnis: u32,
    in_use: [u16; 8],
    lpr: u32,
    /// Its own TLE pool (services with a TLE limit), else pool 0.
    tle_pool: u32,
    /// Its own LE pool (services that reserve LEs), else pool 0.
    le_pool: u32,
    /// The VNI range of a service without restricted VNIs (SVC_SET_VNI_RANGE).
    vni_range: Option<(u32, u32)>,
    /// `exclusive_cp` of its transmit profile (SVC_SET_EXCLUSIVE_CP).
    exclusive_cp: bool,
    /// The network namespace allowed to use it (SVC_SET_NETNS).
    netns: Option<u32>,
}

impl Service {
    fn new(desc: SvcDesc, tle_pool: u32) -> Service {
        Service {
            desc,
            lnis: 0,
            in_use: [0; 8],
            lpr: 1,
            tle_pool,
            le_pool: 0,
            vni_range: None,
            exclusive_cp: false,
            netns: None,
        }
    }
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

#[derive(Clone, Debug)]
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

#[derive(Clone, Debug)]
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
    /// The IOVA ranges mapped in the ATU (start, length): an MD allocated without
    /// mapping (`ALLOC_MD`) may span the whole IOVA space, so teardown unmaps these, not
    /// every page of the MD.
    mapped: Vec<(u64, u64)>,
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
    /// Mapped already: a token maps once (`cxi_user_mmap.c` takes it off the pending list).
    pub(crate) used: bool,
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
    /// MAP_CSRS was done (a second one is `EALREADY`).
    pub(crate) csrs_mapped: bool,
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
    le_pool: IdAllocator,

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
            // CP 0 is never handed out: an LCID a resource group has not been given reads
            // CP 0 (the reset value of `c_cq_cfg_cid_array`), which must stay invalid, or a
            // process could send with another's profile (its VNI) by switching LCID.
            cpn: IdAllocator::new(1, lim::C_CQ_CFG_CP_TABLE_ENTRIES as u32),
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
            // Pool 0 of each PE serves every service that reserves no LEs.
            le_pool: IdAllocator::new(1, lim::LE_POOLS_PER_PE as u32),
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

    /// A copy of the allocators and device-wide tables, without any per-client object
    /// (what an idle device holds; see [`CxiDevice::save_idle_state`]).
    fn idle_copy(&self) -> DevState {
        DevState {
            txq: self.txq.clone(),
            tgq: self.tgq.clone(),
            eqn: self.eqn.clone(),
            ctn: self.ctn.clone(),
            ptn: self.ptn.clone(),
            rgid: self.rgid.clone(),
            acid: self.acid.clone(),
            cpn: self.cpn.clone(),
            portal: self.portal.clone(),
            vni_list: self.vni_list.clone(),
            wait_vec: self.wait_vec.clone(),
            md_id: self.md_id.clone(),
            domain_id: self.domain_id.clone(),
            cp_hndl: self.cp_hndl.clone(),
            svc_id: self.svc_id.clone(),
            tle_pool: self.tle_pool.clone(),
            le_pool: self.le_pool.clone(),
            services: self.services.clone(),
            lnis: BTreeMap::new(),
            cps: self.cps.clone(),
            cp_handles: BTreeMap::new(),
            domains: BTreeMap::new(),
            pids: self.pids.clone(),
            vnis: self.vnis.clone(),
            cqs: BTreeMap::new(),
            eqs: BTreeMap::new(),
            ptes: BTreeMap::new(),
            pte_maps: BTreeMap::new(),
            cts: BTreeMap::new(),
            mds: BTreeMap::new(),
            acs: BTreeMap::new(),
            waits: BTreeMap::new(),
            clients: BTreeMap::new(),
            next_client: self.next_client,
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
    /// uAPI requests (writes and mmaps) answered with an error.
    refused: AtomicU64,
    progress: OnceLock<Arc<dyn emu_core::engine::Progress>>,
    /// This device's draws of the fault sites.
    faults: Mutex<crate::faults::FaultDraws>,
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

/// The driver's state of an idle device, from [`CxiDevice::save_idle_state`].
#[derive(Debug)]
pub struct CxiIdleState {
    device: usize,
    state: DevState,
    resets: u64,
    refused: u64,
    vectors: Vec<(u64, u64)>,
    faults: Option<crate::faults::FaultDraws>,
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
        let phys_pages = mem.passthrough_pages();
        hw.init_defaults(info.nid, pid_bits, info.rdzv_get_idx, PHYS_ACID, phys_pages)
            .map_err(hw::InitError::from)?;

        let mut st = DevState::new(msix_vectors);
        if !config.disable_default_svc {
            create_default_service(&mut st, &config);
        }
        program_tle_pools(&hw, &st).map_err(hw::InitError::from)?;
        let initial = st.free_counts();
        tracing::info!(address = %info.address, nid = info.nid, version = ?info.version, platform = ?info.platform, "cassini device up");
        let faults = Mutex::new(config.faults.instance(info.nid));
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
            refused: AtomicU64::new(0),
            progress: OnceLock::new(),
            faults,
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

    /// How many uAPI requests (command writes and mmaps) of any client this device answered
    /// with an error: a driver statistic (the kernel driver logs these with `dev_dbg`; here
    /// they are counted so that refusals are visible without a log).
    pub fn refused_requests(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Count one refused uAPI request.
    pub(crate) fn note_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Record the driver's state of an idle device (no client, so no queue, EQ, MD, PtlTE
    /// or other per-client object): the allocators, services, communication profiles and
    /// VNIs, the statistics and the interrupt vectors' counts. `None` while any client or
    /// per-client object exists. With the device model and host memory snapshotted at the
    /// same moment, [`CxiDevice::restore_idle_state`] puts the whole machine back (the fuzz
    /// targets rerun a fixture this way instead of probing afresh for every input).
    pub fn save_idle_state(&self) -> Option<CxiIdleState> {
        let st = self.lock();
        let idle = st.clients.is_empty()
            && st.pids.is_empty()
            && st.lnis.is_empty()
            && st.cp_handles.is_empty()
            && st.domains.is_empty()
            && st.cqs.is_empty()
            && st.eqs.is_empty()
            && st.ptes.is_empty()
            && st.pte_maps.is_empty()
            && st.cts.is_empty()
            && st.mds.is_empty()
            && st.acs.is_empty()
            && st.waits.is_empty();
        if !idle {
            return None;
        }
        let state = st.idle_copy();
        drop(st);
        Some(CxiIdleState {
            device: self as *const CxiDevice as usize,
            state,
            resets: self.resets.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            faults: self.faults.lock().ok().map(|f| f.clone()),
            vectors: self
                .irqs
                .iter()
                .flat_map(|i| i.iter())
                .map(|w| w.counts())
                .collect(),
        })
    }

    /// Put back the state [`CxiDevice::save_idle_state`] recorded on this device. Every
    /// object created since is forgotten (its host pages go back to the allocator, which
    /// the caller then restores with the host memory); the hardware is not touched (the
    /// caller restores the device model). `EBUSY` while a client is open, `EINVAL` for a
    /// state of another device.
    pub fn restore_idle_state(&self, saved: &CxiIdleState) -> Result<(), Errno> {
        if saved.device != self as *const CxiDevice as usize {
            return Err(Errno::Einval);
        }
        let copy = saved.state.idle_copy();
        let old = {
            let mut st = self.lock();
            if st.clients.values().any(|c| !c.dead) {
                return Err(Errno::Ebusy);
            }
            std::mem::replace(&mut *st, copy)
        };
        // Dropped outside the lock: pages of objects an input left behind are freed.
        drop(old);
        self.resets.store(saved.resets, Ordering::Relaxed);
        self.refused.store(saved.refused, Ordering::Relaxed);
        if let (Some(f), Ok(mut now)) = (&saved.faults, self.faults.lock()) {
            *now = f.clone();
        }
        for (w, &(pending, total)) in self.irqs.iter().flat_map(|i| i.iter()).zip(&saved.vectors) {
            w.set_counts(pending, total);
        }
        Ok(())
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
                csrs_mapped: false,
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
        let phys_pages = self.mem.passthrough_pages();
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
}

/// Whether service `s` holds `vni`: one of its restricted VNIs, or its VNI range (a
/// service with neither holds every VNI).
fn svc_holds_vni(s: &Service, vni: u32) -> bool {
    if s.desc.bits & svcbits::RESTRICTED_VNIS != 0 {
        let n = usize::from(s.desc.num_vld_vnis).min(lim::CXI_SVC_MAX_VNIS);
        s.desc.vnis[..n].iter().any(|v| u32::from(*v) == vni)
    } else {
        s.vni_range.is_none_or(|(lo, hi)| (lo..=hi).contains(&vni))
    }
}

/// Whether `creds` are a member of service `s` (`cxi_rgroup_valid_user`): any process when
/// its members are not restricted; else a matching uid, gid or network namespace member
/// (`CXI_SVC_MEMBER_UID` 1, `GID` 2, `NET_NS` 3), or the namespace SVC_SET_NETNS gave it.
/// CAP_SYS_ADMIN does not make a process a member.
fn svc_admits(s: &Service, creds: &Credentials) -> bool {
    if s.desc.bits & svcbits::RESTRICTED_MEMBERS == 0 {
        return true;
    }
    s.netns.is_some_and(|n| n == creds.netns)
        || s.desc.members.iter().any(|m| match m.kind {
            1 => m.value == creds.uid,
            2 => m.value == creds.gid,
            3 => m.value == creds.netns,
            _ => false,
        })
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
    // cass_svc.c (`cass_svc_init`): restricted to the default VNIs, resource limits at the
    // device's totals, the four traffic classes DEDICATED_ACCESS..BEST_EFFORT, not a system
    // service. Enabled here: nicemu loads the driver as HPE's test VMs do
    // (`disable_default_svc=0`); `DriverConfig::disable_default_svc` leaves it out.
    let mut desc = SvcDesc {
        bits: svcbits::RESTRICTED_VNIS | svcbits::RESOURCE_LIMITS | svcbits::ENABLE,
        num_vld_vnis: cfg.default_vnis.len() as u8,
        tcs: [1, 1, 1, 1, 0],
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
    desc.limits[rsrc::TLE].max = lim::DEFAULT_SVC_NUM_TLES as u16;
    st.services.insert(id, Service::new(desc, 0));
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
    /// The writing process's memory for lists a request names by address (`svc_list`,
    /// `rsrc_list`, `ule_offsets`); `None`: the client's [`UserSpace`].
    pub(crate) user: Option<&'a dyn super::client::UserAccess>,
}

impl Op<'_> {
    fn creds(&self) -> Credentials {
        self.st
            .clients
            .get(&self.client)
            .map(|c| c.creds)
            .unwrap_or_default()
    }

    /// `copy_to_user` of a list or an array a request names by address.
    fn copy_out(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        match self.user {
            Some(u) => u.copy_to_user(addr, data),
            None => self.space()?.copy_to_user(addr, data).ok_or(Errno::Efault),
        }
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
                used: false,
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

    /// A VNI the caller may use for an object of `lni` (a domain, a reservation, a CP).
    /// The real driver authorizes by profile: a VNI belongs to the transmit/receive profiles
    /// of the enabled services that hold it, device-wide, and the caller must be a member of
    /// one of them (`cxi_valid_vni`, `cxi_dev_get_tx_profile`; the LNI's own service does not
    /// matter). `EINVAL` for an invalid VNI (0 or above 16 bits) or one no enabled service
    /// holds, `EPERM` when the caller is a member of none of them. `lni` must be the
    /// caller's.
    fn check_vni(&self, lni: u32, vni: u32) -> Result<(), Errno> {
        self.lni(lni)?;
        if vni == 0 || vni > 0xffff {
            return Err(Errno::Einval);
        }
        let creds = self.creds();
        let mut held = false;
        for s in self.st.services.values() {
            if s.desc.bits & svcbits::ENABLE == 0 || !svc_holds_vni(s, vni) {
                continue;
            }
            held = true;
            if svc_admits(s, &creds) {
                return Ok(());
            }
        }
        Err(if held { Errno::Eperm } else { Errno::Einval })
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
}

/// Whether QoS profile `profile` (`active_qos_profile`, cxi_qos_profiles.c) configures
/// traffic class `tc` with type `tc_type` for user traffic (`cass_tc_find`). Classes: 0
/// DEDICATED_ACCESS, 1 LOW_LATENCY, 2 BULK_DATA, 3 BEST_EFFORT; types: 0 DEFAULT, 1 HRP, 2
/// RESTRICTED, 3 COLL_LEAF (a type exists where the profile gives it a DSCP). HPC (1) shares
/// LOW_LATENCY's PCP with PCT control traffic, which `disable_user_pct_tc_usage` (default
/// on) keeps from users; LL_BE_BD_ET (2, the module's default) and LL_BE_BD_ET1_ET2 (3) have
/// no DEDICATED_ACCESS. Other classes (Ethernet) are not decided here.
pub fn qos_allows(profile: u8, tc: u32, tc_type: u32) -> bool {
    let types: &[u32] = match (profile, tc) {
        (1, 0) | (1, 2) | (2 | 3, 2) => &[0],
        (1, 3) => &[0, 1, 2, 3],
        (2 | 3, 1) => &[0, 3],
        (2 | 3, 3) => &[0, 1, 2],
        (_, 4..) => return true,
        _ => &[],
    };
    types.contains(&tc_type)
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

mod cp;
mod cq;
mod ct;
mod domain;
mod eq;
mod info;
mod lni;
mod md;
mod pte;
mod service;
mod teardown;
mod wait;

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
    fn qos_profiles_decide_the_usable_traffic_classes() {
        // HPC: LOW_LATENCY carries PCT control traffic; DEDICATED_ACCESS is there.
        assert!(!qos_allows(1, 1, 0));
        assert!(qos_allows(1, 0, 0));
        assert!(qos_allows(1, 3, 3));
        // LL_BE_BD_ET (the default): no DEDICATED_ACCESS; LOW_LATENCY with COLL_LEAF.
        assert!(!qos_allows(2, 0, 0));
        assert!(qos_allows(2, 1, 3));
        assert!(!qos_allows(2, 1, 1), "no HRP on LOW_LATENCY");
        assert!(qos_allows(2, 3, 1));
        assert!(!qos_allows(2, 2, 2), "no RESTRICTED on BULK_DATA");
        assert!(!qos_allows(9, 3, 0), "no such profile");
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
        // Communication profile 0 is never handed out (a profile slot a client was not
        // given points at it), so 255 of the 256 are free.
        assert_eq!(f.cps, 255);
        assert_eq!(f.vni_entries, 256);
        assert_eq!(f.portal_entries, 2560);
        assert_eq!(f.wait_vectors, 128);
    }
}
