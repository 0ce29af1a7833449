//! The Gemini device model: the PCI function, BAR decode, and the one place that wires the
//! hardware blocks together.
//!
//! [`Gemini`] implements [`DeviceModel`]: it is driven by MMIO accesses, packets from the
//! fabric and its own timers, and never spawns threads or reads a clock.
//!
//! Each block is a struct in its own module that never sees the device: it states what it
//! needs from the rest of the NIC as a port trait (`FmaPort`, `BtePort`, `TargetPort`),
//! and this module implements those traits on a `Backplane`: the shared `Core` (tables,
//! request table, counters, MSI-X) plus the engine's I/O for the current event, borrowed
//! beside the block being called (split borrows, no allocation). So every import points
//! one way, along a packet's journey:
//!
//! ```text
//!   host MMIO (BAR 0) ── regs::decode ── Gemini::reg_read / reg_write (this module)
//!      │                                   │
//!      ▼                                   ▼
//!   fma::Fma                            bte::Bte
//!   windows, write combining,           TX rings and channels,
//!   AMOs, sequences                     paced steps, flow control
//!      │ FmaPort::issue                    │ BtePort::issue
//!      └───────────────┬───────────────────┘
//!                      ▼
//!   request::Requests: tag, Dest stamped in the header, in-order stream number
//!   packet::Header::encode ──► fabric
//!                                   │
//!   ── at the target NIC ───────────▼────────────────────────────────────────────────────
//!   target::Responder::on_packet: CRC, decode, hold early requests of in-order streams
//!      PUT / GET / AMO ───────► mdd::Domains (+ amo)        answer frame ──► fabric
//!      CQ write, remote event ► cq::CqTable, MSI-X                              │
//!      SEND ──────────────────► bte::BteRx: RX ring, MSI-X                      │
//!                                                                               │
//!   ── back at the initiator ───────────────────────────────────────────────────▼──────────
//!   target::Responder::on_packet: match the tag (TargetPort::take_request), land the data
//!      │ request::Answer          (or the watchdog, in this module, ends it: Fault::Timeout)
//!      ▼
//!   Gemini::answered (this module) ──► Fma::seq_answered / Bte::xfer_answered
//!      ▼
//!   cq::CqTable: the completion event ──► MSI-X
//! ```
//!
//! Module imports follow the same direction. `fault`, `config`, `packet`, `regs`, `ntt`,
//! `mdd`, `amo`, `cq` and `request` are leaves: vocabulary and tables that import only one
//! another. `fma` and `bte` import only leaves; `target` imports only leaves (it reaches the
//! BTE RX channels through its port). Nothing but this module (and the test harness in
//! `cluster`) imports `device`.

use crate::bte::{Bte, BtePort, BteRx};
use crate::config::GeminiConfig;
use crate::cq::{CqTable, Posted};
use crate::fault::Fault;
use crate::faults::{FaultHold, TOKEN_FAULTS};
use crate::fma::{Fma, FmaPort};
use crate::mdd::Domains;
use crate::ntt::Ntt;
use crate::packet::{HEADER_LEN, Header};
use crate::regs::{self, Target, counter};
use crate::request::{Answer, Dest, Owner, Req, Requests};
use crate::target::{Responder, TargetPort};
use emu_core::dma::DmaPort;
use emu_core::dma::Segment;
use emu_core::engine::{DeviceIo, DeviceModel};
use emu_core::fabric::{Packet, PortId, TrafficClass, Train};
use emu_core::mmio::MmioError;
use emu_core::nic_faults::NicSite;
use emu_core::pci::{BarConfig, BarKind, MsixConfig, PciIds};
use emu_core::pci_shell::PciShell;
use emu_core::time::{SimDuration, SimTime};
use firmware_spec::gemini::cqe::Cqe;
use firmware_spec::gemini::pci;
use std::sync::Arc;
use thiserror::Error;

/// Timer token: run a BTE step.
const TOKEN_BTE: u64 = 1;
/// Timer token: request watchdog.
const TOKEN_WATCHDOG: u64 = 2;

/// Why the model could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GeminiError {
    /// The PCI function could not be set up.
    #[error("PCI setup failed: {0}")]
    Pci(#[from] emu_core::pci::PciError),
}

