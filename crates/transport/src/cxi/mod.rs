//! The cxi transport: what libfabric's CXI provider does for Cray MPICH on a Cassini, over
//! `userlib::cxi` (cassini.md, fi_cxi.7).
//!
//! - [`endpoint`]: the NIC objects of a rank (LNI, domain, EQ, command queues, PtlTEs) and
//!   the commands it writes.
//! - [`proto`]: the transport's match bits, header data and buffer ids.
//! - [`tx`]: sends — IDC up to 192 B, eager DMA up to `FI_CXI_RDZV_THRESHOLD`, rendezvous
//!   puts offloaded to the NIC above it; synchronous sends.
//! - [`rx`]: hardware matching — posted receives as priority LEs, overflow buffers and
//!   unexpected headers, SEARCH for probe, SEARCH_AND_DELETE for claim, UNLINK for cancel.
//! - [`sw`]: software matching — request buffers of a software-managed PtlTE and
//!   [`crate::matching::Matcher`].
//! - [`fc`]: flow-control recovery (all modes): the senders' hold, FC_NOTIFY and in-order
//!   replay after FC_RESUME, the onload of the unexpected headers, the receiver's re-enable
//!   (in hardware matching again, or SOFTWARE_MANAGED), and the hybrid switch to software
//!   matching (posted receives moved).
//! - [`events`]: the event loop that drives all of it.
//! - [`rma`]: windows on a non-matching PtlTE, put/get as DMA, atomics as Cassini AMOs.
//! - [`keyed`]: memory regions named by key (libfabric memory registration): one LE each on
//!   the RMA PtlTE; puts, gets and AMOs by key that fail alone on the NIC's error.

pub mod config;
pub mod endpoint;
mod events;
mod fc;
mod keyed;
mod landing;
pub mod proto;
pub mod report;
mod retry;
mod rma;
pub use keyed::{Arrival, KEY_MAX, KEYED_DATA, KeyedAmo, KeyedFailure, amo_size};
mod rx;
mod sw;
mod tx;
mod zcopy;

use driver::clock::Instant;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use driver::cassini::CxiDevice;
use firmware_spec::cassini::le::{LeFlags, PtlList, PtlteState};

use crate::env::Env;
use crate::error::{Error, Result};
use crate::matching::Matcher;
use crate::{
    Atomic, Completion, Envelope, MatchSpec, OpId, Rank, SendMode, Stats, Transport, WinId,
};
use pmi::Pmi;

pub use config::{Config, MatchMode};
use endpoint::{Addr, Buf, Endpoint};
use landing::LandingBuf;

/// A send in flight.
struct SendOp {
    dest: Rank,
    /// Match bits as sent (MPI bits and the sync flag).
    bits: u64,
    len: usize,
    /// The payload of an IDC send, kept for a replay after flow control.
    idc: Option<IdcPayload>,
    /// The payload of an eager or rendezvous send.
    staging: Option<Buf>,
    /// Needs the receiver's match (synchronous mode).
    sync: bool,
    /// Rendezvous id (the receiver's Get completes the send).
    rdzv: Option<u8>,
    acked: bool,
    matched: bool,
    pulled: bool,
}

/// The payload of an IDC send, held inline (no allocation per small message).
struct IdcPayload {
    len: u8,
    bytes: [u8; config::IDC_MAX],
}

