//! The gni transport: MPI over the uGNI-like library on a Gemini NIC, with the protocols of
//! Cray MPICH's GNI netmod (gemini.md §3.1; intro_mpi(3) for the knobs, [`crate::env::GniKnobs`]):
//!
//! | protocol | sizes | how |
//! |---|---|---|
//! | E0 | ≤ `MPICH_GNI_MAX_VSHORT_MSG_SIZE` | inline in an SMSG message ([`eager`]) |
//! | E1 / Eager GET | ≤ `MPICH_GNI_MAX_EAGER_MSG_SIZE` | bounce buffer, receiver GETs at once ([`eager`]) |
//! | R0 | ≤ `MPICH_GNI_NDREG_MAXSIZE` | GET rendezvous ([`rendezvous`]) |
//! | Put Fallback | R0 sizes, unaligned | CTS + PUT when a GET would break the 4-byte rule |
//! | R1 | above | pipelined PUT in `NDREG_MAXSIZE` chunks, receiver-driven |
//!
//! Every GET and PUT is FMA below `MPICH_GNI_RDMA_THRESHOLD` and a fenced BTE post at and
//! above. Messages go through per-peer SMSG mailboxes with credits; out of credits (or before
//! the connection is up) they wait in order in a per-peer backlog. Connections are made on
//! first traffic by datagram exchange, or with every peer at init when
//! `MPICH_GNI_DYNAMIC_CONN=disabled` ([`connect`]).
//!
//! - uGNI has no tag matching: matching is [`crate::matching`] in software, as in the
//!   netmod. Synchronous eager sends are acknowledged when matched.
//! - `PMI_GNI_PTAG` and `PMI_GNI_COOKIE` name the job, as the launcher sets them on a Cray
//!   system; NIC addresses go through PMI.
//! - Staging buffers come from a registration cache, kept per size class.
//! - RMA ([`rma`]): windows are registered memory; put and get are FMA/BTE posts, atomics
//!   Gemini's 64-bit AMOs.
//! - Statistics ([`Transport::stats`]): sends by protocol (`E0`, `E1`, `R0`, `R1`), on the
//!   receiving side `EagerGET`, `PutFallback`, and `R0 landed` / `R0 copied` (an R0 receive, by
//!   GET or Put Fallback, completed straight into its buffer, or through a vector), posts by engine (`fma`, `bte`),
//!   connections (`connections`, `dials`, `accepts`), and posts re-posted after a
//!   transaction error (`reposts`).
//! - Transaction errors ([`Posted`]): Gemini's links retry lost and damaged packets
//!   themselves, so what reaches uGNI is a request that failed end to end (a link down for
//!   longer than the link layer waits, a request timeout): `GNI_GetCompleted` returns the
//!   descriptor with `GNI_RC_TRANSACTION_ERROR`. A PUT or GET is re-posted as it was, when
//!   `GNI_CqErrorRecoverable` says so, up to [`POST_RETRIES`] times, as Open MPI's ugni BTL
//!   does (open-mpi/ompi `opal/mca/btl/ugni`: `rdma_max_retries` 16, failed post events
//!   re-posted with `GNI_PostRdma` / `GNI_PostFma`; the Cray MPICH netmod's source is not
//!   public). Both
//!   are idempotent: a PUT writes the same bytes to the same place again, and no receiver
//!   reads them before the PUT's completion is announced; a GET reads again. An AMO is not
//!   (it may have executed before its answer was lost), so its transaction error still ends
//!   the job. SMSG sends are retransmitted by the user library (`MBOX_AUTO_RETRANSMIT`
//!   mailboxes, `userlib::gni::smsg`): an SMSG error reaches the transport only when the
//!   library's retransmissions are exhausted (`smsg retransmits` in the statistics).

mod connect;
mod eager;
mod rendezvous;
mod rma;
mod wire;
mod zcopy;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use driver::gemini::Kgni;
use driver::mem::UserMemory;
use firmware_spec::gemini::gni::{CdmMode, CqEventType, CqMode, MemFlags, PostType, ReturnCode};
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::post::PostDescriptor;
use userlib::gni::post::put_desc;
use userlib::gni::{Cdm, Cq, Ep, GniError, Nic, cq};

use self::connect::{Listen, Mailboxes, Peer};
use self::wire::{Header, Kind};
use crate::env::{Env, GniKnobs};
use crate::error::{Error, Result};
use crate::matching::Matcher;
use crate::{
    Atomic, Completion, Envelope, MatchSpec, OpId, Rank, SendMode, Stats, Transport, WinId,
};
use pmi::Pmi;

/// Registered staging buffers kept per size class.
const CACHE_PER_CLASS: usize = 64;

