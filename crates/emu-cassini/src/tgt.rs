//! The target side: incoming packets -> RMU (PtlTE) -> LPE (matching decision) -> data moved
//! through the ATU -> target events -> the response (ACK for a put, REPLY segments carrying
//! Get data); target CQ commands (APPEND, SEARCH, SEARCH_AND_DELETE, UNLINK, SETSTATE); and
//! the driver's view of the portal table (`c_lpe_cfg_ptl_table`).
//!
//! States of an incoming request: `receive` (parse, CRC) -> `request` (DFA check, RMU, LPE)
//! -> `place_put` / `serve_get` (data movement; a put longer than one MTU keeps an
//! [`InMsg`] until its last continuation) -> `complete_put` (target events, CT, ACK; for a
//! matched rendezvous put, the Get that pulls the rest, whose completion applies the CT).
//! A rendezvous put that went unexpected is remembered with its fabric header until the
//! append that matches it starts the Get (`command_outcome`). Also here: the LPE
//! configuration CSRs (`c_lpe_cfg_get_ctrl`, LE pools).
//!
//! The target reaches the rest of the NIC only through [`TgtCtx`] (implemented by `hw`):
//! responses go to the initiator, answers leave through the PCT, counting events go to the TOU.

use emu_core::dma::{Perm, Segment};
use emu_core::engine::DeviceIo;
use emu_core::fabric::{Packet, PortId, TrafficClass, Train};
use emu_core::nic_faults::NicSite;
use firmware_spec::cassini::amo::{AmoOp, AmoType, CswapOp};
use firmware_spec::cassini::cmd::{DmaOp, FormatError, TargetCommand, TgtOp};
use firmware_spec::cassini::csr;
use firmware_spec::cassini::event::{EventType, StateChangeFields, TargetLong, TargetShort};
use firmware_spec::cassini::le::{PtAllocOpts, PtlList, PtlteState, ScReason};
use firmware_spec::cassini::rc::ReturnCode;

use crate::amo::{self, AmoRequest, FpSignals};
use crate::atu::{Atu, Mapped};
use crate::block::{Counters, EventClass, Exec, Fail, GetCtrl};
use crate::csr::CsrFile;
use crate::lpe::{
    AtomicInfo, CommandOutcome, CtUpdate, IncomingOutcome, IncomingRequest, Le, Lpe, NetOp,
    PE_LE_MAX, POOLS_PER_PE, PtlteConfig, RendezvousGet, TargetEvent, UnexpectedHeader,
};
use crate::rmu::Rmu;
use crate::tables::Tables;
use crate::wire::{self, AmoPayload, Continuation, Fab, MTU, Parsed, Request, Response, RspKind};
use emu_core::hash::IntMap;
use std::sync::Arc;

/// A put longer than one packet, between its first and last packet.
#[derive(Debug, Clone)]
pub(crate) struct InMsg {
    pt: u16,
    ac: u16,
    /// Where the data goes and how much of it is placed (after truncation), including `hdr`
    /// bytes of wire headers in front of the payload (REQUEST list).
    start: u64,
    length: u64,
    hdr: u64,
    /// Which of its frames have arrived (frame `i` carries the bytes at `i * MTU`).
    frames: FramesSeen,
    /// The landing range as checked at the first frame, translated once for all of them.
    mapped: Option<Mapped>,
    data_rc: ReturnCode,
    outcome: IncomingOutcome,
    tc: TrafficClass,
    fab: Fab,
    /// When its last packet arrived (ps): a message still receiving packets is alive,
    /// however long it takes in all.
    at: u64,
}

/// The frames of a multi-packet put that have arrived. A put is complete when every frame
/// has come, whatever their order: the frames of a restricted put travel unordered (cassini.md
/// §2), so neither the frame flagged end-of-message nor a byte count (duplicates) says that
/// the rest has landed. Kept as the count of frames seen in order plus the ones seen ahead of
/// it, so its size follows the frames that arrived out of order, not the message length.
#[derive(Debug, Clone, Default)]
pub(crate) struct FramesSeen {
    total: u64,
    upto: u64,
    ahead: std::collections::BTreeSet<u64>,
}

impl FramesSeen {
    /// A message of `bytes` bytes on the wire, its first frame (`first` bytes) arrived.
    fn new(bytes: u64, first: u64) -> Self {
        let mut f = FramesSeen {
            total: bytes.div_ceil(MTU as u64).max(1),
            ..FramesSeen::default()
        };
        if first > 0 {
            f.saw(0);
        }
        f
    }

    /// Frame `i` arrived (a duplicate or a frame beyond the message changes nothing).
    fn saw(&mut self, i: u64) {
        if i < self.upto || i >= self.total {
            return;
        }
        if i > self.upto {
            self.ahead.insert(i);
            return;
        }
        self.upto += 1;
        while self.ahead.remove(&self.upto) {
            self.upto += 1;
        }
    }

    /// Every frame has arrived.
    fn complete(&self) -> bool {
        self.upto >= self.total
    }
}

/// Land train `t`, whose payload starts at offset `at` of message `m` (a frame boundary):
/// its payload is copied from the initiator's host memory straight into the landing range,
/// as its frames would have placed it, and every one of its frames counts as arrived.
fn land_train(atu: &mut Atu, io: &DeviceIo<'_>, m: &mut InMsg, at: u64, t: &Train) {
    let off = at + m.hdr;
    if m.data_rc == ReturnCode::Ok && off < m.length {
        let n = t.payload_len().min(m.length - off);
        let to = atu.segments_of(
            io.dma(),
            m.mapped.as_ref(),
            m.ac,
            m.start + off,
            n,
            Perm::WRITE,
            MTU as u64,
        );
        let from = cut_segments(&t.segments, n);
        let copied = to.and_then(|to| {
            t.source
                .copy_segments_to(&from, io.dma(), &to)
                .map_err(|_| ReturnCode::PcieUnsuccessCmpl)
        });
        if let Err(rc) = copied {
            m.data_rc = rc;
        }
    }
    let first = at / MTU as u64;
    for i in 0..u64::from(t.frames) {
        m.frames.saw(first + i);
    }
}

/// The first `n` bytes of a list of segments.
pub(crate) fn cut_segments(segs: &[Segment], n: u64) -> Vec<Segment> {
    let mut left = n;
    let mut out = Vec::with_capacity(segs.len());
    for s in segs {
        if left == 0 {
            break;
        }
        let len = s.len.min(left);
        out.push(Segment { addr: s.addr, len });
        left -= len;
    }
    out
}

/// The REPLY frames of a Get answered as trains ([`Train`]): on the threaded engine, when
/// nothing on the way to a port of this process needs the frames' bytes
/// ([`DeviceIo::train_ok`]). The PCT keeps it in the connection's backlog and asks for the
/// next packet as the window opens ([`TgtOps::reply_next`]): a frame read from host memory
/// carrying a train of as many following frames as the window's room allows, their payload
/// left in this NIC's host memory for the initiator to copy when the train lands. The
/// target events of the Get ([`OwedGet`]) are posted when the last packet is acknowledged,
/// so they never come before the bytes were read.
#[derive(Debug, Clone)]
pub(crate) struct ReplyStream {
    /// The fabric header of the frames (from this NIC to the initiator).
    back: Fab,
    src: PortId,
    dst: PortId,
    tc: TrafficClass,
    /// The frames' response header (handle, list, total length).
    rsp: Response,
    ac: u16,
    start: u64,
    /// Offset of the next frame's bytes in the reply.
    off: u64,
    length: u64,
    /// The key of the owed target events in [`Tgt::owed`].
    token: u64,
    /// A train could not be made (a piece of the source would not read): the rest goes
    /// frame by frame, each read when it leaves.
    frames_only: bool,
}

