//! Event queues (`cxil_alloc_evtq` and the inline `cxi_eq_*` of `cxi_prov_hw.h`).
//!
//! The ring is a user buffer mapped by an MD (cassini.md §3.1): bytes 0..63 are the status
//! write-back, events (16, 32 or 64 B, never straddling a 64 B block) start at byte 64 and
//! wrap back to it. An event is valid when its `event_size` is non-zero **and** the return
//! code in its last byte is not `C_RC_NO_EVENT`; the device writes that last qword last, so
//! the library loads it with acquire ordering before reading the rest. NULL events are
//! padding and are skipped. Acknowledging zeroes every consumed byte and stores the read
//! pointer (64 B units) to the EQ's software-state page: one 64-bit MMIO store, no driver
//! call.

use std::sync::Arc;
use std::time::Duration;

use driver::clock::Instant;

use driver::cassini::uapi::{EqAdjustReservedFcCmd, EqAllocCmd, EqAttr, EqFreeCmd};
use driver::mem::UserMemory;
use driver::pci::Mmio;
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::le::EqFlags;
use firmware_spec::cassini::status::{EQ_FIRST_EVENT_OFFSET, EqStatus, EqSwState};

use super::devinfo::DevShared;
use super::error::{CxiError, Result};
use super::lni::{Lni, LniInner, WaitInner, WaitObj};
use super::md::{Md, MdInner};
use super::wait::poll_until;

/// Options of [`Lni::alloc_evtq`] (`struct cxi_eq_attr` without the buffer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EqOptions {
    /// `CXI_EQ_*`.
    pub flags: EqFlags,
    /// First status threshold, percent.
    pub status_thresh_base: u32,
    /// Threshold step, percent.
    pub status_thresh_delta: u32,
    /// Number of thresholds (0..4).
    pub status_thresh_count: u32,
    /// Event-combining delay in ns (0 = driver default).
    pub ec_delay: u32,
    /// Event slots reserved for flow control.
    pub reserved_slots: u32,
}

/// What keeps an EQ allocated: its PtlTEs and CQs hold this too, so the EQ is freed after
/// them. It is the last field of [`EventQueue`], so the mapping goes first.
pub(crate) struct EqShared {
    pub(crate) lni: Arc<LniInner>,
    pub(crate) eqn: u32,
    _md: Option<Arc<MdInner>>,
    _waits: [Option<Arc<WaitInner>>; 2],
}

impl Drop for EqShared {
    fn drop(&mut self) {
        if let Err(e) = self.lni.dev.client.call(&EqFreeCmd {
            eq: self.eqn,
            ..EqFreeCmd::default()
        }) {
            tracing::warn!(eq = self.eqn, error = %e, "EQ_FREE failed");
        }
    }
}

/// An event queue (`struct cxi_eq`).
pub struct EventQueue {
    buf: UserMemory,
    len: u64,
    /// Read offset of the next event.
    rd: u64,
    /// Read offset at the last acknowledgement (bytes up to `rd` are zeroed on ack).
    acked: u64,
    sw: Arc<dyn Mmio>,
    sw_state: EqSwState,
    event_wait: Option<WaitObj>,
    dev: Arc<DevShared>,
    pub(crate) shared: Arc<EqShared>,
}

impl std::fmt::Debug for EventQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventQueue")
            .field("eqn", &self.shared.eqn)
            .field("len", &self.len)
            .field("rd", &self.rd)
            .finish()
    }
}

