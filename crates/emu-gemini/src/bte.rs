//! BTE (Block Transfer Engine): TX descriptor rings on 4 channels, asynchronous progress in
//! paced steps, PUT/GET/SEND transfers up to 4 GiB, completion events, and the RX channels
//! that receive SENDs.
//!
//! Formats: `ghal_tx_desc_t`, `ghal_txvc_desc_t`, `ghal_rx_desc_t`, `ghal_rxvc_desc_t`,
//! `ghal_cpurx_desc_t` (`firmware_spec::gemini::bte`). Posting protocol and our readings:
//! docs/gemini-programming.md ("BTE").
//!
//! A doorbell only arms a timer; the work happens in the BTE step (a timer handler), which
//! issues at most `bte_max_burst` bytes per call (token bucket at `bte_bandwidth`), so neither
//! the CPU that rang the doorbell nor the engine is held for long.
//!
//! The TX side (`Bte`) reaches the rest of the NIC only through the `BtePort` trait (memory,
//! request table, CQs, interrupts, its step timer); answers come back from the device as
//! `Bte::xfer_answered`. The RX side (`BteRx`) is handed the DMA port and returns the
//! interrupt to raise; the target side feeds it SENDs.

use crate::config::GeminiConfig;
use crate::fault::Fault;
use crate::mdd::{Access, Domains};
use crate::packet::{BTE_STREAM_BASE, HEADER_LEN, Header, Kind, TC_BTE, TC_FMA, flag};
use crate::regs::{self, Target, counter};
use crate::request::{Dest, Landing, Owner, Req};
use emu_core::dma::{DmaPort, Segment};
use emu_core::hash::IntMap;
use emu_core::sparse::SparseTable;
use emu_core::time::{SimDuration, SimTime};
use firmware_spec::gemini::bte::{
    BteOp, CpuRxDescriptor, RXD_FLAG_BTE_COMPLETE, RXD_FLAG_ERR_STATUS_SHIFT,
    RXD_FLAG_IMM_AVAILABLE, RxChannel, RxDescriptor, RxdMode, TxChannel, TxDescriptor, TxdFlags,
    TxdMode1, TxdMode2, rxvc_flag, txvc_flag,
};
use firmware_spec::gemini::cqe::{Cqe, CqeSource, HwStatus};
use firmware_spec::gemini::limits::{BTE_CHANNELS, BTE_RX_DESCRIPTORS, BTE_TX_SLOTS};
use firmware_spec::gemini::pci::{IRQ_RX, IRQ_TX, irq_index};

/// What the BTE's TX side needs from the rest of the NIC: memory to read from and write to,
/// the request table it sends through, CQs and interrupts for completions, and a timer for
/// its paced steps. The device implements it.
pub(crate) trait BtePort {
    /// Current virtual time.
    fn now(&self) -> SimTime;
    /// Add `n` to model counter `c` ([`regs::counter`]).
    fn count(&mut self, c: u32, n: u64);
    /// The memory domains (transfers with NAT on).
    fn domains(&self) -> &Domains;
    /// The host DMA port (NAT off, and TXD status write-back).
    fn dma(&self) -> &DmaPort;
    /// Tag and send a request on traffic class `tc`; its answer (or timeout) comes back as
    /// [`Bte::xfer_answered`] for `Owner::Xfer`.
    fn issue(&mut self, req: Req, dest: &Dest, hdr: Header, payload: &[u8], tc: u8);
    /// [`BtePort::issue`] of a frame built in place: `frame` is [`HEADER_LEN`] bytes of
    /// room for the header, then the payload.
    fn issue_frame(&mut self, req: Req, dest: &Dest, hdr: Header, frame: Vec<u8>, tc: u8);
    /// An empty buffer of at least `cap` bytes for a frame (recycled when the engine has
    /// one).
    fn frame_buffer(&mut self, cap: usize) -> Vec<u8>;
    /// Whether a packet to physical PE `pe` may be a train (`emu_core::fabric::Train`,
    /// `DeviceIo::train_ok`).
    fn train_ok(&self, pe: u32) -> bool;
    /// Send a train of `frames` PUT frames as one packet: `hdr` (the first frame's), the
    /// payload left in host memory at `segments` (this NIC's DMA addresses). Each frame is
    /// a request whose answer comes back as [`Bte::xfer_answered`].
    fn issue_train(
        &mut self,
        req: Req,
        dest: &Dest,
        hdr: Header,
        frames: u32,
        segments: Vec<Segment>,
        tc: u8,
    );
    /// Deliver a completion event to CQ `cqh`.
    fn post_cqe(&mut self, cqh: u64, cqe: Cqe);
    /// Raise MSI-X vector `v`.
    fn raise(&mut self, v: u16);
    /// Call [`Bte::step`] after `delay`.
    fn step_after(&mut self, delay: SimDuration);
}

