//! State of the NIC fault sites that take time (`emu_core::nic_faults`): packets held by a
//! slow-target stall (`slow_target`) and SMSG credit returns held back (`smsg_starve`).
//! Both end on one timer token, [`TOKEN_FAULTS`]. The `cq_overrun` site has no state; it is
//! in target.rs, where remote events are raised.

use std::collections::VecDeque;

use emu_core::engine::DeviceIo;
use emu_core::fabric::Packet;
use emu_core::time::SimTime;

use crate::packet::Header;

/// Timer token of the fault sites (distinct from the BTE's and the watchdog's).
pub(crate) const TOKEN_FAULTS: u64 = 3;

/// A credit return held back: (source PE, header, the 8-byte control word).
pub(crate) type HeldCredit = (u32, Header, Vec<u8>);

/// Held work of the timed fault sites.
#[derive(Clone, Debug, Default)]
pub(crate) struct FaultHold {
    /// A slow-target stall lasts until then.
    slow_until: SimTime,
    /// Frames that arrived during the stall, in arrival order.
    packets: VecDeque<Packet>,
    /// Credit returns are held until then.
    credit_until: SimTime,
    /// Credit returns held, in arrival order.
    credits: VecDeque<HeldCredit>,
    /// Due times of timers armed and not yet fired.
    armed: Vec<SimTime>,
}

impl FaultHold {
    fn arm(&mut self, io: &mut DeviceIo<'_>, at: SimTime) {
        if self.armed.contains(&at) {
            return;
        }
        self.armed.push(at);
        io.timer(at.since(io.now()), TOKEN_FAULTS);
    }

    /// The frame to process now, or `None` if a stall holds it (`fires`: the site fired on
    /// it and begins a stall). Frames are processed in arrival order.
    pub(crate) fn hold_packet(
        &mut self,
        io: &mut DeviceIo<'_>,
        pkt: Packet,
        fires: bool,
    ) -> Option<Packet> {
        let now = io.now();
        if fires && now >= self.slow_until {
            self.slow_until = now + io.faults().slow_target_time;
            let at = self.slow_until;
            self.arm(io, at);
        }
        if now < self.slow_until || !self.packets.is_empty() {
            self.packets.push_back(pkt);
            return None;
        }
        Some(pkt)
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
        let now = io.now();
        if fires && now >= self.credit_until {
            self.credit_until = now + io.faults().smsg_starve_time;
            let at = self.credit_until;
            self.arm(io, at);
        }
        if now < self.credit_until || !self.credits.is_empty() {
            self.credits.push_back(credit);
            return true;
        }
        false
    }

    /// The fault timer fired at `now`: the credit returns and the frames whose hold is
    /// over, in arrival order.
    pub(crate) fn release(&mut self, now: SimTime) -> (Vec<HeldCredit>, Vec<Packet>) {
        self.armed.retain(|&t| t > now);
        let credits = if now >= self.credit_until {
            self.credits.drain(..).collect()
        } else {
            Vec::new()
        };
        let packets = if now >= self.slow_until {
            self.packets.drain(..).collect()
        } else {
            Vec::new()
        };
        (credits, packets)
    }
}