impl Lni {
    /// `cxil_alloc_evtq(lni, md, attr, event_wait, status_wait)`: an EQ whose ring is `buf`
    /// (page aligned, a whole number of pages), mapped by `md` — or, with
    /// `CXI_EQ_PASSTHROUGH`, no MD. The buffer is zeroed first. Interrupts go to
    /// `event_wait` (events) and `status_wait` (status write-backs).
    pub fn alloc_evtq(
        &self,
        buf: &UserMemory,
        md: Option<&Md>,
        opts: &EqOptions,
        event_wait: Option<&WaitObj>,
        status_wait: Option<&WaitObj>,
    ) -> Result<EventQueue> {
        if md.is_none() && !opts.flags.contains(EqFlags::PASSTHROUGH) {
            return Err(CxiError::Invalid(
                "an EQ needs an MD unless it is PASSTHROUGH",
            ));
        }
        if buf.len() <= EQ_FIRST_EVENT_OFFSET as u64 {
            return Err(CxiError::Invalid("EQ buffer too small"));
        }
        buf.fill(0, buf.len(), 0)?;
        let dev = self.dev();
        let r = dev.client.call(&EqAllocCmd {
            lni: self.id(),
            queue_md: md.map_or(0, Md::id),
            event_wait: event_wait.map_or(0, WaitObj::id),
            status_wait: status_wait.map_or(0, WaitObj::id),
            attr: EqAttr {
                queue: buf.va(),
                queue_len: buf.len(),
                flags: opts.flags.bits(),
                status_thresh_base: opts.status_thresh_base,
                status_thresh_delta: opts.status_thresh_delta,
                status_thresh_count: opts.status_thresh_count,
                ec_delay: opts.ec_delay,
                cpu_affinity: 0,
                reserved_slots: opts.reserved_slots,
            },
            ..EqAllocCmd::default()
        })?;
        let shared = Arc::new(EqShared {
            lni: Arc::clone(&self.inner),
            eqn: r.eq,
            _md: md.map(|m| Arc::clone(&m.inner)),
            _waits: [
                event_wait.map(|w| Arc::clone(&w.inner)),
                status_wait.map(|w| Arc::clone(&w.inner)),
            ],
        });
        let sw = dev
            .client
            .mmap_token(&r.csr)?
            .mmio()
            .ok_or(CxiError::Mapping("EE software-state page"))?;
        Ok(EventQueue {
            buf: buf.clone(),
            len: buf.len(),
            rd: EQ_FIRST_EVENT_OFFSET as u64,
            acked: EQ_FIRST_EVENT_OFFSET as u64,
            sw,
            // The sequence bit of the last acknowledged drop. A store whose bit equals the
            // device's current one acknowledges drops (docs/cassini-programming.md, EQ
            // ring); the device starts at 0, so the word starts at 1 and read-pointer
            // stores never acknowledge drops by accident.
            sw_state: EqSwState {
                rd_ptr: (EQ_FIRST_EVENT_OFFSET / 64) as u32,
                event_drop_seq_no: true,
                ..EqSwState::default()
            },
            event_wait: event_wait.cloned(),
            dev: Arc::clone(dev),
            shared,
        })
    }
}

impl EventQueue {
    /// The EQ number (its handle).
    pub fn eqn(&self) -> u32 {
        self.shared.eqn
    }

    /// The ring buffer.
    pub fn buffer(&self) -> &UserMemory {
        &self.buf
    }

    /// Byte offset of the next event in the ring.
    pub fn read_offset(&self) -> u64 {
        self.rd
    }

    /// Size of the complete event at `off`, or `None` if the slot holds none yet.
    fn event_size_at(&self, off: u64) -> Result<Option<u64>> {
        // Bytes 8..16 hold `event_size` (bits 112..113) — and, for 16 B events, the return
        // code byte.
        let q1 = self.buf.load_u64_acquire(off + 8)?;
        let code = (q1 >> 48) & 3;
        if code == 0 {
            return Ok(None);
        }
        let size = 8u64 << code;
        let last = if size == 16 {
            q1
        } else {
            self.buf.load_u64_acquire(off + size - 8)?
        };
        if (last >> 56) & 0x3F == 0 {
            return Ok(None);
        }
        Ok(Some(size))
    }

    fn advance(&mut self, size: u64) {
        self.rd += size;
        if self.rd >= self.len {
            self.rd = EQ_FIRST_EVENT_OFFSET as u64;
        }
    }

    /// Whether a complete event is waiting (one acquire load; NULL events count).
    pub fn has_event(&self) -> Result<bool> {
        Ok(self.event_size_at(self.rd)?.is_some())
    }

