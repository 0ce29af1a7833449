//! Completion queues (gemini.md §1.3): `GNI_CqCreate`, `GNI_CqGetEvent`,
//! `GNI_CqTestEvent`, `GNI_CqWaitEvent`, `GNI_CqDestroy`, `GNI_GetCompleted`,
//! `GNI_CqErrorStr`, `GNI_CqErrorRecoverable`, and the `gni_cq_get_*` accessors.
//!
//! The ring lives in host memory and is mapped by the process: an event is ready when its
//! slot's `source` is not 0; the library zeroes the slot, advances its read index and stores
//! it to `RD_INDEX` of the CQ's mapped alias page (docs/gemini-programming.md,
//! "Completion queues"). No driver call on this path.
//!
//! Overrun: an event that finds the ring full is lost; the NIC sets its sticky `OVERRUN`
//! flag and marks every entry it writes while the flag is set. [`Cq::get_event`] returns
//! such entries with `GNI_RC_ERROR_RESOURCE` (and `GNI_CQ_OVERRUN(cqe)` set), and when the
//! ring has been drained and the flag is set without any marked entry having been seen, it
//! reports `GNI_RC_ERROR_RESOURCE` once with an empty entry whose overrun bit is set.
//! Recovery is the documented one: drain the CQ, rescan what may have been missed (every
//! SMSG mailbox), then [`Cq::clear_overrun`]; later events are `GNI_RC_SUCCESS` again.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use driver::clock::Instant;

use driver::gemini::{CqId, CqInfo, Mapping, Request};
use driver::pci::Mmio;
use firmware_spec::gemini::cq::USER_READ_INDEX_OFFSET;
use firmware_spec::gemini::cqe::{Cqe, CqeSource, HwStatus};
use firmware_spec::gemini::gni::{CqEventType, CqMode, PostType, ReturnCode};
use firmware_spec::gemini::post::PostDescriptor;

use super::cdm::Nic;
use super::error::{GniError, Result};
use super::objects::{CqInner, CqState, PostBook};
use super::sync::lock;

/// `STATUS` of a CQ alias page: bit 0 `OVERRUN` (sticky, write 1 to clear), bits 32..63 the
/// lost-event count (docs/gemini-programming.md, ours).
pub const ALIAS_STATUS: u64 = 0x08;
/// `WR_INDEX` of a CQ alias page (read only; docs/gemini-programming.md, ours).
pub const ALIAS_WR_INDEX: u64 = 0x10;
/// `OVERRUN` bit of `STATUS`.
pub const STATUS_OVERRUN: u64 = 1;

/// One event taken from a CQ, with what `GNI_CqGetEvent` returned for it:
/// `GNI_RC_SUCCESS`, `GNI_RC_ERROR_RESOURCE` (events were lost before it) or
/// `GNI_RC_TRANSACTION_ERROR` (a network or protection error; the entry carries its info).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqEvent {
    /// The return code.
    pub rc: ReturnCode,
    /// The entry (`gni_cq_entry_t`).
    pub cqe: Cqe,
}

/// What `GNI_GetCompleted` gives for a POST event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    /// `GNI_RC_SUCCESS`, or `GNI_RC_TRANSACTION_ERROR` when the event reports an error.
    pub rc: ReturnCode,
    /// The descriptor that was posted, with `status` set to the event's hardware status.
    pub desc: PostDescriptor,
    /// The endpoint it was posted on.
    pub ep: u32,
    /// The token the post was made with (`Ep::post_fma_as`; 0 otherwise).
    pub user: u64,
}

impl Completed {
    /// [`error_str`] for the transaction handed back: its status is the descriptor's
    /// (`status`, set by `GNI_GetCompleted`), which is what failed even where the event
    /// itself reads OK (an error injected above the NIC, [`Cq::inject_post_errors`]).
    pub fn error_str(&self, e: &Cqe) -> String {
        describe(self.desc.status, e)
    }

    /// [`error_recoverable`] for the transaction handed back, by the descriptor's status.
    pub fn recoverable(&self) -> bool {
        u8::try_from(self.desc.status)
            .ok()
            .and_then(|s| HwStatus::try_from(s).ok())
            .is_some_and(HwStatus::recoverable)
    }
}

