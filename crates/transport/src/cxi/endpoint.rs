//! One rank's endpoint on its Cassini, built only with `userlib::cxi` calls as the CXI
//! provider builds it (cassini.md §§4, 7): an LNI, a domain (VNI, PID), a communication
//! profile, one event queue for everything, a transmit and a target command queue, and the
//! PtlTEs of the PID granule: the receive PtlTE at index 0 and the rendezvous-source PtlTE at
//! `rdzv_get_idx` (libfabric's index layout, cassini.md §7).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use driver::clock::Instant;

use driver::cassini::CxiDevice;
use driver::mem::UserMemory;
use firmware_spec::cassini::cmd::{CState, FullDma, IdcMsg, Payload, TgtOp};
use firmware_spec::cassini::dfa::{PidBits, build_dfa, match_id};
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::le::{
    LeFlags, MapFlags, PtAllocOpts, PtlList, PtlteState, TcType, TrafficClass,
};
use firmware_spec::cassini::rc::ReturnCode;
use firmware_spec::cassini::tgt::TargetCmd;
use userlib::cxi::dfa::C_PID_ANY;
use userlib::cxi::{
    CXI_DEFAULT_SVC_ID, CmdQueue, Cp, CqOptions, CxiError, Device, Domain, EqOptions, EventQueue,
    Lni, Md, Pte, PteMap, WaitObj, open_device,
};

use crate::error::{Error, Result};

/// The VNI of the default service (`default_vnis` {1, 10}, cassini.md §7).
pub const VNI: u32 = 10;
/// PtlTE index of the receive queue in the PID granule (libfabric layout, cassini.md §7).
pub const RX_INDEX: u32 = 0;
/// PtlTE index of the RMA windows (libfabric's standard MR PtlTE, cassini.md §7).
pub const RMA_INDEX: u32 = 117;
/// Event queue size: 64 pages of 64 B slots, and [`EQ_ACK_SLACK`] for what batched
/// acknowledgements leave unacknowledged (`events`: the device sees at least 64 pages free
/// when the transport has handled every event).
const EQ_BYTES: u64 = 64 * 4096 + EQ_ACK_SLACK;
/// Bytes of the EQ ring that cover batched acknowledgements (at least
/// `events::ACK_MAX_UNACKED`, a whole page).
pub(super) const EQ_ACK_SLACK: u64 = 4096;
/// Staging buffers up to this size are powers of two (few sizes, good reuse from the pool);
/// larger ones are rounded to a page only.
pub const POW2_STAGING_MAX: u64 = 64 << 10;
/// Released staging buffers up to this size are kept for reuse (a 4 MiB message plus a
/// header still fits).
const POOLED_STAGING_MAX: u64 = (4 << 20) + PAGE;
const PAGE: u64 = 4096;
/// Transmit-queue slots written without a doorbell ([`Endpoint::dma_more`]) after which
/// the queue is rung anyway.
pub const TX_MORE_SLOTS: u64 = 64;

/// Released staging buffers of one size kept registered: [`POOLED_BYTES_PER_SIZE`] worth,
/// and at least [`POOLED_MIN_PER_SIZE`]. A window of small messages (a receive or an eager
/// send each holds a buffer) then reuses registered buffers instead of mapping and
/// unmapping one per message (two driver calls), as libfabric's registration cache and
/// request-buffer pools do; a window of 16 large messages (osu_bw's) finds all of its
/// buffers in the pool instead of allocating, zeroing and registering half of them.
pub fn pooled_per_size(size: u64) -> usize {
    (POOLED_BYTES_PER_SIZE / size.max(1)).max(POOLED_MIN_PER_SIZE as u64) as usize
}

/// Bytes of released staging buffers kept per size.
const POOLED_BYTES_PER_SIZE: u64 = 1 << 20;
/// Released staging buffers kept per size at least.
pub const POOLED_MIN_PER_SIZE: usize = 16;
/// Bytes of released staging buffers kept in all (16 buffers of a 4 MiB message each way).
pub const POOLED_BYTES_MAX: u64 = 2 * POOLED_MIN_PER_SIZE as u64 * POOLED_STAGING_MAX;