impl IdcPayload {
    /// `data.len() <= IDC_MAX`.
    fn new(data: &[u8]) -> Self {
        let mut p = IdcPayload {
            len: data.len() as u8,
            bytes: [0; config::IDC_MAX],
        };
        p.bytes[..data.len()].copy_from_slice(data);
        p
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// A receive in flight (posted, claimed, or matched and waiting for its data).
struct RecvOp {
    capacity: usize,
    bid: u16,
    /// What a receive posted as a priority LE matches (moved to software matching by the
    /// hybrid switch).
    spec: Option<MatchSpec>,
    /// An UNLINK of its LE is under way.
    cancelling: bool,
    /// Its append found no list entry (NO_SPACE): the hybrid switch posts it in software.
    append_failed: bool,
    /// The LE's buffer, or where a software Get lands.
    buf: Option<Buf>,
    /// Matched message.
    env: Option<Envelope>,
    /// The data landed in the LE (priority match).
    expected: bool,
    /// Eager bytes taken from an overflow or request buffer.
    eager: Option<Vec<u8>>,
    /// Waiting for the overflow PUT event of the message at this IOVA.
    ux_start: Option<u64>,
    /// Waiting for the rendezvous REPLY.
    rdzv_pending: bool,
    /// Where the rest of its rendezvous message comes from (a refused Get goes again).
    rdzv_from: Option<retry::RdzvSource>,
    /// Times its Get was issued again (`retry`).
    tries: u32,
    /// `buf` is the application's own memory: the message lands in place (`zcopy`).
    zero_copy: bool,
}

/// What tells apart unexpected messages stored at one IOVA: initiator, match bits, length.
type UxKey = (u32, u64, u32);

/// A message held by software matching (software mode, or hybrid after the switch).
struct SwMsg {
    eager: Vec<u8>,
    /// Match bits with transport bits (rendezvous and sync flags).
    bits: u64,
    header_data: u64,
}

/// An RMA operation in flight.
struct RmaOp {
    buf: Option<Buf>,
    len: usize,
    fetch: bool,
    /// Where the fetched bytes land in `buf`.
    at: u64,
    /// The command, to issue it again if the target refuses it (`retry`).
    cmd: retry::RmaCmd,
    /// Times it was issued again.
    tries: u32,
}

/// A window: this rank's memory exposed on the RMA PtlTE, and every rank's key.
struct Window {
    buf: Buf,
    /// Buffer id of its LE (`proto::WIN_BID` range).
    bid: u16,
    len: usize,
    keys: Vec<Option<u64>>,
}

/// The cxi transport of one rank.
pub struct CxiTransport {
    rank: Rank,
    size: u32,
    cfg: Config,
    /// Current matching (hybrid starts in hardware).
    software: bool,
    peers: Vec<Addr>,
    match_ids: Vec<u32>,
    by_match_id: HashMap<u32, Rank>,
    next_op: u64,
    done: BTreeMap<OpId, Completion>,
    sends: HashMap<u64, SendOp>,
    recvs: HashMap<u64, RecvOp>,
    /// Receives whose bytes are all there, until tested (`rx::Arrived`).
    arrived: HashMap<OpId, rx::Arrived>,
    rma_ops: HashMap<u64, RmaOp>,
    bids: HashMap<u16, u64>,
    next_bid: u16,
    rdzv_ids: HashMap<u8, u64>,
    next_rid: u8,
    landing: Vec<LandingBuf>,
    /// Unexpected eager data by IOVA in an overflow buffer (hardware mode). Zero-byte
    /// messages share the IOVA of the next message, so one IOVA may hold several.
    ux_data: HashMap<u64, Vec<(UxKey, Vec<u8>)>>,
    /// Receives waiting for the overflow data at an IOVA.
    ux_waiting: HashMap<u64, Vec<(UxKey, u64)>>,
    /// Software matching.
    matcher: Matcher<u64, SwMsg>,
    /// Answers of target commands (SEARCH, UNLINK) by buffer id.
    answers: HashMap<u16, firmware_spec::cassini::event::TargetLong>,
    windows: BTreeMap<u32, Window>,
    next_win: u32,
    /// Freed windows' memory, kept registered until the transport goes.
    retired: Vec<Buf>,
    /// Regions exposed by key and operations by key (`keyed`).
    keyed: keyed::Keyed,
    stats: Stats,
    /// Flow-control recovery (`fc`).
    fc: fc::FcState,
    /// Refused operations to issue again (`retry`).
    retries: retry::Retries,
    /// A fatal error seen by the event loop: every later call returns it.
    fatal: Option<String>,
    /// Events consumed and not yet acknowledged (`events`).
    ack_batch: events::AckBatch,
    /// Idle progress calls left that only poll host memory before the device's progress
    /// hook runs again (`userlib::cxi::wait`'s bounded spin).
    idle_spins: u32,
    finalized: bool,
    /// `MPICH_OFI_CXI_COUNTER_REPORT`: the counters sampled at init.
    counters: Option<report::CounterReport>,
    /// Zero copy: the registration cache of application buffers (`zcopy`). Before `ep`:
    /// its registrations go before the LNI.
    /// `NICEMU_TRANSPORT_STATS`: the statistics at finalize.
    stats_report: crate::StatsReport,
    zc: crate::regcache::ZeroCopy<userlib::cxi::Md>,
    ep: Endpoint,
    /// The rest of the control block is dropped after the endpoint's buffers.
    _pmi: Box<dyn Pmi>,
}

impl CxiTransport {
    /// Open the NIC, build the endpoint, post the landing buffers and exchange addresses
    /// with every rank through `pmi`.
    pub fn new(
        devices: &[Arc<CxiDevice>],
        mut pmi: Box<dyn Pmi>,
        env: &Env,
    ) -> Result<CxiTransport> {
        let (local_size, local_index) = pmi.local();
        let cfg = Config::from_env(env, local_size, local_index, devices.len())?;
        if devices.is_empty() {
            return Err(Error::Transport("cxi: no cxi device on this node".into()));
        }
        if cfg.nic_verbose > 0 {
            crate::env::eprint_line(&cfg.nic_line(pmi.rank(), local_size, local_index));
        }
        let rx_state = if cfg.mode == MatchMode::Software {
            PtlteState::SoftwareManaged
        } else {
            PtlteState::Enabled
        };
        let ep = Endpoint::new(
            devices,
            cfg.device,
            rx_state,
            cfg.traffic_class,
            cfg.timeout,
        )?;
        // The real library reads the counters from the NIC's telemetry files, which any
        // process may read; here a second, read-only use of an admin handle of the same NIC
        // maps them. Without the variable (level 1 by default) a NIC whose counters cannot
        // be read just gives no report; a level asked for explicitly is an error then.
        let counters = if cfg.counter_report > 0 {
            let admin = userlib::cxi::OpenOptions {
                admin: true,
                space: None,
            };
            match userlib::cxi::open_device_with(devices, cfg.device, admin)
                .and_then(|d| d.map_csr())
            {
                Ok(csrs) => report::CounterReport::start(cfg.counter_report, csrs)?,
                Err(_) if env.get(report::VAR).is_none() => None,
                Err(e) => {
                    return Err(Error::Transport(format!(
                        "cxi: {}: cannot read the NIC's counters: {e}",
                        report::VAR
                    )));
                }
            }
        } else {
            None
        };
        let rank = pmi.rank();
        let size = pmi.size();
        let mut t = CxiTransport {
            rank,
            size,
            software: cfg.mode == MatchMode::Software,
            cfg,
            peers: Vec::new(),
            match_ids: Vec::new(),
            by_match_id: HashMap::new(),
            next_op: 1,
            done: BTreeMap::new(),
            sends: HashMap::new(),
            recvs: HashMap::new(),
            arrived: HashMap::new(),
            rma_ops: HashMap::new(),
            bids: HashMap::new(),
            next_bid: proto::RECV_BID,
            rdzv_ids: HashMap::new(),
            next_rid: 0,
            landing: Vec::new(),
            ux_data: HashMap::new(),
            ux_waiting: HashMap::new(),
            matcher: Matcher::new(),
            answers: HashMap::new(),
            windows: BTreeMap::new(),
            next_win: 1,
            retired: Vec::new(),
            keyed: keyed::Keyed::default(),
            stats: Stats::new(),
            fc: fc::FcState::default(),
            retries: retry::Retries::default(),
            fatal: None,
            ack_batch: events::AckBatch::default(),
            idle_spins: 0,
            finalized: false,
            counters,
            zc: crate::regcache::ZeroCopy::new(env)?,
            stats_report: crate::StatsReport::from_env(env)?,
            ep,
            _pmi: Box::new(NoPmi),
        };
        for k in [
            "idc",
            "eager",
            "rendezvous",
            "send_staged",
            "send_zero_copy",
            "recv_zero_copy",
            "recv_zero_copy_fallback",
            "unexpected",
            "expected",
            "sync_notices",
            "recv_rendezvous",
            "sw_gets",
            "hw_gets",
            // Flow control: present (0) in every mode, so that "no episode" reads as 0.
            "flow_control",
            "fc_recovered",
            "onloaded",
            "reposted",
            "append_failed",
            "fc_dropped",
            "fc_replayed",
            "fc_notify_sent",
            "fc_notify_received",
            "ctrl_retries",
            "ux_matched_early",
            "retries",
        ] {
            t.stats.insert(k, 0);
        }
        t.setup_rx()?;
        // The staging buffers' LAC on the rendezvous-source PtlTE.
        let b = t.ep.buf(1)?;
        t.ep.expose_lac(b.md.lac())?;
        t.ep.release(b);

        pmi.put("cxi-addr", &t.ep.addr().encode())?;
        pmi.fence()?;
        for r in 0..size {
            let v = pmi.get(r, "cxi-addr")?;
            let a = Addr::decode(&v).ok_or_else(|| {
                Error::Transport(format!("cxi: rank {r} published a bad address"))
            })?;
            let id = t.ep.match_id_of(a);
            t.peers.push(a);
            t.match_ids.push(id);
            t.by_match_id.insert(id, r);
        }
        t._pmi = pmi;
        t.progress()?;
        Ok(t)
    }

    /// This endpoint's address as published to peers (NID and PID, `Addr::encode`).
    pub fn address(&self) -> Vec<u8> {
        self.ep.addr().encode()
    }

    /// Make the endpoint at `addr` (bytes of [`CxiTransport::address`]) a peer after
    /// initialization, for users that learn addresses on their own (a libfabric address
    /// vector) rather than through PMI. Returns its rank: the rank it already had if its
    /// NIC address is known (this endpoint itself is rank 0 of a one-rank PMI job), else the
    /// next one.
    pub fn add_peer(&mut self, addr: &[u8]) -> Result<Rank> {
        let a = Addr::decode(addr).ok_or_else(|| {
            Error::Transport(format!("cxi: a bad peer address of {} bytes", addr.len()))
        })?;
        let id = self.ep.match_id_of(a);
        if let Some(&r) = self.by_match_id.get(&id) {
            return Ok(r);
        }
        let r = self.size;
        self.peers.push(a);
        self.match_ids.push(id);
        self.by_match_id.insert(id, r);
        self.size += 1;
        Ok(r)
    }

    /// The control LE and the overflow (hardware) or request (software) buffers.
    fn setup_rx(&mut self) -> Result<()> {
        let ctrl = self.ep.buf(4096)?;
        // Control messages (zero bytes, `proto`) go to a persistent LE on the RMA PtlTE,
        // which is not flow controlled (libfabric's control PtlTE shares index 117).
        let pte = self.ep.rma.pte.clone();
        self.ep.append(
            &pte,
            PtlList::Priority,
            Some((&ctrl, 0)),
            LeFlags::OP_PUT | LeFlags::EVENT_LINK_DISABLE | LeFlags::EVENT_UNLINK_DISABLE,
            u32::MAX,
            proto::CTRL,
            !proto::CTRL,
            proto::CTRL_BID,
            0,
        )?;
        // Kept alive with the landing buffers (index 0 is never used for landing).
        let (count, size) = if self.software {
            (self.cfg.req_count, self.cfg.req_size)
        } else {
            (self.cfg.oflow_count, self.cfg.oflow_size)
        };
        self.landing.push(LandingBuf {
            retired: true,
            ..LandingBuf::new(ctrl)
        });
        for _ in 0..count {
            let buf = self.ep.buf(size)?;
            self.landing.push(LandingBuf::new(buf));
            let i = self.landing.len() - 1;
            self.append_landing(i)?;
        }
        Ok(())
    }

    /// (Re)append landing buffer `i` to the overflow or request list.
    fn append_landing(&mut self, i: usize) -> Result<()> {
        let list = if self.software {
            PtlList::Request
        } else {
            PtlList::Overflow
        };
        // Room for the largest eager message and its wire headers must remain, else the NIC
        // unlinks the buffer (`min_free`, cassini.md §4.2).
        let min_free = (self.cfg.rdzv_threshold.max(config::IDC_MAX) + 256) as u32;
        let pte = self.ep.rx.pte.clone();
        let lb = &mut self.landing[i];
        if lb.retired {
            return Ok(());
        }
        lb.posted();
        let len = lb.buf.mem.len();
        let buf = Buf {
            mem: lb.buf.mem.clone(),
            md: lb.buf.md.clone(),
            user: false,
        };
        self.ep.append(
            &pte,
            list,
            Some((&buf, len)),
            LeFlags::OP_PUT
                | LeFlags::MANAGE_LOCAL
                | LeFlags::NO_TRUNCATE
                | LeFlags::EVENT_LINK_DISABLE
                | LeFlags::EVENT_UNLINK_DISABLE
                | LeFlags::UNRESTRICTED_BODY_RO
                | LeFlags::UNRESTRICTED_END_RO,
            u32::MAX,
            0,
            u64::MAX,
            proto::BUF_BID + i as u16,
            min_free,
        )
    }

    fn new_op(&mut self) -> u64 {
        let id = self.next_op;
        self.next_op += 1;
        id
    }

    fn new_bid(&mut self, op: u64) -> u16 {
        loop {
            let b = self.next_bid;
            self.next_bid = if b == u16::MAX - 1 {
                proto::RECV_BID
            } else {
                b + 1
            };
            if let std::collections::hash_map::Entry::Vacant(e) = self.bids.entry(b) {
                e.insert(op);
                return b;
            }
        }
    }

    fn bump(&mut self, key: &'static str) {
        *self.stats.entry(key).or_insert(0) += 1;
    }

    fn check(&self) -> Result<()> {
        match &self.fatal {
            Some(m) => Err(Error::Transport(m.clone())),
            None => Ok(()),
        }
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

    /// The rank of an initiator match id.
    fn rank_of(&self, id: u32) -> Result<Rank> {
        self.by_match_id.get(&id).copied().ok_or_else(|| {
            Error::Transport(format!("cxi: a message from unknown initiator {id:#x}"))
        })
    }

    /// Run the event loop until `f` says done, or the transport's timeout.
    fn wait_for<T>(&mut self, what: &str, mut f: impl FnMut(&mut Self) -> Option<T>) -> Result<T> {
        let start = Instant::now();
        loop {
            self.progress()?;
            if let Some(v) = f(self) {
                return Ok(v);
            }
            if start.elapsed() > self.cfg.timeout {
                return Err(Error::Timeout(format!("cxi: {what}")));
            }
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Whether matching is currently done in software.
    pub fn software_matching(&self) -> bool {
        self.software
    }
}

/// Placeholder PMI kept while the real one is in use during init.
struct NoPmi;

impl Pmi for NoPmi {
    fn rank(&self) -> u32 {
        0
    }
    fn size(&self) -> u32 {
        0
    }
    fn local(&self) -> (u32, u32) {
        (0, 0)
    }
    fn put(&mut self, _: &str, _: &[u8]) -> pmi::Result<()> {
        Ok(())
    }
    fn fence(&mut self) -> pmi::Result<()> {
        Ok(())
    }
    fn get(&mut self, _: u32, key: &str) -> pmi::Result<Vec<u8>> {
        Err(pmi::Error::Failed(format!("cxi: PMI key {key} after init")))
    }
    fn abort(&self, _: &str) {}
    fn aborted(&self) -> Option<String> {
        None
    }
}

impl Transport for CxiTransport {
    fn name(&self) -> &'static str {
        "cxi"
    }

    fn abort(&mut self, why: &str) {
        self._pmi.abort(why);
    }

    fn aborted(&self) -> Option<String> {
        self._pmi.aborted()
    }

    fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        // Complete what this rank sent (sends finish on their ACK), then wait for every rank,
        // so no peer still writes into this rank's buffers when they go.
        let start = Instant::now();
        // Flow control also needs this rank: to replay what a peer dropped, or to finish
        // recovering its own PtlTE and resume the peers waiting for it.
        while (!self.sends.is_empty() || self.fc_busy()) && start.elapsed() < self.cfg.timeout {
            if self._pmi.aborted().is_some() || self.fatal.is_some() {
                break;
            }
            self.progress()?;
        }
        self.stats_report
            .print(self.rank, "cxi", &crate::Transport::stats(self));
        self.counter_report()?;
        self._pmi.finalize();
        Ok(())
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn send(&mut self, dest: Rank, bits: u64, data: &[u8], mode: SendMode) -> Result<OpId> {
        self.check()?;
        self.check_rank(dest)?;
        self.start_send(dest, bits, data, mode == SendMode::Synchronous)
    }

    fn recv(&mut self, spec: MatchSpec, capacity: usize) -> Result<OpId> {
        self.check()?;
        if let Some(s) = spec.source {
            self.check_rank(s)?;
        }
        self.fc_settle()?;
        if self.software {
            self.sw_recv(spec, capacity)
        } else if let Some((_, op)) = self.sw_take(&spec, capacity)? {
            Ok(op)
        } else {
            self.hw_recv(spec, capacity)
        }
    }

    fn cancel(&mut self, op: OpId) -> Result<bool> {
        self.check()?;
        if self.done.contains_key(&op) {
            return Ok(false);
        }
        self.fc_settle()?;
        if self.software {
            self.sw_cancel(op)
        } else {
            self.hw_cancel(op)
        }
    }

    fn probe(&mut self, spec: MatchSpec) -> Result<Option<Envelope>> {
        self.check()?;
        self.progress()?;
        self.fc_settle()?;
        if self.software {
            Ok(self.matcher.probe(&spec))
        } else if let Some(env) = self.matcher.probe(&spec) {
            Ok(Some(env))
        } else {
            self.hw_probe(spec)
        }
    }

    fn claim(&mut self, spec: MatchSpec) -> Result<Option<(Envelope, OpId)>> {
        self.check()?;
        self.progress()?;
        self.fc_settle()?;
        if self.software {
            self.sw_claim(spec)
        } else if let Some(c) = self.sw_take(&spec, usize::MAX)? {
            Ok(Some(c))
        } else {
            self.hw_claim(spec)
        }
    }

    fn test(&mut self, op: OpId) -> Result<Option<Completion>> {
        match self.test_maybe_into(op, None)? {
            Some(c) => self.zc.land(op, c).map(Some),
            None => Ok(None),
        }
    }

    fn test_into(&mut self, op: OpId, out: &mut [u8]) -> Result<Option<Completion>> {
        match self.test_maybe_into(op, Some(out))? {
            Some(c) => self.zc.land(op, c).map(Some),
            None => Ok(None),
        }
    }

    fn zero_copy_min(&self) -> Option<usize> {
        self.zc.min(self.ep.dev.process_memory())
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

    fn flush(&mut self) -> Result<()> {
        self.check()?;
        self.ep.flush_tx()
    }

    fn progress(&mut self) -> Result<bool> {
        self.check()?;
        // Sends issued since the last progress get their doorbell now: every wait goes
        // through here, so none waits for a command that was never rung.
        self.ep.flush_tx()?;
        let did = self.drain_events()?;
        self.check()?;
        if let Err(e) = self.fc_step().and_then(|()| self.retry_step()) {
            self.fatal.get_or_insert_with(|| e.to_string());
        }
        // Flow-control replays just issued.
        self.ep.flush_tx()?;
        if did {
            self.idle_spins = 0;
        } else if self.idle_spins > 0 {
            // What the device produces lands in host memory: poll it a while before
            // handing the CPU to the device (which yields when it has nothing to run).
            self.idle_spins -= 1;
            std::hint::spin_loop();
        } else if !self.ep.dev.progress() {
            self.idle_spins = userlib::cxi::wait::SPIN_POLLS;
        }
        self.check()?;
        Ok(did)
    }

    fn sleep(&mut self, limit: std::time::Duration) -> Result<bool> {
        if !self.ep.eq.can_sleep() {
            return Ok(false);
        }
        self.check()?;
        // Re-issued Gets and flow-control replays are timed by this rank: poll meanwhile.
        if self.retries.any() || self.fc_busy() {
            return Ok(false);
        }
        self.ep.sleep(limit)
    }

    fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        self.zc.report(&mut s);
        s
    }

    fn win_create(&mut self, len: usize) -> Result<(WinId, Vec<u8>)> {
        self.check()?;
        self.rma_win_create(len)
    }

    fn win_connect(&mut self, win: WinId, keys: Vec<Vec<u8>>) -> Result<()> {
        self.rma_win_connect(win, keys)
    }

    fn win_read(&mut self, win: WinId, offset: usize, out: &mut [u8]) -> Result<()> {
        self.rma_win_read(win, offset, out)
    }

    fn win_write(&mut self, win: WinId, offset: usize, data: &[u8]) -> Result<()> {
        self.rma_win_write(win, offset, data)
    }

    fn win_memory(&mut self, win: WinId) -> Option<*mut u8> {
        self.window(win).ok()?.buf.mem.host_ptr()
    }

    fn put(&mut self, win: WinId, target: Rank, offset: usize, data: &[u8]) -> Result<OpId> {
        self.check()?;
        self.check_rank(target)?;
        self.rma_put(win, target, offset, data)
    }

    fn get(&mut self, win: WinId, target: Rank, offset: usize, len: usize) -> Result<OpId> {
        self.check()?;
        self.check_rank(target)?;
        self.rma_get(win, target, offset, len)
    }

    fn atomic(&mut self, win: WinId, target: Rank, offset: usize, atomic: &Atomic) -> Result<OpId> {
        self.check()?;
        self.check_rank(target)?;
        self.rma_atomic(win, target, offset, atomic)
    }

    fn win_free(&mut self, win: WinId) -> Result<()> {
        self.rma_win_free(win)
    }
}

impl CxiTransport {
    /// The last step of finalize: the fence every rank waits in, with the
    /// `MPICH_OFI_CXI_COUNTER_REPORT` output around it (each rank's counter line before,
    /// world rank 0's network summary after, from the timeouts every NIC's first local
    /// rank published).
    fn counter_report(&mut self) -> Result<()> {
        const KEY: &str = "cxi-counter-report";
        let Some(rep) = &self.counters else {
            return Ok(self._pmi.fence()?);
        };
        let level = rep.level();
        let deltas = rep.deltas()?;
        if level >= 2 {
            crate::env::eprint_line(&report::rank_line(self.rank, self.cfg.device, &deltas));
        }
        let mine = if self.cfg.first_on_nic {
            format!("1 {}", report::timeouts(&deltas))
        } else {
            "0 0".to_owned()
        };
        self._pmi.put(KEY, mine.as_bytes())?;
        self._pmi.fence()?;
        if self.rank != 0 {
            return Ok(());
        }
        let (mut nics, mut timeouts) = (0u32, 0u64);
        for r in 0..self.size {
            let v = self._pmi.get(r, KEY)?;
            let v = String::from_utf8_lossy(&v);
            let mut it = v.split_whitespace().map(str::parse::<u64>);
            match (it.next(), it.next()) {
                (Some(Ok(n)), Some(Ok(t))) => {
                    nics += n as u32;
                    timeouts += t;
                }
                _ => {
                    return Err(Error::Transport(format!(
                        "cxi: {}: rank {r} published {v:?}",
                        report::VAR
                    )));
                }
            }
        }
        if let Some(line) = report::summary_line(level, nics, timeouts) {
            crate::env::eprint_line(&line);
        }
        Ok(())
    }
}

impl Drop for CxiTransport {
    fn drop(&mut self) {
        // Let the commands finish before the queues go away (ring those not rung yet).
        let _ = self.ep.flush_tx();
        let _ = self
            .ep
            .txq
            .wait_empty(Some(std::time::Duration::from_secs(1)));
    }
}