impl ReplyStream {
    /// The PCT connection the frames travel on: (fabric port, VNI, traffic class).
    pub(crate) fn conn_key(&self) -> (u32, u16, u8) {
        (self.dst.0, self.back.vni, self.tc.0)
    }

    /// Whether every frame has been made.
    pub(crate) fn done(&self) -> bool {
        self.off >= self.length
    }

    /// The key of the target events owed to the stream's end.
    pub(crate) fn token(&self) -> u64 {
        self.token
    }
}

/// The target events and counting event of a Get answered as trains, posted once its
/// REPLY frames have been read ([`ReplyStream`]).
#[derive(Debug, Clone)]
pub(crate) struct OwedGet {
    events: Vec<TargetEvent>,
    ct: Option<CtUpdate>,
    /// The return code of the read (a frame that would not read ends the reply with it).
    rc: ReturnCode,
}

/// A Get that matched an overflow entry (DELAYED): answered when an append matches its
/// unexpected header.
#[derive(Debug, Clone, Copy)]
struct PendingGet {
    fab: Fab,
    handle: u32,
    tc: TrafficClass,
    /// A delayed atomic (else a Get).
    amo: Option<(AmoPayload, bool)>,
}

/// What the target needs from the rest of the NIC: its own state between packets, the
/// counters, the NIC's address, the RMU and LPE (the matching decision), the configuration
/// tables and the ATU (data placement), the event queues, and the blocks it hands work to:
/// the initiator (responses, rendezvous Gets, the shared timeout scan), the PCT (`pct_send`)
/// and the TOU (counting events). `hw` implements it.
pub(crate) trait TgtCtx {
    /// The target's state between packets.
    fn tgt(&mut self) -> &mut Tgt;
    /// Resource group of target CQ `n` (`mem_q_rgid`).
    fn tgq_rgid(&self, n: u32) -> u8;
    /// The NIC-wide counters.
    fn counters(&mut self) -> &mut Counters;
    /// This NIC's NID.
    fn nid(&self) -> u32;
    /// NID of fabric port 0.
    fn nid_base(&self) -> u32;
    /// The receive match unit (VNI and portal TCAMs).
    fn rmu(&mut self) -> &mut Rmu;
    /// The list processing engine.
    fn lpe(&mut self) -> &mut Lpe;
    /// The decoded CQ configuration tables (ACs, PtlTE resource groups).
    fn tables(&self) -> &Tables;
    /// Address translation for target buffers.
    fn atu(&mut self) -> &mut Atu;
    /// The target's state and the ATU together (a continuation lands in the message it
    /// belongs to).
    fn tgt_and_atu(&mut self) -> (&mut Tgt, &mut Atu);
    /// Whether EQ `eq` can take an event of `bytes` of class `class` now.
    fn eq_has_room(&self, eq: u16, bytes: usize, class: EventClass) -> bool;
    /// Whether EQ `eq` takes long target events.
    fn target_long(&self, eq: u16) -> bool;
    /// Post an encoded event to EQ `eq`; false if it was dropped.
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool;
    /// A response arrived for one of this NIC's requests (the initiator), with the train of
    /// the REPLY frames that follow it, if any.
    fn response(
        &mut self,
        io: &mut DeviceIo<'_>,
        rsp: &Response,
        payload: &[u8],
        train: Option<&Train>,
    );
    /// Issue the Get that pulls the rest of a rendezvous put (the initiator).
    fn launch_rendezvous_get(
        &mut self,
        io: &mut DeviceIo<'_>,
        g: &RendezvousGet,
        put: &Fab,
        tc: TrafficClass,
        ct: Option<CtUpdate>,
    );
    /// Whether the initiator's timeout scan is armed.
    fn ixe_scan_armed(&mut self) -> bool;
    /// Arm the initiator's timeout scan (it also expires target messages).
    fn arm_scan(&mut self, io: &mut DeviceIo<'_>);
    /// Send a frame through the PCT.
    fn pct_send(&mut self, io: &mut DeviceIo<'_>, pkt: Packet);
    /// Send the REPLY frames of a Get through the PCT as the window opens.
    fn pct_reply(&mut self, io: &mut DeviceIo<'_>, stream: ReplyStream);
    /// A counting event on CT `ct` (the TOU).
    fn ct_event(&mut self, io: &mut DeviceIo<'_>, ct: u16, success: u64, failure: u64);
}

impl<T: TgtCtx + ?Sized> TgtOps for T {}

/// Target state between packets.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tgt {
    msgs: IntMap<(u32, u32), InMsg>,
    pending_gets: IntMap<u64, PendingGet>,
    /// Rendezvous puts waiting as unexpected headers: the fabric header and traffic class
    /// they arrived with (for the Get an append will start).
    pending_rdzv: IntMap<u64, (Fab, TrafficClass)>,
    pub(crate) rdzv_get: GetCtrl,
    /// Target events of Gets answered as trains, by [`ReplyStream::token`]: posted when
    /// their last REPLY packet is acknowledged.
    owed: IntMap<u64, OwedGet>,
    next_token: u64,
}

/// The PtlTE options of a `c_lpe_cfg_ptl_table` entry as `cxi_pt_alloc_opts` bits.
fn pt_options(csrs: &CsrFile, n: u32) -> PtlteConfig {
    use csr::fields::c_lpe_cfg_ptl_table as f;
    let c = csr::C_LPE_CFG_PTL_TABLE;
    let g = |fld| csrs.field(c, n, fld) != 0;
    let mut o = PtAllocOpts::empty();
    let map = [
        (f::CLR_REMOTE_OFFSET, PtAllocOpts::CLR_REMOTE_OFFSET),
        (f::EN_FLOWCTRL, PtAllocOpts::EN_FLOWCTRL),
        (f::USE_LONG_EVENT, PtAllocOpts::USE_LONG_EVENT),
        (f::LOSSLESS, PtAllocOpts::LOSSLESS),
        (f::EN_EVENT_MATCH, PtAllocOpts::EN_EVENT_MATCH),
        (
            f::EN_RESTRICTED_UNICAST_LM,
            PtAllocOpts::EN_RESTRICTED_UNICAST_LM,
        ),
        (f::USE_LOGICAL, PtAllocOpts::USE_LOGICAL),
        (f::IS_MATCHING, PtAllocOpts::IS_MATCHING),
        (f::DO_SPACE_CHECK, PtAllocOpts::DO_SPACE_CHECK),
        (f::EN_ALIGN_LM, PtAllocOpts::EN_ALIGN_LM),
        (f::EN_MATCH_ON_VNI, PtAllocOpts::EN_MATCH_ON_VNI),
        (f::EN_SW_HW_ST_CHNG, PtAllocOpts::EN_SW_HW_ST_CHNG),
        (f::SIGNAL_INVALID, PtAllocOpts::SIGNAL_INVALID),
        (f::SIGNAL_UNDERFLOW, PtAllocOpts::SIGNAL_UNDERFLOW),
        (f::SIGNAL_OVERFLOW, PtAllocOpts::SIGNAL_OVERFLOW),
        (f::SIGNAL_INEXACT, PtAllocOpts::SIGNAL_INEXACT),
    ];
    for (fld, opt) in map {
        o = o.with(opt, g(fld));
    }
    PtlteConfig {
        options: o,
        eq: csrs.field(c, n, f::EQ_HANDLE) as u16,
        pe: csrs.field(c, n, f::PE_NUM) as u8,
        le_pool: csrs.field(c, n, f::LE_POOL) as u8,
        cntr_pool: csrs.field(c, n, f::CNTR_POOL) as u8,
    }
}

/// `c_lpe_cfg_ptl_table[n]` was written (docs/cassini-programming.md, "PtlTE table writes").
pub(crate) fn ptl_table_written(lpe: &mut Lpe, csrs: &CsrFile, n: u32, state_written: bool) {
    let Ok(pt) = u16::try_from(n) else {
        return;
    };
    let c = csr::C_LPE_CFG_PTL_TABLE;
    let raw = csrs.field(c, n, csr::fields::c_lpe_cfg_ptl_table::PTL_STATE) as u8;
    let Ok(state) = PtlteState::try_from(raw) else {
        return;
    };
    let cfg = pt_options(csrs, n);
    let current = lpe.state(pt);
    if !state_written {
        // Only the options changed; the state field holds whatever software last wrote.
        if current.is_some() {
            let _ = lpe.update_config(pt, cfg);
        }
        return;
    }
    // Errors below (index 0, bad pool) leave the PtlTE as it was: the driver sees the state it
    // reads back.
    match (state, current) {
        (PtlteState::Reset, Some(_)) => {
            let _ = lpe.free(pt);
        }
        (PtlteState::Reset, None) => {}
        (_, None) => {
            if lpe.configure(pt, cfg).is_ok() && state != PtlteState::Disabled {
                let _ = lpe.force_state(pt, state);
            }
        }
        (s, Some(cur)) => {
            let _ = lpe.update_config(pt, cfg);
            if s != cur {
                if s == PtlteState::SoftwareManaged && cur == PtlteState::Disabled {
                    // `cxil_pte_transition_sm`: the write carries the drop count software
                    // checked, and the NIC takes it only if no drop came in since, checked
                    // here, between two packets. A drop in between leaves the PtlTE
                    // DISABLED (the driver reads that back: -EAGAIN) so that its sender's
                    // report is still awaited; comparing with the live count would let
                    // that drop be forgotten.
                    let written = csrs.field(c, n, csr::fields::c_lpe_cfg_ptl_table::DROP_COUNT);
                    let _ = lpe.transition_sm(pt, written as u32);
                } else {
                    let _ = lpe.force_state(pt, s);
                }
            }
        }
    }
}

/// Patch the hardware-owned fields of `c_lpe_cfg_ptl_table[n]` with the model's state.
pub(crate) fn reflect_ptl_table(lpe: &Lpe, n: u32, image: &mut [u8]) {
    use csr::fields::c_lpe_cfg_ptl_table as f;
    let Ok(pt) = u16::try_from(n) else {
        return;
    };
    let state = lpe.state(pt).unwrap_or(PtlteState::Reset);
    f::PTL_STATE.set(image, u64::from(u8::from(state)));
    f::DROP_COUNT.set(image, u64::from(lpe.drop_count(pt).unwrap_or(0)));
    f::PRIO_LIST_VLD.set(image, u64::from(lpe.list_len(pt, PtlList::Priority) > 0));
    f::OVF_LIST_VLD.set(image, u64::from(lpe.list_len(pt, PtlList::Overflow) > 0));
    f::SWREQ_LIST_VLD.set(image, u64::from(lpe.list_len(pt, PtlList::Request) > 0));
    f::UNEXP_LIST_VLD.set(image, u64::from(lpe.list_len(pt, PtlList::Unexpected) > 0));
    // The UNEXPECTED list in the PE's list-entry RAM (`c_lpe_sts_list_entries`, read as
    // `c_ule_entry` by `cxil_pte_status`), in the layout of `Lpe::ule_ram_span`.
    let (head, tail) = lpe.ule_ram_span(pt).unwrap_or((0, 0));
    f::UNEXP_HEAD.set(image, u64::from(head));
    f::UNEXP_TAIL.set(image, u64::from(tail));
    f::PRIO_APPEND_DISABLED.set(image, u64::from(lpe.append_disabled(pt, PtlList::Priority)));
    f::OVF_APPEND_DISABLED.set(image, u64::from(lpe.append_disabled(pt, PtlList::Overflow)));
}

fn same(c: &'static csr::Csr, which: &'static csr::Csr) -> bool {
    c.offset == which.offset && c.name == which.name
}

/// LPE configuration written by the driver: `c_lpe_cfg_get_ctrl` (rendezvous Gets),
/// `c_lpe_cfg_pe_le_pools` / `c_lpe_cfg_pe_le_shared` (list-entry pool limits). Returns
/// whether `c` was one of them.
pub(crate) fn lpe_csr_written(
    tgt: &mut Tgt,
    lpe: &mut Lpe,
    csrs: &CsrFile,
    c: &'static csr::Csr,
    n: u32,
) -> bool {
    use csr::fields as f;
    if same(c, csr::C_LPE_CFG_GET_CTRL) {
        let g = |fld| csrs.field(c, 0, fld);
        tgt.rdzv_get = GetCtrl {
            index: (g(f::c_lpe_cfg_get_ctrl::GET_INDEX) & 0xFFF) as u16,
            index_ext: (g(f::c_lpe_cfg_get_ctrl::GET_INDEX_EXT) & 0x1F) as u8,
            transaction_type: (g(f::c_lpe_cfg_get_ctrl::TRANSACTION_TYPE) & 0xF) as u8,
        };
        lpe.set_rdzv_get_en(g(f::c_lpe_cfg_get_ctrl::GET_EN) != 0);
    } else if same(c, csr::C_LPE_CFG_PE_LE_POOLS) {
        let limits = crate::lpe::PoolLimits {
            num_reserved: csrs.field(c, n, f::c_lpe_cfg_pe_le_pools::NUM_RESERVED) as u32,
            max_alloc: csrs.field(c, n, f::c_lpe_cfg_pe_le_pools::MAX_ALLOC) as u32,
        };
        let per_pe = crate::lpe::POOLS_PER_PE as u32;
        let _ = lpe.set_pool_limits((n / per_pe) as u8, (n % per_pe) as u8, limits);
    } else if same(c, csr::C_LPE_CFG_PE_LE_SHARED) {
        let limits = crate::lpe::PeLimits {
            num_shared: csrs.field(c, n, f::c_lpe_cfg_pe_le_shared::NUM_SHARED) as u32,
            num_total: csrs.field(c, n, f::c_lpe_cfg_pe_le_shared::NUM_TOTAL) as u32,
        };
        let _ = lpe.set_pe_limits(n as u8, limits);
    } else {
        return false;
    }
    true
}

/// Patch the hardware-owned fields of the LPE configuration CSRs (the pool usage of
/// `c_lpe_cfg_pe_le_shared`); false if `c` is not one of them. `c_lpe_cfg_get_ctrl` reads
/// back what software wrote (its reset value before that, while the device uses the
/// defaults of [`GetCtrl`] and its configuration's `rdzv_get_en`).
pub(crate) fn lpe_reflect(lpe: &Lpe, c: &'static csr::Csr, entry: u32, image: &mut [u8]) -> bool {
    use csr::fields as f;
    if same(c, csr::C_LPE_CFG_PE_LE_SHARED) {
        let (shared, total) = lpe.pe_usage(entry as u8);
        f::c_lpe_cfg_pe_le_shared::NUM_SHARED_ALLOCATED.set(image, u64::from(shared));
        f::c_lpe_cfg_pe_le_shared::NUM_TOTAL_ALLOCATED.set(image, u64::from(total));
    } else if same(c, csr::C_LPE_STS_PE_LE_ALLOC) {
        // Entry `pe * LE_POOLS_PER_PE + pool`: LEs and unexpected headers held.
        let per = POOLS_PER_PE as u32;
        let (pe, pool) = ((entry / per) as u8, (entry % per) as u8);
        let used = lpe.pool_usage(pe, pool).allocated;
        f::c_lpe_sts_pe_le_alloc::NUM_ALLOCATED.set(image, u64::from(used));
    } else if same(c, csr::C_LPE_STS_LIST_ENTRIES) {
        // Entry `pe * LES_PER_PE + addr`, presented as a `c_ule_entry` when an unexpected
        // header sits there (LEs are not reflected).
        let (pe, addr) = ((entry / PE_LE_MAX) as u8, entry % PE_LE_MAX);
        if let Some((ule, next)) = lpe.ule_ram_entry(pe, addr) {
            write_ule_entry(&ule, next, image);
        }
    } else {
        return false;
    }
    true
}

/// Fill a `c_lpe_sts_list_entries` image with unexpected header `ule` in the `c_ule_entry`
/// view (csr_defs.json); `next` is the `addr` link. The opcode, DSCP, traffic class and
/// restricted bits are not modelled and stay 0.
fn write_ule_entry(ule: &UnexpectedHeader, next: u32, image: &mut [u8]) {
    use csr::fields::c_ule_entry as u;
    if image.len() < 48 {
        return;
    }
    if let Some(r) = ule.rendezvous {
        u::USE_OFFSET_FOR_GET.set(image, u64::from(r.use_offset_for_get));
        u::RENDEZVOUS_ID.set(image, u64::from(r.rendezvous_id));
        u::SFA_NID.set(image, u64::from(r.source_nid));
    }
    u::VNI.set(image, u64::from(ule.vni));
    u::HDR_DATA.set(image, ule.header_data);
    u::MATCH_BITS.set(image, ule.match_bits);
    u::INITIATOR.set(image, u64::from(ule.initiator));
    u::START_OR_OFFSET.set(image, ule.start_or_offset());
    u::MLENGTH.set(image, ule.mlength);
    u::REQUEST_LEN.set(image, ule.rlength);
    u::ADDR.set(image, u64::from(next));
    u::VLD.set(image, 1);
}

/// Encode a target event (short 32 B or long 64 B) into `out`; returns its length.
/// `rc` overrides the LPE's return code (a data-movement error).
fn encode_target(
    ev: &TargetEvent,
    long: bool,
    rc: Option<ReturnCode>,
    now_ns: u64,
    out: &mut [u8; 64],
) -> usize {
    let return_code = rc.unwrap_or(ev.return_code);
    let initiator = match ev.state_change {
        Some(sc) => StateChangeFields {
            ptlte_state: sc.ptlte_state,
            sc_reason: sc.sc_reason.unwrap_or(ScReason::FcEqFull),
            sc_nic_auto: sc.sc_nic_auto,
        }
        .to_initiator(),
        None => ev.initiator,
    };
    if long {
        let e = TargetLong {
            header_data: ev.header_data,
            initiator,
            ptlte_index: ev.ptlte_index,
            event_type: ev.event_type,
            ptl_list: ev.ptl_list,
            rendezvous: ev.rendezvous,
            get_issued: ev.get_issued,
            auto_unlinked: ev.auto_unlinked,
            match_bits: ev.match_bits,
            buffer_id: ev.buffer_id,
            vni: ev.vni,
            timestamp_ns: (now_ns % 1_000_000_000) as u32,
            timestamp_sec_low: ((now_ns / 1_000_000_000) & 3) as u8,
            mlength: ev.mlength.min(u64::from(u32::MAX)) as u32,
            rlength: ev.rlength.min(u64::from(u32::MAX)) as u32,
            remote_offset: ev.remote_offset,
            start: ev.start,
            lpe_stat_1: 0,
            lpe_stat_2: 0,
            atomic_type: AmoType::try_from(ev.atomic.ty).unwrap_or_default(),
            atomic_op: AmoOp::try_from(ev.atomic.op).unwrap_or_default(),
            cswap_op: CswapOp::try_from(ev.atomic.cswap_op).unwrap_or_default(),
            rendezvous_id: ev.rendezvous_id,
            return_code,
        };
        out.copy_from_slice(&e.encode());
        64
    } else {
        let e = TargetShort {
            header_data: ev.header_data,
            initiator,
            ptlte_index: ev.ptlte_index,
            event_type: ev.event_type,
            ptl_list: ev.ptl_list,
            auto_unlinked: ev.auto_unlinked,
            match_bits: ev.match_bits,
            buffer_id: ev.buffer_id,
            vni: ev.vni,
            length: ev.mlength.min(0xF_FFFF) as u32,
            return_code,
        };
        out[..32].copy_from_slice(&e.encode());
        32
    }
}

/// Whether a request is a rendezvous put.
fn op_is_rendezvous(req: &Request) -> bool {
    req.opcode == DmaOp::RendezvousPut as u8
}

/// Communication events (the ones that report a data movement).
/// Whether a target event has a short (32 B) form: a Put, Get or atomic that matched an
/// entry of the priority list, outside a rendezvous. Every other target event (LINK, UNLINK,
/// SEARCH, STATE_CHANGE, the *_OVERFLOW events, a message that landed in an overflow
/// buffer, a rendezvous Put, RENDEZVOUS, MATCH) carries fields only the long format has
/// (`start`, `mlength`, `rlength`, the state-change word) and is written long whatever the
/// PtlTE and EQ ask. Facts from HPE's libcxi tests, which expect exactly these sizes on
/// platforms without `use_long_event` or `CXI_EQ_TGT_LONG` (`tests/libcxi_test_common.c`
/// `process_eqe`, `msg.c`, `rendezvous.c`).
fn fits_short(ev: &TargetEvent) -> bool {
    matches!(
        ev.event_type,
        EventType::Put | EventType::Get | EventType::Atomic | EventType::FetchAtomic
    ) && ev.ptl_list == PtlList::Priority
        && !ev.rendezvous
}

fn is_comm(t: EventType) -> bool {
    matches!(
        t,
        EventType::Put
            | EventType::Get
            | EventType::Atomic
            | EventType::FetchAtomic
            | EventType::Rendezvous
    )
}

fn format_rc(e: &FormatError) -> ReturnCode {
    match e {
        FormatError::UnsupportedCommand { .. } => ReturnCode::IllegalOp,
        _ => ReturnCode::CmdInvalidArg,
    }
}

/// The target's behaviour, on anything that provides a [`TgtCtx`].
pub(crate) trait TgtOps: TgtCtx {
    /// A packet arrived.
    fn receive(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        if !pkt.crc_ok() {
            self.counters().rx_unrecognized_pkt += 1;
            return;
        }
        match wire::parse(&pkt.data) {
            Some(Parsed::Request(fab, r, payload)) => {
                let hdr = &pkt.data[..pkt.data.len() - payload.len()];
                self.request(io, &fab, &r, hdr, payload, pkt.tc);
                if let Some(t) = &pkt.train {
                    self.train(io, &fab, r.handle, payload.len() as u64, t);
                }
            }
            Some(Parsed::Continuation(fab, c, payload)) => {
                self.continuation(io, &fab, &c, payload, pkt.train.as_deref())
            }
            Some(Parsed::Response(_, r, payload)) => {
                self.response(io, &r, payload, pkt.train.as_deref())
            }
            None => self.counters().rx_unrecognized_pkt += 1,
        }
        // The payload has been placed (or copied where it must wait): the frame's buffer
        // goes back to the engine's pool for the next frame built here.
        io.recycle(pkt.data);
    }

    /// Send a response to the initiator of a request that arrived with `fab`.
    fn respond(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        r: &Response,
        data: &[u8],
    ) {
        let Some(port) = (fab.sfa >> 12).checked_sub(self.nid_base()) else {
            return;
        };
        let back = Fab {
            vni: fab.vni,
            sfa: self.nid() << 12,
            dfa: fab.sfa,
        };
        let buf = io.packet_buffer(wire::FRAME_ROOM + data.len());
        let mut b = wire::response_in(buf, &back, r, data.len());
        b.extend_from_slice(data);
        let src = io.port().unwrap_or_default();
        self.pct_send(io, wire::packet(src, PortId(port), tc, b));
    }

    fn nack(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        req: &Request,
        rc: ReturnCode,
    ) {
        let get = matches!(
            DmaOp::try_from(req.opcode),
            Ok(DmaOp::Get | DmaOp::NomatchGet | DmaOp::FetchingAtomic)
        );
        let r = Response {
            kind: if get { RspKind::Reply } else { RspKind::Ack },
            rc: rc.into(),
            ptl_list: 0,
            offset: 0,
            eom: true,
            handle: req.handle,
            mlength: 0,
        };
        self.respond(io, fab, tc, &r, &[]);
    }

    /// The first packet of a request.
    fn request(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        req: &Request,
        hdr: &[u8],
        payload: &[u8],
        tc: TrafficClass,
    ) {
        if req.small {
            self.counters().rx_ptl_smallmsg_pkt += 1;
        } else {
            self.counters().rx_ptl_unrestricted_pkt += 1;
        }
        self.counters().rx_ptl_msgs += 1;
        if fab.dfa >> 12 != self.nid() {
            self.counters().port_dfa_mismatch += 1;
            self.nack(io, fab, tc, req, ReturnCode::InvalidDfaFormat);
            return;
        }
        let op = match DmaOp::try_from(req.opcode) {
            Ok(DmaOp::Put | DmaOp::SmallMessage | DmaOp::NomatchPut) => NetOp::Put,
            Ok(DmaOp::RendezvousPut) => NetOp::RendezvousPut,
            Ok(DmaOp::Get | DmaOp::NomatchGet) => NetOp::Get,
            Ok(DmaOp::Atomic) => NetOp::Atomic,
            Ok(DmaOp::FetchingAtomic) => NetOp::FetchAtomic,
            _ => {
                self.nack(io, fab, tc, req, ReturnCode::IllegalOp);
                return;
            }
        };
        let amo = if matches!(op, NetOp::Atomic | NetOp::FetchAtomic) {
            match AmoPayload::parse(payload) {
                Some(a) => Some(a),
                None => {
                    self.nack(io, fab, tc, req, ReturnCode::IllegalOp);
                    return;
                }
            }
        } else {
            None
        };
        let pt = match self
            .rmu()
            .resolve(fab.vni, (fab.dfa & 0xFFF) as u16, req.index_ext, false)
        {
            Ok(pt) => pt,
            Err(rc) => {
                self.nack(io, fab, tc, req, rc);
                return;
            }
        };
        let (eq, long) = self.event_format(pt);
        // Fault sites (issue 15): the PtlTE's EQ reads as full, or no LE is left for an
        // unexpected header. The LPE then does what the hardware does on real exhaustion
        // (cassini.md §3.2, §4.3: a flow-control PtlTE goes DISABLED with a STATE_CHANGE
        // event, FC_EQ_FULL or FC_UNEXPECTED_FAIL, and the request is NACKed PT_DISABLED).
        let eq_full = eq != 0
            && (!self.eq_has_room(eq, if long { 64 } else { 32 }, EventClass::Receive)
                || io.fault(NicSite::EqFull));
        let le_exhausted = io.fault(NicSite::LeExhaust);
        let incoming = IncomingRequest {
            op,
            initiator: req.initiator,
            source_nid: fab.sfa >> 12,
            match_bits: req.match_bits,
            header_data: req.header_data,
            rlength: u64::from(req.request_len),
            remote_offset: req.remote_offset,
            vni: fab.vni,
            restricted: req.restricted,
            wire_header_len: (wire::FAB_HDR
                + if req.small {
                    wire::SMALL_MSG_HDR
                } else {
                    wire::UNRESTRICTED_HDR
                }) as u64,
            eq_full,
            le_exhausted,
            eager_length: u64::from(req.eager_length),
            rendezvous_id: req.rendezvous_id,
            use_offset_for_get: req.use_offset_for_get,
            atomic: amo.map_or(AtomicInfo::default(), |a| AtomicInfo {
                op: a.op,
                ty: a.ty,
                cswap_op: a.cswap,
            }),
        };
        let outcome = self.lpe().incoming(pt, incoming);
        if let Some(a) = amo {
            self.serve_amo(io, fab, req, tc, pt, outcome, a);
        } else if op == NetOp::Get {
            self.serve_get(io, fab, req, tc, pt, outcome);
        } else {
            self.place_put(io, fab, req, hdr, payload, tc, pt, outcome);
        }
    }

    /// (EQ, long format) of PtlTE `pt`'s target events.
    fn event_format(&mut self, pt: u16) -> (u16, bool) {
        let cfg = self.lpe().ptlte_config(pt).unwrap_or_default();
        let long = cfg.options.contains(PtAllocOpts::USE_LONG_EVENT) || self.target_long(cfg.eq);
        (cfg.eq, long)
    }

    /// Post the LPE's target events in order; `data_rc` replaces the return code of the
    /// communication event when the data could not be moved.
    fn post_target_events(
        &mut self,
        io: &mut DeviceIo<'_>,
        events: &[TargetEvent],
        data_rc: Option<ReturnCode>,
    ) {
        let now = io.now().as_ns();
        for ev in events {
            let long = ev.long_format || self.target_long(ev.eq) || !fits_short(ev);
            let comm = is_comm(ev.event_type);
            let rc = if comm { data_rc } else { None };
            let mut buf = [0u8; 64];
            let n = encode_target(ev, long, rc, now, &mut buf);
            let class = if comm {
                EventClass::Receive
            } else {
                EventClass::Other
            };
            self.post_event(io, ev.eq, &buf[..n], class);
        }
    }

    fn apply_ct(&mut self, io: &mut DeviceIo<'_>, ct: Option<CtUpdate>, failed: bool) {
        if let Some(u) = ct {
            if failed {
                self.ct_event(io, u.ct, 0, 1);
            } else {
                self.ct_event(io, u.ct, u.success_increment, 0);
            }
        }
    }

    /// A put's first packet: place its data, and finish it if it is the only packet.
    #[allow(clippy::too_many_arguments)]
    fn place_put(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        req: &Request,
        hdr: &[u8],
        payload: &[u8],
        tc: TrafficClass,
        pt: u16,
        outcome: IncomingOutcome,
    ) {
        let mut data_rc = ReturnCode::Ok;
        let (mut ac, mut start, mut length, mut hb) = (0u16, 0u64, 0u64, 0u64);
        let mut mapped = None;
        if let Some(d) = outcome.delivery {
            ac = self.tables().lac_ac(self.tables().ptlte_rgid(pt), d.lac);
            start = d.start;
            length = d.length;
            // REQUEST-list buffers get the wire headers in front of the payload.
            hb = d.header_bytes.min(length).min(hdr.len() as u64);
            // The whole landing range is checked before any byte is written (a single write
            // checks its whole range itself).
            let single = u64::from(req.request_len) <= payload.len() as u64 && hb == 0;
            let checked = if single {
                Ok(())
            } else {
                self.atu()
                    .map_range(io.dma(), ac, start, length, Perm::WRITE)
                    .map(|m| mapped = Some(m))
            };
            if let Err(rc) = checked {
                data_rc = rc;
            } else {
                if hb > 0
                    && let Err(rc) = self.atu().write(io.dma(), ac, start, &hdr[..hb as usize])
                {
                    data_rc = rc;
                }
                let n = (payload.len() as u64).min(length - hb) as usize;
                if n > 0
                    && data_rc == ReturnCode::Ok
                    && let Err(rc) = self.atu().write(io.dma(), ac, start + hb, &payload[..n])
                {
                    data_rc = rc;
                }
            }
        }
        if op_is_rendezvous(req)
            && let Some(id) = outcome.unexpected
        {
            self.tgt().pending_rdzv.insert(id, (*fab, tc));
        }
        // Bytes that travel with the request: a rendezvous put carries its eager part only.
        let rlength = if op_is_rendezvous(req) {
            u64::from(req.eager_length.min(req.request_len))
        } else {
            u64::from(req.request_len)
        };
        if rlength > payload.len() as u64 && outcome.return_code == ReturnCode::Ok {
            self.counters().rx_ptl_multi_msgs += 1;
            let m = InMsg {
                pt,
                ac,
                start,
                length,
                hdr: hb,
                frames: FramesSeen::new(rlength, payload.len() as u64),
                mapped,
                data_rc,
                outcome,
                tc,
                fab: *fab,
                at: io.now().as_ps(),
            };
            self.tgt().msgs.insert((fab.sfa >> 12, req.handle), m);
            if !self.ixe_scan_armed() {
                self.arm_scan(io);
            }
            return;
        }
        self.complete_put(io, fab, tc, req.handle, &outcome, data_rc, length);
    }

    /// A continuation of a put (and the train of further continuations it carries, if any).
    fn continuation(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        c: &Continuation,
        payload: &[u8],
        train: Option<&Train>,
    ) {
        self.counters().rx_ptl_continuation_pkt += 1 + train.map_or(0, |t| u64::from(t.frames));
        let key = (fab.sfa >> 12, c.handle);
        let (tgt, atu) = self.tgt_and_atu();
        let Some(m) = tgt.msgs.get_mut(&key) else {
            return;
        };
        let off = u64::from(c.offset) + m.hdr;
        if m.data_rc == ReturnCode::Ok && off < m.length {
            let n = (payload.len() as u64).min(m.length - off) as usize;
            let to = m.start + off;
            let w = match &m.mapped {
                Some(map) => atu.write_in(io.dma(), map, to, &payload[..n]),
                None => atu.write(io.dma(), m.ac, to, &payload[..n]),
            };
            if let Err(rc) = w {
                m.data_rc = rc;
            }
        }
        m.frames.saw(u64::from(c.offset) / MTU as u64);
        if let Some(t) = train {
            land_train(atu, io, m, u64::from(c.offset) + payload.len() as u64, t);
        }
        m.at = io.now().as_ps();
        if !m.frames.complete() {
            return;
        }
        let Some(m) = self.tgt().msgs.remove(&key) else {
            return;
        };
        let _ = m.pt;
        self.complete_put(io, &m.fab, m.tc, c.handle, &m.outcome, m.data_rc, m.length);
    }

    /// The continuation frames of a put that came as a train behind its first frame
    /// (`first` payload bytes).
    fn train(&mut self, io: &mut DeviceIo<'_>, fab: &Fab, handle: u32, first: u64, t: &Train) {
        self.counters().rx_ptl_continuation_pkt += u64::from(t.frames);
        let key = (fab.sfa >> 12, handle);
        let (tgt, atu) = self.tgt_and_atu();
        let Some(m) = tgt.msgs.get_mut(&key) else {
            return;
        };
        land_train(atu, io, m, first, t);
        m.at = io.now().as_ps();
        if !m.frames.complete() {
            return;
        }
        let Some(m) = self.tgt().msgs.remove(&key) else {
            return;
        };
        self.complete_put(io, &m.fab, m.tc, handle, &m.outcome, m.data_rc, m.length);
    }

    /// All of a put has landed (or failed): target events, CT, ACK.
    #[allow(clippy::too_many_arguments)]
    fn complete_put(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        handle: u32,
        outcome: &IncomingOutcome,
        data_rc: ReturnCode,
        length: u64,
    ) {
        let failed = data_rc != ReturnCode::Ok;
        self.post_target_events(io, &outcome.events, failed.then_some(data_rc));
        // A rendezvous whose Get the NIC issues counts when the Get completes.
        let pull = outcome
            .rendezvous
            .filter(|g| !failed && g.get_issued && g.length > 0);
        if pull.is_none() {
            self.apply_ct(io, outcome.ct, failed);
        }
        let rc = if outcome.return_code == ReturnCode::Ok && failed {
            data_rc
        } else {
            outcome.return_code
        };
        let r = Response {
            kind: RspKind::Ack,
            rc: rc.into(),
            ptl_list: outcome.list.map_or(0, u8::from),
            offset: 0,
            eom: true,
            handle,
            mlength: if rc == ReturnCode::Ok {
                length.min(u64::from(u32::MAX)) as u32
            } else {
                0
            },
        };
        self.respond(io, fab, tc, &r, &[]);
        if let Some(g) = pull {
            self.launch_rendezvous_get(io, &g, fab, tc, outcome.ct);
        }
    }

    /// A Get: read the matched data and send it back in MTU segments.
    fn serve_get(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        req: &Request,
        tc: TrafficClass,
        pt: u16,
        outcome: IncomingOutcome,
    ) {
        if outcome.return_code == ReturnCode::Delayed {
            if let Some(id) = outcome.unexpected {
                self.tgt().pending_gets.insert(
                    id,
                    PendingGet {
                        fab: *fab,
                        handle: req.handle,
                        tc,
                        amo: None,
                    },
                );
            }
            self.post_target_events(io, &outcome.events, None);
            self.apply_ct(io, outcome.ct, false);
            return;
        }
        let Some(d) = outcome.delivery else {
            self.post_target_events(io, &outcome.events, None);
            self.apply_ct(io, outcome.ct, outcome.return_code != ReturnCode::Ok);
            self.nack(io, fab, tc, req, outcome.return_code);
            return;
        };
        let ac = self.tables().lac_ac(self.tables().ptlte_rgid(pt), d.lac);
        let list = outcome.list.map_or(0, u8::from);
        let owed = OwedGet {
            events: outcome.events,
            ct: outcome.ct,
            rc: ReturnCode::Ok,
        };
        let (rc, owed) = self.send_reply(
            io,
            fab,
            tc,
            req.handle,
            ac,
            d.start,
            d.length,
            list,
            Some(owed),
        );
        // Events a reply sent as trains owes are posted when its frames have been read.
        if let Some(o) = owed {
            let failed = rc != ReturnCode::Ok;
            self.post_target_events(io, &o.events, failed.then_some(rc));
            self.apply_ct(io, o.ct, failed);
        }
    }

    /// Send `length` bytes at `start` (AC `ac`) as REPLY segments; on a read error one
    /// REPLY carrying the return code. Returns the return code, and `owed` (the Get's
    /// target events) unless the reply went to the PCT as a [`ReplyStream`] of trains,
    /// which posts them once its frames have been read.
    #[allow(clippy::too_many_arguments)]
    fn send_reply(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        handle: u32,
        ac: u16,
        start: u64,
        length: u64,
        list: u8,
        owed: Option<OwedGet>,
    ) -> (ReturnCode, Option<OwedGet>) {
        let mut rsp = Response {
            kind: RspKind::Reply,
            rc: ReturnCode::Ok.into(),
            ptl_list: list,
            offset: 0,
            eom: length == 0,
            handle,
            mlength: length.min(u64::from(u32::MAX)) as u32,
        };
        if let Err(rc) = self.atu().check(io.dma(), ac, start, length, Perm::READ) {
            rsp.rc = rc.into();
            rsp.eom = true;
            rsp.mlength = 0;
            self.respond(io, fab, tc, &rsp, &[]);
            return (rc, owed);
        }
        if length == 0 {
            self.respond(io, fab, tc, &rsp, &[]);
            return (ReturnCode::Ok, owed);
        }
        let Some(port) = (fab.sfa >> 12).checked_sub(self.nid_base()) else {
            return (ReturnCode::Undeliverable, owed);
        };
        let back = Fab {
            vni: fab.vni,
            sfa: self.nid() << 12,
            dfa: fab.sfa,
        };
        let src = io.port().unwrap_or_default();
        // Several frames to a port of this process, with nothing on the way that needs
        // their bytes: trains, read by the initiator as they land; the events wait.
        if length > MTU as u64
            && io.train_ok(PortId(port))
            && let Some(o) = owed
        {
            let tgt = self.tgt();
            let token = tgt.next_token;
            tgt.next_token = token.wrapping_add(1);
            tgt.owed.insert(token, o);
            let stream = ReplyStream {
                back,
                src,
                dst: PortId(port),
                tc,
                rsp,
                ac,
                start,
                off: 0,
                length,
                token,
                frames_only: false,
            };
            self.pct_reply(io, stream);
            return (ReturnCode::Ok, None);
        }
        let mut off = 0u64;
        while off < length {
            let n = (length - off).min(MTU as u64) as usize;
            rsp.offset = off as u32;
            rsp.eom = off + n as u64 == length;
            let buf = io.packet_buffer(wire::FRAME_ROOM + n);
            let mut b = wire::response_in(buf, &back, &rsp, n);
            let at = b.len();
            b.resize(at + n, 0);
            if let Err(rc) = self.atu().read(io.dma(), ac, start + off, &mut b[at..]) {
                rsp.rc = rc.into();
                rsp.eom = true;
                self.respond(io, fab, tc, &rsp, &[]);
                return (rc, owed);
            }
            self.pct_send(io, wire::packet(src, PortId(port), tc, b));
            off += n as u64;
        }
        (ReturnCode::Ok, owed)
    }

    /// The next packet of reply stream `s` ([`ReplyStream`]): its next frame, read from host
    /// memory now, carrying a train of as many following frames as `room` (frames the
    /// window lets out) allows, if nothing needs their bytes; a frame that does not read
    /// becomes one REPLY carrying the return code, which ends the stream.
    fn reply_next(&mut self, io: &mut DeviceIo<'_>, s: &mut ReplyStream, room: u32) -> Packet {
        let n = (s.length - s.off).min(MTU as u64) as usize;
        let mut rsp = s.rsp;
        rsp.offset = s.off as u32;
        let buf = io.packet_buffer(wire::FRAME_ROOM + n);
        let mut b = wire::response_in(buf, &s.back, &rsp, n);
        let at = b.len();
        b.resize(at + n, 0);
        if let Err(rc) = self
            .atu()
            .read(io.dma(), s.ac, s.start + s.off, &mut b[at..])
        {
            io.recycle(b);
            s.off = s.length;
            if let Some(o) = self.tgt().owed.get_mut(&s.token) {
                o.rc = rc;
            }
            rsp.rc = rc.into();
            rsp.eom = true;
            let b = wire::response_in(io.packet_buffer(wire::FRAME_ROOM), &s.back, &rsp, 0);
            return wire::packet(s.src, s.dst, s.tc, b);
        }
        s.off += n as u64;
        let mut train = None;
        if room > 1 && !s.done() && !s.frames_only && io.train_ok(s.dst) {
            let end = s.length.min(s.off + u64::from(room - 1) * MTU as u64);
            train = self.reply_train(io, s, end);
        }
        // The last frame the packet stands for ends the Get.
        wire::set_response_eom(&mut b, s.done());
        let mut pkt = wire::packet(s.src, s.dst, s.tc, b);
        pkt.train = train;
        pkt
    }

    /// The train of the frames of `s` from its offset up to `end`: their source segments,
    /// each frame translated as its read would have been, and the frames and wire bytes
    /// they stand for. Stops before a frame that does not translate (it then goes on its
    /// own and ends the reply with the error); `None` (and frame by frame from here) if a
    /// piece of the source would not read.
    fn reply_train(
        &mut self,
        io: &DeviceIo<'_>,
        s: &mut ReplyStream,
        end: u64,
    ) -> Option<Arc<Train>> {
        let mut segments = Vec::new();
        let n = match self.atu().frames_segments(
            io.dma(),
            s.ac,
            s.start + s.off,
            end - s.off,
            Perm::READ,
            MTU as u64,
            &mut segments,
        ) {
            Ok(()) => end - s.off,
            Err((done, _)) => done,
        };
        let readable = segments
            .iter()
            .all(|g| io.dma().check(g.addr, g.len, Perm::READ).is_ok());
        if !readable {
            s.frames_only = true;
            return None;
        }
        if n == 0 {
            return None;
        }
        let frames = n.div_ceil(MTU as u64);
        let per_frame = (wire::FAB_HDR + wire::RESPONSE_HDR + wire::TAG_ROOM) as u64;
        s.off += n;
        Some(Arc::new(Train {
            frames: u32::try_from(frames).ok()?,
            bytes: frames * per_frame + n,
            source: io.dma().clone(),
            segments,
        }))
    }

    /// The REPLY frames of the Get owing `token` have been read at its initiator (their
    /// last packet was acknowledged), or their connection died: its target events and
    /// counting event now.
    fn reply_read(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        let Some(o) = self.tgt().owed.remove(&token) else {
            return;
        };
        let failed = o.rc != ReturnCode::Ok;
        self.post_target_events(io, &o.events, failed.then_some(o.rc));
        self.apply_ct(io, o.ct, failed);
    }

    /// Execute one target command of target CQ `n`.
    fn exec_target(&mut self, io: &mut DeviceIo<'_>, n: u32, bytes: &[u8]) -> Result<Exec, Fail> {
        self.counters().num_tgt_cmds += 1;
        let cmd = TargetCommand::decode(bytes).map_err(|e| format_rc(&e))?;
        cmd.validate().map_err(|e| format_rc(&e))?;
        // The PtlTE (and an LE's counting event) must be in the queue's resource group
        // (`c_cq_cfg_ptlte_rgid_table`, `c_cq_cfg_ct_rgid_table`): a process cannot list,
        // unlink or change the state of another's portal.
        let (pt, ct) = match &cmd {
            TargetCommand::List(t) => (t.ptlte_index, t.ct),
            TargetCommand::SetState(s) => (s.ptlte_index, 0),
        };
        let rgid = self.tgq_rgid(n);
        if !self.tables().ptlte_in_rgid(rgid, pt) || !self.tables().handles_in_rgid(rgid, 0, ct) {
            return Err(ReturnCode::PermViolation);
        }
        let out = match cmd {
            TargetCommand::List(t) => {
                let le = Le {
                    buffer_id: t.buffer_id,
                    start: t.start,
                    length: t.length,
                    lac: t.lac,
                    ct: t.ct,
                    match_bits: t.match_bits,
                    ignore_bits: t.ignore_bits,
                    match_id: t.match_id,
                    min_free: t.min_free,
                    flags: t.opts(),
                };
                let pt = t.ptlte_index;
                match t.opcode {
                    TgtOp::Append => self.lpe().append(pt, t.ptl_list, le),
                    TgtOp::Search => self.lpe().search(pt, t.ptl_list, &le),
                    TgtOp::SearchAndDelete => self.lpe().search_and_delete(pt, t.ptl_list, &le),
                    TgtOp::Unlink => self.lpe().unlink(pt, t.ptl_list, t.buffer_id),
                    TgtOp::Setstate => return Err(ReturnCode::IllegalOp),
                }
            }
            TargetCommand::SetState(s) => {
                self.lpe()
                    .set_state(s.ptlte_index, s.ptlte_state, s.drop_count)
            }
        };
        let out = out.map_err(|e| e.return_code())?;
        self.command_outcome(io, out);
        Ok(Exec::Next)
    }

    /// Carry out what a target command produced.
    fn command_outcome(&mut self, io: &mut DeviceIo<'_>, out: CommandOutcome) {
        self.post_target_events(io, &out.events, None);
        for u in &out.ct {
            self.ct_event(io, u.ct, u.success_increment, 0);
        }
        // Rendezvous puts completed by an append: the NIC pulls the rest.
        for g in &out.rendezvous {
            let Some((fab, tc)) = g.ule_id.and_then(|id| self.tgt().pending_rdzv.remove(&id))
            else {
                continue;
            };
            if g.get_issued && g.length > 0 {
                self.launch_rendezvous_get(io, g, &fab, tc, None);
            }
        }
        for d in &out.delayed {
            let Some(g) = self.tgt().pending_gets.remove(&d.ule_id) else {
                continue;
            };
            let ac = self
                .tables()
                .lac_ac(self.tables().ptlte_rgid(d.ptlte_index), d.lac);
            let list = u8::from(PtlList::Priority);
            match g.amo {
                Some((a, fetching)) => {
                    let sig = self.fp_signals(d.ptlte_index);
                    let (rc, old) = self.do_amo(io, ac, d.start, d.mlength, &a, sig);
                    self.amo_response(
                        io, &g.fab, g.tc, g.handle, fetching, rc, d.mlength, list, &old,
                    );
                }
                None => {
                    // The append's events are out already: the reply goes frame by frame.
                    let f = &g.fab;
                    self.send_reply(io, f, g.tc, g.handle, ac, d.start, d.mlength, list, None);
                }
            }
        }
        // Headers deleted without being matched (search-and-delete): software takes over.
        for id in &out.released_ules {
            self.tgt().pending_gets.remove(id);
            self.tgt().pending_rdzv.remove(id);
        }
    }

    /// The floating-point exceptions PtlTE `pt` reports (`signal_*` options).
    fn fp_signals(&mut self, pt: u16) -> FpSignals {
        let opts = self
            .lpe()
            .ptlte_config(pt)
            .map_or(PtAllocOpts::empty(), |c| c.options);
        FpSignals::from_pt_opts(opts)
    }

    /// Perform atomic `a` on the `len` bytes at `start` (AC `ac`): read, compute with the AMO
    /// unit, write back. Returns the return code and the old value (empty on error).
    fn do_amo(
        &mut self,
        io: &mut DeviceIo<'_>,
        ac: u16,
        start: u64,
        len: u64,
        a: &AmoPayload,
        signals: FpSignals,
    ) -> (ReturnCode, Vec<u8>) {
        let (Ok(op), Ok(ty), Ok(cswap)) = (
            AmoOp::try_from(a.op),
            AmoType::try_from(a.ty),
            CswapOp::try_from(a.cswap),
        ) else {
            return (ReturnCode::AmoInvalOpError, Vec::new());
        };
        let req = AmoRequest {
            op,
            ty,
            cswap,
            op1: a.op1,
            op2: a.op2,
        };
        if len > 16 {
            return (ReturnCode::AmoLengthError, Vec::new());
        }
        if let Err(rc) = self.atu().check(io.dma(), ac, start, len, Perm::RW) {
            return (rc, Vec::new());
        }
        let mut buf = [0u8; 16];
        let n = len as usize;
        if let Err(rc) = self.atu().read(io.dma(), ac, start, &mut buf[..n]) {
            return (rc, Vec::new());
        }
        match amo::execute(&req, start, &mut buf[..n], signals) {
            Ok(out) => {
                if let Err(rc) = self.atu().write(io.dma(), ac, start, &buf[..n]) {
                    return (rc, Vec::new());
                }
                (out.return_code, out.fetched.as_slice().to_vec())
            }
            Err(e) => (e.return_code(), Vec::new()),
        }
    }

    /// Answer an atomic: ACK, or REPLY with the old value for a fetching one.
    #[allow(clippy::too_many_arguments)]
    fn amo_response(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        tc: TrafficClass,
        handle: u32,
        fetching: bool,
        rc: ReturnCode,
        mlength: u64,
        list: u8,
        old: &[u8],
    ) {
        let r = Response {
            kind: if fetching {
                RspKind::Reply
            } else {
                RspKind::Ack
            },
            rc: rc.into(),
            ptl_list: list,
            offset: 0,
            eom: true,
            handle,
            mlength: if old.is_empty() { 0 } else { mlength as u32 },
        };
        self.respond(io, fab, tc, &r, if fetching { old } else { &[] });
    }

    /// An atomic: the LPE's decision, then the AMO unit on target memory.
    #[allow(clippy::too_many_arguments)]
    fn serve_amo(
        &mut self,
        io: &mut DeviceIo<'_>,
        fab: &Fab,
        req: &Request,
        tc: TrafficClass,
        pt: u16,
        outcome: IncomingOutcome,
        a: AmoPayload,
    ) {
        let fetching = req.opcode == DmaOp::FetchingAtomic as u8;
        if outcome.return_code == ReturnCode::Delayed {
            if let Some(id) = outcome.unexpected {
                self.tgt().pending_gets.insert(
                    id,
                    PendingGet {
                        fab: *fab,
                        handle: req.handle,
                        tc,
                        amo: Some((a, fetching)),
                    },
                );
            }
            self.post_target_events(io, &outcome.events, None);
            self.apply_ct(io, outcome.ct, false);
            return;
        }
        let Some(d) = outcome.delivery else {
            self.post_target_events(io, &outcome.events, None);
            self.apply_ct(io, outcome.ct, outcome.return_code != ReturnCode::Ok);
            self.nack(io, fab, tc, req, outcome.return_code);
            return;
        };
        let ac = self.tables().lac_ac(self.tables().ptlte_rgid(pt), d.lac);
        let sig = self.fp_signals(pt);
        let (rc, old) = self.do_amo(io, ac, d.start, d.length, &a, sig);
        let failed = rc != ReturnCode::Ok;
        self.post_target_events(io, &outcome.events, failed.then_some(rc));
        self.apply_ct(io, outcome.ct, failed);
        let list = outcome.list.map_or(0, u8::from);
        self.amo_response(io, fab, tc, req.handle, fetching, rc, d.length, list, &old);
    }

    /// Drop target messages that received no packet for `limit` ps (their initiator times
    /// out on its own).
    fn expire_target_messages(&mut self, now: u64, limit: u64) {
        self.tgt()
            .msgs
            .retain(|_, m| now.saturating_sub(m.at) < limit);
    }

    /// Whether target messages are waiting for more packets.
    fn target_busy(&mut self) -> bool {
        !self.tgt().msgs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpe::AtomicInfo;

    #[test]
    fn a_put_is_complete_once_every_frame_came_in_any_order() {
        let mtu = MTU as u64;
        let mut f = FramesSeen::new(4 * mtu - 1, mtu);
        f.saw(3);
        assert!(!f.complete(), "the last frame alone does not complete it");
        f.saw(3);
        f.saw(99);
        f.saw(0);
        assert!(
            !f.complete(),
            "duplicates and frames beyond it count nothing"
        );
        f.saw(1);
        assert!(!f.complete());
        f.saw(2);
        assert!(f.complete());
        assert!(f.ahead.is_empty(), "frames seen ahead are folded in");
        let mut in_order = FramesSeen::new(3 * mtu, mtu);
        in_order.saw(1);
        assert!(!in_order.complete());
        in_order.saw(2);
        assert!(in_order.complete());
        assert!(in_order.ahead.is_empty());
    }

    #[test]
    fn short_and_long_target_events_carry_the_lpe_fields() {
        let ev = TargetEvent {
            event_type: EventType::Put,
            return_code: ReturnCode::Ok,
            eq: 3,
            ptlte_index: 9,
            long_format: false,
            header_data: 0x55,
            initiator: 0x1234,
            state_change: None,
            ptl_list: PtlList::Overflow,
            rendezvous: false,
            get_issued: false,
            auto_unlinked: true,
            match_bits: 0xABCD,
            buffer_id: 77,
            vni: 10,
            mlength: 100,
            rlength: 200,
            remote_offset: 8,
            start: 0x1000,
            atomic: AtomicInfo::default(),
            rendezvous_id: 0,
        };
        let mut b = [0u8; 64];
        assert_eq!(encode_target(&ev, false, None, 0, &mut b), 32);
        let s = TargetShort::decode(&b).unwrap();
        assert_eq!(
            (s.buffer_id, s.length, s.ptl_list),
            (77, 100, PtlList::Overflow)
        );
        assert!(s.auto_unlinked);
        assert_eq!(
            encode_target(&ev, true, Some(ReturnCode::NoTranslation), 5, &mut b),
            64
        );
        let l = TargetLong::decode(&b).unwrap();
        assert_eq!((l.mlength, l.rlength, l.start), (100, 200, 0x1000));
        assert_eq!(l.return_code, ReturnCode::NoTranslation);
    }
}