/// The size of the staging buffer that holds `len` bytes ([`Endpoint::buf`]).
pub fn staging_size(len: usize) -> u64 {
    let len = (len.max(1) as u64).max(PAGE);
    if len <= POW2_STAGING_MAX {
        len.next_power_of_two()
    } else {
        len.div_ceil(PAGE) * PAGE
    }
}

/// Slots of the EQ that receive (target) events leave free (`reserved_fc`): a flood of
/// unexpected messages puts the receive PtlTE into flow control (FC_EQ_FULL) while the
/// acknowledgements of this rank's own sends and control messages still find room.
const EQ_RESERVED: u32 = 1024;

/// A userlib error as a transport error with its message.
pub fn cxi_err(what: &str) -> impl Fn(CxiError) -> Error + '_ {
    move |e| Error::Transport(format!("cxi: {what}: {e}"))
}

/// Times a registration the driver refused for lack of memory (`-ENOMEM`: its pages could
/// not be pinned) is tried again, free pooled buffers unmapped first, as libfabric's
/// registration cache flushes and retries.
const REG_RETRIES: u32 = 8;

/// Map `mem` pinned, read/write. On `-ENOMEM`, `evict` (free what can be freed) and try
/// again, at most [`REG_RETRIES`] times.
fn map_pinned(lni: &Lni, mem: &UserMemory, what: &str, mut evict: impl FnMut()) -> Result<Md> {
    const ENOMEM: i32 = 12;
    let mut tries = 0;
    loop {
        match lni.map_buffer(mem, MapFlags::READ | MapFlags::WRITE | MapFlags::PIN) {
            Ok(md) => return Ok(md),
            Err(e) if e.errno() == -ENOMEM && tries < REG_RETRIES => {
                tries += 1;
                tracing::debug!(what, tries, "cxi: registration refused for lack of memory");
                evict();
            }
            Err(e) => return Err(cxi_err(what)(e)),
        }
    }
}

/// A registered buffer: a staging buffer (memory of the node the transport allocated, and
/// the MD that maps it), or part of the application's own memory, mapped by a registration of
/// the registration cache (`user`).
pub struct Buf {
    /// The memory.
    pub mem: UserMemory,
    /// Its mapping (it may start before `mem`, on a page boundary).
    pub md: Md,
    /// The application's memory: never pooled, never written by the transport but for the
    /// bytes of a message it receives.
    pub user: bool,
}

impl Buf {
    /// IOVA of byte `off`.
    pub fn iova(&self, off: u64) -> u64 {
        self.md.iova() + (self.mem.va() - self.md.va()) + off
    }

    /// Copy out `len` bytes at `off`.
    pub fn read(&self, off: u64, len: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        if len > 0 {
            self.mem
                .read(off, &mut v)
                .map_err(|e| Error::Transport(format!("cxi: reading a staging buffer: {e}")))?;
        }
        Ok(v)
    }

    /// Copy `data` in at `off`.
    pub fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.mem
            .write(off, data)
            .map_err(|e| Error::Transport(format!("cxi: writing a staging buffer: {e}")))
    }
}

/// A peer's address as published through PMI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addr {
    /// NID.
    pub nid: u32,
    /// PID of its domain.
    pub pid: u32,
}

impl Addr {
    /// 8 bytes for PMI.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.nid.to_le_bytes().to_vec();
        v.extend_from_slice(&self.pid.to_le_bytes());
        v
    }

    /// From [`Addr::encode`].
    pub fn decode(b: &[u8]) -> Option<Addr> {
        let nid = u32::from_le_bytes(b.get(0..4)?.try_into().ok()?);
        let pid = u32::from_le_bytes(b.get(4..8)?.try_into().ok()?);
        Some(Addr { nid, pid })
    }
}

/// A PtlTE mapped in the domain.
pub struct Portal {
    /// The mapping (dropped first).
    pub _map: PteMap,
    /// The PtlTE.
    pub pte: Pte,
}

