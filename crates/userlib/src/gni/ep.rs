//! Endpoints and datagrams (gemini.md §1.5): `GNI_EpCreate`, `GNI_EpBind`, `GNI_EpUnbind`,
//! `GNI_EpDestroy`, `GNI_EpSetEventData`, and the kgni datagrams used to set up connections
//! (`GNI_EpPostData[WId]`, `Test[ById]`, `Wait[ById]`, `Probe[ById]`, `Cancel[ById]`).
//!
//! An endpoint is created unbound (it can only exchange datagrams); binding it to a peer's
//! NIC address and instance id enables FMA, RDMA and SMSG. Datagram matching is kgni's
//! business: a bound datagram goes to its peer, a datagram posted with an id on an unbound
//! endpoint listens for any peer's bound datagram; an exchange swaps both payloads
//! (≤ 128 bytes each).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use driver::gemini::{DatagramResult, EpId, KgniError, Request, Response};
use firmware_spec::gemini::gni::{PostState, ReturnCode};
use firmware_spec::gemini::limits;

use super::cdm::Nic;
use super::cq::Cq;
use super::error::{GniError, Result};
use super::objects::{CqInner, EpInner, EpState};
use super::sync::lock;

/// An endpoint (`gni_ep_handle_t`).
pub struct Ep {
    pub(crate) inner: Arc<EpInner>,
}

impl std::fmt::Debug for Ep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ep")
            .field("id", &self.inner.id)
            .field("bound", &lock(&self.inner.st).bound)
            .finish()
    }
}

fn datagram(r: Response) -> Result<DatagramResult> {
    match r {
        Response::Datagram(d) => Ok(d),
        _ => Err(GniError::state(
            "unexpected kgni answer to a datagram request",
        )),
    }
}

