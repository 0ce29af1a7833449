//! What the driver keeps for one device: its allocators, the objects every client made
//! (services, LNIs, profiles, domains, CQs, EQs, PtlTEs, CTs, MDs, address contexts, wait
//! objects), the clients with their mmap tokens, and the per-service resource accounting.

use super::*;

/// `enum cxi_rsrc_type` indices.
pub(super) mod rsrc {
    pub const PTE: usize = 0;
    pub const TXQ: usize = 1;
    pub const TGQ: usize = 2;
    pub const EQ: usize = 3;
    pub const CT: usize = 4;
    pub const LE: usize = 5;
    pub const TLE: usize = 6;
    pub const AC: usize = 7;
}

/// Svc descriptor bits.
pub(super) mod svcbits {
    pub const RESTRICTED_MEMBERS: u8 = 1 << 0;
    pub const RESTRICTED_VNIS: u8 = 1 << 1;
    pub const RESTRICTED_TCS: u8 = 1 << 2;
    pub const RESOURCE_LIMITS: u8 = 1 << 3;
    pub const ENABLE: u8 = 1 << 4;
}

#[derive(Clone, Debug)]
pub(super) struct Service {
    pub(super) desc: SvcDesc,
    pub(super) lnis: u32,
    pub(super) in_use: [u16; 8],
    pub(super) lpr: u32,
    /// Its own TLE pool (services with a TLE limit), else pool 0.
    pub(super) tle_pool: u32,
    /// Its own LE pool (services that reserve LEs), else pool 0.
    pub(super) le_pool: u32,
    /// The VNI range of a service without restricted VNIs (SVC_SET_VNI_RANGE).
    pub(super) vni_range: Option<(u32, u32)>,
    /// `exclusive_cp` of its transmit profile (SVC_SET_EXCLUSIVE_CP).
    pub(super) exclusive_cp: bool,
    /// The network namespace allowed to use it (SVC_SET_NETNS).
    pub(super) netns: Option<u32>,
}

