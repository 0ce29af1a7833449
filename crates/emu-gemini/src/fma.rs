//! FMA (Fast Memory Access): descriptor registers, the PUT/GET windows, write combining,
//! AMOs and the sequences (SSIDs) that turn answers into completion events.
//!
//! Register layout: `firmware_spec::gemini::fma` (`ghal_fma_desc_t`, `GHAL_FMA_*`). Window
//! semantics, the privilege mask and sequence rules: docs/gemini-programming.md ("FMA
//! descriptors").
//!
//! The block (`Fma`) reaches the rest of the NIC only through the `FmaPort` trait: the NTT
//! and memory domains it reads, the request table it sends through, the CQs its sequences
//! complete in. Answers come back from the device as `Fma::seq_answered`.

use crate::fault::Fault;
use crate::mdd::{Access, Domains};
use crate::ntt::Ntt;
use crate::packet::{Header, Kind, TC_FMA, flag};
use crate::regs::{self, counter};
use crate::request::{Dest, Landing, Owner, Req};
use emu_core::dma::DmaPort;
use emu_core::hash::IntMap;
use emu_core::mmio::MmioError;
use emu_core::time::{SimDuration, SimTime};
use firmware_spec::gemini::amo::{AmoCmd, NO_FETCH_BIT};
use firmware_spec::gemini::cqe::{Cqe, CqeSource, HwStatus};
use firmware_spec::gemini::fma::{
    ALLOC_SEQID_DOORBELL, FmaDescriptor, FmaMode2, GetControlWord, PrivMask, SyncType, WindowKind,
    op, reg,
};
use firmware_spec::gemini::gni::ReturnCode;
use firmware_spec::gemini::limits::FMA_TOTAL_DESCRIPTORS;

/// What the FMA block needs from the rest of the NIC: the tables it reads, the request
/// table it sends through, and the CQs its sequences complete in. The device implements it.
pub(crate) trait FmaPort {
    /// Physical PE of this NIC (for traces).
    fn nic(&self) -> u32;
    /// Current virtual time.
    fn now(&self) -> SimTime;
    /// Add `n` to model counter `c` ([`regs::counter`]).
    fn count(&mut self, c: u32, n: u64);
    /// The node translation table (logical PEs of a descriptor's group).
    fn ntt(&self) -> &Ntt;
    /// The memory domains (a GET's or fetching AMO's landing zone is checked up front).
    fn domains(&self) -> &Domains;
    /// The host DMA port the domains are checked against.
    fn dma(&self) -> &DmaPort;
    /// Tag and send a request on traffic class `tc`; its answer (or timeout) comes back as
    /// [`Fma::seq_answered`] for `Owner::Seq`.
    fn issue(&mut self, req: Req, dest: &Dest, hdr: Header, payload: &[u8], tc: u8);
    /// Deliver a completion event to CQ `cqh`.
    fn post_cqe(&mut self, cqh: u64, cqe: Cqe);
}

/// Most sequences (SSIDs) one descriptor may have in flight (8-bit `ssid_inuse`).
pub const MAX_SEQUENCES: u32 = 255;
/// Write-combining line size.
pub const WC_LINE: u64 = 64;
/// Qwords of the descriptor image.
const QWORDS: usize = 9;

/// The write-combining buffer of a descriptor's PUTWC window.
#[derive(Clone, Copy, Debug)]
struct Wc {
    len: usize,
    dest: Dest,
    offset: u64,
    buf: [u8; WC_LINE as usize],
}

/// An SMSG message being gathered from PUT_MSG stores (sent as one frame).
#[derive(Clone, Debug)]
struct MsgBuf {
    dest: Dest,
    offset: u64,
    data: Vec<u8>,
}

/// Largest PUT_MSG message gathered into one frame: an SMSG header (16 bytes) plus the
/// largest message (`GNI_SMSG_MAX_SIZE`), rounded up to the 64-byte slot granule.
pub const MSG_MAX: usize = 65_536 + 64;

/// One FMA descriptor.
#[derive(Clone, Debug)]
struct FmaDesc {
    regs: FmaDescriptor,
    prvmask: u32,
    err_rc: u32,
    wc: Option<Wc>,
    msg: Option<MsgBuf>,
    /// The buffer of the last message sent, reused for the next one.
    spare: Vec<u8>,
    open: Option<u32>,
    in_flight: u32,
    puts_out: u32,
    gets_out: u32,
}