/// The NIC objects of one rank. Field order is drop order: queues and PtlTEs before the EQ,
/// the EQ before the LNI.
pub struct Endpoint {
    /// Staging buffers kept for reuse, by size.
    pool: BTreeMap<u64, Vec<Buf>>,
    /// Rendezvous-source LEs appended, by LAC.
    rdzv_lacs: BTreeSet<u8>,
    /// The receive PtlTE (index 0).
    pub rx: Portal,
    /// The rendezvous-source PtlTE (`rdzv_get_idx`).
    pub rdzv: Portal,
    /// The RMA PtlTE: libfabric's standard MR PtlTE, matching on the window key.
    pub rma: Portal,
    /// Transmit queue.
    pub txq: CmdQueue,
    /// Target queue.
    pub tgq: CmdQueue,
    /// The one event queue.
    pub eq: EventQueue,
    /// Where the EQ's interrupts land while the rank sleeps ([`Endpoint::sleep`]).
    /// (None when the device needs the rank's polls to progress, the deterministic engine:
    /// its event sequence stays what it was without one.)
    _wait: Option<WaitObj>,
    _eq_md: Md,
    _eq_buf: UserMemory,
    _cp: Cp,
    /// The domain.
    pub domain: Domain,
    /// The LNI.
    pub lni: Lni,
    /// The device.
    pub dev: Device,
    /// This NIC's NID.
    pub nid: u32,
    /// PID bits of the device.
    pub pid_bits: PidBits,
    /// PtlTE index rendezvous Gets are sent to.
    pub rdzv_get_idx: u32,
    /// Last C_STATE emitted (libfabric emits it only when it changes).
    cstate: Option<CState>,
    /// Timeout of blocking steps.
    pub timeout: Duration,
}

impl Endpoint {
    /// Open device `index` and build the endpoint; the receive PtlTE starts in `rx_state`,
    /// and every command goes out in traffic class `tc`.
    pub fn new(
        devices: &[Arc<CxiDevice>],
        index: u32,
        rx_state: PtlteState,
        tc: TrafficClass,
        timeout: Duration,
    ) -> Result<Endpoint> {
        let dev = open_device(devices, index).map_err(cxi_err("opening the device"))?;
        let nid = dev.info().nid;
        let pid_bits = dev.info().pid_bits().map_err(cxi_err("pid bits"))?;
        let rdzv_get_idx = dev.info().rdzv_get_idx;
        let lni = dev
            .alloc_lni(CXI_DEFAULT_SVC_ID)
            .map_err(cxi_err("allocating an LNI"))?;
        let domain = lni
            .alloc_domain(VNI, C_PID_ANY)
            .map_err(cxi_err("allocating a domain"))?;
        let cp = lni
            .alloc_cp(VNI, tc, TcType::Default)
            .map_err(cxi_err("allocating a communication profile"))?;
        let eq_buf = dev.alloc_buffer(EQ_BYTES).map_err(cxi_err("EQ buffer"))?;
        let eq_md = map_pinned(&lni, &eq_buf, "mapping the EQ buffer", || {})?;
        let wait = if dev.can_sleep() {
            Some(
                lni.alloc_wait_obj()
                    .map_err(cxi_err("allocating a wait object"))?,
            )
        } else {
            None
        };
        let mut eq = lni
            .alloc_evtq(
                &eq_buf,
                Some(&eq_md),
                &EqOptions {
                    reserved_slots: EQ_RESERVED,
                    ..EqOptions::default()
                },
                wait.as_ref(),
                None,
            )
            .map_err(cxi_err("allocating the EQ"))?;
        if wait.is_some() {
            // Interrupts only while the rank sleeps (`Endpoint::sleep`), as libfabric's CXI
            // provider enables them only in a blocking read.
            eq.set_event_interrupts(false)
                .map_err(cxi_err("disabling EQ interrupts"))?;
        }
        let txq = lni
            .alloc_cmdq(Some(&eq), &CqOptions::transmit(1024, &cp))
            .map_err(cxi_err("allocating the transmit queue"))?;
        let tgq = lni
            .alloc_cmdq(Some(&eq), &CqOptions::target(512))
            .map_err(cxi_err("allocating the target queue"))?;
        let portal = |idx: u32, opts: PtAllocOpts| -> Result<Portal> {
            let pte = lni
                .alloc_pte(Some(&eq), opts | PtAllocOpts::USE_LONG_EVENT)
                .map_err(cxi_err("allocating a PtlTE"))?;
            let map = pte
                .map(&domain, idx, false)
                .map_err(cxi_err("mapping a PtlTE"))?;
            Ok(Portal { _map: map, pte })
        };
        let rx = portal(
            RX_INDEX,
            PtAllocOpts::IS_MATCHING | PtAllocOpts::EN_FLOWCTRL,
        )?;
        let rdzv = portal(rdzv_get_idx, PtAllocOpts::IS_MATCHING)?;
        let rma = portal(RMA_INDEX, PtAllocOpts::IS_MATCHING)?;
        let mut ep = Endpoint {
            pool: BTreeMap::new(),
            rdzv_lacs: BTreeSet::new(),
            rx,
            rdzv,
            rma,
            txq,
            tgq,
            eq,
            _wait: wait,
            _eq_md: eq_md,
            _eq_buf: eq_buf,
            _cp: cp,
            domain,
            lni,
            dev,
            nid,
            pid_bits,
            rdzv_get_idx,
            cstate: None,
            timeout,
        };
        ep.set_state(&ep.rx.pte.clone(), rx_state)?;
        ep.set_state(&ep.rdzv.pte.clone(), PtlteState::Enabled)?;
        ep.set_state(&ep.rma.pte.clone(), PtlteState::Enabled)?;
        Ok(ep)
    }

