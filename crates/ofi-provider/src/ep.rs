//! RDM endpoints: one cxi transport each (hardware tag matching on its receive PtlTE, IDC up
//! to 192 B, eager DMA up to `FI_CXI_RDZV_THRESHOLD`, rendezvous above; docs/mpi-cxi.md),
//! with libfabric's tags, `fi_addr_t`s and completions on top.
//!
//! The transport names peers by rank: this endpoint is rank 0 (a one-rank job), and the
//! address vector's entries become ranks as they are learnt ([`CxiTransport::add_peer`]).

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use pmi::Pmi;
use transport::Env;
use transport::cxi::CxiTransport;
use transport::{Completion, MatchSpec, OpId, Rank, SendMode, Transport};

use crate::av::{ADDR_LEN, Av};
use crate::cq::{Cq, Entry, ErrEntry};
use crate::error::{Error, Result};
use crate::ffi::mem::UserBuf;
use crate::ffi::types::{
    FI_ADDR_NOTAVAIL, FI_ADDR_UNSPEC, FI_DIRECTED_RECV, FI_ECANCELED, FI_EOTHER, FI_ETRUNC, FI_MSG,
    FI_RECV, FI_REMOTE_CQ_DATA, FI_SEND, FI_TAGGED,
};
use crate::nic::Nic;
use crate::wire;

mod counters;
mod idle;
mod peek;
pub use peek::Peek;

/// The largest message (`ep_attr->max_msg_size`): staging and receive buffers come from the
/// emulated node's memory ([`crate::nic::node_memory`]) in power-of-two sizes. Longer sends
/// and receives fail with `-FI_EMSGSIZE`.
pub const MAX_MSG_SIZE: usize = 4 << 20;
/// `tx_attr->inject_size`: what fits in one IDC command (docs/mpi-cxi.md).
pub const INJECT_SIZE: usize = 192;

/// A one-rank PMI: the endpoint publishes only to itself.
struct Solo(HashMap<String, Vec<u8>>);

impl Pmi for Solo {
    fn rank(&self) -> u32 {
        0
    }
    fn size(&self) -> u32 {
        1
    }
    fn local(&self) -> (u32, u32) {
        (1, 0)
    }
    fn put(&mut self, key: &str, value: &[u8]) -> pmi::Result<()> {
        self.0.insert(key.to_owned(), value.to_vec());
        Ok(())
    }
    fn fence(&mut self) -> pmi::Result<()> {
        Ok(())
    }
    fn get(&mut self, rank: u32, key: &str) -> pmi::Result<Vec<u8>> {
        match (rank, self.0.get(key)) {
            (0, Some(v)) => Ok(v.clone()),
            _ => Err(pmi::Error::Failed(format!("no value {key} of rank {rank}"))),
        }
    }
    fn abort(&self, _why: &str) {}
    fn aborted(&self) -> Option<String> {
        None
    }
}

/// What an operation in flight reports when it ends.
struct Op {
    context: usize,
    tagged: bool,
    /// Generate a completion (not for injects, nor without `FI_COMPLETION` under selective
    /// completion).
    report: bool,
    /// The receive buffer; `None` for sends.
    recv: Option<UserBuf>,
}

pub(crate) struct State {
    pub(crate) t: CxiTransport,
    av: Option<Arc<Av>>,
    /// AV entries already made transport peers.
    synced: usize,
    /// Transport rank of each AV index.
    rank_of: Vec<Rank>,
    /// First AV index of each rank.
    addr_of: HashMap<Rank, u64>,
    ops: BTreeMap<OpId, Op>,
    pub(crate) tx_cq: Option<Arc<Cq>>,
    pub(crate) rx_cq: Option<Arc<Cq>>,
    pub(crate) tx_selective: bool,
    rx_selective: bool,
    enabled: bool,
    /// A transport failure already reported on the CQs.
    failed: bool,
    /// Counters bound to the endpoint (`counters`).
    cntrs: crate::cntr::Bound,
    /// Messages claimed with `FI_PEEK | FI_CLAIM`, receives that discard (`peek`).
    claims: peek::Claims,
    /// RMA, atomics and exposed memory regions (`crate::rma`).
    pub(crate) rma: crate::rma::RmaState,
}

/// The endpoint's default operation flags (`tx_attr->op_flags`, `rx_attr->op_flags` of its
/// `fi_info`): whether operations without flags report under `FI_SELECTIVE_COMPLETION`.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpDefaults {
    /// `FI_COMPLETION` in `tx_attr->op_flags`.
    pub tx_completion: bool,
    /// `FI_COMPLETION` in `rx_attr->op_flags`.
    pub rx_completion: bool,
}

