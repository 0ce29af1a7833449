//! A packet's way through the [`Fabric`]: its CRC sealed (or trusted), its route, the link
//! timing and priorities, the per-flow FIFO order, the fault sites and the links' own retry;
//! what comes out is when (and what) the destination port receives ([`Deliveries`]).

use super::Packet;
use super::capture::Captured;
use super::faults;
use super::link::LinkRetry;
use super::network::Fabric;
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};

/// Up to two deliveries of one injected packet (none if dropped, two if duplicated), in the
/// order they must be scheduled.
#[derive(Debug, Default)]
pub struct Deliveries {
    items: [Option<(SimTime, Packet)>; 2],
}

impl Deliveries {
    fn push(&mut self, t: SimTime, p: Packet) {
        if self.items[0].is_none() {
            self.items[0] = Some((t, p));
        } else {
            self.items[1] = Some((t, p));
        }
    }
    /// Number of deliveries (0, 1 or 2).
    pub fn len(&self) -> usize {
        self.items.iter().filter(|i| i.is_some()).count()
    }
    /// True if the packet was dropped.
    pub fn is_empty(&self) -> bool {
        self.items[0].is_none()
    }
    /// The deliveries, by reference.
    pub fn iter(&self) -> impl Iterator<Item = &(SimTime, Packet)> {
        self.items.iter().flatten()
    }
}

impl IntoIterator for Deliveries {
    type Item = (SimTime, Packet);
    type IntoIter = std::iter::Flatten<std::array::IntoIter<Option<(SimTime, Packet)>, 2>>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter().flatten()
    }
}

impl Fabric {
    /// Send `pkt` at time `now`: seal its CRC (or mark it trusted, see
    /// [`Fabric::set_crc_elision`]), route it, apply link timing and the fault
    /// sites, and return when (and what) the destination port receives. `rng` is drawn from
    /// only by enabled fault sites. Without faults the deliveries of one
    /// `(src, dst, tc)` flow arrive in injection order (FIFO), provided `now` never goes
    /// backwards between calls.
    pub fn inject(&mut self, now: SimTime, pkt: Packet, rng: &mut SimRng) -> Deliveries {
        self.inject_with(now, pkt, rng, true)
    }

    /// [`Fabric::inject`] for an engine that delivers every packet at once (the threaded
    /// engine's [`FabricTiming::Immediate`](crate::engine::threaded::FabricTiming)): the
    /// same counters (fabric, traffic class and per-link packets and bytes), CRC, route,
    /// link-down check and fault sites, drawn in the same order, but no link timing: no
    /// queueing state is updated and no per-flow arrival is recorded. Every delivery is at
    /// `now` (plus the reorder delay when that site fires).
    pub fn inject_immediate(&mut self, now: SimTime, pkt: Packet, rng: &mut SimRng) -> Deliveries {
        self.inject_with(now, pkt, rng, false)
    }

    fn inject_with(
        &mut self,
        now: SimTime,
        mut pkt: Packet,
        rng: &mut SimRng,
        timed: bool,
    ) -> Deliveries {
        let mut out = Deliveries::default();
        let len = pkt.data.len();
        // A train counts as the frames it stands for (it exists only while no fault site is
        // set, so the sites below never draw for it).
        let (frames, bytes) = (pkt.frames(), pkt.wire_bytes());
        let tci = usize::from(pkt.tc.0);
        self.counters.injected += frames;
        self.counters.bytes_injected += bytes;
        self.tc[tci].injected += frames;
        self.tc[tci].bytes += bytes;
        pkt.crc = if self.crc_elision && self.faults.corrupt <= 0.0 {
            Packet::CRC_TRUSTED
        } else {
            crc32fast::hash(&pkt.data)
        };
        if let Some(sink) = &self.capture {
            sink.record(Captured {
                time: now,
                packet: &pkt,
            });
        }

        if self
            .graph
            .route_into(pkt.src, pkt.dst, &mut self.route)
            .is_err()
        {
            self.counters.dropped_bad_port += frames;
            return self.drop_packet(tci, frames, out);
        }
        if let Some(h) = self
            .route
            .iter()
            .find(|h| !self.links[h.link.0 as usize].up)
        {
            self.links[h.link.0 as usize].counters.dropped_down += frames;
            self.counters.dropped_link_down += frames;
            return self.drop_packet(tci, frames, out);
        }
        // Extra time the link layer spends on this packet (retransmissions, waiting for a
        // flapped link).
        let mut extra = SimDuration::ZERO;
        let down_until = self
            .route
            .iter()
            .map(|h| self.flap_until[h.link.0 as usize])
            .max()
            .unwrap_or(SimTime::ZERO);
        if down_until > now {
            match self.link_retry {
                Some(r) if down_until.0 - now.0 <= r.down_window.0 => {
                    extra = SimDuration(down_until.0 - now.0) + r.retry_delay;
                    self.counters.link_held_for_flap += 1;
                }
                _ => {
                    self.counters.dropped_link_down += frames;
                    return self.drop_packet(tci, frames, out);
                }
            }
        }
        if rng.chance(self.faults.drop) {
            match self
                .link_retry
                .map(|r| self.retransmit(rng, self.faults.drop, r))
            {
                Some(Some(d)) => {
                    extra = extra + d;
                    self.counters.link_recovered_drops += 1;
                }
                _ => {
                    self.counters.dropped_fault += 1;
                    return self.drop_packet(tci, frames, out);
                }
            }
        }
        if self.faults.flaps() && !self.route.is_empty() && rng.chance(self.faults.link_flap) {
            let hop = self.route[rng.below(self.route.len() as u64) as usize];
            self.flap_until[hop.link.0 as usize] = now + self.faults.link_flap_down;
            self.counters.link_flaps += 1;
            match self.link_retry {
                Some(r) if self.faults.link_flap_down <= r.down_window => {
                    extra = extra + self.faults.link_flap_down + r.retry_delay;
                    self.counters.link_held_for_flap += 1;
                }
                _ => {
                    self.links[hop.link.0 as usize].counters.dropped_down += frames;
                    self.counters.dropped_link_down += frames;
                    return self.drop_packet(tci, frames, out);
                }
            }
        }
        if self.faults.port_downs()
            && rng.chance(self.faults.port_down)
            && let Some(&hop) = self.route.last()
        {
            {
                let until = now + self.faults.port_down_time;
                let slot = &mut self.flap_until[hop.link.0 as usize];
                *slot = (*slot).max(until);
                self.counters.port_downs += 1;
                match self.link_retry {
                    Some(r) if self.faults.port_down_time <= r.down_window => {
                        extra = extra + self.faults.port_down_time + r.retry_delay;
                        self.counters.link_held_for_flap += 1;
                    }
                    _ => {
                        self.links[hop.link.0 as usize].counters.dropped_down += frames;
                        self.counters.dropped_link_down += frames;
                        return self.drop_packet(tci, frames, out);
                    }
                }
            }
        }

        let t = if timed {
            self.timing(now, &pkt, tci, len, extra)
        } else {
            for hop in &self.route {
                self.links[hop.link.0 as usize].count_frames(hop.dir.index(), frames, bytes);
            }
            now + extra
        };

        let dup = rng.chance(self.faults.duplicate);
        if dup {
            self.counters.duplicated += 1;
            let copy = pkt.clone();
            let t0 = self.faults_on_copy(t, &mut pkt, rng);
            out.push(t0, pkt);
            let mut copy = copy;
            let t1 = self.faults_on_copy(t, &mut copy, rng);
            out.push(t1, copy);
        } else {
            let t0 = self.faults_on_copy(t, &mut pkt, rng);
            out.push(t0, pkt);
        }
        let n = out.len() as u64 * frames;
        self.counters.delivered += n;
        self.tc[tci].delivered += n;
        out
    }

