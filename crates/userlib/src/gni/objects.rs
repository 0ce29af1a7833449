//! The shared state of an attached CDM and of the objects made under it: the NIC
//! ([`NicInner`]), its completion queues ([`CqInner`], with the posts each will report) and
//! endpoints ([`EpInner`]). They refer to one another (an object keeps its NIC alive; the NIC
//! finds its CQs by id and its SMSG endpoints for retransmission), so their definitions stand
//! together here, below every module that gives them behaviour (`cdm`, `cq`, `ep`, `post`,
//! `smsg`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use driver::gemini::hw::MmioWindow;
use driver::gemini::{AttachInfo, CdmId, CqId, EpId, KgniClient, Request};
use driver::mem::MemWindow;
use firmware_spec::gemini::gni::{CdmMode, CqMode, DlvrMode};
use firmware_spec::gemini::post::PostDescriptor;

use super::error::{GniError, Result};
use super::fma::Fma;
use super::smsg::mailbox::Smsg;
use super::sync::lock;
use super::wait::ProgressHook;

/// The kgni CDM and what it was created with.
pub(crate) struct CdmCore {
    pub(crate) client: Arc<KgniClient>,
    pub(crate) id: CdmId,
    pub(crate) inst_id: u32,
    pub(crate) ptag: u8,
    pub(crate) cookie: u32,
    pub(crate) modes: CdmMode,
    pub(crate) destroyed: AtomicBool,
}

impl CdmCore {
    pub(crate) fn destroy(&self) -> Result<()> {
        if self.destroyed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.client.request(Request::CdmDestroy { cdm: self.id })?;
        Ok(())
    }
}

impl Drop for CdmCore {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::debug!(cdm = self.id.0, error = %e, "gni: CdmDestroy on drop");
        }
    }
}

/// The state of an attached CDM, shared by every object made under it.
pub(crate) struct NicInner {
    pub(crate) cdm: Arc<CdmCore>,
    pub(crate) client: Arc<KgniClient>,
    pub(crate) attach: AttachInfo,
    pub(crate) fma: Mutex<Fma>,
    pub(crate) hook: RwLock<Option<ProgressHook>>,
    pub(crate) cqs: Mutex<HashMap<u32, Weak<CqInner>>>,
    pub(crate) dgram_ids: Mutex<HashMap<u64, EpId>>,
    pub(crate) smsg_dlvr: AtomicU16,
    /// Endpoints with SMSG initialized (retransmission, `smsg`).
    pub(crate) smsg_eps: Mutex<Vec<Weak<EpInner>>>,
    /// `GNI_SmsgSetMaxRetrans`.
    pub(crate) smsg_max_retrans: AtomicU32,
    /// SMSG messages written again (`GNI_STAT_SMSG_RETRANS_COUNT`).
    pub(crate) smsg_retransmits: AtomicU64,
    /// A retransmission round waits for FMA sequences.
    pub(crate) smsg_pending: AtomicBool,
}

impl NicInner {
    pub(crate) fn cdm_id(&self) -> CdmId {
        self.cdm.id
    }

    pub(crate) fn modes(&self) -> CdmMode {
        self.cdm.modes
    }

    /// The progress hook: the one set with [`Nic::set_progress`](crate::gni::Nic::set_progress), else the kgni device's own
    /// (`Kgni::progress`, which follows the engine the node assembly reported).
    pub(crate) fn hook(&self) -> Option<ProgressHook> {
        let set = self
            .hook
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Some(set.unwrap_or_else(|| Arc::clone(self.client.device()) as ProgressHook))
    }

    pub(crate) fn smsg_dlvr(&self) -> DlvrMode {
        DlvrMode(self.smsg_dlvr.load(Ordering::Relaxed))
    }

    pub(crate) fn cq_by_id(&self, id: u32) -> Option<Arc<CqInner>> {
        lock(&self.cqs).get(&id).and_then(Weak::upgrade)
    }

    /// Make `cq` the CDM's FMA descriptor's CQ; `fma` is that descriptor, locked (see
    /// [`Fma::ensure_cq`]).
    pub(crate) fn fma_cq(&self, fma: &mut Fma, cq: u32) -> Result<()> {
        fma.ensure_cq(&self.client, self.cdm_id(), || self.hook(), cq)
    }
}