    /// Nothing to do: put held-back sends on the wire, give the NIC the EQ's consumed
    /// slots, then block until the EQ's interrupt fires or `limit` passes (see
    /// [`EventQueue::sleep`]). True if the thread slept.
    pub fn sleep(&mut self, limit: Duration) -> Result<bool> {
        if !self.eq.can_sleep() {
            // The device needs this thread's polls (the deterministic engine): touch
            // nothing, so that the emulation does not depend on when the wait gave up
            // spinning.
            return Ok(false);
        }
        self.flush_tx()?;
        self.eq.ack().map_err(cxi_err("acknowledging events"))?;
        self.eq
            .sleep(limit)
            .map_err(cxi_err("waiting for an event"))
    }

    /// This endpoint's address.
    pub fn addr(&self) -> Addr {
        Addr {
            nid: self.nid,
            pid: self.domain.pid(),
        }
    }

    /// The match id of `addr` (`CXI_MATCH_ID`).
    pub fn match_id_of(&self, addr: Addr) -> u32 {
        match_id(self.pid_bits, addr.pid, addr.nid)
    }

    /// This endpoint's match id.
    pub fn my_match_id(&self) -> u32 {
        self.match_id_of(self.addr())
    }

    /// (DFA, index_ext) of PtlTE `index` of `addr`.
    pub fn dfa(&self, addr: Addr, index: u32) -> (u32, u8) {
        build_dfa(addr.nid, addr.pid, self.pid_bits, index)
    }

    /// SETSTATE on `pte` and wait for its STATE_CHANGE (other events before it are an error
    /// here: this runs at init, before any traffic).
    pub fn set_state(&mut self, pte: &Pte, state: PtlteState) -> Result<()> {
        let cmd = pte.set_state_cmd(state, 0);
        self.tgq.emit_set_state(&cmd).map_err(cxi_err("SETSTATE"))?;
        self.tgq
            .ring()
            .map_err(cxi_err("ringing the target queue"))?;
        let ev = self.wait_init_event(EventType::StateChange)?;
        if ev.return_code() != ReturnCode::Ok {
            return Err(Error::Transport(format!(
                "cxi: PtlTE {} did not reach {state:?}: {:?}",
                pte.number(),
                ev.return_code()
            )));
        }
        Ok(())
    }