/// Events a polled CQ consumes before its read index is stored to `RD_INDEX` (an MMIO store
/// to the alias page): the NIC needs the read index only to know how much of the ring is
/// free. The ring is made [`RD_BATCH`] − 1 entries larger than asked for, so the NIC always
/// has room for `entry_count` unread events, as when every event is stored at once: batching
/// can never overrun a CQ. A blocking CQ's read index is stored before every wait (kgni
/// compares the indices to decide whether to sleep). CQs smaller than
/// [`RD_BATCH_MIN_ENTRIES`] store every event.
pub const RD_BATCH: u32 = 32;
/// The smallest CQ whose read-index stores are batched.
pub const RD_BATCH_MIN_ENTRIES: u32 = 512;

/// The read-index batch of a CQ of `entry_count` entries in `mode`.
fn rd_batch(entry_count: u32, _mode: CqMode) -> u32 {
    if entry_count < RD_BATCH_MIN_ENTRIES {
        1
    } else {
        RD_BATCH
    }
}

/// A completion queue (`gni_cq_handle_t`).
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq")
            .field("id", &self.inner.id)
            .field("entries", &self.inner.entries)
            .finish()
    }
}

impl Nic {
    /// `GNI_CqCreate(nic, entry_count, delay_count, mode)`: a CQ holding at least
    /// `entry_count` events. `delay_count` is the number of events before an interrupt
    /// (`BLOCKING` CQs). Handlers are not offered: poll with [`Cq::get_event`].
    pub fn cq_create(&self, entry_count: u32, delay_count: u32, mode: CqMode) -> Result<Cq> {
        let c = &self.inner.client;
        let batch = rd_batch(entry_count, mode);
        let info: CqInfo = c.cq_create(
            self.inner.cdm_id(),
            entry_count.saturating_add(batch - 1),
            delay_count,
            mode,
        )?;
        let ring = match c.mmap(info.ring) {
            Ok(Mapping::Memory(w)) => w,
            Ok(Mapping::Mmio(_)) => {
                let _ = c.request(Request::CqDestroy { cq: info.cq });
                return Err(GniError::state("CQ ring mapping is not memory"));
            }
            Err(e) => {
                let _ = c.request(Request::CqDestroy { cq: info.cq });
                return Err(e.into());
            }
        };
        let alias = match c.mmap(info.alias) {
            Ok(Mapping::Mmio(w)) => w,
            Ok(Mapping::Memory(_)) => {
                let _ = c.request(Request::CqDestroy { cq: info.cq });
                return Err(GniError::state("CQ alias mapping is not MMIO"));
            }
            Err(e) => {
                let _ = c.request(Request::CqDestroy { cq: info.cq });
                return Err(e.into());
            }
        };
        let inner = Arc::new(CqInner {
            nic: Arc::clone(&self.inner),
            id: info.cq.0,
            entries: info.ring_entries.max(1),
            batch: batch.min(info.ring_entries.max(1)),
            mode,
            ring,
            alias,
            st: Mutex::new(CqState {
                rd: 0,
                stored: 0,
                since_status: 0,
                reported: false,
                inject: 0,
            }),
            book: Mutex::new(PostBook::default()),
            destroyed: AtomicBool::new(false),
        });
        lock(&self.inner.cqs).insert(inner.id, Arc::downgrade(&inner));
        Ok(Cq { inner })
    }
}

impl Cq {
    /// The hardware CQ number (what `src_cq_hndl` of an RDMA post names).
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// Events the CQ holds before it overruns (what it was created with).
    pub fn capacity(&self) -> u32 {
        self.inner
            .entries
            .saturating_sub(1)
            .saturating_sub(self.inner.batch - 1)
    }

    /// The mode it was created with.
    pub fn mode(&self) -> CqMode {
        self.inner.mode
    }

