//! State of the NIC fault sites that take time (`emu_core::nic_faults`): counting-event
//! write-backs held back (`ct_delay`) and packets held by a slow-target stall
//! (`slow_target`). Both end on one timer token, [`TOKEN_FAULTS`].
//!
//! The sites without state live where the hardware meets the condition: `eq_full` and
//! `le_exhaust` in tgt.rs (the LPE's exhaustion path), `atu_miss` in ixe.rs (the local
//! buffer check).

use std::collections::BTreeMap;

use emu_core::engine::DeviceIo;
use emu_core::fabric::Packet;
use emu_core::stall::{FaultTimers, Stall};
use emu_core::time::SimTime;

use crate::ct::Writeback;

/// Timer token of the fault sites (distinct from the PCT's and the IXE's).
pub(crate) const TOKEN_FAULTS: u64 = 0x4641_554C_5400_0001;

/// Held work of the timed fault sites.
#[derive(Clone, Debug, Default)]
pub(crate) struct FaultState {
    /// Per CT, the newest write-back not yet written and when it is due. A later write-back
    /// of a CT that has one held replaces the image and keeps the due time, so host memory
    /// never goes back to an older count.
    delayed_wb: BTreeMap<u16, (SimTime, Writeback)>,
    /// Packets that arrive during a slow-target stall.
    slow: Stall<Packet>,
    /// Timers armed and not yet fired.
    timers: FaultTimers,
}

impl FaultState {
    /// Whether a write-back of `wb.ct` must wait: the site fires, or one is already held.
    /// A held write-back is stored (replacing an older image of the same CT).
    pub(crate) fn hold_writeback(
        &mut self,
        io: &mut DeviceIo<'_>,
        wb: Writeback,
        fires: bool,
    ) -> bool {
        if let Some((_, w)) = self.delayed_wb.get_mut(&wb.ct) {
            *w = wb;
            return true;
        }
        if !fires {
            return false;
        }
        let due = io.now() + io.faults().ct_delay_time;
        self.delayed_wb.insert(wb.ct, (due, wb));
        self.timers.arm(io, due, TOKEN_FAULTS);
        true
    }

    /// Whether an arriving packet must wait for a stall to end (`fires`: the site fired on
    /// it, beginning a stall). A held packet is queued.
    pub(crate) fn hold_packet(
        &mut self,
        io: &mut DeviceIo<'_>,
        pkt: Packet,
        fires: bool,
    ) -> Option<Packet> {
        let length = io.faults().slow_target_time;
        self.timers
            .hold(io, &mut self.slow, pkt, fires, length, TOKEN_FAULTS)
    }

    /// The fault timer fired at `now`: the write-backs due and, if the stall is over, the
    /// held packets, in order.
    pub(crate) fn release(&mut self, now: SimTime) -> (Vec<Writeback>, Vec<Packet>) {
        self.timers.fired(now);
        let due: Vec<u16> = self
            .delayed_wb
            .iter()
            .filter(|(_, (t, _))| *t <= now)
            .map(|(&ct, _)| ct)
            .collect();
        let wbs = due
            .into_iter()
            .filter_map(|ct| self.delayed_wb.remove(&ct).map(|(_, w)| w))
            .collect();
        (wbs, self.slow.release(now))
    }
}
