//! kgni: the client services of the Gemini driver. One [`Kgni`] per probed NIC holds the job
//! table, the allocators and every object clients made; a [`KgniClient`] is an open file of
//! `/dev/kgniN`. Requests are checked against the caller's ownership; a client's objects are
//! released when it closes (drops).
//!
//! Locking: one mutex per device guards all state; MMIO is done with it held (the device
//! never calls back into the driver). Waits release it while they let the engine progress.
//!
//! Files: `probe` brings a NIC up, `state` holds the objects behind handles, `requests`
//! handles the uAPI, `service` is the interrupt-handler side (BTE rings, datagram transport,
//! waits, teardown), `client` is the open file. The submodules share the imports below.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use emu_core::engine::Progress;
use firmware_spec::gemini::bte::TxdFlags;
use firmware_spec::gemini::bte::{self, RxDescriptor, TxDescriptor, TxdMode1, TxdMode4};
use firmware_spec::gemini::cq::CqDescriptor;
use firmware_spec::gemini::cqe::{Cqe, CqeSource};
use firmware_spec::gemini::fma::{FmaDescriptor, FmaMode2, FmaMode3, PrivMask};
use firmware_spec::gemini::gni::{
    CdmMode, CqEventMode, CqEventType, CqMode, JobLimits, MemFlags, RdmaMode, ReturnCode, ptag,
};
use firmware_spec::gemini::mdd::{
    MRT_PAGE_SIZES, MddDescriptor, MddModes, MemHandle, MemHandleFlags, MemHandleInfo, MrtEntry,
};
use firmware_spec::gemini::ntt::{LOGICAL_PES, NttEntry};
use firmware_spec::gemini::pci as gpci;
use firmware_spec::gemini::post::PostDescriptor;
use firmware_spec::gemini::{limits, map};

use super::datagram::{self, DgramState, Domain, Matcher, Outgoing, PostError, PostSpec, Wire};
use super::error::{KgniError, Object, Resource};
use super::hw::{self, Ghal, HwError, MmioWindow};
use super::uapi::{
    AttachInfo, CdmId, CqId, CqInfo, DatagramResult, EpId, FmaId, JobConfig, MapKind, Mapping,
    MmapToken, PostInfo, Request, Response,
};
use crate::alloc::IdAllocator;
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
    /// Fault sites (off by default; [`crate::faults`]).
    pub faults: crate::faults::DriverFaults,
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
            faults: crate::faults::DriverFaults::none(),
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

mod client;
mod probe;
mod requests;
mod service;
mod state;

pub use client::KgniClient;
pub use state::DGRAM_CHANNEL;
use state::*;

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
    /// Requests answered with an error.
    refused: AtomicU64,
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

/// The driver's state of a device without client objects, from [`Kgni::save_idle_state`].
pub struct KgniIdleState {
    device: usize,
    state: State,
    next_client: u64,
    refused: u64,
    vectors: Vec<(u64, u64)>,
}

impl fmt::Debug for KgniIdleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KgniIdleState")
            .field("clients", &self.state.clients)
            .field("next_client", &self.next_client)
            .field("refused", &self.refused)
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