    /// `GNI_CqGetEvent`: the next event, or `None` (`GNI_RC_NOT_DONE`) when there is none.
    /// See the module documentation for overrun. A recoverable transaction error of an
    /// SMSG endpoint's sequence is not returned: the library retransmits (module
    /// [`super::smsg`], `MBOX_AUTO_RETRANSMIT`) and returns the next event.
    pub fn get_event(&self) -> Result<Option<CqEvent>> {
        loop {
            let ev = self.next_event()?;
            let Some(ev) = ev else {
                self.inner.nic.smsg_flush_pending(self.inner.id)?;
                return Ok(None);
            };
            if ev.rc == ReturnCode::TransactionError
                && ev.cqe.event_type == CqEventType::Smsg.code() as u64
                && error_recoverable(&ev.cqe)
                && self.inner.nic.smsg_recover(self.inner.id, &ev.cqe)?
            {
                continue;
            }
            return Ok(Some(ev));
        }
    }

    fn next_event(&self) -> Result<Option<CqEvent>> {
        let q = &self.inner;
        let mut st = lock(&q.st);
        let at = 8 * u64::from(st.rd);
        let e = Cqe::from_u64(q.ring.load_u64_acquire(at)?);
        if !e.is_ready() {
            // An overrun with no marked entry behind it shows only in `STATUS`. The ring was
            // full when it happened: `entries - 1` events past the stored read index, of
            // which at most `batch - 1` were consumed before, and all the others since. So
            // with fewer consumed since `STATUS` was last read, nothing was lost since, and
            // the MMIO load is not needed.
            if st.since_status == 0 || st.since_status < self.capacity() {
                return Ok(None);
            }
            st.since_status = 0;
            let s = q.alias.read_u64(ALIAS_STATUS)?;
            if s & STATUS_OVERRUN != 0 && !st.reported {
                st.reported = true;
                let cqe = Cqe {
                    overrun: 1,
                    ..Cqe::default()
                };
                return Ok(Some(CqEvent {
                    rc: ReturnCode::ErrorResource,
                    cqe,
                }));
            }
            return Ok(None);
        }
        q.ring.store_u64_release(at, 0)?;
        st.rd = (st.rd + 1) % q.entries;
        st.since_status = st.since_status.saturating_add(1);
        if (st.rd + q.entries - st.stored) % q.entries >= q.batch {
            st.stored = st.rd;
            q.alias
                .write_u64(USER_READ_INDEX_OFFSET, u64::from(st.rd))?;
        }
        let rc = e.get_event_rc();
        if rc == ReturnCode::ErrorResource {
            st.reported = true;
        }
        Ok(Some(CqEvent { rc, cqe: e }))
    }

    /// `GNI_CqTestEvent`: whether an event is ready, without taking it.
    pub fn test_event(&self) -> Result<bool> {
        let q = &self.inner;
        let st = lock(&q.st);
        let e = Cqe::from_u64(q.ring.load_u64_acquire(8 * u64::from(st.rd))?);
        Ok(e.is_ready())
    }