    /// At init only: the next event, which must be of type `ty`.
    pub fn wait_init_event(&mut self, ty: EventType) -> Result<Event> {
        let ev = self
            .eq
            .poll(Some(self.timeout))
            .map_err(cxi_err("waiting for an event at init"))?;
        self.eq.ack().map_err(cxi_err("acknowledging events"))?;
        if ev.event_type() != ty {
            return Err(Error::Transport(format!(
                "cxi: expected a {ty:?} event at init, got {ev:?}"
            )));
        }
        Ok(ev)
    }

    /// A staging buffer of at least `len` bytes: a power of two (at least a page) up to
    /// [`POW2_STAGING_MAX`], a whole number of pages above it. Rounding large buffers to a
    /// power of two would double a message just over one (a 4 MiB payload with 8 bytes of
    /// remote CQ data in front took 8 MiB on each side, and a window of 64 of them filled a
    /// 512 MiB node).
    pub fn buf(&mut self, len: usize) -> Result<Buf> {
        let size = staging_size(len);
        if let Some(b) = self.pool.get_mut(&size).and_then(Vec::pop) {
            return Ok(b);
        }
        let mem = self
            .dev
            .alloc_buffer(size)
            .map_err(cxi_err("allocating a staging buffer"))?;
        let pool = &mut self.pool;
        let md = map_pinned(&self.lni, &mem, "registering a staging buffer", || {
            pool.clear()
        })?;
        Ok(Buf {
            mem,
            md,
            user: false,
        })
    }

    /// A registered buffer of `len` bytes rounded up to whole pages, zeroed, not from the pool
    /// (window memory).
    pub fn buf_exact(&mut self, len: usize) -> Result<Buf> {
        let mem = self
            .dev
            .alloc_buffer((len.max(1) as u64).next_multiple_of(4096))
            .map_err(cxi_err("allocating window memory"))?;
        let pool = &mut self.pool;
        let md = map_pinned(&self.lni, &mem, "registering window memory", || {
            pool.clear()
        })?;
        Ok(Buf {
            mem,
            md,
            user: false,
        })
    }

    /// Map part of the application's memory (a registration of the registration cache),
    /// pinned, read/write; the staging pool is emptied first if the driver is short of
    /// memory.
    pub fn map_user(&mut self, mem: &UserMemory) -> Result<Md> {
        let pool = &mut self.pool;
        map_pinned(&self.lni, mem, "registering application memory", || {
            pool.clear()
        })
    }

    /// Give a staging buffer back (kept for reuse: [`pooled_per_size`] of its size, and
    /// [`POOLED_BYTES_MAX`] in all).
    pub fn release(&mut self, b: Buf) {
        let size = b.mem.len();
        if b.user || size > POOLED_STAGING_MAX {
            return;
        }
        let pooled: u64 = self.pool.iter().map(|(s, v)| s * v.len() as u64).sum();
        let v = self.pool.entry(size).or_default();
        if v.len() < pooled_per_size(size) && pooled + size <= POOLED_BYTES_MAX {
            v.push(b);
        }
    }

    /// Emit with `f`, ringing and letting the device run while the queue is full.
    pub fn emit(
        &mut self,
        target: bool,
        mut f: impl FnMut(&mut CmdQueue) -> std::result::Result<(), CxiError>,
    ) -> Result<()> {
        let start = Instant::now();
        loop {
            let q = if target { &mut self.tgq } else { &mut self.txq };
            match f(q) {
                Ok(()) => return Ok(()),
                Err(CxiError::Again) => {
                    q.ring().map_err(cxi_err("ringing a queue"))?;
                    self.dev.progress();
                    if start.elapsed() > self.timeout {
                        return Err(Error::Timeout("cxi: a command queue stayed full".into()));
                    }
                }
                Err(e) => return Err(cxi_err("emitting a command")(e)),
            }
        }
    }

    /// Ring the transmit queue.
    pub fn ring_tx(&mut self) -> Result<()> {
        self.txq
            .ring()
            .map_err(cxi_err("ringing the transmit queue"))
    }