    /// The complete event at the read offset (NULL padding events consumed on the way) and
    /// its size, or `None` if there is none yet.
    fn read_event(&mut self) -> Result<Option<(Event, u64)>> {
        loop {
            // Bytes 8..16 hold `event_size` (bits 112..113) and, for 16 B events, the
            // return code byte: that qword is written last for them, so it is loaded with
            // acquire ordering before anything else is read.
            let q1 = self.buf.load_u64_acquire(self.rd + 8)?;
            let code = (q1 >> 48) & 3;
            if code == 0 {
                return Ok(None);
            }
            let size = 8u64 << code;
            let mut b = [0u8; 64];
            if size == 16 {
                if (q1 >> 56) & 0x3F == 0 {
                    return Ok(None);
                }
                let q0 = self.buf.read_u64(self.rd)?;
                b[..8].copy_from_slice(&q0.to_le_bytes());
                b[8..16].copy_from_slice(&q1.to_le_bytes());
            } else {
                let last = self.buf.load_u64_acquire(self.rd + size - 8)?;
                if (last >> 56) & 0x3F == 0 {
                    return Ok(None);
                }
                let bytes = b
                    .get_mut(..size as usize)
                    .ok_or(CxiError::Invalid("event size"))?;
                self.buf.read(self.rd, bytes)?;
            }
            let ev = Event::decode(&b[..size as usize])?;
            if ev.event_type() == EventType::NullEvent {
                self.advance(size);
                continue;
            }
            return Ok(Some((ev, size)));
        }
    }

    /// `cxi_eq_peek_event`: the next event without consuming it (NULL padding events are
    /// consumed on the way), or `None` if there is none yet.
    pub fn peek(&mut self) -> Result<Option<Event>> {
        Ok(self.read_event()?.map(|(ev, _)| ev))
    }

    /// `cxi_eq_next_event`: consume the event [`EventQueue::peek`] returned.
    pub fn next_event(&mut self) -> Result<()> {
        if let Some(size) = self.event_size_at(self.rd)? {
            self.advance(size);
        }
        Ok(())
    }

    /// `cxi_eq_get_event`: the next event, consumed (acknowledge with
    /// [`EventQueue::ack`]).
    pub fn get_event(&mut self) -> Result<Option<Event>> {
        Ok(self.read_event()?.map(|(ev, size)| {
            self.advance(size);
            ev
        }))
    }

    /// Bytes consumed since the last [`EventQueue::ack`] (NULL padding included): what the
    /// device still counts as taken. A caller that acknowledges in batches (libfabric's
    /// `FI_CXI_EQ_ACK_BATCH_SIZE`) bounds this so that the ring never fills because of it.
    pub fn unacked_bytes(&self) -> u64 {
        if self.rd >= self.acked {
            self.rd - self.acked
        } else {
            (self.len - self.acked) + (self.rd - EQ_FIRST_EVENT_OFFSET as u64)
        }
    }

    /// `cxi_eq_ack_events`: zero every consumed byte and give the device the read pointer
    /// (one 64-bit store to the software-state page).
    pub fn ack(&mut self) -> Result<()> {
        if self.rd == self.acked {
            return Ok(());
        }
        if self.rd > self.acked {
            self.buf.fill(self.acked, self.rd - self.acked, 0)?;
        } else {
            self.buf.fill(self.acked, self.len - self.acked, 0)?;
            let first = EQ_FIRST_EVENT_OFFSET as u64;
            self.buf.fill(first, self.rd - first, 0)?;
        }
        self.acked = self.rd;
        self.sw_state.rd_ptr = (self.rd / 64) as u32;
        self.store_sw_state()
    }

    fn store_sw_state(&self) -> Result<()> {
        self.sw.write(0, &self.sw_state.to_u64().to_le_bytes())?;
        Ok(())
    }

    /// `cxi_eq_get_status`: the status block, re-read until its two timestamp copies agree
    /// (torn-read protocol).
    pub fn status(&self) -> Result<EqStatus> {
        let mut b = [0u8; 64];
        let mut st = EqStatus::default();
        for _ in 0..1000 {
            self.buf.read(0, &mut b)?;
            st = EqStatus::decode(&b)?;
            if st.is_consistent() {
                return Ok(st);
            }
            std::hint::spin_loop();
        }
        Ok(st)
    }