/// An RDM endpoint.
pub struct Ep {
    caps: u64,
    pub(crate) defaults: OpDefaults,
    state: Mutex<State>,
    _nic: Arc<Nic>,
}

/// Which completion queue a binding is for.
#[derive(Clone, Copy, Debug)]
pub struct CqBinding {
    /// Transmit completions.
    pub transmit: bool,
    /// Receive completions.
    pub recv: bool,
    /// Only operations with `FI_COMPLETION` report.
    pub selective: bool,
}

/// A send.
pub struct Send<'a> {
    /// Destination.
    pub dest: u64,
    /// Tag, or `None` for an untagged message.
    pub tag: Option<u64>,
    /// Payload.
    pub data: &'a [u8],
    /// Remote CQ data.
    pub cq_data: Option<u64>,
    /// User context.
    pub context: usize,
    /// `Some(true)`: report; `Some(false)`: never (inject); `None`: as bound.
    pub completion: Option<bool>,
}

impl Ep {
    /// Open an endpoint on `nic` (its own LNI, domain, PtlTEs and queues).
    pub fn open(nic: Arc<Nic>, caps: u64, defaults: OpDefaults) -> Result<Ep> {
        let t = CxiTransport::new(
            nic.devices(),
            Box::new(Solo(HashMap::new())),
            &Env::from_process(),
        )?;
        Ok(Ep {
            caps,
            defaults,
            state: Mutex::new(State {
                t,
                av: None,
                synced: 0,
                rank_of: Vec::new(),
                addr_of: HashMap::new(),
                ops: BTreeMap::new(),
                tx_cq: None,
                rx_cq: None,
                tx_selective: false,
                rx_selective: false,
                enabled: false,
                failed: false,
                cntrs: Default::default(),
                claims: Default::default(),
                rma: crate::rma::RmaState::default(),
            }),
            _nic: nic,
        })
    }

    /// This endpoint's address (`fi_getname`).
    pub fn name(&self) -> [u8; ADDR_LEN] {
        let a = self.lock().t.address();
        let mut out = [0; ADDR_LEN];
        let n = a.len().min(ADDR_LEN);
        out[..n].copy_from_slice(&a[..n]);
        out
    }

    /// `fi_ep_bind` of an address vector.
    pub fn bind_av(&self, av: Arc<Av>) -> Result<()> {
        let mut s = self.lock();
        if s.av.is_some() {
            return Err(Error::State(
                "the endpoint already has an address vector".into(),
            ));
        }
        s.av = Some(av);
        Ok(())
    }

    /// `fi_ep_bind` of a completion queue.
    pub fn bind_cq(self: &Arc<Self>, cq: &Arc<Cq>, how: CqBinding) -> Result<()> {
        if !how.transmit && !how.recv {
            return Err(Error::Invalid(
                "a CQ binding needs FI_TRANSMIT or FI_RECV".into(),
            ));
        }
        let mut s = self.lock();
        if how.transmit {
            s.tx_cq = Some(Arc::clone(cq));
            s.tx_selective = how.selective;
        }
        if how.recv {
            s.rx_cq = Some(Arc::clone(cq));
            s.rx_selective = how.selective;
        }
        drop(s);
        cq.bind(self);
        Ok(())
    }

    /// `fi_enable`: needs an address vector and both completion queues.
    pub fn enable(&self) -> Result<()> {
        let mut s = self.lock();
        if s.av.is_none() {
            return Err(Error::State("fi_enable: no address vector bound".into()));
        }
        if s.tx_cq.is_none() || s.rx_cq.is_none() {
            return Err(Error::State(
                "fi_enable: transmit and receive CQs must be bound".into(),
            ));
        }
        s.enabled = true;
        Ok(())
    }

    /// Start a send.
    pub fn send(&self, op: Send<'_>) -> Result<()> {
        if op.data.len() > MAX_MSG_SIZE {
            return Err(Error::TooLong(op.data.len()));
        }
        let mut s = self.lock();
        s.ready()?;
        crate::rma::refresh(&mut s)?;
        let dest = s.rank(op.dest)?;
        let bits = wire::bits(op.tag, op.cq_data.is_some());
        // A libfabric send does not block: when every rendezvous id is held by a send not
        // yet received, the send is refused until one completes.
        let wire_len = op.data.len() + op.cq_data.map_or(0, |_| wire::DATA_LEN);
        if s.t.send_would_wait(wire_len) {
            return Err(Error::Again(format!(
                "{} rendezvous sends are waiting for their receives",
                u16::from(u8::MAX) + 1
            )));
        }
        let id = match op.cq_data {
            Some(d) => {
                let mut v = Vec::with_capacity(wire::DATA_LEN + op.data.len());
                v.extend_from_slice(&d.to_le_bytes());
                v.extend_from_slice(op.data);
                s.t.send(dest, bits, &v, SendMode::Standard)
                    .map_err(crate::error::posting)?
            }
            None => {
                s.t.send(dest, bits, op.data, SendMode::Standard)
                    .map_err(crate::error::posting)?
            }
        };
        // The send goes out now, as libfabric's sends do without FI_MORE: the application
        // may next wait on another endpoint, which makes no progress on this one.
        s.t.flush().map_err(crate::error::posting)?;
        let report = op
            .completion
            .unwrap_or(!s.tx_selective || self.defaults.tx_completion);
        s.ops.insert(
            id,
            Op {
                context: op.context,
                tagged: op.tag.is_some(),
                report,
                recv: None,
            },
        );
        Ok(())
    }

