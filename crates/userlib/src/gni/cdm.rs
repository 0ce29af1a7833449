//! Communication domains (`GNI_CdmCreate`, `GNI_CdmAttach`, `GNI_CdmDestroy`) and the NIC
//! handle an attach gives (gemini.md §1.2).
//!
//! A [`Cdm`] is made on an open kgni file (`/dev/kgniN`, a [`KgniClient`]) with the ptag and
//! cookie the launcher handed the process (`PMI_GNI_PTAG` / `PMI_GNI_COOKIE`; on an emulated
//! cluster `GeminiCluster::job`). [`Cdm::attach`] runs the ptag/cookie check in kgni, gets the
//! CDM's FMA descriptor and maps its user alias page and windows: the returned [`Nic`] is
//! what every other call works on. The CDM is destroyed when the [`Cdm`] and every object
//! made under it are gone, or by [`Cdm::destroy`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use driver::gemini::hw::MmioWindow;
use driver::gemini::{AttachInfo, KgniClient, Mapping, MmapToken, Request, Response};
use driver::mem::UserSpace;
use firmware_spec::gemini::gni::{CdmMode, DlvrMode};

use super::error::{GniError, Result};
use super::fma::Fma;
use super::objects::{CdmCore, NicInner};
use super::sync::lock;
use super::wait::{ProgressHook, poll_until};

/// A communication domain (`gni_cdm_handle_t`).
pub struct Cdm {
    core: Arc<CdmCore>,
}

impl std::fmt::Debug for Cdm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cdm")
            .field("id", &self.core.id)
            .field("inst_id", &self.core.inst_id)
            .field("ptag", &self.core.ptag)
            .finish()
    }
}

impl Cdm {
    /// `GNI_CdmCreate(inst_id, ptag, cookie, modes)` on the open device `client`.
    /// `GNI_RC_INVALID_PARAM` for bad modes or ptag 0, `GNI_RC_PERMISSION_ERROR` for a
    /// ptag outside the user range.
    pub fn create(
        client: &Arc<KgniClient>,
        inst_id: u32,
        ptag: u8,
        cookie: u32,
        modes: CdmMode,
    ) -> Result<Cdm> {
        if modes.bits() & !CdmMode::MASK != 0 {
            return Err(GniError::param("private CDM mode bits"));
        }
        let id = client.cdm_create(inst_id, ptag, cookie, modes.bits())?;
        Ok(Cdm {
            core: Arc::new(CdmCore {
                client: Arc::clone(client),
                id,
                inst_id,
                ptag,
                cookie,
                modes,
                destroyed: AtomicBool::new(false),
            }),
        })
    }

    /// `GNI_CdmAttach(cdm, device_id)`: attach to the NIC (`-1`: the device `client` has
    /// open). Attaching twice gives `GNI_RC_INVALID_STATE`; a ptag/cookie that names no job
    /// gives `GNI_RC_PERMISSION_ERROR`.
    pub fn attach(&self, device_id: i32) -> Result<Nic> {
        let c = &self.core.client;
        let info = match c.request(Request::CdmAttach {
            cdm: self.core.id,
            device_id,
        })? {
            Response::Attached(a) => a,
            _ => return Err(GniError::state("unexpected kgni answer to CdmAttach")),
        };
        let map = |t: MmapToken| -> Result<Arc<MmioWindow>> {
            match c.mmap(t)? {
                Mapping::Mmio(w) => Ok(w),
                Mapping::Memory(_) => Err(GniError::state("FMA mapping is not MMIO")),
            }
        };
        let fma = Fma::new(
            map(info.fma_page)?,
            map(info.put_wc)?,
            map(info.get)?,
            map(info.put_uc)?,
            info.window_size,
            !self.core.modes.contains(CdmMode::FMA_SHARED),
        );
        Ok(Nic {
            inner: Arc::new(NicInner {
                cdm: Arc::clone(&self.core),
                client: Arc::clone(c),
                attach: info,
                fma: Mutex::new(fma),
                hook: RwLock::new(None),
                cqs: Mutex::new(HashMap::new()),
                dgram_ids: Mutex::new(HashMap::new()),
                smsg_dlvr: AtomicU16::new(DlvrMode::IN_ORDER.bits()),
                smsg_eps: Mutex::new(Vec::new()),
                smsg_max_retrans: AtomicU32::new(super::smsg::SMSG_MAX_RETRANS_DEFAULT),
                smsg_retransmits: AtomicU64::new(0),
                smsg_pending: AtomicBool::new(false),
            }),
        })
    }

    /// The instance id.
    pub fn inst_id(&self) -> u32 {
        self.core.inst_id
    }

    /// The protection tag.
    pub fn ptag(&self) -> u8 {
        self.core.ptag
    }

    /// The cookie.
    pub fn cookie(&self) -> u32 {
        self.core.cookie
    }

    /// The modes.
    pub fn modes(&self) -> CdmMode {
        self.core.modes
    }

    /// `GNI_CdmDestroy`: kgni releases everything made under the CDM (its CQs, endpoints,
    /// registrations, FMA descriptor); handles still held fail afterwards.
    pub fn destroy(self) -> Result<()> {
        self.core.destroy()
    }
}

