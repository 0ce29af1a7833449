//! The [`Fabric`]: a built topology plus link timing, traffic-class priorities, per-flow FIFO
//! order, fault sites and counters. Engines call [`Fabric::inject`] for every packet a device
//! sends and schedule the deliveries it returns.

use super::capture::{CaptureSink, Captured};
use super::faults::{self, FaultConfig};
use super::link::{LinkCounters, LinkParams, LinkRetry, LinkState, NUM_PRIORITIES};
use super::topology::{Graph, Hop, LinkId, RouteError, Topology, TopologyError};
use super::{Packet, TrafficClass};
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};
use std::sync::Arc;
use thiserror::Error;

/// Why a fabric operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FabricError {
    /// The topology description is invalid.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A route could not be computed.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// A link outside `0..links`.
    #[error("link {0} does not exist")]
    NoSuchLink(u32),
    /// A priority outside `0..NUM_PRIORITIES`.
    #[error("priority {0} is out of range (0..{NUM_PRIORITIES})")]
    BadPriority(u8),
}

/// Everything needed to build a [`Fabric`].
#[derive(Clone, Debug, PartialEq)]
pub struct FabricConfig {
    /// The network shape.
    pub topology: Topology,
    /// Timing of every link.
    pub link: LinkParams,
    /// Fault probabilities.
    pub faults: FaultConfig,
}

impl FabricConfig {
    /// A fault-free configuration with the default link timing.
    pub fn new(topology: Topology) -> Self {
        FabricConfig {
            topology,
            link: LinkParams::default(),
            faults: FaultConfig::none(),
        }
    }
}

/// Fabric-wide counters.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FabricCounters {
    /// Packets handed to [`Fabric::inject`].
    pub injected: u64,
    /// Deliveries returned by [`Fabric::inject`] (duplicates count twice).
    pub delivered: u64,
    /// Packets not delivered at all (sum of the three reasons below).
    pub dropped: u64,
    /// Dropped by the drop fault site.
    pub dropped_fault: u64,
    /// Dropped because a link on their route was down (taken down by
    /// [`Fabric::set_link_up`], or by a link flap, including the packet that flapped it).
    pub dropped_link_down: u64,
    /// Link flaps: a link of a packet's route went down for a window of time.
    pub link_flaps: u64,
    /// Switch ports taken down: the last link of a packet's route went down for a window
    /// of time ([`FaultConfig::port_down`]).
    pub port_downs: u64,
    /// Dropped because the source or destination port does not exist.
    pub dropped_bad_port: u64,
    /// Packets delivered twice.
    pub duplicated: u64,
    /// Deliveries whose data was corrupted (their CRC check fails).
    pub corrupted: u64,
    /// Deliveries held back by the reorder fault site.
    pub reordered: u64,
    /// Payload bytes injected.
    pub bytes_injected: u64,
    /// Link-level retransmissions ([`Fabric::set_link_retry`]), over all links.
    pub link_retries: u64,
    /// Packets lost on a hop (drop site) that the link layer sent again and delivered.
    pub link_recovered_drops: u64,
    /// Packets damaged on a hop (corruption site) that the link layer sent again and
    /// delivered intact.
    pub link_recovered_corruptions: u64,
    /// Packets held by the link layer until a flapped link of their route was up again
    /// (the packet that flapped it included), then delivered.
    pub link_held_for_flap: u64,
}

/// Counters of one traffic class.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TcCounters {
    /// Packets injected with this class.
    pub injected: u64,
    /// Deliveries of this class (duplicates count twice).
    pub delivered: u64,
    /// Packets of this class that were dropped.
    pub dropped: u64,
    /// Payload bytes injected with this class.
    pub bytes: u64,
}

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

type FlowMap = crate::hash::IntMap<(u32, u32, u8), SimTime>;