    /// Post a receive: from `src` (`FI_ADDR_UNSPEC`: anyone), a tag and ignore mask or
    /// `None` for untagged messages, into `buf`.
    pub fn recv(
        &self,
        src: u64,
        tag: Option<(u64, u64)>,
        buf: UserBuf,
        context: usize,
        completion: Option<bool>,
    ) -> Result<()> {
        if buf.len() > MAX_MSG_SIZE {
            return Err(Error::TooLong(buf.len()));
        }
        let mut s = self.lock();
        s.ready()?;
        let source = if src == FI_ADDR_UNSPEC || self.caps & FI_DIRECTED_RECV == 0 {
            None
        } else {
            Some(s.rank(src)?)
        };
        let (bits, ignore) = wire::recv_match(tag);
        // Room for the remote CQ data a message may carry in front of its payload.
        let id =
            s.t.recv(
                MatchSpec {
                    source,
                    bits,
                    ignore,
                },
                buf.len() + wire::DATA_LEN,
            )
            .map_err(crate::error::posting)?;
        let report = completion.unwrap_or(!s.rx_selective || self.defaults.rx_completion);
        s.ops.insert(
            id,
            Op {
                context,
                tagged: tag.is_some(),
                report,
                recv: Some(buf),
            },
        );
        Ok(())
    }

    /// `fi_cancel`: cancel the receive posted with `context`. Returns whether one was found.
    pub fn cancel(&self, context: usize) -> Result<bool> {
        let mut s = self.lock();
        let Some(id) = s
            .ops
            .iter()
            .find(|(_, o)| o.context == context && o.recv.is_some())
            .map(|(id, _)| *id)
        else {
            return Ok(false);
        };
        Ok(s.t.cancel(id)?)
    }