impl Kgni {
    /// How many requests of any client this device answered with an error (a driver
    /// statistic; the kernel module reports such refusals only as error codes and logs).
    pub fn refused_requests(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    pub(crate) fn note_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Record the driver's state while no client object exists (clients may be open, as a
    /// job's launcher is, but hold no CDM, CQ, registration or endpoint): allocators,
    /// jobs, rings' positions, the datagram matcher, statistics and the interrupt vectors'
    /// counts. `None` otherwise. With the device model and host memory snapshotted at the
    /// same moment, [`Kgni::restore_idle_state`] puts the whole machine back (the fuzz
    /// targets rerun a fixture this way instead of probing afresh for every input).
    pub fn save_idle_state(&self) -> Option<KgniIdleState> {
        let state = self.lock().idle_copy()?;
        Some(KgniIdleState {
            device: self as *const Kgni as usize,
            state,
            next_client: self.next_client.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            vectors: self.irqs.iter().map(|w| w.counts()).collect(),
        })
    }

    /// Put back the state [`Kgni::save_idle_state`] recorded on this device. Every object
    /// created since is forgotten (its host pages go back to the allocator, which the
    /// caller then restores with the host memory); the hardware is not touched (the caller
    /// restores the device model). Refused while a client opened since is still open or
    /// for a state of another device.
    pub fn restore_idle_state(&self, saved: &KgniIdleState) -> Result<(), KgniError> {
        if saved.device != self as *const Kgni as usize {
            return Err(KgniError::InvalidParam("a state saved from another device"));
        }
        let copy = saved.state.idle_copy().ok_or(KgniError::InvalidParam(
            "the saved state holds client objects",
        ))?;
        let old = {
            let mut st = self.lock();
            if st.clients != saved.state.clients {
                return Err(KgniError::InvalidParam(
                    "clients opened since the state was saved are still open",
                ));
            }
            std::mem::replace(&mut *st, copy)
        };
        // Dropped outside the lock: pages of objects left behind are freed.
        drop(old);
        self.next_client.store(saved.next_client, Ordering::Relaxed);
        self.refused.store(saved.refused, Ordering::Relaxed);
        for (w, &(pending, total)) in self.irqs.iter().zip(&saved.vectors) {
            w.set_counts(pending, total);
        }
        Ok(())
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

    /// The node's host memory (where clients' buffers and the rings live).
    pub fn memory(&self) -> &Arc<dyn HostMem> {
        &self.mem
    }

    /// Open the device as a new ordinary process (a fresh address space).
    pub fn open(self: &Arc<Self>) -> KgniClient {
        self.open_with(false, None)
    }

    /// Open the device as a new privileged process (the job launcher, a kernel service): it
    /// may configure and release jobs and use the reserved ptags.
    pub fn open_privileged(self: &Arc<Self>) -> KgniClient {
        self.open_with(true, None)
    }

    /// Open the device with an explicit privilege and address space (`None`: a fresh one;
    /// a process that opens the device twice passes its space both times).
    pub fn open_with(self: &Arc<Self>, privileged: bool, space: Option<UserSpace>) -> KgniClient {
        let space = space.unwrap_or_else(|| UserSpace::new(Arc::clone(&self.mem)));
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
        self.reclaim(&mut st);
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

    /// Let the device make progress, as the node assembly's waiter says: on a deterministic
    /// engine run its next event (and this driver's interrupt-handler work), on a threaded one
    /// run a due item or yield, on real hardware only the handler work. True if anything
    /// happened. Code that polls rings in host memory (the user library) calls this while it
    /// waits, like `CxiDevice::progress` on Cassini.
    pub fn progress(&self) -> bool {
        match self.waiter() {
            Waiter::Deterministic(p) | Waiter::Threaded(p) => p.progress(),
            Waiter::Interrupts => self.service(),
        }
    }

    /// The interrupt-handler work: retire finished datagram sends (and their errors), take
    /// received datagram messages, match them, and send what is queued. Returns whether
    /// anything happened. Waits call it; a node assembly may call it from its own progress.
    pub fn service(&self) -> bool {
        let mut st = self.lock();
        self.service_locked(&mut st)
    }

    fn service_locked(&self, st: &mut State) -> bool {
        self.reclaim(st);
        let mut did = self.reap_kernel_cq(st);
        did |= self.receive(st);
        did |= self.flush_backlog(st);
        did
    }
}

impl Progress for Kgni {
    fn progress(&self) -> bool {
        Kgni::progress(self)
    }

    fn before_sleep(&self) -> bool {
        match self.waiter() {
            Waiter::Deterministic(_) => false,
            Waiter::Threaded(p) => p.before_sleep(),
            Waiter::Interrupts => true,
        }
    }

    fn can_sleep(&self) -> bool {
        match self.waiter() {
            Waiter::Deterministic(_) => false,
            Waiter::Threaded(p) => p.can_sleep(),
            Waiter::Interrupts => true,
        }
    }
}