/// Largest BTE SEND (one RX buffer, one frame). Our choice.
pub const SEND_MAX_BYTES: u64 = 64 * 1024;
const CHANNELS: usize = BTE_CHANNELS as usize;

/// Where the local side of a transfer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Local {
    Mdd(Access, u64),
    Phys(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum XPhase {
    Data,
    Remote,
}

/// One TXD being executed.
#[derive(Clone, Debug)]
struct Xfer {
    ch: usize,
    pos: u64,
    txd: TxDescriptor,
    op: BteOp,
    local: Local,
    dest: Dest,
    issued: u64,
    total: u64,
    processed: bool,
    outstanding: u32,
    error: Option<Fault>,
    phase: XPhase,
    last_progress: SimTime,
    /// Some of its frames went as a train: their payload is read from the source when the
    /// train lands, so the local event waits for their answers.
    trained: bool,
    /// The local event is owed until every request is answered (`trained`).
    local_owed: bool,
}

#[derive(Clone, Debug, Default)]
struct TxChan {
    regs: TxChannel,
    err_rc: u32,
    completed: u64,
    active: Option<u32>,
    inflight: u32,
}

/// The TX side of the BTE of one NIC: TX channels and their TXD ring, the transfers being
/// executed, and the pacing state.
#[derive(Clone, Debug)]
pub(crate) struct Bte {
    tx: [TxChan; CHANNELS],
    /// TX descriptor slots, stored sparsely.
    txd: SparseTable<[u64; 8]>,
    tx_base: u64,
    tx_count: u64,
    xfers: IntMap<u32, Xfer>,
    next_xfer: u32,
    step_armed: bool,
    rr: usize,
    credit: u64,
    refill: SimTime,
    /// Most requests of one transfer in flight.
    max_outstanding: u32,
    /// Largest data packet (`GeminiConfig::bte_packet_bytes`).
    packet_bytes: u32,
    /// Bytes per step unpaced, pacing quantum otherwise (`bte_step_bytes`).
    step_bytes: u64,
    /// Pacing bandwidth in bytes/s, 0 = unpaced (`bte_bandwidth`).
    bandwidth: u64,
    /// Most bytes one step may issue (`bte_max_burst`).
    max_burst: u64,
}

/// The RX side of the BTE of one NIC: RX channels and their descriptor ring, into which
/// SENDs from the network land.
#[derive(Clone, Debug)]
pub(crate) struct BteRx {
    rx: [RxChannel; CHANNELS],
    /// RX descriptors, stored sparsely.
    rxd: SparseTable<u64>,
    rx_base: u64,
    rx_count: u64,
}

impl Default for BteRx {
    fn default() -> Self {
        BteRx {
            rx: Default::default(),
            rxd: SparseTable::new(BTE_RX_DESCRIPTORS as usize, 0),
            rx_base: 0,
            rx_count: 0,
        }
    }
}

fn u16_lane(reg: u64, ch: usize) -> u64 {
    (reg >> (16 * ch)) & 0xFFFF
}

fn qword_of(bytes: &[u8], q: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = bytes.get(q * 8..q * 8 + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

fn patch<const N: usize>(img: &mut [u8; N], q: usize, v: u64) {
    if let Some(d) = img.get_mut(q * 8..q * 8 + 8) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

impl Bte {
    /// TX descriptor slots backed by storage (0 at reset).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.txd.allocated_entries()
    }

    /// A BTE in its reset state, paced and flow-controlled as `cfg` says.
    pub(crate) fn new(cfg: &GeminiConfig) -> Self {
        Bte {
            tx: Default::default(),
            txd: SparseTable::new(BTE_TX_SLOTS as usize, [0; 8]),
            tx_base: 0,
            tx_count: 0,
            xfers: IntMap::default(),
            next_xfer: 0,
            step_armed: false,
            rr: 0,
            credit: 0,
            refill: SimTime::ZERO,
            max_outstanding: u32::try_from(
                cfg.bte_max_inflight / u64::from(cfg.bte_packet_bytes.max(1)),
            )
            .unwrap_or(u32::MAX)
            .max(1),
            packet_bytes: cfg.bte_packet_bytes,
            step_bytes: cfg.bte_step_bytes,
            bandwidth: cfg.bte_bandwidth,
            max_burst: cfg.bte_max_burst,
        }
    }

    fn ring(&self, ch: usize) -> (u64, u64) {
        (u16_lane(self.tx_base, ch), u16_lane(self.tx_count, ch))
    }

    fn txd_at(&self, slot: u64) -> Option<TxDescriptor> {
        let raw = self.txd.get(slot as usize).ok()?;
        let mut b = [0u8; 48];
        for (q, w) in raw.iter().take(6).enumerate() {
            b[q * 8..q * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        TxDescriptor::decode(&b).ok()
    }

    fn enabled(&self, ch: usize) -> bool {
        self.tx[ch].regs.flags & txvc_flag::ENABLE != 0
    }

    /// Whether channel `ch` has a TXD it can start or issue now.
    fn has_work(&self, ch: usize) -> bool {
        if !self.enabled(ch) {
            return false;
        }
        let c = &self.tx[ch];
        if let Some(a) = c.active {
            return self
                .xfers
                .get(&a)
                .is_none_or(|x| x.outstanding < self.max_outstanding);
        }
        let (base, count) = self.ring(ch);
        if count == 0 || c.regs.read_index == c.regs.write_index % count {
            return false;
        }
        let fence = self
            .txd_at(base + c.regs.read_index)
            .is_some_and(|t| t.mode1 & u64::from(TxdMode1::FENCE.bits()) != 0);
        !(fence && c.inflight > 0)
    }

    /// Load from a BTE TX register.
    pub(crate) fn reg_read(&self, t: Target) -> u64 {
        match t {
            Target::BteTx { slot, off } => self
                .txd
                .get(slot as usize)
                .ok()
                .and_then(|r| r.get((off / 8) as usize))
                .copied()
                .unwrap_or(0),
            Target::BteTxChannel { ch, off } => {
                let Some(c) = self.tx.get(usize::from(ch)) else {
                    return 0;
                };
                match off & !7 {
                    regs::BTE_CHANNEL_ERR_RC => u64::from(c.err_rc),
                    regs::BTE_CHANNEL_COMPLETED => c.completed,
                    o if o < 32 => c
                        .regs
                        .encode()
                        .map_or(0, |img| qword_of(&img, (o / 8) as usize)),
                    _ => 0,
                }
            }
            Target::TxRingBase => self.tx_base,
            Target::TxRingCount => self.tx_count,
            _ => 0,
        }
    }

    /// Store to a BTE TX register.
    pub(crate) fn reg_write(&mut self, p: &mut impl BtePort, t: Target, sub: u64, data: &[u8]) {
        let merged = |old: u64| regs::merge(old, sub, data);
        match t {
            Target::BteTx { slot, off } => {
                if let Some(w) = self
                    .txd
                    .get_mut(slot as usize)
                    .ok()
                    .and_then(|r| r.get_mut((off / 8) as usize))
                {
                    *w = merged(*w);
                }
            }
            Target::BteTxChannel { ch, off } => {
                self.tx_channel_write(p, usize::from(ch), off, sub, data)
            }
            Target::TxRingBase => self.tx_base = merged(self.tx_base),
            Target::TxRingCount => self.tx_count = merged(self.tx_count),
            _ => {}
        }
    }

    fn tx_channel_write(
        &mut self,
        p: &mut impl BtePort,
        ch: usize,
        off: u64,
        sub: u64,
        data: &[u8],
    ) {
        let Some(c) = self.tx.get_mut(ch) else {
            return;
        };
        match off & !7 {
            regs::BTE_CHANNEL_ERR_RC => c.err_rc = 0,
            o if o < 32 => {
                let Ok(mut img) = c.regs.encode() else {
                    return;
                };
                let q = (o / 8) as usize;
                let v = regs::merge(qword_of(&img, q), sub, data);
                patch(&mut img, q, v);
                let Ok(mut n) = TxChannel::decode(&img) else {
                    return;
                };
                n.read_index = c.regs.read_index;
                if n.flags & txvc_flag::RESET != 0 {
                    // Forget queued TXDs; transfers already started run to completion.
                    n.read_index = 0;
                    n.write_index = 0;
                    n.flags &= !txvc_flag::RESET;
                    c.active = None;
                }
                c.regs = n;
                if q == 3 {
                    self.kick(p);
                }
            }
            _ => {}
        }
    }

    /// Make sure a BTE step is scheduled.
    fn kick(&mut self, p: &mut impl BtePort) {
        if !self.step_armed && (0..CHANNELS).any(|c| self.has_work(c)) {
            self.step_armed = true;
            p.step_after(SimDuration::ZERO);
        }
    }

    /// One BTE step: refill the token bucket, issue up to the budget, re-arm.
    pub(crate) fn step(&mut self, p: &mut impl BtePort) {
        self.step_armed = false;
        let now = p.now();
        let bw = self.bandwidth;
        let burst = self.max_burst.max(u64::from(self.packet_bytes));
        let budget = if bw == 0 {
            self.step_bytes.max(1)
        } else {
            let elapsed = u128::from(now.since(self.refill).0);
            let add = elapsed * u128::from(bw) / 1_000_000_000_000;
            self.credit = (u128::from(self.credit) + add).min(u128::from(burst)) as u64;
            self.refill = now;
            self.credit
        };
        let used = if budget > 0 {
            self.issue_budget(p, budget)
        } else {
            0
        };
        if bw > 0 {
            self.credit = self.credit.saturating_sub(used);
        }
        if (0..CHANNELS).any(|c| self.has_work(c)) {
            let delay = if bw == 0 {
                SimDuration::ZERO
            } else {
                let want = self.step_bytes.max(1).saturating_sub(self.credit);
                let ps = u128::from(want.max(1)) * 1_000_000_000_000 / u128::from(bw);
                SimDuration(u64::try_from(ps).unwrap_or(u64::MAX))
            };
            self.step_armed = true;
            p.step_after(delay);
        }
    }

    /// Issue packets round-robin over the channels until `budget` bytes are used or no
    /// channel can go on. Returns the bytes used.
    fn issue_budget(&mut self, p: &mut impl BtePort, budget: u64) -> u64 {
        let mut used = 0u64;
        let mut idle = 0;
        while used < budget && idle < CHANNELS {
            let ch = self.rr;
            self.rr = (ch + 1) % CHANNELS;
            match self.channel_work(p, ch, budget - used) {
                Some(n) => {
                    used += n;
                    idle = 0;
                }
                None => idle += 1,
            }
        }
        used
    }

    /// Start the next TXD of `ch` if none is active, then issue one packet of the active one
    /// (with `left` bytes of the step's budget left).
    fn channel_work(&mut self, p: &mut impl BtePort, ch: usize, left: u64) -> Option<u64> {
        if !self.has_work(ch) {
            return None;
        }
        let x = match self.tx[ch].active {
            Some(x) => x,
            None => {
                let (base, count) = self.ring(ch);
                let pos = self.tx[ch].regs.read_index;
                let txd = self.txd_at(base + pos).unwrap_or_default();
                self.tx[ch].regs.read_index = (pos + 1) % count.max(1);
                p.count(counter::BTE_TXDS, 1);
                match self.start(p, ch, pos, txd) {
                    Some(x) => x,
                    None => return Some(0),
                }
            }
        };
        Some(self.issue_packet(p, x, left))
    }

    /// Validate a TXD and create its transfer; on a local error it completes at once.
    fn start(
        &mut self,
        p: &mut impl BtePort,
        ch: usize,
        pos: u64,
        txd: TxDescriptor,
    ) -> Option<u32> {
        let id = self.next_xfer;
        self.next_xfer = self.next_xfer.wrapping_add(1);
        let op = txd.op().unwrap_or(BteOp::Send);
        let local = if txd.nat_enabled() {
            Local::Mdd(
                Access {
                    mdh: txd.src_mem_dh as u16,
                    vmdh: false,
                    ptag: txd.src_ptag as u8,
                },
                txd.src_mem_off,
            )
        } else {
            Local::Phys(txd.src_phys_addr())
        };
        let mode1 = txd.mode1;
        let dest = Dest {
            pe: txd.dest_pe as u32,
            acc: Access {
                mdh: txd.dest_mem_dh as u16,
                vmdh: mode1 & u64::from(TxdMode1::VMDH_ENABLE.bits()) != 0,
                ptag: txd.dest_ptag as u8,
            },
            ordered: mode1 & u64::from(TxdMode1::ADP_ENABLE.bits()) == 0,
            stream: BTE_STREAM_BASE + ch as u16,
        };
        let mut x = Xfer {
            ch,
            pos,
            txd,
            op,
            local,
            dest,
            issued: 0,
            total: txd.data_len,
            processed: false,
            outstanding: 0,
            error: None,
            phase: XPhase::Data,
            last_progress: p.now(),
            trained: false,
            local_owed: false,
        };
        let check = Self::validate(p.domains(), p.dma(), &x);
        self.tx[ch].inflight += 1;
        if let Err(f) = check {
            x.error = Some(f);
            x.processed = true;
            self.xfers.insert(id, x);
            p.count(counter::ERRORS, 1);
            self.finish(p, id);
            return None;
        }
        self.tx[ch].active = Some(id);
        self.xfers.insert(id, x);
        Some(id)
    }

    fn validate(domains: &Domains, dma: &DmaPort, x: &Xfer) -> Result<(), Fault> {
        x.txd.op().map_err(|_| Fault::BadCommand)?;
        x.txd.mode1().map_err(|_| Fault::BadCommand)?;
        let len = x.total;
        let (local_addr, write_local) = match x.local {
            Local::Mdd(_, off) => (off, x.op == BteOp::Get),
            Local::Phys(a) => (a, x.op == BteOp::Get),
        };
        if x.op == BteOp::Get
            && !firmware_spec::gemini::limits::get_is_aligned(local_addr, x.txd.dest_mem_off, len)
        {
            return Err(Fault::Misaligned);
        }
        if x.op == BteOp::Send && len > SEND_MAX_BYTES {
            return Err(Fault::BadLength);
        }
        match x.local {
            Local::Mdd(acc, off) => domains.check(dma, acc, off, len, write_local),
            Local::Phys(a) => {
                let perm = if write_local {
                    emu_core::dma::Perm::WRITE
                } else {
                    emu_core::dma::Perm::READ
                };
                dma.check(a, len, perm).map_err(|_| Fault::Dma)
            }
        }
    }

    fn read_local(
        domains: &Domains,
        dma: &DmaPort,
        local: Local,
        at: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        match local {
            Local::Mdd(acc, off) => domains.read(dma, acc, off + at, buf),
            Local::Phys(a) => dma.read(a + at, buf).map_err(|_| Fault::Dma),
        }
    }

    /// The frames of PUT or GET transfer `id` that may go now as one train: as many as frame by
    /// frame the step would issue with `left` bytes of budget and the flow-control window
    /// would let out. `None` when that is one frame or the destination needs frames.
    fn train_frames(&self, p: &impl BtePort, id: u32, left: u64) -> Option<(u32, u64)> {
        let x = self.xfers.get(&id)?;
        if x.op == BteOp::Send || !p.train_ok(x.dest.pe) {
            return None;
        }
        let pb = u64::from(self.packet_bytes.max(4));
        let room = u64::from(self.max_outstanding.saturating_sub(x.outstanding));
        let by_budget = left.max(1).div_ceil(pb);
        let remaining = x.total - x.issued;
        let frames = room.min(by_budget).min(remaining.div_ceil(pb));
        if frames < 2 {
            return None;
        }
        let n = (frames * pb).min(remaining);
        Some((u32::try_from(frames).ok()?, n))
    }

    /// Issue the next frames of transfer `id` as one train of `frames` frames and `n`
    /// payload bytes: PUT frames with their payload left in host memory, or GET requests
    /// whose answers come back as one train landing at the first frame's landing, which
    /// covers them all.
    fn issue_train(
        &mut self,
        p: &mut impl BtePort,
        id: u32,
        frames: u32,
        n: u64,
    ) -> Result<(), Fault> {
        let Some(x) = self.xfers.get(&id) else {
            return Ok(());
        };
        if x.op == BteOp::Get {
            let landing = match x.local {
                Local::Mdd(acc, off) => Landing::Mdd {
                    acc,
                    offset: off + x.issued,
                    len: u32::try_from(n).map_err(|_| Fault::BadLength)?,
                    flag: false,
                },
                Local::Phys(a) => Landing::Phys { addr: a + x.issued },
            };
            let mut h = Header::new(Kind::GetReq);
            h.offset = x.txd.dest_mem_off + x.issued;
            h.len = u32::try_from(n).map_err(|_| Fault::BadLength)?;
            let req = Req {
                owner: Owner::Xfer(id),
                landing,
                is_get: false,
            };
            let dest = x.dest;
            if let Some(x) = self.xfers.get_mut(&id) {
                x.issued += n;
                x.outstanding += frames;
            }
            p.issue_train(req, &dest, h, frames, Vec::new(), TC_FMA);
            return Ok(());
        }
        let segments = match x.local {
            Local::Mdd(acc, off) => p
                .domains()
                .segments(p.dma(), acc, off + x.issued, n, false)?,
            Local::Phys(a) => vec![Segment {
                addr: a + x.issued,
                len: n,
            }],
        };
        let mut h = Header::new(Kind::Put);
        h.offset = x.txd.dest_mem_off + x.issued;
        let req = Req {
            owner: Owner::Xfer(id),
            landing: Landing::None,
            is_get: false,
        };
        let dest = x.dest;
        if let Some(x) = self.xfers.get_mut(&id) {
            x.issued += n;
            x.outstanding += frames;
            x.trained = true;
        }
        p.issue_train(req, &dest, h, frames, segments, TC_BTE);
        Ok(())
    }

    /// Issue the next packet of transfer `id` (a train of frames when allowed, with `left`
    /// bytes of the step's budget left); returns the bytes it accounts for.
    fn issue_packet(&mut self, p: &mut impl BtePort, id: u32, left: u64) -> u64 {
        if let Some((frames, n)) = self.train_frames(p, id, left) {
            let r = self.issue_train(p, id, frames, n);
            return self.issued(p, id, n, r.err());
        }
        let Some(x) = self.xfers.get(&id) else {
            return 0;
        };
        let (op, local, dest, issued, total) = (x.op, x.local, x.dest, x.issued, x.total);
        let (txd, ch) = (x.txd, x.ch);
        let max = if op == BteOp::Send {
            SEND_MAX_BYTES
        } else {
            u64::from(self.packet_bytes.max(4))
        };
        let n = (total - issued).min(max);
        let req = Req {
            owner: Owner::Xfer(id),
            landing: Landing::None,
            is_get: false,
        };
        let mut fault = None;
        match op {
            BteOp::Put | BteOp::Send => {
                // The payload is read from host memory straight into the frame, in a
                // buffer the receiver gives back: no second copy, no fresh allocation.
                let mut frame = p.frame_buffer(HEADER_LEN + n as usize);
                frame.resize(HEADER_LEN + n as usize, 0);
                if let Err(f) = Self::read_local(
                    p.domains(),
                    p.dma(),
                    local,
                    issued,
                    &mut frame[HEADER_LEN..],
                ) {
                    fault = Some(f);
                } else {
                    let mut h = if op == BteOp::Put {
                        Header::new(Kind::Put)
                    } else {
                        Header::new(Kind::Send)
                    };
                    h.offset = txd.dest_mem_off + issued;
                    if op == BteOp::Send {
                        h.cmd = ch as u16;
                        if txd.mode1 & u64::from(TxdMode1::IMMED.bits()) != 0 {
                            h.flags |= flag::IMMED;
                            h.op1 = txd.user_data;
                        }
                    }
                    self.note_issue(id, n);
                    p.issue_frame(req, &dest, h, frame, TC_BTE);
                }
            }
            BteOp::Get => {
                let landing = match local {
                    Local::Mdd(acc, off) => Landing::Mdd {
                        acc,
                        offset: off + issued,
                        len: n as u32,
                        flag: false,
                    },
                    Local::Phys(a) => Landing::Phys { addr: a + issued },
                };
                let mut h = Header::new(Kind::GetReq);
                h.offset = txd.dest_mem_off + issued;
                h.len = n as u32;
                self.note_issue(id, n);
                p.issue(Req { landing, ..req }, &dest, h, &[], TC_FMA);
            }
        }
        self.issued(p, id, n, fault)
    }

    /// After `n` bytes of transfer `id` were issued (or `fault` stopped it): when it was
    /// the last of them, the local event (now, or once every request is answered if part
    /// went as a train) and, with nothing outstanding, the next phase. Returns `n`.
    fn issued(&mut self, p: &mut impl BtePort, id: u32, n: u64, fault: Option<Fault>) -> u64 {
        let Some(x) = self.xfers.get_mut(&id) else {
            return n;
        };
        if let Some(f) = fault {
            x.error.get_or_insert(f);
            x.issued = x.total;
        }
        if x.issued >= x.total {
            x.processed = true;
            let ch = x.ch;
            let done = x.outstanding == 0;
            let local_event = x.error.is_none()
                && x.txd.mode1 & u64::from(TxdMode1::CQ_LOCAL.bits()) != 0
                && x.txd.mode1 & u64::from(TxdMode1::CONCAT.bits()) == 0;
            let (cqh, data) = (x.txd.src_cq_hndl, x.txd.src_cq_data);
            if self.tx[ch].active == Some(id) {
                self.tx[ch].active = None;
            }
            if local_event && x.trained {
                // The source is read when the train lands: the event that lets software
                // reuse it waits for the answers.
                x.local_owed = true;
            } else if local_event {
                p.post_cqe(cqh, Cqe::from_hw(CqeSource::Bte, HwStatus::Ok, data));
            }
            if done {
                self.advance(p, id);
            }
        }
        n
    }

    fn note_issue(&mut self, id: u32, n: u64) {
        if let Some(x) = self.xfers.get_mut(&id) {
            x.issued += n;
            x.outstanding += 1;
        }
    }

    /// An answer (or timeout) for a request of transfer `id`.
    pub(crate) fn xfer_answered(&mut self, p: &mut impl BtePort, id: u32, fault: Option<Fault>) {
        let now = p.now();
        let Some(x) = self.xfers.get_mut(&id) else {
            return;
        };
        x.outstanding = x.outstanding.saturating_sub(1);
        x.last_progress = now;
        if let Some(f) = fault {
            if x.error.is_none() && x.phase == XPhase::Data && !x.processed {
                // Stop issuing the rest of a failed transfer.
                x.issued = x.total;
            }
            x.error.get_or_insert(f);
        }
        if x.processed && x.outstanding == 0 {
            self.advance(p, id);
        } else if x.issued < x.total {
            // Flow control: an answer makes room for more requests.
            self.kick(p);
        } else if x.issued >= x.total && !x.processed {
            // The failure above ended the transfer early.
            x.processed = true;
            let ch = x.ch;
            if self.tx[ch].active == Some(id) {
                self.tx[ch].active = None;
            }
            if x.outstanding == 0 {
                self.advance(p, id);
            }
        }
    }

    fn advance(&mut self, p: &mut impl BtePort, id: u32) {
        let Some(x) = self.xfers.get_mut(&id) else {
            return;
        };
        if std::mem::take(&mut x.local_owed) && x.error.is_none() {
            let (cqh, data) = (x.txd.src_cq_hndl, x.txd.src_cq_data);
            p.post_cqe(cqh, Cqe::from_hw(CqeSource::Bte, HwStatus::Ok, data));
        }
        if x.phase == XPhase::Data && x.error.is_none() && x.op == BteOp::Put {
            x.phase = XPhase::Remote;
            let dest = x.dest;
            let mut h = Header::new(Kind::RemoteEvent);
            h.op1 = x.txd.user_data & firmware_spec::bits::mask(56);
            h.cmd = u16::from(CqeSource::RmtDreq.code());
            x.outstanding += 1;
            let req = Req {
                owner: Owner::Xfer(id),
                landing: Landing::None,
                is_get: false,
            };
            p.issue(req, &dest, h, &[], TC_BTE);
            return;
        }
        self.finish(p, id);
    }

    /// Retire a transfer: status write-back, events, interrupt.
    fn finish(&mut self, p: &mut impl BtePort, id: u32) {
        let Some(x) = self.xfers.remove(&id) else {
            return;
        };
        let ch = x.ch;
        let status = x.error.map_or(HwStatus::Ok, Fault::status);
        let mut txd = x.txd;
        txd.flags = u64::from(TxdFlags::COMPLETE.bits());
        if x.error == Some(Fault::Timeout) {
            txd.flags |= u64::from(TxdFlags::TIMEOUT_ERR.bits());
        }
        txd.bte_tx_status = u64::from(status.code());
        let Some(c) = self.tx.get_mut(ch) else {
            return;
        };
        c.inflight = c.inflight.saturating_sub(1);
        c.completed += 1;
        if let Some(f) = x.error {
            tracing::debug!(
                target: "gemini::bte",
                channel = ch,
                pos = x.pos,
                fault = %f,
                "TXD failed"
            );
            c.err_rc = f.return_code().code();
        }
        let ring = c.regs.cpu_ring_addr;
        let chan_irq = c.regs.flags & txvc_flag::IRQ_ENABLE != 0;
        if ring != 0
            && let Some(at) = ring.checked_add(64 * x.pos)
            && let Ok(img) = txd.encode()
        {
            // A faulting ring address loses only the copy; the CQE still reports.
            let _ = p.dma().write(at, &img);
        }
        let concat = txd.mode1 & u64::from(TxdMode1::CONCAT.bits()) != 0;
        let global = txd.mode1 & u64::from(TxdMode1::CQ_GLOBAL.bits()) != 0;
        if x.error.is_some() {
            // The error takes the place of the event the transfer still owes: the global
            // event's data when one was asked for (the local event may already have been
            // posted when the last request left, and software waits for the global one),
            // else the local event's.
            let data = if global {
                txd.user_data & firmware_spec::bits::mask(56)
            } else {
                txd.src_cq_data
            };
            p.post_cqe(txd.src_cq_hndl, Cqe::from_hw(CqeSource::Bte, status, data));
        } else if global && !concat {
            let data = txd.user_data & firmware_spec::bits::mask(56);
            p.post_cqe(
                txd.src_cq_hndl,
                Cqe::from_hw(CqeSource::Bte, HwStatus::Ok, data),
            );
        }
        if chan_irq || txd.mode2 & u64::from(TxdMode2::IRQ_ENABLE.bits()) != 0 {
            p.raise(irq_index(ch as u32, IRQ_TX) as u16);
        }
        self.kick(p);
    }

    /// Transfers with requests outstanding and no progress for `timeout`.
    pub(crate) fn expired(&self, now: SimTime, timeout: SimDuration) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .xfers
            .iter()
            .filter(|(_, x)| x.outstanding > 0 && now.since(x.last_progress) >= timeout)
            .map(|(&id, _)| id)
            .collect();
        v.sort_unstable();
        v
    }

    /// Whether any transfer is still running.
    pub(crate) fn busy(&self) -> bool {
        !self.xfers.is_empty()
    }
}

impl BteRx {
    /// RX descriptors backed by storage (0 at reset).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.rxd.allocated_entries()
    }

    /// Load from a BTE RX register.
    pub(crate) fn reg_read(&self, t: Target) -> u64 {
        match t {
            Target::RxRingBase => self.rx_base,
            Target::RxRingCount => self.rx_count,
            Target::BteRx(i) => self.rxd.get(i as usize).copied().unwrap_or(0),
            Target::BteRxChannel { ch, off } => self
                .rx
                .get(usize::from(ch))
                .filter(|_| off < 32)
                .and_then(|c| c.encode().ok())
                .map_or(0, |img| qword_of(&img, (off / 8) as usize)),
            _ => 0,
        }
    }

    /// Store to a BTE RX register.
    pub(crate) fn reg_write(&mut self, t: Target, sub: u64, data: &[u8]) {
        let merged = |old: u64| regs::merge(old, sub, data);
        match t {
            Target::RxRingBase => self.rx_base = merged(self.rx_base),
            Target::RxRingCount => self.rx_count = merged(self.rx_count),
            Target::BteRx(i) => {
                if let Ok(w) = self.rxd.get_mut(i as usize) {
                    *w = merged(*w);
                }
            }
            Target::BteRxChannel { ch, off } if off < 32 => {
                if let Some(c) = self.rx.get_mut(usize::from(ch))
                    && let Ok(mut img) = c.encode()
                {
                    let q = (off / 8) as usize;
                    let old = qword_of(&img, q);
                    patch(&mut img, q, merged(old));
                    if let Ok(mut n) = RxChannel::decode(&img) {
                        // The read index belongs to the hardware.
                        n.read_index = c.read_index;
                        if n.flags & rxvc_flag::RESET != 0 {
                            n.read_index = 0;
                            n.write_index = 0;
                            n.flags &= !rxvc_flag::RESET;
                        }
                        *c = n;
                    }
                }
            }
            _ => {}
        }
    }

    /// A SEND arrived: deliver it into RX channel `hdr.cmd` (data, then the CPU RX
    /// descriptor). Returns the MSI-X vector to raise, if the channel or buffer asks for one.
    pub(crate) fn receive(
        &mut self,
        dma: &DmaPort,
        hdr: &Header,
        payload: &[u8],
    ) -> Result<Option<u16>, Fault> {
        let ch = usize::from(hdr.cmd);
        let rx = *self.rx.get(ch).ok_or(Fault::BadCommand)?;
        if rx.flags & rxvc_flag::ENABLE == 0 {
            return Err(Fault::NoRxBuffer);
        }
        let (base, count) = (u16_lane(self.rx_base, ch), u16_lane(self.rx_count, ch));
        if count == 0 || rx.read_index % count == rx.write_index % count {
            return Err(Fault::NoRxBuffer);
        }
        let pos = rx.read_index % count;
        let raw = self.rxd.get((base + pos) as usize).copied().unwrap_or(0);
        let rxd = RxDescriptor::decode(&raw.to_le_bytes()).unwrap_or_default();
        let n = (payload.len() as u64).min(rx.buf_size);
        let mut flags = RXD_FLAG_BTE_COMPLETE;
        if hdr.flags & flag::IMMED != 0 {
            flags |= RXD_FLAG_IMM_AVAILABLE;
        }
        if (payload.len() as u64) > rx.buf_size {
            flags |= u64::from(HwStatus::MemBoundsErr.code()) << RXD_FLAG_ERR_STATUS_SHIFT;
        }
        let data = payload.get(..n as usize).unwrap_or(&[]);
        dma.write(rxd.base_addr, data).map_err(|_| Fault::Dma)?;
        let cpu = CpuRxDescriptor {
            buff_addr: rxd.base_addr,
            mode1: rxd.mode1,
            flags,
            data_len: n,
            imm_data: if hdr.flags & flag::IMMED != 0 {
                hdr.op1
            } else {
                0
            },
        };
        if rx.cpu_ring_addr != 0
            && let Ok(img) = cpu.encode()
        {
            let at = rx.cpu_ring_addr.checked_add(32 * pos).ok_or(Fault::Dma)?;
            dma.write(at, &img).map_err(|_| Fault::Dma)?;
        }
        if let Some(c) = self.rx.get_mut(ch) {
            c.read_index = (pos + 1) % count;
        }
        let irq = rxd.mode1 & u64::from(RxdMode::IRQ_ENABLE.bits()) != 0
            || rx.flags & rxvc_flag::IRQ_ENABLE != 0;
        Ok(irq.then_some(irq_index(ch as u32, IRQ_RX) as u16))
    }
}