    /// `cxi_eq_get_drops`: whether events were dropped since the drops were last
    /// acknowledged.
    pub fn drops(&self) -> Result<bool> {
        Ok(self.status()?.unackd_dropped_event)
    }

    /// `cxi_eq_ack_drops`: acknowledge dropped events (clear the flag, copy the status drop
    /// sequence bit to the software state). Returns whether there were drops.
    pub fn ack_drops(&mut self) -> Result<bool> {
        let st = self.status()?;
        if !st.unackd_dropped_event {
            return Ok(false);
        }
        // `unackd_dropped_event` is bit 120: bit 0 of byte 15.
        let mut b = [0u8; 1];
        self.buf.read(15, &mut b)?;
        self.buf.write(15, &[b[0] & !1])?;
        self.sw_state.event_drop_seq_no = st.event_drop_seq_no;
        self.store_sw_state()?;
        Ok(true)
    }

    /// `cxi_eq_int_enable` / `cxi_eq_int_disable`: event interrupts on or off.
    pub fn set_event_interrupts(&mut self, on: bool) -> Result<()> {
        self.sw_state.event_int_disable = !on;
        self.store_sw_state()
    }

    /// `cxi_eq_sts_int_enable` / `cxi_eq_sts_int_disable`: status interrupts on or off.
    pub fn set_status_interrupts(&mut self, on: bool) -> Result<()> {
        self.sw_state.eq_sts_int_disable = !on;
        self.store_sw_state()
    }

    /// `cxil_evtq_adjust_reserved_fc`: change the flow-control reservation by `delta` slots;
    /// the new reservation.
    pub fn adjust_reserved_fc(&self, delta: i32) -> Result<i32> {
        let r = self.dev.client.call(&EqAdjustReservedFcCmd {
            eq_hndl: self.shared.eqn,
            value: delta,
            ..EqAdjustReservedFcCmd::default()
        })?;
        Ok(r.reserved_fc)
    }

    /// Poll for the next event (consumed), letting the device progress; `timeout: None`
    /// waits for ever.
    pub fn poll(&mut self, timeout: Option<Duration>) -> Result<Event> {
        let dev = Arc::clone(&self.dev);
        poll_until(dev.device(), timeout, || self.get_event())
    }

    /// Whether [`EventQueue::sleep`] may block now: the EQ has an event wait object and the
    /// device progresses without the caller. Touches nothing (a caller asks before it
    /// prepares a sleep, so that a device that needs the caller sees no extra access).
    pub fn can_sleep(&self) -> bool {
        self.event_wait.is_some() && self.dev.device().before_sleep()
    }

    /// Block, while no event is waiting, until the EQ's interrupt fires or `limit` passes
    /// (the event-interrupt discipline of libfabric's `fi_cq_sread`: interrupts enabled
    /// only for the sleep, so a polling process pays nothing for them). True if the thread
    /// slept. It does not sleep without an event wait object, when an event already waits,
    /// or when the device needs the caller to make progress (see
    /// [`Device::before_sleep`](super::Device::before_sleep)); the caller then polls again.
    /// Consumes nothing.
    pub fn sleep(&mut self, limit: Duration) -> Result<bool> {
        let Some(w) = self.event_wait.clone() else {
            return Ok(false);
        };
        if !self.dev.device().before_sleep() || self.has_event()? {
            return Ok(false);
        }
        w.clear();
        self.set_event_interrupts(true)?;
        // An event written before the interrupt was on raised none: look once more.
        let slept = !self.has_event()?;
        if slept {
            w.wait(Some(limit));
        }
        self.set_event_interrupts(false)?;
        Ok(slept)
    }

    /// Wait for the next event (consumed). With an event wait object the thread blocks on
    /// its interrupts once the device has nothing left to run; without one this is
    /// [`EventQueue::poll`].
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Event> {
        let Some(w) = self.event_wait.clone() else {
            return self.poll(timeout);
        };
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            if let Some(ev) = self.get_event()? {
                return Ok(ev);
            }
            if self.dev.device().progress() {
                continue;
            }
            let slice = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(CxiError::Timeout);
                    }
                    left.min(Duration::from_millis(1))
                }
                None => Duration::from_millis(1),
            };
            w.wait(Some(slice));
        }
    }
}
