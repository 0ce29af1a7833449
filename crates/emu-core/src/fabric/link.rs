//! Link timing: latency, bandwidth, header overhead, switch latency, and the per-direction,
//! per-priority "busy until" state that models serialisation and queueing.
//!
//! The model is store-and-forward: a packet starts crossing a link when it has fully arrived
//! at the link's source node (plus the switch latency if that node is a switch) and the link
//! direction is free for its priority; it occupies the link for its serialisation time
//! `(len + header_overhead) / bandwidth` and reaches the far end `latency` later. See
//! docs/emu-core-engines.md for the whole timing and priority model.

use crate::time::{SimDuration, SimTime};

/// Number of priority levels per link direction (0 is the highest).
pub const NUM_PRIORITIES: usize = 8;

/// Timing parameters shared by every link of a fabric.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LinkParams {
    /// Propagation delay of one link (one hop), independent of the packet size.
    pub latency: SimDuration,
    /// Bandwidth of each link direction in bytes per second; 0 means infinite (no
    /// serialisation delay).
    pub bandwidth: u64,
    /// Bytes added to every packet on the wire (link and fabric headers, CRC, framing).
    pub header_overhead: u32,
    /// Time a packet spends crossing a switch or router, between two links.
    pub switch_latency: SimDuration,
}

impl Default for LinkParams {
    /// Illustrative, not calibrated: 100 ns per link, 25 GB/s (a 200 Gb/s Slingshot-class
    /// port), 20 bytes of header (`c_port_fab_hdr` is 20 B per cassini_user_defs.h), 100 ns
    /// per switch.
    fn default() -> Self {
        LinkParams {
            latency: SimDuration::from_ns(100),
            bandwidth: 25_000_000_000,
            header_overhead: 20,
            switch_latency: SimDuration::from_ns(100),
        }
    }
}

impl LinkParams {
    /// Parameters with no delay at all (every packet arrives at the time it was sent).
    pub const fn instant() -> Self {
        LinkParams {
            latency: SimDuration::ZERO,
            bandwidth: 0,
            header_overhead: 0,
            switch_latency: SimDuration::ZERO,
        }
    }

    /// Time to put `bytes` of payload (plus the header overhead) on one link direction,
    /// rounded up to the next picosecond.
    pub fn serialization(&self, bytes: usize) -> SimDuration {
        if self.bandwidth == 0 {
            return SimDuration::ZERO;
        }
        let total = bytes as u128 + u128::from(self.header_overhead);
        // 64-bit arithmetic whenever it cannot overflow (packets below 18 MB, one division
        // instruction instead of a 128-bit division); the same result in 128 bits otherwise.
        if let Ok(t) = u64::try_from(total)
            && let Some(scaled) = t.checked_mul(1_000_000_000_000)
        {
            return SimDuration(scaled.div_ceil(self.bandwidth));
        }
        let ps = (total * 1_000_000_000_000).div_ceil(u128::from(self.bandwidth));
        SimDuration(u64::try_from(ps).unwrap_or(u64::MAX))
    }

    /// Arrival time of one `bytes`-byte packet sent at `t` over an idle route of `hops` links
    /// (store-and-forward: every hop pays serialisation and latency, every intermediate
    /// switch pays the switch latency).
    pub fn unloaded_arrival(&self, t: SimTime, bytes: usize, hops: usize) -> SimTime {
        if hops == 0 {
            return t;
        }
        let per_hop = self.serialization(bytes).0.saturating_add(self.latency.0);
        let h = hops as u64;
        let total = per_hop
            .saturating_mul(h)
            .saturating_add(self.switch_latency.0.saturating_mul(h - 1));
        t + SimDuration(total)
    }
}

/// Counters of one link.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Packets that crossed the link, per direction (index [`super::Dir::index`]).
    pub packets: [u64; 2],
    /// Payload bytes (without header overhead) that crossed the link, per direction.
    pub bytes: [u64; 2],
    /// Packets dropped because this link was down when they were injected.
    pub dropped_down: u64,
    /// Link-level retransmissions on this link ([`LinkRetry`]): a packet lost or damaged on
    /// the link and sent again by the link layer.
    pub retries: u64,
}

/// Link-level reliability: the sending end of every link keeps each packet until the
/// receiving end has checked its CRC, and sends it again when it was lost or damaged on the
/// wire, so such faults cost time instead of reaching the endpoints. This is how Gemini's
/// links work (per-hop CRC checked in the link control block, LCB, with link-level retry;
/// the brief of nicemu issue 15 and Cray's descriptions of the Gemini network; no register
/// or timing figure of it is public). Off by default ([`super::Fabric::set_link_retry`]); the
/// Cassini model recovers end to end instead (its PCT layer).
///
/// Bounds (this model's choice): a hop retries a lost or damaged packet at most
/// `max_retries` times, each costing `retry_delay`; a packet routed over a link that is
/// down after a flap waits for it when the link is back within `down_window`, and is lost
/// otherwise (what reaches software is then the initiator's request timeout).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LinkRetry {
    /// Retransmissions of one packet on one hop before the link gives it up.
    pub max_retries: u32,
    /// What one retransmission costs: the receiver's retry request back over the link and
    /// the packet sent again.
    pub retry_delay: crate::time::SimDuration,
    /// How long the link layer keeps replaying a packet across a link that is down.
    pub down_window: crate::time::SimDuration,
}