/// A register-level model of one Gemini NIC (one of the two NICs of a Gemini ASIC).
#[derive(Clone)]
pub struct Gemini {
    core: Core,
    fma: Fma,
    bte: Bte,
    bte_rx: BteRx,
    responder: Responder,
}

/// The parts of the NIC every block may reach, through its port trait only: configuration,
/// MSI-X, the NTT, memory domains, CQs, the request table and the counters.
#[derive(Clone)]
struct Core {
    cfg: GeminiConfig,
    /// The PCI function: configuration space and MSI-X.
    pi: PciShell,
    ntt: Ntt,
    domains: Domains,
    cqs: CqTable,
    requests: Requests,
    counters: [u64; counter::COUNT as usize],
    watchdog_armed: bool,
    /// Work held by the timed fault sites (faults.rs).
    held: FaultHold,
}

impl Core {
    /// Add `n` to counter `c`.
    fn count(&mut self, c: u32, n: u64) {
        if let Some(v) = self.counters.get_mut(c as usize) {
            *v = v.wrapping_add(n);
        }
    }
}

/// The rest of the NIC as a block sees it while it runs: the shared [`Core`] and the
/// engine's I/O for this event. Built per call from fields of [`Gemini`] disjoint from the
/// block being called (two references, no allocation); it implements [`FmaPort`] and
/// [`BtePort`], and with the BTE RX channels ([`Inbound`]) [`TargetPort`].
struct Backplane<'a, 'io> {
    io: &'a mut DeviceIo<'io>,
    core: &'a mut Core,
}

impl Backplane<'_, '_> {
    /// Raise MSI-X vector `v` (if enabled and unmasked; otherwise it pends in the PBA).
    fn raise(&mut self, v: u16) {
        self.core.pi.raise(self.io, v);
    }

    /// Deliver a CQE; counts the outcome and raises the CQ's interrupt.
    fn post_cqe(&mut self, cqh: u64, cqe: Cqe) -> Posted {
        let r = self.core.cqs.post(self.io.dma(), cqh, cqe);
        match r {
            Posted::Written(irq) => {
                self.core.count(counter::CQ_EVENTS, 1);
                if let Some(v) = irq {
                    self.raise(v);
                }
            }
            Posted::Lost => {
                tracing::debug!(
                    target: "gemini::cq",
                    nic = self.core.cfg.pe,
                    cq = cqh,
                    "event lost: CQ full (overrun)"
                );
                self.core.count(counter::CQ_LOST, 1);
            }
            Posted::Dropped => self.core.count(counter::CQ_DROPPED, 1),
        }
        r
    }

    /// Put a frame on the wire to physical PE `pe`.
    fn send_frame(&mut self, pe: u32, tc: u8, frame: Vec<u8>) {
        self.core.count(counter::PACKETS_TX, 1);
        self.core.count(counter::BYTES_TX, frame.len() as u64);
        self.inject(pe, tc, frame, None);
    }

    /// Hand a packet to the fabric, which seals its CRC when it is injected.
    fn inject(&mut self, pe: u32, tc: u8, data: Vec<u8>, train: Option<Arc<Train>>) {
        self.io.send(Packet {
            src: PortId(self.core.cfg.pe),
            dst: PortId(pe),
            tc: TrafficClass(tc),
            data,
            crc: 0,
            train,
        });
    }

    /// Put a frame on the wire to `pe` standing for itself and `more` copies of its header
    /// (answers to a train's frames), with the payload of those frames left in this NIC's
    /// host memory at `segments` (GET answers; none for acknowledgements): counted as those
    /// frames, sent as one packet.
    fn send_frames(&mut self, pe: u32, tc: u8, frame: Vec<u8>, more: u32, segments: Vec<Segment>) {
        if more == 0 && segments.is_empty() {
            return self.send_frame(pe, tc, frame);
        }
        let payload: u64 = segments.iter().map(|s| s.len).sum();
        let each = frame.len() as u64;
        let n = 1 + u64::from(more);
        self.core.count(counter::PACKETS_TX, n);
        self.core.count(counter::BYTES_TX, n * each + payload);
        let train = Train {
            frames: more,
            bytes: u64::from(more) * each + payload,
            source: self.io.dma().clone(),
            segments,
        };
        self.inject(pe, tc, frame, Some(Arc::new(train)));
    }

