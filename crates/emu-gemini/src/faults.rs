//! State of the NIC fault sites that take time (`emu_core::nic_faults`): packets held by a
//! slow-target stall (`slow_target`) and SMSG credit returns held back (`smsg_starve`).
//! Both end on one timer token, [`TOKEN_FAULTS`]. The `cq_overrun` site has no state; it is
//! in target.rs, where remote events are raised.

use emu_core::engine::DeviceIo;
use emu_core::fabric::Packet;
use emu_core::stall::{FaultTimers, Stall};
use emu_core::time::SimTime;

use crate::packet::Header;

/// Timer token of the fault sites (distinct from the BTE's and the watchdog's).
pub(crate) const TOKEN_FAULTS: u64 = 3;

/// A credit return held back: (source PE, header, the 8-byte control word).
pub(crate) type HeldCredit = (u32, Header, Vec<u8>);

/// Held work of the timed fault sites.
#[derive(Clone, Debug, Default)]
pub(crate) struct FaultHold {
    /// Frames that arrive during a slow-target stall.
    packets: Stall<Packet>,
    /// Credit returns that arrive while credits are held.
    credits: Stall<HeldCredit>,
    /// Timers armed and not yet fired.
    timers: FaultTimers,
}

impl FaultHold {
    /// The frame to process now, or `None` if a stall holds it (`fires`: the site fired on
    /// it and begins a stall). Frames are processed in arrival order.
    pub(crate) fn hold_packet(
        &mut self,
        io: &mut DeviceIo<'_>,
        pkt: Packet,
        fires: bool,
    ) -> Option<Packet> {
        let length = io.faults().slow_target_time;
        self.timers
            .hold(io, &mut self.packets, pkt, fires, length, TOKEN_FAULTS)
    }

    /// Whether a credit return must wait (`fires`: the site fired on it and begins a hold);
    /// a held one is queued. Later credit returns queue behind held ones, so control words
    /// are applied in the order they arrived (an older word never overwrites a newer one).
    pub(crate) fn hold_credit(
        &mut self,
        io: &mut DeviceIo<'_>,
        credit: HeldCredit,
        fires: bool,
    ) -> bool {
        let length = io.faults().smsg_starve_time;
        self.timers
            .hold(io, &mut self.credits, credit, fires, length, TOKEN_FAULTS)
            .is_none()
    }

    /// Whether a credit return arriving at `now` would be held (`fires`: the site fired on
    /// it), before it is copied for [`FaultHold::hold_credit`].
    pub(crate) fn holds_credit(&self, now: SimTime, fires: bool) -> bool {
        self.credits.would_hold(now, fires)
    }

    /// The fault timer fired at `now`: the credit returns and the frames whose hold is
    /// over, in arrival order.
    pub(crate) fn release(&mut self, now: SimTime) -> (Vec<HeldCredit>, Vec<Packet>) {
        self.timers.fired(now);
        (self.credits.release(now), self.packets.release(now))
    }
}