/// The size class of a staging buffer for `len` bytes: a power of two, at least a page.
fn size_class(len: usize) -> u64 {
    (len.max(4096) as u64).next_power_of_two()
}

/// CQ entries.
const CQ_ENTRIES: u32 = 4096;

/// Re-posts of one PUT or GET after transaction errors before the transport gives up (Open
/// MPI's ugni BTL default `rdma_max_retries`, 16).
pub const POST_RETRIES: u32 = 16;

/// A post waiting for its completion: where it went and how often it was re-posted.
#[derive(Clone, Copy, Debug)]
struct Posted {
    peer: Rank,
    bte: bool,
    tries: u32,
}

/// Idle progress calls between polls of the wildcard datagram without mailbox traffic.
const WILDCARD_POLL: u32 = 64;

/// Empty `map` in key order: teardown deregisters memory (MMIO writes to the NIC) in an
/// order that does not depend on the hasher's random state, so a deterministic run replays
/// bit for bit.
pub(super) fn sorted_drain<K: Ord + Copy, V>(map: &mut HashMap<K, V>) -> Vec<(K, V)> {
    let mut v: Vec<(K, V)> = map.drain().collect();
    v.sort_unstable_by_key(|(k, _)| *k);
    v
}

fn tr(e: GniError) -> Error {
    Error::Transport(format!("gni: {e}"))
}

fn mem_err(e: impl std::fmt::Display) -> Error {
    Error::Transport(format!("gni: host memory: {e}"))
}

/// Registered memory of this rank (staging, windows, mailboxes), or part of the
/// application's own memory under a registration of the registration cache (`user`: that
/// registration, held while the operation using it lives, so that no eviction deregisters
/// it under the NIC; never kept for reuse nor deregistered here, the cache does that).
struct Staged {
    mem: UserMemory,
    mh: MemHandle,
    user: Option<Arc<crate::regcache::Reg<zcopy::GniReg>>>,
}

/// Times a registration refused for lack of memory (`GNI_RC_ERROR_NOMEM`: kgni could not
/// pin the pages) or of MDDs is tried again, the registration cache's free buffers
/// deregistered first, as Cray MPICH's registration cache (udreg) evicts and retries.
const REG_RETRIES: u32 = 8;

/// Register `mem` read/write (remote events to `dst_cq`). On a lack of memory or MDDs,
/// `evict` (deregister what can be freed) and try again, at most [`REG_RETRIES`] times.
fn register(
    nic: &Nic,
    mem: &UserMemory,
    dst_cq: Option<&Cq>,
    mut evict: impl FnMut(&Nic),
) -> Result<MemHandle> {
    let mut tries = 0;
    loop {
        match nic.mem_register(mem.va(), mem.len(), dst_cq, MemFlags::READWRITE) {
            Ok(mh) => return Ok(mh),
            Err(e)
                if matches!(e.rc(), ReturnCode::ErrorNomem | ReturnCode::ErrorResource)
                    && tries < REG_RETRIES =>
            {
                tries += 1;
                tracing::debug!(tries, error = %e, "gni: registration refused");
                evict(nic);
            }
            Err(e) => return Err(tr(e)),
        }
    }
}

/// What an unexpected message holds until a receive matches it.
enum Arrived {
    /// E0: the bytes.
    Eager { data: Vec<u8>, sync: Option<u64> },
    /// E1: the bounce-buffer message `key` (its GET may still be in flight).
    Bounce { key: u64, sync: Option<u64> },
    /// R0: the sender's staged copy.
    Rts { id: u64, va: u64, mh: MemHandle },
    /// R1.
    RtsPut { id: u64 },
}

/// What a GET in flight is for.
enum GetFor {
    Rndv(rendezvous::Get),
    /// E1 message (keyed by the GET's token in `bounces`).
    Bounce,
}

