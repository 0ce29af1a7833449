//! Seeded fault sites of the fabric.
//!
//! Every site draws from the engine's [`SimRng`] only when its probability is above zero, so
//! switching a site off leaves the random stream (and thus the rest of the run) unchanged.
//! Per injected packet the draws happen in this order: drop; link flap (and the link); switch
//! port down; duplicate;
//! then for each copy delivered: reorder (and its delay), corrupt (and the bit).
//!
//! A link flap takes one link of the packet's route down for a window of virtual time
//! ([`FaultConfig::link_flap_down`]) starting at the packet's injection: that packet and every
//! packet routed over the link before the window ends are lost (counted as
//! `dropped_link_down`); then the link is up again by itself.
//!
//! On a fabric with link-level retry ([`super::LinkRetry`], Gemini) the drop and corruption
//! sites hit one hop, whose link sends the packet again: each retransmission draws the site
//! again, and the hop is drawn after the first hit. A flap within the retry window holds the
//! packet instead of losing it.

use super::Packet;
use crate::rng::SimRng;
use crate::time::SimDuration;

/// Probabilities (0..=1) of each fault, per injected packet (drop, duplicate) or per
/// delivered copy (reorder, corrupt).
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// The packet is lost (before it uses any link).
    pub drop: f64,
    /// The packet is delivered twice; the copy arrives at the same time, after the original.
    pub duplicate: f64,
    /// The copy is held back by an extra delay drawn uniformly from `1..=reorder_max_delay`
    /// picoseconds, which lets later packets of the same flow overtake it.
    pub reorder: f64,
    /// Upper bound of the reorder delay (a zero bound disables reordering).
    pub reorder_max_delay: SimDuration,
    /// One random bit of the copy is flipped after its CRC was computed, so the receiver's
    /// [`Packet::crc_ok`] is false. A packet without data gets a bit of its CRC flipped.
    pub corrupt: f64,
    /// Per injected packet (that was not dropped), one link of its route, drawn uniformly,
    /// goes down for [`FaultConfig::link_flap_down`]; the packet is lost with it.
    pub link_flap: f64,
    /// How long a flapped link stays down (a zero window disables link flaps).
    pub link_flap_down: SimDuration,
    /// Per injected packet (that was not dropped or flapped away), the switch port that
    /// faces its destination (the last link of its route) goes down for
    /// [`FaultConfig::port_down_time`]: the packet and every packet routed through that port
    /// before the window ends are lost (or, with link-level retry, held if the window is
    /// short enough); then the port is up again.
    pub port_down: f64,
    /// How long a downed switch port stays down (a zero window disables the site).
    pub port_down_time: SimDuration,
}

impl FaultConfig {
    /// No faults at all.
    pub const fn none() -> Self {
        FaultConfig {
            drop: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_max_delay: SimDuration::ZERO,
            corrupt: 0.0,
            link_flap: 0.0,
            link_flap_down: SimDuration::ZERO,
            port_down: 0.0,
            port_down_time: SimDuration::ZERO,
        }
    }
    /// Whether the switch-port-down site can fire.
    pub fn port_downs(&self) -> bool {
        self.port_down > 0.0 && self.port_down_time.0 > 0
    }
    /// Whether the link-flap site can fire.
    pub fn flaps(&self) -> bool {
        self.link_flap > 0.0 && self.link_flap_down.0 > 0
    }
    /// Whether any site can fire.
    pub fn any(&self) -> bool {
        self.drop > 0.0
            || self.duplicate > 0.0
            || (self.reorder > 0.0 && self.reorder_max_delay.0 > 0)
            || self.corrupt > 0.0
            || self.flaps()
            || self.port_downs()
    }
}

/// Flip one random bit of the packet (in `data`, or in `crc` when `data` is empty). The CRC
/// is not recomputed, so the damage is detectable. A CRC that happens to equal
/// [`Packet::CRC_TRUSTED`] is replaced by one that matches neither the data nor that value,
/// so the damage stays detectable.
pub(crate) fn corrupt(pkt: &mut Packet, rng: &mut SimRng) {
    if pkt.data.is_empty() {
        pkt.crc ^= 1 << rng.below(32);
    } else {
        let bit = rng.below(pkt.data.len() as u64 * 8);
        let byte = (bit / 8) as usize;
        if let Some(b) = pkt.data.get_mut(byte) {
            *b ^= 1 << (bit % 8);
        }
    }
    if pkt.crc == Packet::CRC_TRUSTED {
        let h = crc32fast::hash(&pkt.data);
        let other = !Packet::CRC_TRUSTED;
        pkt.crc = if h != other {
            other
        } else {
            Packet::CRC_TRUSTED ^ 1
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{PortId, TrafficClass};

    #[test]
    fn corruption_of_a_packet_whose_crc_looks_trusted_is_detected() {
        // A real CRC may equal the trusted marker; the damage must still show.
        let mut rng = SimRng::new(11);
        for len in [0usize, 1, 8, 100] {
            for _ in 0..50 {
                let mut p = Packet::new(PortId(0), PortId(1), TrafficClass(0), vec![0x3C; len]);
                p.crc = Packet::CRC_TRUSTED;
                corrupt(&mut p, &mut rng);
                assert_ne!(p.crc, Packet::CRC_TRUSTED, "len {len}");
                assert!(!p.crc_ok(), "len {len}");
            }
        }
    }

    #[test]
    fn corruption_is_always_detected() {
        let mut rng = SimRng::new(7);
        for len in [0usize, 1, 2, 63, 1000] {
            for _ in 0..50 {
                let mut p = Packet::new(PortId(0), PortId(1), TrafficClass(0), vec![0xA5; len]);
                corrupt(&mut p, &mut rng);
                assert!(!p.crc_ok(), "len {len}");
            }
        }
    }

    #[test]
    fn none_is_off() {
        assert!(!FaultConfig::none().any());
        assert!(
            !FaultConfig {
                reorder: 1.0,
                ..FaultConfig::none()
            }
            .any()
        );
        assert!(
            FaultConfig {
                drop: 0.1,
                ..FaultConfig::none()
            }
            .any()
        );
        // A flap needs both a probability and a window.
        let flap = FaultConfig {
            link_flap: 0.5,
            ..FaultConfig::none()
        };
        assert!(!flap.any());
        assert!(
            FaultConfig {
                link_flap_down: SimDuration::from_us(1),
                ..flap
            }
            .any()
        );
    }
}