impl Default for FmaDesc {
    fn default() -> Self {
        FmaDesc {
            regs: FmaDescriptor::default(),
            prvmask: PrivMask::DEFAULT.bits(),
            err_rc: 0,
            wc: None,
            msg: None,
            spare: Vec::new(),
            open: None,
            in_flight: 0,
            puts_out: 0,
            gets_out: 0,
        }
    }
}

/// Where a sequence is after its data requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Data requests outstanding.
    Data,
    /// Sync flag outstanding.
    Flag,
    /// Remote event outstanding.
    Remote,
}

/// An FMA sequence: the requests between two `SYNC_COMPLETE`s and the event they end in.
#[derive(Clone, Debug)]
struct Seq {
    fma: u8,
    closed: bool,
    outstanding: u32,
    error: Option<Fault>,
    sync: u64,
    data56: u64,
    had_get: bool,
    last: Option<Dest>,
    phase: Phase,
    rem_overrun: bool,
    last_progress: SimTime,
    /// The remote event travelled with the sequence's only PUT ([`flag::REMOTE_EVENT`]).
    remote_carried: bool,
}

/// The FMA block of one NIC: its descriptors and their open and in-flight sequences.
#[derive(Clone, Debug)]
pub(crate) struct Fma {
    descs: Vec<FmaDesc>,
    seqs: IntMap<u32, Seq>,
    next_seq: u32,
}

impl Default for Fma {
    fn default() -> Self {
        Fma {
            descs: (0..FMA_TOTAL_DESCRIPTORS)
                .map(|_| FmaDesc::default())
                .collect(),
            seqs: IntMap::default(),
            next_seq: 0,
        }
    }
}

fn image(d: &FmaDescriptor) -> [u64; QWORDS] {
    let mut out = [0u64; QWORDS];
    if let Ok(b) = d.encode() {
        for (q, o) in out.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[q * 8..q * 8 + 8]);
            *o = u64::from_le_bytes(w);
        }
    }
    out
}

fn from_image(q: &[u64; QWORDS]) -> FmaDescriptor {
    let mut b = [0u8; QWORDS * 8];
    for (i, w) in q.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    FmaDescriptor::decode(&b).unwrap_or_default()
}

/// Bits of register qword `q` that belong to field `name`.
fn field_bits(name: &str, q: usize) -> u64 {
    FmaDescriptor::FIELDS
        .iter()
        .find(|f| f.name == name)
        .filter(|f| f.offset / 64 == q)
        .map_or(0, |f| {
            firmware_spec::bits::mask(f.width as u32) << (f.offset % 64)
        })
}

/// Bits of register qwords 0..3 a user-alias store may change under privilege mask `m`.
fn user_bits(m: PrivMask, q: usize) -> u64 {
    let mode2_shift = FmaDescriptor::FIELDS
        .iter()
        .find(|f| f.name == "mode2")
        .map_or(0, |f| f.offset % 64);
    let mut bits = 0u64;
    let mut allow = |mask: PrivMask, b: u64| {
        if m.contains(mask) {
            bits |= b;
        }
    };
    allow(PrivMask::BASEOFFSET, field_bits("base_offset", q));
    allow(PrivMask::CMD, field_bits("command", q));
    allow(PrivMask::REMOTEMDH, field_bits("rem_mem_dh", q));
    allow(PrivMask::SOURCEMDH, field_bits("src_mem_dh", q));
    allow(PrivMask::PEMASKMODE, field_bits("pe_mask_mode", q));
    allow(PrivMask::NPES, field_bits("num_pes", q));
    allow(PrivMask::PEBASE, field_bits("pe_base", q));
    allow(PrivMask::CQHANDLE, field_bits("cq_hndl", q));
    allow(
        PrivMask::PTAG,
        field_bits("src_ptag", q) | field_bits("dest_ptag", q),
    );
    allow(PrivMask::NTTENABLE, field_bits("mode3", q));
    if field_bits("mode2", q) != 0 {
        let m2 = |f: FmaMode2| u64::from(f.bits()) << mode2_shift;
        allow(PrivMask::VMDHENABLE, m2(FmaMode2::VMDH_ENABLE));
        allow(PrivMask::FMAENABLE, m2(FmaMode2::FMA_ENABLE));
        allow(
            PrivMask::HARA,
            m2(FmaMode2::HASH_ENABLE | FmaMode2::ADP_ENABLE | FmaMode2::RADP_ENABLE),
        );
    }
    bits
}