    /// `GNI_CqWaitEvent(cq, timeout)`: the next event, blocking in kgni until the CQ's
    /// interrupt when none is there. `BLOCKING` CQs only (`GNI_RC_INVALID_PARAM` else);
    /// `GNI_RC_TIMEOUT` when `timeout` passes (`None`: for ever).
    pub fn wait_event(&self, timeout: Option<Duration>) -> Result<CqEvent> {
        if !self.inner.mode.contains(CqMode::BLOCKING) {
            return Err(GniError::param("GNI_CqWaitEvent needs a BLOCKING CQ"));
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut idle = 0u32;
        loop {
            if let Some(e) = self.get_event()? {
                return Ok(e);
            }
            self.store_read_index()?;
            let left = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(GniError::new(ReturnCode::Timeout, "no CQ event"));
                    }
                    Some(d - now)
                }
                None => None,
            };
            self.inner.nic.client.request(Request::CqWait {
                cq: CqId(self.inner.id),
                timeout: left,
            })?;
            // kgni also wakes up for an overrun flag that was already reported: do not
            // spin on it.
            idle += 1;
            if idle > 1 && self.overrun()?.0 {
                return Err(GniError::new(
                    ReturnCode::ErrorResource,
                    "the CQ overran and the overrun was not cleared",
                ));
            }
        }
    }

    /// Store the read index if batching left it behind: kgni's wait compares it with the
    /// NIC's write index.
    fn store_read_index(&self) -> Result<()> {
        let q = &self.inner;
        let mut st = lock(&q.st);
        if st.stored != st.rd {
            st.stored = st.rd;
            q.alias
                .write_u64(USER_READ_INDEX_OFFSET, u64::from(st.rd))?;
        }
        Ok(())
    }

    /// Block, while no event is waiting, until the CQ's interrupt (kgni's `CqWait`) or
    /// `limit`; consumes nothing. True if the thread slept. It does not sleep when an event
    /// already waits or the device needs the caller to make progress
    /// ([`Nic::before_sleep`]). `BLOCKING` CQs only (`GNI_RC_INVALID_PARAM` else).
    pub fn sleep(&self, limit: Duration) -> Result<bool> {
        if !self.inner.mode.contains(CqMode::BLOCKING) {
            return Err(GniError::param("only a BLOCKING CQ can be slept on"));
        }
        let nic = Nic {
            inner: Arc::clone(&self.inner.nic),
        };
        if !nic.before_sleep() || self.test_event()? {
            return Ok(false);
        }
        self.store_read_index()?;
        let r = self.inner.nic.client.request(Request::CqWait {
            cq: CqId(self.inner.id),
            timeout: Some(limit),
        });
        match r.map_err(GniError::from) {
            Ok(_) => Ok(true),
            Err(e) if e.rc() == ReturnCode::Timeout => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Wait for the next event by polling, letting the device progress through the NIC's
    /// progress hook: any CQ, either engine (ours; `GNI_CqWaitEvent` is [`Cq::wait_event`]).
    pub fn poll_event(&self, timeout: Option<Duration>) -> Result<CqEvent> {
        let nic = Nic {
            inner: Arc::clone(&self.inner.nic),
        };
        nic.poll_until(timeout, || self.get_event())
    }

    /// `(overrun flag, events lost)` from the CQ's `STATUS` register.
    pub fn overrun(&self) -> Result<(bool, u64)> {
        let s = self.inner.alias.read_u64(ALIAS_STATUS)?;
        Ok((s & STATUS_OVERRUN != 0, s >> 32))
    }

    /// End overrun recovery (after draining the CQ and rescanning what may have been
    /// missed): clear the sticky flag; later events are `GNI_RC_SUCCESS` again.
    pub fn clear_overrun(&self) -> Result<()> {
        let mut st = lock(&self.inner.st);
        self.inner.alias.write_u64(ALIAS_STATUS, STATUS_OVERRUN)?;
        st.reported = false;
        st.since_status = 0;
        Ok(())
    }

    /// `GNI_GetCompleted(cq, event, &desc)`: the descriptor a POST event completes.
    ///
    /// FMA events (sources `SSID_*`) carry the post's transaction id and name it exactly.
    /// RDMA (BTE) events carry only the event data (the endpoint's local or global event
    /// data): the oldest RDMA post on this CQ expecting that event with that data is
    /// completed, as uGNI pops the head of the endpoint's queue. Posts spread over several
    /// BTE channels may finish out of order; `GNI_CDM_MODE_BTE_SINGLE_CHANNEL` keeps one
    /// channel. `GNI_RC_DESCRIPTOR_ERROR` when no post matches.
    pub fn get_completed(&self, cqe: &Cqe) -> Result<Completed> {
        if cqe.event_type() != Ok(CqEventType::Post) {
            return Err(GniError::param("GNI_GetCompleted needs a POST event"));
        }
        let source = cqe
            .source()
            .map_err(|_| GniError::new(ReturnCode::DescriptorError, "event has no source"))?;
        let mut book = lock(&self.inner.book);
        let (mut desc, ep, user) = if source == CqeSource::Bte {
            let data = cqe.inst_id();
            let pos = book
                .rdma
                .iter()
                .position(|p| p.local == Some(data) || p.global == Some(data))
                .ok_or(GniError::new(
                    ReturnCode::DescriptorError,
                    "no RDMA post waits for this event",
                ))?;
            let p = &mut book.rdma[pos];
            if p.local == Some(data) {
                p.local = None;
            } else {
                p.global = None;
            }
            let out = (p.desc, p.ep, p.user);
            if p.local.is_none() && p.global.is_none() {
                book.rdma.remove(pos);
            }
            out
        } else if source.is_ssid() {
            let p = book.fma.remove(&cqe.tid()).ok_or(GniError::new(
                ReturnCode::DescriptorError,
                "no FMA post with this transaction id",
            ))?;
            (p.desc, p.ep, p.user)
        } else {
            return Err(GniError::new(
                ReturnCode::DescriptorError,
                "a remote event completes no local post",
            ));
        };
        drop(book);
        desc.status = cqe.status;
        let mut rc = if cqe.status_ok() {
            ReturnCode::Success
        } else {
            ReturnCode::TransactionError
        };
        let put_or_get = matches!(
            desc.post_type,
            PostType::FmaPut | PostType::FmaGet | PostType::RdmaPut | PostType::RdmaGet
        );
        let mut st = lock(&self.inner.st);
        if rc == ReturnCode::Success && put_or_get && st.inject > 0 {
            st.inject -= 1;
            rc = ReturnCode::TransactionError;
            desc.status = u64::from(HwStatus::RequestTimeout.code());
        }
        Ok(Completed { rc, desc, ep, user })
    }

    /// Error injection above the NIC (ours, after the libfabric GNI provider's
    /// `GNI_ERR_INJECT_COUNT` domain op, which hands transmit descriptors back with
    /// `GNI_RC_TRANSACTION_ERROR`): the next `count` PUT or GET posts that complete on this
    /// CQ are reported by [`Cq::get_completed`] as failed with `REQUEST_TIMEOUT` although
    /// they succeeded, so that a caller's recovery (re-posting) can be tested.
    pub fn inject_post_errors(&self, count: u32) {
        lock(&self.inner.st).inject = count;
    }

    /// Posts whose completion events are still awaited (diagnostic).
    pub fn outstanding_posts(&self) -> usize {
        let b = lock(&self.inner.book);
        b.fma.len() + b.rdma.len()
    }

    /// `GNI_CqDestroy`: `GNI_RC_ERROR_RESOURCE` while an endpoint uses it; a registration
    /// that names it as its destination CQ loses it (remote events into the region stop).
    pub fn destroy(self) -> Result<()> {
        self.inner.destroy()
    }

    /// [`Cq::destroy`] through a shared reference: on `GNI_RC_ERROR_RESOURCE` the CQ stays
    /// usable (a C handle keeps naming it); after success every use fails.
    pub fn try_destroy(&self) -> Result<()> {
        self.inner.destroy()
    }
}

/// `GNI_CQ_GET_TYPE`.
pub fn get_type(e: &Cqe) -> Option<CqEventType> {
    e.event_type().ok()
}

/// `GNI_CQ_GET_INST_ID` (32 bits on Gemini).
pub fn get_inst_id(e: &Cqe) -> u32 {
    e.inst_id()
}

/// `GNI_CQ_GET_REM_INST_ID`: on a remote event, the initiator's event data (by default its
/// instance id); the same bits as [`get_inst_id`].
pub fn get_rem_inst_id(e: &Cqe) -> u32 {
    e.inst_id()
}

/// `GNI_CQ_GET_MSG_ID`: the `msg_id` of an SMSG send's local event.
pub fn get_msg_id(e: &Cqe) -> u32 {
    e.msg_id()
}

/// `GNI_CQ_GET_DATA`: the 48-bit payload (a CQ write's value).
pub fn get_data(e: &Cqe) -> u64 {
    e.data()
}

/// `GNI_CQ_GET_SOURCE`.
pub fn get_source(e: &Cqe) -> Option<CqeSource> {
    e.source().ok()
}

/// `GNI_CQ_GET_STATUS`: the hardware status (0 = OK).
pub fn get_status(e: &Cqe) -> u64 {
    e.status
}

/// `GNI_CQ_GET_TID`: the transaction id (FMA posts of this library).
pub fn get_tid(e: &Cqe) -> u16 {
    e.tid()
}

/// `GNI_CQ_OVERRUN`: events were lost before this one.
pub fn overrun(e: &Cqe) -> bool {
    e.overrun != 0
}

/// `GNI_CQ_REM_OVERRUN`: the remote CQ of this transaction overran.
pub fn rem_overrun(e: &Cqe) -> bool {
    e.rem_overrun != 0
}

/// `GNI_CQ_STATUS_OK`.
pub fn status_ok(e: &Cqe) -> bool {
    e.status_ok()
}

fn status_name(s: HwStatus) -> &'static str {
    match s {
        HwStatus::Ok => "OK",
        HwStatus::UncorrectableErr => "UNCORRECTABLE_ERR",
        HwStatus::InvCmd => "INV_CMD",
        HwStatus::UncorrectableTranslationErr => "UNCORRECTABLE_TRANSLATION_ERR",
        HwStatus::VmdhInv => "VMDH_INV",
        HwStatus::MddInv => "MDD_INV",
        HwStatus::ProtectionViolation => "PROTECTION_VIOLATION",
        HwStatus::MemBoundsErr => "MEM_BOUNDS_ERR",
        HwStatus::SequenceTerminate => "SEQUENCE_TERMINATE",
        HwStatus::RequestTimeout => "REQUEST_TIMEOUT",
        HwStatus::HtDataError => "HT_DATA_ERROR",
    }
}