impl Service {
    pub(super) fn new(desc: SvcDesc, tle_pool: u32) -> Service {
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
pub(super) struct Lni {
    pub(super) client: ClientId,
    pub(super) svc: u32,
    pub(super) rgid: u32,
    pub(super) pe: u32,
    pub(super) lcids: IdAllocator,
    /// AC behind LAC 0 (0 = none yet).
    pub(super) acid: u32,
    pub(super) refs: u32,
}

#[derive(Clone, Debug)]
pub(super) struct CpEntry {
    pub(super) vni: u32,
    pub(super) tc: u32,
    pub(super) tc_type: u32,
    pub(super) refs: u32,
}

#[derive(Debug)]
pub(super) struct CpHandle {
    pub(super) client: ClientId,
    pub(super) lni: u32,
    pub(super) cp: u32,
    pub(super) lcid: u32,
}

#[derive(Debug)]
pub(super) struct Domain {
    pub(super) client: ClientId,
    pub(super) lni: u32,
    pub(super) vni: u32,
    pub(super) pid: u32,
    pub(super) maps: u32,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct PidOwner {
    pub(super) lni: u32,
    pub(super) domain: Option<u32>,
    pub(super) reserved: bool,
}

#[derive(Clone, Debug)]
pub(super) struct VniEntry {
    pub(super) idx: u32,
    pub(super) refs: u32,
}

#[derive(Debug)]
pub(super) struct Cq {
    pub(super) client: ClientId,
    pub(super) lni: u32,
    pub(super) tx: bool,
    pub(super) n: u32,
    pub(super) eq: u32,
    pub(super) ring: Arc<PageBlock>,
    pub(super) tokens: [u64; 2],
    pub(super) shared: Arc<MapShared>,
}

#[derive(Debug)]
pub(super) struct EqObj {
    pub(super) client: ClientId,
    pub(super) lni: u32,
    pub(super) md: u32,
    pub(super) _pin: Option<Pinned>,
    pub(super) waits: [u32; 2],
    pub(super) slots: u32,
    pub(super) reserved_fc: u32,
    pub(super) refs: u32,
    pub(super) token: u64,
    pub(super) shared: Arc<MapShared>,
}

#[derive(Debug)]
pub(super) struct Pte {
    pub(super) client: ClientId,
    pub(super) lni: u32,
    pub(super) eq: u32,
    pub(super) maps: u32,
}

#[derive(Debug)]
pub(super) struct PteMapping {
    pub(super) client: ClientId,
    pub(super) pte: u32,
    pub(super) domain: u32,
    pub(super) key: PortalKey,
}

#[derive(Debug)]
pub(super) struct Ct {
    pub(super) client: ClientId,
    pub(super) lni: u32,
    /// The write-back buffer, if it has one.
    pub(super) _pin: Option<Pinned>,
    pub(super) token: u64,
    pub(super) shared: Arc<MapShared>,
}

#[derive(Debug)]
pub(super) struct MdObj {
    pub(super) client: ClientId,
    pub(super) lni: u32,
    pub(super) acid: u32,
    pub(super) va: u64,
    pub(super) len: u64,
    pub(super) iova: u64,
    pub(super) pins: Vec<Pinned>,
    /// The IOVA ranges mapped in the ATU (start, length): an MD allocated without
    /// mapping (`ALLOC_MD`) may span the whole IOVA space, so teardown unmaps these, not
    /// every page of the MD.
    pub(super) mapped: Vec<(u64, u64)>,
    pub(super) refs: u32,
}

#[derive(Debug)]
pub(super) struct Ac {
    pub(super) tables: NtaTables,
    pub(super) iova: PageAllocator,
    pub(super) mds: u32,
}

#[derive(Debug)]
pub(super) struct Wait {
    pub(super) client: ClientId,
    pub(super) lni: u32,
    pub(super) vector: u32,
    pub(super) refs: u32,
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
    pub(super) next_mmap: u64,
    pub(crate) dead: bool,
    /// MAP_CSRS was done (a second one is `EALREADY`).
    pub(crate) csrs_mapped: bool,
}

/// Allocators and objects of one device.
#[derive(Debug)]
pub(crate) struct DevState {
    pub(super) txq: IdAllocator,
    pub(super) tgq: IdAllocator,
    pub(super) eqn: IdAllocator,
    pub(super) ctn: IdAllocator,
    pub(super) ptn: IdAllocator,
    pub(super) rgid: IdAllocator,
    pub(super) acid: IdAllocator,
    pub(super) cpn: IdAllocator,
    pub(super) portal: IdAllocator,
    pub(super) vni_list: IdAllocator,
    pub(super) wait_vec: IdAllocator,
    pub(super) md_id: IdAllocator,
    pub(super) domain_id: IdAllocator,
    pub(super) cp_hndl: IdAllocator,
    pub(super) svc_id: IdAllocator,
    pub(super) tle_pool: IdAllocator,
    pub(super) le_pool: IdAllocator,

    pub(super) services: BTreeMap<u32, Service>,
    pub(super) lnis: BTreeMap<u32, Lni>,
    pub(super) cps: BTreeMap<u32, CpEntry>,
    pub(super) cp_handles: BTreeMap<u32, CpHandle>,
    pub(super) domains: BTreeMap<u32, Domain>,
    pub(super) pids: BTreeMap<(u32, u32), PidOwner>,
    pub(super) vnis: BTreeMap<u32, VniEntry>,
    pub(super) cqs: BTreeMap<u32, Cq>,
    pub(super) eqs: BTreeMap<u32, EqObj>,
    pub(super) ptes: BTreeMap<u32, Pte>,
    pub(super) pte_maps: BTreeMap<u32, PteMapping>,
    pub(super) cts: BTreeMap<u32, Ct>,
    pub(super) mds: BTreeMap<u32, MdObj>,
    pub(super) acs: BTreeMap<u32, Ac>,
    pub(super) waits: BTreeMap<u32, Wait>,
    pub(crate) clients: BTreeMap<ClientId, ClientState>,
    pub(super) next_client: ClientId,
}
pub(super) fn eio(e: HwError) -> Errno {
    tracing::warn!(error = %e, "cassini hardware access failed");
    Errno::Eio
}

pub(super) fn enomem(e: MemError) -> Errno {
    match e {
        MemError::Exhausted { .. } | MemError::ZeroLength => Errno::Enomem,
        _ => Errno::Eio,
    }
}
impl DevState {
    pub(super) fn new(wait_vectors: u32) -> Self {
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
    pub(super) fn idle_copy(&self) -> DevState {
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

    pub(super) fn free_counts(&self) -> FreeCounts {
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
pub(super) fn device_limits() -> [u16; 8] {
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

/// Whether service `s` holds `vni`: one of its restricted VNIs, or its VNI range (a
/// service with neither holds every VNI).
pub(super) fn svc_holds_vni(s: &Service, vni: u32) -> bool {
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
pub(super) fn svc_admits(s: &Service, creds: &Credentials) -> bool {
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
pub(super) fn svc_use(st: &mut DevState, lni: u32, kind: usize, delta: i32) {
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
pub(super) fn lni_ref(st: &mut DevState, lni: u32, delta: i32) {
    if let Some(l) = st.lnis.get_mut(&lni) {
        l.refs = l.refs.saturating_add_signed(delta);
    }
}