    /// Send a train of `frames` frames (at least 2) to `dest` as one packet: the header,
    /// then the payload left in this NIC's host memory at `segments`. Each frame is a
    /// request of its own in the request table ([`Requests::open_train`]); the packet is
    /// counted (here and by the fabric) as the frames it stands for: `frames` headers and
    /// the payload.
    fn issue_train(
        &mut self,
        req: Req,
        dest: &Dest,
        mut hdr: Header,
        frames: u32,
        segments: Vec<Segment>,
        tc: u8,
    ) {
        self.core.requests.open_train(req, dest, &mut hdr, frames);
        let frame = hdr.encode(&[]);
        let payload: u64 = segments.iter().map(|s| s.len).sum();
        let n = u64::from(frames);
        let bytes = n * frame.len() as u64 + payload;
        self.core.count(counter::PACKETS_TX, n);
        self.core.count(counter::BYTES_TX, bytes);
        let train = Train {
            frames: frames - 1,
            bytes: bytes - frame.len() as u64,
            source: self.io.dma().clone(),
            segments,
        };
        self.inject(dest.pe, tc, frame, Some(Arc::new(train)));
        self.ensure_watchdog();
    }

    /// [`Backplane::issue`] of a frame whose payload is in place behind
    /// [`crate::packet::HEADER_LEN`] bytes of room for the header.
    fn issue_frame(&mut self, req: Req, dest: &Dest, mut hdr: Header, mut frame: Vec<u8>, tc: u8) {
        self.core.requests.open(req, dest, &mut hdr);
        hdr.write_into(&mut frame);
        self.send_frame(dest.pe, tc, frame);
        self.ensure_watchdog();
    }

    /// Send a request and remember who waits for its answer. The frame is built in a
    /// buffer from the engine's pool (the target gives it back once applied).
    fn issue(&mut self, req: Req, dest: &Dest, mut hdr: Header, payload: &[u8], tc: u8) {
        self.core.requests.open(req, dest, &mut hdr);
        let mut frame = self.io.packet_buffer(HEADER_LEN + payload.len());
        hdr.encode_into(&mut frame);
        frame.extend_from_slice(payload);
        self.send_frame(dest.pe, tc, frame);
        self.ensure_watchdog();
    }

    /// Arm the request watchdog if it is not armed.
    fn ensure_watchdog(&mut self) {
        if !self.core.watchdog_armed {
            self.core.watchdog_armed = true;
            let half =
                SimDuration(self.core.cfg.request_timeout.0 / 2).max(SimDuration::from_us(1));
            self.io.timer(half, TOKEN_WATCHDOG);
        }
    }
}

impl FmaPort for Backplane<'_, '_> {
    fn nic(&self) -> u32 {
        self.core.cfg.pe
    }
    fn now(&self) -> SimTime {
        self.io.now()
    }
    fn count(&mut self, c: u32, n: u64) {
        self.core.count(c, n);
    }
    fn ntt(&self) -> &Ntt {
        &self.core.ntt
    }
    fn domains(&self) -> &Domains {
        &self.core.domains
    }
    fn dma(&self) -> &DmaPort {
        self.io.dma()
    }
    fn issue(&mut self, req: Req, dest: &Dest, hdr: Header, payload: &[u8], tc: u8) {
        Backplane::issue(self, req, dest, hdr, payload, tc);
    }
    fn post_cqe(&mut self, cqh: u64, cqe: Cqe) {
        Backplane::post_cqe(self, cqh, cqe);
    }
}