/// The network: topology, link timing, priorities, faults and counters.
#[derive(Clone, Debug)]
pub struct Fabric {
    graph: Graph,
    params: LinkParams,
    faults: FaultConfig,
    links: Vec<LinkState>,
    priority: [u8; 256],
    /// Last arrival time per (src, dst, tc) flow, for the FIFO guarantee.
    flows: FlowMap,
    counters: FabricCounters,
    tc: Box<[TcCounters; 256]>,
    route: Vec<Hop>,
    crc_elision: bool,
    /// Per link: until when it is down after a link flap (up from that time on).
    flap_until: Vec<SimTime>,
    /// The capture hook, if one is installed ([`Fabric::set_capture`]).
    capture: Option<Arc<dyn CaptureSink>>,
    /// Link-level retry, if the links have it ([`Fabric::set_link_retry`]).
    link_retry: Option<LinkRetry>,
}

impl Fabric {
    /// Build a fabric.
    pub fn new(config: FabricConfig) -> Result<Self, FabricError> {
        let graph = config.topology.build()?;
        let graph_links = graph.links().len();
        let mut priority = [0u8; 256];
        for (tc, p) in priority.iter_mut().enumerate() {
            *p = tc.min(NUM_PRIORITIES - 1) as u8;
        }
        Ok(Fabric {
            links: vec![LinkState::default(); graph.links().len()],
            graph,
            params: config.link,
            faults: config.faults,
            priority,
            flows: FlowMap::default(),
            counters: FabricCounters::default(),
            tc: Box::new([TcCounters::default(); 256]),
            route: Vec::new(),
            crc_elision: false,
            flap_until: vec![SimTime::ZERO; graph_links],
            capture: None,
            link_retry: None,
        })
    }

