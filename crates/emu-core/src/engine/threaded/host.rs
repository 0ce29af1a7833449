//! Host accesses (architecture seam 4): an MMIO access runs the device handler in the
//! caller's thread, like a VMM handling an MMIO exit, and the packets it sends are delivered
//! inline in the same thread, up to the inline budget; behind deferred work they queue in
//! order instead.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::engine::{DeviceIo, DeviceModel, EngineError, check_access, check_burst};
use crate::mmio::MmioError;
use crate::time::SimTime;

use super::counters::{InlineLoop, bump};
use super::scratch::Scratch;
use super::shared::Shared;
use super::slot::Slot;

impl Shared {
    pub(super) fn mmio_read_slot(
        &self,
        slot: &Arc<Slot>,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), EngineError> {
        self.check_up()?;
        check_access(&slot.bars, bar, offset, data.len())?;
        bump(&self.c.mmio_reads);
        self.host_access(slot, |m, io| m.mmio_read(io, bar, offset, data))
    }

    pub(super) fn mmio_write_slot(
        &self,
        slot: &Arc<Slot>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        self.check_up()?;
        check_access(&slot.bars, bar, offset, data.len())?;
        bump(&self.c.mmio_writes);
        self.host_access(slot, |m, io| m.mmio_write(io, bar, offset, data))
    }

    /// A write-combined burst: one trap, one handler call ([`DeviceModel::mmio_write_burst`]).
    pub(super) fn mmio_burst_slot(
        &self,
        slot: &Arc<Slot>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), EngineError> {
        self.check_up()?;
        check_burst(&slot.bars, bar, offset, data.len())?;
        bump(&self.c.mmio_writes);
        self.host_access(slot, |m, io| m.mmio_write_burst(io, bar, offset, data))
    }

    /// Run a host access's handler now, then apply its actions and run what follows inline
    /// (up to the inline budget).
    pub(super) fn host_access(
        &self,
        slot: &Arc<Slot>,
        f: impl FnOnce(&mut dyn DeviceModel, &mut DeviceIo<'_>) -> Result<(), MmioError>,
    ) -> Result<(), EngineError> {
        let mut sc = Scratch::take();
        let (r, now) = self.call_lazy(slot, &mut sc.actions, f);
        if let Some(now) = now
            && !sc.actions.is_empty()
        {
            self.apply(slot, now, &mut sc.actions, &mut sc.q);
            if !sc.q.is_empty() {
                self.run_or_defer(&mut sc, now);
            }
        }
        sc.give();
        Ok(r?)
    }

    /// Run the deliveries in `sc.q` (due at `now`) inline in this thread, up to the inline
    /// budget; behind deferred deliveries they queue instead, in order.
    pub(super) fn run_or_defer(&self, sc: &mut Scratch, now: SimTime) {
        if self.backlog.load(Ordering::Acquire) > 0 {
            // Deferred deliveries are waiting: these go behind them.
            self.defer(&mut sc.q);
        } else {
            let _loop = InlineLoop::enter(&self.inline_loops);
            self.run(sc, self.cfg.inline_budget, true, now);
        }
    }
}