impl BtePort for Backplane<'_, '_> {
    fn now(&self) -> SimTime {
        self.io.now()
    }
    fn count(&mut self, c: u32, n: u64) {
        self.core.count(c, n);
    }
    fn domains(&self) -> &Domains {
        &self.core.domains
    }
    fn dma(&self) -> &DmaPort {
        self.io.dma()
    }
    fn issue(&mut self, req: Req, dest: &Dest, hdr: Header, payload: &[u8], tc: u8) {
        Backplane::issue(self, req, dest, hdr, payload, tc);
    }
    fn issue_frame(&mut self, req: Req, dest: &Dest, hdr: Header, frame: Vec<u8>, tc: u8) {
        Backplane::issue_frame(self, req, dest, hdr, frame, tc);
    }
    fn frame_buffer(&mut self, cap: usize) -> Vec<u8> {
        self.io.packet_buffer(cap)
    }
    fn train_ok(&self, pe: u32) -> bool {
        self.io.train_ok(PortId(pe))
    }
    fn issue_train(
        &mut self,
        req: Req,
        dest: &Dest,
        hdr: Header,
        frames: u32,
        segments: Vec<Segment>,
        tc: u8,
    ) {
        Backplane::issue_train(self, req, dest, hdr, frames, segments, tc);
    }
    fn post_cqe(&mut self, cqh: u64, cqe: Cqe) {
        Backplane::post_cqe(self, cqh, cqe);
    }
    fn raise(&mut self, v: u16) {
        Backplane::raise(self, v);
    }
    fn step_after(&mut self, delay: SimDuration) {
        self.io.timer(delay, TOKEN_BTE);
    }
}

/// The target side's view: the backplane plus the BTE RX channels SENDs land in.
struct Inbound<'a, 'io> {
    bp: Backplane<'a, 'io>,
    rx: &'a mut BteRx,
}

impl TargetPort for Inbound<'_, '_> {
    fn nic(&self) -> u32 {
        self.bp.core.cfg.pe
    }
    fn now(&self) -> SimTime {
        self.bp.io.now()
    }
    fn count(&mut self, c: u32, n: u64) {
        self.bp.core.count(c, n);
    }
    fn domains(&self) -> &Domains {
        &self.bp.core.domains
    }
    fn dma(&self) -> &DmaPort {
        self.bp.io.dma()
    }
    fn send_frames(&mut self, pe: u32, tc: u8, frame: Vec<u8>, more: u32, segments: Vec<Segment>) {
        self.bp.send_frames(pe, tc, frame, more, segments);
    }
    fn frame_buffer(&mut self, cap: usize) -> Vec<u8> {
        self.bp.io.packet_buffer(cap)
    }
    fn recycle(&mut self, frame: Vec<u8>) {
        self.bp.io.recycle(frame);
    }
    fn ensure_watchdog(&mut self) {
        self.bp.ensure_watchdog();
    }
    fn post_cqe(&mut self, cqh: u64, cqe: Cqe) -> Posted {
        self.bp.post_cqe(cqh, cqe)
    }
    fn deliver_send(&mut self, hdr: &Header, payload: &[u8]) -> Result<(), Fault> {
        if let Some(v) = self.rx.receive(self.bp.io.dma(), hdr, payload)? {
            self.bp.raise(v);
        }
        Ok(())
    }
    fn take_request(&mut self, tag: u32) -> Option<Req> {
        self.bp.core.requests.take(tag)
    }
    fn fault(&mut self, site: NicSite) -> bool {
        self.bp.io.fault(site)
    }
    fn overrun_cq(&mut self, cqh: u64) -> Posted {
        let r = self.bp.core.cqs.overrun(cqh);
        match r {
            Posted::Lost => self.bp.core.count(counter::CQ_LOST, 1),
            _ => self.bp.core.count(counter::CQ_DROPPED, 1),
        }
        r
    }
    fn hold_credit_return(&mut self, src: u32, hdr: &Header, payload: &[u8]) -> bool {
        let fires = self.bp.io.fault(NicSite::SmsgStarve);
        if !self.bp.core.held.holds_credit(self.bp.io.now(), fires) {
            return false;
        }
        let credit = (src, *hdr, payload.to_vec());
        self.bp.core.held.hold_credit(self.bp.io, credit, fires)
    }
}

impl std::fmt::Debug for Gemini {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gemini")
            .field("name", &self.core.cfg.name)
            .field("pe", &self.core.cfg.pe)
            .field("outstanding", &self.core.requests.len())
            .finish_non_exhaustive()
    }
}

