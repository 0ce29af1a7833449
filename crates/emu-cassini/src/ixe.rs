//! The initiator side (transmit command execution, OXE in the hardware; the response path of
//! IXE): decoding transmit commands, IDC put and small message, full DMA put and get,
//! rendezvous put (only the eager bytes travel), non-matching put/get, atomics (IDC, small
//! IDC, DMA; also fired CT_TRIG_DMAs), MTU segmentation, the Gets the NIC issues itself to
//! pull the rest of a rendezvous put (`launch_rendezvous_get`), the table of outstanding
//! requests waiting for an ACK or a REPLY, and the initiator events (SEND, ACK, REPLY) with
//! their suppression flags and counting events (cassini.md §2.1, §3.2, §5, §6).
//!
//! States of a request: `exec_tx` (decode, CQ control, C_STATE) -> `launch` (resolve the CP,
//! check the local buffer through the ATU, allocate a handle, segment and send; SEND event) ->
//! `response` (ACK: ACK event; REPLY segment: data into the local buffer, REPLY event on the
//! last one) -> `finish` (free the handle, release a waiting FENCE).
//!
//! The initiator reaches the rest of the NIC only through [`IxeCtx`] (implemented by `hw`):
//! frames leave through the PCT, counting events and CT commands go to the TOU.

use emu_core::engine::DeviceIo;
use emu_core::fabric::{Packet, PortId, TrafficClass, Train};
use emu_core::nic_faults::NicSite;
use emu_core::sparse::SparseTable;
use emu_core::time::SimDuration;
use firmware_spec::cassini::amo::AmoType;
use firmware_spec::cassini::cmd::{
    Command, CqOp, DmaAmo, DmaFlags, DmaOp, FormatError, FullDma, NomatchDma,
};
use firmware_spec::cassini::dfa::{PidBits, match_id};
use firmware_spec::cassini::event::{EventType, InitiatorLong, InitiatorShort};
use firmware_spec::cassini::le::PtlList;
use firmware_spec::cassini::rc::ReturnCode;
use std::sync::Arc;

use crate::atu::{Atu, Mapped};
use crate::block::{Counters, EventClass, Exec, Fail, GetCtrl};
use crate::cq::{TxCq, is_noop_header};
use crate::lpe::{CtUpdate, RendezvousGet};
use crate::tables::Tables;
use crate::wire::{self, AmoPayload, Fab, MTU, Request, Response, RspKind};

/// The `cq` of a request no command queue launched (a rendezvous Get the NIC issues).
const NO_CQ: u32 = u32::MAX;

/// Outstanding requests the initiator can track (handles are 20 bits on the wire).
const MAX_REQUESTS: usize = 1 << INDEX_BITS;
/// A handle is a table index (low 16 bits) and a generation (high 4 bits) bumped each time
/// the entry is reused, so a late or duplicated response cannot complete a newer request.
const INDEX_BITS: u32 = 16;
const GEN_MASK: u32 = 0xF;

/// Kind of an outstanding request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ReqKind {
    #[default]
    Put,
    Get,
    /// Non-fetching atomic (completes with an ACK).
    Amo,
    /// Fetching atomic (completes with a REPLY carrying the old value).
    FetchAmo,
}

/// An outstanding request.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Req {
    active: bool,
    kind: ReqKind,
    cq: u32,
    eq: u16,
    ct: u16,
    user_ptr: u64,
    flags: DmaFlags,
    /// Non-matching command: success events are never posted.
    nomatch: bool,
    rlength: u32,
    /// Get: where the reply data goes.
    local_ac: u16,
    local_addr: u64,
    /// Get: first data error while landing the reply.
    data_rc: Option<ReturnCode>,
    /// When it was launched (ps of engine time).
    at: u64,
    /// Time added to [`REQUEST_TIMEOUT`] for this request (ps): a restricted put's
    /// [`restricted_grace`].
    grace: u64,
    /// Generation of the table entry (see [`INDEX_BITS`]).
    generation: u32,
    /// A rendezvous Get the NIC issued: its REPLY event has `rendezvous` set.
    rendezvous: bool,
    /// The receiving entry's counting event, applied when the rendezvous Get completes.
    rdzv_ct: Option<CtUpdate>,
    /// A put sent as a train ([`Train`]): the target reads its source buffer when the train
    /// arrives, so its SEND event is owed until the request completes.
    send_owed: bool,
}

/// How long a request waits for its ACK or REPLY (counted from its launch, or from the last
/// sign of life this initiator saw, whichever is later: a response, or the PCT's
/// acknowledgement of packets) before it completes with UNDELIVERABLE. The fabric may lose
/// packets: a port without a device, a link down, drop faults. Sequenced messages stream
/// (their frames are read as the window opens and acknowledged as they land), so a long one
/// stays alive while it moves; a restricted put is answered only once all of it has landed,
/// so its timeout is extended by [`restricted_grace`].
pub(crate) const REQUEST_TIMEOUT: SimDuration = SimDuration::from_us(1_000_000);
/// The slowest rate at which the emulator is assumed to carry a restricted put's bytes
/// (bytes per second of engine time). A restricted put is unsequenced: all its frames leave
/// at the doorbell and nothing comes back until the last has landed, so on the threaded
/// engine its answer arrives only after the host CPU moved every byte. Its timeout is
/// extended by the time its length takes at this rate (1 GiB: 21.5 s), so the emulator's
/// own slowness is not reported as a lost packet; a put that is really lost still completes
/// UNDELIVERABLE after the extended time. An emulator rule, not a hardware figure (the
/// hardware carries 1 GiB in about 43 ms at 200 Gb/s, well inside its timeout).
pub(crate) const RESTRICTED_FLOOR_BYTES_PER_S: u64 = 50_000_000;

/// The extra timeout of a restricted put of `len` bytes ([`RESTRICTED_FLOOR_BYTES_PER_S`]).
pub(crate) fn restricted_grace(len: u32) -> SimDuration {
    SimDuration::from_ps(u64::from(len) * (1_000_000_000_000 / RESTRICTED_FLOOR_BYTES_PER_S))
}
/// Period of the timeout scan while requests are outstanding.
pub(crate) const SCAN_PERIOD: SimDuration = SimDuration::from_us(10_000);
/// Timer token of the timeout scan.
pub(crate) const TOKEN_SCAN: u64 = 1;

/// The outstanding-request table.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ixe {
    reqs: Vec<Req>,
    free: Vec<u32>,
    /// The timeout scan is armed.
    scan_armed: bool,
    /// When a response for a live request last arrived (ps). A request's timeout runs from
    /// the later of its launch and this: while answers keep coming the pipe is draining, and
    /// requests queued behind a long backlog (hundreds of multi-MiB puts launched by one
    /// doorbell) must not expire just because their turn has not come yet. A request that is
    /// really lost still completes UNDELIVERABLE once the initiator has heard nothing for
    /// [`REQUEST_TIMEOUT`].
    last_progress: u64,
    /// Transmit CQs stalled at a command because every request entry was in use; run again
    /// when one is released ([`IxeOps::finish`]). The hardware back-pressures the queue
    /// rather than failing the command.
    stalled: Vec<u32>,
}