/// MPI over uGNI on one Gemini NIC.
pub struct GniTransport {
    rank: Rank,
    size: u32,
    cfg: GniKnobs,
    peers: Vec<Peer>,
    /// Peers' `(NIC address, instance)`, read from PMI on first use.
    addrs: Vec<Option<(u32, u32)>>,
    /// Bound datagrams in flight.
    dialing: usize,
    /// Dials repeated after a peer's kgni rejected them.
    dial_retries: u32,
    /// Mailbox events seen since the wildcard was last polled (a new peer's first message
    /// raises one), and idle progress calls since.
    rx_seen: bool,
    idle: u32,
    /// Idle progress calls left that only poll host memory before the NIC's progress hook
    /// runs again (`userlib::gni::wait`'s bounded spin).
    idle_spins: u32,
    listen: Option<Listen>,
    mboxes: Mailboxes,
    /// Endpoints for posts, per peer, made on first use.
    post_eps: Vec<Option<Ep>>,
    /// An endpoint bound to this rank itself, for RMA and atomics on its own window.
    self_ep: Ep,
    tx: Cq,
    rx: Cq,
    next: u64,
    matcher: Matcher<usize, Arrived>,
    done: HashMap<OpId, Completion>,
    sync_wait: HashMap<u64, OpId>,
    held: HashMap<u64, rendezvous::Held>,
    gets: HashMap<u64, GetFor>,
    puts: HashMap<u64, rendezvous::PutOut>,
    /// Posts in flight by token, for re-posting after a transaction error.
    posted: HashMap<u64, Posted>,
    /// Posts and re-posts refused with `GNI_RC_ERROR_RESOURCE` (every sequence of the
    /// descriptor or the BTE queue busy), in order, posted by progress.
    deferred: VecDeque<PostDescriptor>,
    incoming: HashMap<(Rank, u64), rendezvous::PutIn>,
    /// R0 receives whose bytes landed, until completed.
    landed: HashMap<OpId, rendezvous::Landed>,
    bounces: HashMap<u64, eager::BounceIn>,
    rma: rma::Rma,
    /// The registration cache: free registered staging buffers by size class.
    cache: HashMap<u64, Vec<Staged>>,
    /// Zero copy (`zcopy`): the registration cache of application buffers.
    /// `NICEMU_TRANSPORT_STATS`: the statistics at finalize.
    stats_report: crate::StatsReport,
    zc: crate::regcache::ZeroCopy<zcopy::GniReg>,
    /// Zero-copy receives not matched yet (or between chunks): their registered buffers.
    zc_in: HashMap<OpId, Staged>,
    stats: Stats,
    /// SMSG messages sent and not yet reported delivered by a local event.
    smsg_out: u64,
    finalized: bool,
    pmi: Box<dyn Pmi>,
    nic: Nic,
    _cdm: Cdm,
}

impl GniTransport {
    /// Initialize on `kgni` (the node's `/dev/kgni0`): attach a CDM with the job's ptag and
    /// cookie (`PMI_GNI_PTAG`, `PMI_GNI_COOKIE`), create CQs, publish this rank's card through
    /// `pmi`, and either connect to every peer (`MPICH_GNI_DYNAMIC_CONN=disabled`) or post the
    /// wildcard datagram that accepts connections.
    pub fn new(kgni: &Arc<Kgni>, mut pmi: Box<dyn Pmi>, env: &Env) -> Result<Self> {
        let (rank, size) = (pmi.rank(), pmi.size());
        let cfg = env.gni_knobs(size)?;
        let need = |var: &str| Error::Config {
            var: var.into(),
            value: String::new(),
            reason: "not set: the launcher provides the job's credentials".into(),
        };
        let ptag: u8 = env.parse("PMI_GNI_PTAG", 0)?;
        if env.get("PMI_GNI_PTAG").is_none() {
            return Err(need("PMI_GNI_PTAG"));
        }
        let cookie = match env.get("PMI_GNI_COOKIE") {
            None => return Err(need("PMI_GNI_COOKIE")),
            Some(v) => parse_u32(v).ok_or_else(|| Error::Config {
                var: "PMI_GNI_COOKIE".into(),
                value: v.into(),
                reason: "expected a number (decimal or 0x hex)".into(),
            })?,
        };
        let client = Arc::new(kgni.open());
        // One BTE channel: BTE completions carry only the endpoint's event data, and
        // uGNI hands them to posts in order; several channels could finish out of order and
        // complete the wrong rendezvous (gni_pub.h, GNI_CDM_MODE_BTE_SINGLE_CHANNEL).
        let cdm =
            Cdm::create(&client, rank, ptag, cookie, CdmMode::BTE_SINGLE_CHANNEL).map_err(tr)?;
        let nic = cdm.attach(-1).map_err(tr)?;
        let tx = nic.cq_create(CQ_ENTRIES, 1, CqMode::NOBLOCK).map_err(tr)?;
        // Test hook: report the first N PUT/GET completions as transaction errors, so the
        // re-post path runs on a healthy network (userlib's `Cq::inject_post_errors`).
        let inject: u32 = env.parse("NICEMU_GNI_INJECT_POST_ERRORS", 0)?;
        if inject > 0 {
            tx.inject_post_errors(inject);
        }
        // Blocking: a rank with nothing to do sleeps on it (`Transport::sleep`).
        let rx = nic.cq_create(CQ_ENTRIES, 1, CqMode::BLOCKING).map_err(tr)?;
        let mut mboxes = Mailboxes::new(cfg.vshort)?;
        let card = if cfg.dynamic_conn {
            connect::card(&nic, rank, None)
        } else {
            mboxes.add_block(&nic, &rx, size)?;
            connect::card(&nic, rank, mboxes.blocks.last().map(|b| (b, mboxes.per)))
        };
        pmi.put("gni-card", &card)?;
        pmi.fence()?;
        let peers = if cfg.dynamic_conn {
            (0..size).map(|_| Peer::default()).collect()
        } else {
            let p = connect::connect_all(&nic, &tx, pmi.as_mut(), rank, size, &mboxes)?;
            // Every mailbox is initialized before anyone sends.
            pmi.fence()?;
            p
        };
        let self_ep = nic.ep_create(Some(&tx)).map_err(tr)?;
        self_ep.bind(nic.address(), rank).map_err(tr)?;
        let mut t = GniTransport {
            rank,
            size,
            cfg,
            peers,
            addrs: vec![None; size as usize],
            dialing: 0,
            dial_retries: 0,
            rx_seen: false,
            idle: 0,
            idle_spins: 0,
            listen: None,
            mboxes,
            post_eps: (0..size).map(|_| None).collect(),
            self_ep,
            tx,
            rx,
            next: 0,
            matcher: Matcher::new(),
            done: HashMap::new(),
            sync_wait: HashMap::new(),
            held: HashMap::new(),
            gets: HashMap::new(),
            puts: HashMap::new(),
            posted: HashMap::new(),
            deferred: VecDeque::new(),
            incoming: HashMap::new(),
            landed: HashMap::new(),
            bounces: HashMap::new(),
            rma: rma::Rma::default(),
            cache: HashMap::new(),
            zc: crate::regcache::ZeroCopy::new(env)?,
            stats_report: crate::StatsReport::from_env(env)?,
            zc_in: HashMap::new(),
            stats: Stats::new(),
            smsg_out: 0,
            finalized: false,
            pmi,
            nic,
            _cdm: cdm,
        };
        if !t.cfg.dynamic_conn {
            let n = t.peers.iter().filter(|p| !p.eps.is_empty()).count() as u64;
            t.stats.insert("connections", n);
        } else if size > 1 {
            t.listen()?;
        }
        Ok(t)
    }