impl Gemini {
    /// Entries of the NIC's sparse tables (NTT, MDD/MRT/vMDH, CQ descriptors, BTE
    /// descriptors) backed by storage: 0 out of reset, growing a page at a time
    /// (`emu_core::sparse`) with what software writes.
    pub fn allocated_table_entries(&self) -> usize {
        self.core.ntt.allocated_entries()
            + self.core.domains.allocated_entries()
            + self.core.cqs.allocated_entries()
            + self.bte.allocated_entries()
            + self.bte_rx.allocated_entries()
    }

    /// A NIC in its reset state: every table empty, every CQ and channel disabled.
    pub fn new(cfg: GeminiConfig) -> Result<Self, GeminiError> {
        let ids = PciIds {
            vendor_id: pci::VENDOR_ID,
            device_id: pci::DEVICE_ID,
            revision: pci::REVISION,
            class_code: pci::CLASS_CODE,
            subsystem_vendor_id: pci::VENDOR_ID,
            subsystem_id: pci::DEVICE_ID,
        };
        let bars: Vec<(u8, BarConfig)> = pci::BARS
            .iter()
            .map(|b| {
                let kind = if b.is_64bit {
                    BarKind::Mem64
                } else {
                    BarKind::Mem32
                };
                let bar = BarConfig {
                    size: b.size,
                    kind,
                    prefetchable: b.prefetchable,
                };
                (b.index, bar)
            })
            .collect();
        let msix = MsixConfig {
            table_size: pci::MSIX_VECTORS,
            table_bar: pci::BAR2.index,
            table_offset: pci::MSIX_TABLE_OFFSET as u32,
            pba_bar: pci::BAR2.index,
            pba_offset: pci::MSIX_PBA_OFFSET as u32,
        };
        let pi = PciShell::new(ids, &bars, msix)?;
        Ok(Gemini {
            fma: Fma::default(),
            bte: Bte::new(&cfg),
            bte_rx: BteRx::default(),
            responder: Responder::default(),
            core: Core {
                cfg,
                pi,
                ntt: Ntt::default(),
                domains: Domains::default(),
                cqs: CqTable::default(),
                held: FaultHold::default(),
                requests: Requests::default(),
                counters: [0; counter::COUNT as usize],
                watchdog_armed: false,
            },
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GeminiConfig {
        &self.core.cfg
    }

    /// Counter `c`.
    pub fn counter(&self, c: u32) -> u64 {
        self.core.counters.get(c as usize).copied().unwrap_or(0)
    }

    /// The shared core and this event's I/O, borrowed beside the blocks.
    fn bp<'a, 'io>(core: &'a mut Core, io: &'a mut DeviceIo<'io>) -> Backplane<'a, 'io> {
        Backplane { io, core }
    }

    fn flush_irq_backlog(&mut self, io: &mut DeviceIo<'_>) {
        self.core.pi.raise_released(io);
    }

    /// A frame from the fabric: to the target side; an answer it matched goes on to the
    /// sequence or transfer that waits for it.
    fn on_packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        let mut port = Inbound {
            bp: Self::bp(&mut self.core, io),
            rx: &mut self.bte_rx,
        };
        if let Some(answer) = self.responder.on_packet(&mut port, pkt) {
            self.answered(io, answer);
        }
    }

    /// The fault sites' timer: apply the credit returns whose hold is over, then process the
    /// frames a stall held, in order.
    fn fault_timer(&mut self, io: &mut DeviceIo<'_>) {
        let (credits, packets) = self.core.held.release(io.now());
        for (src, hdr, word) in credits {
            let mut port = Inbound {
                bp: Self::bp(&mut self.core, io),
                rx: &mut self.bte_rx,
            };
            Responder::put_message(&mut port, src, &hdr, &word);
        }
        for p in packets {
            self.on_packet(io, p);
        }
    }

    /// A request ended (answer or timeout): to the sequence or transfer that waits. The
    /// answer to a train's frames ends each of their requests in tag order, as their answers
    /// one by one would.
    fn answered(&mut self, io: &mut DeviceIo<'_>, a: Answer) {
        let (tag, more) = (a.tag, a.more);
        self.answered_one(io, a);
        for i in 1..=more {
            match self.core.requests.take(tag.wrapping_add(i)) {
                Some(req) => self.answered_one(
                    io,
                    Answer {
                        req,
                        more: 0,
                        tag: tag.wrapping_add(i),
                        ..a
                    },
                ),
                None => self.core.count(counter::STRAY_ANSWERS, 1),
            }
        }
    }

    fn answered_one(&mut self, io: &mut DeviceIo<'_>, a: Answer) {
        let mut bp = Self::bp(&mut self.core, io);
        if a.fault.is_some() {
            bp.core.count(counter::ERRORS, 1);
        }
        match a.req.owner {
            Owner::Seq(s) => {
                self.fma
                    .seq_answered(&mut bp, s, a.req.is_get, a.fault, a.rem_overrun)
            }
            Owner::Xfer(x) => self.bte.xfer_answered(&mut bp, x, a.fault),
        }
    }

    /// Watchdog: fail requests without progress for `request_timeout`, give up on stalled
    /// in-order streams, re-arm while anything is outstanding.
    fn watchdog(&mut self, io: &mut DeviceIo<'_>) {
        self.core.watchdog_armed = false;
        let now = io.now();
        let timeout = self.core.cfg.request_timeout;
        // Sequences first, then transfers, each in ascending id order.
        let mut dead: Vec<Owner> = self
            .fma
            .expired(now, timeout)
            .into_iter()
            .map(Owner::Seq)
            .collect();
        dead.extend(self.bte.expired(now, timeout).into_iter().map(Owner::Xfer));
        for owner in dead {
            for t in self.core.requests.tags_of(owner) {
                if let Some(req) = self.core.requests.take(t) {
                    tracing::debug!(
                        target: "gemini::watchdog",
                        nic = self.core.cfg.pe,
                        tag = t,
                        "request timed out"
                    );
                    self.core.count(counter::TIMEOUTS, 1);
                    let a = Answer {
                        req,
                        fault: Some(Fault::Timeout),
                        rem_overrun: false,
                        more: 0,
                        tag: t,
                    };
                    self.answered(io, a);
                }
            }
        }
        for key in self.responder.stalled(now, SimDuration(timeout.0 / 2)) {
            let mut port = Inbound {
                bp: Self::bp(&mut self.core, io),
                rx: &mut self.bte_rx,
            };
            self.responder.skip_order_gap(&mut port, key);
        }
        let busy = !self.core.requests.is_empty() || self.responder.holding() || self.bte.busy();
        if busy {
            Self::bp(&mut self.core, io).ensure_watchdog();
        }
    }

    fn reg_read(&mut self, io: &mut DeviceIo<'_>, off: u64, data: &mut [u8]) {
        let sub = off & 7;
        let t = regs::decode(off);
        let v = match t {
            Target::NodeId => u64::from(self.core.cfg.pe),
            Target::NttConfig => self.core.ntt.config,
            Target::Ntt { bank, index } => self.core.ntt.read(bank, index),
            Target::Mrt(i) => {
                let lo = u64::from(self.core.domains.read_mrt(i));
                let hi = u64::from(self.core.domains.read_mrt(i + 1));
                return regs::extract(lo | (hi << 32), off & 3, data);
            }
            Target::MrtPageSize => self.core.domains.mrt_pagesize,
            Target::Mdd { index, off } => self.core.domains.read_mdd(index, (off / 8) as usize),
            Target::Vmdh(i) => {
                let lo = u64::from(self.core.domains.read_vmdh(i));
                let hi = u64::from(self.core.domains.read_vmdh(i + 1));
                return regs::extract(lo | (hi << 32), off & 3, data);
            }
            Target::Cq { index, off } => self.core.cqs.read_kernel(index, (off / 8) as usize),
            Target::CqUser { index, off } => self.core.cqs.read_user(index, off & !7),
            Target::FmaPriv { id, off } | Target::FmaUser { id, off } => {
                let privileged = matches!(t, Target::FmaPriv { .. });
                let mut bp = Self::bp(&mut self.core, io);
                self.fma.reg_read(&mut bp, id, off & !7, privileged)
            }
            Target::Window { .. } => 0,
            Target::Counter(i) => self.counter(i),
            Target::BteTx { .. }
            | Target::BteTxChannel { .. }
            | Target::TxRingBase
            | Target::TxRingCount => self.bte.reg_read(t),
            Target::BteRx(_)
            | Target::BteRxChannel { .. }
            | Target::RxRingBase
            | Target::RxRingCount => self.bte_rx.reg_read(t),
            Target::Unmapped => 0,
        };
        regs::extract(v, sub, data);
    }

    fn reg_write(&mut self, io: &mut DeviceIo<'_>, off: u64, data: &[u8]) -> Result<(), MmioError> {
        let sub = off & 7;
        let t = regs::decode(off);
        match t {
            Target::Window { kind, id, off } => {
                let mut bp = Self::bp(&mut self.core, io);
                return self.fma.window_store(&mut bp, kind, id, off, data);
            }
            Target::FmaPriv { id, off } | Target::FmaUser { id, off } => {
                let privileged = matches!(t, Target::FmaPriv { .. });
                let mut bp = Self::bp(&mut self.core, io);
                return self.fma.reg_write(&mut bp, id, off, data, privileged);
            }
            _ => {}
        }
        let merged = |old: u64| regs::merge(old, sub, data);
        match t {
            Target::NttConfig => self.core.ntt.config = merged(self.core.ntt.config),
            Target::Ntt { bank, index } => {
                let v = merged(self.core.ntt.read(bank, index));
                self.core.ntt.write(bank, index, v);
            }
            Target::Mrt(i) => {
                let old = u64::from(self.core.domains.read_mrt(i))
                    | (u64::from(self.core.domains.read_mrt(i + 1)) << 32);
                let v = regs::merge(old, off & 3, data);
                self.core.domains.write_mrt(i, v as u32);
                if data.len() == 8 {
                    self.core.domains.write_mrt(i + 1, (v >> 32) as u32);
                }
            }
            Target::MrtPageSize => {
                self.core.domains.mrt_pagesize = merged(self.core.domains.mrt_pagesize) & 7
            }
            Target::Mdd { index, off } => {
                let q = (off / 8) as usize;
                let v = merged(self.core.domains.read_mdd(index, q));
                self.core.domains.write_mdd(index, q, v);
            }
            Target::Vmdh(i) => {
                let old = u64::from(self.core.domains.read_vmdh(i))
                    | (u64::from(self.core.domains.read_vmdh(i + 1)) << 32);
                let v = regs::merge(old, off & 3, data);
                self.core.domains.write_vmdh(i, v as u32);
                if data.len() == 8 {
                    self.core.domains.write_vmdh(i + 1, (v >> 32) as u32);
                }
            }
            Target::Cq { index, off } => {
                let q = (off / 8) as usize;
                let v = merged(self.core.cqs.read_kernel(index, q));
                self.core.cqs.write_kernel(index, q, v);
            }
            Target::CqUser { index, off } => {
                let v = merged(self.core.cqs.read_user(index, off & !7));
                self.core.cqs.write_user(index, off & !7, v);
            }
            Target::BteTx { .. }
            | Target::BteTxChannel { .. }
            | Target::TxRingBase
            | Target::TxRingCount => {
                let mut bp = Self::bp(&mut self.core, io);
                self.bte.reg_write(&mut bp, t, sub, data);
            }
            Target::BteRx(_)
            | Target::BteRxChannel { .. }
            | Target::RxRingBase
            | Target::RxRingCount => self.bte_rx.reg_write(t, sub, data),
            Target::NodeId
            | Target::Counter(_)
            | Target::Unmapped
            | Target::Window { .. }
            | Target::FmaPriv { .. }
            | Target::FmaUser { .. } => {}
        }
        Ok(())
    }
}

fn check_width(offset: u64, data_len: usize) -> Result<(), MmioError> {
    if !matches!(data_len, 1 | 2 | 4 | 8) {
        return Err(MmioError::BadWidth {
            offset,
            width: data_len,
        });
    }
    if !offset.is_multiple_of(data_len as u64) {
        return Err(MmioError::Misaligned {
            offset,
            width: data_len,
        });
    }
    Ok(())
}

impl DeviceModel for Gemini {
    fn name(&self) -> &str {
        &self.core.cfg.name
    }

    fn config_read(&mut self, reg: u16) -> u32 {
        self.core.pi.config_read(reg)
    }

    fn config_write(&mut self, reg: u16, value: u32) {
        self.core.pi.config_write(reg, value);
    }

    fn mmio_read(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError> {
        self.flush_irq_backlog(io);
        check_width(offset, data.len())?;
        match bar {
            0 => {
                self.reg_read(io, offset, data);
                Ok(())
            }
            2 if offset >= pci::MSIX_PBA_OFFSET => {
                self.core.pi.pba_read(offset - pci::MSIX_PBA_OFFSET, data)
            }
            2 => self
                .core
                .pi
                .table_read(offset - pci::MSIX_TABLE_OFFSET, data),
            _ => Err(MmioError::Unmapped { addr: offset }),
        }
    }

    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        self.flush_irq_backlog(io);
        check_width(offset, data.len())?;
        let _span = tracing::trace_span!("gemini_mmio", bar, offset, len = data.len()).entered();
        match bar {
            0 => self.reg_write(io, offset, data),
            2 if offset >= pci::MSIX_PBA_OFFSET => {
                self.core.pi.pba_write(offset - pci::MSIX_PBA_OFFSET, data)
            }
            2 => {
                let at = offset - pci::MSIX_TABLE_OFFSET;
                self.core.pi.table_write(io, at, data)
            }
            _ => Err(MmioError::Unmapped { addr: offset }),
        }
    }

    fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        self.flush_irq_backlog(io);
        let _span =
            tracing::trace_span!("gemini_rx", src = pkt.src.0, len = pkt.data.len()).entered();
        // Fault site `slow_target`: the NIC stalls; this frame and every frame arriving
        // during the stall are processed in order when it ends.
        let fires = io.fault(NicSite::SlowTarget);
        if let Some(pkt) = self.core.held.hold_packet(io, pkt, fires) {
            self.on_packet(io, pkt);
        }
    }

    fn timer(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        self.flush_irq_backlog(io);
        let _span = tracing::trace_span!("gemini_timer", token).entered();
        match token {
            TOKEN_BTE => {
                let mut bp = Self::bp(&mut self.core, io);
                self.bte.step(&mut bp);
            }
            TOKEN_WATCHDOG => self.watchdog(io),
            TOKEN_FAULTS => self.fault_timer(io),
            _ => {}
        }
    }

    fn bar_size(&self, bar: u8) -> u64 {
        pci::BARS
            .iter()
            .find(|b| b.index == bar)
            .map_or(0, |b| b.size)
    }
    fn snapshot(&self) -> Option<Box<dyn DeviceModel>> {
        Some(Box::new(self.clone()))
    }
}

#[cfg(test)]
mod idle_storage_tests {
    use super::*;
    use emu_core::sparse::PAGE;