/// `Ok(None)` for kgni's "not done".
fn not_done_to_none<T>(r: std::result::Result<T, KgniError>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(KgniError::NotDone) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl Nic {
    /// `GNI_EpCreate(nic, src_cq)`: an unbound endpoint whose posts report to `cq`.
    pub fn ep_create(&self, cq: Option<&Cq>) -> Result<Ep> {
        let id = self.inner.client.ep_create(
            self.inner.cdm_id(),
            cq.map(|c| driver::gemini::CqId(c.id())),
        )?;
        Ok(Ep {
            inner: Arc::new(EpInner {
                nic: Arc::clone(&self.inner),
                id,
                cq: cq.map(|c| Arc::clone(&c.inner)),
                st: Mutex::new(EpState {
                    bound: None,
                    ev_local: None,
                    ev_remote: self.inst_id(),
                    smsg: None,
                }),
                destroyed: AtomicBool::new(false),
            }),
        })
    }

    /// `GNI_EpPostDataTestById`: the finished exchange of the datagram posted with `id`, or
    /// `None` (`GNI_RC_NOT_DONE`) while it is pending.
    pub fn post_data_test_by_id(&self, id: u64) -> Result<Option<DatagramResult>> {
        let r = not_done_to_none(self.inner.client.request(Request::PostDataTestById {
            cdm: self.inner.cdm_id(),
            id,
        }))?;
        match r {
            Some(r) => {
                lock(&self.inner.dgram_ids).remove(&id);
                datagram(r).map(Some)
            }
            None => Ok(None),
        }
    }

    /// `GNI_EpPostDataWaitById`: wait up to `timeout` for the datagram posted with `id`.
    pub fn post_data_wait_by_id(
        &self,
        id: u64,
        timeout: Option<Duration>,
    ) -> Result<DatagramResult> {
        let ep = lock(&self.inner.dgram_ids)
            .get(&id)
            .copied()
            .ok_or(GniError::param("no datagram posted with this id"))?;
        let r = self.inner.client.post_data_wait(ep, timeout)?;
        lock(&self.inner.dgram_ids).remove(&id);
        Ok(r)
    }

    /// `GNI_PostDataProbe`: `(remote_addr, remote_id)` of a finished exchange not yet
    /// collected; `GNI_RC_NO_MATCH` when there is none.
    pub fn post_data_probe(&self) -> Result<(u32, u32)> {
        match self.inner.client.request(Request::PostDataProbe {
            cdm: self.inner.cdm_id(),
        })? {
            Response::Probe {
                remote_addr,
                remote_id,
            } => Ok((remote_addr, remote_id)),
            _ => Err(GniError::state("unexpected kgni answer to a probe")),
        }
    }

    /// `GNI_PostDataProbeById`: the id of a finished exchange not yet collected;
    /// `GNI_RC_NO_MATCH` when there is none.
    pub fn post_data_probe_by_id(&self) -> Result<u64> {
        match self.inner.client.request(Request::PostDataProbeById {
            cdm: self.inner.cdm_id(),
        })? {
            Response::ProbeId(id) => Ok(id),
            _ => Err(GniError::state("unexpected kgni answer to a probe")),
        }
    }

    /// `GNI_EpPostDataCancelById`.
    pub fn post_data_cancel_by_id(&self, id: u64) -> Result<DatagramResult> {
        let r = datagram(self.inner.client.request(Request::PostDataCancelById {
            cdm: self.inner.cdm_id(),
            id,
        })?)?;
        lock(&self.inner.dgram_ids).remove(&id);
        Ok(r)
    }
}

impl Ep {
    /// The kgni endpoint handle.
    pub fn id(&self) -> EpId {
        self.inner.id
    }

    /// The NIC handle the endpoint was made on.
    pub fn nic(&self) -> Nic {
        Nic {
            inner: Arc::clone(&self.inner.nic),
        }
    }

    /// `(remote_addr, remote_id)` once bound.
    pub fn remote(&self) -> Option<(u32, u32)> {
        lock(&self.inner.st).bound
    }

    /// `GNI_EpBind(ep, remote_addr, remote_id)`: `remote_addr` is the peer NIC's address
    /// (its logical PE when the job has an NTT, else its physical PE), `remote_id` its
    /// instance id. `GNI_RC_INVALID_STATE` if already bound.
    pub fn bind(&self, remote_addr: u32, remote_id: u32) -> Result<()> {
        let mut st = lock(&self.inner.st);
        if st.bound.is_some() {
            return Err(GniError::state("the endpoint is already bound"));
        }
        self.inner
            .nic
            .client
            .ep_bind(self.inner.id, remote_addr, remote_id)?;
        st.bound = Some((remote_addr, remote_id));
        Ok(())
    }

    /// `GNI_EpUnbind`: `GNI_RC_NOT_DONE` while a datagram is outstanding. Frees the SMSG
    /// state.
    pub fn unbind(&self) -> Result<()> {
        let mut st = lock(&self.inner.st);
        self.inner
            .nic
            .client
            .request(Request::EpUnbind { ep: self.inner.id })?;
        st.bound = None;
        st.smsg = None;
        Ok(())
    }

    /// `GNI_EpSetEventData(ep, local_event, remote_event)`: the data local events carry
    /// (default: the peer's instance id) and global and remote events carry (default: this
    /// CDM's instance id).
    pub fn set_event_data(&self, local: u32, remote: u32) -> Result<()> {
        let mut st = lock(&self.inner.st);
        self.inner.nic.client.request(Request::EpSetEventData {
            ep: self.inner.id,
            local,
            remote,
        })?;
        st.ev_local = Some(local);
        st.ev_remote = remote;
        Ok(())
    }

    fn post(&self, id: Option<u64>, data: &[u8], out_len: usize) -> Result<()> {
        if data.len() as u64 > limits::DATAGRAM_MAX_SIZE
            || out_len as u64 > limits::DATAGRAM_MAX_SIZE
        {
            return Err(GniError::param("datagrams carry at most 128 bytes"));
        }
        self.inner
            .nic
            .client
            .post_data(self.inner.id, id, data, out_len)?;
        if let Some(id) = id {
            lock(&self.inner.nic.dgram_ids).insert(id, self.inner.id);
        }
        Ok(())
    }

    /// `GNI_EpPostData(ep, in, out_len)` on a bound endpoint: send `data` to the peer and
    /// accept up to `out_len` bytes back. `GNI_RC_ERROR_RESOURCE` with one outstanding.
    pub fn post_data(&self, data: &[u8], out_len: usize) -> Result<()> {
        self.post(None, data, out_len)
    }

    /// `GNI_EpPostDataWId`: like [`Ep::post_data`] with an id (`u64::MAX` is invalid). On an
    /// unbound endpoint it listens for any peer (a wildcard).
    pub fn post_data_w_id(&self, id: u64, data: &[u8], out_len: usize) -> Result<()> {
        if id == u64::MAX {
            return Err(GniError::param("datagram id -1 is invalid"));
        }
        self.post(Some(id), data, out_len)
    }

    fn collected(&self, r: DatagramResult) -> DatagramResult {
        if let Some(id) = r.id {
            lock(&self.inner.nic.dgram_ids).remove(&id);
        }
        r
    }

    /// `GNI_EpPostDataTest`: the finished exchange, or `None` (`GNI_RC_NOT_DONE`) while
    /// pending.
    pub fn post_data_test(&self) -> Result<Option<DatagramResult>> {
        let r = not_done_to_none(self.inner.nic.client.post_data_test(self.inner.id))?;
        Ok(r.map(|r| self.collected(r)))
    }

    /// `GNI_EpPostDataWait`: wait up to `timeout` (`None`: for ever) for the exchange;
    /// `GNI_RC_TIMEOUT` when it passes.
    pub fn post_data_wait(&self, timeout: Option<Duration>) -> Result<DatagramResult> {
        let r = self
            .inner
            .nic
            .client
            .post_data_wait(self.inner.id, timeout)?;
        Ok(self.collected(r))
    }

    /// `GNI_EpPostDataCancel`: withdraw the outstanding datagram (state `TERMINATED` if it
    /// had not completed).
    pub fn post_data_cancel(&self) -> Result<DatagramResult> {
        let r = datagram(
            self.inner
                .nic
                .client
                .request(Request::PostDataCancel { ep: self.inner.id })?,
        )?;
        Ok(self.collected(r))
    }

    /// `GNI_EpDestroy`.
    pub fn destroy(self) -> Result<()> {
        self.inner.destroy()
    }

    /// [`Ep::destroy`] through a shared reference (for a C handle); every later use fails.
    pub fn try_destroy(&self) -> Result<()> {
        self.inner.destroy()
    }

    /// The endpoint's CQ, required for local events.
    pub(crate) fn cq(&self) -> Result<&Arc<CqInner>> {
        self.inner
            .cq
            .as_ref()
            .ok_or(GniError::param("local events need an endpoint CQ"))
    }
}

/// Whether a datagram exchange completed.
pub fn completed(r: &DatagramResult) -> bool {
    r.state == PostState::Completed
}

/// The return code of a datagram outcome (`SUCCESS` when completed).
pub fn datagram_rc(r: &DatagramResult) -> ReturnCode {
    match r.state {
        PostState::Completed | PostState::RemoteData => ReturnCode::Success,
        PostState::Pending => ReturnCode::NotDone,
        PostState::Timeout => ReturnCode::Timeout,
        PostState::Terminated | PostState::Error => ReturnCode::TransactionError,
    }
}