    /// `test` and `test_into`.
    fn test_maybe_into(
        &mut self,
        op: OpId,
        mut out: Option<&mut [u8]>,
    ) -> Result<Option<Completion>> {
        crate::look_around_progress(self, |t| match t.done.remove(&op) {
            Some(c) => Ok(Some(c)),
            None => t.take_landed(op, out.as_deref_mut()),
        })
    }

    fn op(&mut self) -> OpId {
        self.next += 1;
        OpId(self.next)
    }

    fn count(&mut self, key: &'static str) {
        *self.stats.entry(key).or_default() += 1;
    }

    fn check_rank(&self, r: Rank) -> Result<()> {
        if r >= self.size {
            return Err(Error::Rank {
                rank: i64::from(r),
                size: self.size as usize,
            });
        }
        Ok(())
    }

    /// Registered memory of at least `len` bytes, from the registration cache when a buffer
    /// of the size class is free.
    fn stage(&mut self, len: usize) -> Result<Staged> {
        let class = size_class(len);
        if let Some(s) = self.cache.get_mut(&class).and_then(Vec::pop) {
            return Ok(s);
        }
        let mem = self.nic.space().alloc(class).map_err(mem_err)?;
        let cache = &mut self.cache;
        let mh = register(&self.nic, &mem, None, |nic| {
            for s in cache.drain().flat_map(|(_, v)| v) {
                // A buffer the NIC refuses to deregister stays registered; nothing to undo.
                let _ = nic.mem_deregister(&s.mh);
            }
        })?;
        self.count("registrations");
        Ok(Staged {
            mem,
            mh,
            user: None,
        })
    }

    /// Give a staging buffer back to the registration cache (deregistered when its class
    /// already holds [`CACHE_PER_CLASS`] buffers). Keeping registrations, as Cray MPICH does
    /// with its registration cache, also means no late request can find them gone.
    fn release(&mut self, s: Staged) -> Result<()> {
        if s.user.is_some() {
            return Ok(());
        }
        let free = self.cache.entry(s.mem.len()).or_default();
        if free.len() < CACHE_PER_CLASS {
            free.push(s);
            return Ok(());
        }
        self.nic.mem_deregister(&s.mh).map_err(tr)
    }