/// An FMA post waiting for its local event.
pub(crate) struct Pending {
    pub(crate) desc: PostDescriptor,
    pub(crate) ep: u32,
    pub(crate) user: u64,
}

/// An RDMA post waiting for its local and/or global event, with the event data each
/// carries.
pub(crate) struct RdmaPending {
    pub(crate) seq: u64,
    pub(crate) desc: PostDescriptor,
    pub(crate) ep: u32,
    pub(crate) user: u64,
    pub(crate) local: Option<u32>,
    pub(crate) global: Option<u32>,
}

/// The posts whose completions this CQ will report (for `GetCompleted`).
#[derive(Default)]
pub(crate) struct PostBook {
    /// FMA posts by transaction id (the `tid` of their event).
    pub(crate) fma: HashMap<u16, Pending>,
    /// RDMA posts in post order.
    pub(crate) rdma: VecDeque<RdmaPending>,
    pub(crate) next_seq: u64,
}

pub(crate) struct CqState {
    pub(crate) rd: u32,
    /// The read index last stored to `RD_INDEX`.
    pub(crate) stored: u32,
    /// Events consumed since `STATUS` was last read: an overrun since then needs a full
    /// ring's worth of them (see [`Cq::get_event`](crate::gni::Cq::get_event)).
    pub(crate) since_status: u32,
    /// The current overrun was reported.
    pub(crate) reported: bool,
    /// PUT/GET completions still to be reported as transaction errors
    /// ([`Cq::inject_post_errors`](crate::gni::Cq::inject_post_errors)).
    pub(crate) inject: u32,
}

pub(crate) struct CqInner {
    pub(crate) nic: Arc<NicInner>,
    pub(crate) id: u32,
    pub(crate) entries: u32,
    /// Read-index stores are made every this many events ([`RD_BATCH`](crate::gni::cq::RD_BATCH)).
    pub(crate) batch: u32,
    pub(crate) mode: CqMode,
    pub(crate) ring: MemWindow,
    pub(crate) alias: Arc<MmioWindow>,
    pub(crate) st: Mutex<CqState>,
    pub(crate) book: Mutex<PostBook>,
    pub(crate) destroyed: AtomicBool,
}

impl CqInner {
    pub(crate) fn destroy(&self) -> Result<()> {
        if self.destroyed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.nic
            .client
            .request(Request::CqDestroy { cq: CqId(self.id) })?;
        self.destroyed.store(true, Ordering::Release);
        lock(&self.nic.cqs).remove(&self.id);
        Ok(())
    }
}

impl Drop for CqInner {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::debug!(cq = self.id, error = %e, "gni: CqDestroy on drop");
        }
    }
}

/// What `EpBind` set and what events carry.
pub(crate) struct EpState {
    /// `(remote_addr, remote_id)` once bound.
    pub(crate) bound: Option<(u32, u32)>,
    /// Data of local events (`None`: the peer's instance id).
    pub(crate) ev_local: Option<u32>,
    /// Data of global and remote events (default: this CDM's instance id).
    pub(crate) ev_remote: u32,
    /// SMSG state, after `SmsgInit`.
    pub(crate) smsg: Option<Smsg>,
}

impl EpState {
    /// `(pe, local event data, remote event data)` of a bound endpoint.
    pub(crate) fn peer(&self) -> Result<(u32, u32, u32)> {
        let (addr, id) = self
            .bound
            .ok_or(GniError::state("the endpoint is not bound"))?;
        Ok((addr, self.ev_local.unwrap_or(id), self.ev_remote))
    }
}

pub(crate) struct EpInner {
    pub(crate) nic: Arc<NicInner>,
    pub(crate) id: EpId,
    pub(crate) cq: Option<Arc<CqInner>>,
    pub(crate) st: Mutex<EpState>,
    pub(crate) destroyed: AtomicBool,
}

impl EpInner {
    pub(crate) fn destroy(&self) -> Result<()> {
        if self.destroyed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.nic
            .client
            .request(Request::EpDestroy { ep: self.id })?;
        self.destroyed.store(true, Ordering::Release);
        lock(&self.nic.dgram_ids).retain(|_, e| *e != self.id);
        Ok(())
    }
}

impl Drop for EpInner {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            tracing::debug!(ep = self.id.0, error = %e, "gni: EpDestroy on drop");
        }
    }
}
