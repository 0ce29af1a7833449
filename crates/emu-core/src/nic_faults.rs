//! Seeded fault sites inside the NIC models (the fabric's are in [`crate::fabric::FaultConfig`]).
//!
//! An engine holds one [`NicFaults`] profile ([`crate::engine::Engine::set_nic_faults`]) and
//! lends it to every handler through [`crate::engine::DeviceIo::faults`]. A model asks
//! [`crate::engine::DeviceIo::fault`] at the place where the real hardware would meet the
//! condition; the draw comes from the device's seeded random stream and happens only when the
//! site's probability is above zero, so a run with every site off draws exactly what it drew
//! before the sites existed, and a seed replays bit for bit.
//!
//! Each site models what the hardware does in that situation (the models name their sources):
//!
//! | site | NIC | what it models |
//! |---|---|---|
//! | [`NicFaults::eq_full`] | Cassini | a PtlTE's event queue has no room for a target event |
//! | [`NicFaults::ct_delay`] | Cassini | a counting event's write-back to host memory is late |
//! | [`NicFaults::atu_miss`] | Cassini | the ATU finds no translation for a command's local buffer |
//! | [`NicFaults::le_exhaust`] | Cassini | no list entry is left for an unexpected header |
//! | [`NicFaults::slow_target`] | both | the target NIC stops processing arriving packets for a while |
//! | [`NicFaults::cq_overrun`] | Gemini | a remote event finds its completion queue full |
//! | [`NicFaults::smsg_starve`] | Gemini | SMSG credit returns reach the sender late |

use crate::time::SimDuration;

/// Probabilities (0..=1) and durations of the NIC fault sites. All off by default.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct NicFaults {
    /// Per target event check (an arriving request whose PtlTE has an EQ): the EQ reads as
    /// full.
    pub eq_full: f64,
    /// Per counting-event write-back: it is written [`NicFaults::ct_delay_time`] later.
    pub ct_delay: f64,
    /// How late a delayed counting-event write-back is.
    pub ct_delay_time: SimDuration,
    /// Per command that reads or writes a local buffer: its translation misses.
    pub atu_miss: f64,
    /// Per unexpected header to keep: no list entry can be allocated for it.
    pub le_exhaust: f64,
    /// Per arriving packet: the target NIC stalls for [`NicFaults::slow_target_time`];
    /// that packet and every packet arriving during the stall are processed, in order, when
    /// it ends.
    pub slow_target: f64,
    /// How long a slow-target stall lasts.
    pub slow_target_time: SimDuration,
    /// Per remote event: its completion queue reads as full, so the event is lost and the
    /// queue's overrun flag is set.
    pub cq_overrun: f64,
    /// Per SMSG credit return arriving at a sender's mailbox: credit returns to this NIC
    /// are held for [`NicFaults::smsg_starve_time`] (then applied in order).
    pub smsg_starve: f64,
    /// How long credit returns are held.
    pub smsg_starve_time: SimDuration,
}

impl NicFaults {
    /// Every site off.
    pub const fn none() -> Self {
        NicFaults {
            eq_full: 0.0,
            ct_delay: 0.0,
            ct_delay_time: SimDuration::ZERO,
            atu_miss: 0.0,
            le_exhaust: 0.0,
            slow_target: 0.0,
            slow_target_time: SimDuration::ZERO,
            cq_overrun: 0.0,
            smsg_starve: 0.0,
            smsg_starve_time: SimDuration::ZERO,
        }
    }

    /// Whether any site can fire.
    pub fn any(&self) -> bool {
        self.eq_full > 0.0
            || (self.ct_delay > 0.0 && self.ct_delay_time.0 > 0)
            || self.atu_miss > 0.0
            || self.le_exhaust > 0.0
            || (self.slow_target > 0.0 && self.slow_target_time.0 > 0)
            || self.cq_overrun > 0.0
            || (self.smsg_starve > 0.0 && self.smsg_starve_time.0 > 0)
    }
}