    /// Post `d` to `peer` (fenced when on the BTE); returns its token.
    ///
    /// An FMA descriptor tracks a bounded number of transactions and the BTE queues are
    /// bounded: a post refused with `GNI_RC_ERROR_RESOURCE` waits in `deferred`, behind
    /// any earlier one so that posts leave in order, and progress posts it once earlier
    /// posts completed (what a uGNI application does on that return code). Every caller
    /// waits for the post's completion event, never for the post itself.
    fn post(&mut self, peer: Rank, mut d: PostDescriptor, bte: bool) -> Result<u64> {
        self.next += 1;
        let token = self.next;
        d.post_id = token;
        if bte {
            fence(&mut d);
        }
        self.posted.insert(
            token,
            Posted {
                peer,
                bte,
                tries: 0,
            },
        );
        self.count(if bte { "bte" } else { "fma" });
        if self.deferred.is_empty() && self.try_post(peer, bte, &d)? {
            return Ok(token);
        }
        self.deferred.push_back(d);
        self.post_deferred()?;
        Ok(token)
    }

    /// Hand `d` to the NIC; `false` when it has no room (`GNI_RC_ERROR_RESOURCE`).
    fn try_post(&mut self, peer: Rank, bte: bool, d: &PostDescriptor) -> Result<bool> {
        let ep = self.post_ep(peer)?;
        let r = if bte { ep.post_rdma(d) } else { ep.post_fma(d) };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.rc() == ReturnCode::ErrorResource => Ok(false),
            Err(e) => Err(tr(e)),
        }
    }

    /// A post ended with a transaction error: post the same descriptor again (a PUT or a
    /// GET, when the error is recoverable and the post has retries left), or fail.
    fn repost(&mut self, c: cq::Completed, cqe: &firmware_spec::gemini::cqe::Cqe) -> Result<()> {
        let mut d = c.desc;
        let token = d.post_id;
        // The descriptor's status says what failed (the event's may read OK).
        let why = c.error_str(cqe);
        let Some(mut p) = self.posted.get(&token).copied() else {
            return Err(Error::Transport(format!(
                "gni: a post this rank does not know failed: {why}"
            )));
        };
        let idempotent = matches!(
            d.post_type,
            PostType::FmaPut | PostType::FmaGet | PostType::RdmaPut | PostType::RdmaGet
        );
        if !idempotent || !c.recoverable() || p.tries >= POST_RETRIES {
            return Err(Error::Transport(format!(
                "gni: a transaction failed ({:?} to rank {}, {} re-posts): {why}",
                d.post_type, p.peer, p.tries
            )));
        }
        p.tries += 1;
        self.posted.insert(token, p);
        d.status = 0;
        self.count("reposts");
        self.deferred.push_back(d);
        self.post_deferred().map(|_| ())
    }

    /// Post the re-posts waiting for room, in order, until one is refused for lack of
    /// room. Returns whether any went out.
    fn post_deferred(&mut self) -> Result<bool> {
        let mut did = false;
        while let Some(d) = self.deferred.pop_front() {
            let Some(p) = self.posted.get(&d.post_id).copied() else {
                continue;
            };
            if !self.try_post(p.peer, p.bte, &d)? {
                self.deferred.push_front(d);
                break;
            }
            did = true;
        }
        Ok(did)
    }

    /// GET `len` bytes from (`va`, `mh`) on `peer` into `stage` at `offset`: FMA below the
    /// RDMA threshold, BTE at and above. Returns the post's token.
    fn get(
        &mut self,
        peer: Rank,
        stage: &Staged,
        offset: u64,
        va: u64,
        mh: MemHandle,
        len: u64,
    ) -> Result<u64> {
        let bte = len as usize >= self.cfg.rdma_threshold;
        let ty = if bte {
            PostType::RdmaGet
        } else {
            PostType::FmaGet
        };
        let d = put_desc(ty, stage.mem.va() + offset, stage.mh, va, mh, len);
        self.post(peer, d, bte)
    }

    /// One message arrived (or was sent to this rank itself).
    fn handle(&mut self, hdr: &[u8], data: &[u8]) -> Result<()> {
        let h = Header::decode(hdr)?;
        let envelope = Envelope {
            source: h.src,
            bits: h.bits,
            len: h.len as usize,
        };
        match h.kind {
            Kind::Eager => {
                let a = Arrived::Eager {
                    data: data.to_vec(),
                    sync: h.sync.then_some(h.id),
                };
                self.arrive(envelope, a)
            }
            Kind::EagerBounce => self.bounce_arrived(&h, envelope),
            Kind::Rts => {
                let a = Arrived::Rts {
                    id: h.id,
                    va: h.va,
                    mh: h.mh,
                };
                self.arrive(envelope, a)
            }
            Kind::RtsPut => self.arrive(envelope, Arrived::RtsPut { id: h.id }),
            Kind::Fin => self.on_fin(h.id),
            Kind::SyncAck => {
                if let Some(op) = self.sync_wait.remove(&h.id) {
                    self.done.insert(op, Completion::Sent);
                }
                Ok(())
            }
            Kind::Cts => self.on_cts(&h),
            Kind::PutDone => self.put_arrived(h.src, h.id, h.bits, h.len),
        }
    }

    fn arrive(&mut self, envelope: Envelope, a: Arrived) -> Result<()> {
        match self.matcher.arrive(envelope, a) {
            Some((p, a)) => self.deliver(p.op, p.data, envelope, a),
            None => {
                self.count("unexpected");
                Ok(())
            }
        }
    }

    /// A receive `op` of `capacity` bytes matched a message.
    fn deliver(&mut self, op: OpId, capacity: usize, envelope: Envelope, a: Arrived) -> Result<()> {
        match a {
            Arrived::Eager { mut data, sync } => {
                if let Some(id) = sync {
                    let ack = Header::control(Kind::SyncAck, self.rank, id);
                    self.smsg(envelope.source, &ack, &[])?;
                }
                data.truncate(capacity);
                self.done
                    .insert(op, Completion::Received { envelope, data });
                Ok(())
            }
            Arrived::Bounce { key, sync } => self.bounce_matched(op, capacity, key, sync),
            Arrived::Rts { id, va, mh } => self.rts_matched(op, capacity, envelope, id, va, mh),
            Arrived::RtsPut { id } => self.rts_put_matched(op, capacity, envelope, id),
        }
    }

    /// Take the local CQ's events: completed posts (GETs, PUTs, RMA) and SMSG send
    /// completions.
    fn drain_tx(&mut self) -> Result<bool> {
        let mut did = false;
        while let Some(ev) = self.tx.get_event().map_err(tr)? {
            did = true;
            let post = cq::get_type(&ev.cqe) == Some(CqEventType::Post);
            // A failed post is handed back by GetCompleted (and maybe re-posted); any other
            // failed transaction (an SMSG send the library gave up retransmitting, an
            // overrun) ends the job.
            if ev.rc != ReturnCode::Success && !(post && ev.rc == ReturnCode::TransactionError) {
                return Err(Error::Transport(format!(
                    "gni: a transaction failed: {}",
                    cq::error_str(&ev.cqe)
                )));
            }
            match cq::get_type(&ev.cqe) {
                Some(CqEventType::Post) => {}
                Some(CqEventType::Smsg) => {
                    self.smsg_out = self.smsg_out.saturating_sub(1);
                    continue;
                }
                _ => continue,
            }
            let c = self.tx.get_completed(&ev.cqe).map_err(tr)?;
            if c.rc != ReturnCode::Success {
                self.repost(c, &ev.cqe)?;
                continue;
            }
            let token = c.desc.post_id;
            self.posted.remove(&token);
            if let Some(g) = self.gets.remove(&token) {
                match g {
                    GetFor::Rndv(g) => self.finish_get(g)?,
                    GetFor::Bounce => self.bounce_fetched(token)?,
                }
            } else if self.puts.contains_key(&token) {
                self.put_complete(token)?;
            } else if let Some((op, done, stage)) = self.rma.complete(token)? {
                self.release(stage)?;
                self.done.insert(op, done);
            }
        }
        Ok(did)
    }
}