    /// Progress the transport and report what completed on the bound CQs.
    pub fn progress(&self) {
        let mut done = Vec::new();
        {
            let mut s = self.lock();
            if let Err(e) = s.step(&mut done)
                && !s.failed
            {
                s.failed = true;
                // Each pending operation with a context fails with it: applications take
                // the context of an error entry as their request (Open MPI's MTL does, and
                // crashed on a context-less entry). Only when none has a context is the
                // failure reported without one.
                let message = e.to_string();
                // Applications often print only the error number of the completions below;
                // the cause goes to standard error once (as providers log with FI_LOG).
                transport::env::eprint_line(&format!(
                    "libfabric nicemu: endpoint failed: {message}"
                ));
                crate::rma::fail_all(&mut s, &message, &mut done);
                let pending = std::mem::take(&mut s.ops);
                for op in pending.values() {
                    s.cntrs.count(counters::event_of(op), false);
                }
                for op in pending.into_values().filter(|o| o.context != 0) {
                    let kind = if op.tagged { FI_TAGGED } else { FI_MSG };
                    let (cq, flags) = match op.recv {
                        Some(_) => (&s.rx_cq, FI_RECV | kind),
                        None => (&s.tx_cq, FI_SEND | kind),
                    };
                    if let Some(cq) = cq {
                        let entry = Entry {
                            context: op.context,
                            flags,
                            buf: op.recv.as_ref().map_or(0, UserBuf::addr),
                            ..Entry::default()
                        };
                        done.push((
                            Arc::clone(cq),
                            Err(ErrEntry {
                                entry,
                                err: FI_EOTHER,
                                olen: 0,
                                message: message.clone(),
                            }),
                        ));
                    }
                }
                if done.is_empty() {
                    let err = ErrEntry {
                        entry: Entry::default(),
                        err: FI_EOTHER,
                        olen: 0,
                        message,
                    };
                    for cq in [&s.tx_cq, &s.rx_cq].into_iter().flatten() {
                        done.push((Arc::clone(cq), Err(err.clone())));
                    }
                }
            }
        }
        for (cq, e) in done {
            cq.push(e);
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) type Done = Vec<(Arc<Cq>, std::result::Result<Entry, ErrEntry>)>;

impl State {
    pub(crate) fn ready(&self) -> Result<()> {
        if self.enabled {
            Ok(())
        } else {
            Err(Error::State("the endpoint is not enabled".into()))
        }
    }

    /// Make new AV entries transport peers.
    fn sync_av(&mut self) -> Result<()> {
        let Some(av) = &self.av else {
            return Ok(());
        };
        for a in av.since(self.synced) {
            let r = self.t.add_peer(&a)?;
            let idx = self.rank_of.len() as u64;
            self.rank_of.push(r);
            self.addr_of.entry(r).or_insert(idx);
            self.synced += 1;
        }
        Ok(())
    }

    pub(crate) fn rank(&mut self, fi_addr: u64) -> Result<Rank> {
        self.sync_av()?;
        usize::try_from(fi_addr)
            .ok()
            .and_then(|i| self.rank_of.get(i).copied())
            .ok_or_else(|| {
                Error::Invalid(format!("fi_addr {fi_addr:#x} is not in the address vector"))
            })
    }

    fn step(&mut self, done: &mut Done) -> Result<()> {
        self.sync_av()?;
        self.t.progress()?;
        crate::rma::step(self, done)?;
        let ids: Vec<OpId> = self.ops.keys().copied().collect();
        for id in ids {
            let Some(c) = self.t.test(id)? else { continue };
            let Some(op) = self.ops.remove(&id) else {
                continue;
            };
            let kind = if op.tagged { FI_TAGGED } else { FI_MSG };
            let (cq, e) = match c {
                Completion::Sent => (
                    &self.tx_cq,
                    Ok(Entry {
                        context: op.context,
                        flags: FI_SEND | kind,
                        src: FI_ADDR_NOTAVAIL,
                        ..Entry::default()
                    }),
                ),
                Completion::Received { envelope, data } => {
                    let buf = op
                        .recv
                        .as_ref()
                        .ok_or_else(|| Error::State("a send received data".into()))?;
                    let with_data = envelope.bits & wire::DATA != 0;
                    let (cq_data, payload, full) = if with_data && data.len() >= wire::DATA_LEN {
                        let mut d = [0; wire::DATA_LEN];
                        d.copy_from_slice(&data[..wire::DATA_LEN]);
                        (
                            u64::from_le_bytes(d),
                            &data[wire::DATA_LEN..],
                            envelope.len - wire::DATA_LEN,
                        )
                    } else {
                        (0, &data[..], envelope.len)
                    };
                    // A discarding receive (`FI_DISCARD`) takes nothing.
                    let discard = self.claims.discards.remove(&id);
                    let n = if discard { 0 } else { buf.write(payload) };
                    let entry = Entry {
                        context: op.context,
                        flags: FI_RECV | kind | if with_data { FI_REMOTE_CQ_DATA } else { 0 },
                        len: n,
                        buf: buf.addr(),
                        data: cq_data,
                        tag: if op.tagged {
                            envelope.bits & wire::TAG_MASK
                        } else {
                            0
                        },
                        src: self
                            .addr_of
                            .get(&envelope.source)
                            .copied()
                            .unwrap_or(FI_ADDR_NOTAVAIL),
                    };
                    if full > buf.len() && !discard {
                        (
                            &self.rx_cq,
                            Err(ErrEntry {
                                olen: full - buf.len(),
                                err: FI_ETRUNC,
                                message: format!(
                                    "a message of {full} bytes truncated to {}",
                                    buf.len()
                                ),
                                entry,
                            }),
                        )
                    } else {
                        (&self.rx_cq, Ok(entry))
                    }
                }
                Completion::Cancelled => (
                    &self.rx_cq,
                    Err(ErrEntry {
                        entry: Entry {
                            context: op.context,
                            flags: FI_RECV | kind,
                            buf: op.recv.as_ref().map_or(0, UserBuf::addr),
                            ..Entry::default()
                        },
                        err: FI_ECANCELED,
                        olen: 0,
                        message: "the receive was cancelled".into(),
                    }),
                ),
                // Only `Transport::test_into` completes in place; the provider calls `test`.
                Completion::Fetched(_) | Completion::Landed { .. } => continue,
            };
            self.cntrs.count(counters::event_of(&op), e.is_ok());
            // Errors are always reported; successes only when asked for.
            if (op.report || e.is_err())
                && let Some(cq) = cq
            {
                done.push((Arc::clone(cq), e));
            }
        }
        Ok(())
    }
}