/// One NIC fault site.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NicSite {
    /// [`NicFaults::eq_full`].
    EqFull,
    /// [`NicFaults::ct_delay`].
    CtDelay,
    /// [`NicFaults::atu_miss`].
    AtuMiss,
    /// [`NicFaults::le_exhaust`].
    LeExhaust,
    /// [`NicFaults::slow_target`].
    SlowTarget,
    /// [`NicFaults::cq_overrun`].
    CqOverrun,
    /// [`NicFaults::smsg_starve`].
    SmsgStarve,
}

impl NicFaults {
    /// The probability of `site` (zero when a timed site has no window).
    pub fn probability(&self, site: NicSite) -> f64 {
        let timed = |p: f64, d: SimDuration| if d.0 > 0 { p } else { 0.0 };
        match site {
            NicSite::EqFull => self.eq_full,
            NicSite::CtDelay => timed(self.ct_delay, self.ct_delay_time),
            NicSite::AtuMiss => self.atu_miss,
            NicSite::LeExhaust => self.le_exhaust,
            NicSite::SlowTarget => timed(self.slow_target, self.slow_target_time),
            NicSite::CqOverrun => self.cq_overrun,
            NicSite::SmsgStarve => timed(self.smsg_starve, self.smsg_starve_time),
        }
    }
}

/// How often each NIC fault site fired (kept by the engine, over all its devices).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct NicFaultCounters {
    /// [`NicSite::EqFull`].
    pub eq_full: u64,
    /// [`NicSite::CtDelay`].
    pub ct_delay: u64,
    /// [`NicSite::AtuMiss`].
    pub atu_miss: u64,
    /// [`NicSite::LeExhaust`].
    pub le_exhaust: u64,
    /// [`NicSite::SlowTarget`] (stalls begun).
    pub slow_target: u64,
    /// [`NicSite::CqOverrun`].
    pub cq_overrun: u64,
    /// [`NicSite::SmsgStarve`] (holds begun).
    pub smsg_starve: u64,
}

impl NicFaultCounters {
    /// Count one firing of `site`.
    pub fn bump(&mut self, site: NicSite) {
        let c = match site {
            NicSite::EqFull => &mut self.eq_full,
            NicSite::CtDelay => &mut self.ct_delay,
            NicSite::AtuMiss => &mut self.atu_miss,
            NicSite::LeExhaust => &mut self.le_exhaust,
            NicSite::SlowTarget => &mut self.slow_target,
            NicSite::CqOverrun => &mut self.cq_overrun,
            NicSite::SmsgStarve => &mut self.smsg_starve,
        };
        *c += 1;
    }
    /// Field-wise sum.
    pub fn add(&mut self, o: &NicFaultCounters) {
        self.eq_full += o.eq_full;
        self.ct_delay += o.ct_delay;
        self.atu_miss += o.atu_miss;
        self.le_exhaust += o.le_exhaust;
        self.slow_target += o.slow_target;
        self.cq_overrun += o.cq_overrun;
        self.smsg_starve += o.smsg_starve;
    }
    /// Total firings.
    pub fn total(&self) -> u64 {
        self.eq_full
            + self.ct_delay
            + self.atu_miss
            + self.le_exhaust
            + self.slow_target
            + self.cq_overrun
            + self.smsg_starve
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_any_needs_a_window_for_timed_sites() {
        assert!(!NicFaults::default().any());
        assert_eq!(NicFaults::default(), NicFaults::none());
        let f = NicFaults {
            slow_target: 0.5,
            ..NicFaults::none()
        };
        assert!(!f.any(), "a stall of zero length cannot fire");
        let f = NicFaults {
            slow_target_time: SimDuration::from_us(1),
            ..f
        };
        assert!(f.any());
        assert_eq!(f.probability(NicSite::SlowTarget), 0.5);
        assert_eq!(f.probability(NicSite::CtDelay), 0.0);
        assert!(
            NicFaults {
                atu_miss: 0.1,
                ..NicFaults::none()
            }
            .any()
        );
    }
}