/// BTE completions carry only the endpoint's event data and `GNI_GetCompleted` hands them
/// to the oldest post; without `FENCE` a later TXD of the channel may finish first (gemini.md:
/// FENCE "wait for all responses from this and previous posts before the next RDMA
/// descriptor"), so every BTE post is fenced and completions arrive in posting order.
pub(super) fn fence(d: &mut PostDescriptor) {
    d.rdma_mode |= firmware_spec::gemini::gni::RdmaMode::FENCE;
}

fn parse_u32(v: &str) -> Option<u32> {
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

impl Transport for GniTransport {
    fn name(&self) -> &'static str {
        "gni"
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn send(&mut self, dest: Rank, bits: u64, data: &[u8], mode: SendMode) -> Result<OpId> {
        self.check_rank(dest)?;
        let op = self.op();
        let sync = mode == SendMode::Synchronous;
        if data.len() <= self.cfg.vshort.max(self.cfg.eager) {
            self.send_eager(dest, bits, data, sync, op)?;
        } else {
            self.send_rndv(dest, bits, data, sync, op)?;
        }
        Ok(op)
    }

    fn recv(&mut self, spec: MatchSpec, capacity: usize) -> Result<OpId> {
        self.progress()?;
        let op = self.op();
        if let Some((u, cap)) = self.matcher.post(op, spec, capacity) {
            self.deliver(op, cap, u.envelope, u.data)?;
        }
        Ok(op)
    }

    fn cancel(&mut self, op: OpId) -> Result<bool> {
        if self.matcher.cancel(op).is_some() {
            self.done.insert(op, Completion::Cancelled);
            return Ok(true);
        }
        Ok(false)
    }

    fn probe(&mut self, spec: MatchSpec) -> Result<Option<Envelope>> {
        self.progress()?;
        Ok(self.matcher.probe(&spec))
    }

    fn claim(&mut self, spec: MatchSpec) -> Result<Option<(Envelope, OpId)>> {
        self.progress()?;
        let Some(u) = self.matcher.claim(&spec) else {
            return Ok(None);
        };
        let op = self.op();
        let env = u.envelope;
        self.deliver(op, usize::MAX, env, u.data)?;
        Ok(Some((env, op)))
    }

    fn test(&mut self, op: OpId) -> Result<Option<Completion>> {
        match self.test_maybe_into(op, None)? {
            Some(c) => {
                self.zc_in.remove(&op);
                self.zc.land(op, c).map(Some)
            }
            None => Ok(None),
        }
    }

    fn test_into(&mut self, op: OpId, out: &mut [u8]) -> Result<Option<Completion>> {
        match self.test_maybe_into(op, Some(out))? {
            Some(c) => {
                self.zc_in.remove(&op);
                self.zc.land(op, c).map(Some)
            }
            None => Ok(None),
        }
    }

    fn zero_copy_min(&self) -> Option<usize> {
        self.zc.min(self.nic.process_memory())
    }

    fn send_zero_copy(
        &mut self,
        dest: Rank,
        bits: u64,
        va: u64,
        len: usize,
        mode: SendMode,
    ) -> Result<OpId> {
        self.zc_send(dest, bits, va, len, mode)
    }

    fn recv_zero_copy(&mut self, spec: MatchSpec, va: u64, capacity: usize) -> Result<OpId> {
        self.zc_recv(spec, va, capacity)
    }

    fn keep_registered(&mut self, va: u64, len: usize) -> Result<()> {
        self.zc_keep(va, len)
    }

    fn forget_registered(&mut self, va: u64) {
        self.zc.forget(va);
    }

    fn progress(&mut self) -> Result<bool> {
        let mut did = false;
        for peer in 0..self.size {
            if !self.peers[peer as usize].backlog.is_empty() {
                did |= self.flush_backlog(peer)?;
            }
        }
        did |= self.drain_tx()?;
        // After the completions: they may have made room for posts waiting on it.
        if !self.deferred.is_empty() {
            did |= self.post_deferred()?;
        }
        did |= self.drain_mailboxes()?;
        if !did {
            // The wildcard is a kgni request: poll it after mailbox traffic (a new peer's
            // first message) or once in a while, not on every idle spin.
            self.idle = self.idle.wrapping_add(1);
            let wildcard =
                self.listen.is_some() && (self.rx_seen || self.idle.is_multiple_of(WILDCARD_POLL));
            if self.dialing > 0 || wildcard {
                self.rx_seen = false;
                did |= self.poll_datagrams(wildcard)?;
            }
        }
        if did {
            self.idle_spins = 0;
        } else if self.idle_spins > 0 {
            // Completions and messages land in host memory: poll it a while before handing
            // the CPU to the device (which yields when it has nothing to run).
            self.idle_spins -= 1;
            std::hint::spin_loop();
        } else if !self.nic.progress() {
            self.idle_spins = userlib::gni::wait::SPIN_POLLS;
        }
        Ok(did)
    }

    fn sleep(&mut self, limit: std::time::Duration) -> Result<bool> {
        // Local work finishes on the transmit CQ or needs this rank's polls (posts waiting
        // for room, messages waiting for credits, a dial's datagram): poll meanwhile. What
        // is left comes from the peers, as events on the receive CQ (a new peer's first
        // message included).
        if self.smsg_out > 0
            || !self.gets.is_empty()
            || !self.deferred.is_empty()
            || self.dialing > 0
            || self.peers.iter().any(|p| !p.backlog.is_empty())
        {
            return Ok(false);
        }
        self.rx.sleep(limit).map_err(tr)
    }

    fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        let n = self.nic.smsg_retransmits();
        if n > 0 {
            s.insert("smsg retransmits", n);
        }
        self.zc.report(&mut s);
        s
    }

    fn win_create(&mut self, len: usize) -> Result<(WinId, Vec<u8>)> {
        // Fresh pages are zeroed; window memory never comes from the staging cache.
        let mem = self
            .nic
            .space()
            .alloc((len.max(8) as u64).next_multiple_of(8))
            .map_err(mem_err)?;
        let mh = register(&self.nic, &mem, None, |_| {})?;
        Ok(self.rma.create(Staged {
            mem,
            mh,
            user: None,
        }))
    }

    fn win_connect(&mut self, win: WinId, keys: Vec<Vec<u8>>) -> Result<()> {
        self.rma.connect(win, &keys)
    }

    fn win_read(&mut self, win: WinId, offset: usize, out: &mut [u8]) -> Result<()> {
        self.rma.read(win, offset, out)
    }

    fn win_write(&mut self, win: WinId, offset: usize, data: &[u8]) -> Result<()> {
        self.rma.write(win, offset, data)
    }

    fn win_memory(&mut self, win: WinId) -> Option<*mut u8> {
        self.rma.local_memory(win)
    }

    fn put(&mut self, win: WinId, target: Rank, offset: usize, data: &[u8]) -> Result<OpId> {
        self.check_rank(target)?;
        let op = self.op();
        let stage = self.stage(data.len())?;
        stage.mem.write(0, data).map_err(mem_err)?;
        let (d, bte) = self.rma.put_desc(
            win,
            target,
            offset,
            data.len(),
            &stage,
            self.cfg.rdma_threshold,
        )?;
        self.post_rma(target, op, d, bte, stage, rma::Finish::Sent)?;
        Ok(op)
    }

    fn get(&mut self, win: WinId, target: Rank, offset: usize, len: usize) -> Result<OpId> {
        self.check_rank(target)?;
        let op = self.op();
        let (start, span) = rma::aligned(offset, len);
        let stage = self.stage(span)?;
        let (d, bte) =
            self.rma
                .get_desc(win, target, start, span, &stage, self.cfg.rdma_threshold)?;
        let finish = rma::Finish::Fetch {
            skip: offset - start,
            len,
        };
        self.post_rma(target, op, d, bte, stage, finish)?;
        Ok(op)
    }

    fn atomic(&mut self, win: WinId, target: Rank, offset: usize, atomic: &Atomic) -> Result<OpId> {
        self.check_rank(target)?;
        let op = self.op();
        let stage = self.stage(8)?;
        let d = self.rma.amo_desc(win, target, offset, atomic, &stage)?;
        let finish = if atomic.fetch {
            rma::Finish::Fetch { skip: 0, len: 8 }
        } else {
            rma::Finish::Sent
        };
        self.count("amo");
        self.post_rma(target, op, d, false, stage, finish)?;
        Ok(op)
    }

    fn win_free(&mut self, win: WinId) -> Result<()> {
        if let Some(s) = self.rma.free(win) {
            self.nic.mem_deregister(&s.mh).map_err(tr)?;
        }
        Ok(())
    }

    fn abort(&mut self, why: &str) {
        self.pmi.abort(why);
    }

    fn aborted(&self) -> Option<String> {
        self.pmi.aborted()
    }

    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        let start = driver::clock::Instant::now();
        while self.smsg_out > 0
            || self.peers.iter().any(|p| !p.backlog.is_empty())
            || !self.gets.is_empty()
            || self.rendezvous_in_flight() > 0
        {
            self.progress()?;
            if let Some(why) = self.pmi.aborted() {
                return Err(Error::Transport(format!("job aborted: {why}")));
            }
            if start.elapsed() > FINALIZE_LIMIT {
                let why = format!(
                    "finalize: {} messages undelivered, {} sends and receives unfinished, {} \
                     gets in flight",
                    self.smsg_out,
                    self.rendezvous_in_flight(),
                    self.gets.len()
                );
                self.pmi.abort(&why);
                return Err(Error::Timeout(why));
            }
        }
        self.stats_report
            .print(self.rank, "gni", &crate::Transport::stats(self));
        // Nobody writes into this rank's mailboxes once every rank got here.
        self.pmi.fence()?;
        self.pmi.finalize();
        Ok(())
    }
}