/// Runtime state of one link.
#[derive(Clone, Debug)]
pub(crate) struct LinkState {
    pub(crate) up: bool,
    /// `busy[dir][prio]`: when the last packet of priority `prio` scheduled on this direction
    /// finishes serialising.
    pub(crate) busy: [[SimTime; NUM_PRIORITIES]; 2],
    pub(crate) counters: LinkCounters,
}

impl Default for LinkState {
    fn default() -> Self {
        LinkState {
            up: true,
            busy: [[SimTime::ZERO; NUM_PRIORITIES]; 2],
            counters: LinkCounters::default(),
        }
    }
}

impl LinkState {
    /// Schedule a packet of priority `prio` that is ready to cross direction `dir` at
    /// `ready` and takes `ser` to serialise: it waits for every packet of the same or higher
    /// priority already scheduled on this direction, never for lower-priority ones. Lower
    /// priority queues that still hold traffic at its start pay for the bandwidth it takes:
    /// their busy-until moves back by `ser` (packets already scheduled keep their times;
    /// later ones start after the shift). Returns the time it has fully left the sender.
    pub(crate) fn schedule(
        &mut self,
        dir: usize,
        prio: usize,
        ready: SimTime,
        ser: SimDuration,
        bytes: usize,
    ) -> SimTime {
        let busy = &mut self.busy[dir];
        let mut start = ready;
        for b in &busy[..=prio] {
            start = start.max(*b);
        }
        let end = start + ser;
        busy[prio] = end;
        for b in &mut busy[prio + 1..] {
            if *b > start {
                *b = *b + ser;
            }
        }
        self.count(dir, bytes);
        end
    }

    /// Count a packet crossing direction `dir` without timing it.
    pub(crate) fn count(&mut self, dir: usize, bytes: usize) {
        self.count_frames(dir, 1, bytes as u64);
    }

    /// Count `packets` packets of `bytes` bytes in all crossing direction `dir` (a train
    /// of frames) without timing them.
    pub(crate) fn count_frames(&mut self, dir: usize, packets: u64, bytes: u64) {
        self.counters.packets[dir] += packets;
        self.counters.bytes[dir] += bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_is_exact_and_rounds_up() {
        let p = LinkParams {
            latency: SimDuration::from_ns(10),
            bandwidth: 1_000_000_000, // 1 byte per ns
            header_overhead: 16,
            switch_latency: SimDuration::ZERO,
        };
        assert_eq!(p.serialization(84), SimDuration::from_ns(100));
        let q = LinkParams {
            bandwidth: 3_000_000_000_000, // 3 bytes per ps
            header_overhead: 0,
            ..p
        };
        assert_eq!(q.serialization(4), SimDuration(2)); // 1.33 ps rounds up
        assert_eq!(
            LinkParams::instant().serialization(1 << 20),
            SimDuration::ZERO
        );
    }

    #[test]
    fn serialization_fast_path_matches_128_bit_arithmetic() {
        let slow = |p: &LinkParams, bytes: usize| {
            let total = bytes as u128 + u128::from(p.header_overhead);
            let ps = (total * 1_000_000_000_000).div_ceil(u128::from(p.bandwidth));
            SimDuration(u64::try_from(ps).unwrap_or(u64::MAX))
        };
        for bw in [1u64, 3, 999_999_937, 25_000_000_000, u64::MAX] {
            for oh in [0u32, 20, u32::MAX] {
                let p = LinkParams {
                    bandwidth: bw,
                    header_overhead: oh,
                    ..LinkParams::default()
                };
                for bytes in [0usize, 1, 2048, 18_446_743, 18_446_745, 1 << 40, usize::MAX] {
                    assert_eq!(p.serialization(bytes), slow(&p, bytes), "{bw} {oh} {bytes}");
                }
            }
        }
    }

    #[test]
    fn priority_does_not_wait_for_lower() {
        let mut l = LinkState::default();
        let ser = SimDuration(100);
        let e1 = l.schedule(0, 3, SimTime(0), ser, 1);
        let e2 = l.schedule(0, 3, SimTime(0), ser, 1);
        assert_eq!((e1, e2), (SimTime(100), SimTime(200)));
        // high priority starts at once, and the busy priority-3 queue pays for its time
        assert_eq!(l.schedule(0, 0, SimTime(0), ser, 1), SimTime(100));
        assert_eq!(l.busy[0][3], SimTime(300));
        // low priority waits for all of it
        assert_eq!(l.schedule(0, 5, SimTime(0), ser, 1), SimTime(400));
        // an idle lower queue is not shifted
        assert_eq!(l.schedule(0, 6, SimTime(1000), ser, 1), SimTime(1100));
        assert_eq!(l.schedule(0, 1, SimTime(2000), ser, 1), SimTime(2100));
        assert_eq!(l.busy[0][6], SimTime(1100));
        // the other direction is independent
        assert_eq!(l.schedule(1, 3, SimTime(0), ser, 1), SimTime(100));
        assert_eq!(l.counters.packets, [6, 1]);
    }
}