    /// Ring the target queue.
    pub fn ring_tg(&mut self) -> Result<()> {
        self.tgq.ring().map_err(cxi_err("ringing the target queue"))
    }

    /// An IDC small message (payload ≤ 192 B) to PtlTE `index` of `to` (the receive PtlTE,
    /// or the control LE on [`RMA_INDEX`]). With `more` its doorbell waits for
    /// [`Endpoint::flush_tx`] ([`Endpoint::dma_more`]).
    #[allow(clippy::too_many_arguments)]
    pub fn idc_msg(
        &mut self,
        to: Addr,
        index: u32,
        match_bits: u64,
        header_data: u64,
        user_ptr: u64,
        data: &[u8],
        more: bool,
    ) -> Result<()> {
        let (dfa, index_ext) = self.dfa(to, index);
        let cstate = CState {
            initiator: self.my_match_id(),
            index_ext,
            eq: self.eq.eqn() as u16,
            user_ptr,
            ..CState::default()
        };
        let payload = Payload::new(data).map_err(|e| Error::Transport(format!("cxi: {e}")))?;
        let msg = IdcMsg {
            dfa,
            match_bits,
            header_data,
            user_ptr,
            payload,
        };
        // The state carries index_ext and user_ptr, so it changes with almost every message;
        // the library only writes it when it differs from the last one.
        self.cstate = Some(cstate);
        self.emit(false, |q| q.emit_idc_msg(&cstate, &msg))?;
        if more {
            self.ring_tx_if_many()
        } else {
            self.ring_tx()
        }
    }

    /// A full DMA command (PUT, GET, RENDEZVOUS_PUT).
    pub fn dma(&mut self, cmd: FullDma) -> Result<()> {
        self.dma_more(cmd)?;
        self.ring_tx()
    }

    /// A full DMA command written to the transmit queue without its doorbell, which
    /// [`Endpoint::flush_tx`] rings later (libfabric's `FI_MORE`): several sends issued back
    /// to back share one doorbell. The queue is rung anyway once [`TX_MORE_SLOTS`] slots
    /// wait, so the NIC is not kept idle behind a long run.
    pub fn dma_more(&mut self, cmd: FullDma) -> Result<()> {
        self.emit(false, |q| q.emit_dma(&cmd))?;
        self.ring_tx_if_many()
    }

    /// Ring the transmit queue if commands were written since its last doorbell.
    pub fn flush_tx(&mut self) -> Result<()> {
        if self.tx_unrung() {
            self.ring_tx()?;
        }
        Ok(())
    }

    /// Whether commands wait in the transmit queue for a doorbell.
    pub fn tx_unrung(&self) -> bool {
        self.txq.ring_state().pending_slots() > 0
    }

    fn ring_tx_if_many(&mut self) -> Result<()> {
        if self.txq.ring_state().pending_slots() >= TX_MORE_SLOTS {
            self.ring_tx()?;
        }
        Ok(())
    }