/// How long finalize waits for this rank's traffic to drain.
const FINALIZE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

impl GniTransport {
    fn post_rma(
        &mut self,
        target: Rank,
        op: OpId,
        d: PostDescriptor,
        bte: bool,
        stage: Staged,
        finish: rma::Finish,
    ) -> Result<()> {
        let token = self.post(target, d, bte)?;
        self.rma.track(token, op, stage, finish);
        Ok(())
    }
}

impl Drop for GniTransport {
    fn drop(&mut self) {
        // Registrations go back before the memory they cover; the CDM, CQs and endpoints
        // close after (kgni frees whatever a closing client still holds).
        for s in self.drain_registrations() {
            if s.user.is_none() {
                let _ = self.nic.mem_deregister(&s.mh);
            }
        }
        for (_, s) in sorted_drain(&mut self.zc_in) {
            drop(s);
        }
        self.zc.dest.clear();
        self.zc.cache.clear();
        for s in self.rma.drain() {
            let _ = self.nic.mem_deregister(&s.mh);
        }
        for (_, v) in sorted_drain(&mut self.cache) {
            for s in v {
                let _ = self.nic.mem_deregister(&s.mh);
            }
        }
        for b in &self.mboxes.blocks {
            let _ = self.nic.mem_deregister(&b.mh);
        }
    }
}