    #[test]
    fn an_idle_nic_holds_no_table_entries_and_grows_a_page_per_written_entry() {
        let mut nic = Gemini::new(GeminiConfig::new(0)).unwrap();
        assert_eq!(nic.allocated_table_entries(), 0, "out of reset");
        // Reads of entries nobody wrote give reset values and allocate nothing.
        assert_eq!(nic.core.ntt.read(0, 100), 0);
        assert_eq!(nic.core.domains.read_mrt(9000), 0);
        assert_eq!(nic.core.domains.read_mdd(7, 0), 0);
        assert_eq!(nic.core.cqs.read_kernel(5, 0), 0);
        assert_eq!(nic.allocated_table_entries(), 0, "after reads");
        // 30 NTT entries and 30 MRT entries, 100 apart: a page each.
        for k in 0..30u32 {
            nic.core.ntt.write(0, k * 100, 0x1234);
            nic.core.domains.write_mrt(k * 100, 0x55);
        }
        // bank0 and its written flags: two tables, one page each per entry; the MRT: one.
        assert_eq!(nic.allocated_table_entries(), 3 * 30 * PAGE);
        assert_eq!(nic.core.ntt.read(0, 200), 0x1234);
        assert_eq!(nic.core.domains.read_mrt(200), 0x55);
        assert_eq!(
            nic.core.domains.read_mrt(201),
            0,
            "neighbour reads as reset"
        );
        // Out of range writes are ignored and allocate nothing.
        nic.core.ntt.write(0, u32::MAX, 1);
        nic.core.domains.write_mrt(u32::MAX, 1);
        assert_eq!(nic.allocated_table_entries(), 3 * 30 * PAGE);
    }
}
