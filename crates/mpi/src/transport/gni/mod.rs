//! The gni transport: MPI over the uGNI-like library on a Gemini NIC, as Cray MPICH's GNI
//! netmod does it (gemini.md §3.1):
//!
//! - **E0**: messages up to `MPICH_GNI_MAX_VSHORT_MSG_SIZE` bytes (default 512, sst-macro's
//!   model of Cray MPICH; Cray's own default scales with job size and is not public) travel
//!   inline in an SMSG message, after a 64-byte header, through a per-peer mailbox with
//!   credits. Out of credits, messages wait in order in a per-peer backlog.
//! - **R0**: longer messages are a GET rendezvous: the sender stages the bytes in registered
//!   memory and sends a request (RTS) with its address and memory handle; the receiver, once a
//!   receive matched it, GETs them — FMA below `MPICH_GNI_RDMA_THRESHOLD` (default 2048), the
//!   BTE at and above — and answers FIN, which completes the send. Staged copies are padded
//!   to 4 bytes, so a GET never breaks Gemini's 4-byte alignment rule.
//! - uGNI has no tag matching: matching is [`crate::matching`] in software, as in the
//!   netmod. Synchronous eager sends are acknowledged when matched.
//! - Connections are made at init: mailbox addresses and handles go through PMI, and every
//!   peer gets an endpoint bound to its (NIC address, instance id). `PMI_GNI_PTAG` and
//!   `PMI_GNI_COOKIE` name the job, as the launcher sets them on a Cray system.
//! - RMA ([`rma`]): windows are registered memory; put and get are FMA/BTE posts, atomics
//!   Gemini's 64-bit AMOs.

mod rma;
mod wire;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use driver::gemini::Kgni;
use driver::mem::UserMemory;
use firmware_spec::gemini::gni::{CdmMode, CqEventType, CqMode, MemFlags, PostType, ReturnCode};
use firmware_spec::gemini::mdd::MemHandle;
use userlib::gni::post::put_desc;
use userlib::gni::smsg::mailbox_attr;
use userlib::gni::{Cdm, Cq, Ep, GniError, Nic, cq};

use self::wire::{HEADER_LEN, Header, Kind};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::matching::Matcher;
use crate::pmi::Pmi;
use crate::transport::{
    Atomic, Completion, Envelope, MatchSpec, OpId, Rank, SendMode, Stats, Transport, WinId,
};

/// Registered staging buffers kept per size class.
const CACHE_PER_CLASS: usize = 64;

/// The size class of a staging buffer for `len` bytes: a power of two, at least a page.
fn size_class(len: usize) -> u64 {
    (len.max(4096) as u64).next_power_of_two()
}

/// SMSG credits per mailbox.
const CREDITS: u16 = 16;
/// CQ entries.
const CQ_ENTRIES: u32 = 4096;

fn tr(e: GniError) -> Error {
    Error::Transport(format!("gni: {e}"))
}

fn mem_err(e: impl std::fmt::Display) -> Error {
    Error::Transport(format!("gni: host memory: {e}"))
}

/// Thresholds from the environment.
#[derive(Clone, Copy, Debug)]
struct Config {
    vshort: usize,
    rdma_threshold: usize,
}

impl Config {
    fn from_env(env: &Env) -> Result<Self> {
        let vshort = env.size("MPICH_GNI_MAX_VSHORT_MSG_SIZE", 512)?;
        if !(64..=10_000).contains(&vshort) {
            return Err(Error::Config {
                var: "MPICH_GNI_MAX_VSHORT_MSG_SIZE".into(),
                value: vshort.to_string(),
                reason: "must be between 64 and 10000 bytes".into(),
            });
        }
        Ok(Config {
            vshort,
            rdma_threshold: env.size("MPICH_GNI_RDMA_THRESHOLD", 2048)?,
        })
    }
}

/// Registered memory of this rank (staging, windows).
struct Staged {
    mem: UserMemory,
    mh: MemHandle,
}

/// What an unexpected message holds until a receive matches it.
enum Arrived {
    Eager { data: Vec<u8>, sync: Option<u64> },
    Rts { id: u64, va: u64, mh: MemHandle },
}

