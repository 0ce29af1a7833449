//! `cxi_*`: client services of one Cassini device. Per-device allocators with the hardware's
//! limits, services, LNIs, domains, communication profiles, CQs, EQs, PtlTEs, CTs, wait
//! objects and memory descriptors, each owned by the client that made it; a client may only
//! name its own objects (anything else is `EINVAL`, as the driver's per-client idr lookups
//! give). Closing a client releases everything it held; a device reset releases everything.
//!
//! The uAPI front end ([`super::client`]) decodes requests and calls the handlers here with
//! the device lock held; hardware is programmed through [`super::hw`].
//!
//! Modules: `device` ([`CxiDevice`]: probe, clients, reset, idle state), `state` (the
//! allocators and every client's objects), `op` (the context a request runs in), and one
//! module per kind of object (`service`, `lni`, `cp`, `domain`, `cq`, `eq`, `pte`, `ct`,
//! `md`, `wait`), `info` and `teardown`.

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

mod device;
mod op;
mod state;

use device::*;
pub use device::{CxiDevice, CxiIdleState, DeviceError};
pub(crate) use op::Op;
pub use op::qos_allows;
use op::*;
use state::*;
pub(crate) use state::{ClientState, DevState, MapTarget, MmapEntry};

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