/// A NIC handle (`gni_nic_handle_t`): an attached CDM. Cloning shares the handle.
#[derive(Clone)]
pub struct Nic {
    pub(crate) inner: Arc<NicInner>,
}

impl std::fmt::Debug for Nic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nic")
            .field("cdm", &self.inner.cdm.id)
            .field("address", &self.inner.attach.nic_addr)
            .field("fma", &self.inner.attach.fma)
            .finish()
    }
}

impl Nic {
    /// This NIC's address (`local_addr` of `GNI_CdmAttach`: the physical PE).
    pub fn address(&self) -> u32 {
        self.inner.attach.nic_addr
    }

    /// The device minor.
    pub fn device_id(&self) -> u32 {
        self.inner.attach.device_id
    }

    /// What kgni answered to the attach (FMA descriptor, window size, the job's NTT group).
    pub fn attach_info(&self) -> &AttachInfo {
        &self.inner.attach
    }

    /// The CDM's instance id.
    pub fn inst_id(&self) -> u32 {
        self.inner.cdm.inst_id
    }

    /// The CDM's protection tag.
    pub fn ptag(&self) -> u8 {
        self.inner.cdm.ptag
    }

    /// The CDM's modes.
    pub fn modes(&self) -> CdmMode {
        self.inner.cdm.modes
    }

    /// The process's address space (what `GNI_MemRegister` addresses name).
    pub fn space(&self) -> &UserSpace {
        self.inner.client.space()
    }

    /// Whether the process's own memory can be registered: a node hosted in this process.
    /// Then `GNI_MemRegister` ([`Nic::mem_register`]) of any mapped address of the process
    /// works, and FMA and BTE transfers read and write that memory directly.
    pub fn process_memory(&self) -> bool {
        self.space().process_memory()
    }

    /// The caller's own memory `[va, va + len)` as a buffer of the process, pinned while the
    /// returned handle lives (its accessors read and write the caller's memory). The NIC
    /// writes a registered buffer whenever a transfer targets it: the caller keeps it alive
    /// and reads it after the completion. `GNI_RC_INVALID_PARAM` when the range is not mapped
    /// or the NIC cannot reach process memory.
    pub fn attach_buffer(&self, va: u64, len: u64) -> Result<driver::mem::UserMemory> {
        Ok(self.space().attach(va, len)?)
    }

    /// The open kgni file.
    pub fn client(&self) -> &Arc<KgniClient> {
        &self.inner.client
    }

    /// Give the library the node assembly's progress hook (see [`super::wait`]); `None`
    /// removes it.
    pub fn set_progress(&self, hook: Option<ProgressHook>) {
        *self
            .inner
            .hook
            .write()
            .unwrap_or_else(PoisonError::into_inner) = hook;
    }

    /// Whether a thread with nothing to do may block until the NIC interrupts it (see
    /// `emu_core::engine::Progress::before_sleep`): without a hook the device is real
    /// hardware, which progresses by itself.
    pub fn before_sleep(&self) -> bool {
        self.inner.hook().is_none_or(|h| h.before_sleep())
    }

    /// Run one unit of device work through the progress hook (yield the CPU without one).
    /// Returns whether anything happened.
    pub fn progress(&self) -> bool {
        match self.inner.hook() {
            Some(h) => h.progress(),
            None => {
                std::thread::yield_now();
                false
            }
        }
    }

    /// Call `f` until it returns `Some`, letting the device progress in between
    /// ([`super::wait::poll_until`] with this NIC's hook).
    pub fn poll_until<T>(
        &self,
        timeout: Option<Duration>,
        f: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        let hook = self.inner.hook();
        poll_until(hook.as_ref(), timeout, f)
    }

    /// `GNI_SmsgSetDeliveryMode`: the delivery mode of SMSG messages (default `IN_ORDER`,
    /// our choice; credit updates always go in order).
    pub fn smsg_set_delivery_mode(&self, dlvr: DlvrMode) {
        self.inner.smsg_dlvr.store(dlvr.bits(), Ordering::Relaxed);
    }

    /// `GNI_SmsgSetMaxRetrans(nic, n)`: retransmission rounds of an SMSG endpoint without
    /// the peer releasing a message before a transaction error reaches the caller (default
    /// [`super::smsg::SMSG_MAX_RETRANS_DEFAULT`]).
    pub fn smsg_set_max_retrans(&self, n: u32) {
        self.inner.smsg_max_retrans.store(n, Ordering::Relaxed);
    }

    /// SMSG messages written again after transaction errors (`GNI_STAT_SMSG_RETRANS_COUNT`).
    pub fn smsg_retransmits(&self) -> u64 {
        self.inner.smsg_retransmits.load(Ordering::Relaxed)
    }

    /// The FMA descriptor's status word (`wc | rc << 16 | ssid << 32 | flags << 48`):
    /// outstanding requests and sequences (a diagnostic).
    pub fn fma_status(&self) -> Result<u64> {
        lock(&self.inner.fma).status()
    }
}