/// A GET of a rendezvous in flight.
struct Get {
    op: OpId,
    envelope: Envelope,
    capacity: usize,
    stage: Staged,
    id: u64,
}

/// A message waiting for SMSG credits.
struct Outgoing {
    header: [u8; HEADER_LEN],
    data: Vec<u8>,
}

/// MPI over uGNI on one Gemini NIC.
pub struct GniTransport {
    rank: Rank,
    size: u32,
    cfg: Config,
    eps: Vec<Option<Ep>>,
    /// An endpoint bound to this rank itself, for RMA and atomics on its own window.
    self_ep: Ep,
    tx: Cq,
    rx: Cq,
    mbox: Staged,
    next: u64,
    matcher: Matcher<usize, Arrived>,
    done: HashMap<OpId, Completion>,
    backlog: Vec<VecDeque<Outgoing>>,
    sync_wait: HashMap<u64, OpId>,
    rndv_out: HashMap<u64, (OpId, Staged)>,
    gets: HashMap<u64, Get>,
    rma: rma::Rma,
    /// The registration cache: free registered staging buffers by size class.
    cache: HashMap<u64, Vec<Staged>>,
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
    /// cookie (`PMI_GNI_PTAG`, `PMI_GNI_COOKIE`), create CQs and mailboxes, exchange them
    /// through `pmi`, connect to every peer.
    pub fn new(kgni: &Arc<Kgni>, mut pmi: Box<dyn Pmi>, env: &Env) -> Result<Self> {
        let cfg = Config::from_env(env)?;
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
        let (rank, size) = (pmi.rank(), pmi.size());
        let client = Arc::new(kgni.open());
        // One BTE channel: BTE completions carry only the endpoint's event data, and
        // uGNI hands them to posts in order; several channels could finish out of order and
        // complete the wrong rendezvous (gni_pub.h, GNI_CDM_MODE_BTE_SINGLE_CHANNEL).
        let cdm =
            Cdm::create(&client, rank, ptag, cookie, CdmMode::BTE_SINGLE_CHANNEL).map_err(tr)?;
        let nic = cdm.attach(-1).map_err(tr)?;
        let tx = nic.cq_create(CQ_ENTRIES, 1, CqMode::NOBLOCK).map_err(tr)?;
        let rx = nic.cq_create(CQ_ENTRIES, 1, CqMode::NOBLOCK).map_err(tr)?;
        let maxsize = (cfg.vshort + HEADER_LEN) as u32;
        let per = mailbox_attr(0, 0, MemHandle::default(), CREDITS, maxsize)
            .map_err(tr)?
            .buff_size
            .next_multiple_of(64);
        let mem = nic
            .space()
            .alloc(u64::from(per) * u64::from(size.max(1)))
            .map_err(mem_err)?;
        let mh = nic
            .mem_register(mem.va(), mem.len(), Some(&rx), MemFlags::READWRITE)
            .map_err(tr)?;
        let mbox = Staged { mem, mh };
        // Publish: NIC address, instance, mailbox region and handle, per-peer mailbox size.
        let mut card = Vec::with_capacity(36);
        card.extend_from_slice(&nic.address().to_le_bytes());
        card.extend_from_slice(&rank.to_le_bytes());
        card.extend_from_slice(&mbox.mem.va().to_le_bytes());
        card.extend_from_slice(&mbox.mh.to_bytes());
        card.extend_from_slice(&per.to_le_bytes());
        pmi.put("gni-card", &card)?;
        pmi.fence()?;
        let mut eps = Vec::with_capacity(size as usize);
        for peer in 0..size {
            if peer == rank {
                eps.push(None);
                continue;
            }
            let c = pmi.get(peer, "gni-card")?;
            if c.len() < 36 {
                return Err(Error::Transport(format!("gni: rank {peer}: a short card")));
            }
            let u32_at = |o: usize| u32::from_le_bytes([c[o], c[o + 1], c[o + 2], c[o + 3]]);
            let mut va = [0u8; 8];
            va.copy_from_slice(&c[8..16]);
            let their_mh = MemHandle::from_bytes(&c[16..32])
                .map_err(|_| Error::Transport(format!("gni: rank {peer}: a bad handle")))?;
            let (addr, inst, their_per) = (u32_at(0), u32_at(4), u32_at(32));
            let ep = nic.ep_create(Some(&tx)).map_err(tr)?;
            ep.bind(addr, inst).map_err(tr)?;
            let local =
                mailbox_attr(mbox.mem.va(), peer * per, mbox.mh, CREDITS, maxsize).map_err(tr)?;
            let remote = mailbox_attr(
                u64::from_le_bytes(va),
                rank * their_per,
                their_mh,
                CREDITS,
                maxsize,
            )
            .map_err(tr)?;
            ep.smsg_init(&local, &remote).map_err(tr)?;
            eps.push(Some(ep));
        }
        let self_ep = nic.ep_create(Some(&tx)).map_err(tr)?;
        self_ep.bind(nic.address(), rank).map_err(tr)?;
        // Every mailbox is initialized before anyone sends.
        pmi.fence()?;
        Ok(GniTransport {
            rank,
            size,
            cfg,
            eps,
            self_ep,
            tx,
            rx,
            mbox,
            next: 0,
            matcher: Matcher::new(),
            done: HashMap::new(),
            backlog: (0..size).map(|_| VecDeque::new()).collect(),
            sync_wait: HashMap::new(),
            rndv_out: HashMap::new(),
            gets: HashMap::new(),
            rma: rma::Rma::default(),
            cache: HashMap::new(),
            stats: Stats::new(),
            smsg_out: 0,
            finalized: false,
            pmi,
            nic,
            _cdm: cdm,
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

    /// Registered memory of at least `len` bytes (padded to 4 for GETs), from the
    /// registration cache when a buffer of the size class is free.
    fn stage(&mut self, len: usize) -> Result<Staged> {
        let class = size_class(len);
        if let Some(s) = self.cache.get_mut(&class).and_then(Vec::pop) {
            return Ok(s);
        }
        let mem = self.nic.space().alloc(class).map_err(mem_err)?;
        let mh = self
            .nic
            .mem_register(mem.va(), mem.len(), None, MemFlags::READWRITE)
            .map_err(tr)?;
        self.count("registrations");
        Ok(Staged { mem, mh })
    }

    /// Give a staging buffer back to the registration cache (deregistered when its class
    /// already holds [`CACHE_PER_CLASS`] buffers). Keeping registrations, as Cray MPICH does
    /// with its registration cache, also means no late request can find them gone.
    fn release(&mut self, s: Staged) -> Result<()> {
        let free = self.cache.entry(s.mem.len()).or_default();
        if free.len() < CACHE_PER_CLASS {
            free.push(s);
            return Ok(());
        }
        self.nic.mem_deregister(&s.mh).map_err(tr)
    }

    fn ep(&self, r: Rank) -> Result<&Ep> {
        if r == self.rank {
            return Ok(&self.self_ep);
        }
        self.eps
            .get(r as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::Rank {
                rank: i64::from(r),
                size: self.size as usize,
            })
    }

    /// Send an SMSG message to `dest` (in order behind any backlog).
    fn smsg(&mut self, dest: Rank, header: &Header, data: &[u8]) -> Result<()> {
        let out = Outgoing {
            header: header.encode(),
            data: data.to_vec(),
        };
        if dest == self.rank {
            return self.handle(&out.header, &out.data);
        }
        self.backlog[dest as usize].push_back(out);
        self.flush_backlog(dest).map(|_| ())
    }

    fn flush_backlog(&mut self, dest: Rank) -> Result<bool> {
        let mut did = false;
        while let Some(o) = self.backlog[dest as usize].front() {
            let ep = self.ep(dest)?;
            match ep.smsg_send(&o.header, &o.data, 0) {
                Ok(()) => {
                    self.backlog[dest as usize].pop_front();
                    self.smsg_out += 1;
                    did = true;
                }
                Err(e) if e.rc() == ReturnCode::NotDone => break,
                Err(e) => return Err(tr(e)),
            }
        }
        Ok(did)
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
            Kind::Rts => {
                let a = Arrived::Rts {
                    id: h.id,
                    va: h.va,
                    mh: h.mh,
                };
                self.arrive(envelope, a)
            }
            Kind::Fin => {
                if let Some((op, s)) = self.rndv_out.remove(&h.id) {
                    self.release(s)?;
                    self.done.insert(op, Completion::Sent);
                }
                Ok(())
            }
            Kind::SyncAck => {
                if let Some(op) = self.sync_wait.remove(&h.id) {
                    self.done.insert(op, Completion::Sent);
                }
                Ok(())
            }
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
            Arrived::Rts { id, va, mh } => {
                let len = (envelope.len as u64).next_multiple_of(4);
                let stage = self.stage(envelope.len)?;
                let bte = envelope.len >= self.cfg.rdma_threshold;
                let ty = if bte {
                    PostType::RdmaGet
                } else {
                    PostType::FmaGet
                };
                let mut d = put_desc(ty, stage.mem.va(), stage.mh, va, mh, len);
                if bte {
                    fence(&mut d);
                }
                self.next += 1;
                let token = self.next;
                d.post_id = token;
                let ep = self.ep(envelope.source)?;
                if bte {
                    ep.post_rdma(&d).map_err(tr)?;
                } else {
                    ep.post_fma(&d).map_err(tr)?;
                }
                self.count(if bte { "bte" } else { "fma" });
                self.gets.insert(
                    token,
                    Get {
                        op,
                        envelope,
                        capacity,
                        stage,
                        id,
                    },
                );
                Ok(())
            }
        }
    }

    /// A GET finished: hand the bytes to the receive, tell the sender.
    fn finish_get(&mut self, g: Get) -> Result<()> {
        let n = g.envelope.len.min(g.capacity);
        let mut data = vec![0u8; n];
        g.stage.mem.read(0, &mut data).map_err(mem_err)?;
        self.release(g.stage)?;
        let fin = Header::control(Kind::Fin, self.rank, g.id);
        self.smsg(g.envelope.source, &fin, &[])?;
        self.done.insert(
            g.op,
            Completion::Received {
                envelope: g.envelope,
                data,
            },
        );
        Ok(())
    }

    /// Take the local CQ's events: completed posts (GETs, RMA) and SMSG send completions.
    fn drain_tx(&mut self) -> Result<bool> {
        let mut did = false;
        while let Some(ev) = self.tx.get_event().map_err(tr)? {
            did = true;
            if ev.rc != ReturnCode::Success {
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
                return Err(Error::Transport(format!(
                    "gni: a post failed: {}",
                    cq::error_str(&ev.cqe)
                )));
            }
            let token = c.desc.post_id;
            if let Some(g) = self.gets.remove(&token) {
                self.finish_get(g)?;
            } else if let Some((op, done, stage)) = self.rma.complete(token)? {
                self.release(stage)?;
                self.done.insert(op, done);
            }
        }
        Ok(did)
    }

    /// Messages that arrived in the mailboxes.
    fn drain_mailboxes(&mut self) -> Result<bool> {
        while let Some(ev) = self.rx.get_event().map_err(tr)? {
            if ev.rc == ReturnCode::ErrorResource {
                self.rx.clear_overrun().map_err(tr)?;
            }
        }
        let mut msgs = Vec::new();
        for ep in self.eps.iter().flatten() {
            while let Some(m) = ep.smsg_get_next().map_err(tr)? {
                msgs.push(m);
                ep.smsg_release().map_err(tr)?;
            }
        }
        let did = !msgs.is_empty();
        for m in msgs {
            self.handle(m.header(), m.data())?;
        }
        Ok(did)
    }
}

/// BTE completions carry only the endpoint's event data and `GNI_GetCompleted` hands them
/// to the oldest post; without `FENCE` a later TXD of the channel may finish first (gemini.md:
/// FENCE "wait for all responses from this and previous posts before the next RDMA
/// descriptor"), so every BTE post is fenced and completions arrive in posting order.
pub(super) fn fence(d: &mut firmware_spec::gemini::post::PostDescriptor) {
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
        if data.len() <= self.cfg.vshort {
            let h = Header {
                kind: Kind::Eager,
                sync,
                src: self.rank,
                bits,
                len: data.len() as u64,
                id: op.0,
                va: 0,
                mh: MemHandle::default(),
            };
            if sync {
                self.sync_wait.insert(op.0, op);
            } else {
                self.done.insert(op, Completion::Sent);
            }
            self.count("E0");
            self.smsg(dest, &h, data)?;
        } else {
            let s = self.stage(data.len())?;
            s.mem.write(0, data).map_err(mem_err)?;
            let h = Header {
                kind: Kind::Rts,
                sync,
                src: self.rank,
                bits,
                len: data.len() as u64,
                id: op.0,
                va: s.mem.va(),
                mh: s.mh,
            };
            self.rndv_out.insert(op.0, (op, s));
            self.count("R0");
            self.smsg(dest, &h, &[])?;
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
        if let Some(c) = self.done.remove(&op) {
            return Ok(Some(c));
        }
        self.progress()?;
        Ok(self.done.remove(&op))
    }

    fn progress(&mut self) -> Result<bool> {
        let mut did = false;
        for peer in 0..self.size {
            if !self.backlog[peer as usize].is_empty() {
                did |= self.flush_backlog(peer)?;
            }
        }
        did |= self.drain_tx()?;
        did |= self.drain_mailboxes()?;
        if !did {
            self.nic.progress();
        }
        Ok(did)
    }

    fn stats(&self) -> Stats {
        self.stats.clone()
    }

    fn win_create(&mut self, len: usize) -> Result<(WinId, Vec<u8>)> {
        // Fresh pages are zeroed; window memory never comes from the staging cache.
        let mem = self
            .nic
            .space()
            .alloc((len.max(8) as u64).next_multiple_of(8))
            .map_err(mem_err)?;
        let mh = self
            .nic
            .mem_register(mem.va(), mem.len(), None, MemFlags::READWRITE)
            .map_err(tr)?;
        Ok(self.rma.create(Staged { mem, mh }))
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
            || self.backlog.iter().any(|b| !b.is_empty())
            || !self.gets.is_empty()
            || !self.rndv_out.is_empty()
        {
            self.progress()?;
            if let Some(why) = self.pmi.aborted() {
                return Err(Error::Transport(format!("job aborted: {why}")));
            }
            if start.elapsed() > FINALIZE_LIMIT {
                let why = format!(
                    "finalize: {} messages undelivered, {} rendezvous sends unmatched, {} gets \
                     in flight",
                    self.smsg_out,
                    self.rndv_out.len(),
                    self.gets.len()
                );
                self.pmi.abort(&why);
                return Err(Error::Timeout(why));
            }
        }
        // Nobody writes into this rank's mailboxes once every rank got here.
        self.pmi.fence()
    }
}

/// How long finalize waits for this rank's traffic to drain.
const FINALIZE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

impl GniTransport {
    fn post_rma(
        &mut self,
        target: Rank,
        op: OpId,
        mut d: firmware_spec::gemini::post::PostDescriptor,
        bte: bool,
        stage: Staged,
        finish: rma::Finish,
    ) -> Result<()> {
        self.next += 1;
        let token = self.next;
        d.post_id = token;
        if bte {
            fence(&mut d);
        }
        let ep = self.ep(target)?;
        if bte {
            ep.post_rdma(&d).map_err(tr)?;
        } else {
            ep.post_fma(&d).map_err(tr)?;
        }
        self.count(if bte { "bte" } else { "fma" });
        self.rma.track(token, op, stage, finish);
        Ok(())
    }
}

impl Drop for GniTransport {
    fn drop(&mut self) {
        // Registrations go back before the memory they cover; the CDM, CQs and endpoints
        // close after (kgni frees whatever a closing client still holds).
        for (_, (_, s)) in self.rndv_out.drain() {
            let _ = self.nic.mem_deregister(&s.mh);
        }
        for (_, g) in self.gets.drain() {
            let _ = self.nic.mem_deregister(&g.stage.mh);
        }
        for s in self.rma.drain() {
            let _ = self.nic.mem_deregister(&s.mh);
        }
        for (_, v) in self.cache.drain() {
            for s in v {
                let _ = self.nic.mem_deregister(&s.mh);
            }
        }
        let _ = self.nic.mem_deregister(&self.mbox.mh);
    }
}