    /// Arrival time of a routed packet (in `self.route`): store-and-forward over every hop
    /// with priority queues per link direction, then FIFO per flow.
    fn timing(
        &mut self,
        now: SimTime,
        pkt: &Packet,
        tci: usize,
        len: usize,
        extra: SimDuration,
    ) -> SimTime {
        let prio = usize::from(self.priority[tci]);
        let ser = self.params.serialization(len);
        let mut t = now;
        let hops = self.route.len();
        for (i, hop) in self.route.iter().enumerate() {
            let link = &mut self.links[hop.link.0 as usize];
            t = link.schedule(hop.dir.index(), prio, t, ser, len) + self.params.latency;
            if i + 1 < hops {
                t = t + self.params.switch_latency;
            }
        }
        // Link-level retransmissions delay the packet; FIFO per flow: never arrive before
        // the previous packet of the same flow.
        t = t + extra;
        let last = self
            .flows
            .entry((pkt.src.0, pkt.dst.0, pkt.tc.0))
            .or_insert(SimTime::ZERO);
        t = t.max(*last);
        *last = t;
        t
    }

    fn drop_packet(&mut self, tci: usize, frames: u64, out: Deliveries) -> Deliveries {
        self.counters.dropped += frames;
        self.tc[tci].dropped += frames;
        out
    }

    /// The per-copy fault sites: reorder (extra delay), then corrupt (with link-level
    /// retry: retransmitted by the hop that damaged it, delivered intact and later, unless
    /// every retransmission was damaged too).
    fn faults_on_copy(&mut self, t: SimTime, pkt: &mut Packet, rng: &mut SimRng) -> SimTime {
        let mut t = t;
        let max = self.faults.reorder_max_delay.0;
        if max > 0 && rng.chance(self.faults.reorder) {
            t = t + SimDuration(1 + rng.below(max));
            self.counters.reordered += 1;
        }
        if rng.chance(self.faults.corrupt) {
            if let Some(d) = self
                .link_retry
                .and_then(|r| self.retransmit(rng, self.faults.corrupt, r))
            {
                self.counters.link_recovered_corruptions += 1;
                return t + d;
            }
            faults::corrupt(pkt, rng);
            self.counters.corrupted += 1;
        }
        t
    }

    /// A packet was lost or damaged on a hop of `self.route` (drawn uniformly); its link
    /// sends it again until a copy gets through (each retransmission hit by the same site
    /// with probability `p`), at most `r.max_retries` times. Returns the time that took, or
    /// `None` when every retransmission failed too. Counts the retransmissions.
    fn retransmit(&mut self, rng: &mut SimRng, p: f64, r: LinkRetry) -> Option<SimDuration> {
        let hop = match self.route.len() {
            0 => None,
            n => Some(self.route[rng.below(n as u64) as usize].link.0 as usize),
        };
        let mut tries = 0u32;
        let mut ok = false;
        while tries < r.max_retries {
            tries += 1;
            if !rng.chance(p) {
                ok = true;
                break;
            }
        }
        self.counters.link_retries += u64::from(tries);
        if let Some(l) = hop {
            self.links[l].counters.retries += u64::from(tries);
        }
        ok.then(|| SimDuration(r.retry_delay.0 * u64::from(tries)))
    }
}