/// `GNI_CqErrorStr`: a readable description of an event's error.
pub fn error_str(e: &Cqe) -> String {
    describe(e.status, e)
}

/// Transaction status `status` (a hardware status code), with the source and overrun flags
/// of event `e`.
fn describe(status: u64, e: &Cqe) -> String {
    let status = match u8::try_from(status).ok().map(HwStatus::try_from) {
        Some(Ok(s)) => status_name(s).to_string(),
        _ => format!("UNKNOWN({status:#x})"),
    };
    let source = match e.source() {
        Ok(s) => format!("{s:?}"),
        Err(_) => "none".to_string(),
    };
    let mut s = format!("status {status}, source {source}");
    if overrun(e) {
        s.push_str(", overrun");
    }
    if rem_overrun(e) {
        s.push_str(", remote overrun");
    }
    s
}

/// `GNI_CqErrorRecoverable`: whether the failed transaction may be retried.
pub fn error_recoverable(e: &Cqe) -> bool {
    e.status().is_ok_and(HwStatus::recoverable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors_read_the_documented_fields() {
        let mut e = Cqe::from_hw(
            CqeSource::SsidSreq,
            HwStatus::RequestTimeout,
            Cqe::sw(CqEventType::Post, 7 << 32 | 42)
                .sw_data56()
                .unwrap(),
        );
        assert_eq!(get_type(&e), Some(CqEventType::Post));
        assert_eq!(get_inst_id(&e), 42);
        assert_eq!(get_tid(&e), 7);
        assert_eq!(get_source(&e), Some(CqeSource::SsidSreq));
        assert!(!status_ok(&e));
        assert!(error_recoverable(&e));
        assert_eq!(error_str(&e), "status REQUEST_TIMEOUT, source SsidSreq");
        e.overrun = 1;
        e.status = HwStatus::ProtectionViolation.code().into();
        assert!(overrun(&e) && !error_recoverable(&e));
        assert!(error_str(&e).ends_with(", overrun"));
    }

    #[test]
    fn a_completed_post_is_described_by_its_descriptor_status() {
        // The event reads OK; the descriptor handed back failed (an injected error).
        let ok = Cqe::from_hw(
            CqeSource::Bte,
            HwStatus::Ok,
            Cqe::sw(CqEventType::Post, 1).sw_data56().unwrap(),
        );
        let mut c = Completed {
            rc: ReturnCode::TransactionError,
            desc: PostDescriptor::new(PostType::RdmaGet),
            ep: 0,
            user: 0,
        };
        c.desc.status = HwStatus::RequestTimeout.code().into();
        assert_eq!(c.error_str(&ok), "status REQUEST_TIMEOUT, source Bte");
        assert!(c.recoverable());
        c.desc.status = HwStatus::MddInv.code().into();
        assert_eq!(c.error_str(&ok), "status MDD_INV, source Bte");
        assert!(!c.recoverable());
        c.desc.status = 0x3ff;
        assert_eq!(c.error_str(&ok), "status UNKNOWN(0x3ff), source Bte");
    }
}