    /// Append an LE to `list` of `pte`.
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        pte: &Pte,
        list: PtlList,
        buf: Option<(&Buf, u64)>,
        flags: LeFlags,
        match_id: u32,
        match_bits: u64,
        ignore_bits: u64,
        buffer_id: u16,
        min_free: u32,
    ) -> Result<()> {
        let (start, length, lac) = match buf {
            Some((b, len)) => (b.iova(0), len, b.md.lac()),
            None => (0, (1u64 << 56) - 1, 0),
        };
        let mut cmd = TargetCmd {
            opcode: TgtOp::Append,
            ptl_list: list,
            ptlte_index: pte.index(),
            buffer_id,
            lac,
            start,
            length,
            min_free,
            match_id,
            match_bits,
            ignore_bits,
            ..TargetCmd::default()
        };
        cmd.set_opts(flags);
        self.emit(true, |q| q.emit_target(&cmd))?;
        self.ring_tg()
    }

    /// A SEARCH / SEARCH_AND_DELETE / UNLINK target command.
    #[allow(clippy::too_many_arguments)]
    pub fn target_cmd(
        &mut self,
        op: TgtOp,
        list: PtlList,
        flags: LeFlags,
        match_id: u32,
        match_bits: u64,
        ignore_bits: u64,
        buffer_id: u16,
    ) -> Result<()> {
        let mut cmd = TargetCmd {
            opcode: op,
            ptl_list: list,
            ptlte_index: self.rx.pte.index(),
            buffer_id,
            length: (1u64 << 56) - 1,
            match_id,
            match_bits,
            ignore_bits,
            ..TargetCmd::default()
        };
        cmd.set_opts(flags);
        self.emit(true, |q| q.emit_target(&cmd))?;
        self.ring_tg()
    }

    /// A target command naming only a list and a buffer id (UNLINK) on `pte`.
    pub fn target_cmd_on(
        &mut self,
        pte: &Pte,
        op: TgtOp,
        list: PtlList,
        buffer_id: u16,
    ) -> Result<()> {
        let cmd = TargetCmd {
            opcode: op,
            ptl_list: list,
            ptlte_index: pte.index(),
            buffer_id,
            ..TargetCmd::default()
        };
        self.emit(true, |q| q.emit_target(&cmd))?;
        self.ring_tg()
    }

    /// Make sure the rendezvous-source PtlTE exposes LAC `lac`: one persistent LE over the
    /// whole IOVA space of the LAC, Gets only, any initiator, match bits naming the LAC
    /// (`cxip_rdzv_pte.c` as described in cassini.md §6). Its LINK event is consumed by the
    /// caller's event loop.
    pub fn expose_lac(&mut self, lac: u8) -> Result<bool> {
        if !self.rdzv_lacs.insert(lac) {
            return Ok(false);
        }
        let pte = self.rdzv.pte.clone();
        let mut cmd = TargetCmd {
            opcode: TgtOp::Append,
            ptl_list: PtlList::Priority,
            ptlte_index: pte.index(),
            buffer_id: u16::from(lac),
            lac,
            start: 0,
            length: (1u64 << 56) - 1,
            match_id: u32::MAX,
            match_bits: u64::from(lac) << super::proto::LAC_SHIFT,
            ignore_bits: !super::proto::LAC_MASK,
            ..TargetCmd::default()
        };
        cmd.set_opts(
            LeFlags::OP_GET
                | LeFlags::EVENT_LINK_DISABLE
                | LeFlags::EVENT_UNLINK_DISABLE
                | LeFlags::UNRESTRICTED_BODY_RO
                | LeFlags::UNRESTRICTED_END_RO,
        );
        self.emit(true, |q| q.emit_target(&cmd))?;
        self.ring_tg()?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_small_buffers_stays_registered_and_large_ones_are_few() {
        // A window of 256 receives or eager sends of up to a page reuses its buffers.
        assert_eq!(pooled_per_size(staging_size(8)), 256);
        assert_eq!(pooled_per_size(staging_size(4096)), 256);
        // At most 1 MiB per size, but never fewer than 16 buffers (osu_bw's window).
        assert_eq!(pooled_per_size(staging_size(32 << 10)), 32);
        assert_eq!(pooled_per_size(staging_size(64 << 10)), 16);
        assert_eq!(pooled_per_size(staging_size(4 << 20)), 16);
    }

    #[test]
    fn small_staging_buffers_are_powers_of_two() {
        assert_eq!(staging_size(0), PAGE);
        assert_eq!(staging_size(1), PAGE);
        assert_eq!(staging_size(4097), 8192);
        assert_eq!(staging_size(40 << 10), 64 << 10);
    }

    #[test]
    fn a_large_message_with_a_header_takes_one_page_more_not_twice_its_size() {
        let four_mib = 4usize << 20;
        assert_eq!(staging_size(four_mib), 4 << 20);
        assert_eq!(staging_size(four_mib + 8), (4 << 20) + PAGE);
        assert!(staging_size(four_mib + 8) <= POOLED_STAGING_MAX);
        assert_eq!(staging_size((64 << 10) + 1), (64 << 10) + PAGE);
    }
}