impl Ixe {
    pub(crate) fn new() -> Self {
        Ixe::default()
    }

    fn alloc(&mut self, mut r: Req) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            let slot = &mut self.reqs[i as usize];
            r.generation = (slot.generation + 1) & GEN_MASK;
            *slot = r;
            return Some(i | (r.generation << INDEX_BITS));
        }
        if self.reqs.len() >= MAX_REQUESTS {
            return None;
        }
        r.generation = 0;
        self.reqs.push(r);
        Some((self.reqs.len() - 1) as u32)
    }

    fn slot(h: u32) -> usize {
        (h & ((1 << INDEX_BITS) - 1)) as usize
    }

    fn get(&self, h: u32) -> Option<&Req> {
        self.reqs
            .get(Self::slot(h))
            .filter(|r| r.active && r.generation == h >> INDEX_BITS)
    }

    fn get_mut(&mut self, h: u32) -> Option<&mut Req> {
        self.reqs
            .get_mut(Self::slot(h))
            .filter(|r| r.active && r.generation == h >> INDEX_BITS)
    }

    fn release(&mut self, h: u32) {
        if let Some(r) = self.get_mut(h) {
            r.active = false;
            self.free.push(Self::slot(h) as u32);
        }
    }

    /// The handle of the active entry at index `i`.
    fn handle_of(&self, i: usize) -> u32 {
        let g = self.reqs.get(i).map_or(0, |r| r.generation);
        i as u32 | (g << INDEX_BITS)
    }
}