    /// Number of ports (`0..ports` are valid destinations).
    pub fn ports(&self) -> u32 {
        self.graph.ports()
    }
    /// The built topology (links, routes).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    /// The link timing.
    pub fn params(&self) -> &LinkParams {
        &self.params
    }
    /// Change the link timing (affects packets injected from now on).
    pub fn set_params(&mut self, params: LinkParams) {
        self.params = params;
    }
    /// The fault probabilities.
    pub fn faults(&self) -> &FaultConfig {
        &self.faults
    }
    /// Change the fault probabilities (affects packets injected from now on).
    pub fn set_faults(&mut self, faults: FaultConfig) {
        self.faults = faults;
    }
    /// CRC elision: when on, and while no corruption fault is configured, [`Fabric::inject`]
    /// marks packets [`Packet::CRC_TRUSTED`] instead of computing their CRC32 (nothing can
    /// damage them before they are delivered, and the receiver's [`Packet::crc_ok`] then
    /// costs nothing either). With a corruption probability above zero every packet gets
    /// its real CRC, so every corrupted packet is still detected. Off by default (the
    /// deterministic engine folds real CRCs into its trace digest); the threaded engine
    /// turns it on.
    pub fn set_crc_elision(&mut self, on: bool) {
        self.crc_elision = on;
    }
    /// Install (or, with `None`, remove) a capture hook: from now on it sees every packet
    /// handed to [`Fabric::inject`] / [`Fabric::inject_immediate`], as injected (before
    /// routing and the fault sites, dropped ones too), with the virtual time of the
    /// injection. Off by default; when off it costs one test per packet.
    pub fn set_capture(&mut self, sink: Option<Arc<dyn CaptureSink>>) {
        self.capture = sink;
    }
    /// Give every link link-level retry ([`LinkRetry`]), or none (the default). With it, the
    /// drop and corruption fault sites hit a hop of the packet's route, whose link layer
    /// sends the packet again (each retransmission draws the site again, up to
    /// `max_retries`); a packet routed over a link that is down after a flap waits until it
    /// is up when that is within `down_window`. Only what exceeds those bounds is lost or
    /// delivered damaged. Retransmissions delay the packet, and, as a link replays in order,
    /// every later packet of its flow.
    pub fn set_link_retry(&mut self, retry: Option<LinkRetry>) {
        self.link_retry = retry;
    }
    /// The link-level retry of the links, if any.
    pub fn link_retry(&self) -> Option<LinkRetry> {
        self.link_retry
    }
    /// Whether a capture hook is installed.
    pub fn capturing(&self) -> bool {
        self.capture.is_some()
    }
    /// Whether CRC elision is on ([`Fabric::set_crc_elision`]).
    pub fn crc_elision(&self) -> bool {
        self.crc_elision
    }
    /// The priority of a traffic class (0 is the highest). By default class `n` has priority
    /// `min(n, NUM_PRIORITIES - 1)`, so Cassini's DEDICATED_ACCESS (0) and LOW_LATENCY (1)
    /// classes are served before BULK_DATA (2) and BEST_EFFORT (3) (cxi_traffic_class in
    /// libcxi's cxi-abi).
    pub fn priority(&self, tc: TrafficClass) -> u8 {
        self.priority[usize::from(tc.0)]
    }
    /// Map a traffic class to a priority.
    pub fn set_priority(&mut self, tc: TrafficClass, priority: u8) -> Result<(), FabricError> {
        if usize::from(priority) >= NUM_PRIORITIES {
            return Err(FabricError::BadPriority(priority));
        }
        self.priority[usize::from(tc.0)] = priority;
        Ok(())
    }
    /// Take a link down (every packet routed over it is dropped until it is up again) or
    /// bring it back up. Packets already in flight are not affected.
    pub fn set_link_up(&mut self, link: LinkId, up: bool) -> Result<(), FabricError> {
        let l = self
            .links
            .get_mut(link.0 as usize)
            .ok_or(FabricError::NoSuchLink(link.0))?;
        l.up = up;
        Ok(())
    }
    /// Whether a link is up (false for a link that does not exist). A link down after a link
    /// flap is still up here (see [`Fabric::link_flapped_until`]).
    pub fn link_is_up(&self, link: LinkId) -> bool {
        self.links.get(link.0 as usize).is_some_and(|l| l.up)
    }
    /// Until when a link is down after a link flap (`None` if it never flapped or does not
    /// exist). It carries traffic again from that time on.
    pub fn link_flapped_until(&self, link: LinkId) -> Option<SimTime> {
        self.flap_until
            .get(link.0 as usize)
            .copied()
            .filter(|&t| t > SimTime::ZERO)
    }
    /// Fabric-wide counters.
    pub fn counters(&self) -> FabricCounters {
        self.counters
    }
    /// Counters of one link.
    pub fn link_counters(&self, link: LinkId) -> Option<LinkCounters> {
        self.links.get(link.0 as usize).map(|l| l.counters)
    }
    /// Counters of one traffic class.
    pub fn tc_counters(&self, tc: TrafficClass) -> TcCounters {
        self.tc[usize::from(tc.0)]
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::PortId;

    fn pkt(s: u32, d: u32, tc: u8, len: usize) -> Packet {
        Packet::new(PortId(s), PortId(d), TrafficClass(tc), vec![7; len])
    }

    /// A train counts as the frames it stands for, on the fabric, its traffic class and
    /// every link of its route, as those frames injected one by one would.
    #[test]
    fn a_train_counts_as_its_frames() {
        use crate::dma::{DmaPort, Segment};
        use crate::fabric::Train;
        use crate::memory::HostMemory;
        let cfg = || FabricConfig::new(Topology::SingleSwitch { ports: 2 });
        let (mut one, mut each) = (Fabric::new(cfg()).unwrap(), Fabric::new(cfg()).unwrap());
        let mut rng = SimRng::new(1);
        let mut p = pkt(0, 1, 3, 100);
        p.train = Some(std::sync::Arc::new(Train {
            frames: 4,
            bytes: 4 * 60,
            source: DmaPort::passthrough(HostMemory::new(1 << 16).unwrap()),
            segments: vec![Segment { addr: 0, len: 200 }],
        }));
        let d: Vec<_> = one
            .inject_immediate(SimTime::ZERO, p, &mut rng)
            .into_iter()
            .collect();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].1.frames(), 5);
        each.inject_immediate(SimTime::ZERO, pkt(0, 1, 3, 100), &mut rng);
        for _ in 0..4 {
            each.inject_immediate(SimTime::ZERO, pkt(0, 1, 3, 60), &mut rng);
        }
        assert_eq!(one.counters(), each.counters());
        assert_eq!(one.counters().injected, 5);
        assert_eq!(one.counters().bytes_injected, 340);
        assert_eq!(
            one.tc_counters(TrafficClass(3)),
            each.tc_counters(TrafficClass(3))
        );
        for l in 0..one.graph().links().len() as u32 {
            assert_eq!(one.link_counters(LinkId(l)), each.link_counters(LinkId(l)));
        }
    }

    #[test]
    fn inject_seals_the_crc() {
        let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
        let mut p = pkt(0, 1, 0, 10);
        p.crc = 0;
        let d: Vec<_> = f
            .inject(SimTime::ZERO, p, &mut SimRng::new(1))
            .into_iter()
            .collect();
        assert_eq!(d.len(), 1);
        assert!(d[0].1.crc_ok());
    }

    #[test]
    fn crc_elision_trusts_only_while_nothing_can_corrupt() {
        let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
        assert!(!f.crc_elision());
        f.set_crc_elision(true);
        let mut rng = SimRng::new(3);
        let d: Vec<_> = f
            .inject(SimTime::ZERO, pkt(0, 1, 0, 100), &mut rng)
            .into_iter()
            .collect();
        assert_eq!(d[0].1.crc, Packet::CRC_TRUSTED);
        assert!(d[0].1.crc_ok());
        // A device that rewrites a trusted packet and reseals it keeps it trusted.
        let mut p = d[0].1.clone();
        p.data.truncate(10);
        p.seal();
        assert_eq!(p.crc, Packet::CRC_TRUSTED);
        // With a corruption site on, packets carry real CRCs and every damaged one fails.
        f.set_faults(FaultConfig {
            corrupt: 0.5,
            ..FaultConfig::none()
        });
        let mut bad = 0;
        for i in 0..200 {
            for (_, p) in f.inject(SimTime::ZERO, pkt(0, 1, 0, i % 50), &mut rng) {
                assert_ne!(p.crc, Packet::CRC_TRUSTED);
                bad += u64::from(!p.crc_ok());
            }
        }
        assert!(bad > 0);
        assert_eq!(bad, f.counters().corrupted);
        // Off again: real CRCs even without faults.
        f.set_faults(FaultConfig::none());
        f.set_crc_elision(false);
        let p = pkt(0, 1, 0, 30);
        let want = p.crc;
        let d: Vec<_> = f.inject(SimTime::ZERO, p, &mut rng).into_iter().collect();
        assert_eq!(d[0].1.crc, want);
    }

    #[test]
    fn immediate_injection_counts_like_timed_injection_without_timing() {
        let faults = FaultConfig {
            drop: 0.2,
            duplicate: 0.2,
            corrupt: 0.2,
            ..FaultConfig::none()
        };
        let cfg = FabricConfig {
            faults,
            ..FabricConfig::new(Topology::SingleSwitch { ports: 3 })
        };
        let mut timed = Fabric::new(cfg.clone()).unwrap();
        let mut now_ = Fabric::new(cfg).unwrap();
        let (mut r1, mut r2) = (SimRng::new(8), SimRng::new(8));
        let t0 = SimTime::from_us(5);
        for i in 0..300u32 {
            let p = pkt(i % 3, (i + 1) % 3, (i % 4) as u8, (i as usize * 13) % 700);
            let a: Vec<_> = timed.inject(t0, p.clone(), &mut r1).into_iter().collect();
            let b: Vec<_> = now_.inject_immediate(t0, p, &mut r2).into_iter().collect();
            assert_eq!(a.len(), b.len());
            for ((_, pa), (tb, pb)) in a.iter().zip(&b) {
                assert_eq!(pa, pb);
                assert_eq!(*tb, t0);
            }
        }
        // Same draws, same counters everywhere.
        assert_eq!(r1.next_u64(), r2.next_u64());
        assert_eq!(timed.counters(), now_.counters());
        for tc in 0..4 {
            assert_eq!(
                timed.tc_counters(TrafficClass(tc)),
                now_.tc_counters(TrafficClass(tc))
            );
        }
        for l in 0..timed.graph().links().len() as u32 {
            assert_eq!(
                timed.link_counters(LinkId(l)),
                now_.link_counters(LinkId(l))
            );
        }
        // No queueing state was built: a timed packet now sees idle links.
        now_.set_faults(FaultConfig::none());
        let d: Vec<_> = now_
            .inject(t0, pkt(0, 1, 0, 100), &mut r2)
            .into_iter()
            .collect();
        assert_eq!(d[0].0, now_.params().unloaded_arrival(t0, 100, 2));
    }

    #[test]
    fn capture_sees_every_injected_packet_with_its_real_crc() {
        use crate::fabric::CaptureBuffer;
        let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
        f.set_crc_elision(true);
        let mut rng = SimRng::new(2);
        f.inject(SimTime::ZERO, pkt(0, 1, 0, 10), &mut rng);
        assert!(!f.capturing());
        let buf = CaptureBuffer::new();
        f.set_capture(Some(buf.clone()));
        assert!(f.capturing());
        f.inject(SimTime::from_us(1), pkt(0, 1, 2, 30), &mut rng);
        // Dropped (no such port) but still captured: it was injected.
        f.inject(SimTime::from_us(2), pkt(1, 9, 3, 5), &mut rng);
        let got = buf.take();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, SimTime::from_us(1));
        assert_eq!(got[0].1.tc, TrafficClass(2));
        assert_eq!(got[0].1.crc, crc32fast::hash(&[7u8; 30]));
        assert_eq!((got[1].1.src, got[1].1.dst), (PortId(1), PortId(9)));
        f.set_capture(None);
        f.inject(SimTime::from_us(3), pkt(0, 1, 0, 10), &mut rng);
        assert!(buf.is_empty());
        assert_eq!(f.counters().injected, 4);
    }

    #[test]
    fn bad_port_is_dropped_and_counted() {
        let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
        let d = f.inject(SimTime::ZERO, pkt(0, 9, 3, 10), &mut SimRng::new(1));
        assert!(d.is_empty());
        let c = f.counters();
        assert_eq!((c.dropped, c.dropped_bad_port, c.delivered), (1, 1, 0));
        assert_eq!(f.tc_counters(TrafficClass(3)).dropped, 1);
    }

    #[test]
    fn fault_sites_off_draw_nothing() {
        let mut f = Fabric::new(FabricConfig::new(Topology::SingleSwitch { ports: 2 })).unwrap();
        let mut rng = SimRng::new(5);
        for _ in 0..10 {
            f.inject(SimTime::ZERO, pkt(0, 1, 0, 10), &mut rng);
        }
        assert_eq!(rng.next_u64(), SimRng::new(5).next_u64());
    }

    #[test]
    fn a_link_flap_takes_one_route_link_down_for_its_window_then_it_is_up_again() {
        let down = SimDuration::from_us(10);
        let cfg = FabricConfig {
            faults: FaultConfig {
                link_flap: 1.0,
                link_flap_down: down,
                ..FaultConfig::none()
            },
            ..FabricConfig::new(Topology::SingleSwitch { ports: 3 })
        };
        let mut f = Fabric::new(cfg).unwrap();
        let mut rng = SimRng::new(21);
        let t0 = SimTime::from_us(1);
        // The packet that flaps a link is lost with it.
        assert!(f.inject(t0, pkt(0, 1, 0, 10), &mut rng).is_empty());
        let c = f.counters();
        assert_eq!((c.link_flaps, c.dropped_link_down, c.dropped), (1, 1, 1));
        let flapped: Vec<u32> = (0..f.graph().links().len() as u32)
            .filter(|&l| f.link_flapped_until(LinkId(l)).is_some())
            .collect();
        assert_eq!(flapped.len(), 1, "exactly one link flapped");
        let l = LinkId(flapped[0]);
        assert_eq!(f.link_flapped_until(l), Some(t0 + down));
        assert!(f.link_is_up(l), "a flap is not an administrative down");
        // Within the window, traffic over that link is lost without any draw.
        f.set_faults(FaultConfig::none());
        let before = rng.clone().next_u64();
        let mut lost = 0;
        for (s, d) in [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)] {
            lost += u64::from(
                f.inject(t0 + SimDuration::from_us(5), pkt(s, d, 0, 8), &mut rng)
                    .is_empty(),
            );
        }
        assert_eq!(rng.next_u64(), before);
        // The flapped link is on the route of 4 of the 6 pairs of a 3-port switch.
        assert_eq!(lost, 4);
        assert_eq!(f.counters().dropped_link_down, 5);
        // After the window the link carries traffic again.
        for (s, d) in [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)] {
            assert_eq!(f.inject(t0 + down, pkt(s, d, 0, 8), &mut rng).len(), 1);
        }
        assert_eq!(f.counters().link_flaps, 1);
    }

    #[test]
    fn a_switch_port_down_loses_traffic_to_that_destination_for_its_window() {
        let down = SimDuration::from_us(50);
        let cfg = FabricConfig {
            faults: FaultConfig {
                port_down: 1.0,
                port_down_time: down,
                ..FaultConfig::none()
            },
            ..FabricConfig::new(Topology::SingleSwitch { ports: 3 })
        };
        let mut f = Fabric::new(cfg).unwrap();
        let mut rng = SimRng::new(3);
        let t0 = SimTime::from_us(1);
        // The packet whose destination port went down is lost with it.
        assert!(f.inject(t0, pkt(0, 1, 0, 10), &mut rng).is_empty());
        let c = f.counters();
        assert_eq!((c.port_downs, c.link_flaps, c.dropped_link_down), (1, 0, 1));
        f.set_faults(FaultConfig::none());
        let mid = t0 + SimDuration::from_us(20);
        // The port's link is down both ways: traffic to and from port 1 is lost; traffic
        // between the other ports flows.
        assert!(f.inject(mid, pkt(2, 1, 0, 8), &mut rng).is_empty());
        assert!(f.inject(mid, pkt(1, 2, 0, 8), &mut rng).is_empty());
        assert_eq!(f.inject(mid, pkt(0, 2, 0, 8), &mut rng).len(), 1);
        // After the window the port is up again.
        assert_eq!(f.inject(t0 + down, pkt(2, 1, 0, 8), &mut rng).len(), 1);
        assert_eq!(f.counters().dropped_link_down, 3);
    }

    #[test]
    fn a_switch_port_down_shorter_than_the_link_window_only_delays_with_link_retry() {
        let cfg = FabricConfig {
            faults: FaultConfig {
                port_down: 1.0,
                port_down_time: SimDuration::from_us(10),
                ..FaultConfig::none()
            },
            ..FabricConfig::new(Topology::SingleSwitch { ports: 2 })
        };
        let mut f = Fabric::new(cfg).unwrap();
        f.set_link_retry(Some(LinkRetry {
            max_retries: 8,
            retry_delay: SimDuration::from_ns(300),
            down_window: SimDuration::from_us(50),
        }));
        let d = f.inject(SimTime::ZERO, pkt(0, 1, 0, 10), &mut SimRng::new(1));
        assert_eq!(d.len(), 1, "held by the link, then delivered");
        let c = f.counters();
        assert_eq!((c.port_downs, c.link_held_for_flap, c.dropped), (1, 1, 0));
    }

    #[test]
    fn link_flaps_are_seeded_and_off_by_default() {
        let run = |seed: u64| {
            let cfg = FabricConfig {
                faults: FaultConfig {
                    link_flap: 0.05,
                    link_flap_down: SimDuration::from_us(2),
                    ..FaultConfig::none()
                },
                ..FabricConfig::new(Topology::SingleSwitch { ports: 4 })
            };
            let mut f = Fabric::new(cfg).unwrap();
            let mut rng = SimRng::new(seed);
            let mut got = Vec::new();
            for i in 0..2000u64 {
                let t = SimTime(i * 100_000);
                let d = f.inject(
                    t,
                    pkt((i % 4) as u32, ((i + 1) % 4) as u32, 0, 16),
                    &mut rng,
                );
                got.push(d.len());
            }
            (got, f.counters())
        };
        let (a, ca) = run(3);
        let (b, cb) = run(3);
        assert_eq!(a, b);
        assert_eq!(ca, cb);
        assert!(ca.link_flaps > 0);
        assert!(
            ca.dropped_link_down > ca.link_flaps,
            "windows also drop later packets"
        );
        assert_eq!(ca.dropped, ca.dropped_link_down);
        let (c, _) = run(4);
        assert_ne!(a, c, "another seed flaps other links at other times");
        // A probability without a window flaps nothing (and draws nothing).
        let mut f = Fabric::new(FabricConfig {
            faults: FaultConfig {
                link_flap: 1.0,
                ..FaultConfig::none()
            },
            ..FabricConfig::new(Topology::SingleSwitch { ports: 2 })
        })
        .unwrap();
        let mut rng = SimRng::new(5);
        assert_eq!(f.inject(SimTime::ZERO, pkt(0, 1, 0, 8), &mut rng).len(), 1);
        assert_eq!(rng.next_u64(), SimRng::new(5).next_u64());
        assert_eq!(f.counters().link_flaps, 0);
    }

    fn retry() -> LinkRetry {
        LinkRetry {
            max_retries: 8,
            retry_delay: SimDuration::from_ns(300),
            down_window: SimDuration::from_us(50),
        }
    }

    #[test]
    fn link_level_retry_turns_drops_and_corruption_into_delay() {
        let faults = FaultConfig {
            drop: 0.3,
            corrupt: 0.3,
            ..FaultConfig::none()
        };
        let topo = Topology::Torus3D {
            dims: [2, 1, 1],
            nics_per_router: 2,
        };
        let mut f = Fabric::new(FabricConfig {
            faults,
            ..FabricConfig::new(topo.clone())
        })
        .unwrap();
        f.set_link_retry(Some(retry()));
        let mut clean = Fabric::new(FabricConfig::new(topo)).unwrap();
        let mut rng = SimRng::new(9);
        let mut late = 0;
        for i in 0..400u64 {
            let t = SimTime::from_us(i * 10);
            let p = pkt((i % 4) as u32, ((i + 1) % 4) as u32, 0, 64);
            let d: Vec<_> = f.inject(t, p.clone(), &mut rng).into_iter().collect();
            let want: Vec<_> = clean.inject(t, p, &mut rng).into_iter().collect();
            assert_eq!(d.len(), 1, "packet {i} delivered exactly once");
            assert!(d[0].1.crc_ok(), "packet {i} intact");
            assert_eq!(d[0].1.data, want[0].1.data);
            assert!(d[0].0 >= want[0].0);
            late += u64::from(d[0].0 > want[0].0);
        }
        let c = f.counters();
        assert_eq!((c.dropped, c.corrupted, c.delivered), (0, 0, 400));
        assert!(c.link_recovered_drops > 50 && c.link_recovered_corruptions > 50);
        assert!(c.link_retries >= c.link_recovered_drops + c.link_recovered_corruptions);
        assert!(late >= c.link_recovered_drops, "a retried packet is late");
        let per_link: u64 = (0..f.graph().links().len() as u32)
            .map(|l| f.link_counters(LinkId(l)).unwrap().retries)
            .sum();
        assert_eq!(per_link, c.link_retries);
    }

    #[test]
    fn link_level_retry_gives_up_after_its_bound() {
        let mut f = Fabric::new(FabricConfig {
            faults: FaultConfig {
                drop: 1.0,
                ..FaultConfig::none()
            },
            ..FabricConfig::new(Topology::SingleSwitch { ports: 2 })
        })
        .unwrap();
        f.set_link_retry(Some(retry()));
        let mut rng = SimRng::new(1);
        assert!(
            f.inject(SimTime::ZERO, pkt(0, 1, 0, 8), &mut rng)
                .is_empty()
        );
        let c = f.counters();
        assert_eq!((c.dropped_fault, c.link_retries), (1, 8));
        assert_eq!(c.link_recovered_drops, 0);
        // Without link-level retry the same site loses the packet without retrying.
        f.set_link_retry(None);
        assert!(
            f.inject(SimTime::ZERO, pkt(0, 1, 0, 8), &mut rng)
                .is_empty()
        );
        assert_eq!(f.counters().link_retries, 8);
    }

    #[test]
    fn link_level_retry_rides_out_a_flap_shorter_than_its_window() {
        for (down, survives) in [(20u64, true), (200, false)] {
            let down = SimDuration::from_us(down);
            let mut f = Fabric::new(FabricConfig {
                faults: FaultConfig {
                    link_flap: 1.0,
                    link_flap_down: down,
                    ..FaultConfig::none()
                },
                ..FabricConfig::new(Topology::SingleSwitch { ports: 2 })
            })
            .unwrap();
            f.set_link_retry(Some(retry()));
            let mut rng = SimRng::new(4);
            let t0 = SimTime::from_us(1);
            let d: Vec<_> = f
                .inject(t0, pkt(0, 1, 0, 8), &mut rng)
                .into_iter()
                .collect();
            assert_eq!(d.len(), usize::from(survives), "flap of {down:?}");
            if survives {
                assert!(d[0].0 >= t0 + down, "held until the link was back");
            }
            // A packet sent while the link is down waits for it too, or is lost.
            f.set_faults(FaultConfig::none());
            let d: Vec<_> = f
                .inject(t0 + SimDuration::from_us(5), pkt(1, 0, 0, 8), &mut rng)
                .into_iter()
                .collect();
            assert_eq!(d.len(), usize::from(survives));
            let c = f.counters();
            assert_eq!(c.link_flaps, 1);
            if survives {
                assert!(d[0].0 >= t0 + down);
                assert_eq!((c.link_held_for_flap, c.dropped), (2, 0));
            } else {
                assert_eq!((c.link_held_for_flap, c.dropped_link_down), (0, 2));
            }
        }
    }

    #[test]
    fn priorities_are_validated() {
        let mut f = Fabric::new(FabricConfig::new(Topology::PointToPoint)).unwrap();
        assert_eq!(f.priority(TrafficClass(200)), (NUM_PRIORITIES - 1) as u8);
        assert_eq!(
            f.set_priority(TrafficClass(1), NUM_PRIORITIES as u8),
            Err(FabricError::BadPriority(NUM_PRIORITIES as u8))
        );
        f.set_priority(TrafficClass(9), 0).unwrap();
        assert_eq!(f.priority(TrafficClass(9)), 0);
        assert_eq!(
            f.set_link_up(LinkId(1), false),
            Err(FabricError::NoSuchLink(1))
        );
    }
}