impl FmaDesc {
    fn enabled(&self) -> bool {
        self.regs.mode2 & u64::from(FmaMode2::FMA_ENABLE.bits()) != 0
    }
}

impl Fma {
    /// Sequences with requests outstanding and no progress for `timeout`, ascending.
    pub(crate) fn expired(&self, now: SimTime, timeout: SimDuration) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .seqs
            .iter()
            .filter(|(_, s)| s.outstanding > 0 && now.since(s.last_progress) >= timeout)
            .map(|(&id, _)| id)
            .collect();
        v.sort_unstable();
        v
    }

    fn desc(&self, id: u8) -> Option<&FmaDesc> {
        self.descs.get(usize::from(id))
    }

    /// Resolve the target of window offset `off` of descriptor `id`.
    fn dest(&self, ntt: &Ntt, id: u8, off: u64) -> Result<(Dest, u64), Fault> {
        let d = &self.desc(id).ok_or(Fault::BadCommand)?.regs;
        let (pe, roff) = d.target(off);
        let phys = if d.ntt_enabled() {
            if pe >= d.num_pes {
                return Err(Fault::PeOutsideGroup);
            }
            ntt.translate(d.pe_base + pe)?
        } else {
            pe as u32
        };
        let mode2 = d.mode2;
        Ok((
            Dest {
                pe: phys,
                acc: Access {
                    mdh: d.rem_mem_dh as u16,
                    vmdh: mode2 & u64::from(FmaMode2::VMDH_ENABLE.bits()) != 0,
                    ptag: d.dest_ptag as u8,
                },
                ordered: mode2 & u64::from(FmaMode2::ADP_ENABLE.bits()) == 0,
                stream: u16::from(id),
            },
            roff,
        ))
    }

    /// The local memory domain of descriptor `id`.
    fn local(&self, id: u8) -> Access {
        let d = self.desc(id).map(|d| d.regs).unwrap_or_default();
        Access {
            mdh: d.src_mem_dh as u16,
            vmdh: false,
            ptag: d.src_ptag as u8,
        }
    }

    /// The open sequence of descriptor `id`, opening one if needed.
    fn open_seq(&mut self, id: u8, now: SimTime) -> Result<u32, Fault> {
        let d = self
            .descs
            .get_mut(usize::from(id))
            .ok_or(Fault::BadCommand)?;
        if let Some(s) = d.open {
            return Ok(s);
        }
        if d.in_flight >= MAX_SEQUENCES {
            return Err(Fault::NoSyncId);
        }
        let s = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        d.open = Some(s);
        d.in_flight += 1;
        self.seqs.insert(
            s,
            Seq {
                fma: id,
                closed: false,
                outstanding: 0,
                error: None,
                sync: 0,
                data56: 0,
                had_get: false,
                last: None,
                phase: Phase::Data,
                rem_overrun: false,
                last_progress: now,
                remote_carried: false,
            },
        );
        Ok(s)
    }

    /// A request of descriptor `id` was refused locally: flag, `ERR_RC`, and the error on
    /// the open sequence (so its completion event reports it).
    fn reject(&mut self, p: &mut impl FmaPort, id: u8, fault: Fault) {
        tracing::debug!(
            target: "gemini::fma",
            nic = p.nic(),
            fma = id,
            %fault,
            "request rejected"
        );
        p.count(counter::ERRORS, 1);
        if let Some(d) = self.descs.get_mut(usize::from(id)) {
            d.regs.flags |= u64::from(fault.fma_flag().bits());
            d.err_rc = fault.return_code().code();
        }
        if fault == Fault::NoSyncId {
            return;
        }
        if let Ok(s) = self.open_seq(id, p.now())
            && let Some(seq) = self.seqs.get_mut(&s)
        {
            seq.error.get_or_insert(fault);
        }
    }

    /// Send one request of descriptor `id` inside its open sequence.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        p: &mut impl FmaPort,
        id: u8,
        dest: Dest,
        hdr: Header,
        payload: &[u8],
        landing: Landing,
        is_get: bool,
    ) {
        let s = match self.open_seq(id, p.now()) {
            Ok(s) => s,
            Err(f) => return self.reject(p, id, f),
        };
        if let Some(seq) = self.seqs.get_mut(&s) {
            seq.outstanding += 1;
            seq.last = Some(dest);
            seq.had_get |= is_get;
        }
        if let Some(d) = self.descs.get_mut(usize::from(id)) {
            if is_get {
                d.gets_out += 1;
            } else {
                d.puts_out += 1;
            }
        }
        let req = Req {
            owner: Owner::Seq(s),
            landing,
            is_get,
        };
        p.issue(req, &dest, hdr, payload, TC_FMA);
    }

    /// Send the write-combined bytes and the gathered message of descriptor `id`, if any.
    fn flush(&mut self, p: &mut impl FmaPort, id: u8) {
        let Some(d) = self.descs.get_mut(usize::from(id)) else {
            return;
        };
        let (wc, msg) = (d.wc.take(), d.msg.take());
        if let Some(wc) = wc {
            self.send_put(p, id, wc.dest, wc.offset, &wc.buf[..wc.len], false);
        }
        if let Some(m) = msg {
            self.send_put(p, id, m.dest, m.offset, &m.data, true);
            self.keep_spare(id, m.data);
        }
    }

    /// Keep the buffer of a message that was sent for the next one of descriptor `id`.
    fn keep_spare(&mut self, id: u8, buf: Vec<u8>) {
        if let Some(d) = self.descs.get_mut(usize::from(id)) {
            d.spare = buf;
        }
    }

    fn send_put(
        &mut self,
        p: &mut impl FmaPort,
        id: u8,
        dest: Dest,
        offset: u64,
        data: &[u8],
        msg: bool,
    ) {
        let mut h = Header::new(Kind::Put);
        h.offset = offset;
        if msg {
            h.flags |= flag::MSG;
        }
        p.count(counter::FMA_PUTS, 1);
        self.send(p, id, dest, h, data, Landing::None, false);
    }

    /// `SYNC_COMPLETE` of descriptor `id` with word `v`: when the bytes still to flush are
    /// one SMSG message that is the whole of its sequence (nothing else outstanding, no
    /// error) and the sequence asks for a remote event and no sync flag, the message goes
    /// out carrying the remote event ([`flag::REMOTE_EVENT`]): the target raises it right
    /// after writing the message, as it would on a separate request sent once the message
    /// was acknowledged, and one round trip is saved. Otherwise flush, then close as usual.
    fn sync_fused(&mut self, p: &mut impl FmaPort, id: u8, v: u64) {
        let sync = SyncType((v >> 56) as u8);
        let data56 = v & firmware_spec::bits::mask(56);
        let fusable = sync.contains(SyncType::REMOTE_EVENT)
            && !sync.contains(SyncType::WITH_FLAG)
            && self.descs.get(usize::from(id)).is_some_and(|d| {
                d.wc.is_none()
                    && d.msg.as_ref().is_some_and(|m| m.data.len() > 8)
                    && d.open.is_none_or(|s| {
                        self.seqs
                            .get(&s)
                            .is_some_and(|q| q.outstanding == 0 && q.error.is_none())
                    })
            });
        if !fusable {
            self.flush(p, id);
            return self.sync_complete(p, id, v);
        }
        let Some(m) = self
            .descs
            .get_mut(usize::from(id))
            .and_then(|d| d.msg.take())
        else {
            return self.sync_complete(p, id, v);
        };
        let s = match self.open_seq(id, p.now()) {
            Ok(s) => s,
            Err(f) => {
                self.reject(p, id, f);
                return self.sync_complete(p, id, v);
            }
        };
        if let Some(seq) = self.seqs.get_mut(&s) {
            seq.remote_carried = true;
        }
        let mut h = Header::new(Kind::Put);
        h.offset = m.offset;
        h.flags |= flag::MSG | flag::REMOTE_EVENT;
        h.op1 = data56;
        h.cmd = u16::from(CqeSource::RmtDreq.code());
        p.count(counter::FMA_PUTS, 1);
        self.send(p, id, m.dest, h, &m.data, Landing::None, false);
        self.keep_spare(id, m.data);
        self.sync_complete(p, id, v);
    }

    /// A store into an FMA window.
    pub(crate) fn window_store(
        &mut self,
        p: &mut impl FmaPort,
        kind: WindowKind,
        id: u8,
        off: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        let Some(d) = self.desc(id) else {
            return Ok(());
        };
        if kind == WindowKind::Get {
            if data.len() != 8 {
                return Err(MmioError::BadWidth {
                    offset: off,
                    width: data.len(),
                });
            }
            self.flush(p, id);
            self.get_store(p, id, off, regs::value(data));
            return Ok(());
        }
        if !d.enabled() {
            self.flush(p, id);
            self.reject(p, id, Fault::NotEnabled);
            return Ok(());
        }
        let command = d.regs.command as u32;
        if command != 0 && command != (op::PUT_MSG & 0x1F) {
            self.flush(p, id);
            self.amo_nofetch(p, id, off, command, data);
            return Ok(());
        }
        let msg = command != 0;
        let (dest, roff) = match self.dest(p.ntt(), id, off) {
            Ok(t) => t,
            Err(f) => {
                self.flush(p, id);
                self.reject(p, id, f);
                return Ok(());
            }
        };
        if msg {
            self.gather_msg(p, id, dest, roff, data);
            return Ok(());
        }
        if kind == WindowKind::PutUc {
            self.flush(p, id);
            self.send_put(p, id, dest, roff, data, false);
            return Ok(());
        }
        let w = data.len();
        let fits = |wc: &Wc| {
            wc.dest == dest
                && wc.offset.checked_add(wc.len as u64) == Some(roff)
                && wc.len + w <= WC_LINE as usize
                && wc.offset / WC_LINE == (roff + w as u64 - 1) / WC_LINE
        };
        if let Some(Some(wc)) = self.descs.get_mut(usize::from(id)).map(|d| d.wc.as_mut())
            && fits(wc)
        {
            wc.buf[wc.len..wc.len + w].copy_from_slice(data);
            wc.len += w;
            if wc.len == WC_LINE as usize {
                self.flush(p, id);
            }
            return Ok(());
        }
        self.flush(p, id);
        let mut wc = Wc {
            len: w,
            dest,
            offset: roff,
            buf: [0; WC_LINE as usize],
        };
        wc.buf[..w].copy_from_slice(data);
        if let Some(d) = self.descs.get_mut(usize::from(id)) {
            d.wc = Some(wc);
        }
        Ok(())
    }

    /// PUT_MSG stores (either PUT window) gather the whole contiguous message, which goes
    /// out as one frame at the next flush, so the target can make its header visible last.
    fn gather_msg(&mut self, p: &mut impl FmaPort, id: u8, dest: Dest, roff: u64, data: &[u8]) {
        if let Some(Some(m)) = self.descs.get_mut(usize::from(id)).map(|d| d.msg.as_mut())
            && m.dest == dest
            && m.offset.checked_add(m.data.len() as u64) == Some(roff)
            && m.data.len() + data.len() <= MSG_MAX
        {
            m.data.extend_from_slice(data);
            return;
        }
        self.flush(p, id);
        if let Some(d) = self.descs.get_mut(usize::from(id)) {
            let mut buf = std::mem::take(&mut d.spare);
            buf.clear();
            buf.extend_from_slice(data);
            d.msg = Some(MsgBuf {
                dest,
                offset: roff,
                data: buf,
            });
        }
    }

    /// A non-fetching AMO through a PUT window (`command` = code & 0x1F): an 8-byte store
    /// triggers it, the operands are SCRATCH0 and SCRATCH1.
    fn amo_nofetch(&mut self, p: &mut impl FmaPort, id: u8, off: u64, command: u32, data: &[u8]) {
        let Ok(cmd) = AmoCmd::try_from(NO_FETCH_BIT | command) else {
            return self.reject(p, id, Fault::BadCommand);
        };
        if data.len() != 8 {
            return self.reject(p, id, Fault::BadLength);
        }
        let (dest, roff) = match self.dest(p.ntt(), id, off) {
            Ok(t) => t,
            Err(f) => return self.reject(p, id, f),
        };
        if roff & 7 != 0 {
            return self.reject(p, id, Fault::Misaligned);
        }
        let (op1, op2) = self
            .desc(id)
            .map_or((0, 0), |d| (d.regs.scratch0, d.regs.scratch1));
        let mut h = Header::new(Kind::AmoReq);
        h.cmd = cmd.code() as u16;
        h.offset = roff;
        h.op1 = op1;
        h.op2 = op2;
        p.count(counter::AMOS, 1);
        self.send(p, id, dest, h, &[], Landing::None, false);
    }

    /// A GET control word stored into the GET window.
    fn get_store(&mut self, p: &mut impl FmaPort, id: u8, off: u64, v: u64) {
        let Some(d) = self.desc(id) else {
            return;
        };
        if !d.enabled() {
            return self.reject(p, id, Fault::NotEnabled);
        }
        let (scratch0, scratch1) = (d.regs.scratch0, d.regs.scratch1);
        let gcw = GetControlWord::from_u64(v);
        let (dest, roff) = match self.dest(p.ntt(), id, off) {
            Ok(t) => t,
            Err(f) => return self.reject(p, id, f),
        };
        let local = self.local(id);
        if gcw.cmd == 0 {
            let len = gcw.length();
            // Gemini: GET needs 4-byte aligned local address, remote address and length.
            if !firmware_spec::gemini::limits::get_is_aligned(gcw.local_offset, roff, len) {
                return self.reject(p, id, Fault::Misaligned);
            }
            let extra = if gcw.gb != 0 { 4 } else { 0 };
            if let Err(f) = p
                .domains()
                .check(p.dma(), local, gcw.local_offset, len + extra, true)
            {
                return self.reject(p, id, f);
            }
            let mut h = Header::new(Kind::GetReq);
            h.offset = roff;
            h.len = len as u32;
            let landing = Landing::Mdd {
                acc: local,
                offset: gcw.local_offset,
                len: len as u32,
                flag: gcw.gb != 0,
            };
            p.count(counter::FMA_GETS, 1);
            self.send(p, id, dest, h, &[], landing, true);
            return;
        }
        let cmd = match AmoCmd::try_from(gcw.cmd as u32) {
            Ok(c) if c.is_fetching() => c,
            _ => return self.reject(p, id, Fault::BadCommand),
        };
        if roff & 7 != 0 || gcw.local_offset & 7 != 0 {
            return self.reject(p, id, Fault::Misaligned);
        }
        if let Err(f) = p.domains().check(p.dma(), local, gcw.local_offset, 8, true) {
            return self.reject(p, id, f);
        }
        let mut h = Header::new(Kind::AmoReq);
        h.cmd = cmd.code() as u16;
        h.offset = roff;
        h.op1 = scratch0;
        h.op2 = scratch1;
        let landing = Landing::Mdd {
            acc: local,
            offset: gcw.local_offset,
            len: 8,
            flag: gcw.gb != 0,
        };
        p.count(counter::AMOS, 1);
        self.send(p, id, dest, h, &[], landing, true);
    }

    /// Load from a descriptor page.
    pub(crate) fn reg_read(
        &mut self,
        p: &mut impl FmaPort,
        id: u8,
        off: u64,
        privileged: bool,
    ) -> u64 {
        self.flush(p, id);
        let Some(d) = self.desc(id) else {
            return 0;
        };
        match off {
            reg::STATUS => {
                let mut r = d.regs;
                r.wc = u64::from(d.puts_out);
                r.rc = u64::from(d.gets_out);
                r.ssid_inuse = u64::from(d.in_flight.min(MAX_SEQUENCES));
                r.status_word()
            }
            regs::FMA_ERR_RC => u64::from(d.err_rc),
            reg::PRVMASK if privileged => u64::from(d.prvmask),
            o if o < (QWORDS as u64) * 8 => image(&d.regs)[(o / 8) as usize],
            _ => 0,
        }
    }

    /// Store to a descriptor page.
    pub(crate) fn reg_write(
        &mut self,
        p: &mut impl FmaPort,
        id: u8,
        off: u64,
        data: &[u8],
        privileged: bool,
    ) -> Result<(), MmioError> {
        if off == reg::SYNC_COMPLETE
            && data.len() == 8
            && self
                .descs
                .get(usize::from(id))
                .is_some_and(|d| privileged || PrivMask(d.prvmask).contains(PrivMask::SYNCCMP))
        {
            self.sync_fused(p, id, regs::value(data));
            return Ok(());
        }
        self.flush(p, id);
        let Some(d) = self.descs.get_mut(usize::from(id)) else {
            return Ok(());
        };
        let q = (off / 8) as usize;
        let sub = off & 7;
        let m = PrivMask(d.prvmask);
        let may = |mask: PrivMask| privileged || m.contains(mask);
        let reg_off = off & !7;
        match reg_off {
            reg::BASE_OFFSET | reg::QW2 | reg::QW3 | reg::SCRATCH0 | reg::SCRATCH1 => {
                let mut img = image(&d.regs);
                let new = regs::merge(img[q], sub, data);
                let allowed = match reg_off {
                    reg::SCRATCH0 if may(PrivMask::SCRATCHREG0) => u64::MAX,
                    reg::SCRATCH1 if may(PrivMask::SCRATCHREG1) => u64::MAX,
                    reg::SCRATCH0 | reg::SCRATCH1 => 0,
                    _ if privileged => u64::MAX,
                    _ => user_bits(m, q),
                };
                img[q] = (img[q] & !allowed) | (new & allowed);
                d.regs = from_image(&img);
                return Ok(());
            }
            reg::STATUS => {
                d.regs.flags = 0;
                d.err_rc = 0;
                return Ok(());
            }
            reg::PRVMASK if privileged => {
                d.prvmask = regs::merge(u64::from(d.prvmask), sub, data) as u32;
                return Ok(());
            }
            regs::FMA_ERR_RC => {
                d.err_rc = 0;
                return Ok(());
            }
            reg::ALLOC_SYNCID | reg::SYNC_COMPLETE | reg::CQ_WRITE => {}
            _ => return Ok(()),
        }
        if data.len() != 8 {
            return Err(MmioError::BadWidth {
                offset: off,
                width: data.len(),
            });
        }
        let v = regs::value(data);
        let allowed = match reg_off {
            reg::ALLOC_SYNCID => may(PrivMask::ALLOCSYNCID),
            reg::SYNC_COMPLETE => may(PrivMask::SYNCCMP),
            _ => may(PrivMask::CQWRITE),
        };
        if !allowed {
            d.err_rc = ReturnCode::PermissionError.code();
            return Ok(());
        }
        match reg_off {
            reg::ALLOC_SYNCID => {
                if v == ALLOC_SEQID_DOORBELL {
                    d.regs.alloc_syncid = v;
                    if let Err(f) = self.open_seq(id, p.now()) {
                        self.reject(p, id, f);
                    }
                }
            }
            reg::SYNC_COMPLETE => self.sync_complete(p, id, v),
            _ => self.cq_write(p, id, v),
        }
        Ok(())
    }

    fn sync_complete(&mut self, p: &mut impl FmaPort, id: u8, v: u64) {
        let s = match self.open_seq(id, p.now()) {
            Ok(s) => s,
            Err(f) => return self.reject(p, id, f),
        };
        if let Some(d) = self.descs.get_mut(usize::from(id)) {
            d.open = None;
            d.regs.synccmp_data = v & firmware_spec::bits::mask(56);
            d.regs.synccmp_type = v >> 56;
        }
        let done = match self.seqs.get_mut(&s) {
            Some(seq) => {
                seq.closed = true;
                seq.sync = v >> 56;
                seq.data56 = v & firmware_spec::bits::mask(56);
                seq.last_progress = p.now();
                seq.outstanding == 0
            }
            None => false,
        };
        if done {
            self.seq_advance(p, s);
        }
    }

    fn cq_write(&mut self, p: &mut impl FmaPort, id: u8, v: u64) {
        let (dest, _) = match self.dest(p.ntt(), id, 0) {
            Ok(t) => t,
            Err(f) => return self.reject(p, id, f),
        };
        if let Some(d) = self.descs.get_mut(usize::from(id)) {
            d.regs.cq_write = v;
        }
        let mut h = Header::new(Kind::CqWrite);
        h.op1 = v & firmware_spec::bits::mask(firmware_spec::gemini::limits::CQ_WRITE_DATA_BITS);
        self.send(p, id, dest, h, &[], Landing::None, false);
    }

    /// An answer (or timeout) for a request of sequence `s`.
    pub(crate) fn seq_answered(
        &mut self,
        p: &mut impl FmaPort,
        s: u32,
        is_get: bool,
        fault: Option<Fault>,
        rem_overrun: bool,
    ) {
        let now = p.now();
        let Some(seq) = self.seqs.get_mut(&s) else {
            return;
        };
        seq.outstanding = seq.outstanding.saturating_sub(1);
        seq.last_progress = now;
        seq.rem_overrun |= rem_overrun;
        if let Some(f) = fault {
            seq.error.get_or_insert(f);
        }
        let done = seq.closed && seq.outstanding == 0;
        let fma = seq.fma;
        if let Some(d) = self.descs.get_mut(usize::from(fma)) {
            if is_get {
                d.gets_out = d.gets_out.saturating_sub(1);
            } else {
                d.puts_out = d.puts_out.saturating_sub(1);
            }
        }
        if done {
            self.seq_advance(p, s);
        }
    }

    /// All requests of the current phase are answered: next phase, or the local event.
    fn seq_advance(&mut self, p: &mut impl FmaPort, s: u32) {
        loop {
            let Some(seq) = self.seqs.get_mut(&s) else {
                return;
            };
            let sync = SyncType(seq.sync as u8);
            let ok = seq.error.is_none();
            match seq.phase {
                Phase::Data => {
                    seq.phase = Phase::Flag;
                    if ok
                        && sync.contains(SyncType::WITH_FLAG)
                        && let Some(dest) = seq.last
                    {
                        let fma = seq.fma;
                        let regs = self.desc(fma).map(|d| d.regs).unwrap_or_default();
                        let mut h = Header::new(Kind::Put);
                        h.offset = regs.scratch1;
                        self.seq_issue(p, s, dest, h, &regs.scratch0.to_le_bytes());
                        return;
                    }
                }
                Phase::Flag => {
                    seq.phase = Phase::Remote;
                    if ok && sync.contains(SyncType::REMOTE_EVENT) && !seq.remote_carried {
                        let fma = seq.fma;
                        let data56 = seq.data56;
                        let dest = match seq.last {
                            Some(d) => Ok(d),
                            None => self.dest(p.ntt(), fma, 0).map(|t| t.0),
                        };
                        match dest {
                            Ok(dest) => {
                                let mut h = Header::new(Kind::RemoteEvent);
                                h.op1 = data56;
                                h.cmd = u16::from(CqeSource::RmtDreq.code());
                                self.seq_issue(p, s, dest, h, &[]);
                                return;
                            }
                            Err(f) => {
                                if let Some(seq) = self.seqs.get_mut(&s) {
                                    seq.error = Some(f);
                                }
                            }
                        }
                    }
                }
                Phase::Remote => {
                    self.seq_finish(p, s);
                    return;
                }
            }
        }
    }

    fn seq_issue(&mut self, p: &mut impl FmaPort, s: u32, dest: Dest, h: Header, payload: &[u8]) {
        if let Some(seq) = self.seqs.get_mut(&s) {
            seq.outstanding += 1;
        }
        let req = Req {
            owner: Owner::Seq(s),
            landing: Landing::None,
            is_get: false,
        };
        if let Some(d) = self
            .seqs
            .get(&s)
            .and_then(|q| self.descs.get_mut(usize::from(q.fma)))
        {
            d.puts_out += 1;
        }
        p.issue(req, &dest, h, payload, TC_FMA);
    }

    fn seq_finish(&mut self, p: &mut impl FmaPort, s: u32) {
        let Some(seq) = self.seqs.remove(&s) else {
            return;
        };
        let Some(d) = self.descs.get_mut(usize::from(seq.fma)) else {
            return;
        };
        d.in_flight = d.in_flight.saturating_sub(1);
        let cqh = d.regs.cq_hndl;
        let sync = SyncType(seq.sync as u8);
        if seq.error.is_none() && !sync.contains(SyncType::LOCAL_EVENT) {
            return;
        }
        let status = seq.error.map_or(HwStatus::Ok, Fault::status);
        let source = if seq.had_get {
            CqeSource::SsidSrsp
        } else {
            CqeSource::SsidSreq
        };
        let mut cqe = Cqe::from_hw(source, status, seq.data56);
        cqe.rem_overrun = u64::from(seq.rem_overrun);
        p.post_cqe(cqh, cqe);
    }
}