/// What the initiator needs from the rest of the NIC: its request table, the transmit CQs
/// it executes commands for, the counters, the configuration tables and the ATU, a few
/// read-only facts (NID, PtlTE EQs, PID bits, the rendezvous Get settings, initiator event
/// format), and the blocks it hands work to: the PCT (`pct_send`), the TOU (counting events,
/// CT commands), the CQ block (a FENCE released) and the target (its messages share the
/// timeout scan). `hw` implements it.
pub(crate) trait IxeCtx {
    /// The outstanding-request table.
    fn ixe(&mut self) -> &mut Ixe;
    /// The transmit CQs (C_STATE, LCID, CP cache, outstanding requests, FENCE).
    fn tx_cqs(&mut self) -> &mut SparseTable<TxCq>;
    /// Transmit CQ `n`; a queue number beyond the table is an invalid argument.
    fn tx_cq(&mut self, n: u32) -> Result<&mut TxCq, Fail> {
        self.tx_cqs()
            .get_mut(n as usize)
            .map_err(|_| ReturnCode::CmdInvalidArg)
    }
    /// The NIC-wide counters.
    fn counters(&mut self) -> &mut Counters;
    /// The decoded CQ configuration tables (ACs, CPs, PtlTE resource groups).
    fn tables(&self) -> &Tables;
    /// Address translation for local buffers.
    fn atu(&mut self) -> &mut Atu;
    /// This NIC's NID.
    fn nid(&self) -> u32;
    /// NID of fabric port 0.
    fn nid_base(&self) -> u32;
    /// The EQ of PtlTE `pt` (0 if it is not configured).
    fn ptlte_eq(&self, pt: u16) -> u16;
    /// The device's PID granule (`pid_bits`).
    fn pid_bits(&self) -> PidBits;
    /// Where rendezvous Gets go (`c_lpe_cfg_get_ctrl`).
    fn rdzv_get(&self) -> GetCtrl;
    /// Whether EQ `eq` takes long initiator events.
    fn initiator_long(&self, eq: u16) -> bool;
    /// Post an encoded event to EQ `eq`; false if it was dropped.
    fn post_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        eq: u16,
        event: &[u8],
        class: EventClass,
    ) -> bool;
    /// Send a frame through the PCT.
    fn pct_send(&mut self, io: &mut DeviceIo<'_>, pkt: Packet);
    /// Hand the PCT the rest of a message, to be read frame by frame as its window opens.
    fn pct_stream(&mut self, io: &mut DeviceIo<'_>, stream: OutStream);
    /// A counting event on CT `ct` (the TOU).
    fn ct_event(&mut self, io: &mut DeviceIo<'_>, ct: u16, success: u64, failure: u64);
    /// A CT command on transmit CQ `n` (the TOU).
    fn ct_command(&mut self, io: &mut DeviceIo<'_>, n: u32, bytes: &[u8]) -> Result<Exec, Fail>;
    /// Run the ring of CQ `n` again (the CQ block; a FENCE was released).
    fn run_ring(&mut self, io: &mut DeviceIo<'_>, tgt: bool, n: u32);
    /// Drop target messages older than `limit` ps (the target).
    fn expire_target_messages(&mut self, now: u64, limit: u64);
    /// Whether target messages wait for more packets (the target).
    fn target_busy(&mut self) -> bool;
}

impl<T: IxeCtx + ?Sized> IxeOps for T {}

/// Where a request's data comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    Inline(&'a [u8]),
    /// A local buffer named by LAC (resolved through the CQ's RGID before use).
    Dma {
        lac: u8,
        addr: u64,
    },
    /// A local buffer in AC `ac`, already checked.
    Ac {
        ac: u16,
        addr: u64,
    },
    /// A local buffer checked and translated once ([`Mapped`]; `addr` is its IOVA).
    Mapped {
        m: &'a Mapped,
        addr: u64,
    },
}

/// The continuation frames of a put still to be sent, read from host memory one frame at a
/// time as the connection's window opens (the hardware streams a message from host memory;
/// it does not stage it). The PCT keeps it in the connection's backlog and asks the
/// initiator for the next frame ([`IxeOps::stream_next`]); the SEND event follows the last.
#[derive(Debug, Clone)]
pub(crate) struct OutStream {
    handle: u32,
    fab: Fab,
    src: PortId,
    dst: PortId,
    tc: TrafficClass,
    ac: u16,
    addr: u64,
    /// Offset of the next frame's bytes in the message.
    off: usize,
    total: usize,
    /// The source buffer as checked at the launch, translated once for every frame.
    mapped: Option<Box<Mapped>>,
}

impl OutStream {
    /// The request the frames belong to.
    pub(crate) fn handle(&self) -> u32 {
        self.handle
    }

    /// The PCT connection the frames travel on: (fabric port, VNI, traffic class).
    pub(crate) fn conn_key(&self) -> (u32, u16, u8) {
        (self.dst.0, self.fab.vni, self.tc.0)
    }

    /// Whether every frame has been made.
    pub(crate) fn done(&self) -> bool {
        self.off >= self.total
    }
}

/// Everything a launch needs, from whichever command format.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Launch<'a> {
    opcode: DmaOp,
    dfa: u32,
    index_ext: u8,
    remote_offset: u64,
    initiator: u32,
    match_bits: u64,
    header_data: u64,
    user_ptr: u64,
    flags: DmaFlags,
    eq: u16,
    ct: u16,
    len: u32,
    src: Source<'a>,
    small: bool,
    nomatch: bool,
    /// Atomics: the 40 B AMO descriptor is the whole payload of the one request packet, and
    /// a fetching AMO's old value goes to (LAC, address).
    amo: Option<(AmoPayload, Option<(u8, u64)>)>,
    /// RENDEZVOUS_PUT: bytes sent with the put (the rest is pulled by the target).
    eager_length: u32,
    /// RENDEZVOUS_PUT: `rendezvous_id`.
    rendezvous_id: u8,
}

/// Operand size of an AMO type code (16 for a code that names no type: the target refuses it).
fn amo_size(ty: u8) -> u32 {
    AmoType::try_from(ty).map_or(16, |t| t.size() as u32)
}

/// A 16-byte operand from its two words.
fn words(w1: u64, w2: u64) -> u128 {
    u128::from(w1) | (u128::from(w2) << 64)
}

fn format_rc(e: &FormatError) -> ReturnCode {
    match e {
        FormatError::UnsupportedCommand { .. } => ReturnCode::IllegalOp,
        _ => ReturnCode::CmdInvalidArg,
    }
}

/// The initiator's behaviour, on anything that provides an [`IxeCtx`].
pub(crate) trait IxeOps: IxeCtx {
    /// Execute one transmit command of CQ `n` at half-slot `cur32`; `next` is the first byte
    /// of the following 64 B slot if it has been fetched.
    fn exec_tx(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        bytes: &[u8],
        cur32: u64,
        next: Option<u8>,
    ) -> Result<Exec, Fail> {
        let cmd = Command::decode(bytes).map_err(|e| format_rc(&e))?;
        cmd.validate().map_err(|e| format_rc(&e))?;
        let q = *self.tx_cq(n)?;
        if q.trig && !matches!(cmd, Command::Ct(_) | Command::TrigDma(_)) {
            return Err(ReturnCode::CmdAlignError);
        }
        match cmd {
            Command::IdcNoop(_) => {
                self.counters().num_idc_cmds += 1;
                Ok(Exec::Next)
            }
            Command::Cq(c) => {
                self.counters().num_cq_cmds += 1;
                match c.opcode {
                    CqOp::CqNoop => Ok(Exec::Next),
                    CqOp::CqFence => Ok(if q.outstanding > 0 {
                        Exec::Fence
                    } else {
                        Exec::Next
                    }),
                    CqOp::CqLcid => {
                        // cxi_cq_emit_cq_lcid: 128 B aligned, followed by a 64 B NOOP.
                        if !cur32.is_multiple_of(4) || next.is_some_and(|b| !is_noop_header(b)) {
                            return Err(ReturnCode::CmdAlignError);
                        }
                        let t = self.tx_cq(n)?;
                        t.lcid = c.lcid & 0xF;
                        t.cp_cache = None;
                        Ok(Exec::Next)
                    }
                }
            }
            Command::CState(s) => {
                self.counters().num_idc_cmds += 1;
                self.tx_cq(n)?.cstate = s;
                Ok(Exec::Next)
            }
            Command::IdcPut(p) => {
                self.counters().num_idc_cmds += 1;
                let cs = q.cstate;
                let l = Launch {
                    opcode: DmaOp::Put,
                    dfa: p.dfa,
                    index_ext: cs.index_ext,
                    remote_offset: p.remote_offset,
                    initiator: cs.initiator,
                    match_bits: 0,
                    header_data: 0,
                    user_ptr: cs.user_ptr,
                    flags: cs.flags,
                    eq: cs.eq,
                    ct: cs.ct,
                    len: p.payload.len() as u32,
                    src: Source::Inline(p.payload.as_slice()),
                    small: false,
                    nomatch: false,
                    amo: None,
                    eager_length: 0,
                    rendezvous_id: 0,
                };
                self.launch(io, n, &l)
            }
            Command::IdcMsg(m) => {
                self.counters().num_idc_cmds += 1;
                let cs = q.cstate;
                let l = Launch {
                    opcode: DmaOp::SmallMessage,
                    dfa: m.dfa,
                    index_ext: cs.index_ext,
                    remote_offset: 0,
                    initiator: cs.initiator,
                    match_bits: m.match_bits,
                    header_data: m.header_data,
                    user_ptr: m.user_ptr,
                    flags: cs.flags,
                    eq: cs.eq,
                    ct: cs.ct,
                    len: m.payload.len() as u32,
                    src: Source::Inline(m.payload.as_slice()),
                    small: true,
                    nomatch: false,
                    amo: None,
                    eager_length: 0,
                    rendezvous_id: 0,
                };
                self.launch(io, n, &l)
            }
            Command::Dma(d) => {
                self.counters().num_dma_cmds += 1;
                self.launch_full(io, n, &d)
            }
            Command::NomatchDma(d) => {
                self.counters().num_dma_cmds += 1;
                self.launch_nomatch(io, n, &d)
            }
            Command::Ct(_) | Command::TrigDma(_) => self.ct_command(io, n, bytes),
            Command::IdcAmo(c) => {
                self.counters().num_idc_cmds += 1;
                let cs = q.cstate;
                let fetching = c.opcode == DmaOp::FetchingAtomic;
                let amo = AmoPayload {
                    op: c.atomic_op as u8,
                    ty: c.atomic_type as u8,
                    cswap: c.cswap_op as u8,
                    op1: words(c.op1_word1, c.op1_word2),
                    op2: words(c.op2_word1, c.op2_word2),
                };
                let l = Launch {
                    opcode: c.opcode,
                    dfa: c.dfa,
                    index_ext: cs.index_ext,
                    remote_offset: c.remote_offset,
                    initiator: cs.initiator,
                    match_bits: 0,
                    header_data: 0,
                    user_ptr: cs.user_ptr,
                    flags: cs.flags,
                    eq: cs.eq,
                    ct: cs.ct,
                    len: c.atomic_type.size() as u32,
                    src: Source::Inline(&[]),
                    small: false,
                    nomatch: false,
                    amo: Some((amo, fetching.then_some((cs.write_lac, c.local_addr)))),
                    eager_length: 0,
                    rendezvous_id: 0,
                };
                self.launch(io, n, &l)
            }
            Command::IdcSmallAmo(c) => {
                self.counters().num_idc_cmds += 1;
                let cs = q.cstate;
                let amo = AmoPayload {
                    op: c.atomic_op as u8,
                    ty: c.atomic_type as u8,
                    cswap: 0,
                    op1: u128::from(c.op1_word1),
                    op2: 0,
                };
                let l = Launch {
                    opcode: DmaOp::Atomic,
                    dfa: c.dfa,
                    index_ext: cs.index_ext,
                    remote_offset: c.remote_offset,
                    initiator: cs.initiator,
                    match_bits: 0,
                    header_data: 0,
                    user_ptr: cs.user_ptr,
                    flags: cs.flags,
                    eq: cs.eq,
                    ct: cs.ct,
                    // One 8-byte operand travels: a 16-byte type arrives short and the
                    // target answers AMO_LENGTH_ERROR.
                    len: (c.atomic_type.size() as u32).min(8),
                    src: Source::Inline(&[]),
                    small: false,
                    nomatch: false,
                    amo: Some((amo, None)),
                    eager_length: 0,
                    rendezvous_id: 0,
                };
                self.launch(io, n, &l)
            }
            Command::DmaAmo(c) => {
                self.counters().num_dma_cmds += 1;
                self.launch_dma_amo(io, n, &c)
            }
            _ => Err(ReturnCode::IllegalOp),
        }
    }

    /// Launch a DMA AMO from CQ `n` (also a fired CT_TRIG_DMA): operand 1 is read from
    /// local memory (`cxi_cq_emit_dma_amo`), `request_len` travels as it is (the target
    /// answers AMO_LENGTH_ERROR unless it is the operand size).
    fn launch_dma_amo(&mut self, io: &mut DeviceIo<'_>, n: u32, c: &DmaAmo) -> Result<Exec, Fail> {
        let fetching = c.opcode == DmaOp::FetchingAtomic;
        let size = c.atomic_type.size();
        let rgid = self.tx_cqs().get(n as usize).map_or(0, |q| q.ring.rgid);
        let ac = self.tables().lac_ac(rgid, c.lac);
        let mut b = [0u8; 16];
        if let Err(rc) = self
            .atu()
            .read(io.dma(), ac, c.local_read_addr, &mut b[..size])
        {
            self.count_local_error(rc);
            let req = Req {
                active: false,
                kind: if fetching {
                    ReqKind::FetchAmo
                } else {
                    ReqKind::Amo
                },
                cq: n,
                eq: c.eq,
                ct: c.ct,
                user_ptr: c.user_ptr,
                flags: c.flags,
                ..Req::default()
            };
            self.complete(io, &req, rc, 0, PtlList::Priority, false);
            return Ok(Exec::Next);
        }
        let amo = AmoPayload {
            op: c.atomic_op as u8,
            ty: c.atomic_type as u8,
            cswap: c.cswap_op as u8,
            op1: u128::from_le_bytes(b),
            op2: words(c.op2_word1, c.op2_word2),
        };
        let l = Launch {
            opcode: c.opcode,
            dfa: c.dfa,
            index_ext: c.index_ext,
            remote_offset: c.remote_offset,
            initiator: c.initiator,
            match_bits: c.match_bits,
            header_data: c.header_data,
            user_ptr: c.user_ptr,
            flags: c.flags,
            eq: c.eq,
            ct: c.ct,
            len: c.request_len,
            src: Source::Inline(&[]),
            small: false,
            nomatch: false,
            amo: Some((amo, fetching.then_some((c.write_lac, c.local_write_addr)))),
            eager_length: 0,
            rendezvous_id: 0,
        };
        self.launch(io, n, &l)
    }

    /// Launch a full DMA command (PUT, GET or RENDEZVOUS_PUT) from CQ `n` (also a fired
    /// CT_TRIG_DMA).
    fn launch_full(&mut self, io: &mut DeviceIo<'_>, n: u32, d: &FullDma) -> Result<Exec, Fail> {
        if !d.is_valid_opcode() {
            return Err(ReturnCode::IllegalOp);
        }
        let l = Launch {
            opcode: d.opcode,
            dfa: d.dfa,
            index_ext: d.index_ext,
            remote_offset: d.remote_offset,
            initiator: d.initiator,
            match_bits: d.match_bits,
            header_data: d.header_data,
            user_ptr: d.user_ptr,
            flags: d.flags,
            eq: d.eq,
            ct: d.ct,
            len: d.request_len,
            src: Source::Dma {
                lac: d.lac,
                addr: d.local_addr,
            },
            small: false,
            nomatch: false,
            amo: None,
            eager_length: d.eager_length,
            rendezvous_id: d.rendezvous_id,
        };
        self.launch(io, n, &l)
    }

    /// Launch a non-matching DMA command (NOMATCH_PUT / NOMATCH_GET) from CQ `n`.
    fn launch_nomatch(
        &mut self,
        io: &mut DeviceIo<'_>,
        n: u32,
        d: &NomatchDma,
    ) -> Result<Exec, Fail> {
        let l = Launch {
            opcode: d.opcode,
            dfa: d.dfa,
            index_ext: d.index_ext,
            remote_offset: d.remote_offset,
            initiator: 0,
            match_bits: 0,
            header_data: 0,
            user_ptr: 0,
            flags: d.flags,
            eq: d.eq,
            ct: d.ct,
            len: d.request_len,
            src: Source::Dma {
                lac: d.lac,
                addr: d.local_addr,
            },
            small: false,
            nomatch: true,
            amo: None,
            eager_length: 0,
            rendezvous_id: 0,
        };
        self.launch(io, n, &l)
    }

    /// Send the request described by `l` from CQ `n`.
    fn launch(&mut self, io: &mut DeviceIo<'_>, n: u32, l: &Launch<'_>) -> Result<Exec, Fail> {
        let q = *self.tx_cq(n)?;
        // The EQ and CT the command names must be the queue's resource group's
        // (`c_cq_cfg_{eq,ct}_rgid_table`): no events or counts into another process's objects.
        if !self.tables().handles_in_rgid(q.ring.rgid, l.eq, l.ct) {
            return Err(ReturnCode::PermViolation);
        }
        let cp = match q.cp_cache {
            Some((g, cp)) if g == self.tables().cp_gen => cp,
            _ => {
                let cp = self.tables().cp(q.ring.rgid, q.lcid);
                let cp_gen = self.tables().cp_gen;
                self.tx_cq(n)?.cp_cache = Some((cp_gen, cp));
                cp
            }
        };
        if !cp.valid {
            return Err(ReturnCode::CmdInvalidArg);
        }
        let get = matches!(l.opcode, DmaOp::Get | DmaOp::NomatchGet);
        let kind = match l.opcode {
            DmaOp::Get | DmaOp::NomatchGet => ReqKind::Get,
            DmaOp::Atomic => ReqKind::Amo,
            DmaOp::FetchingAtomic => ReqKind::FetchAmo,
            _ => ReqKind::Put,
        };
        let mut req = Req {
            active: true,
            kind,
            cq: n,
            eq: l.eq,
            ct: l.ct,
            user_ptr: l.user_ptr,
            flags: l.flags,
            nomatch: l.nomatch,
            // A fetching AMO's reply carries the operand (whatever `request_len` said).
            rlength: l.amo.map_or(l.len, |(a, _)| amo_size(a.ty)),
            local_ac: 0,
            local_addr: 0,
            data_rc: None,
            at: io.now().as_ps(),
            grace: if !get && l.flags.restricted && l.amo.is_none() {
                restricted_grace(l.len).as_ps()
            } else {
                0
            },
            generation: 0,
            rendezvous: false,
            rdzv_ct: None,
            send_owed: false,
        };
        // Check the local buffer before anything leaves (cassini.md §2.1: IOVAs are checked
        // by the ATU; a bad one is an error event, never a touch outside the MD).
        let mut source = l.src;
        let mut mapped: Option<Mapped> = None;
        if let Source::Dma { lac, addr } = l.src {
            let ac = self.tables().lac_ac(q.ring.rgid, lac);
            let need = if get {
                emu_core::dma::Perm::WRITE
            } else {
                emu_core::dma::Perm::READ
            };
            // Fault site (issue 15): the ATU finds no translation for the local buffer. The
            // command then ends as a real miss does (cassini.md §3.3: an initiator event with
            // C_RC_NO_TRANSLATION, counter c1_oxe_cntrs.err_no_translation); this model has
            // no page-request (ODP) path.
            let checked = if io.fault(NicSite::AtuMiss) {
                Err(ReturnCode::NoTranslation)
            } else if !get && l.len as usize > MTU {
                // A put of several frames: the translation made by the check serves them all.
                let len = u64::from(l.len);
                self.atu()
                    .map_range(io.dma(), ac, addr, len, need)
                    .map(|m| mapped = Some(m))
            } else {
                self.atu().check(io.dma(), ac, addr, u64::from(l.len), need)
            };
            if let Err(rc) = checked {
                self.count_local_error(rc);
                self.complete(io, &req, rc, 0, PtlList::Priority, false);
                return Ok(Exec::Next);
            }
            req.local_ac = ac;
            req.local_addr = addr;
            source = Source::Ac { ac, addr };
        }
        // A fetching AMO's result buffer is checked the same way.
        if let Some((a, Some((lac, addr)))) = l.amo {
            let ac = self.tables().lac_ac(q.ring.rgid, lac);
            let w = emu_core::dma::Perm::WRITE;
            let size = u64::from(amo_size(a.ty));
            if let Err(rc) = self.atu().check(io.dma(), ac, addr, size, w) {
                self.count_local_error(rc);
                self.complete(io, &req, rc, 0, PtlList::Priority, false);
                return Ok(Exec::Next);
            }
            req.local_ac = ac;
            req.local_addr = addr;
        }
        let dst_nid = l.dfa >> 12;
        let Some(port) = dst_nid.checked_sub(self.nid_base()) else {
            self.complete(
                io,
                &req,
                ReturnCode::Undeliverable,
                0,
                PtlList::Priority,
                false,
            );
            return Ok(Exec::Next);
        };
        if !self.ixe().scan_armed {
            self.ixe().scan_armed = true;
            io.timer(SCAN_PERIOD, TOKEN_SCAN);
        }
        let Some(handle) = self.ixe().alloc(req) else {
            // Every request entry is in flight: the command waits in its queue (nothing of
            // it has taken effect yet) until a response frees one.
            let stalled = &mut self.ixe().stalled;
            if !stalled.contains(&n) {
                stalled.push(n);
            }
            return Ok(Exec::Stall);
        };
        let fab = Fab {
            vni: cp.vni,
            sfa: self.nid() << 12,
            dfa: l.dfa,
        };
        // A rendezvous put carries only its eager bytes; the target pulls the rest
        // (cassini.md §6).
        let rdzv = l.opcode == DmaOp::RendezvousPut;
        let wire_len = if rdzv {
            l.eager_length.min(l.len)
        } else {
            l.len
        };
        let r = Request {
            opcode: l.opcode as u8,
            index_ext: l.index_ext,
            remote_offset: l.remote_offset,
            request_len: l.len,
            initiator: l.initiator,
            match_bits: l.match_bits,
            header_data: l.header_data,
            handle,
            small: l.small,
            restricted: l.flags.restricted,
            eager_length: if rdzv { wire_len } else { 0 },
            rendezvous_id: if rdzv { l.rendezvous_id } else { 0 },
            use_offset_for_get: rdzv && l.flags.use_offset_for_get,
        };
        let tc = TrafficClass(cp.tc);
        let dst = PortId(port);
        let first = if get { 0 } else { (wire_len as usize).min(MTU) };
        let mut data = if let Some((amo, _)) = l.amo {
            let buf = io.packet_buffer(wire::FRAME_ROOM);
            let mut d = wire::request_in(buf, &fab, &r, wire::AMO_PAYLOAD);
            d.extend_from_slice(&amo.encode());
            d
        } else {
            let buf = io.packet_buffer(wire::FRAME_ROOM + first);
            wire::request_in(buf, &fab, &r, first)
        };
        if let (Some(m), Source::Ac { addr, .. }) = (&mapped, source) {
            source = Source::Mapped { m, addr };
        }
        let loaded = if l.amo.is_some() {
            Ok(())
        } else {
            self.append_source(io, &mut data, source, 0, first)
        };
        if let Err(rc) = loaded {
            self.ixe().release(handle);
            self.complete(io, &req, rc, 0, PtlList::Priority, false);
            return Ok(Exec::Next);
        }
        let src = io.port().unwrap_or_default();
        // A restricted put of several frames to a port of this process, with nothing on the
        // way that needs the frames' bytes, goes as one train: its continuation frames are
        // counted as sent, and the target copies their payload from this host memory.
        let total_put = if get || l.amo.is_some() {
            0
        } else {
            wire_len as usize
        };
        let train = match &mapped {
            Some(m) if l.flags.restricted && first < total_put && io.train_ok(dst) => {
                self.train_of(io, m, req.local_ac, req.local_addr, first, total_put)
            }
            _ => None,
        };
        if train.is_some()
            && let Some(x) = self.ixe().get_mut(handle)
        {
            x.send_owed = true;
        }
        let mut pkt = wire::packet(src, dst, tc, data);
        pkt.train.clone_from(&train);
        self.pct_send(io, pkt);
        if get {
            self.counters().ptl_tx_get_msgs += 1;
        } else {
            self.counters().ptl_tx_put_msgs += 1;
            self.counters().ptl_tx_put_pkts += 1;
            let total = if l.amo.is_some() {
                0
            } else {
                wire_len as usize
            };
            match source {
                // A sequenced message streams: its frames are read as the window opens, and
                // its SEND event follows the last ([`IxeOps::stream_next`]).
                Source::Ac { .. } | Source::Mapped { .. }
                    if first < total && !l.flags.restricted =>
                {
                    self.tx_cq(n)?.outstanding += 1;
                    let stream = OutStream {
                        handle,
                        fab,
                        src,
                        dst,
                        tc,
                        ac: req.local_ac,
                        addr: req.local_addr,
                        off: first,
                        total,
                        mapped: mapped.map(Box::new),
                    };
                    self.pct_stream(io, stream);
                    return Ok(Exec::Next);
                }
                _ => {}
            }
            if let Some(t) = &train {
                // Its SEND event comes with its completion (the source is read at the
                // target, [`Req::send_owed`]).
                self.counters().ptl_tx_put_pkts += u64::from(t.frames);
                self.tx_cq(n)?.outstanding += 1;
                return Ok(Exec::Next);
            }
            // Restricted messages are not sequenced (nothing to wait for): every frame
            // leaves now.
            let mut off = first;
            while off < total {
                let len = (total - off).min(MTU);
                let c = wire::Continuation {
                    offset: off as u32,
                    eom: off + len == total,
                    handle,
                };
                let buf = io.packet_buffer(wire::FRAME_ROOM + len);
                let mut data = wire::continuation_in(buf, &fab, &c, len);
                if self.append_source(io, &mut data, source, off, len).is_err() {
                    // The buffer was checked; it can only fail if host memory vanished.
                    break;
                }
                self.pct_send(io, wire::packet(src, dst, tc, data));
                self.counters().ptl_tx_put_pkts += 1;
                off += len;
            }
            self.source_read(io, &req, l.len);
        }
        self.tx_cq(n)?.outstanding += 1;
        Ok(Exec::Next)
    }

    /// The train of the continuation frames of a put of `total` bytes from `addr` of AC
    /// `ac` (translated as `m`) whose first frame carries `first` bytes: the source's bus
    /// segments of the rest, and the frames and wire bytes they stand for. `None` if the
    /// range can no longer be translated (the frames then go one by one).
    fn train_of(
        &mut self,
        io: &DeviceIo<'_>,
        m: &Mapped,
        ac: u16,
        addr: u64,
        first: usize,
        total: usize,
    ) -> Option<Arc<Train>> {
        let n = (total - first) as u64;
        let need = emu_core::dma::Perm::READ;
        let segments = self
            .atu()
            .segments_of(
                io.dma(),
                Some(m),
                ac,
                addr + first as u64,
                n,
                need,
                MTU as u64,
            )
            .ok()?;
        let frames = (total - first).div_ceil(MTU);
        let per_frame = wire::FAB_HDR + wire::CONTINUATION_HDR + wire::TAG_ROOM;
        Some(Arc::new(Train {
            frames: u32::try_from(frames).ok()?,
            bytes: (frames * per_frame) as u64 + n,
            source: io.dma().clone(),
            segments,
        }))
    }

    /// The SEND event (and CT count) of a request of `len` bytes whose source buffer has
    /// been read.
    fn source_read(&mut self, io: &mut DeviceIo<'_>, req: &Req, len: u32) {
        if !req.flags.event_send_disable {
            self.initiator_event(
                io,
                req,
                EventType::Send,
                ReturnCode::Ok,
                len,
                PtlList::Priority,
                false,
            );
        }
        if req.flags.event_ct_send {
            let inc = if req.flags.event_ct_bytes {
                u64::from(len)
            } else {
                1
            };
            self.ct_event(io, req.ct, inc, 0);
        }
    }

    /// The next frame of `stream`, read from host memory now; after the last, the SEND
    /// event. `None` when the request is no longer outstanding (it timed out, or its
    /// connection died) or its buffer can no longer be read (then it completes with the
    /// error): the rest of the stream is dropped.
    ///
    /// With `room` for more than one frame in the window, and nothing on the way to a port
    /// of this process that needs the frames' bytes ([`DeviceIo::train_ok`]), the frame
    /// carries a train of the ones after it, as many as the room allows: the target copies
    /// their payload from host memory, so the SEND event is then owed to the completion
    /// ([`Req::send_owed`]).
    fn stream_next(
        &mut self,
        io: &mut DeviceIo<'_>,
        stream: &mut OutStream,
        room: u32,
    ) -> Option<Packet> {
        let req = *self.ixe().get(stream.handle)?;
        let len = (stream.total - stream.off).min(MTU);
        let c = wire::Continuation {
            offset: stream.off as u32,
            eom: stream.off + len == stream.total,
            handle: stream.handle,
        };
        let buf = io.packet_buffer(wire::FRAME_ROOM + len);
        let mut data = wire::continuation_in(buf, &stream.fab, &c, len);
        let source = match &stream.mapped {
            Some(m) => Source::Mapped {
                m,
                addr: stream.addr,
            },
            None => Source::Ac {
                ac: stream.ac,
                addr: stream.addr,
            },
        };
        if let Err(rc) = self.append_source(io, &mut data, source, stream.off, len) {
            io.recycle(data);
            self.count_local_error(rc);
            self.request_lost(io, stream.handle, rc);
            stream.off = stream.total;
            return None;
        }
        self.counters().ptl_tx_put_pkts += 1;
        stream.off += len;
        let mut pkt = wire::packet(stream.src, stream.dst, stream.tc, data);
        let mut owed = req.send_owed;
        if room > 1
            && !stream.done()
            && let Some(m) = &stream.mapped
            && io.train_ok(stream.dst)
        {
            let end = stream.total.min(stream.off + (room as usize - 1) * MTU);
            if let Some(t) = self.train_of(io, m, stream.ac, stream.addr, stream.off, end) {
                self.counters().ptl_tx_put_pkts += u64::from(t.frames);
                stream.off = end;
                pkt.train = Some(t);
                if let Some(x) = self.ixe().get_mut(stream.handle) {
                    x.send_owed = true;
                }
                owed = true;
            }
        }
        if stream.done() && !owed {
            // A streamed request is a put: its length is the request's.
            self.source_read(io, &req, req.rlength);
        }
        Some(pkt)
    }

    /// A sign of life from the fabric (the PCT saw packets acknowledged): requests whose
    /// frames are still streaming or waiting for their acknowledgement are not lost.
    fn note_progress(&mut self, io: &mut DeviceIo<'_>) {
        self.ixe().last_progress = io.now().as_ps();
    }

    /// Issue the Get that pulls the rest of a rendezvous put (cassini.md §6): to the source's
    /// PtlTE at index `rdzv_get_idx` of its PID granule (`c_lpe_cfg_get_ctrl`), match bits
    /// `cxi_rdzv_match_bits` {rendezvous_id, transaction_type, the put's top 16 match bits},
    /// landing in the receiving entry. Its REPLY event (`rendezvous` set, `user_ptr` =
    /// `cxi_rdzv_user_ptr`) goes to the PtlTE's EQ; `ct` is applied when it completes.
    /// `put` is the fabric header the put arrived with.
    fn launch_rendezvous_get(
        &mut self,
        io: &mut DeviceIo<'_>,
        g: &RendezvousGet,
        put: &Fab,
        tc: TrafficClass,
        ct: Option<CtUpdate>,
    ) {
        let eq = self.ptlte_eq(g.ptlte_index);
        let ac = self
            .tables()
            .lac_ac(self.tables().ptlte_rgid(g.ptlte_index), g.dest_lac);
        let user_ptr = (u64::from(g.source_nid) & 0xF_FFFF)
            | ((u64::from(g.source_pid) & 0x1FF) << 20)
            | ((u64::from(g.ptlte_index) & 0x7FF) << 29)
            | (u64::from(g.rendezvous_id) << 40)
            | (u64::from(g.buffer_id) << 48);
        let len = g.length.min(u64::from(u32::MAX)) as u32;
        let req = Req {
            active: true,
            kind: ReqKind::Get,
            cq: NO_CQ,
            eq,
            user_ptr,
            rlength: len,
            local_ac: ac,
            local_addr: g.dest_start,
            at: io.now().as_ps(),
            rendezvous: true,
            rdzv_ct: ct,
            ..Req::default()
        };
        let w = emu_core::dma::Perm::WRITE;
        if let Err(rc) = self
            .atu()
            .check(io.dma(), ac, g.dest_start, u64::from(len), w)
        {
            self.complete(io, &req, rc, 0, PtlList::Priority, false);
            return;
        }
        let Some(port) = g.source_nid.checked_sub(self.nid_base()) else {
            self.complete(
                io,
                &req,
                ReturnCode::Undeliverable,
                0,
                PtlList::Priority,
                false,
            );
            return;
        };
        if !self.ixe().scan_armed {
            self.ixe().scan_armed = true;
            io.timer(SCAN_PERIOD, TOKEN_SCAN);
        }
        let Some(handle) = self.ixe().alloc(req) else {
            self.complete(
                io,
                &req,
                ReturnCode::ResourceBusy,
                0,
                PtlList::Priority,
                false,
            );
            return;
        };
        let gc = self.rdzv_get();
        let pid_bits = self.pid_bits();
        // The PID of the put's destination endpoint: the NIC issuing the Get.
        let my_pid = (put.dfa & 0xFFF) & pid_bits.pid_mask();
        let fab = Fab {
            vni: put.vni,
            sfa: self.nid() << 12,
            dfa: ((g.source_nid & 0xF_FFFF) << 12)
                | (u32::from(gc.index).wrapping_add(g.source_pid) & 0xFFF),
        };
        let r = Request {
            opcode: DmaOp::Get as u8,
            index_ext: gc.index_ext,
            remote_offset: g.source_offset,
            request_len: len,
            initiator: match_id(pid_bits, my_pid, self.nid()),
            match_bits: u64::from(g.rendezvous_id)
                | (u64::from(gc.transaction_type & 0xF) << 8)
                | (g.put_match_bits & (0xFFFF << 48)),
            header_data: 0,
            handle,
            ..Request::default()
        };
        let src = io.port().unwrap_or_default();
        self.pct_send(
            io,
            wire::packet(src, PortId(port), tc, wire::request(&fab, &r, 0)),
        );
        self.counters().ptl_tx_get_msgs += 1;
    }

    /// Append `len` bytes of the request source at `off` to `data`.
    fn append_source(
        &mut self,
        io: &mut DeviceIo<'_>,
        data: &mut Vec<u8>,
        src: Source<'_>,
        off: usize,
        len: usize,
    ) -> Result<(), ReturnCode> {
        if len == 0 {
            return Ok(());
        }
        match src {
            Source::Inline(b) => {
                data.extend_from_slice(b.get(off..off + len).unwrap_or(&[]));
                Ok(())
            }
            Source::Ac { ac, addr } => {
                let at = data.len();
                data.resize(at + len, 0);
                self.atu()
                    .read(io.dma(), ac, addr + off as u64, &mut data[at..at + len])
            }
            Source::Mapped { m, addr } => {
                let at = data.len();
                data.resize(at + len, 0);
                self.atu()
                    .read_in(io.dma(), m, addr + off as u64, &mut data[at..at + len])
            }
            Source::Dma { .. } => Err(ReturnCode::InvalidAc),
        }
    }

    fn count_local_error(&mut self, rc: ReturnCode) {
        match rc {
            ReturnCode::NoTranslation => self.counters().err_no_translation += 1,
            ReturnCode::InvalidAc | ReturnCode::AddrOutOfRange => {
                self.counters().err_invalid_ac += 1
            }
            ReturnCode::PagePermError => self.counters().err_page_perm += 1,
            _ => {}
        }
    }

    /// Post an initiator event of `req` (short, or long if its EQ asks for it), honouring
    /// `event_success_disable` for successful events and the non-matching rule.
    #[allow(clippy::too_many_arguments)]
    fn initiator_event(
        &mut self,
        io: &mut DeviceIo<'_>,
        req: &Req,
        ty: EventType,
        rc: ReturnCode,
        mlength: u32,
        list: PtlList,
        tgt_error: bool,
    ) {
        if req.eq == 0 {
            return;
        }
        if rc == ReturnCode::Ok && (req.flags.event_success_disable || req.nomatch) {
            return;
        }
        let long = self.initiator_long(req.eq);
        if long {
            let ns = io.now().as_ns();
            let ev = InitiatorLong {
                user_ptr: req.user_ptr,
                mlength,
                ptl_list: list,
                rendezvous: req.rendezvous,
                retry: false,
                tgt_error,
                event_type: ty,
                timestamp_ns: (ns % 1_000_000_000) as u32,
                timestamp_sec: ns / 1_000_000_000,
                return_code: rc,
            };
            self.post_event(io, req.eq, &ev.encode(), EventClass::Other);
        } else {
            let ev = InitiatorShort {
                user_ptr: req.user_ptr,
                mlength,
                ptl_list: list,
                rendezvous: req.rendezvous,
                retry: false,
                tgt_error,
                event_type: ty,
                return_code: rc,
            };
            self.post_event(io, req.eq, &ev.encode(), EventClass::Other);
        }
    }

    /// Complete `req`: its ACK (Put) or REPLY (Get) event and CT update.
    fn complete(
        &mut self,
        io: &mut DeviceIo<'_>,
        req: &Req,
        rc: ReturnCode,
        mlength: u32,
        list: PtlList,
        tgt_error: bool,
    ) {
        if req.send_owed {
            // A train's source was read by the target before it answered.
            self.source_read(io, req, req.rlength);
        }
        let (ty, ct_flag) = match req.kind {
            ReqKind::Put | ReqKind::Amo => (EventType::Ack, req.flags.event_ct_ack),
            ReqKind::Get | ReqKind::FetchAmo => (EventType::Reply, req.flags.event_ct_reply),
        };
        self.initiator_event(io, req, ty, rc, mlength, list, tgt_error);
        if let Some(u) = req.rdzv_ct {
            // The receiving entry's counting event: the transfer is complete now.
            if rc == ReturnCode::Ok {
                self.ct_event(io, u.ct, u.success_increment, 0);
            } else {
                self.ct_event(io, u.ct, 0, 1);
            }
        }
        if req.ct != 0 && (ct_flag || rc != ReturnCode::Ok) {
            if rc == ReturnCode::Ok {
                let inc = if req.flags.event_ct_bytes {
                    u64::from(mlength)
                } else {
                    1
                };
                self.ct_event(io, req.ct, inc, 0);
            } else {
                self.ct_event(io, req.ct, 0, 1);
            }
        }
    }

    /// A response arrived for handle `rsp.handle` (with `train`, the REPLY frames after it).
    fn response(
        &mut self,
        io: &mut DeviceIo<'_>,
        rsp: &Response,
        payload: &[u8],
        train: Option<&Train>,
    ) {
        self.counters().rx_ptl_response_pkt += 1 + train.map_or(0, |t| u64::from(t.frames));
        let Some(req) = self.ixe().get(rsp.handle).copied() else {
            return;
        };
        self.ixe().last_progress = io.now().as_ps();
        let rc = ReturnCode::try_from(rsp.rc).unwrap_or(ReturnCode::Undeliverable);
        let list = PtlList::try_from(rsp.ptl_list).unwrap_or_default();
        match (rsp.kind, req.kind) {
            (RspKind::Ack, ReqKind::Put | ReqKind::Amo) => {
                self.complete(io, &req, rc, rsp.mlength, list, rc != ReturnCode::Ok);
                self.finish(io, rsp.handle, req.cq);
            }
            (RspKind::Reply, ReqKind::FetchAmo) => {
                // The old value comes back even when an FP exception is reported.
                let mut rc = rc;
                if !payload.is_empty() {
                    let n = payload.len().min(req.rlength as usize);
                    if let Err(e) =
                        self.atu()
                            .write(io.dma(), req.local_ac, req.local_addr, &payload[..n])
                    {
                        rc = e;
                    }
                }
                self.complete(io, &req, rc, rsp.mlength, list, rc != ReturnCode::Ok);
                self.finish(io, rsp.handle, req.cq);
            }
            (RspKind::Reply, ReqKind::Get) => {
                if rc != ReturnCode::Ok {
                    self.complete(io, &req, rc, 0, list, true);
                    self.finish(io, rsp.handle, req.cq);
                    return;
                }
                let end = u64::from(rsp.offset) + payload.len() as u64;
                if req.data_rc.is_none() && !payload.is_empty() {
                    let r = if end > u64::from(req.rlength) {
                        Err(ReturnCode::AddrOutOfRange)
                    } else {
                        self.atu().write(
                            io.dma(),
                            req.local_ac,
                            req.local_addr + u64::from(rsp.offset),
                            payload,
                        )
                    };
                    if let Err(e) = r
                        && let Some(x) = self.ixe().get_mut(rsp.handle)
                    {
                        x.data_rc = Some(e);
                    }
                }
                if let Some(t) = train {
                    self.land_reply_train(io, rsp.handle, &req, end, t);
                }
                if rsp.eom {
                    let data_rc = self.ixe().get(rsp.handle).and_then(|r| r.data_rc);
                    let rc = data_rc.unwrap_or(ReturnCode::Ok);
                    self.complete(io, &req, rc, rsp.mlength, list, false);
                    self.finish(io, rsp.handle, req.cq);
                }
            }
            _ => {}
        }
    }

    /// Land the train `t` of REPLY frames of Get `handle` (`req`), whose payload starts at
    /// offset `at` of the reply (a frame boundary): copied from the target's host memory
    /// straight into the landing range, each frame translated (and counted) as its write
    /// would have been. As frame by frame, the frames before the first that fails land and
    /// that frame's error becomes the Get's (`ADDR_OUT_OF_RANGE` past the request's length,
    /// the ATU's error, `PCIE_UNSUCCESS_CMPL` if the copy fails); nothing lands after an
    /// earlier error.
    fn land_reply_train(
        &mut self,
        io: &mut DeviceIo<'_>,
        handle: u32,
        req: &Req,
        at: u64,
        t: &Train,
    ) {
        if self.ixe().get(handle).is_none_or(|r| r.data_rc.is_some()) {
            return;
        }
        let total = t.payload_len();
        let room = u64::from(req.rlength).saturating_sub(at);
        let (mut n, mut err) = if total <= room {
            (total, None)
        } else {
            // Whole frames that fit: the one that runs past the end fails.
            (room - room % MTU as u64, Some(ReturnCode::AddrOutOfRange))
        };
        let mut to = Vec::new();
        let w = emu_core::dma::Perm::WRITE;
        let addr = req.local_addr + at;
        if let Err((done, rc)) =
            self.atu()
                .frames_segments(io.dma(), req.local_ac, addr, n, w, MTU as u64, &mut to)
        {
            n = done;
            err = Some(rc);
        }
        if n > 0 {
            let from = crate::tgt::cut_segments(&t.segments, n);
            if t.source.copy_segments_to(&from, io.dma(), &to).is_err() {
                err = Some(ReturnCode::PcieUnsuccessCmpl);
            }
        }
        if let Some(e) = err
            && let Some(x) = self.ixe().get_mut(handle)
        {
            x.data_rc = Some(e);
        }
    }

    /// The PCT gave up on a packet of request `handle` (its connection was declared dead,
    /// pct.rs): the request completes with `rc` now instead of at its timeout.
    fn request_lost(&mut self, io: &mut DeviceIo<'_>, handle: u32, rc: ReturnCode) {
        let Some(req) = self.ixe().get(handle).copied() else {
            return;
        };
        self.complete(io, &req, rc, 0, PtlList::Priority, false);
        self.finish(io, handle, req.cq);
    }

    /// Release `handle`; let a FENCE on CQ `cq` go if it was the last one.
    fn finish(&mut self, io: &mut DeviceIo<'_>, handle: u32, cq: u32) {
        self.ixe().release(handle);
        if !self.ixe().stalled.is_empty() {
            for stalled in std::mem::take(&mut self.ixe().stalled) {
                self.run_ring(io, false, stalled);
            }
        }
        let Ok(Some(q)) = self.tx_cqs().get_mut_if_touched(cq as usize) else {
            return;
        };
        q.outstanding = q.outstanding.saturating_sub(1);
        if q.fence && q.outstanding == 0 {
            q.fence = false;
            self.run_ring(io, false, cq);
        }
    }

    /// The timeout scan: requests that waited [`REQUEST_TIMEOUT`] since their launch and since
    /// the last response this initiator received complete with UNDELIVERABLE, target messages
    /// whose last packets never came are dropped; re-armed while anything is left.
    fn scan_timeouts(&mut self, io: &mut DeviceIo<'_>) {
        self.ixe().scan_armed = false;
        let now = io.now().as_ps();
        let limit = REQUEST_TIMEOUT.as_ps();
        let progress = self.ixe().last_progress;
        let ixe = self.ixe();
        let expired: Vec<(u32, Req)> = ixe
            .reqs
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.active && now.saturating_sub(r.at.max(progress)) >= limit.saturating_add(r.grace)
            })
            .map(|(i, r)| (ixe.handle_of(i), *r))
            .collect();
        for (h, r) in expired {
            tracing::debug!(
                target: "emu_cassini::ixe",
                handle = h,
                launched_ps = r.at,
                last_progress_ps = progress,
                now_ps = now,
                "request timed out: UNDELIVERABLE"
            );
            self.complete(
                io,
                &r,
                ReturnCode::Undeliverable,
                0,
                PtlList::Priority,
                false,
            );
            self.finish(io, h, r.cq);
        }
        self.expire_target_messages(now, limit);
        let busy = self.ixe().reqs.len() > self.ixe().free.len() || self.target_busy();
        if busy && !self.ixe().scan_armed {
            self.ixe().scan_armed = true;
            io.timer(SCAN_PERIOD, TOKEN_SCAN);
        }
    }

    /// Whether the timeout scan is armed.
    fn ixe_scan_armed(&mut self) -> bool {
        self.ixe().scan_armed
    }

    /// Arm the timeout scan.
    fn arm_scan(&mut self, io: &mut DeviceIo<'_>) {
        self.ixe().scan_armed = true;
        io.timer(SCAN_PERIOD, TOKEN_SCAN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_handles_change_generation_and_stale_ones_miss() {
        let mut t = Ixe::new();
        let r = Req {
            active: true,
            ..Req::default()
        };
        let a = t.alloc(r).unwrap();
        let b = t.alloc(r).unwrap();
        assert_ne!(a, b);
        assert!(t.get(a).is_some());
        t.release(a);
        assert!(t.get(a).is_none());
        let c = t.alloc(r).unwrap();
        assert_eq!(c & 0xFFFF, a & 0xFFFF, "the entry is reused");
        assert_ne!(c, a, "with a new generation");
        assert!(
            t.get(a).is_none(),
            "a late response for the old request misses"
        );
        t.release(a);
        assert!(t.get(c).is_some(), "and cannot release the new one");
        assert!(c < 1 << 20, "handles fit the 20 wire bits");
    }
}
